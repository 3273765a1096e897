"""The fast path's planner: whether a query can run on the vectorised fast path
(:mod:`cep_core.runtime.fast`), and its plan, decided from the query alone (no rows).

A query is eligible when its DEFINE conditions read only the current row (its
``CLASSIFIER()`` is the variable defined), or the current row's physical neighbours
through ``PREV``/``NEXT`` with constant offsets, and its pattern
is a concatenation of *items*, each a single variable with any quantifier (``A``, ``B+``,
``C*?``, ``D{2,5}``, ...). The plan holds those items and, when every measure is made of
column references, ``FIRST``/``LAST`` with constant offsets, ``COUNT(*)``,
``CLASSIFIER()`` and ``MATCH_NUMBER()`` (no ``FILTER``), the measures the runtime computes
with numpy; other measures (CLASSIFIER inside navigation or aggregates, FILTER, ...) are
computed per match with the general closures.

A ``WITHIN`` window is allowed (the runtime applies it exactly as the general matcher
does; EMIT TIMEOUTS on the automaton only), and so is ALL ROWS PER MATCH (SHOW or OMIT
EMPTY MATCHES: matching is vectorised, the per-row RUNNING measures and the output use
the general path's code). Other patterns, SKIP TILL NEXT/ANY MATCH and ALL ROWS PER MATCH WITH
UNMATCHED ROWS run on the compiled automaton, and so do DEFINEs that are an AND of
row-local conditions and conditions on a running value ``value op row-local``
(:class:`AggCheck`, checked per thread by the kernel), the value an aggregate
``AGG(column)`` or navigation ``V.column`` (another variable), ``FIRST(column)``,
``LAST(column)``, ``MATCH_NUMBER()``, ``PREV(CLASSIFIER())`` (aggregates may have a
row-local FILTER or a ``CASE WHEN CLASSIFIER() = 'V' THEN x END`` argument). Negation
(NOT v) with row-local DEFINEs runs on the automaton too (its states carry the negated
variables); CONSUMPTION modes (DEFINEs as above) on the kernel's consumption loop
(:func:`cep_core.runtime.kernel.consume`, with the aggregate and navigation conditions
above evaluated per instance; no MATCH_NUMBER, PREV(CLASSIFIER())), and EMIT TIMEOUTS under strict
contiguity or SKIP TILL on the automaton. Negation with a DEFINE that reads the match so
far or with EMIT TIMEOUTS under SKIP TILL, other navigation and aggregates, CLASSIFIER
in navigation (but for those and NEXT's, NULL) and aggregates (but for that CASE) and
MATCH_NUMBER elsewhere in DEFINE run on the general matcher
(:mod:`cep_core.runtime.matcher`, :mod:`cep_core.runtime.consumption`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from ..language import ast
from ..language.printer import to_sql
from .expressions import children, conjuncts, walk
from .functions import SCALAR_FUNCTIONS
from .nfa import Automaton, TooLarge, build

if TYPE_CHECKING:
    from ..api import CompiledQuery

ENGINES = ("auto", "fast", "general")
ENV_VAR = "LAKECEP_CEP_ENGINE"
MAX_VARIABLES = 64  # one bit per variable per row in the compiled kernel
MAX_PROGRAM = 20_000  # instructions of the compiled pattern (closures are built in Python)


@dataclass(frozen=True)
class FastItem:
    """One pattern item: a variable (index) with its quantifier."""

    var: int
    low: int
    high: int | None
    greedy: bool


@dataclass(frozen=True)
class AggCheck:
    """An aggregate condition of a DEFINE, for the compiled kernel: ``func(column) op
    other`` must be TRUE (RUNNING: over the rows of the match so far, the current one
    included), ``other`` reading only the current row (and PREV/NEXT of it)."""

    owner: int  # the variable whose DEFINE has it (-1: none, the value is only carried)
    func: str  # COUNT, SUM, AVG, MIN, MAX; FIRST, LAST (navigation); MATCH_NUMBER
    column: ast.Column | None  # None: COUNT(*) / COUNT(V.*)
    over: frozenset[int] | None  # the variables aggregated over (None: every row)
    op: str  # = <> < <= > >=, the aggregate on the left
    other: ast.Expr
    #: the left side is ``sign * (value * factor) + extra_sign * extra`` (``A.x + 2``,
    #: ``5 - SUM(x)``, ``1.1 * A.x``; ``factor`` and ``extra`` row-local, None: absent)
    sign: int = 1
    extra: ast.Expr | None = None
    extra_sign: int = 1
    factor: ast.Expr | None = None
    #: an aggregate's ``FILTER (WHERE ...)``, reading only the aggregated row (None: none)
    filter: ast.Expr | None = None


@dataclass(frozen=True)
class FastMeasure:
    """A vectorisable measure: kind in 'nav', 'count', 'number', 'classifier'."""

    kind: str
    var: frozenset[int] | None = None  # None: every row of the match
    column: ast.Column | None = None
    from_end: bool = True
    offset: int = 0


class FastPlan:
    """The fast-path analysis of one query (no data needed). ``items`` is None when the
    pattern is not a concatenation of quantified variables: the compiled automaton
    (:mod:`cep_core.compile.nfa`, run by :mod:`cep_core.runtime.kernel`) matches then."""

    def __init__(self, q: CompiledQuery, items: list[FastItem] | None,
                 measures: list[FastMeasure] | None):
        self.q = q
        self.items = items
        self.measures = measures  # None: evaluate every measure with the general closures
        self._automaton: Automaton | None | bool = False
        # per variable: its DEFINE's row-local conjuncts (None: no condition, or all true);
        # and the aggregate conditions (the kernel checks them per thread)
        self.local: dict[str, ast.Expr | None] = {}
        self.agg_checks: list[AggCheck] = []
        index = {n: i for i, n in enumerate(q.variables)}
        for d in q.match.defines:
            local: list[ast.Expr] = []
            for c in conjuncts(d.condition):
                check = _agg_check(c, index[d.var], q)
                if check is None:
                    local.append(c)
                else:
                    self.agg_checks.append(check)
            expr = local[0] if local else None
            for c in local[1:]:
                expr = ast.Binary("AND", expr, c)  # type: ignore[arg-type]
            self.local[d.var] = expr
        if q.match.emit_timeouts and q.match.selection != "STRICT":
            # EMIT TIMEOUTS under SKIP TILL: the timed-out partial match is the longest
            # path (in rows taken), so two threads in one state at one row with different
            # numbers of rows differ: a COUNT(*) no DEFINE tests (owner -1) keeps both
            self.agg_checks.append(AggCheck(-1, "COUNT", None, None, "=", ast.Literal(0)))

    @property
    def item_list(self) -> list[FastItem]:
        """The items of a plan that has them (the vectorised path)."""
        assert self.items is not None
        return self.items

    def automaton(self) -> Automaton | None:
        """The pattern's automaton (built once), None if too large to build."""
        if self._automaton is False:
            try:
                self._automaton = build(self.q.program)
            except TooLarge:
                self._automaton = None
        assert self._automaton is not True
        return self._automaton

    def describe(self) -> str:
        names = self.q.variables
        m = self.q.match
        within = m.within
        window = "" if within is None else f"; WITHIN {to_sql(within)}"
        rows = m.rows_per_match
        if self.items is None:
            extra = {"ALL SHOW": "; ALL ROWS PER MATCH", "ALL OMIT": "; ALL ROWS PER MATCH OMIT "
                     "EMPTY MATCHES", "ALL UNMATCHED": "; ALL ROWS PER MATCH WITH UNMATCHED "
                     "ROWS"}.get(rows, "")
            if m.selection != "STRICT":
                extra += f"; SKIP TILL {m.selection} MATCH"
            if any(isinstance(node, ast.Negation) for node in ast.pattern_nodes(m.pattern)):
                extra += "; negation"
            if m.emit_timeouts:
                extra += "; EMIT TIMEOUTS"
            funcs = {c.func for c in self.agg_checks if c.owner >= 0}
            navigation = {"FIRST", "LAST", "PREV_CLASSIFIER"}
            if funcs - navigation:
                extra += "; aggregates in DEFINE"
            if funcs & navigation:
                extra += "; navigation in DEFINE"
            if m.consumption is not None:
                return f"compiled: CONSUMPTION {m.consumption}{window}{extra}"
            return f"compiled: automaton{window}{extra}"
        parts = []
        for it in self.items:
            hi = "" if it.high is None else str(it.high)
            parts.append(f"{names[it.var]}{{{it.low},{hi}}}{'' if it.greedy else '?'}")
        how = "vectorised" if self.measures is not None else "per match"
        if rows != "ONE":
            how = "per row"
            window += "; ALL ROWS PER MATCH" + (" OMIT EMPTY MATCHES" if rows == "ALL OMIT"
                                                else "")
        return f"fast: items {' '.join(parts)}{window}; measures {how}"


