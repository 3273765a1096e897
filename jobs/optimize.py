"""Cluster silver.events by (object_id, event_time) so archive range reads skip files.

Silver grows by small appends, each file spanning many tags and a slice of time; a
live-archive range read (one tag, a few hours) would open every file of that time slice.
This job rewrites the table range-partitioned and sorted by ``(object_id, event_time)``:
each file then holds a narrow range of tags, sorted by time, and Delta's per-file min/max
statistics let a read open only the files that can hold its rows (``gold.archive_access``
records files read vs total).

Why not ``OPTIMIZE ... ZORDER BY (object_id, event_time)``: we measured it
(``tests/integration/test_archive.py`` history): with far fewer distinct tags than times,
Delta's Z-order interleaving is dominated by the time ranks, every output file still spans
all tags, and a one-tag read opened every file. Range clustering on the key first serves the
access pattern of live-archive loads (per key, a time range): a read of one tag for a day
opens the one or two files of its key range.

The rewrite is a ``dataChange = false`` overwrite (Delta's documented way to rearrange
data): streaming readers of silver skip it, older versions still read their old files
(time travel), and a concurrent append would make it fail rather than lose rows. It runs
only when at least ``optimize_min_files`` files were appended since the last rewrite.
"""

from __future__ import annotations

import math
from typing import Any

from lakecep.config import Settings

from .streaming import log
from .tables import LakeTable

COLUMNS = ("object_id", "event_time")
MARK = "lakecep-optimize"  # commit userMetadata of the rewrite


def files_since_optimize(spark, table: LakeTable) -> int:  # noqa: ANN001
    """Files added by writes since the last rewrite by this job."""
    from delta.tables import DeltaTable

    history = DeltaTable.forPath(spark, table.path).history().select(
        "version", "userMetadata", "operationMetrics").orderBy("version").collect()
    added = 0
    for row in history:
        if row.userMetadata == MARK:
            added = 0
        else:
            added += int((row.operationMetrics or {}).get("numFiles", 0) or 0)
    return added


def run(spark, settings: Settings, *, run_id: str | None = None,  # noqa: ANN001
        continuous: bool = False) -> dict[str, Any]:
    del run_id, continuous  # a one-shot maintenance job
    from pyspark.sql import functions as F

    table = LakeTable(spark, settings, "silver.events").ensure()
    pending = files_since_optimize(spark, table)
    if pending < settings.optimize_min_files:
        log(f"optimize: {pending} new files in silver.events since the last rewrite "
            f"(< optimize_min_files = {settings.optimize_min_files}): nothing to do")
        return {"optimized": False, "pending_files": pending}
    version = table.version()
    current = table.as_of(version)
    files_before = len(current.inputFiles())
    rows = current.count()
    files = max(1, math.ceil(rows / settings.optimize_file_rows))
    (
        current.repartitionByRange(files, *[F.col(c) for c in COLUMNS])
        .sortWithinPartitions(*COLUMNS)
        .write.format("delta").mode("overwrite")
        .option("dataChange", "false")
        .option("userMetadata", MARK)
        .save(table.path)
    )
    summary = {"optimized": True, "pending_files": pending, "files_removed": files_before,
               "files_added": len(table.as_of(table.version()).inputFiles()), "rows": rows}
    log(f"optimize: silver.events v{version} clustered by {COLUMNS}: {summary}")
    return summary
