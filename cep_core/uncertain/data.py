"""Preparing the events of a table: each row's possible times (interval and granularity),
its pmf, its classes, per partition with the event-level PRIOR graph."""

from __future__ import annotations

import bisect
import itertools
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd  # type: ignore[import-untyped, unused-ignore]

from ..compile.expressions import Scope, interval_value
from ..compile.values import column_values
from ..language import ast
from ..runtime.time_axis import datetime_ns
from ..runtime.vectorized import evaluate_condition
from .measures import Measures
from .plan import UncertainPlan

if TYPE_CHECKING:
    from ..api import CompiledQuery

# Tolerances: a float interval length within this (relative) of a whole number of steps
# counts as that number; a pmf may sum to 1 within this.
_STEP_EPS = 1e-9
_PMF_EPS = 1e-9


@dataclass
class Event:
    row: int  # position in the input table
    points: list[Any]  # ascending
    probs: list[float]
    classes: frozenset[str]
    suffix: list[float] = field(default_factory=list)  # suffix[k] = sum(probs[k:])

    def conditional(self, after: Any) -> list[float]:
        """P(t = point | t >= after), as the PRIOR conditioning defines it (all zero if no
        point with positive probability is at or after ``after``)."""
        k0 = bisect.bisect_left(self.points, after)
        norm = self.suffix[k0]
        if norm <= 0:
            return [0.0] * len(self.points)
        return [0.0] * k0 + [p / norm for p in self.probs[k0:]]


@dataclass
class Partition:
    key: tuple[Any, ...]
    events: list[Event]
    members: dict[str, list[int]]  # class -> indices into events
    parents: list[list[int]]  # event-level PRIOR graph
    topo: list[int]  # a topological order of it
    prior: bool  # the query has PRIOR constraints


def _times(series: pd.Series, what: str) -> tuple[list[Any], str | None]:
    """A time column as numbers (nanoseconds for timestamps; None when missing) and its
    kind ('timestamp', 'number', or None when it is entirely missing)."""
    if pd.api.types.is_datetime64_any_dtype(series.dtype):
        return datetime_ns(series), "timestamp"
    if pd.api.types.is_numeric_dtype(series.dtype) and not pd.api.types.is_bool_dtype(
            series.dtype):
        return column_values(series), "number"
    if series.isna().all():
        return [None] * len(series), None
    raise ValueError(f"UNCERTAIN TIME: column {what} {series.name!r} must hold timestamps or "
                     f"numbers, not {series.dtype}")


def _duration(lit: ast.IntervalLiteral | ast.Literal, kind: str) -> Any:
    """An interval or bare number in the time unit of ``kind`` (ns for timestamps; a bare
    number is seconds for timestamps, as WITHIN reads it)."""
    if isinstance(lit, ast.IntervalLiteral):
        td = interval_value(lit)
        if kind == "timestamp":
            return int(td.value)
        seconds = td.total_seconds()
        return int(seconds) if float(seconds).is_integer() else seconds
    value = lit.value
    if kind == "timestamp":
        return int(round(float(value) * 1e9))  # type: ignore[arg-type]
    return value


def _row_name(row: int, ids: list[Any] | None) -> str:
    return f"row {row}" if ids is None else f"row {row} (id {ids[row]!r})"


def _points(lower: Any, upper: Any, step: Any, max_points: int, name: str) -> list[Any]:
    if lower > upper:
        raise ValueError(f"UNCERTAIN TIME: {name} has LOWER {lower!r} > UPPER {upper!r}")
    span = upper - lower
    if isinstance(span, int) and isinstance(step, int):
        n = span // step + 1
    else:
        n = math.floor(span / step + _STEP_EPS) + 1
    if n > max_points:
        raise ValueError(f"UNCERTAIN TIME: {name} has {n} possible times (more than "
                         f"max_points={max_points}); use a coarser GRANULARITY or raise "
                         "max_points")
    return [lower + k * step for k in range(n)]


def _pmf(value: Any, n: int, name: str) -> list[float]:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return [1.0 / n] * n
    try:
        probs = [float(v) for v in value]
    except (TypeError, ValueError):
        raise ValueError(f"UNCERTAIN TIME: {name}: the PMF must be an array of numbers, not "
                         f"{value!r}") from None
    if len(probs) != n:
        raise ValueError(f"UNCERTAIN TIME: {name}: the PMF has {len(probs)} values but the "
                         f"event has {n} possible times")
    if any(not math.isfinite(p) or p < 0 for p in probs):
        raise ValueError(f"UNCERTAIN TIME: {name}: the PMF has a negative or non-finite value")
    total = math.fsum(probs)
    if abs(total - 1.0) > _PMF_EPS:
        raise ValueError(f"UNCERTAIN TIME: {name}: the PMF sums to {total!r}, not 1")
    return [p / total for p in probs]


