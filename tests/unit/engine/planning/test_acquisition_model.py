"""Seed 003's cost and latency model: formulas against Monte Carlo, monotonicity, errors."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cep_core.planning import (
    Histogram,
    LatencyModel,
    Planner,
    PlanningError,
    Poisson,
    Statistics,
    and_,
    or_,
    seq,
)
from cep_core.planning.loads import acquire

RATES = {"A": 0.05, "B": 0.3, "C": 1.0, "X": 0.5}
H = 200.0


def streams(rng: np.random.Generator, rates: dict[str, float], horizon: float
            ) -> dict[str, np.ndarray]:
    return {t: np.sort(rng.uniform(0, horizon, rng.poisson(r * horizon)))
            for t, r in rates.items()}


@pytest.mark.parametrize("make", [and_, seq])
def test_expected_rows_per_step_match_monte_carlo_of_poisson_streams(make):
    pattern = make("A", "B", "!X", "C", window=4)
    model = Planner(Statistics.poisson(RATES, H)).node_model(pattern)
    plans = [model.make_plan(s) for s in ([1, 2, 4], [4, 1, 2], [1, 6])]
    rng = np.random.default_rng(7)
    reps = 300
    got = {p.steps: np.zeros(len(p.steps)) for p in plans}
    read = {p.steps: np.zeros(len(p.steps)) for p in plans}
    for _ in range(reps):
        ev = streams(rng, RATES, H)
        for p in plans:
            got[p.steps] += [sum(s.rows.values()) for s in acquire(pattern, p, ev, H, "all")]
            read[p.steps] += [sum(s.rows.values()) for s in acquire(pattern, p, ev, H, "read")]
    for p, steps in zip(plans, ([1, 2, 4], [4, 1, 2], [1, 6]), strict=True):
        before, predicted = 0, []
        for s in steps:
            predicted.append(model.step_cost(s, before))
            before |= s
        predicted.append(model.negation_cost())
        assert sum(predicted) == pytest.approx(p.cost)
        mc = got[p.steps] / reps
        # each step within 8 % (300 runs; the standard error is about 2.5 %)
        assert mc == pytest.approx(predicted, rel=0.08), (p.steps, mc, predicted)
        executor = read[p.steps] / reps
        assert executor.sum() <= mc.sum() + 1e-9  # reading from read events only: a subset
        if len([s for s in p.steps if not s[0].startswith("!")]) <= 2:
            assert executor[:-1] == pytest.approx(mc[:-1], rel=1e-9)


def test_region_measure_with_horizon_edges_matches_monte_carlo():
    from cep_core.planning.loads import SubEvent, length, region
    pattern = seq("A", "B", window=30)  # a window that is large against the horizon
    model = Planner(Statistics.poisson({"A": 0.02, "B": 1.0}, 100.0)).node_model(pattern)
    rng = np.random.default_rng(3)
    sizes = [length(region(pattern, SubEvent("B", 1, False),
                           [(SubEvent("A", 0, False),
                             np.sort(rng.uniform(0, 100, rng.poisson(2))))],
                           100.0)) for _ in range(4000)]
    assert np.mean(sizes) == pytest.approx(model.measure(1, 1), rel=0.03)
    # without the edge correction the formula would be H (1 - exp(-rate w)) = 45.1
    assert abs(model.measure(1, 1) - 100 * (1 - math.exp(-0.6))) > 3


rates_st = st.floats(min_value=1e-3, max_value=5.0)


@settings(max_examples=40, deadline=None)
@given(rates=st.lists(rates_st, min_size=2, max_size=6), window=st.floats(0.5, 20.0),
       kind=st.sampled_from(["and", "seq"]), data=st.data())
def test_fast_measure_equals_reference_integral_and_shrinks_with_more_earlier_events(
        rates, window, kind, data):
    names = [f"T{i}" for i in range(len(rates))]
    make = and_ if kind == "and" else seq
    model = Planner(Statistics.poisson(dict(zip(names, rates, strict=True)), 100.0)
                    ).node_model(make(*names, window=window))
    k = data.draw(st.integers(0, len(names) - 1))
    mask = data.draw(st.integers(0, (1 << len(names)) - 1)) & ~(1 << k)
    ref = model.region(model.items[k], [model.items[i] for i in range(model.n) if mask >> i & 1])
    assert model.measure(k, mask) == pytest.approx(ref, rel=1e-9, abs=1e-9)
    for i in range(model.n):
        if i != k and not mask >> i & 1:
            assert model.measure(k, mask | 1 << i) <= model.measure(k, mask) + 1e-9


@settings(max_examples=40, deadline=None)
@given(rates=st.lists(rates_st, min_size=2, max_size=6),
       delays=st.lists(st.floats(0.1, 5.0), min_size=6, max_size=6),
       kind=st.sampled_from(["and", "seq"]), data=st.data())
def test_cost_and_latency_grow_as_sub_events_are_added(rates, delays, kind, data):
    """The optimal-substructure lemma's premise: a plan followed by one more step costs and
    takes at least as much, and the step's increment depends only on the *set* before it."""
    names = [f"T{i}" for i in range(len(rates))]
    make = and_ if kind == "and" else seq
    stats = Statistics.poisson(dict(zip(names, rates, strict=True)), 100.0)
    lat = LatencyModel(1.0, dict(zip(names, delays, strict=False)))
    model = Planner(stats, lat).node_model(make(*names, window=3.0))
    order = data.draw(st.permutations(range(model.n)))
    cuts = sorted(data.draw(st.sets(st.integers(1, model.n - 1))))
    steps = [sum(1 << i for i in order[a:b])
             for a, b in zip([0, *cuts], [*cuts, model.n], strict=True)]
    prev = (0.0, 0.0)
    for j in range(1, len(steps) + 1):
        cost, latency = model.evaluate(steps[:j])
        assert cost >= prev[0] and latency > prev[1]
        prev = (cost, latency)
    # the last step's increment is the same for any order of the steps before it
    if len(steps) >= 3:
        a = model.evaluate(steps)
        swapped = [steps[1], steps[0], *steps[2:]]
        b = model.evaluate(swapped)
        ia = a[0] - model.evaluate(steps[:-1])[0]
        ib = b[0] - model.evaluate(swapped[:-1])[0]
        assert ia == pytest.approx(ib, rel=1e-9)
    # a new sub-event acquired in a new last step adds cost and latency
    more = Statistics.poisson({**dict(zip(names, rates, strict=True)), "Z": 0.5}, 100.0)
    bigger = Planner(more, lat).node_model(make(*names, "Z", window=3.0))
    c2, l2 = bigger.evaluate([*steps, 1 << model.n])
    c1, l1 = model.evaluate(steps)
    assert c2 > c1 and l2 > l1


