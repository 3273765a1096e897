"""``lakecep backfill QUERY``: a deployed rule over the whole history of silver, writing
what gold lacks (docs/architecture.md, "A query added to `queries/`").

The gold stream backfills a rule by itself in the batch where the rule first appears
(:meth:`~lakecep.jobs.reload.Rules.backfills`). This command is for a rule deployed
without it -- before the stream did that, with ``reload = "clear"`` (its gap), or to
repair -- and runs with the continuous app stopped (one writer per checkpoint):

* pattern, live-archive and acquisition rules: the rule over every key of silver at its
  newest version, with the gold job's own code (:func:`~lakecep.jobs.gold.detect`; a
  pattern rule on the recompute path, whatever path the stream uses); the rows whose
  ``(query_id, match_id)`` gold does not hold are inserted (an insert-only MERGE), and
  the rule version's rows are made the current answer (``jobs.gold.supersede``: its rows
  the answer lacks are superseded, superseded ones it holds are current again);
* uncertain rules: the same into ``gold.probabilistic_events``;
* window rules: a new operator fed every event of silver and advanced to the stream's
  watermark for the rule (the newest event time minus ``watermark_delay`` if the stream
  has none); a window gold lacks, or whose newest revision in gold (this ``rule_hash``)
  has other values, is appended as its next revision.

Rows written get ``batch_id = -1`` (:data:`BATCH`). Running it again writes nothing (gold
holds every row). A pattern rule whose version in force was deployed with ``reload =
"clear"`` is recorded as deployed with ``backfill`` (gold.rule_deployments), so the stream
stops cutting it at ``M_d`` and does not supersede the rows written here; an incremental
pattern rule's partial matches are dropped then (the next batch replays every key). A
pattern rule whose version in force was deployed side by side is refused: it has no gap,
its matches up to ``M_d`` are its old version's.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from lakecep import rules
from lakecep.config import Settings
from lakecep.queries import PatternQuery, QueryDefinition, UncertainQuery, WindowQuery
from lakecep.sources import sources_dir, with_source_attributes
from lakecep.validation import validate

from . import reload
from .gold import QUERY, detect, incremental_keys, merge_into_gold, supersede
from .gold_rows import GOLD
from .gold_uncertain import PROBABILISTIC, uncertain_rows
from .gold_window import (
    BUCKET,
    OUT_DDL,
    OUTPUTS,
    WindowSteps,
    bucket_step,
    fingerprint,
    gold_writer,
    output_rows,
    query_events,
    stored_state,
)
from .live_step import drop_stale
from .streaming import log
from .tables import LakeTable, engine_columns

#: ``batch_id`` of the rows ``lakecep backfill`` writes (no micro-batch wrote them).
BATCH = -1
#: Relative difference below which a stored window value equals the recomputed one
#: (the stream's aggregates saw the events in another order: rounding only).
TOLERANCE = 1e-9


def backfill(spark, settings: Settings, query_id: str,  # noqa: ANN001
             progress: Callable[[str], None] = log) -> dict[str, Any]:
    """Recompute the deployed rule ``query_id`` over all of silver and write what gold
    lacks. Returns the summary: query, kind, silver version, events read, keys evaluated,
    rows written, seconds."""
    started = time.monotonic()
    report = validate(settings.queries_dir, sources_dir(settings))
    report.raise_for_problems()
    by_id = {q.id: q for q in report.queries}
    if query_id not in by_id:
        raise ValueError(f"backfill: no query {query_id!r} in "
                         f"{settings.queries_dir or 'the shipped queries'}; the queries are "
                         f"{', '.join(sorted(by_id))}")
    if by_id[query_id] in rules.chained(report.queries):
        raise ValueError(f"backfill: {query_id!r} is a chained rule (it reads other rules' "
                         "outputs): the gold stream bootstraps it over every key by itself; "
                         "backfill its input rules instead")
    query = with_source_attributes([by_id[query_id]], report.sources)[0]
    recorded = reload.Rules(spark, settings, QUERY, [query], watch=False).recorded.get(
        query.id)
    if isinstance(query, PatternQuery) and recorded is not None and \
            recorded[0] == query.rule_hash and recorded[1] in ("side_by_side", "retire"):
        raise ValueError(f"backfill: {query_id!r} was deployed side by side: its matches "
                         "starting at or before the deployment's M_d are its old version's "
                         "(there is no gap), and a backfill would write the new version's "
                         "for them too (docs/rules.md, 'Hot reload', B)")
    silver = LakeTable(spark, settings, "silver.events").ensure()
    version = silver.version()
    history = silver.as_of(version).select(*engine_columns([query]))
    events = history.count()  # (Delta answers it from the log's statistics)
    kind = type(query).__name__
    progress(f"backfill {query.id} ({kind} v{query.version}, {query.rule_hash}): "
             f"{events:,} silver events at version {version}")
    detected = datetime.now(UTC)
    if isinstance(query, WindowQuery):
        keys, written = _windows(spark, settings, query, history, detected, progress)
    else:
        keys, written = _matches(spark, settings, query, history, version, detected,
                                 progress)
    _lift_floor(spark, settings, query, detected, progress)
    return {"query_id": query.id, "kind": kind, "silver_version": version,
            "events": events, "keys": keys, "rows_written": written,
            "table": OUTPUTS if isinstance(query, WindowQuery)
            else PROBABILISTIC if isinstance(query, UncertainQuery) else GOLD,
            "seconds": round(time.monotonic() - started, 2)}


def _matches(spark, settings: Settings, query: QueryDefinition, history, version: int,  # noqa: ANN001, PLR0913
             detected: datetime, progress: Callable[[str], None]) -> tuple[int, int]:
    """Complex events (or probabilistic events) of every key; inserts the missing ones."""
    from pyspark.sql import functions as F

    buckets = settings.spark_shuffle_partitions * 2
    if isinstance(query, UncertainQuery):
        rows, touched = uncertain_rows(query, history, history, version, BATCH, detected,
                                       buckets)
        keys, table, recomputed = len(touched), PROBABILISTIC, []
    else:  # every key counts as touched: its whole answer over history (recompute path)
        found = detect(spark, [query], history, history, version, BATCH, detected, settings,
                       incremental={})
        rows, table, recomputed = found.rows, GOLD, found.recomputed
        keys = sum(len(k) for _, k in found.recomputed) or sum(
            int(p.get("keys", 0)) for p in found.plans)
    progress(f"backfill {query.id}: {keys:,} keys evaluated")
    rows = rows.localCheckpoint(eager=True)
    target = LakeTable(spark, settings, table).ensure()
    missing = rows.join(target.read().where(F.col("query_id") == query.id).select(
        "query_id", "match_id"), ["query_id", "match_id"], "left_anti"
    ).localCheckpoint(eager=True)
    written = missing.count()
    if written:
        merge_into_gold(spark, settings, missing, table)
    if recomputed:  # this version's rows that the whole answer lacks are superseded,
        # superseded ones it holds are current again (older versions' rows are left alone)
        changed = supersede(spark, settings, rows, recomputed, version,
                            keep={query.id: query.rule_hash})
        if any(changed):
            progress(f"backfill {query.id}: {changed[0]} complex events superseded, "
                     f"{changed[1]} current again")
    return keys, written


def _windows(spark, settings: Settings, query: WindowQuery, history,  # noqa: ANN001
             detected: datetime, progress: Callable[[str], None]) -> tuple[int, int]:
    """The rule's windows over all of silver up to the stream's watermark; appends the
    windows gold lacks or holds with other values (as their next revision)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    writer = gold_writer(settings, QUERY)
    fp = fingerprint(query, settings, writer)
    marks, _, _ = stored_state(spark, settings, {query.id: fp}, 2**62)
    mark = marks[query.id]
    if mark is None:  # the stream has no state for it: the newest event's watermark
        newest = history.agg(F.max(F.unix_micros("event_time"))).first()[0]
        if newest is None:
            return 0, 0
        from lakecep.queries import micros

        mark = newest - micros(query.watermark_delay)
    events = query_events([query], history, settings.partial_match_buckets)
    assert events is not None
    empty = spark.createDataFrame([], f"query_id STRING, {BUCKET} INT, state STRING")
    out = events.groupBy("query_id", BUCKET).cogroup(empty.groupBy("query_id", BUCKET)
                                                     ).applyInPandas(
        bucket_step({query.id: query}, {query.id: None}, {query.id: mark}), OUT_DDL)
    computed = out.where(F.col("kind") == "row").localCheckpoint(eager=True)
    keys = computed.select("key").distinct().count()
    progress(f"backfill {query.id}: {keys:,} keys evaluated, windows up to the watermark "
             f"{datetime.fromtimestamp(mark / 1e6, UTC).isoformat()}")
    newest = Window.partitionBy("key", "window_id", "aggregate").orderBy(
        F.col("revision").desc())
    stored = (LakeTable(spark, settings, OUTPUTS).ensure().read()
              .where((F.col("query_id") == query.id) & (F.col("rule_hash") == query.rule_hash))
              .withColumn("_n", F.row_number().over(newest)).where("_n = 1")
              .select("key", "window_id", "aggregate", F.col("value").alias("_value"),
                      F.col("event_count").alias("_count"),
                      F.unix_micros("window_start").alias("_start"),
                      F.unix_micros("window_end").alias("_end"),
                      F.col("revision").alias("_revision")))
    same_value = F.coalesce(
        F.abs(F.col("value") - F.col("_value"))
        <= F.lit(TOLERANCE) * F.greatest(F.lit(1.0), F.abs(F.col("_value"))),
        F.col("value").isNull() & F.col("_value").isNull())
    differs = (F.col("_count").isNull() | (F.col("event_count") != F.col("_count"))
               | (F.col("window_start") != F.col("_start"))
               | (F.col("window_end") != F.col("_end")) | ~same_value)
    window = Window.partitionBy("key", "window_id")
    # a window is written whole (every aggregate) when any of its aggregates differs
    lacking = (computed.join(stored, ["key", "window_id", "aggregate"], "left")
               .withColumn("_write", F.max(differs.cast("int")).over(window))
               .where("_write = 1")
               .withColumn("revision", F.coalesce(F.max("_revision").over(window) + 1,
                                                  F.lit(0)).cast("int"))
               .select(*computed.columns).localCheckpoint(eager=True))
    written = lacking.count()
    if written:
        steps = WindowSteps([query], {query.id: fp}, lacking, {query.id: None},
                            {query.id: mark}, writer=writer)
        LakeTable(spark, settings, OUTPUTS).append(
            output_rows(steps, BATCH, detected),
            f"{writer}:backfill:{query.id}:{query.rule_hash}", int(detected.timestamp()))
    return keys, written


