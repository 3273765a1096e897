"""Row pattern semantics, case by case; expected outputs follow SQL:2016 as Trino and
Oracle document it (worked out by hand from the input rows)."""

from __future__ import annotations

import pandas as pd
import pytest
from mr_helpers import rows, run, seq

import cep_core

# ----------------------------------------------------------------------------- preference


def test_greedy_quantifier_takes_as_many_rows_as_possible() -> None:
    df = seq([1, 1, 1, 2])
    out = run("ORDER BY id MEASURES FIRST(A.id) AS a0, LAST(A.id) AS a1, B.id AS b "
              "PATTERN (A+ B) DEFINE A AS v = 1", df)
    assert rows(out) == [(1, 3, 4)]


def test_reluctant_quantifier_takes_as_few_rows_as_possible() -> None:
    df = seq([1, 1, 1, 2])
    out = run("ORDER BY id MEASURES FIRST(A.id) AS a0, LAST(A.id) AS a1, B.id AS b "
              "PATTERN (A+? B) DEFINE A AS v = 1", df)
    # B is undefined (always true): A takes one row, B the next; then restart past it.
    assert rows(out) == [(1, 1, 2), (3, 3, 4)]


def test_reluctant_optional_prefers_skipping() -> None:
    df = seq([1, 2])
    out = run("ORDER BY id MEASURES COUNT(A.*) AS na, B.id AS b PATTERN (A?? B) "
              "DEFINE A AS v = 1", df)
    assert rows(out) == [(0, 1), (0, 2)]


def test_alternation_prefers_the_left_branch() -> None:
    df = seq([5])
    left = run("ORDER BY id MEASURES CLASSIFIER() AS c PATTERN (A | B)", df)
    right = run("ORDER BY id MEASURES CLASSIFIER() AS c PATTERN (B | A)", df)
    assert rows(left) == [("A",)]
    assert rows(right) == [("B",)]


def test_alternation_backtracks_into_the_right_branch_when_needed() -> None:
    df = seq(["a", "b", "c"])
    out = run("ORDER BY id MEASURES CLASSIFIER() AS c, COUNT(*) AS n ALL ROWS PER MATCH "
              "PATTERN ((A | A B) C) DEFINE B AS v = 'b', C AS v = 'c'", df,
              select="id, c, n")
    assert rows(out) == [(1, "A", 1), (2, "B", 2), (3, "C", 3)]


def test_greedy_star_gives_back_rows_to_let_the_rest_match() -> None:
    df = seq([1, 1, 1])
    out = run("ORDER BY id MEASURES COUNT(A.*) AS na, COUNT(B.*) AS nb "
              "PATTERN (A* B B)", df)
    assert rows(out) == [(1, 2)]


@pytest.mark.parametrize(("quantifier", "expected"), [
    ("{2}", [(2,), (2,)]),
    ("{2,3}", [(3,), (2,)]),
    ("{2,3}?", [(2,), (2,)]),
    ("{,2}", [(2,), (2,), (1,)]),
    ("{4,}", [(5,)]),
    ("{1,}?", [(1,), (1,), (1,), (1,), (1,)]),
])
def test_bounded_quantifiers(quantifier: str, expected: list[tuple[int]]) -> None:
    df = seq([1, 1, 1, 1, 1])
    out = run(f"ORDER BY id MEASURES COUNT(*) AS n PATTERN (A{quantifier})", df)
    assert rows(out) == expected


def test_permute_prefers_lexicographic_order_and_accepts_any_order() -> None:
    df = seq(["b", "a", "x", "x"])
    out = run("ORDER BY id MEASURES CLASSIFIER() AS c ALL ROWS PER MATCH "
              "PATTERN (PERMUTE(A, B)) DEFINE A AS v = 'a', B AS v = 'b'", df,
              select="id, c")
    assert rows(out) == [(1, "B"), (2, "A")]
    both = run("ORDER BY id MEASURES CLASSIFIER() AS c ALL ROWS PER MATCH "
               "PATTERN (PERMUTE(A, B))", seq([0, 0]), select="id, c")
    assert rows(both) == [(1, "A"), (2, "B")]


def test_empty_pattern_gives_one_empty_match_per_row() -> None:
    out = run("ORDER BY id MEASURES MATCH_NUMBER() AS m, COUNT(*) AS n PATTERN ()",
              seq([1, 2, 3]))
    assert rows(out) == [(1, 0), (2, 0), (3, 0)]


