"""The possible-worlds method (possibleF_QP): every world of a partition, the
correctness reference."""

from __future__ import annotations

from typing import Any

from .data import Partition
from .matching import candidates, span
from .plan import Sigma, UncertainPlan
from .results import Diagnostics, lost_mass


def possible_worlds(plan: UncertainPlan, part: Partition, window: Any | None,
                     max_worlds: int, diag: Diagnostics) -> dict[Sigma, float]:
    """possibleF_QP: every world of the partition, every matching sequence in it."""
    events = part.events
    count = 1
    for e in events:
        count *= len(e.points)
    if count > max_worlds:
        raise ValueError(f"UNCERTAIN TIME: partition {part.key} has {count} possible worlds "
                         f"(more than max_worlds={max_worlds}); use method='dp', 'event' or "
                         "'point', or raise max_worlds")
    sigmas = [(f, c) for f in plan.fillings for c in candidates(plan, part, f, None, None)]
    diag.candidates += len(sigmas)
    diag.points += sum(len(e.points) for e in events)
    acc: dict[Sigma, float] = {}
    times: list[Any] = [None] * len(events)
    total = 0.0
    topo = part.topo

    def visit(i: int, prob: float) -> None:
        nonlocal total
        if i == len(topo):
            total += prob
            diag.worlds += 1
            for f, c in sigmas:
                assigned = {v: times[e] for v, e in zip(f.variables, c, strict=True)}
                diag.combinations += 1
                s = span(plan.tree, assigned)
                if s is not None and (window is None or s[1] - s[0] <= window):
                    key = tuple((v, events[e].row) for v, e in zip(f.variables, c, strict=True))
                    acc[key] = acc.get(key, 0.0) + prob
            return
        e = topo[i]
        ev = events[e]
        ps = part.parents[e]
        probs = ev.conditional(max(times[p] for p in ps)) if ps else ev.probs
        for t, p in zip(ev.points, probs, strict=True):
            if p > 0:
                times[e] = t
                visit(i + 1, prob * p)
        times[e] = None

    visit(0, 1.0)
    if plan.prior:
        diag.lost_prior_mass[part.key] = lost_mass(total)
    return acc
