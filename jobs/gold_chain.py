"""Chained rules on the batch path: rules over other rules' complex events, with taint.

A pattern rule with ``input = [...]`` (docs/rules.md, section 1) reads the *current* complex
events of its input rules from ``gold.complex_events``, turned into events (``event_id`` =
the match id, ``object_id`` = its key, ``event_type`` = the input rule, ``event_time`` = its
end, measures as typed attributes). After the silver rules of a gold batch are written, the
chained rules run level by level; each recomputes only its **tainted** keys: the keys on
which one of its inputs inserted, superseded or restored a row since the last gold version
it consumed, read from the table's Delta Change Data Feed. Its rows are merged and
superseded like any pattern rule's (``history_version`` / ``superseded_version`` are then
versions of ``gold.complex_events``, its input table), and a ``gold.rule_runs`` row records
what it consumed (the next batch starts after ``to_version``), how many keys it recomputed
and how many there are.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

import pandas as pd

from lakecep import schemas
from lakecep.config import Settings
from lakecep.rules import inputs_of, tainted_keys

from .gold_pattern import pattern_matcher
from .gold_rows import BUCKET, GOLD_DDL, bucketed
from .streaming import log
from .tables import LakeTable

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

SOURCE = "gold.complex_events"
TABLE = "gold.rule_runs"
CHANGE_FEED = "delta.enableChangeDataFeed"
#: ``write(rows, recomputed, version) -> (superseded, restored)``: the gold job's merge and
#: supersede of a rule's rows for the keys it recomputed.
Write = Callable[[Any, list[tuple[str, list[str]]], int], tuple[int, int]]


def enable_change_feed(spark: SparkSession, settings: Settings) -> bool:
    """Turn on gold.complex_events' Change Data Feed (changes are recorded from the next
    version on); True when it was off."""
    return bool(LakeTable(spark, settings, SOURCE).ensure().set_properties(
        {CHANGE_FEED: "true"}))


def fingerprint(query: Any) -> str:
    """What a stored offset is valid for: the rule's definition, inputs' included (a changed
    rule starts again from every key)."""
    text = f"{query.id}|{query.rule_hash}"
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def derived_events(gold: DataFrame, query: Any, keys: list[str] | None) -> DataFrame:
    """The current complex events of ``query``'s inputs (of ``keys``; all when None) as
    events (docs/rules.md, "Input")."""
    from pyspark.sql import functions as F

    rows = gold.where(F.col("query_id").isin(list(inputs_of(query)))
                      & F.col("superseded_version").isNull())
    if keys is not None:
        spark = gold.sparkSession
        wanted = spark.createDataFrame([(k,) for k in keys], "partition_key STRING")
        rows = rows.join(F.broadcast(wanted), "partition_key", "left_semi")
    nothing = F.lit(None).cast("timestamp")
    return rows.select(
        F.col("match_id").alias("event_id"), F.col("partition_key").alias("object_id"),
        F.col("query_id").alias("event_type"), F.col("query_id").alias("source_id"),
        F.col("end_time").alias("event_time"), nothing.alias("time_lower"),
        nothing.alias("time_upper"), F.col("detection_time").alias("ingest_time"),
        "start_time", *[F.col("measures").getItem(name.lower()).cast(kind).alias(name)
                        for name, kind in query.attributes])


def in_order(run: Callable[[pd.DataFrame], pd.DataFrame]) -> Callable[[pd.DataFrame],
                                                                       pd.DataFrame]:
    """``run`` over a frame sorted by (event_time, event_id): two complex events may end at
    the same time, and the engine keeps input order among ties."""
    def ordered(frame: pd.DataFrame) -> pd.DataFrame:
        return run(frame.sort_values(["event_time", "event_id"], kind="stable")
                   .reset_index(drop=True))

    return ordered


def changes(spark: SparkSession, path: str, start: int, end: int,
            inputs: Sequence[str]) -> list[tuple[str, str]]:
    """``(query_id, partition_key)`` of every row of ``inputs`` inserted, deleted, superseded
    or restored in versions ``start .. end`` of the table at ``path`` (its change feed)."""
    from pyspark.sql import functions as F

    if start > end:
        return []
    feed = (spark.read.format("delta").option("readChangeFeed", "true")
            .option("startingVersion", start).option("endingVersion", end).load(path)
            .where(F.col("query_id").isin(list(inputs))))
    kind = F.col("_change_type")
    keys = ["query_id", "match_id", "_commit_version"]
    before = feed.where(kind == "update_preimage").select(
        *keys, F.col("superseded_version").alias("was"))
    after = feed.where(kind == "update_postimage").select(
        *keys, "partition_key", F.col("superseded_version").alias("now"))
    moved = after.join(before, keys).where(~F.col("was").eqNullSafe(F.col("now")))
    found = feed.where(kind.isin("insert", "delete")).select("query_id", "partition_key")
    return [(r[0], r[1]) for r in found.unionByName(moved.select("query_id", "partition_key"))
            .distinct().collect()]


def _last_run(spark: SparkSession, settings: Settings, query: Any) -> int | None:
    """The last gold version the rule consumed (None: never, or as another definition)."""
    from pyspark.sql import functions as F

    runs = LakeTable(spark, settings, TABLE)
    if not runs.exists():
        return None
    return runs.read().where((F.col("query_id") == query.id)
                             & (F.col("fingerprint") == fingerprint(query))).agg(
        F.max("to_version")).first()[0]


def _feed_start(spark: SparkSession, path: str) -> int:
    """The first version of the table with its change feed on."""
    from delta.tables import DeltaTable
    from pyspark.sql import functions as F

    history = DeltaTable.forPath(spark, path).history().where(
        (F.col("operation") == "SET TBLPROPERTIES")
        & (F.col("operationParameters")["properties"].contains(CHANGE_FEED)))
    first = history.agg(F.max("version")).first()[0]
    return 0 if first is None else int(first)


def _changes_since(spark: SparkSession, path: str, last: int | None, version: int,
                   inputs: Sequence[str]) -> list[tuple[str, str]] | None:
    """The inputs' changes after version ``last`` up to ``version``; None when the rule must
    start from every key: it never ran (as this definition), or the change feed does not
    reach back to ``last`` (turned on later, or its log entries are gone)."""
    if last is None or last + 1 < _feed_start(spark, path):
        return None
    try:
        return changes(spark, path, last + 1, version, inputs)
    except Exception as exc:  # noqa: BLE001 - Delta says "not available" in several ways
        log(f"chained rules: the change feed of versions {last + 1}..{version} cannot be "
            f"read ({str(exc).splitlines()[0]}): recomputing every key")
        return None


def run_chained(spark: SparkSession, settings: Settings, chained: Sequence[Any],  # noqa: PLR0913
                batch_id: int, detected: datetime, writer: str, write: Write
                ) -> list[dict[str, Any]]:
    """Run the chained rules (in level order) after the batch's silver rules were written;
    one ``gold.rule_runs`` record per rule (also returned)."""
    from pyspark.sql import functions as F

    gold = LakeTable(spark, settings, SOURCE)
    buckets = settings.spark_shuffle_partitions * 2
    records = []
    for query in chained:
        started = time.perf_counter()
        version = gold.version()
        at = gold.as_of(version)
        inputs = list(inputs_of(query))
        last = _last_run(spark, settings, query)
        found_changes = _changes_since(spark, gold.path, last, version, inputs)
        bootstrap = found_changes is None
        current = at.where(F.col("query_id").isin(inputs) & F.col("superseded_version").isNull())
        total = current.select("partition_key").distinct().count()
        if found_changes is None:  # every key of the inputs, and every key it has rows for
            own = at.where((F.col("query_id") == query.id)
                           & F.col("superseded_version").isNull())
            keys = sorted(r[0] for r in current.select("partition_key").union(
                own.select("partition_key")).distinct().collect())
        else:
            keys = sorted(tainted_keys(found_changes, inputs))
        superseded = restored = rows_found = 0
        if keys:
            events = derived_events(at, query, keys)
            rows = bucketed(events, ["object_id"], buckets).groupBy(BUCKET).applyInPandas(
                in_order(pattern_matcher(query, version, batch_id, detected)), GOLD_DDL
            ).localCheckpoint(eager=True)
            rows_found = rows.count()
            superseded, restored = write(rows, [(query.id, keys)], version)
        records.append({
            "query_id": query.id, "fingerprint": fingerprint(query), "batch_id": batch_id,
            "from_version": None if bootstrap else last, "to_version": version,
            "bootstrap": bootstrap, "changes": len(found_changes or ()),
            "keys_recomputed": len(keys), "keys_total": total, "complex_events": rows_found,
            "superseded": superseded, "restored": restored,
            "seconds": time.perf_counter() - started,
            "run_time": pd.Timestamp(detected).tz_localize(None)})
        _record(spark, settings, records[-1], writer)
    return records


def _record(spark: SparkSession, settings: Settings, record: dict[str, Any],
            writer: str) -> None:
    """Append a rule's run once per batch (idempotent: a re-run batch adds nothing)."""
    table = LakeTable(spark, settings, TABLE).ensure()
    rows = spark.createDataFrame(pd.DataFrame([record])[schemas.columns(TABLE)],
                                 schemas.ddl(TABLE).replace(" NOT NULL", ""))
    table.append(rows, f"{writer}:rule_runs:{record['query_id']}", int(record["batch_id"]))
