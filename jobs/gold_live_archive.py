"""Gold for ``live_archive`` queries: a live pattern joined with a pattern over the key's past.

Per batch: the live step runs the live pattern incrementally (partial matches kept in
``gold.partial_matches``, :mod:`lakecep.jobs.live_step`); the driver plans the archive reads
for the live matches with the query's strategy (ALAA, LLAA, OLLAA, SLLAA or auto; ``docs/
live-archive.md``); the reads are served from the RBuffer or silver history at the pinned
version (:mod:`lakecep.jobs.archive`); and the archive pattern runs there, joined on the key
(a cogroup per bucket of keys). Each batch's access record goes to ``gold.archive_access``.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

import pandas as pd

from lakecep import schemas
from lakecep.config import Settings
from lakecep.queries import LiveArchiveQuery
from lakecep.tuning import transitions_for

from .archive import RecentBuffer, read_ranges, rows_per_loads
from .gold_rows import (
    BUCKET,
    GOLD_DDL,
    bucketed,
    empty_columns,
    gold_frame,
    match_id,
    measures,
    read_only,
    time_ns,
)
from .live_step import LiveStep, find_live
from .tables import LakeTable


def archive_joiner(
    query: LiveArchiveQuery, strategy: str, version: int, batch_id: int, detected: datetime
) -> Callable[[pd.DataFrame, pd.DataFrame], pd.DataFrame]:
    """cogroup function: a key bucket's live matches x the archive rows read for them ->
    gold rows. Each live match's RA is cut out of its key's rows and PA run there (one
    engine call for all of them); under ALAA with a range-local archive pattern, PA runs
    once over everything read and matches join by containment (the paper's ALAA)."""
    import pickle

    from cep_core.live_archive import detect_in_ranges, join_active, range_local

    detected_ts = pd.Timestamp(detected).tz_localize(None)

    def run(live: pd.DataFrame, rows: pd.DataFrame) -> pd.DataFrame:
        out = empty_columns()
        if live.empty or rows.empty:
            return gold_frame(out, detected_ts, query)
        spec = query.spec()
        instances = [pickle.loads(b) for b in live["instance"]]
        ingest = time_ns(live["live_ingest"])
        rows = rows.drop(columns=[BUCKET]).reset_index(drop=True)
        served = range(len(instances))
        if strategy == "alaa" and range_local(spec.archive):
            joined = join_active(spec, instances, served, rows)
        else:
            joined = detect_in_ranges(spec, instances, served, rows)
        position = {id(inst): n for n, inst in enumerate(instances)}
        for j in joined:
            n = position[id(j.live)]
            own = [str(i) for i in j.live.ids]
            ids = [str(i) for i in j.archive_ids]
            start = j.live.start if j.archive_start is None else min(j.archive_start,
                                                                      j.live.start)
            out["match_id"].append(match_id(query.id, own, ids))
            out["partition_key"].append(str(j.live.key))
            out["match_number"].append(j.number)
            out["start_time"].append(int(start))
            out["end_time"].append(int(j.live.end))
            out["measures"].append(measures(j.measures))
            out["live_event_ids"].append(own)
            out["archive_event_ids"].append(ids)
            out["history_version"].append(version)
            out["strategy"].append(strategy)
            out["probability"].append(None)
            out["batch_id"].append(batch_id)
            out["_ingest"].append(ingest[n])
        return gold_frame(out, detected_ts, query)

    return run


def live_archive_rows(spark, settings: Settings, query: LiveArchiveQuery, new_events,  # noqa: ANN001, PLR0913
                      history, version: int, batch_id: int, detected: datetime, buckets: int,
                      strategy: str, rbuffer: RecentBuffer | None,
                      tuned: dict[str, Any] | None = None,
                      new_rows: int | None = None) -> tuple[Any, dict[str, Any], LiveStep]:
    """Live step (Spark, stored partial matches) -> plan (driver, cep_core) -> archive
    reads (RBuffer, then Delta with data skipping) -> join (Spark). Returns the gold rows,
    the access record and the live step. ``tuned``: the query's entry of the tuned
    configuration (STPM transitions, archive selectivity, tolerated latency TL);
    ``new_rows``: how many rows ``new_events`` has, if known (None: counted if needed)."""
    from pyspark.sql import functions as F

    from cep_core.live_archive import (
        LiveInstance,
        Selectivity,
        make_plan,
        resolve,
        sample_selectivity,
    )

    started = time.perf_counter()
    spec, key = query.spec(), query.key
    tuned = tuned or {}
    step = find_live(spark, settings, query, new_events, history, batch_id,
                     transitions_for({"queries": {query.id: tuned}}, query.id))
    if step.stats["late_rows"]:  # every key with an old or tied event is replayed
        raise RuntimeError(f"{query.id}: the live step dropped {step.stats['late_rows']} "
                           "rows as out of order; this is a bug in the replay rule, "
                           "please report it (no gold rows were written for this batch)")
    # the archive side reads only what the archive pattern and the join use
    (history,) = read_only([history], spec.archive, key, spec.time, spec.id_column)
    live = step.live
    light = live.select("key", "lo", "hi", "live_start", "live_end").toPandas()
    light = light.sort_values(["live_end", "live_start"], kind="stable")
    instances = [LiveInstance(k, s, e, lo, hi) for k, s, e, lo, hi in zip(
        light["key"], light["live_start"], light["live_end"], light["lo"], light["hi"],
        strict=True)]

    # 'auto' and OLLAA weigh the live selectivity (this batch) against the archive's: the
    # statistics job's figure from the tuned configuration, else a sample of the batch's
    # keys' history. SLLAA's TL: the tuned one (the query's minus the live stream's
    # expected latency) when there is one.
    plan_settings = query.settings(archive_selectivity=tuned.get("archive_selectivity"))
    if tuned.get("tolerated_latency_seconds") is not None:
        plan_settings = dataclasses.replace(plan_settings, tolerated_latency=pd.Timedelta(
            seconds=tuned["tolerated_latency_seconds"]))

    def live_selectivity() -> Selectivity:
        new_count = new_rows if new_rows is not None else new_events.count()
        return Selectivity(len(instances) / max(new_count, 1), f"batch of {new_count}")

    def archive_sample() -> Selectivity:
        sample_keys = [r[0] for r in new_events.select(key).distinct().limit(50).collect()]
        sample = history.where(F.col(key).isin(sample_keys)).limit(plan_settings.sample_rows)
        return sample_selectivity(spec.archive, sample.toPandas(), key,
                                  plan_settings.sample_rows)

    plan_settings = dataclasses.replace(plan_settings,
                                        bulk_matches=settings.live_archive_bulk_matches or None)
    strategy, drive, reason = resolve(spec, strategy, plan_settings, live_selectivity,
                                      archive_sample, len(instances))
    plan = make_plan(spec, strategy, instances, plan_settings, reason, drive)

    loads = pd.DataFrame(
        [(k, load.lo, load.hi) for load in plan.loads for k in (load.keys or (None,))],
        columns=["key", "lo", "hi"])
    in_buffer = (loads["lo"].map(rbuffer.covers) if rbuffer is not None and len(loads)
                 else pd.Series(False, index=loads.index)).astype(bool)
    delta_rows, metrics = read_ranges(spark, history, loads[~in_buffer], key,
                                      list(history.columns))
    parts = [] if delta_rows is None else [delta_rows]
    buffered = 0
    if in_buffer.any():
        assert rbuffer is not None
        found = rbuffer.rows_for(loads[in_buffer], key)[list(history.columns)]
        buffered = len(found)
        if buffered:
            parts.append(spark.createDataFrame(found, schema=history.schema))
    rows = parts[0] if parts else history.limit(0)
    for part in parts[1:]:
        rows = rows.unionByName(part)
    rows = rows.dropDuplicates(["event_id"])
    gold_rows = bucketed(live, ["key"], buckets).groupBy(BUCKET).cogroup(
        bucketed(rows, [key], buckets).groupBy(BUCKET)
    ).applyInPandas(archive_joiner(query, strategy, version, batch_id, detected), GOLD_DDL)
    record = {
        "query_id": query.id, "query_version": query.version, "batch_id": batch_id,
        "history_version": version, "strategy": strategy,
        "reason": plan.reason or strategy, "live_matches": len(instances),
        "loads": len(plan.loads), "buffer_loads": int(in_buffer.sum()),
        "rows_loaded": rows_per_loads(spark, delta_rows, loads[~in_buffer], key) + buffered,
        "rows_from_buffer": buffered, "delta_files_read": metrics.files_read,
        "delta_files_total": metrics.files_total, "delta_rows_scanned": metrics.rows_scanned,
        "seconds": time.perf_counter() - started,
        **{f"partial_{n}": step.stats[n] for n in ("hits", "misses", "open_misses",
                                                    "new_keys", "spilled")},
        "replayed_keys": step.stats["replayed"],
    }
    return gold_rows, record, step


def check_live_columns(schema, queries: Sequence[LiveArchiveQuery]) -> None:  # noqa: ANN001
    """The stored live state is keyed by the join key as text and by event time: the key
    must be a string column, the live pattern ordered by a timestamp."""
    types = {f.name.lower(): f.dataType.simpleString() for f in schema.fields}
    for query in queries:
        kind = types.get(query.key.lower())
        if kind != "string":
            raise ValueError(f"live-archive query {query.id!r}: join key {query.key!r} is "
                             f"{kind or 'not a silver column'}; it must be a string column "
                             "(declare an attribute key as string in [attributes])")
        time_kind = types.get(query.spec().time.lower())
        if time_kind != "timestamp":
            raise ValueError(f"live-archive query {query.id!r}: ORDER BY "
                             f"{query.spec().time!r} is {time_kind}; live-archive queries "
                             "order by a timestamp column (event_time)")


def record_access(spark, settings: Settings, records: list[dict[str, Any]],  # noqa: ANN001
                  detected: datetime, writer: str) -> None:
    """Append the batch's archive-access rows (one per live-archive query), once: an
    idempotent Delta append keyed by the gold stream's writer id and the batch id, so a
    batch replayed after a crash adds nothing (a MERGE cost a commit of ~2.5 s more per
    batch)."""
    if not records:
        return
    table = LakeTable(spark, settings, "gold.archive_access").ensure()
    stamp = pd.Timestamp(detected).tz_localize(None)
    frame = pd.DataFrame([{**r, "detection_time": stamp} for r in records])
    rows = spark.createDataFrame(frame[schemas.columns("gold.archive_access")],
                                 schemas.ddl("gold.archive_access").replace(" NOT NULL", ""))
    table.append(rows, f"{writer}:archive_access", int(records[0]["batch_id"]),
                 merge_schema=True)  # tables from before the partial_* columns get them