def plan_fast(q: CompiledQuery, engine: str | None = None) -> tuple[FastPlan | None, str]:
    """Decide the engine for ``q``: (the fast plan or None, a description of the choice).

    ``engine`` is 'auto' (default; the environment variable ``LAKECEP_CEP_ENGINE`` may
    override it), 'fast' (raise ``ValueError`` if the query is not eligible) or 'general'.
    """
    import os

    if engine is None:
        engine = os.environ.get(ENV_VAR, "auto") or "auto"
    engine = engine.lower()
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {', '.join(ENGINES)}, not {engine!r}")
    if engine == "general":
        return None, "general: forced"
    reason = _ineligible(q)
    if reason is None:
        items = _items(q.match.pattern, {n: i for i, n in enumerate(q.variables)})
        if items is not None and (q.match.rows_per_match == "ALL UNMATCHED"
                                  or q.match.selection != "STRICT"
                                  or q.match.emit_timeouts or _has_aggregates(q)):
            items = None  # the vectorised items path: no unmatched rows, no skipped rows,
            # no timed-out partial matches, no aggregates in DEFINE
        plan = FastPlan(q, items, vector_measures(q) if items is not None else None)
        return plan, plan.describe()
    if engine == "fast":
        raise ValueError(f"the fast path cannot run this query: {reason}")
    return None, f"general: {reason}"