def _topological(n: int, parents: list[list[int]], key: tuple[Any, ...],
                 rows: list[int]) -> list[int]:
    children: list[list[int]] = [[] for _ in range(n)]
    indegree = [len(p) for p in parents]
    for child, ps in enumerate(parents):
        for p in ps:
            children[p].append(child)
    ready = [i for i in range(n) if indegree[i] == 0]
    order: list[int] = []
    while ready:
        node = ready.pop()
        order.append(node)
        for c in children[node]:
            indegree[c] -= 1
            if indegree[c] == 0:
                ready.append(c)
    if len(order) < n:
        stuck = sorted(rows[i] for i in range(n) if indegree[i] > 0)
        raise ValueError(f"UNCERTAIN TIME: in partition {key}, the PRIOR constraints form a "
                         f"cycle among events (rows {stuck[:10]}): events in several classes "
                         "must each come before the other")
    return order


@dataclass
class Data:
    partitions: list[Partition]
    ids: list[Any] | None
    kind: str
    window: Any | None
    partition_columns: list[str]
    measures: Measures


def prepare(q: CompiledQuery, plan: UncertainPlan, df: pd.DataFrame, id_column: str | None,
             max_points: int) -> Data:
    columns = tuple(str(c) for c in df.columns)
    sets = {name: frozenset([i]) for i, name in enumerate(plan.classes)}
    scope = Scope(columns, sets, "MEASURES")
    m = q.match
    u = plan.clause
    partition_cols = [scope.column(c) for c in m.partition_by]
    order_col = scope.column(plan.order)
    lower_col, upper_col = scope.column(u.lower), scope.column(u.upper)
    pmf_col = scope.column(u.pmf) if u.pmf is not None else None
    ids = None
    if id_column is not None:
        if id_column not in columns:
            raise ValueError(f"id_column {id_column!r} is not a column of the input")
        ids = column_values(df[id_column])
    order, kind = _times(df[order_col], "ORDER BY")
    lower, lkind = _times(df[lower_col], "LOWER")
    upper, ukind = _times(df[upper_col], "UPPER")
    kind = kind or lkind or ukind or "number"
    for k, what in ((lkind, "LOWER"), (ukind, "UPPER")):
        if k is not None and k != kind:
            raise ValueError(f"UNCERTAIN TIME: the {what} column holds {k}s but ORDER BY holds "
                             f"{kind}s")
    step = _duration(u.granularity, kind) if u.granularity is not None else (
        10**9 if kind == "timestamp" else 1)
    if not step > 0:
        raise ValueError("UNCERTAIN TIME: GRANULARITY must be positive")
    window = _duration(plan.within, kind) if plan.within is not None else None
    masks: dict[str, np.ndarray] = {}
    for name in plan.classes:
        if name in plan.defines:
            cscope = Scope(columns, sets, "DEFINE", name)
            masks[name] = evaluate_condition(plan.defines[name], df, cscope)
        else:
            masks[name] = np.ones(len(df), dtype=bool)
    relevant = np.zeros(len(df), dtype=bool)
    for mask in masks.values():
        relevant |= mask
    pmfs = df[pmf_col].tolist() if pmf_col is not None else [None] * len(df)
    keys = list(zip(*[column_values(df[c]) for c in partition_cols], strict=True)) if (
        partition_cols) else [()] * len(df)
    by_key: dict[tuple[Any, ...], list[int]] = {}
    for row in np.flatnonzero(relevant).tolist():
        by_key.setdefault(tuple(keys[row]), []).append(row)
    partitions = []
    for key in sorted(by_key, key=sort_key):
        events = []
        for row in by_key[key]:
            name = _row_name(row, ids)
            if lower[row] is not None and upper[row] is not None:
                points = _points(lower[row], upper[row], step, max_points, name)
            elif order[row] is not None:
                points = [order[row]]
            else:
                raise ValueError(f"UNCERTAIN TIME: {name} has no interval and no ORDER BY "
                                 "value")
            probs = _pmf(pmfs[row], len(points), name)
            suffix = list(itertools.accumulate(reversed(probs)))[::-1] + [0.0]
            classes = frozenset(c for c in plan.classes if masks[c][row])
            events.append(Event(row, points, probs, classes, suffix))
        members = {c: [i for i, e in enumerate(events) if c in e.classes] for c in plan.classes}
        parent_sets: list[set[int]] = [set() for _ in events]
        for x_class, y_class in plan.prior:
            for y in members[y_class]:
                parent_sets[y].update(x for x in members[x_class] if x != y)
        parents = [sorted(p) for p in parent_sets]
        topo = _topological(len(events), parents, key, [e.row for e in events])
        partitions.append(Partition(key, events, members, parents, topo, bool(plan.prior)))
    return Data(partitions, ids, kind, window, partition_cols,
                 Measures(plan, df, columns))


def sort_key(key: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple((v is None, "" if v is None else v) for v in key)

