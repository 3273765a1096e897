"""silver -> gold: complex events with lineage, exactly once.

For each silver micro-batch (the newly arrived events) and each shipped query:

- ``pattern`` queries run with cep_core inside Spark, grouped by the query's PARTITION BY
  key, over the whole history of the keys the batch touched (silver read by time travel
  at a pinned version). Late and out-of-order events therefore produce the matches they
  complete; matches already in gold are not written again.
- ``live_archive`` queries run the live pattern incrementally (partial matches kept in
  ``gold.partial_matches``, :mod:`jobs.live_step`), plan the archive reads for the live
  matches with the query's strategy (ALAA, LLAA, OLLAA, SLLAA or auto; ``docs/
  live-archive.md``), serve them from the RBuffer or silver history at the pinned
  version, and run the archive pattern there, joining on the key.

Rows are merged into ``gold.complex_events`` on ``(query_id, match_id)``, where
``match_id`` hashes the query and the ids of its sub-events, so replays after a crash and
re-detections never duplicate a row. The pinned version is recorded in
``history_version``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

import pandas as pd

import schemas
from jobs.archive import RecentBuffer, read_ranges, rows_per_loads
from jobs.live_step import LiveStep, drop_stale, find_live, save_state
from jobs.streaming import StreamRun, log, run_stream
from jobs.tables import LakeTable
from lakecep.config import Settings
from lakecep.queries import (
    LiveArchiveQuery,
    PatternQuery,
    QueryDefinition,
    UncertainQuery,
    load_queries,
)
from lakecep.tuning import load_latest, pool_name, transitions_for

QUERY = "gold_complex_events"
#: Silver columns handed to the engine (queries may refer to any of them).
ENGINE_COLUMNS = [
    "event_id", "object_id", "event_type", "source_id", "event_time",
    "time_lower", "time_upper", "ingest_time",
]
GOLD_DDL = schemas.ddl("gold.complex_events").replace(" NOT NULL", "")
PROBABILISTIC = "gold.probabilistic_events"
PROBABILISTIC_DDL = schemas.ddl(PROBABILISTIC).replace(" NOT NULL", "")
BUCKET = "_bucket"


@lru_cache(maxsize=64)
def _compiled(query: str):  # noqa: ANN202 - cep_core.CompiledQuery, cached per worker
    import cep_core

    return cep_core.compile_query(query)


def match_id(query_id: str, *id_groups: Sequence[str]) -> str:
    text = query_id + "".join("|" + ",".join(ids) for ids in id_groups)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _text(value: Any) -> str | None:
    if value is None or (not isinstance(value, str) and pd.isna(value)):
        return None
    if isinstance(value, pd.Timestamp | datetime):
        return pd.Timestamp(value).isoformat()
    return str(value)


def _measures(values: dict[str, Any]) -> dict[str, str | None]:
    return {name.lower(): _text(value) for name, value in values.items()}


class _Rows:
    """Per-row lineage columns of one frame as plain lists, so that gathering a match's
    sub-events costs list indexing, not a pandas ``iloc`` per match."""

    def __init__(self, frame: pd.DataFrame) -> None:
        self.ids: list[str] = frame["event_id"].tolist()
        self.times = _ns(frame["event_time"])
        self.ingest = _ns(frame["ingest_time"])

    def gather(self, rows: Sequence[int]) -> tuple[list[str], int | None, int | None, int | None]:
        """Event ids, first and last event time, newest ingest time (ns) of ``rows``."""
        if not rows:
            return [], None, None, None
        times = [self.times[i] for i in rows]
        return ([self.ids[i] for i in rows], min(times), max(times),
                max(self.ingest[i] for i in rows))


def _frame(columns: dict[str, list[Any]], detected: pd.Timestamp) -> pd.DataFrame:
    """Gold rows from column lists; time columns given as int ns (None for missing)."""
    for name in ("start_time", "end_time"):
        columns[name] = pd.to_datetime(pd.array(columns[name], dtype="Int64"), unit="ns")
    latency = pd.array(columns.pop("_ingest"), dtype="Int64")
    columns["detection_latency_ms"] = (detected.value - latency) // 1_000_000
    columns["detection_time"] = pd.to_datetime([detected] * len(latency))
    return _data_frame(columns)[schemas.columns("gold.complex_events")]


def _data_frame(columns: dict[str, Any]) -> pd.DataFrame:
    """Like ``pd.DataFrame(columns)``, but empty list columns stay ``object`` (pandas would
    make them float64, which Arrow cannot turn into Spark's map and array types)."""
    return pd.DataFrame({
        name: pd.Series(values, dtype=object) if isinstance(values, list) and not values
        else values
        for name, values in columns.items()
    })


def _empty_columns() -> dict[str, list[Any]]:
    names = [*schemas.columns("gold.complex_events"), "_ingest"]
    return {n: [] for n in names if n not in ("detection_time", "detection_latency_ms")}


def pattern_matcher(
    query: PatternQuery, version: int, batch_id: int, detected: datetime
) -> Callable[[pd.DataFrame], pd.DataFrame]:
    """applyInPandas function: one bucket of keys' history -> their gold rows.

    The engine partitions by the query's PARTITION BY itself, so one call serves every key
    of the bucket (a call per key would pay pandas' per-call overhead hundreds of
    thousands of times).
    """
    detected_ts = pd.Timestamp(detected).tz_localize(None)

    def run(frame: pd.DataFrame) -> pd.DataFrame:
        frame = frame.drop(columns=[BUCKET]).reset_index(drop=True)
        lineage = _Rows(frame)
        out = _empty_columns()
        for match in _compiled(query.query).find_matches(frame):
            ids, start, end, ingest = lineage.gather(match.rows)
            out["query_id"].append(query.id)
            out["query_version"].append(query.version)
            out["match_id"].append(match_id(query.id, ids))
            out["partition_key"].append("|".join(str(v) for v in match.partition))
            out["match_number"].append(match.match_number)
            out["start_time"].append(start)
            out["end_time"].append(end)
            out["measures"].append(_measures(match.measures))
            out["live_event_ids"].append(ids)
            out["archive_event_ids"].append([])
            out["history_version"].append(version)
            out["strategy"].append("batch")
            out["probability"].append(None)
            out["batch_id"].append(batch_id)
            out["_ingest"].append(ingest)
        return _frame(out, detected_ts)

    return run


def uncertain_matcher(
    query: UncertainQuery, version: int, batch_id: int, detected: datetime
) -> Callable[[pd.DataFrame], pd.DataFrame]:
    """applyInPandas function: one bucket of keys' history -> their probabilistic events
    (``cep_core.uncertain``). A partition whose events cannot be evaluated (cep_core raises
    ``ValueError`` naming the row, e.g. a pmf that does not fit the granularity) gives one
    row with the error instead of failing the batch."""
    detected_ts = pd.Timestamp(detected).tz_localize(None)
    names = schemas.columns(PROBABILISTIC)

    def run(frame: pd.DataFrame) -> pd.DataFrame:
        from cep_core.uncertain import evaluate

        compiled = _compiled(query.query)
        frame = frame.drop(columns=[BUCKET]).reset_index(drop=True)
        keys = compiled.partition_by
        out: dict[str, list[Any]] = {n: [] for n in names}

        def add(key: tuple[Any, ...], **values: Any) -> None:
            row = {"query_id": query.id, "query_version": query.version,
                   "partition_key": "|".join(str(v) for v in key), "method": query.method,
                   "history_version": version, "batch_id": batch_id,
                   "detection_time": detected_ts, **values}
            for name, column in out.items():
                column.append(row.get(name))

        def emit(part: pd.DataFrame) -> None:
            """Evaluate ``part`` (one call for all its partitions) and add its rows."""
            result = evaluate(compiled, part, method=query.method, id_column="event_id")
            ids = part["event_id"].tolist()
            lower = _ns(part["time_lower"].fillna(part["event_time"]))
            upper = _ns(part["time_upper"].fillna(part["event_time"]))
            measures = result.table.drop(columns=[*keys, "probability"], errors="ignore")
            for n, (key, sigma, p) in enumerate(result.groups):
                rows = [r for _, r in sigma]
                event_ids = [str(ids[r]) for r in rows]
                add(key, match_id=match_id(query.id, event_ids), variables=[v for v, _ in sigma],
                    event_ids=event_ids, probability=float(p),
                    earliest_start=min(lower[r] for r in rows),
                    latest_end=max(upper[r] for r in rows),
                    measures=_measures(measures.iloc[n].to_dict()))

        try:
            emit(frame)
        except ValueError:  # some partition cannot be evaluated: isolate it, keep the rest
            parts = ([((), frame)] if not keys else
                     [((k,) if len(keys) == 1 else k, g.reset_index(drop=True))
                      for k, g in frame.groupby(keys if len(keys) > 1 else keys[0],
                                                sort=True)])
            for key, part in parts:
                try:
                    emit(part)
                except ValueError as err:
                    add(key, match_id=match_id(query.id, ["error"], [str(v) for v in key]),
                        variables=[], event_ids=[], error=str(err))
        for name in ("earliest_start", "latest_end"):
            out[name] = pd.to_datetime(pd.array(out[name], dtype="Int64"), unit="ns")
        return _data_frame(out)[names]

    return run


@lru_cache(maxsize=64)
def _spec(query: LiveArchiveQuery):  # noqa: ANN202 - cep_core.live_archive.LiveArchiveSpec
    return query.spec()


def _ns(series: pd.Series) -> list[int]:
    from cep_core.runtime.time_axis import time_values

    return time_values(series).tolist()


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
        out = _empty_columns()
        if live.empty or rows.empty:
            return _frame(out, detected_ts)
        spec = _spec(query)
        instances = [pickle.loads(b) for b in live["instance"]]
        ingest = _ns(live["live_ingest"])
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
            out["query_id"].append(query.id)
            out["query_version"].append(query.version)
            out["match_id"].append(match_id(query.id, own, ids))
            out["partition_key"].append(str(j.live.key))
            out["match_number"].append(j.number)
            out["start_time"].append(int(start))
            out["end_time"].append(int(j.live.end))
            out["measures"].append(_measures(j.measures))
            out["live_event_ids"].append(own)
            out["archive_event_ids"].append(ids)
            out["history_version"].append(version)
            out["strategy"].append(strategy)
            out["probability"].append(None)
            out["batch_id"].append(batch_id)
            out["_ingest"].append(ingest[n])
        return _frame(out, detected_ts)

    return run


def _bucketed(frame, keys: Sequence[str], buckets: int):  # noqa: ANN001, ANN202
    from pyspark.sql import functions as F

    bucket = F.pmod(F.hash(*keys), F.lit(buckets)) if keys else F.lit(0)
    return frame.withColumn(BUCKET, bucket)


def engine_columns(queries: Sequence[QueryDefinition]) -> list:
    """Silver columns for the engine plus every query's typed ``[attributes]`` (and the
    ``pmf`` column when an uncertain query runs)."""
    from pyspark.sql import functions as F

    attributes = dict(a for q in queries for a in q.attributes)
    pmf = [F.col("pmf")] if any(isinstance(q, UncertainQuery) for q in queries) else []
    return [F.col(c) for c in ENGINE_COLUMNS] + pmf + [
        F.col("attributes").getItem(name).cast(kind).alias(name)
        for name, kind in sorted(attributes.items())]


@dataclass
class Detection:
    """One batch's gold rows and, per live-archive query, its archive-access record and
    its live step (whose state is saved once gold is written)."""

    rows: Any  # pyspark DataFrame of gold.complex_events rows
    access: list[dict[str, Any]] = field(default_factory=list)
    live_steps: list[tuple[LiveArchiveQuery, LiveStep]] = field(default_factory=list)
    #: per uncertain query: its probabilistic-event rows and the partition keys recomputed
    probabilistic: list[tuple[UncertainQuery, Any, list[str]]] = field(default_factory=list)


def detect(spark, queries: Sequence[QueryDefinition], new_events, history, version: int,  # noqa: ANN001, PLR0913
           batch_id: int, detected: datetime, settings: Settings, strategy: str = "",
           rbuffer: RecentBuffer | None = None,
           tuned: dict[str, Any] | None = None) -> Detection:
    """Gold rows of every query for one batch of ``new_events`` over ``history`` (silver
    at the pinned ``version``). ``strategy`` overrides the live-archive queries' own;
    ``tuned`` is the tuned configuration in force (``lakecep.tuning``).

    Keys are hashed into buckets; each bucket is one engine call. With a tuned
    configuration each query's work runs in its FAIR scheduler pool (its rows are
    materialised there).
    """
    buckets = settings.spark_shuffle_partitions * 2
    columns = engine_columns(queries)
    new_events = new_events.select(*columns)
    history = history.select(*columns)

    def touched_history(keys: Sequence[str]):  # noqa: ANN202 - history of the batch's keys
        if not keys:
            return history
        return history.join(new_events.select(*keys).distinct(), list(keys), "left_semi")

    results, access, steps, probabilistic = [], [], [], []
    pools = (tuned or {}).get("gold", {}).get("pools", {})
    context = spark.sparkContext
    for query in queries:
        pool = pool_name(query.id) if pool_name(query.id) in pools else None
        context.setLocalProperty("spark.scheduler.pool", pool)  # None: the default pool
        if isinstance(query, UncertainQuery):
            keys = _compiled(query.query).partition_by
            touched = sorted({"|".join(str(v) for v in r) for r in
                              new_events.select(*keys).distinct().collect()}) if keys else [""]
            rows = _bucketed(touched_history(keys), keys, buckets).groupBy(BUCKET).applyInPandas(
                uncertain_matcher(query, version, batch_id, detected), PROBABILISTIC_DDL)
            probabilistic.append((query, rows, touched))
        elif isinstance(query, PatternQuery):
            keys = _compiled(query.query).partition_by
            results.append(
                _bucketed(touched_history(keys), keys, buckets).groupBy(BUCKET).applyInPandas(
                    pattern_matcher(query, version, batch_id, detected), GOLD_DDL)
            )
        else:
            rows, record, step = _live_archive(spark, settings, query, new_events, history,
                                               version, batch_id, detected, buckets,
                                               strategy or query.strategy, rbuffer,
                                               (tuned or {}).get("queries", {}).get(query.id))
            results.append(rows)
            access.append(record)
            steps.append((query, step))
        if pool and results and not isinstance(query, UncertainQuery):
            results[-1] = results[-1].localCheckpoint(eager=True)  # computed in its pool
    context.setLocalProperty("spark.scheduler.pool", None)
    if not results:
        return Detection(spark.createDataFrame([], GOLD_DDL), access, steps, probabilistic)
    out = results[0]
    for frame in results[1:]:
        out = out.unionByName(frame)
    return Detection(out.dropDuplicates(["query_id", "match_id"]), access, steps,
                     probabilistic)


def _live_archive(spark, settings: Settings, query: LiveArchiveQuery, new_events, history,  # noqa: ANN001, ANN202, PLR0913
                  version: int, batch_id: int, detected: datetime, buckets: int,
                  strategy: str, rbuffer: RecentBuffer | None,
                  tuned: dict[str, Any] | None = None):
    """Live step (Spark, stored partial matches) -> plan (driver, cep_core) -> archive
    reads (RBuffer, then Delta with data skipping) -> join (Spark). Returns the gold rows,
    the access record and the live step. ``tuned``: the query's entry of the tuned
    configuration (STPM transitions, archive selectivity, tolerated latency TL)."""
    from pyspark.sql import functions as F

    from cep_core.live_archive import (
        LiveInstance,
        Selectivity,
        make_plan,
        resolve,
        sample_selectivity,
    )

    started = time.perf_counter()
    spec, key = _spec(query), query.key
    tuned = tuned or {}
    step = find_live(spark, settings, query, new_events, history, batch_id,
                     transitions_for({"queries": {query.id: tuned}}, query.id))
    if step.stats["late_rows"]:  # every key with an old or tied event is replayed
        raise RuntimeError(f"{query.id}: the live step dropped {step.stats['late_rows']} "
                           "rows as out of order; this is a bug in the replay rule, "
                           "please report it (no gold rows were written for this batch)")
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
        new_count = new_events.count()
        return Selectivity(len(instances) / max(new_count, 1), f"batch of {new_count}")

    def archive_sample() -> Selectivity:
        sample_keys = [r[0] for r in new_events.select(key).distinct().limit(50).collect()]
        sample = history.where(F.col(key).isin(sample_keys)).limit(plan_settings.sample_rows)
        return sample_selectivity(spec.archive, sample.toPandas(), key,
                                  plan_settings.sample_rows)

    strategy, drive, reason = resolve(spec, strategy, plan_settings, live_selectivity,
                                      archive_sample)
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
    gold_rows = _bucketed(live, ["key"], buckets).groupBy(BUCKET).cogroup(
        _bucketed(rows, [key], buckets).groupBy(BUCKET)
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


def log_pools(spark, tuned: dict[str, Any]) -> str:  # noqa: ANN001
    """The pools of the tuned configuration as the session's FAIR scheduler has them."""
    context = spark.sparkContext
    mode = context.getConf().get("spark.scheduler.mode", "FIFO")
    loaded = context.getConf().get("spark.scheduler.allocation.file", "")
    parts = []
    for pool, weight in sorted(tuned["gold"]["pools"].items()):
        found = context._jsc.sc().getPoolForName(pool)  # noqa: SLF001 - no Python API
        actual = found.get().weight() if found.isDefined() else None
        parts.append(f"{pool} weight {actual if actual is not None else 'default'} "
                     f"(tuned {weight})")
    where = (f"pools from {loaded}" if loaded == tuned["gold"].get("scheduler_file")
             else "this session started without the tuned pool file (pools get the default "
             "weight until the next job start)")
    return f"scheduler {mode}, {where}: " + ", ".join(parts)


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
        time_kind = types.get(_spec(query).time.lower())
        if time_kind != "timestamp":
            raise ValueError(f"live-archive query {query.id!r}: ORDER BY "
                             f"{_spec(query).time!r} is {time_kind}; live-archive queries "
                             "order by a timestamp column (event_time)")


def merge_into_gold(spark, settings: Settings, rows) -> None:  # noqa: ANN001
    from delta.tables import DeltaTable

    gold = LakeTable(spark, settings, "gold.complex_events").ensure()
    (
        DeltaTable.forPath(spark, gold.path).alias("t")
        .merge(rows.alias("s"), "t.query_id = s.query_id AND t.match_id = s.match_id")
        .whenNotMatchedInsertAll()
        .execute()
    )


def merge_probabilistic(spark, settings: Settings, query: UncertainQuery, rows,  # noqa: ANN001
                        touched: list[str]) -> None:
    """Replace the query's rows of the recomputed partition keys: update probabilities,
    insert new sequences, delete sequences that no longer match (or fell below the
    threshold)."""
    from delta.tables import DeltaTable
    from pyspark.sql import functions as F

    table = LakeTable(spark, settings, PROBABILISTIC).ensure()
    mine = (F.col("t.query_id") == query.id) & F.col("t.partition_key").isin(touched)
    (
        DeltaTable.forPath(spark, table.path).alias("t")
        .merge(rows.alias("s"), "t.query_id = s.query_id AND t.match_id = s.match_id")
        .whenMatchedUpdateAll()
        .whenNotMatchedInsertAll()
        .whenNotMatchedBySourceDelete(mine)
        .execute()
    )


def record_access(spark, settings: Settings, records: list[dict[str, Any]],  # noqa: ANN001
                  detected: datetime) -> None:
    """Upsert the batch's archive-access rows (one per live-archive query)."""
    from delta.tables import DeltaTable

    if not records:
        return
    table = LakeTable(spark, settings, "gold.archive_access").ensure()
    stamp = pd.Timestamp(detected).tz_localize(None)
    frame = pd.DataFrame([{**r, "detection_time": stamp} for r in records])
    rows = spark.createDataFrame(frame[schemas.columns("gold.archive_access")],
                                 schemas.ddl("gold.archive_access").replace(" NOT NULL", ""))
    (
        DeltaTable.forPath(spark, table.path).alias("t")
        .merge(rows.alias("s"), "t.query_id = s.query_id AND t.batch_id = s.batch_id")
        .withSchemaEvolution()  # tables from before the partial_* columns get them
        .whenMatchedUpdateAll()
        .whenNotMatchedInsertAll()
        .execute()
    )


def run(spark, settings: Settings, *, continuous: bool = False,  # noqa: ANN001
        queries: Sequence[QueryDefinition] | None = None) -> StreamRun:
    silver = LakeTable(spark, settings, "silver.events").ensure()
    LakeTable(spark, settings, "gold.complex_events").ensure()
    queries = list(queries or load_queries(settings.queries_dir))
    for query in queries:  # fail fast on a bad query, before any data moves
        if isinstance(query, PatternQuery | UncertainQuery):
            compiled = _compiled(query.query)
            if (compiled.engine == "uncertain") != isinstance(query, UncertainQuery):
                raise ValueError(f"query {query.id!r}: kind = 'uncertain' is for queries with "
                                 "UNCERTAIN TIME (and those need kind = 'uncertain')")
        else:
            _spec(query)
    log(f"{QUERY}: queries {', '.join(f'{q.id} v{q.version}' for q in queries)}")
    tuned = load_latest(settings)
    max_files = settings.max_files_per_trigger
    if tuned is None:
        log(f"{QUERY}: no tuned configuration in {settings.tuning_dir} (or tuning_apply is "
            "off): settings as configured")
    else:
        max_files = int(tuned["gold"]["max_files_per_trigger"])
        log(f"{QUERY}: tuned configuration v{tuned['version']} (statistics run "
            f"{tuned['statistics_run']}): {max_files} files per trigger; "
            + log_pools(spark, tuned))
    live_archive = [q for q in queries if isinstance(q, LiveArchiveQuery)]
    if live_archive:
        names = ", ".join(f"{q.id}: {settings.live_archive_strategy or q.strategy}"
                          for q in live_archive)
        log(f"{QUERY}: live-archive strategies {names}; RBuffer {settings.rbuffer_rows} rows")
    rbuffer = RecentBuffer(settings.rbuffer_rows) if live_archive else None
    columns = engine_columns(queries)
    stale = drop_stale(spark, settings, live_archive)
    if stale:
        log(f"{QUERY}: dropped the stored partial matches of {stale} changed or removed "
            "live-archive queries (their keys are replayed from silver history)")
    if live_archive:
        check_live_columns(silver.read().select(*columns).schema, live_archive)
        log(f"{QUERY}: partial matches in {settings.partial_match_buckets} buckets, "
            f"{settings.partial_match_capacity} keys in memory per bucket, "
            f"{settings.partial_match_policy.upper()} spilling")

    def each_batch(batch, batch_id: int) -> None:  # noqa: ANN001
        version = silver.version()
        detected = datetime.now(UTC)
        history = silver.as_of(version)
        if rbuffer is not None:
            rbuffer.update(history, version, batch, columns)
        found = detect(spark, queries, batch, history, version, batch_id, detected, settings,
                       strategy=settings.live_archive_strategy, rbuffer=rbuffer, tuned=tuned)
        rows = found.rows.persist()
        try:
            merge_into_gold(spark, settings, rows)
            for query, prob_rows, touched in found.probabilistic:
                merge_probabilistic(spark, settings, query, prob_rows, touched)
                log(f"{QUERY}: batch {batch_id}: {query.id}: probabilistic events of "
                    f"{len(touched)} partition keys recomputed ({query.method})")
            for query, step in found.live_steps:  # after gold: a crash in between replays
                save_state(spark, settings, query, step, batch_id, version, detected)
            counts = dict(rows.groupBy("query_id").count().collect())
            for record in found.access:
                record["complex_events"] = int(counts.get(record["query_id"], 0))
                log(f"{QUERY}: batch {batch_id}: {record['query_id']}: {record['strategy']} "
                    f"({record['reason']}); {record['live_matches']} live matches, "
                    f"{record['loads']} loads ({record['buffer_loads']} from RBuffer), "
                    f"{record['rows_loaded']} rows loaded, Delta files "
                    f"{record['delta_files_read']}/{record['delta_files_total']}, "
                    f"{record['delta_rows_scanned']} rows scanned; partial matches: "
                    f"{record['partial_hits']} hits, {record['partial_misses']} misses, "
                    f"{record['partial_new_keys']} new keys, {record['partial_spilled']} "
                    f"spilled, {record['replayed_keys']} keys replayed from history")
            record_access(spark, settings, found.access, detected)
            log(f"{QUERY}: batch {batch_id}: {sum(counts.values())} complex events detected "
                f"(silver history pinned at version {version})")
        finally:
            rows.unpersist()

    writer = silver.stream(max_files).writeStream.foreachBatch(each_batch)
    return run_stream(writer, settings, QUERY, continuous=continuous)
