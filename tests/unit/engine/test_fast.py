"""The fast path (cep_core.runtime.fast) against the general matcher: same matches, rows,
measures."""

from __future__ import annotations

import tomllib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cep_core
from cep_core import QueryError

QUANTIFIERS = ["", "", "+", "*", "?", "+?", "*?", "??", "{2}", "{1,3}", "{0,2}?", "{2,}"]
CONDITIONS = [
    "v > PREV(v)", "v < PREV(v)", "v >= 2", "v <= NEXT(v)", "PREV(v, 2) < v",
    "{var}.v > 1", "v = 0 OR v IS NULL", "s = 'x'", "v BETWEEN 1 AND 3",
    "v + PREV(v) > 2 AND NEXT(v, 0) <> 1", "PREV({var}.v) IS NULL", "v % 2 = 0",
]
MEASURES = [
    "FIRST(A.v) AS fa", "LAST(B.ts, 1) AS lb", "COUNT(*) AS n", "COUNT(A.*) AS na",
    "MATCH_NUMBER() AS mn", "CLASSIFIER() AS cl", "A.ts AS at", "v AS lv", "s AS ls",
    "FIRST(ts, 2) AS f2", "LAST(C.s) AS lcs", "FIRST(B.v, 1) AS fb1",
]
SLOW_MEASURES = ["SUM(v) AS total", "LAST(A.v) - FIRST(v) AS d", "PREV(LAST(B.v)) AS pb",
                 "COUNT(*) FILTER (WHERE v > 1) AS nf", "FINAL LAST(CLASSIFIER()) AS lc",
                 "SUM(CASE WHEN CLASSIFIER() = 'A' THEN v END) AS sa",
                 "PREV(CLASSIFIER()) AS pc"]


# ONE ROW PER MATCH mostly; ALL ROWS PER MATCH (RUNNING measures per row) too.
ROWS = st.sampled_from(["ONE ROW PER MATCH"] * 4 + [
    "ALL ROWS PER MATCH", "ALL ROWS PER MATCH SHOW EMPTY MATCHES",
    "ALL ROWS PER MATCH OMIT EMPTY MATCHES"])


def _query(items: list[tuple[str, str]], defines: dict[str, str], measures: list[str],
           skip: str, partition: bool, order: str = "ts", within: str = "",
           rows: str = "ONE ROW PER MATCH") -> str:
    pattern = " ".join(f"{v}{q}" for v, q in items)
    define = ", ".join(f"{v} AS {c.format(var=v)}" for v, c in defines.items())
    return (
        "SELECT * FROM t MATCH_RECOGNIZE ("
        + ("PARTITION BY p " if partition else "")
        + f"ORDER BY {order} "
        + (f"MEASURES {', '.join(measures)} " if measures else "")
        + f"{rows} AFTER MATCH SKIP {skip} PATTERN ({pattern})"
        + (f" WITHIN {within}" if within else "")
        + (f" DEFINE {define}" if define else "") + ")")


def _measures(draw: st.DrawFn, used: list[str]) -> list[str]:
    """Up to four measures over the pattern's variables ``used`` (now and then a slow one)."""
    def ok(m: str) -> bool:
        return all(f"{x}." not in m for x in "ABC" if x not in used)

    measures = draw(st.lists(st.sampled_from([m for m in MEASURES if ok(m)]), max_size=4,
                             unique=True))
    slow = [m for m in SLOW_MEASURES if ok(m)]
    if slow and draw(st.integers(0, 5)) == 0:
        measures.append(draw(st.sampled_from(slow)))
    return measures


@st.composite
def cases(draw: st.DrawFn) -> tuple[str, pd.DataFrame]:
    n_items = draw(st.integers(1, 4))
    items = [(draw(st.sampled_from("ABC")), draw(st.sampled_from(QUANTIFIERS)))
             for _ in range(n_items)]
    used = sorted({v for v, _ in items})
    defines = {v: draw(st.sampled_from(CONDITIONS)) for v in used if draw(st.booleans())}
    measures = _measures(draw, used)
    skip = draw(st.sampled_from(
        ["PAST LAST ROW", "TO NEXT ROW"]
        + [f"TO {k} {v}" for v in used for k in ("FIRST", "LAST")]))
    partition = draw(st.booleans())
    n = draw(st.integers(0, 40))
    values = draw(st.lists(st.one_of(st.integers(0, 4), st.none()) if draw(st.booleans())
                           else st.integers(0, 4), min_size=n, max_size=n))
    df = pd.DataFrame({
        "p": draw(st.lists(st.sampled_from(["k1", "k2", "k3"]), min_size=n, max_size=n)),
        "ts": draw(st.lists(st.integers(0, 30), min_size=n, max_size=n)),
        "v": pd.Series(values, dtype="float64" if None in values else "int64"),
        "s": draw(st.lists(st.sampled_from(["x", "y"]), min_size=n, max_size=n)),
    })
    return _query(items, defines, measures, skip, partition, rows=draw(ROWS)), df


