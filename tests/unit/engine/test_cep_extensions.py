"""lakecep extensions: consumption modes (CONSUMPTION ...), negation (NOT var) and
EMIT TIMEOUTS. Expected outputs are worked out by hand from the rules in
docs/query-language.md (each case says how)."""

from __future__ import annotations

from typing import Any

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mr_helpers import rows, run

import cep_core

MODES = ("RECENT", "FIRST", "CHRONICLE", "CUMULATIVE", "CONTINUOUS")


def letters(text: str, **extra: list[Any]) -> pd.DataFrame:
    """One row per letter: id 1..n (also the order column) and v = the letter."""
    return pd.DataFrame({"id": list(range(1, len(text) + 1)), "v": list(text), **extra})


AB_MEASURES = ("MEASURES FIRST(A.id) AS fa, LAST(A.id) AS la, COUNT(A.*) AS n, B.id AS b, "
               "MATCH_NUMBER() AS mn")
AB_DEFINE = "DEFINE A AS v = 'a', B AS v = 'b'"


def ab(mode: str, df: pd.DataFrame, within: str = "", define: str = AB_DEFINE,
       selection: str = "SKIP TILL NEXT MATCH") -> list[tuple[Any, ...]]:
    return rows(run(f"ORDER BY id {AB_MEASURES} PATTERN (A B) {within} {selection} "
                    f"CONSUMPTION {mode} {define}", df))


# ----------------------------------------------------------------------------- consumption

# a1 a2 b3 a4 b5 b6
#  RECENT: a2 overwrites a1; b3 closes (2); a4; b5 closes (4); b6 has no initiator.
#  FIRST: a1 kept, a2 ignored; b3 closes (1); a4; b5 closes (4).
#  CHRONICLE: queue [1, 2]; b3 takes 1; a4 -> [2, 4]; b5 takes 2; b6 takes 4.
#  CUMULATIVE: aggregate {1, 2}; b3 closes it; {4}; b5 closes it.
#  CONTINUOUS: open 1, 2; b3 closes both, discards all; 4 open; b5 closes it.
CASE_AABABB = {
    "RECENT": [(2, 2, 1, 3, 1), (4, 4, 1, 5, 2)],
    "FIRST": [(1, 1, 1, 3, 1), (4, 4, 1, 5, 2)],
    "CHRONICLE": [(1, 1, 1, 3, 1), (2, 2, 1, 5, 2), (4, 4, 1, 6, 3)],
    "CUMULATIVE": [(1, 2, 2, 3, 1), (4, 4, 1, 5, 2)],
    "CONTINUOUS": [(1, 1, 1, 3, 1), (2, 2, 1, 3, 2), (4, 4, 1, 5, 3)],
}
# a1 a2 a3 b4 b5
CASE_AAABB = {
    "RECENT": [(3, 3, 1, 4, 1)],
    "FIRST": [(1, 1, 1, 4, 1)],
    "CHRONICLE": [(1, 1, 1, 4, 1), (2, 2, 1, 5, 2)],
    "CUMULATIVE": [(1, 3, 3, 4, 1)],
    "CONTINUOUS": [(1, 1, 1, 4, 1), (2, 2, 1, 4, 2), (3, 3, 1, 4, 3)],
}
# a1 a2 x3 x4 b5 a6 b7 WITHIN 3: at b5 an instance started at 1 has expired (5 - 1 > 3).
#  FIRST ignored a2 while a1 was open, and a1 expired: b5 closes nothing.
#  CUMULATIVE drops row 1 from the aggregate and keeps row 2.
CASE_WITHIN = {
    "RECENT": [(2, 2, 1, 5, 1), (6, 6, 1, 7, 2)],
    "FIRST": [(6, 6, 1, 7, 1)],
    "CHRONICLE": [(2, 2, 1, 5, 1), (6, 6, 1, 7, 2)],
    "CUMULATIVE": [(2, 2, 1, 5, 1), (6, 6, 1, 7, 2)],
    "CONTINUOUS": [(2, 2, 1, 5, 1), (6, 6, 1, 7, 2)],
}
# B's DEFINE depends on A: B AS v = 'b' AND B.x >= A.x; rows (id v x): 1 a 5, 2 a 1, 3 b 2,
# 4 b 6.
#  RECENT: open 2; b3 (2 >= 1) closes it; b4 has no initiator.
#  FIRST: open 1 (a2 ignored); b3 fails against 1 (2 < 5); b4 closes it (6 >= 5).
#  CHRONICLE: queue [1, 2]; b3 fails on 1, takes 2; b4 takes 1 -> matches (2,3), (1,4).
#  CUMULATIVE: aggregate {1, 2}, A.x is its last row's x (1); b3 closes it.
#  CONTINUOUS: open 1, 2; b3 closes 2 only, then discards everything before it.
CASE_DEPENDENT = {
    "RECENT": [(2, 2, 1, 3, 1)],
    "FIRST": [(1, 1, 1, 4, 1)],
    "CHRONICLE": [(2, 2, 1, 3, 1), (1, 1, 1, 4, 2)],
    "CUMULATIVE": [(1, 2, 2, 3, 1)],
    "CONTINUOUS": [(2, 2, 1, 3, 1)],
}


