"""silver + gold -> gold.statistics: what the tuning loop (and OLLAA, STPM) needs to know.

One run measures a window of event time (the last ``statistics_window_seconds`` of silver
at a pinned version) and appends its rows under one ``run_id`` (a re-run of the same id
replaces them):

- ``arrival_rate`` per event_type and per source_id: events per second, with the Poisson
  test of ``cep_core.tuning.statistics.rates_from_counts`` over bins of ``statistics_bin_seconds``
  (the counts per group and bin are aggregated by Spark; only the small count matrix comes
  to the driver);
- per query, on a sample of whole join keys (``statistics_sample_keys``) of the window:
  ``selectivity`` of the pattern and each prefix (live and archive side for live-archive
  queries), ``transition`` p(E_i+1 | E_i) and the largest gap Δt_i, ``stream`` the arrival
  rate of each pattern variable's events, ``cost`` the measured engine seconds per event of
  each stream (timed engine runs on sub-samples, non-negative least squares);
- ``match_ratio`` of live-archive queries (complex events per live match, from
  gold.archive_access) and ``events_per_file`` of silver (for per-trigger rate limits).

Uncertain queries get no per-query rows (their evaluation is not a stream of SEQ events).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pandas as pd

from lakecep import schemas
from lakecep.config import Settings
from lakecep.queries import (
    AcquisitionQuery,
    LiveArchiveQuery,
    PatternQuery,
    QueryDefinition,
    WindowQuery,
    load_queries,
)
from lakecep.rules import inputs_of

from .streaming import log
from .tables import LakeTable, engine_columns

TABLE = "gold.statistics"
NAME = "statistics"


@dataclass
class StatisticsRun:
    run_id: str
    silver_version: int
    window: tuple[datetime, datetime]
    events: int
    rows: int
    seconds: float

    def __str__(self) -> str:
        start, end = (t.isoformat() for t in self.window)
        return (f"statistics run {self.run_id}: {self.rows} rows over {self.events} events of "
                f"[{start}, {end}] (silver version {self.silver_version}), "
                f"{self.seconds:.1f}s")


def _row(kind: str, subject: str, value: float | None, *, query_id: str | None = None,
         side: str | None = None, **extra: Any) -> dict[str, Any]:
    return {"kind": kind, "subject": subject, "value": value, "query_id": query_id,
            "side": side, **extra}


def arrival_rows(window, start_us: int, bins: int, bin_seconds: int) -> list[dict[str, Any]]:  # noqa: ANN001
    """Arrival rates per event_type and source_id over the window's bins (Spark counts)."""
    import numpy as np
    from pyspark.sql import functions as F

    from cep_core.tuning.statistics import rates_from_counts

    binned = window.select(
        "event_type", "source_id",
        F.least(F.floor((F.unix_micros("event_time") - F.lit(start_us))
                        / F.lit(bin_seconds * 1_000_000)), F.lit(bins - 1)).alias("_bin"))
    out = []
    for dimension in ("event_type", "source_id"):
        counts = binned.groupBy(dimension, "_bin").count().toPandas()
        dense: dict[str, Any] = {}
        for subject, part in counts.groupby(dimension):
            values = np.zeros(bins)
            values[part["_bin"].astype(int).to_numpy()] = part["count"].to_numpy()
            dense[str(subject)] = values
        for rate in rates_from_counts(dense, bin_seconds):
            out.append(_row("arrival_rate", rate.subject, rate.rate, side=dimension,
                            events=rate.count, seconds=float(rate.seconds),
                            p_value=rate.p_value, dispersion=rate.dispersion))
    return out


def _time_unit(frame: pd.DataFrame, column: str) -> float:
    """Seconds per unit of an ORDER BY column (timestamps: nanoseconds)."""
    from cep_core.runtime.time_axis import seconds_per_unit

    return seconds_per_unit(frame[column].dtype)


