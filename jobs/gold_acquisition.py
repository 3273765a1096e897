"""Gold for acquisition queries (seed 003, ``acquisition = "plan"``; docs/acquisition.md).

Per batch, over the keys the batch touched and the time interval its events can share a
match with (``[first - window, last + window]``), the driver

1. takes the plan: planned (``cep_core.planning``) from the newest statistics run in
   ``gold.statistics`` (arrival rates per event type, keys per window) and kept until the
   statistics ``run_id`` changes (then re-planned; a batch under an unchanged run reuses
   it); ``all`` and ``frequency`` are the baselines. A retention guard fails when silver's
   Delta log or deleted-file retention is shorter than the window plus the plan's latency;
2. runs it through ``cep_core.live_archive.acquire``: each step is one Delta range read of
   silver at the pinned version (the step's event types, per key the intervals where a
   match is still possible, pushed down as a type/time/key filter so data skipping opens
   only the files that can hold them), the next step planned from the rows read;
3. detects the complex events over the rows read (``cep_core.planning.complex_events``)
   and records the plan, its predicted rows (executor semantics,
   ``cep_core.planning.expected_reads``) and the rows and files actually read in
   ``gold.acquisition_plans``.
"""

from __future__ import annotations

import json
import math
import operator
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import reduce
from typing import Any

import numpy as np
import pandas as pd

from lakecep import schemas
from lakecep.config import Settings
from lakecep.queries import AcquisitionQuery

from .archive import TIME, ScanMetrics, scan_metrics
from .gold_rows import empty_columns, gold_frame, match_id, time_ns
from .streaming import log
from .tables import DEFAULT_RETENTION, LakeTable, retention_seconds

TABLE = "gold.acquisition_plans"
#: Regions are widened by this many seconds: float rounding never drops a boundary event.
PAD_SECONDS = 1e-3


class RetentionError(RuntimeError):
    """Silver's Delta retention is shorter than a plan needs (message says what to change)."""


def check_retention(query_id: str, table: str, properties: dict[str, str],
                    window_seconds: float, latency_seconds: float) -> None:
    """Fail (one line) when ``table`` keeps its log or deleted files for less than the
    window plus the plan latency: a plan reads at a pinned version for that long."""
    need = window_seconds + latency_seconds
    for name, default in DEFAULT_RETENTION.items():
        text = properties.get(name, default)
        if retention_seconds(text) < need:
            raise RetentionError(
                f"acquisition query {query_id!r}: {table} {name} = {text!r} is shorter than "
                f"window {window_seconds:g}s + plan latency {latency_seconds:g}s = {need:g}s; "
                f"raise {name} on {table} (ALTER TABLE ... SET TBLPROPERTIES) or shorten the "
                "window / latency bound")


@dataclass
class PlanState:
    """The plan in force for one query and the statistics run it came from."""

    run_id: str | None
    plan: Any  # cep_core.planning.AcquisitionPlan
    stats: Any  # cep_core.planning.Statistics (per-key rates, the statistics window)
    reason: str


@dataclass
class AcquisitionPlans:
    """Plans kept across micro-batches (re-planned only when the statistics run changes)."""

    states: dict[str, PlanState] = field(default_factory=dict)
    plannings: int = 0


def newest_statistics(spark, settings: Settings, query: AcquisitionQuery  # noqa: ANN001
                      ) -> tuple[str, dict[str, float], int, float] | None:
    """(run_id, events per second per event type, keys, window seconds) of the newest
    statistics run, or None when there is none."""
    from pyspark.sql import functions as F

    table = LakeTable(spark, settings, "gold.statistics")
    if not table.exists():
        return None
    stats = table.read()
    newest = stats.orderBy(F.col("computed_at").desc()).select("run_id").first()
    if newest is None:
        return None
    run_id = newest[0]
    rows = stats.where((F.col("run_id") == run_id) & (
        ((F.col("kind") == "arrival_rate") & (F.col("side") == "event_type"))
        | ((F.col("kind") == "keys") & (F.col("query_id") == query.id)))).toPandas()
    rates = {str(r.subject): float(r.value) for r in rows.itertuples()
             if r.kind == "arrival_rate"}
    keys = rows.loc[rows["kind"] == "keys", "value"]
    first = rows.iloc[0] if len(rows) else None
    window = (float((first.window_end - first.window_start).total_seconds())
              if first is not None and first.window_end is not None else 3600.0)
    return run_id, rates, int(keys.iloc[0]) if len(keys) else 1, max(window, 1.0)


