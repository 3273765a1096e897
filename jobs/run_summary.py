"""What one ``lakecep run`` did, per job: rows in, rows out, quarantined, duration.

Rows out are read from the output tables' Delta logs (``_delta_log/*.json`` commit
metrics of the versions the job wrote), so no Spark query is needed and the numbers are
the ones Delta recorded; a lake on an object store is read through the active Spark
session (Delta's history: the same commit metrics). The CLI renders
:class:`StageSummary` rows as one table (or JSON).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from lakecep.config import Settings, Uri

#: Per job: (main output table, quarantine table, duplicates table).
OUTPUTS: dict[str, tuple[str, str | None, str | None]] = {
    "bronze": ("bronze.events", None, None),
    "silver": ("silver.events", "silver.quarantine", "silver.duplicates"),
    "optimize": ("silver.events", None, None),
    "gold": ("gold.complex_events", None, None),
    "quality": ("gold.quality_results", None, None),
    "statistics": ("gold.statistics", None, None),
    "tune": ("gold.allocations", None, None),
}


@dataclass
class StageSummary:
    """One row of the run summary."""

    job: str
    table: str
    rows_in: int | None
    in_unit: str
    rows_out: int | None
    quarantined: int | None
    duplicates: int | None
    seconds: float
    note: str = ""
    ok: bool = True
    #: Per output table (main, quarantine, duplicates): the Delta versions this job
    #: committed, oldest first (empty: nothing written). The Airflow tasks put them, with the
    #: row counts, in their asset events' ``extra``.
    versions: dict[str, list[int]] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _history(table: Uri) -> dict[int, dict[str, str]]:
    """Version -> operation metrics of every commit of the Delta table at ``table`` (an
    object-store URI), from Delta's history through the active Spark session."""
    from delta.tables import DeltaTable
    from pyspark.sql import SparkSession

    spark = SparkSession.getActiveSession()
    if spark is None:
        raise RuntimeError(f"the run summary reads the history of {table} through Spark "
                           "(the lake is on an object store), but no session is active")
    if not DeltaTable.isDeltaTable(spark, str(table)):
        return {}
    rows = DeltaTable.forPath(spark, str(table)).history().select(
        "version", "operationMetrics").collect()
    return {int(r[0]): dict(r[1] or {}) for r in rows}


def _commits(table: Path) -> dict[int, Path]:
    log = table / "_delta_log"
    if not log.is_dir():
        return {}
    return {int(p.stem): p for p in log.glob("*.json") if p.stem.isdigit()}


def table_version(table: Path | Uri) -> int | None:
    """Newest committed version of the Delta table at ``table`` (None: no table yet)."""
    commits = _history(table) if isinstance(table, Uri) else _commits(table)
    return max(commits) if commits else None


def versions_written(table: Path | Uri, after: int | None) -> list[int]:
    """Versions of the Delta table at ``table`` committed after version ``after``."""
    commits = _history(table) if isinstance(table, Uri) else _commits(table)
    return sorted(v for v in commits if after is None or v > after)


def rows_written(table: Path | Uri, after: int | None) -> int:
    """Rows the commits after version ``after`` added (Delta's own operation metrics)."""
    total = 0
    if isinstance(table, Uri):
        for version, metrics in _history(table).items():
            if after is None or version > after:
                total += _added(metrics)
        return total
    for version, path in _commits(table).items():
        if after is not None and version <= after:
            continue
        for line in path.read_text().splitlines():
            info = json.loads(line).get("commitInfo") if line.strip() else None
            if not info:
                continue
            total += _added(info.get("operationMetrics") or {})
    return total


def _added(metrics: dict[str, Any]) -> int:
    """Rows one commit added, by its operation metrics."""
    return int(metrics.get("numOutputRows", metrics.get("numTargetRowsInserted", 0)) or 0)


def versions(settings: Settings, job: str) -> dict[str, int | None]:
    """Versions of ``job``'s output tables now (taken before the job runs)."""
    names = [n for n in OUTPUTS.get(job, ()) if n]
    return {n: table_version(settings.table_path(n)) for n in names}


def summarise(settings: Settings, job: str, result: object, seconds: float,
              before: dict[str, int | None]) -> StageSummary:
    """The summary row of ``job`` whose ``run`` returned ``result``."""
    table, quarantine, duplicates = OUTPUTS.get(job, ("", None, None))

    def added(name: str | None) -> int | None:
        if not name:
            return None
        return rows_written(settings.table_path(name), before.get(name))

    rows_in: int | None = getattr(result, "input_rows", None)
    unit = getattr(result, "input_unit", "rows")
    note, ok = "", True
    if job == "optimize" and isinstance(result, dict):
        rows_in, unit = int(result.get("pending_files", 0)), "files"
        note = (f"{result.get('files_removed')} -> {result.get('files_added')} files"
                if result.get("optimized") else "nothing to do")
    elif job == "quality":
        evaluated, failed = getattr(result, "evaluated", 0), getattr(result, "failed", 0)
        tables = getattr(result, "tables", {})
        rows_in, unit = len(tables), "tables"
        ok = bool(getattr(result, "success", True))
        note = f"{evaluated - failed}/{evaluated} expectations passed"
    elif job == "statistics":
        rows_in, unit = getattr(result, "events", None), "events"
    elif job == "tune":
        note = f"config v{getattr(result, 'version', '?')}"
    batches = getattr(result, "batches", None)
    if batches is not None and not note:
        note = f"{batches} batch{'es' if batches != 1 else ''}"
    written = {name: versions_written(settings.table_path(name), before.get(name))
               for name in (table, quarantine, duplicates) if name}
    return StageSummary(job, table, rows_in, unit, added(table), added(quarantine),
                        added(duplicates), seconds, note, ok, written)
