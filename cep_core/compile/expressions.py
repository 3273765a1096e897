"""DEFINE / MEASURES expressions: tree -> Python closures over a match state.

Each expression compiles once (per query and input schema) into a closure ``f(state)``.
``MatchState`` holds the partition's columns as Python lists and the current (partial) match
as parallel lists of row positions and variable indices; ``upto`` is how many of those rows
are visible (RUNNING semantics), ``FINAL`` sees them all.

Row pattern semantics (SQL:2016, as Trino and Oracle document them):

* ``A.x`` is ``x`` at the last visible row mapped to ``A`` (NULL if none); ``x`` alone is the
  universal variable: the current row.
* ``FIRST(A.x, n)`` / ``LAST(A.x, n)``: logical offsets among the rows mapped to ``A``;
  ``PREV(e, n)`` / ``NEXT(e, n)``: physical offsets within the partition, from the row
  ``e`` points at (the last row of its variable, or a nested FIRST/LAST).
* aggregates run over the visible rows mapped to their variable (all rows if none).
* NULL follows SQL three-valued logic; a DEFINE condition holds only if it is TRUE.
"""

from __future__ import annotations

import functools
import itertools
import math
import operator
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd  # type: ignore[import-untyped, unused-ignore]

from ..errors import QueryError
from ..language import ast

Fn = Callable[["MatchState"], Any]
RowFn = Callable[["MatchState", int], Any]

NAVIGATION = {"PREV", "NEXT", "FIRST", "LAST"}
AGGREGATES = {"COUNT", "SUM", "AVG", "MIN", "MAX"}
SPECIAL = {"CLASSIFIER", "MATCH_NUMBER"}
_INTERVAL_SECONDS = {"SECOND": 1, "MINUTE": 60, "HOUR": 3600, "DAY": 86400}
_STATE_SERIAL = itertools.count(1)


class MatchState:
    """The partition and the (partial) match an expression is evaluated against."""

    __slots__ = ("cols", "lo", "hi", "rows", "labels", "upto", "match_number", "names", "open",
                 "touched_end", "epoch")

    def __init__(self, cols: Mapping[str, Sequence[Any]], names: Sequence[str]):
        self.cols = cols
        self.lo = 0  # the partition is rows lo..hi-1 of the (sorted) columns
        self.hi = 0
        self.rows: list[int] = []
        self.labels: list[int] = []
        self.upto = 0
        self.match_number = 0
        self.names = names  # variable name by index, for CLASSIFIER()
        # Incremental matching: more rows may still arrive after ``hi`` (``open``); reading
        # past ``hi`` then sets ``touched_end`` (the value is not known yet).
        self.open = False
        self.touched_end = False
        # Bumped whenever rows/labels are replaced or shortened: aggregates cache their
        # running state per epoch, since within one epoch the match only grows. Compiled
        # expressions outlive a state (an incremental matcher makes one per feed), so each
        # state starts its epochs in a range of its own: a cache never takes a new state's
        # epoch for an old one.
        self.epoch = next(_STATE_SERIAL) << 48


def interval_value(lit: ast.IntervalLiteral) -> pd.Timedelta:
    return pd.Timedelta(seconds=float(lit.amount) * _INTERVAL_SECONDS[lit.unit])


class AnyColumns(tuple[str, ...]):
    """A schema that contains every column name (for checking a query without data)."""

    def __contains__(self, item: object) -> bool:
        return True