# ---------------------------------------------------------------------- eligibility
def _ineligible(q: CompiledQuery) -> str | None:
    m = q.match
    if len(q.variables) > MAX_VARIABLES:
        return f"more than {MAX_VARIABLES} pattern variables"
    if len(q.program.code) > MAX_PROGRAM:
        return f"pattern program longer than {MAX_PROGRAM} instructions"
    index = {n: i for i, n in enumerate(q.variables)}
    for d in m.defines:
        for c in conjuncts(d.condition):
            why = _define_problem(c, d.var)
            if why is not None and _agg_check(c, index[d.var], q) is None:
                return f"DEFINE {d.var}: {why}"
    negation = any(isinstance(node, ast.Negation) for node in ast.pattern_nodes(m.pattern))
    if negation and _has_aggregates(q):
        return "negation (NOT) in PATTERN with a DEFINE that reads the match so far"
    if negation and m.emit_timeouts and m.selection != "STRICT":
        # (its threads would carry a COUNT(*), FastPlan: one more compiled kernel for a
        # shape no query here uses)
        return "negation (NOT) in PATTERN with EMIT TIMEOUTS under SKIP TILL"
    return None


_FLIP = {"=": "=", "<>": "<>", "!=": "<>", "<": ">", "<=": ">=", ">": "<", ">=": "<="}


def _agg_check(c: ast.Expr, owner: int, q: CompiledQuery) -> AggCheck | None:
    """``c`` as a condition on a running value the kernel evaluates per thread
    (``value op row-local`` or the mirror image), else None. The value is an aggregate
    (COUNT/SUM/AVG/MIN/MAX of one column, COUNT(*), no DISTINCT or FINAL; a row-local
    FILTER, and ``CASE WHEN CLASSIFIER() = 'V' THEN x END`` as the argument, narrow the
    rows aggregated, :func:`_classifier_case`) or
    logical navigation to a row of the match so far: ``FIRST(col)``, ``LAST(col)`` or
    another variable's ``V.col`` (its last row, RUNNING), or ``MATCH_NUMBER()`` or
    ``PREV(CLASSIFIER()) = / <> 'V'`` (not under CONSUMPTION); it may be multiplied by and
    added to or subtracted from row-local expressions (``1.1 * A.x - 2``)."""
    if not (isinstance(c, ast.Binary) and c.op in _FLIP):
        return None
    op = "<>" if c.op == "!=" else c.op
    owner_name = q.variables[owner]
    side = _value_side(c.left, owner_name)
    other = c.right
    if side is None:
        side, other, op = _value_side(c.right, owner_name), c.left, _FLIP[op]
    if side is None or _reads_running(other, owner_name):
        return None
    agg, factor, sign, extra, extra_sign = side
    if any(x is not None and _define_problem(x, owner_name) is not None
           for x in (other, extra, factor)):
        return None
    check = _value_check(agg, owner, op, other, q)
    if check is None or extra is None and factor is None and sign == 1:
        return check
    if check.func == "PREV_CLASSIFIER":
        return None  # (a name: no arithmetic)
    return replace(check, sign=sign, extra=extra, extra_sign=extra_sign, factor=factor)


