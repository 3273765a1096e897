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

from bisect import bisect_left
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd  # type: ignore[import-untyped, unused-ignore]

from ..errors import QueryError
from ..language import ast
from .aggregates import aggregate, classifier, count_rows
from .functions import SCALAR_FUNCTIONS
from .operators import combine, combine_rows, lazy_case
from .state import Fn, MatchState, RowFn

NAVIGATION = {"PREV", "NEXT", "FIRST", "LAST"}
AGGREGATES = {"COUNT", "SUM", "AVG", "MIN", "MAX"}
SPECIAL = {"CLASSIFIER", "MATCH_NUMBER"}
_INTERVAL_SECONDS = {"SECOND": 1, "MINUTE": 60, "HOUR": 3600, "DAY": 86400}


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
        return list(node.args) if node.filter is None else [*node.args, node.filter]
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


def classifier_variable(call: ast.Call) -> str | None:
    """The pattern variable named by ``CLASSIFIER(var)`` (None: ``CLASSIFIER()``)."""
    if not call.args:
        return None
    arg = call.args[0]
    if not (isinstance(arg, ast.Column) and arg.var is None):
        raise QueryError("CLASSIFIER takes a pattern variable name", *_pos_of(arg))
    return arg.name if arg.quoted else arg.name.upper()


def variable_references(expr: ast.Expr) -> set[str | None]:
    """The pattern variables that the column references and CLASSIFIER calls in ``expr``
    refer to (None: the universal variable); what Trino's rule for the arguments of
    navigation functions and aggregates ("consistent in referred pattern variables")
    counts. A CLASSIFIER argument is a variable name, not a column."""
    found: set[str | None] = set()
    stack = [expr]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Column):
            found.add(node.var)
        elif isinstance(node, ast.Call) and node.name == "CLASSIFIER":
            found.add(classifier_variable(node))
            continue
        elif isinstance(node, ast.Star):
            if node.var is not None:
                found.add(node.var)
        stack.extend(children(node))
    return found


def column_references(expr: ast.Expr) -> list[ast.Column]:
    """The column references in ``expr``, without the variable names given to CLASSIFIER."""
    nodes = walk(expr)
    names = {id(a) for n in nodes if isinstance(n, ast.Call) and n.name == "CLASSIFIER"
             for a in n.args}
    return [n for n in nodes if isinstance(n, ast.Column) and id(n) not in names]


