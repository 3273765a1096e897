"""Checks for the lakecep pattern extensions: where ``CONSUMPTION``, ``NOT var`` and
``EMIT TIMEOUTS`` may be used (see docs/query-language.md). All are reported with
:class:`QueryError` before any data is seen."""

from __future__ import annotations

from ..errors import QueryError
from ..language import ast
from . import patterns as P


def check_extensions(m: ast.MatchRecognize) -> None:
    _check_negation(m)
    if m.consumption is not None:
        _check_consumption(m)
    if m.emit_timeouts:
        if m.within is None:
            raise QueryError("EMIT TIMEOUTS needs WITHIN: a partial match times out when its "
                             "window passes", *m.consumption_pos)
        if m.consumption is not None:
            raise QueryError("EMIT TIMEOUTS cannot be combined with CONSUMPTION",
                             *m.consumption_pos)
        if m.rows_per_match == "ALL UNMATCHED":
            raise QueryError("EMIT TIMEOUTS cannot be combined with ALL ROWS PER MATCH WITH "
                             "UNMATCHED ROWS", *m.consumption_pos)
        for me in m.measures:
            if me.name.lower() == "timed_out":
                raise QueryError("measure name timed_out clashes with the marker column of "
                                 "EMIT TIMEOUTS", *me.pos)


def has_negation(p: ast.Pattern) -> bool:
    return any(isinstance(node, ast.Negation) for node in ast.pattern_nodes(p))


def _positive_vars(p: ast.Pattern) -> set[str]:
    if isinstance(p, ast.Var):
        return {p.name}
    if isinstance(p, ast.Concat | ast.Alternation | ast.Permute):
        return set().union(*(_positive_vars(i) for i in p.items))
    if isinstance(p, ast.Group | ast.Exclusion | ast.Quantified):
        return _positive_vars(p.body)
    return set()


def _check_negation(m: ast.MatchRecognize) -> None:
    p = m.pattern
    if not has_negation(p):
        return
    items = p.items if isinstance(p, ast.Concat) else (p,)
    for item in items:
        if not isinstance(item, ast.Negation) and has_negation(item):
            bad = _first_negation(item)
            raise QueryError("NOT var may only be an item of the top-level concatenation of "
                             "the PATTERN (not inside groups, alternations, quantifiers, "
                             "PERMUTE or exclusions)", *bad.pos)
    first = items[0]
    if isinstance(first, ast.Negation) or P.can_be_empty(first):
        pos = first.pos if isinstance(first, ast.Negation | ast.Var) else (1, 1)
        raise QueryError("a PATTERN with NOT var must start with a term that matches at least "
                         "one row (the negation is measured from the rows before it)", *pos)
    positive = _positive_vars(p)
    for k, item in enumerate(items):
        if not isinstance(item, ast.Negation):
            continue
        if item.var in positive:
            raise QueryError(f"variable {item.var} is negated (NOT {item.var}) and also used "
                             "as a positive pattern variable", *item.pos)
        rest = [i for i in items[k + 1:] if not isinstance(i, ast.Negation)]
        if not rest:
            if m.within is None:
                raise QueryError(f"a trailing NOT {item.var} needs WITHIN: the match is "
                                 "confirmed when the window passes without a "
                                 f"{item.var} row", *item.pos)
            continue
        if P.can_be_empty(rest[0]):
            raise QueryError(f"the term after NOT {item.var} must match at least one row",
                             *item.pos)
        if m.selection == "STRICT":
            raise QueryError(f"NOT {item.var} between two terms needs SKIP TILL NEXT MATCH or "
                             "SKIP TILL ANY MATCH: with strict contiguity no rows lie between "
                             "them", *item.pos)
    if m.consumption is not None:
        raise QueryError("NOT var cannot be combined with CONSUMPTION", *m.consumption_pos)


def _first_negation(p: ast.Pattern) -> ast.Negation:
    if isinstance(p, ast.Negation):
        return p
    children: tuple[ast.Pattern, ...] = ()
    if isinstance(p, ast.Concat | ast.Alternation | ast.Permute):
        children = p.items
    elif isinstance(p, ast.Group | ast.Exclusion | ast.Quantified):
        children = (p.body,)
    for c in children:
        if has_negation(c):
            return _first_negation(c)
    raise ValueError(p)


def _check_consumption(m: ast.MatchRecognize) -> None:
    mode = m.consumption
    pos = m.consumption_pos
    p = m.pattern
    items = p.items if isinstance(p, ast.Concat) else (p,)
    names = [i.name for i in items if isinstance(i, ast.Var)]
    if len(names) != len(items) or len(names) < 2 or len(set(names)) != len(names):
        raise QueryError(f"CONSUMPTION {mode} needs a PATTERN that is a sequence of at least "
                         "two distinct single variables, e.g. PATTERN (A B C): the modes say "
                         "which repeated rows of a variable are combined, which is not defined "
                         "for quantifiers, alternation, PERMUTE, anchors or exclusion", *pos)
    if m.selection == "STRICT":
        raise QueryError(f"CONSUMPTION {mode} needs SKIP TILL NEXT MATCH or SKIP TILL ANY "
                         "MATCH: with strict contiguity a variable never sees repeated rows",
                         *pos)
    if m.skip_written:
        raise QueryError(f"CONSUMPTION {mode} decides which rows are used again; it cannot be "
                         "combined with AFTER MATCH SKIP", *m.skip.pos)
    if m.rows_per_match == "ALL UNMATCHED":
        raise QueryError(f"CONSUMPTION {mode} cannot be combined with ALL ROWS PER MATCH WITH "
                         "UNMATCHED ROWS", *pos)