def _value_side(e: ast.Expr, owner: str
                ) -> tuple[ast.Expr, ast.Expr | None, int, ast.Expr | None, int] | None:
    """``e`` as ``sign * (value * factor) + extra_sign * extra`` with a running value (see
    :func:`_agg_check`) and row-local ``factor`` and ``extra`` (float64 multiplies, adds
    and subtracts as Python does), else None: (value, factor, sign, extra, extra_sign)."""
    scaled = _scaled_value(e, owner)
    if scaled is not None:
        return scaled[0], scaled[1], 1, None, 1
    if isinstance(e, ast.Binary) and e.op in ("+", "-"):
        left, right = e.left, e.right
        minus = -1 if e.op == "-" else 1
        scaled = _scaled_value(left, owner)
        if scaled is not None and not _reads_running(right, owner):
            return scaled[0], scaled[1], 1, right, minus
        scaled = _scaled_value(right, owner)
        if scaled is not None and not _reads_running(left, owner):
            return scaled[0], scaled[1], minus, left, 1
    return None


def _scaled_value(e: ast.Expr, owner: str) -> tuple[ast.Expr, ast.Expr | None] | None:
    """``e`` as ``value`` or ``value * factor`` (either order), factor row-local."""
    if _running_value(e, owner):
        return e, None
    if isinstance(e, ast.Binary) and e.op == "*":
        if _running_value(e.left, owner) and not _reads_running(e.right, owner):
            return e.left, e.right
        if _running_value(e.right, owner) and not _reads_running(e.left, owner):
            return e.right, e.left
    return None


def _reads_running(e: ast.Expr, owner: str) -> bool:
    return any(_running_value(node, owner) for node in walk(e))


def _value_check(agg: ast.Expr, owner: int, op: str, other: ast.Expr,
                 q: CompiledQuery) -> AggCheck | None:
    sets = q._sets
    if _is_match_number(agg):  # the attempt's, set when it starts (not per instance)
        if q.match.consumption is not None:
            return None
        return AggCheck(owner, "MATCH_NUMBER", None, None, op, other)
    if _is_prev_classifier(agg):  # = / <> a variable's name: its index (-1: none)
        if (q.match.consumption is not None or op not in ("=", "<>")
                or not (isinstance(other, ast.Literal) and isinstance(other.value, str))):
            return None
        names = q.variables
        index = names.index(other.value) if other.value in names else -1
        return AggCheck(owner, "PREV_CLASSIFIER", None, None, op, ast.Literal(float(index)))
    if isinstance(agg, ast.Column):  # V.col of another variable: LAST(V.col)
        if agg.var not in sets:
            return None
        return AggCheck(owner, "LAST", agg, sets[agg.var], op, other)
    assert isinstance(agg, ast.Call)
    arg = agg.args[0]
    labels: frozenset[int] | None = None  # CASE WHEN CLASSIFIER() ...: these rows only
    if isinstance(arg, ast.Case):
        found = _classifier_case(arg, q.variables)
        if found is None:
            return None
        labels, arg = found
        if isinstance(arg, ast.Literal):  # COUNT(CASE ... THEN 1 END): COUNT(*) of them
            if agg.name != "COUNT":
                return None
            arg = ast.Star(None)
    if isinstance(arg, ast.Star):
        if agg.name != "COUNT" or (arg.var is not None and arg.var not in sets):
            return None
        column = None
    elif not isinstance(arg, ast.Column) or (arg.var is not None and arg.var not in sets):
        return None
    else:
        column = arg
    over = sets[arg.var] if arg.var else None
    if labels is not None:
        over = labels if over is None else over & labels
    func = "COUNT" if column is None else agg.name
    return AggCheck(owner, func, column, over, op, other, filter=agg.filter)


