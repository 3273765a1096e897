"""silver -> gold: complex events with lineage, exactly once (the batch driver).

For each silver micro-batch (the newly arrived events) the driver pins the silver version,
hands the batch and the history at that version to each shipped query's kind --
:mod:`~lakecep.jobs.gold_pattern` (MATCH_RECOGNIZE over the touched keys' history),
:mod:`~lakecep.jobs.gold_live_archive` (live pattern joined with an archive pattern) and
:mod:`~lakecep.jobs.gold_uncertain` (probabilistic events), :mod:`~lakecep.jobs.gold_window`
(window aggregates, to ``gold.window_outputs``) -- and writes what they found.

Rows are merged into ``gold.complex_events`` on ``(query_id, match_id)``, where
``match_id`` hashes the query and the ids of its sub-events (:mod:`~lakecep.jobs.gold_rows`),
so replays after a crash and re-detections never duplicate a row. The pinned version is
recorded in ``history_version``. The tuned configuration (``lakecep.tuning``) sets the files
per trigger (at start) and each query's FAIR scheduler pool; a newer configuration written
while the stream runs is picked up before the next micro-batch (:func:`refresh_tuned`).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from lakecep import rules
from lakecep.alerts import check_url
from lakecep.config import Settings
from lakecep.queries import (
    OLD,
    PRIORITIES,
    AcquisitionQuery,
    LiveArchiveQuery,
    PatternQuery,
    QueryDefinition,
    UncertainQuery,
    WindowQuery,
    load_queries,  # noqa: F401 - gold.load_queries: the queries gold runs by default
    micros,
    old_version,
    rule_id,
)
from lakecep.sources import load_sources, sources_dir, with_source_attributes
from lakecep.tuning import TuningError, load_latest, pool_name
from lakecep.validation import ValidationError, check_queries, validate

from . import alerts, gold_chain, reload, snapshots
from .archive import RecentBuffer
from .class_gate import GATE
from .gold_acquisition import AcquisitionPlans, acquisition_rows, record_plans
from .gold_live_archive import check_live_columns, live_archive_rows, record_access
from .gold_pattern import pattern_rows
from .gold_rows import GOLD_DDL
from .gold_uncertain import merge_probabilistic, uncertain_rows
from .gold_window import (
    WindowSteps,
    commit_windows,
    move_state,
    warm_start,
    window_steps,
)
from .gold_window import drop_stale as drop_stale_windows
from .live_step import LiveStep, drop_stale, merge_state
from .live_step import state_write as live_state
from .match_state import PatternStep, find_pattern, supersede_pending, supported, within_ns
from .match_state import fingerprint as pattern_fingerprint
from .match_state import move_state as move_pattern_state
from .match_state import state_write as pattern_state
from .streaming import (
    StreamRun,
    app_status,
    batch_function,
    ends_inside_commit,
    log,
    run_stream,
    writer_id,
)
from .tables import LakeTable, engine_columns

QUERY = "gold_complex_events"


def stream_name(query_id: str | None = None) -> str:
    """The gold stream's name (its checkpoint folder and writer id): ``gold_complex_events``
    runs every query; ``gold_complex_events__<query id>`` one query (``lakecep run gold
    --query``, one Airflow task per query), with its own checkpoint, so per-query runs are
    independent of each other and each exactly once (docs/airflow.md)."""
    return QUERY if query_id is None else f"{QUERY}__{query_id}"


@dataclass
class Detection:
    """One batch's gold rows and, per live-archive query, its archive-access record and
    its live step (whose state is saved once gold is written)."""

    rows: Any  # pyspark DataFrame of gold.complex_events rows
    access: list[dict[str, Any]] = field(default_factory=list)
    live_steps: list[tuple[LiveArchiveQuery, LiveStep]] = field(default_factory=list)
    #: per uncertain query: its probabilistic-event rows and the partition keys recomputed
    probabilistic: list[tuple[UncertainQuery, Any, list[str]]] = field(default_factory=list)
    #: per acquisition query with work in this batch: its gold.acquisition_plans record
    plans: list[dict[str, Any]] = field(default_factory=list)
    #: the window queries' step (output rows and new state, written after gold)
    windows: WindowSteps | None = None
    #: per query: the partition keys whose whole answer ``rows`` holds (pattern queries:
    #: every touched key; live-archive queries: the keys replayed from history)
    recomputed: list[tuple[str, list[str]]] = field(default_factory=list)
    #: incremental pattern queries' steps (:mod:`~lakecep.jobs.match_state`); their
    #: in-order keys' rows are in ``rows`` and in ``append`` (appended, not MERGEd)
    pattern_steps: list[PatternStep] = field(default_factory=list)
    append: Any = None
    #: ``rows`` without ``append``: what the insert-only MERGE writes
    merge: Any = None


#: What a per-query checkpoint takes from the checkpoint of every query (not the writer id:
#: each stream writes with its own Delta ``txnAppId``).
SEEDED = ("metadata", "offsets", "commits", "sources")


def seed_checkpoint(settings: Settings, stream: str) -> bool:
    """Migration to per-query streams: a per-query stream's first run starts from the
    progress of the stream of every query, when the lake has one, instead of re-reading
    all of silver. Returns whether it did."""
    import shutil

    target, shared = settings.checkpoint(stream), settings.checkpoint(QUERY)
    if (target / "offsets").exists() or not (shared / "offsets").is_dir():
        return False
    target.mkdir(parents=True, exist_ok=True)
    for name in SEEDED:
        source = shared / name
        if source.is_dir():
            shutil.copytree(source, target / name, dirs_exist_ok=True)
        elif source.is_file():
            shutil.copy2(source, target / name)
    return True


#: Gold tables whose rows a gold batch writes: one from an older release gets the columns
#: added since (they read NULL in its older rows).
UPGRADED = ("gold.complex_events", "gold.probabilistic_events", "gold.window_outputs",
            "gold.alerts")


def uncommitted(settings: Settings, stream: str) -> list[int]:
    """The batch ids of ``stream``'s checkpoint planned (``offsets/``) but not committed
    (``commits/``): a stopped run's last batch, which the stream runs again first."""
    folder = settings.checkpoint(stream)

    def ids(name: str) -> set[int]:
        return {int(p.name) for p in (folder / name).glob("*") if p.name.isdigit()}

    done = max(ids("commits"), default=-1)
    return sorted(b for b in ids("offsets") if b > done)


