"""Incremental gold for ``pattern`` queries: per-key partial matches kept between batches.

A pattern query whose first PARTITION BY column is a string column and whose first ORDER
BY column is a timestamp keeps its partial matches in ``gold.partial_matches`` (the live
step's design, :mod:`~lakecep.jobs.live_step`; ``docs/partial-matches.md``): per bucket of
keys one ``hot`` row, per key one ``key`` row (newest event time fed, spilled state, and
the ids of the key's *provisional* matches), per query one ``query`` row (``last_time``:
the newest time below which expired keys were removed). Per batch (:func:`find_pattern`):

1. Classify the batch's keys: *in order* when the key's earliest new event is newer than
   the newest one fed (a key never seen, newer than every expired key, is in order too);
   else *replay* (a late or tied event, an expired key's late event, or a batch run again
   after a crash). The query's first batch replays every key of silver, touched or not:
   a backfill over the existing history at first sight.
2. Feed in-order keys their new events only -- no history is read; replay keys their whole
   history at the pinned silver version, after dropping their state
   (``cep_core.incremental.stored_state.advance``, one pandas call per bucket). Replay
   keys take the bulk path: one feed of an unbounded matcher (the batch engine's kernel)
   finds their matches and leaves only the rows a future match may use, which join the
   bounded store unfed; an evicted key whose newest event is more than WITHIN behind the
   bucket's newest is flushed (what its state still holds, e.g. a completed greedy match
   waiting for its extension, is final) and dropped rather than pickled, as step 4's
   expiry would delete its key row anyway (``docs/partial-matches.md``: the first batch
   of rfid_abc, all keys replayed, went from 8.4 s to 1.2 s per bucket of a 1M-event lake
   in a profile).
3. Gold rows: the matches that became final, plus the *provisional* ones (what a batch run
   over the key's events so far finds beyond them; the incremental matcher would still
   wait for more rows). Together they are exactly the batch answer over the history so
   far, so ``superseded_version IS NULL`` stays "the current answer". An in-order key's
   new rows are new match ids: one idempotent append (``txnAppId``/``txnVersion``), or,
   when the batch MERGEs other rows anyway, part of that insert-only MERGE (one commit). Its
   earlier provisional matches that the batch did not find again get
   ``superseded_version`` (an update-only MERGE of those rows). Replay keys' rows are
   MERGEd insert-only and their lost rows superseded, as before (``jobs.gold.supersede``).
4. After gold is written, the new hot and key rows are merged (:func:`state_write`: one
   MERGE with the other queries' state), and keys whose newest event is more than the
   WITHIN window behind the query's newest event lose their key rows.

Queries the state cannot serve (no string key column, no timestamp ORDER BY) keep the
recompute path (:mod:`~lakecep.jobs.gold_pattern`).
"""

from __future__ import annotations

import hashlib
import json
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import pandas as pd

from lakecep import schemas
from lakecep.config import Settings
from lakecep.queries import PatternQuery, old_version, rule_id

from .gold_rows import (
    GOLD,
    GOLD_DDL,
    Lineage,
    above,
    empty_columns,
    gold_frame,
    key_text,
    match_id,
    read_only,
    row_positions,
)
from .gold_rows import measures as measure_text
from .live_step import BUCKET, REPLAY, TABLE, StateWrite, bucket_of, expiry_cutoff, within_ns
from .tables import LakeTable

#: the columns of a bucket call's output besides gold's: ``kind`` is ``gold`` (a gold
#: row; ``replayed``: of a replay key), ``hot`` / ``key`` (new state rows), ``supersede``
#: (``match_id``: an in-order key's provisional match not found again) or ``stats``
STATE_DDL = ("kind STRING, bucket INT, key STRING, last_time BIGINT, record BINARY, "
             "keys_in_memory INT, rows_in_memory BIGINT, pending_ids ARRAY<STRING>, "
             "stats STRING, replayed BOOLEAN")
OUT_DDL = f"{GOLD_DDL}, {STATE_DDL}"
STAT_NAMES = ("keys", "replayed", "new_keys", "history_rows", "batch_rows", "final",
              "provisional", "superseded")


