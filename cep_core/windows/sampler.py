"""The sampled sliding window: aggregates of ``[T - size, T)`` per key at every sample time.

The paper's event window with an entry and an exit pointer: an event costs one insert when
it enters the window and one delete when it leaves (monotone deques for min/max), whatever
the sampling period (docs/windows.md, "Sampling outputs").

>>> s = Sampler(size=10, period=5, aggregates=("count", "avg", "max"))
>>> for seq, (t, v) in enumerate([(1, 2.0), (6, 4.0), (7, None), (12, 6.0)]):
...     _ = s.apply(Insert(Event("s", t, seq, v)))
>>> [(r.emitted_at, r.aggregate, r.value, r.count) for r in s.advance(15)]
... # doctest: +NORMALIZE_WHITESPACE
[(5, 'count', 1.0, 1), (5, 'avg', 2.0, 1), (5, 'max', 2.0, 1),
 (10, 'count', 2.0, 3), (10, 'avg', 3.0, 3), (10, 'max', 4.0, 3),
 (15, 'count', 2.0, 3), (15, 'avg', 5.0, 3), (15, 'max', 6.0, 3)]
"""

from __future__ import annotations

import bisect
from typing import Any

from .aggregates import (
    AGGREGATES,
    FIFO_AGGREGATES,
    ORDER_SENSITIVE,
    Aggregate,
    check_aggregates,
    recompute,
)
from .events import (
    Delete,
    Delta,
    Event,
    Insert,
    Key,
    WindowRow,
    WindowStateError,
    delta_key,
    held_event,
)


class _SKey:
    """Per key: events from the window start on, ``order[:hi]`` is the window; with
    allowed lateness also ``past``, the events before the window that a correction may
    still need, and the revision of every corrected sample time."""

    __slots__ = ("order", "values", "hi", "aggs", "reported", "heap", "past", "revisions")

    def __init__(self, names: tuple[str, ...]) -> None:
        self.order: list[tuple[int, int]] = []                  # (time, seq), sorted
        self.past: list[tuple[int, int]] = []                   # (time, seq), sorted
        self.revisions: dict[int, int] = {}                     # sample time -> revision
        self.values: dict[int, tuple[int, float | None]] = {}   # seq -> (time, value)
        self.hi = 0
        self.aggs: dict[str, Aggregate] = {n: FIFO_AGGREGATES[n]() for n in names}
        self.reported = False
        self.heap = False     # min/max as lazy heaps (after an out-of-order change)

    def ops(self) -> int:
        return sum(a.ops for a in self.aggs.values())

    def idle(self) -> bool:
        """Nothing held and nothing owed: the key can be forgotten."""
        return not (self.order or self.past or self.reported or self.revisions)