def detect(spark, queries: Sequence[QueryDefinition], new_events, history, version: int,  # noqa: ANN001, PLR0913
           batch_id: int, detected: datetime, settings: Settings, strategy: str = "",
           rbuffer: RecentBuffer | None = None,
           tuned: dict[str, Any] | None = None,
           plans: AcquisitionPlans | None = None,
           incremental: dict[str, str] | None = None, stream: str | None = None,
           floors: dict[str, int] | None = None,
           warm: dict[str, int] | None = None,
           backfill: set[str] | frozenset[str] = frozenset(),
           ceilings: dict[str, int] | None = None, held: bool = False,
           batch_rows: int | None = None) -> Detection:
    """Gold rows of every query for one batch of ``new_events`` over ``history`` (silver
    at the pinned ``version``). ``strategy`` overrides the live-archive queries' own;
    ``tuned`` is the tuned configuration in force (``lakecep.tuning``); ``plans`` the
    acquisition plans kept across batches (re-planned when the statistics run changes);
    ``incremental``: pattern query id -> key column of the queries that keep partial-match
    state (:mod:`~lakecep.jobs.match_state`; the others recompute touched keys' history).
    ``stream`` the gold stream's name (:func:`stream_name`, for the window state).
    Hot reload (docs/rules.md, "Hot reload"): ``floors``, per rule deployed with ``reload =
    "clear"``, its ``M_d`` (its version sees no event at or before it); ``warm``, per
    pattern rule deployed with ``reload = "warm"`` at this batch, its ``M_d`` (every key with
    an event in the last ``WITHIN`` before it is recomputed too). ``backfill``: the rules
    added at this batch (:meth:`~lakecep.jobs.reload.Rules.backfills`): each is evaluated
    over every key of ``history``, not only the batch's keys (an incremental pattern
    query's first batch does that by itself; a window rule is fed all of ``history``).
    ``ceilings``: per old version of a pattern rule run side by side (``<id>@<rule_hash>``),
    its ``M_d``: it keeps only matches whose first event is at or before it.
    ``held``: the batch ends inside a silver commit (the window queries' watermark waits
    for the commit's end, :func:`~lakecep.jobs.gold_window.window_steps`). ``batch_rows``:
    how many rows ``new_events`` has, if the caller knows (None: counted where needed).

    Keys are hashed into buckets; each bucket is one engine call. With a tuned
    configuration each query's work runs in its FAIR scheduler pool (its rows are
    materialised there).
    """
    buckets = settings.spark_shuffle_partitions * 2
    columns = engine_columns(queries)
    new_events = new_events.select(*columns)
    history = history.select(*columns)
    found = Detection(None)
    results = []
    appends: list[Any] = []
    pools = (tuned or {}).get("gold", {}).get("pools", {})
    context = spark.sparkContext
    base = context.getLocalProperty("spark.scheduler.pool")  # a class stream's pool
    batch_events = new_events
    for query in queries:
        # a class stream (docs/rules.md, "Priorities") runs everything in its class's pool
        pool = (pool_name(query.id) if base is None and pool_name(query.id) in pools
                else None)
        context.setLocalProperty("spark.scheduler.pool", pool or base)  # None: default
        if isinstance(query, WindowQuery):
            continue  # all window queries at once, below
        # a rule added at this batch: every key of silver is "touched" (its whole answer
        # over the existing history; gold's writers keep each row once)
        new_events = history if query.id in backfill else batch_events
        if isinstance(query, UncertainQuery):
            rows, touched = uncertain_rows(query, new_events, history, version, batch_id,
                                           detected, buckets)
            found.probabilistic.append((query, rows, touched))
            continue
        if isinstance(query, AcquisitionQuery):
            plans = plans if plans is not None else AcquisitionPlans()
            rows, plan_record = acquisition_rows(spark, settings, query, new_events, history,
                                                 version, batch_id, detected, plans)
            if rows is None:
                continue
            results.append(rows)
            assert plan_record is not None
            found.plans.append(plan_record)
        elif isinstance(query, PatternQuery) and query.id in (incremental or {}):
            q_new, q_history = reloaded(query, new_events, history, floors, warm)
            step = find_pattern(spark, settings, query, (incremental or {})[query.id],
                                batch_events if query.id in backfill else q_new, q_history,
                                version, batch_id, detected,  # (it bootstraps by itself)
                                (ceilings or {}).get(query.id))
            found.pattern_steps.append(step)
            results.append(step.merge)
            appends.append(step.append)
            found.recomputed.append((query.id, step.replayed))
        elif isinstance(query, PatternQuery):
            q_new, q_history = reloaded(query, new_events, history, floors, warm)
            rows, touched = pattern_rows(query, q_new, q_history, version, batch_id,
                                         detected, buckets, (ceilings or {}).get(query.id))
            results.append(rows)
            found.recomputed.append((query.id, touched))
        else:
            rows, record, step = live_archive_rows(
                spark, settings, query, new_events, history, version, batch_id, detected,
                buckets, strategy or query.strategy, rbuffer,
                (tuned or {}).get("queries", {}).get(query.id),
                None if query.id in backfill else batch_rows)
            results.append(rows)
            found.access.append(record)
            found.live_steps.append((query, step))
            found.recomputed.append((query.id, step.replayed))
        if pool:
            results[-1] = results[-1].localCheckpoint(eager=True)  # computed in its pool
    context.setLocalProperty("spark.scheduler.pool", base)
    windows = [q for q in queries if isinstance(q, WindowQuery)]
    if windows:
        found.windows = window_steps(spark, settings, windows, batch_events, batch_id, stream,
                                     floors, history if backfill else None, backfill, held)
    def union(frames: list[Any]):  # noqa: ANN202
        if not frames:
            return spark.createDataFrame([], GOLD_DDL)
        out = frames[0]
        for frame in frames[1:]:
            out = out.unionByName(frame)
        return out

    found.merge = union(results).dropDuplicates(["query_id", "match_id"])
    found.append = union(appends) if appends else None
    found.rows = found.merge if not appends else found.merge.unionByName(found.append)
    return found


