"""Gold for ``window`` queries: incremental window aggregates kept across micro-batches.

A window query (``lakecep.queries.WindowQuery``) runs a ``cep_core.windows`` operator --
time windows, count windows or a sampler -- over one numeric attribute per key. Spark
executors keep nothing between micro-batches, so the operators' state lives in the Delta
table ``gold.window_state``: per query, keys are hashed into ``partial_match_buckets``
buckets and each bucket has one row with its operator's JSON state (``to_state()``); the
row of bucket -1 holds the query's watermark (``{"watermark": W}``, and ``"newest"`` while
a silver commit is read in parts, below). The semantics are in docs/windows.md ("In the
pipeline").

Per micro-batch ``b`` (:func:`window_steps`, every window query at once):

1. The watermark moves to ``max(previous watermark, newest event time - watermark_delay)``
   (every silver event counts, whatever its type or key), where a silver commit ends: the
   unit of arrival is a silver commit (docs/architecture.md, "Late events"). A batch that
   ends inside one (gold's ``maxFilesPerTrigger`` split the commit's files,
   :func:`~lakecep.jobs.streaming.ends_inside_commit`) is *held*: its newest event time is
   kept in the bucket -1 row (``newest``), the watermark stays, nothing is emitted; the
   batch that ends the commit moves the watermark from the newest event of the whole
   commit. The kept time is in the state table, so a restart between the parts of a
   commit changes nothing.
2. The batch's events of the query (``event_types``, non-NULL key) become ``Insert``
   delta events, fed per bucket in ``(event_time, seq)`` order to the bucket's operator
   (``seq`` = ``xxhash64(event_id)``: the event's identity and tie-break), then (unless
   held) the operator advances to the watermark and emits its rows. Buckets without new
   events are only advanced when the watermark moved or held batches came before.
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
from lakecep.queries import WindowQuery, micros, old_version, rule_id

from .streaming import writer_id
from .tables import LakeTable

OUTPUTS = "gold.window_outputs"
STATE = "gold.window_state"
BUCKET = "_bucket"
#: Bumped when the stored state's meaning changes (stored state of another format is
#: dropped, the query starts with empty windows).
STATE_FORMAT = 1
#: What a (query, bucket) call returns: ``row`` (an output row), ``state`` (the bucket's new
#: state and the state it started from), ``stats`` (counters as JSON).
OUT_DDL = ("kind STRING, query_id STRING, bucket INT, key STRING, window_start BIGINT, "
           "window_end BIGINT, window_id BIGINT, aggregate STRING, value DOUBLE, "
           "event_count BIGINT, revision INT, emitted_at BIGINT, state STRING, "
           "previous STRING, stats STRING")
_OUT_NAMES = [c.split()[0] for c in OUT_DDL.split(", ")]


def fingerprint(query: WindowQuery, settings: Settings, writer: str) -> str:
    """Stored state is only valid for the same definition, bucket count, state format and
    gold stream (a new gold checkpoint restarts batch ids: its writer id differs)."""
    text = "|".join(str(v) for v in (
        query.id, query.rule_hash, settings.partial_match_buckets, STATE_FORMAT, writer))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def gold_writer(settings: Settings, stream: str | None = None) -> str:
    """The writer id of the gold stream ``stream`` (default: the stream of every query)."""
    from .gold import QUERY

    return writer_id(settings, stream or QUERY)


def new_operator(query: WindowQuery, watermark: int | None):  # noqa: ANN201
    """A new bucket's operator, at the query's current watermark (so a bucket created late
    drops and samples exactly as one operator for all keys would)."""
    op = query.operator()
    if watermark is not None:
        op.advance(watermark)   # empty: emits nothing, only sets the watermark
    return op


def feed(query: WindowQuery, state: str | None, events: pd.DataFrame,
         previous_watermark: int | None, watermark: int | None,
         ) -> tuple[Any, list[Any], dict[str, int]]:
    """One bucket's step (pure Python): the operator from its JSON ``state`` (a new one at
    ``previous_watermark`` when None), fed ``events`` (columns ``key``, ``time`` (µs),
    ``seq``, ``value``) as inserts in ``(time, seq)`` order, advanced to ``watermark``
    (None: a held batch, not advanced, nothing emitted). Returns the operator, its rows and
    the counters.

    An event the operator holds already is skipped: a rule's backfill (:func:`window_steps`)
    feeds all of silver at the pinned version, which can hold events of later batches; such
    an event is either still held when its batch comes (skipped) or was purged, below the
    operator's lateness horizon (then it is too late: dropped) -- counted once either way."""
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
        held = op.keys.get(str(key))
        if held is not None and int(seq) in held.values:
            continue  # fed by the rule's backfill, which read later batches' events too
        if op.apply(Insert(Event(str(key), int(time), int(seq), v))):
            accepted += 1
        else:
            late += 1
    rows = [] if watermark is None else op.advance(watermark)
    return op, rows, {"events": accepted, "late_dropped": late, "rows": len(rows),
                      "corrections": sum(r.revision > 0 for r in rows)}