def _outcome(q: cep_core.CompiledQuery, df: pd.DataFrame) -> tuple[object, object]:
    try:
        return q.find_matches(df), q.run(df)
    except QueryError as err:
        return ("error", err.message), None


def _assert_same(text: str, df: pd.DataFrame) -> None:
    fast = cep_core.compile_query(text)
    general = cep_core.compile_query(text, engine="general")
    assert fast.engine == "fast", fast.plan
    assert general.engine == "general"
    f_matches, f_frame = _outcome(fast, df)
    g_matches, g_frame = _outcome(general, df)
    assert f_matches == g_matches
    if g_frame is not None:
        assert isinstance(f_frame, pd.DataFrame) and isinstance(g_frame, pd.DataFrame)
        pd.testing.assert_frame_equal(f_frame, g_frame)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_fast_path_equals_general_matcher(case: tuple[str, pd.DataFrame]) -> None:
    _assert_same(*case)


STOCK = """SELECT * FROM ticks MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY ts
  MEASURES STRT.ts AS start_ts, LAST(DOWN.ts) AS bottom_ts, LAST(UP.ts) AS end_ts,
           STRT.price AS start_price, LAST(DOWN.price) AS bottom_price,
           LAST(UP.price) AS end_price, COUNT(*) AS n
  ONE ROW PER MATCH AFTER MATCH SKIP {skip}
  PATTERN (STRT DOWN+ UP+)
  DEFINE DOWN AS price < PREV(price), UP AS price > PREV(price))"""


@pytest.mark.parametrize("skip", ["PAST LAST ROW", "TO NEXT ROW", "TO LAST DOWN",
                                  "TO FIRST UP"])
def test_stock_ticks_shape(skip: str) -> None:
    rng = np.random.default_rng(7)
    n = 5000
    df = pd.DataFrame({
        "symbol": np.array(["AAA", "BBB", "CCC", "DDD"])[rng.integers(0, 4, n)],
        "ts": pd.Timestamp("2024-01-02") + pd.to_timedelta(np.arange(n), unit="s"),
        "price": np.round(100 + rng.standard_normal(n).cumsum(), 1)})
    _assert_same(STOCK.format(skip=skip), df.sample(frac=1, random_state=1))


@pytest.mark.parametrize("dtype", ["int64", "float64", "Int64", "datetime64[ns]",
                                   "datetime64[us]", "datetime64[ns, UTC]", "object", "bool",
                                   "category"])
def test_measure_and_key_dtypes(dtype: str) -> None:
    raw = [3, 1, 2, 2, 5, 0, 4, 4, 1, 3]
    if dtype.startswith("datetime"):
        col = pd.Series(pd.to_datetime(raw, unit="h")).astype(dtype.replace(", UTC", ""))
        if "UTC" in dtype:
            col = col.dt.tz_localize("UTC")
    elif dtype == "object":
        col = pd.Series([f"x{r}" for r in raw], dtype=object)
    elif dtype == "bool":
        col = pd.Series([r % 2 == 0 for r in raw])
    else:
        col = pd.Series(raw).astype(dtype)
    df = pd.DataFrame({"k": col, "ts": range(10), "v": [3, 1, 2, 2, 5, 0, 4, 4, 1, 3],
                       "w": col})
    text = ("SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts MEASURES "
            "FIRST(A.w) AS fw, LAST(B.w) AS lb, C.w AS cw PATTERN (A B? C*) "
            "DEFINE B AS v > PREV(v), C AS v < 4)")
    _assert_same(text, df)
    _assert_same(text.replace("PARTITION BY k ", ""), df)


