"""From an acquisition plan to what is read: the regions of each step over actual event
times, the rows they hold, and the :class:`cep_core.live_archive.Load` requests an executor
issues (keys, time interval, event types), step by step.

For a flat ``And`` / ``Seq`` (primitive sub-events only). Two ways of computing a later
step's region (``docs/acquisition.md``):

* ``basis="read"`` (what an executor does): from the events read in the earlier steps;
* ``basis="all"`` (the cost model's semantics): from every event of the earlier types.

The ``read`` region is contained in the ``all`` region (fewer events, fewer windows), and
both contain every event of every match, so the model's expected rows are an upper bound of
what the executor reads, equal to it for plans with at most two positive steps."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd  # type: ignore[import-untyped, unused-ignore]

from ..live_archive import Load, Plan
from ..runtime.time_axis import time_values
from .model import AcquisitionPlan, And, Event, Floats, Not, PlanningError, Seq

Intervals = list[tuple[float, float]]


def merge(intervals: Sequence[tuple[float, float]]) -> Intervals:
    """Union of closed intervals as sorted, disjoint intervals."""
    out: Intervals = []
    for lo, hi in sorted(intervals):
        if out and lo <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return out


def _balls(times: Floats, lo: float, hi: float, horizon: float) -> Intervals:
    """``merge([e - hi, e - lo] clipped to [0, H] for e in times)``, vectorised."""
    if len(times) == 0:
        return []
    ts = np.sort(times)
    starts = np.maximum(ts - hi, 0.0)
    ends = np.minimum(ts - lo, horizon)
    reach = np.maximum.accumulate(ends)
    new = np.ones(len(ts), dtype=bool)
    new[1:] = starts[1:] > reach[:-1]
    first = np.flatnonzero(new)
    last = np.append(first[1:] - 1, len(ts) - 1)
    return list(zip(starts[first].tolist(), reach[last].tolist(), strict=True))


def intersect(a: Intervals, b: Intervals) -> Intervals:
    """Intersection of two sorted, disjoint lists of closed intervals (a sweep over their
    ends: where both cover a point)."""
    if not a or not b:
        return []
    pos = np.array([x for iv in (a, b) for lo, hi in iv for x in (lo, hi)])
    delta = np.tile([1, -1], len(a) + len(b))
    order = np.lexsort((-delta, pos))  # at equal times a start before an end (closed)
    depth = np.cumsum(delta[order])
    p = pos[order]
    opens = np.flatnonzero(depth == 2)
    return [(float(p[i]), float(p[i + 1])) for i in opens]


def length(intervals: Intervals) -> float:
    return float(sum(hi - lo for lo, hi in intervals))


def count_in(times: Floats, intervals: Intervals) -> int:
    """Events of ``times`` inside the (closed) intervals, each counted once."""
    if not intervals or len(times) == 0:
        return 0
    ts = np.sort(np.asarray(times, dtype=np.float64))
    los = np.array([lo for lo, _ in intervals])
    his = np.array([hi for _, hi in intervals])
    return int((np.searchsorted(ts, his, "right") - np.searchsorted(ts, los, "left")).sum())


def select(times: Floats, intervals: Intervals) -> Floats:
    ts = np.sort(np.asarray(times, dtype=np.float64))
    keep = np.zeros(len(ts), dtype=bool)
    for lo, hi in intervals:
        keep[np.searchsorted(ts, lo, "left"):np.searchsorted(ts, hi, "right")] = True
    out: Floats = ts[keep]
    return out


@dataclass(frozen=True)
class SubEvent:
    """A sub-event of a flat node: its event type, child position and whether negated."""

    type: str
    position: int
    negated: bool


def sub_events(pattern: And | Seq) -> dict[str, SubEvent]:
    """The sub-events of a flat ``And`` / ``Seq`` by plan label (``"!x"`` when negated)."""
    subs: dict[str, SubEvent] = {}
    for pos, c in enumerate(pattern.children):
        if isinstance(c, Not):
            subs[f"!{c.event.type}"] = SubEvent(c.event.type, pos, True)
        elif isinstance(c, Event):
            subs[c.type] = SubEvent(c.type, pos, False)
        else:
            raise PlanningError(f"{pattern}: loads are for flat patterns (primitive "
                                f"sub-events); {c} is complex")
    return subs


def _window(pattern: And | Seq, earlier: SubEvent, target: SubEvent) -> tuple[float, float]:
    w = pattern.window
    if isinstance(pattern, And):
        return (-w, w)
    return (-w, 0.0) if earlier.position < target.position else (0.0, w)


def region(pattern: And | Seq, target: SubEvent, earlier: Sequence[tuple[SubEvent, Floats]],
           horizon: float) -> Intervals:
    """Times where ``target`` is read: every earlier sub-event has an occurrence in its
    window around the time; an occurrence at ``e`` covers ``[e - hi, e - lo]``."""
    out: Intervals = [(0.0, float(horizon))]
    for sub, times in earlier:
        lo, hi = _window(pattern, sub, target)
        out = intersect(out, _balls(np.asarray(times, dtype=np.float64), lo, hi, horizon))
        if not out:
            break
    return out


@dataclass(frozen=True)
class StepRead:
    """One step for one key: the region read for each type and the rows it holds."""

    regions: dict[str, Intervals]
    rows: dict[str, int]


def acquire(pattern: And | Seq, plan: AcquisitionPlan, events: Mapping[str, Floats],
            horizon: float, basis: str = "read") -> list[StepRead]:
    """Simulate the plan for one key over the event times per type (``events``)."""
    if basis not in ("read", "all"):
        raise PlanningError("basis must be 'read' or 'all'")
    subs = sub_events(pattern)
    known: list[tuple[SubEvent, Floats]] = []
    out: list[StepRead] = []
    for j, step in enumerate(plan.steps):
        regions: dict[str, Intervals] = {}
        rows: dict[str, int] = {}
        for label in step:
            sub = subs.get(label)
            if sub is None:
                raise PlanningError(f"plan step {label!r} is not a sub-event of {pattern}")
            times = np.asarray(events.get(sub.type, np.empty(0)), dtype=np.float64)
            regions[sub.type] = ([(0.0, float(horizon))] if j == 0
                                 else region(pattern, sub, known, horizon))
            rows[sub.type] = count_in(times, regions[sub.type])
        for label in step:
            sub = subs[label]
            if sub.negated:
                continue
            times = np.asarray(events.get(sub.type, np.empty(0)), dtype=np.float64)
            known.append((sub, times if basis == "all" else select(times, regions[sub.type])))
        out.append(StepRead(regions, rows))
    return out


def step_loads(regions: Mapping[Any, Mapping[str, Intervals]], step_index: int,
               key_order: Sequence[Any]) -> tuple[Load, ...]:
    """The :class:`Load` requests of one step from the regions per key and type: types of a
    key with the same region share loads; one load per merged interval (``hi`` is made
    exclusive with ``nextafter`` as ``Load`` ranges are ``[lo, hi)``); ``serves`` holds the
    key's position in ``key_order``."""
    where = {k: n for n, k in enumerate(key_order)}
    loads: list[Load] = []
    for key, per_type in regions.items():
        groups: dict[tuple[tuple[float, float], ...], list[str]] = {}
        for t, iv in per_type.items():
            groups.setdefault(tuple(iv), []).append(t)
        for spans, names in groups.items():
            for lo, hi in spans:
                loads.append(Load((key,), lo, float(np.nextafter(hi, np.inf)), (where[key],),
                                  tuple(sorted(names))))
    if step_index == 0 and loads:  # the first step reads its types for every key at once
        first = tuple(sorted({t for ld in loads for t in ld.event_types or ()}))
        return (Load(None, min(ld.lo for ld in loads), max(ld.hi for ld in loads),
                     tuple(range(len(key_order))), first),)
    return tuple(loads)