def bucket_step(queries: dict[str, WindowQuery], previous: dict[str, int | None],
                watermarks: dict[str, int | None],
                ) -> Callable[[pd.DataFrame, pd.DataFrame], pd.DataFrame]:
    """cogroup function: one (query, bucket)'s events x its stored state -> output rows,
    new state and counters (``watermarks``: None for a held query, not advanced)."""

    def run(events: pd.DataFrame, state: pd.DataFrame) -> pd.DataFrame:
        head = events if len(events) else state
        query_id, bucket = str(head["query_id"].iloc[0]), int(head[BUCKET].iloc[0])
        before = state["state"].iloc[0] if len(state) else None
        if before is not None and pd.isna(before):
            before = None
        query = queries[query_id]
        op, rows, stats = feed(query, before, events, previous[query_id],
                               watermarks[query_id])
        out: dict[str, list[Any]] = {n: [] for n in _OUT_NAMES}

        def add(kind: str, **values: Any) -> None:
            row = {"kind": kind, "query_id": query_id, "bucket": bucket, **values}
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
class WindowSteps:
    """One batch's step of every window query: output rows and new state rows (a
    checkpointed DataFrame of ``OUT_DDL``), saved by :func:`commit_windows`; per query its
    fingerprint, watermark before and after the batch (None: none yet), and counters."""

    queries: list[WindowQuery]
    fingerprints: dict[str, str]
    out: Any
    previous: dict[str, int | None]
    watermarks: dict[str, int | None]
    stats: dict[str, dict[str, int]] = field(default_factory=dict)
    #: the gold stream's writer id (its checkpoint's): txnAppId of the output appends
    writer: str = ""
    #: per query deployed with ``reload = "clear"``: M_d; windows starting at or before it
    #: are the deployment's gap, not emitted (docs/rules.md, "Hot reload")
    floors: dict[str, int] = field(default_factory=dict)
    #: per query, the newest event time of the silver commit read in held batches before
    #: this one (``pending``) and after it (``held``; empty unless this batch is held)
    pending: dict[str, int | None] = field(default_factory=dict)
    held: dict[str, int] = field(default_factory=dict)


def mark_json(watermark: int | None, held: int | None) -> str | None:
    """The bucket -1 row's state: the watermark, and the newest event time of a silver commit
    read in held batches so far (None: no watermark row)."""
    if watermark is None and held is None:
        return None
    return json.dumps({"watermark": watermark} | ({} if held is None else {"newest": held}))


def stored_state(spark, settings: Settings, fingerprints: dict[str, str], batch_id: int,  # noqa: ANN001
                 ) -> tuple[dict[str, int | None], dict[str, int | None], Any]:
    """Per query its watermark before batch ``batch_id`` and the newest event time of held
    batches before it (the silver commit read in parts, :func:`window_steps`), and the
    usable stored state rows (query_id, bucket, state; lazy): a row that batch ``batch_id``
    itself saved (a replay) gives the state it started from. The watermark row (bucket -1)
    is saved by every batch, so its batch id is the query's newest."""
    from pyspark.sql import functions as F

    valid = F.lit(False)
    for query_id, fp in fingerprints.items():
        valid = valid | ((F.col("query_id") == query_id) & (F.col("fingerprint") == fp))
    rows = LakeTable(spark, settings, STATE).ensure().read().where(valid)
    previous: dict[str, int | None] = dict.fromkeys(fingerprints)
    pending: dict[str, int | None] = dict.fromkeys(fingerprints)
    for r in rows.where(F.col("bucket") < 0).collect():
        if r.batch_id > batch_id:
            raise RuntimeError(
                f"window query {r.query_id!r}: gold.window_state holds batch {r.batch_id}, "
                f"the gold stream is at batch {batch_id}: the window state is ahead of the "
                "stream's checkpoint (restore the checkpoint, or delete the query's rows of "
                "gold.window_state to restart its windows)")
        text = r.previous if r.batch_id == batch_id else r.state
        mark = {} if text is None else json.loads(text)
        previous[r.query_id], pending[r.query_id] = mark.get("watermark"), mark.get("newest")
    state = rows.where(F.col("bucket") >= 0).select(
        "query_id", F.col("bucket").alias(BUCKET),
        F.when(F.col("batch_id") == batch_id, F.col("previous")).otherwise(F.col("state"))
        .alias("state")).where(F.col("state").isNotNull())
    return previous, pending, state