@pytest.mark.parametrize("mode", MODES)
def test_consumption_repeated_initiators(mode: str) -> None:
    assert ab(mode, letters("aababb")) == CASE_AABABB[mode]


@pytest.mark.parametrize("mode", MODES)
def test_consumption_runs_of_initiators_and_terminators(mode: str) -> None:
    assert ab(mode, letters("aaabb")) == CASE_AAABB[mode]


@pytest.mark.parametrize("mode", MODES)
def test_consumption_with_window(mode: str) -> None:
    assert ab(mode, letters("aaxxbab"), within="WITHIN 3") == CASE_WITHIN[mode]


@pytest.mark.parametrize("mode", MODES)
def test_consumption_terminator_condition_depends_on_initiator(mode: str) -> None:
    df = letters("aabb", x=[5, 1, 2, 6])
    got = ab(mode, df, define="DEFINE A AS v = 'a', B AS v = 'b' AND B.x >= A.x")
    assert got == CASE_DEPENDENT[mode]


@pytest.mark.parametrize("mode", MODES)
def test_consumption_next_and_any_selection_agree(mode: str) -> None:
    df = letters("axabxbb")
    assert ab(mode, df) == ab(mode, df, selection="SKIP TILL ANY MATCH")


# a1 b2 a3 b4 c5 c6 with PATTERN (A B C): the nested sequence ((A ; B) ; C).
#  RECENT: (1,2) in stage 2; a3; b4 makes (3,4), replacing (1,2); c5 closes it.
#  FIRST: (1,2) in stage 2; a3 opens; b4 cannot enter the occupied stage 2 and is ignored;
#         c5 closes (1,2).
#  CHRONICLE: stage 2 queue [(1,2), (3,4)]; c5 takes the first, c6 the second.
#  CUMULATIVE: stage 2 aggregate {1,2} then {1,2,3,4}; c5 closes it (A rows 1 and 3).
#  CONTINUOUS: stage 2 holds (1,2) and (3,4); c5 closes both.
CASE_ABC = {
    "RECENT": [(3, 3, 1, 4, 5)],
    "FIRST": [(1, 1, 1, 2, 5)],
    "CHRONICLE": [(1, 1, 1, 2, 5), (3, 3, 1, 4, 6)],
    "CUMULATIVE": [(1, 3, 2, 4, 5)],
    "CONTINUOUS": [(1, 1, 1, 2, 5), (3, 3, 1, 4, 5)],
}


@pytest.mark.parametrize("mode", MODES)
def test_consumption_three_variables(mode: str) -> None:
    out = run("ORDER BY id MEASURES FIRST(A.id) AS fa, LAST(A.id) AS la, COUNT(A.*) AS n, "
              f"LAST(B.id) AS b, C.id AS c PATTERN (A B C) SKIP TILL ANY MATCH "
              f"CONSUMPTION {mode} DEFINE A AS v = 'a', B AS v = 'b', C AS v = 'c'",
              letters("ababcc"))
    assert rows(out) == CASE_ABC[mode]