def test_nullable_loop_body_terminates() -> None:
    out = run("ORDER BY id MEASURES COUNT(A.*) AS n PATTERN ((A?)*) DEFINE A AS v > 0",
              seq([1, 1, 0, 1]))
    # From row 1: A A (2 rows); row 3 gives an empty match; row 4 one row.
    assert rows(out) == [(2,), (0,), (1,)]


# ----------------------------------------------------------------------------- skipping


def test_skip_past_last_row_and_to_next_row() -> None:
    df = seq([0, 0, 0, 0])
    past = run("ORDER BY id MEASURES A.id AS a, B.id AS b PATTERN (A B)", df)
    nxt = run("ORDER BY id MEASURES A.id AS a, B.id AS b AFTER MATCH SKIP TO NEXT ROW "
              "PATTERN (A B)", df)
    assert rows(past) == [(1, 2), (3, 4)]
    assert rows(nxt) == [(1, 2), (2, 3), (3, 4)]


@pytest.mark.parametrize(("skip", "starts"), [
    ("TO LAST B", [1, 2, 3]),
    ("TO B", [1, 2, 3]),
    ("TO FIRST C", [1, 3]),
    ("PAST LAST ROW", [1]),
])
def test_skip_to_first_and_last_variable(skip: str, starts: list[int]) -> None:
    df = seq([0, 0, 0, 0, 0, 0])[:5]
    out = run(f"ORDER BY id MEASURES A.id AS a AFTER MATCH SKIP {skip} PATTERN (A B C)", df)
    assert [r[0] for r in rows(out)] == starts


def test_skip_to_the_first_row_of_the_match_is_an_error() -> None:
    query = "ORDER BY id AFTER MATCH SKIP TO FIRST A PATTERN (A B)"
    with pytest.raises(cep_core.QueryError, match="loop forever") as info:
        run(query, seq([0, 0, 0]))
    assert info.value.column == len("SELECT * FROM t MATCH_RECOGNIZE (") + query.index(
        "A PATTERN") + 1


def test_skip_to_a_variable_missing_from_the_match_is_an_error() -> None:
    with pytest.raises(cep_core.QueryError, match="no row mapped to B") as info:
        run("ORDER BY id AFTER MATCH SKIP TO LAST B PATTERN (A B?) DEFINE B AS v = 9",
            seq([1, 2, 3]))
    assert info.value.line == 1


def test_skip_to_next_row_after_an_empty_match_moves_on() -> None:
    out = run("ORDER BY id MEASURES MATCH_NUMBER() AS m, COUNT(A.*) AS n "
              "AFTER MATCH SKIP TO NEXT ROW PATTERN (A*) DEFINE A AS v > 0",
              seq([0, 1, 1]))
    assert rows(out) == [(1, 0), (2, 2), (3, 1)]


# ----------------------------------------------------------------------------- empty/unmatched


def test_one_row_per_match_outputs_empty_matches() -> None:
    out = run("ORDER BY id MEASURES MATCH_NUMBER() AS m, COUNT(*) AS n, CLASSIFIER() AS c, "
              "A.id AS a PATTERN (A*) DEFINE A AS v > 0", seq([0, 1, 1, 0]))
    assert rows(out) == [(1, 0, None, None), (2, 2, "A", 3), (3, 0, None, None)]


def test_all_rows_show_omit_and_unmatched() -> None:
    df = seq([0, 1, 1, 0])
    body = ("ORDER BY id MEASURES MATCH_NUMBER() AS m, CLASSIFIER() AS c ALL ROWS PER MATCH {} "
            "PATTERN ({}) DEFINE A AS v > 0")
    show = run(body.format("SHOW EMPTY MATCHES", "A*"), df, select="id, m, c")
    omit = run(body.format("OMIT EMPTY MATCHES", "A*"), df, select="id, m, c")
    unmatched = run(body.format("WITH UNMATCHED ROWS", "A+"), df, select="id, m, c")
    default = run(body.format("", "A*"), df, select="id, m, c")
    assert rows(show) == [(1, 1, None), (2, 2, "A"), (3, 2, "A"), (4, 3, None)]
    assert rows(default) == rows(show)
    assert rows(omit) == [(2, 2, "A"), (3, 2, "A")]
    assert rows(unmatched) == [(1, None, None), (2, 1, "A"), (3, 1, "A"), (4, None, None)]


