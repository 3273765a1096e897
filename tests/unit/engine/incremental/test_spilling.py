"""Bounded partial-match store: spilling partition keys to disk never changes the output."""

from __future__ import annotations

import doctest
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cep_core.incremental.spilling
from cep_core.incremental.matcher import IncrementalMatcher
from cep_core.incremental.spilling import TransitionStats, estimate_transitions

QUERIES = {
    "seq4_within": """SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts
        MEASURES FIRST(A.ts) AS a_ts, LAST(D.ts) AS d_ts ONE ROW PER MATCH
        PATTERN (A B C D) WITHIN 6
        DEFINE A AS v = 'A', B AS v = 'B', C AS v = 'C', D AS v = 'D')""",
    "kleene_all_rows": """SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts
        MEASURES COUNT(B.*) AS nb, MATCH_NUMBER() AS mno ALL ROWS PER MATCH
        AFTER MATCH SKIP TO NEXT ROW PATTERN (A B+ C)
        DEFINE A AS v = 'A', B AS v = 'B', C AS v = 'C')""",
    "skip_till_any": """SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts
        MEASURES LAST(C.ts) AS c_ts PATTERN (A B C) WITHIN 5 SKIP TILL ANY MATCH
        DEFINE A AS v = 'A', B AS v = 'B', C AS v = 'C')""",
    "consumption": """SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts
        MEASURES LAST(B.ts) AS b_ts PATTERN (A B C) SKIP TILL NEXT MATCH
        CONSUMPTION CHRONICLE DEFINE A AS v = 'A', B AS v = 'B', C AS v = 'C')""",
    "unmatched_prev": """SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts
        MEASURES CLASSIFIER() AS cls ALL ROWS PER MATCH WITH UNMATCHED ROWS
        PATTERN (A B) DEFINE A AS v = 'A', B AS v = 'B' AND PREV(v) = 'A')""",
}

WIDE = QUERIES["seq4_within"].replace("WITHIN 6", "WITHIN 100")
STPM_STATS = TransitionStats([0.0, 3.0, 2.0, 1.0], [0.0, 0.5, 0.5, 0.5])


def _frame(keys: list[int], letters: list[str]) -> pd.DataFrame:
    return pd.DataFrame({"ts": np.arange(len(keys)), "k": [f"k{k}" for k in keys],
                         "v": letters})


def _batches(df: pd.DataFrame, cuts: list[int]) -> list[pd.DataFrame]:
    edges = [0, *sorted({c % (len(df) + 1) for c in cuts}), len(df)]
    return [df.iloc[a:b] for a, b in zip(edges[:-1], edges[1:], strict=True)]


def _run(query: str, batches: list[pd.DataFrame], table: bool, **options: object,
         ) -> tuple[object, IncrementalMatcher]:
    with IncrementalMatcher(query, **options) as inc:  # type: ignore[arg-type]
        if table:
            frames = [inc.feed_table(b) for b in batches] + [inc.flush_table()]
            return pd.concat(frames, ignore_index=True), inc
        matches = [m for b in batches for m in inc.feed(b)] + inc.flush()
        return matches, inc


def _distinct_keys(batches: list[pd.DataFrame]) -> int:
    return sum(b["k"].nunique() for b in batches)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(sorted(QUERIES)),
       runs=st.lists(st.tuples(st.integers(0, 3), st.integers(0, 4)), max_size=25),
       cuts=st.lists(st.integers(0, 60), max_size=10),
       capacity=st.integers(1, 2), policy=st.sampled_from(["tpm", "stpm"]),
       spill_batch=st.integers(1, 3), table=st.booleans())