def supported(query: PatternQuery, silver_schema) -> str | None:  # noqa: ANN001
    """The key column if the query can keep incremental state (else None: recompute)."""
    compiled = query.compiled()
    if not compiled.partition_by:
        return None
    key = compiled.partition_by[0]
    order = compiled.match.order_by
    if not order:
        return None
    first = order[0].column
    types = {f.name.lower(): f.dataType.simpleString() for f in silver_schema.fields}
    name = getattr(first, "name", None)
    if types.get(key.lower()) != "string" or not isinstance(name, str) or \
            types.get(name.lower()) != "timestamp":
        return None
    return next(f.name for f in silver_schema.fields if f.name.lower() == key.lower())


def fingerprint(query: PatternQuery, settings: Settings) -> str:
    """State is valid only for the same definition (rule_hash), bucket count and state
    format."""
    from cep_core.incremental.store import FORMAT_VERSION

    text = (f"pattern|{query.id}|{query.rule_hash}|{settings.partial_match_buckets}|"
            f"{FORMAT_VERSION}")
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def bucket_step(query: PatternQuery, settings: Settings, key: str, version: int,  # noqa: PLR0913
                batch_id: int, detected: datetime, ceiling: int | None = None,
                ) -> Callable[[pd.DataFrame, pd.DataFrame], pd.DataFrame]:
    """cogroup function: one bucket's events x its state rows -> gold rows, new state
    rows, supersessions and counters. ``ceiling`` (µs; an old version run side by side):
    matches whose first event is after it are not the version's (neither written nor
    kept as provisional)."""
    capacity, policy = settings.partial_match_capacity, settings.partial_match_policy
    detected_ts = pd.Timestamp(detected).tz_localize(None)
    rule = rule_id(query)

    def run(events: pd.DataFrame, state: pd.DataFrame) -> pd.DataFrame:
        from cep_core.incremental.stored_state import ROW_ID, advance

        if events.empty:
            return _frame(None, [])
        bucket = int(events[BUCKET].iloc[0])
        hot = state.loc[state["kind"] == "hot", "record"]
        keys = state[state["kind"] == "key"]
        spilled = {k: r for k, r in zip(keys["key"], keys["record"], strict=True)
                   if r is not None}
        before = {k: set(ids) for k, ids in zip(keys["key"], keys["pending_ids"], strict=True)
                  if ids is not None}
        replay = set(events.loc[events[REPLAY].astype(bool), key])
        frame = events.drop(columns=[BUCKET, REPLAY]).reset_index(drop=True)
        step = advance(query.compiled(), frame, key=key, hot=hot.iloc[0] if len(hot) else None,
                       spilled=spilled, replay=replay, capacity=capacity, policy=policy,
                       provisional=True, expire=True)
        columns = empty_columns()
        replayed: list[bool] = []
        found: dict[Any, set[str]] = {}
        pending: dict[Any, list[str]] = {}

        def add(matches, rows) -> None:  # noqa: ANN001
            if not matches:
                return
            positions = row_positions(rows[ROW_ID])
            lineage = Lineage(rows.reset_index(drop=True))
            for match in matches:
                ids, start, end, ingest = lineage.gather(positions(match.rows))
                if above(start, ceiling):
                    continue
                group = match.partition[0]
                mid = match_id(rule, ids)
                found.setdefault(group, set()).add(mid)
                if matches is step.provisional:
                    pending.setdefault(group, []).append(mid)
                if group not in replay and mid in before.get(str(group), ()):
                    continue  # in gold since it was provisional
                for name, value in (
                        ("match_id", mid), ("partition_key", key_text(match.partition)),
                        ("match_number", match.match_number), ("start_time", start),
                        ("end_time", end), ("measures", measure_text(match.measures)),
                        ("live_event_ids", ids), ("archive_event_ids", []),
                        ("history_version", version),
                        ("strategy", "batch" if group in replay else "incremental"),
                        ("probability", None), ("batch_id", batch_id), ("_ingest", ingest)):
                    columns[name].append(value)
                replayed.append(group in replay)

        add(step.matches, step.rows)
        add(step.provisional, step.provisional_rows)
        gold = gold_frame(columns, detected_ts, query)
        gold["kind"] = "gold"
        gold["replayed"] = replayed
        state_rows: list[dict[str, Any]] = [
            {"kind": "hot", "key": "", "record": step.hot,
             "keys_in_memory": step.keys_in_memory, "rows_in_memory": step.rows_in_memory}]
        superseded = 0
        for group in set(step.groups) | set(step.last_time):
            last = step.last_time.get(group)
            touched = last is not None
            state_rows.append({
                "kind": "key", "key": str(group), "record": step.groups.get(group),
                "last_time": None if last is None else int(last),
                "pending_ids": sorted(pending.get(group, [])) if touched else None})
            if touched and group not in replay:
                for mid in sorted(before.get(str(group), set()) - found.get(group, set())):
                    state_rows.append({"kind": "supersede", "key": str(group),
                                       "match_id": mid})
                    superseded += 1
        history_rows = int(events[REPLAY].astype(bool).sum())
        times = [int(t) for t in step.last_time.values() if t is not None]
        state_rows.append({"kind": "stats", "stats": json.dumps({
            "appended": replayed.count(False),
            "newest": max(times, default=None), "oldest": min(times, default=None),
            "unknown_time": sum(1 for g in step.groups if g not in step.last_time),
            "keys": len(step.last_time), "replayed": len(replay),
            "new_keys": len({g for g in step.last_time if str(g) not in before}
                            - replay),
            "history_rows": history_rows, "batch_rows": len(events) - history_rows,
            "final": len(step.matches), "provisional": len(step.provisional),
            "superseded": superseded})})
        for row in state_rows:
            row["bucket"] = bucket
        return _frame(gold, state_rows)

    return run