def query_events(queries: Sequence[WindowQuery], new_events, buckets: int):  # noqa: ANN001, ANN201
    """The queries' events among ``new_events`` (silver rows): ``query_id``, ``key``,
    ``time`` (µs), ``seq``, ``value`` and the key's bucket (None: no queries)."""
    from functools import reduce

    from pyspark.sql import functions as F

    frames = []
    for q in queries:
        events = new_events.where(F.col(q.key).isNotNull())
        if q.event_types:
            events = events.where(F.col("event_type").isin(*q.event_types))
        key = F.col(q.key).cast("string")
        frames.append(events.select(
            F.lit(q.id).alias("query_id"), key.alias("key"),
            F.unix_micros("event_time").alias("time"), F.xxhash64("event_id").alias("seq"),
            F.col(q.attribute).cast("double").alias("value"),
            F.pmod(F.hash(key), F.lit(buckets)).cast("int").alias(BUCKET)))
    return reduce(lambda a, b: a.unionByName(b), frames) if frames else None


def window_steps(spark, settings: Settings, queries: Sequence[WindowQuery], new_events,  # noqa: ANN001, PLR0913
                 batch_id: int, stream: str | None = None,
                 floors: dict[str, int] | None = None, history=None,  # noqa: ANN001
                 backfill: set[str] | frozenset[str] = frozenset(),
                 held: bool = False) -> WindowSteps:
    """Every window query's step for one micro-batch (``new_events``: the batch's silver
    rows with the engine columns), in one pandas call per (query, bucket): computed and
    checkpointed, nothing written yet. ``floors``: per query deployed with ``reload =
    "clear"``, its ``M_d`` (its windows starting at or before it are not emitted).
    ``backfill``: queries added at this batch; one without stored state (its first run of
    the batch, or a run again: the state saved by this batch is the empty state it started
    from) is fed every event of ``history`` (silver at the pinned version) instead of the
    batch's, so it emits the windows over the existing history once, then goes on from
    its state (the batch's watermark stays the batch's). ``held``: the batch ends inside a
    silver commit (:func:`~lakecep.jobs.streaming.ends_inside_commit`): its events are
    inserted, the watermark stays and nothing is emitted; the commit's newest event time so
    far is saved for the batch that ends the commit (module docstring)."""
    from pyspark.sql import functions as F

    writer = gold_writer(settings, stream)
    by_id = {q.id: q for q in queries}
    fingerprints = {q.id: fingerprint(q, settings, writer) for q in queries}
    previous, pending, state_in = stored_state(spark, settings, fingerprints, batch_id)
    newest = new_events.agg(F.max(F.unix_micros("event_time"))).first()[0]
    watermarks: dict[str, int | None] = {}
    kept: dict[str, int] = {}
    for q in queries:
        seen = max(newest, pending[q.id] if pending[q.id] is not None else newest)
        if held:
            watermarks[q.id], kept[q.id] = previous[q.id], seen
            continue
        mark = seen - micros(q.watermark_delay)
        watermarks[q.id] = mark if previous[q.id] is None else max(mark, previous[q.id])
    added = {q.id for q in queries if q.id in backfill and previous[q.id] is None
             and pending[q.id] is None}
    events = query_events([q for q in queries if q.id not in added], new_events,
                          settings.partial_match_buckets)
    if added:
        fed = query_events([q for q in queries if q.id in added], history,
                           settings.partial_match_buckets)
        events = fed if events is None else events.unionByName(fed)
    assert events is not None
    # the watermark did not move (or the batch is held) and no held batch came before:
    # only buckets with new events are called
    still = [q for q in queries if held or (previous[q.id] is not None and pending[q.id] is None
                                            and watermarks[q.id] == previous[q.id])]
    if still:
        moved = ~F.col("query_id").isin(*[q.id for q in still])
        touched = events.select("query_id", BUCKET).distinct()
        state_in = state_in.where(moved).unionByName(
            state_in.where(~moved).join(touched, ["query_id", BUCKET], "left_semi"))
    out = events.groupBy("query_id", BUCKET).cogroup(
        state_in.groupBy("query_id", BUCKET)).applyInPandas(
        bucket_step(by_id, previous, {q: None if held else w for q, w in watermarks.items()}),
        OUT_DDL).localCheckpoint(eager=True)
    stats = {q.id: {"events": 0, "late_dropped": 0, "rows": 0, "corrections": 0}
             for q in queries}
    for r in out.where(F.col("kind") == "stats").select("query_id", "stats").collect():
        for name, value in json.loads(r.stats).items():
            stats[r.query_id][name] += int(value)
    return WindowSteps(list(queries), fingerprints, out, previous, watermarks, stats, writer,
                       {q: f for q, f in (floors or {}).items() if q in by_id}, pending, kept)


