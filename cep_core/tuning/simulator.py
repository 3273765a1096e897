"""Seeded discrete-event simulation of the seed-002 tuning loop (issue 6).

``n`` Poisson streams (rates in events/s) feed one server; an event of stream ``i`` needs
``service[i]`` seconds of the whole server. A scheduler decides what runs:

* :func:`fifo` -- global arrival order (never disorders anything).
* :func:`edf` -- earliest deadline first, deadline = arrival + relative deadline of the
  stream (default ``td`` for every stream, which orders exactly like FIFO -- as the paper
  notes); non-preemptive, a heap of ready events.
* :func:`time_sharing` -- the allocation realised: stream ``i`` owns the share
  ``quotas[i]`` of the server. ``cycle=None`` is the ideal (fluid) slicing the model
  assumes: stream ``i`` behaves as its own processor at ``quotas[i] / service[i]`` events/s,
  unused share is not lent out. ``cycle=T`` is a realisable round robin with per-stream
  budgets (deficit round robin): each round, a backlogged stream's budget grows by
  ``quotas[i]·T`` seconds and it serves queued events, whole, while the budget covers them;
  an empty stream is skipped and its budget reset (work-conserving, non-preemptive).

Every scheduler keeps each stream's own events in arrival order. The simulation advances
from one decision epoch of the server to the next (the server is freed, or an event arrives
at an idle server); FIFO and the ideal slicing are Lindley recursions and are computed in
vectorised form (they agree exactly with the event loop, see the tests).

Complex events ``SEQ(E1, .., En)`` (stream ``i`` carries ``E_{i+1}``) are the matches of
the *arrival-ordered* input under a consumption mode (:func:`complex_events`) -- what an
engine that sees every event in order would output. A match is

* *on time* when its terminator's latency (completion - arrival) is ``<= td``;
* *correct* under the paper's relaxed in-order condition: each sub-event starts processing
  strictly before the next one does, ``start(e_i) < start(e_{i+1})`` -- i.e.
  ``W_i < W_{i+1} + t_i`` with ``t_i`` the arrival gap. With cumulative aggregates, the
  last event of stage ``i`` must start before the first event of stage ``i+1``.

``disorder`` is the share of matches that are not correct.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

MODES = ("recent", "first", "chronicle", "cumulative", "continuous")

FloatArray = np.ndarray[Any, np.dtype[np.float64]]
IntArray = np.ndarray[Any, np.dtype[np.int64]]


@dataclass(frozen=True)
class Scheduler:
    """A scheduling policy; build it with :func:`fifo`, :func:`edf` or
    :func:`time_sharing`."""

    kind: str
    quotas: tuple[float, ...] = ()
    cycle: float | None = None
    deadlines: tuple[float, ...] | None = None


def fifo() -> Scheduler:
    """First come, first served over all streams."""
    return Scheduler("fifo")


def edf(deadlines: Sequence[float] | None = None) -> Scheduler:
    """Earliest deadline first; ``deadlines[i]`` is stream ``i``'s relative deadline in
    seconds (default: the simulation's ``td`` for every stream)."""
    if deadlines is not None and any(not d > 0 for d in deadlines):
        raise ValueError("relative deadlines must be positive")
    return Scheduler("edf", deadlines=None if deadlines is None else tuple(deadlines))


def time_sharing(quotas: Sequence[float], cycle: float | None = None) -> Scheduler:
    """Time-sharing with server shares ``quotas`` (each > 0, sum <= 1); ``cycle`` seconds
    per round-robin round, or ``None`` for the ideal slicing (see the module docstring)."""
    qs = tuple(float(q) for q in quotas)
    if not qs or any(not q > 0 for q in qs) or sum(qs) > 1.0 + 1e-9:
        raise ValueError(f"quotas must be positive and sum to at most 1, got {qs}")
    if cycle is not None and not cycle > 0:
        raise ValueError("cycle must be positive (or None for ideal slicing)")
    return Scheduler("time_sharing", quotas=qs, cycle=cycle)


def quotas_for(mus: Sequence[float], service: Sequence[float]) -> list[float]:
    """Shares that give stream ``i`` the processing rate ``mus[i]`` (events/s) when its
    events take ``service[i]`` seconds of the whole server: ``μ_i · service_i``."""
    return [m * s for m, s in zip(mus, service, strict=True)]


def poisson_arrivals(lams: Sequence[float], horizon: float,
                     seed: int) -> tuple[FloatArray, IntArray]:
    """Merged Poisson arrivals on ``[0, horizon)`` seconds: (times, stream ids), sorted."""
    rng = np.random.default_rng(seed)
    times, ids = [], []
    for i, lam in enumerate(lams):
        if not lam > 0:
            raise ValueError("arrival rates must be positive")
        count = int(rng.poisson(lam * horizon))
        t = np.sort(rng.uniform(0.0, horizon, count))
        times.append(t)
        ids.append(np.full(count, i, dtype=np.int64))
    all_t = np.concatenate(times)
    all_i = np.concatenate(ids)
    order = np.argsort(all_t, kind="stable")
    return all_t[order], all_i[order]


def _lindley(arr: FloatArray, svc: FloatArray) -> FloatArray:
    """Completion times of a FIFO single server: ``end_k = max(arr_k, end_{k-1}) + svc_k``,
    i.e. ``end_k = S_k + max_{j<=k}(arr_j - S_{j-1})`` with ``S`` the service prefix sums."""
    if len(arr) == 0:
        return arr.copy()
    s = np.cumsum(svc)
    prev = np.concatenate(([0.0], s[:-1]))
    return np.asarray(s + np.maximum.accumulate(arr - prev), dtype=np.float64)


def process(times: FloatArray, streams: IntArray, service: Sequence[float],
            scheduler: Scheduler, td: float | None = None,
            engine: str = "auto") -> tuple[FloatArray, FloatArray]:
    """Start and completion time (s) of every event under ``scheduler``. ``engine="loop"``
    forces the event loop also where a vectorised form exists (for checking)."""
    n = int(streams.max()) + 1 if len(streams) else len(service)
    if len(service) < n or any(not s > 0 for s in service):
        raise ValueError("need a positive service time for every stream")
    svc_of = np.asarray(service, dtype=np.float64)
    kind = scheduler.kind
    if kind == "time_sharing" and len(scheduler.quotas) != len(service):
        raise ValueError("one quota per stream is needed")
    if kind == "edf":
        rel = scheduler.deadlines or ((td,) * len(service) if td else None)
        if rel is None or len(rel) != len(service):
            raise ValueError("EDF needs td or one relative deadline per stream")
        return _edf_loop(times, streams, svc_of, np.asarray(rel, dtype=np.float64))
    if kind == "fifo":
        if engine == "loop":
            return _edf_loop(times, streams, svc_of, np.zeros(len(service)))
        svc = svc_of[streams]
        end = _lindley(times, svc)
        return end - svc, end
    if kind == "time_sharing" and scheduler.cycle is None:
        start = np.empty_like(times)
        end = np.empty_like(times)
        for i, q in enumerate(scheduler.quotas):
            idx = np.flatnonzero(streams == i)
            svc = np.full(len(idx), svc_of[i] / q)
            if engine == "loop":
                e = np.empty(len(idx))
                free = 0.0
                for j, a in enumerate(times[idx]):
                    free = max(free, a) + svc[j]
                    e[j] = free
            else:
                e = _lindley(times[idx], svc)
            end[idx] = e
            start[idx] = e - svc
        return start, end
    if kind == "time_sharing":
        assert scheduler.cycle is not None
        return _drr_loop(times, streams, svc_of, np.asarray(scheduler.quotas) * scheduler.cycle)
    raise ValueError(f"unknown scheduler {kind!r}")


def _edf_loop(times: FloatArray, streams: IntArray, svc_of: FloatArray,
              rel: FloatArray) -> tuple[FloatArray, FloatArray]:
    total = len(times)
    start = np.empty(total)
    end = np.empty(total)
    ready: list[tuple[float, int]] = []
    t_list = times.tolist()
    s_list = streams.tolist()
    svc = svc_of.tolist()
    dl = rel.tolist()
    now = 0.0
    nxt = 0
    for _ in range(total):
        if not ready and t_list[nxt] > now:
            now = t_list[nxt]
        while nxt < total and t_list[nxt] <= now:
            heapq.heappush(ready, (t_list[nxt] + dl[s_list[nxt]], nxt))
            nxt += 1
        _, k = heapq.heappop(ready)
        start[k] = now
        now += svc[s_list[k]]
        end[k] = now
    return start, end


def _drr_loop(times: FloatArray, streams: IntArray, svc_of: FloatArray,
              budgets: FloatArray) -> tuple[FloatArray, FloatArray]:
    total = len(times)
    n = len(svc_of)
    start = np.empty(total)
    end = np.empty(total)
    queues: list[deque[int]] = [deque() for _ in range(n)]
    deficit = [0.0] * n
    t_list = times.tolist()
    s_list = streams.tolist()
    svc = svc_of.tolist()
    quantum = budgets.tolist()
    now = 0.0
    nxt = 0
    done = 0
    backlog = 0
    turn = 0
    while done < total:
        while nxt < total and t_list[nxt] <= now:
            queues[s_list[nxt]].append(nxt)
            nxt += 1
            backlog += 1
        if backlog == 0:
            now = t_list[nxt]
            continue
        q = queues[turn]
        if q:
            deficit[turn] += quantum[turn]
            cost = svc[turn]
            while q and deficit[turn] >= cost:
                k = q.popleft()
                backlog -= 1
                deficit[turn] -= cost
                start[k] = now
                now += cost
                end[k] = now
                done += 1
                while nxt < total and t_list[nxt] <= now:
                    queues[s_list[nxt]].append(nxt)
                    nxt += 1
                    backlog += 1
            if not q:
                deficit[turn] = 0.0
        turn = (turn + 1) % n
    return start, end


# --------------------------------------------------------------------------- matches

@dataclass(frozen=True)
class Matches:
    """Complex events: ``first[m, i]`` / ``last[m, i]`` are the indices (into the merged
    arrival arrays) of the first and last event of stage ``i`` of match ``m`` (equal except
    for cumulative aggregates)."""

    first: IntArray
    last: IntArray

    def __len__(self) -> int:
        return len(self.first)


def complex_events(streams: IntArray, n: int, mode: str) -> Matches:
    """Matches of ``SEQ(E1, .., En)`` over the arrival-ordered events (stream ``i`` =
    ``E_{i+1}``; other streams are ignored) under a consumption mode; no window, no
    partitioning; a match consumes its events.

    * recent: stage ``i`` holds the latest partial match ending in ``E_{i+1}``; a new
      ``E_{i+1}`` overwrites it (extending the current stage ``i-1``).
    * first: a stage, once filled, ignores repeats until the match completes.
    * chronicle: every event matches separately, oldest partial match first.
    * cumulative: repeats of a stage accumulate (start = first, end = last) until the next
      stage begins; stragglers of an earlier stage are then ignored.
    * continuous: every ``E1`` opens a match; one ``E_{i+1}`` advances all open matches at
      stage ``i``; the terminator closes all of them and everything before it is dropped.
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    if n < 2:
        raise ValueError("SEQ needs at least two event types")
    out_first: list[list[int]] = []
    out_last: list[list[int]] = []
    s_list = streams.tolist()
    if mode in ("recent", "first"):
        slots: list[list[int] | None] = [None] * n
        for k, s in enumerate(s_list):
            if s >= n:
                continue
            if s == 0:
                if mode == "recent" or slots[0] is None:
                    slots[0] = [k]
                continue
            prev = slots[s - 1]
            if prev is None or (mode == "first" and slots[s] is not None):
                continue
            if s == n - 1:
                out_first.append(prev + [k])
                slots = [None] * n
            else:
                slots[s] = prev + [k]
        first = np.array(out_first, dtype=np.int64).reshape(-1, n)
        return Matches(first, first)
    if mode == "chronicle":
        stages: list[deque[list[int]]] = [deque() for _ in range(n)]
        for k, s in enumerate(s_list):
            if s >= n:
                continue
            if s == 0:
                stages[0].append([k])
            elif stages[s - 1]:
                part = stages[s - 1].popleft() + [k]
                if s == n - 1:
                    out_first.append(part)
                else:
                    stages[s].append(part)
        first = np.array(out_first, dtype=np.int64).reshape(-1, n)
        return Matches(first, first)
    if mode == "cumulative":
        agg: list[list[int]] = [[] for _ in range(n)]  # [first, last] per stage
        for k, s in enumerate(s_list):
            if s >= n or (s + 1 < n and agg[s + 1]):
                continue
            if s > 0 and not agg[s - 1]:
                continue
            if s == n - 1:
                out_first.append([a[0] for a in agg[:-1]] + [k])
                out_last.append([a[1] for a in agg[:-1]] + [k])
                agg = [[] for _ in range(n)]
            elif agg[s]:
                agg[s][1] = k
            else:
                agg[s] = [k, k]
        first = np.array(out_first, dtype=np.int64).reshape(-1, n)
        last = np.array(out_last, dtype=np.int64).reshape(-1, n)
        return Matches(first, last)
    # continuous
    open_: list[list[list[int]]] = [[] for _ in range(n)]
    for k, s in enumerate(s_list):
        if s >= n:
            continue
        if s == 0:
            open_[0].append([k])
        elif open_[s - 1]:
            moved = [p + [k] for p in open_[s - 1]]
            open_[s - 1] = []
            if s == n - 1:
                out_first.extend(moved)
                open_ = [[] for _ in range(n)]
            else:
                open_[s].extend(moved)
    first = np.array(out_first, dtype=np.int64).reshape(-1, n)
    return Matches(first, first)


# --------------------------------------------------------------------------- simulate

@dataclass
class SimulationResult:
    """Measured after the warm-up. Rates are shares in [0, 1], times in seconds."""

    satisfaction: float
    """Share of complex events on time (terminator latency <= td)."""
    disorder: float
    """Share of complex events not correct (relaxed in-order condition violated)."""
    on_time_and_correct: float
    """Share of complex events both on time and correct."""
    mean_latency: float
    """Mean latency of the terminator's complex events."""
    matches: int
    stream_satisfaction: list[float]
    """Per stream: share of its events with latency <= td."""
    stream_mean_latency: list[float]
    stream_mean_wait: list[float]
    pair_disorder: list[float]
    """Per adjacent pair (i, i+1): share of matches with ``start(e_i) >= start(e_{i+1})``."""
    mean_gaps: list[float]
    """Per adjacent pair: mean arrival gap (s) inside matches."""
    events: int
    extra: dict[str, Any] = field(default_factory=dict)


def simulate(lams: Sequence[float], service: Sequence[float], scheduler: Scheduler,
             td: float, horizon: float, seed: int = 0, mode: str = "first",
             n: int | None = None, warmup: float = 0.05,
             keep_gaps: bool = False) -> SimulationResult:
    """Simulate ``horizon`` seconds of Poisson streams ``lams`` (events/s) with per-event
    service times ``service`` (s, on the whole server) under ``scheduler``, and score the
    ``SEQ`` over the first ``n`` streams (default all) under ``mode``. Events and matches
    whose (terminator) arrival falls in the first ``warmup`` share of the horizon are not
    counted. ``keep_gaps`` puts the arrays of arrival gaps per pair into ``extra["gaps"]``."""
    if not td > 0 or not horizon > 0 or not 0 <= warmup < 1:
        raise ValueError("td and horizon must be positive, warmup in [0, 1)")
    if len(service) != len(lams):
        raise ValueError("one service time per stream is needed")
    n = len(lams) if n is None else n
    times, streams = poisson_arrivals(lams, horizon, seed)
    start, end = process(times, streams, service, scheduler, td)
    cut = warmup * horizon
    latency = end - times
    keep = times >= cut
    per_sat, per_lat, per_wait = [], [], []
    for i in range(len(lams)):
        sel = keep & (streams == i)
        lat = latency[sel]
        per_sat.append(float(np.mean(lat <= td)) if len(lat) else math.nan)
        per_lat.append(float(lat.mean()) if len(lat) else math.nan)
        per_wait.append(float((start[sel] - times[sel]).mean()) if len(lat) else math.nan)
    m = complex_events(streams, n, mode)
    term = m.first[:, -1]
    sel = times[term] >= cut
    first, last = m.first[sel], m.last[sel]
    term = first[:, -1]
    on_time = np.asarray(latency[term] <= td)
    ordered = start[last[:, :-1]] < start[first[:, 1:]]
    correct = ordered.all(axis=1)
    gaps = times[first[:, 1:]] - times[last[:, :-1]]
    count = len(first)

    def share(x: Any) -> float:
        return float(x.mean()) if count else math.nan

    extra: dict[str, Any] = {}
    if keep_gaps:
        extra["gaps"] = [gaps[:, i].copy() for i in range(n - 1)]
    return SimulationResult(
        satisfaction=share(on_time), disorder=1.0 - share(correct) if count else math.nan,
        on_time_and_correct=share(on_time & correct),
        mean_latency=share(latency[term]), matches=count,
        stream_satisfaction=per_sat, stream_mean_latency=per_lat, stream_mean_wait=per_wait,
        pair_disorder=[1.0 - share(ordered[:, i]) if count else math.nan
                       for i in range(n - 1)],
        mean_gaps=[share(gaps[:, i]) for i in range(n - 1)],
        events=int(keep.sum()), extra=extra)
