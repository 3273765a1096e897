"""silver -> gold: complex events with lineage, exactly once.

For each silver micro-batch (the newly arrived events) and each shipped query:

- ``pattern`` queries run with cep_core inside Spark, grouped by the query's PARTITION BY
  key, over the whole history of the keys the batch touched (silver read by time travel
  at a pinned version). Late and out-of-order events therefore produce the matches they
  complete; matches already in gold are not written again.
- ``live_archive`` queries run the live pattern on the new events only, and for every
  live match load its access range RA from silver history at the pinned version and run
  the archive pattern there (lazy strategy, LLAA in the paper), joining on the key.

Rows are merged into ``gold.complex_events`` on ``(query_id, match_id)``, where
``match_id`` hashes the query and the ids of its sub-events, so replays after a crash and
re-detections never duplicate a row. The pinned version is recorded in
``history_version``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

import pandas as pd

import schemas
from jobs.streaming import StreamRun, log, run_stream
from jobs.tables import LakeTable
from lakecep.config import Settings
from lakecep.queries import LiveArchiveQuery, PatternQuery, QueryDefinition, load_queries

QUERY = "gold_complex_events"
#: Silver columns handed to the engine (queries may refer to any of them).
ENGINE_COLUMNS = [
    "event_id", "object_id", "event_type", "source_id", "event_time",
    "time_lower", "time_upper", "ingest_time",
]
GOLD_DDL = schemas.ddl("gold.complex_events").replace(" NOT NULL", "")
BUCKET = "_bucket"
LIVE_DDL = (
    "key STRING, live_start TIMESTAMP, live_end TIMESTAMP, live_ids ARRAY<STRING>, "
    f"live_measures MAP<STRING,STRING>, live_ingest TIMESTAMP, {BUCKET} INT"
)


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
        self.times = frame["event_time"].to_numpy("datetime64[ns]").view("int64").tolist()
        self.ingest = frame["ingest_time"].to_numpy("datetime64[ns]").view("int64").tolist()

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


def live_matcher(query: LiveArchiveQuery) -> Callable[[pd.DataFrame], pd.DataFrame]:
    """applyInPandas function: one bucket's new events -> their live matches."""

    def run(frame: pd.DataFrame) -> pd.DataFrame:
        bucket = int(frame[BUCKET].iloc[0]) if len(frame) else 0
        frame = frame.drop(columns=[BUCKET]).reset_index(drop=True)
        lineage = _Rows(frame)
        out: dict[str, list[Any]] = {c.split()[0]: [] for c in LIVE_DDL.split(", ")}
        for match in _compiled(query.live).find_matches(frame):
            ids, start, end, ingest = lineage.gather(match.rows)
            out["key"].append(str(match.partition[0]))
            out["live_start"].append(start)
            out["live_end"].append(end)
            out["live_ids"].append(ids)
            out["live_measures"].append(_measures(match.measures))
            out["live_ingest"].append(ingest)
            out[BUCKET].append(bucket)
        for name in ("live_start", "live_end", "live_ingest"):
            out[name] = pd.to_datetime(pd.array(out[name], dtype="Int64"), unit="ns")
        return _data_frame(out)

    return run


def archive_joiner(
    query: LiveArchiveQuery, version: int, batch_id: int, detected: datetime
) -> Callable[[pd.DataFrame, pd.DataFrame], pd.DataFrame]:
    """cogroup function: a bucket's live matches x its history -> joined gold rows.

    Each live match gets its own access range RA = [start - before, start) and every
    archive match in it is found (LLAA). All ranges of the bucket go through the engine in
    one call: the range's rows are copied under a key unique to the live match, so the
    archive query's PARTITION BY separates the ranges.
    """
    detected_ts = pd.Timestamp(detected).tz_localize(None)
    before = pd.Timedelta(query.before)
    key = query.key

    def run(live: pd.DataFrame, history: pd.DataFrame) -> pd.DataFrame:
        out = _empty_columns()
        if live.empty or history.empty:
            return _frame(out, detected_ts)
        live = live.reset_index(drop=True)
        ranges = live[["key", "live_start"]].rename(columns={"key": key})
        ranges["_live"] = ranges.index
        expanded = history.drop(columns=[BUCKET]).merge(ranges, on=key)
        expanded = expanded[(expanded["event_time"] >= expanded["live_start"] - before)
                            & (expanded["event_time"] < expanded["live_start"])]
        expanded = expanded.assign(**{key: expanded["_live"].astype(str)})
        expanded = expanded.drop(columns=["live_start"]).reset_index(drop=True)
        lineage = _Rows(expanded)
        live_keys = live["key"].tolist()
        live_ids = live["live_ids"].tolist()
        live_start = live["live_start"].to_numpy("datetime64[ns]").view("int64").tolist()
        live_end = live["live_end"].to_numpy("datetime64[ns]").view("int64").tolist()
        live_ingest = live["live_ingest"].to_numpy("datetime64[ns]").view("int64").tolist()
        live_measures = live["live_measures"].tolist()
        for match in _compiled(query.archive).find_matches(expanded):
            i = int(match.partition[0])
            ids, start, _, _ = lineage.gather(match.rows)
            own = list(live_ids[i])
            out["query_id"].append(query.id)
            out["query_version"].append(query.version)
            out["match_id"].append(match_id(query.id, own, ids))
            out["partition_key"].append(live_keys[i])
            out["match_number"].append(match.match_number)
            out["start_time"].append(live_start[i] if start is None else min(start, live_start[i]))
            out["end_time"].append(live_end[i])
            out["measures"].append({**dict(live_measures[i]), **_measures(match.measures)})
            out["live_event_ids"].append(own)
            out["archive_event_ids"].append(ids)
            out["history_version"].append(version)
            out["strategy"].append("lazy")
            out["probability"].append(None)
            out["batch_id"].append(batch_id)
            out["_ingest"].append(live_ingest[i])
        return _frame(out, detected_ts)

    return run


