"""Pattern queries over events with uncertain timestamps (``UNCERTAIN TIME``).

A lakecep extension of MATCH_RECOGNIZE after Li, Liu and Yu, "Queries over event streams
with uncertain timestamps and event constraints": every input row is an event whose time
is one of several points (an interval ``[LOWER, UPPER]`` at a granularity, with an optional
probability mass function), event classes may be linked by constraints (PRIOR, EXCLUSIVE,
REQUIRE), and the answer is every *characteristic sequence* (which event fills which
pattern variable) with the probability that it matches, summed over the possible worlds.
The exact semantics are in docs/uncertain.md; this module implements them four ways:

* ``possible_worlds``: enumerate every world of a partition (the correctness reference);
* ``point``: joint pmfs of the PRIOR-connected events first, then per candidate sequence
  the combinations of its events' points;
* ``event``: as ``point``, after pruning each event's points with the query;
* ``dp`` (default): a dynamic programme over (first, last) span distributions
  (:mod:`cep_core.uncertain_dp`) for sequences of independent events, ``event`` otherwise.

Entry point: :func:`evaluate`; :func:`cep_core.match_recognize` and
``CompiledQuery.run`` call it for queries with ``UNCERTAIN TIME``.
"""

from __future__ import annotations

import bisect
import dataclasses
import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd  # type: ignore[import-untyped, unused-ignore]

from ..compile.expressions import (
    AGGREGATES,
    NAVIGATION,
    AnyColumns,
    ExprCompiler,
    Scope,
    interval_value,
    is_row_local,
    walk,
)
from ..compile.state import MatchState
from ..compile.values import column_values, to_python
from ..errors import QueryError
from ..language import ast
from ..runtime.output import select
from ..runtime.time_axis import datetime_ns
from ..runtime.vectorized import evaluate_condition
from . import dp as uncertain_dp

if TYPE_CHECKING:
    from ..api import CompiledQuery

METHODS = ("auto", "dp", "event", "point", "possible_worlds")
PROBABILITY = "probability"  # the output column
# MATCH_PROBABILITY() is compiled as a column of a hidden variable (see _Measures).
_PROB_VAR = "__lakecep_probability__"
_PROB_COL = "__lakecep_match_probability__"
# Tolerances: a float interval length within this (relative) of a whole number of steps
# counts as that number; a probability this close below the threshold still passes.
_STEP_EPS = 1e-9
_XI_EPS = 1e-12
_PMF_EPS = 1e-9

Tree = tuple[Any, ...]  # ("LEAF", var) | ("SEQ" | "AND" | "OR", (tree, ...))
Sigma = tuple[tuple[str, int], ...]  # ((variable, row position), ...) in pattern order


# ============================================================================ checks (no data)


@dataclass(frozen=True)
class Filling:
    """One way to fill the pattern: the variables used (in pattern order), the pattern with
    every OR resolved to its filled branch, and the strict order it requires: (u, v) means
    u's event is strictly before v's (u and v are in different items of a SEQ)."""

    variables: tuple[str, ...]
    tree: Tree
    before: tuple[tuple[str, str], ...]


@dataclass
class UncertainPlan:
    """An UNCERTAIN TIME query, checked: what evaluation needs besides the data."""

    clause: ast.UncertainTime
    tree: Tree
    variables: list[str]  # pattern variables, in order of first appearance
    classes: list[str]  # the pattern variables, then variables only in DEFINE/constraints
    defines: dict[str, ast.Expr]
    prior: list[tuple[str, str]]
    exclusive: list[tuple[str, str]]
    require: list[tuple[str, str]]
    fillings: list[Filling]
    order: ast.Column
    within: ast.IntervalLiteral | ast.Literal | None
    min_probability: float
    measures: list[tuple[str, ast.Expr]]  # MATCH_PROBABILITY() rewritten, see _Measures


def check_query(m: ast.MatchRecognize) -> UncertainPlan:
    """Check the restrictions of uncertain mode (QueryError with position) and plan."""
    u = m.uncertain
    assert u is not None
    pos = u.pos
    if m.rows_per_match != "ONE":
        raise QueryError("ALL ROWS PER MATCH cannot be used with UNCERTAIN TIME (the output "
                         "is one row per characteristic sequence)", *pos)
    if m.skip_written:
        raise QueryError("AFTER MATCH SKIP cannot be used with UNCERTAIN TIME (every "
                         "characteristic sequence is reported)", *m.skip.pos)
    if m.selection != "STRICT":
        raise QueryError(f"SKIP TILL {m.selection} MATCH cannot be used with UNCERTAIN TIME "
                         "(events are matched with skip-till-any semantics already)",
                         *m.consumption_pos)
    if m.consumption is not None:
        raise QueryError("CONSUMPTION cannot be used with UNCERTAIN TIME", *m.consumption_pos)
    if m.emit_timeouts:
        raise QueryError("EMIT TIMEOUTS cannot be used with UNCERTAIN TIME", *m.consumption_pos)
    if m.subsets:
        raise QueryError("SUBSET cannot be used with UNCERTAIN TIME", *m.subsets[0].pos)
    if len(m.order_by) != 1 or m.order_by[0].descending:
        raise QueryError("UNCERTAIN TIME needs ORDER BY with exactly one ascending column (the "
                         "time of events without an interval)", *pos)
    tree = _normalise(m.pattern)
    variables = _check_single_use(m.pattern)
    defines: dict[str, ast.Expr] = {}
    define_pos: dict[str, ast.Pos] = {}
    for d in m.defines:
        if d.var in defines:
            raise QueryError(f"variable {d.var} is defined twice", *d.pos)
        for node in walk(d.condition):
            if isinstance(node, ast.Call) and node.name == "MATCH_PROBABILITY":
                raise QueryError("MATCH_PROBABILITY() is only allowed in MEASURES", *node.pos)
        if not is_row_local(d.condition, d.var):
            raise QueryError(f"DEFINE {d.var}: with UNCERTAIN TIME a condition may only read "
                             "the current row (no PREV, NEXT, FIRST, LAST, aggregates, "
                             "CLASSIFIER, MATCH_NUMBER or other variables' columns)", *d.pos)
        defines[d.var] = d.condition
        define_pos[d.var] = d.pos
    known = set(variables) | set(defines)
    prior: list[tuple[str, str]] = []
    exclusive: list[tuple[str, str]] = []
    require: list[tuple[str, str]] = []
    used_in_constraints: set[str] = set()
    for c in u.constraints:
        for name in (c.first, c.second):
            if name not in known:
                raise QueryError(f"EVENT CONSTRAINTS: {c.kind}({c.first}, {c.second}) names "
                                 f"{name}, which is neither a PATTERN variable nor DEFINEd",
                                 *c.pos)
            used_in_constraints.add(name)
        if c.kind == "PRIOR":
            if c.first == c.second:
                raise QueryError(f"EVENT CONSTRAINTS: PRIOR({c.first}, {c.second}) relates a "
                                 "class to itself", *c.pos)
            prior.append((c.first, c.second))
            if _has_cycle(prior):
                raise QueryError(f"EVENT CONSTRAINTS: PRIOR({c.first}, {c.second}) closes a "
                                 "cycle of PRIOR constraints between classes", *c.pos)
        elif c.kind == "EXCLUSIVE":
            exclusive.append((c.first, c.second))
        else:
            require.append((c.first, c.second))
    for name in defines:
        if name not in variables and name not in used_in_constraints:
            raise QueryError(f"DEFINE names {name}, which is neither a variable of the PATTERN "
                             "nor used in EVENT CONSTRAINTS", *define_pos[name])
    classes = variables + [d for d in defines if d not in variables]
    sets = {name: frozenset([i]) for i, name in enumerate(classes)}
    for name, cond in defines.items():
        ExprCompiler(Scope(AnyColumns(), sets, "DEFINE", name)).compile(cond)
    measures = _check_measures(m, variables)
    min_p = 0.0 if u.min_probability is None else float(u.min_probability.value)  # type: ignore[arg-type]
    fillings = [Filling(tuple(v for v in variables if v in used), t, tuple(sorted(_before(t))))
                for used, t in _fillings(tree)]
    return UncertainPlan(u, tree, variables, classes, defines, prior, exclusive, require,
                         fillings, m.order_by[0].column, m.within, min_p, measures)