def test_consumption_partitions_are_independent() -> None:
    df = pd.DataFrame({"p": [1, 2, 1, 2, 1, 2], "id": [1, 2, 3, 4, 5, 6],
                       "v": ["a", "a", "a", "b", "b", "b"]})
    out = run("PARTITION BY p ORDER BY id MEASURES A.id AS a, B.id AS b "
              "PATTERN (A B) SKIP TILL NEXT MATCH CONSUMPTION RECENT "
              "DEFINE A AS v = 'a', B AS v = 'b'", df)
    # p=1: a1 a3 b5 -> (3, 5); p=2: a2 b4 b6 -> (2, 4).
    assert rows(out) == [(1, 3, 5), (2, 2, 4)]


def test_consumption_all_rows_per_match() -> None:
    out = run("ORDER BY id MEASURES MATCH_NUMBER() AS mn, CLASSIFIER() AS cl "
              "ALL ROWS PER MATCH PATTERN (A B) SKIP TILL NEXT MATCH CONSUMPTION CONTINUOUS "
              "DEFINE A AS v = 'a', B AS v = 'b'", letters("axab"), select="id, mn, cl")
    # a1 and a3 are open when b4 arrives: matches (1,4) and (3,4), row 4 output twice.
    assert rows(out) == [(1, 1, "A"), (4, 1, "B"), (3, 2, "A"), (4, 2, "B")]


def test_consumption_find_matches_rows_and_labels() -> None:
    q = cep_core.compile_query(
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES COUNT(*) AS n PATTERN (A B) "
        "SKIP TILL NEXT MATCH CONSUMPTION CUMULATIVE DEFINE A AS v = 'a', B AS v = 'b')")
    found = q.find_matches(letters("axab"))
    assert [(m.rows, m.labels, m.measures) for m in found] == [
        ((0, 2, 3), ("A", "A", "B"), {"n": 3})]
    assert "CONSUMPTION CUMULATIVE" in q.sql()
    assert cep_core.parse(q.sql()) == q.tree


@pytest.mark.parametrize(("body", "message"), [
    ("PATTERN (A B) CONSUMPTION RECENT", "SKIP TILL NEXT MATCH or SKIP TILL ANY"),
    ("PATTERN (A+ B) SKIP TILL NEXT MATCH CONSUMPTION FIRST", "sequence of at least two"),
    ("PATTERN (A | B) SKIP TILL NEXT MATCH CONSUMPTION FIRST", "sequence of at least two"),
    ("PATTERN (A) SKIP TILL NEXT MATCH CONSUMPTION FIRST", "sequence of at least two"),
    ("PATTERN (A B A) SKIP TILL NEXT MATCH CONSUMPTION FIRST", "distinct"),
    ("AFTER MATCH SKIP TO NEXT ROW PATTERN (A B) SKIP TILL NEXT MATCH CONSUMPTION CHRONICLE",
     "AFTER MATCH SKIP"),
    ("ALL ROWS PER MATCH WITH UNMATCHED ROWS PATTERN (A B) SKIP TILL NEXT MATCH "
     "CONSUMPTION CHRONICLE", "UNMATCHED"),
    ("PATTERN (A B) SKIP TILL NEXT MATCH CONSUMPTION LATEST", "expected one of RECENT"),
    ("PATTERN (A B) SKIP TILL NEXT MATCH CONSUMPTION FIRST WITHIN 3",
     "WITHIN, SKIP TILL ... MATCH, CONSUMPTION, EMIT TIMEOUTS"),
    ("PATTERN (A B) CONSUMPTION FIRST SKIP TILL NEXT MATCH", "out of place"),
])
def test_consumption_rejects(body: str, message: str) -> None:
    with pytest.raises(cep_core.QueryError, match=message):
        cep_core.compile_query(f"SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id {body})")


# ----------------------------------------------------------------------------- negation

