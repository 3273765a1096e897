"""The live step of live-archive queries: live-pattern partial matches kept in Delta.

Spark executors keep nothing between micro-batches, so the live pattern's partial matches
live in the Delta table ``gold.partial_matches`` (``docs/partial-matches.md``). Per query,
join keys are hashed into ``partial_match_buckets`` buckets; each bucket has one ``hot``
row (the state of the partition keys kept in memory, at most ``partial_match_capacity``)
and each join key one ``key`` row (the newest event time fed for it and, when the bounded
store spilled it, its partial matches -- TPM or STPM, ``partial_match_policy``).

Per batch (:func:`find_live`):

1. Classify the batch's join keys on the driver's plan: *in order* when the key has a row
   and its earliest new event is newer than the newest one fed; else *replay* (a new key,
   a late or tied event, or a batch that is run again after a crash).
2. Feed in-order keys their new events only; feed replay keys their whole history at the
   pinned silver version, after dropping their state (``cep_core.incremental.stored_state.advance``
   in one pandas call per bucket, with the bucket's hot row and the spilled rows of the
   batch's in-order keys; replay keys take the store's bulk path -- one unbounded feed,
   their state joins the bounded store unfed, expired ones are dropped rather than
   spilled, ``docs/partial-matches.md``). A replay re-finds the key's earlier live
   matches too, so a late archive event is joined with the live matches whose RA it falls
   in; gold's MERGE keeps each complex event once.
3. After gold is written, :func:`merge_state` merges the new hot and key rows (of every
   query, one MERGE per batch).

Every history read of the old design (each touched key's whole history, every batch) is
now only for replay keys.
"""

from __future__ import annotations

import hashlib
import json
import pickle
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

import pandas as pd

from lakecep import schemas
from lakecep.config import Settings
from lakecep.queries import LiveArchiveQuery

from .gold_rows import key_text, read_only, row_positions
from .tables import LakeTable

if TYPE_CHECKING:
    from cep_core import CompiledQuery

BUCKET = "_bucket"
REPLAY = "_replay"
TABLE = "gold.partial_matches"
#: One output schema for the four kinds of rows a bucket call returns: ``live`` (a live
#: match for the join), ``hot`` / ``key`` (new state rows), ``stats`` (counters as JSON).
OUT_DDL = ("kind STRING, bucket INT, key STRING, lo BIGINT, hi BIGINT, live_start BIGINT, "
           "live_end BIGINT, live_ingest TIMESTAMP, instance BINARY, last_time BIGINT, "
           "record BINARY, keys_in_memory INT, rows_in_memory BIGINT, stats STRING")
STAT_NAMES = ("hits", "misses", "open_misses", "new_keys", "spilled", "replayed",
              "late_rows")


def fingerprint(query: LiveArchiveQuery, settings: Settings) -> str:
    """State is only valid for the same definition (rule_hash), bucket count and state format
    (a changed engine format is replayed from history rather than misread)."""
    from cep_core.incremental.store import FORMAT_VERSION

    text = f"{query.id}|{query.rule_hash}|{settings.partial_match_buckets}|{FORMAT_VERSION}"
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def bucket_of(column: str, buckets: int):  # noqa: ANN201 - a pyspark Column
    from pyspark.sql import functions as F

    return F.pmod(F.hash(F.col(column)), F.lit(buckets)).cast("int")


