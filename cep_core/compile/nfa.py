"""A pattern program (:mod:`cep_core.compile.patterns`) as an automaton for the compiled
kernel (:mod:`cep_core.runtime.kernel`).

The automaton's states are the program's ``LABEL`` instructions (a state consumes one row
whose condition bit is set). Everything between two consumptions -- ``SPLIT``, ``JUMP``,
anchors, exclusion brackets, ``SAVE``/``PROGRESS`` -- is resolved here, once per query,
into *closures*: for each place a thread can be (before the first row, or just after a
state consumed a row) and each anchor case (at the partition's first row or not, after its
last row or not), the ordered list of states (or ACCEPT) it reaches, in the backtracking
matcher's preference order with duplicates removed (the first, preferred, occurrence
wins) and cut after ACCEPT (less preferred paths never run once a path accepts).

``SAVE``/``PROGRESS`` (a loop iteration over a body that can match empty must consume a
row) are exact: inside one closure no row is consumed, so ``PROGRESS s`` fails iff
``SAVE s`` ran earlier in the same closure. A closure step is therefore identified by
(instruction, the slots saved in this closure that a ``PROGRESS`` ahead still reads), a
small set, which bounds the work for nested nullable quantifiers like ``(A?){50}``.
After a consumption no slot is pending, so between rows a thread is just its state, and
two threads in the same state at the same row have the same future: the kernel keeps the
preferred one (this is what makes matching linear in the rows instead of exponential).

Negation (``NEG``, lakecep's ``NOT v``): the negated variables passed since the last
consumption form the thread's *guard*, which the next state checks on every row it skips
(SKIP TILL) and ACCEPT checks on the rows after the match inside the window (a trailing
``NOT``). A state is therefore a ``LABEL`` together with its guard (a bit mask of
variables; the same LABEL reached with and without a guard is two states, which share
their closures), and ACCEPT reached with guard ``g`` is the target ``n_states + i`` with
``accept_guard[i] = g`` (``i = 0``: no guard).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import patterns as P

MAX_CLOSURE_WORK = 2_000_000  # instruction visits while building closures; else no kernel


@dataclass(frozen=True)
class Automaton:
    """States, their variables and exclusion flags, and the closures as CSR arrays:
    the targets of (source, case) are ``targets[ptr[i]:ptr[i + 1]]`` for
    ``i = source * 4 + case``; source 0 is the start, source ``k + 1`` follows state ``k``;
    case = 2 * (at the partition's first row) + (after its last row); target ``n_states``
    means ACCEPT."""

    var: np.ndarray  # int64 per state
    excluded: np.ndarray  # bool per state
    ptr: np.ndarray  # int64
    targets: np.ndarray  # int64
    # per (source, case): the closure passes '$' at the end of the rows (incremental
    # matching: the outcome then waits for more rows)
    touches_end: np.ndarray  # bool
    # negation: per state the variables no skipped row may satisfy, per ACCEPT target
    # (n_states + i) those no row after the match inside the window may satisfy (bit masks)
    guard: np.ndarray  # uint64 per state
    accept_guard: np.ndarray  # uint64, [0] = 0

    @property
    def negation(self) -> bool:
        return bool(self.guard.any()) or len(self.accept_guard) > 1

    @property
    def n_states(self) -> int:
        return len(self.var)

    def label_var(self, labels: np.ndarray) -> np.ndarray:
        """The variable of each of the kernel's row labels (states; ``n_states``, a row
        skipped under SKIP TILL ... MATCH, gives -1)."""
        return np.asarray(np.append(self.var, -1)[labels])

    def label_excluded(self, labels: np.ndarray) -> np.ndarray:
        """The exclusion flag of each of the kernel's row labels (False for skipped rows)."""
        return np.asarray(np.append(self.excluded, False)[labels])


class TooLarge(Exception):
    """The closures would be too large to build; the general matcher runs instead."""


Target = tuple[int, int]  # (LABEL pc, or -1 for ACCEPT; guard bit mask)