@pytest.mark.parametrize("text, reason", [
    ("PATTERN (A B+) DEFINE B AS v > A.v / 2", "reads variable A"),
    ("PATTERN (A B+) DEFINE B AS v > FIRST(B.v, 1)", "FIRST"),
    ("PATTERN (A B+) DEFINE B AS SUM(B.v * 2) < 10", "SUM"),
    ("PATTERN (A B+) DEFINE B AS SUM(B.v) < 10 OR v > 3", "SUM"),
    ("PATTERN (A B+) DEFINE B AS v > PREV(A.v)", "PREV of variable A"),
    ("PATTERN (A B+) DEFINE B AS PREV(CLASSIFIER()) IS NULL", "CLASSIFIER inside PREV"),
    # negation runs on the automaton with row-local DEFINEs (test_compiled), not with a
    # DEFINE that reads the match so far
    ("PATTERN (A NOT B C) SKIP TILL NEXT MATCH DEFINE B AS v > A.v", "negation"),
    ("PATTERN (A B NOT C) WITHIN 5 DEFINE C AS SUM(v) > 3", "negation"),
    ("PATTERN (A NOT B C) WITHIN 5 SKIP TILL NEXT MATCH EMIT TIMEOUTS", "negation"),
])
def test_ineligible_queries_fall_back(text: str, reason: str) -> None:
    q = cep_core.compile_query(f"SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts {text})")
    assert q.engine == "general"
    assert reason in q.plan
    with pytest.raises(ValueError, match="fast path cannot"):
        cep_core.compile_query(f"SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts {text})",
                               engine="fast")


@pytest.mark.parametrize("text", [
    "PATTERN (A | B) DEFINE A AS v > 1", "PATTERN ((A B)+)", "PATTERN (^ A B)",
    "PATTERN (A {- B -} C)", "PATTERN (PERMUTE(A, B))",
    "ALL ROWS PER MATCH WITH UNMATCHED ROWS PATTERN (A B)",
    "PATTERN (A B C) WITHIN 5 SKIP TILL NEXT MATCH EMIT TIMEOUTS"])
def test_other_patterns_run_on_the_compiled_automaton(text: str) -> None:
    q = cep_core.compile_query(f"SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts {text})")
    assert q.engine == "fast"
    assert q.plan.startswith("compiled: automaton"), q.plan


def test_all_rows_per_match_on_the_fast_path() -> None:
    text = ("SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY p ORDER BY ts MEASURES "
            "COUNT(*) AS n, LAST(B.v) AS lb, CLASSIFIER() AS cl, MATCH_NUMBER() AS mn "
            "ALL ROWS PER MATCH PATTERN (A B+ C*) WITHIN 3 "
            "DEFINE B AS v > PREV(v), C AS v < PREV(v))")
    q = cep_core.compile_query(text)
    assert q.plan == ("fast: items A{1,1} B{1,} C{0,}; WITHIN 3; ALL ROWS PER MATCH; "
                      "measures per row")
    df = pd.DataFrame({"p": [1, 1, 1, 1, 1, 2, 2, 2], "ts": [1, 2, 3, 4, 5, 1, 2, 9],
                       "v": [1, 2, 3, 2, 5, 4, 5, 1]})
    out = q.run(df)
    # Running measures: n counts the rows so far, lb is the last B so far.
    assert out["n"].tolist() == [1, 2, 3, 4, 1, 2]
    assert pd.isna(out["lb"][0]) and out["lb"].tolist()[1:4] == [2, 3, 3]
    assert out["cl"].tolist() == ["A", "B", "B", "C", "A", "B"]
    _assert_same(text, df)


def test_engine_choice_and_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    text = "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts PATTERN (A B+) DEFINE B AS v > PREV(v))"
    assert cep_core.compile_query(text).engine == "fast"
    assert cep_core.compile_query(text, engine="general").engine == "general"
    monkeypatch.setenv("LAKECEP_CEP_ENGINE", "general")
    assert cep_core.compile_query(text).engine == "general"
    assert cep_core.compile_query(text, engine="fast").engine == "fast"
    with pytest.raises(ValueError, match="engine must be"):
        cep_core.compile_query(text, engine="turbo")


def test_condition_errors_use_the_general_path() -> None:
    # Comparing a string with a number is an error the general matcher reports only for
    # rows it evaluates; the fast path then defers to it.
    df = pd.DataFrame({"ts": [1, 2, 3], "v": ["a", "b", "c"]})
    text = ("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES COUNT(*) AS n "
            "PATTERN (A B) DEFINE A AS v = 'z', B AS v > PREV(v) + 1)")
    _assert_same(text, df)


def test_empty_input_and_no_matches() -> None:
    text = ("SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY p ORDER BY ts MEASURES "
            "FIRST(A.v) AS fa PATTERN (A B+) DEFINE B AS v > PREV(v))")
    _assert_same(text, pd.DataFrame({"p": [], "ts": [], "v": []}))
    _assert_same(text, pd.DataFrame({"p": [1, 1, 2], "ts": [1, 2, 3], "v": [3, 2, 1]}))


