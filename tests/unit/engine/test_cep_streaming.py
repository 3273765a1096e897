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
from cep_core.incremental.matcher import IncrementalMatcher
from cep_core.incremental.store import PartialMatchStore
from cep_core.language.printer import to_sql


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
    used = set(cep_core.compile.patterns.pattern_variables(pattern))
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


# ----------------------------------------------------------------- ALL ROWS PER MATCH


def _records(table: pd.DataFrame) -> tuple[list[str], list[list[object]]]:
    """Column names and values (missing values as None), independent of dtypes."""
    values = table.astype(object).where(table.notna(), None).to_numpy().tolist()
    return [str(c) for c in table.columns], values


def _stream_table(query: str, df: pd.DataFrame, cuts: list[int],
                  restore: bool = False) -> pd.DataFrame:
    """feed_table over the batches, then flush_table; stable-sorted by the partition column
    ``p`` (the batch result is ordered by partition, then match number, then row)."""
    inc = IncrementalMatcher(query)
    out: list[pd.DataFrame] = []
    for chunk in _chunks(df, cuts):
        out.append(inc.feed_table(chunk))
        if restore:
            inc = IncrementalMatcher.from_bytes(inc.to_bytes())
    out.append(inc.flush_table())
    table = pd.concat([t.astype(object) for t in out], ignore_index=True)
    if "p" in table.columns:
        table = table.sort_values("p", kind="mergesort").reset_index(drop=True)
    return table


def _assert_same_table(query: str, df: pd.DataFrame, cuts: list[int], restore: bool) -> None:
    try:
        expected = cep_core.compile_query(query).run(df)
    except cep_core.QueryError:
        with pytest.raises(cep_core.QueryError):
            _stream_table(query, df, cuts, restore)
        return
    assert _records(_stream_table(query, df, cuts, restore)) == _records(expected)


_ROWS = ["ONE ROW PER MATCH", "ALL ROWS PER MATCH", "ALL ROWS PER MATCH SHOW EMPTY MATCHES",
         "ALL ROWS PER MATCH OMIT EMPTY MATCHES", "ALL ROWS PER MATCH WITH UNMATCHED ROWS",
         "ALL ROWS PER MATCH WITH UNMATCHED ROWS"]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases(), st.lists(st.integers(0, 20), max_size=4), st.booleans(), st.sampled_from(_ROWS),
       st.booleans())
def test_incremental_rows_agree_with_whole_table(case: Case, cuts: list[int], restore: bool,
                                                 rows: str, timeouts: bool) -> None:
    pattern, values, times, choice, skip, within, selection = case
    from test_cep_reference import _conditions, _usable

    choice = _usable(pattern, choice)
    used = set(cep_core.compile.patterns.pattern_variables(pattern))
    defines = ", ".join(f"{v} AS {_conditions(v)[choice[v]][0]}" for v in sorted(used))
    query = (f"SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY p ORDER BY t "
             f"MEASURES COUNT(*) AS n, LAST(v) AS lv, FINAL COUNT(*) AS fn, "
             f"MATCH_NUMBER() AS mn, CLASSIFIER() AS cl, NEXT(v) AS nv {rows} "
             f"AFTER MATCH SKIP {skip} PATTERN ({to_sql(pattern)})"
             f"{f' WITHIN {within}' if within is not None else ''}"
             f"{f' SKIP TILL {selection} MATCH' if selection != 'STRICT' else ''}"
             f"{' EMIT TIMEOUTS' if timeouts and within is not None else ''}"
             f"{' DEFINE ' + defines if defines else ''})")
    df = pd.DataFrame({"t": times + times, "v": values + values[::-1],
                       "p": ["x"] * len(times) + ["y"] * len(times),
                       "w": [f"r{i}" for i in range(2 * len(times))]})
    df = df.sort_values("t", kind="mergesort").reset_index(drop=True)
    _assert_same_table(query, df, cuts, restore)


def test_all_rows_per_match_rows_come_with_their_match() -> None:
    query = ("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES COUNT(*) AS n "
             "ALL ROWS PER MATCH PATTERN (A B+) DEFINE A AS v = 0, B AS v > 0)")
    inc = IncrementalMatcher(query)
    assert inc.feed_table(pd.DataFrame({"ts": [1, 2], "v": [0, 1]})).empty  # B+ may grow
    got = inc.feed_table(pd.DataFrame({"ts": [3, 4], "v": [0, 1]}))
    assert got.to_dict("list") == {"ts": [1, 2], "n": [1, 2], "v": [0, 1]}
    assert inc.flush_table().to_dict("list") == {"ts": [3, 4], "n": [1, 2], "v": [0, 1]}
    assert list(inc.flush_table().columns) == ["ts", "n", "v"]


def test_unmatched_rows_are_emitted_once_no_match_can_use_them() -> None:
    query = ("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES COUNT(*) AS n "
             "ALL ROWS PER MATCH WITH UNMATCHED ROWS PATTERN (A B) "
             "DEFINE A AS v = 0, B AS v = 1)")
    inc = IncrementalMatcher(query)
    # Row 1 (v=5) can start no match: unmatched at once. Row 2 (v=0) waits for its B.
    got = inc.feed_table(pd.DataFrame({"ts": [1, 2], "v": [5, 0]}))
    assert got.to_dict("list") == {"ts": [1], "n": [None], "v": [5]}
    # Row 3 is not a B: the attempt from row 2 fails, so row 2 is unmatched; row 3 (v=0)
    # may still start a match.
    got = inc.feed_table(pd.DataFrame({"ts": [3], "v": [0]}))
    assert got.to_dict("list") == {"ts": [2], "n": [None], "v": [0]}
    assert inc.flush_table().to_dict("list") == {"ts": [3], "n": [None], "v": [0]}


