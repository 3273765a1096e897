"""Dynamic programme for one characteristic sequence with independent events.

Used by :mod:`cep_core.uncertain` (method ``dp``). For a pattern tree without alternation
(the branch an OR takes is fixed by the characteristic sequence) and independent event
times, it computes bottom-up, for every sub-pattern, the distribution of its span
``(first, last)`` over a common grid of time points, as a K x K matrix ``D[f, l]`` (K grid
points; ``D`` is upper triangular):

* leaf: ``D[t, t] = p(t)``;
* SEQ(P1, P2): ``l1 < f2`` and the span is ``(f1, l2)``:
  ``out[f1, l2] = sum_{l1} D1[f1, l1] * sum_{f2 > l1} D2[f2, l2]``, a matrix product with
  a strict suffix sum of ``D2`` (longer sequences fold left);
* AND(P1, P2): the span is ``(min f, max l)``; split on which side supplies the minimum
  (ties: the left one) and which the maximum (ties: the left one); every term is a sum of
  products of non-negative numbers (no subtraction, so an impossible span stays exactly 0).

The probability is the sum of ``D[f, l]`` over ``t_l - t_f <= W``. The cost is O(m K^3) for m
pattern nodes (O(m K^2) when the left operand of each SEQ step is a single event), instead of
the O(K^n) point combinations of the point-based method.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np


def span_distribution(tree: Any, dists: Mapping[str, tuple[Sequence[Any], Sequence[float]]],
                      grid: Sequence[Any]) -> np.ndarray:
    """The (first, last) distribution of ``tree`` (leaves ``("LEAF", var)``, inner nodes
    ``("SEQ" | "AND", items)``) given each variable's (times, probabilities)."""
    index = {t: i for i, t in enumerate(grid)}
    k = len(grid)

    def go(node: Any) -> np.ndarray:
        op, arg = node
        if op == "LEAF":
            d = np.zeros((k, k))
            times, probs = dists[arg]
            for t, p in zip(times, probs, strict=True):
                d[index[t], index[t]] += p
            return d
        parts = [go(item) for item in arg]
        out = parts[0]
        for nxt in parts[1:]:
            out = seq(out, nxt) if op == "SEQ" else and_(out, nxt)
        return out

    return go(tree)


def probability(tree: Any, dists: Mapping[str, tuple[Sequence[Any], Sequence[float]]],
                window: Any | None) -> float:
    """P(the pattern matches, and last - first <= window) for independent events."""
    grid = sorted({t for times, _ in dists.values() for t in times})
    if not grid:
        return 0.0
    d = span_distribution(tree, dists, grid)
    if window is None:
        return float(d.sum())
    k = len(grid)
    mask = np.zeros((k, k), dtype=bool)
    for f in range(k):
        for last in range(f, k):
            if grid[last] - grid[f] <= window:
                mask[f, last] = True
            else:
                break
    return float(d[mask].sum())


def _suffix(d: np.ndarray, axis: int, strict: bool) -> np.ndarray:
    """``out[i] = sum_{j >= i} d[j]`` along ``axis`` (``j > i`` when strict)."""
    c = np.flip(np.cumsum(np.flip(d, axis), axis), axis)
    if not strict:
        return c
    out = np.zeros_like(d)
    if axis == 0:
        out[:-1, :] = c[1:, :]
    else:
        out[:, :-1] = c[:, 1:]
    return out


def _prefix(d: np.ndarray, axis: int, strict: bool) -> np.ndarray:
    """``out[i] = sum_{j <= i} d[j]`` along ``axis`` (``j < i`` when strict)."""
    c = np.cumsum(d, axis)
    if not strict:
        return c
    out = np.zeros_like(d)
    if axis == 0:
        out[1:, :] = c[:-1, :]
    else:
        out[:, 1:] = c[:, :-1]
    return out


def seq(d1: np.ndarray, d2: np.ndarray) -> np.ndarray:
    """Span distribution of SEQ(P1, P2): P1 ends strictly before P2 starts."""
    after = _suffix(d2, 0, strict=True)  # after[l1, l2] = sum_{f2 > l1} d2[f2, l2]
    out: np.ndarray = d1 @ after
    return out


def and_(d1: np.ndarray, d2: np.ndarray) -> np.ndarray:
    """Span distribution of AND(P1, P2) (independent parts): the hull of both spans."""
    # P2 starts at or after f and ends at or before l
    inside2 = _prefix(_suffix(d2, 0, strict=False), 1, strict=False)
    # P1 starts strictly after f and ends strictly before l
    inside1 = _prefix(_suffix(d1, 0, strict=True), 1, strict=True)
    out: np.ndarray = (
        d1 * inside2  # P1 supplies both ends
        + _prefix(d1, 1, strict=True) * _suffix(d2, 0, strict=False)  # P1 first, P2 last
        + _suffix(d1, 0, strict=True) * _prefix(d2, 1, strict=False)  # P2 first, P1 last
        + d2 * inside1)  # P2 supplies both ends
    return out
