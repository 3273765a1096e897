"""The matching engine: runs a compiled pattern program over the rows of one partition.

A backtracking machine with an explicit stack (no recursion, so long partitions cannot
overflow the Python stack). Choice points are tried in preference order, so the first
accepted path from a start row is the match the standard prefers. After a match the next
start row follows the AFTER MATCH SKIP policy.

DEFINE conditions come in two parts per variable: a precomputed boolean array over all rows
for the conjuncts that only look at the current row, and a closure for the conjuncts that
look at the match so far (navigation, aggregates, other variables), evaluated with RUNNING
semantics on the partial match extended by the candidate row.

lakecep extensions handled here: SKIP TILL NEXT/ANY MATCH (a LABEL scans ahead for its
row), negation (``NEG`` puts variables on a guard that the next scanning LABEL checks on
each row it skips; a guard still pending at ACCEPT is a trailing negation, checked over the
rest of the WITHIN window) and EMIT TIMEOUTS (the longest partial path that the window or
the end of the partition cut off is kept in ``Matcher.timeout``). Consumption modes do not
backtrack and live in :mod:`cep_core.consumption`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..compile import patterns as P
from ..compile.expressions import AGGREGATES, SPECIAL, walk
from ..compile.state import Fn, MatchState
from ..errors import QueryError
from ..language import ast

# Memoisation of failed (instruction, row) states: a byte per state while the table of a
# partition stays this small, else a set of at most _MEMO_SET entries (then emptied).
_MEMO_BYTES = 1 << 26
_MEMO_SET = 1 << 20
# The bound on backtracking (docs/query-language.md, "Bounds"): an attempt from one start
# row may return to a choice point at most max(MAX_BACKTRACKS, BACKTRACKS_PER_ROW x rows of
# the partition) times, else QueryError. Deterministic (a count, not a time), so batch and
# incremental runs agree on which queries raise.
MAX_BACKTRACKS = 100_000
BACKTRACKS_PER_ROW = 4


@dataclass
class RawMatch:
    """One match in sorted-row coordinates (or an unmatched row when ``unmatched``)."""

    start: int
    number: int
    rows: list[int] = field(default_factory=list)
    labels: list[int] = field(default_factory=list)
    excluded: list[bool] = field(default_factory=list)
    unmatched: bool = False
    timed_out: bool = False  # EMIT TIMEOUTS: a partial match cut off by the WITHIN window


@dataclass
class Partition:
    """One partition's slice of the sorted input [lo, hi) and its raw matches."""

    key: tuple[Any, ...]
    lo: int
    hi: int
    matches: list[RawMatch]


@dataclass(frozen=True)
class SkipPolicy:
    """AFTER MATCH SKIP: where the next match attempt starts."""

    kind: str  # 'PAST LAST ROW', 'TO NEXT ROW', 'TO FIRST', 'TO LAST'
    var: frozenset[int] | None = None
    var_name: str = ""
    pos: tuple[int, int] = (1, 1)

    def next_start(self, match: RawMatch) -> int:
        if not match.rows:
            return match.start + 1  # after an empty match: the next row
        if self.kind == "PAST LAST ROW":
            return match.rows[-1] + 1
        if self.kind == "TO NEXT ROW":
            return match.start + 1
        assert self.var is not None
        var = self.var
        labels = match.labels
        order = range(len(labels)) if self.kind == "TO FIRST" else range(len(labels) - 1, -1, -1)
        found = next((i for i in order if labels[i] in var), None)
        if found is None:
            raise QueryError(f"AFTER MATCH SKIP {self.kind} {self.var_name}: match "
                             f"{match.number} has no row mapped to {self.var_name}", *self.pos)
        target = match.rows[found]
        if target == match.start:
            raise QueryError(f"AFTER MATCH SKIP {self.kind} {self.var_name} would skip to the "
                             f"first row of match {match.number} and loop forever", *self.pos)
        return target