# ----------------------------------------------------------------- CONSUMPTION

_MODES = ["RECENT", "FIRST", "CHRONICLE", "CUMULATIVE", "CONTINUOUS"]
_CONSUMPTION_CONDITIONS = ["v = {i}", "v >= {i}", "v > PREV(v)", "v = NEXT(v)", "TRUE",
                           # conditions on the match so far (the instance)
                           "COUNT(A.*) <= 2", "SUM(v) <= 3", "v >= A.v", "v <> FIRST(v)"]


@st.composite
def consumption_cases(draw: st.DrawFn) -> tuple[str, pd.DataFrame]:
    k = draw(st.integers(2, 3))
    names = ["A", "B", "C"][:k]
    defines = []
    for i, name in enumerate(names):
        cond = draw(st.sampled_from(_CONSUMPTION_CONDITIONS if i else
                                    _CONSUMPTION_CONDITIONS[:7]))
        defines.append(f"{name} AS {cond.format(i=i % 3)}")
    mode = draw(st.sampled_from(_MODES))
    within = draw(st.one_of(st.none(), st.integers(0, 6)))
    selection = draw(st.sampled_from(["NEXT", "ANY"]))
    rows = draw(st.sampled_from(["ONE ROW PER MATCH", "ALL ROWS PER MATCH",
                                 "ALL ROWS PER MATCH OMIT EMPTY MATCHES"]))
    query = (f"SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY p ORDER BY t "
             f"MEASURES COUNT(*) AS n, FIRST(A.t) AS fa, LAST(v) AS lv, "
             f"MATCH_NUMBER() AS mn, CLASSIFIER() AS cl, NEXT(v) AS nv {rows} "
             f"PATTERN ({' '.join(names)})"
             f"{f' WITHIN {within}' if within is not None else ''}"
             f" SKIP TILL {selection} MATCH CONSUMPTION {mode} DEFINE {', '.join(defines)})")
    n = draw(st.integers(1, 12))
    values = draw(st.lists(st.integers(0, 2), min_size=n, max_size=n))
    gaps = draw(st.lists(st.integers(0, 2), min_size=n, max_size=n))
    times = [sum(gaps[:i + 1]) for i in range(n)]
    keys = draw(st.lists(st.sampled_from(["x", "y"]), min_size=n, max_size=n))
    df = pd.DataFrame({"t": times, "v": values, "p": keys})
    return query, df


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(consumption_cases(), st.lists(st.integers(0, 20), max_size=4), st.booleans())
def test_incremental_consumption_agrees_with_whole_table(
        case: tuple[str, pd.DataFrame], cuts: list[int], restore: bool) -> None:
    """Batch and incremental (random batches, state saved and restored) on the compiled
    kernel (cep_core.runtime.kernel.consume; conditions on the match so far evaluated per
    instance) against the general matcher (cep_core.runtime.consumption)."""
    query, df = case
    general = cep_core.compile_query(query, engine="general")
    expected = general.find_matches(df)
    assert _whole(query, df) == expected
    assert _stream(query, df, cuts, restore) == expected
    assert _records(cep_core.compile_query(query).run(df)) == _records(general.run(df))
    _assert_same_table(query, df, cuts, restore)


@pytest.mark.parametrize("mode", _MODES)
def test_consumption_instances_are_carried_across_batches(mode: str) -> None:
    query = ("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES FIRST(A.ts) AS a, "
             "B.ts AS b PATTERN (A B) SKIP TILL NEXT MATCH "
             f"CONSUMPTION {mode} DEFINE A AS v = 'a', B AS v = 'b')")
    df = pd.DataFrame({"ts": [1, 2, 3, 4, 5, 6], "v": list("aabbab")})
    expected = _whole(query, df)
    inc = IncrementalMatcher(query)
    got = []
    for i in range(len(df)):
        got.extend(inc.feed(df.iloc[i:i + 1]))
        inc = IncrementalMatcher.from_bytes(inc.to_bytes())
    # A match is final as soon as its terminator arrives (no NEXT in the query).
    assert inc.flush() == []
    assert got == expected


def test_rows_covered_by_an_emitted_match_stay_covered_across_batches() -> None:
    query = ("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES MATCH_NUMBER() AS mn "
             "ALL ROWS PER MATCH WITH UNMATCHED ROWS AFTER MATCH SKIP TO NEXT ROW "
             "PATTERN (A B) DEFINE B AS v > PREV(v))")
    df = pd.DataFrame({"ts": [1, 2, 3], "v": [0, 1, 0]})
    for restore in (False, True):
        got = _stream_table(query, df, [2], restore)
        assert _records(got) == _records(cep_core.compile_query(query).run(df))
        assert got["ts"].tolist() == [1, 2, 3]  # row 2 is in match 1, not unmatched