def pattern_rows(query_id: str, side: str, compiled, sample: pd.DataFrame,  # noqa: ANN001
                 rate: float, streams: bool) -> list[dict[str, Any]]:
    """Selectivities of a pattern and its prefixes; with ``streams`` also its transitions,
    per-variable arrival rates and measured per-event costs."""
    from cep_core.incremental.spilling import estimate_transitions
    from cep_core.tuning.statistics import (
        pattern_variables,
        processing_costs,
        selectivities,
        stream_labels,
    )

    n = len(sample)
    out = [_row("selectivity", subject, value, query_id=query_id, side=side, events=n)
           for subject, value in selectivities(compiled, sample).items()]
    if not streams or n == 0:
        return out
    unit = _time_unit(sample, compiled.order_by[0][0]) if compiled.order_by else 1.0
    stats = estimate_transitions(sample, compiled)
    for state, (gap, p) in enumerate(zip(stats.max_gap, stats.probability, strict=True)):
        if state:  # state 0 is "nothing open": always (0, 0)
            out.append(_row("transition", str(state), p, query_id=query_id, side=side,
                            events=n, gap_seconds=gap * unit))
    labels = stream_labels(compiled, sample)
    counts = labels.value_counts()
    variables = pattern_variables(compiled)
    for var in variables:
        out.append(_row("stream", var, rate * counts.get(var, 0) / n, query_id=query_id,
                        side=side, events=int(counts.get(var, 0))))
    costs = processing_costs(compiled.find_matches, sample.assign(_stream=labels), "_stream")
    for var in variables:
        out.append(_row("cost", var, costs.per_event.get(var, 0.0), query_id=query_id,
                        side=side, events=int(counts.get(var, 0)),
                        seconds=costs.residual))
    out.append(_row("cost", "", costs.per_event.get("", 0.0), query_id=query_id, side=side,
                    events=int(counts.get("", 0)), seconds=costs.residual))
    return out


def _partition_keys(query: QueryDefinition) -> list[str]:
    if isinstance(query, LiveArchiveQuery):
        return [query.key]
    return list(query.compiled().partition_by)


def sample_of(window, keys: list[str], count: int, columns: list) -> pd.DataFrame:  # noqa: ANN001
    """Every window row of ``count`` join keys chosen by hash (stable across runs)."""
    from pyspark.sql import functions as F

    if not keys:
        return window.select(*columns).orderBy("event_time").limit(count * 10).toPandas()
    chosen = (window.select(*keys).distinct().orderBy(F.xxhash64(*keys), *keys)
              .limit(count))
    frame = window.join(chosen, keys, "left_semi").select(*columns).toPandas()
    return frame.sort_values([*keys, "event_time", "event_id"]).reset_index(drop=True)


def match_ratio(spark, settings: Settings, query: LiveArchiveQuery) -> dict[str, Any] | None:  # noqa: ANN001
    from pyspark.sql import functions as F

    access = LakeTable(spark, settings, "gold.archive_access")
    if not access.exists():
        return None
    row = (access.read().where((F.col("query_id") == query.id)
                               & (F.col("query_version") == query.version))
           .agg(F.sum("complex_events"), F.sum("live_matches")).first())
    if row is None or not row[1]:
        return None
    return _row("match_ratio", "*", float(row[0]) / float(row[1]), query_id=query.id,
                side="live_archive", events=int(row[1]))


def events_per_file(spark, silver: LakeTable, rows: int) -> dict[str, Any]:  # noqa: ANN001
    files = spark.sql(f"DESCRIBE DETAIL delta.`{silver.path}`").first()["numFiles"]
    return _row("events_per_file", "silver.events", rows / max(int(files or 1), 1),
                events=rows)


def write(spark, settings: Settings, rows: list[dict[str, Any]], run_id: str) -> None:  # noqa: ANN001
    table = LakeTable(spark, settings, TABLE).ensure()
    frame = pd.DataFrame(rows).reindex(columns=schemas.columns(TABLE))
    data = spark.createDataFrame(frame.astype(object).where(frame.notna(), None),
                                 schemas.ddl(TABLE).replace(" NOT NULL", ""))
    escaped = run_id.replace("'", "''")
    (data.write.format("delta").mode("overwrite")
     .option("replaceWhere", f"run_id = '{escaped}'").save(table.path))


