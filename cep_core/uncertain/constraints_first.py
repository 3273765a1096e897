"""constraintsF_QP, point- and event-based, and the dynamic programme: per candidate
sequence, the joint pmf of its events (event-based: pruned with the query first)."""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from typing import Any

from . import dp as uncertain_dp
from .data import Partition
from .joint import Components, components, marginal
from .matching import candidates, satisfies
from .plan import Filling, Sigma, UncertainPlan
from .results import Diagnostics


def _prune(f: Filling, supports: Mapping[str, list[Any]],
           window: Any | None) -> dict[str, list[Any]] | None:
    """Event-based pruning of each variable's possible times (exact: a removed point is in
    no combination that satisfies the order and the window). None if one becomes empty."""
    sets = {v: list(supports[v]) for v in f.variables}
    # forward: after every predecessor's earliest time
    for v in f.variables:
        preds = [u for u, w in f.before if w == v]
        if preds:
            low = max(sets[u][0] for u in preds)
            sets[v] = [t for t in sets[v] if low < t]
            if not sets[v]:
                return None
    # backward: before every successor's latest time
    for v in reversed(f.variables):
        succs = [w for u, w in f.before if u == v]
        if succs:
            high = min(sets[w][-1] for w in succs)
            sets[v] = [t for t in sets[v] if t < high]
            if not sets[v]:
                return None
    if window is not None and len(f.variables) > 1:
        firsts = {v: sets[v][0] for v in f.variables}
        lasts = {v: sets[v][-1] for v in f.variables}
        for v in f.variables:
            latest_first = max(firsts[w] for w in f.variables if w != v)
            earliest_last = min(lasts[w] for w in f.variables if w != v)
            sets[v] = [t for t in sets[v]
                       if latest_first - t <= window and t - earliest_last <= window]
            if not sets[v]:
                return None
    return sets


def constraint_first(plan: UncertainPlan, part: Partition, window: Any | None,
                      method: str, max_worlds: int, diag: Diagnostics) -> dict[Sigma, float]:
    """constraintsF_QP (point- or event-based) and the dynamic programme."""
    comps = components(part, max_worlds, diag)
    events = part.events
    supports: list[list[Any]] = []
    for e in range(len(events)):
        marg = marginal(part, comps, comps.comp_of[e], (e,))
        supports.append([times[0] for times, _ in marg])
    bounds = [(s[0], s[-1]) if s else None for s in supports]
    constrained = [c for c, joint in enumerate(comps.joints) if joint is not None]
    acc: dict[Sigma, float] = {}
    for f in plan.fillings:
        for cand in candidates(plan, part, f, bounds, window):
            diag.candidates += 1
            touched = {comps.comp_of[e] for e in cand}
            outside = math.prod(comps.masses[c] for c in constrained if c not in touched)
            if outside == 0:
                continue
            p = _sequence_probability(part, comps, f, cand, supports, window, method, diag)
            if p > 0:
                key = tuple((v, events[e].row) for v, e in zip(f.variables, cand, strict=True))
                acc[key] = p * outside
    return acc


def _sequence_probability(part: Partition, comps: Components, f: Filling,
                          cand: tuple[int, ...], supports: list[list[Any]],
                          window: Any | None, method: str, diag: Diagnostics) -> float:
    """P(the events ``cand`` fill ``f`` and match), without the factor of the untouched
    PRIOR components."""
    var_of = dict(zip(cand, f.variables, strict=True))
    groups: dict[int, list[int]] = {}
    for e in cand:
        groups.setdefault(comps.comp_of[e], []).append(e)
    allowed: dict[str, list[Any]] | None = None
    if method != "point":
        allowed = _prune(f, {v: supports[e] for v, e in zip(f.variables, cand, strict=True)},
                         window)
        if allowed is None:
            return 0.0
    dists = []
    for c, members in groups.items():
        members_t = tuple(members)
        marg = marginal(part, comps, c, members_t)
        if allowed is not None:
            keep = [set(allowed[var_of[e]]) for e in members_t]
            marg = [(ts, p) for ts, p in marg
                    if all(t in k for t, k in zip(ts, keep, strict=True))]
        if not marg:
            return 0.0
        diag.points += sum(len({ts[i] for ts, _ in marg}) for i in range(len(members_t)))
        dists.append(([var_of[e] for e in members_t], marg))
    if method == "dp" and all(len(names) == 1 for names, _ in dists):
        diag.dp += 1
        by_var = {names[0]: ([ts[0] for ts, _ in marg], [p for _, p in marg])
                  for names, marg in dists}
        return uncertain_dp.probability(f.tree, by_var, window)
    total = 0.0
    times: dict[str, Any] = {}
    for combo in itertools.product(*(marg for _, marg in dists)):
        prob = 1.0
        for (names, _), (ts, p) in zip(dists, combo, strict=True):
            prob *= p
            for name, t in zip(names, ts, strict=True):
                times[name] = t
        diag.combinations += 1
        if satisfies(times, f, window):
            total += prob
    return total
