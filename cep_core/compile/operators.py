"""Operator semantics of DEFINE/MEASURES expressions: unary and binary operators,
IS NULL, BETWEEN, IN, CASE, CAST and LIKE nodes as NULL-aware Python functions
(SQL three-valued logic, integer division, type errors as QueryError), and their
combination with compiled children into closures."""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from typing import Any

from ..errors import QueryError
from ..language import ast
from .functions import cast_fn, like_fn, modulo
from .state import Fn, MatchState, RowFn
from .values import is_null


def _type_error(op: str, a: Any, b: Any, pos: ast.Pos) -> QueryError:
    return QueryError(f"cannot apply {op} to {type(a).__name__} {a!r} and "
                      f"{type(b).__name__} {b!r}", *pos)


def _divide(a: Any, b: Any) -> Any:
    if isinstance(a, int) and isinstance(b, int) and not isinstance(b, bool):
        q = abs(a) // abs(b)  # SQL integer division truncates toward zero
        return q if (a >= 0) == (b >= 0) else -q
    if isinstance(b, float | int) and b == 0 and isinstance(a, float | int):
        # Floating-point division follows IEEE (as Trino's DOUBLE): +-inf, or NaN for 0/0
        # (and NaN counts as NULL here, as in pandas).
        return math.nan if a == 0 else math.copysign(math.inf, a) * math.copysign(1.0, b)
    return a / b


_ARITH: dict[str, Callable[[Any, Any], Any]] = {
    "+": operator.add, "-": operator.sub, "*": operator.mul, "/": _divide, "%": modulo,
    "||": lambda a, b: f"{a}{b}",
}
_COMPARE: dict[str, Callable[[Any, Any], Any]] = {
    "=": operator.eq, "<>": operator.ne, "<": operator.lt, "<=": operator.le,
    ">": operator.gt, ">=": operator.ge,
}


def combine(e: ast.Expr, kids: list[Fn]) -> Fn:
    """Build the closure for an operator node from its compiled children."""
    op = _operator(e)
    if len(kids) == 1:
        (a,) = kids
        return lambda st: op(a(st))
    if len(kids) == 2:
        a, b = kids
        if isinstance(e, ast.Binary) and e.op == "AND":
            def and_(st: MatchState) -> Any:
                left = a(st)
                if left is False:
                    return False
                right = b(st)
                if right is False:
                    return False
                return None if left is None or right is None else True
            return and_
        if isinstance(e, ast.Binary) and e.op == "OR":
            def or_(st: MatchState) -> Any:
                left = a(st)
                if left is True:
                    return True
                right = b(st)
                if right is True:
                    return True
                return None if left is None or right is None else False
            return or_
        return lambda st: op(a(st), b(st))
    return lambda st: op(*[k(st) for k in kids])


def lazy_case(e: ast.Case, kids: list[Fn]) -> Fn:
    """CASE that evaluates only the branch it takes."""
    subject_fn = kids[0] if e.operand is not None else None
    rest = kids[1:] if e.operand is not None else kids
    pairs = [(rest[2 * i], rest[2 * i + 1]) for i in range(len(e.whens))]
    default_fn = rest[-1] if e.default is not None else None

    def case(st: MatchState) -> Any:
        subject = subject_fn(st) if subject_fn is not None else None
        for cond_fn, value_fn in pairs:
            cond = cond_fn(st)
            if subject_fn is not None:
                hit = not is_null(subject) and not is_null(cond) and subject == cond
            else:
                hit = _truth(cond) is True
            if hit:
                return value_fn(st)
        return default_fn(st) if default_fn is not None else None

    return case


def combine_rows(e: ast.Expr, kids: list[RowFn]) -> RowFn:
    op = _operator(e)
    return lambda st, row: op(*[k(st, row) for k in kids])


def _truth(v: Any) -> bool | None:
    if is_null(v):
        return None
    return bool(v)


def _operator(e: ast.Expr) -> Callable[..., Any]:
    """The NULL-aware function computing node ``e`` from its children's values."""
    pos: ast.Pos = getattr(e, "pos", (1, 1))
    if isinstance(e, ast.Unary):
        if e.op == "NOT":
            return lambda v: None if is_null(v) else not v
        sign = -1 if e.op == "-" else 1

        def negate(v: Any) -> Any:
            if is_null(v):
                return None
            try:
                return -v if sign < 0 else +v
            except TypeError:
                raise QueryError(f"cannot apply unary {e.op} to {v!r}", *pos) from None
        return negate
    if isinstance(e, ast.Binary):
        if e.op == "AND":
            def and_values(a: Any, b: Any) -> Any:
                a, b = _truth(a), _truth(b)
                if a is False or b is False:
                    return False
                return None if a is None or b is None else True
            return and_values
        if e.op == "OR":
            def or_values(a: Any, b: Any) -> Any:
                a, b = _truth(a), _truth(b)
                if a is True or b is True:
                    return True
                return None if a is None or b is None else False
            return or_values
        fn = _ARITH.get(e.op) or _COMPARE[e.op]
        symbol = e.op

        def binary(a: Any, b: Any) -> Any:
            if is_null(a) or is_null(b):
                return None
            try:
                return fn(a, b)
            except ZeroDivisionError:
                raise QueryError("division by zero", *pos) from None
            except TypeError:
                raise _type_error(symbol, a, b, pos) from None
        return binary
    if isinstance(e, ast.IsNull):
        negated = e.negated
        return lambda v: (not is_null(v)) if negated else is_null(v)
    if isinstance(e, ast.Between):
        negated = e.negated

        def between(v: Any, low: Any, high: Any) -> Any:
            if is_null(v):
                return None
            try:
                ge = None if is_null(low) else v >= low
                le = None if is_null(high) else v <= high
            except TypeError:
                raise _type_error("BETWEEN", v, low, pos) from None
            if ge is False or le is False:
                result: bool | None = False
            elif ge is None or le is None:
                result = None
            else:
                result = True
            return result if result is None or not negated else not result
        return between
    if isinstance(e, ast.InList):
        negated = e.negated

        def in_list(v: Any, *items: Any) -> Any:
            if is_null(v):
                return None
            saw_null = False
            for item in items:
                if is_null(item):
                    saw_null = True
                elif v == item:
                    return not negated
            return None if saw_null else negated
        return in_list
    if isinstance(e, ast.Case):
        has_operand = e.operand is not None
        has_default = e.default is not None

        def case(*values: Any) -> Any:
            # values: [operand], cond1, val1, ..., [default] -- all evaluated eagerly.
            i = 0
            subject = None
            if has_operand:
                subject = values[0]
                i = 1
            end = len(values) - (1 if has_default else 0)
            while i < end:
                cond, value = values[i], values[i + 1]
                if has_operand:
                    hit = not is_null(subject) and not is_null(cond) and subject == cond
                else:
                    hit = cond is True or (not is_null(cond) and bool(cond))
                if hit:
                    return value
                i += 2
            return values[-1] if has_default else None
        return case
    if isinstance(e, ast.Cast):
        return cast_fn(e.type_name, pos)
    if isinstance(e, ast.Like):
        return like_fn(e.negated, e.escape is not None, pos)
    raise TypeError(f"cannot compile {e!r}")