def _not_allowed(what: str, pos: ast.Pos) -> QueryError:
    return QueryError(f"{what} cannot be used in PATTERN with UNCERTAIN TIME (allowed: "
                      "variables, concatenation, PERMUTE(...), | and parentheses)", *pos)


def _normalise(p: ast.Pattern) -> Tree:
    """The AST pattern as a tree of LEAF / SEQ / AND / OR (QueryError for anything else)."""
    if isinstance(p, ast.Var):
        return ("LEAF", p.name)
    if isinstance(p, ast.Group):
        return _normalise(p.body)
    if isinstance(p, ast.Concat):
        if not p.items:
            raise _not_allowed("the empty pattern ()", p.pos)
        items = tuple(_normalise(i) for i in p.items)
        return items[0] if len(items) == 1 else ("SEQ", items)
    if isinstance(p, ast.Alternation | ast.Permute):
        items = tuple(_normalise(i) for i in p.items)
        op = "OR" if isinstance(p, ast.Alternation) else "AND"
        return items[0] if len(items) == 1 else (op, items)
    if isinstance(p, ast.Quantified):
        raise _not_allowed(f"the quantifier {p.text or '{..}'}", p.pos)
    if isinstance(p, ast.Anchor):
        raise _not_allowed(f"the anchor {p.kind}", p.pos)
    if isinstance(p, ast.Exclusion):
        raise _not_allowed("exclusion {- -}", p.pos)
    if isinstance(p, ast.Negation):
        raise _not_allowed(f"NOT {p.var}", p.pos)
    raise _not_allowed(type(p).__name__, (1, 1))


def _check_single_use(p: ast.Pattern) -> list[str]:
    seen: list[str] = []

    def visit(node: ast.Pattern) -> None:
        if isinstance(node, ast.Var):
            if node.name in seen:
                raise QueryError(f"variable {node.name} occurs more than once in PATTERN; with "
                                 "UNCERTAIN TIME each variable may be used once", *node.pos)
            seen.append(node.name)
        elif isinstance(node, ast.Concat | ast.Alternation | ast.Permute):
            for item in node.items:
                visit(item)
        elif isinstance(node, ast.Group):
            visit(node.body)

    visit(p)
    return seen


def _has_cycle(edges: Sequence[tuple[str, str]]) -> bool:
    graph: dict[str, list[str]] = {}
    for a, b in edges:
        graph.setdefault(a, []).append(b)
    state: dict[str, int] = {}  # 1 visiting, 2 done

    def visit(node: str) -> bool:
        state[node] = 1
        for nxt in graph.get(node, []):
            if state.get(nxt) == 1 or (state.get(nxt) is None and visit(nxt)):
                return True
        state[node] = 2
        return False

    return any(state.get(n) is None and visit(n) for n in list(graph))


def tree_variables(t: Tree) -> frozenset[str]:
    if t[0] == "LEAF":
        return frozenset([t[1]])
    return frozenset().union(*(tree_variables(i) for i in t[1]))


def _fillings(t: Tree) -> list[tuple[frozenset[str], Tree]]:
    """Every set of variables a match fills, with the pattern specialised to it (OR
    replaced by its filled branch)."""
    if t[0] == "LEAF":
        return [(frozenset([t[1]]), t)]
    options = [_fillings(i) for i in t[1]]
    if t[0] == "OR":
        return [f for opts in options for f in opts]
    out = []
    for combo in itertools.product(*options):
        used = frozenset().union(*(c[0] for c in combo))
        out.append((used, (t[0], tuple(c[1] for c in combo))))
    return out


def _before(t: Tree) -> set[tuple[str, str]]:
    if t[0] == "LEAF":
        return set()
    out: set[tuple[str, str]] = set()
    for item in t[1]:
        out |= _before(item)
    if t[0] == "SEQ":
        for i, a in enumerate(t[1]):
            for b in t[1][i + 1:]:
                out |= {(u, v) for u in tree_variables(a) for v in tree_variables(b)}
    return out


