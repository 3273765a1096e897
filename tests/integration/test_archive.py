"""Archive access on real Spark + Delta: range reads skip files (time statistics, and
object id after the optimize job's clustering), scan metrics are the real ones, and the
RBuffer holds exactly silver's newest events."""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta
from pathlib import Path

import pandas as pd
import pytest

from lakecep import schemas
from lakecep.jobs import optimize
from lakecep.jobs.archive import RecentBuffer, read_ranges
from lakecep.jobs.tables import LakeTable

pytestmark = pytest.mark.spark
T0 = datetime(2026, 3, 1)
COLUMNS = ["event_id", "object_id", "event_time"]


@pytest.fixture()
def local(settings, tmp_path: Path):  # noqa: ANN001, ANN201
    return dataclasses.replace(settings, home=tmp_path, optimize_min_files=4)


def events(first: int, n: int, tags: int, hour: float) -> pd.DataFrame:
    """``n`` events from ``first``, spread over ``tags`` tags within one hour from ``hour``."""
    ids = range(first, first + n)
    return pd.DataFrame({
        "event_id": [f"e{i}" for i in ids], "object_id": [f"t{i % tags:02d}" for i in ids],
        "event_type": "read", "source_id": "A",
        "event_time": [T0 + timedelta(hours=hour, seconds=(i - first) * 3600 / n) for i in ids],
        "time_lower": None, "time_upper": None, "pmf": None, "attributes": None,
        "source_file": "f", "line_no": list(ids), "ingest_time": T0, "silver_time": T0,
    })


def append(spark, table: LakeTable, frame: pd.DataFrame) -> None:  # noqa: ANN001
    ddl = schemas.ddl("silver.events").replace(" NOT NULL", "")
    spark.createDataFrame(frame, ddl).coalesce(1).write.format("delta").mode("append").save(
        table.path)


def loads(*rows: tuple[str | None, datetime, datetime]) -> pd.DataFrame:
    return pd.DataFrame([(k, pd.Timestamp(lo).value, pd.Timestamp(hi).value)
                         for k, lo, hi in rows], columns=["key", "lo", "hi"])


def test_range_reads_skip_files_and_optimize_clusters_by_tag(spark, local) -> None:  # noqa: ANN001
    table = LakeTable(spark, local, "silver.events").ensure()
    for hour in range(6):  # six appends, one file each, each one hour of 16 tags
        append(spark, table, events(hour * 160, 160, 16, hour))
    history = table.as_of(table.version())

    # Hour 2 of tag t03: time statistics rule out the other five files.
    hour2 = loads(("t03", T0 + timedelta(hours=2), T0 + timedelta(hours=3)))
    rows, metrics = read_ranges(spark, history, hour2, "object_id", COLUMNS)
    got = sorted(r.event_id for r in rows.collect())
    expected = events(320, 160, 16, 2)
    assert got == sorted(expected[expected.object_id == "t03"].event_id)
    assert (metrics.files_read, metrics.files_total) == (1, 6)
    assert metrics.rows_scanned == 160  # the whole file is read, not the other 800 rows

    # All day of one tag: without clustering every file holds t03.
    day = loads(("t03", T0, T0 + timedelta(hours=6)))
    _, before = read_ranges(spark, history, day, "object_id", COLUMNS)
    assert before.files_read == 6

    summary = optimize.run(spark, dataclasses.replace(local, optimize_file_rows=120))
    assert summary["optimized"] and summary["pending_files"] == 6
    assert summary["files_removed"] == 6 and summary["files_added"] == 8
    history = table.as_of(table.version())
    rows, after = read_ranges(spark, history, day, "object_id", COLUMNS)
    assert rows.count() == 60  # t03's events: every 16th of 960
    assert after.files_total == summary["files_added"]
    assert after.files_read == 1  # clustering put t03's day in one of the 8 files
    assert after.rows_scanned <= 240
    assert optimize.run(spark, local) == {"optimized": False, "pending_files": 0}
    # Time travel still reads the version before the rewrite, file for file.
    _, old = read_ranges(spark, table.as_of(6), day, "object_id", COLUMNS)
    assert (old.files_read, old.files_total) == (6, 6)


def test_recent_buffer_holds_exactly_the_newest_events(spark, local) -> None:  # noqa: ANN001
    table = LakeTable(spark, local, "silver.events").ensure()
    append(spark, table, events(0, 100, 4, 0))
    buffer = RecentBuffer(capacity=150)
    version = table.version()
    first = spark.createDataFrame(events(0, 100, 4, 0)[COLUMNS])
    buffer.update(table.as_of(version), version, first, COLUMNS)
    assert buffer.stats == {"rebuilds": 1, "appends": 0} and len(buffer.frame) == 100
    assert buffer.covers(pd.Timestamp(T0).value)  # the whole table is in memory

    # The next batch is exactly what the table grew by: appended, then the oldest evicted.
    batch = events(100, 100, 4, 1)
    append(spark, table, batch)
    version = table.version()
    history = table.as_of(version)
    buffer.update(history, version, spark.createDataFrame(batch[COLUMNS]), COLUMNS)
    assert buffer.stats["appends"] == 1 and len(buffer.frame) <= 150
    horizon = pd.Timestamp(buffer.horizon)
    newer = history.where(history.event_time > horizon.to_pydatetime()).select("event_id")
    assert set(buffer.frame.event_id) == {r.event_id for r in newer.collect()}
    assert not buffer.covers(pd.Timestamp(T0).value)
    assert buffer.covers(buffer.horizon + 1)

    # Served ranges equal what Delta returns for them.
    wanted = loads(("t01", horizon + timedelta(seconds=1), T0 + timedelta(hours=2)))
    from_delta, _ = read_ranges(spark, history, wanted, "object_id", COLUMNS)
    assert set(buffer.rows_for(wanted, "object_id").event_id) == {
        r.event_id for r in from_delta.collect()}

    # Silver grew by more than the batch (the stream lags): rebuilt from Delta instead.
    append(spark, table, events(200, 10, 4, 3))
    append(spark, table, events(210, 10, 4, 4))
    version = table.version()
    buffer.update(table.as_of(version), version,
                  spark.createDataFrame(events(200, 10, 4, 3)[COLUMNS]), COLUMNS)
    assert buffer.stats["rebuilds"] == 2
    assert {"e215", "e205"} <= set(buffer.frame.event_id)
