"""Matching a characteristic sequence: the span of the pattern for given times, the
order and window test, the occurrence constraints, and the candidate sequences of a
partition (with interval-bound pruning)."""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Mapping, Sequence
from typing import Any

from .data import Event, Partition
from .plan import Filling, Tree, UncertainPlan, tree_variables


def span(t: Tree, times: Mapping[str, Any]) -> tuple[Any, Any] | None:
    """The (first, last) span of pattern ``t`` for the events' ``times`` (variable -> time),
    or None if it does not match. OR takes its filled branch (exactly one is filled)."""
    op = t[0]
    if op == "LEAF":
        time = times[t[1]]
        return time, time
    if op == "OR":
        for item in t[1]:
            if tree_variables(item) & times.keys():
                return span(item, times)
        return None
    spans = []
    for item in t[1]:
        s = span(item, times)
        if s is None:
            return None
        spans.append(s)
    if op == "SEQ":
        for a, b in itertools.pairwise(spans):
            if not a[1] < b[0]:
                return None
        return spans[0][0], spans[-1][1]
    return min(s[0] for s in spans), max(s[1] for s in spans)


def satisfies(times: Mapping[str, Any], f: Filling, window: Any | None) -> bool:
    """The same test as :func:`span` for a filling: the strict order and the window."""
    for u, v in f.before:
        if not times[u] < times[v]:
            return False
    if window is not None:
        values = times.values()
        if max(values) - min(values) > window:
            return False
    return True


def _valid(plan: UncertainPlan, events: Sequence[Event]) -> bool:
    """The occurrence constraints: EXCLUSIVE and REQUIRE over the sequence's events."""
    def contains(cls: str) -> bool:
        return any(cls in e.classes for e in events)

    for x, y in plan.exclusive:
        if contains(x) and contains(y):
            return False
    return all(not contains(x) or contains(y) for x, y in plan.require)


def candidates(plan: UncertainPlan, part: Partition, f: Filling,
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

