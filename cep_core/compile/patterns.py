"""Pattern compiler: PATTERN tree -> a small backtracking program.

The program is a list of instructions run by :mod:`cep_core.matcher`. Choice points
(``SPLIT``) list the preferred branch first, so the first accepted path found by a
depth-first run is the match the standard prefers: greedy quantifiers try one more
iteration first, reluctant ones try to stop first, alternation tries the left branch first,
PERMUTE tries permutations in lexicographic order of the listed items.

Bounded quantifiers are unrolled (``A{2,4}`` -> ``A A (A (A)?)?``); an iteration beyond
the minimum of a body that can match empty must consume at least one row (otherwise
``(A?)*`` would loop forever), which is what ``SAVE``/``PROGRESS`` check.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from ..errors import QueryError
from ..language import ast

# Opcodes
LABEL = 0  # (LABEL, var_index): consume the current row if var's DEFINE holds
SPLIT = 1  # (SPLIT, preferred_pc, alternative_pc)
JUMP = 2  # (JUMP, pc)
BEGIN = 3  # (BEGIN,): '^', at the first row of the partition
END = 4  # (END,): '$', after the last row of the partition
EXCLUDE_ON = 5
EXCLUDE_OFF = 6
SAVE = 7  # (SAVE, slot): remember the position at the start of a loop iteration
PROGRESS = 8  # (PROGRESS, slot): fail unless a row was consumed since SAVE
ACCEPT = 9
NEG = 10  # (NEG, var_index): lakecep negation; no row of var until the next LABEL consumes

MAX_PROGRAM = 200_000
MAX_PERMUTE = 7


@dataclass(frozen=True)
class Program:
    """A compiled pattern: instructions, the variable names by index, and slot count."""

    code: tuple[tuple[int, ...], ...]
    variables: tuple[str, ...]
    slots: int
    has_exclusion: bool
    has_anchors: bool


def pattern_variables(pattern: ast.Pattern, negated: bool = True) -> list[str]:
    """Variables in order of first appearance (with ``negated=False`` without the variables
    that appear only negated, ``{- NOT X -}`` style ``ast.Negation``). The one walker over
    a PATTERN's variables."""
    seen: dict[str, None] = {}

    def walk(p: ast.Pattern) -> None:
        if isinstance(p, ast.Var):
            seen.setdefault(p.name, None)
        elif isinstance(p, ast.Negation):
            if negated:
                seen.setdefault(p.var, None)
        elif isinstance(p, ast.Concat | ast.Alternation | ast.Permute):
            for item in p.items:
                walk(item)
        elif isinstance(p, ast.Group | ast.Exclusion | ast.Quantified):
            walk(p.body)

    walk(pattern)
    return list(seen)


def can_be_empty(p: ast.Pattern) -> bool:
    """True if the pattern can match zero rows."""
    if isinstance(p, ast.Var):
        return False
    if isinstance(p, ast.Anchor | ast.Negation):
        return True
    if isinstance(p, ast.Concat | ast.Permute):
        return all(can_be_empty(i) for i in p.items)
    if isinstance(p, ast.Alternation):
        return any(can_be_empty(i) for i in p.items)
    if isinstance(p, ast.Group | ast.Exclusion):
        return can_be_empty(p.body)
    if isinstance(p, ast.Quantified):
        return p.low == 0 or can_be_empty(p.body)
    raise TypeError(p)


def expand_permute(p: ast.Permute) -> ast.Pattern:
    """PERMUTE(a, b, c) -> (a b c | a c b | b a c | ...), lexicographic preference."""
    if len(p.items) > MAX_PERMUTE:
        raise QueryError(f"PERMUTE supports at most {MAX_PERMUTE} items", *p.pos)
    alternatives = tuple(ast.Concat(tuple(order)) for order in itertools.permutations(p.items))
    return ast.Alternation(alternatives) if len(alternatives) > 1 else alternatives[0]


def compile_pattern(pattern: ast.Pattern, variables: list[str]) -> Program:
    """Compile ``pattern``; ``variables`` fixes the variable indices."""
    builder = _Builder({name: i for i, name in enumerate(variables)})
    builder.emit_pattern(pattern)
    builder.code.append((ACCEPT,))
    return Program(tuple(builder.code), tuple(variables), builder.slots, builder.has_exclusion,
                   builder.has_anchors)


