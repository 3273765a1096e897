"""The checker of ``UNCERTAIN TIME`` queries (no data): :func:`check_query` checks the
restrictions of uncertain mode and builds the :class:`UncertainPlan` that evaluation needs
(pattern tree, fillings, constraints, MEASURES with MATCH_PROBABILITY() rewritten)."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..compile.expressions import (
    AGGREGATES,
    NAVIGATION,
    AnyColumns,
    ExprCompiler,
    Scope,
    is_row_local,
    walk,
)
from ..errors import QueryError
from ..language import ast

METHODS = ("auto", "dp", "event", "point", "possible_worlds")
PROBABILITY = "probability"  # the output column
# MATCH_PROBABILITY() is compiled as a column of a hidden variable (see Measures).
PROB_VAR = "__lakecep_probability__"
PROB_COL = "__lakecep_match_probability__"

Tree = tuple[Any, ...]  # ("LEAF", var) | ("SEQ" | "AND" | "OR", (tree, ...))
Sigma = tuple[tuple[str, int], ...]  # ((variable, row position), ...) in pattern order


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
    measures: list[tuple[str, ast.Expr]]  # MATCH_PROBABILITY() rewritten, see Measures


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
    sets = {name: frozenset([i]) for i, name in enumerate([*variables, PROB_VAR])}
    compiler = ExprCompiler(Scope(AnyColumns(), sets, "MEASURES"))
    for _, expr in out:
        compiler.compile(expr)
    return out


def _rewrite_probability(e: Any) -> Any:
    """Replace MATCH_PROBABILITY() by a column of the hidden probability variable."""
    if isinstance(e, ast.Call) and e.name == "MATCH_PROBABILITY":
        return ast.Column(PROB_COL, PROB_VAR, True, e.pos)
    if isinstance(e, tuple):
        return tuple(_rewrite_probability(x) for x in e)
    if not isinstance(e, ast.Expr):
        return e
    changes = {f.name: _rewrite_probability(getattr(e, f.name)) for f in dataclasses.fields(e)
               if isinstance(getattr(e, f.name), ast.Expr | tuple)}
    return dataclasses.replace(e, **changes)