def _check_measures(m: ast.MatchRecognize, variables: list[str]) -> list[tuple[str, ast.Expr]]:
    names: set[str] = set()
    out = []
    for me in m.measures:
        if me.name.lower() in names:
            raise QueryError(f"measure {me.name} is defined twice", *me.pos)
        if me.name.lower() == PROBABILITY:
            raise QueryError(f"measure name {me.name} clashes with the {PROBABILITY} column "
                             "of UNCERTAIN TIME (use MATCH_PROBABILITY() under another name)",
                             *me.pos)
        names.add(me.name.lower())
        for node in walk(me.expr):
            if isinstance(node, ast.Column):
                if node.var is None:
                    raise QueryError(f"MEASURES with UNCERTAIN TIME: column {node.name} needs a "
                                     f"pattern variable (var.{node.name}); a match has no row "
                                     "order, so there is no current row", *node.pos)
                if node.var not in variables:
                    raise QueryError(f"MEASURES with UNCERTAIN TIME: {node.var} is not a "
                                     "PATTERN variable", *node.pos)
            elif isinstance(node, ast.Star):
                raise QueryError("MEASURES with UNCERTAIN TIME cannot use '*'", *node.pos)
            elif isinstance(node, ast.Call):
                if node.name == "MATCH_PROBABILITY":
                    if node.args or node.semantics:
                        raise QueryError("MATCH_PROBABILITY() takes no arguments", *node.pos)
                elif node.name in NAVIGATION or node.name in AGGREGATES or node.name in (
                        "CLASSIFIER", "MATCH_NUMBER"):
                    raise QueryError(f"MEASURES with UNCERTAIN TIME cannot use {node.name}(...) "
                                     "(it needs row order or a match number); use var.column, "
                                     "literals, operators, scalar functions and "
                                     "MATCH_PROBABILITY()", *node.pos)
        out.append((me.name, _rewrite_probability(me.expr)))
    sets = {name: frozenset([i]) for i, name in enumerate([*variables, _PROB_VAR])}
    compiler = ExprCompiler(Scope(AnyColumns(), sets, "MEASURES"))
    for _, expr in out:
        compiler.compile(expr)
    return out


def _rewrite_probability(e: Any) -> Any:
    """Replace MATCH_PROBABILITY() by a column of the hidden probability variable."""
    if isinstance(e, ast.Call) and e.name == "MATCH_PROBABILITY":
        return ast.Column(_PROB_COL, _PROB_VAR, True, e.pos)
    if isinstance(e, tuple):
        return tuple(_rewrite_probability(x) for x in e)
    if not isinstance(e, ast.Expr):
        return e
    changes = {f.name: _rewrite_probability(getattr(e, f.name)) for f in dataclasses.fields(e)
               if isinstance(getattr(e, f.name), ast.Expr | tuple)}
    return dataclasses.replace(e, **changes)


# ============================================================================ results


@dataclass
class Diagnostics:
    """What an evaluation did (summed over partitions)."""

    method: str = ""
    # possible worlds enumerated (possible_worlds), or joint assignments of the events with
    # PRIOR children in a PRIOR component (the other methods; leaves are not enumerated)
    worlds: int = 0
    points: int = 0  # probabilistic points expanded (event, time) over all sequences
    combinations: int = 0  # point combinations checked against the pattern
    candidates: int = 0  # valid characteristic sequences considered
    dp: int = 0  # sequences whose probability the dynamic programme computed
    # per partition key with PRIOR constraints: the probability mass lost because a
    # PRIOR constraint could not be met (1 - the sum over all worlds)
    lost_prior_mass: dict[tuple[Any, ...], float] = field(default_factory=dict)


@dataclass
class UncertainResult:
    """``table``: partition columns, MEASURES and ``probability``, one row per sequence;
    ``groups``: (partition key, sequence, probability) in the same order."""

    table: pd.DataFrame
    groups: list[tuple[tuple[Any, ...], Sigma, float]]
    diagnostics: Diagnostics


# ============================================================================ the data


@dataclass
class _Event:
    row: int  # position in the input table
    points: list[Any]  # ascending
    probs: list[float]
    classes: frozenset[str]
    suffix: list[float] = field(default_factory=list)  # suffix[k] = sum(probs[k:])

    def conditional(self, after: Any) -> list[float]:
        """P(t = point | t >= after), as the PRIOR conditioning defines it (all zero if no
        point with positive probability is at or after ``after``)."""
        k0 = bisect.bisect_left(self.points, after)
        norm = self.suffix[k0]
        if norm <= 0:
            return [0.0] * len(self.points)
        return [0.0] * k0 + [p / norm for p in self.probs[k0:]]


@dataclass
class _Partition:
    key: tuple[Any, ...]
    events: list[_Event]
    members: dict[str, list[int]]  # class -> indices into events
    parents: list[list[int]]  # event-level PRIOR graph
    topo: list[int]  # a topological order of it
    prior: bool  # the query has PRIOR constraints


def _times(series: pd.Series, what: str) -> tuple[list[Any], str | None]:
    """A time column as numbers (nanoseconds for timestamps; None when missing) and its
    kind ('timestamp', 'number', or None when it is entirely missing)."""
    if pd.api.types.is_datetime64_any_dtype(series.dtype):
        return datetime_ns(series), "timestamp"
    if pd.api.types.is_numeric_dtype(series.dtype) and not pd.api.types.is_bool_dtype(
            series.dtype):
        return column_values(series), "number"
    if series.isna().all():
        return [None] * len(series), None
    raise ValueError(f"UNCERTAIN TIME: column {what} {series.name!r} must hold timestamps or "
                     f"numbers, not {series.dtype}")


def _duration(lit: ast.IntervalLiteral | ast.Literal, kind: str) -> Any:
    """An interval or bare number in the time unit of ``kind`` (ns for timestamps; a bare
    number is seconds for timestamps, as WITHIN reads it)."""
    if isinstance(lit, ast.IntervalLiteral):
        td = interval_value(lit)
        if kind == "timestamp":
            return int(td.value)
        seconds = td.total_seconds()
        return int(seconds) if float(seconds).is_integer() else seconds
    value = lit.value
    if kind == "timestamp":
        return int(round(float(value) * 1e9))  # type: ignore[arg-type]
    return value


def _row_name(row: int, ids: list[Any] | None) -> str:
    return f"row {row}" if ids is None else f"row {row} (id {ids[row]!r})"


