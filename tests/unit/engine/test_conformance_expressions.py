"""Conformance cases for row pattern expressions (issue 13 item 2): CLASSIFIER() and
MATCH_NUMBER() inside navigation and aggregates, aggregate FILTER (WHERE ...), expressions
in PARTITION BY / ORDER BY, a measure named like an input column, and invalid queries.
Each case names the documented behaviour it checks (Trino's docs, "MATCH_RECOGNIZE", and
where Trino is silent the SQL standard or Oracle's docs); lakecep extensions say so."""

from __future__ import annotations

import pandas as pd
import pytest
from mr_helpers import rows, run, seq

import cep_core
from cep_core import IncrementalMatcher, QueryError
from cep_core.language.parser import parse
from cep_core.language.printer import to_sql

# A V: 5 3 2 4 6 -> A B B C C, then 1 2 3 -> A C C (no B) does not match A B+ C+.
V = seq([5, 3, 2, 4, 6, 1, 2, 3])
PREFIX = len("SELECT * FROM t MATCH_RECOGNIZE (")
AT_MEASURE = PREFIX + len("ORDER BY id MEASURES ") + 1  # column of the first measure
V_SHAPE = ("ORDER BY id MEASURES {measures} {rows} PATTERN (A B+ C+) "
           "DEFINE B AS v < PREV(v), C AS v > PREV(v)")


def _v(measures: str, rows_per_match: str = "ALL ROWS PER MATCH",
       df: pd.DataFrame = V) -> pd.DataFrame:
    return run(V_SHAPE.format(measures=measures, rows=rows_per_match), df)


def _error(body: str, df: pd.DataFrame = V) -> QueryError:
    with pytest.raises(QueryError) as err:
        run(body, df)
    return err.value


def _incremental_same(query: str, df: pd.DataFrame) -> None:
    """Batch = incremental (one row per feed) on the same query."""
    expected = cep_core.match_recognize(query, {"t": df})
    inc = IncrementalMatcher(query)
    parts = [inc.feed_table(df.iloc[i:i + 1]) for i in range(len(df))] + [inc.flush_table()]
    filled = [p for p in parts if len(p)]
    got = pd.concat(filled, ignore_index=True) if filled else expected.iloc[:0]
    assert list(got.columns) == list(expected.columns)
    assert rows(got) == rows(expected)


# ----------------------------------------------------------------------------- CLASSIFIER

# Trino, "RUNNING and FINAL semantics": FINAL applies to FIRST/LAST; "nesting of navigation
# functions": a navigation's argument may be (or contain) CLASSIFIER(). FINAL
# LAST(CLASSIFIER()) is the last row's variable on every row of ALL ROWS PER MATCH, RUNNING
# LAST(CLASSIFIER()) (the default) the current row's.
def test_final_last_classifier_on_every_row() -> None:
    got = _v("CLASSIFIER() AS c, FINAL LAST(CLASSIFIER()) AS f, LAST(CLASSIFIER()) AS r")
    assert rows(got[["c", "f", "r"]]) == [("A", "C", "A"), ("B", "C", "B"), ("B", "C", "B"),
                                          ("C", "C", "C"), ("C", "C", "C")]


# Trino, "logical navigation functions": FIRST(e, n) is the (n+1)-th row of interest; with
# RUNNING semantics only the rows up to the current one are visible (NULL before that).
def test_first_classifier_with_offset() -> None:
    got = _v("FIRST(CLASSIFIER(), 1) AS f1, FINAL FIRST(CLASSIFIER(), 3) AS f3")
    assert rows(got[["f1", "f3"]]) == [(None, "C"), ("B", "C"), ("B", "C"), ("B", "C"),
                                       ("B", "C")]


# Trino, "physical navigation functions" with a CLASSIFIER argument (Trino's evaluation of
# a classifier pointer): a row outside the match has no classifier (NULL); every row of the
# match may be reached, also past the current row under RUNNING semantics.
def test_prev_and_next_classifier_stop_at_the_match() -> None:
    got = _v("PREV(CLASSIFIER()) AS p, NEXT(CLASSIFIER()) AS n, PREV(CLASSIFIER(), 2) AS p2")
    assert rows(got[["id", "p", "n", "p2"]]) == [
        (1, None, "B", None), (2, "A", "B", None), (3, "B", "C", "A"), (4, "B", "C", "B"),
        (5, "C", None, "B")]