def test_negation_between_terms() -> None:
    # a1 b2 c3: b2 lies between -> no match from 1; a4 x5 c6 -> (4, 6); a7 c8 -> (7, 8).
    out = run("ORDER BY id MEASURES A.id AS a, C.id AS c PATTERN (A NOT B C) "
              "SKIP TILL NEXT MATCH DEFINE A AS v = 'a', B AS v = 'b', C AS v = 'c'",
              letters("abcaxcac"))
    assert rows(out) == [(4, 6), (7, 8)]


def test_negated_variable_is_never_bound() -> None:
    out = run("ORDER BY id MEASURES B.id AS b, COUNT(B.*) AS nb, CLASSIFIER() AS cl "
              "PATTERN (A NOT B C) SKIP TILL NEXT MATCH "
              "DEFINE A AS v = 'a', B AS v = 'b', C AS v = 'c'", letters("axc"))
    assert rows(out) == [(None, 0, "C")]


def test_negation_looks_only_inside_the_partition() -> None:
    # The b of partition 2 lies between a1 and c3 in input order, not in partition 1.
    df = pd.DataFrame({"p": [1, 2, 1], "id": [1, 2, 3], "v": list("abc")})
    out = run("PARTITION BY p ORDER BY id MEASURES A.id AS a, C.id AS c "
              "PATTERN (A NOT B C) SKIP TILL NEXT MATCH "
              "DEFINE A AS v = 'a', B AS v = 'b', C AS v = 'c'", df)
    assert rows(out) == [(1, 1, 3)]


def test_trailing_negation_with_all_rows_per_match() -> None:
    # a1 x2 (b4 lies beyond 1 + 2): match rows 1, 2 with A X; output as ALL ROWS.
    out = run("ORDER BY id MEASURES CLASSIFIER() AS cl ALL ROWS PER MATCH "
              "PATTERN (A X NOT B) WITHIN 2 DEFINE A AS v = 'a', B AS v = 'b'",
              letters("axxb"), select="id, cl")
    assert rows(out) == [(1, "A"), (2, "X")]


def test_negation_row_that_is_also_the_next_variable_is_not_in_between() -> None:
    # b3 satisfies both C and B: it is taken as C, nothing lies between a1 and it.
    out = run("ORDER BY id MEASURES A.id AS a, C.id AS c PATTERN (A NOT B C) "
              "SKIP TILL ANY MATCH DEFINE A AS v = 'a', B AS v = 'b', C AS v IN ('b', 'c')",
              letters("axbaxcb"))
    assert rows(out) == [(1, 3), (4, 6)]


def test_negation_condition_can_refer_to_matched_rows() -> None:
    # "no b with a larger x than A between A and C": b2 (3 < 5) is allowed, b5 (9 > 5) not.
    df = letters("abcabc", x=[5, 3, 0, 5, 9, 0])
    out = run("ORDER BY id MEASURES A.id AS a, C.id AS c PATTERN (A NOT B C) "
              "SKIP TILL NEXT MATCH DEFINE A AS v = 'a', B AS v = 'b' AND B.x > A.x, "
              "C AS v = 'c'", df)
    assert rows(out) == [(1, 3)]


def test_several_negations_in_a_row() -> None:
    # a1 d2 c3: d between; a4 b5 c6: b between; a7 c8 matches.
    out = run("ORDER BY id MEASURES A.id AS a, C.id AS c PATTERN (A NOT B NOT D C) "
              "SKIP TILL NEXT MATCH DEFINE A AS v = 'a', B AS v = 'b', C AS v = 'c', "
              "D AS v = 'd'", letters("adcabcac"))
    assert rows(out) == [(7, 8)]


def test_negation_with_any_match_tries_later_rows_only_up_to_the_negated_row() -> None:
    # C AS v = 'c' AND x = 1: a1 then c2 (x 0, not C), b3 (negated) -> fail; a4 c5 (x 0)
    # c6 (x 1) -> (4, 6).
    df = letters("acbacc", x=[0, 0, 0, 0, 0, 1])
    out = run("ORDER BY id MEASURES A.id AS a, C.id AS c PATTERN (A NOT B C) "
              "SKIP TILL ANY MATCH DEFINE A AS v = 'a', B AS v = 'b', C AS v = 'c' AND x = 1",
              df)
    assert rows(out) == [(4, 6)]