def _classifier_case(e: ast.Case, variables: list[str]
                     ) -> tuple[frozenset[int], ast.Expr] | None:
    """``CASE WHEN CLASSIFIER() = 'V' THEN x END`` (also ``<>``, ``IN (...)``, ``NOT IN``,
    ``CASE CLASSIFIER() WHEN 'V' THEN x END``; no ELSE or ELSE NULL) as the variables
    whose rows give ``x`` (the others give NULL, which aggregates skip) and ``x``: a
    column or a number; else None."""
    if len(e.whens) != 1 or not (e.default is None or (isinstance(e.default, ast.Literal)
                                                       and e.default.value is None)):
        return None
    cond, then = e.whens[0]
    if e.operand is not None:
        cond = ast.Binary("=", e.operand, cond)
    names: list[ast.Expr]
    if isinstance(cond, ast.Binary) and cond.op in ("=", "<>", "!="):
        left, right, negated = cond.left, cond.right, cond.op != "="
        if _is_classifier(right):
            left, right = right, left
        names = [right]
    elif isinstance(cond, ast.InList):
        left, names, negated = cond.operand, list(cond.items), cond.negated
    else:
        return None
    if not _is_classifier(left) or not all(
            isinstance(n, ast.Literal) and isinstance(n.value, str) for n in names):
        return None
    chosen = {n.value for n in names}  # type: ignore[attr-defined]
    labels = frozenset(i for i, v in enumerate(variables) if (v in chosen) != negated)
    ok = (isinstance(then, ast.Column) or isinstance(then, ast.Literal) and isinstance(
        then.value, int | float) and not isinstance(then.value, bool))
    return (labels, then) if ok else None


def _is_classifier(e: ast.Expr) -> bool:
    return isinstance(e, ast.Call) and e.name == "CLASSIFIER" and not e.args


def _is_match_number(e: ast.Expr) -> bool:
    return isinstance(e, ast.Call) and e.name == "MATCH_NUMBER" and not e.args


def _is_prev_classifier(e: ast.Expr) -> bool:
    """``PREV(CLASSIFIER())`` (offset 1)."""
    return (isinstance(e, ast.Call) and e.name == "PREV" and _is_classifier(e.args[0])
            and (len(e.args) == 1 or isinstance(e.args[1], ast.Literal)
                 and type(e.args[1].value) is int and e.args[1].value == 1))


def _row_filter(e: ast.Expr | None) -> bool:
    """An aggregate's FILTER the kernel evaluates per row (None: no FILTER): reads only
    the aggregated row's columns (no CLASSIFIER, navigation or aggregates)."""
    return e is None or all(
        isinstance(node, _ROW_NODES) and not isinstance(node, ast.Call) for node in walk(e))


def _running_value(e: ast.Expr, owner: str) -> bool:
    """``e`` is a value the kernel keeps per thread (see :func:`_agg_check`)."""
    if isinstance(e, ast.Column):
        return e.var is not None and e.var != owner
    return _is_match_number(e) or _is_prev_classifier(e) or (
        isinstance(e, ast.Call) and e.name in _RUNNING_FUNCS
            and len(e.args) == 1 and not e.distinct and _row_filter(e.filter)
            and e.semantics in (None, "RUNNING"))


_RUNNING_FUNCS = ("COUNT", "SUM", "AVG", "MIN", "MAX", "FIRST", "LAST")


def _has_aggregates(q: CompiledQuery) -> bool:
    index = {n: i for i, n in enumerate(q.variables)}
    return any(_agg_check(c, index[d.var], q) is not None
               for d in q.match.defines for c in conjuncts(d.condition))


def _items(p: ast.Pattern, index: dict[str, int]) -> list[FastItem] | None:
    if isinstance(p, ast.Var):
        return [FastItem(index[p.name], 1, 1, True)]
    if isinstance(p, ast.Group):
        return _items(p.body, index)
    if isinstance(p, ast.Concat):
        out: list[FastItem] = []
        for item in p.items:
            sub = _items(item, index)
            if sub is None:
                return None
            out += sub
        return out
    if isinstance(p, ast.Quantified):
        body = p.body
        while isinstance(body, ast.Group):
            body = body.body
        if isinstance(body, ast.Var):
            return [FastItem(index[body.name], p.low, p.high, p.greedy)]
    return None


