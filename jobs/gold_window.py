"""Gold for ``window`` queries: incremental window aggregates kept across micro-batches.

A window query (``lakecep.queries.WindowQuery``) runs a ``cep_core.windows`` operator --
time windows, count windows or a sampler -- over one numeric attribute per key. Spark
executors keep nothing between micro-batches, so the operators' state lives in the Delta
table ``gold.window_state``: per query, keys are hashed into ``partial_match_buckets``
buckets and each bucket has one row with its operator's JSON state (``to_state()``); the
row of bucket -1 holds the query's watermark. The semantics are in docs/windows.md ("In
the pipeline").

Per micro-batch ``b`` (:func:`window_step`):

1. The watermark moves to ``max(previous watermark, newest event time of the batch -
   watermark_delay)`` (every silver event of the batch counts, whatever its type or key).
2. The batch's events of the query (``event_types``, non-NULL key) become ``Insert``
   delta events, fed per bucket in ``(event_time, seq)`` order to the bucket's operator
   (``seq`` = ``xxhash64(event_id)``: the event's identity and tie-break), then the
   operator advances to the watermark and emits its rows. Buckets without new events are
   only advanced when the watermark moved.
3. After gold is written, :func:`commit_windows` appends the rows to
   ``gold.window_outputs`` (one Delta ``txnAppId`` / ``txnVersion = b`` append per batch:
   a replayed batch writes nothing) and merges the new state rows.

Exactly once: a state row saved by batch ``b`` keeps the state it started from
(``previous``). A replay of ``b`` (a crash after the state was saved, before the stream
committed ``b``) starts from ``previous``, a replay after a crash before the save from
``state``: either way the same input state and the same events, so the same rows and the
same new state, and the append of ``b`` is skipped by Delta.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import pandas as pd

from lakecep.config import Settings
from lakecep.queries import WindowQuery, micros

from .streaming import writer_id
from .tables import LakeTable

OUTPUTS = "gold.window_outputs"
STATE = "gold.window_state"
BUCKET = "_bucket"
#: Bumped when the stored state's meaning changes (stored state of another format is
#: dropped, the query starts with empty windows).
STATE_FORMAT = 1
#: What a bucket call returns: ``row`` (an output row), ``state`` (the bucket's new state
#: and the state it started from), ``stats`` (counters as JSON).
OUT_DDL = ("kind STRING, bucket INT, key STRING, window_start BIGINT, window_end BIGINT, "
           "window_id BIGINT, aggregate STRING, value DOUBLE, event_count BIGINT, "
           "revision INT, emitted_at BIGINT, state STRING, previous STRING, stats STRING")
_OUT_NAMES = [c.split()[0] for c in OUT_DDL.split(", ")]


def fingerprint(query: WindowQuery, settings: Settings, writer: str) -> str:
    """Stored state is only valid for the same definition, bucket count, state format and
    gold stream (a new gold checkpoint restarts batch ids: its writer id differs)."""
    text = "|".join(str(v) for v in (
        query.id, query.version, query.attribute, query.aggregates, query.window, query.rows,
        query.slide, query.every, query.key, query.event_types, query.watermark_delay,
        query.allowed_lateness, settings.partial_match_buckets, STATE_FORMAT, writer))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def gold_writer(settings: Settings) -> str:
    from .gold import QUERY

    return writer_id(settings, QUERY)


def new_operator(query: WindowQuery, watermark: int | None):  # noqa: ANN201
    """A new bucket's operator, at the query's current watermark (so a bucket created late
    drops and samples exactly as one operator for all keys would)."""
    op = query.operator()
    if watermark is not None:
        op.advance(watermark)   # empty: emits nothing, only sets the watermark
    return op


def feed(query: WindowQuery, state: str | None, events: pd.DataFrame,
         previous_watermark: int | None, watermark: int) -> tuple[Any, list[Any], dict[str, int]]:
    """One bucket's step (pure Python): the operator from its JSON ``state`` (a new one at
    ``previous_watermark`` when None), fed ``events`` (columns ``key``, ``time`` (µs),
    ``seq``, ``value``) as inserts in ``(time, seq)`` order, advanced to ``watermark``.
    Returns the operator, its rows and the counters."""
    from cep_core.windows import Event, Insert, Sampler, WindowOperator

    if state is None:
        op = new_operator(query, previous_watermark)
    elif query.mode == "sample":
        op = Sampler.from_state(json.loads(state))
    else:
        op = WindowOperator.from_state(json.loads(state))
    accepted = late = 0
    ordered = events.sort_values(["time", "seq"], kind="stable")
    for key, time, seq, value in zip(ordered["key"], ordered["time"], ordered["seq"],
                                     ordered["value"], strict=True):
        v = None if value is None or pd.isna(value) or math.isinf(value) else float(value)
        if op.apply(Insert(Event(str(key), int(time), int(seq), v))):
            accepted += 1
        else:
            late += 1
    rows = op.advance(watermark)
    return op, rows, {"events": accepted, "late_dropped": late, "rows": len(rows)}


def bucket_step(query: WindowQuery, previous_watermark: int | None, watermark: int,
                ) -> Callable[[pd.DataFrame, pd.DataFrame], pd.DataFrame]:
    """cogroup function: one bucket's events x its stored state -> output rows, new state
    and counters."""

    def run(events: pd.DataFrame, state: pd.DataFrame) -> pd.DataFrame:
        bucket = int(events[BUCKET].iloc[0] if len(events) else state["bucket"].iloc[0])
        before = state["state"].iloc[0] if len(state) else None
        if before is not None and pd.isna(before):
            before = None
        op, rows, stats = feed(query, before, events, previous_watermark, watermark)
        out: dict[str, list[Any]] = {n: [] for n in _OUT_NAMES}

        def add(kind: str, **values: Any) -> None:
            row = {"kind": kind, "bucket": bucket, **values}
            for name, column in out.items():
                column.append(row.get(name))

        for r in rows:
            add("row", key=str(r.key), window_start=r.window_start, window_end=r.window_end,
                window_id=r.window_id, aggregate=r.aggregate, value=r.value,
                event_count=r.count, revision=r.revision, emitted_at=r.emitted_at)
        add("state", state=json.dumps(op.to_state(), separators=(",", ":")), previous=before)
        add("stats", stats=json.dumps(stats))
        frame = pd.DataFrame({n: pd.Series(out[n], dtype=object) for n in _OUT_NAMES})
        for name in ("window_start", "window_end", "window_id", "event_count", "emitted_at"):
            frame[name] = pd.array(frame[name], dtype="Int64")
        for name in ("bucket", "revision"):
            frame[name] = pd.array(frame[name], dtype="Int32")
        frame["value"] = pd.array(frame["value"], dtype="Float64")
        return frame

    return run


@dataclass
class WindowStep:
    """One batch's step of one window query: its output rows and new state rows (a
    checkpointed DataFrame of ``OUT_DDL``), saved by :func:`commit_windows`."""

    query: WindowQuery
    fingerprint: str
    out: Any
    previous_watermark: int | None
    watermark: int
    stats: dict[str, int] = field(default_factory=dict)


def stored_state(spark, settings: Settings, query: WindowQuery, fp: str, batch_id: int):  # noqa: ANN001, ANN201
    """The query's usable stored state rows (bucket, state) for batch ``batch_id``: a row
    that batch ``batch_id`` itself saved (a replay) gives the state it started from."""
    from pyspark.sql import functions as F

    rows = LakeTable(spark, settings, STATE).ensure().read().where(
        (F.col("query_id") == query.id) & (F.col("fingerprint") == fp))
    newest = rows.agg(F.max("batch_id")).first()[0]
    if newest is not None and newest > batch_id:
        raise RuntimeError(
            f"window query {query.id!r}: gold.window_state holds batch {newest}, the gold "
            f"stream is at batch {batch_id}: the state is ahead of the stream's checkpoint "
            "(restore the checkpoint, or delete the query's rows of gold.window_state to "
            "restart its windows)")
    return rows.select("bucket", F.when(F.col("batch_id") == batch_id, F.col("previous"))
                       .otherwise(F.col("state")).alias("state")).where(
        F.col("state").isNotNull())


def window_step(spark, settings: Settings, query: WindowQuery, new_events,  # noqa: ANN001
                batch_id: int) -> WindowStep:
    """The query's step for one micro-batch (``new_events``: the batch's silver rows with
    the engine columns): computed and checkpointed, nothing written yet."""
    from pyspark.sql import functions as F

    fp = fingerprint(query, settings, gold_writer(settings))
    stored = stored_state(spark, settings, query, fp, batch_id).localCheckpoint(eager=True)
    marks = {r.bucket: r.state for r in stored.where(F.col("bucket") < 0).collect()}
    previous = json.loads(marks[-1])["watermark"] if -1 in marks else None
    newest = new_events.agg(F.max(F.unix_micros("event_time"))).first()[0]
    watermark = newest - micros(query.watermark_delay)
    if previous is not None:
        watermark = max(watermark, previous)
    buckets = settings.partial_match_buckets
    events = new_events.where(F.col(query.key).isNotNull())
    if query.event_types:
        events = events.where(F.col("event_type").isin(*query.event_types))
    events = events.select(
        F.col(query.key).cast("string").alias("key"),
        F.unix_micros("event_time").alias("time"),
        F.xxhash64("event_id").alias("seq"),
        F.col(query.attribute).cast("double").alias("value"),
        F.pmod(F.hash(F.col(query.key).cast("string")), F.lit(buckets)).cast("int").alias(
            BUCKET))
    state_in = stored.where(F.col("bucket") >= 0)
    if previous is not None and watermark == previous:  # only buckets with new events move
        state_in = state_in.join(events.select(F.col(BUCKET).alias("bucket")).distinct(),
                                 "bucket", "left_semi")
    out = events.groupBy(BUCKET).cogroup(state_in.groupBy("bucket")).applyInPandas(
        bucket_step(query, previous, watermark), OUT_DDL).localCheckpoint(eager=True)
    totals = {"events": 0, "late_dropped": 0, "rows": 0}
    for (text,) in out.where(F.col("kind") == "stats").select("stats").collect():
        for name, value in json.loads(text).items():
            totals[name] += int(value)
    return WindowStep(query, fp, out, previous, watermark, totals)


def output_rows(steps: Sequence[WindowStep], batch_id: int, detected: datetime):  # noqa: ANN201
    """The batch's ``gold.window_outputs`` rows of every step (a lazy DataFrame)."""
    from pyspark.sql import functions as F

    now = F.lit(pd.Timestamp(detected).tz_localize(None)).cast("timestamp")
    frames = [
        step.out.where(F.col("kind") == "row").select(
            F.lit(step.query.id).alias("query_id"),
            F.lit(step.query.version).alias("query_version"), "key",
            F.lit(step.query.mode).alias("window_kind"),
            F.timestamp_micros("window_start").alias("window_start"),
            F.timestamp_micros("window_end").alias("window_end"), "window_id", "aggregate",
            "value", "event_count", "revision",
            F.timestamp_micros("emitted_at").alias("emitted_at"),
            F.lit(batch_id).cast("bigint").alias("batch_id"), now.alias("detection_time"))
        for step in steps]
    out = frames[0]
    for frame in frames[1:]:
        out = out.unionByName(frame)
    return out


