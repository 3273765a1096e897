"""Firing snapshots (seed 004's "time travel"; docs/alerts.md, "Firing snapshots").

For every alert of a query with ``[snapshot]``, the silver events of its key in
``[start_time - before, end_time + after]`` go to ``gold.alert_snapshots`` once the stream's
watermark (the newest ``event_time`` in silver at the batch's pinned version) has passed
``end_time + after``: one row per (alert, event) with the event's role (``match``,
``before``, ``during``, ``after``), MERGEd on ``(alert_id, event_id)`` so that a batch run
again after a crash adds only what it newly reads. :func:`around` (the events around a
match, with roles) is shared with ``lakecep replay`` (:mod:`lakecep.jobs.replay`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

import pandas as pd

from lakecep.config import Settings
from lakecep.maintenance import duration_text
from lakecep.queries import PatternQuery, micros

from .tables import LakeTable, retention_seconds

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

TABLE = "gold.alert_snapshots"
#: An event's place relative to the match: one of its events, or before / inside / after
#: the match's span.
ROLES = ("before", "during", "match", "after")
#: The silver columns a snapshot keeps of each event.
EVENT_COLUMNS = ("event_id", "object_id", "event_type", "source_id", "event_time",
                 "ingest_time", "attributes")


def snapshot_queries(queries: Sequence[Any]) -> list[Any]:
    """The alerting queries with a ``[snapshot]``."""
    return [q for q in queries if getattr(q, "alert", False) and getattr(q, "snapshot", None)]


def key_column(query: Any) -> str:
    """The silver column (or ``[attributes]`` name) a query's ``partition_key`` holds: the
    PARTITION BY column of a pattern query, the ``key`` of live-archive and acquisition
    queries."""
    if isinstance(query, PatternQuery):
        columns = query.compiled().partition_by
        if len(columns) != 1:
            raise ValueError(f"query {query.id!r}: snapshots and replay need one PARTITION BY "
                             f"column, not {len(columns)}")
        return str(columns[0])
    return str(query.key)


def _key(history: DataFrame, column: str) -> Column:
    """``column`` of raw silver rows as ``partition_key`` text (an attribute when silver has
    no such column)."""
    from pyspark.sql import functions as F

    if column.lower() in (c.lower() for c in history.columns):
        return F.col(column).cast("string")
    return F.col("attributes").getItem(column)


def around(spark: SparkSession, history: DataFrame, targets: DataFrame,
           spans: Mapping[str, tuple[int, int]], keys: Mapping[str, str]) -> DataFrame:
    """The events of ``history`` (silver rows) around each target, with their role.

    ``targets``: ``alert_id, query_id, partition_key, start_time, end_time, ids`` (the
    match's event ids); ``spans``: query id -> (before, after) in microseconds; ``keys``:
    query id -> its :func:`key_column`. An event is around a target when its key equals
    the target's ``partition_key`` and ``start_time - before <= event_time <= end_time +
    after``. Returns ``alert_id, query_id, partition_key, <EVENT_COLUMNS>, role``."""
    from pyspark.sql import functions as F

    span = spark.createDataFrame([(q, int(b), int(a)) for q, (b, a) in spans.items()],
                                 "query_id STRING, before_us BIGINT, after_us BIGINT")
    ranged = targets.join(F.broadcast(span), "query_id").select(
        "alert_id", "query_id", "partition_key", "start_time", "end_time", "ids",
        F.timestamp_micros(F.unix_micros("start_time") - F.col("before_us")).alias("lo"),
        F.timestamp_micros(F.unix_micros("end_time") + F.col("after_us")).alias("hi"),
    ).localCheckpoint(eager=True)
    parts = []
    for column in sorted(set(keys.values())):
        these = ranged.where(F.col("query_id").isin([q for q, c in keys.items() if c == column]))
        wanted = [r[0] for r in these.select("partition_key").distinct().collect()]
        if not wanted:
            continue
        events = (history.select(*EVENT_COLUMNS, _key(history, column).alias("_key"))
                  .where(F.col("_key").isin(wanted)))   # Delta data skipping on the key
        parts.append(events.join(F.broadcast(these), (F.col("_key") == F.col("partition_key"))
                                 & F.col("event_time").between(F.col("lo"), F.col("hi"))))
    if not parts:
        return _empty(spark)
    out = parts[0]
    for part in parts[1:]:
        out = out.unionByName(part)
    role = (F.when(F.array_contains(F.col("ids"), F.col("event_id")), "match")
            .when(F.col("event_time") < F.col("start_time"), "before")
            .when(F.col("event_time") > F.col("end_time"), "after")
            .otherwise("during"))
    return out.select("alert_id", "query_id", "partition_key", *EVENT_COLUMNS,
                      role.alias("role"))


def _empty(spark: SparkSession) -> DataFrame:
    """No events around anything (the columns of :func:`around`)."""
    from pyspark.sql.types import StructType

    from lakecep import schemas

    full = StructType.fromDDL(schemas.ddl(TABLE))
    names = ("alert_id", "query_id", "partition_key", *EVENT_COLUMNS, "role")
    return spark.createDataFrame([], StructType([full[n] for n in names]))


def match_ids() -> Column:
    """A gold row's event ids (live then archive) as one array (empty, never NULL)."""
    from pyspark.sql import functions as F

    empty = F.array().cast("array<string>")
    return F.concat(F.coalesce("live_event_ids", empty), F.coalesce("archive_event_ids", empty))


def spans_of(queries: Sequence[Any]) -> dict[str, tuple[int, int]]:
    """(before, after) in microseconds of each query's ``[snapshot]``."""
    return {q.id: (micros(q.snapshot.before), micros(q.snapshot.after))
            for q in snapshot_queries(queries)}


def take(spark: SparkSession, settings: Settings, queries: Sequence[Any], history: DataFrame,
         version: int, batch_id: int, detected: datetime) -> tuple[int, int]:
    """Write the snapshots that are due at this batch (``history``: silver at the pinned
    ``version``). Returns (alerts snapshotted now, alerts still pending)."""
    from delta.tables import DeltaTable
    from pyspark.sql import functions as F

    chosen = snapshot_queries(queries)
    alerts = LakeTable(spark, settings, "gold.alerts")
    if not chosen or not alerts.exists():
        return 0, 0
    table = LakeTable(spark, settings, TABLE).ensure()
    spans = spans_of(chosen)
    after = spark.createDataFrame([(q, a) for q, (_, a) in spans.items()],
                                  "query_id STRING, after_us BIGINT")
    pending = (alerts.read().where(F.col("query_id").isin(list(spans)))
               .join(table.read().select("alert_id").distinct(), "alert_id", "left_anti")
               .join(F.broadcast(after), "query_id")
               .select("alert_id", "query_id", "partition_key", "start_time", "end_time",
                       (F.unix_micros("end_time") + F.col("after_us")).alias("due_us"))
               .localCheckpoint(eager=True))
    waiting = pending.count()
    if not waiting:
        return 0, 0
    watermark = history.agg(F.max(F.unix_micros("event_time"))).first()[0]
    if watermark is None:
        return 0, waiting
    due = pending.where(F.col("due_us") <= F.lit(watermark)).drop("due_us")
    gold = LakeTable(spark, settings, "gold.complex_events").read()
    targets = due.join(gold.select("query_id", F.col("match_id").alias("alert_id"),
                                   match_ids().alias("ids")),
                       ["query_id", "alert_id"], "left").localCheckpoint(eager=True)
    taken = targets.count()
    if not taken:
        return 0, waiting
    stamp = F.lit(pd.Timestamp(detected).tz_localize(None)).cast("timestamp")
    rows = around(spark, history, targets, spans, {q.id: key_column(q) for q in chosen}).select(
        "*", F.lit(version).cast("bigint").alias("snapshot_version"),
        F.lit(batch_id).cast("bigint").alias("batch_id"), stamp.alias("created_time"))
    (DeltaTable.forPath(spark, table.path).alias("t")
     .merge(rows.alias("s"), "t.alert_id = s.alert_id AND t.event_id = s.event_id")
     .whenNotMatchedInsertAll().execute())
    return taken, waiting - taken


def retention_warnings(silver: LakeTable, horizons: Mapping[str, timedelta]) -> list[str]:
    """One line per retention of ``silver`` shorter than the longest replay horizon of
    ``horizons`` (query id -> horizon): replay of older matches may fail."""
    if not horizons:
        return []
    longest = max(horizons.values())
    who = ", ".join(sorted(q for q, h in horizons.items() if h == longest))
    need = longest.total_seconds()
    return [f"{silver.name} {name} = {text!r} is shorter than the replay horizon "
            f"{duration_text(need)} of {who}: `lakecep replay` of older matches may fail "
            f"(raise it: ALTER TABLE delta.`{silver.path}` SET TBLPROPERTIES ('{name}' = "
            f"'interval {duration_text(need)}'), or shorten [snapshot] horizon)"
            for name, text in silver.retention().items() if retention_seconds(text) < need]