def _frame(gold: pd.DataFrame | None, state_rows: list[dict[str, Any]]) -> pd.DataFrame:
    names = [c.split()[0] for c in OUT_DDL.split(", ")]
    parts = []
    if gold is not None and len(gold):
        parts.append(gold)
    if state_rows:
        rest = pd.DataFrame({n: pd.Series([r.get(n) for r in state_rows], dtype=object)
                             for n in names})
        rest["detection_time"] = pd.NaT
        for name in ("start_time", "end_time"):
            rest[name] = pd.NaT
        parts.append(rest)
    if not parts:
        return pd.DataFrame({n: pd.Series([], dtype=object) for n in names})
    with warnings.catch_warnings():  # all-NA columns of the state rows: no dtype wanted
        warnings.simplefilter("ignore", FutureWarning)
        out = pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0]
    for name in names:
        if name not in out:
            out[name] = None
    for name in ("measures", "live_event_ids", "archive_event_ids", "pending_ids", "record",
                 "kind", "key", "stats", "match_id", "query_id", "query_version",
                 "rule_hash", "partition_key", "strategy", "replayed", "probability"):
        column = out[name].astype(object)
        out[name] = column.where(column.notna(), None)  # concat's NaN -> Spark's NULL
    for name in ("bucket", "keys_in_memory"):
        out[name] = pd.array(out[name], dtype="Int32")
    for name in ("last_time", "rows_in_memory", "match_number", "history_version",
                 "batch_id", "detection_latency_ms", "superseded_version"):
        out[name] = pd.array(out[name], dtype="Int64")
    return out[names]


@dataclass
class PatternStep:
    """One batch's incremental step of one pattern query."""

    query: PatternQuery
    key: str
    append: Any  # gold rows of in-order keys (new match ids)
    merge: Any  # gold rows of replay keys (their whole answer)
    supersede: list[str]  # in-order keys' provisional match ids not found again
    state: Any  # new hot and key rows
    stats: dict[str, int] = field(default_factory=dict)
    replayed: list[str] = field(default_factory=list)  # replay keys as partition_key text
    #: newest and oldest event time (ns) of the key rows after this batch (stored or new;
    #: None: no key row) and whether some key row may have no time (see :func:`state_write`)
    newest: int | None = None
    oldest: int | None = None
    untimed: bool = False


