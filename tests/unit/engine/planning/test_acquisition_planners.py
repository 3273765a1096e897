"""Seed 003's planners: Algorithm 1 against brute force, k-limited tables, heuristics,
hierarchical composition, baselines."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cep_core.planning import (
    KEEP_STRATEGIES,
    LatencyModel,
    Planner,
    PlanningError,
    Statistics,
    and_,
    backward,
    brute_force,
    choose,
    dominates,
    dp,
    forward,
    frequency_order,
    heuristic,
    keep,
    or_,
    ordered_partitions,
    pareto,
    plan,
    pull_everything,
    seq,
)


def instance(rates, delays, kind, window=3.0, negated=False, horizon=100.0):
    names = [f"T{i}" for i in range(len(rates))]
    all_rates = dict(zip(names, rates, strict=True))
    children = list(names)
    if negated:
        all_rates["N"] = 0.7
        children.insert(1, "!N")
    stats = Statistics.poisson(all_rates, horizon)
    lat = LatencyModel(1.0, dict(zip(names, delays, strict=False)))
    make = and_ if kind == "and" else seq
    return Planner(stats, lat).node_model(make(*children, window=window))


def front(plans):
    return sorted((round(p.cost, 9), round(p.latency, 9)) for p in plans)


log_rates = st.floats(min_value=-3, max_value=1).map(lambda x: 10 ** x)


@settings(max_examples=20, deadline=None)
@given(rates=st.lists(log_rates, min_size=1, max_size=6),
       delays=st.lists(st.sampled_from([0.5, 1.0, 1.5, 3.0]), min_size=6, max_size=6),
       kind=st.sampled_from(["and", "seq"]), negated=st.booleans())
def test_dp_with_unbounded_k_is_exactly_the_brute_force_pareto_set(rates, delays, kind,
                                                                   negated):
    model = instance(rates, delays, kind, negated=negated)
    assert front(dp(model)) == front(brute_force(model))


def test_dp_equals_brute_force_with_seven_sub_events():
    rng = random.Random(5)
    model = instance([10 ** rng.uniform(-3, 1) for _ in range(7)],
                     [rng.choice([0.5, 1.0, 2.0]) for _ in range(7)], "seq")
    assert len(list(ordered_partitions(7))) == 47293  # Fubini number
    assert front(dp(model)) == front(brute_force(model))


def test_every_dp_plan_is_a_valid_ordered_partition_with_its_own_cost():
    model = instance([0.01, 1.0, 0.2, 3.0, 0.05], [1.0] * 5, "and")
    for p in dp(model):
        labels = [lab for step in p.steps for lab in step]
        assert sorted(labels) == sorted(i.label for i in model.items)
        masks = [sum(1 << int(lab[1:]) for lab in step) for step in p.steps]
        assert model.evaluate(masks) == pytest.approx((p.cost, p.latency))


@pytest.mark.parametrize("strategy", KEEP_STRATEGIES)
@pytest.mark.parametrize("k", [1, 2, 3])
def test_k_limited_tables_keep_at_most_k_valid_plans(strategy, k):
    model = instance([0.01, 1.0, 0.2, 3.0, 0.05, 0.5],
                     [0.5, 1.0, 1.5, 3.0, 0.5, 1.0], "seq")
    exact = front(dp(model))
    limited = dp(model, k=k, strategy=strategy, seed=1)
    assert 1 <= len(limited) <= k
    best = min(c for c, _ in exact)
    for p in limited:  # never better than the exact front (it is optimal)
        assert not any(dominates((round(p.cost, 9), round(p.latency, 9)), e) for e in exact)
        assert p.cost >= best - 1e-9
    if strategy == "cost" and k == 1:
        # keeping only the cheapest sub-plan per subset still finds the cheapest plan here
        assert min(p.cost for p in limited) == pytest.approx(best)
    assert front(dp(model, k=len(exact) + 50, strategy=strategy)) == exact


def test_keep_strategies():
    pts = [(float(c), float(10 - c)) for c in range(10)]  # a pareto front of 10
    key = lambda x: x  # noqa: E731
    rng = random.Random(0)
    assert keep(pts, 3, "cost", key, rng) == [(2.0, 8.0), (1.0, 9.0), (0.0, 10.0)]
    assert keep(pts, 3, "latency", key, rng) == [(9.0, 1.0), (8.0, 2.0), (7.0, 3.0)]
    assert sorted(keep(pts, 4, "mixed", key, rng)) == [(0.0, 10.0), (1.0, 9.0), (8.0, 2.0),
                                                       (9.0, 1.0)]
    sample = keep(pts, 4, "random", key, rng)
    assert len(sample) == 4 and set(sample) <= set(pts)
    assert keep(pts, None, "cost", key, rng) == pts
    with pytest.raises(PlanningError, match="unknown k strategy"):
        keep(pts, 2, "best", key, rng)
    assert pareto([(1.0, 1.0), (2.0, 2.0), (0.5, 3.0), (1.0, 1.0)], key) == [(1.0, 1.0),
                                                                             (0.5, 3.0)]


@settings(max_examples=25, deadline=None)
@given(rates=st.lists(log_rates, min_size=2, max_size=6),
       kind=st.sampled_from(["and", "seq"]), bound=st.integers(1, 6))
def test_heuristic_plans_are_feasible_and_never_beat_the_optimum(rates, kind, bound):
    model = instance(rates, [], kind)
    optimum = choose(dp(model), bound)
    found = heuristic(model, bound)
    assert found and all(p.latency <= bound for p in found)
    assert front(found) == front(pareto(found, lambda p: (p.cost, p.latency)))
    assert min(p.cost for p in found) >= optimum.cost - 1e-9
    f, b = forward(model, bound), backward(model)
    assert len(f[0].steps) == 1  # forward starts from the one-step plan
    assert len(b[0].steps) == model.n  # backward from the n-step plan
    assert all(p.latency <= bound for p in f)
    assert [p.cost for p in f] == sorted((p.cost for p in f), reverse=True)


def test_baselines_and_the_optimum():
    model = instance([0.001, 2.0, 0.1, 5.0], [], "seq", window=2.0)
    everything = pull_everything(model)
    assert everything.cost == pytest.approx(100.0 * (0.001 + 2.0 + 0.1 + 5.0))
    assert len(everything.steps) == 1
    lazy = frequency_order(model)
    assert lazy.steps == (("T0",), ("T2",), ("T1",), ("T3",))
    best = choose(dp(model))
    assert best.cost <= lazy.cost <= everything.cost
    assert everything.cost / best.cost > 50  # rare first types pay off by orders of magnitude


def test_hierarchical_plans_compose_child_pareto_sets_and_respect_the_bound():
    stats = Statistics.poisson({"A": 0.01, "B": 2.0, "C": 0.05, "D": 4.0}, 1000.0)
    nested = and_(seq("A", "B", window=5), or_("C", "D"), window=20)
    planner = Planner(stats, LatencyModel(1.0), bound=3)
    plans = planner.plans(nested)
    best = choose(plans, 3)
    assert best.latency <= 3
    child = dict(best.children)["seq(A, B; 5)"]
    assert child.steps in ((("A",), ("B",)), (("A", "B"),))
    # the root re-evaluates to its cost with each child's cost scaled by its region
    model = planner.node_model(nested)
    choice = {i: next(o for o in it.options if o.plan == dict(best.children).get(it.label))
              for i, it in enumerate(model.items)}
    masks = [sum(1 << [it.label for it in model.items].index(lab) for lab in s)
             for s in best.steps]
    assert model.evaluate(masks, choice) == pytest.approx((best.cost, best.latency))
    # passing the whole pareto set up is never worse than passing only the cheapest plan
    only_cheapest = Planner(stats, LatencyModel(1.0), k=1, strategy="cost", bound=3)
    assert best.cost <= choose(only_cheapest.plans(nested), 3).cost + 1e-9
    with pytest.raises(PlanningError, match="latency bound"):
        choose(plans, 0.5)


def test_or_costs_add_and_latencies_take_the_maximum():
    stats = Statistics.poisson({"A": 0.1, "B": 2.0}, 10.0)
    lat = LatencyModel(1.0, {"B": 4.0})
    [p] = plan(or_("A", "B"), stats, lat)
    assert (p.cost, p.latency) == pytest.approx((10 * 2.1, 4.0))


def test_flat_hierarchy_equals_the_flat_dp_and_heuristics_methods_run():
    stats = Statistics.poisson({"A": 0.01, "B": 2.0, "C": 0.05}, 100.0)
    pattern = seq("A", "B", "C", window=5)
    assert front(plan(pattern, stats)) == front(dp(Planner(stats).node_model(pattern)))
    for method in ("heuristic", "forward", "backward"):
        assert plan(pattern, stats, method=method, bound=3)


@pytest.mark.parametrize("method", ["dp", "heuristic", "forward", "backward"])
def test_nested_patterns_plan_with_every_method_within_the_bound(method):
    stats = Statistics.poisson({"A": 0.01, "B": 2.0, "C": 0.05, "D": 4.0, "X": 0.3}, 1000.0)
    nested = seq(and_("A", "B", window=5), "!X", or_("C", "D"), window=20)
    plans = plan(nested, stats, LatencyModel(1.0), method=method, bound=4)
    best = choose(plans, 4)
    assert best.latency <= 4 and best.steps[-1] == ("!X",)
    optimum = choose(plan(nested, stats, LatencyModel(1.0), bound=4), 4)
    assert best.cost >= optimum.cost - 1e-9