def test_all_rows_column_order_follows_trino() -> None:
    df = pd.DataFrame({"x": [10, 20], "p": ["k", "k"], "id": [1, 2], "v": [1, 1]})
    out = run("PARTITION BY p ORDER BY id MEASURES CLASSIFIER() AS c ALL ROWS PER MATCH "
              "PATTERN (A)", df)
    assert list(out.columns) == ["p", "id", "c", "x", "v"]
    assert rows(out) == [("k", 1, "A", 10, 1), ("k", 2, "A", 20, 1)]


def test_one_row_per_match_columns_are_partition_then_measures() -> None:
    df = pd.DataFrame({"p": ["b", "a"], "id": [1, 1], "v": [1, 1]})
    out = run("PARTITION BY p ORDER BY id MEASURES A.v AS av PATTERN (A)", df)
    assert list(out.columns) == ["p", "av"]
    assert rows(out) == [("a", 1), ("b", 1)]


# ----------------------------------------------------------------------------- anchors/excl.


def test_anchors_match_only_at_partition_edges() -> None:
    df = pd.DataFrame({"p": [1, 1, 1, 2, 2], "id": [1, 2, 3, 4, 5], "v": [0] * 5})
    start = run("PARTITION BY p ORDER BY id MEASURES A.id AS a PATTERN (^ A)", df)
    end = run("PARTITION BY p ORDER BY id MEASURES A.id AS a PATTERN (A $)", df)
    assert rows(start) == [(1, 1), (2, 4)]
    assert rows(end) == [(1, 3), (2, 5)]


def test_exclusion_hides_rows_from_all_rows_output_but_not_from_measures() -> None:
    df = seq(["a", "b", "b", "c"])
    body = ("ORDER BY id MEASURES COUNT(B.*) AS nb, CLASSIFIER() AS c {} "
            "PATTERN (A {{- B+ -}} C) DEFINE A AS v = 'a', B AS v = 'b', C AS v = 'c'")
    all_rows = run(body.format("ALL ROWS PER MATCH"), df, select="id, nb, c")
    one = run(body.format(""), df)
    assert rows(all_rows) == [(1, 0, "A"), (4, 2, "C")]
    assert rows(one) == [(2, "C")]
    matches = cep_core.compile_query(
        "SELECT * FROM t MATCH_RECOGNIZE (" + body.format("") + ")").find_matches(df)
    assert [(m.rows, m.labels) for m in matches] == [((0, 3), ("A", "C"))]


# ----------------------------------------------------------------------------- expressions


def test_running_and_final_semantics_in_all_rows() -> None:
    df = seq([3, 1, 2])
    out = run("ORDER BY id MEASURES RUNNING LAST(A.v) AS r, FINAL LAST(A.v) AS f, "
              "COUNT(*) AS n, FINAL COUNT(*) AS fn, SUM(v) AS s, FINAL MAX(v) AS mx "
              "ALL ROWS PER MATCH PATTERN (A+)", df, select="id, r, f, n, fn, s, mx")
    assert rows(out) == [(1, 3, 2, 1, 3, 3, 3), (2, 1, 2, 2, 3, 4, 3), (3, 2, 2, 3, 3, 6, 3)]


def test_navigation_with_offsets() -> None:
    df = seq([10, 20, 30, 40, 50])
    out = run("ORDER BY id MEASURES PREV(A.v) AS p1, PREV(A.v, 2) AS p2, NEXT(A.v) AS n1, "
              "FIRST(B.v) AS f0, FIRST(B.v, 1) AS f1, LAST(B.v, 1) AS l1, "
              "PREV(FIRST(B.v), 1) AS pf, NEXT(LAST(B.v, 2), 3) AS nl, FIRST(B.v, 5) AS none "
              "PATTERN (B+ A) DEFINE A AS v = 40", df)
    assert rows(out) == [(30, 20, 50, 10, 20, 20, None, 40, None)]


def test_prev_in_define_sees_rows_before_the_match() -> None:
    df = seq([5, 4, 6, 7])
    out = run("ORDER BY id MEASURES FIRST(U.id) AS s, LAST(U.id) AS e PATTERN (U+) "
              "DEFINE U AS v > PREV(v)", df)
    # Row 1 has no previous row (NULL -> false); rows 3, 4 go up.
    assert rows(out) == [(3, 4)]


