"""End to end: generate data, run the real DAG with ``airflow dags test``, then check that
every task succeeded, nothing was lost (landed = bronze = silver + duplicates + quarantine,
matching the generator's counts), gold equals the generator's ground truth exactly, and
the quality step wrote its results and Data Docs.

Fixtures (tests/conftest.py): ``pipeline_run`` (one DAG run over 2,000 generated events in
an isolated LAKECEP_HOME and Airflow home).
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from lakecep_testing import dag_runs, task_states

from lakecep.config import load_settings

pytestmark = [pytest.mark.airflow, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
DAG_ID = "lakecep_pipeline"
TASKS = ["bronze", "silver", "optimize", "queries", "gold", "quality"]
#: the job of each task that runs one (gold: one mapped task per shipped query)
JOBS = ["bronze", "silver", "optimize", "gold rfid_abc", "gold rfid_transit", "quality"]
LOGICAL_DATE = "2026-01-01T00:00:00+00:00"


def test_dags_test_exits_zero(pipeline_run: dict) -> None:
    result = pipeline_run["result"]
    assert result.returncode == 0, (
        f"airflow dags test failed (exit {result.returncode}):\n"
        f"{result.stdout[-6000:]}\n{result.stderr[-4000:]}"
    )
    # Each job's output was streamed into the task log (dags test prints it).
    for job in JOBS:
        assert f"lakecep: job '{job}' finished (exit 0)" in result.stdout + result.stderr


def test_run_and_tasks_succeeded(pipeline_run: dict) -> None:
    env = pipeline_run["env"]
    rows = dag_runs(env, DAG_ID)
    assert len(rows) == 1, rows
    run = rows[0]
    assert run["state"] == "success", run

    states_rows = task_states(env, DAG_ID, run["run_id"])
    by_task = {row["task_id"]: row["state"] for row in states_rows}
    assert by_task == dict.fromkeys(TASKS, "success")
    # gold ran as one mapped task instance per query
    assert sorted(str(row.get("map_index")) for row in states_rows
                  if row["task_id"] == "gold") == ["0", "1"]
    assert all(row["state"] == "success" for row in states_rows)


def test_asset_events_carry_counts_and_versions(pipeline_run: dict) -> None:
    """The asset events Airflow recorded hold each job's row counts and Delta versions."""
    import sqlite3

    db = Path(pipeline_run["env"]["AIRFLOW_HOME"]) / "airflow.db"
    with sqlite3.connect(db) as connection:
        rows = connection.execute(
            "SELECT a.uri, e.extra FROM asset_event e JOIN asset a ON a.id = e.asset_id "
            "ORDER BY e.id").fetchall()
    events: dict[str, list[dict]] = {}
    for uri, extra in rows:
        events.setdefault(uri, []).append(json.loads(extra) if extra else {})
    assert sorted(events) == ["lakecep://bronze/events", "lakecep://gold/complex_events",
                              "lakecep://gold/quality_results", "lakecep://silver/events"]
    settings = load_settings({"LAKECEP_HOME": str(pipeline_run["lake_home"])})
    truth = json.loads((settings.truth_dir / "truth.json").read_text())
    (bronze,) = events["lakecep://bronze/events"]
    assert bronze["rows_out"] == truth["counts"]["lines_written"]
    assert bronze["versions"]["bronze.events"]
    (silver,) = events["lakecep://silver/events"]
    assert silver["rows_in"] == bronze["rows_out"]
    assert silver["quarantined"] > 0 and silver["duplicates"] == truth["counts"]["duplicates"]
    assert set(silver["versions"]) == {"silver.events", "silver.quarantine", "silver.duplicates"}
    gold = {e["query"]: e for e in events["lakecep://gold/complex_events"]}
    assert sorted(gold) == ["rfid_abc", "rfid_transit"]
    for query, event in gold.items():
        # each query's own stream read all of silver once; its matches are in the versions
        assert event["rows_in"] == silver["rows_out"], query
        assert event["rows_out"] >= len(truth[query]), query  # (+ rows superseded later)
        assert event["versions"]["gold.complex_events"], query
    (quality,) = events["lakecep://gold/quality_results"]
    assert quality["rows_out"] > 0 and quality["run_id"] == gold["rfid_abc"]["run_id"]