def _points(lower: Any, upper: Any, step: Any, max_points: int, name: str) -> list[Any]:
    if lower > upper:
        raise ValueError(f"UNCERTAIN TIME: {name} has LOWER {lower!r} > UPPER {upper!r}")
    span = upper - lower
    if isinstance(span, int) and isinstance(step, int):
        n = span // step + 1
    else:
        n = math.floor(span / step + _STEP_EPS) + 1
    if n > max_points:
        raise ValueError(f"UNCERTAIN TIME: {name} has {n} possible times (more than "
                         f"max_points={max_points}); use a coarser GRANULARITY or raise "
                         "max_points")
    return [lower + k * step for k in range(n)]


def _pmf(value: Any, n: int, name: str) -> list[float]:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return [1.0 / n] * n
    try:
        probs = [float(v) for v in value]
    except (TypeError, ValueError):
        raise ValueError(f"UNCERTAIN TIME: {name}: the PMF must be an array of numbers, not "
                         f"{value!r}") from None
    if len(probs) != n:
        raise ValueError(f"UNCERTAIN TIME: {name}: the PMF has {len(probs)} values but the "
                         f"event has {n} possible times")
    if any(not math.isfinite(p) or p < 0 for p in probs):
        raise ValueError(f"UNCERTAIN TIME: {name}: the PMF has a negative or non-finite value")
    total = math.fsum(probs)
    if abs(total - 1.0) > _PMF_EPS:
        raise ValueError(f"UNCERTAIN TIME: {name}: the PMF sums to {total!r}, not 1")
    return [p / total for p in probs]


def _topological(n: int, parents: list[list[int]], key: tuple[Any, ...],
                 rows: list[int]) -> list[int]:
    children: list[list[int]] = [[] for _ in range(n)]
    indegree = [len(p) for p in parents]
    for child, ps in enumerate(parents):
        for p in ps:
            children[p].append(child)
    ready = [i for i in range(n) if indegree[i] == 0]
    order: list[int] = []
    while ready:
        node = ready.pop()
        order.append(node)
        for c in children[node]:
            indegree[c] -= 1
            if indegree[c] == 0:
                ready.append(c)
    if len(order) < n:
        stuck = sorted(rows[i] for i in range(n) if indegree[i] > 0)
        raise ValueError(f"UNCERTAIN TIME: in partition {key}, the PRIOR constraints form a "
                         f"cycle among events (rows {stuck[:10]}): events in several classes "
                         "must each come before the other")
    return order


@dataclass
class _Data:
    partitions: list[_Partition]
    ids: list[Any] | None
    kind: str
    window: Any | None
    partition_columns: list[str]
    measures: _Measures


def _prepare(q: CompiledQuery, plan: UncertainPlan, df: pd.DataFrame, id_column: str | None,
             max_points: int) -> _Data:
    columns = tuple(str(c) for c in df.columns)
    sets = {name: frozenset([i]) for i, name in enumerate(plan.classes)}
    scope = Scope(columns, sets, "MEASURES")
    m = q.match
    u = plan.clause
    partition_cols = [scope.column(c) for c in m.partition_by]
    order_col = scope.column(plan.order)
    lower_col, upper_col = scope.column(u.lower), scope.column(u.upper)
    pmf_col = scope.column(u.pmf) if u.pmf is not None else None
    ids = None
    if id_column is not None:
        if id_column not in columns:
            raise ValueError(f"id_column {id_column!r} is not a column of the input")
        ids = column_values(df[id_column])
    order, kind = _times(df[order_col], "ORDER BY")
    lower, lkind = _times(df[lower_col], "LOWER")
    upper, ukind = _times(df[upper_col], "UPPER")
    kind = kind or lkind or ukind or "number"
    for k, what in ((lkind, "LOWER"), (ukind, "UPPER")):
        if k is not None and k != kind:
            raise ValueError(f"UNCERTAIN TIME: the {what} column holds {k}s but ORDER BY holds "
                             f"{kind}s")
    step = _duration(u.granularity, kind) if u.granularity is not None else (
        10**9 if kind == "timestamp" else 1)
    if not step > 0:
        raise ValueError("UNCERTAIN TIME: GRANULARITY must be positive")
    window = _duration(plan.within, kind) if plan.within is not None else None
    masks: dict[str, np.ndarray] = {}
    for name in plan.classes:
        if name in plan.defines:
            cscope = Scope(columns, sets, "DEFINE", name)
            masks[name] = evaluate_condition(plan.defines[name], df, cscope)
        else:
            masks[name] = np.ones(len(df), dtype=bool)
    relevant = np.zeros(len(df), dtype=bool)
    for mask in masks.values():
        relevant |= mask
    pmfs = df[pmf_col].tolist() if pmf_col is not None else [None] * len(df)
    keys = list(zip(*[column_values(df[c]) for c in partition_cols], strict=True)) if (
        partition_cols) else [()] * len(df)
    by_key: dict[tuple[Any, ...], list[int]] = {}
    for row in np.flatnonzero(relevant).tolist():
        by_key.setdefault(tuple(keys[row]), []).append(row)
    partitions = []
    for key in sorted(by_key, key=_sort_key):
        events = []
        for row in by_key[key]:
            name = _row_name(row, ids)
            if lower[row] is not None and upper[row] is not None:
                points = _points(lower[row], upper[row], step, max_points, name)
            elif order[row] is not None:
                points = [order[row]]
            else:
                raise ValueError(f"UNCERTAIN TIME: {name} has no interval and no ORDER BY "
                                 "value")
            probs = _pmf(pmfs[row], len(points), name)
            suffix = list(itertools.accumulate(reversed(probs)))[::-1] + [0.0]
            classes = frozenset(c for c in plan.classes if masks[c][row])
            events.append(_Event(row, points, probs, classes, suffix))
        members = {c: [i for i, e in enumerate(events) if c in e.classes] for c in plan.classes}
        parent_sets: list[set[int]] = [set() for _ in events]
        for x_class, y_class in plan.prior:
            for y in members[y_class]:
                parent_sets[y].update(x for x in members[x_class] if x != y)
        parents = [sorted(p) for p in parent_sets]
        topo = _topological(len(events), parents, key, [e.row for e in events])
        partitions.append(_Partition(key, events, members, parents, topo, bool(plan.prior)))
    return _Data(partitions, ids, kind, window, partition_cols,
                 _Measures(plan, df, columns))


