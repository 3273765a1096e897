"""Sharing common sub-expressions between queries (seed 003, section 5).

A sub-event (a primitive type or a complex sub-pattern, compared by its text) that is a
direct sub-event of the roots of two or more queries is *shared*: it is acquired once, with
one plan, over the union of the regions in which the queries need it, instead of once per
query over each region. What sharing saves, for a shared sub-event ``X`` with unit cost
``u_X`` (rows per unit of time and key) used by the queries ``Q``::

    saving_X = keys * u_X * (sum_q E|R_q| - E|union_q R_q|)

``R_q`` is the region of ``X`` in query ``q`` (the whole horizon when ``X`` is in ``q``'s
first step or ``q`` is an ``or``). ``E|union R_q|`` is inclusion-exclusion over the subsets
of ``Q``; the intersection of regions requires occurrences of each earlier sub-event in each
of its windows, and windows of the same sub-event (e.g. type ``A`` in two queries) are
merged into one requirement, so it is exact for Poisson primitives (sub-events with
different labels are taken as independent). Deeper occurrences (inside a sub-pattern of a
query) are not shared.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .model import (
    AcquisitionPlan,
    And,
    Distribution,
    Event,
    LatencyModel,
    Not,
    Or,
    Pattern,
    PlanningError,
    Requirement,
    Seq,
    Statistics,
    expected_measure,
    validate,
)
from .planners import Planner, choose


def _direct(p: Pattern) -> list[Pattern]:
    if isinstance(p, Event):
        return [p]
    return [c for c in p.children if not isinstance(c, Not)]


def common_subexpressions(queries: Mapping[str, Pattern]) -> dict[str, tuple[str, ...]]:
    """Label of each sub-event that is a direct (positive) sub-event of the roots of two or
    more queries -> the names of those queries."""
    users: dict[str, list[str]] = {}
    for name, q in queries.items():
        for c in _direct(q):
            users.setdefault(str(c), [])
            if name not in users[str(c)]:
                users[str(c)].append(name)
    return {label: tuple(qs) for label, qs in users.items() if len(qs) >= 2}


@dataclass(frozen=True)
class SharedPlan:
    """Plans for a set of queries: ``separate_cost`` when every query reads on its own,
    ``shared_cost`` with each shared sub-event read once over the union of its regions;
    ``savings`` per shared sub-event."""

    plans: dict[str, AcquisitionPlan]
    shared: dict[str, tuple[str, ...]]
    separate_cost: float
    shared_cost: float
    savings: dict[str, float]

    @property
    def saving(self) -> float:
        return self.separate_cost - self.shared_cost


_Req = tuple[str, Distribution, tuple[float, float]]


def _region_requirements(planner: Planner, query: Pattern, plan: AcquisitionPlan,
                         label: str) -> list[_Req] | None:
    """Requirements of the region where ``query`` (with ``plan``) reads ``label``; None when
    it is read over the whole horizon."""
    if isinstance(query, Event | Or):
        return None
    model = planner.node_model(query)
    step = next((j for j, s in enumerate(plan.steps) if label in s), None)
    if step is None:
        raise PlanningError(f"plan {plan} does not acquire {label}")
    if step == 0:
        return None
    by_label = {i.label: i for i in model.items}
    target = by_label[label]
    w = model.window
    out: list[_Req] = []
    for s in plan.steps[:step]:
        for lab in s:
            i = by_label[lab]
            if model.kind == "and":
                win = (-w, w)
            else:
                win = (-w, 0.0) if i.position < target.position else (0.0, w)
            out.append((lab, i.dist, win))
    return out


def _intersection(reqs: Sequence[list[_Req]], horizon: float) -> float:
    merged: dict[str, tuple[Distribution, list[tuple[float, float]]]] = {}
    for rs in reqs:
        for lab, dist, win in rs:
            merged.setdefault(lab, (dist, []))[1].append(win)
    return expected_measure([Requirement(d, tuple(ws)) for d, ws in merged.values()], horizon)


def union_measure(regions: Sequence[list[_Req] | None], horizon: float) -> float:
    """``E|union of the regions|`` (None = the whole horizon) by inclusion-exclusion."""
    if any(r is None for r in regions):
        return float(horizon)
    rs = [r for r in regions if r is not None]
    total = 0.0
    for size in range(1, len(rs) + 1):
        for combo in itertools.combinations(rs, size):
            total += (-1) ** (size + 1) * _intersection(combo, horizon)
    return total


def shared_cost(queries: Mapping[str, Pattern], plans: Mapping[str, AcquisitionPlan],
                stats: Statistics, latency: LatencyModel | None = None) -> SharedPlan:
    """Cost of the given per-query plans with and without sharing their common sub-events
    (a shared complex sub-pattern must use the same plan in every query)."""
    planner = Planner(stats, latency or LatencyModel())
    shared = common_subexpressions(queries)
    separate = sum(p.cost for p in plans.values())
    savings: dict[str, float] = {}
    h = stats.horizon
    for label, users in shared.items():
        unit = None
        sub = next(c for c in _direct(queries[users[0]]) if str(c) == label)
        if isinstance(sub, Event):
            unit = stats.of(sub.type).rate
        else:
            chosen = {dict(plans[q].children).get(label) for q in users}
            chosen.discard(None)
            if len(chosen) != 1:
                raise PlanningError(f"shared sub-pattern {label} must use one plan in "
                                    f"{users}")
            only = chosen.pop()
            assert only is not None
            unit = only.cost / (h * stats.keys)
        regions = [_region_requirements(planner, queries[q], plans[q], label) for q in users]
        each = sum(h if r is None else _intersection([r], h) for r in regions)
        savings[label] = stats.keys * unit * (each - union_measure(regions, h))
    return SharedPlan(dict(plans), shared, separate, separate - sum(savings.values()), savings)


def plan_shared(queries: Mapping[str, Pattern], stats: Statistics,
                latency: LatencyModel | None = None, bound: float | None = None,
                method: str = "dp", k: int | None = None, strategy: str = "cost",
                max_combinations: int = 64) -> SharedPlan:
    """Plan a set of queries together: for each choice of one plan per shared complex
    sub-pattern (from its pareto set; at most ``max_combinations``), every query takes its
    cheapest plan within ``bound`` with those plans pinned; the choice with the lowest
    shared cost wins."""
    for q in queries.values():
        validate(q)
    lat = latency or LatencyModel()
    base = Planner(stats, lat, method, k, strategy, bound)
    shared = common_subexpressions(queries)
    complex_shared = {}
    for label, users in shared.items():
        sub = next(c for c in _direct(queries[users[0]]) if str(c) == label)
        if isinstance(sub, And | Seq | Or):
            complex_shared[label] = base.plans(sub)
    best: SharedPlan | None = None
    combos = itertools.islice(itertools.product(*complex_shared.values()), max_combinations)
    for combo in combos:
        pinned = dict(zip(complex_shared, combo, strict=True))
        planner = Planner(stats, lat, method, k, strategy, bound, pinned=pinned)
        plans = {name: choose(planner.plans(q), bound) for name, q in queries.items()}
        result = shared_cost(queries, plans, stats, lat)
        if best is None or result.shared_cost < best.shared_cost:
            best = result
    assert best is not None
    return best