def warm_start(spark, settings: Settings, queries: Sequence[WindowQuery], before,  # noqa: ANN001, PLR0913
               m_d: int, batch_id: int, stream: str | None, detected: datetime) -> int:
    """Strategy C (docs/rules.md, "Hot reload"): the state of new versions of ``queries``
    deployed before batch ``batch_id``, built from ``before`` -- the silver events of the
    stream's batches before ``batch_id`` (:func:`~lakecep.jobs.reload.processed`; not
    silver's latest version, which may hold events of later batches: they would be counted
    twice) -- and saved as if batch ``batch_id - 1`` had saved it: each operator is fed the
    events that a window still open or correctable at the watermark ``W_d = m_d -
    watermark_delay`` can hold (time windows and samples: ``>= W_d - window -
    allowed_lateness``; count windows: all), then advanced to ``W_d``; what that emits is
    dropped (the old version emitted those windows). Returns the events fed."""
    from pyspark.sql import functions as F

    writer = gold_writer(settings, stream)
    by_id = {q.id: q for q in queries}
    marks = {q.id: m_d - micros(q.watermark_delay) for q in queries}
    events = query_events(queries, before.where(F.unix_micros("event_time") <= m_d),
                          settings.partial_match_buckets)
    low = F.lit(False)
    for q in queries:
        bound = (None if q.window is None else
                 marks[q.id] - micros(q.window) - micros(q.allowed_lateness))
        low = low | ((F.col("query_id") == q.id)
                     & (F.lit(True) if bound is None else F.col("time") >= bound))
    events = events.where(low).localCheckpoint(eager=True)
    state_in = spark.createDataFrame([], f"query_id STRING, {BUCKET} INT, state STRING")
    out = events.groupBy("query_id", BUCKET).cogroup(state_in.groupBy("query_id", BUCKET)
                                                     ).applyInPandas(
        bucket_step(by_id, dict.fromkeys(by_id), marks), OUT_DDL)
    steps = WindowSteps(list(queries), {q.id: fingerprint(q, settings, writer) for q in queries},
                        out, dict.fromkeys(by_id), marks, writer=writer)
    save_state(spark, settings, steps, batch_id - 1, detected)
    return events.count()


def move_state(spark, settings: Settings, query: WindowQuery, stream: str | None) -> None:  # noqa: ANN001
    """Hand the stored state of ``query`` (a version in force until now) to its
    :func:`~lakecep.queries.old_version`, which keeps running side by side with the new
    one."""
    writer = gold_writer(settings, stream)
    old = old_version(query)
    LakeTable(spark, settings, STATE).ensure().hand_over(
        query.id, fingerprint(query, settings, writer), old.id,
        fingerprint(old, settings, writer))