def bucket_step(query: LiveArchiveQuery, settings: Settings,
                transitions: dict[str, list[float]] | None = None,
                ) -> Callable[[pd.DataFrame, pd.DataFrame], pd.DataFrame]:
    """cogroup function: one bucket's events x its state rows -> live matches, new state
    rows and counters. ``transitions``: STPM's Δt_i (time column units) and
    p(E_i+1 | E_i) from the tuned configuration (None: the engine's own estimate)."""
    capacity, policy = settings.partial_match_capacity, settings.partial_match_policy

    def run(events: pd.DataFrame, state: pd.DataFrame) -> pd.DataFrame:
        from cep_core.incremental.stored_state import ROW_ID, advance
        from cep_core.live_archive import instances_of, time_values

        if events.empty:
            return _rows({})
        spec = query.spec()
        bucket = int(events[BUCKET].iloc[0])
        hot = state.loc[state["kind"] == "hot", "record"]
        keys = state[(state["kind"] == "key") & state["record"].notna()]
        replay = set(events.loc[events[REPLAY].astype(bool), query.key])
        frame = events.drop(columns=[BUCKET, REPLAY]).reset_index(drop=True)
        step = advance(spec.live, frame, key=query.key,
                       hot=hot.iloc[0] if len(hot) else None,
                       spilled=dict(zip(keys["key"], keys["record"], strict=True)),
                       replay=replay, capacity=capacity, policy=policy,
                       transitions=transitions, expire=True)
        out: dict[str, list[Any]] = {c.split()[0]: [] for c in OUT_DDL.split(", ")}

        def add(kind: str, **values: Any) -> None:
            row = {"kind": kind, "bucket": bucket, **values}
            for name, column in out.items():
                column.append(row.get(name))

        rows = step.rows
        if step.matches and rows is not None:
            positions = row_positions(rows[ROW_ID])
            ingest = time_values(rows["ingest_time"])
            for inst in instances_of(spec, step.matches, rows, positions):
                assert inst.match is not None
                add("live", key=str(inst.key), lo=int(inst.lo), hi=int(inst.hi),
                    live_start=int(inst.start), live_end=int(inst.end),
                    live_ingest=int(ingest[positions(inst.match.rows)].max()),
                    instance=pickle.dumps(inst, protocol=pickle.HIGHEST_PROTOCOL))
        add("hot", key="", record=step.hot, keys_in_memory=step.keys_in_memory,
            rows_in_memory=step.rows_in_memory)
        for group in set(step.groups) | set(step.last_time):
            last = step.last_time.get(group)
            add("key", key=str(group), record=step.groups.get(group),
                last_time=None if last is None else int(last))
        counters = step.stats.as_dict()
        add("stats", stats=json.dumps({**{n: counters.get(n, 0) for n in STAT_NAMES},
                                       "replayed": len(replay),
                                       "late_rows": step.late_rows}))
        return _rows(out)

    return run


def _rows(columns: dict[str, list[Any]]) -> pd.DataFrame:
    names = [c.split()[0] for c in OUT_DDL.split(", ")]
    frame = pd.DataFrame({n: pd.Series(columns.get(n, []), dtype=object) for n in names})
    frame["live_ingest"] = pd.to_datetime(pd.array(frame["live_ingest"], dtype="Int64"),
                                          unit="ns")
    for name in ("bucket", "keys_in_memory"):
        frame[name] = pd.array(frame[name], dtype="Int32")
    for name in ("lo", "hi", "live_start", "live_end", "last_time", "rows_in_memory"):
        frame[name] = pd.array(frame[name], dtype="Int64")
    return frame


@dataclass
class LiveStep:
    """One batch's live step: live matches (a checkpointed DataFrame with the columns the
    join needs), new state rows (saved by :func:`merge_state` after gold is written) and
    the summed counters."""

    live: Any
    state: Any
    stats: dict[str, int] = field(default_factory=dict)
    #: the join keys fed their whole history (as ``partition_key`` text): their gold rows
    #: are the whole answer for the key, so earlier rows they no longer hold are superseded
    replayed: list[str] = field(default_factory=list)
    #: newest and oldest event time (ns) of the key rows after this batch (stored or new)
    #: and whether some key row may have no time (:func:`expiry_cutoff`)
    newest: int | None = None
    oldest: int | None = None
    untimed: bool = False