def test_define_can_reference_other_variables() -> None:
    df = seq([1, 5, 3, 7])
    out = run("ORDER BY id MEASURES A.id AS a, B.id AS b PATTERN (A B) "
              "DEFINE B AS B.v > A.v + 2", df)
    assert rows(out) == [(1, 2), (3, 4)]


def test_aggregates_in_define_run_over_the_match_so_far() -> None:
    df = pd.DataFrame({"id": range(1, 7), "qty": [4, 3, 2, 5, 1, 1]})
    out = run("ORDER BY id MEASURES FIRST(B.id) AS s, LAST(B.id) AS e, SUM(B.qty) AS total "
              "PATTERN (B+) DEFINE B AS SUM(B.qty) < 10", df)
    assert rows(out) == [(1, 3, 9), (4, 6, 7)]


def test_count_variants_and_avg_min_max() -> None:
    df = pd.DataFrame({"id": range(1, 5), "v": [2.0, None, 4.0, 6.0]})
    out = run("ORDER BY id MEASURES COUNT(*) AS n, COUNT(A.*) AS na, COUNT(v) AS nv, "
              "AVG(v) AS av, MIN(A.v) AS mn, MAX(v) AS mx, SUM(B.v) AS sb "
              "PATTERN (A+ B) DEFINE A AS v IS NULL OR v < 5", df)
    assert rows(out) == [(4, 3, 3, 4.0, 2.0, 6.0, 6.0)]


def test_subset_covers_its_members() -> None:
    df = seq(["a", "b", "b", "c"])
    out = run("ORDER BY id MEASURES COUNT(U.*) AS nu, LAST(U.id) AS lu, FIRST(U.id) AS fu "
              "PATTERN (A B+ C) SUBSET U = (A, C) "
              "DEFINE A AS v = 'a', B AS v = 'b', C AS v = 'c'", df)
    assert rows(out) == [(2, 4, 1)]


def test_classifier_and_match_number_per_partition() -> None:
    df = pd.DataFrame({"p": ["x", "x", "y", "y", "y"], "id": [1, 2, 1, 2, 3],
                       "v": [1, 2, 1, 2, 1]})
    out = run("PARTITION BY p ORDER BY id MEASURES MATCH_NUMBER() AS m, CLASSIFIER() AS c "
              "ALL ROWS PER MATCH PATTERN (A | B) DEFINE A AS v = 1", df, select="p, id, m, c")
    assert rows(out) == [("x", 1, 1, "A"), ("x", 2, 2, "B"), ("y", 1, 1, "A"),
                         ("y", 2, 2, "B"), ("y", 3, 3, "A")]


def test_null_comparisons_are_never_true_in_define() -> None:
    df = seq([None, 3.0, None])
    gt = run("ORDER BY id MEASURES A.id AS a PATTERN (A) DEFINE A AS v > 1", df)
    not_gt = run("ORDER BY id MEASURES A.id AS a PATTERN (A) DEFINE A AS NOT (v > 1)", df)
    is_null = run("ORDER BY id MEASURES A.id AS a PATTERN (A) DEFINE A AS v IS NULL", df)
    assert rows(gt) == [(2,)]
    assert rows(not_gt) == []
    assert rows(is_null) == [(1,), (3,)]


def test_three_valued_logic_or_and() -> None:
    df = seq([None, 1.0])
    out = run("ORDER BY id MEASURES A.id AS a PATTERN (A) "
              "DEFINE A AS v > 0 OR id = 1", df)
    assert rows(out) == [(1,), (2,)]  # NULL OR TRUE is TRUE