def _bucketed(frame, keys: Sequence[str], buckets: int):  # noqa: ANN001, ANN202
    from pyspark.sql import functions as F

    bucket = F.pmod(F.hash(*keys), F.lit(buckets)) if keys else F.lit(0)
    return frame.withColumn(BUCKET, bucket)


def detect(spark, queries: Sequence[QueryDefinition], new_events, history, version: int,  # noqa: ANN001
           batch_id: int, detected: datetime, buckets: int = 8):  # noqa: ANN201 - DataFrame
    """Gold rows of every query for one batch of ``new_events`` over ``history``.

    Keys are hashed into ``buckets`` groups; each group is one engine call.
    """
    new_events = new_events.select(*ENGINE_COLUMNS)
    history = history.select(*ENGINE_COLUMNS)

    def touched_history(keys: Sequence[str]):  # noqa: ANN202 - history of the batch's keys
        if not keys:
            return history
        return history.join(new_events.select(*keys).distinct(), list(keys), "left_semi")

    results = []
    for query in queries:
        if isinstance(query, PatternQuery):
            keys = _compiled(query.query).partition_by
            results.append(
                _bucketed(touched_history(keys), keys, buckets).groupBy(BUCKET).applyInPandas(
                    pattern_matcher(query, version, batch_id, detected), GOLD_DDL)
            )
        else:
            # Each live match's range RA is cut out of its key's history in the UDF.
            live = _bucketed(new_events, [query.key], buckets).groupBy(BUCKET).applyInPandas(
                live_matcher(query), LIVE_DDL)
            scope = touched_history([query.key])
            joined = live.groupBy(BUCKET).cogroup(
                _bucketed(scope, [query.key], buckets).groupBy(BUCKET)
            ).applyInPandas(archive_joiner(query, version, batch_id, detected), GOLD_DDL)
            results.append(joined)
    out = results[0]
    for frame in results[1:]:
        out = out.unionByName(frame)
    return out.dropDuplicates(["query_id", "match_id"])


def merge_into_gold(spark, settings: Settings, rows) -> None:  # noqa: ANN001
    from delta.tables import DeltaTable

    gold = LakeTable(spark, settings, "gold.complex_events").ensure()
    (
        DeltaTable.forPath(spark, gold.path).alias("t")
        .merge(rows.alias("s"), "t.query_id = s.query_id AND t.match_id = s.match_id")
        .whenNotMatchedInsertAll()
        .execute()
    )


def run(spark, settings: Settings, *, continuous: bool = False,  # noqa: ANN001
        queries: Sequence[QueryDefinition] | None = None) -> StreamRun:
    silver = LakeTable(spark, settings, "silver.events").ensure()
    LakeTable(spark, settings, "gold.complex_events").ensure()
    queries = list(queries or load_queries())
    for query in queries:  # fail fast on a bad query, before any data moves
        texts = [query.query] if isinstance(query, PatternQuery) else [query.live, query.archive]
        for text in texts:
            _compiled(text)
    log(f"{QUERY}: queries {', '.join(f'{q.id} v{q.version}' for q in queries)}")

    def each_batch(batch, batch_id: int) -> None:  # noqa: ANN001
        version = silver.version()
        detected = datetime.now(UTC)
        rows = detect(spark, queries, batch, silver.as_of(version), version, batch_id, detected,
                      buckets=settings.spark_shuffle_partitions * 2)
        rows = rows.persist()
        try:
            merge_into_gold(spark, settings, rows)
            log(f"{QUERY}: batch {batch_id}: {rows.count()} complex events detected "
                f"(silver history pinned at version {version})")
        finally:
            rows.unpersist()

    writer = silver.stream(settings.max_files_per_trigger).writeStream.foreachBatch(each_batch)
    return run_stream(writer, settings, QUERY, continuous=continuous)