def output_rows(steps: WindowSteps, batch_id: int, detected: datetime):  # noqa: ANN201
    """The batch's ``gold.window_outputs`` rows (a lazy DataFrame)."""
    from pyspark.sql import functions as F

    version = F.create_map(*[F.lit(x) for q in steps.queries for x in (q.id, q.version)])
    mode = F.create_map(*[F.lit(x) for q in steps.queries for x in (q.id, q.mode)])
    rule = F.create_map(*[F.lit(x) for q in steps.queries
                          for x in (q.id, q.rule_hash)])
    now = F.lit(pd.Timestamp(detected).tz_localize(None)).cast("timestamp")
    rows = steps.out.where(F.col("kind") == "row")
    for query_id, floor in steps.floors.items():
        rows = rows.where((F.col("query_id") != query_id) | (F.col("window_start") > floor))
    rule_ids = F.create_map(*[F.lit(x) for q in steps.queries for x in (q.id, rule_id(q))])
    return rows.select(
        rule_ids[F.col("query_id")].alias("query_id"),
        version[F.col("query_id")].alias("query_version"), "key",
        mode[F.col("query_id")].alias("window_kind"),
        F.timestamp_micros("window_start").alias("window_start"),
        F.timestamp_micros("window_end").alias("window_end"), "window_id", "aggregate",
        "value", "event_count", "revision", F.timestamp_micros("emitted_at").alias("emitted_at"),
        F.lit(batch_id).cast("bigint").alias("batch_id"), now.alias("detection_time"),
        rule[F.col("query_id")].cast("string").alias("rule_hash"))


def commit_windows(spark, settings: Settings, steps: WindowSteps | None, batch_id: int,  # noqa: ANN001
                   detected: datetime) -> int:
    """Append the batch's output rows (once per batch id), then save the state (one MERGE
    for every query). Returns the number of output rows."""
    if steps is None:
        return 0
    rows = sum(s["rows"] for s in steps.stats.values())
    outputs = LakeTable(spark, settings, OUTPUTS).ensure()
    if rows:
        outputs.append(output_rows(steps, batch_id, detected),
                       f"{steps.writer or gold_writer(settings)}:window_outputs", batch_id)
    save_state(spark, settings, steps, batch_id, detected)
    return rows


def save_state(spark, settings: Settings, steps: WindowSteps, batch_id: int,  # noqa: ANN001
               detected: datetime) -> None:
    """Merge the step's new state rows and watermarks into ``gold.window_state`` (one
    MERGE for every query), as saved by batch ``batch_id``."""
    from delta.tables import DeltaTable
    from pyspark.sql import functions as F

    table = LakeTable(spark, settings, STATE).ensure()
    marks = [(q.id, -1, mark_json(steps.watermarks[q.id], steps.held.get(q.id)),
              mark_json(steps.previous[q.id], steps.pending.get(q.id))) for q in steps.queries]
    fp = F.create_map(*[F.lit(x) for q_id, f in steps.fingerprints.items() for x in (q_id, f)])
    new = steps.out.where(F.col("kind") == "state").select(
        "query_id", "bucket", "state", "previous").unionByName(spark.createDataFrame(
            marks, "query_id STRING, bucket INT, state STRING, previous STRING"))
    new = new.select("query_id", fp[F.col("query_id")].alias("fingerprint"), "bucket",
                     F.lit(batch_id).cast("bigint").alias("batch_id"), "state", "previous",
                     F.lit(pd.Timestamp(detected).tz_localize(None)).cast("timestamp")
                     .alias("updated"))
    match = "t.query_id = s.query_id AND t.fingerprint = s.fingerprint AND t.bucket = s.bucket"
    (DeltaTable.forPath(spark, table.path).alias("t").merge(new.alias("s"), match)
     .whenMatchedUpdateAll().whenNotMatchedInsertAll().execute())


def drop_stale(spark, settings: Settings, queries: Sequence[WindowQuery],  # noqa: ANN001, PLR0913
               stream: str | None = None, only: Sequence[str] | None = None,
               keep: Sequence[str] = ()) -> int:
    """Delete state rows no current window query can use (another fingerprint: a changed
    query, bucket count or gold checkpoint; or a query that is gone); returns how many
    query ids had stale rows. Such a query starts with empty windows (docs/windows.md).
    ``only``: look at these query ids' rows only (a per-query gold run, ``stream``);
    ``keep``: leave these query ids' rows (a rule about to be deployed side by side)."""
    writer = gold_writer(settings, stream)
    return LakeTable(spark, settings, STATE).drop_other_fingerprints(
        {q.id: fingerprint(q, settings, writer) for q in queries}, only=only, keep=keep)
