"""Rows an executor reads for a plan: the prediction with the executor's semantics.

The planner's cost model (:class:`~cep_core.planning.model.NodeModel`) computes a later
step's region from *every* event of the earlier types (``basis="all"``): that makes the cost
of a step depend only on the *set* acquired before it, which Algorithm 1's optimal
substructure needs, but an executor only knows the events it has *read*, and for a plan
with three or more steps (the negation step counts) the events read at step 2 are only
those inside step 2's region, so step 3's region is smaller. On the benchmark's
``seq(door_forced, badge_denied, motion, ...; 30)`` the set model predicts about twice the
rows read by ``{door_forced} -> {badge_denied} -> {motion}``: a ``badge_denied`` counts for
``motion`` only when it follows a ``door_forced``, so ``motion`` is read over
``[d, d + 30]`` only where a read ``badge_denied`` lies in ``[d, t]``, not wherever any
``badge_denied`` lies in ``[t - 30, t]``.

:func:`expected_reads` is the executor-semantics prediction for one chosen plan: a
Rao-Blackwellised simulation of the statistics. Each replication draws the events of the
first step over the horizon and, for a later step, only the events *inside its region*
(a Poisson or histogram process restricted to a set is the same process drawn on the set),
and adds the *expected* rows of the step (``rate x |region|``, so only the regions are
random). The planner keeps ranking plans with the separable model (an upper bound);
the figure recorded as a plan's predicted rows is this one.
"""

from __future__ import annotations

import numpy as np

from .loads import Intervals, SubEvent, length, region, sub_events
from .model import (
    AcquisitionPlan,
    And,
    Distribution,
    Floats,
    Histogram,
    PlanningError,
    Seq,
    Statistics,
)


def draw(dist: Distribution, rng: np.random.Generator, intervals: Intervals) -> Floats:
    """Occurrence times of ``dist`` inside ``intervals`` (one key): Poisson with the
    distribution's rate, or, for a :class:`Histogram`, one count drawn per histogram
    interval (``[m * interval, (m + 1) * interval)``) that overlaps them, uniform inside."""
    if not intervals:
        return np.empty(0)
    parts: list[Floats] = []
    if isinstance(dist, Histogram):
        size = dist.interval
        counts = np.asarray(dist.counts)
        for lo, hi in intervals:
            first, last = int(np.floor(lo / size)), int(np.floor(hi / size))
            for m in range(first, last + 1):
                n = int(counts[rng.integers(len(counts))])
                times = rng.uniform(m * size, (m + 1) * size, n)
                parts.append(times[(times >= lo) & (times <= hi)])
    else:
        for lo, hi in intervals:
            n = int(rng.poisson(dist.rate * (hi - lo)))
            parts.append(rng.uniform(lo, hi, n))
    return np.sort(np.concatenate(parts)) if parts else np.empty(0)


def expected_reads(pattern: And | Seq, plan: AcquisitionPlan, stats: Statistics,
                   replications: int = 400, seed: int = 0) -> list[float]:
    """Expected rows read per step of ``plan`` (all keys) by an executor that computes each
    step's region from the events it read in the earlier steps (``loads.acquire``
    ``basis="read"``). Exact in expectation; the simulation error is about
    ``1 / sqrt(replications x keys)`` of the rare types' variability."""
    if replications < 1:
        raise PlanningError("replications must be >= 1")
    subs = sub_events(pattern)
    horizon = float(stats.horizon)
    rng = np.random.default_rng(seed)
    totals = np.zeros(len(plan.steps))
    for _ in range(replications):
        known: list[tuple[SubEvent, Floats]] = []
        for j, step in enumerate(plan.steps):
            found: list[tuple[SubEvent, Floats]] = []
            for label in step:
                sub = subs.get(label)
                if sub is None:
                    raise PlanningError(f"plan step {label!r} is not a sub-event of {pattern}")
                dist = stats.of(sub.type)
                where: Intervals = ([(0.0, horizon)] if j == 0
                                    else region(pattern, sub, known, horizon))
                totals[j] += dist.rate * length(where)
                if not sub.negated:
                    found.append((sub, draw(dist, rng, where)))
            known.extend(found)
    out: list[float] = (totals * stats.keys / replications).tolist()
    return out


def predicted_rows(pattern: And | Seq, plan: AcquisitionPlan, stats: Statistics,
                   replications: int = 400, seed: int = 0) -> float:
    """Total of :func:`expected_reads`."""
    return float(sum(expected_reads(pattern, plan, stats, replications, seed)))