def live_plan(pattern: And | Seq, plan: AcquisitionPlan,
              events: Mapping[Any, Mapping[str, Floats]], horizon: float) -> Plan:
    """The whole acquisition as a :class:`cep_core.live_archive.Plan` (strategy
    ``"acquisition"``): step ``j``'s loads come from the events read in steps ``< j`` of each
    key (here simulated from ``events``: key -> type -> times)."""
    keys = list(events)
    per_key = {k: acquire(pattern, plan, events[k], horizon, "read") for k in keys}
    steps = tuple(step_loads({k: per_key[k][j].regions for k in keys}, j, keys)
                  for j in range(len(plan.steps)))
    return Plan("acquisition", f"seed-003 plan {plan}", steps)


def next_steps(pattern: And | Seq, plan: AcquisitionPlan, start: float, end: float,
               key: str, time: str, type_column: str, keys: Sequence[Any] | None = None,
               pad: float = 0.0) -> Callable[[int, pd.DataFrame], tuple[Load, ...]]:
    """What an executor (``cep_core.live_archive.acquire``) asks for at each step of
    ``plan`` over the horizon ``[start, end]`` (in the time column's units): step 1 reads its
    types for ``keys`` (None: every key) over the whole horizon; step ``j`` reads, per key,
    the merged intervals of its region computed from the rows read in steps ``< j``
    (``basis="read"``), widened by ``pad`` on both sides (so rounding of times never drops
    a boundary event; reading a little more is always sound)."""
    subs = sub_events(pattern)
    for labels in plan.steps:
        for label in labels:
            if label not in subs:
                raise PlanningError(f"plan step {label!r} is not a sub-event of {pattern}")
    horizon = float(end - start)

    def loads_of(j: int, read: pd.DataFrame) -> tuple[Load, ...]:
        labels = plan.steps[j]
        if j == 0:
            return (Load(None if keys is None else tuple(keys), float(start),
                         float(np.nextafter(float(end), np.inf)), (),
                         tuple(sorted({subs[x].type for x in labels}))),)
        earlier = [subs[x] for s in plan.steps[:j] for x in s if not subs[x].negated]
        types = {s.type for s in earlier}
        read = read[read[type_column].isin(types)]
        if len(read) == 0:
            return ()
        t = time_values(read[time]).astype(np.float64) - float(start)
        frame = pd.DataFrame({"k": read[key].to_numpy(), "t": t,
                              "type": read[type_column].to_numpy()})
        regions: dict[Any, dict[str, Intervals]] = {}
        for k, part in frame.groupby("k", sort=True):
            by_type = {ty: np.sort(g["t"].to_numpy()) for ty, g in part.groupby("type")}
            if any(s.type not in by_type for s in earlier):
                continue
            known = [(s, by_type[s.type]) for s in earlier]
            per: dict[str, Intervals] = {}
            for x in labels:
                sub = subs[x]
                iv = region(pattern, sub, known, horizon)
                if iv:
                    per[sub.type] = [(lo + start - pad, hi + start + pad)
                                     for lo, hi in merge([(a - pad, b + pad) for a, b in iv])]
            if per:
                regions[k] = per
        return step_loads(regions, j, list(regions))

    return loads_of


def step_types(pattern: And | Seq, plan: AcquisitionPlan) -> tuple[tuple[str, ...], ...]:
    """The event types of each step of ``plan``."""
    subs = sub_events(pattern)
    return tuple(tuple(subs[x].type for x in step) for step in plan.steps)