def test_tiny_buffer_gives_exactly_the_unbounded_output(
        name: str, runs: list[tuple[int, int]], cuts: list[int], capacity: int, policy: str,
        spill_batch: int, table: bool) -> None:
    # a run (key, j) is the first j letters of A B C D for that key (j = 0: one X row), so
    # partial matches of every length are left open and completed across keys and batches
    rows = [(k, letter) for k, j in runs for letter in ("ABCD"[:j] or "X")]
    df = _frame([k for k, _ in rows], [v for _, v in rows])
    batches = _batches(df, cuts)
    query = QUERIES[name]
    expected, _ = _run(query, batches, table)
    got, inc = _run(query, batches, table, capacity=capacity, policy=policy,
                    transitions=STPM_STATS, spill_batch=spill_batch)
    if table:
        pd.testing.assert_frame_equal(got, expected)  # type: ignore[arg-type]
    else:
        assert got == expected
    stats = inc.spill_stats
    assert stats is not None
    assert stats.hits + stats.misses + stats.new_keys == _distinct_keys(batches)
    assert stats.new_keys == df["k"].nunique()
    assert stats.in_memory <= capacity and stats.open_misses <= stats.misses
    big, roomy = _run(query, batches, table, capacity=100, policy=policy)
    assert roomy.spill_stats is not None and roomy.spill_stats.misses == 0
    assert roomy.spill_stats.spilled == 0