def _sort_key(key: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple((v is None, "" if v is None else v) for v in key)


# ============================================================================ matching


def _span(t: Tree, times: Mapping[str, Any]) -> tuple[Any, Any] | None:
    """The (first, last) span of pattern ``t`` for the events' ``times`` (variable -> time),
    or None if it does not match. OR takes its filled branch (exactly one is filled)."""
    op = t[0]
    if op == "LEAF":
        time = times[t[1]]
        return time, time
    if op == "OR":
        for item in t[1]:
            if tree_variables(item) & times.keys():
                return _span(item, times)
        return None
    spans = []
    for item in t[1]:
        s = _span(item, times)
        if s is None:
            return None
        spans.append(s)
    if op == "SEQ":
        for a, b in itertools.pairwise(spans):
            if not a[1] < b[0]:
                return None
        return spans[0][0], spans[-1][1]
    return min(s[0] for s in spans), max(s[1] for s in spans)


def _satisfies(times: Mapping[str, Any], f: Filling, window: Any | None) -> bool:
    """The same test as :func:`_span` for a filling: the strict order and the window."""
    for u, v in f.before:
        if not times[u] < times[v]:
            return False
    if window is not None:
        values = times.values()
        if max(values) - min(values) > window:
            return False
    return True


def _valid(plan: UncertainPlan, events: Sequence[_Event]) -> bool:
    """The occurrence constraints: EXCLUSIVE and REQUIRE over the sequence's events."""
    def contains(cls: str) -> bool:
        return any(cls in e.classes for e in events)

    for x, y in plan.exclusive:
        if contains(x) and contains(y):
            return False
    return all(not contains(x) or contains(y) for x, y in plan.require)


def _candidates(plan: UncertainPlan, part: _Partition, f: Filling,
                bounds: Sequence[tuple[Any, Any] | None] | None,
                window: Any | None) -> list[tuple[int, ...]]:
    """Every assignment of distinct events to ``f``'s variables (in their order) from the
    variables' classes that satisfies the occurrence constraints, in lexicographic order of
    the event indices. With ``bounds`` (each event's earliest and latest possible time, None
    if it has none) it backtracks with interval-bound pruning: a pair of events that can
    never be in the required order, or never within the window, ends the branch. The events
    of each class are kept sorted by earliest and by latest time, and only the range that
    the chosen events' bounds and the window allow is scanned (a bisection on either list,
    whichever range is shorter), so with WITHIN the cost is about linear in the events for
    a bounded number of matches per event."""
    names = f.variables
    rank = {v: i for i, v in enumerate(names)}
    # checks[i]: (j, i_must_be_after_j) for earlier variables j constrained with i
    checks: list[list[tuple[int, bool | None]]] = [[] for _ in names]
    for u, v in f.before:
        a, b = rank[u], rank[v]
        if a < b:
            checks[b].append((a, True))
        else:
            checks[a].append((b, False))
    out: list[tuple[int, ...]] = []
    chosen: list[int] = []
    index: dict[str, _ClassIndex] = {}
    tol: Any = 0
    if bounds is not None:
        for name in names:
            if name not in index:
                index[name] = _ClassIndex(part.members[name], bounds)
        known = [t for b in bounds if b is not None for t in b]
        if not (all(isinstance(t, int) for t in known)
                and (window is None or isinstance(window, int))):
            # float times: widen the ranges by more than any rounding error (the ranges
            # only preselect, fits() decides with the exact comparisons)
            scale = max((abs(t) for t in known), default=0) + abs(window or 0)
            tol = 1e-9 * (1.0 + scale + max((ix.width for ix in index.values()), default=0))

    def fits(i: int, e: int) -> bool:
        assert bounds is not None
        be = bounds[e]
        if be is None:
            return False
        for j, after in checks[i]:
            bj = bounds[chosen[j]]
            assert bj is not None
            if after and not bj[0] < be[1]:
                return False
            if not after and not be[0] < bj[1]:
                return False
        if window is not None:
            for c in chosen:
                bc = bounds[c]
                assert bc is not None
                if bc[0] - be[1] > window or be[0] - bc[1] > window:
                    return False
        return True

    def options(i: int) -> Sequence[int]:
        if bounds is None:
            return part.members[names[i]]
        # the latest time must exceed `low` (strictly if `low_strict`), the earliest time
        # must stay below `high` (strictly if `high_strict`); fits() checks the rest exactly
        low: Any = None
        low_strict = False
        high: Any = None
        high_strict = False

        def raise_low(value: Any, strict: bool) -> None:
            nonlocal low, low_strict
            if low is None or value > low or (value == low and strict):
                low, low_strict = value, strict

        def lower_high(value: Any, strict: bool) -> None:
            nonlocal high, high_strict
            if high is None or value < high or (value == high and strict):
                high, high_strict = value, strict

        for j, after in checks[i]:
            bj = bounds[chosen[j]]
            assert bj is not None
            if after:
                raise_low(bj[0], True)
            else:
                lower_high(bj[1], True)
        if window is not None:
            for c in chosen:
                bc = bounds[c]
                assert bc is not None
                raise_low(bc[0] - window, False)
                lower_high(bc[1] + window, False)
        if tol:
            low = None if low is None else low - tol
            high = None if high is None else high + tol
            low_strict = high_strict = False
        return index[names[i]].between(low, low_strict, high, high_strict)

    def extend(i: int) -> None:
        if i == len(names):
            if _valid(plan, [part.events[e] for e in chosen]):
                out.append(tuple(chosen))
            return
        for e in options(i):
            if e in chosen or (bounds is not None and not fits(i, e)):
                continue
            chosen.append(e)
            extend(i + 1)
            chosen.pop()

    extend(0)
    if bounds is not None:
        out.sort()  # the order of the plain scan over the classes' members
    return out


class _ClassIndex:
    """The events of one class that have bounds, sorted by earliest and by latest time."""

    def __init__(self, members: Sequence[int],
                 bounds: Sequence[tuple[Any, Any] | None]) -> None:
        have = [e for e in members if bounds[e] is not None]
        by_first = sorted(have, key=lambda e: bounds[e][0])  # type: ignore[index]
        by_last = sorted(have, key=lambda e: bounds[e][1])  # type: ignore[index]
        self.by_first = by_first
        self.firsts = [bounds[e][0] for e in by_first]  # type: ignore[index]
        self.by_last = by_last
        self.lasts = [bounds[e][1] for e in by_last]  # type: ignore[index]
        # the widest interval: earliest >= latest - width, latest <= earliest + width
        self.width = max((b[1] - b[0] for e in have if (b := bounds[e]) is not None),
                         default=0)

    def between(self, low: Any, low_strict: bool, high: Any,
                high_strict: bool) -> Sequence[int]:
        """A superset of the events whose latest time is > low (>= unless strict) and whose
        earliest time is < high (<= unless strict); None means unbounded."""
        if low is None and high is None:
            return self.by_first
        n = len(self.by_first)
        # range in by_first: earliest >= low - width (a necessary condition) and < high
        a = 0 if low is None else bisect.bisect_left(self.firsts, low - self.width)
        b = n if high is None else (bisect.bisect_left(self.firsts, high) if high_strict
                                    else bisect.bisect_right(self.firsts, high))
        # range in by_last: latest > low and latest <= high + width (necessary)
        c = 0 if low is None else (bisect.bisect_right(self.lasts, low) if low_strict
                                   else bisect.bisect_left(self.lasts, low))
        d = n if high is None else bisect.bisect_right(self.lasts, high + self.width)
        if b - a <= d - c:
            return self.by_first[a:b] if a < b else ()
        return self.by_last[c:d] if c < d else ()


# ============================================================================ methods


def _possible_worlds(plan: UncertainPlan, part: _Partition, window: Any | None,
                     max_worlds: int, diag: Diagnostics) -> dict[Sigma, float]:
    """possibleF_QP: every world of the partition, every matching sequence in it."""
    events = part.events
    count = 1
    for e in events:
        count *= len(e.points)
    if count > max_worlds:
        raise ValueError(f"UNCERTAIN TIME: partition {part.key} has {count} possible worlds "
                         f"(more than max_worlds={max_worlds}); use method='dp', 'event' or "
                         "'point', or raise max_worlds")
    sigmas = [(f, c) for f in plan.fillings for c in _candidates(plan, part, f, None, None)]
    diag.candidates += len(sigmas)
    diag.points += sum(len(e.points) for e in events)
    acc: dict[Sigma, float] = {}
    times: list[Any] = [None] * len(events)
    total = 0.0
    topo = part.topo

    def visit(i: int, prob: float) -> None:
        nonlocal total
        if i == len(topo):
            total += prob
            diag.worlds += 1
            for f, c in sigmas:
                assigned = {v: times[e] for v, e in zip(f.variables, c, strict=True)}
                diag.combinations += 1
                s = _span(plan.tree, assigned)
                if s is not None and (window is None or s[1] - s[0] <= window):
                    key = tuple((v, events[e].row) for v, e in zip(f.variables, c, strict=True))
                    acc[key] = acc.get(key, 0.0) + prob
            return
        e = topo[i]
        ev = events[e]
        ps = part.parents[e]
        probs = ev.conditional(max(times[p] for p in ps)) if ps else ev.probs
        for t, p in zip(ev.points, probs, strict=True):
            if p > 0:
                times[e] = t
                visit(i + 1, prob * p)
        times[e] = None

    visit(0, 1.0)
    if plan.prior:
        diag.lost_prior_mass[part.key] = _lost(total)
    return acc


def _lost(total: float) -> float:
    """1 - total, with float noise (below 1e-12) reported as 0."""
    lost = 1.0 - total
    return lost if lost > _XI_EPS else 0.0


@dataclass
class _Joint:
    """One PRIOR-connected component of two or more events. Under the PRIOR conditioning an
    event's pmf depends only on the latest time of its parents, so the events without
    children (the leaves of the event DAG) are independent given the times of the events
    with children (the parents): only the parents' joint assignments are enumerated."""

    parents: list[int]  # the events with children, in topological order
    position: dict[int, int]  # parent event -> index in ``parents``
    # the parents' assignments (point indices in ``parents`` order) with positive
    # probability under which every leaf keeps a point (otherwise the world is lost)
    assignments: list[tuple[tuple[int, ...], float]]
    _conditionals: dict[tuple[int, Any], list[tuple[int, float]]] = field(default_factory=dict)

    def conditional(self, part: _Partition, leaf: int,
                    chosen: tuple[int, ...]) -> list[tuple[int, float]]:
        """A leaf's (point index, probability) pairs, probability > 0, given the parents'
        assignment ``chosen``."""
        events = part.events
        after = max(events[p].points[chosen[self.position[p]]] for p in part.parents[leaf])
        key = (leaf, after)
        out = self._conditionals.get(key)
        if out is None:
            out = [(k, p) for k, p in enumerate(events[leaf].conditional(after)) if p > 0]
            self._conditionals[key] = out
        return out


@dataclass
class _Components:
    """The PRIOR-connected components of a partition's events and their joint pmfs."""

    comp_of: list[int]  # event -> component
    members: list[list[int]]  # component -> events, in topological order
    joints: list[_Joint | None]  # None for a single free event
    masses: list[float]
    _marginals: dict[tuple[int, tuple[int, ...]], list[tuple[tuple[Any, ...], float]]] = field(
        default_factory=dict)


def _components(part: _Partition, max_worlds: int, diag: Diagnostics) -> _Components:
    n = len(part.events)
    link: list[int] = list(range(n))  # union-find over PRIOR edges

    def root(i: int) -> int:
        while link[i] != i:
            link[i] = link[link[i]]
            i = link[i]
        return i

    for child, ps in enumerate(part.parents):
        for p in ps:
            link[root(child)] = root(p)
    index: dict[int, int] = {}
    members: list[list[int]] = []
    comp_of = [0] * n
    for e in part.topo:
        r = root(e)
        if r not in index:
            index[r] = len(members)
            members.append([])
        comp_of[e] = index[r]
        members[index[r]].append(e)
    joints: list[_Joint | None] = []
    masses: list[float] = []
    for comp in members:
        if len(comp) == 1:
            joints.append(None)
            masses.append(1.0)
            continue
        joint = _joint(part, comp, max_worlds, diag)
        joints.append(joint)
        masses.append(math.fsum(p for _, p in joint.assignments))
    if part.prior:
        diag.lost_prior_mass[part.key] = _lost(math.prod(masses))
    return _Components(comp_of, members, joints, masses)


def _joint(part: _Partition, comp: list[int], max_worlds: int, diag: Diagnostics) -> _Joint:
    """The joint pmf of the parents of one PRIOR component, by the chain rule in
    topological order; an assignment is left out if its probability is 0 or if some leaf
    has no point at or after its parents' latest time (the PRIOR conditioning loses that
    world, for every event of the partition)."""
    events = part.events
    with_children = {p for e in comp for p in part.parents[e]}
    parents = [e for e in comp if e in with_children]
    leaves = [e for e in comp if e not in with_children]
    count = 1
    for e in parents:
        count *= len(events[e].points)
    if count > max_worlds:
        raise ValueError(f"UNCERTAIN TIME: in partition {part.key}, {len(parents)} events "
                         f"with PRIOR children (of {len(comp)} linked by PRIOR) have {count} "
                         f"joint assignments (more than max_worlds={max_worlds}); raise "
                         "max_worlds")
    position = {e: i for i, e in enumerate(parents)}
    out: list[tuple[tuple[int, ...], float]] = []
    chosen: list[int] = []

    def keeps_a_point(leaf: int) -> bool:
        ev = events[leaf]
        after = max(events[p].points[chosen[position[p]]] for p in part.parents[leaf])
        return ev.suffix[bisect.bisect_left(ev.points, after)] > 0

    def visit(i: int, prob: float) -> None:
        if i == len(parents):
            diag.worlds += 1
            if all(keeps_a_point(leaf) for leaf in leaves):
                out.append((tuple(chosen), prob))
            return
        ev = events[parents[i]]
        ps = part.parents[parents[i]]
        if ps:
            probs = ev.conditional(max(events[p].points[chosen[position[p]]] for p in ps))
        else:
            probs = ev.probs
        for k, p in enumerate(probs):
            if p > 0:
                chosen.append(k)
                visit(i + 1, prob * p)
                chosen.pop()

    visit(0, 1.0)
    return _Joint(parents, position, out)


def _marginal(part: _Partition, comps: _Components, c: int,
              events: tuple[int, ...]) -> list[tuple[tuple[Any, ...], float]]:
    """The joint pmf of ``events`` (all in component ``c``) as (times, probability) pairs
    with positive probability: per assignment of the component's parents, the leaves among
    ``events`` range over their conditional pmfs, the other leaves sum to 1."""
    key = (c, events)
    cached = comps._marginals.get(key)
    if cached is not None:
        return cached
    joint = comps.joints[c]
    if joint is None:
        ev = part.events[events[0]]
        out = [((t,), p) for t, p in zip(ev.points, ev.probs, strict=True) if p > 0]
    else:
        fixed = [(k, joint.position[e]) for k, e in enumerate(events) if e in joint.position]
        free = [(k, e) for k, e in enumerate(events) if e not in joint.position]
        acc: dict[tuple[int, ...], float] = {}
        slots = [0] * len(events)
        for chosen, q in joint.assignments:
            for k, w in fixed:
                slots[k] = chosen[w]
            if not free:
                k_ = tuple(slots)
                acc[k_] = acc.get(k_, 0.0) + q
                continue
            dists = [joint.conditional(part, e, chosen) for _, e in free]
            for combo in itertools.product(*dists):
                p = q
                for (k, _), (point, pp) in zip(free, combo, strict=True):
                    slots[k] = point
                    p *= pp
                k_ = tuple(slots)
                acc[k_] = acc.get(k_, 0.0) + p
        out = [(tuple(part.events[e].points[i] for e, i in zip(events, k, strict=True)), p)
               for k, p in sorted(acc.items()) if p > 0]
    comps._marginals[key] = out
    return out


def _prune(f: Filling, supports: Mapping[str, list[Any]],
           window: Any | None) -> dict[str, list[Any]] | None:
    """Event-based pruning of each variable's possible times (exact: a removed point is in
    no combination that satisfies the order and the window). None if one becomes empty."""
    sets = {v: list(supports[v]) for v in f.variables}
    # forward: after every predecessor's earliest time
    for v in f.variables:
        preds = [u for u, w in f.before if w == v]
        if preds:
            low = max(sets[u][0] for u in preds)
            sets[v] = [t for t in sets[v] if low < t]
            if not sets[v]:
                return None
    # backward: before every successor's latest time
    for v in reversed(f.variables):
        succs = [w for u, w in f.before if u == v]
        if succs:
            high = min(sets[w][-1] for w in succs)
            sets[v] = [t for t in sets[v] if t < high]
            if not sets[v]:
                return None
    if window is not None and len(f.variables) > 1:
        firsts = {v: sets[v][0] for v in f.variables}
        lasts = {v: sets[v][-1] for v in f.variables}
        for v in f.variables:
            latest_first = max(firsts[w] for w in f.variables if w != v)
            earliest_last = min(lasts[w] for w in f.variables if w != v)
            sets[v] = [t for t in sets[v]
                       if latest_first - t <= window and t - earliest_last <= window]
            if not sets[v]:
                return None
    return sets


def _constraint_first(plan: UncertainPlan, part: _Partition, window: Any | None,
                      method: str, max_worlds: int, diag: Diagnostics) -> dict[Sigma, float]:
    """constraintsF_QP (point- or event-based) and the dynamic programme."""
    comps = _components(part, max_worlds, diag)
    events = part.events
    supports: list[list[Any]] = []
    for e in range(len(events)):
        marg = _marginal(part, comps, comps.comp_of[e], (e,))
        supports.append([times[0] for times, _ in marg])
    bounds = [(s[0], s[-1]) if s else None for s in supports]
    constrained = [c for c, joint in enumerate(comps.joints) if joint is not None]
    acc: dict[Sigma, float] = {}
    for f in plan.fillings:
        for cand in _candidates(plan, part, f, bounds, window):
            diag.candidates += 1
            touched = {comps.comp_of[e] for e in cand}
            outside = math.prod(comps.masses[c] for c in constrained if c not in touched)
            if outside == 0:
                continue
            p = _sequence_probability(part, comps, f, cand, supports, window, method, diag)
            if p > 0:
                key = tuple((v, events[e].row) for v, e in zip(f.variables, cand, strict=True))
                acc[key] = p * outside
    return acc


def _sequence_probability(part: _Partition, comps: _Components, f: Filling,
                          cand: tuple[int, ...], supports: list[list[Any]],
                          window: Any | None, method: str, diag: Diagnostics) -> float:
    """P(the events ``cand`` fill ``f`` and match), without the factor of the untouched
    PRIOR components."""
    var_of = dict(zip(cand, f.variables, strict=True))
    groups: dict[int, list[int]] = {}
    for e in cand:
        groups.setdefault(comps.comp_of[e], []).append(e)
    allowed: dict[str, list[Any]] | None = None
    if method != "point":
        allowed = _prune(f, {v: supports[e] for v, e in zip(f.variables, cand, strict=True)},
                         window)
        if allowed is None:
            return 0.0
    dists = []
    for c, members in groups.items():
        members_t = tuple(members)
        marg = _marginal(part, comps, c, members_t)
        if allowed is not None:
            keep = [set(allowed[var_of[e]]) for e in members_t]
            marg = [(ts, p) for ts, p in marg
                    if all(t in k for t, k in zip(ts, keep, strict=True))]
        if not marg:
            return 0.0
        diag.points += sum(len({ts[i] for ts, _ in marg}) for i in range(len(members_t)))
        dists.append(([var_of[e] for e in members_t], marg))
    if method == "dp" and all(len(names) == 1 for names, _ in dists):
        diag.dp += 1
        by_var = {names[0]: ([ts[0] for ts, _ in marg], [p for _, p in marg])
                  for names, marg in dists}
        return uncertain_dp.probability(f.tree, by_var, window)
    total = 0.0
    times: dict[str, Any] = {}
    for combo in itertools.product(*(marg for _, marg in dists)):
        prob = 1.0
        for (names, _), (ts, p) in zip(dists, combo, strict=True):
            prob *= p
            for name, t in zip(names, ts, strict=True):
                times[name] = t
        diag.combinations += 1
        if _satisfies(times, f, window):
            total += prob
    return total


# ============================================================================ output


class _ProbabilityColumn:
    """The hidden column MATCH_PROBABILITY() reads: the probability being output."""

    value: float = 0.0

    def __getitem__(self, row: int) -> float:
        return self.value


class _Measures:
    """MEASURES of a characteristic sequence, with the ordinary expression compiler: the
    sequence is a match whose rows are its events (each variable fills at most one), plus
    one row of a hidden variable whose column is MATCH_PROBABILITY()."""

    def __init__(self, plan: UncertainPlan, df: pd.DataFrame, columns: tuple[str, ...]):
        names = [*plan.variables, _PROB_VAR]
        self.index = {name: i for i, name in enumerate(names)}
        sets = {name: frozenset([i]) for i, name in enumerate(names)}
        scope = Scope((*columns, _PROB_COL), sets, "MEASURES")
        compiler = ExprCompiler(scope)
        self.names = [name for name, _ in plan.measures]
        self.fns = [compiler.compile(expr) for _, expr in plan.measures]
        used = {scope.column(n) for _, expr in plan.measures for n in walk(expr)
                if isinstance(n, ast.Column) and n.name != _PROB_COL}
        self.prob = _ProbabilityColumn()
        cols: dict[str, Any] = {c: column_values(df[c]) for c in used}
        cols[_PROB_COL] = self.prob
        self.state = MatchState(cols, names)
        self.state.lo, self.state.hi = 0, max(len(df), 1)

    def values(self, sigma: Sigma, probability: float) -> list[Any]:
        st = self.state
        st.rows = [row for _, row in sigma] + [0]
        st.labels = [self.index[v] for v, _ in sigma] + [self.index[_PROB_VAR]]
        st.upto = len(st.rows)
        st.epoch += 1
        self.prob.value = probability
        return [to_python(fn(st)) for fn in self.fns]


def evaluate_compiled(q: CompiledQuery, table: pd.DataFrame, method: str = "auto",
                      max_worlds: int = 1_000_000, id_column: str | None = None, *,
                      max_points: int = 100_000) -> UncertainResult:
    """:func:`cep_core.uncertain.evaluate` for a compiled query (what
    ``CompiledQuery.run`` calls; the arguments are documented there)."""
    plan = q.uncertain_plan
    if plan is None:
        raise ValueError("the query has no UNCERTAIN TIME clause; use match_recognize")
    if method not in METHODS:
        raise ValueError(f"method must be one of {', '.join(METHODS)}, not {method!r}")
    chosen = "dp" if method == "auto" else method
    df = table.reset_index(drop=True)
    try:
        data = _prepare(q, plan, df, id_column, max_points)
    except QueryError as err:
        raise err.with_query(q.text) from None
    diag = Diagnostics(method=chosen)
    rows: list[tuple[tuple[Any, ...], Any, Sigma, float]] = []
    for part in data.partitions:
        if chosen == "possible_worlds":
            found = _possible_worlds(plan, part, data.window, max_worlds, diag)
        else:
            found = _constraint_first(plan, part, data.window, chosen, max_worlds, diag)
        starts = {e.row: min((t for t, p in zip(e.points, e.probs, strict=True) if p > 0))
                  for e in part.events}
        for sigma, p in found.items():
            if p > 0 and p >= plan.min_probability - _XI_EPS:
                rows.append((part.key, min(starts[r] for _, r in sigma), sigma, p))
    ids = data.ids

    def order(item: tuple[tuple[Any, ...], Any, Sigma, float]) -> tuple[Any, ...]:
        key, start, sigma, _ = item
        names = tuple(r if ids is None else ids[r] for _, r in sigma)
        return _sort_key(key), start, names

    rows.sort(key=order)
    groups = [(key, sigma, p) for key, _, sigma, p in rows]
    out = _table(data, groups, df)
    try:
        selected = select(q.tree, out)
    except QueryError as err:
        raise err.with_query(q.text) from None
    return UncertainResult(selected, groups, diag)


def _table(data: _Data, groups: list[tuple[tuple[Any, ...], Sigma, float]],
           df: pd.DataFrame) -> pd.DataFrame:
    names = [*data.partition_columns, *data.measures.names, PROBABILITY]
    records = [[*key, *data.measures.values(sigma, p), p] for key, sigma, p in groups]
    if records:
        return pd.DataFrame.from_records(records, columns=names)
    frame = pd.DataFrame({c: df[c].iloc[:0] for c in data.partition_columns})
    for name in data.measures.names:
        frame[name] = pd.Series([], dtype=object)
    frame[PROBABILITY] = pd.Series([], dtype=float)
    return frame.reset_index(drop=True)
