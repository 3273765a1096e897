"""The joint pmf of events linked by PRIOR constraints: the PRIOR-connected components of
a partition, their parents' joint assignments, and marginals of chosen events."""

from __future__ import annotations

import bisect
import itertools
import math
from dataclasses import dataclass, field
from typing import Any

from .data import Partition
from .results import Diagnostics, lost_mass


@dataclass
class Joint:
    """One PRIOR-connected component of two or more events. Under the PRIOR conditioning an
    event's pmf depends only on the latest time of its parents, so the events without
    children (the leaves of the event DAG) are independent given the times of the events
    with children (the parents): only the parents' joint assignments are enumerated."""

    parents: list[int]  # the events with children, in topological order
    position: dict[int, int]  # parent event -> index in ``parents``
    # the parents' assignments (point indices in ``parents`` order) with positive
    # probability under which every leaf keeps a point (otherwise the world is lost)
    assignments: list[tuple[tuple[int, ...], float]]
    _conditionals: dict[tuple[int, Any], list[tuple[int, float]]] = field(default_factory=dict)

    def conditional(self, part: Partition, leaf: int,
                    chosen: tuple[int, ...]) -> list[tuple[int, float]]:
        """A leaf's (point index, probability) pairs, probability > 0, given the parents'
        assignment ``chosen``."""
        events = part.events
        after = max(events[p].points[chosen[self.position[p]]] for p in part.parents[leaf])
        key = (leaf, after)
        out = self._conditionals.get(key)
        if out is None:
            out = [(k, p) for k, p in enumerate(events[leaf].conditional(after)) if p > 0]
            self._conditionals[key] = out
        return out


@dataclass
class Components:
    """The PRIOR-connected components of a partition's events and their joint pmfs."""

    comp_of: list[int]  # event -> component
    members: list[list[int]]  # component -> events, in topological order
    joints: list[Joint | None]  # None for a single free event
    masses: list[float]
    _marginals: dict[tuple[int, tuple[int, ...]], list[tuple[tuple[Any, ...], float]]] = field(
        default_factory=dict)


def components(part: Partition, max_worlds: int, diag: Diagnostics) -> Components:
    n = len(part.events)
    link: list[int] = list(range(n))  # union-find over PRIOR edges

    def root(i: int) -> int:
        while link[i] != i:
            link[i] = link[link[i]]
            i = link[i]
        return i

    for child, ps in enumerate(part.parents):
        for p in ps:
            link[root(child)] = root(p)
    index: dict[int, int] = {}
    members: list[list[int]] = []
    comp_of = [0] * n
    for e in part.topo:
        r = root(e)
        if r not in index:
            index[r] = len(members)
            members.append([])
        comp_of[e] = index[r]
        members[index[r]].append(e)
    joints: list[Joint | None] = []
    masses: list[float] = []
    for comp in members:
        if len(comp) == 1:
            joints.append(None)
            masses.append(1.0)
            continue
        joint = _joint(part, comp, max_worlds, diag)
        joints.append(joint)
        masses.append(math.fsum(p for _, p in joint.assignments))
    if part.prior:
        diag.lost_prior_mass[part.key] = lost_mass(math.prod(masses))
    return Components(comp_of, members, joints, masses)


def _joint(part: Partition, comp: list[int], max_worlds: int, diag: Diagnostics) -> Joint:
    """The joint pmf of the parents of one PRIOR component, by the chain rule in
    topological order; an assignment is left out if its probability is 0 or if some leaf
    has no point at or after its parents' latest time (the PRIOR conditioning loses that
    world, for every event of the partition)."""
    events = part.events
    with_children = {p for e in comp for p in part.parents[e]}
    parents = [e for e in comp if e in with_children]
    leaves = [e for e in comp if e not in with_children]
    count = 1
    for e in parents:
        count *= len(events[e].points)
    if count > max_worlds:
        raise ValueError(f"UNCERTAIN TIME: in partition {part.key}, {len(parents)} events "
                         f"with PRIOR children (of {len(comp)} linked by PRIOR) have {count} "
                         f"joint assignments (more than max_worlds={max_worlds}); raise "
                         "max_worlds")
    position = {e: i for i, e in enumerate(parents)}
    out: list[tuple[tuple[int, ...], float]] = []
    chosen: list[int] = []

    def keeps_a_point(leaf: int) -> bool:
        ev = events[leaf]
        after = max(events[p].points[chosen[position[p]]] for p in part.parents[leaf])
        return ev.suffix[bisect.bisect_left(ev.points, after)] > 0

    def visit(i: int, prob: float) -> None:
        if i == len(parents):
            diag.worlds += 1
            if all(keeps_a_point(leaf) for leaf in leaves):
                out.append((tuple(chosen), prob))
            return
        ev = events[parents[i]]
        ps = part.parents[parents[i]]
        if ps:
            probs = ev.conditional(max(events[p].points[chosen[position[p]]] for p in ps))
        else:
            probs = ev.probs
        for k, p in enumerate(probs):
            if p > 0:
                chosen.append(k)
                visit(i + 1, prob * p)
                chosen.pop()

    visit(0, 1.0)
    return Joint(parents, position, out)


def marginal(part: Partition, comps: Components, c: int,
              events: tuple[int, ...]) -> list[tuple[tuple[Any, ...], float]]:
    """The joint pmf of ``events`` (all in component ``c``) as (times, probability) pairs
    with positive probability: per assignment of the component's parents, the leaves among
    ``events`` range over their conditional pmfs, the other leaves sum to 1."""
    key = (c, events)
    cached = comps._marginals.get(key)
    if cached is not None:
        return cached
    joint = comps.joints[c]
    if joint is None:
        ev = part.events[events[0]]
        out = [((t,), p) for t, p in zip(ev.points, ev.probs, strict=True) if p > 0]
    else:
        fixed = [(k, joint.position[e]) for k, e in enumerate(events) if e in joint.position]
        free = [(k, e) for k, e in enumerate(events) if e not in joint.position]
        acc: dict[tuple[int, ...], float] = {}
        slots = [0] * len(events)
        for chosen, q in joint.assignments:
            for k, w in fixed:
                slots[k] = chosen[w]
            if not free:
                k_ = tuple(slots)
                acc[k_] = acc.get(k_, 0.0) + q
                continue
            dists = [joint.conditional(part, e, chosen) for _, e in free]
            for combo in itertools.product(*dists):
                p = q
                for (k, _), (point, pp) in zip(free, combo, strict=True):
                    slots[k] = point
                    p *= pp
                k_ = tuple(slots)
                acc[k_] = acc.get(k_, 0.0) + p
        out = [(tuple(part.events[e].points[i] for e, i in zip(events, k, strict=True)), p)
               for k, p in sorted(acc.items()) if p > 0]
    comps._marginals[key] = out
    return out