# Trino: CLASSIFIER(U) limits the rows like a prefixed column; inside a navigation its
# variable must agree with the column references ("consistent in referred pattern
# variables"): LAST(CLASSIFIER(U) = 'A' OR U.totalprice > 10) is correct.
def test_classifier_of_a_subset_inside_navigation() -> None:
    got = run("ORDER BY id MEASURES LAST(CLASSIFIER(U) = 'C' OR U.v > 10) AS l, "
              "FINAL LAST(CLASSIFIER(U), 1) AS l1 ONE ROW PER MATCH PATTERN (A B+ C+) "
              "SUBSET U = (A, B) DEFINE B AS v < PREV(v), C AS v > PREV(v)", V)
    assert rows(got) == [(False, "B")]


@pytest.mark.parametrize("expr", ["LAST(A.v + B.v)", "LAST(CLASSIFIER(A) = 'A' OR B.v > 1)",
                                  "FIRST(CLASSIFIER() || A.v)", "PREV(CLASSIFIER(B) || v)"])
def test_navigation_mixing_variables_is_rejected(expr: str) -> None:
    err = _error(V_SHAPE.format(measures=f"{expr} AS x", rows=""))
    assert "same pattern variable" in str(err)
    assert (err.line, err.column) == (1, AT_MEASURE)


# Trino: "Pattern navigation functions require at least one column reference or classifier
# function inside of their first argument ... This is incorrect: LAST(1)".
@pytest.mark.parametrize("expr", ["LAST(1)", "PREV(MATCH_NUMBER())", "FIRST('x', 1)"])
def test_navigation_without_a_reference_is_rejected(expr: str) -> None:
    err = _error(V_SHAPE.format(measures=f"{expr} AS x", rows=""))
    assert "column reference or CLASSIFIER()" in str(err)
    assert err.column == AT_MEASURE


# Trino, "Usage of the classifier and match_number functions": both are allowed in
# aggregate arguments; the aggregate runs over the rows of the match (RUNNING by default).
def test_classifier_and_match_number_inside_aggregates() -> None:
    got = _v("SUM(CASE WHEN CLASSIFIER() = 'B' THEN v END) AS sb, "
             "COUNT(CASE WHEN CLASSIFIER() = 'C' THEN 1 END) AS nc, "
             "FINAL COUNT(CASE WHEN CLASSIFIER() = 'B' THEN 1 END) AS fb, "
             "SUM(MATCH_NUMBER()) AS sm, MAX(CLASSIFIER()) AS mx")
    assert rows(got[["sb", "nc", "fb", "sm", "mx"]]) == [
        (None, 0, 2, 1, "A"), (3, 0, 2, 2, "B"), (5, 0, 2, 3, "B"), (5, 1, 2, 4, "C"),
        (5, 2, 2, 5, "C")]


# Trino, aggregate arguments: CLASSIFIER(A) makes the aggregate run over A's rows
# ("max_by(CLASSIFIER(A), A.tax) /* aggregate over all rows matched to A */").
def test_classifier_of_a_variable_selects_the_aggregated_rows() -> None:
    got = _v("FINAL COUNT(CLASSIFIER(B)) AS nb, FINAL MIN(CLASSIFIER(C)) AS c", "")
    assert rows(got) == [(2, "C")]


