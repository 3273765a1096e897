"""End to end: the tuning loop over the lake the pipeline built.

Runs the real ``airflow dags test lakecep_tuning`` (``statistics`` then ``tune``) in the
pipeline run's LAKECEP_HOME and Airflow home, then checks that both tasks succeeded, the
measured statistics and the allocations are in Delta, the versioned tuned configuration was
written, and that the gold job picks that configuration up when it next starts.

Fixtures (tests/conftest.py): ``pipeline_run`` (one ``lakecep_pipeline`` run over 2,000
generated events: bronze, silver and gold exist), ``spark`` (to read the Delta tables).
"""

from __future__ import annotations

import json
import subprocess
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from lakecep_testing import dag_runs, run_airflow, task_states

pytestmark = [pytest.mark.spark, pytest.mark.airflow, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
DAG_ID = "lakecep_tuning"
TASKS = ["statistics", "tune"]
LOGICAL_DATE = "2026-01-01T01:00:00+00:00"


@pytest.fixture(scope="module")
def tuning_run(pipeline_run: dict) -> dict:
    """``airflow dags test lakecep_tuning`` once, on the lake of the pipeline run."""
    pipeline = pipeline_run["result"]
    assert pipeline.returncode == 0, (
        "the pipeline run this test builds on failed:\n"
        f"{pipeline.stdout[-3000:]}\n{pipeline.stderr[-3000:]}"
    )
    env = pipeline_run["env"]
    started = time.monotonic()
    result = run_airflow(env, "dags", "test", DAG_ID, LOGICAL_DATE, timeout=1200)
    elapsed = time.monotonic() - started
    print(f"\nairflow dags test {DAG_ID} took {elapsed:.1f}s")
    return {"env": env, "lake_home": Path(pipeline_run["lake_home"]), "result": result}


@pytest.fixture(scope="module")
def tuned_config(tuning_run: dict) -> dict:
    path = tuning_run["lake_home"] / "tuning" / "config-v1.json"
    assert path.is_file(), (
        f"no tuned configuration at {path}; tuning/ holds "
        f"{sorted(p.name for p in path.parent.glob('*')) if path.parent.is_dir() else 'nothing'}"
    )
    config = json.loads(path.read_text())
    assert isinstance(config, dict), config
    return config


@pytest.fixture(scope="module")
def gold_rerun(tuning_run: dict, tuned_config: dict) -> subprocess.CompletedProcess[str]:
    """The gold job started again after tuning (it should load config-v1.json)."""
    env = tuning_run["env"]
    return subprocess.run(
        [env["LAKECEP_PYTHON_BIN"], "-m", "lakecep.jobs.cli", "run", "gold"],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=1200,
    )


def test_dags_test_exits_zero(tuning_run: dict) -> None:
    result = tuning_run["result"]
    assert result.returncode == 0, (
        f"airflow dags test {DAG_ID} failed (exit {result.returncode}):\n"
        f"{result.stdout[-6000:]}\n{result.stderr[-4000:]}"
    )
    for task_id in TASKS:
        assert f"lakecep: job '{task_id}' finished (exit 0)" in result.stdout + result.stderr


def test_run_and_tasks_succeeded(tuning_run: dict) -> None:
    env = tuning_run["env"]
    rows = dag_runs(env, DAG_ID)
    assert len(rows) == 1, rows
    run = rows[0]
    assert run["state"] == "success", run

    by_task = {row["task_id"]: row["state"] for row in task_states(env, DAG_ID, run["run_id"])}
    assert by_task == dict.fromkeys(TASKS, "success")


def test_tuned_config_v1(tuned_config: dict) -> None:
    assert {"version", "statistics_run", "queries", "gold"} <= set(tuned_config), tuned_config
    assert type(tuned_config["version"]) is int and tuned_config["version"] == 1
    assert tuned_config["statistics_run"], tuned_config
    gold = tuned_config["gold"]
    assert isinstance(gold, dict), gold
    files = gold["max_files_per_trigger"]
    assert type(files) is int and files >= 1, gold
    pools = gold["pools"]
    assert isinstance(pools, dict) and pools, gold
    for name, weight in pools.items():
        assert isinstance(name, str) and name, pools
        assert type(weight) is int and weight > 0, pools


def test_fair_scheduler_file_matches_config(tuning_run: dict, tuned_config: dict) -> None:
    path = tuning_run["lake_home"] / "tuning" / "fairscheduler-v1.xml"
    assert path.is_file(), path
    root = ET.fromstring(path.read_text())
    assert root.tag == "allocations", root.tag
    weights = {
        pool.get("name"): int(float(pool.findtext("weight", default="nan")))
        for pool in root.findall("pool")
    }
    assert weights == tuned_config["gold"]["pools"]


def test_statistics_table(tuning_run: dict, spark) -> None:  # noqa: ANN001
    path = tuning_run["lake_home"] / "lake" / "gold" / "statistics"
    assert (path / "_delta_log").is_dir(), f"no Delta table at {path}"
    frame = spark.read.format("delta").load(str(path))
    assert frame.count() > 0
    rates = frame.where("kind = 'arrival_rate' AND p_value IS NOT NULL")
    assert rates.count() > 0, frame.groupBy("kind").count().collect()
    p_values = [row.p_value for row in rates.select("p_value").collect()]
    assert all(0.0 <= p <= 1.0 for p in p_values), p_values[:20]


def test_allocations_table(tuning_run: dict, spark) -> None:  # noqa: ANN001
    path = tuning_run["lake_home"] / "lake" / "gold" / "allocations"
    assert (path / "_delta_log").is_dir(), f"no Delta table at {path}"
    assert spark.read.format("delta").load(str(path)).count() > 0


def test_gold_job_loads_the_tuned_config(
    gold_rerun: subprocess.CompletedProcess[str],
) -> None:
    assert gold_rerun.returncode == 0, (
        f"lakecep run gold failed (exit {gold_rerun.returncode}):\n"
        f"{gold_rerun.stdout[-3000:]}\n{gold_rerun.stderr[-4000:]}"
    )
    assert "tuned configuration v1" in gold_rerun.stderr, gold_rerun.stderr[-4000:]


def test_gold_session_runs_the_tuned_fair_pools(
    gold_rerun: subprocess.CompletedProcess[str], tuned_config: dict
) -> None:
    """The new Spark session started in FAIR mode with the tuned pool file, and Spark's
    scheduler holds each pool with the tuned weight (read back from the SparkContext)."""
    err = gold_rerun.stderr
    assert f"scheduler FAIR, pools from {tuned_config['gold']['scheduler_file']}" in err, (
        err[-4000:])
    for pool, weight in tuned_config["gold"]["pools"].items():
        assert f"{pool} weight {weight} (tuned {weight})" in err, err[-4000:]
