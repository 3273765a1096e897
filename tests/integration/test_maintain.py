"""The maintain job on a real Delta table (docs/architecture.md, "Housekeeping"): a retention
shorter than a query's replay horizon is refused before anything is touched; compaction
bin-packs small files with the rows unchanged; VACUUM deletes unreferenced files older than
the retention while versions within it still time-travel."""

from __future__ import annotations

import dataclasses
import os
import shutil
import time
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from lakecep.jobs import maintain
from lakecep.jobs.tables import LakeTable
from lakecep.maintenance import RetentionError
from lakecep.queries import PatternQuery, SnapshotSpec

pytestmark = pytest.mark.spark


def _checksum(df):  # noqa: ANN001, ANN202
    from pyspark.sql import functions as F

    return df.agg(F.count("*"), F.sum(F.xxhash64(*df.columns).cast("decimal(38,0)"))).first()


def _data_files(path: str) -> set[str]:
    return {p.name for p in Path(path).glob("*.parquet")}


def test_maintain_refuses_short_retention_compacts_and_vacuums(spark, settings,  # noqa: ANN001
                                                               tmp_path: Path) -> None:
    query = PatternQuery("fraud", "1", "", "SELECT 1", alert=True, snapshot=SnapshotSpec(
        timedelta(0), horizon=timedelta(minutes=30)))
    # 30 minutes: a busy machine may take minutes between a commit and the VACUUM after it
    local = dataclasses.replace(settings, home=tmp_path, vacuum_retention="30 minutes",
                                log_retention="1 day", max_stream_lag="1 second",
                                compact_min_files=5)
    bronze = LakeTable(spark, local, "bronze.events").ensure()
    # eight small files, as eight streaming micro-batches leave them (written by one append
    # of eight partitions of ten rows: a commit per file would only add Delta commits)
    rows = [(f'{{"n": {n * 10 + i}}}', f"f{n}.jsonl", i, 9, datetime(2026, 1, 1), "ok", None)
            for n in range(8) for i in range(10)]
    bronze.append(spark.createDataFrame(spark.sparkContext.parallelize(rows, 8), bronze.schema),
                  "test", 0)
    old_version, old_sum = bronze.version(), _checksum(bronze.read())
    files = _data_files(bronze.path)
    assert len(files) == 8

    # 1. a query needs 30 minutes of time travel; 29 are refused, nothing touched
    short = dataclasses.replace(local, vacuum_retention="29 minutes")
    with pytest.raises(RetentionError, match=r"^vacuum_retention = '29 minutes' is shorter "
                       r"than the time travel fraud needs on silver.events: 30 minutes"):
        maintain.run(spark, short, queries=[query])
    assert bronze.version() == old_version

    # an unreferenced file (a crashed write's leftover), older than the retention
    orphan = Path(bronze.path) / "part-orphan.parquet"
    shutil.copy(Path(bronze.path) / sorted(files)[0], orphan)
    os.utime(orphan, (time.time() - 3600, time.time() - 3600))

    # 2. compaction: fewer files, the same rows; VACUUM keeps the just-removed files
    summary = maintain.run(spark, local, queries=[query])
    entry = summary["tables"]["bronze.events"]
    assert (entry["files_before"], entry["small_files"], entry["compacted"]) == (8, 8, True)
    assert entry["files_after"] == 1 and entry["files_vacuumed"] == 1  # the orphan only
    assert _checksum(bronze.read()) == old_sum
    assert not orphan.exists()
    assert bronze.retention() == {"delta.logRetentionDuration": "interval 1 day",
                                  "delta.deletedFileRetentionDuration": "interval 30 minutes"}
    assert _checksum(bronze.as_of(old_version)) == old_sum  # within the horizon: travels
    assert files <= _data_files(bronze.path)

    # 3. a shorter horizon and retention (1 s): the compacted files are now older than it,
    # VACUUM deletes them; the newest version reads the same rows
    query = dataclasses.replace(query, snapshot=SnapshotSpec(timedelta(0),
                                                             horizon=timedelta(seconds=1)))
    brief = dataclasses.replace(local, vacuum_retention="1 second")
    time.sleep(1.5)
    again = maintain.run(spark, brief, queries=[query])["tables"]["bronze.events"]
    assert (again["compacted"], again["retention_set"], again["files_vacuumed"]) == (
        False, True, 8)
    assert _data_files(bronze.path) == {Path(f).name for f in bronze.read().inputFiles()}
    assert _checksum(bronze.read()) == old_sum
