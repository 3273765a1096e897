"""The complex events of a flat seed-003 pattern over event rows (what acquisition must not
change): every combination of one occurrence per positive sub-event that satisfies the
operator, its window and its negations, per key.

* ``seq(e1, ..., en; w)``: ``t1 < t2 < ... < tn`` and ``tn - t1 <= w``; a negated ``!x``
  between positive neighbours ``p`` and ``q`` rejects the match when an ``x`` lies in
  ``[tp, tq]``; before the first positive, in ``[tn - w, t1]``; after the last, in
  ``[tn, t1 + w]``.
* ``and(e1, ..., en; w)``: any order, ``max - min <= w``; a negated ``!x`` rejects the match
  when an ``x`` lies in ``[min, max]``.

Every event that can be part of a match or reject one lies in the region a plan reads it
over (``docs/acquisition.md``, soundness), so the complex events over the rows a plan reads
equal those over every row of the pattern's types."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd  # type: ignore[import-untyped, unused-ignore]

from ..runtime.time_axis import time_values
from .loads import SubEvent, sub_events
from .model import And, Floats, Seq


@dataclass(frozen=True, order=True)
class ComplexEvent:
    """One match: its key, the ids of its positive events (in child order), first and last
    time."""

    key: Any
    ids: tuple[Any, ...]
    start: float
    end: float


def complex_events(pattern: And | Seq, rows: pd.DataFrame, key: str, time: str,
                   type_column: str, id_column: str) -> list[ComplexEvent]:
    """Every match of ``pattern`` in ``rows`` (any extra rows or types are ignored), sorted."""
    subs = sub_events(pattern)
    positive = sorted((s for s in subs.values() if not s.negated), key=lambda s: s.position)
    negated = [s for s in subs.values() if s.negated]
    wanted = {s.type for s in subs.values()}
    rows = rows[rows[type_column].isin(wanted)]
    if len(rows) == 0:
        return []
    t_all = time_values(rows[time]).astype(np.float64)
    out: list[ComplexEvent] = []
    frame = pd.DataFrame({"k": rows[key].to_numpy(), "t": t_all,
                          "type": rows[type_column].to_numpy(),
                          "id": rows[id_column].to_numpy()})
    for k, part in frame.groupby("k", sort=True):
        part = part.sort_values(["t", "id"], kind="stable")
        times = {ty: g["t"].to_numpy() for ty, g in part.groupby("type")}
        ids = {ty: g["id"].to_numpy() for ty, g in part.groupby("type")}
        if any(s.type not in times for s in positive):
            continue
        for chosen in _combinations(pattern, positive, times):
            ts = [float(times[s.type][i]) for s, i in zip(positive, chosen, strict=True)]
            if any(_negated_inside(pattern, x, positive, ts, times.get(x.type))
                   for x in negated):
                continue
            out.append(ComplexEvent(k, tuple(ids[s.type][i] for s, i in zip(
                positive, chosen, strict=True)), min(ts), max(ts)))
    return sorted(out)


def _combinations(pattern: And | Seq, positive: list[SubEvent],
                  times: dict[str, Floats]) -> Iterator[tuple[int, ...]]:
    w = pattern.window
    ordered = isinstance(pattern, Seq)

    def extend(n: int, chosen: tuple[int, ...], lo: float, hi: float,
               last: float) -> Iterator[tuple[int, ...]]:
        if n == len(positive):
            yield chosen
            return
        ts = times[positive[n].type]
        if ordered:
            a = int(np.searchsorted(ts, last, "right")) if n else 0
            b = int(np.searchsorted(ts, lo + w, "right")) if n else len(ts)
        else:
            a = int(np.searchsorted(ts, hi - w, "left")) if n else 0
            b = int(np.searchsorted(ts, lo + w, "right")) if n else len(ts)
        for i in range(a, b):
            t = float(ts[i])
            yield from extend(n + 1, (*chosen, i), min(lo, t) if n else t,
                              max(hi, t) if n else t, t)

    yield from extend(0, (), 0.0, 0.0, 0.0)


def _negated_inside(pattern: And | Seq, x: SubEvent, positive: list[SubEvent],
                    ts: list[float], xs: Floats | None) -> bool:
    if xs is None or len(xs) == 0:
        return False
    if isinstance(pattern, And):
        lo, hi = min(ts), max(ts)
    else:
        before = [t for s, t in zip(positive, ts, strict=True) if s.position < x.position]
        after = [t for s, t in zip(positive, ts, strict=True) if s.position > x.position]
        w = pattern.window
        lo = before[-1] if before else ts[-1] - w
        hi = after[0] if after else ts[0] + w
    a = int(np.searchsorted(xs, lo, "left"))
    return a < len(xs) and float(xs[a]) <= hi
