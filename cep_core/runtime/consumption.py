"""Consumption modes (lakecep extension ``CONSUMPTION ...``; seed 002, Snoop's contexts).

For ``PATTERN (V1 V2 ... Vk)`` (distinct single variables, k >= 2) the pattern is read as
the nested sequence ``((V1 ; V2) ; V3) ... ; Vk``. Stage ``j`` holds the *open instances*:
partial matches that have bound ``V1 .. Vj``. Rows are read in order; each row plays at most
one role, tried from the last variable down to the first:

* as ``V(j+1)`` it *terminates* open instances of stage ``j`` (its DEFINE is evaluated with
  the instance's rows as the match so far); the extended instance moves to stage ``j+1``,
  or is emitted as a match when ``j+1 = k``;
* as ``V1`` it *initiates* a new instance of stage 1.

The mode decides which instances a terminator takes and how a new instance enters a stage:

============  ===========================  ===========================================
mode          terminator takes             entering a stage
============  ===========================  ===========================================
RECENT        the single instance          replaces the instance there
FIRST         the single instance          only if the stage is empty (else the row
                                           does not play this role)
CHRONICLE     the oldest instance whose    appended (queue)
              extension satisfies DEFINE
CUMULATIVE    the single (aggregate)       merged into the aggregate there
              instance
CONTINUOUS    every instance whose         appended; then the terminated stage is
              extension satisfies DEFINE   emptied (everything before is discarded)
============  ===========================  ===========================================

With WITHIN, an instance expires (is discarded) when a row's order value is more than the
window past the instance's first row; a CUMULATIVE stage-1 aggregate instead drops its
expired rows one by one. Rows with a NULL order value are ignored when there is a window.

This is the reference; queries whose DEFINEs the compiled kernel evaluates (row-local
conditions ANDed with aggregate / navigation conditions, :mod:`cep_core.compile.fast_plan`)
run the same semantics compiled (:func:`cep_core.runtime.kernel.consume`).
"""

from __future__ import annotations

from ..compile.state import MatchState
from .matcher import Matcher, RawMatch

Instance = tuple[list[int], list[int]]  # rows (ascending) and their variable indices


def consume(matcher: Matcher, st: MatchState, lo: int, hi: int, mode: str) -> list[RawMatch]:
    """All matches of one partition (rows ``lo..hi-1``) under consumption ``mode``."""
    st.lo, st.hi = lo, hi
    consumer = Consumer(matcher, st, mode)
    out: list[RawMatch] = []
    for r in range(lo, hi):
        out.extend(consumer.step(r))
    return out


class Consumer:
    """The open instances of one partition, advanced one row at a time.

    ``stages[j]`` (``j = 1..k-1``) holds the open instances of stage ``j`` in row
    coordinates of the current :class:`MatchState`; ``emitted`` counts the matches emitted
    so far (the next one gets number ``emitted + 1``). Incremental matching
    (:mod:`cep_core.streaming`) keeps a consumer's state between batches: it saves
    :meth:`snapshot` before a row and restores it if the row's outcome depended on rows
    that have not arrived yet.
    """

    def __init__(self, matcher: Matcher, st: MatchState, mode: str,
                 stages: list[list[Instance]] | None = None, emitted: int = 0):
        self.matcher = matcher
        self.st = st
        self.mode = mode
        self.k = len(matcher.program.variables)
        self.stages: list[list[Instance]] = (
            stages if stages is not None else [[] for _ in range(self.k)])  # stage 0 unused
        self.emitted = emitted

    def snapshot(self) -> tuple[list[list[Instance]], int]:
        """The state as it is now (instances are never modified in place)."""
        return [list(s) for s in self.stages], self.emitted

    def restore(self, saved: tuple[list[list[Instance]], int]) -> None:
        self.stages, self.emitted = [list(s) for s in saved[0]], saved[1]

    def step(self, r: int) -> list[RawMatch]:
        """Process row ``r`` (rows must come in order); return the matches it completes."""
        matcher, st, mode, k = self.matcher, self.st, self.mode, self.k
        local = matcher.conditions.local
        dependent = matcher.conditions.dependent
        window = matcher.window
        stages = self.stages
        out: list[RawMatch] = []
        st.match_number = self.emitted + 1

        def accepts(inst: Instance, v: int, r: int) -> Instance | None:
            st.rows = inst[0].copy()
            st.labels = inst[1].copy()
            st.epoch += 1
            flags = [False] * len(st.rows)
            if not matcher._accepts(st, v, r, local, dependent, flags, False):
                return None
            return st.rows, st.labels

        def deliver(inst: Instance, s: int) -> bool:
            if s == k:
                self.emitted += 1
                number = self.emitted
                out.append(RawMatch(inst[0][0], number, inst[0], inst[1],
                                    [False] * len(inst[0])))
                st.match_number = number + 1
                return True
            stage = stages[s]
            if mode == "RECENT":
                stage[:] = [inst]
            elif mode == "FIRST":
                if stage:
                    return False
                stage.append(inst)
            elif mode == "CUMULATIVE" and stage:
                merged = sorted(zip(stage[0][0] + inst[0], stage[0][1] + inst[1], strict=True))
                stage[0] = ([r for r, _ in merged], [v for _, v in merged])
            else:
                stage.append(inst)
            return True

        sign = -1 if window is not None and window.descending else 1
        if window is not None:
            t = window.order[r]
            if t is None:
                return out
            limit = window.limit
            for j in range(1, k):
                kept: list[Instance] = []
                for inst in stages[j]:
                    if mode == "CUMULATIVE" and j == 1:
                        pairs = [(row, v) for row, v in zip(*inst, strict=True)
                                 if sign * (t - window.order[row]) <= limit]
                        if pairs:
                            kept.append(([p[0] for p in pairs], [p[1] for p in pairs]))
                    elif sign * (t - window.order[inst[0][0]]) <= limit:
                        kept.append(inst)
                stages[j] = kept
        used = False
        for j in range(k - 1, 0, -1):
            stage = stages[j]
            if not stage:
                continue
            if mode == "CHRONICLE":
                for i, inst in enumerate(stage):
                    new = accepts(inst, j, r)
                    if new is not None:
                        del stage[i]
                        deliver(new, j + 1)
                        used = True
                        break
            elif mode == "CONTINUOUS":
                extended = [new for inst in stage if (new := accepts(inst, j, r)) is not None]
                if extended:
                    stages[j] = []
                    for new in extended:
                        deliver(new, j + 1)
                    used = True
            else:
                new = accepts(stage[0], j, r)
                if new is not None and deliver(new, j + 1):
                    del stage[0]
                    used = True
            if used:
                break
        if used:
            return out
        if mode == "FIRST" and stages[1]:
            return out  # later initiators are ignored until the first one is consumed
        base: Instance = stages[1][0] if mode == "CUMULATIVE" and stages[1] else ([], [])
        if accepts(base, 0, r) is not None:
            deliver(([r], [0]), 1)
        return out