def find_pattern(spark, settings: Settings, query: PatternQuery, key: str, new_events,  # noqa: ANN001, PLR0913
                 history, version: int, batch_id: int, detected: datetime,
                 ceiling: int | None = None) -> PatternStep:
    from pyspark.sql import functions as F

    buckets = settings.partial_match_buckets
    time = query.compiled().match.order_by[0].column.name  # type: ignore[attr-defined]
    new_events, history = read_only([new_events, history], query.compiled(), key, time)
    # the query's state is small and read three times: one scan of the Delta table
    state = LakeTable(spark, settings, TABLE).ensure().read().where(
        (F.col("query_id") == query.id) & (F.col("fingerprint") == fingerprint(query, settings))
    ).localCheckpoint(eager=True)
    is_key = F.col("kind") == "key"
    marks = state.agg(F.max("batch_id"), F.count(F.lit(1)),
                      F.max(F.when(F.col("kind") == "query", F.col("last_time"))),
                      F.max(F.when(is_key, F.col("last_time"))),
                      F.min(F.when(is_key, F.col("last_time"))),
                      F.count(F.when(is_key & F.col("last_time").isNull(), 1))).first()
    newest_batch, rows_stored, expired_before, stored_newest, stored_oldest, no_time = marks
    rerun = newest_batch is not None and newest_batch >= batch_id
    bootstrap = not rows_stored  # the query's first batch: keys may have history
    # an unknown key may be an expired one: events that could share a WITHIN window with
    # its rows (no newer than the newest time when keys expired) replay it
    expired = F.lit(expired_before if expired_before is not None else -(2**62)).cast("bigint")
    # the query's first batch (a new query, or a changed one whose state was dropped) over
    # a lake with history replays every key of silver, not only the batch's: a key it left
    # out would later count as new and its history would never be fed (a backfill of the
    # query over the existing history, at first sight, exactly once: gold's MERGE is
    # insert-only on match_id)
    keyed = history.select(key, time).unionByName(new_events.select(key, time)) \
        if bootstrap else new_events
    touched = (keyed.where(F.col(key).isNotNull()).groupBy(key)
               .agg(F.min(F.unix_micros(F.col(time)) * 1000).alias("t_min")))
    known = state.where(F.col("kind") == "key").select(
        F.col("key").alias(key), "last_time", "record", "pending_ids")
    classified = touched.join(known, key, "left").select(
        key, "record", "pending_ids", bucket_of(key, buckets).alias(BUCKET),
        (F.lit(rerun or bootstrap)
         | (F.col("last_time").isNull() & (F.col("t_min") <= expired))
         | F.coalesce(F.col("t_min") <= F.col("last_time"), F.lit(False))  # NULL: new key
         ).alias(REPLAY)).localCheckpoint(eager=True)
    in_order = classified.where(~F.col(REPLAY))
    replay_keys = [k for (k,) in classified.where(F.col(REPLAY)).select(key).collect()]
    events = new_events.join(in_order.select(key), key, "left_semi").withColumn(
        REPLAY, F.lit(False))
    if replay_keys:  # else silver history is not even scanned
        events = events.unionByName(
            history.join(F.broadcast(classified.where(F.col(REPLAY)).select(key)), key,
                         "left_semi").withColumn(REPLAY, F.lit(True)))
    state_in = state.where(F.col("kind") == "hot").join(
        classified.select(F.col(BUCKET).alias("bucket")).distinct(), "bucket", "left_semi",
    ).select("bucket", "kind", "key", "record", "pending_ids").unionByName(
        in_order.where(F.col("record").isNotNull() | F.col("pending_ids").isNotNull()).select(
            F.col(BUCKET).alias("bucket"), F.lit("key").alias("kind"),
            F.col(key).alias("key"), "record", "pending_ids"))
    out = events.withColumn(BUCKET, bucket_of(key, buckets)).groupBy(BUCKET).cogroup(
        state_in.groupBy("bucket")).applyInPandas(
        bucket_step(query, settings, key, version, batch_id, detected, ceiling), OUT_DDL
    ).localCheckpoint(eager=True)
    totals = dict.fromkeys((*STAT_NAMES, "appended", "unknown_time"), 0)
    supersede: list[str] = []
    replayed = [key_text([k]) for k in replay_keys]
    newest, oldest = [stored_newest], [stored_oldest]
    for kind, text, mid in out.where(F.col("kind").isin("stats", "supersede")).select(
            "kind", "stats", "match_id").collect():  # one collect of the small rows
        if kind == "supersede":
            supersede.append(mid)
            continue
        stats = json.loads(text)
        newest.append(stats.pop("newest"))
        oldest.append(stats.pop("oldest"))
        for name, value in stats.items():
            totals[name] += int(value)
    gold_cols = schemas.columns(GOLD)
    rows = out.where(F.col("kind") == "gold")
    return PatternStep(query, key, rows.where(~F.col("replayed")).select(*gold_cols),
                       rows.where(F.col("replayed")).select(*gold_cols), sorted(supersede),
                       out.where(F.col("kind").isin("hot", "key")), totals, sorted(replayed),
                       max((t for t in newest if t is not None), default=None),
                       min((t for t in oldest if t is not None), default=None),
                       bool(no_time or totals["unknown_time"]))