# ---------------------------------------------------------------------- WITHIN
# Conditions that make long runs (so that greedy items overrun the window) besides the
# general ones above.
WITHIN_CONDITIONS = [*CONDITIONS, "v >= 1", "v IS NOT NULL", "v < 4", "s = 'y' OR v > 0"]
WITHIN_QUANTIFIERS = [*QUANTIFIERS, "+", "*", "{1,}", "{0,3}", "+?"]


@st.composite
def within_cases(draw: st.DrawFn) -> tuple[str, pd.DataFrame]:
    """Random concatenations of quantified variables with a random WITHIN window, over data
    with ties and NULLs in the ORDER BY column and several partitions; the order column is
    integer, float (with NULLs), or a timestamp (INTERVAL windows), ascending or not."""
    n_items = draw(st.integers(1, 4))
    items = [(draw(st.sampled_from("ABC")), draw(st.sampled_from(WITHIN_QUANTIFIERS)))
             for _ in range(n_items)]
    used = sorted({v for v, _ in items})
    defines = {v: draw(st.sampled_from(WITHIN_CONDITIONS)) for v in used
               if draw(st.integers(0, 3)) > 0}

    measures = _measures(draw, used)
    skip = draw(st.sampled_from(
        ["PAST LAST ROW", "PAST LAST ROW", "TO NEXT ROW"]
        + [f"TO {k} {v}" for v in used for k in ("FIRST", "LAST")]))
    partition = draw(st.booleans())
    n = draw(st.integers(0, 50))
    kind = draw(st.sampled_from(["int", "float", "time"]))
    ticks = draw(st.lists(st.integers(0, 12), min_size=n, max_size=n))  # many ties
    if kind == "int":
        ts: pd.Series = pd.Series(ticks, dtype="int64")
        within = draw(st.sampled_from(["0", "1", "2", "3", "5", "2.5", "1000"]))
    elif kind == "float":
        nulls = draw(st.lists(st.integers(0, 5), min_size=n, max_size=n))
        ts = pd.Series([None if z == 0 else t / 2 for t, z in zip(ticks, nulls, strict=True)],
                       dtype="float64")
        within = draw(st.sampled_from(["0", "0.5", "1", "1.5", "2.25", "4"]))
    else:
        ts = pd.Series(pd.Timestamp("2024-03-01") + pd.to_timedelta(ticks, unit="min"))
        within = draw(st.sampled_from(["INTERVAL '0' MINUTE", "INTERVAL '1' MINUTE",
                                       "INTERVAL '3' MINUTE", "INTERVAL '90' SECOND",
                                       "INTERVAL '1' HOUR"]))
    order = "ts" + draw(st.sampled_from(["", "", " DESC", " NULLS FIRST"]))
    values = draw(st.lists(st.one_of(st.integers(0, 4), st.none()) if draw(st.booleans())
                           else st.integers(0, 4), min_size=n, max_size=n))
    df = pd.DataFrame({
        "p": draw(st.lists(st.sampled_from(["k1", "k2", "k3"]), min_size=n, max_size=n)),
        "ts": ts,
        "v": pd.Series(values, dtype="float64" if None in values else "int64"),
        "s": draw(st.lists(st.sampled_from(["x", "y"]), min_size=n, max_size=n)),
    })
    return _query(items, defines, measures, skip, partition, order, within, draw(ROWS)), df


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(within_cases())
def test_fast_path_with_within_equals_general_matcher(case: tuple[str, pd.DataFrame]) -> None:
    text, df = case
    assert "WITHIN" in cep_core.compile_query(text).plan
    _assert_same(text, df)


@pytest.mark.parametrize("pattern, defines, expected", [
    # Greedy A+ would take rows 0..5 and B row 6, but ts 7 is 6 after ts 1 (> 4): the
    # preferred match that stays inside the window ends with B on row 4 (ts 5).
    ("A+ B", "A AS v = 1, B AS v >= 1", (0, 1, 2, 3, 4)),
    ("A+? B", "A AS v = 1, B AS v >= 1", (0, 1)),
    ("A{2,} B+", "A AS v = 1, B AS v >= 1", (0, 1, 2, 3, 4)),
    ("A B* C", "A AS v = 1, B AS v = 1, C AS v >= 1", (0, 1, 2, 3, 4)),
    # No match from rows 0 and 1; from row 2 (ts 3) C on ts 7 is exactly 4 later: the
    # bound is inclusive.
    ("A B+ C", "A AS v = 1, B AS v = 1, C AS v = 9", (2, 3, 4, 5, 6)),
])
def test_within_cuts_greedy_matches_back(pattern: str, defines: str,
                                         expected: tuple[int, ...]) -> None:
    df = pd.DataFrame({"ts": [1, 2, 3, 4, 5, 6, 7], "v": [1, 1, 1, 1, 1, 1, 9]})
    text = ("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES COUNT(*) AS n "
            f"PATTERN ({pattern}) WITHIN 4 DEFINE {defines})")
    q = cep_core.compile_query(text)
    assert q.engine == "fast", q.plan
    assert q.find_matches(df)[0].rows == expected
    _assert_same(text, df)


