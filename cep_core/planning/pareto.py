"""Pareto sets of (cost, latency) and the four ways of keeping at most k of them."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import TypeVar

from .model import PlanningError

T = TypeVar("T")

KEEP_STRATEGIES = ("random", "cost", "latency", "mixed")


def dominates(a: tuple[float, float], b: tuple[float, float]) -> bool:
    """``a`` is no worse than ``b`` in cost and latency and better in one of them."""
    return a[0] <= b[0] and a[1] <= b[1] and (a[0] < b[0] or a[1] < b[1])


def pareto(items: Sequence[T], key: Callable[[T], tuple[float, float]]) -> list[T]:
    """The non-dominated items, one per distinct (cost, latency), sorted by latency
    (ascending) and so by cost (descending)."""
    ordered = sorted(items, key=lambda x: (key(x)[1], key(x)[0]))
    out: list[T] = []
    best = float("inf")
    for x in ordered:
        c = key(x)[0]
        if c < best:
            out.append(x)
            best = c
    return out


def keep(front: list[T], k: int | None, strategy: str,
         key: Callable[[T], tuple[float, float]], rng: random.Random) -> list[T]:
    """At most ``k`` items of a pareto front: ``random`` (uniform sample), ``cost`` (the k
    cheapest), ``latency`` (the k fastest), ``mixed`` (ceil(k/2) cheapest and the rest
    fastest). ``k=None`` keeps all."""
    if strategy not in KEEP_STRATEGIES:
        raise PlanningError(f"unknown k strategy {strategy!r}; use one of {KEEP_STRATEGIES}")
    if k is not None and k < 1:
        raise PlanningError("k must be >= 1 (or None for unbounded)")
    if k is None or len(front) <= k:
        return front
    if strategy == "random":
        picked = sorted(rng.sample(range(len(front)), k))
        return [front[i] for i in picked]
    by_cost = sorted(front, key=lambda x: (key(x)[0], key(x)[1]))
    by_latency = sorted(front, key=lambda x: (key(x)[1], key(x)[0]))
    if strategy == "cost":
        chosen = by_cost[:k]
    elif strategy == "latency":
        chosen = by_latency[:k]
    else:
        ids: dict[int, T] = {id(x): x for x in by_cost[:(k + 1) // 2]}
        for x in by_latency:
            if len(ids) >= k:
                break
            ids.setdefault(id(x), x)
        chosen = list(ids.values())
    return pareto(chosen, key)
