"""Sharing common sub-expressions between queries: what it saves, against Monte Carlo."""

from __future__ import annotations

import numpy as np
import pytest

from cep_core.planning import (
    Planner,
    Statistics,
    and_,
    common_subexpressions,
    merge,
    plan_shared,
    seq,
    shared_cost,
)
from cep_core.planning.loads import SubEvent, count_in, region

RATES = {"A": 0.05, "B": 1.0, "C": 0.08, "D": 2.0, "E": 0.02}
H = 200.0


def plan_of(stats, pattern, steps):
    return Planner(stats).node_model(pattern).make_plan(steps)


def test_common_subexpressions_are_direct_sub_events_of_two_or_more_roots():
    x = seq("A", "B", window=5)
    qs = {"q1": and_(x, "C", window=9), "q2": and_("D", x, window=9),
          "q3": and_("C", "E", window=2)}
    assert common_subexpressions(qs) == {"seq(A, B; 5)": ("q1", "q2"), "C": ("q1", "q3")}


def test_a_type_both_queries_read_first_is_read_once():
    stats = Statistics.poisson(RATES, H, keys=3)
    qs = {"q1": and_("A", "B", window=4), "q2": seq("A", "D", window=4)}
    plans = {"q1": plan_of(stats, qs["q1"], [1, 2]), "q2": plan_of(stats, qs["q2"], [1, 2])}
    result = shared_cost(qs, plans, stats)
    assert result.separate_cost == pytest.approx(plans["q1"].cost + plans["q2"].cost)
    assert result.saving == pytest.approx(3 * H * RATES["A"])  # one full read of A saved


def test_no_common_sub_events_no_saving():
    stats = Statistics.poisson(RATES, H)
    result = plan_shared({"q1": and_("A", "B", window=4), "q2": seq("C", "D", window=4)},
                         stats, bound=2)
    assert result.shared == {} and result.saving == 0.0


@pytest.mark.parametrize("second", ["C", "A"])
def test_saving_on_a_type_read_in_later_steps_matches_monte_carlo(second):
    """B is read by q1 where an A is within 4 and by q2 where a ``second`` is in the 3 before;
    reading B once over the union of both regions saves the rows in their overlap (with
    second = A, the two regions depend on the same A events)."""
    stats = Statistics.poisson(RATES, H)
    q1, q2 = and_("A", "B", window=4), seq(second, "B", window=3)
    plans = {"q1": plan_of(stats, q1, [1, 2]), "q2": plan_of(stats, q2, [1, 2])}
    result = shared_cost({"q1": q1, "q2": q2}, plans, stats)
    predicted = result.savings["B"]
    assert predicted > 0
    if second == "A":  # A itself is shared too: both read it over the whole horizon
        assert result.savings["A"] == pytest.approx(RATES["A"] * H)
    assert result.saving == pytest.approx(sum(result.savings.values()))
    rng = np.random.default_rng(11)
    saved = []
    for _ in range(1000):
        ev = {t: np.sort(rng.uniform(0, H, rng.poisson(r * H))) for t, r in RATES.items()}
        r1 = region(q1, SubEvent("B", 1, False), [(SubEvent("A", 0, False), ev["A"])], H)
        r2 = region(q2, SubEvent("B", 1, False), [(SubEvent(second, 0, False), ev[second])], H)
        saved.append(count_in(ev["B"], r1) + count_in(ev["B"], r2)
                     - count_in(ev["B"], merge(r1 + r2)))
    assert np.mean(saved) == pytest.approx(predicted, rel=0.1)


def test_a_shared_sub_pattern_uses_one_plan_and_saves():
    stats = Statistics.poisson(RATES, 1000.0)
    x = seq("A", "B", window=5)
    qs = {"q1": and_(x, "C", window=10), "q2": and_(x, "D", "E", window=10)}
    result = plan_shared(qs, stats, bound=3)
    assert result.shared == {"seq(A, B; 5)": ("q1", "q2")}
    used = {dict(p.children)["seq(A, B; 5)"] for p in result.plans.values()}
    assert len(used) == 1
    assert 0 < result.saving < result.separate_cost
    assert all(p.latency <= 3 for p in result.plans.values())