def build(program: P.Program) -> Automaton:
    code = program.code
    excl_depth = _exclusion_depth(code)
    relevant = _relevant_slots(code)
    cases = (0, 1, 2, 3) if program.has_anchors else (0,)
    budget = [MAX_CLOSURE_WORK]
    # The closures per source instruction (the start, or after a LABEL), discovering the
    # states (LABEL, guard) they reach, breadth-first.
    closures: dict[int, dict[int, tuple[list[Target], bool]]] = {}
    states: list[Target] = []
    state_id: dict[Target, int] = {}
    accept_guards = [0]
    sources = [0]
    at = 0
    while at < len(sources):
        source_pc = sources[at]
        at += 1
        if source_pc in closures:
            continue
        per_case = closures[source_pc] = {
            case: _closure(code, source_pc, case, relevant, budget) for case in cases}
        for found, _ in per_case.values():
            for pc, guard in found:
                if pc < 0:
                    if guard not in accept_guards:
                        accept_guards.append(guard)
                elif (pc, guard) not in state_id:
                    state_id[(pc, guard)] = len(states)
                    states.append((pc, guard))
                    sources.append(pc + 1)
    states.sort()  # program order (as LABELs), guards apart
    state_id = {st: k for k, st in enumerate(states)}
    n_states = len(states)
    ptr = [0]
    targets: list[int] = []
    touches: list[bool] = []
    for source_pc in [0, *(pc + 1 for pc, _ in states)]:
        per_case = closures[source_pc]
        for case in range(4):
            found, touch = per_case[case if program.has_anchors else 0]
            targets.extend(n_states + accept_guards.index(guard) if pc < 0
                           else state_id[(pc, guard)] for pc, guard in found)
            ptr.append(len(targets))
            touches.append(touch)
    return Automaton(
        np.asarray([code[pc][1] for pc, _ in states], dtype=np.int64),
        np.asarray([excl_depth[pc] > 0 for pc, _ in states], dtype=np.bool_),
        np.asarray(ptr, dtype=np.int64), np.asarray(targets, dtype=np.int64),
        np.asarray(touches, dtype=np.bool_),
        np.asarray([guard for _, guard in states], dtype=np.uint64),
        np.asarray(accept_guards, dtype=np.uint64))


def _closure(code: tuple[tuple[int, ...], ...], pc0: int, case: int,
             relevant: list[frozenset[int]], budget: list[int]) -> tuple[list[Target], bool]:
    """The ordered targets (LABEL pc or -1 for ACCEPT, with the guard) reached from
    ``pc0`` without consuming a row (see module), and whether a '$' passed on the way (at
    the end of the rows)."""
    at_begin = bool(case & 2)
    at_end = bool(case & 1)
    out: list[Target] = []
    touch = False
    emitted: set[Target] = set()
    seen: set[tuple[int, frozenset[int], int]] = set()
    # Depth-first in preference order: a stack of (pc, saved slots, guard), preferred on
    # top.
    stack: list[tuple[int, frozenset[int], int]] = [(pc0, frozenset(), 0)]
    while stack:
        pc, saved, guard = stack.pop()
        while True:
            budget[0] -= 1
            if budget[0] < 0:
                raise TooLarge
            key = (pc, saved & relevant[pc], guard)
            if key in seen:
                break
            seen.add(key)
            ins = code[pc]
            op = ins[0]
            if op == P.LABEL:
                if (pc, guard) not in emitted:
                    emitted.add((pc, guard))
                    out.append((pc, guard))
                break
            if op == P.ACCEPT:
                out.append((-1, guard))
                if not guard:
                    return out, touch  # less preferred paths never run
                break  # (a trailing NOT may fail the match: the next target is tried)
            if op == P.SPLIT:
                stack.append((ins[2], saved, guard))
                pc = ins[1]
            elif op == P.JUMP:
                pc = ins[1]
            elif op == P.SAVE:
                saved = saved | {ins[1]}
                pc += 1
            elif op == P.PROGRESS:
                if ins[1] in saved:
                    break  # the body matched empty: this path fails
                pc += 1
            elif op == P.BEGIN:
                if not at_begin:
                    break
                pc += 1
            elif op == P.END:
                if not at_end:
                    break
                touch = True
                pc += 1
            elif op in (P.EXCLUDE_ON, P.EXCLUDE_OFF):
                pc += 1
            elif op == P.NEG:
                guard |= 1 << ins[1]
                pc += 1
            else:
                raise TooLarge
    return out, touch


def _relevant_slots(code: tuple[tuple[int, ...], ...]) -> list[frozenset[int]]:
    """Per instruction: the slots whose PROGRESS can be reached from it without consuming
    a row and without passing that slot's SAVE (a fixpoint over the control flow)."""
    n = len(code)
    rel: list[frozenset[int]] = [frozenset()] * n
    changed = True
    while changed:
        changed = False
        for pc in range(n - 1, -1, -1):
            ins = code[pc]
            op = ins[0]
            if op in (P.LABEL, P.ACCEPT):
                new: frozenset[int] = frozenset()
            elif op == P.SPLIT:
                new = rel[ins[1]] | rel[ins[2]]
            elif op == P.JUMP:
                new = rel[ins[1]]
            elif op == P.SAVE:
                new = rel[pc + 1] - {ins[1]}
            elif op == P.PROGRESS:
                new = rel[pc + 1] | {ins[1]}
            else:
                new = rel[pc + 1]
            if new != rel[pc]:
                rel[pc] = new
                changed = True
    return rel


def _exclusion_depth(code: tuple[tuple[int, ...], ...]) -> list[int]:
    """Per instruction, how many ``{- -}`` brackets enclose it (they nest like the
    pattern, so this is the same on every path)."""
    depth = 0
    out: list[int] = []
    for ins in code:
        if ins[0] == P.EXCLUDE_ON:
            depth += 1
        elif ins[0] == P.EXCLUDE_OFF:
            depth -= 1
        out.append(depth)
    return out