def incremental_keys(settings: Settings, queries: Sequence[QueryDefinition],
                     silver_schema: Any) -> dict[str, str]:
    """Pattern query id -> key column of the queries that keep incremental partial-match
    state (:func:`~lakecep.jobs.match_state.supported`; none with ``incremental_patterns``
    off)."""
    if not settings.incremental_patterns:
        return {}
    keys = {q.id: supported(q, silver_schema) for q in queries if isinstance(q, PatternQuery)}
    return {query_id: key for query_id, key in keys.items() if key is not None}


def reloaded(query: PatternQuery, new_events, history, floors: dict[str, int] | None,  # noqa: ANN001, ANN201
             warm: dict[str, int] | None):
    """A pattern rule's new events and history after a hot reload (docs/rules.md): a version
    deployed with ``clear`` sees only events after its ``M_d``; one deployed with ``warm`` at
    this batch also recomputes every key with an event in the last ``WITHIN`` before ``M_d``
    (every key without a ``WITHIN``): those keys' events join the new ones."""
    from pyspark.sql import functions as F

    if query.id in (floors or {}):
        after = F.unix_micros("event_time") > (floors or {})[query.id]
        new_events, history = new_events.where(after), history.where(after)
    if query.id in (warm or {}):
        within = within_ns(query.compiled())
        recent = history if within is None else history.where(
            F.unix_micros("event_time") >= (warm or {})[query.id] - within // 1000)
        new_events = new_events.unionByName(recent)
    return new_events, history


def check_window_columns(columns: Sequence[str], queries: Sequence[WindowQuery]) -> None:
    """A window query's key must be a silver column handed to the engine or an attribute."""
    for query in queries:
        if query.key not in columns:
            raise ValueError(f"window query {query.id!r}: key {query.key!r} is neither an "
                             f"engine column nor an [attributes] name; use one of "
                             f"{', '.join(columns)}")


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


#: The classes whose gold streams run in this process (priority -> rule ids), for
#: :func:`apply_pools` to re-weight their pools with a new tuned configuration.
CLASS_RULES: dict[str, list[str]] = {}
#: How often a class stream runs a batch whose Delta commit conflicted with another class
#: stream's (concurrent MERGEs into one table) before the stream fails.
CONFLICT_RETRIES = 5


def concurrent_write(exc: BaseException) -> bool:
    """Whether ``exc`` is Delta's optimistic-concurrency conflict (another writer committed
    to a table this batch read): the batch can run again, every write being idempotent."""
    text = f"{type(exc).__name__}: {exc}"
    return "Concurrent" in text and ("io.delta" in text or "Delta" in text
                                     or type(exc).__module__.startswith("delta"))


def class_pools(tuned: dict[str, Any] | None, classes: dict[str, list[str]]
                ) -> dict[str, tuple[int, int]]:
    """The class pools' (weight, minShare) (docs/rules.md, "Priorities")."""
    return {rules.class_pool(c): (rules.class_weight(c, ids, tuned), rules.CLASS_MIN_SHARE[c])
            for c, ids in classes.items()}


def set_pools(spark, pools: dict[str, tuple[int, int]]) -> str:  # noqa: ANN001
    """Give the running session's FAIR scheduler the pools ``pools`` (name -> (weight,
    minShare)): a pool that differs is replaced by a new one (Spark's pools are immutable)
    unless a job runs in it, a missing one added. Returns what it did, for the log. Without
    FAIR mode (a session started without a pool file) nothing is changed: pools are ignored
    by the FIFO scheduler."""
    context = spark.sparkContext
    if context.getConf().get("spark.scheduler.mode", "FIFO").upper() != "FAIR":
        return ("scheduler FIFO (no tuned pool file at session start): pools "
                f"{', '.join(sorted(pools))} are labels only")
    jvm = context._jvm  # noqa: SLF001 - pools have no Python API
    root = context._jsc.sc().taskScheduler().rootPool()  # noqa: SLF001
    fair = jvm.org.apache.spark.scheduler.SchedulingMode.FAIR()
    done = []
    for name, (weight, share) in sorted(pools.items()):
        found = root.getSchedulableByName(name)
        if found is not None and (found.weight(), found.minShare()) == (weight, share):
            continue
        if found is not None:
            if found.runningTasks() or not found.schedulableQueue().isEmpty():
                done.append(f"{name} busy (kept weight {found.weight()})")
                continue  # busy: the next configuration or start
            root.removeSchedulable(found)
        root.addSchedulable(jvm.org.apache.spark.scheduler.Pool(name, fair, share, weight))
        done.append(f"{name} weight {weight}" + (f" minShare {share}" if share else ""))
    return "pools " + (", ".join(done) or "unchanged")


def apply_pools(spark, tuned: dict[str, Any]) -> list[str]:  # noqa: ANN001
    """Give the running session's FAIR pools the weights of ``tuned``: each query's pool
    and, for the class streams of this process (:data:`CLASS_RULES`), each class's pool
    (:func:`class_pools`). Called between gold micro-batches. Returns the pools changed."""
    wanted = {name: (int(weight), 0) for name, weight in tuned["gold"]["pools"].items()}
    wanted |= class_pools(tuned, dict(CLASS_RULES))
    changed = set_pools(spark, wanted)
    if not changed.startswith("pools ") or changed == "pools unchanged":
        return []
    return changed.removeprefix("pools ").split(", ")


def refresh_tuned(spark, settings: Settings, tuned: dict[str, Any] | None,  # noqa: ANN001
                  stream: str) -> dict[str, Any] | None:
    """The tuned configuration for the next micro-batch: the newest ``config-vN.json``
    (``lakecep.tuning.load_latest``) when it is newer than ``tuned``, with its pool weights
    applied to the running session (:func:`apply_pools`); ``tuned`` otherwise (also when
    the newest file cannot be read: logged, the batch runs on the one in force). The files
    per trigger are a source option: a new value applies at the next start."""
    try:
        newest = load_latest(settings)
    except TuningError as exc:
        log(f"{stream}: warning: {exc}; keeping v{(tuned or {}).get('version')}")
        return tuned
    if newest is None or (tuned is not None and newest["version"] == tuned["version"]):
        return tuned
    changed = apply_pools(spark, newest)
    log(f"{stream}: tuned configuration v{newest['version']} picked up between micro-batches"
        f" (was {'v' + str(tuned['version']) if tuned else 'none'}): pools "
        f"{', '.join(changed) or 'unchanged'}; max_files_per_trigger "
        f"{newest['gold']['max_files_per_trigger']} applies at the next start")
    app_status["tuned_version"] = newest["version"]
    return newest


def merge_into_gold(spark, settings: Settings, rows,  # noqa: ANN001
                    table: str = "gold.complex_events") -> None:
    """Insert the batch's new complex events (a match already in gold is not written
    again: an insert-only MERGE on ``(query_id, match_id)``, which rewrites no file);
    ``table``: another table of that key (``gold.probabilistic_events``)."""
    from delta.tables import DeltaTable

    gold = LakeTable(spark, settings, table).ensure()
    (
        DeltaTable.forPath(spark, gold.path).alias("t")
        .merge(rows.alias("s"), "t.query_id = s.query_id AND t.match_id = s.match_id")
        .whenNotMatchedInsertAll()
        .execute()
    )


def supersede(spark, settings: Settings, rows, recomputed: list[tuple[str, list[str]]],  # noqa: ANN001
              version: int, keep: dict[str, str] | None = None) -> tuple[int, int]:
    """Keep gold equal to the current answer for the keys this batch recomputed.

    ``rows`` hold the whole answer of each recomputed (query, partition key). A current
    gold row of such a key that ``rows`` no longer hold (a late event broke the match) gets
    ``superseded_version = version``; a superseded row that ``rows`` hold again is current
    again. Rows are never deleted (alerts and analysts may have seen them). Returns
    (superseded, restored). Rare changes: computed first, then one MERGE of only them.
    ``keep``: per query id with a version of its own (a rule deployed with ``reload =
    "clear"`` or side by side, and the old version run beside it as ``<id>@<rule_hash>``,
    whose ``recomputed`` keys are its rule id's), its ``rule_hash``: only that version's
    rows are compared (the other versions' rows stay as they were emitted).
    """
    from delta.tables import DeltaTable
    from pyspark.sql import functions as F

    keep = keep or {}
    pairs = sorted({(query_id.removesuffix(f"{OLD}{keep[query_id]}") if query_id in keep
                     else query_id, key, keep.get(query_id))
                    for query_id, keys in recomputed for key in keys})
    if not pairs:
        return 0, 0
    gold = LakeTable(spark, settings, "gold.complex_events")
    keys = spark.createDataFrame(pairs, "query_id STRING, partition_key STRING, _rule STRING")
    existing = gold.read().join(F.broadcast(keys), ["query_id", "partition_key"]).where(
        F.col("_rule").isNull() | (F.coalesce(F.col("rule_hash"), F.lit("")) == F.col("_rule")))
    found = rows.select("query_id", "match_id", F.lit(True).alias("_found"))
    gone, back = F.col("_found").isNull(), F.col("_found").isNotNull()
    current = F.col("superseded_version").isNull()
    changes = (existing.select("query_id", "match_id", "superseded_version").distinct()
               .join(found, ["query_id", "match_id"], "left")
               .where((gone & current) | (back & ~current))
               .select("query_id", "match_id",
                       F.when(gone, F.lit(version)).cast("bigint").alias("superseded_version"))
               .collect())
    if not changes:
        return 0, 0
    source = spark.createDataFrame(changes, "query_id STRING, match_id STRING, "
                                            "superseded_version BIGINT")
    (
        DeltaTable.forPath(spark, gold.path).alias("t")
        .merge(source.alias("s"), "t.query_id = s.query_id AND t.match_id = s.match_id")
        .whenMatchedUpdate(set={"superseded_version": "s.superseded_version"})
        .execute()
    )
    superseded = sum(1 for c in changes if c.superseded_version is not None)
    return superseded, len(changes) - superseded


def run(spark, settings: Settings, *, run_id: str | None = None,  # noqa: ANN001
        continuous: bool = False, queries: Sequence[QueryDefinition] | None = None,
        query_id: str | None = None) -> StreamRun:
    """Run gold over the new silver rows. ``query_id``: only that query, as its own stream
    (:func:`stream_name`: own checkpoint and writer id; the other queries' stored state is
    left alone)."""
    del run_id  # a stream: its checkpoint, not a run id, says what was processed
    watch = not queries and query_id is None  # hot reload from queries_dir (docs/rules.md)
    # Fail fast on a bad query or source, before any table is touched or data moves: the
    # same pure-Python check as `lakecep validate` (lakecep.validation), one line per problem.
    if not queries:
        report = validate(settings.queries_dir, sources_dir(settings))
        report.raise_for_problems()
        sources = report.sources
        queries = report.queries
    else:
        sources = load_sources(sources_dir(settings))
        problems = check_queries(list(queries), sources)[1]
        if problems:
            raise ValidationError(problems)
    chained = rules.chained(queries)   # rules over other rules' outputs (docs/rules.md)
    levels = rules.rule_levels(list(queries)) if chained else {}
    if query_id is not None:
        known = [q.id for q in queries]
        if query_id not in known:
            raise ValueError(f"gold --query {query_id!r}: no such query; the queries are "
                             f"{', '.join(known)}")
        return _start(spark, settings, [q for q in queries if q.id == query_id], sources,
                      [q for q in chained if q.id == query_id], levels,
                      stream_name(query_id), [query_id], continuous)  # (no hot reload)
    classes = rules.priority_classes(queries)
    if len(classes) == 1:   # one class: the stream of every query, as before classes
        return _start(spark, settings, queries, sources, chained, levels, QUERY, None,
                      continuous, watch=watch)
    # one stream per class (docs/rules.md, "Priorities"), started high first: with
    # availableNow they run one after the other in that order (a chained rule's inputs,
    # of its class or a higher one, are written before it runs)
    runs = []
    for priority, members in classes.items():
        ids = [q.id for q in members]
        runs.append(_start(spark, settings, members, sources,
                           [q for q in chained if q.id in ids], levels,
                           rules.class_stream(priority), ids, continuous, priority,
                           watch=watch))
    return StreamRun(QUERY, sum(r.batches for r in runs),
                     max(r.input_rows for r in runs), sum(r.seconds for r in runs))


def _start(spark, settings: Settings, queries: Sequence[QueryDefinition],  # noqa: ANN001, C901, PLR0913, PLR0915
           sources: Sequence[Any], chained: list[Any], levels: dict[str, int], stream: str,
           only: list[str] | None, continuous: bool, priority: str | None = None, *,
           watch: bool = False) -> StreamRun:
    """Start (or run, with availableNow) the gold stream ``stream`` of ``queries``
    (``chained``: those of them that read other rules' outputs; ``only``: the query ids
    whose stored state it may drop, None: every query's); ``priority``: the class of a
    class stream, whose jobs run in the class's FAIR pool; ``watch``: deploy the changes
    of the query folder while it runs (of its class only; docs/rules.md, "Hot reload")."""
    if stream != QUERY and seed_checkpoint(settings, stream):
        log(f"{stream}: new checkpoint, seeded from {QUERY}'s (it continues where the stream "
            "of every query stopped; docs/airflow.md, 'One task per query', docs/rules.md, "
            "'Priorities')")
    others = sorted(p.name for p in settings.checkpoints.glob(f"{QUERY}__*")) + sorted(
        p.name for p in settings.checkpoints.glob("gold_*")
        if p.name in {rules.class_stream(c) for c in PRIORITIES})
    if stream == QUERY and others:
        log(f"{stream}: warning: this lake's gold also runs per query or per priority class "
            f"({', '.join(others)}): this stream re-reads what they processed; window "
            "queries would append their outputs again (docs/airflow.md, 'One task per "
            "query')")
    pool = rules.class_pool(priority) if priority else None
    if priority:
        CLASS_RULES[priority] = [q.id for q in queries]
        log(f"{stream}: priority {priority}: " + set_pools(spark, class_pools(
            load_latest(settings), {priority: CLASS_RULES[priority]})))
    queries = with_source_attributes([q for q in queries if q not in chained], sources)
    silver = LakeTable(spark, settings, "silver.events").ensure()
    LakeTable(spark, settings, "gold.complex_events").ensure()
    for name in UPGRADED:
        table = LakeTable(spark, settings, name)
        if table.exists() and (added := table.upgrade()):
            log(f"{stream}: {name} from an older release: added {', '.join(added)}")
    log(f"{stream}: queries "
        f"{', '.join(f'{q.id} v{q.version} ({q.rule_hash})' for q in queries)}")
    tuned = load_latest(settings)
    max_files = settings.max_files_per_trigger
    if tuned is None:
        log(f"{stream}: no tuned configuration in {settings.tuning_dir} (or tuning_apply is "
            "off): settings as configured")
    else:
        max_files = int(tuned["gold"]["max_files_per_trigger"])
        log(f"{stream}: tuned configuration v{tuned['version']} (statistics run "
            f"{tuned['statistics_run']}): {max_files} files per trigger; "
            + log_pools(spark, tuned))
    app_status["tuned_version"] = tuned["version"] if tuned else None
    in_use = {"tuned": tuned}  # re-read before every micro-batch (refresh_tuned)
    live_archive = [q for q in queries if isinstance(q, LiveArchiveQuery)]
    if live_archive:
        names = ", ".join(f"{q.id}: {settings.live_archive_strategy or q.strategy}"
                          for q in live_archive)
        log(f"{stream}: live-archive strategies {names}; RBuffer {settings.rbuffer_rows} rows")
    rbuffer = RecentBuffer(settings.rbuffer_rows) if live_archive else None
    plans = AcquisitionPlans()
    columns = engine_columns(queries)
    windows = [q for q in queries if isinstance(q, WindowQuery)]
    in_force = reload.Rules(spark, settings, stream, [*queries, *chained], watch, priority)
    sides = reload.SideBySide(settings, stream)  # strategy B's old versions (docs/rules.md)

    def olds() -> list[QueryDefinition]:
        """The old versions running side by side (B), as ``<id>@<rule_hash>``."""
        return [old_version(q) for q, _ in sides.retiring.values()]

    # a rule deployed side by side at the first batch keeps its old version's state
    pending = [q.id for q in queries if q.reload == "side_by_side" and q.id in in_force.recorded
               and sides.old(q.id, in_force.recorded[q.id][0]) is not None
               and in_force.recorded[q.id][0] != q.rule_hash]
    incremental = incremental_keys(settings, [*queries, *olds()],
                                   silver.read().select(*columns).schema)
    if incremental:
        log(f"{stream}: incremental pattern queries (partial matches in gold.partial_matches,"
            f" history read only for late keys): {', '.join(sorted(incremental))}")
    LakeTable(spark, settings, "gold.partial_matches").ensure().upgrade()
    stale = drop_stale(spark, settings, live_archive, {
        q.id: pattern_fingerprint(q, settings) for q in [*queries, *olds()]
        if isinstance(q, PatternQuery) and q.id in incremental}, only=only, keep=pending)
    if stale:
        log(f"{stream}: dropped the stored partial matches of {stale} changed or removed "
            "live-archive queries (their keys are replayed from silver history)")
    stale = drop_stale_windows(spark, settings, [
        *windows, *(q for q in olds() if isinstance(q, WindowQuery))], stream, only=only,
        keep=pending)
    if stale:
        log(f"{stream}: dropped the stored window state of {stale} changed or removed window "
            "queries (they start with empty windows)")
    check_window_columns(silver.read().select(*columns).columns, windows)
    if live_archive:
        check_live_columns(silver.read().select(*columns).schema, live_archive)
        log(f"{stream}: partial matches in {settings.partial_match_buckets} buckets, "
            f"{settings.partial_match_capacity} keys in memory per bucket, "
            f"{settings.partial_match_policy.upper()} spilling")

    alert_ids = alerts.alerting(queries)
    if alert_ids:
        if settings.alert_webhook:
            check_url(settings.alert_webhook)
        log(f"{stream}: alerts of {', '.join(alert_ids)} to gold.alerts"
            + (f" and {settings.alert_webhook}" if settings.alert_webhook else ""))
    if chained:
        if gold_chain.enable_change_feed(spark, settings):
            log(f"{stream}: turned on gold.complex_events' change data feed (chained rules "
                "read their inputs' changes from it)")
        log(f"{stream}: chained rules " + ", ".join(
            f"{q.id} (level {levels[q.id]}, input {', '.join(q.inputs)})" for q in chained))
    horizons = {q.id: q.snapshot.horizon for q in snapshots.snapshot_queries(queries)}
    for warning in snapshots.retention_warnings(silver, horizons):
        log(f"{stream}: warning: {warning}")

    def send_alerts(new: int, batch_id: int, detected: datetime, history,  # noqa: ANN001
                    version: int) -> None:
        delivered, failed, waiting = alerts.deliver(spark, settings, detected)
        note = f"; webhook: {delivered} delivered" if settings.alert_webhook else ""
        if failed or waiting:
            note += f", {failed} failed, {waiting} not tried (retried next batch)"
        taken, pending = snapshots.take(spark, settings, queries, history, version, batch_id,
                                        detected)
        if taken or pending:
            note += f"; snapshots: {taken} written, {pending} pending"
        log(f"{stream}: batch {batch_id}: {new} new alerts{note}")

    writer = writer_id(settings, stream)  # txnAppId of the access record's append
    #: batches run before (the checkpoint's batch planned but not committed: a crash; a
    #: batch retried after a conflict): their gold writes may be in Delta already
    again = set(uncommitted(settings, stream))
    if again:
        log(f"{stream}: batch {', '.join(map(str, sorted(again)))} planned by an earlier run "
            "but not committed: run again (its gold rows MERGEd, not appended)")

    def deploy(batch_id: int, detected: datetime) -> dict[str, int]:
        """Deploy the rules changed since the last batch (docs/rules.md, "Hot reload");
        returns the pattern rules to warm-start in this batch (id -> M_d)."""
        nonlocal queries, alert_ids
        from pyspark.sql import functions as F

        previous = settings.checkpoint(stream) / "offsets" / str(batch_id - 1)
        deployments = in_force.check(batch_id, not previous.exists() or not ends_inside_commit(
            settings.checkpoint(stream), batch_id - 1))
        if not deployments:
            return {}

        @functools.cache
        def before():  # noqa: ANN202
            """The pre-deployment data: what the stream read before this batch (not
            `history`, silver's latest version, which may be ahead of the stream); read
            from the offset log once, when a deployment needs it."""
            return reload.processed(spark, settings, stream, silver, batch_id)

        if any(d.m_d is None and d.strategy != "initial" for d in deployments):
            m_d = before().agg(F.max(F.unix_micros("event_time"))).first()[0]
            deployments = [d if d.m_d is not None or d.strategy == "initial"
                           else dataclasses.replace(d, m_d=m_d) for d in deployments]
        accepted, changed = [], []
        running = {q.id for q in queries}
        for d in deployments:
            # (an added rule found at a start is already among the queries)
            if d.strategy in ("initial", "restart") or d.query_id in running and \
                    d.strategy == "backfill":
                accepted.append(d)
                continue
            new = with_source_attributes([d.new], sources)[0] if d.new is not None else None
            candidate = [q for q in queries if q.id != d.query_id] + ([new] if new else [])
            if isinstance(new, WindowQuery):
                try:
                    check_window_columns(
                        silver.read().select(*engine_columns(candidate)).columns, [new])
                except ValueError as exc:
                    log(f"{stream}: {d.query_id} changed, not deployed (the version in force "
                        f"keeps running): {exc}")
                    continue
            queries = sorted(candidate, key=lambda q: q.id)
            accepted.append(dataclasses.replace(d, new=new))
            changed.append(d)
        warm: dict[str, int] = {}
        if changed:
            ids = [d.query_id for d in changed]
            by_id = {q.id: q for q in queries}
            alone = side_by_side([d for d in changed if isinstance(by_id.get(d.query_id),
                                                                  reload.HOT)])
            incremental.clear()
            incremental.update(incremental_keys(
                settings, [*queries, *olds()],
                silver.read().select(*engine_columns(queries)).schema))
            accepted = [dataclasses.replace(d, strategy="clear") if d.query_id in alone else d
                        for d in accepted]
            now_windows = [q for q in queries if isinstance(q, WindowQuery)]
            drop_stale_windows(spark, settings, now_windows, stream, only=ids)
            drop_stale(spark, settings, [q for q in queries if isinstance(q, LiveArchiveQuery)],
                       {q.id: pattern_fingerprint(q, settings) for q in queries
                        if isinstance(q, PatternQuery) and q.id in incremental}, only=ids)
            warm_windows = [by_id[d.query_id] for d in changed if d.strategy == "warm"
                            and d.m_d is not None and isinstance(by_id.get(d.query_id),
                                                                WindowQuery)]
            if warm_windows:
                cols = engine_columns(queries)
                m_d = next(d.m_d for d in changed if d.m_d is not None)
                fed = warm_start(spark, settings, warm_windows, before().select(*cols), m_d,
                                 batch_id, stream, detected)
                log(f"{stream}: batch {batch_id}: warm start of "
                    f"{', '.join(q.id for q in warm_windows)} from silver history: {fed} "
                    "pre-deployment events fed (of the batches before this one)")
            warm = {d.query_id: d.m_d for d in changed if d.strategy == "warm"
                    and d.m_d is not None and isinstance(by_id.get(d.query_id), PatternQuery)}
            alert_ids = alerts.alerting(queries)
        in_force.record(accepted, detected)
        sides.save(queries)
        return warm

    def side_by_side(changed: list[reload.Deployment]) -> set[str]:
        """Start strategy B for the window and pattern rules of ``changed`` deployed with
        it: the old version's state (window state, partial matches) goes to its side-by-side
        query (:func:`~lakecep.queries.old_version`). Returns the rules whose old version
        is unknown (deployed with ``clear`` instead)."""
        alone = set()
        # every old version first: saving the first one's hand-over stores the new
        # definitions in force (two rules deployed side by side at once)
        known = {d.query_id: d.old if isinstance(d.old, reload.HOT) else
                 sides.old(d.query_id, d.old_hash) for d in changed}
        for d in changed:
            if d.strategy != "side_by_side":
                continue
            old = known[d.query_id]
            if old is None or d.m_d is None:
                why = ("no event seen yet" if old else
                       "the old version is not known (a rule added back, or recorded "
                       "by an older release)")
                log(f"{stream}: {d.query_id}: {why}: deployed with clear instead of "
                    "side_by_side")
                alone.add(d.query_id)
                continue
            if d.query_id in sides.retiring and sides.retiring[d.query_id][0] != old:
                log(f"{stream}: warning: {d.query_id}: deployed side by side again before "
                    "its previous old version retired: that one stops now (its windows "
                    "still open are not served, its matches not yet found are not "
                    "written; docs/rules.md, 'Hot reload', B)")
            if isinstance(old, WindowQuery):
                move_state(spark, settings, old, stream)
            else:
                move_pattern_state(spark, settings, old)
            sides.retiring[d.query_id] = (old, d.m_d)
            sides.save(queries)  # before the deployment is recorded: the state has moved
        return alone

    def retire(steps: WindowSteps | None, batch_id: int, detected: datetime,
               through: int) -> None:
        """Retire the old versions running side by side whose windows or matches are all
        final (docs/rules.md, B): a window rule's watermark passed ``M_d + window +
        allowed_lateness``; for a pattern rule the newest event ``through`` this batch is
        after ``M_d + WITHIN``."""
        for query_id, (old, m_d) in list(sides.retiring.items()):
            if isinstance(old, WindowQuery):
                mark = steps.watermarks.get(old_version(old).id) if steps else None
                assert old.window is not None
                if mark is None or mark < m_d + micros(old.window) + micros(
                        old.allowed_lateness):
                    continue
            elif not isinstance(old, PatternQuery) or (
                    within := within_ns(old.compiled())) is None or through <= m_d + (
                    within // 1000):
                continue
            del sides.retiring[query_id]
            sides.save(queries)  # first: a crash below leaves state rows the next start drops
            # (batch_id: the first batch without it. A redeployment of the rule in that
            # batch records a second row with the same batch_id; readers order a rule's rows
            # by (batch_id, deployed_at), so the redeployment, written later, is the newest)
            in_force.record([reload.Deployment(query_id, old, in_force.in_force.get(query_id),
                                               "retire", batch_id + 1, m_d)], detected)
            if isinstance(old, WindowQuery):
                drop_stale_windows(spark, settings, [], stream, only=[old_version(old).id])
            else:
                drop_stale(spark, settings, [], {}, only=[old_version(old).id])
                incremental.pop(old_version(old).id, None)

    def write_chained(rows, recomputed: list[tuple[str, list[str]]],  # noqa: ANN001
                      version: int) -> tuple[int, int]:
        merge_into_gold(spark, settings, rows)
        return supersede(spark, settings, rows, recomputed, version)

    def each_batch(batch, batch_id: int) -> None:  # noqa: ANN001
        from pyspark.sql import functions as F

        if pool:  # (the batch's thread has it from the stream's; set again to be sure)
            spark.sparkContext.setLocalProperty("spark.scheduler.pool", pool)
        batch = batch.persist()  # every query reads it: one scan of the new silver rows
        try:
            # the batch's newest event time (M_d of a later deployment, docs/rules.md); None:
            # an empty batch, e.g. the first over a new, empty silver table (nothing to find)
            # (and its rows, in the same job: the RBuffer and live selectivity need them)
            newest, batch_rows = batch.agg(F.max(F.unix_micros("event_time")),
                                           F.count(F.lit(1))).first()
            if newest is not None:
                # a class stream's batch waits for its turn: one class batch at a time,
                # the highest class waiting first (jobs/class_gate.py)
                with GATE.turn(priority) if priority else nullcontext(0.0) as waited:
                    if waited >= 1:
                        log(f"{stream}: batch {batch_id}: waited {waited:.1f}s for its turn "
                            "(another class's batch was running)")
                    for attempt in range(1, CONFLICT_RETRIES + 1):
                        try:
                            detect_batch(batch, batch_id, newest, batch_rows)
                            break
                        except Exception as exc:
                            if priority is None or attempt == CONFLICT_RETRIES or \
                                    not concurrent_write(exc):
                                raise
                            again.add(batch_id)
                            log(f"{stream}: batch {batch_id}: a concurrent gold write "
                                f"conflicted ({type(exc).__name__}); batch run again "
                                f"(attempt {attempt + 1}; every write is idempotent)")
        finally:
            batch.unpersist()

    def detect_batch(batch, batch_id: int, newest: int, batch_rows: int) -> None:  # noqa: ANN001
        tuned = in_use["tuned"] = refresh_tuned(spark, settings, in_use["tuned"], stream)
        version = silver.version()
        detected = datetime.now(UTC)
        history = silver.as_of(version)
        warm = deploy(batch_id, detected)
        floors = in_force.floors()
        backfill = in_force.backfills(batch_id)  # rules added at this batch (or its run)
        if backfill:
            log(f"{stream}: batch {batch_id}: {', '.join(sorted(backfill))} added: "
                f"evaluated over all of silver (version {version}), not only the batch")
        if rbuffer is not None:
            rbuffer.update(history, version, batch, columns, batch_rows)
        beside = olds()  # B (docs/rules.md): old pattern versions keep matches to M_d
        ceilings = {old_version(q).id: m_d for q, m_d in sides.retiring.values()
                    if isinstance(q, PatternQuery)}
        found = detect(spark, [*queries, *beside], batch, history, version, batch_id,
                       detected, settings,
                       strategy=settings.live_archive_strategy, rbuffer=rbuffer, tuned=tuned,
                       plans=plans, incremental=incremental, stream=stream, floors=floors,
                       warm=warm, backfill=backfill, ceilings=ceilings,
                       held=ends_inside_commit(settings.checkpoint(stream), batch_id),
                       batch_rows=batch_rows)
        rows = found.rows.persist()
        try:
            counts = dict(rows.groupBy("query_id").count().collect())
            # alerts before gold: every alerting row of gold has its alert (docs/alerts.md)
            new_alerts = (alerts.record(spark, settings, rows, alert_ids, batch_id, detected)
                          if any(counts.get(q) for q in alert_ids) else 0)
            # one gold.complex_events commit per batch: the in-order pattern keys' rows (new
            # match ids) alone go by an idempotent append (no MERGE); with other rows they
            # join those rows' insert-only MERGE (no MERGE without rows). A batch run again
            # may have MERGEd its in-order rows the first time: it MERGEs them again (an
            # append's txnAppId would not know them)
            appended = sum(step.stats["appended"] for step in found.pattern_steps)
            if appended and sum(counts.values()) == appended and batch_id not in again:
                assert found.append is not None
                LakeTable(spark, settings, "gold.complex_events").append(
                    found.append, f"{writer}/pattern", batch_id)
            elif sum(counts.values()):
                merge_into_gold(spark, settings, rows)
            superseded, restored = supersede(
                spark, settings, rows, found.recomputed, version,
                {q.id: q.rule_hash for q in [*queries, *beside]
                 if q.id in floors or q.id in ceilings})
            for step in found.pattern_steps:
                supersede_pending(spark, settings, step.supersede, rule_id(step.query),
                                  version)
                superseded += len(step.supersede)
            if superseded or restored:
                log(f"{stream}: batch {batch_id}: {superseded} complex events superseded "
                    f"(late events broke them), {restored} current again")
            for run in gold_chain.run_chained(spark, settings, chained, batch_id, detected,
                                              writer, write_chained):
                log(f"{stream}: batch {batch_id}: {run['query_id']}: {run['keys_recomputed']} "
                    f"keys recomputed (tainted by {run['changes']} input changes"
                    f"{', bootstrap: every key' if run['bootstrap'] else ''}) of "
                    f"{run['keys_total']}; {run['complex_events']} complex events, "
                    f"{run['superseded']} superseded, {run['restored']} current again")
            if alert_ids:
                send_alerts(new_alerts, batch_id, detected, history, version)
            for query, prob_rows, touched in found.probabilistic:
                merge_probabilistic(spark, settings, query, prob_rows, touched)
                log(f"{stream}: batch {batch_id}: {query.id}: probabilistic events of "
                    f"{len(touched)} partition keys recomputed ({query.method})")
            window_rows = commit_windows(spark, settings, found.windows, batch_id, detected)
            steps = found.windows
            for query_id, stats in (steps.stats.items() if steps else ()):
                assert steps is not None
                micros_ = steps.watermarks[query_id]
                mark = ("none yet" if micros_ is None else
                        datetime.fromtimestamp(micros_ / 1e6, UTC).isoformat())
                hint = (" (a larger allowed_lateness in the query file keeps them)"
                        if stats["late_dropped"] else "")
                held = (" (held: the batch ends inside a silver commit; the watermark moves "
                        "where the commit ends)" if query_id in steps.held else "")
                log(f"{stream}: batch {batch_id}: {query_id}: {stats['events']} events "
                    f"inserted, {stats['late_dropped']} too late (dropped){hint}, "
                    f"{stats['rows']} window rows ({stats['corrections']} corrections); "
                    f"watermark {mark}{held}")
            if steps:
                log(f"{stream}: batch {batch_id}: {window_rows} rows to gold.window_outputs")
            # after gold: a crash in between replays; every query's state in one MERGE
            writes = [pattern_state(spark, settings, pstep, batch_id, version, detected)
                      for pstep in found.pattern_steps]
            writes += [live_state(settings, query, step, batch_id, version, detected)
                       for query, step in found.live_steps]
            if expired := merge_state(spark, settings, writes):
                ids = ", ".join(w.query_id for w in writes if w.cutoff is not None)
                log(f"{stream}: batch {batch_id}: {ids}: {expired} partial-match key rows "
                    "expired (no event within the pattern's WITHIN)")
            # (after every state write: a retired version's state is deleted, not written)
            retire(found.windows, batch_id, detected,
                   max(newest, in_force.newest.before(batch_id) or newest))
            for pstep in found.pattern_steps:
                st = pstep.stats
                log(f"{stream}: batch {batch_id}: {pstep.query.id}: {st['keys']} keys "
                    f"({st['new_keys']} new, {st['replayed']} replayed from history), "
                    f"{st['batch_rows']} new rows, {st['history_rows']} history rows read; "
                    f"{st['final']} final and {st['provisional']} provisional matches, "
                    f"{st['superseded']} provisional superseded")
            for record in found.access:
                record["complex_events"] = int(counts.get(record["query_id"], 0))
                log(f"{stream}: batch {batch_id}: {record['query_id']}: {record['strategy']} "
                    f"({record['reason']}); {record['live_matches']} live matches, "
                    f"{record['loads']} loads ({record['buffer_loads']} from RBuffer), "
                    f"{record['rows_loaded']} rows loaded, Delta files "
                    f"{record['delta_files_read']}/{record['delta_files_total']}, "
                    f"{record['delta_rows_scanned']} rows scanned; partial matches: "
                    f"{record['partial_hits']} hits, {record['partial_misses']} misses, "
                    f"{record['partial_new_keys']} new keys, {record['partial_spilled']} "
                    f"spilled, {record['replayed_keys']} keys replayed from history")
            record_access(spark, settings, found.access, detected, writer)
            for record in found.plans:
                log(f"{stream}: batch {batch_id}: {record['query_id']}: acquisition "
                    f"{record['acquisition']} {record['plan']} (statistics run "
                    f"{record['statistics_run_id']}, replanned {record['replanned']}): "
                    f"{record['rows_read']} rows read (predicted "
                    f"{record['predicted_rows']:.0f}), Delta files "
                    f"{record['delta_files_read']}/{record['delta_files_total']}, "
                    f"{record['complex_events']} complex events")
            record_plans(spark, settings, found.plans, detected)
            log(f"{stream}: batch {batch_id}: {sum(counts.values())} complex events detected "
                f"(silver history pinned at version {version})")
            in_force.newest.update(batch_id, newest)
        finally:
            rows.unpersist()

    # (not `writer`: that name is the batches' Delta txnAppId, read by each_batch when it
    # runs; rebinding it made the app id the repr of this object, different in every
    # process, so a batch run again after a kill appended its in-order rows twice)
    sink = silver.stream(max_files).writeStream.foreachBatch(batch_function(each_batch))
    context = spark.sparkContext
    context.setLocalProperty("spark.scheduler.pool", pool)  # the stream's thread inherits it
    try:
        return run_stream(sink, settings, stream, continuous=continuous)
    finally:
        context.setLocalProperty("spark.scheduler.pool", None)
