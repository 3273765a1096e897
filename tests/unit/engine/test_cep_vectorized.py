"""The vectorised evaluation of row-local DEFINE conditions against the scalar closures."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cep_core
from cep_core.compile.expressions import Scope
from cep_core.language.parser import parse_expression
from cep_core.runtime.vectorized import _row_by_row, evaluate_condition

T0 = pd.Timestamp("2024-01-01 00:00")

FRAME = pd.DataFrame({
    "x": [1.5, np.nan, -2.0, 0.0, 3.0, 2.0],
    "n": pd.array([1, None, 3, 0, -1, 2], dtype="Int64"),
    "i": [1, 2, 3, 4, 5, 6],
    "s": ["a", None, "b", "a", "c", "B"],
    "ts": [T0, pd.NaT, T0 + pd.Timedelta(hours=1), T0, T0 + pd.Timedelta(hours=5), T0],
    "flag": [True, False, True, False, True, True],
})

_NUMERIC = ["x", "n", "i", "1", "0", "2.5", "-1", "NULL"]
_TEXT = ["s", "'a'", "'b'", "NULL"]
_TIME = ["ts", "TIMESTAMP '2024-01-01 01:00'", "ts + INTERVAL '1' HOUR",
         "ts - INTERVAL '30' MINUTE"]


def _atoms() -> st.SearchStrategy[str]:
    comparisons = st.sampled_from(["=", "<>", "<", "<=", ">", ">="])
    arith = st.sampled_from(["+", "-", "*", "/"])
    numeric = st.one_of(
        st.sampled_from(_NUMERIC),
        st.builds(lambda a, op, b: f"({a} {op} {b})", st.sampled_from(_NUMERIC), arith,
                  st.sampled_from(_NUMERIC)))
    return st.one_of(
        st.builds(lambda a, op, b: f"{a} {op} {b}", numeric, comparisons, numeric),
        st.builds(lambda a, op, b: f"{a} {op} {b}", st.sampled_from(_TEXT), comparisons,
                  st.sampled_from(_TEXT)),
        st.builds(lambda a, op, b: f"{a} {op} {b}", st.sampled_from(_TIME), comparisons,
                  st.sampled_from(_TIME)),
        st.builds(lambda a, neg: f"{a} IS {'NOT ' if neg else ''}NULL",
                  st.sampled_from(["x", "n", "s", "ts"]), st.booleans()),
        st.builds(lambda a, neg: f"{a} {'NOT ' if neg else ''}BETWEEN -1 AND 2",
                  st.sampled_from(["x", "n", "i"]), st.booleans()),
        st.builds(lambda a, neg: f"{a} {'NOT ' if neg else ''}IN ('a', 'c')",
                  st.just("s"), st.booleans()),
        st.builds(lambda a, neg: f"{a} {'NOT ' if neg else ''}IN (1, 3)",
                  st.sampled_from(["n", "i", "x"]), st.booleans()),
        st.sampled_from(["flag", "TRUE", "FALSE", "NULL", "NOT flag"]),
    )


conditions = st.recursive(
    _atoms(),
    lambda inner: st.one_of(
        st.builds(lambda a, b: f"({a}) AND ({b})", inner, inner),
        st.builds(lambda a, b: f"({a}) OR ({b})", inner, inner),
        st.builds(lambda a: f"NOT ({a})", inner)),
    max_leaves=4)


def _scope() -> Scope:
    return Scope(list(FRAME.columns), {"A": frozenset([0])}, "DEFINE", "A")


@settings(max_examples=200, deadline=None)
@given(conditions)
def test_vectorised_conditions_equal_row_by_row(text: str) -> None:
    expr = parse_expression(text)
    try:
        expected = _row_by_row(expr, FRAME, _scope())
    except cep_core.QueryError:
        with pytest.raises(cep_core.QueryError):
            evaluate_condition(expr, FRAME, _scope())
        return
    got = evaluate_condition(expr, FRAME, _scope())
    assert got.dtype == bool
    assert got.tolist() == expected.tolist()


@pytest.mark.parametrize(("text", "expected"), [
    ("x > 0", [True, False, False, False, True, True]),
    ("NOT (x > 0)", [False, False, True, True, False, False]),
    ("n >= 1 OR s = 'a'", [True, False, True, True, False, True]),
    ("ts <= TIMESTAMP '2024-01-01 01:00'", [True, False, True, True, False, True]),
    ("s IN ('a', 'c')", [True, False, False, True, True, False]),
])
def test_hand_checked_conditions(text: str, expected: list[bool]) -> None:
    got = evaluate_condition(parse_expression(text), FRAME, _scope())
    assert got.tolist() == expected
