"""Conformance and robustness cases from Trino's and Oracle's documented MATCH_RECOGNIZE
semantics (issue 13 item 2); each case names the documented behaviour it checks."""

from __future__ import annotations

import time

import pandas as pd
import pytest
from mr_helpers import rows, seq

import cep_core
from cep_core import QueryError


def _ones(n: int) -> pd.DataFrame:
    return pd.DataFrame({"t": range(n), "v": [1] * n})


# Trino docs, "Reserved keywords": only the listed words are reserved; MATCH_RECOGNIZE's
# own words (MATCH, PARTITION, ONE, RUNNING, FINAL, PERMUTE, ...) are non-reserved and can
# be used as identifiers (SqlBase.g4 nonReserved rule).
def test_non_reserved_words_as_columns_measures_and_variables() -> None:
    df = pd.DataFrame({"match": [1, 2, 3, 4, 5], "partition": ["a"] * 5,
                       "one": [5, 3, 4, 6, 2], "permute": [1, 2, 3, 4, 5]})
    got = cep_core.match_recognize(
        "SELECT * FROM match MATCH_RECOGNIZE (PARTITION BY partition ORDER BY match "
        "MEASURES FIRST(one) AS match, LAST(permute.one) AS permute, "
        "FINAL LAST(running.one) AS final ONE ROW PER MATCH "
        "PATTERN (permute running+) DEFINE running AS running.one < PREV(one))",
        {"match": df})
    assert list(got.columns) == ["partition", "match", "permute", "final"]
    assert rows(got) == [("a", 5, 5, 3), ("a", 6, 6, 2)]


def test_next_and_first_as_variable_names_in_after_match_skip() -> None:
    got = cep_core.match_recognize(
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES COUNT(*) AS c "
        "AFTER MATCH SKIP TO LAST next PATTERN (first next) "
        "DEFINE first AS v > 0, next AS v > 1)", {"t": seq([1, 2, 3, 1, 2])})
    assert rows(got) == [(2,), (2,), (2,)]  # rows 1-2, then from the last NEXT row: 2-3 ...


# Trino docs, "Row pattern recognition in window structures" / "MATCH_RECOGNIZE":
# RUNNING and FINAL apply to logical navigation (FIRST, LAST) and aggregates; physical
# navigation PREV/NEXT takes no semantics keyword.
@pytest.mark.parametrize("measure", ["FINAL PREV(v)", "RUNNING NEXT(v)",
                                     "FINAL MATCH_NUMBER()"])
def test_running_final_rejected_on_physical_navigation(measure: str) -> None:
    with pytest.raises(QueryError, match="cannot be applied") as err:
        cep_core.match_recognize(
            f"SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES {measure} AS p "
            "PATTERN (A+) DEFINE A AS v > 0)", {"t": seq([1, 2])})
    assert (err.value.line, err.value.column) == (1, 55)  # at RUNNING / FINAL


# Trino docs, mathematical functions: "mod(n, m) ... Division by zero" is an error for
# whole numbers; lakecep reports it as QueryError at the call.
def test_mod_by_zero_is_a_query_error_at_the_call() -> None:
    query = ("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES COUNT(*) AS c "
             "PATTERN (A+) DEFINE A AS MOD(v, 0) = 0)")
    with pytest.raises(QueryError, match="MOD") as err:
        cep_core.match_recognize(query, {"t": seq([1, 2])})
    assert err.value.column == query.index("MOD") + 1


def test_round_to_huge_negative_digits_is_zero() -> None:
    got = cep_core.match_recognize("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES "
                                   "COUNT(*) AS c PATTERN (A+) "
                                   "DEFINE A AS ROUND(v, -999999999) = 0)", {"t": seq([7, 9])})
    assert rows(got) == [(2,)]


@pytest.mark.parametrize(("query_part", "message"), [
    ("PATTERN (A{²})", "unexpected character"),
    ("PATTERN (A) WITHIN INTERVAL '99999999999999999999' DAY", "out of range"),
    ("PATTERN (A) DEFINE A AS " + "(" * 200 + "v > 0" + ")" * 200, "nested too deeply"),
    ("PATTERN (A) DEFINE A AS " + "NOT " * 5000 + "v > 0", "nested too deeply"),
    ("PATTERN (A) DEFINE A AS " + " + ".join(["v"] * 5000) + " > 0", "RecursionError"),
])
def test_odd_queries_raise_query_error(query_part: str, message: str) -> None:
    with pytest.raises(QueryError, match=message):
        cep_core.match_recognize("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES "
                                 f"COUNT(*) AS c {query_part})", {"t": seq([1, 2])})


def test_timestamp_column_compared_with_timestamp_literal() -> None:
    df = pd.DataFrame({"t": pd.to_datetime(["2024-01-01", "2024-01-02", "2024-01-03"])})
    got = cep_core.match_recognize(
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY t MEASURES COUNT(*) AS c PATTERN (A+) "
        "DEFINE A AS t > TIMESTAMP '2024-01-01 12:00:00')", {"t": df})
    assert rows(got) == [(2,)]


# The bound on backtracking (docs/query-language.md, "Bound on backtracking"): with
# row-local conditions the memo keeps these linear; each finishes in seconds on 10k rows.
@pytest.mark.parametrize(("pattern", "defines", "expected"), [
    ("(A+)+ B", "A AS v = 1, B AS v = 2", 0),
    ("(A{0,1}){50} A{50}", "A AS v = 1", 100),
    ("(A+ B+)+ C", "A AS v = 1, B AS v = 1, C AS v = 2", 0),
])
def test_nested_quantifiers_stay_fast_on_10k_rows(pattern: str, defines: str,
                                                  expected: int) -> None:
    began = time.monotonic()
    got = cep_core.match_recognize(
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY t MEASURES COUNT(*) AS c "
        f"PATTERN ({pattern}) DEFINE {defines})", {"t": _ones(10_000)})
    assert len(got) == expected
    assert time.monotonic() - began < 30


# ... and with conditions that read the match the general matcher's backtracking bound
# raises QueryError naming the nested quantifier instead of running for an exponential
# time (the default engine runs these on the compiled kernel, which needs no such bound:
# test_compiled.py checks that it agrees with the general matcher).
@pytest.mark.parametrize(("pattern", "defines", "blamed"), [
    ("(A+)+ B", "B AS v = 2", "(A+)+"),
    ("(A{0,1}){50} A{50} B", "B AS v = 2", "){50}"),
    ("(A+ B+)+ C", "B AS v = 1, C AS v = 2", "(A+ B+)+")])
def test_exponential_backtracking_raises_naming_the_part(pattern: str, defines: str,
                                                         blamed: str) -> None:
    began = time.monotonic()
    with pytest.raises(QueryError, match="backtracked too often") as err:
        cep_core.compile_query(
            "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY t MEASURES COUNT(*) AS c "
            f"PATTERN ({pattern}) DEFINE A AS v >= FIRST(A.v), {defines})",
            engine="general").run(_ones(10_000))
    assert blamed in err.value.message
    assert time.monotonic() - began < 60