def find_live(spark, settings: Settings, query: LiveArchiveQuery, new_events, history,  # noqa: ANN001, PLR0913
              batch_id: int, transitions: dict[str, list[float]] | None = None) -> LiveStep:
    from pyspark.sql import functions as F

    key, buckets = query.key, settings.partial_match_buckets
    time = query.spec().time
    new_events, history = read_only([new_events, history], query.spec().live, key, time,
                                    query.spec().id_column)
    # the query's state is small and read three times: one scan of the Delta table
    state = LakeTable(spark, settings, TABLE).ensure().read().where(
        (F.col("query_id") == query.id) & (F.col("fingerprint") == fingerprint(query, settings))
    ).localCheckpoint(eager=True)
    newest_batch, *stored = key_marks(state)
    rerun = newest_batch is not None and newest_batch >= batch_id
    touched = (new_events.where(F.col(key).isNotNull()).groupBy(key)
               .agg(F.min(F.unix_micros(F.col(time)) * 1000).alias("t_min")))
    known = state.where(F.col("kind") == "key").select(
        F.col("key").alias(key), "last_time", "record")
    classified = touched.join(known, key, "left").select(
        key, "record", bucket_of(key, buckets).alias(BUCKET),
        # a tie with last_time replays too: the event may have been fed already (a replay
        # feeds history at the pinned version, which can hold later batches' events), and
        # a tie-breaking ORDER BY column could sort it before the last settled row
        (F.lit(rerun) | F.col("last_time").isNull() | (F.col("t_min") <= F.col("last_time"))
         ).alias(REPLAY)).localCheckpoint(eager=True)
    in_order = classified.where(~F.col(REPLAY))
    events = new_events.join(in_order.select(key), key, "left_semi").withColumn(
        REPLAY, F.lit(False)).unionByName(
        history.join(classified.where(F.col(REPLAY)).select(key), key, "left_semi")
        .withColumn(REPLAY, F.lit(True)))
    state_in = state.where(F.col("kind") == "hot").join(
        classified.select(F.col(BUCKET).alias("bucket")).distinct(), "bucket", "left_semi",
    ).select("bucket", "kind", "key", "record").unionByName(
        in_order.where(F.col("record").isNotNull()).select(
            F.col(BUCKET).alias("bucket"), F.lit("key").alias("kind"),
            F.col(key).alias("key"), "record"))
    out = events.withColumn(BUCKET, bucket_of(key, buckets)).groupBy(BUCKET).cogroup(
        state_in.groupBy("bucket")).applyInPandas(bucket_step(query, settings, transitions),
                                              OUT_DDL
    ).localCheckpoint(eager=True)
    # one job: the buckets' counters and the new key rows' marks (only state rows are
    # kind "key")
    texts, _, *fed = key_marks(out, F.collect_list(F.when(F.col("kind") == "stats",
                                                          F.col("stats"))))
    totals = dict.fromkeys(STAT_NAMES, 0)
    for text in texts:
        for name, value in json.loads(text).items():
            totals[name] += int(value)
    live = out.where(F.col("kind") == "live").select(
        "key", "lo", "hi", "live_start", "live_end", "live_ingest", "instance")
    replayed = sorted(key_text([k]) for (k,) in
                      classified.where(F.col(REPLAY)).select(key).collect())
    new_state = out.where(F.col("kind").isin("hot", "key"))
    newest, oldest, untimed = combine_marks(stored, fed)
    return LiveStep(live, new_state, totals, replayed, newest, oldest, untimed)


def key_marks(state, *first: Any) -> tuple[Any, ...]:  # noqa: ANN001 - pyspark DataFrame
    """Newest batch id, then newest and oldest ``last_time`` of the key rows and how many
    key rows have none, of state rows (one Spark job); ``first``: other aggregates of the
    rows, computed in the same job and returned first."""
    from pyspark.sql import functions as F

    is_key = F.col("kind") == "key"
    row = state.agg(*first, F.max("batch_id") if "batch_id" in state.columns else F.lit(None),
                    F.max(F.when(is_key, F.col("last_time"))),
                    F.min(F.when(is_key, F.col("last_time"))),
                    F.count(F.when(is_key & F.col("last_time").isNull(), 1))).first()
    return tuple(row)


def combine_marks(*marks: Sequence[Any]) -> tuple[int | None, int | None, bool]:
    """(newest, oldest, untimed) over several :func:`key_marks` tails (stored, new)."""
    newest = [m[0] for m in marks if m[0] is not None]
    oldest = [m[1] for m in marks if m[1] is not None]
    return (max(newest, default=None), min(oldest, default=None),
            any(bool(m[2]) for m in marks))


def within_ns(query: CompiledQuery) -> int | None:
    """A compiled pattern's WITHIN window in ns (None: no WITHIN, keys never expire)."""
    from cep_core.runtime.time_axis import within_seconds

    within = query.match.within
    return None if within is None else int(within_seconds(within) * 1e9)


def expiry_cutoff(window: int | None, newest: int | None, oldest: int | None,
                  untimed: bool) -> int | None:
    """The event time (ns) below which a key's rows expire, if some key row may have:
    a key with no event in the last WITHIN ``window`` before the query's newest event
    can join no future match of a newer event (an older, late one finds no key row and
    replays the key from history), and a key row with no time is the spilled state of a
    key that expired before. None: nothing to expire."""
    if window is None or newest is None:
        return None
    cutoff = newest - window
    return cutoff if untimed or (oldest is not None and oldest < cutoff) else None


@dataclass
class StateWrite:
    """One query's new state rows for gold.partial_matches (:func:`merge_state`):
    ``cutoff`` (:func:`expiry_cutoff`): its key rows older than it are deleted (None: none
    expire)."""

    query_id: str
    fingerprint: str
    rows: Any
    cutoff: int | None


