"""From acquisition plans to reads: soundness (every match's events are read) and the
adapter to cep_core.live_archive Loads, executed against a FrameArchive."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cep_core.live_archive import FrameArchive, Load, Plan
from cep_core.planning import (
    Planner,
    PlanningError,
    Statistics,
    acquire,
    and_,
    intersect,
    live_plan,
    merge,
    ordered_partitions,
    seq,
)

H = 20.0
W = 3.0


def test_interval_helpers():
    assert merge([(3, 4), (0, 1), (1, 2), (5, 6), (5.5, 7)]) == [(0, 2), (3, 4), (5, 7)]
    assert intersect([(0, 2), (3, 6)], [(1, 4), (6, 8)]) == [(1, 2), (3, 4), (6, 6)]
    assert intersect([], [(0, 1)]) == []


def matches(kind, times):
    """Brute-force matches of and/seq(A, !X, B, C; W): the positive events and the X events
    that decide the negation."""
    out = []
    for a, b, c in itertools.product(times["A"], times["B"], times["C"]):
        ts = (a, b, c)
        if max(ts) - min(ts) > W:
            continue
        if kind == "seq" and not a < b < c:
            continue
        lo, hi = (min(ts), max(ts)) if kind == "and" else (a, b)
        xs = [x for x in times["X"] if lo <= x <= hi]
        out.append(({"A": a, "B": b, "C": c}, xs))
    return out


event_times = st.lists(st.floats(0, H, allow_nan=False), max_size=12).map(sorted)


@settings(max_examples=60, deadline=None)
@given(a=event_times, b=event_times, c=event_times, x=event_times,
       kind=st.sampled_from(["and", "seq"]), order=st.integers(0, 12))
def test_every_event_of_every_match_and_every_negating_event_is_read(a, b, c, x, kind, order):
    times = {"A": np.array(a), "B": np.array(b), "C": np.array(c), "X": np.array(x)}
    pattern = (and_ if kind == "and" else seq)("A", "!X", "B", "C", window=W)
    model = Planner(Statistics.poisson({"A": 0.1, "B": 0.5, "C": 1.0, "X": 0.3}, H)
                    ).node_model(pattern)
    steps = list(ordered_partitions(3))[order]
    plan = model.make_plan(steps)
    reads = acquire(pattern, plan, times, H, "read")
    regions = {t: iv for r in reads for t, iv in r.regions.items()}

    def covered(t, v):
        return any(lo <= v <= hi for lo, hi in regions[t])
    for events, xs in matches(kind, times):
        assert all(covered(t, v) for t, v in events.items()), (plan.steps, events)
        assert all(covered("X", v) for v in xs), (plan.steps, events, xs)


def test_live_plan_loads_read_exactly_the_rows_of_the_simulation():
    rng = np.random.default_rng(4)
    rates = {"A": 0.05, "B": 1.0, "C": 0.3}
    keys = ["k1", "k2", "k3"]
    events = {k: {t: np.sort(rng.uniform(0, 100, rng.poisson(r * 100)))
                  for t, r in rates.items()} for k in keys}
    pattern = seq("A", "C", "B", window=4)
    model = Planner(Statistics.poisson(rates, 100.0, keys=3)).node_model(pattern)
    plan = model.make_plan([1, 2, 4])
    live = live_plan(pattern, plan, events, 100.0)
    assert isinstance(live, Plan) and live.strategy == "acquisition"
    assert len(live.steps) == 3
    [first] = live.steps[0]
    assert isinstance(first, Load) and first.keys is None and first.event_types == ("A",)
    assert first.lo == 0.0 and first.hi > 100.0 and first.serves == (0, 1, 2)
    frame = pd.DataFrame([(k, float(t), ty) for k in keys for ty, ts in events[k].items()
                          for t in ts], columns=["key", "time", "event_type"])
    archive = FrameArchive(frame, "key", "time")
    for j, step in enumerate(live.steps):
        rows = 0
        for load in step:
            got = archive.load(load.keys, load.lo, load.hi)
            rows += int(got["event_type"].isin(load.event_types).sum())
            if load.keys is not None:
                assert load.serves == (keys.index(load.keys[0]),)
        expected = sum(sum(acquire(pattern, plan, events[k], 100.0)[j].rows.values())
                       for k in keys)
        assert rows == expected
    assert len(live.steps[1]) > 0 and all(ld.event_types == ("C",) for ld in live.steps[1])


def test_loads_need_a_flat_pattern_and_known_steps():
    nested = and_(seq("A", "B", window=1), "C", window=2)
    stats = Statistics.poisson({"A": 1, "B": 1, "C": 1}, 10)
    best = Planner(stats).plans(nested)[0]
    with pytest.raises(PlanningError, match="flat"):
        acquire(nested, best, {}, 10.0)
    flat = and_("A", "B", window=1)
    other = Planner(stats).plans(and_("A", "C", window=1))[0]
    with pytest.raises(PlanningError, match="not a sub-event"):
        acquire(flat, other, {}, 10.0)