# Trino, "Row pattern variable definitions": DEFINE allows the same special syntax as
# MEASURES; during matching the current row counts as mapped to the variable being
# tested, earlier rows keep their variables and later rows are not matched yet (NULL).
def test_classifier_navigation_in_define() -> None:
    df = seq([1, 1, 1, 1, 1, 1])
    body = ("ORDER BY id MEASURES CLASSIFIER() AS c, MATCH_NUMBER() AS m ALL ROWS PER MATCH "
            "PATTERN (S (A | B)+) DEFINE A AS PREV(CLASSIFIER()) <> 'A' AND "
            "NEXT(CLASSIFIER()) IS NULL, B AS PREV(CLASSIFIER()) = 'A' AND CLASSIFIER() = 'B'")
    got = run(body, df)
    assert rows(got[["id", "c", "m"]]) == [(1, "S", 1), (2, "A", 1), (3, "B", 1), (4, "A", 1),
                                           (5, "B", 1), (6, "A", 1)]
    _incremental_same(f"SELECT * FROM t MATCH_RECOGNIZE ({body})", df)


def test_classifier_aggregate_in_define() -> None:
    # B may repeat while fewer than two B rows are matched.
    df = seq([5, 4, 3, 2, 1])
    body = ("ORDER BY id MEASURES COUNT(B.*) AS nb, LAST(CLASSIFIER()) AS l ONE ROW PER MATCH "
            "PATTERN (A B+) DEFINE B AS COUNT(CASE WHEN CLASSIFIER() = 'B' THEN 1 END) <= 2")
    assert rows(run(body, df)) == [(2, "B"), (1, "B")]
    _incremental_same(f"SELECT * FROM t MATCH_RECOGNIZE ({body})", df)


def test_classifier_in_navigation_batch_equals_incremental() -> None:
    query = ("SELECT * FROM t MATCH_RECOGNIZE (" + V_SHAPE.format(
        measures="FINAL LAST(CLASSIFIER()) AS f, PREV(CLASSIFIER()) AS p, "
                 "NEXT(CLASSIFIER()) AS n, SUM(CASE WHEN CLASSIFIER() = 'B' THEN v END) AS s",
        rows="ALL ROWS PER MATCH") + ")")
    _incremental_same(query, V)


# Trino: RUNNING / FINAL precede FIRST, LAST or an aggregate only.
@pytest.mark.parametrize("expr", ["FINAL CLASSIFIER()", "RUNNING CLASSIFIER(A)"])
def test_running_final_on_classifier_is_rejected(expr: str) -> None:
    err = _error(V_SHAPE.format(measures=f"{expr} AS x", rows=""))
    assert "FINAL LAST(CLASSIFIER())" in str(err)
    assert err.column == AT_MEASURE


# ----------------------------------------------------------------------------- FILTER

# SQL:2016 (ISO/IEC 9075-2, <filter clause>): the aggregate runs over the rows for which the
# <search condition> is True. lakecep extension in MATCH_RECOGNIZE (Trino rejects FILTER in
# a pattern recognition context): the rows are the aggregate's visible rows (its variable;
# RUNNING or FINAL as without FILTER) where the condition is TRUE.
def test_filter_running_and_final_in_measures() -> None:
    got = _v("COUNT(*) FILTER (WHERE v > 2) AS n, FINAL COUNT(*) FILTER (WHERE v > 2) AS fn, "
             "SUM(C.v) FILTER (WHERE C.v > 4) AS sc, AVG(v) FILTER (WHERE v < 5) AS av")
    assert rows(got[["n", "fn", "sc", "av"]]) == [
        (1, 4, None, None), (2, 4, None, 3.0), (2, 4, None, 2.5), (3, 4, None, 3.0),
        (4, 4, 6, 3.0)]


def test_filter_counts_null_conditions_out() -> None:
    df = pd.DataFrame({"id": [1, 2, 3, 4], "x": [1, 2, 3, 4], "y": [1.0, None, 2.0, None]})
    got = run("ORDER BY id MEASURES SUM(A.x) FILTER (WHERE A.y IS NOT NULL) AS s, "
              "COUNT(A.*) FILTER (WHERE A.y > 1) AS n, COUNT(*) FILTER (WHERE NULL) AS z "
              "PATTERN (A+) DEFINE A AS TRUE", df)
    assert rows(got) == [(4, 1, 0)]


