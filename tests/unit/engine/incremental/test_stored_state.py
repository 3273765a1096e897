"""cep_core.incremental.stored_state: a bucket's partial matches stored by the caller
between batches (hot record + per-group spill records, as the gold job keeps them in
Delta) give exactly
the matches of one run over all the data, whatever the capacity, policy and batch cuts."""

from __future__ import annotations

import pickle
from typing import Any

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cep_core import compile_query
from cep_core.incremental.store import ROW_ID
from cep_core.incremental.stored_state import Advanced, advance

SEQ = compile_query("""SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY k, lane ORDER BY ts
    MEASURES A.id AS a_id, C.id AS c_id ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW
    PATTERN (A B C) WITHIN 8 DEFINE A AS v = 'A', B AS v = 'B', C AS v = 'C')""")


class Caller:
    """What the gold job does with Delta, with dicts: one hot record per bucket and one
    spill record per group."""

    def __init__(self, buckets: int, capacity: int, policy: str) -> None:
        self.buckets, self.capacity, self.policy = buckets, capacity, policy
        self.hot: dict[int, bytes | None] = {}
        self.spilled: dict[Any, bytes] = {}
        self.last: dict[Any, Any] = {}
        self.results: list[Advanced] = []
        self.distinct = 0  # (call, partition key) pairs fed

    def bucket(self, group: str) -> int:
        return int(group[1:]) % self.buckets

    def feed(self, batch: pd.DataFrame, replay: frozenset[str] = frozenset()) -> set[tuple]:
        found = set()
        for b, rows in batch.groupby(batch["k"].map(self.bucket)):
            groups = set(rows["k"])
            out = advance(SEQ, rows.reset_index(drop=True), key="k", hot=self.hot.get(b),
                          spilled={g: self.spilled[g] for g in groups if g in self.spilled},
                          replay=groups & replay, capacity=self.capacity, policy=self.policy)
            self.results.append(out)
            self.distinct += rows.groupby(["k", "lane"]).ngroups
            assert out.late_rows == 0
            self.hot[b] = out.hot
            for g, record in out.groups.items():
                if record is None:
                    self.spilled.pop(g, None)
                else:
                    self.spilled[g] = record
            self.last.update(out.last_time)
            ids = out.rows.set_index(ROW_ID)["id"] if out.rows is not None else {}
            found |= {tuple(ids[r] for r in m.rows) for m in out.matches}
        return found


def _truth(frame: pd.DataFrame) -> set[tuple]:
    return {tuple(frame["id"].iloc[list(m.rows)]) for m in SEQ.find_matches(frame)}


def _data(runs: list[tuple[int, int, int]]) -> pd.DataFrame:
    rows = [(k, lane, letter) for k, lane, j in runs for letter in ("ABC"[:j] or "X")]
    return pd.DataFrame({"ts": range(len(rows)), "k": [f"k{k}" for k, _, _ in rows],
                         "lane": [lane for _, lane, _ in rows],
                         "v": [v for _, _, v in rows], "id": [f"e{i}" for i in range(len(rows))]})


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(runs=st.lists(st.tuples(st.integers(0, 5), st.integers(0, 1), st.integers(0, 3)),
                     max_size=30),
       cuts=st.lists(st.integers(0, 90), max_size=8), buckets=st.integers(1, 3),
       capacity=st.integers(1, 3), policy=st.sampled_from(["tpm", "stpm"]))
def test_stored_state_in_any_batches_equals_one_run(runs, cuts, buckets, capacity, policy):
    df = _data(runs)
    edges = [0, *sorted({c % (len(df) + 1) for c in cuts}), len(df)]
    caller = Caller(buckets, capacity, policy)
    found: set[tuple] = set()
    for lo, hi in zip(edges[:-1], edges[1:], strict=True):
        if hi > lo:
            found |= caller.feed(df.iloc[lo:hi])
    assert found == _truth(df)
    # the bound holds between batches; a group is hot or spilled, never both
    for hot in caller.hot.values():
        if hot is not None:
            partitions = pickle.loads(hot)["partitions"]
            assert len(partitions) <= capacity
            assert not {k for k, _ in partitions} & set(caller.spilled)
    # every (batch, key) was a hit, a miss or new; spilling happened when keys outnumbered
    stats = [r.stats for r in caller.results]
    assert sum(s.hits + s.misses + s.new_keys for s in stats) == caller.distinct
    keys = df.groupby(["k", "lane"]).ngroups
    if keys > capacity * buckets:
        assert sum(s.spilled for s in stats) > 0