def test_scalar_functions_case_in_between() -> None:
    df = pd.DataFrame({"id": [1, 2, 3, 4], "s": ["Ab", "cd", "EFG", None],
                       "x": [-1.5, 2.5, 3.4, 0.0]})
    out = run("ORDER BY id MEASURES A.id AS a, ABS(A.x) AS ax, ROUND(A.x) AS rx, "
              "FLOOR(A.x) AS fx, CEIL(A.x) AS cx, LOWER(A.s) AS lo, UPPER(A.s) AS up, "
              "LENGTH(A.s) AS ln, COALESCE(A.s, 'none') AS co, GREATEST(A.x, 1) AS gr, "
              "LEAST(A.x, 1) AS le, CASE WHEN A.x > 0 THEN 'pos' ELSE 'neg' END AS sign "
              "PATTERN (A) DEFINE A AS id IN (1, 3, 4) AND x BETWEEN -2 AND 5", df)
    assert rows(out) == [
        (1, 1.5, -2.0, -2, -1, "ab", "AB", 2, "Ab", 1.0, -1.5, "neg"),
        (3, 3.4, 3.0, 3, 4, "efg", "EFG", 3, "EFG", 3.4, 1.0, "pos"),
        (4, 0.0, 0.0, 0, 0, None, None, None, "none", 1.0, 0.0, "neg"),
    ]


def test_arithmetic_and_integer_division() -> None:
    df = pd.DataFrame({"id": [1], "a": [7], "b": [2]})
    out = run("ORDER BY id MEASURES A.a / A.b AS q, -A.a / A.b AS nq, A.a % A.b AS r, "
              "A.a * 1.0 / A.b AS f, A.a - A.b * 2 AS e PATTERN (A)", df)
    assert rows(out) == [(3, -3, 1, 3.5, 3)]


def test_interval_arithmetic_on_timestamps() -> None:
    t0 = pd.Timestamp("2024-05-01 08:00")
    df = pd.DataFrame({"id": [1, 2, 3], "ts": [t0, t0 + pd.Timedelta(minutes=30),
                                               t0 + pd.Timedelta(hours=3)]})
    out = run("ORDER BY ts MEASURES A.id AS a, B.id AS b, B.ts - INTERVAL '1' DAY AS before "
              "AFTER MATCH SKIP TO NEXT ROW PATTERN (A B) "
              "DEFINE B AS B.ts <= A.ts + INTERVAL '1' HOUR", df)
    assert rows(out) == [(1, 2, t0 + pd.Timedelta(minutes=30) - pd.Timedelta(days=1))]


def test_case_insensitive_identifiers_and_quoted_names() -> None:
    df = pd.DataFrame({"Id": [1, 2], "Price": [1, 2]})
    out = run('ORDER BY ID MEASURES a.PRICE AS "Px" PATTERN (a) DEFINE A AS price > 1', df)
    assert list(out.columns) == ["Px"]
    assert rows(out) == [(2,)]
    with pytest.raises(cep_core.QueryError, match="unknown column"):
        run('ORDER BY id MEASURES A."price" AS p PATTERN (A)', df)


def test_order_by_descending_and_multiple_keys() -> None:
    df = pd.DataFrame({"g": [1, 1, 2, 2], "id": [1, 2, 1, 2], "v": ["a", "b", "c", "d"]})
    out = run("ORDER BY g DESC, id MEASURES CLASSIFIER() AS c ALL ROWS PER MATCH PATTERN (A)",
              df, select="v")
    assert rows(out) == [("c",), ("d",), ("a",), ("b",)]


# ----------------------------------------------------------------------------- WITHIN


def test_within_backtracks_to_a_shorter_match() -> None:
    df = pd.DataFrame({"id": [1, 2, 3, 4, 5], "t": [0, 1, 2, 3, 20]})
    out = run("ORDER BY t MEASURES FIRST(id) AS s, LAST(id) AS e PATTERN (A B+) WITHIN 5", df)
    no_window = run("ORDER BY t MEASURES FIRST(id) AS s, LAST(id) AS e PATTERN (A B+)", df)
    assert rows(no_window) == [(1, 5)]
    assert rows(out) == [(1, 4)]


def test_within_drops_matches_that_are_too_long_and_tries_later_starts() -> None:
    h = pd.Timedelta(hours=1)
    t0 = pd.Timestamp("2024-01-01", tz="Europe/Berlin")
    df = pd.DataFrame({"id": [1, 2, 3, 4, 5],
                       "ts": [t0, t0 + 9 * h, t0 + 11 * h, t0 + 12 * h, t0 + 13 * h],
                       "s": ["A", "A", "B", "A", "C"]})
    out = run("ORDER BY ts MEASURES FIRST(A.id) AS a, B.id AS b, C.id AS c "
              "PATTERN (A+ B A* C) WITHIN INTERVAL '4' HOUR "
              "DEFINE A AS s = 'A', B AS s = 'B', C AS s = 'C'", df)
    # From row 1 the match 1..5 spans 13h; from row 2 it spans 4h exactly: allowed.
    assert rows(out) == [(2, 3, 5)]


