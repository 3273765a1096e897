"""Boolean conditions: the SQL standard types a DEFINE condition (and every operand of AND,
OR, NOT and every searched CASE WHEN) as BOOLEAN and rejects anything else.

Checked once for the query (what the text shows: literals, arithmetic, functions,
aggregates) and again for each input (a bare column, or navigation / MIN / MAX / COALESCE
of one, must hold booleans), so the batch, fast and incremental matchers all refuse the same
queries up front instead of each treating non-boolean values in its own way.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..errors import QueryError
from ..language import ast
from .expressions import walk

_NUMBER_FUNCTIONS = {"ABS", "ROUND", "FLOOR", "CEIL", "CEILING", "SQRT", "POWER", "MOD",
                     "LENGTH", "COUNT", "SUM", "AVG", "MATCH_NUMBER"}
_PASS_THROUGH = {"PREV", "NEXT", "FIRST", "LAST", "MIN", "MAX", "COALESCE", "GREATEST",
                 "LEAST"}
ColumnKind = Callable[[ast.Column], str | None]


def check_boolean_conditions(match: ast.MatchRecognize,
                             column_kind: ColumnKind | None = None) -> None:
    """Raise a QueryError (at the offending part) unless every DEFINE condition and every
    operand of AND / OR / NOT / CASE WHEN in DEFINE and MEASURES is boolean (or NULL).
    ``column_kind`` gives the kind of a column of the input ('boolean', 'number', ...;
    None: unknown); without it (no data yet) columns pass."""
    kind_of = column_kind or (lambda col: None)
    for d in match.defines:
        _need_boolean(d.condition, kind_of, f"the DEFINE condition of {d.var}")
        _check_operands(d.condition, kind_of)
    for me in match.measures:
        _check_operands(me.expr, kind_of)


def frame_column_kind(df: Any, resolve: Callable[[ast.Column], str]) -> ColumnKind:
    """``column_kind`` for :func:`check_boolean_conditions` from the dtypes of ``df``
    (``resolve`` maps a column reference to its name in ``df``)."""
    import pandas as pd  # type: ignore[import-untyped, unused-ignore]

    def kind(col: ast.Column) -> str | None:
        series = df[resolve(col)]
        dtype = series.dtype
        if pd.api.types.is_bool_dtype(dtype):
            return "boolean"
        if isinstance(dtype, pd.CategoricalDtype):
            series = series.astype(object)
            dtype = series.dtype
        if pd.api.types.is_object_dtype(dtype):
            values = series.dropna()
            if not len(values):
                return None
            if all(isinstance(v, bool | np.bool_) for v in values):
                return "boolean"
            return f"{type(values.iloc[0]).__name__} values"
        return f"type {dtype}"

    return kind


def _check_operands(expr: ast.Expr, kind_of: ColumnKind) -> None:
    for node in walk(expr):
        if isinstance(node, ast.Binary) and node.op in ("AND", "OR"):
            _need_boolean(node.left, kind_of, f"an operand of {node.op}")
            _need_boolean(node.right, kind_of, f"an operand of {node.op}")
        elif isinstance(node, ast.Unary) and node.op == "NOT":
            _need_boolean(node.operand, kind_of, "the operand of NOT")
        elif isinstance(node, ast.Call) and node.filter is not None:
            _need_boolean(node.filter, kind_of, "a FILTER (WHERE ...) condition")
        elif isinstance(node, ast.Case) and node.operand is None:
            for cond, _ in node.whens:
                _need_boolean(cond, kind_of, "a CASE WHEN condition")


def _need_boolean(expr: ast.Expr, kind_of: ColumnKind, what: str) -> None:
    found = _kind(expr, kind_of)
    if found is not None and found[0] != "boolean":
        kind, at = found
        raise QueryError(f"{what} must be boolean, but {kind} is not (SQL does not treat "
                         "other values as true or false; compare them, e.g. x <> 0)", *at)


def _kind(e: ast.Expr, kind_of: ColumnKind) -> tuple[str, ast.Pos] | None:
    """The kind of value ``e`` has ('boolean' or a description of another kind) and where;
    None if unknown (NULL, or a column without data)."""
    pos: ast.Pos = getattr(e, "pos", (1, 1))
    if isinstance(e, ast.Literal):
        v = e.value
        if v is None:
            return None
        if isinstance(v, bool):
            return "boolean", pos
        return (f"the string {v!r}" if isinstance(v, str) else f"the number {v!r}"), pos
    if isinstance(e, ast.IntervalLiteral):
        return "an INTERVAL", pos
    if isinstance(e, ast.TimestampLiteral):
        return "a TIMESTAMP", pos
    if isinstance(e, ast.Column):
        col = kind_of(e)
        if col is None or col == "boolean":
            return None if col is None else ("boolean", pos)
        return f"column {e.name} ({col})", pos
    if isinstance(e, ast.Unary):
        return ("boolean", pos) if e.op == "NOT" else ("a number", pos)
    if isinstance(e, ast.Binary):
        if e.op in ("AND", "OR", "=", "<>", "!=", "<", "<=", ">", ">="):
            return "boolean", pos
        return ("a string" if e.op == "||" else f"the result of {e.op}"), pos
    if isinstance(e, ast.IsNull | ast.Between | ast.InList | ast.Like):
        return "boolean", pos
    if isinstance(e, ast.Cast):
        return ("boolean", pos) if e.type_name == "BOOLEAN" else (f"a {e.type_name}", pos)
    if isinstance(e, ast.Case):
        branches = [v for _, v in e.whens] + ([] if e.default is None else [e.default])
        kinds = [k for k in (_kind(b, kind_of) for b in branches) if k is not None]
        other = next((k for k in kinds if k[0] != "boolean"), None)
        return other or (kinds[0] if kinds else None)
    if isinstance(e, ast.Call):
        if e.name in _PASS_THROUGH:
            args = e.args[:1] if e.name in ("PREV", "NEXT", "FIRST", "LAST") else e.args
            kinds = [k for k in (_kind(a, kind_of) for a in args if not isinstance(a, ast.Star))
                     if k is not None]
            other = next((k for k in kinds if k[0] != "boolean"), None)
            return other or (kinds[0] if kinds else None)
        if e.name in _NUMBER_FUNCTIONS:
            return f"{e.name}(...) (a number)", pos
        return f"{e.name}(...) (not a boolean function)", pos
    return None