def _lift_floor(spark, settings: Settings, query: QueryDefinition, detected: datetime,  # noqa: ANN001
                progress: Callable[[str], None]) -> None:
    """A pattern rule whose version in force was deployed with ``clear`` in the gold
    stream: record it as backfilled (no ``M_d`` floor from now on: the stream would
    supersede the gap's rows written here); an incremental one's state, fed from ``M_d``
    on, is dropped (its next batch replays every key). (A window rule's floor only keeps
    the stream from emitting the gap's windows, which its state cannot compute: kept.)"""
    if not isinstance(query, PatternQuery):
        return
    in_force = reload.Rules(spark, settings, QUERY, [query], watch=False)
    recorded = in_force.recorded.get(query.id)
    if recorded is None or recorded[0] != query.rule_hash or recorded[1] != "clear":
        return
    # at the stream's newest batch (the newest row of a rule is the one in force)
    batch = (in_force.newest.read() or {}).get("batch_id", 0)
    in_force.record([reload.Deployment(query.id, query, query, "backfill", batch, None)],
                    detected)
    silver = LakeTable(spark, settings, "silver.events")
    if query.id in incremental_keys(settings, [query], silver.read().select(
            *engine_columns([query])).schema):
        drop_stale(spark, settings, [], {}, only=[query.id])
    progress(f"backfill {query.id}: deployed with reload = 'clear' in {QUERY}: recorded "
             "as backfilled, the stream no longer leaves out its events before M_d")
