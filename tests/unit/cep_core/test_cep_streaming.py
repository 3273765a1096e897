"""Incremental matching: batches in, the same matches out as matching the whole table."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_cep_examples import GOLD, _events
from test_cep_reference import Case, cases

import cep_core
from cep_core.partial_matches import PartialMatchStore
from cep_core.printer import to_sql
from cep_core.streaming import IncrementalMatcher


def _chunks(df: pd.DataFrame, cuts: list[int]) -> list[pd.DataFrame]:
    edges = [0, *sorted({c % (len(df) + 1) for c in cuts}), len(df)]
    return [df.iloc[a:b] for a, b in zip(edges[:-1], edges[1:], strict=True)]


def _stream(query: str, df: pd.DataFrame, cuts: list[int],
            restore: bool = False) -> list[cep_core.Match]:
    inc = IncrementalMatcher(query)
    out: list[cep_core.Match] = []
    for chunk in _chunks(df, cuts):
        out.extend(inc.feed(chunk))
        if restore:
            inc = IncrementalMatcher.from_bytes(inc.to_bytes())
    out.extend(inc.flush())
    return sorted(out, key=lambda m: (m.partition, m.match_number))


def _whole(query: str, df: pd.DataFrame) -> list[cep_core.Match]:
    return cep_core.compile_query(query).find_matches(df)


def test_gold_query_in_batches_equals_the_whole_table() -> None:
    events = _events().sort_values("event_time", kind="mergesort").reset_index(drop=True)
    expected = _whole(GOLD, events)
    assert len(expected) == 4
    for cuts in ([], [1], [3, 7, 11], list(range(len(events)))):
        assert _stream(GOLD, events, cuts) == expected
        assert _stream(GOLD, events, cuts, restore=True) == expected


def test_matches_are_emitted_once_the_window_closes_and_buffers_stay_small() -> None:
    n = 2000
    t0 = pd.Timestamp("2024-01-01")
    df = pd.DataFrame({
        "event_id": [f"e{i}" for i in range(n)],
        "object_id": ["o1", "o2"] * (n // 2),
        "source_id": ["A", "A", "B", "B", "C", "C", "X", "X"] * (n // 8),
        "event_time": [t0 + pd.Timedelta(hours=i // 2) for i in range(n)],
    })
    inc = IncrementalMatcher(GOLD)
    emitted = []
    peak = 0
    for chunk in _chunks(df, list(range(0, n, 50))):
        emitted.extend(inc.feed(chunk))
        peak = max(peak, inc.buffered_rows())
    # Every A B C run completes within 2h: emitted without waiting for the end.
    assert len(emitted) == n // 8 * 2 - 2 or len(emitted) == n // 8 * 2
    assert peak < 200  # trimmed as matches settle, not the whole history
    rest = inc.flush()
    assert len(emitted) + len(rest) == n // 8 * 2
    got = sorted(emitted + rest, key=lambda m: (m.partition, m.match_number))
    assert got == _whole(GOLD, df)
    assert got[0].rows == (0, 2, 4)


def test_a_match_waits_for_more_rows_while_it_could_still_grow() -> None:
    query = ("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES COUNT(*) AS n "
             "PATTERN (A+) DEFINE A AS v > 0)")
    inc = IncrementalMatcher(query)
    assert inc.feed(pd.DataFrame({"ts": [1, 2], "v": [1, 1]})) == []
    (done,) = inc.feed(pd.DataFrame({"ts": [3, 4], "v": [1, 0]}))
    assert done.rows == (0, 1, 2)
    assert done.measures == {"n": 3}
    assert inc.flush() == []


def test_end_anchor_and_next_are_only_decided_at_flush() -> None:
    anchored = IncrementalMatcher(
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts PATTERN (A $))")
    assert anchored.feed(pd.DataFrame({"ts": [1, 2]})) == []
    assert [m.rows for m in anchored.flush()] == [(1,)]
    nxt = IncrementalMatcher("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts "
                             "PATTERN (A) DEFINE A AS NEXT(v) IS NULL)")
    assert nxt.feed(pd.DataFrame({"ts": [1, 2], "v": [5, 6]})) == []
    assert [m.rows for m in nxt.flush()] == [(1,)]


def test_late_rows_are_dropped_and_counted() -> None:
    query = "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts PATTERN (A) DEFINE A AS v = 1)"
    inc = IncrementalMatcher(query)
    assert [m.rows for m in inc.feed(pd.DataFrame({"ts": [5, 6], "v": [1, 1]}))] == [(0,), (1,)]
    out = inc.feed(pd.DataFrame({"ts": [4, 7], "v": [1, 1]}))
    assert inc.late_rows == 1
    assert [m.rows for m in out] == [(3,)]


def test_state_bytes_round_trip_and_query_check() -> None:
    query = "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts PATTERN (A B))"
    inc = IncrementalMatcher(query)
    inc.feed(pd.DataFrame({"ts": [1, 2, 3]}))
    data = inc.to_bytes()
    again = IncrementalMatcher.from_bytes(data, query)
    assert again.fed == 3
    assert [m.rows for m in again.feed(pd.DataFrame({"ts": [4]}))] == [(2, 3)]
    with pytest.raises(ValueError, match="different query"):
        IncrementalMatcher.from_bytes(data, query.replace("A B", "A"))
    with pytest.raises(ValueError, match="not a lakecep"):
        PartialMatchStore.from_bytes(b"\x80\x04N.")


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases(), st.lists(st.integers(0, 20), max_size=4), st.booleans())
def test_incremental_agrees_with_whole_table(case: Case, cuts: list[int], restore: bool) -> None:
    pattern, values, times, choice, skip, within, selection = case
    from test_cep_reference import _conditions, _usable

    choice = _usable(pattern, choice)
    used = set(cep_core.patterns.pattern_variables(pattern))
    defines = ", ".join(f"{v} AS {_conditions(v)[choice[v]][0]}" for v in sorted(used))
    query = (f"SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY p ORDER BY t "
             f"MEASURES COUNT(*) AS n, LAST(v) AS lv AFTER MATCH SKIP {skip} "
             f"PATTERN ({to_sql(pattern)})"
             f"{f' WITHIN {within}' if within is not None else ''}"
             f"{f' SKIP TILL {selection} MATCH' if selection != 'STRICT' else ''}"
             f"{' DEFINE ' + defines if defines else ''})")
    # Two partitions interleaved in time order.
    df = pd.DataFrame({"t": times + times, "v": values + values[::-1],
                       "p": ["x"] * len(times) + ["y"] * len(times)})
    df = df.sort_values("t", kind="mergesort").reset_index(drop=True)
    try:
        expected = _whole(query, df)
    except cep_core.QueryError:
        with pytest.raises(cep_core.QueryError):
            _stream(query, df, cuts, restore)
        return
    assert _stream(query, df, cuts, restore) == expected


def test_numpy_partition_keys_are_python_scalars() -> None:
    df = pd.DataFrame({"k": np.array([1, 1], dtype=np.int64), "ts": [1, 2]})
    (m,) = cep_core.compile_query(
        "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts PATTERN (A B))"
    ).find_matches(df)
    assert m.partition == (1,)
    assert type(m.partition[0]) is int