def run(spark, settings: Settings, *, run_id: str | None = None,  # noqa: ANN001
        continuous: bool = False, queries: list[QueryDefinition] | None = None,
        ) -> StatisticsRun:
    from pyspark.sql import functions as F

    if continuous:
        raise ValueError("the statistics job is a batch job; schedule it (the lakecep_tuning "
                         "DAG runs it hourly) instead of --continuous")
    started = time.monotonic()
    run_id = run_id or datetime.now(UTC).strftime("manual__%Y%m%dT%H%M%S")
    queries = list(queries if queries is not None else load_queries(settings.queries_dir))
    silver = LakeTable(spark, settings, "silver.events")
    if not silver.exists():
        raise LookupError(f"no silver.events under {settings.lake}: run `lakecep run bronze` "
                          "and `lakecep run silver` first")
    version = silver.version()
    events = silver.as_of(version)
    lo, hi, total = events.agg(F.min("event_time"), F.max("event_time"), F.count("*")).first()
    if not total:
        raise LookupError(f"silver.events (version {version}) is empty: nothing to measure")
    first, end = (pd.Timestamp(t).tz_localize("UTC") for t in (lo, hi))  # session: UTC
    start = max(first, end - pd.Timedelta(seconds=settings.statistics_window_seconds))
    bin_seconds = settings.statistics_bin_seconds
    bins = max(1, math.ceil((end - start).total_seconds() / bin_seconds))
    window = events.where(F.col("event_time") >= F.lit(start.tz_localize(None).to_pydatetime()))
    window = window.persist()
    try:
        count = window.count()
        log(f"{NAME}: silver version {version}, window [{start}, {end}] ({count} events, "
            f"{bins} bins of {bin_seconds}s)")
        rows = arrival_rows(window, int(start.value // 1000), bins, bin_seconds)
        rate = count / (bins * bin_seconds)
        columns = engine_columns(queries)
        samples: dict[tuple[str, ...], pd.DataFrame] = {}
        for query in queries:
            if isinstance(query, AcquisitionQuery):  # plans need the keys per window
                keys = window.select(query.key).distinct().count()
                rows.append(_row("keys", query.key, float(keys), query_id=query.id,
                                 side="acquisition", events=int(keys)))
                continue
            if inputs_of(query):   # a chained rule reads gold, not silver (docs/rules.md)
                log(f"{NAME}: {query.id}: chained rule, arrival rates only")
                continue
            if not isinstance(query, PatternQuery | LiveArchiveQuery):
                kind = "window" if isinstance(query, WindowQuery) else "uncertain"
                log(f"{NAME}: {query.id}: {kind} query, arrival rates only")
                continue
            keys = tuple(_partition_keys(query))
            if keys not in samples:
                samples[keys] = sample_of(window, list(keys), settings.statistics_sample_keys,
                                          columns)
            sample = samples[keys]
            began = time.monotonic()
            if isinstance(query, PatternQuery):
                rows += pattern_rows(query.id, "pattern", query.compiled(), sample, rate,
                                     streams=True)
            else:
                spec = query.spec()
                rows += pattern_rows(query.id, "live", spec.live, sample, rate, streams=True)
                rows += pattern_rows(query.id, "archive", spec.archive, sample, rate,
                                     streams=False)
                ratio = match_ratio(spark, settings, query)
                if ratio:
                    rows.append(ratio)
            log(f"{NAME}: {query.id}: {len(sample)} sampled events of "
                f"{sample[list(keys)].drop_duplicates().shape[0] if keys else 0} keys measured "
                f"in {time.monotonic() - began:.1f}s")
        rows.append(events_per_file(spark, silver, int(total)))
    finally:
        window.unpersist()
    stamp = pd.Timestamp.now(tz="UTC").tz_localize(None)
    common = {"run_id": run_id, "computed_at": stamp, "silver_version": version,
              "window_start": start.tz_localize(None), "window_end": end.tz_localize(None)}
    rows = [{**common, **r} for r in rows]
    write(spark, settings, rows, run_id)
    log(f"{NAME}: wrote {len(rows)} rows to {TABLE} (run {run_id})")
    return StatisticsRun(run_id, version, (start.to_pydatetime(), end.to_pydatetime()),
                         int(count), len(rows), time.monotonic() - started)
