"""Conformance cases: input rows, query, exact expected output.

Each expected output is worked out by hand from SQL:2016 row pattern recognition as Trino's
and Oracle's public documentation describe it (and, for the lakecep extensions WITHIN and
SKIP TILL, from docs/query-language.md). One entry of ``CASES`` is one case; ``id`` names
the feature. The cases for consumption modes, negation and EMIT TIMEOUTS are in
test_cep_extensions.py.

Conventions: ``num(...)`` is a table ``id`` 1..n (the ORDER BY column) and ``v`` the
given numbers; ``let(...)`` the same with ``v`` the letters of a string. The body is the
inside of ``MATCH_RECOGNIZE ( ... )``; ``select`` the outer select list.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import pytest
from mr_helpers import rows

import cep_core


def num(*values: Any, **extra: list[Any]) -> pd.DataFrame:
    return pd.DataFrame({"id": list(range(1, len(values) + 1)), "v": list(values), **extra})


def let(text: str, **extra: list[Any]) -> pd.DataFrame:
    return pd.DataFrame({"id": list(range(1, len(text) + 1)), "v": list(text), **extra})


@dataclass(frozen=True)
class Error:
    """The query must fail with a QueryError whose message contains ``fragment``."""

    fragment: str


@dataclass(frozen=True)
class Case:
    id: str
    df: pd.DataFrame
    body: str
    expected: list[tuple[Any, ...]] | Error
    select: str = "*"


SE = "MEASURES FIRST(id) AS s, LAST(id) AS e"  # first and last row of the match
SEN = SE + ", COUNT(A.*) AS na"
AB12 = "DEFINE A AS v = 1, B AS v = 2"
A1 = "DEFINE A AS v = 1"
INC = "DEFINE B AS v > PREV(v)"  # B: increasing
NAV5 = "ORDER BY id MEASURES {m} AS m PATTERN (A B C D E)"  # one match over 5 rows

CASES: list[Case] = [
    # ------------------------------------------------------------ partitioning / ordering
    Case("partition-separates-matches",
         pd.DataFrame({"p": [1, 1, 2, 2, 1], "id": [1, 2, 3, 4, 5], "v": list("axabb")}),
         "PARTITION BY p ORDER BY id MEASURES A.id AS a, B.id AS b PATTERN (A B) "
         "DEFINE A AS v = 'a', B AS v = 'b'", [(2, 3, 4)]),
    Case("order-desc", let("ba"),
         "ORDER BY id DESC MEASURES A.id AS a, B.id AS b PATTERN (A B) "
         "DEFINE A AS v = 'a', B AS v = 'b'", [(2, 1)]),
    Case("order-sorts-unsorted-input", pd.DataFrame({"id": [3, 1, 2], "v": list("bax")}),
         "ORDER BY id MEASURES A.id AS a, B.id AS b PATTERN (A Z B) "
         "DEFINE A AS v = 'a', B AS v = 'b'", [(1, 3)]),
    Case("output-ordered-by-partition-key", pd.DataFrame({"p": ["y", "x"], "id": [1, 2],
                                                          "v": [1, 1]}),
         "PARTITION BY p ORDER BY id MEASURES A.id AS a PATTERN (A)", [("x", 2), ("y", 1)]),
    Case("order-nulls-last-by-default", pd.DataFrame({"k": [np.nan, 1.0, 2.0],
                                                      "v": list("abc")}),
         "ORDER BY k MEASURES COUNT(*) AS n PATTERN (B C A) "
         "DEFINE A AS v = 'a', B AS v = 'b', C AS v = 'c'", [(3,)]),
    Case("order-nulls-first", pd.DataFrame({"k": [np.nan, 1.0, 2.0], "v": list("abc")}),
         "ORDER BY k NULLS FIRST MEASURES COUNT(*) AS n PATTERN (A B C) "
         "DEFINE A AS v = 'a', B AS v = 'b', C AS v = 'c'", [(3,)]),
    Case("partition-by-two-columns",
         pd.DataFrame({"p": [1, 1, 1], "q": [1, 2, 1], "id": [1, 2, 3], "v": list("aab")}),
         "PARTITION BY p, q ORDER BY id MEASURES A.id AS a, B.id AS b PATTERN (A B) "
         "DEFINE A AS v = 'a', B AS v = 'b'", [(1, 1, 1, 3)]),
    # ------------------------------------------------------------ quantifiers
    Case("star-greedy", num(1, 1, 1, 2), f"ORDER BY id {SEN} PATTERN (A* B) {AB12}",
         [(1, 4, 3)]),
    Case("star-reluctant-grows-until-b", num(1, 1, 1, 2),
         f"ORDER BY id {SEN} PATTERN (A*? B) {AB12}", [(1, 4, 3)]),
    Case("plus-reluctant", num(1, 1, 1), f"ORDER BY id {SEN} PATTERN (A+?) {A1}",
         [(1, 1, 1), (2, 2, 1), (3, 3, 1)]),
    Case("plus-greedy", num(1, 1, 1), f"ORDER BY id {SEN} PATTERN (A+) {A1}", [(1, 3, 3)]),
    Case("question-greedy-and-empty-match", num(1, 1, 2),
         f"ORDER BY id {SEN} PATTERN (A?) {A1}",
         [(1, 1, 1), (2, 2, 1), (None, None, 0)]),
    Case("question-reluctant-prefers-empty", num(1),
         f"ORDER BY id {SEN} PATTERN (A??) {A1}", [(None, None, 0)]),
    Case("exact-count", num(1, 1, 1, 1, 1), f"ORDER BY id {SEN} PATTERN (A{{2}}) {A1}",
         [(1, 2, 2), (3, 4, 2)]),
    Case("at-least", num(1, 1, 1, 2, 1, 1), f"ORDER BY id {SEN} PATTERN (A{{2,}}) {A1}",
         [(1, 3, 3), (5, 6, 2)]),
    Case("at-most", num(1, 1, 1), f"ORDER BY id {SEN} PATTERN (A{{,2}}) {A1}",
         [(1, 2, 2), (3, 3, 1)]),
    Case("range-reluctant-then-b", num(1, 1, 2),
         f"ORDER BY id {SEN} PATTERN (A{{1,2}}? B) {AB12}", [(1, 3, 2)]),
    Case("range-greedy-backtracks", num(1, 1, 1, 1, 2),
         f"ORDER BY id {SEN} PATTERN (A{{2,3}} B) {AB12}", [(2, 5, 3)]),
    Case("range-reluctant", num(1, 1, 1, 1, 1),
         f"ORDER BY id {SEN} PATTERN (A{{2,3}}?) {A1}", [(1, 2, 2), (3, 4, 2)]),
    Case("group-plus", num(1, 2, 1, 2, 1), f"ORDER BY id {SEN} PATTERN ((A B)+) {AB12}",
         [(1, 4, 2)]),
    Case("group-plus-reluctant", num(1, 2, 1, 2),
         f"ORDER BY id {SEN} PATTERN ((A B)+?) {AB12}", [(1, 2, 1), (3, 4, 1)]),
    Case("star-empty-matches", num(2, 2), f"ORDER BY id {SEN} PATTERN (A*) {A1}",
         [(None, None, 0), (None, None, 0)]),
    Case("plus-plus", num(1, 1, 2, 2, 1, 2), f"ORDER BY id {SEN} PATTERN (A+ B+) {AB12}",
         [(1, 4, 2), (5, 6, 1)]),
    Case("star-reluctant-empty", num(1, 1), f"ORDER BY id {SEN} PATTERN (A*?) {A1}",
         [(None, None, 0), (None, None, 0)]),
    Case("alternation-repeated", num(1, 2, 2, 1),
         f"ORDER BY id {SEN} PATTERN ((A | B){{3}}) {AB12}", [(1, 3, 1)]),
    Case("optional-skipped", num(2), f"ORDER BY id {SEN} PATTERN (A{{0,1}} B) {AB12}",
         [(1, 1, 0)]),
    Case("too-few-rows", num(1, 1), f"ORDER BY id {SEN} PATTERN (A{{3}}) {A1}", []),
    # ------------------------------------------------------------ alternation preference
    Case("alternation-left-first", num(1),
         "ORDER BY id MEASURES CLASSIFIER() AS c PATTERN (A | B) "
         "DEFINE A AS v > 0, B AS v > 0", [("A",)]),
    Case("alternation-left-first-swapped", num(1),
         "ORDER BY id MEASURES CLASSIFIER() AS c PATTERN (B | A) "
         "DEFINE A AS v > 0, B AS v > 0", [("B",)]),
    Case("alternation-falls-back", num(1, 3),
         "ORDER BY id MEASURES CLASSIFIER() AS c PATTERN (A B | A C) "
         "DEFINE A AS v = 1, B AS v = 2, C AS v = 3", [("C",)]),
    Case("alternation-shorter-left-wins", num(1, 2),
         "ORDER BY id MEASURES CLASSIFIER() AS c, COUNT(*) AS n PATTERN (A | A B) "
         f"{AB12}", [("A", 1)]),
    Case("alternation-longer-left-wins", num(1, 2),
         f"ORDER BY id MEASURES CLASSIFIER() AS c, COUNT(*) AS n PATTERN (A B | A) {AB12}",
         [("B", 2)]),
    Case("alternation-in-concat", num(2, 3),
         "ORDER BY id MEASURES COUNT(B.*) AS nb PATTERN ((A | B) C) "
         "DEFINE A AS v = 1, B AS v = 2, C AS v = 3", [(1,)]),
    # ------------------------------------------------------------ PERMUTE
    Case("permute-second-order", num(2, 1),
         f"ORDER BY id MEASURES CLASSIFIER() AS c, COUNT(*) AS n PATTERN (PERMUTE(A, B)) "
         f"{AB12}", [("A", 2)]),
    Case("permute-three", num(3, 1, 2),
         "ORDER BY id MEASURES CLASSIFIER() AS c PATTERN (PERMUTE(A, B, C)) "
         "DEFINE A AS v = 1, B AS v = 2, C AS v = 3", [("B",)]),
    Case("permute-prefers-listed-order", num(5, 5),
         "ORDER BY id MEASURES CLASSIFIER() AS c PATTERN (PERMUTE(A, B))", [("B",)]),
    Case("permute-no-match", num(1, 1), f"ORDER BY id {SE} PATTERN (PERMUTE(A, B)) {AB12}",
         []),
    Case("permute-then-term", num(2, 1, 3),
         "ORDER BY id MEASURES CLASSIFIER() AS c, COUNT(*) AS n PATTERN (PERMUTE(A, B) C) "
         "DEFINE A AS v = 1, B AS v = 2, C AS v = 3", [("C", 3)]),
    # ------------------------------------------------------------ anchors
    Case("anchor-start", num(1, 1), f"ORDER BY id MEASURES A.id AS a PATTERN (^A) {A1}",
         [(1,)]),
    Case("anchor-end", num(1, 1), f"ORDER BY id MEASURES A.id AS a PATTERN (A$) {A1}",
         [(2,)]),
    Case("anchor-both", num(1, 1), f"ORDER BY id {SE} PATTERN (^A+$) {A1}", [(1, 2)]),
    Case("anchor-both-fails", num(1, 2), f"ORDER BY id {SE} PATTERN (^A+$) {A1}", []),
    Case("anchor-per-partition", pd.DataFrame({"p": [1, 1, 2], "id": [1, 2, 3],
                                               "v": [1, 1, 1]}),
         f"PARTITION BY p ORDER BY id MEASURES A.id AS a PATTERN (^A) {A1}",
         [(1, 1), (2, 3)]),
    Case("anchor-empty-match", num(2, 1),
         f"ORDER BY id MEASURES COUNT(*) AS n PATTERN (^A*) {A1}", [(0,)]),
    # ------------------------------------------------------------ exclusion
    Case("exclusion-all-rows", num(1, 2, 3),
         "ORDER BY id MEASURES CLASSIFIER() AS cl ALL ROWS PER MATCH PATTERN (A {- B -} C) "
         "DEFINE A AS v = 1, B AS v = 2, C AS v = 3", [(1, "A"), (3, "C")], "id, cl"),
    Case("exclusion-one-row-sees-excluded", num(1, 2, 3),
         "ORDER BY id MEASURES B.id AS b PATTERN (A {- B -} C) "
         "DEFINE A AS v = 1, B AS v = 2, C AS v = 3", [(2,)]),
    Case("exclusion-leading", num(1, 1, 2),
         "ORDER BY id MEASURES COUNT(A.*) AS na ALL ROWS PER MATCH PATTERN ({- A+ -} B) "
         f"{AB12}", [(3, 2)], "id, na"),
    Case("exclusion-empty", num(1, 3),
         "ORDER BY id MEASURES CLASSIFIER() AS cl ALL ROWS PER MATCH PATTERN (A {- B* -} C) "
         "DEFINE A AS v = 1, B AS v = 2, C AS v = 3", [(1, "A"), (2, "C")], "id, cl"),
    # ------------------------------------------------------------ empty pattern / matches
    Case("empty-pattern-one-row", num(1, 2),
         "ORDER BY id MEASURES MATCH_NUMBER() AS mn, COUNT(*) AS n PATTERN ()",
         [(1, 0), (2, 0)]),
    Case("empty-pattern-all-rows-show", num(1, 2),
         "ORDER BY id MEASURES MATCH_NUMBER() AS mn ALL ROWS PER MATCH PATTERN ()",
         [(1, 1), (2, 2)], "id, mn"),
    Case("empty-pattern-all-rows-omit", num(1, 2),
         "ORDER BY id MEASURES MATCH_NUMBER() AS mn ALL ROWS PER MATCH OMIT EMPTY MATCHES "
         "PATTERN ()", [], "id, mn"),
    Case("unmatched-rows-with-empty-matches", num(1, 2, 1),
         "ORDER BY id MEASURES MATCH_NUMBER() AS mn, CLASSIFIER() AS cl "
         f"ALL ROWS PER MATCH WITH UNMATCHED ROWS PATTERN (A*) {A1}",
         [(1, 1, "A"), (2, 2, None), (3, 3, "A")], "id, mn, cl"),
    Case("unmatched-rows", num(1, 2, 1),
         "ORDER BY id MEASURES MATCH_NUMBER() AS mn, CLASSIFIER() AS cl "
         f"ALL ROWS PER MATCH WITH UNMATCHED ROWS PATTERN (A+) {A1}",
         [(1, 1, "A"), (2, None, None), (3, 2, "A")], "id, mn, cl"),
    Case("omit-empty-keeps-numbering", num(2, 1),
         "ORDER BY id MEASURES MATCH_NUMBER() AS mn, CLASSIFIER() AS cl "
         f"ALL ROWS PER MATCH OMIT EMPTY MATCHES PATTERN (A*) {A1}", [(2, 2, "A")],
         "id, mn, cl"),
    # ------------------------------------------------------------ AFTER MATCH SKIP
    Case("skip-past-last-row", num(1, 2, 3, 4), f"ORDER BY id {SE} PATTERN (A B+) {INC}",
         [(1, 4)]),
    Case("skip-to-next-row", num(1, 2, 3, 4),
         f"ORDER BY id {SE} AFTER MATCH SKIP TO NEXT ROW PATTERN (A B+) {INC}",
         [(1, 4), (2, 4), (3, 4)]),
    Case("skip-to-last-var", num(1, 2, 3, 1, 2),
         f"ORDER BY id {SE} AFTER MATCH SKIP TO LAST B PATTERN (A B+) {INC}",
         [(1, 3), (4, 5)]),
    Case("skip-to-next-row-2", num(1, 2, 3, 1, 2),
         f"ORDER BY id {SE} AFTER MATCH SKIP TO NEXT ROW PATTERN (A B+) {INC}",
         [(1, 3), (2, 3), (4, 5)]),
    Case("skip-to-first-var", num(1, 2, 3, 1, 2),
         f"ORDER BY id {SE} AFTER MATCH SKIP TO FIRST B PATTERN (A B+) {INC}",
         [(1, 3), (2, 3), (4, 5)]),
    Case("skip-to-var-means-last", num(1, 2, 3, 1, 2),
         f"ORDER BY id {SE} AFTER MATCH SKIP TO B PATTERN (A B+) {INC}", [(1, 3), (4, 5)]),
    Case("skip-to-first-row-loops", num(1, 2, 3),
         f"ORDER BY id {SE} AFTER MATCH SKIP TO FIRST A PATTERN (A B+) {INC}",
         Error("loop forever")),
    Case("skip-to-subset", num(1, 2, 3, 1, 2),
         f"ORDER BY id {SE} AFTER MATCH SKIP TO LAST U PATTERN (A B+) SUBSET U = (A, B) "
         f"{INC}", [(1, 3), (4, 5)]),
    Case("skip-to-absent-var", num(1, 3),
         f"ORDER BY id {SE} AFTER MATCH SKIP TO B PATTERN (A B? C) "
         "DEFINE A AS v = 1, B AS v = 2, C AS v = 3", Error("has no row mapped to B")),
    # ------------------------------------------------------------ ROWS PER MATCH, RUNNING/FINAL
    Case("all-rows-running-final", num(1, 2, 3),
         "ORDER BY id MEASURES RUNNING LAST(id) AS r, FINAL LAST(id) AS f, "
         f"RUNNING COUNT(*) AS n ALL ROWS PER MATCH PATTERN (A B+) {INC}",
         [(1, 1, 3, 1), (2, 2, 3, 2), (3, 3, 3, 3)], "id, r, f, n"),
    Case("one-row-running-equals-final", num(1, 2, 3),
         "ORDER BY id MEASURES RUNNING LAST(id) AS r, FINAL LAST(id) AS f "
         f"PATTERN (A B+) {INC}", [(3, 3)]),
    Case("all-rows-running-var-default", num(1, 2, 3),
         f"ORDER BY id MEASURES LAST(B.id) AS lb ALL ROWS PER MATCH PATTERN (A B+) {INC}",
         [(1, None), (2, 2), (3, 3)], "id, lb"),
    Case("all-rows-final-first", num(1, 2, 3),
         "ORDER BY id MEASURES FINAL FIRST(B.id) AS fb ALL ROWS PER MATCH PATTERN (A B+) "
         f"{INC}", [(1, 2), (2, 2), (3, 2)], "id, fb"),
    Case("all-rows-column-order", pd.DataFrame({"v": [1], "id": [1], "p": [7]}),
         "PARTITION BY p ORDER BY id MEASURES CLASSIFIER() AS cl ALL ROWS PER MATCH "
         "PATTERN (A)", [(7, 1, "A", 1)]),
    Case("one-row-column-order", pd.DataFrame({"v": [1], "id": [1], "p": [7]}),
         "PARTITION BY p ORDER BY id MEASURES CLASSIFIER() AS cl PATTERN (A)", [(7, "A")]),
    Case("all-rows-running-sum", num(1, 2, 3),
         f"ORDER BY id MEASURES SUM(v) AS s ALL ROWS PER MATCH PATTERN (A B+) {INC}",
         [(1, 1), (2, 3), (3, 6)], "id, s"),
    Case("all-rows-classifier", num(1, 2, 3),
         f"ORDER BY id MEASURES CLASSIFIER() AS cl ALL ROWS PER MATCH PATTERN (A B+) {INC}",
         [(1, "A"), (2, "B"), (3, "B")], "id, cl"),
    Case("all-rows-match-number", num(1, 2, 1, 2),
         f"ORDER BY id MEASURES MATCH_NUMBER() AS mn ALL ROWS PER MATCH PATTERN (A B) {INC}",
         [(1, 1), (2, 1), (3, 2), (4, 2)], "id, mn"),
    # ------------------------------------------------------------ navigation
    Case("prev", num(10, 20, 30, 40, 50), NAV5.format(m="PREV(C.v)"), [(20,)]),
    Case("prev-offset", num(10, 20, 30, 40, 50), NAV5.format(m="PREV(C.v, 2)"), [(10,)]),
    Case("prev-before-partition", num(10, 20, 30, 40, 50), NAV5.format(m="PREV(A.v)"),
         [(None,)]),
    Case("next-offset", num(10, 20, 30, 40, 50), NAV5.format(m="NEXT(C.v, 2)"), [(50,)]),
    Case("next-after-partition", num(10, 20, 30, 40, 50), NAV5.format(m="NEXT(E.v)"),
         [(None,)]),
    Case("first", num(10, 20, 30, 40, 50), NAV5.format(m="FIRST(v)"), [(10,)]),
    Case("first-offset", num(10, 20, 30, 40, 50), NAV5.format(m="FIRST(v, 1)"), [(20,)]),
    Case("last-offset", num(10, 20, 30, 40, 50), NAV5.format(m="LAST(v, 1)"), [(40,)]),
    Case("prev-of-last", num(10, 20, 30, 40, 50), NAV5.format(m="PREV(LAST(v), 2)"),
         [(30,)]),
    Case("next-of-first", num(10, 20, 30, 40, 50), NAV5.format(m="NEXT(FIRST(v), 3)"),
         [(40,)]),
    Case("first-offset-too-far", num(10, 20, 30, 40, 50), NAV5.format(m="FIRST(v, 10)"),
         [(None,)]),
    Case("prev-offset-zero", num(10, 20, 30, 40, 50), NAV5.format(m="PREV(v, 0)"), [(50,)]),
    Case("prev-outside-match", num(10, 20, 30),
         "ORDER BY id MEASURES PREV(B.v) AS p, NEXT(C.v) AS n PATTERN (B C) "
         "DEFINE B AS v = 20", [(10, None)]),
    Case("define-prev", num(3, 1, 2, 5), f"ORDER BY id {SE} PATTERN (A B+) {INC}", [(2, 4)]),
    Case("define-first", num(1, 3, 7, 8),
         f"ORDER BY id {SE} PATTERN (A B+) DEFINE B AS v >= FIRST(A.v) + 2", [(1, 4)]),
    Case("define-last-offset", num(5, 1, 2, 3, 0),
         f"ORDER BY id {SE} PATTERN (A B+) DEFINE B AS COALESCE(LAST(B.v, 1), 0) < v",
         [(1, 4)]),
    Case("final-in-define-rejected", num(1),
         f"ORDER BY id {SE} PATTERN (A) DEFINE A AS FINAL LAST(v) > 0", Error("FINAL")),
    Case("prev-in-arithmetic", num(5, 8),
         "ORDER BY id MEASURES A.v - PREV(A.v) AS d PATTERN (X A)", [(3,)]),
    # ------------------------------------------------------------ more patterns / operators
    Case("nested-optional-in-plus", num(1, 2, 1, 1, 2),
         f"ORDER BY id {SEN} PATTERN ((A B?)+) {AB12}", [(1, 5, 3)]),
    Case("skip-to-next-row-overlap-all-rows", num(1, 2, 3),
         f"ORDER BY id MEASURES MATCH_NUMBER() AS mn ALL ROWS PER MATCH "
         f"AFTER MATCH SKIP TO NEXT ROW PATTERN (A B) {INC}",
         [(1, 1), (2, 1), (2, 2), (3, 2)], "id, mn"),
    Case("string-concat-measure", let("ab"),
         "ORDER BY id MEASURES A.v || B.v AS s PATTERN (A B)", [("ab",)]),
    Case("modulo-in-define", num(1, 2, 4, 5),
         f"ORDER BY id {SE} PATTERN (A+) DEFINE A AS v % 2 = 0", [(2, 3)]),
    # ------------------------------------------------------------ CLASSIFIER, MATCH_NUMBER
    Case("classifier-of-subset", num(1, 2, 3),
         "ORDER BY id MEASURES CLASSIFIER(U) AS c PATTERN (A B C) SUBSET U = (A, B)",
         [("B",)]),
    Case("match-number-in-define", num(1, 1, 1),
         "ORDER BY id MEASURES A.id AS a PATTERN (A) DEFINE A AS MATCH_NUMBER() <= 2",
         [(1,), (2,)]),
    Case("match-number-per-partition", pd.DataFrame({"p": [1, 1, 2], "id": [1, 2, 3],
                                                     "v": [1, 1, 1]}),
         "PARTITION BY p ORDER BY id MEASURES MATCH_NUMBER() AS mn PATTERN (A)",
         [(1, 1), (1, 2), (2, 1)]),
    Case("classifier-in-define", num(1, 2),
         "ORDER BY id MEASURES COUNT(*) AS n PATTERN ((A | B)+) "
         "DEFINE A AS CLASSIFIER() = 'B', B AS v > 0", [(2,)]),
    # ------------------------------------------------------------ aggregates
    Case("aggregates-of-var", num(3, 1, 2, 9),
         "ORDER BY id MEASURES SUM(A.v) AS s, AVG(A.v) AS a, MIN(A.v) AS lo, MAX(A.v) AS hi, "
         "COUNT(A.v) AS n PATTERN (A+ B) DEFINE A AS v < 5, B AS v > 5",
         [(6, 2.0, 1, 3, 3)]),
    Case("aggregates-skip-null", num(1, None, 3),
         "ORDER BY id MEASURES COUNT(*) AS n, COUNT(v) AS nv, SUM(v) AS s, AVG(v) AS a "
         "PATTERN (A+)", [(3, 2, 4.0, 2.0)]),
    Case("sum-in-define", num(2, 2, 2, 1),
         f"ORDER BY id {SE} PATTERN (A+) DEFINE A AS SUM(A.v) <= 5", [(1, 2), (3, 4)]),
    Case("avg-in-define", num(1, 5, 1, 1),
         f"ORDER BY id {SE} PATTERN (A+) DEFINE A AS AVG(A.v) < 3", [(1, 1), (3, 4)]),
    Case("count-in-define", num(0, 0, 0, 0, 0),
         f"ORDER BY id {SE} PATTERN (A+) DEFINE A AS COUNT(A.*) <= 2",
         [(1, 2), (3, 4), (5, 5)]),
    Case("sum-over-match", num(4, 6),
         "ORDER BY id MEASURES SUM(v) AS s PATTERN (A B)", [(10,)]),
    Case("max-of-strings", let("bac"),
         "ORDER BY id MEASURES MAX(v) AS m, MIN(v) AS n PATTERN (A{3})", [("c", "a")]),
    Case("aggregates-of-empty-match", num(2),
         f"ORDER BY id MEASURES SUM(A.v) AS s, COUNT(*) AS n PATTERN (A*) {A1}",
         [(None, 0)]),
    # ------------------------------------------------------------ SUBSET
    Case("subset-aggregates", num(1, 2, 3),
         "ORDER BY id MEASURES COUNT(U.*) AS n, SUM(U.v) AS s, FIRST(U.v) AS f, "
         "LAST(U.v) AS l PATTERN (A B C) SUBSET U = (A, C)", [(2, 4, 1, 3)]),
    Case("subset-in-define-holds", num(1, 2, 4),
         "ORDER BY id MEASURES C.id AS c PATTERN (A B C) SUBSET U = (A, B) "
         "DEFINE C AS v > SUM(U.v)", [(3,)]),
    Case("subset-in-define-fails", num(1, 2, 3),
         "ORDER BY id MEASURES C.id AS c PATTERN (A B C) SUBSET U = (A, B) "
         "DEFINE C AS v > SUM(U.v)", []),
    # ------------------------------------------------------------ CASE
    Case("case-in-measure", num(1, 2, 3, 1, 2),
         "ORDER BY id MEASURES CASE WHEN COUNT(B.*) > 1 THEN 'long' ELSE 'short' END AS k "
         f"PATTERN (A B+) {INC}", [("long",), ("short",)]),
    Case("case-in-define", num(1, 2, 3, 1),
         f"ORDER BY id {SE} PATTERN (A+) DEFINE A AS CASE v WHEN 1 THEN TRUE WHEN 2 THEN "
         "TRUE ELSE FALSE END", [(1, 2), (4, 4)]),
    Case("case-without-else", num(1),
         "ORDER BY id MEASURES CASE WHEN A.v > 10 THEN 'big' END AS k PATTERN (A)",
         [(None,)]),
    # ------------------------------------------------------------ NULL handling
    Case("null-condition-is-false", num(1, None, 2),
         f"ORDER BY id {SE} PATTERN (A+) DEFINE A AS v > 0", [(1, 1), (3, 3)]),
    Case("is-null", num(1, None, None),
         f"ORDER BY id {SE} PATTERN (A+) DEFINE A AS v IS NULL", [(2, 3)]),
    Case("prev-null-on-first-row", num(1, 2),
         "ORDER BY id MEASURES B.id AS b PATTERN (B) DEFINE B AS v > PREV(v)", [(2,)]),
    Case("not-of-null", num(None, 1),
         "ORDER BY id MEASURES A.id AS a PATTERN (A) DEFINE A AS NOT (v > 1)", [(2,)]),
    Case("coalesce-absent-var", num(1),
         f"ORDER BY id MEASURES COALESCE(B.v, -1) AS b PATTERN (A B?) {AB12}", [(-1,)]),
    Case("null-equals-null-is-unknown", num(None, None),
         "ORDER BY id MEASURES A.id AS a PATTERN (A) DEFINE A AS v = PREV(v)", []),
    Case("in-list-with-null", num(1, 2),
         "ORDER BY id MEASURES A.id AS a PATTERN (A) DEFINE A AS v IN (1, NULL)", [(1,)]),
    Case("between", num(1, 2, 3, 4),
         f"ORDER BY id {SE} PATTERN (A+) DEFINE A AS v BETWEEN 2 AND 3", [(2, 3)]),
    # ------------------------------------------------------------ WITHIN
    Case("within-holds", let("ab"),
         f"ORDER BY id {SE} PATTERN (A B) WITHIN 2 DEFINE A AS v = 'a', B AS v = 'b'",
         [(1, 2)]),
    Case("within-too-long", pd.DataFrame({"id": [1, 5], "v": list("ab")}),
         f"ORDER BY id {SE} PATTERN (A B) WITHIN 2 DEFINE A AS v = 'a', B AS v = 'b'", []),
    Case("within-greedy-gives-back", num(0, 0, 0, 0),
         f"ORDER BY id {SE} PATTERN (A B+) WITHIN 2", [(1, 3)]),
    Case("within-interval-inclusive",
         pd.DataFrame({"ts": pd.to_datetime(["2024-01-01 10:00", "2024-01-01 10:30",
                                             "2024-01-01 11:00", "2024-01-01 11:01"])}),
         "ORDER BY ts MEASURES COUNT(*) AS n PATTERN (A B+) WITHIN INTERVAL '1' HOUR",
         [(3,)]),
    Case("within-descending", num(0, 0, 0),
         f"ORDER BY id DESC {SE} PATTERN (A B+) WITHIN 1", [(3, 2)]),
    # ------------------------------------------------------------ event selection
    Case("skip-till-next", let("axxb"),
         f"ORDER BY id {SE} PATTERN (A B) SKIP TILL NEXT MATCH "
         "DEFINE A AS v = 'a', B AS v = 'b'", [(1, 4)]),
    Case("strict-contiguity", let("axxb"),
         f"ORDER BY id {SE} PATTERN (A B) DEFINE A AS v = 'a', B AS v = 'b'", []),
    Case("skip-till-next-loop", let("abxbc"),
         "ORDER BY id MEASURES COUNT(*) AS n, COUNT(B.*) AS nb PATTERN (A B+ C) "
         "SKIP TILL NEXT MATCH DEFINE A AS v = 'a', B AS v = 'b', C AS v = 'c'", [(4, 2)]),
    Case("skip-till-next-does-not-pass-over", let("abbc", x=[0, 1, 2, 2]),
         "ORDER BY id MEASURES LAST(B.id) AS b PATTERN (A B C) SKIP TILL NEXT MATCH "
         "DEFINE A AS v = 'a', B AS v = 'b', C AS v = 'c' AND C.x = B.x", []),
    Case("skip-till-any-tries-later", let("abbc", x=[0, 1, 2, 2]),
         "ORDER BY id MEASURES LAST(B.id) AS b PATTERN (A B C) SKIP TILL ANY MATCH "
         "DEFINE A AS v = 'a', B AS v = 'b', C AS v = 'c' AND C.x = B.x", [(3,)]),
    Case("skip-till-any-prefers-earliest", let("abb"),
         f"ORDER BY id {SE} PATTERN (A B) SKIP TILL ANY MATCH "
         "DEFINE A AS v = 'a', B AS v = 'b'", [(1, 2)]),
    Case("skip-till-prev-is-physical", let("axb"),
         "ORDER BY id MEASURES PREV(B.v) AS p PATTERN (A B) SKIP TILL NEXT MATCH "
         "DEFINE A AS v = 'a', B AS v = 'b'", [("x",)]),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_conformance(case: Case) -> None:
    query = f"SELECT {case.select} FROM t MATCH_RECOGNIZE ({case.body})"
    if isinstance(case.expected, Error):
        with pytest.raises(cep_core.QueryError, match=case.expected.fragment):
            cep_core.match_recognize(query, {"t": case.df})
        return
    assert rows(cep_core.match_recognize(query, {"t": case.df})) == case.expected


def test_case_ids_are_unique() -> None:
    assert len({c.id for c in CASES}) == len(CASES)