def test_filter_in_define() -> None:
    # B rows continue while at most one of them is above 2.
    df = seq([9, 3, 1, 4, 1, 5, 1])
    body = ("ORDER BY id MEASURES COUNT(B.*) AS nb ONE ROW PER MATCH PATTERN (A B+) "
            "DEFINE B AS COUNT(B.*) FILTER (WHERE B.v > 2) <= 1")
    assert rows(run(body, df)) == [(2,), (3,)]
    _incremental_same(f"SELECT * FROM t MATCH_RECOGNIZE ({body})", df)


def test_filter_with_classifier_and_batch_equals_incremental() -> None:
    query = ("SELECT * FROM t MATCH_RECOGNIZE (" + V_SHAPE.format(
        measures="COUNT(*) FILTER (WHERE CLASSIFIER() = 'B') AS nb, "
                 "FINAL SUM(v) FILTER (WHERE CLASSIFIER() <> 'A') AS s",
        rows="ALL ROWS PER MATCH") + ")")
    got = cep_core.match_recognize(query, {"t": V})
    assert rows(got[["nb", "s"]]) == [(0, 15), (1, 15), (2, 15), (2, 15), (2, 15)]
    _incremental_same(query, V)


def test_filter_prints_and_parses_back() -> None:
    text = ("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES FINAL COUNT(A.*) FILTER "
            "(WHERE A.v > 1 AND CLASSIFIER(A) = 'A') AS n PATTERN (A+) DEFINE A AS "
            "SUM(v) FILTER (WHERE v > 0) < 10)")
    tree = parse(text)
    assert parse(to_sql(tree)) == tree
    assert "FILTER (WHERE" in to_sql(tree)


def test_filter_is_a_non_reserved_word() -> None:
    # Trino's grammar: FILTER is non-reserved; it starts a filter only as FILTER (WHERE.
    df = pd.DataFrame({"id": [1, 2], "filter": [1, 2]})
    got = run("ORDER BY id MEASURES SUM(filter) AS filter PATTERN (filter+) "
              "DEFINE filter AS filter > 0", df)
    assert rows(got) == [(3,)]


@pytest.mark.parametrize(("measure", "message"), [
    ("LAST(v) FILTER (WHERE v > 0)", "applies to aggregates"),
    ("ABS(v) FILTER (WHERE v > 0)", "applies to aggregates"),
    ("MATCH_NUMBER() FILTER (WHERE v > 0)", "applies to aggregates"),
    ("SUM(A.v) FILTER (WHERE B.v > 0)", "same pattern variable"),
    ("COUNT(A.*) FILTER (WHERE B.v > 0)", "must use A"),
    ("SUM(v) FILTER (WHERE v + 1)", "must be boolean"),
    ("SUM(v) FILTER (WHERE COUNT(*) > 1)", "cannot be used inside SUM"),
    ("SUM(v) FILTER (WHERE PREV(v) > 1)", "cannot be used inside SUM"),
])
def test_invalid_filters_are_rejected_at_their_position(measure: str, message: str) -> None:
    err = _error(V_SHAPE.format(measures=f"{measure} AS x", rows=""))
    assert message in str(err)
    assert err.line == 1 and err.column >= AT_MEASURE


def test_filter_needs_where_and_a_closing_parenthesis() -> None:
    err = _error(V_SHAPE.format(measures="SUM(v) FILTER (WHERE v > 0 AS x", rows=""))
    assert "to close FILTER" in str(err)
    err = _error(V_SHAPE.format(measures="SUM(v) FILTER WHERE v > 0 AS x", rows=""))
    assert "expected FILTER (WHERE condition) after SUM(...)" in str(err)
    assert err.column == AT_MEASURE + len("SUM(v) ")


# ----------------------------------------------------------------------------- invalid queries

# Trino / SQL:2016: a DEFINE condition is a boolean expression.
@pytest.mark.parametrize("condition", ["v + 1", "'yes'", "CLASSIFIER()", "PREV(v)",
                                       "COUNT(*) FILTER (WHERE v > 0)"])
def test_non_boolean_define_is_rejected_at_the_condition(condition: str) -> None:
    body = f"ORDER BY id MEASURES COUNT(*) AS c PATTERN (A+) DEFINE A AS {condition}"
    err = _error(body)
    assert "must be boolean" in str(err)
    start = PREFIX + body.index(" AS " + condition) + 5
    assert err.line == 1 and start <= err.column < start + len(condition)


