"""Incremental gold for pattern queries under any arrival order (no Spark).

The real per-bucket function of the gold job (:func:`lakecep.jobs.match_state.bucket_step`,
cep_core's stored-state matcher included) runs over random event sets cut into random
batches in random order, with a model of what the Spark driver does around it (key
classification, append / insert-only MERGE / supersede, state MERGE, key expiry). After
every batch the current gold rows (``superseded_version`` NULL) must equal one batch
evaluation over the events arrived so far (the recompute path,
:func:`lakecep.jobs.gold_pattern.pattern_matcher`), every in-order append must be a new
match id, and in-order keys must read no history.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta
from typing import Any

import pandas as pd
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lakecep.config import Settings
from lakecep.jobs.gold_pattern import pattern_matcher
from lakecep.jobs.gold_rows import BUCKET
from lakecep.jobs.live_step import REPLAY
from lakecep.jobs.match_state import bucket_step, within_ns
from lakecep.queries import QUERIES_DIR, PatternQuery, load_queries

T0 = datetime(2026, 1, 1)
RFID_ABC = next(q for q in load_queries(QUERIES_DIR) if q.id == "rfid_abc")
assert isinstance(RFID_ABC, PatternQuery)
# greedy: a match stays provisional while more B reads may extend it
GREEDY = dataclasses.replace(RFID_ABC, id="a_bs", query="""
SELECT * FROM events MATCH_RECOGNIZE (
  PARTITION BY object_id ORDER BY event_time
  MEASURES FIRST(A.event_id) AS a_id, COUNT(B.event_id) AS bs
  PATTERN (A B+) WITHIN INTERVAL '6' HOUR
  DEFINE A AS source_id = 'A', B AS source_id = 'B')""")

reads = st.lists(st.tuples(st.sampled_from(["ABC", "ABC", "X", "A", "BC", "C", "ABBB"]),
                           st.lists(st.integers(min_value=1, max_value=4), min_size=4,
                                    max_size=4)), min_size=1, max_size=5)
Event = tuple[int, str, str, int]  # number, tag, reader, hour


def tag_events(tag: str, runs: list[tuple[str, list[int]]], start: int) -> list[tuple]:
    out, hour = [], start
    for readers, gaps in runs:
        for reader, gap in zip(readers, gaps, strict=False):
            hour += gap
            out.append((tag, reader, hour))
    return out


def frame(events: list[Event], wide: bool = False) -> pd.DataFrame:
    """The events as the step gets them; ``wide``: with silver's other columns too, as
    before gold shipped only what the query reads (state written then must still work)."""
    out = pd.DataFrame({
        "event_id": [f"e{n}" for n, *_ in events],
        "object_id": [tag for _, tag, _, _ in events],
        "source_id": [reader for _, _, reader, _ in events],
        "event_time": pd.to_datetime([T0 + timedelta(hours=h) for *_, h in events]),
        "ingest_time": pd.to_datetime([T0] * len(events)),
    }, columns=["event_id", "object_id", "source_id", "event_time", "ingest_time"])
    if wide:
        out["time_lower"] = out["event_time"].dt.tz_localize("UTC")
        out["attributes"] = '{"rssi": -50}'
        out["line_no"] = range(len(out))
    return out


def truth(query: PatternQuery, events: list[Event]) -> set[str]:
    if not events:
        return set()
    out = pattern_matcher(query, 0, 0, T0)(frame(events).assign(**{BUCKET: 0}))
    return set(out["match_id"])


class Model:
    """gold.complex_events and gold.partial_matches as the Spark driver keeps them."""

    def __init__(self, query: PatternQuery, capacity: int) -> None:
        self.query = query
        self.local = Settings(partial_match_capacity=capacity, partial_match_policy="tpm")
        self.gold: dict[str, dict[str, Any]] = {}  # match_id -> key, superseded
        self.hot: bytes | None = None
        self.keys: dict[str, dict[str, Any]] = {}  # key rows
        self.marker: int | None = None  # the 'query' row's last_time
        self.history_rows = 0

    def batch(self, number: int, batch: list[Event], history: list[Event],
              wide: bool = False) -> None:
        ns = [int(pd.Timestamp(T0 + timedelta(hours=h)).value) for *_, h in batch]
        t_min: dict[str, int] = {}
        for (_, tag, _, _), t in zip(batch, ns, strict=True):
            t_min[tag] = min(t, t_min.get(tag, t))
        bootstrap = self.hot is None
        if bootstrap:  # every key of silver, not only the batch's (find_pattern)
            t_min.update({tag: t_min.get(tag, 0) for _, tag, _, _ in history})
        replay = {k for k, t in t_min.items()
                  if bootstrap or (k in self.keys and self.keys[k]["last_time"] is not None
                                   and t <= self.keys[k]["last_time"])
                  or (self.keys.get(k, {}).get("last_time") is None
                      and self.marker is not None and t <= self.marker)}
        fed = [e for e in batch if e[1] not in replay]
        old = [e for e in history if e[1] in replay]
        events = pd.concat([frame(fed, wide).assign(**{REPLAY: False}),
                            frame(old, wide).assign(**{REPLAY: True})], ignore_index=True)
        events[BUCKET] = 0
        rows = [{"kind": "hot", "key": "", "record": self.hot, "pending_ids": None}] if \
            self.hot is not None else []
        rows += [{"kind": "key", "key": k, "record": self.keys[k]["record"],
                  "pending_ids": self.keys[k]["pending_ids"]}
                 for k in t_min if k not in replay and k in self.keys]
        state = pd.DataFrame(rows, columns=["kind", "key", "record", "pending_ids"])
        out = bucket_step(self.query, self.local, "object_id", number, number, T0)(
            events, state)
        stats = out[out["kind"] == "stats"]
        assert len(stats) == 1
        self.history_rows += len(old)
        gold = out[out["kind"] == "gold"]
        found: dict[str, set[str]] = {}
        for mid, key, replayed in zip(gold["match_id"], gold["partition_key"],
                                      gold["replayed"], strict=True):
            found.setdefault(key, set()).add(mid)
            if not replayed:
                assert mid not in self.gold, "an in-order append repeats a match id"
            self.gold.setdefault(mid, {"key": key, "superseded": None})
        for mid, row in self.gold.items():  # jobs.gold.supersede, for the replay keys
            if row["key"] in replay:
                if mid in found.get(row["key"], set()):
                    row["superseded"] = None
                elif row["superseded"] is None:
                    row["superseded"] = number
        for mid in out.loc[out["kind"] == "supersede", "match_id"]:
            if self.gold[mid]["superseded"] is None:
                self.gold[mid]["superseded"] = number
        for _, row in out[out["kind"].isin(["hot", "key"])].iterrows():
            if row["kind"] == "hot":
                self.hot = row["record"]
                continue
            was = self.keys.get(row["key"], {})
            last = row["last_time"] if not pd.isna(row["last_time"]) else was.get("last_time")
            pending = row["pending_ids"] if row["pending_ids"] is not None else \
                was.get("pending_ids")
            self.keys[row["key"]] = {  # no last time: an expired key spilled from memory
                "record": row["record"], "last_time": None if last is None else int(last),
                "pending_ids": pending}
        window = within_ns(self.query.compiled())
        assert window is not None
        newest = max(k["last_time"] for k in self.keys.values() if k["last_time"] is not None)
        gone = [k for k, v in self.keys.items()
                if v["last_time"] is None or v["last_time"] < newest - window]
        for k in gone:
            del self.keys[k]
        if gone:
            self.marker = newest

    def current(self) -> set[str]:
        return {mid for mid, row in self.gold.items() if row["superseded"] is None}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from([RFID_ABC, GREEDY]), reads, reads, reads, st.randoms(use_true_random=False),
       st.integers(min_value=1, max_value=6), st.sampled_from([1, 100]),
       st.floats(min_value=0, max_value=1), st.booleans(), st.integers(0, 3),
       st.integers(0, 3))
def test_incremental_gold_equals_one_evaluation_after_every_batch(  # noqa: PLR0913
        query, t1, t2, t3, rnd, batches, capacity, disorder, ahead, added,  # noqa: ANN001
        wide) -> None:  # noqa: ANN001
    events = (tag_events("t1", t1, 0) + tag_events("t2", t2, 0)
              + tag_events("t3", t3, 30))  # t3 starts late: t1 may expire
    numbered: list[Event] = [(n, *e) for n, e in enumerate(events)]
    arrival = sorted(numbered, key=lambda e: e[3])
    for i in range(len(arrival)):  # some events swap with a later one: late arrivals
        if rnd.random() < disorder / 3:
            j = rnd.randrange(i, len(arrival))
            arrival[i], arrival[j] = arrival[j], arrival[i]
    cuts = sorted(rnd.sample(range(1, len(arrival)), min(batches, len(arrival)) - 1))
    model = Model(query, capacity)
    spans = list(zip([0, *cuts], [*cuts, len(arrival)], strict=True))
    # the query is added to a lake that already holds the first `added` batches: its first
    # batch is the next one, over all of silver
    added = min(added, len(spans) - 1)
    for n, (lo, hi) in enumerate(spans[added:]):
        # the pinned silver version may already hold the next batch's events
        i = added + n
        end = spans[i + 1][1] if ahead and i + 1 < len(spans) else hi
        model.batch(n, arrival[lo:hi], arrival[:end], wide=n < wide)  # then narrow
        if not ahead:  # (ahead: replay keys are answered over more events than the rest)
            assert model.current() == truth(query, arrival[:hi])
    assert model.current() == truth(query, numbered)


def test_in_order_keys_read_no_history() -> None:
    events = [(n, tag, reader, n) for n, (tag, reader) in enumerate(
        [("t1", "A"), ("t2", "A"), ("t1", "B"), ("t2", "B"), ("t1", "C"), ("t3", "A"),
         ("t2", "C"), ("t3", "B"), ("t3", "C")])]
    model = Model(RFID_ABC, 100)
    model.batch(0, events[:3], events[:3])  # bootstrap: the first batch replays
    first = model.history_rows
    for n, (lo, hi) in enumerate([(3, 5), (5, 7), (7, 9)], start=1):
        model.batch(n, events[lo:hi], events[:hi])
    assert model.history_rows == first  # t3 is new and in order: no history either
    assert model.current() == truth(RFID_ABC, events) and len(model.current()) == 3


def test_provisional_matches_are_written_then_superseded() -> None:
    # A B+ may still grow: each batch's gold holds the batch answer so far, the earlier
    # provisional match superseded by the longer one
    events = [(n, "t1", reader, n) for n, reader in enumerate("ABBB")]
    model = Model(GREEDY, 100)
    for n, (lo, hi) in enumerate([(0, 2), (2, 3), (3, 4)]):
        model.batch(n, events[lo:hi], events[:hi])
        assert model.current() == truth(GREEDY, events[:hi])
        assert len(model.current()) == 1
    assert [row["superseded"] for row in model.gold.values()] == [1, 2, None]