def test_delta_tables_exist(pipeline_run: dict) -> None:
    settings = load_settings({"LAKECEP_HOME": str(pipeline_run["lake_home"])})
    for layer in ("bronze", "silver", "gold"):
        logs = sorted((settings.lake / layer).glob("*/_delta_log"))
        assert logs, f"no Delta table under {settings.lake / layer}"
    assert (settings.table_path("bronze.events") / "_delta_log").is_dir()
    assert (settings.table_path("silver.events") / "_delta_log").is_dir()
    assert (settings.table_path("gold.complex_events") / "_delta_log").is_dir()
    assert (settings.table_path("gold.quality_results") / "_delta_log").is_dir()


def test_nothing_lost_and_gold_equals_ground_truth(pipeline_run: dict, spark) -> None:  # noqa: ANN001
    from lakecep.jobs.status import lake_status

    settings = load_settings({"LAKECEP_HOME": str(pipeline_run["lake_home"])})
    truth = json.loads((settings.truth_dir / "truth.json").read_text())
    status = lake_status(spark, settings)
    names = {check.name for check in status.checks}
    assert {"landed = bronze", "bronze = silver + duplicates + quarantine + filtered + "
            "merged_away + pending - split_extra",
            "bronze status = silver outcome, reason by reason",
            "silver/duplicates/quarantine = generator's counts",
            "gold rfid_abc = ground truth", "gold rfid_transit = ground truth"} <= names
    assert status.ok, str(status)
    assert status.counts["landing (lines)"] == truth["counts"]["lines_written"]
    # The data really exercised the hard cases.
    assert truth["counts"]["duplicates"] > 0
    assert sum(truth["counts"]["rejected_by_reason_code"].values()) > 0
    assert len(truth["rfid_abc"]) > 50 and len(truth["rfid_transit"]) > 50


def test_quality_results_and_data_docs(pipeline_run: dict, spark) -> None:  # noqa: ANN001
    from lakecep.jobs.tables import LakeTable

    settings = load_settings({"LAKECEP_HOME": str(pipeline_run["lake_home"])})
    rows = LakeTable(spark, settings, "gold.quality_results").read().collect()
    tables = {row.table_name for row in rows}
    assert {"bronze.events", "silver.events", "gold.complex_events"} <= tables
    assert all(row.run_id.startswith("manual__") for row in rows)
    assert (settings.reports / "data_docs" / "index.html").is_file()


def test_replay_reproduces_sampled_matches(pipeline_run: dict, spark) -> None:  # noqa: ANN001
    """`lakecep replay` on the lake the real DAG built: a seeded sample of each query's
    complex events (pattern and live-archive; current and superseded) re-run at the silver
    versions gold recorded gives the same rows: 100 % reproduced (docs/alerts.md)."""
    from lakecep.jobs import replay
    from lakecep.jobs.tables import LakeTable

    settings = load_settings({"LAKECEP_HOME": str(pipeline_run["lake_home"])})
    rows = LakeTable(spark, settings, "gold.complex_events").read().select(
        "query_id", "match_id", "superseded_version", "history_version").collect()
    pick = random.Random(16)
    sample: list[str] = []
    for query_id in sorted({r.query_id for r in rows}):
        ids = sorted(r.match_id for r in rows if r.query_id == query_id)
        sample += pick.sample(ids, min(8, len(ids)))
    superseded = sorted(r.match_id for r in rows if r.superseded_version is not None)
    sample += [m for m in superseded[:2] if m not in sample]
    assert {r.query_id for r in rows} == {"rfid_abc", "rfid_transit"}

    results = replay.replay(spark, settings, sample)
    assert [r.match_id for r in results] == sample
    assert [(r.match_id, r.differences, r.error) for r in results if not r.reproduced] == []
    versions = {r.stored["history_version"] for r in results}
    print(f"\nreplay: {len(results)} of {len(rows)} complex events sampled "
          f"({len(superseded)} superseded in gold, {min(2, len(superseded))} sampled), "
          f"{len(versions)} silver versions: 100 % reproduced")