# ----------------------------------------------------------------------------- output names

# Trino docs, "Rows per match": ALL ROWS PER MATCH outputs the PARTITION BY columns, the
# ORDER BY columns, the measures and the remaining input columns; Trino's analyzer adds a
# measure as a field of its own, so a measure named like an input column is a second column
# of that name (neither replaces the other) and naming it later is ambiguous.
def test_measure_named_like_an_input_column_under_all_rows() -> None:
    df = pd.DataFrame({"p": ["k"] * 4, "id": [1, 2, 3, 4], "v": [3, 2, 4, 9], "w": [7] * 4})
    body = ("PARTITION BY p ORDER BY id MEASURES FINAL LAST(v) AS v, CLASSIFIER() AS w, "
            "MATCH_NUMBER() AS P ALL ROWS PER MATCH PATTERN (A B+ C) "
            "DEFINE B AS v < PREV(v), C AS v > PREV(v)")
    got = run(body, df)
    assert list(got.columns) == ["p", "id", "v", "w", "P", "v", "w"]
    assert rows(got) == [("k", 1, 4, "A", 1, 3, 7), ("k", 2, 4, "B", 1, 2, 7),
                         ("k", 3, 4, "C", 1, 4, 7)]
    for select, column in (("v", 8), ("id, W", 12)):
        with pytest.raises(QueryError, match="ambiguous") as err:
            run(body, df, select=select)
        assert (err.value.line, err.value.column) == (1, column)
    with pytest.raises(QueryError, match="ambiguous"):
        run(body, df, select="id", tail="ORDER BY v")
    # the unambiguous columns can still be selected and sorted by (an exact spelling first,
    # as for input columns: p is the partition column, P the measure)
    assert list(run(body, df, select="p, P").columns) == ["p", "P"]
    assert rows(run(body, df, select="id AS i", tail="ORDER BY id DESC")) == [(3,), (2,), (1,)]
    _incremental_same(f"SELECT * FROM t MATCH_RECOGNIZE ({body})", df)


def test_measure_named_like_a_column_on_an_empty_result() -> None:
    df = pd.DataFrame({"id": [1], "v": [1]})
    got = run("ORDER BY id MEASURES LAST(v) AS v ALL ROWS PER MATCH PATTERN (A B) "
              "DEFINE B AS v > 5", df)
    assert list(got.columns) == ["id", "v", "v"] and len(got) == 0
    got = run("PARTITION BY v ORDER BY id MEASURES LAST(id) AS v ONE ROW PER MATCH "
              "PATTERN (A B) DEFINE B AS v > 5", df)
    assert list(got.columns) == ["v", "v"] and len(got) == 0


# ----------------------------------------------------------------------------- key expressions

# lakecep extension: Trino and Oracle take column references in PARTITION BY / ORDER BY
# (Trino: "Expected column reference"); lakecep also takes an expression of the input row.
# Its output column (ONE ROW: the partition keys, ALL ROWS: partition and order keys) is
# named by the expression as lakecep prints it (docs/query-language.md).
TICKS = pd.DataFrame({
    "sym": ["ab", "AB", "cd", "ab", "CD"],
    "ts": pd.to_datetime([f"2024-01-01 00:00:0{i}" for i in (1, 2, 3, 4, 5)]),
    "price": [3.0, 2.0, None, 4.0, 1.0]})


def test_partition_by_expression_names_its_column() -> None:
    got = run("PARTITION BY lower(sym) ORDER BY ts MEASURES COUNT(*) AS c, FIRST(price) AS f "
              "PATTERN (A+) DEFINE A AS TRUE", TICKS)
    assert list(got.columns) == ["LOWER(sym)", "c", "f"]
    assert rows(got) == [("ab", 3, 3.0), ("cd", 2, None)]
    assert rows(run("PARTITION BY lower(sym) ORDER BY ts MEASURES COUNT(*) AS c PATTERN (A+) "
                    "DEFINE A AS TRUE", TICKS, select='"LOWER(sym)" AS s, c')) == [
        ("ab", 3), ("cd", 2)]