def test_counts_hits_misses_and_new_keys():
    df = _data([(0, 0, 1), (1, 0, 1), (2, 0, 1), (0, 0, 2), (1, 0, 3)])
    caller = Caller(buckets=1, capacity=1, policy="tpm")
    found = set().union(*(caller.feed(df.iloc[n:n + 1]) for n in range(len(df))))
    stats = [r.stats for r in caller.results]
    # one row per batch: k0 A | k1 A | k2 A | k0 A, B | k1 A, B, C; one key fits in memory,
    # so k0 and k1 each come back from their spill record once (TPM: oldest out first)
    assert [sum(getattr(s, n) for s in stats) for n in ("new_keys", "misses", "hits")] == [
        3, 2, 3]
    assert sum(s.spilled for s in stats) == 4
    assert set(caller.spilled) == {"k0", "k2"} and caller.last == {"k0": 4, "k1": 7, "k2": 2}
    assert found == _truth(df) == {("e5", "e6", "e7")}


def test_replay_finds_a_groups_matches_again_from_its_whole_history():
    df = _data([(0, 0, 3), (1, 0, 3), (0, 0, 2)])
    caller = Caller(buckets=1, capacity=1, policy="stpm")
    first = caller.feed(df)
    assert first == _truth(df)
    # a late 'C' for k0 right after its second A B: the caller replays k0 with its history
    late = pd.DataFrame({"ts": [df["ts"].max() + 0.5], "k": ["k0"], "lane": [0], "v": ["C"],
                         "id": ["late"]})
    history = pd.concat([df[df["k"] == "k0"], late]).sort_values("ts")
    again = caller.feed(history.iloc[::-1], replay=frozenset({"k0"}))
    assert again == _truth(history)
    assert len(again) == 2 and all(m[0].startswith("e") for m in again)


def test_key_must_be_a_partition_column():
    with pytest.raises(ValueError, match="PARTITION BY the group column 'lane2'"):
        advance(SEQ, _data([(0, 0, 1)]), key="lane2", hot=None, spilled={}, capacity=1)


SIMPLE = compile_query("""SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts
    MEASURES A.id AS a_id ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW
    PATTERN (A B C) DEFINE A AS v = 'A', B AS v = 'B', C AS v = 'C')""")


def _rows(rows: list[tuple]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["ts", "k", "v", "id"])


def _ids(out: Advanced) -> set[tuple]:
    ids = out.rows.set_index(ROW_ID)["id"] if out.rows is not None else {}
    return {tuple(ids[r] for r in m.rows) for m in out.matches}


def test_a_lower_capacity_after_restart_still_replays_a_key_whole():
    history = [(1, "k0", "A", "a0"), (3, "k0", "B", "b0"), (5, "k1", "A", "x0")]
    first = advance(SIMPLE, _rows(history), key="k", hot=None, spilled={},
                    replay={"k0", "k1"}, capacity=4)
    # restarted with capacity 1; a late A of k0 arrives: k0 is fed its whole history again,
    # none of its old state may survive (it was not spilled while the hot row was restored)
    replayed = _rows([*history[:2], (2, "k0", "A", "late"), (4, "k0", "C", "c0")])
    again = advance(SIMPLE, replayed, key="k", hot=first.hot, spilled={}, replay={"k0"},
                    capacity=1)
    ordered = replayed.sort_values("ts").reset_index(drop=True)
    truth = {tuple(ordered["id"].iloc[list(m.rows)]) for m in SIMPLE.find_matches(ordered)}
    assert _ids(again) == truth == {("late", "b0", "c0")}
    assert again.late_rows == 0 and again.keys_in_memory == 1