def test_latency_is_steps_times_step_delay_or_the_sum_of_the_largest_type_delays():
    stats = Statistics.poisson({"A": 0.1, "B": 1.0, "C": 2.0}, 100.0)
    m = Planner(stats, LatencyModel(2.5)).node_model(seq("A", "B", "C", window=5))
    assert m.evaluate([1, 2, 4])[1] == 7.5 and m.evaluate([3, 4])[1] == 5.0
    m = Planner(stats, LatencyModel(1.0, {"B": 4.0})).node_model(seq("A", "B", "C", window=5))
    assert m.evaluate([1, 6])[1] == 5.0 and m.evaluate([1, 2, 4])[1] == 6.0


def test_first_step_reads_the_whole_horizon_for_every_key():
    stats = Statistics.poisson({"A": 0.1, "B": 2.0}, 50.0, keys=7)
    m = Planner(stats).node_model(and_("A", "B", window=1))
    assert m.evaluate([3])[0] == pytest.approx(7 * 50 * 2.1)
    one = Planner(Statistics.poisson({"A": 0.1, "B": 2.0}, 50.0)).node_model(
        and_("A", "B", window=1))
    assert m.evaluate([1, 2])[0] == pytest.approx(7 * one.evaluate([1, 2])[0])


def test_histogram_statistics():
    h = Histogram((0, 0, 1, 3), interval=10.0)
    assert h.rate == pytest.approx(0.1)
    assert h.miss(np.array([0.0]))[0] == pytest.approx(1.0)
    assert h.miss(np.array([10.0]))[0] == pytest.approx(0.5)  # G(0): half the intervals empty
    assert h.miss(np.array([25.0]))[0] == pytest.approx(0.25 * (0.5 + 0.25 * 0.5 + 0.25 * 0.125))
    # counts drawn from a Poisson distribution give (nearly) Poisson's probabilities
    rng = np.random.default_rng(1)
    hp = Histogram(tuple(int(c) for c in rng.poisson(2.0, 20000)), interval=4.0)
    lengths = np.array([0.5, 2.0, 4.0, 6.0])
    assert hp.miss(lengths) == pytest.approx(Poisson(0.5).miss(lengths), rel=0.03)
    # and the planner accepts them in place of rates
    stats = Statistics({"A": Histogram((0, 1, 0, 0), 10.0), "B": Poisson(1.0)}, 100.0)
    plans = Planner(stats).plans(and_("A", "B", window=2))
    assert min(p.cost for p in plans) < 100.0 * (0.025 + 1.0)


@pytest.mark.parametrize("build, message", [
    (lambda: or_("A", "!B"), "negation"),
    (lambda: Planner(Statistics.poisson({"A": 1}, 10)).plans(and_("A", "B", window=1)),
     "no statistics for event type 'B'"),
    (lambda: Planner(Statistics.poisson({"A": 1}, 10)).plans(and_("A", window=0)), "window"),
    (lambda: Planner(Statistics.poisson({"A": 1}, 10)).plans(and_("!A", window=1)),
     "positive"),
    (lambda: Planner(Statistics.poisson({"A": 1}, 10)).plans(and_("A", "A", window=1)),
     "twice"),
    (lambda: Statistics.poisson({"A": -1}, 10), "rate"),
    (lambda: Planner(Statistics.poisson({"A": 1}, 10), method="magic"), "unknown method"),
])
def test_clear_errors(build, message):
    with pytest.raises(PlanningError, match=message):
        build()


@pytest.mark.parametrize("rate", [0.001, 0.1, 2.0, 30.0])
def test_quadrature_equals_the_closed_form_with_edges(rate):
    """and(A, B; w), B after A: (H - 2w)(1 - e^{-2 w r}) + 2 (w - e^{-r w}(1 - e^{-r w}) / r);
    seq: (H - w)(1 - e^{-w r}) + (w - (1 - e^{-r w}) / r)."""
    h, w = 100.0, 4.0
    stats = Statistics.poisson({"A": rate, "B": 1.0}, h)
    m_and = Planner(stats).node_model(and_("A", "B", window=w)).measure(1, 1)
    m_seq = Planner(stats).node_model(seq("A", "B", window=w)).measure(1, 1)
    e = math.exp(-rate * w)
    assert m_and == pytest.approx((h - 2 * w) * (1 - e * e) + 2 * (w - e * (1 - e) / rate),
                                  rel=1e-6)
    assert m_seq == pytest.approx((h - w) * (1 - e) + (w - (1 - e) / rate), rel=1e-6)