class Sampler:
    """Per key, the aggregates of ``[T - size, T)`` at ``T = offset + k * period``."""

    def __init__(self, size: int, period: int,
                 aggregates: tuple[str, ...] | list[str] = ("count", "sum", "avg", "var",
                                                            "min", "max"),
                 offset: int = 0, allowed_lateness: int = 0) -> None:
        if size <= 0 or period <= 0:
            raise ValueError(f"sampler size and period must be > 0, got {size}, {period}")
        if allowed_lateness < 0:
            raise ValueError("allowed_lateness must be >= 0")
        self.size = size
        self.period = period
        self.offset = offset
        self.allowed_lateness = allowed_lateness
        self.aggregates = check_aggregates(aggregates)
        self.sample_time: int | None = None    # the last sample time
        self.watermark: int | None = None
        self.ignored = 0
        self.corrections = 0                   # samples written again (revision > 0)
        #: per key, the times of the late deltas since the last advance (and whether one
        #: removed an event): the samples they change are written again at the next advance
        self.dirty: dict[Key, tuple[list[int], bool]] = {}
        self.rebuilds = 0
        self.retired_ops = 0
        self.keys: dict[Key, _SKey] = {}

    @property
    def ops(self) -> int:
        """Elementary aggregate updates so far."""
        return self.retired_ops + sum(k.ops() for k in self.keys.values())

    def _correctable(self, t: int) -> bool:
        """True when a delta at ``t`` corrects the samples already written (``t`` at or
        after the watermark minus the allowed lateness)."""
        return (self.allowed_lateness > 0 and self.watermark is not None
                and t >= self.watermark - self.allowed_lateness)

    def _before(self, t: int) -> bool:
        """True when ``t`` is before the current window (no future sample contains it)."""
        return self.sample_time is not None and t < self.sample_time - self.size

    def _old(self, t: int) -> bool:
        """True when a delta at ``t`` is too late: before every future sample window and
        not correctable."""
        return self._before(t) and not self._correctable(t)

    def _in_window(self, t: int) -> bool:
        return self.sample_time is not None and t < self.sample_time

    # -- deltas --------------------------------------------------------------------------
    def apply(self, delta: Delta) -> bool:
        """Apply one delta event; False (and ``ignored`` + 1) when it is too late."""
        if isinstance(delta, Insert):
            old, new = None, delta.event
        elif isinstance(delta, Delete):
            old, new = delta.event, None
        else:
            old, new = delta.old, delta.new
        if old is not None and self._old(old.time):
            old = None
        if new is not None and self._old(new.time):
            new = None
        if old is None and new is None:
            self.ignored += 1
            return False
        key = delta_key(delta)
        ks = self.keys.get(key)
        if ks is None:
            ks = self.keys[key] = _SKey(self.aggregates)
        late = [e.time for e in (old, new) if e is not None and self._correctable(e.time)]
        if late:
            times, removed = self.dirty.get(key, ([], False))
            self.dirty[key] = (times + late, removed or (old is not None
                                                         and self._correctable(old.time)))
        if old is not None and self._before(old.time):   # a correctable event of ``past``
            gone = self._held(ks, old)
            ks.past.remove((gone.time, gone.seq))
            del ks.values[gone.seq]
            old = None
        past_new = None          # inserted into ``past`` once ``old`` has left
        if new is not None and self._before(new.time):
            past_new, new = new, None
        rebuild = False    # a non-FIFO change hit the monotone deques: switch to heaps
        exact = ks.heap    # order-sensitive aggregates take any change
        held = self._held(ks, old) if old is not None else None
        if new is not None and new.seq in ks.values and (held is None or held.seq != new.seq):
            raise WindowStateError(f"insert of key {new.key!r} seq {new.seq}: already held")
        both = (held is not None and new is not None and self._in_window(held.time)
                and self._in_window(new.time))
        if both:
            assert held is not None and new is not None
            for n, a in ks.aggs.items():
                if exact or n not in ORDER_SENSITIVE:
                    a.replace(held.value, new.value)
            rebuild = not exact
        if held is not None:
            i = bisect.bisect_left(ks.order, (held.time, held.seq))
            if i < ks.hi:
                fifo = i == 0
                if not both:
                    for n, a in ks.aggs.items():
                        if exact or fifo or n not in ORDER_SENSITIVE:
                            a.delete(held.value)
                rebuild = rebuild or not (fifo or exact)
                ks.hi -= 1
            del ks.order[i]
            del ks.values[held.seq]
        if new is not None:
            i = bisect.bisect_left(ks.order, (new.time, new.seq))
            ks.order.insert(i, (new.time, new.seq))
            ks.values[new.seq] = (new.time, new.value)
            if self._in_window(new.time):
                fifo = i == ks.hi
                if not both:
                    for n, a in ks.aggs.items():
                        if exact or fifo or n not in ORDER_SENSITIVE:
                            a.insert(new.value)
                rebuild = rebuild or not (fifo or exact)
                ks.hi += 1
        if rebuild:
            self._to_heaps(ks)
        if past_new is not None:
            if past_new.seq in ks.values:
                raise WindowStateError(f"insert of key {past_new.key!r} seq {past_new.seq}: "
                                       "already held")
            bisect.insort(ks.past, (past_new.time, past_new.seq))
            ks.values[past_new.seq] = (past_new.time, past_new.value)
        if ks.idle() and key not in self.dirty:
            self.retired_ops += ks.ops()
            del self.keys[key]
        return True

    @staticmethod
    def _held(ks: _SKey, e: Event) -> Event:
        return held_event(ks.values, e)

    def _to_heaps(self, ks: _SKey) -> None:
        """After a non-FIFO change (late event inside the window, delete or replace of an
        event that is not the oldest): min/max of this key become lazy heaps, built once
        from the window's events (counted in ``ops``); back to deques when the window is
        empty."""
        self.rebuilds += 1
        ks.heap = True
        window = [ks.values[seq][1] for _, seq in ks.order[:ks.hi]]
        for n in ORDER_SENSITIVE.intersection(ks.aggs):
            a = AGGREGATES[n]()
            a.ops = ks.aggs[n].ops
            for v in window:
                a.insert(v)
            ks.aggs[n] = a

    @staticmethod
    def _to_deques(ks: _SKey) -> None:
        ks.heap = False
        for n in ORDER_SENSITIVE.intersection(ks.aggs):
            a = FIFO_AGGREGATES[n]()
            a.ops = ks.aggs[n].ops
            ks.aggs[n] = a

    # -- sampling ------------------------------------------------------------------------
    def _grid_after(self, t: int) -> int:
        """The first sample time strictly after ``t``."""
        return self.offset + ((t - self.offset) // self.period + 1) * self.period

    def advance(self, watermark: int) -> list[WindowRow]:
        """Write again the samples that late deltas changed (revision + 1), then sample
        every ``T <= watermark`` not yet sampled; their rows, in that order."""
        rows = self._corrections()
        previous = self.watermark
        if previous is not None and watermark <= previous:
            return rows
        self.watermark = watermark
        while True:
            idle = all(ks.hi == 0 and not ks.reported for ks in self.keys.values())
            if idle:   # nothing to report until the earliest held event enters a window
                firsts = [ks.order[0][0] for ks in self.keys.values() if ks.order]
                if not firsts:
                    t_next = watermark + 1
                else:
                    t_next = self._grid_after(min(firsts))
                if self.sample_time is not None:
                    t_next = max(t_next, self.sample_time + self.period)
                if previous is not None:   # a sample time is only taken when first reached
                    t_next = max(t_next, self._grid_after(previous))
                if t_next > watermark:
                    # every sample time <= watermark is empty for every key: passed silently
                    # (also when nothing was ever sampled: whether an event is before
                    # every future window must not depend on which keys share the operator)
                    last = self._grid_after(watermark - self.period)
                    if self.sample_time is None or last > self.sample_time:
                        self.sample_time = last
                    break
            else:
                assert self.sample_time is not None
                t_next = self.sample_time + self.period
            if t_next > watermark:
                break
            self._sample(t_next, rows)
        self._forget_past()
        return rows

    # -- corrections (allowed lateness) --------------------------------------------------
    def _window(self, ks: _SKey, t: int) -> list[float | None]:
        """The values of the key's events in ``[t - size, t)``, in (time, seq) order."""
        out: list[float | None] = []
        for order in (ks.past, ks.order):
            lo = bisect.bisect_left(order, (t - self.size,))
            hi = bisect.bisect_left(order, (t,))
            out.extend(ks.values[seq][1] for _, seq in order[lo:hi])
        return out

    def _corrections(self) -> list[WindowRow]:
        """Rows for the samples already written whose window the late deltas since the last
        advance changed: every sample time ``T`` up to the watermark with ``T - size <= t < T``
        for a late delta at ``t``, and the next one (the window may now have emptied after
        a non-empty one), recomputed from the key's held events. A sample is written when
        its window is non-empty, when the one before it was (its single empty row), or when
        a delta removed an event (a row written before may now be empty)."""
        rows: list[WindowRow] = []
        dirty, self.dirty = self.dirty, {}
        # the last sample time the watermark reached (not ``sample_time``, which the other
        # keys move: a key's rows depend only on its own deltas and the watermarks)
        last = None if self.watermark is None else self._grid_after(self.watermark - self.period)
        for key, (times, removed) in dirty.items():
            ks = self.keys[key]
            due: set[int] = set()
            if last is not None:
                for t in times:
                    T = self._grid_after(t)
                    while T <= min(t + self.size + self.period, last):
                        due.add(T)
                        T += self.period
            for T in sorted(due):
                window = self._window(ks, T)
                if not (window or removed or self._window(ks, T - self.period)):
                    continue
                ks.revisions[T] = revision = ks.revisions.get(T, 0) + 1
                self.corrections += 1
                for name in self.aggregates:
                    value, ops = recompute(name, window)
                    self.retired_ops += ops
                    rows.append(WindowRow(key, T - self.size, T, T - self.size, name, value,
                                          len(window), T, revision))
            if ks.idle():
                self.retired_ops += ks.ops()
                del self.keys[key]
        return rows

    def _forget_past(self) -> None:
        """Drop what no future correction can need: events before ``watermark - allowed
        lateness - size`` and the revisions of sample times at or before ``watermark -
        allowed lateness``."""
        if self.watermark is None or not self.allowed_lateness:
            return
        horizon = self.watermark - self.allowed_lateness
        for key in list(self.keys):
            ks = self.keys[key]
            cut = bisect.bisect_left(ks.past, (horizon - self.size,))
            for _, seq in ks.past[:cut]:
                del ks.values[seq]
            del ks.past[:cut]
            ks.revisions = {T: r for T, r in ks.revisions.items() if T > horizon}
            if ks.idle():
                self.retired_ops += ks.ops()
                del self.keys[key]

    def _sample(self, t: int, rows: list[WindowRow]) -> None:
        self.sample_time = t
        start = t - self.size
        for key in list(self.keys):
            ks = self.keys[key]
            order = ks.order
            lo = bisect.bisect_left(order, (start,))
            hi = bisect.bisect_left(order, (t,))
            for _, seq in order[:min(lo, ks.hi)]:          # leave, oldest first
                v = ks.values[seq][1]
                for a in ks.aggs.values():
                    a.delete(v)
            for _, seq in order[max(ks.hi, lo):hi]:        # enter, in (time, seq) order
                v = ks.values[seq][1]
                for a in ks.aggs.values():
                    a.insert(v)
            if self.allowed_lateness:       # kept for corrections until _forget_past
                ks.past.extend(order[:lo])
            else:
                for _, seq in order[:lo]:
                    del ks.values[seq]
            del order[:lo]
            ks.hi = n = hi - lo
            if n or ks.reported:
                rows.extend(WindowRow(key, start, t, start, name, ks.aggs[name].value(), n, t, 0)
                            for name in self.aggregates)
            ks.reported = n > 0
            if n == 0 and ks.heap:
                self._to_deques(ks)
            if ks.idle():
                self.retired_ops += ks.ops()
                del self.keys[key]

    def current(self) -> dict[Key, tuple[int, dict[str, float | None]]]:
        """Per key: (events in the window, aggregate values) at the last sample time."""
        return {key: (ks.hi, {n: ks.aggs[n].value() for n in self.aggregates})
                for key, ks in self.keys.items()}

    # -- state ---------------------------------------------------------------------------
    def to_state(self) -> dict[str, Any]:
        """The whole sampler as plain JSON-safe data."""
        return {
            "size": self.size, "period": self.period, "offset": self.offset,
            "aggregates": list(self.aggregates), "sample_time": self.sample_time,
            "watermark": self.watermark, "ignored": self.ignored, "rebuilds": self.rebuilds,
            "retired_ops": self.retired_ops, "allowed_lateness": self.allowed_lateness,
            "corrections": self.corrections,
            "dirty": [[key, times, removed] for key, (times, removed) in self.dirty.items()],
            "keys": [[key, {"order": [list(p) for p in ks.order],
                            "past": [list(p) for p in ks.past],
                            "revisions": [[T, r] for T, r in ks.revisions.items()],
                            "values": [[s, t, v] for s, (t, v) in ks.values.items()],
                            "hi": ks.hi, "reported": ks.reported, "heap": ks.heap,
                            "aggs": {n: a.to_state() for n, a in ks.aggs.items()}}]
                     for key, ks in self.keys.items()],
        }

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> Sampler:
        s = cls(state["size"], state["period"], tuple(state["aggregates"]), state["offset"],
                state.get("allowed_lateness", 0))   # states of older releases: no lateness
        s.sample_time, s.watermark, s.ignored, s.rebuilds, s.retired_ops = (
            state["sample_time"], state["watermark"], state["ignored"], state["rebuilds"],
            state["retired_ops"])
        s.corrections = state.get("corrections", 0)
        s.dirty = {key: (times, removed) for key, times, removed in state.get("dirty", [])}
        for key, kst in state["keys"]:
            ks = _SKey(s.aggregates)
            ks.order = [(t, q) for t, q in kst["order"]]
            ks.past = [(t, q) for t, q in kst.get("past", [])]
            ks.revisions = {T: r for T, r in kst.get("revisions", [])}
            ks.values = {q: (t, v) for q, t, v in kst["values"]}
            ks.hi, ks.reported, ks.heap = kst["hi"], kst["reported"], kst["heap"]
            kinds = AGGREGATES if ks.heap else FIFO_AGGREGATES
            ks.aggs = {n: kinds[n].from_state(kst["aggs"][n]) for n in s.aggregates}
            s.keys[key] = ks
        return s