def test_stpm_keeps_the_group_just_touched_in_memory():
    query = SEQ.text.replace("WITHIN 8", "")
    q = compile_query(query)
    spilled: dict[str, bytes] = {}
    hot = None
    misses = []
    for rows, replay in (
            ([(1, "k0", 0, "A"), (2, "k0", 1, "A")], {"k0"}),
            ([(3, "k1", 0, "A"), (4, "k2", 0, "A")], {"k1", "k2"}),  # k0 is the oldest: out
            ([(10, "k0", 0, "B")], set()),  # k0 back, now the newest: k1 (t = 3) goes out
            ([(11, "k0", 0, "C")], set())):  # k0 is hot: no miss
        frame = pd.DataFrame(rows, columns=["ts", "k", "lane", "v"]).assign(
            id=lambda f: "e" + f["ts"].astype(str))
        out = advance(q, frame, key="k", hot=hot, policy="stpm", capacity=3, replay=replay,
                      spilled={g: spilled[g] for g in set(frame["k"]) if g in spilled})
        hot = out.hot
        for g, record in out.groups.items():
            spilled.pop(g, None) if record is None else spilled.update({g: record})
        misses.append(out.stats.misses)
    assert misses == [0, 0, 1, 0]
    assert set(spilled) == {"k1"}


GREEDY = compile_query("""SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY k, lane ORDER BY ts
    MEASURES MATCH_NUMBER() AS n, COUNT(B.id) AS bs ONE ROW PER MATCH
    PATTERN (A B+) DEFINE A AS v = 'A', B AS v = 'B' AND PREV(v) <> 'C')""")
GREEDY_WITHIN = compile_query(GREEDY.text.replace("PATTERN (A B+)", "PATTERN (A B+) WITHIN 6"))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(letters=st.lists(st.tuples(st.integers(0, 2), st.integers(0, 1),
                                  st.sampled_from("ABBC")), max_size=40),
       cuts=st.lists(st.integers(1, 40), min_size=1, max_size=6),
       replays=st.lists(st.integers(-1, 2), min_size=7, max_size=7),  # -1: no replay
       capacity=st.integers(1, 3), policy=st.sampled_from(["tpm", "stpm"]),
       expire=st.booleans())
def test_bulk_replays_keep_the_answer_of_one_run(letters, cuts, replays, capacity, policy,  # noqa: PLR0913
                                                 expire):
    """Groups replayed from their whole history (the bulk path: one unbounded feed whose
    state joins the bounded store) in any batches, mixed with in-order groups, through a
    store of 1-3 keys: after every batch the final matches so far, with each group's last
    provisional ones, are exactly one run's matches over the rows so far (rows,
    MATCH_NUMBER, measures), and the next batches go on from the replayed state. With
    ``expire`` (WITHIN 6; batches arrive in time order, so no later row can share a window
    with a dropped group's rows) the same matches, except MATCH_NUMBER, which restarts for
    a group whose state expired (as the gold job's expiry does)."""
    query = GREEDY_WITHIN if expire else GREEDY
    df = pd.DataFrame({"ts": range(len(letters)), "k": [f"k{k}" for k, _, _ in letters],
                       "lane": [lane for _, lane, _ in letters],
                       "v": [v for _, _, v in letters],
                       "id": [f"e{i}" for i in range(len(letters))]})
    edges = [0, *sorted({c % (len(df) + 1) for c in cuts}), len(df)]
    hot, spilled = None, {}
    final: dict[str, set[tuple]] = {}
    pending: dict[str, set[tuple]] = {}
    for n, (lo, hi) in enumerate(zip(edges[:-1], edges[1:], strict=True)):
        new = df.iloc[lo:hi]
        replay = {f"k{replays[n]}"} & set(df["k"].iloc[:hi])
        batch = pd.concat([new[~new["k"].isin(replay)],
                           df.iloc[:hi][df["k"].iloc[:hi].isin(replay)]]).iloc[::-1]
        if not len(batch):
            continue
        groups = set(batch["k"])
        out = advance(query, batch.reset_index(drop=True), key="k", hot=hot,
                      spilled={g: spilled[g] for g in groups if g in spilled},
                      replay=replay, capacity=capacity, policy=policy, provisional=True,
                      expire=expire)
        assert out.late_rows == 0 and out.keys_in_memory <= capacity
        hot = out.hot
        for g, record in out.groups.items():
            spilled.pop(g, None) if record is None else spilled.update({g: record})
        for g in replay:
            final[g] = set()
        for g in groups:
            pending[g] = set()
        if out.rows is not None:
            assert out.rows[ROW_ID].is_unique
        for matches, rows, into in ((out.matches, out.rows, final),
                                    (out.provisional, out.provisional_rows, pending)):
            ids = rows.set_index(ROW_ID)["id"] if rows is not None else {}
            for m in matches:
                into.setdefault(m.partition[0], set()).add(
                    (tuple(ids[r] for r in m.rows), not expire and m.measures["n"],
                     m.measures["bs"]))
        so_far = df.iloc[:hi]
        truth = {(tuple(so_far["id"].iloc[list(m.rows)]), not expire and m.measures["n"],
                  m.measures["bs"]) for m in query.find_matches(so_far)}
        assert set().union(*final.values(), *pending.values()) == truth


