"""Incremental window aggregates with explicit state (docs/windows.md).

Every aggregate has ``insert(x)``, ``delete(x)``, ``replace(old, new)``, ``value()``,
``reset()``, ``to_state()`` / ``from_state()`` and ``ops`` (elementary state updates so
far). ``None`` and NaN are NULL and ignored; ``+-inf`` raises ``ValueError``.

>>> s = Sum(); s.insert(0.1); s.insert(0.2); s.insert(None); s.value()
0.30000000000000004
>>> s.delete(0.1); s.value()
0.2
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from typing import Any, ClassVar

Value = float | None

SHIFT = 1074
"""Every finite double is an integer multiple of 2**-SHIFT."""


def clean(x: float | int | None) -> float | None:
    """The aggregate value of ``x``: None for NULL / NaN, ValueError for an infinity.

    >>> clean(None), clean(float("nan")), clean(2)
    (None, None, 2.0)
    """
    if x is None:
        return None
    v = float(x)
    if v != v:
        return None
    if v in (math.inf, -math.inf):
        raise ValueError(f"window aggregates take finite values or NULL, got {v}")
    return v


def fixed(x: float) -> int:
    """``x * 2**SHIFT`` as an exact integer.

    >>> fixed(1.0) == 1 << SHIFT, fixed(-0.5) == -(1 << (SHIFT - 1))
    (True, True)
    """
    num, den = x.as_integer_ratio()
    return num << (SHIFT - (den.bit_length() - 1))


def _divide(num: int, den: int) -> float:
    """Correctly rounded num / den, +-inf beyond the float range."""
    try:
        return num / den
    except OverflowError:
        return math.inf if (num > 0) == (den > 0) else -math.inf


class Aggregate:
    """Base class: an incremental aggregate over a multiset of values."""

    name: ClassVar[str] = ""

    def __init__(self) -> None:
        self.ops = 0

    def insert(self, x: float | None) -> None:
        raise NotImplementedError

    def delete(self, x: float | None) -> None:
        raise NotImplementedError

    def replace(self, old: float | None, new: float | None) -> None:
        """Delete ``old`` and insert ``new`` (counted as one update when both are values)."""
        self.delete(old)
        self.insert(new)

    def value(self) -> Value:
        raise NotImplementedError

    def reset(self) -> None:
        raise NotImplementedError

    def to_state(self) -> dict[str, Any]:
        return {k: v for k, v in vars(self).items()}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> Aggregate:
        agg = cls()
        for k, v in state.items():
            setattr(agg, k, v)
        return agg


class Count(Aggregate):
    """Number of non-NULL values.

    >>> c = Count(); c.insert(1.0); c.insert(None); c.insert(float("nan")); c.value()
    1.0
    >>> c.delete(1.0); c.value(), c.ops
    (0.0, 2)
    """

    name = "count"

    def __init__(self) -> None:
        super().__init__()
        self.n = 0

    def insert(self, x: float | None) -> None:
        if clean(x) is not None:
            self.n += 1
            self.ops += 1

    def delete(self, x: float | None) -> None:
        if clean(x) is not None:
            self.n -= 1
            self.ops += 1

    def value(self) -> Value:
        return float(self.n)

    def reset(self) -> None:
        self.n = 0


class Sum(Aggregate):
    """Exact sum (integer accumulator in units of 2**-1074), NULL when there is no value.

    >>> s = Sum()
    >>> for x in (1e16, 1.0, -1e16): s.insert(x)
    >>> s.value()
    1.0
    >>> s.replace(1.0, 2.5); s.value(), s.ops
    (2.5, 4)
    """

    name = "sum"

    def __init__(self) -> None:
        super().__init__()
        self.n = 0
        self.s1 = 0

    def insert(self, x: float | None) -> None:
        v = clean(x)
        if v is not None:
            self.n += 1
            self.s1 += fixed(v)
            self.ops += 1

    def delete(self, x: float | None) -> None:
        v = clean(x)
        if v is not None:
            self.n -= 1
            self.s1 -= fixed(v)
            self.ops += 1

    def replace(self, old: float | None, new: float | None) -> None:
        o, w = clean(old), clean(new)
        if o is None or w is None:
            self.delete(o)
            self.insert(w)
        else:
            self.s1 += fixed(w) - fixed(o)
            self.ops += 1

    def value(self) -> Value:
        return _divide(self.s1, 1 << SHIFT) if self.n else None

    def reset(self) -> None:
        self.n = 0
        self.s1 = 0


class Avg(Sum):
    """Exact mean, correctly rounded.

    >>> a = Avg(); a.insert(1.0); a.insert(2.0); a.insert(4.0); a.value()
    2.3333333333333335
    >>> a.delete(4.0); a.value()
    1.5
    """

    name = "avg"

    def value(self) -> Value:
        return _divide(self.s1, self.n << SHIFT) if self.n else None


class Var(Aggregate):
    """Sample variance (n - 1) from exact sums of x and x**2, correctly rounded.

    >>> v = Var(); v.insert(1e9 + 1); v.insert(1e9 + 2); v.insert(1e9 + 3); v.value()
    1.0
    >>> v.delete(1e9 + 2); v.value()
    2.0
    >>> v.delete(1e9 + 1); v.value() is None
    True
    """

    name = "var"

    def __init__(self) -> None:
        super().__init__()
        self.n = 0
        self.s1 = 0
        self.s2 = 0

    def insert(self, x: float | None) -> None:
        v = clean(x)
        if v is not None:
            f = fixed(v)
            self.n += 1
            self.s1 += f
            self.s2 += f * f
            self.ops += 1

    def delete(self, x: float | None) -> None:
        v = clean(x)
        if v is not None:
            f = fixed(v)
            self.n -= 1
            self.s1 -= f
            self.s2 -= f * f
            self.ops += 1

    def replace(self, old: float | None, new: float | None) -> None:
        o, w = clean(old), clean(new)
        if o is None or w is None:
            self.delete(o)
            self.insert(w)
        else:
            fo, fw = fixed(o), fixed(w)
            self.s1 += fw - fo
            self.s2 += fw * fw - fo * fo
            self.ops += 1

    def value(self) -> Value:
        n = self.n
        if n < 2:
            return None
        return _divide(n * self.s2 - self.s1 * self.s1, (n * (n - 1)) << (2 * SHIFT))

    def reset(self) -> None:
        self.n = 0
        self.s1 = 0
        self.s2 = 0


class Min(Aggregate):
    """Minimum under arbitrary inserts and deletes: a heap with lazy deletion.

    ``heap`` holds every inserted value not yet popped, ``pending`` the deleted values
    still in the heap (as ``[value, count]`` pairs), ``size`` the live values. ``ops``
    counts pushes, pops and delete marks; the heap is rebuilt (``size`` ops) when more than
    half of it is dead.

    >>> m = Min()
    >>> for x in (5.0, 3.0, 3.0, 9.0): m.insert(x)
    >>> m.delete(3.0); m.value()
    3.0
    >>> m.delete(3.0); m.value()
    5.0
    >>> m.delete(5.0); m.delete(9.0); m.value() is None
    True
    """

    name = "min"
    sign: ClassVar[float] = 1.0

    def __init__(self) -> None:
        super().__init__()
        self.heap: list[float] = []
        self.pending: dict[float, int] = {}
        self.size = 0

    def insert(self, x: float | None) -> None:
        v = clean(x)
        if v is not None:
            heapq.heappush(self.heap, self.sign * v)
            self.size += 1
            self.ops += 1

    def delete(self, x: float | None) -> None:
        v = clean(x)
        if v is None:
            return
        k = self.sign * v
        self.pending[k] = self.pending.get(k, 0) + 1
        self.size -= 1
        self.ops += 1
        if len(self.heap) > 2 * self.size + 16:
            self._compact()

    def _compact(self) -> None:
        live: list[float] = []
        for k in self.heap:
            c = self.pending.get(k, 0)
            if c:
                self.pending[k] = c - 1
            else:
                live.append(k)
        heapq.heapify(live)
        self.heap = live
        self.pending = {}
        self.ops += len(live)

    def value(self) -> Value:
        heap, pending = self.heap, self.pending
        while heap:
            top = heap[0]
            c = pending.get(top, 0)
            if not c:
                return self.sign * top
            heapq.heappop(heap)
            self.ops += 1
            if c == 1:
                del pending[top]
            else:
                pending[top] = c - 1
        return None

    def reset(self) -> None:
        self.heap = []
        self.pending = {}
        self.size = 0

    def to_state(self) -> dict[str, Any]:
        return {"ops": self.ops, "heap": list(self.heap), "size": self.size,
                "pending": [[k, c] for k, c in self.pending.items()]}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> Aggregate:
        agg = cls()
        agg.ops = state["ops"]
        agg.heap = [float(k) for k in state["heap"]]
        agg.size = state["size"]
        agg.pending = {float(k): c for k, c in state["pending"]}
        return agg


class Max(Min):
    """Maximum under arbitrary inserts and deletes (a min-heap of negated values).

    >>> m = Max(); m.insert(1.0); m.insert(7.0); m.delete(7.0); m.value()
    1.0
    """

    name = "max"
    sign = -1.0


class MonotoneMin(Aggregate):
    """Minimum of a FIFO window: the monotone deque of ascending minima.

    Valid only when inserts come at the newest end and ``delete`` removes the oldest
    value. ``ops`` counts appends and pops (amortised O(1) per value).

    >>> m = MonotoneMin()
    >>> for x in (4.0, 2.0, 3.0, 1.0, 5.0): m.insert(x)
    >>> m.value(), list(m.dq)
    (1.0, [1.0, 5.0])
    >>> for x in (4.0, 2.0, 3.0, 1.0): m.delete(x)
    >>> m.value()
    5.0
    """

    name = "min"
    sign: ClassVar[float] = 1.0

    def __init__(self) -> None:
        super().__init__()
        self.dq: deque[float] = deque()

    def insert(self, x: float | None) -> None:
        v = clean(x)
        if v is None:
            return
        k = self.sign * v
        dq = self.dq
        while dq and dq[-1] > k:
            dq.pop()
            self.ops += 1
        dq.append(k)
        self.ops += 1

    def delete(self, x: float | None) -> None:
        v = clean(x)
        if v is None:
            return
        self.ops += 1
        if self.dq and self.dq[0] == self.sign * v:
            self.dq.popleft()

    def replace(self, old: float | None, new: float | None) -> None:
        raise ValueError("a monotone deque cannot replace a value; rebuild it instead")

    def value(self) -> Value:
        return self.sign * self.dq[0] if self.dq else None

    def reset(self) -> None:
        self.dq = deque()

    def to_state(self) -> dict[str, Any]:
        return {"ops": self.ops, "dq": list(self.dq)}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> Aggregate:
        agg = cls()
        agg.ops = state["ops"]
        agg.dq = deque(float(k) for k in state["dq"])
        return agg


class MonotoneMax(MonotoneMin):
    """Maximum of a FIFO window (monotone deque of descending maxima).

    >>> m = MonotoneMax(); m.insert(1.0); m.insert(3.0); m.insert(2.0); m.delete(1.0)
    >>> m.value()
    3.0
    >>> m.delete(3.0); m.value()
    2.0
    """

    name = "max"
    sign = -1.0


AGGREGATES: dict[str, type[Aggregate]] = {
    "count": Count, "sum": Sum, "avg": Avg, "var": Var, "min": Min, "max": Max}
"""Aggregates for arbitrary insert/delete orders (time and count windows)."""

FIFO_AGGREGATES: dict[str, type[Aggregate]] = {
    **AGGREGATES, "min": MonotoneMin, "max": MonotoneMax}
"""Aggregates for FIFO windows (the sampler); min/max are monotone deques."""

ORDER_SENSITIVE = frozenset({"min", "max"})
"""Aggregates whose FIFO variant must be rebuilt after a non-FIFO change."""


def check_aggregates(names: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """Validate aggregate names (unique, known) and return them as a tuple."""
    out = tuple(names)
    if not out:
        raise ValueError("at least one aggregate is needed")
    for n in out:
        if n not in AGGREGATES:
            raise ValueError(f"unknown window aggregate {n!r}; known: {sorted(AGGREGATES)}")
    if len(set(out)) != len(out):
        raise ValueError(f"duplicate aggregate in {out}")
    return out


def recompute(name: str, values: list[float | None]) -> tuple[Value, int]:
    """Full recomputation of aggregate ``name`` over ``values``: (value, ops).

    >>> recompute("avg", [1.0, None, 2.0])
    (1.5, 2)
    """
    agg = AGGREGATES[name]()
    for x in values:
        agg.insert(x)
    return agg.value(), agg.ops