def test_within_exact_boundary_is_inclusive() -> None:
    df = pd.DataFrame({"id": [1, 2], "t": [0.0, 10.0]})
    assert len(run("ORDER BY t PATTERN (A B) WITHIN 10", df)) == 1
    assert len(run("ORDER BY t PATTERN (A B) WITHIN 9.5", df)) == 0


def test_within_needs_numeric_or_timestamp_order() -> None:
    df = pd.DataFrame({"id": ["a", "b"]})
    with pytest.raises(cep_core.QueryError, match="WITHIN needs a timestamp or numeric"):
        run("ORDER BY id PATTERN (A B) WITHIN 10", df)


# ----------------------------------------------------------------------------- select


def test_select_subset_alias_and_outer_order_by() -> None:
    df = pd.DataFrame({"p": ["x", "y", "z"], "id": [1, 1, 1], "v": [3, 1, 2]})
    out = run("PARTITION BY p ORDER BY id MEASURES A.v AS av PATTERN (A)", df,
              select="m.av AS value, p", tail="AS m ORDER BY av DESC")
    assert list(out.columns) == ["value", "p"]
    assert rows(out) == [(3, "x"), (2, "z"), (1, "y")]


def test_no_partition_and_empty_input() -> None:
    empty = pd.DataFrame({"p": pd.Series([], dtype=str), "id": pd.Series([], dtype=int)})
    out = run("PARTITION BY p ORDER BY id MEASURES A.id AS a PATTERN (A)", empty)
    assert list(out.columns) == ["p", "a"]
    assert len(out) == 0
    whole = run("ORDER BY id MEASURES COUNT(*) AS n PATTERN (A+)", seq([1, 2, 3]))
    assert rows(whole) == [(3,)]


def test_timestamps_stay_pandas_timestamps() -> None:
    t0 = pd.Timestamp("2024-01-01 00:00", tz="UTC")
    df = pd.DataFrame({"id": [1], "ts": [t0]})
    compiled = cep_core.compile_query(
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES A.ts AS s PATTERN (A))")
    (match,) = compiled.find_matches(df)
    assert isinstance(match.measures["s"], pd.Timestamp)
    assert match.measures["s"] == t0


def test_case_evaluates_only_the_branch_taken() -> None:
    df = pd.DataFrame({"id": [1, 2], "d": [0, 2]})
    out = run("ORDER BY id MEASURES CASE WHEN A.d = 0 THEN -1 ELSE 10 / A.d END AS q, "
              "CASE A.d WHEN 2 THEN 'two' END AS w PATTERN (A)", df)
    assert rows(out) == [(-1, None), (5, "two")]
    with pytest.raises(cep_core.QueryError, match="division by zero"):
        run("ORDER BY id MEASURES 10 / A.d AS q PATTERN (A)", df)


# ----------------------------------------------------------------------------- selection


def _selection_frame() -> pd.DataFrame:
    return pd.DataFrame({"id": [1, 2, 3, 4, 5, 6], "s": ["A", "X", "B", "X", "B", "C"]})


def test_skip_till_next_match_skips_irrelevant_rows() -> None:
    body = ("ORDER BY id MEASURES CLASSIFIER() AS c ALL ROWS PER MATCH PATTERN (A B+ C) {} "
            "DEFINE A AS s = 'A', B AS s = 'B', C AS s = 'C'")
    strict = run(body.format(""), _selection_frame(), select="id, c")
    nxt = run(body.format("SKIP TILL NEXT MATCH"), _selection_frame(), select="id, c")
    assert rows(strict) == []
    assert rows(nxt) == [(1, "A"), (3, "B"), (5, "B"), (6, "C")]


def test_skip_till_any_match_reconsiders_skipped_candidates() -> None:
    df = pd.DataFrame({"id": [1, 2, 3, 4], "s": ["A", "B", "B", "C"], "v": [0, 5, 1, 3]})
    body = ("ORDER BY id MEASURES A.id AS a, B.id AS b, C.id AS c PATTERN (A B C) {} "
            "DEFINE A AS s = 'A', B AS s = 'B', C AS s = 'C' AND v > B.v")
    # NEXT takes the first B (v=5) and then no C exceeds it; ANY backtracks to the second B.
    assert rows(run(body.format("SKIP TILL NEXT MATCH"), df)) == []
    assert rows(run(body.format("SKIP TILL ANY MATCH"), df)) == [(1, 3, 4)]