def test_rfid_abc_query_runs_on_the_fast_path() -> None:
    spec = tomllib.loads((Path(__file__).parents[3] / "queries" / "rfid_abc.toml").read_text())
    text = spec["query"]
    assert "WITHIN INTERVAL '10' HOUR" in text
    q = cep_core.compile_query(text)
    assert q.engine == "fast"
    assert q.plan == ("fast: items A{1,1} B{1,1} C{1,1}; WITHIN INTERVAL '10' HOUR; "
                      "measures vectorised")
    rng = np.random.default_rng(3)
    n = 3000
    df = pd.DataFrame({
        "object_id": rng.integers(0, 40, n).astype(str),
        "event_time": pd.Timestamp("2024-05-01") + pd.to_timedelta(
            rng.integers(0, 72 * 60, n), unit="min"),
        "source_id": np.array(["A", "B", "C"])[rng.integers(0, 3, n)],
        "event_id": np.arange(n)})
    assert len(q.find_matches(df)) > 0
    _assert_same(text, df)


@pytest.mark.parametrize("column", [
    ["a", "b", None, "c", "a", "b", "c", "c"],
    ["a", "b", np.nan, "c", "a", "b", "c", "c"],
    ["a", 1, "b", "c", "a", "b", "c", 2.5],  # mixed: not the string-code path
    [None] * 8,
])
def test_string_literal_conditions(column: list[object]) -> None:
    df = pd.DataFrame({"ts": range(8), "s": pd.Series(column, dtype=object)})
    for define in ("A AS s = 'a', B AS s <> 'c', C AS s = 'c'",
                   "A AS s = 'zz' OR s IS NULL, B AS NOT s = 'b', C AS s <> 'nope'"):
        text = ("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES COUNT(*) AS n, "
                f"LAST(B.ts) AS lb PATTERN (A B* C+) DEFINE {define})")
        _assert_same(text, df)


@settings(max_examples=300, deadline=None)
@given(parts=st.lists(st.lists(st.tuples(st.integers(-2**61, 2**61), st.booleans()),
                               max_size=8), min_size=1, max_size=4),
       limit=st.sampled_from([-1, 0, 1, 7, 2**40, 2**62, 2**63 - 1]),
       descending=st.booleans(), small=st.booleans())
def test_within_horizon_of_integer_keys_equals_row_by_row(
        parts: list[list[tuple[int, bool]]], limit: int, descending: bool,
        small: bool) -> None:
    """The sort-and-search horizon for integer order values against `inside` tried row by
    row: one past the last row from s on that may join a match started at s. ``small``
    keys (-50..50) take the packed search, most wide ones the ranked one; both searches
    are checked on their own where they apply."""
    from cep_core.runtime.fast import _Window
    key_l: list[int] = []
    has_l: list[bool] = []
    for rows in parts:  # each partition sorted by its order value, then a gap
        rows = sorted(((k % 101 - 50 if small else k), h) for k, h in rows)
        rows = rows[::-1] if descending else rows
        key_l += [k for k, _ in rows] + [0]
        has_l += [h for _, h in rows] + [False]
    key, has = np.array(key_l, dtype=np.int64), np.array(has_l)
    n = len(key)
    idx = np.arange(n)
    nn_run = np.minimum.accumulate(np.where(has, n, idx)[::-1])[::-1] - idx
    window = _Window(key, nn_run, limit, descending)
    s = np.arange(n, dtype=np.int64)
    expected = []
    for start in range(n):
        r = start
        while r < start + nn_run[start] and window.inside(np.array([start]), np.array([r]))[0]:
            r += 1
        expected.append(r)
    assert window.horizon(s).tolist() == expected
    if limit < 0 or not has.any():
        return
    present = key[has]
    k = (present.max() - key if descending else key - present.min()).astype(np.uint64)
    run_start = has & ~np.concatenate(([False], has[:-1]))
    run = np.cumsum(run_start, dtype=np.int64)
    want = np.array(expected)[has]
    assert window._ranked_horizon(s, k, has, run)[has].tolist() == want.tolist()
    packed = window._packed_horizon(s, k, has, run_start, run)
    if small:
        assert packed is not None
    if packed is not None:
        assert packed[has].tolist() == want.tolist()