@dataclass
class Scope:
    """What names mean while compiling: columns, variables, and the clause being compiled.

    ``columns`` maps each input column name to its key in ``MatchState.cols``; resolution is
    exact for quoted names and case-insensitive otherwise. ``variables`` maps every pattern
    and subset variable to the set of variable indices it covers.
    """

    columns: Sequence[str]
    variables: Mapping[str, frozenset[int]]
    clause: str  # 'DEFINE' or 'MEASURES'
    define_var: str | None = None
    _lower: dict[str, list[str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in self.columns:
            self._lower.setdefault(name.lower(), []).append(name)

    def column(self, col: ast.Column) -> str:
        if col.name in self.columns:
            return col.name
        if not col.quoted:
            found = self._lower.get(col.name.lower(), [])
            if len(found) == 1:
                return found[0]
            if len(found) > 1:
                raise QueryError(f"column name {col.name!r} is ambiguous: {found}", *col.pos)
        available = ", ".join(self.columns)
        raise QueryError(f"unknown column {col.name!r}; the input has: {available}", *col.pos)

    def variable(self, name: str | None, pos: ast.Pos) -> frozenset[int] | None:
        if name is None:
            return None
        try:
            return self.variables[name]
        except KeyError:
            raise QueryError(f"undefined pattern variable {name!r} in {self.clause}; "
                             f"variables are: {', '.join(self.variables)}", *pos) from None


# ----------------------------------------------------------------------------- analysis


def walk(expr: ast.Expr) -> list[ast.Expr]:
    """All nodes of ``expr``, parents first."""
    out: list[ast.Expr] = []
    stack = [expr]
    while stack:
        node = stack.pop()
        out.append(node)
        stack.extend(reversed(children(node)))
    return out


def children(node: ast.Expr) -> list[ast.Expr]:
    if isinstance(node, ast.Unary):
        return [node.operand]
    if isinstance(node, ast.Binary):
        return [node.left, node.right]
    if isinstance(node, ast.IsNull):
        return [node.operand]
    if isinstance(node, ast.Between):
        return [node.operand, node.low, node.high]
    if isinstance(node, ast.InList):
        return [node.operand, *node.items]
    if isinstance(node, ast.Case):
        kids = [] if node.operand is None else [node.operand]
        for cond, value in node.whens:
            kids += [cond, value]
        return kids + ([] if node.default is None else [node.default])
    if isinstance(node, ast.Call):
        return list(node.args)
    if isinstance(node, ast.Cast):
        return [node.operand]
    if isinstance(node, ast.Like):
        return [node.operand, node.pattern] + ([] if node.escape is None else [node.escape])
    return []


def is_row_local(expr: ast.Expr, var: str) -> bool:
    """True if ``expr`` (a DEFINE condition of ``var``) depends on the current row only."""
    for node in walk(expr):
        if isinstance(node, ast.Column) and node.var not in (None, var):
            return False
        if isinstance(node, ast.Call) and (node.name in NAVIGATION or node.name in AGGREGATES
                                           or node.name in SPECIAL):
            return False
        if isinstance(node, ast.Star):
            return False
    return True


def conjuncts(expr: ast.Expr) -> list[ast.Expr]:
    """Split a condition on its top-level ANDs."""
    if isinstance(expr, ast.Binary) and expr.op == "AND":
        return conjuncts(expr.left) + conjuncts(expr.right)
    return [expr]


# ----------------------------------------------------------------------------- values


def _is_null(v: Any) -> bool:
    if v is None:
        return True
    kind = type(v)
    if kind is int or kind is str or kind is bool:
        return False
    if kind is float:
        return bool(v != v)  # NaN
    return v is pd.NaT or v is pd.NA or (isinstance(v, float) and math.isnan(v))


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


def _modulo(a: Any, b: Any) -> Any:
    if isinstance(a, float) or isinstance(b, float):
        return math.nan if b == 0 else math.fmod(a, b)
    return int(math.copysign(abs(a) % abs(b), a))


_ARITH: dict[str, Callable[[Any, Any], Any]] = {
    "+": operator.add, "-": operator.sub, "*": operator.mul, "/": _divide, "%": _modulo,
    "||": lambda a, b: f"{a}{b}",
}
_COMPARE: dict[str, Callable[[Any, Any], Any]] = {
    "=": operator.eq, "<>": operator.ne, "<": operator.lt, "<=": operator.le,
    ">": operator.gt, ">=": operator.ge,
}


def _round(x: Any, digits: Any = 0) -> Any:
    if _is_null(x) or _is_null(digits):
        return None
    scale = 10 ** int(digits)
    value = math.floor(abs(x) * scale + 0.5) / scale
    value = math.copysign(value, x)
    return int(value) if isinstance(x, int) and int(digits) <= 0 else value


def _strict(fn: Callable[..., Any]) -> Callable[..., Any]:
    """NULL in, NULL out."""

    def wrapped(*args: Any) -> Any:
        if any(_is_null(a) for a in args):
            return None
        return fn(*args)

    return wrapped


def _substr(s: Any, start: Any, *length: Any) -> Any:
    """SQL SUBSTR: 1-based ``start``; a negative start counts from the end (as Trino)."""
    if _is_null(s) or _is_null(start) or any(_is_null(n) for n in length):
        return None
    text, begin = str(s), int(start)
    if begin == 0 or abs(begin) > len(text):
        return ""
    begin = begin - 1 if begin > 0 else len(text) + begin
    if not length:
        return text[begin:]
    count = int(length[0])
    if count < 0:
        raise ValueError(f"the length must not be negative, got {count}")
    return text[begin:begin + count]


def _double(fn: Callable[..., Any], *args: Any) -> float:
    """``fn`` in IEEE double arithmetic, as Trino's SQRT and POWER: NaN (which counts as
    NULL) for a negative base with a fractional exponent or a negative square root, +-inf
    on overflow -- never a complex number, an exception or a huge exact integer."""
    if not all(isinstance(a, int | float) for a in args):
        raise TypeError(f"needs numbers, got {', '.join(type(a).__name__ for a in args)}")
    with np.errstate(all="ignore"):
        return float(fn(*(np.float64(a) for a in args)))


SCALAR_FUNCTIONS: dict[str, tuple[int, int, Callable[..., Any]]] = {
    # name: (min args, max args, implementation)
    "ABS": (1, 1, _strict(abs)),
    "ROUND": (1, 2, _round),
    "FLOOR": (1, 1, _strict(math.floor)),
    "CEIL": (1, 1, _strict(math.ceil)),
    "CEILING": (1, 1, _strict(math.ceil)),
    "SQRT": (1, 1, _strict(lambda a: _double(np.sqrt, a))),
    "POWER": (2, 2, _strict(lambda a, b: _double(np.power, a, b))),
    "MOD": (2, 2, _strict(_modulo)),
    "LOWER": (1, 1, _strict(lambda s: str(s).lower())),
    "UPPER": (1, 1, _strict(lambda s: str(s).upper())),
    "LENGTH": (1, 1, _strict(lambda s: len(str(s)))),
    "CONCAT": (1, 64, _strict(lambda *a: "".join(str(x) for x in a))),
    "SUBSTR": (2, 3, _substr),
    "SUBSTRING": (2, 3, _substr),
    "TRIM": (1, 1, _strict(lambda s: str(s).strip(" "))),
    "LTRIM": (1, 1, _strict(lambda s: str(s).lstrip(" "))),
    "RTRIM": (1, 1, _strict(lambda s: str(s).rstrip(" "))),
    "REPLACE": (2, 3, _strict(lambda s, a, b="": str(s).replace(str(a), str(b)))),
    "COALESCE": (1, 64, lambda *a: next((x for x in a if not _is_null(x)), None)),
    "GREATEST": (1, 64, _strict(lambda *a: max(a))),
    "LEAST": (1, 64, _strict(lambda *a: min(a))),
}


def normalise(value: Any) -> Any:
    """Turn pandas/numpy missing values into None (SQL NULL)."""
    return None if _is_null(value) else value


def to_python(value: Any) -> Any:
    """A numpy scalar as the Python scalar, missing values as None."""
    if isinstance(value, np.generic) and not isinstance(value, np.datetime64 | np.timedelta64):
        value = value.item()
    return normalise(value)


def column_values(series: pd.Series) -> list[Any]:
    """A column as Python values, with missing values as None."""
    values: list[Any] = series.tolist()
    if series.isna().any():
        return [normalise(v) for v in values]
    return values


# ----------------------------------------------------------------------------- compiler


class ExprCompiler:
    """Compiles expressions for one clause (DEFINE of one variable, or MEASURES)."""

    def __init__(self, scope: Scope):
        self.scope = scope

    # A "row function" evaluates an expression with every column read at one given row;
    # it is what navigation functions and aggregates apply at the rows they pick.
    def compile(self, expr: ast.Expr, final: bool = False) -> Fn:
        return self._compile(expr, final)

    def _compile(self, e: ast.Expr, final: bool) -> Fn:
        if isinstance(e, ast.Literal | ast.IntervalLiteral | ast.TimestampLiteral):
            value = literal_value(e)
            return lambda st: value
        if isinstance(e, ast.Column):
            var = self.scope.variable(e.var, e.pos)
            return self._navigate(self._row_fn(e, var), var, "LAST", 0, 0, final, e.pos)
        if isinstance(e, ast.Call):
            return self._compile_call(e, final)
        if isinstance(e, ast.Star):
            raise QueryError("'*' is only allowed inside COUNT(...)", *e.pos)
        # Operators: compile the children, then combine.
        if isinstance(e, ast.Case):
            return _lazy_case(e, [self._compile(k, final) for k in children(e)])
        return _combine(e, [self._compile(k, final) for k in children(e)])

    # ------------------------------------------------------------------ row functions
    def _row_fn(self, e: ast.Expr, var: frozenset[int] | None) -> RowFn:
        """Compile ``e`` to f(state, row); all column references must use ``var``."""
        if isinstance(e, ast.Literal | ast.IntervalLiteral | ast.TimestampLiteral):
            value = literal_value(e)
            return lambda st, row: value
        if isinstance(e, ast.Column):
            key = self.scope.column(e)
            return lambda st, row: st.cols[key][row]
        if isinstance(e, ast.Call):
            if e.name in NAVIGATION or e.name in AGGREGATES or e.name in SPECIAL:
                raise QueryError(f"{e.name}(...) cannot be nested inside a navigation function "
                                 "or aggregate here", *e.pos)
            args = [self._row_fn(a, var) for a in e.args]
            fn = self._scalar(e)
            return lambda st, row: fn(*[a(st, row) for a in args])
        if isinstance(e, ast.Star):
            raise QueryError("'*' is only allowed inside COUNT(...)", *e.pos)
        kids = [self._row_fn(k, var) for k in children(e)]
        # Reuse the operator combinators by binding the row into a state-only closure.
        return _combine_rows(e, kids)

    def _arg_variable(self, e: ast.Expr, what: str, pos: ast.Pos) -> tuple[str | None, bool]:
        """The single variable that the column references in ``e`` use."""
        names = {n.var for n in walk(e) if isinstance(n, ast.Column)}
        if len(names) > 1:
            shown = ", ".join(sorted(v or "(none)" for v in names))
            raise QueryError(f"all column references in {what} must use the same pattern "
                             f"variable; found {shown}", *pos)
        return (next(iter(names)) if names else None), bool(names)

    # ------------------------------------------------------------------ calls
    def _compile_call(self, e: ast.Call, final: bool) -> Fn:
        if e.semantics == "FINAL":
            if self.scope.clause == "DEFINE":
                raise QueryError("FINAL is not allowed in DEFINE (conditions are always "
                                 "evaluated with RUNNING semantics)", *e.pos)
            if e.name not in NAVIGATION and e.name not in AGGREGATES:
                raise QueryError("FINAL applies to FIRST, LAST, PREV, NEXT and aggregates",
                                 *e.pos)
            final = True
        elif e.semantics == "RUNNING":
            final = False
        if e.name in NAVIGATION:
            return self._compile_navigation(e, final)
        if e.name in AGGREGATES:
            return self._compile_aggregate(e, final)
        if e.name == "MATCH_NUMBER":
            self._arity(e, 0, 0)
            return lambda st: st.match_number
        if e.name == "CLASSIFIER":
            self._arity(e, 0, 1)
            var: frozenset[int] | None = None
            if e.args:
                arg = e.args[0]
                if not (isinstance(arg, ast.Column) and arg.var is None):
                    raise QueryError("CLASSIFIER takes a pattern variable name", *_pos_of(arg))
                name = arg.name if arg.quoted else arg.name.upper()
                var = self.scope.variable(name, arg.pos)
            return _classifier(var, final)
        fn = self._scalar(e)
        args = [self._compile(a, final) for a in e.args]
        return lambda st: fn(*[a(st) for a in args])

    def _arity(self, e: ast.Call, low: int, high: int) -> None:
        if not low <= len(e.args) <= high:
            want = str(low) if low == high else f"{low} to {high}"
            raise QueryError(f"{e.name} takes {want} argument(s), got {len(e.args)}", *e.pos)

    def _scalar(self, e: ast.Call) -> Callable[..., Any]:
        if e.name not in SCALAR_FUNCTIONS:
            known = sorted(SCALAR_FUNCTIONS) + sorted(NAVIGATION | AGGREGATES | SPECIAL)
            raise QueryError(f"unknown function {e.name}; known functions: {', '.join(known)}",
                             *e.pos)
        low, high, fn = SCALAR_FUNCTIONS[e.name]
        self._arity(e, low, high)
        pos = e.pos
        name = e.name

        def call(*args: Any) -> Any:
            try:
                return fn(*args)
            except (TypeError, ValueError, OverflowError) as err:
                raise QueryError(f"{name}: {err}", *pos) from None

        return call

    def _offset(self, e: ast.Call) -> int:
        if len(e.args) < 2:
            return 0 if e.name in ("FIRST", "LAST") else 1
        arg = e.args[1]
        if not (isinstance(arg, ast.Literal) and isinstance(arg.value, int)
                and not isinstance(arg.value, bool) and arg.value >= 0):
            raise QueryError(f"the offset of {e.name} must be a non-negative whole number",
                             *_pos_of(arg))
        return int(arg.value)

    def _compile_navigation(self, e: ast.Call, final: bool) -> Fn:
        self._arity(e, 1, 2)
        offset = self._offset(e)
        inner = e.args[0]
        if e.name in ("PREV", "NEXT"):
            step = -offset if e.name == "PREV" else offset
            if isinstance(inner, ast.Call) and inner.name in ("FIRST", "LAST"):
                if inner.semantics == "FINAL" and self.scope.clause == "DEFINE":
                    raise QueryError("FINAL is not allowed in DEFINE", *inner.pos)
                inner_final = final or inner.semantics == "FINAL"
                self._arity(inner, 1, 2)
                name, _ = self._arg_variable(inner.args[0], inner.name, inner.pos)
                var = self.scope.variable(name, inner.pos)
                row_fn = self._row_fn(inner.args[0], var)
                return self._navigate(row_fn, var, inner.name, self._offset(inner), step,
                                      inner_final, e.pos)
            name, _ = self._arg_variable(inner, e.name, e.pos)
            var = self.scope.variable(name, e.pos)
            return self._navigate(self._row_fn(inner, var), var, "LAST", 0, step, final, e.pos)
        name, _ = self._arg_variable(inner, e.name, e.pos)
        var = self.scope.variable(name, e.pos)
        return self._navigate(self._row_fn(inner, var), var, e.name, offset, 0, final, e.pos)

    def _navigate(self, row_fn: RowFn, var: frozenset[int] | None, logical: str, offset: int,
                  step: int, final: bool, pos: ast.Pos) -> Fn:
        """Find the row (logical FIRST/LAST offset among ``var``'s rows, then a physical
        step), and evaluate ``row_fn`` there; NULL if there is no such row."""
        from_end = logical == "LAST"

        if var is None and from_end:
            # The common case: a plain column (the current row) or PREV/NEXT of one.
            def nav_current(st: MatchState) -> Any:
                count = len(st.rows) if final else st.upto
                if offset >= count:
                    return None
                row = st.rows[count - 1 - offset] + step
                if row < st.lo or row >= st.hi:
                    if row >= st.hi and st.open:
                        st.touched_end = True
                    return None
                return row_fn(st, row)

            return nav_current

        def nav(st: MatchState) -> Any:
            count = len(st.rows) if final else st.upto
            rows = st.rows
            if var is None:
                if offset >= count:
                    return None
                row = rows[count - 1 - offset] if from_end else rows[offset]
            else:
                labels = st.labels
                found = -1
                seen = 0
                if from_end:
                    for i in range(count - 1, -1, -1):
                        if labels[i] in var:
                            if seen == offset:
                                found = rows[i]
                                break
                            seen += 1
                else:
                    for i in range(count):
                        if labels[i] in var:
                            if seen == offset:
                                found = rows[i]
                                break
                            seen += 1
                if found < 0:
                    return None
                row = found
            row += step
            if row < st.lo or row >= st.hi:
                if row >= st.hi and st.open:
                    st.touched_end = True
                return None
            return row_fn(st, row)

        return nav

    def _compile_aggregate(self, e: ast.Call, final: bool) -> Fn:
        self._arity(e, 1, 1)
        arg = e.args[0]
        if isinstance(arg, ast.Star):
            if e.name != "COUNT":
                raise QueryError(f"{e.name}(*) is not allowed; only COUNT(*)", *arg.pos)
            var = self.scope.variable(arg.var, arg.pos)
            return _count_rows(var, final)
        for node in walk(arg):
            if isinstance(node, ast.Call) and (node.name in AGGREGATES
                                               or node.name in NAVIGATION):
                raise QueryError(f"{node.name}(...) cannot be used inside {e.name}(...)",
                                 *node.pos)
        name, _ = self._arg_variable(arg, e.name, e.pos)
        var = self.scope.variable(name, e.pos)
        return _aggregate(e.name, self._row_fn(arg, var), var, final, e.pos, e.distinct)


def _pos_of(e: ast.Expr) -> ast.Pos:
    pos: ast.Pos = getattr(e, "pos", (1, 1))
    return pos


def literal_value(e: ast.Expr) -> Any:
    if isinstance(e, ast.Literal):
        return e.value
    if isinstance(e, ast.IntervalLiteral):
        return interval_value(e)
    if isinstance(e, ast.TimestampLiteral):
        try:
            return pd.Timestamp(e.text)
        except ValueError:
            raise QueryError(f"bad timestamp literal {e.text!r}", *e.pos) from None
    raise TypeError(e)


def _count_rows(var: frozenset[int] | None, final: bool) -> Fn:
    cache = [-1, 0, 0]  # epoch, rows looked at, count

    def count(st: MatchState) -> Any:
        total = len(st.rows) if final else st.upto
        if var is None:
            return total
        epoch, k, n = cache
        if epoch != st.epoch or k > total:
            k, n = 0, 0
        labels = st.labels
        for i in range(k, total):
            if labels[i] in var:
                n += 1
        cache[0], cache[1], cache[2] = st.epoch, total, n
        return n

    return count


def _aggregate(name: str, row_fn: RowFn, var: frozenset[int] | None, final: bool,
               pos: ast.Pos, distinct: bool = False) -> Fn:
    """COUNT/SUM/AVG/MIN/MAX over the visible rows of ``var`` (NULLs skipped);
    ``distinct`` (COUNT only): the accumulator is the set of values seen.

    The running state is cached per ``MatchState.epoch``, so extending a match by one row
    costs one step instead of a pass over the whole match.
    """
    cache: list[Any] = [-1, 0, 0, None]  # epoch, rows looked at, non-null count, accumulator

    def agg(st: MatchState) -> Any:
        total = len(st.rows) if final else st.upto
        epoch, k, n, acc = cache
        if epoch != st.epoch or k > total:
            k, n, acc = 0, 0, None
        rows, labels = st.rows, st.labels
        try:
            for i in range(k, total):
                if var is not None and labels[i] not in var:
                    continue
                v = row_fn(st, rows[i])
                if _is_null(v):
                    continue
                n += 1
                if distinct:
                    acc = set() if acc is None else acc  # grows only within an epoch
                    acc.add(v)
                elif acc is None:
                    acc = v
                elif name in ("SUM", "AVG"):
                    acc = acc + v
                elif name == "MIN":
                    acc = v if v < acc else acc
                elif name == "MAX":
                    acc = v if v > acc else acc
        except TypeError as err:
            raise QueryError(f"{name}: {err}", *pos) from None
        cache[0], cache[1], cache[2], cache[3] = st.epoch, total, n, acc
        if name == "COUNT":
            return len(acc) if distinct and acc is not None else n
        if n == 0:
            return None
        return acc / n if name == "AVG" else acc

    return agg


def _classifier(var: frozenset[int] | None, final: bool) -> Fn:
    def classifier(st: MatchState) -> Any:
        count = len(st.rows) if final else st.upto
        for i in range(count - 1, -1, -1):
            if var is None or st.labels[i] in var:
                return st.names[st.labels[i]]
        return None

    return classifier


# ----------------------------------------------------------------------------- operators


def _combine(e: ast.Expr, kids: list[Fn]) -> Fn:
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


def _lazy_case(e: ast.Case, kids: list[Fn]) -> Fn:
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
                hit = not _is_null(subject) and not _is_null(cond) and subject == cond
            else:
                hit = _truth(cond) is True
            if hit:
                return value_fn(st)
        return default_fn(st) if default_fn is not None else None

    return case


def _combine_rows(e: ast.Expr, kids: list[RowFn]) -> RowFn:
    op = _operator(e)
    return lambda st, row: op(*[k(st, row) for k in kids])


def _truth(v: Any) -> bool | None:
    if _is_null(v):
        return None
    return bool(v)


def _operator(e: ast.Expr) -> Callable[..., Any]:
    """The NULL-aware function computing node ``e`` from its children's values."""
    pos: ast.Pos = getattr(e, "pos", (1, 1))
    if isinstance(e, ast.Unary):
        if e.op == "NOT":
            return lambda v: None if _is_null(v) else not v
        sign = -1 if e.op == "-" else 1

        def negate(v: Any) -> Any:
            if _is_null(v):
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
            if _is_null(a) or _is_null(b):
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
        return lambda v: (not _is_null(v)) if negated else _is_null(v)
    if isinstance(e, ast.Between):
        negated = e.negated

        def between(v: Any, low: Any, high: Any) -> Any:
            if _is_null(v):
                return None
            try:
                ge = None if _is_null(low) else v >= low
                le = None if _is_null(high) else v <= high
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
            if _is_null(v):
                return None
            saw_null = False
            for item in items:
                if _is_null(item):
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
                    hit = not _is_null(subject) and not _is_null(cond) and subject == cond
                else:
                    hit = cond is True or (not _is_null(cond) and bool(cond))
                if hit:
                    return value
                i += 2
            return values[-1] if has_default else None
        return case
    if isinstance(e, ast.Cast):
        return _cast_fn(e.type_name, pos)
    if isinstance(e, ast.Like):
        return _like_fn(e.negated, e.escape is not None, pos)
    raise TypeError(f"cannot compile {e!r}")


# ----------------------------------------------------------------------------- CAST, LIKE

_TRUE_TEXT = {"true": True, "t": True, "1": True, "false": False, "f": False, "0": False}


def _cast_fn(type_name: str, pos: ast.Pos) -> Callable[[Any], Any]:
    """CAST to ``type_name``: NULL gives NULL; a value that cannot be converted raises a
    QueryError naming the value and the type (as Trino; there is no TRY_CAST)."""
    base = type_name.split("(")[0]
    scale: int | None = None
    width: int | None = None
    if base == "VARCHAR" and "(" in type_name:
        width = int(type_name[type_name.index("(") + 1:-1])  # longer text is cut (Trino)
    if base == "DECIMAL" and "(" in type_name:
        sizes = type_name[type_name.index("(") + 1:-1].split(",")
        scale = int(sizes[1]) if len(sizes) > 1 else 0
    elif base == "DECIMAL":
        scale = 0  # DECIMAL alone is DECIMAL(38,0), as in Trino

    def convert(v: Any) -> Any:
        if isinstance(v, np.generic) and not isinstance(v, np.datetime64 | np.timedelta64):
            v = v.item()
        if base in ("BIGINT", "INTEGER", "INT"):
            if isinstance(v, bool):
                return int(v)
            if isinstance(v, int):
                return v
            if isinstance(v, float):
                return int(math.copysign(math.floor(abs(v) + 0.5), v))  # half away from 0
            if isinstance(v, str):
                return int(v.strip())
        elif base in ("DOUBLE", "REAL", "DECIMAL"):
            if isinstance(v, bool | int | float):
                out = float(v)
            elif isinstance(v, str):
                out = float(v.strip())
            else:
                raise TypeError
            return out if scale is None else _round(out, scale)
        elif base in ("VARCHAR", "STRING"):
            text = ("true" if v else "false") if isinstance(v, bool) else str(v)
            return text if width is None else text[:width]
        elif base == "BOOLEAN":
            if isinstance(v, bool):
                return v
            if isinstance(v, int | float):
                return v != 0
            if isinstance(v, str):
                return _TRUE_TEXT[v.strip().lower()]
        elif base in ("TIMESTAMP", "DATE") and isinstance(v, str | pd.Timestamp):
            stamp = pd.Timestamp(v.strip() if isinstance(v, str) else v)
            if stamp is pd.NaT:
                raise ValueError
            return stamp.normalize() if base == "DATE" else stamp
        raise TypeError

    def cast(v: Any) -> Any:
        if _is_null(v):
            return None
        try:
            return convert(v)
        except (TypeError, ValueError, KeyError, OverflowError):
            raise QueryError(f"cannot cast {type(v).__name__} {v!r} to {type_name}",
                             *pos) from None

    return cast


@functools.lru_cache(maxsize=256)
def like_regex(pattern: str, escape: str | None) -> re.Pattern[str]:
    """The regular expression for a SQL LIKE pattern (``%``: any text, ``_``: one
    character, ``escape`` makes the next character literal). ValueError if malformed."""
    if escape is not None and len(escape) != 1:
        raise ValueError(f"the LIKE escape must be a single character, got {escape!r}")
    parts: list[str] = []
    chars = iter(pattern)
    for ch in chars:
        if ch == escape:
            nxt = next(chars, None)
            if nxt is None or nxt not in ("%", "_", escape):
                raise ValueError(f"bad LIKE pattern {pattern!r}: the escape {escape!r} "
                                 "must be followed by %, _ or itself")
            parts.append(re.escape(nxt))
        elif ch == "%":
            parts.append(".*")
        elif ch == "_":
            parts.append(".")
        else:
            parts.append(re.escape(ch))
    return re.compile("".join(parts), re.DOTALL)


def _like_fn(negated: bool, has_escape: bool, pos: ast.Pos) -> Callable[..., Any]:
    def like(v: Any, pattern: Any, escape: Any = None) -> Any:
        if _is_null(v) or _is_null(pattern) or (has_escape and _is_null(escape)):
            return None
        if not isinstance(v, str) or not isinstance(pattern, str) or not (
                escape is None or isinstance(escape, str)):
            raise QueryError(f"LIKE needs strings, got {type(v).__name__} {v!r} and "
                             f"{type(pattern).__name__} {pattern!r}", *pos)
        try:
            regex = like_regex(pattern, escape)
        except ValueError as err:
            raise QueryError(str(err), *pos) from None
        hit = regex.fullmatch(v) is not None
        return hit != negated

    return like
