"""Time and count windows per key, maintained from delta events (docs/windows.md).

>>> op = WindowOperator(TimeWindows(size=10, slide=5), ("count", "avg"), allowed_lateness=5)
>>> for seq, (t, v) in enumerate([(1, 2.0), (6, 4.0), (12, 6.0)]):
...     _ = op.apply(Insert(Event("s", t, seq, v)))
>>> [(r.window_start, r.aggregate, r.value) for r in op.advance(10)]
[(-5, 'count', 1.0), (-5, 'avg', 2.0), (0, 'count', 2.0), (0, 'avg', 3.0)]
>>> _ = op.apply(Delete(Event("s", 6, 1, 4.0)))   # a correction of window [0, 10)
>>> [(r.window_start, r.aggregate, r.value, r.revision) for r in op.advance(11)]
[(0, 'count', 1.0, 1), (0, 'avg', 2.0, 1)]
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass
from typing import Any

from .aggregates import AGGREGATES, Aggregate, check_aggregates
from .events import (
    Delete,
    Delta,
    Event,
    Insert,
    Key,
    WindowRow,
    WindowStateError,
    delta_key,
    delta_times,
    held_event,
)


@dataclass(frozen=True)
class TimeWindows:
    """Windows ``[offset + k*slide, offset + k*slide + size)``; tumbling when slide == size."""

    size: int
    slide: int
    offset: int = 0

    def __post_init__(self) -> None:
        if self.size <= 0 or self.slide <= 0:
            raise ValueError(f"window size and slide must be > 0, got {self.size}, {self.slide}")

    def starts(self, t: int) -> range:
        """Starts of the windows containing time ``t``.

        >>> list(TimeWindows(10, 5).starts(12))
        [5, 10]
        """
        k_lo = (t - self.offset - self.size) // self.slide + 1
        k_hi = (t - self.offset) // self.slide
        return range(self.offset + k_lo * self.slide, self.offset + (k_hi + 1) * self.slide,
                     self.slide)


@dataclass(frozen=True)
class CountWindows:
    """Windows of ranks ``[k*slide, k*slide + size)`` of the key's events by (time, seq)."""

    size: int
    slide: int

    def __post_init__(self) -> None:
        if self.size <= 0 or self.slide <= 0:
            raise ValueError(f"window size and slide must be > 0, got {self.size}, {self.slide}")
        if self.slide > self.size:
            raise ValueError("count windows need slide <= size (every event in a window)")


class _Win:
    """One window's aggregates and emission bookkeeping."""

    __slots__ = ("aggs", "n", "revision", "dirty", "last")

    def __init__(self, names: tuple[str, ...]) -> None:
        self.aggs: dict[str, Aggregate] = {n: AGGREGATES[n]() for n in names}
        self.n = 0
        self.revision = -1          # -1: never emitted
        self.dirty = False
        self.last: list[Any] | None = None   # [start, end, count, values] last emitted

    def insert(self, v: float | None) -> None:
        for a in self.aggs.values():
            a.insert(v)
        self.n += 1
        self.dirty = True

    def delete(self, v: float | None) -> None:
        for a in self.aggs.values():
            a.delete(v)
        self.n -= 1
        self.dirty = True

    def replace(self, old: float | None, new: float | None) -> None:
        for a in self.aggs.values():
            a.replace(old, new)
        self.dirty = True

    def ops(self) -> int:
        return sum(a.ops for a in self.aggs.values())

    def to_state(self) -> dict[str, Any]:
        return {"aggs": {n: a.to_state() for n, a in self.aggs.items()}, "n": self.n,
                "revision": self.revision, "dirty": self.dirty, "last": self.last}

    @classmethod
    def from_state(cls, names: tuple[str, ...], state: dict[str, Any]) -> _Win:
        w = cls(names)
        w.aggs = {n: AGGREGATES[n].from_state(state["aggs"][n]) for n in names}
        w.n, w.revision, w.dirty, w.last = (state["n"], state["revision"], state["dirty"],
                                            state["last"])
        return w