class _Builder:
    def __init__(self, index: dict[str, int]):
        self.index = index
        self.code: list[tuple[int, ...]] = []
        self.slots = 0
        self.has_exclusion = False
        self.has_anchors = False

    def _emit(self, *instr: int) -> int:
        if len(self.code) >= MAX_PROGRAM:
            raise QueryError("pattern is too large once quantifiers are expanded", 1, 1)
        self.code.append(tuple(instr))
        return len(self.code) - 1

    def _patch(self, at: int, *instr: int) -> None:
        self.code[at] = tuple(instr)

    def emit_pattern(self, p: ast.Pattern) -> None:
        if isinstance(p, ast.Var):
            self._emit(LABEL, self.index[p.name])
        elif isinstance(p, ast.Negation):
            self._emit(NEG, self.index[p.var])
        elif isinstance(p, ast.Anchor):
            self.has_anchors = True
            self._emit(BEGIN if p.kind == "^" else END)
        elif isinstance(p, ast.Concat):
            for item in p.items:
                self.emit_pattern(item)
        elif isinstance(p, ast.Group):
            self.emit_pattern(p.body)
        elif isinstance(p, ast.Exclusion):
            self.has_exclusion = True
            self._emit(EXCLUDE_ON)
            self.emit_pattern(p.body)
            self._emit(EXCLUDE_OFF)
        elif isinstance(p, ast.Permute):
            self.emit_pattern(expand_permute(p))
        elif isinstance(p, ast.Alternation):
            self._emit_alternation(list(p.items))
        elif isinstance(p, ast.Quantified):
            self._emit_quantified(p)
        else:
            raise TypeError(p)

    def _emit_alternation(self, items: list[ast.Pattern]) -> None:
        jumps: list[int] = []
        for k, item in enumerate(items):
            if k == len(items) - 1:
                self.emit_pattern(item)
                break
            split = self._emit(SPLIT, 0, 0)
            self.emit_pattern(item)
            jumps.append(self._emit(JUMP, 0))
            self._patch(split, SPLIT, split + 1, len(self.code))
        end = len(self.code)
        for j in jumps:
            self._patch(j, JUMP, end)

    def _split(self, at: int, take: int, leave: int, greedy: bool) -> None:
        if greedy:
            self._patch(at, SPLIT, take, leave)
        else:
            self._patch(at, SPLIT, leave, take)

    def _emit_quantified(self, q: ast.Quantified) -> None:
        for _ in range(q.low):
            self.emit_pattern(q.body)
        nullable = can_be_empty(q.body)
        if q.high is None:
            # loop: SPLIT body/exit; [SAVE]; body; [PROGRESS]; JUMP loop
            loop = self._emit(SPLIT, 0, 0)
            slot = self._new_slot() if nullable else -1
            if nullable:
                self._emit(SAVE, slot)
            self.emit_pattern(q.body)
            if nullable:
                self._emit(PROGRESS, slot)
            self._emit(JUMP, loop)
            self._split(loop, loop + 1, len(self.code), q.greedy)
            return
        # Optional copies nest: (body (body (...)?)?)? ; every SPLIT exits to the end.
        splits: list[int] = []
        for _ in range(q.high - q.low):
            splits.append(self._emit(SPLIT, 0, 0))
            slot = self._new_slot() if nullable else -1
            if nullable:
                self._emit(SAVE, slot)
            self.emit_pattern(q.body)
            if nullable:
                self._emit(PROGRESS, slot)
        end = len(self.code)
        for at in splits:
            self._split(at, at + 1, end, q.greedy)

    def _new_slot(self) -> int:
        self.slots += 1
        return self.slots - 1


def backtracking_part(p: ast.Pattern) -> ast.Pattern:
    """The part of ``p`` to blame when matching backtracks without bound: the outermost
    quantified group whose body holds another quantifier (``(A+)+``, ``(A?){50}``), else
    the first unbounded quantifier, else ``p`` itself. Used in the step-limit error."""
    for node in ast.pattern_nodes(p):
        if isinstance(node, ast.Quantified) and any(
                isinstance(inner, ast.Quantified) for inner in ast.pattern_nodes(node.body)):
            return node
    return next((node for node in ast.pattern_nodes(p)
                 if isinstance(node, ast.Quantified) and node.high is None), p)


def first_variables(p: ast.Pattern) -> set[str]:
    """Variables that can map the first row of a non-empty match of ``p``."""
    if isinstance(p, ast.Var):
        return {p.name}
    if isinstance(p, ast.Anchor | ast.Negation):
        return set()
    if isinstance(p, ast.Concat | ast.Permute):
        # For PERMUTE any item can come first; for a concatenation, items up to and
        # including the first one that cannot be empty.
        out: set[str] = set()
        for item in p.items:
            out |= first_variables(item)
            if isinstance(p, ast.Concat) and not can_be_empty(item):
                break
        return out
    if isinstance(p, ast.Alternation):
        return set().union(*(first_variables(i) for i in p.items))
    if isinstance(p, ast.Group | ast.Exclusion | ast.Quantified):
        return first_variables(p.body)
    raise TypeError(p)