def _define_problem(cond: ast.Expr, var: str) -> str | None:
    """Why ``cond`` (DEFINE of ``var``) cannot be evaluated over the whole table at once."""
    for node in _walk_outside_nav(cond):
        if not isinstance(node, _ROW_NODES):
            return f"{type(node).__name__} expression"
        if isinstance(node, ast.Star):
            return "COUNT(*)-style reference"
        if isinstance(node, ast.Column) and node.var not in (None, var):
            return f"reads variable {node.var}"
        if isinstance(node, ast.Call):
            if node.name in ("PREV", "NEXT"):
                if len(node.args) > 1 and not _offset_ok(node.args[1]):
                    return f"{node.name} offset is not a constant"
                for inner in walk(node.args[0]):
                    if not isinstance(inner, _ROW_NODES):
                        return f"{type(inner).__name__} expression inside {node.name}"
                    if (node.name == "NEXT" and _is_classifier(inner)
                            or isinstance(inner, ast.Call) and inner.name in SCALAR_FUNCTIONS):
                        continue  # (a later row is not matched yet: its CLASSIFIER is NULL)
                    if isinstance(inner, ast.Call):
                        return f"{inner.name} inside {node.name}"
                    if isinstance(inner, ast.Column) and inner.var not in (None, var):
                        return f"{node.name} of variable {inner.var}"
                    if isinstance(inner, ast.Star):
                        return "COUNT(*)-style reference"
            elif node.name == "CLASSIFIER" and not node.args:
                continue  # the current row's: the variable defined (a constant here)
            elif node.name not in SCALAR_FUNCTIONS:
                return f"uses {node.name}"
    return None


# Expression nodes whose value depends on the current row only (given row-local children).
_ROW_NODES = (ast.Literal, ast.IntervalLiteral, ast.TimestampLiteral, ast.Column, ast.Unary,
              ast.Binary, ast.IsNull, ast.Between, ast.InList, ast.Case, ast.Call, ast.Cast,
              ast.Like)


def _offset_ok(arg: ast.Expr) -> bool:
    return (isinstance(arg, ast.Literal) and isinstance(arg.value, int)
            and not isinstance(arg.value, bool) and arg.value >= 0)


def _walk_outside_nav(expr: ast.Expr) -> list[ast.Expr]:
    """Nodes of ``expr``, not descending into PREV/NEXT calls (which are returned)."""
    out: list[ast.Expr] = []
    stack = [expr]
    while stack:
        node = stack.pop()
        out.append(node)
        if isinstance(node, ast.Call) and node.name in ("PREV", "NEXT"):
            continue
        stack.extend(children(node))
    return out


def vector_measures(q: CompiledQuery) -> list[FastMeasure] | None:
    out: list[FastMeasure] = []
    sets = q._sets
    for me in q.match.measures:
        e = me.expr
        if isinstance(e, ast.Column):
            if e.var is not None and e.var not in sets:
                return None
            out.append(FastMeasure("nav", sets[e.var] if e.var else None, e, True, 0))
        elif isinstance(e, ast.Call) and e.name in ("FIRST", "LAST") and 1 <= len(e.args) <= 2:
            col = e.args[0]
            if not isinstance(col, ast.Column) or (col.var is not None and col.var not in sets):
                return None
            offset = 0
            if len(e.args) == 2:
                if not _offset_ok(e.args[1]):
                    return None
                offset = int(e.args[1].value)  # type: ignore[attr-defined]
            out.append(FastMeasure("nav", sets[col.var] if col.var else None, col,
                                e.name == "LAST", offset))
        elif isinstance(e, ast.Call) and e.name == "MATCH_NUMBER" and not e.args:
            out.append(FastMeasure("number"))
        elif isinstance(e, ast.Call) and e.name == "CLASSIFIER" and not e.args:
            out.append(FastMeasure("classifier"))
        elif (isinstance(e, ast.Call) and e.name == "COUNT" and len(e.args) == 1
              and isinstance(e.args[0], ast.Star) and e.filter is None):
            star = e.args[0]
            if star.var is not None and star.var not in sets:
                return None
            out.append(FastMeasure("count", sets[star.var] if star.var else None))
        else:
            return None
    return out