def test_negation_any_match_does_not_skip_over_a_negated_row() -> None:
    # b2 is both C and B. Taking b2 as C fails later (D needs C's x = 0, d4 has 1); the
    # alternative C = c3 would skip over b2, which satisfies B: no match.
    df = letters("abcd", x=[0, 0, 1, 1])
    out = run("ORDER BY id MEASURES C.id AS c PATTERN (A NOT B C D) SKIP TILL ANY MATCH "
              "DEFINE A AS v = 'a', B AS v = 'b', C AS v IN ('b', 'c'), "
              "D AS v = 'd' AND D.x = C.x", df)
    assert rows(out) == []
    # Without the negation the alternative is taken.
    out = run("ORDER BY id MEASURES C.id AS c PATTERN (A C D) SKIP TILL ANY MATCH "
              "DEFINE A AS v = 'a', C AS v IN ('b', 'c'), D AS v = 'd' AND D.x = C.x", df)
    assert rows(out) == [(3,)]


@pytest.mark.parametrize(("text", "within", "expected"), [
    # a1: b3 is inside the window (3 - 1 <= 2) -> no match; a4: x5 x6, row 7 lies beyond
    # the window (7 - 4 > 2), so it has passed -> match.
    ("axbaxxx", 2, [(4,)]),
    # The end of the input closes the window: a1 x2 -> match.
    ("ax", 2, [(1,)]),
    # Inclusive window: b3 at exactly start + 2 counts.
    ("axb", 2, []),
    ("axb", 1, [(1,)]),
    # a1 a2 b3: a1 is spoiled by b3; a2 too (3 - 2 <= 2).
    ("aab", 2, []),
])
def test_trailing_negation_closed_by_the_window(text: str, within: int,
                                                 expected: list[tuple[int]]) -> None:
    out = run(f"ORDER BY id MEASURES A.id AS a PATTERN (A NOT B) WITHIN {within} "
              "DEFINE A AS v = 'a', B AS v = 'b'", letters(text))
    assert rows(out) == expected


def test_trailing_negation_after_a_sequence_and_timestamps() -> None:
    ts = pd.to_datetime(["2024-01-01 10:00", "2024-01-01 10:10", "2024-01-01 10:20",
                         "2024-01-01 10:50", "2024-01-01 11:00", "2024-01-01 11:10",
                         "2024-01-01 12:30"])
    df = pd.DataFrame({"ts": ts, "v": list("abxcabc")})
    out = run("ORDER BY ts MEASURES A.ts AS a PATTERN (A B NOT C) WITHIN INTERVAL '1' HOUR "
              "DEFINE A AS v = 'a', B AS v = 'b', C AS v = 'c'", df)
    # a 10:00 b 10:10: c 10:50 is within an hour of 10:00 -> no match.
    # a 11:00 b 11:10: the next c is at 12:30, beyond 12:00 -> match.
    assert rows(out) == [(pd.Timestamp("2024-01-01 11:00"),)]


def test_trailing_negation_backtracks_to_a_shorter_match() -> None:
    # A B+ NOT C WITHIN 3, C AS v = 'c' OR v = 'b' AND x = 1 (a b row with x = 1 also
    # counts as C): a1 b2 b3(x=1) b4: the greedy B+ = 2..4 is followed by nothing in the
    # window up to 4 -> match (1..4). Shorter alternatives are not needed.
    df = letters("abbb", x=[0, 0, 1, 0])
    out = run("ORDER BY id MEASURES COUNT(B.*) AS nb PATTERN (A B+ NOT C) WITHIN 3 "
              "DEFINE A AS v = 'a', B AS v = 'b', C AS v = 'c' OR (v = 'b' AND x = 1)", df)
    assert rows(out) == [(3,)]
    # With a c at row 4 (inside the window), every choice of B+ (2..3, then 2) is followed
    # by a C row inside the window (b3 with x = 1, or c4): no match.
    out = run("ORDER BY id MEASURES COUNT(B.*) AS nb PATTERN (A B+ NOT C) WITHIN 3 "
              "DEFINE A AS v = 'a', B AS v = 'b', C AS v = 'c' OR (v = 'b' AND x = 1)",
              letters("abbc", x=[0, 0, 1, 0]))
    assert rows(out) == []