def merge_state(spark, settings: Settings, writes: Sequence[StateWrite]) -> int:  # noqa: ANN001
    """MERGE the batch's new state rows of every query into gold.partial_matches in one
    MERGE (one Delta commit per batch, whatever the number of queries): a NULL
    ``last_time`` or ``pending_ids`` in a new row keeps the stored value; the expired key
    rows of a query with a cutoff are deleted in the same MERGE. Keyed on (query_id,
    fingerprint, kind, bucket, key): a batch run again rewrites the same rows. Returns how
    many rows were deleted (of all the queries)."""
    from delta.tables import DeltaTable
    from pyspark.sql import functions as F

    if not writes:
        return 0
    table = LakeTable(spark, settings, TABLE).ensure()
    columns = schemas.columns(TABLE)

    def mine(w: StateWrite) -> str:
        return f"(t.query_id = '{w.query_id}' AND t.fingerprint = '{w.fingerprint}')"

    rows = None
    for w in writes:
        part = w.rows.select(*columns, F.lit(w.cutoff).cast("bigint").alias("_cutoff"))
        rows = part if rows is None else rows.unionByName(part)
    match = (f"({' OR '.join(mine(w) for w in writes)}) AND t.query_id = s.query_id "
             "AND t.fingerprint = s.fingerprint AND t.kind = s.kind AND t.bucket = s.bucket "
             "AND t.key = s.key")
    update = {c: f"s.{c}" for c in columns}
    update.update({c: f"coalesce(s.{c}, t.{c})" for c in ("last_time", "pending_ids")})
    merge = DeltaTable.forPath(spark, table.path).alias("t").merge(rows.alias("s"), match)
    expiring = [w for w in writes if w.cutoff is not None]
    if not expiring:
        (merge.whenMatchedUpdate(set=update)
         .whenNotMatchedInsert(values={c: f"s.{c}" for c in columns}).execute())
        return 0
    last = "coalesce(s.last_time, t.last_time)"
    gone = " OR ".join(f"({mine(w)} AND (t.last_time IS NULL OR t.last_time < {w.cutoff}))"
                       for w in expiring)
    metrics = (merge.whenMatchedDelete(f"s._cutoff IS NOT NULL AND t.kind = 'key' AND "
                                       f"({last} IS NULL OR {last} < s._cutoff)")
               .whenMatchedUpdate(set=update)
               .whenNotMatchedInsert("s._cutoff IS NULL OR s.kind <> 'key' OR "
                                     "s.last_time >= s._cutoff",
                                     values={c: f"s.{c}" for c in columns})
               .whenNotMatchedBySourceDelete(f"t.kind = 'key' AND ({gone})")
               .execute().first())
    return int(metrics["num_deleted_rows"]) if metrics is not None else 0


def state_write(settings: Settings, query: LiveArchiveQuery, step: LiveStep,
                batch_id: int, version: int, now: datetime) -> StateWrite:
    """The batch's new hot and key rows of a live-archive query for :func:`merge_state`,
    with the cutoff below which its key rows expire (the live pattern's WITHIN window,
    :func:`expiry_cutoff`; a live pattern without WITHIN never expires a key)."""
    from pyspark.sql import functions as F

    print_ = fingerprint(query, settings)
    rows = step.state.select(
        F.lit(query.id).alias("query_id"), F.lit(print_).alias("fingerprint"),
        "kind", "bucket", "key", "last_time", "record", "keys_in_memory",
        "rows_in_memory", F.lit(None).cast("array<string>").alias("pending_ids"),
        F.lit(batch_id).cast("bigint").alias("batch_id"),
        F.lit(version).cast("bigint").alias("history_version"),
        F.lit(pd.Timestamp(now).tz_localize(None)).alias("updated"))
    cutoff = expiry_cutoff(within_ns(query.spec().live), step.newest, step.oldest,
                           step.untimed)
    return StateWrite(query.id, print_, rows, cutoff)


def drop_stale(spark, settings: Settings, queries: list[LiveArchiveQuery],  # noqa: ANN001
               valid: dict[str, str] | None = None,
               only: Sequence[str] | None = None, keep: Sequence[str] = ()) -> int:
    """Delete state rows no current query can use (other fingerprint, or a query that is
    gone); ``valid``: the other queries' fingerprints (pattern queries' state, see
    :mod:`~lakecep.jobs.match_state`). Returns how many query ids had stale rows.
    ``only``: look at these query ids' rows only (a per-query gold run leaves the other
    queries' state alone); ``keep``: leave these query ids' rows (a rule about to be
    deployed side by side: its old version's state moves to it)."""
    return LakeTable(spark, settings, TABLE).drop_other_fingerprints(
        {**(valid or {}), **{q.id: fingerprint(q, settings) for q in queries}}, only=only,
        keep=keep)
