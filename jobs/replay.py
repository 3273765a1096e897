"""``lakecep replay``: re-run a complex event's rule on the Delta versions gold recorded.

For each ``gold.complex_events`` row asked for: read silver **as of the row's
``history_version``** (the key's whole history, the columns the gold job gave the engine),
run the rule with the gold job's own row code (:func:`~lakecep.jobs.gold_pattern.
pattern_matcher`; live-archive: its live matches through :func:`~lakecep.jobs.
gold_live_archive.archive_joiner`), find the same ``match_id`` and compare it field by field
(:mod:`lakecep.replay`); then the events around the match (:func:`~lakecep.jobs.snapshots.
around`) and, for an alert with a firing snapshot, the snapshot read again at its
``snapshot_version``. Semantics and output: docs/alerts.md, "lakecep replay".
"""

from __future__ import annotations

import pickle
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import pandas as pd

from lakecep.config import Settings
from lakecep.maintenance import duration_text, replay_horizon
from lakecep.queries import LiveArchiveQuery, PatternQuery, micros
from lakecep.replay import FIELDS, differences
from lakecep.rules import inputs_of

from . import snapshots
from .gold_chain import derived_events, in_order
from .gold_live_archive import archive_joiner
from .gold_pattern import pattern_matcher
from .gold_rows import BUCKET, time_ns
from .tables import LakeTable, engine_columns, retention_seconds

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

#: Shortest match id prefix ``lakecep replay`` accepts.
MIN_PREFIX = 6
#: The replay horizon of a query without ``[snapshot]``.