class _KeyState:
    """Per key: held events and windows (by start for time windows, by k for count)."""

    __slots__ = ("values", "order", "base", "windows")

    def __init__(self) -> None:
        self.values: dict[int, tuple[int, float | None]] = {}   # seq -> (time, value)
        self.order: list[tuple[int, int]] = []   # count windows: (time, seq) sorted
        self.base = 0                            # count windows: rank of order[0]
        self.windows: dict[int, _Win] = {}


class WindowOperator:
    """Time or count windows per key with incremental aggregates.

    ``apply(delta)`` returns False when the delta is too late (dropped whole);
    ``advance(watermark)`` returns the rows of newly closed windows and corrections.
    """

    def __init__(self, windows: TimeWindows | CountWindows,
                 aggregates: tuple[str, ...] | list[str] = ("count", "sum", "avg", "var",
                                                            "min", "max"),
                 allowed_lateness: int = 0) -> None:
        if allowed_lateness < 0:
            raise ValueError("allowed_lateness must be >= 0")
        self.windows = windows
        self.aggregates = check_aggregates(aggregates)
        self.allowed_lateness = allowed_lateness
        self.watermark: int | None = None
        self.dropped = 0
        self.retired_ops = 0
        self.keys: dict[Key, _KeyState] = {}

    # -- bookkeeping ---------------------------------------------------------------------
    @property
    def horizon(self) -> float:
        """Deltas at times below this are too late."""
        return -math.inf if self.watermark is None else self.watermark - self.allowed_lateness

    @property
    def ops(self) -> int:
        """Elementary aggregate updates so far (live and purged windows)."""
        return self.retired_ops + sum(w.ops() for ks in self.keys.values()
                                      for w in ks.windows.values())

    def _win(self, ks: _KeyState, wid: int) -> _Win:
        w = ks.windows.get(wid)
        if w is None:
            w = ks.windows[wid] = _Win(self.aggregates)
        return w

    # -- deltas --------------------------------------------------------------------------
    def apply(self, delta: Delta) -> bool:
        """Apply one delta event; False (and ``dropped`` + 1) when it is too late."""
        if min(delta_times(delta)) < self.horizon:
            self.dropped += 1
            return False
        key = delta_key(delta)
        ks = self.keys.get(key)
        if ks is None:
            ks = self.keys[key] = _KeyState()
        if isinstance(delta, Insert):
            self._check_new(ks, delta.event)
            self._insert(ks, delta.event)
        elif isinstance(delta, Delete):
            self._delete(ks, self._held(ks, delta.event))
        else:
            old = self._held(ks, delta.old)
            if delta.new.seq != old.seq:
                self._check_new(ks, delta.new)
            if isinstance(self.windows, TimeWindows):
                self._replace_time(ks, old, delta.new)
            else:
                self._delete(ks, old)
                self._insert(ks, delta.new)
        return True

    @staticmethod
    def _check_new(ks: _KeyState, e: Event) -> None:
        if e.seq in ks.values:
            raise WindowStateError(f"insert of key {e.key!r} seq {e.seq}: already held")

    @staticmethod
    def _held(ks: _KeyState, e: Event) -> Event:
        return held_event(ks.values, e)

    def _insert(self, ks: _KeyState, e: Event) -> None:
        ks.values[e.seq] = (e.time, e.value)
        if isinstance(self.windows, TimeWindows):
            for s in self.windows.starts(e.time):
                self._win(ks, s).insert(e.value)
            return
        order = ks.order
        i = bisect.bisect_left(order, (e.time, e.seq))
        order.insert(i, (e.time, e.seq))
        size, slide, base = self.windows.size, self.windows.slide, ks.base
        n = len(order)
        k = max(base // slide, (i + base - size) // slide + 1)
        while k * slide - base < n:
            a = k * slide - base
            b = a + size
            w = self._win(ks, k)
            w.insert(e.value if a <= i else ks.values[order[a][1]][1])
            if b < n:
                w.delete(ks.values[order[b][1]][1])
            k += 1

    def _delete(self, ks: _KeyState, e: Event) -> None:
        del ks.values[e.seq]
        if isinstance(self.windows, TimeWindows):
            for s in self.windows.starts(e.time):
                w = ks.windows[s]
                w.delete(e.value)
                self._forget_if_empty(ks, s, w)
            return
        order = ks.order
        i = bisect.bisect_left(order, (e.time, e.seq))
        old_n = len(order)
        size, slide, base = self.windows.size, self.windows.slide, ks.base
        k = max(base // slide, (i + base - size) // slide + 1)
        while k * slide - base < old_n:
            a = k * slide - base
            b = a + size
            w = ks.windows[k]
            w.delete(e.value if a <= i else ks.values[order[a][1]][1])
            if b < old_n:
                w.insert(ks.values[order[b][1]][1])
            self._forget_if_empty(ks, k, w)
            k += 1
        del order[i]

    def _replace_time(self, ks: _KeyState, old: Event, new: Event) -> None:
        assert isinstance(self.windows, TimeWindows)
        del ks.values[old.seq]
        ks.values[new.seq] = (new.time, new.value)
        olds, news = set(self.windows.starts(old.time)), set(self.windows.starts(new.time))
        for s in sorted(olds | news):
            if s in olds and s in news:
                ks.windows[s].replace(old.value, new.value)
            elif s in news:
                self._win(ks, s).insert(new.value)
            else:
                w = ks.windows[s]
                w.delete(old.value)
                self._forget_if_empty(ks, s, w)

    def _forget_if_empty(self, ks: _KeyState, wid: int, w: _Win) -> None:
        if w.n == 0 and w.revision < 0:
            self.retired_ops += w.ops()
            del ks.windows[wid]

    # -- emission ------------------------------------------------------------------------
    def _bounds(self, ks: _KeyState, wid: int, w: _Win) -> tuple[int, int, int] | None:
        """(start, end, window_id) of an existing, complete window; None otherwise."""
        if isinstance(self.windows, TimeWindows):
            return (wid, wid + self.windows.size, wid) if w.n else None
        a = wid * self.windows.slide - ks.base
        b = a + self.windows.size
        if w.n < self.windows.size or b > len(ks.order):
            return None
        return ks.order[a][0], ks.order[b - 1][0] + 1, wid * self.windows.slide

    def _closed(self, bounds: tuple[int, int, int], watermark: int) -> bool:
        if isinstance(self.windows, TimeWindows):
            return bounds[1] <= watermark
        return bounds[1] - 1 < watermark

    def advance(self, watermark: int) -> list[WindowRow]:
        """Move the watermark; rows of newly closed windows and of corrections, in order."""
        if self.watermark is not None and watermark < self.watermark:
            watermark = self.watermark     # watermarks are monotone: a smaller one is ignored
        self.watermark = watermark
        rows: list[WindowRow] = []
        for key, ks in self.keys.items():
            for wid in sorted(ks.windows):
                w = ks.windows[wid]
                if w.revision >= 0 and not w.dirty:
                    continue
                bounds = self._bounds(ks, wid, w)
                if bounds is not None and not self._closed(bounds, watermark):
                    continue
                if bounds is None and w.revision < 0:
                    continue
                if bounds is None:   # emptied / incomplete after emission: retraction
                    assert w.last is not None
                    current = [w.last[0], w.last[1], 0, [0.0 if n == "count" else None
                                                         for n in self.aggregates]]
                    wid_out = w.last[2]
                else:
                    current = [bounds[0], bounds[1], w.n,
                               [w.aggs[n].value() for n in self.aggregates]]
                    wid_out = bounds[2]
                w.dirty = False
                if w.last is not None and current == [w.last[0], w.last[1], w.last[3],
                                                      w.last[4]]:
                    continue
                w.revision += 1
                w.last = [current[0], current[1], wid_out, current[2], current[3]]
                rows.extend(WindowRow(key, current[0], current[1], wid_out, n, v, current[2],
                                      watermark, w.revision)
                            for n, v in zip(self.aggregates, current[3], strict=True))
        self._purge()
        return rows

    def _purge(self) -> None:
        h = self.horizon
        for key in list(self.keys):
            ks = self.keys[key]
            if isinstance(self.windows, TimeWindows):
                size = self.windows.size
                for wid in [s for s in ks.windows if s + size <= h]:
                    self.retired_ops += ks.windows.pop(wid).ops()
                for seq in [s for s, (t, _) in ks.values.items() if t < h]:
                    del ks.values[seq]
            else:
                slide, size = self.windows.slide, self.windows.size
                k = ks.base // slide
                while True:
                    a = k * slide - ks.base
                    b = a + size
                    if b > len(ks.order) or ks.order[b - 1][0] >= h:
                        break
                    w = ks.windows.pop(k, None)
                    if w is not None:
                        self.retired_ops += w.ops()
                    k += 1
                drop = k * slide - ks.base
                if drop > 0:
                    for _, seq in ks.order[:drop]:
                        del ks.values[seq]
                    del ks.order[:drop]
                    ks.base += drop
                for wid in [j for j in ks.windows if j < k]:
                    self.retired_ops += ks.windows.pop(wid).ops()
            if not ks.values and not ks.windows and not ks.base:
                del self.keys[key]   # (count windows keep a purged key's rank offset)

    # -- inspection and state ------------------------------------------------------------
    def current(self) -> list[WindowRow]:
        """Every existing (complete) window's current aggregates, emitted or not."""
        rows: list[WindowRow] = []
        at = self.watermark if self.watermark is not None else 0
        for key, ks in self.keys.items():
            for wid in sorted(ks.windows):
                w = ks.windows[wid]
                bounds = self._bounds(ks, wid, w)
                if bounds is None:
                    continue
                rows.extend(WindowRow(key, bounds[0], bounds[1], bounds[2], n,
                                      w.aggs[n].value(), w.n, at, w.revision)
                            for n in self.aggregates)
        return rows

    def to_state(self) -> dict[str, Any]:
        """The whole operator as plain JSON-safe data."""
        spec: dict[str, Any] = {"kind": "time" if isinstance(self.windows, TimeWindows)
                                else "count", **vars(self.windows)}
        return {
            "windows": spec, "aggregates": list(self.aggregates),
            "allowed_lateness": self.allowed_lateness, "watermark": self.watermark,
            "dropped": self.dropped, "retired_ops": self.retired_ops,
            "keys": [[key, {"values": [[s, t, v] for s, (t, v) in ks.values.items()],
                            "order": [list(p) for p in ks.order], "base": ks.base,
                            "windows": [[wid, w.to_state()] for wid, w in ks.windows.items()]}]
                     for key, ks in self.keys.items()],
        }

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> WindowOperator:
        spec = dict(state["windows"])
        kind = spec.pop("kind")
        windows: TimeWindows | CountWindows = (TimeWindows(**spec) if kind == "time"
                                               else CountWindows(**spec))
        op = cls(windows, tuple(state["aggregates"]), state["allowed_lateness"])
        op.watermark, op.dropped, op.retired_ops = (state["watermark"], state["dropped"],
                                                    state["retired_ops"])
        for key, kst in state["keys"]:
            ks = _KeyState()
            ks.values = {s: (t, v) for s, t, v in kst["values"]}
            ks.order = [(t, s) for t, s in kst["order"]]
            ks.base = kst["base"]
            ks.windows = {wid: _Win.from_state(op.aggregates, ws) for wid, ws in kst["windows"]}
            op.keys[key] = ks
        return op
