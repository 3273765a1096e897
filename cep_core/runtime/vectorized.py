"""Vectorised evaluation of row-local DEFINE conditions over a whole table at once.

A condition that only reads the current row (no navigation, aggregates or other variables)
is evaluated once per input with pandas, in SQL three-valued logic (pandas' nullable
``boolean`` dtype is Kleene logic). Anything this evaluator does not cover, or any input
pandas would treat differently from SQL, falls back to evaluating the compiled scalar
closure row by row -- still only once per row.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd  # type: ignore[import-untyped, unused-ignore]

from ..compile.expressions import ExprCompiler, Scope, literal_value, walk
from ..compile.functions import like_regex
from ..compile.state import MatchState
from ..compile.values import column_values
from ..language import ast


class _Unsupported(Exception):
    pass


_CMP: dict[str, Callable[[Any, Any], Any]] = {
    "=": operator.eq, "<>": operator.ne, "<": operator.lt, "<=": operator.le,
    ">": operator.gt, ">=": operator.ge,
}
_ARITH: dict[str, Callable[[Any, Any], Any]] = {
    "+": operator.add, "-": operator.sub, "*": operator.mul,
}


def evaluate_condition(expr: ast.Expr, df: pd.DataFrame, scope: Scope) -> np.ndarray:
    """Boolean array: where ``expr`` is TRUE (NULL and FALSE give False)."""
    if len(df) == 0:
        return np.zeros(0, dtype=bool)
    try:
        result = _vec(expr, df, scope)
        mask = _as_bool(result, len(df))
        return np.asarray(mask.fillna(False).to_numpy(dtype=bool), dtype=bool)
    except _Unsupported:
        return _row_by_row(expr, df, scope)
    except (TypeError, ValueError, ArithmeticError):
        return _row_by_row(expr, df, scope)


def evaluate_values(expr: ast.Expr, df: pd.DataFrame, scope: Scope) -> pd.Series:
    """The value of a row-local expression (no variables, navigation or aggregates) at every
    row of ``df``, indexed 0..n-1: vectorised where that has the SQL semantics, else the
    compiled closure row by row (its values as ``DataFrame.from_records`` would type them)."""
    work = df.reset_index(drop=True)
    if len(work):
        try:
            result = _vec(expr, work, scope)
            if isinstance(result, pd.Series) and result.dtype != object:
                return result.reset_index(drop=True)
        except (_Unsupported, TypeError, ValueError, ArithmeticError):
            pass
    fn = ExprCompiler(scope).compile(expr)
    used = {scope.column(n) for n in walk(expr) if isinstance(n, ast.Column)}
    st = MatchState({c: column_values(work[c]) for c in used}, [])
    st.lo, st.hi = 0, len(work)
    st.labels = [0]
    st.upto = 1
    values = []
    for i in range(len(work)):
        st.rows = [i]
        st.epoch += 1
        values.append(fn(st))
    return pd.Series(values, dtype=object).infer_objects()


def _row_by_row(expr: ast.Expr, df: pd.DataFrame, scope: Scope) -> np.ndarray:
    fn = ExprCompiler(scope).compile(expr)
    used = {scope.column(n) for n in walk(expr) if isinstance(n, ast.Column)}
    cols = {c: column_values(df[c]) for c in used}
    var = scope.define_var
    names = list(scope.variables)
    label = next(iter(scope.variables[var])) if var is not None else 0
    st = MatchState(cols, names)
    st.lo, st.hi = 0, len(df)
    st.labels = [label]
    st.upto = 1
    out = np.zeros(len(df), dtype=bool)
    for i in range(len(df)):
        st.rows = [i]
        st.epoch += 1
        out[i] = fn(st) is True
    return out


def _as_bool(value: Any, n: int) -> pd.Series:
    if isinstance(value, pd.Series):
        if value.dtype == "boolean":
            return value
        if value.dtype == bool:
            return value.astype("boolean")
        if value.dtype == object and value.map(lambda v: v is None or isinstance(v, bool)).all():
            return value.astype("boolean")
        raise _Unsupported
    if value is None:
        return pd.Series(pd.array([pd.NA] * n, dtype="boolean"))
    if isinstance(value, bool):
        return pd.Series(pd.array([value] * n, dtype="boolean"))
    raise _Unsupported


def _null_mask(value: Any) -> Any:
    if isinstance(value, pd.Series):
        return value.isna()
    return value is None


def _vec(e: ast.Expr, df: pd.DataFrame, scope: Scope) -> Any:
    n = len(df)
    if isinstance(e, ast.Literal | ast.IntervalLiteral | ast.TimestampLiteral):
        value = literal_value(e)
        if isinstance(value, str | bool) or value is None or isinstance(value, int | float):
            return value
        return value
    if isinstance(e, ast.Column):
        series = df[scope.column(e)].reset_index(drop=True)
        if series.dtype == object:
            # Mixed Python objects: only plain strings are safe to hand to pandas.
            if pd.api.types.infer_dtype(series, skipna=True) not in ("string", "empty"):
                raise _Unsupported
        return series
    if isinstance(e, ast.Unary):
        inner = _vec(e.operand, df, scope)
        if e.op == "NOT":
            return ~_as_bool(inner, n)
        if e.op == "-":
            return -inner if isinstance(inner, pd.Series) else _scalar_negate(inner)
        return inner
    if isinstance(e, ast.Binary):
        if e.op in ("AND", "OR"):
            left = _as_bool(_vec(e.left, df, scope), n)
            right = _as_bool(_vec(e.right, df, scope), n)
            return (left & right) if e.op == "AND" else (left | right)
        a = _vec(e.left, df, scope)
        b = _vec(e.right, df, scope)
        if not isinstance(a, pd.Series) and not isinstance(b, pd.Series):
            raise _Unsupported
        if e.op in _CMP:
            _check_comparable(a, b)
            result = _CMP[e.op](a, b)
            nulls = _null_mask(a) | _null_mask(b)
            out = pd.Series(result, dtype="boolean")
            if isinstance(nulls, pd.Series):
                out[nulls.to_numpy()] = pd.NA
            elif nulls:
                out[:] = pd.NA
            return out
        if e.op in _ARITH:
            _check_numeric_or_time(a)
            _check_numeric_or_time(b)
            return _ARITH[e.op](a, b)
        if e.op == "/":
            _check_float(a)
            _check_float(b)
            return a / b
        raise _Unsupported
    if isinstance(e, ast.IsNull):
        inner = _vec(e.operand, df, scope)
        nulls = _null_mask(inner)
        if not isinstance(nulls, pd.Series):
            raise _Unsupported
        return (~nulls if e.negated else nulls).astype("boolean")
    if isinstance(e, ast.Between):
        low = ast.Binary(">=", e.operand, e.low, e.pos)
        high = ast.Binary("<=", e.operand, e.high, e.pos)
        both: ast.Expr = ast.Binary("AND", low, high, e.pos)
        if e.negated:
            both = ast.Unary("NOT", both, e.pos)
        return _vec(both, df, scope)
    if isinstance(e, ast.InList):
        inner = _vec(e.operand, df, scope)
        if not isinstance(inner, pd.Series):
            raise _Unsupported
        items = []
        for item in e.items:
            if not isinstance(item, ast.Literal) or item.value is None:
                raise _Unsupported
            items.append(item.value)
        kinds = {type(v) for v in items}
        if inner.dtype == object and kinds != {str}:
            raise _Unsupported
        if inner.dtype != object and str in kinds:
            raise _Unsupported
        hit = pd.Series(inner.isin(items), dtype="boolean")
        hit[inner.isna().to_numpy()] = pd.NA
        return ~hit if e.negated else hit
    if isinstance(e, ast.Like):
        return _vec_like(e, df, scope)
    # CAST and function calls are not vectorised: the caller falls back to the
    # compiled row-by-row closure, which has the exact SQL semantics and error messages.
    raise _Unsupported


def _vec_like(e: ast.Like, df: pd.DataFrame, scope: Scope) -> Any:
    """LIKE of a string column against a constant pattern (and escape)."""
    inner = _vec(e.operand, df, scope)
    if not isinstance(inner, pd.Series) or _kind(inner) != "str":
        raise _Unsupported
    if not (isinstance(e.pattern, ast.Literal) and isinstance(e.pattern.value, str)):
        raise _Unsupported
    escape: str | None = None
    if e.escape is not None:
        if not (isinstance(e.escape, ast.Literal) and isinstance(e.escape.value, str)):
            raise _Unsupported
        escape = e.escape.value
    try:
        regex = like_regex(e.pattern.value, escape)
    except ValueError:
        raise _Unsupported from None  # the scalar path reports the error with its position
    nulls = inner.isna().to_numpy()
    hit = pd.Series([False if null else regex.fullmatch(v) is not None
                     for v, null in zip(inner.tolist(), nulls, strict=True)], dtype="boolean")
    hit[nulls] = pd.NA
    return ~hit if e.negated else hit


def _scalar_negate(v: Any) -> Any:
    if v is None:
        return None
    return -v


def _kind(v: Any) -> str:
    if isinstance(v, pd.Series):
        dt = v.dtype
        if pd.api.types.is_bool_dtype(dt):
            return "bool"
        if pd.api.types.is_numeric_dtype(dt):
            return "number"
        if pd.api.types.is_datetime64_any_dtype(dt):
            return "time"
        if pd.api.types.is_timedelta64_dtype(dt):
            return "delta"
        if pd.api.types.is_object_dtype(dt) or pd.api.types.is_string_dtype(dt):
            return "str"
        return "other"
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, int | float):
        return "number"
    if isinstance(v, str):
        return "str"
    if isinstance(v, pd.Timestamp):
        return "time"
    if isinstance(v, pd.Timedelta):
        return "delta"
    return "other"


def _check_comparable(a: Any, b: Any) -> None:
    ka, kb = _kind(a), _kind(b)
    if "null" in (ka, kb):
        return
    if ka != kb or ka == "other":
        raise _Unsupported  # let the scalar path decide (and report type errors)


def _check_numeric_or_time(v: Any) -> None:
    if _kind(v) not in ("number", "time", "delta", "null"):
        raise _Unsupported
    if isinstance(v, pd.Series) and pd.api.types.is_integer_dtype(v.dtype) and str(
            v.dtype) not in ("int64", "Int64"):
        raise _Unsupported  # small integer types could overflow differently


def _check_float(v: Any) -> None:
    # SQL integer division truncates; only vectorise when a float is involved.
    if isinstance(v, pd.Series):
        if not pd.api.types.is_float_dtype(v.dtype):
            raise _Unsupported
    elif not isinstance(v, float):
        raise _Unsupported
