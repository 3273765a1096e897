"""The summary table of ``lakecep run`` on real Spark + Delta: rows in, out, quarantined and
duplicates per job, read from the Delta log, agree with the tables."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from rich.console import Console

from lakecep import console
from lakecep.jobs import bronze, gold, run_summary, silver
from lakecep.jobs.tables import LakeTable

pytestmark = pytest.mark.spark


def test_summary_rows_match_the_tables(spark, settings, tmp_path: Path) -> None:  # noqa: ANN001
    local = dataclasses.replace(settings, home=tmp_path)
    local.landing.mkdir(parents=True)
    good = [json.dumps({"event_id": f"e{n}", "object_id": "t", "event_type": "read",
                        "source_id": "A", "event_time": "2026-01-01T00:00:00Z"})
            for n in range(5)]
    (local.landing / "a.jsonl").write_text("\n".join([*good, good[0], "{oops"]) + "\n")
    (local.landing / "b.jsonl").write_text(good[1] + "\n")

    rows = []
    for name, job in (("bronze", bronze.run), ("silver", silver.run)):
        before = run_summary.versions(local, name)
        result = job(spark, local)
        rows.append(run_summary.summarise(local, name, result, 1.5, before))
    first_bronze, first_silver = rows

    def count(table: str) -> int:
        return LakeTable(spark, local, table).read().count()

    assert (first_bronze.rows_in, first_bronze.in_unit) == (2, "files")
    assert first_bronze.rows_out == count("bronze.events") == 8
    assert first_silver.rows_in == 8
    assert first_silver.rows_out == count("silver.events") == 5
    assert first_silver.quarantined == count("silver.quarantine") == 1
    assert first_silver.duplicates == count("silver.duplicates") == 2
    # ... and the Delta versions each wrote (what the Airflow asset events carry)
    def version(table: str) -> int:
        return LakeTable(spark, local, table).version()

    # (a new lake: version 0 creates the table, the stream's commits follow)
    assert first_bronze.versions == {"bronze.events": list(range(version("bronze.events") + 1))}
    assert set(first_silver.versions) == {"silver.events", "silver.quarantine",
                                          "silver.duplicates"}
    for table, written in first_silver.versions.items():
        assert written == list(range(version(table) + 1)), table
    # gold reads each new silver row once (Spark counts a batch's rows per scan of it)
    before = run_summary.versions(local, "gold")
    gold_row = run_summary.summarise(local, "gold", gold.run(spark, local), 1.0, before)
    assert (gold_row.rows_in, gold_row.in_unit) == (count("silver.events"), "rows")

    # A second run over nothing new writes nothing: the counts are of this run only.
    before = run_summary.versions(local, "silver")
    again = run_summary.summarise(local, "silver", silver.run(spark, local), 0.1, before)
    assert (again.rows_in, again.rows_out, again.quarantined) == (0, 0, 0)
    assert again.versions == {"silver.events": [], "silver.quarantine": [],
                              "silver.duplicates": []}

    screen = Console(width=140, record=True)
    screen.print(console.summary_table([r.as_dict() for r in rows]))
    text = screen.export_text()
    assert "bronze.events" in text and "2 files" in text and "1.5s" in text
    silver_line = next(line for line in text.splitlines() if "silver.events" in line)
    assert silver_line.split()[2:6] == ["8", "5", "1", "2"], silver_line

    # The same tables, written by Spark, read without a JVM (lakecep sql --engine duckdb).
    from lakecep.lake_sql import run_query

    counts = run_query(local, "SELECT (SELECT count(*) FROM silver.events) AS events, "
                       "(SELECT count(*) FROM silver.quarantine) AS quarantined", 10)
    assert counts.to_dict("records") == [{"events": 5, "quarantined": 1}]


def test_spark_tasks_bar_counts_the_tasks_of_new_jobs(spark) -> None:  # noqa: ANN001
    """`lakecep backfill`'s bar: completed / total tasks of the jobs run inside, not those
    of jobs before it."""
    spark.range(10).repartition(3).count()  # an earlier job: not counted
    bar = console.progress(disable=True)
    task = bar.add_task("backfill", total=None)
    with console.SparkTasks(spark.sparkContext, bar, task, every=0.05):
        spark.sparkContext.parallelize(range(100), 7).map(lambda x: x * 2).sum()
    shown = bar.tasks[0]
    assert shown.total == shown.completed == 7