def test_skip_till_next_match_respects_within() -> None:
    df = pd.DataFrame({"t": [0, 1, 2, 9], "s": ["A", "X", "B", "B"]})
    out = run("ORDER BY t MEASURES COUNT(B.*) AS nb, LAST(B.t) AS lb PATTERN (A B+) "
              "WITHIN 5 SKIP TILL NEXT MATCH DEFINE A AS s = 'A', B AS s = 'B'", df)
    assert rows(out) == [(1, 2)]


def test_nullable_extension_dtypes_and_null_partition_keys() -> None:
    df = pd.DataFrame({"p": ["x", None, "x", None], "id": [1, 1, 2, 2],
                       "v": pd.array([1, None, None, 4], dtype="Int64")})
    out = run("PARTITION BY p ORDER BY id MEASURES COUNT(*) AS n, LAST(A.v) AS lv, "
              "COUNT(A.v) AS nv PATTERN (A+) DEFINE A AS v IS NULL OR v > 0", df)
    # Partitions in key order with the NULL key last; NULL values stay NULL (not pd.NA).
    assert rows(out) == [("x", 2, None, 1), (None, 2, 4, 1)]
    assert out["lv"].iloc[0] is None or pd.isna(out["lv"].iloc[0])


def test_running_navigation_in_all_rows_and_classifier_of_a_variable() -> None:
    df = seq([5, 7, 6, 8])
    out = run("ORDER BY id MEASURES PREV(v) AS pv, LAST(U.v) AS lu, CLASSIFIER(U) AS cu, "
              "FIRST(D.id) AS fd ALL ROWS PER MATCH PATTERN (S (U | D)+) "
              "DEFINE U AS v > PREV(v), D AS v < PREV(v)", df, select="id, pv, lu, cu, fd")
    # Row 1 S; 2 up; 3 down; 4 up. Running values at each row.
    assert rows(out) == [(1, None, None, None, None), (2, 5, 7, "U", None),
                         (3, 7, 7, "U", 3), (4, 6, 8, "U", 3)]


def test_string_concatenation_and_timestamp_literals() -> None:
    df = pd.DataFrame({"id": [1, 2], "s": ["x", "y"],
                       "ts": [pd.Timestamp("2024-01-01 10:00"), pd.Timestamp("2024-01-02")]})
    out = run("ORDER BY id MEASURES A.s || '-' || B.s AS pair PATTERN (A B) "
              "DEFINE A AS ts < TIMESTAMP '2024-01-01 12:00'", df)
    assert rows(out) == [("x-y",)]


def test_with_unmatched_rows_and_overlapping_matches() -> None:
    df = seq([1, 1, 0, 1])
    out = run("ORDER BY id MEASURES MATCH_NUMBER() AS m ALL ROWS PER MATCH WITH UNMATCHED ROWS "
              "AFTER MATCH SKIP TO NEXT ROW PATTERN (A A) DEFINE A AS v = 1", df,
              select="id, m")
    # Match 1 = rows 1-2; row 2 starts no match but is already output; row 3 and row 4
    # are in no match.
    assert rows(out) == [(1, 1), (2, 1), (3, None), (4, None)]


def test_float_division_by_zero_follows_ieee() -> None:
    df = pd.DataFrame({"id": [1], "x": [0.0], "y": [2.0]})
    out = run("ORDER BY id MEASURES A.y / A.x AS inf, A.x / A.x IS NULL AS nan_is_null "
              "PATTERN (A)", df)
    assert rows(out) == [(float("inf"), True)]


def test_match_number_and_classifier_in_define() -> None:
    out = run("ORDER BY id MEASURES MATCH_NUMBER() AS m, COUNT(*) AS n "
              "PATTERN ((A | B)+) DEFINE A AS MATCH_NUMBER() = 2 AND CLASSIFIER() = 'A', "
              "B AS MATCH_NUMBER() = 1 AND id <= 2", seq([0, 0, 0, 0]))
    # Match 1 may only use B (rows 1-2); match 2 only A (rows 3-4).
    assert rows(out) == [(1, 2), (2, 2)]