def statistics_of(query: AcquisitionQuery, rates: dict[str, float], keys: int,
                  horizon: float):  # noqa: ANN201 - cep_core.planning.Statistics
    """Per-key Poisson rates of the pattern's types (a type never seen gets a tiny rate)."""
    from cep_core.planning import Statistics, primitive_types

    types = primitive_types(query.parsed())
    floor = 1e-9
    return Statistics.poisson({t: max(rates.get(t, 0.0) / max(keys, 1), floor)
                               for t in types}, horizon, max(keys, 1))


def every_type(model):  # noqa: ANN001, ANN201 - NodeModel -> AcquisitionPlan
    """The baseline: one step reading every type of the pattern (negated ones included) over
    the whole horizon."""
    from cep_core.planning import AcquisitionPlan

    items = [*model.items, *model.negated]
    labels = tuple(i.label for i in model.items) + tuple(f"!{i.label}" for i in model.negated)
    cost = model.stats.keys * model.stats.horizon * sum(i.dist.rate for i in items)
    latency = max(i.options[0].latency for i in items)
    return AcquisitionPlan(model.label, (labels,), cost, latency)


def choose_plan(query: AcquisitionQuery, stats, acquisition: str):  # noqa: ANN001, ANN201
    """The plan of ``acquisition`` (plan / all / frequency) under ``stats`` and why."""
    from cep_core.planning import LatencyModel, Planner, choose, frequency_order

    pattern = query.parsed()
    planner = Planner(stats, LatencyModel(step_delay=query.step_delay.total_seconds()))
    model = planner.node_model(pattern)
    if acquisition == "all":
        return every_type(model), "pull everything: one step reading every type"
    if acquisition == "frequency":
        return frequency_order(model), "frequency order: one type per step, rarest first"
    bound = None if query.latency_bound is None else query.latency_bound.total_seconds()
    return choose(planner.plans(pattern), bound), (
        f"cheapest plan within latency {bound if bound is not None else 'unbounded'}s")


def plan_for(spark, settings: Settings, query: AcquisitionQuery, plans: AcquisitionPlans,  # noqa: ANN001
             acquisition: str, silver: LakeTable) -> tuple[PlanState, bool]:
    """The plan in force and whether it was (re-)planned now."""
    found = newest_statistics(spark, settings, query)
    run_id = None if found is None else found[0]
    state = plans.states.get(query.id)
    if state is None and found is not None:  # a restarted job keeps the recorded plan
        state = recorded_plan(spark, settings, query, acquisition, found)
        if state is not None:
            plans.states[query.id] = state
    if state is not None and state.run_id == run_id:
        return state, False
    if found is None:
        stats = statistics_of(query, {}, 1, 3600.0)
        plan, why = choose_plan(query, stats, "all")
        why = "no statistics yet: " + why
    else:
        stats = statistics_of(query, found[1], found[2], found[3])
        plan, why = choose_plan(query, stats, acquisition)
    check_retention(query.id, silver.name, silver.retention(), query.window_seconds,
                    plan.latency)
    state = PlanState(run_id, plan, stats, why)
    plans.states[query.id] = state
    plans.plannings += 1
    log(f"gold acquisition: {query.id}: planned from statistics run {run_id}: {plan} ({why})")
    return state, True


def recorded_plan(spark, settings: Settings, query: AcquisitionQuery, acquisition: str,  # noqa: ANN001
                  found: tuple[str, dict[str, float], int, float]) -> PlanState | None:
    """The plan of the newest ``gold.acquisition_plans`` row of this query (same version
    and acquisition), if it was planned from the statistics run ``found`` names."""
    from pyspark.sql import functions as F

    from cep_core.planning import AcquisitionPlan

    table = LakeTable(spark, settings, TABLE)
    if not table.exists():
        return None
    row = (table.read().where((F.col("query_id") == query.id)
                              & (F.col("query_version") == query.version)
                              & (F.col("acquisition") == acquisition))
           .orderBy(F.col("batch_id").desc()).first())
    if row is None or row.statistics_run_id != found[0]:
        return None
    steps = tuple(tuple(x.strip() for x in part.strip().strip("{}").split(","))
                  for part in row.plan.split("->"))
    stats = statistics_of(query, found[1], found[2], found[3])
    plan = AcquisitionPlan(str(query.parsed()), steps, float("nan"), row.plan_latency_seconds)
    return PlanState(found[0], plan, stats, f"{row.reason} (kept from batch {row.batch_id})")