def commit_windows(spark, settings: Settings, steps: Sequence[WindowStep], batch_id: int,  # noqa: ANN001
                   detected: datetime) -> int:
    """Append the batch's output rows (once per batch id) then save each query's state.
    Returns the number of output rows."""
    from delta.tables import DeltaTable
    from pyspark.sql import functions as F

    if not steps:
        return 0
    rows = sum(step.stats["rows"] for step in steps)
    outputs = LakeTable(spark, settings, OUTPUTS).ensure()
    if rows:
        outputs.append(output_rows(steps, batch_id, detected),
                       f"{gold_writer(settings)}:window_outputs", batch_id)
    table = LakeTable(spark, settings, STATE).ensure()
    updated = F.lit(pd.Timestamp(detected).tz_localize(None)).cast("timestamp")
    for step in steps:
        mark = json.dumps({"watermark": step.watermark})
        before = (None if step.previous_watermark is None
                  else json.dumps({"watermark": step.previous_watermark}))
        new = step.out.where(F.col("kind") == "state").select(
            "bucket", "state", "previous").unionByName(spark.createDataFrame(
                [(-1, mark, before)], "bucket INT, state STRING, previous STRING"))
        new = new.select(F.lit(step.query.id).alias("query_id"),
                         F.lit(step.fingerprint).alias("fingerprint"), "bucket",
                         F.lit(batch_id).cast("bigint").alias("batch_id"), "state", "previous",
                         updated.alias("updated"))
        match = ("t.query_id = s.query_id AND t.fingerprint = s.fingerprint "
                 "AND t.bucket = s.bucket")
        (DeltaTable.forPath(spark, table.path).alias("t").merge(new.alias("s"), match)
         .whenMatchedUpdateAll().whenNotMatchedInsertAll().execute())
    return rows


def drop_stale(spark, settings: Settings, queries: Sequence[WindowQuery]) -> int:  # noqa: ANN001
    """Delete state rows no current window query can use (another fingerprint: a changed
    query, bucket count or gold checkpoint; or a query that is gone); returns how many
    query ids had stale rows. Such a query starts with empty windows (docs/windows.md)."""
    from delta.tables import DeltaTable
    from pyspark.sql import functions as F

    table = LakeTable(spark, settings, STATE)
    if not table.exists():
        return 0
    writer = gold_writer(settings)
    valid = F.lit(False)
    for query in queries:
        valid = valid | ((F.col("query_id") == query.id)
                         & (F.col("fingerprint") == fingerprint(query, settings, writer)))
    stale = table.read().where(~valid).select("query_id").distinct().count()
    if stale:
        DeltaTable.forPath(spark, table.path).delete(~valid)
    return stale
