"""Differential test: the engine against a brute-force reference matcher.

The reference enumerates, for each start row, every way the pattern can map rows to
variables, in the standard's preference order (greedy: more iterations first; reluctant:
fewer; alternation: left first; PERMUTE: lexicographic), checks the DEFINE conditions on
each complete candidate (running semantics: row i sees rows 0..i), and takes the first one.
It shares nothing with the engine but the pattern tree, which it reads directly.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cep_core
from cep_core.language import ast
from cep_core.language.printer import to_sql

Path = tuple[tuple[int, str, bool], ...]  # (row, variable, excluded) per matched row
VARS = ["A", "B", "C"]
Cond = Callable[[list[int], list[str], int, list[int]], bool]


class _Ctx:
    def __init__(self, values: list[int], conds: dict[str, Cond], selection: str):
        self.values = values
        self.n = len(values)
        self.conds = conds
        self.selection = selection

    def accepts(self, path: Path) -> bool:
        rows = [r for r, _, _ in path]
        names = [v for _, v, _ in path]
        return self.conds[names[-1]](rows, names, rows[-1], self.values)


def _gen(p: ast.Pattern, pos: int, path: Path, ctx: _Ctx,
         excl: bool) -> Iterator[tuple[Path, int]]:
    """All (path, next position) for ``p`` from row ``pos``, preferred first."""
    if isinstance(p, ast.Var):
        if not path or ctx.selection == "STRICT":
            candidates: Iterable[int] = [pos] if pos < ctx.n else []
        else:
            candidates = range(pos, ctx.n)
        for r in candidates:
            extended = path + ((r, p.name, excl),)
            if ctx.accepts(extended):
                yield extended, r + 1
                if ctx.selection == "NEXT":
                    return  # skip-till-next-match: only the first acceptable row
    elif isinstance(p, ast.Anchor):
        if (p.kind == "^" and pos == 0) or (p.kind == "$" and pos == ctx.n):
            yield path, pos
    elif isinstance(p, ast.Concat):
        yield from _concat(list(p.items), pos, path, ctx, excl)
    elif isinstance(p, ast.Alternation):
        for item in p.items:
            yield from _gen(item, pos, path, ctx, excl)
    elif isinstance(p, ast.Group):
        yield from _gen(p.body, pos, path, ctx, excl)
    elif isinstance(p, ast.Exclusion):
        yield from _gen(p.body, pos, path, ctx, True)
    elif isinstance(p, ast.Permute):
        for order in itertools.permutations(p.items):
            yield from _concat(list(order), pos, path, ctx, excl)
    elif isinstance(p, ast.Quantified):
        yield from _repeat(p, 0, pos, path, ctx, excl)
    else:
        raise TypeError(p)


def _concat(items: list[ast.Pattern], pos: int, path: Path, ctx: _Ctx,
            excl: bool) -> Iterator[tuple[Path, int]]:
    if not items:
        yield path, pos
        return
    for mid_path, mid in _gen(items[0], pos, path, ctx, excl):
        yield from _concat(items[1:], mid, mid_path, ctx, excl)


def _repeat(q: ast.Quantified, count: int, pos: int, path: Path, ctx: _Ctx,
            excl: bool) -> Iterator[tuple[Path, int]]:
    def more() -> Iterator[tuple[Path, int]]:
        if q.high is not None and count >= q.high:
            return
        for mid_path, mid in _gen(q.body, pos, path, ctx, excl):
            if count >= q.low and mid == pos:
                continue  # an optional iteration must consume a row
            yield from _repeat(q, count + 1, mid, mid_path, ctx, excl)

    def stop() -> Iterator[tuple[Path, int]]:
        if count >= q.low:
            yield path, pos

    for option in ((more, stop) if q.greedy else (stop, more)):
        yield from option()


def reference(pattern: ast.Pattern, values: list[int], times: list[int],
              conds: dict[str, Cond], skip: str, within: int | None,
              selection: str = "STRICT") -> list[tuple[int, Path]] | str:
    """Matches as (start, path); or 'error' when the skip target is invalid."""
    ctx = _Ctx(values, conds, selection)
    out: list[tuple[int, Path]] = []
    start = 0
    while start < ctx.n:
        found: Path | None = None
        for path, _end in _gen(pattern, start, (), ctx, False):
            if within is not None and path and times[path[-1][0]] - times[path[0][0]] > within:
                continue
            found = path
            break
        if found is None:
            start += 1
            continue
        out.append((start, found))
        if not found:
            start += 1
        elif skip == "PAST LAST ROW":
            start = found[-1][0] + 1
        elif skip == "TO NEXT ROW":
            start += 1
        else:
            kind, var = skip.rsplit(" ", 1)
            hits = [r for r, v, _ in found if v == var]
            if not hits:
                return "error"
            target = hits[0] if kind == "TO FIRST" else hits[-1]
            if target == start:
                return "error"
            start = target
    return out


# Conditions: (SQL text, reference predicate over (rows so far, labels so far, row, values)).
def _conditions(var: str) -> list[tuple[str, Cond]]:
    return [
        ("TRUE", lambda rows, names, row, v: True),
        ("v = 0", lambda rows, names, row, v: v[row] == 0),
        ("v >= 1", lambda rows, names, row, v: v[row] >= 1),
        ("v <> 1", lambda rows, names, row, v: v[row] != 1),
        ("v > PREV(v)", lambda rows, names, row, v: row > 0 and v[row] > v[row - 1]),
        (f"COUNT({var}.*) <= 2",
         lambda rows, names, row, v, var=var: sum(1 for x in names if x == var) <= 2),
        ("v >= FIRST(A.v)",
         lambda rows, names, row, v: any(x == "A" for x in names)
         and v[row] >= v[rows[names.index("A")]]),
        ("v = NEXT(v)", lambda rows, names, row, v: row + 1 < len(v) and v[row] == v[row + 1]),
    ]


# ----------------------------------------------------------------------------- strategies

Case = tuple[ast.Pattern, list[int], list[int], dict[str, int], str, int | None, str]
# Per match: number, kept rows, kept labels, and the full path (row, label, excluded).
Outcome = list[tuple[int, tuple[int, ...], tuple[str, ...], Path]] | str


def _quantify(body: ast.Pattern, spec: tuple[int, int | None], greedy: bool) -> ast.Pattern:
    low, high = spec
    if isinstance(body, ast.Anchor):
        return body  # anchors cannot be quantified
    if isinstance(body, ast.Concat | ast.Alternation):
        body = ast.Group(body)
    return ast.Quantified(body, low, high, greedy)


_SPECS = [(0, None), (1, None), (0, 1), (2, 2), (1, 2), (0, 2), (2, None)]


def _extend(children: st.SearchStrategy[ast.Pattern]) -> st.SearchStrategy[ast.Pattern]:
    quantified = st.builds(_quantify, children, st.sampled_from(_SPECS), st.booleans())
    concat = st.lists(children, min_size=2, max_size=3).map(lambda xs: ast.Concat(tuple(
        ast.Group(x) if isinstance(x, ast.Concat) else x for x in xs)))
    alternation = st.lists(children, min_size=2, max_size=2).map(
        lambda xs: ast.Alternation(tuple(xs)))
    permute = st.lists(children, min_size=2, max_size=2).map(lambda xs: ast.Permute(tuple(xs)))
    # PERMUTE less often than the common operators; exclusion is added in cases().
    return st.one_of(quantified, quantified, concat, concat, alternation, alternation,
                     permute)


_LEAVES = [ast.Var(v) for v in VARS] * 4 + [ast.Anchor("^"), ast.Anchor("$")]
patterns = st.recursive(st.sampled_from(_LEAVES), _extend, max_leaves=5)


@st.composite
def cases(draw: st.DrawFn) -> Case:
    parts = draw(st.lists(patterns, min_size=1, max_size=3))
    parts = [ast.Exclusion(p) if draw(st.integers(0, 5)) == 0 else p for p in parts]
    pattern = ast.Concat(tuple(ast.Group(p) if isinstance(p, ast.Concat) else p for p in parts))
    if all(isinstance(p, ast.Anchor) for p in parts):
        pattern = ast.Concat((*parts, ast.Var("A")))
    n = draw(st.integers(1, 8))
    values = draw(st.lists(st.integers(0, 2), min_size=n, max_size=n))
    gaps = draw(st.lists(st.integers(0, 3), min_size=n, max_size=n))
    times = list(itertools.accumulate(gaps))
    # Mostly permissive conditions, so that long matches are common.
    kinds = len(_conditions("A"))
    choice = {v: draw(st.sampled_from([0, 0, 0, *range(1, kinds)])) for v in VARS}
    skip = draw(st.sampled_from(["PAST LAST ROW", "PAST LAST ROW", "TO NEXT ROW",
                                 "TO FIRST", "TO LAST"]))
    used = cep_core.compile.patterns.pattern_variables(pattern)
    if skip in ("TO FIRST", "TO LAST"):
        skip = f"{skip} {used[draw(st.integers(0, len(used) - 1))]}" if used else "TO NEXT ROW"
    within = draw(st.one_of(st.none(), st.none(), st.integers(0, 8)))
    selection = draw(st.sampled_from(["STRICT", "STRICT", "NEXT", "ANY"]))
    return pattern, values, times, choice, skip, within, selection


def _usable(pattern: ast.Pattern, choice: dict[str, int]) -> dict[str, int]:
    """Conditions that mention A only where A is a variable of the pattern."""
    used = set(cep_core.compile.patterns.pattern_variables(pattern))
    return {v: 0 if "A." in _conditions(v)[k][0] and "A" not in used else k
            for v, k in choice.items()}


def _engine(pattern: ast.Pattern, values: list[int], times: list[int], choice: dict[str, int],
            skip: str, within: int | None, selection: str) -> Outcome:
    used = set(cep_core.compile.patterns.pattern_variables(pattern))
    choice = _usable(pattern, choice)
    defines = ", ".join(f"{v} AS {_conditions(v)[choice[v]][0]}" for v in VARS if v in used)
    query = (f"SELECT * FROM t MATCH_RECOGNIZE (ORDER BY t "
             f"AFTER MATCH SKIP {skip} PATTERN ({to_sql(pattern)})"
             f"{f' WITHIN {within}' if within is not None else ''}"
             f"{f' SKIP TILL {selection} MATCH' if selection != 'STRICT' else ''}"
             f"{' DEFINE ' + defines if defines else ''})")
    df = pd.DataFrame({"t": times, "v": values})
    try:
        compiled = cep_core.compile_query(query)
    except cep_core.QueryError as err:
        if "AFTER MATCH SKIP names" in err.message:
            return "skip-var-missing"
        raise
    try:
        matches = compiled.find_matches(df)
        # The full path, excluded rows included, from the engine's internal result.
        _, _, _, parts = compiled._bind(df)._partitions(df)
    except cep_core.QueryError as err:
        assert "AFTER MATCH SKIP" in err.message
        return "error"
    names = compiled.variables
    raw = [tuple((r, names[v], x) for r, v, x in zip(m.rows, m.labels, m.excluded, strict=True))
           for m in parts[0].matches]
    return [(m.match_number, m.rows, m.labels, path)
            for m, path in zip(matches, raw, strict=True)]


def _expected(pattern: ast.Pattern, values: list[int], times: list[int], choice: dict[str, int],
              skip: str, within: int | None, selection: str) -> Outcome:
    choice = _usable(pattern, choice)
    conds = {v: _conditions(v)[choice[v]][1] for v in VARS}
    used = set(cep_core.compile.patterns.pattern_variables(pattern))
    if skip != "PAST LAST ROW" and skip != "TO NEXT ROW" and skip.split()[-1] not in used:
        return "skip-var-missing"
    result = reference(pattern, values, times, conds, skip, within, selection)
    if isinstance(result, str):
        return result
    out = []
    for number, (_start, path) in enumerate(result, 1):
        kept = [(r, v) for r, v, excl in path if not excl]
        out.append((number, tuple(r for r, _ in kept), tuple(v for _, v in kept), path))
    return out


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_engine_agrees_with_brute_force_reference(case: Case) -> None:
    # Sorting by t keeps row order because times are non-decreasing and the sort is stable.
    assert _engine(*case) == _expected(*case)


@pytest.mark.parametrize(("pattern", "values", "expected"), [
    # (pattern SQL, values, expected [(rows, labels)]) -- A: v = 0, B: v >= 1
    ("A+ B", [0, 0, 1], [((0, 1, 2), ("A", "A", "B"))]),
    ("A+? B*", [0, 0, 1], [((0,), ("A",)), ((1, 2), ("A", "B"))]),
    ("(A | B)+ B", [1, 0, 1, 1], [((0, 1, 2, 3), ("B", "A", "B", "B"))]),
    ("A{2} | B", [0, 1, 0, 0], [((1,), ("B",)), ((2, 3), ("A", "A"))]),
])
def test_reference_itself_on_hand_checked_cases(pattern: str, values: list[int],
                                                expected: list[object]) -> None:
    tree = cep_core.parse(f"SELECT * FROM t MATCH_RECOGNIZE (ORDER BY t PATTERN ({pattern}))")
    conds: dict[str, Cond] = {
        "A": lambda rows, names, row, v: v[row] == 0,
        "B": lambda rows, names, row, v: v[row] >= 1,
    }
    result = reference(tree.match.pattern, values, list(range(len(values))), conds,
                       "PAST LAST ROW", None)
    assert not isinstance(result, str)
    got = [(tuple(r for r, _, _ in path), tuple(v for _, v, _ in path)) for _, path in result]
    assert got == expected