class DeltaSteps:
    """The store ``cep_core.live_archive.acquire`` reads from: silver at a pinned version.
    Times are seconds after ``origin`` (int ns); each step is one Spark read whose filter
    Spark pushes into the Delta scan -- the step's types, the union of its intervals over
    all keys (merged, at most ``max_ranges`` ranges: the smallest gaps are closed first) and
    the keys -- so data skipping opens only files whose (event_type, event_time) ranges can
    hold rows of the step; then a broadcast semi-join keeps the exact per-key intervals."""

    def __init__(self, spark, history, query: AcquisitionQuery, origin: int,  # noqa: ANN001, PLR0913
                 columns: list[str], max_ranges: int = 64):
        self.spark, self.history, self.query, self.origin = spark, history, query, origin
        self.columns = columns
        self.metrics = ScanMetrics()
        self.files_per_step: list[int] = []
        self.type_column = query.type_column
        self.max_ranges = max_ranges

    def _ns(self, seconds: float, up: bool) -> int:
        """``origin + seconds`` in ns, rounded outwards to Spark's microseconds."""
        ns = self.origin + int(math.ceil(seconds * 1e9) if up else math.floor(seconds * 1e9))
        return -(-ns // 1000) * 1000 if up else ns // 1000 * 1000

    def load_step(self, loads) -> pd.DataFrame:  # noqa: ANN001 - tuple of cep_core Loads
        from pyspark.sql import functions as F

        key, kind = self.query.key, self.query.type_column
        types = sorted({t for ld in loads for t in (ld.event_types or ())})
        lo = min(self._ns(ld.lo, False) for ld in loads)
        hi = max(self._ns(ld.hi, True) for ld in loads)
        rows = self.history.where(
            F.col(kind).isin(types) & (F.col(TIME) >= _ts(lo)) & (F.col(TIME) < _ts(hi)))
        spans = coarse_ranges([(self._ns(ld.lo, False), self._ns(ld.hi, True))
                               for ld in loads], self.max_ranges)
        if len(spans) > 1:  # the union of the intervals, for Delta's data skipping
            rows = rows.where(reduce(operator.or_, [
                (F.col(TIME) >= _ts(a)) & (F.col(TIME) < _ts(b)) for a, b in spans]))
        if all(ld.keys is not None for ld in loads):
            keys = sorted({str(k) for ld in loads for k in ld.keys or ()})
            rows = rows.where(F.col(key).isin(keys))
            ranges = pd.DataFrame(
                [(str(k), t, self._ns(ld.lo, False), self._ns(ld.hi, True))
                 for ld in loads for k in ld.keys or () for t in ld.event_types or ()],
                columns=["_k", "_type", "lo", "hi"])
            if len(ranges) > 1:
                frame = self.spark.createDataFrame(ranges, "_k STRING, _type STRING, lo LONG, "
                                                   "hi LONG")
                t = F.unix_micros(F.col(TIME)) * 1000
                rows = rows.join(F.broadcast(frame), (F.col(key) == F.col("_k"))
                                 & (F.col(kind) == F.col("_type")) & (t >= F.col("lo"))
                                 & (t < F.col("hi")), "left_semi")
        rows = rows.select(*self.columns)
        got = rows.toPandas()
        metrics = scan_metrics(rows)
        self.metrics.add(metrics)
        self.files_per_step.append(metrics.files_read)
        got["_t"] = (np.asarray(time_ns(got[TIME]), dtype=np.int64) - self.origin) / 1e9 if len(
            got) else pd.Series(dtype=float)
        return got


def coarse_ranges(spans: list[tuple[int, int]], limit: int) -> list[tuple[int, int]]:
    """The union of ``spans`` as at most ``limit`` ranges (closing the smallest gaps)."""
    merged: list[list[int]] = []
    for lo, hi in sorted(spans):
        if merged and lo <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], hi)
        else:
            merged.append([lo, hi])
    while len(merged) > max(limit, 1):
        gaps = [merged[i + 1][0] - merged[i][1] for i in range(len(merged) - 1)]
        cut = min(range(len(gaps)), key=gaps.__getitem__)
        merged[cut][1] = merged.pop(cut + 1)[1]
    return [(a, b) for a, b in merged]


def _ts(ns: int):  # noqa: ANN202
    from pyspark.sql import functions as F

    return F.lit(pd.Timestamp(ns, unit="ns").to_pydatetime())


