"""CAST, LIKE, string functions and COUNT(DISTINCT ...) in DEFINE and MEASURES."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from mr_helpers import rows, run, seq

import cep_core
from cep_core.compile.expressions import Scope
from cep_core.language.parser import parse, parse_expression
from cep_core.language.printer import to_sql
from cep_core.runtime.vectorized import _row_by_row, evaluate_condition

T0 = pd.Timestamp("2024-01-01 10:30")


def _measure(expr: str, df: pd.DataFrame | None = None) -> object:
    """The value of ``expr`` as a MEASURE over a one-row match on the first row."""
    df = seq(["abc"], "s") if df is None else df
    out = run(f"ORDER BY id MEASURES {expr} AS m ONE ROW PER MATCH PATTERN (A) DEFINE A AS id = 1",
              df)
    return rows(out)[0][0]


# ----------------------------------------------------------------------------- CAST


@pytest.mark.parametrize(("expr", "expected"), [
    ("CAST('42' AS BIGINT)", 42),
    ("CAST(' -7 ' AS INTEGER)", -7),
    ("CAST(2.5 AS INT)", 3),  # half away from zero, as Trino
    ("CAST(-2.5 AS BIGINT)", -3),
    ("CAST(TRUE AS INTEGER)", 1),
    ("CAST('1.25' AS DOUBLE)", 1.25),
    ("CAST(3 AS REAL)", 3.0),
    ("CAST(2.345 AS DECIMAL(10,2))", 2.35),
    ("CAST(12 AS VARCHAR)", "12"),
    ("CAST('abcdef' AS VARCHAR(3))", "abc"),
    ("CAST(FALSE AS STRING)", "false"),
    ("CAST('true' AS BOOLEAN)", True),
    ("CAST(0 AS BOOLEAN)", False),
    ("CAST('2024-01-01 10:30' AS TIMESTAMP)", T0),
    ("CAST(TIMESTAMP '2024-01-01 10:30' AS DATE)", pd.Timestamp("2024-01-01")),
    ("CAST(NULL AS BIGINT)", None),
    ("CAST(NULL AS DATE)", None),
])
def test_cast_values(expr: str, expected: object) -> None:
    assert _measure(expr) == expected


def test_cast_in_define_and_measures() -> None:
    df = seq(["5", "x7", "12", None, "3"], "s")
    out = run("ORDER BY id MEASURES FIRST(A.id) AS f, SUM(CAST(A.s AS BIGINT)) AS total "
              "ONE ROW PER MATCH PATTERN (A+) DEFINE A AS CAST(SUBSTR(s, 1, 1) AS VARCHAR) "
              "IN ('5', '1')", df)
    assert rows(out) == [(1, 5), (3, 12)]


@pytest.mark.parametrize(("expr", "message"), [
    ("CAST('abc' AS BIGINT)", "cannot cast str 'abc' to BIGINT"),
    ("CAST('1.5' AS INTEGER)", "cannot cast str '1.5' to INTEGER"),
    ("CAST('maybe' AS BOOLEAN)", "cannot cast str 'maybe' to BOOLEAN"),
    ("CAST(5 AS TIMESTAMP)", "cannot cast int 5 to TIMESTAMP"),
    ("CAST('nope' AS DATE)", "cannot cast str 'nope' to DATE"),
])
def test_cast_errors_name_value_type_and_position(expr: str, message: str) -> None:
    with pytest.raises(cep_core.QueryError) as info:
        _measure(expr)
    assert message in info.value.message
    assert (info.value.line, info.value.column) == (1, 55)


def test_cast_error_in_define_has_position() -> None:
    df = seq(["1", "oops"], "s")
    with pytest.raises(cep_core.QueryError) as info:
        cep_core.match_recognize("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id PATTERN (A+)\n"
                                 "  DEFINE A AS CAST(s AS BIGINT) > 0)", {"t": df})
    assert "cannot cast str 'oops' to BIGINT" in info.value.message
    assert (info.value.line, info.value.column) == (2, 15)


@pytest.mark.parametrize(("text", "where"), [
    ("CAST(x AS BLOB)", (1, 11)),
    ("CAST(x AS DECIMAL(a))", (1, 19)),
    ("CAST(x BIGINT)", (1, 8)),
])
def test_cast_parse_errors(text: str, where: tuple[int, int]) -> None:
    with pytest.raises(cep_core.QueryError) as info:
        parse_expression(text)
    assert (info.value.line, info.value.column) == where


# ----------------------------------------------------------------------------- LIKE


@pytest.mark.parametrize(("expr", "expected"), [
    ("'abc' LIKE 'a%'", True),
    ("'abc' LIKE 'a_c'", True),
    ("'abc' LIKE 'a_'", False),
    ("'abc' LIKE '%'", True),
    ("'' LIKE '%'", True),
    ("'a.c' LIKE 'a.c'", True),
    ("'abc' LIKE 'a.c'", False),
    ("'ABC' LIKE 'abc'", False),  # case-sensitive
    ("'abc' NOT LIKE 'b%'", True),
    ("'50%' LIKE '50!%' ESCAPE '!'", True),
    ("'500' LIKE '50!%' ESCAPE '!'", False),
    ("'a_b' LIKE 'a\\_b' ESCAPE '\\'", True),
    ("'line1\nline2' LIKE 'line1%'", True),
    ("NULL LIKE 'a%'", None),
    ("'abc' LIKE NULL", None),
    ("'abc' NOT LIKE NULL", None),
    ("'abc' LIKE 'a%' ESCAPE NULL", None),
])
def test_like_values(expr: str, expected: object) -> None:
    assert _measure(expr) == expected


def test_like_in_define() -> None:
    df = seq(["start-1", "mid", None, "start-2", "stop", "mid"], "s")
    out = run("ORDER BY id MEASURES FIRST(A.id) AS a, LAST(B.id) AS b ONE ROW PER MATCH "
              "PATTERN (A B+) DEFINE A AS s LIKE 'start-_', B AS s NOT LIKE 'st%'", df)
    assert rows(out) == [(1, 2)]


@pytest.mark.parametrize(("expr", "message"), [
    ("'a' LIKE 'a' ESCAPE 'xy'", "single character"),
    ("'a' LIKE 'a!' ESCAPE '!'", "must be followed by"),
    ("id LIKE 'a%'", "LIKE needs strings"),
])
def test_like_errors(expr: str, message: str) -> None:
    with pytest.raises(cep_core.QueryError) as info:
        _measure(expr)
    assert message in info.value.message
    # the position of the LIKE keyword; the measure starts at column 55
    assert (info.value.line, info.value.column) == (1, 55 + expr.index("LIKE"))


# ----------------------------------------------------------------------------- strings


@pytest.mark.parametrize(("expr", "expected"), [
    ("'ab' || 'cd' || 1", "abcd1"),
    ("s || NULL", None),
    ("CONCAT(s, '-', 2)", "abc-2"),
    ("CONCAT(s, NULL)", None),
    ("SUBSTR('hello', 2)", "ello"),
    ("SUBSTR('hello', 2, 3)", "ell"),
    ("SUBSTRING('hello', 1, 1)", "h"),
    ("SUBSTR('hello', -3)", "llo"),
    ("SUBSTR('hello', -3, 2)", "ll"),
    ("SUBSTR('hello', 0)", ""),
    ("SUBSTR('hello', 9)", ""),
    ("SUBSTR('hello', 4, 10)", "lo"),
    ("SUBSTR(NULL, 1)", None),
    ("SUBSTR('hello', 1, NULL)", None),
    ("TRIM('  a b  ')", "a b"),
    ("LTRIM('  a ')", "a "),
    ("RTRIM('  a ')", "  a"),
    ("TRIM(NULL)", None),
    ("REPLACE('a-b-c', '-', '+')", "a+b+c"),
    ("REPLACE('a-b-c', '-')", "abc"),
    ("REPLACE(NULL, 'a', 'b')", None),
])
def test_string_functions(expr: str, expected: object) -> None:
    assert _measure(expr) == expected


def test_substr_negative_length_is_an_error() -> None:
    with pytest.raises(cep_core.QueryError) as info:
        _measure("SUBSTR(s, 1, -1)")
    assert "SUBSTR" in info.value.message and "negative" in info.value.message


def test_string_functions_in_define_with_prev() -> None:
    df = seq([" x1", "x2 ", "y3", "x4"], "s")
    out = run("ORDER BY id MEASURES FIRST(A.id) AS a, LAST(A.id) AS b ONE ROW PER MATCH "
              "PATTERN (A+) DEFINE A AS SUBSTR(TRIM(s), 1, 1) = 'x' "
              "AND REPLACE(COALESCE(PREV(s), 'x'), 'y', 'x') LIKE '%x%'", df)
    # row 3: 'y3' fails; row 4: PREV is 'y3' -> 'x3', which matches '%x%'
    assert rows(out) == [(1, 2), (4, 4)]


# ----------------------------------------------------------------------------- COUNT(DISTINCT)


def test_count_distinct_running_and_final() -> None:
    df = seq(["a", "b", "a", None, "c", "stop"], "s")
    out = run("ORDER BY id MEASURES RUNNING COUNT(DISTINCT A.s) AS r, "
              "FINAL COUNT(DISTINCT A.s) AS f, COUNT(A.s) AS c "
              "ALL ROWS PER MATCH PATTERN (A+) DEFINE A AS COALESCE(s, '') <> 'stop'", df,
              select="id, r, f, c")
    assert rows(out) == [(1, 1, 3, 1), (2, 2, 3, 2), (3, 2, 3, 3), (4, 2, 3, 3),
                         (5, 3, 3, 4)]


def test_count_distinct_in_define() -> None:
    df = seq([1, 1, 2, 1, 3, 2], "v")
    out = run("ORDER BY id MEASURES FIRST(A.id) AS a, LAST(A.id) AS b ONE ROW PER MATCH "
              "PATTERN (A+) DEFINE A AS COUNT(DISTINCT A.v) <= 2", df)
    assert rows(out) == [(1, 4), (5, 6)]


@pytest.mark.parametrize(("text", "where"), [
    ("SUM(DISTINCT x)", (1, 5)),
    ("COUNT(DISTINCT *)", (1, 16)),
    ("COUNT(DISTINCT x, y)", (1, 1)),
])
def test_distinct_errors(text: str, where: tuple[int, int]) -> None:
    with pytest.raises(cep_core.QueryError) as info:
        parse_expression(text)
    assert (info.value.line, info.value.column) == where


# ----------------------------------------------------------------------------- round trips


@pytest.mark.parametrize("text", [
    "CAST(x AS BIGINT)", "CAST(x + 1 AS DECIMAL(10,2))", "CAST(s AS VARCHAR(5)) = 'a'",
    "CAST(CAST(x AS VARCHAR) AS DATE)", "s LIKE 'a%'", "s NOT LIKE 'a!%' ESCAPE '!'",
    "(s LIKE 'a') = TRUE", "s || 'x' LIKE 'a%' || 'b'", "NOT s LIKE 'a'",
    "SUBSTRING(s, 1, 2) || TRIM(s)", "REPLACE(s, 'a', 'b')", "COUNT(DISTINCT A.x)",
    "FINAL COUNT(DISTINCT x + 1)", "CAST(x AS TIMESTAMP) > TIMESTAMP '2024-01-01'",
])
def test_round_trip(text: str) -> None:
    tree = parse_expression(text)
    assert parse_expression(to_sql(tree)) == tree


def test_round_trip_query() -> None:
    text = ("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES COUNT(DISTINCT A.s) AS n, "
            "CAST(LAST(A.s) AS DOUBLE) AS d PATTERN (A+) DEFINE A AS s LIKE '1%' "
            "AND CAST(s AS BIGINT) > 0)")
    tree = parse(text)
    assert parse(to_sql(tree)) == tree


# ----------------------------------------------------------------------------- vectorised


FRAME = pd.DataFrame({
    "s": ["abc", None, "a_c", "ABC", "50%", "", "xbc"],
    "x": [1.5, np.nan, -2.5, 0.0, 3.0, 2.0, 7.0],
    "i": [1, 2, 3, 4, 5, 6, 7],
})


@pytest.mark.parametrize("cond", [
    "s LIKE 'a%'", "s NOT LIKE '_bc'", "s LIKE 'a!_c' ESCAPE '!'", "s LIKE '%!%' ESCAPE '!'",
    "s LIKE ''", "s LIKE NULL", "s NOT LIKE 'x%' OR x > 2", "CAST(x AS BIGINT) >= 2",
    "CAST(i AS VARCHAR) || s LIKE '1%'", "SUBSTR(s, 2) = 'bc'", "TRIM(s) = ''",
    "REPLACE(s, 'b', '_') LIKE 'a!_c' ESCAPE '!'", "CAST(s IS NULL AS INTEGER) = 1",
])
def test_vectorised_agrees_with_row_by_row(cond: str) -> None:
    scope = Scope(list(FRAME.columns), {"A": frozenset([0])}, "DEFINE", "A")
    expr = parse_expression(cond)
    assert evaluate_condition(expr, FRAME, scope).tolist() == _row_by_row(
        expr, FRAME, scope).tolist()


@pytest.mark.parametrize("cond", [
    "s LIKE 'a%'", "CAST(SUBSTR(s, 1, 1) AS VARCHAR) = 'a'",
    "CAST(PREV(x) AS BIGINT) < CAST(x AS BIGINT)", "PREV(s) NOT LIKE '%c'",
])
def test_fast_and_general_engines_agree(cond: str) -> None:
    df = FRAME.assign(id=range(len(FRAME)))
    text = ("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES FIRST(A.id) AS a, "
            f"LAST(A.id) AS b ONE ROW PER MATCH PATTERN (A+) DEFINE A AS {cond})")
    fast = cep_core.compile_query(text)
    general = cep_core.compile_query(text, engine="general")
    assert fast.engine == "fast"
    result = fast.run(fast.table_from({"t": df}))
    expected = general.run(general.table_from({"t": df}))
    assert rows(result) == rows(expected)
    assert rows(result)