def _round_robin(n: int, keys: int) -> pd.DataFrame:
    letters = "ABCD"
    return _frame([i % keys for i in range(n)], [letters[(i // keys) % 4] for i in range(n)])


def test_tiny_buffer_misses_and_the_unbounded_store_does_not() -> None:
    df = _round_robin(80, keys=4)  # every key gets A B C D in turn: 20 matches
    batches = _batches(df, list(range(0, 80, 2)))
    expected, plain = _run(WIDE, batches, table=False)
    assert len(expected) == 20  # type: ignore[arg-type]
    assert plain.spill_stats is None
    for policy in ("tpm", "stpm"):
        got, inc = _run(WIDE, batches, table=False, capacity=1,
                        policy=policy)
        assert got == expected
        stats = inc.spill_stats
        assert stats is not None
        # each batch touches 2 keys, at most 1 was kept: at least one miss per batch after
        # the first two
        assert stats.misses >= len(batches) - 2
        assert stats.hits + stats.misses + stats.new_keys == _distinct_keys(batches)
        assert stats.spilled >= stats.misses and stats.bytes_written > stats.bytes_read > 0
    _, roomy = _run(WIDE, batches, table=False, capacity=4)
    assert roomy.spill_stats is not None
    assert (roomy.spill_stats.misses, roomy.spill_stats.spilled) == (0, 0)
    assert roomy.spill_stats.hits == _distinct_keys(batches) - 4


def test_stpm_spills_the_lowest_priority_key_where_tpm_spills_the_oldest() -> None:
    # x has matched A B C (state 3: about to complete), y only A (state 1). With
    # W = e.t + Δt_i · p_i: W_x = 3 + 100 * 1 = 103, W_y = 4 + 10 * 0.5 = 9.
    stats = TransitionStats([0, 10, 10, 100], [0, 0.5, 0.5, 1.0])
    first = pd.DataFrame({"ts": [1, 2, 3], "k": ["x"] * 3, "v": ["A", "B", "C"]})
    second = pd.DataFrame({"ts": [4], "k": ["y"], "v": ["A"]})
    third = pd.DataFrame({"ts": [5], "k": ["x"], "v": ["D"]})
    query = QUERIES["seq4_within"]
    spilled = {}
    for policy in ("tpm", "stpm"):
        with IncrementalMatcher(query, capacity=1, policy=policy, transitions=stats) as inc:
            assert inc.feed(first) == [] and inc.feed(second) == []
            assert inc._spill is not None
            spilled[policy] = inc._spill.spilled_keys()
            (match,) = inc.feed(third)
            assert match.measures == {"a_ts": 1, "d_ts": 5}
            assert inc.spill_stats is not None
            misses = (inc.spill_stats.misses, inc.spill_stats.open_misses)
        assert misses == ((1, 1) if policy == "tpm" else (0, 0))  # x was open: A B C
    assert spilled == {"tpm": [("x",)], "stpm": [("y",)]}


def test_transition_statistics_on_a_hand_computed_example() -> None:
    sample = pd.DataFrame({"ts": [0, 2, 7, 10, 11, 12, 20, 25, 26, 30],
                           "v": list("ABCABXABCD"), "k": ["p"] * 10})
    query = ("SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts PATTERN (A B C D) "
             "DEFINE A AS v = 'A', B AS v = 'B', C AS v = 'C', D AS v = 'D')")
    got = estimate_transitions(sample, query)
    # entries: state 1 three times (A@0, A@10, A@20), 2 three times, 3 twice, 4 once;
    # largest gaps A->B 5 (20->25), B->C 5 (2->7), C->D 4 (26->30).
    assert got.max_gap == [0.0, 5.0, 5.0, 4.0]
    assert got.probability == pytest.approx([0.0, 1.0, 2 / 3, 1 / 2])
    assert got.weight(3) == 2.0 and got.weight(9) == 0.0
    assert TransitionStats.from_dict(got.to_dict()) == got
    # SKIP TILL NEXT MATCH: X no longer breaks the attempt; WITHIN 6 closes it instead.
    relaxed = estimate_transitions(sample, query.replace("D)", "D) WITHIN 6 SKIP TILL NEXT "
                                                              "MATCH", 1))
    # A@0 B@2 (C@7 is 7 after A: window closed) A@10 B@11 (A@20 new) B@25 C@26 (D@30 > 6)
    assert relaxed.max_gap == [0.0, 5.0, 1.0, 0.0]
    assert relaxed.probability == pytest.approx([0.0, 1.0, 1 / 3, 0.0])
    with pytest.raises(ValueError, match="same length"):
        TransitionStats([1.0], [])
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        TransitionStats.from_dict({"max_gap": [1], "probability": [2]})


def test_bad_options_are_rejected_with_a_clear_message() -> None:
    query = QUERIES["seq4_within"]
    with pytest.raises(ValueError, match="capacity must be a whole number of partition keys"):
        IncrementalMatcher(query, capacity=0)
    with pytest.raises(ValueError, match="policy must be one of tpm, stpm"):
        IncrementalMatcher(query, capacity=1, policy="lru")
    with pytest.raises(ValueError, match="spill_batch"):
        IncrementalMatcher(query, capacity=1, spill_batch=0)


def test_spill_files_live_in_their_own_directory_and_are_removed(tmp_path: Path) -> None:
    df = _round_robin(40, keys=5)
    inc = IncrementalMatcher(WIDE, capacity=1, spill_dir=tmp_path)
    for batch in _batches(df, list(range(0, 40, 5))):
        inc.feed(batch)
    assert inc._spill is not None and inc._spill.directory is not None
    directory = inc._spill.directory
    assert directory.parent == tmp_path and directory.name.startswith("lakecep-spill-")
    segments = sorted(directory.glob("seg-*.bin"))
    assert segments and inc.spill_stats is not None and inc.spill_stats.on_disk == 4
    inc.flush()  # reads every key back: segments whose keys are all back are deleted
    assert inc.spill_stats.reloaded == 4
    assert not any(s.exists() for s in segments)
    # the flushed keys are over capacity again: 4 of them went to one new segment
    assert inc.spill_stats.on_disk == 4 and len(list(directory.glob("seg-*.bin"))) == 1
    inc.close()
    assert not directory.exists() and list(tmp_path.iterdir()) == []


def test_checkpoint_with_spilled_keys_restores_the_same_output() -> None:
    df = _round_robin(60, keys=3)
    batches = _batches(df, list(range(0, 60, 4)))
    expected, _ = _run(WIDE, batches, table=False)
    for restore_options in ({}, {"capacity": 1, "policy": "stpm"}):
        inc = IncrementalMatcher(WIDE, capacity=1)
        got = [m for b in batches[:5] for m in inc.feed(b)]
        assert inc.spill_stats is not None and inc.spill_stats.on_disk == 2
        data = inc.to_bytes()
        inc.close()
        again = IncrementalMatcher.from_bytes(data, **restore_options)
        if restore_options:
            assert again.spill_stats is not None and again.spill_stats.on_disk == 2
        else:
            assert again.spill_stats is None and len(again.store.partitions) == 3
        got += [m for b in batches[5:] for m in again.feed(b)] + again.flush()
        again.close()
        assert got == expected


def test_module_docstring_example_runs() -> None:
    result = doctest.testmod(cep_core.incremental.spilling)
    assert result.attempted >= 1 and result.failed == 0
