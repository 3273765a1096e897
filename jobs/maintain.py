"""Housekeeping of a long-running lake (``lakecep run maintain``, the daily
``lakecep_maintenance`` DAG; docs/architecture.md, "Housekeeping").

1. **Check** the configured retentions (``vacuum_retention``, ``log_retention``) against the
   time travel the configured queries and the pipeline need (:mod:`lakecep.maintenance`);
   a shorter one fails the job before anything is touched (exit 2, one line naming the
   query, its horizon and the setting to raise).
2. **Set** every table's ``delta.deletedFileRetentionDuration`` / ``delta.logRetentionDuration``
   to them (only where they differ: no empty commits), so Delta's own log clean-up, the
   acquisition guard and ``lakecep replay``'s warnings read the same values.
3. **Compact** (Delta OPTIMIZE, bin-packing) every table but ``silver.events`` once it holds
   ``compact_min_files`` files smaller than ``compact_small_file_bytes``: streaming appends
   leave one small file per micro-batch. ``silver.events`` is range-clustered by the
   ``optimize`` job instead (bin-packing would mix its key ranges). OPTIMIZE commits with
   ``dataChange = false``: streaming readers skip it, time travel still reads old versions.
4. **VACUUM** every table with ``vacuum_retention``: data files no version within the
   retention references are deleted.

Removing expired key rows of ``gold.partial_matches`` is not done here (docs).
"""

from __future__ import annotations

from typing import Any

from lakecep import maintenance, schemas
from lakecep.config import Settings

from .streaming import log
from .tables import LakeTable

#: Clustered by the optimize job (jobs/optimize.py), not bin-packed here.
NOT_COMPACTED = ("silver.events",)


def _queries(settings: Settings) -> list[Any]:
    from .replay import _queries as gold_queries  # the queries gold runs

    return gold_queries(settings)


def small_files(table: LakeTable, below: int) -> tuple[int, int]:
    """(files, files smaller than ``below`` bytes) of the table's newest version. Reads the
    ``_metadata`` column only: Parquet footers, no data."""
    from pyspark.sql import functions as F

    sizes = (table.read().select(F.col("_metadata.file_path").alias("path"),
                                 F.col("_metadata.file_size").alias("size"))
             .groupBy("path").agg(F.max("size").alias("size")))
    row = sizes.agg(F.count("*").alias("files"),
                    F.sum((F.col("size") < below).cast("int")).alias("small")).first()
    return int(row["files"] or 0), int(row["small"] or 0)


def _num_files(spark, table: LakeTable) -> int:  # noqa: ANN001
    return int(spark.sql(f"DESCRIBE DETAIL delta.`{table.path}`").first()["numFiles"] or 0)


def run(spark, settings: Settings, *, run_id: str | None = None,  # noqa: ANN001
        continuous: bool = False, queries: list[Any] | None = None) -> dict[str, Any]:
    """Check, set retention, compact, VACUUM every existing lake table. Returns the summary:
    per table files before / after compaction, whether it was compacted, files vacuumed."""
    del run_id, continuous  # a one-shot maintenance job
    from delta.tables import DeltaTable

    found = maintenance.needs(_queries(settings) if queries is None else queries, settings)
    retention = maintenance.check(settings, found)
    properties = maintenance.table_properties(retention)
    tables: dict[str, dict[str, Any]] = {}
    for name in schemas.tables():
        table = LakeTable(spark, settings, name)
        if not table.exists():
            continue
        need = maintenance.longest(found, name)
        entry: dict[str, Any] = {
            "horizon_s": need.seconds if need else 0.0, "horizon_of": need.who if need else "",
            "retention_set": bool(table.set_properties(properties)), "compacted": False}
        files, small = small_files(table, settings.compact_small_file_bytes)
        entry.update(files_before=files, small_files=small, files_after=files)
        delta = DeltaTable.forPath(spark, table.path)
        if name not in NOT_COMPACTED and small >= settings.compact_min_files:
            delta.optimize().executeCompaction()
            entry.update(compacted=True, files_after=_num_files(spark, table))
        # no RETAIN: the table's own deletedFileRetentionDuration (just set), exactly
        vacuum = f"VACUUM delta.`{table.path}`"
        entry["files_vacuumed"] = spark.sql(f"{vacuum} DRY RUN").count()
        spark.sql(vacuum).collect()
        tables[name] = entry
        log(f"maintain: {name}: {files} files ({small} small) -> {entry['files_after']}"
            f"{' (compacted)' if entry['compacted'] else ''}; "
            f"{entry['files_vacuumed']} files vacuumed, retention "
            f"{settings.vacuum_retention} >= {maintenance.duration_text(entry['horizon_s'])}"
            f" needed by {entry['horizon_of']}")
    compacted = [n for n, e in tables.items() if e["compacted"]]
    return {"tables": tables, "compacted": compacted,
            "files_before": sum(e["files_before"] for e in tables.values()),
            "files_after": sum(e["files_after"] for e in tables.values()),
            "files_vacuumed": sum(e["files_vacuumed"] for e in tables.values()),
            "retention": {"vacuum_retention": settings.vacuum_retention,
                          "log_retention": settings.log_retention}}