class ReplayError(ValueError):
    """A match cannot be looked up (message and hint say why and what to do)."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.hint = hint


@dataclass
class Replay:
    """One match replayed: the stored gold row, the replayed one, what differs, the events
    around it and its snapshot (see docs/alerts.md for each field)."""

    match_id: str
    query_id: str
    stored: dict[str, Any]
    replayed: dict[str, Any] | None = None
    differences: list[str] = field(default_factory=list)
    context: list[dict[str, Any]] = field(default_factory=list)
    snapshot: dict[str, Any] | None = None
    warnings: list[str] = field(default_factory=list)
    error: str | None = None

    @property
    def reproduced(self) -> bool:
        return self.error is None and self.replayed is not None and not self.differences

    def as_dict(self) -> dict[str, Any]:
        return {"reproduced": self.reproduced, **asdict(self)}


def resolve(spark: SparkSession, settings: Settings, match_id: str) -> str:
    """The full match id of ``match_id`` or of the one gold row it is a prefix of."""
    from pyspark.sql import functions as F

    text = match_id.strip().lower()
    if len(text) < MIN_PREFIX:
        raise ReplayError(f"match id {match_id!r} is too short",
                          f"give the match_id or at least {MIN_PREFIX} of its characters")
    gold = LakeTable(spark, settings, "gold.complex_events")
    if not gold.exists():
        raise ReplayError(f"no gold.complex_events under {settings.lake}",
                          "run the pipeline first (`lakecep run all`)")
    found = [r[0] for r in gold.read().where(F.col("match_id").startswith(text))
             .select("match_id").distinct().limit(3).collect()]
    if not found:
        raise ReplayError(f"no complex event with match_id {match_id!r} in gold.complex_events",
                          "list them: lakecep sql \"SELECT query_id, match_id, partition_key "
                          "FROM gold.complex_events\"")
    if len(found) > 1:
        raise ReplayError(f"match id prefix {match_id!r} names several complex events "
                          f"({', '.join(found)}{', ...' if len(found) > 2 else ''})",
                          "give more characters of the match_id")
    return str(found[0])


def replay(spark: SparkSession, settings: Settings, match_ids: Sequence[str], *,  # noqa: PLR0913
           before: timedelta | None = None, after: timedelta | None = None,
           queries: Sequence[Any] | None = None) -> list[Replay]:
    """Replay every gold row of ``match_ids`` (full ids), in the order given. ``before`` /
    ``after``: the context window (default: the query's ``[snapshot]``, else 0)."""
    from pyspark.sql import functions as F

    queries = list(queries) if queries is not None else _queries(settings)
    by_id = {q.id: q for q in queries}
    gold = LakeTable(spark, settings, "gold.complex_events").read().where(
        F.col("match_id").isin(list(match_ids)))
    stored = [r.asDict(recursive=True) for r in gold.select(
        "query_id", "query_version", "match_id", "partition_key", "match_number",
        F.unix_micros("start_time").alias("start_us"), F.unix_micros("end_time").alias("end_us"),
        _text("start_time"), _text("end_time"), "measures", "live_event_ids",
        "archive_event_ids", "history_version", "strategy", "batch_id", "superseded_version",
        _text("detection_time"), F.col("rule_hash") if "rule_hash" in gold.columns
        else F.lit(None).cast("string").alias("rule_hash")).collect()]
    out = {r["match_id"]: Replay(r["match_id"], r["query_id"], r) for r in stored}
    silver = LakeTable(spark, settings, "silver.events")
    groups: dict[tuple[str, int], list[Replay]] = {}
    for one in out.values():
        query = by_id.get(one.query_id)
        if query is None:
            where = settings.queries_dir or "the shipped queries"
            one.error = f"query {one.query_id!r} is not in {where}: nothing to replay it with"
        elif not isinstance(query, PatternQuery | LiveArchiveQuery):
            one.error = (f"query {one.query_id!r} is a {type(query).__name__}: replay runs "
                         "pattern and live-archive queries")
        else:
            then = one.stored["rule_hash"]
            if then and then != query.rule_hash:
                one.warnings.append(
                    f"{query.id} has changed since it found this match (rule_hash {then}, "
                    f"version {one.stored['query_version']!r} then; {query.rule_hash}, "
                    f"version {query.version!r} now): replayed with the current definition")
            elif not then and one.stored["query_version"] != query.version:
                one.warnings.append(
                    f"{query.id} was version {one.stored['query_version']!r} when it found "
                    f"this match; the query file now says {query.version!r} (replayed with "
                    "the current definition)")
            groups.setdefault((query.id, int(one.stored["history_version"])), []).append(one)
    horizons = {}
    for (query_id, version), members in groups.items():
        query = by_id[query_id]
        horizons[query_id] = replay_horizon(query)
        _replay_group(spark, settings, queries, query, version, members, silver)
        default = snapshots.spans_of([query]).get(query.id, (0, 0))
        spans = (default[0] if before is None else micros(before),
                 default[1] if after is None else micros(after))
        _context(spark, silver, query, version, members, spans)
    _snapshots(spark, settings, by_id, list(out.values()), silver)
    _retention(spark, silver, horizons,   # chained rules' versions are gold's, not silver's
               {g: m for g, m in groups.items() if not inputs_of(by_id[g[0]])})
    return [out[m] for m in match_ids if m in out]


def _text(column: str):  # noqa: ANN202 - a pyspark Column
    """A timestamp as UTC text (the session time zone is UTC)."""
    from pyspark.sql import functions as F

    return F.date_format(column, "yyyy-MM-dd HH:mm:ss.SSSSSS").alias(column)


def _queries(settings: Settings) -> list[Any]:
    """The queries gold runs, with the source files' typed attributes (as gold.run)."""
    from lakecep.queries import load_queries
    from lakecep.sources import load_sources, sources_dir, with_source_attributes

    return with_source_attributes(load_queries(settings.queries_dir),
                                  load_sources(sources_dir(settings)))


def _at(table: LakeTable, version: int, read: Any) -> Any:
    """``read(table as of version)``; a version Delta cannot read any more (its log or
    its files are gone) is a ReplayError."""
    try:
        return read(table.as_of(version))
    except Exception as exc:  # noqa: BLE001 - Delta's errors vary by what is missing
        raise ReplayError(f"{table.name} version {version} cannot be read: "
                          f"{str(exc).splitlines()[0]}",
                          "Delta log retention or VACUUM removed it (delta.logRetentionDuration"
                          ", delta.deletedFileRetentionDuration); the stored row and its "
                          "snapshot remain in gold") from None


def _replay_group(spark: SparkSession, settings: Settings, queries: Sequence[Any],  # noqa: PLR0913
                  query: Any, version: int, members: list[Replay], silver: LakeTable) -> None:
    """Re-run ``query`` at ``version`` over the keys of ``members`` and compare."""
    from pyspark.sql import functions as F

    column = snapshots.key_column(query)
    keys = sorted({str(m.stored["partition_key"]) for m in members})
    try:
        if inputs_of(query):   # a chained rule: its inputs' complex events at that version
            gold = LakeTable(spark, settings, "gold.complex_events")
            frame = _at(gold, version, lambda rows: derived_events(rows, query, keys).toPandas())
        else:
            frame = _at(silver, version, lambda history: history.select(
                *engine_columns(queries)).where(F.col(column).cast("string").isin(keys))
                .toPandas())
    except ReplayError as exc:
        for one in members:
            one.error = str(exc)
        return
    found: dict[str, dict[str, Any]] = {}
    for key in keys:
        part = frame[frame[column].astype(str) == key].reset_index(drop=True)
        first = members[0].stored
        for row in _rerun(query, part, version, int(first["batch_id"]), first["strategy"]):
            found[row["match_id"]] = row
    for one in members:
        one.replayed = found.get(one.match_id)
        one.differences = differences(one.stored, one.replayed, FIELDS)


def _rerun(query: Any, frame: pd.DataFrame, version: int, batch_id: int,
           strategy: str) -> list[dict[str, Any]]:
    """The gold rows the gold job's own code makes of one key's history (as dicts with
    ``start_us`` / ``end_us``)."""
    detected = datetime.now(UTC)
    if len(frame) == 0:
        return []
    rows = frame.assign(**{BUCKET: 0})
    if isinstance(query, LiveArchiveQuery):
        from cep_core.live_archive import live_instances

        instances = live_instances(query.spec(), frame)
        ingest = time_ns(frame["ingest_time"])
        live = pd.DataFrame({
            "key": [str(i.key) for i in instances], "lo": [i.lo for i in instances],
            "hi": [i.hi for i in instances], "live_start": [i.start for i in instances],
            "live_end": [i.end for i in instances],
            "live_ingest": pd.to_datetime([max(ingest[r] for r in i.match.rows)  # type: ignore[union-attr]
                                           for i in instances], unit="ns"),
            "instance": [pickle.dumps(i, protocol=pickle.HIGHEST_PROTOCOL) for i in instances],
            BUCKET: 0})
        # the definition (LLAA: each live match's own RA); every strategy gives these rows
        out = archive_joiner(query, "llaa", version, batch_id, detected)(live, rows)
        out["strategy"] = strategy
    elif inputs_of(query):
        out = in_order(pattern_matcher(query, version, batch_id, detected))(rows)
    else:
        out = pattern_matcher(query, version, batch_id, detected)(rows)
        if strategy == "incremental":  # jobs/match_state.py: the same rows, found incrementally
            out["strategy"] = strategy
    records = out.to_dict("records")
    for record in records:
        for name in ("start", "end"):
            stamp = record.pop(f"{name}_time")
            record[f"{name}_us"] = None if pd.isna(stamp) else pd.Timestamp(stamp).value // 1000
            record[f"{name}_time"] = None if pd.isna(stamp) else str(pd.Timestamp(stamp))
    return records


def _targets(spark: SparkSession, members: list[Replay]) -> DataFrame:
    """The members' matches as :func:`snapshots.around` targets."""
    rows = [(m.match_id, m.query_id, str(m.stored["partition_key"]), int(m.stored["start_us"]),
             int(m.stored["end_us"]),
             [*(m.stored["live_event_ids"] or []), *(m.stored["archive_event_ids"] or [])])
            for m in members]
    from pyspark.sql import functions as F

    frame = spark.createDataFrame(rows, "alert_id STRING, query_id STRING, partition_key "
                                        "STRING, start_us BIGINT, end_us BIGINT, "
                                        "ids ARRAY<STRING>")
    return frame.select("alert_id", "query_id", "partition_key",
                        F.timestamp_micros("start_us").alias("start_time"),
                        F.timestamp_micros("end_us").alias("end_time"), "ids")


def _events(frame: DataFrame) -> dict[str, list[dict[str, Any]]]:
    """Events around matches (:func:`snapshots.around` rows) per alert id, in time order."""
    from pyspark.sql import functions as F

    out: dict[str, list[dict[str, Any]]] = {}
    for r in frame.select("alert_id", "role", "event_id", "object_id", "event_type",
                          "source_id", F.unix_micros("event_time").alias("event_us"),
                          _text("event_time")).orderBy("event_us", "event_id").collect():
        row = r.asDict()
        out.setdefault(row.pop("alert_id"), []).append(row)
    return out


def _context(spark: SparkSession, silver: LakeTable, query: Any, version: int,  # noqa: PLR0913
             members: list[Replay], spans: tuple[int, int]) -> None:
    """The events of each member's key at ``version`` in its context window."""
    live = [m for m in members if m.error is None]
    if not live or inputs_of(query):  # a chained rule's events are complex events
        return
    events = _at(silver, version, lambda history: _events(snapshots.around(
        spark, history, _targets(spark, live), {query.id: spans},
        {query.id: snapshots.key_column(query)})))
    for one in live:
        one.context = events.get(one.match_id, [])


def _snapshots(spark: SparkSession, settings: Settings, by_id: dict[str, Any],
               replays: list[Replay], silver: LakeTable) -> None:
    """Each replayed alert's stored snapshot, and whether reading its window again at its
    ``snapshot_version`` gives the same events and roles."""
    from pyspark.sql import functions as F

    table = LakeTable(spark, settings, snapshots.TABLE)
    if not replays or not table.exists():
        return
    rows = table.read().where(F.col("alert_id").isin([r.match_id for r in replays]))
    stored = _events(rows)
    versions = dict(rows.groupBy("alert_id").agg(F.max("snapshot_version")).collect())
    for one in replays:
        if one.match_id not in stored:
            continue
        version = int(versions[one.match_id])
        query = by_id.get(one.query_id)
        spans = snapshots.spans_of([query] if query is not None else [])
        if one.query_id not in spans:
            one.snapshot = {"version": version, "events": stored[one.match_id],
                            "reproduced": None, "note": "the query has no [snapshot] now"}
            continue
        try:
            again = _at(silver, version, lambda history, one=one, query=query, spans=spans: _events(
                snapshots.around(spark, history, _targets(spark, [one]), spans,
                                 {one.query_id: snapshots.key_column(query)}))
            ).get(one.match_id, [])
        except ReplayError as exc:
            one.snapshot = {"version": version, "events": stored[one.match_id],
                            "reproduced": None, "note": str(exc)}
            continue
        have = {(e["event_id"], e["role"]) for e in stored[one.match_id]}
        want = {(e["event_id"], e["role"]) for e in again}
        one.snapshot = {"version": version, "events": stored[one.match_id],
                        "reproduced": have == want, "missing": sorted(want - have),
                        "extra": sorted(have - want)}


def _retention(spark: SparkSession, silver: LakeTable, horizons: dict[str, timedelta],
               groups: dict[tuple[str, int], list[Replay]]) -> None:
    """Warnings: silver's retention against each query's replay horizon, and replayed
    versions committed longer ago than a retention (VACUUM may remove their files)."""
    from delta.tables import DeltaTable
    from pyspark.sql import functions as F

    if not groups:
        return
    retention = silver.retention()
    commits = dict(DeltaTable.forPath(spark, silver.path).history().select(
        "version", F.unix_micros("timestamp")).collect())
    now_us = int(datetime.now(UTC).timestamp() * 1e6)
    for (query_id, version), members in groups.items():
        lines = snapshots.retention_warnings(silver, {query_id: horizons[query_id]})
        committed = commits.get(version)
        for name, text in retention.items():
            if committed is not None and now_us - committed > retention_seconds(text) * 1e6:
                lines.append(f"silver.events version {version} was committed "
                             f"{duration_text(round((now_us - committed) / 1e6))} "
                             f"ago, longer than {name} = {text!r}: replay may fail, or work "
                             "only until the next VACUUM / log clean-up")
        for one in members:
            one.warnings.extend(lines)