def conjuncts(expr: ast.Expr) -> list[ast.Expr]:
    """Split a condition on its top-level ANDs."""
    if isinstance(expr, ast.Binary) and expr.op == "AND":
        return conjuncts(expr.left) + conjuncts(expr.right)
    return [expr]


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
            return lazy_case(e, [self._compile(k, final) for k in children(e)])
        return combine(e, [self._compile(k, final) for k in children(e)])

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
            _check_filter(e)
            if e.semantics is not None and e.name in SPECIAL:
                raise QueryError(f"{e.semantics} cannot be applied to {e.name}", *e.pos)
            if e.name == "MATCH_NUMBER":
                self._arity(e, 0, 0)
                return lambda st, row: st.match_number
            if e.name == "CLASSIFIER":
                # The label of the row the enclosing navigation or aggregate reads.
                self._arity(e, 0, 1)
                self.scope.variable(classifier_variable(e), _pos_of(e.args[0]) if e.args
                                    else e.pos)
                return classifier_at
            if e.name in NAVIGATION or e.name in AGGREGATES:
                raise QueryError(f"{e.name}(...) cannot be nested inside a navigation function "
                                 "or aggregate", *e.pos)
            args = [self._row_fn(a, var) for a in e.args]
            fn = self._scalar(e)
            return lambda st, row: fn(*[a(st, row) for a in args])
        if isinstance(e, ast.Star):
            raise QueryError("'*' is only allowed inside COUNT(...)", *e.pos)
        kids = [self._row_fn(k, var) for k in children(e)]
        # Reuse the operator combinators by binding the row into a state-only closure.
        return combine_rows(e, kids)

    def _arg_variable(self, e: ast.Expr, what: str, pos: ast.Pos) -> tuple[str | None, bool]:
        """The single variable that the column references and CLASSIFIER calls in ``e``
        use (None: the universal one), and whether ``e`` has any."""
        names = variable_references(e)
        if len(names) > 1:
            shown = ", ".join(sorted(v or "(none)" for v in names))
            raise QueryError(f"all column references and CLASSIFIER calls in {what} must use "
                             f"the same pattern variable; found {shown}", *pos)
        return (next(iter(names)) if names else None), bool(names)

    # ------------------------------------------------------------------ calls
    def _compile_call(self, e: ast.Call, final: bool) -> Fn:
        _check_filter(e)
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
            name = classifier_variable(e)
            var = self.scope.variable(name, _pos_of(e.args[0]) if e.args else e.pos)
            return classifier(var, final)
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
            except (TypeError, ValueError, ArithmeticError) as err:
                # e.g. MOD(x, 0) on whole numbers: an error, as Trino's "Division by zero"
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
        if isinstance(inner, ast.Call) and inner.name in ("FIRST", "LAST"):
            inner_refs = variable_references(inner.args[0]) if inner.args else set()
        else:
            inner_refs = variable_references(inner)
        if not inner_refs:
            # Trino: "Pattern navigation functions require at least one column reference or
            # classifier function inside of their first argument" (LAST(1) is incorrect).
            raise QueryError(f"{e.name}(...) needs a column reference or CLASSIFIER() in its "
                             "first argument", *e.pos)
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
        if isinstance(arg, ast.Star) and e.name != "COUNT":
            raise QueryError(f"{e.name}(*) is not allowed; only COUNT(*)", *arg.pos)
        for part in e.args if e.filter is None else (*e.args, e.filter):
            for node in walk(part):
                if isinstance(node, ast.Call) and (node.name in AGGREGATES
                                                   or node.name in NAVIGATION):
                    raise QueryError(f"{node.name}(...) cannot be used inside {e.name}(...)",
                                     *node.pos)
        if e.filter is None:
            if isinstance(arg, ast.Star):
                return count_rows(self.scope.variable(arg.var, arg.pos), final)
            name, _ = self._arg_variable(arg, e.name, e.pos)
            var = self.scope.variable(name, e.pos)
            return aggregate(e.name, self._row_fn(arg, var), var, final, e.pos, e.distinct)
        # FILTER (WHERE c): the argument and the condition count as arguments of one
        # aggregate for Trino's rule that all refer to the same rows; COUNT(*) refers to
        # none (COUNT(A.*) to A's rows), so COUNT(*) FILTER (WHERE A.x > 0) counts A rows.
        both = ast.Binary("AND", ast.Literal(True) if isinstance(arg, ast.Star) else arg,
                          e.filter, e.pos)
        name, named = self._arg_variable(both, f"{e.name}(...) FILTER (WHERE ...)", e.pos)
        if isinstance(arg, ast.Star):
            if arg.var is not None:
                if named and name != arg.var:
                    raise QueryError(f"all column references and CLASSIFIER calls in COUNT("
                                     f"{arg.var}.*) FILTER (WHERE ...) must use {arg.var}",
                                     *_pos_of(e.filter))
                name = arg.var
            row_fn: RowFn = _one
        else:
            row_fn = self._row_fn(arg, None)
        var = self.scope.variable(name, e.pos)
        keep = self._row_fn(e.filter, var)
        return aggregate(e.name, row_fn, var, final, e.pos, e.distinct, keep)


def _check_filter(e: ast.Call) -> None:
    if e.filter is not None and e.name not in AGGREGATES:
        raise QueryError(f"FILTER (WHERE ...) applies to aggregates (COUNT, SUM, AVG, MIN, "
                         f"MAX), not to {e.name}", *e.pos)


def _one(st: MatchState, row: int) -> Any:
    return 1


def classifier_at(st: MatchState, row: int) -> Any:
    """The variable the match maps ``row`` to (NULL outside the match). Trino: a navigation
    may reach every row of the match, also past the current row under RUNNING semantics;
    a row outside the match has no classifier."""
    rows = st.rows
    i = bisect_left(rows, row)
    if i < len(rows) and rows[i] == row:
        return st.names[st.labels[i]]
    return None


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