def test_expired_groups_are_dropped_not_spilled():
    """With ``expire``, groups whose newest row is more than WITHIN older than the batch's
    newest are dropped when the bounded store evicts them (the gold job's MERGE deletes
    their key rows anyway); a group still inside the window is spilled as before."""
    rows = [(0, "k0", 0, "A"), (1, "k1", 0, "A"), (20, "k2", 0, "A"), (21, "k3", 0, "A"),
            (22, "k4", 0, "A")]
    frame = pd.DataFrame(rows, columns=["ts", "k", "lane", "v"]).assign(
        id=lambda f: "e" + f["ts"].astype(str))
    replay = set(frame["k"])
    kept = advance(SEQ, frame, key="k", hot=None, spilled={}, replay=replay, capacity=2,
                   policy="stpm")
    dropped = advance(SEQ, frame, key="k", hot=None, spilled={}, replay=replay, capacity=2,
                      policy="stpm", expire=True)
    spilled_before = {g for g, r in kept.groups.items() if r is not None}
    assert spilled_before == {"k0", "k1", "k2"}  # STPM (W = e.t): the oldest go out
    # k0, k1 (newest 0, 1) are more than WITHIN 8 behind 22; k2 (20) is not
    assert {g for g, r in dropped.groups.items() if r is not None} == {"k2"}
    assert dropped.stats.expired == 2 and dropped.stats.spilled == 1
    assert dropped.last_time == kept.last_time and dropped.keys_in_memory == 2


def test_an_expired_group_s_waiting_match_is_emitted_before_it_is_dropped():
    """k0's ``A B B`` is complete but a greedy ``B+`` waits for another B; when k0 expires
    (its newest row, 2, is more than WITHIN 6 behind the batch's newest, 22) and the store
    of one key evicts it, the waiting match is final -- no later row can extend it -- and
    comes out of this call rather than being lost with the dropped state."""
    rows = [(0, "k0", "A"), (1, "k0", "B"), (2, "k0", "B"), (20, "k1", "A"), (21, "k1", "B"),
            (22, "k1", "B")]
    frame = pd.DataFrame(rows, columns=["ts", "k", "v"]).assign(
        lane=0, id=lambda f: "e" + f["ts"].astype(str))
    ids = frame.set_index("ts")["id"]
    for replay in ({"k0", "k1"}, set()):  # the bulk path and the in-order feed
        out = advance(GREEDY_WITHIN, frame, key="k", hot=None, spilled={}, replay=replay,
                      capacity=1, policy="stpm", provisional=True, expire=True)
        assert out.stats.expired == 1 and out.groups.get("k0") is None
        assert out.rows is not None
        found = out.rows.set_index(ROW_ID)["id"]
        assert [[found[r] for r in m.rows] for m in out.matches] == [
            [ids[0], ids[1], ids[2]]]
        # k1's A B B waits too but is inside the window: provisional, in memory
        assert [[out.provisional_rows.set_index(ROW_ID)["id"][r] for r in m.rows]
                for m in out.provisional] == [[ids[20], ids[21], ids[22]]]