def state_write(spark, settings: Settings, step: PatternStep, batch_id: int,  # noqa: ANN001
                version: int, now: datetime) -> StateWrite:
    """The batch's new hot and key rows of a pattern query for
    :func:`~lakecep.jobs.live_step.merge_state` (one MERGE of every query's state, which
    also removes the key rows of expired keys), with its ``query`` row when keys expire."""
    from pyspark.sql import functions as F

    print_ = fingerprint(step.query, settings)
    common = [F.lit(batch_id).cast("bigint").alias("batch_id"),
              F.lit(version).cast("bigint").alias("history_version"),
              F.lit(pd.Timestamp(now).tz_localize(None)).alias("updated")]
    columns = ("query_id", "fingerprint", "kind", "bucket", "key", "last_time", "record",
               "keys_in_memory", "rows_in_memory", "pending_ids")
    rows = step.state.select(
        F.lit(step.query.id).alias("query_id"), F.lit(print_).alias("fingerprint"),
        *columns[2:], *common)
    cutoff = expiry_cutoff(within_ns(step.query.compiled()), step.newest, step.oldest,
                           step.untimed)
    if cutoff is not None:  # the query row: expired keys' late events replay them
        rows = rows.unionByName(spark.createDataFrame(
            [(step.query.id, print_, "query", -1, "", step.newest)],
            "query_id STRING, fingerprint STRING, kind STRING, bucket INT, key STRING, "
            "last_time BIGINT").select(
            *columns[:6], F.lit(None).cast("binary").alias("record"),
            F.lit(None).cast("int").alias("keys_in_memory"),
            F.lit(None).cast("bigint").alias("rows_in_memory"),
            F.lit(None).cast("array<string>").alias("pending_ids"), *common))
    return StateWrite(step.query.id, print_, rows, cutoff)


def move_state(spark, settings: Settings, query: PatternQuery) -> None:  # noqa: ANN001
    """Hand the partial matches of ``query`` (a version in force until now) to its
    :func:`~lakecep.queries.old_version`, run side by side with the new one (docs/rules.md,
    "Hot reload", B)."""
    old = old_version(query)
    LakeTable(spark, settings, TABLE).ensure().hand_over(
        query.id, fingerprint(query, settings), old.id, fingerprint(old, settings))


def supersede_pending(spark, settings: Settings, match_ids: list[str], query_id: str,  # noqa: ANN001
                      version: int) -> None:
    """Mark in-order keys' provisional matches that the batch did not find again
    (an update-only MERGE of exactly those rows)."""
    from delta.tables import DeltaTable

    if not match_ids:
        return
    source = spark.createDataFrame([(query_id, m) for m in match_ids],
                                   "query_id STRING, match_id STRING")
    gold = LakeTable(spark, settings, GOLD)
    (DeltaTable.forPath(spark, gold.path).alias("t")
     .merge(source.alias("s"), "t.query_id = s.query_id AND t.match_id = s.match_id "
                               "AND t.superseded_version IS NULL")
     .whenMatchedUpdate(set={"superseded_version": str(int(version))})
     .execute())