def test_order_by_expression_with_interval_under_all_rows() -> None:
    body = ("PARTITION BY lower(sym) ORDER BY ts + INTERVAL '1' SECOND MEASURES "
            "RUNNING COUNT(*) AS c ALL ROWS PER MATCH PATTERN (A+) DEFINE A AS TRUE")
    got = run(body, TICKS)
    assert list(got.columns) == ["LOWER(sym)", "ts + INTERVAL '1' SECOND", "c", "sym", "ts",
                                 "price"]
    assert got["ts + INTERVAL '1' SECOND"].tolist() == (
        got["ts"] + pd.Timedelta(seconds=1)).tolist()
    assert rows(got[["c", "sym"]]) == [(1, "ab"), (2, "AB"), (3, "ab"), (1, "cd"), (2, "CD")]
    _incremental_same(f"SELECT * FROM t MATCH_RECOGNIZE ({body})", TICKS)


def test_order_by_expression_desc_nulls_first() -> None:
    got = run("ORDER BY price * 2 DESC NULLS FIRST MEASURES FIRST(price) AS f, "
              "FIRST(price, 1) AS s, LAST(price) AS l PATTERN (A+) DEFINE A AS TRUE", TICKS)
    assert rows(got) == [(None, 4.0, 1.0)]


def test_key_expressions_print_and_parse_back() -> None:
    text = ("SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY lower(sym), sym ORDER BY "
            "ts + INTERVAL '1' SECOND DESC NULLS LAST, price * 2 MEASURES COUNT(*) AS c "
            "PATTERN (A) DEFINE A AS TRUE)")
    tree = parse(text)
    assert parse(to_sql(tree)) == tree
    compiled = cep_core.compile_query(text)
    assert compiled.partition_by == ["LOWER(sym)", "sym"]
    assert compiled.order_by == [("ts + INTERVAL '1' SECOND", True), ("price * 2", False)]


def test_an_input_column_named_like_the_key_is_its_value() -> None:
    df = TICKS.assign(**{"LOWER(sym)": ["x", "x", "x", "y", "y"]})
    got = run("PARTITION BY lower(sym) ORDER BY ts MEASURES COUNT(*) AS c PATTERN (A+) "
              "DEFINE A AS TRUE", df)
    assert rows(got) == [("x", 3), ("y", 2)]


@pytest.mark.parametrize(("keys", "message"), [
    ("PARTITION BY A.sym ORDER BY ts", "pattern variable"),
    ("ORDER BY PREV(ts)", "cannot be used in a ORDER BY expression"),
    ("PARTITION BY COUNT(*) ORDER BY ts", "cannot be used in a PARTITION BY expression"),
    ("PARTITION BY CLASSIFIER() ORDER BY ts", "cannot be used in a PARTITION BY expression"),
    ("PARTITION BY nosuch(sym) ORDER BY ts", "unknown function NOSUCH"),
])
def test_invalid_key_expressions_are_rejected(keys: str, message: str) -> None:
    body = f"{keys} MEASURES COUNT(*) AS c PATTERN (A+) DEFINE A AS TRUE"
    err = _error(body, TICKS)
    assert message in str(err)
    assert err.line == 1 and PREFIX < err.column <= PREFIX + len(keys)


def test_unknown_column_in_a_key_expression_points_at_it() -> None:
    body = "PARTITION BY lower(nosuch) ORDER BY ts MEASURES COUNT(*) AS c PATTERN (A+)"
    err = _error(body, TICKS)
    assert "unknown column 'nosuch'" in str(err)
    assert err.column == PREFIX + body.index("nosuch") + 1


def test_key_expressions_rejected_with_uncertain_time() -> None:
    with pytest.raises(QueryError, match="expressions cannot be combined with UNCERTAIN TIME"):
        cep_core.compile_query(
            "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY lower(s) ORDER BY lo MEASURES "
            "COUNT(*) AS c PATTERN (A B) UNCERTAIN TIME BETWEEN lo AND hi "
            "DEFINE A AS TRUE)")