def acquisition_rows(spark, settings: Settings, query: AcquisitionQuery, new_events,  # noqa: ANN001, PLR0913
                     history, version: int, batch_id: int, detected: datetime,
                     plans: AcquisitionPlans, acquisition: str | None = None
                     ) -> tuple[Any, dict[str, Any] | None]:
    """Gold rows of one acquisition query for one batch and its ``gold.acquisition_plans``
    record (None when the batch has no event of the pattern's types)."""
    from pyspark.sql import functions as F

    from cep_core.live_archive import acquire
    from cep_core.planning import complex_events, expected_reads, next_steps, primitive_types

    started = time.perf_counter()
    pattern = query.parsed()
    types = primitive_types(pattern)
    touched = (new_events.where(F.col(query.type_column).isin(types))
               .groupBy(query.key).agg(F.min(TIME).alias("lo"), F.max(TIME).alias("hi"))
               .toPandas())
    if touched.empty:
        return None, None
    window = timedelta(seconds=query.window_seconds)
    origin = int(pd.Timestamp(touched["lo"].min() - window).value)
    end = int(pd.Timestamp(touched["hi"].max() + window).value)
    horizon = (end - origin) / 1e9
    keys = sorted(str(k) for k in touched[query.key])
    silver = LakeTable(spark, settings, "silver.events")
    state, replanned = plan_for(spark, settings, query, plans, acquisition or query.acquisition,
                                silver)
    columns = ["event_id", query.key, query.type_column, TIME, "ingest_time"]
    store = DeltaSteps(spark, history, query, origin, list(dict.fromkeys(columns)))
    got = acquire(len(state.plan.steps),
                  next_steps(pattern, state.plan, 0.0, horizon, query.key, "_t",
                             query.type_column, keys, PAD_SECONDS),
                  store, state.reason)
    found = complex_events(pattern, got.rows, query.key, "_t", query.type_column, "event_id")
    from cep_core.planning import Statistics

    batch_stats = Statistics(state.stats.types, horizon, len(keys))
    predicted = expected_reads(pattern, state.plan, batch_stats, replications=200)
    out = empty_columns()
    ingest = dict(zip(got.rows["event_id"], time_ns(got.rows["ingest_time"]), strict=True)
                  ) if len(got.rows) else {}
    numbers: dict[Any, int] = {}
    for event in found:
        ids = [str(i) for i in event.ids]
        numbers[event.key] = numbers.get(event.key, 0) + 1
        out["match_id"].append(match_id(query.id, ids))
        out["partition_key"].append(str(event.key))
        out["match_number"].append(numbers[event.key])
        out["start_time"].append(origin + round(event.start * 1e9))
        out["end_time"].append(origin + round(event.end * 1e9))
        out["measures"].append({"pattern": query.pattern})
        out["live_event_ids"].append(ids)
        out["archive_event_ids"].append([])
        out["history_version"].append(version)
        out["strategy"].append(f"acquisition:{acquisition or query.acquisition}")
        out["probability"].append(None)
        out["batch_id"].append(batch_id)
        out["_ingest"].append(max(ingest[i] for i in event.ids))
    frame = gold_frame(out, pd.Timestamp(detected).tz_localize(None), query)
    from .gold_rows import GOLD_DDL

    rows = spark.createDataFrame(frame, GOLD_DDL)
    record = {
        "query_id": query.id, "query_version": query.version, "batch_id": batch_id,
        "history_version": version, "statistics_run_id": state.run_id,
        "acquisition": acquisition or query.acquisition, "reason": state.reason,
        "plan": " -> ".join("{" + ", ".join(s) + "}" for s in state.plan.steps),
        "replanned": replanned, "steps": len(state.plan.steps),
        "plan_latency_seconds": float(state.plan.latency),
        "latency_bound_seconds": (None if query.latency_bound is None
                                  else query.latency_bound.total_seconds()),
        "keys": len(keys), "horizon_seconds": horizon,
        "predicted_rows": float(sum(predicted)),
        "predicted_rows_per_step": json.dumps([round(x, 2) for x in predicted]),
        "rows_read": int(sum(got.rows_per_step)),
        "rows_read_per_step": json.dumps(got.rows_per_step),
        "loads": sum(len(s) for s in got.plan.steps),
        "delta_files_read": store.metrics.files_read,
        "delta_files_total": len(history.inputFiles()),
        "delta_files_per_step": json.dumps(store.files_per_step),
        "complex_events": len(found), "seconds": time.perf_counter() - started,
    }
    return rows, record


def record_plans(spark, settings: Settings, records: list[dict[str, Any]],  # noqa: ANN001
                 detected: datetime) -> None:
    """Upsert the batch's rows of ``gold.acquisition_plans`` (one per acquisition query)."""
    from delta.tables import DeltaTable

    if not records:
        return
    table = LakeTable(spark, settings, TABLE).ensure()
    stamp = pd.Timestamp(detected).tz_localize(None)
    frame = pd.DataFrame([{**r, "detection_time": stamp} for r in records])
    frame = frame[schemas.columns(TABLE)].astype(object)
    rows = spark.createDataFrame(frame.where(frame.notna(), None),
                                 schemas.ddl(TABLE).replace(" NOT NULL", ""))
    (
        DeltaTable.forPath(spark, table.path).alias("t")
        .merge(rows.alias("s"), "t.query_id = s.query_id AND t.batch_id = s.batch_id")
        .whenMatchedUpdateAll()
        .whenNotMatchedInsertAll()
        .execute()
    )