def test_negation_prints_and_parses_back() -> None:
    q = cep_core.compile_query(
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id PATTERN (A NOT B C NOT D) WITHIN 5 "
        "SKIP TILL NEXT MATCH DEFINE A AS v = 1)")
    assert "PATTERN (A NOT B C NOT D) WITHIN 5 SKIP TILL NEXT MATCH" in q.sql()
    assert cep_core.parse(q.sql()) == q.tree


@pytest.mark.parametrize(("body", "message"), [
    ("PATTERN (NOT B A) SKIP TILL NEXT MATCH", "must start with a term"),
    ("PATTERN (A NOT B)", "needs WITHIN"),
    ("PATTERN (A NOT B C)", "SKIP TILL NEXT MATCH or SKIP TILL ANY"),
    ("PATTERN (A (NOT B) C) SKIP TILL NEXT MATCH", "top-level concatenation"),
    ("PATTERN (A NOT B+ C) SKIP TILL NEXT MATCH", "cannot be quantified"),
    ("PATTERN (A NOT B C?) SKIP TILL NEXT MATCH", "must match at least one row"),
    ("PATTERN (A NOT A B) SKIP TILL NEXT MATCH", "also used"),
])
def test_negation_rejects(body: str, message: str) -> None:
    with pytest.raises(cep_core.QueryError, match=message):
        cep_core.compile_query(f"SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id {body})")


# ----------------------------------------------------------------------------- timeouts

def test_emit_timeouts_strict() -> None:
    # a1 b2 x3: x3 (inside the window) is not C -> failed, not timed out. a4 b5 c6 matches.
    # a7 b8 then the end of the input: the window is closed -> timed out with rows 7, 8.
    out = run("ORDER BY id MEASURES FIRST(A.id) AS a, LAST(B.id) AS b, C.id AS c, "
              "MATCH_NUMBER() AS mn PATTERN (A B C) WITHIN 2 EMIT TIMEOUTS "
              "DEFINE A AS v = 'a', B AS v = 'b', C AS v = 'c'", letters("abxabcab"))
    assert rows(out) == [(4, 5, 6, 1, False), (7, 8, None, 2, True)]


def test_emit_timeouts_window_cut_by_a_late_row() -> None:
    df = pd.DataFrame({"id": [1, 2, 10, 11], "v": list("abab")})
    out = run("ORDER BY id MEASURES A.id AS a, B.id AS b PATTERN (A B C) WITHIN 5 "
              "EMIT TIMEOUTS DEFINE A AS v = 'a', B AS v = 'b', C AS v = 'c'", df)
    # a1 b2, then row 10 lies beyond 1 + 5: timed out; a10 b11 then end: timed out.
    assert rows(out) == [(1, 2, True), (10, 11, True)]


def test_emit_timeouts_skip_till_next_match() -> None:
    # a1, no c within 1..4 (row 5 lies beyond): timed out with A only; a4 c6 matches.
    out = run("ORDER BY id MEASURES A.id AS a, C.id AS c PATTERN (A C) WITHIN 3 "
              "SKIP TILL NEXT MATCH EMIT TIMEOUTS DEFINE A AS v = 'a', C AS v = 'c'",
              letters("axbaxcb"))
    assert rows(out) == [(1, None, True), (4, 6, False)]


def test_emit_timeouts_all_rows_and_find_matches() -> None:
    q = ("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES CLASSIFIER() AS cl "
         "ALL ROWS PER MATCH PATTERN (A B) WITHIN 5 EMIT TIMEOUTS "
         "DEFINE A AS v = 'a', B AS v = 'b')")
    df = letters("abxa")
    out = cep_core.match_recognize(q, {"t": df})
    assert rows(out[["id", "cl", "timed_out"]]) == [(1, "A", False), (2, "B", False),
                                                    (4, "A", True)]
    found = cep_core.compile_query(q).find_matches(df)
    assert [(m.rows, m.timed_out) for m in found] == [((0, 1), False), ((3,), True)]