@dataclass
class Conditions:
    """DEFINE conditions by variable index (see the module docstring)."""

    local: list[np.ndarray | None]
    dependent: list[Fn | None]


@dataclass
class Window:
    """The WITHIN constraint: |order(last) - order(first)| <= limit (order as numbers)."""

    order: Sequence[Any]  # per sorted row: an int/float or None
    limit: float
    descending: bool = False


class Matcher:
    def __init__(self, program: P.Program, conditions: Conditions, skip: SkipPolicy,
                 window: Window | None, report_unmatched: bool = False,
                 starts: np.ndarray | None = None, selection: str = "STRICT",
                 memo: bool = False, blame: tuple[str, tuple[int, int]] = ("", (1, 1))):
        """``starts``, if given, marks the rows where a match can start at all (the pattern
        cannot match empty, and this row passes the row-local condition of some variable
        that can come first); other rows are skipped without running the program.

        ``memo``: the DEFINE conditions depend only on the row being mapped (see
        :func:`position_only`), so whether the rest of the program can match from an
        instruction at a row does not depend on the path that led there. The matcher then
        remembers the (instruction, row) states it has entered and does not enter one
        twice: the first visit either led to the match (and the attempt ended) or failed,
        so a second visit would fail too. Without a WITHIN window (whose limit is measured
        from the start row) the states stay remembered across the failed attempts of a
        partition. This bounds an attempt by (program size x rows) instead of the number
        of paths, which grows exponentially for patterns like ``(A+)+ B`` and as a power
        of the rows for ``A+ A+ A+ B``.

        Where memoisation does not apply (conditions that look at the match so far), an
        attempt that backtracks more than ``max_backtracks`` times raises QueryError naming
        ``blame`` (the pattern part as text, and its position)."""
        self.max_backtracks = MAX_BACKTRACKS
        self.blame = blame
        self.starts = starts
        self.selection = selection
        # Incremental matching (see cep_core.streaming): with ``open`` set, more rows may
        # follow ``hi``; an attempt whose outcome depended on what comes next sets
        # ``touched_end``. ``begin`` is where '^' matches (None: at ``lo``).
        self.open = False
        self.touched_end = False
        self.begin: int | None = None
        self.program = program
        self.conditions = conditions
        self.skip = skip
        self.window = window
        self.report_unmatched = report_unmatched
        # EMIT TIMEOUTS: the longest partial path of the last attempt that the WITHIN
        # window (or the end of the partition) cut off, as (rows, labels, excluded).
        self.emit_timeouts = False
        self.timeout: tuple[list[int], list[int], list[bool]] | None = None
        self.memo = memo and selection == "STRICT"
        # A state is (instruction, row) unless loop slots or negation guards are involved.
        self._plain = not program.slots and all(ins[0] != P.NEG for ins in program.code)
        self._seen: bytearray | set[Any] | None = None
        self._seen_for: tuple[int, int, int | None, bool] = (-1, -1, None, False)
        self._seen_from = -1  # the first row of the states remembered in _seen (a bytearray)
        self._seen_top = -1  # and the last

    def partition(self, st: MatchState, lo: int, hi: int) -> list[RawMatch]:
        """All matches in rows ``lo..hi-1``, in order, numbered from 1."""
        st.lo, st.hi = lo, hi
        out: list[RawMatch] = []
        start = lo
        number = 0
        covered = lo  # rows below this were part of some match
        starts = self.starts
        if starts is not None and not self.report_unmatched:
            candidates = (np.flatnonzero(starts[lo:hi]) + lo).tolist()
        else:
            candidates = None
        k = 0
        while start < hi:
            if candidates is not None:
                while k < len(candidates) and candidates[k] < start:
                    k += 1
                if k == len(candidates):
                    break
                start = candidates[k]
            st.match_number = number + 1  # what MATCH_NUMBER() in DEFINE sees
            self.timeout = None
            found = self._match_at(st, start, lo, hi)
            if found is None and self.timeout is not None:
                number += 1
                t_rows, t_labels, t_excluded = self.timeout
                out.append(RawMatch(start, number, t_rows, t_labels, t_excluded, timed_out=True))
                start += 1
                continue
            if found is None:
                if self.report_unmatched and start >= covered:
                    out.append(RawMatch(start, 0, unmatched=True))
                start += 1
                continue
            number += 1
            rows, labels, excluded = found
            match = RawMatch(start, number, rows, labels, excluded)
            out.append(match)
            if rows:
                covered = max(covered, rows[-1] + 1)
            elif self.report_unmatched:
                covered = max(covered, start + 1)
            start = self.skip.next_start(match)
        return out

    def _match_at(self, st: MatchState, start: int, lo: int,
                  hi: int) -> tuple[list[int], list[int], list[bool]] | None:
        code = self.program.code
        local = self.conditions.local
        dependent = self.conditions.dependent
        window = self.window
        if window is not None:
            order = window.order
            t0 = order[start] if start < hi else None
            limit = window.limit
            sign = -1 if window.descending else 1
        rows: list[int] = []
        labels: list[int] = []
        flags: list[bool] = []
        st.rows = rows
        st.labels = labels
        st.epoch += 1
        pc = 0
        pos = start
        excl = 0
        slots: list[int] = [-1] * self.program.slots
        stack: list[tuple[int, int, int, int, list[int], tuple[int, ...]]] = []
        scanning = self.selection != "STRICT"
        guard: tuple[int, ...] = ()  # negated variables (NOT v) pending before the next row
        seen = self._memo_start(start, lo, hi) if self.memo and not self.emit_timeouts else None
        flat = seen if isinstance(seen, bytearray) else None
        keys = seen if isinstance(seen, set) else None
        ncode = len(code)
        plain = self._plain
        top = start
        budget = max(self.max_backtracks, BACKTRACKS_PER_ROW * (hi - lo))
        while True:
            ins = code[pc]
            op = ins[0]
            if seen is not None and op <= P.SPLIT:  # LABEL or SPLIT: a state worth keeping
                if flat is not None:
                    i = (pos - lo) * ncode + pc
                    if flat[i]:
                        op = -1  # entered before: fail here (see __init__)
                    else:
                        flat[i] = 1
                        if pos > top:
                            top = pos
                elif keys is not None:
                    key = (pos - lo) * ncode + pc if plain else (pc, pos, guard, *slots)
                    if key in keys:
                        op = -1
                    else:
                        keys.add(key)
            if op == P.LABEL and scanning and rows:
                # Skip-till-next/any-match: look for the next row, from pos on, that the
                # variable accepts; rows in between are not part of the match.
                v = ins[1]
                r = pos
                taken = False
                cut = False  # stopped by the window or the end of the partition
                while r < hi:
                    if window is not None:
                        t = order[r]
                        if t0 is None or t is None or sign * (t - t0) > limit:
                            cut = True
                            break
                    negated: bool | None = None
                    if guard and self.selection == "ANY":
                        # A row of a negated variable may not be skipped over, so taking a
                        # later row instead of this one is no alternative.
                        negated = self._negated(st, guard, r, local, dependent, flags)
                    if self._accepts(st, v, r, local, dependent, flags, excl > 0):
                        if self.selection == "ANY" and not negated:
                            stack.append((pc, r + 1, len(rows) - 1, excl, slots, guard))
                        pos = r + 1
                        pc += 1
                        taken = True
                        guard = ()
                        break
                    if guard and (self._negated(st, guard, r, local, dependent, flags)
                                  if negated is None else negated):
                        break
                    r += 1
                if taken:
                    continue
                if r >= hi:
                    cut = True
                    if self.open:
                        self._touch(start, hi)
                if cut and self.emit_timeouts:
                    self._record_timeout(rows, labels, flags)
            elif op == P.LABEL:
                if pos < hi:
                    v = ins[1]
                    loc = local[v]
                    in_window = True
                    if window is not None:
                        t = order[pos]
                        in_window = t0 is not None and t is not None and sign * (t - t0) <= limit
                        if not in_window and rows and self.emit_timeouts:
                            self._record_timeout(rows, labels, flags)
                    if in_window and (loc is None or loc[pos]):
                        rows.append(pos)
                        labels.append(v)
                        flags.append(excl > 0)
                        ok = True
                        dep = dependent[v]
                        if dep is not None:
                            st.upto = len(rows)
                            ok = dep(st) is True
                            if not ok:
                                rows.pop()
                                labels.pop()
                                flags.pop()
                                st.epoch += 1
                        if ok:
                            pos += 1
                            pc += 1
                            guard = ()
                            continue
                elif self.open:
                    self._touch(start, hi)
                elif rows and self.emit_timeouts:
                    self._record_timeout(rows, labels, flags)
            elif op == P.SPLIT:
                stack.append((ins[2], pos, len(rows), excl, slots, guard))
                pc = ins[1]
                continue
            elif op == P.JUMP:
                pc = ins[1]
                continue
            elif op == P.SAVE:
                slots = slots.copy()
                slots[ins[1]] = pos
                pc += 1
                continue
            elif op == P.PROGRESS:
                if slots[ins[1]] != pos:
                    pc += 1
                    continue
            elif op == P.BEGIN:
                if pos == (lo if self.begin is None else self.begin):
                    pc += 1
                    continue
            elif op == P.END:
                if pos == hi:
                    if self.open:
                        self.touched_end = True  # '$' is only known at the end of input
                    pc += 1
                    continue
            elif op == P.EXCLUDE_ON:
                excl += 1
                pc += 1
                continue
            elif op == P.EXCLUDE_OFF:
                excl -= 1
                pc += 1
                continue
            elif op == P.NEG:
                guard = (*guard, ins[1])
                pc += 1
                continue
            elif op == P.ACCEPT:
                if not guard or self._trailing_ok(st, guard, start, pos, hi, local, dependent,
                                                  flags):
                    if seen is not None:
                        self._memo_end(top, True)
                    return rows, labels, flags
            # The current path failed: resume the most recent untried alternative.
            # (Also reached from LABEL/anchor/PROGRESS checks that did not pass.)
            if not stack:
                if seen is not None:
                    self._memo_end(top, window is not None)
                return None
            budget -= 1
            if budget < 0:
                self._too_many_backtracks(start)
            pc, pos, size, excl, slots, guard = stack.pop()
            if size < len(rows):
                del rows[size:]
                del labels[size:]
                del flags[size:]
                st.epoch += 1

    @staticmethod
    def _accepts(st: MatchState, v: int, r: int, local: list[np.ndarray | None],
                 dependent: list[Fn | None], flags: list[bool], excluded: bool) -> bool:
        """Map row ``r`` to variable ``v`` if its DEFINE holds (appending it to the path)."""
        loc = local[v]
        if loc is not None and not loc[r]:
            return False
        st.rows.append(r)
        st.labels.append(v)
        flags.append(excluded)
        dep = dependent[v]
        if dep is not None:
            st.upto = len(st.rows)
            if dep(st) is not True:
                st.rows.pop()
                st.labels.pop()
                flags.pop()
                st.epoch += 1
                return False
        return True

    def _negated(self, st: MatchState, guard: tuple[int, ...], r: int,
                 local: list[np.ndarray | None], dependent: list[Fn | None],
                 flags: list[bool]) -> bool:
        """True if row ``r`` satisfies one of the negated variables in ``guard`` (its DEFINE
        evaluated as if ``r`` were mapped to it after the rows matched so far)."""
        for g in guard:
            if self._accepts(st, g, r, local, dependent, flags, False):
                st.rows.pop()
                st.labels.pop()
                flags.pop()
                st.epoch += 1
                return True
        return False

    def _trailing_ok(self, st: MatchState, guard: tuple[int, ...], start: int, pos: int,
                     hi: int, local: list[np.ndarray | None], dependent: list[Fn | None],
                     flags: list[bool]) -> bool:
        """Trailing negation ``... NOT v``: no row after the match and inside the WITHIN
        window (measured from the match's first row) satisfies ``v``. The window has
        passed when a later row lies beyond it, or at the end of the input."""
        window = self.window
        assert window is not None  # checked when the query is compiled
        order = window.order
        t0 = order[start]
        sign = -1 if window.descending else 1
        r = pos
        while r < hi:
            t = order[r]
            if t0 is None or (t is not None and sign * (t - t0) > window.limit):
                return True
            if t is not None and self._negated(st, guard, r, local, dependent, flags):
                return False
            r += 1
        if self.open:
            self._touch(start, hi)
        return True

    def _memo_start(self, start: int, lo: int, hi: int) -> bytearray | set[Any]:
        """The remembered states for an attempt from ``start`` in rows ``lo..hi-1``."""
        key = (lo, hi, self.begin, self.open)
        seen = self._seen
        if seen is None or self._seen_for != key:
            size = len(self.program.code) * (hi - lo + 1)
            seen = bytearray(size) if self._plain and size <= _MEMO_BYTES else set()
            self._seen, self._seen_for = seen, key
            self._seen_from = self._seen_top = -1
        elif isinstance(seen, set) and len(seen) > _MEMO_SET:
            seen.clear()
        if isinstance(seen, bytearray) and self._seen_from < 0:
            self._seen_from = start
        return seen

    def _memo_end(self, top: int, forget: bool) -> None:
        """After an attempt: forget its states if it matched (they were not all failures)
        or if they depended on its start row (``forget``)."""
        seen = self._seen
        if isinstance(seen, bytearray):
            self._seen_top = max(self._seen_top, top)
            if forget:
                lo = self._seen_for[0]
                ncode = len(self.program.code)
                a = (self._seen_from - lo) * ncode
                b = (self._seen_top - lo + 1) * ncode
                seen[a:b] = bytes(b - a)
                self._seen_from = self._seen_top = -1
        elif forget and seen is not None:
            seen.clear()

    def _too_many_backtracks(self, start: int) -> None:
        text, pos = self.blame
        part = f" in {text}" if text else ""
        raise QueryError(
            f"pattern matching backtracked too often{part} "
            f"from one start row (row {start} of the sorted input); the pattern can match "
            "the same rows in too many ways -- rewrite it without nested quantifiers, or "
            "make the DEFINE conditions depend only on the current row so that failed "
            "states can be remembered", *pos)

    def _record_timeout(self, rows: list[int], labels: list[int], flags: list[bool]) -> None:
        best = self.timeout
        if best is None or len(rows) > len(best[0]):
            self.timeout = (rows.copy(), labels.copy(), flags.copy())

    def _touch(self, start: int, hi: int) -> None:
        """The attempt from ``start`` wanted a row past ``hi``: its outcome is not final,
        unless the WITHIN window from ``start`` has already passed (later rows could not
        join the match anyway)."""
        window = self.window
        if window is not None and hi > 0:
            t0, last = window.order[start], window.order[hi - 1]
            sign = -1 if window.descending else 1
            if t0 is not None and last is not None and sign * (last - t0) > window.limit:
                return
        self.touched_end = True


def position_only(defines: Sequence[ast.Define]) -> bool:
    """True if every DEFINE condition depends only on the row being mapped and its physical
    neighbours (``PREV``/``NEXT`` of the current row), not on the rest of the match: no
    aggregates, ``FIRST``/``LAST``, ``CLASSIFIER``, ``MATCH_NUMBER`` or references to
    other variables. The matcher may then memoise failed states (``Matcher(memo=True)``)."""
    for d in defines:
        for node in walk(d.condition):
            if isinstance(node, ast.Star):
                return False
            if isinstance(node, ast.Column) and node.var not in (None, d.var):
                return False
            if isinstance(node, ast.Call) and (node.name in AGGREGATES or node.name in SPECIAL
                                               or node.name in ("FIRST", "LAST")):
                return False
    return True