def test_without_emit_timeouts_there_is_no_marker_column() -> None:
    out = run("ORDER BY id MEASURES A.id AS a PATTERN (A B) WITHIN 5 "
              "DEFINE A AS v = 'a', B AS v = 'b'", letters("abxa"))
    assert list(out.columns) == ["a"]
    assert rows(out) == [(1,)]


@pytest.mark.parametrize(("body", "message"), [
    ("PATTERN (A B) EMIT TIMEOUTS", "needs WITHIN"),
    ("PATTERN (A B) WITHIN 2 SKIP TILL NEXT MATCH CONSUMPTION FIRST EMIT TIMEOUTS",
     "cannot be combined"),
    ("MEASURES A.id AS timed_out PATTERN (A B) WITHIN 2 EMIT TIMEOUTS", "clashes"),
    ("ALL ROWS PER MATCH WITH UNMATCHED ROWS PATTERN (A B) WITHIN 2 EMIT TIMEOUTS",
     "UNMATCHED"),
])
def test_emit_timeouts_rejects(body: str, message: str) -> None:
    with pytest.raises(cep_core.QueryError, match=message):
        cep_core.compile_query(f"SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id {body})")


def test_incremental_matcher_supports_consumption_modes() -> None:
    inc = cep_core.IncrementalMatcher("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id "
                                      "PATTERN (A B) SKIP TILL NEXT MATCH CONSUMPTION "
                                      "CHRONICLE DEFINE A AS v = 'a', B AS v = 'b')")
    assert inc.feed(pd.DataFrame({"id": [1, 2], "v": ["a", "a"]})) == []
    assert [m.rows for m in inc.feed(pd.DataFrame({"id": [3, 4], "v": ["b", "b"]}))] == [
        (0, 2), (1, 3)]


# ----------------------------------------------------------------------------- streaming

STREAM_BODIES = [
    "PATTERN (A NOT B C) WITHIN 4 SKIP TILL NEXT MATCH",
    "PATTERN (A NOT B C) SKIP TILL ANY MATCH",
    "PATTERN (A B* NOT C) WITHIN 3",
    "PATTERN (A NOT B NOT X C) WITHIN 5 SKIP TILL ANY MATCH",
    "PATTERN (A B C) WITHIN 3 EMIT TIMEOUTS",
    "PATTERN (A B+ C) WITHIN 4 SKIP TILL NEXT MATCH EMIT TIMEOUTS",
]


def _stream_query(body: str) -> str:
    return ("SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY p ORDER BY id "
            "MEASURES MATCH_NUMBER() AS mn, COUNT(*) AS n, LAST(id) AS e "
            f"{body} DEFINE A AS v = 'a', B AS v = 'b', C AS v = 'c'"
            f"{', X AS v = ' + repr('x') if ' X ' in body else ''})")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=st.text(alphabet="abcx", max_size=30),
       parts=st.lists(st.integers(0, 1), min_size=30, max_size=30),
       cuts=st.lists(st.integers(0, 30), max_size=4),
       body=st.sampled_from(STREAM_BODIES))
def test_incremental_matcher_agrees_with_batch_on_negation_and_timeouts(
        text: str, parts: list[int], cuts: list[int], body: str) -> None:
    df = letters(text, p=parts[:len(text)])
    query = _stream_query(body)
    expected = cep_core.compile_query(query).find_matches(df)
    inc = cep_core.IncrementalMatcher(query)
    got: list[cep_core.Match] = []
    edges = [0, *sorted({c % (len(df) + 1) for c in cuts}), len(df)]
    for lo, hi in zip(edges[:-1], edges[1:], strict=True):
        got.extend(inc.feed(df.iloc[lo:hi]))
    got.extend(inc.flush())
    assert sorted(got, key=lambda m: (m.partition, m.match_number)) == expected
