"""End to end through Airflow: ``airflow dags test lakecep_pipeline`` runs the real jobs.

Isolated Airflow home (session fixture ``airflow_env``) and an isolated LAKECEP_HOME with a
small generated data set. Afterwards the run and all four task instances must be
``success`` in Airflow's DB and the Delta tables must exist.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lakecep.config import load_settings

pytestmark = [pytest.mark.airflow, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
DAG_ID = "lakecep_pipeline"
TASKS = ["bronze", "silver", "gold", "quality"]
LOGICAL_DATE = "2026-01-01T00:00:00+00:00"


def _airflow(
    env: dict[str, str], *args: str, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "airflow", *args],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _json_rows(output: str) -> list[dict]:
    """The JSON array the ``-o json`` CLI prints (Airflow's log/warning lines go to stdout too)."""
    for line in reversed(output.splitlines()):
        if line.startswith("[{") or line.strip() == "[]":
            return json.loads(line)
    raise AssertionError(f"no JSON array in the CLI output:\n{output[-3000:]}")


@pytest.fixture(scope="module")
def pipeline_run(airflow_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> dict:
    lake_home = tmp_path_factory.mktemp("dags_test_lakecep_home")
    env = {**airflow_env, "LAKECEP_HOME": str(lake_home)}
    python = env["LAKECEP_PYTHON_BIN"]

    generate = subprocess.run(
        [python, "-m", "lakecep.cli", "generate", "--events", "2000", "--seed", "7"],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert generate.returncode == 0, f"lakecep generate failed:\n{generate.stderr[-3000:]}"

    started = time.monotonic()
    result = _airflow(env, "dags", "test", DAG_ID, LOGICAL_DATE, timeout=1800)
    elapsed = time.monotonic() - started
    print(f"\nairflow dags test {DAG_ID} took {elapsed:.1f}s")
    return {"env": env, "lake_home": lake_home, "result": result, "seconds": elapsed}


def test_dags_test_exits_zero(pipeline_run: dict) -> None:
    result = pipeline_run["result"]
    assert result.returncode == 0, (
        f"airflow dags test failed (exit {result.returncode}):\n"
        f"{result.stdout[-6000:]}\n{result.stderr[-4000:]}"
    )
    # Each job's output was streamed into the task log (dags test prints it).
    for task_id in TASKS:
        assert f"lakecep: job '{task_id}' finished (exit 0)" in result.stdout + result.stderr


def test_run_and_tasks_succeeded(pipeline_run: dict) -> None:
    env = pipeline_run["env"]
    runs = _airflow(env, "dags", "list-runs", DAG_ID, "-o", "json")
    assert runs.returncode == 0, runs.stderr[-3000:]
    rows = _json_rows(runs.stdout)
    assert len(rows) == 1, rows
    run = rows[0]
    assert run["state"] == "success", run

    states = _airflow(env, "tasks", "states-for-dag-run", DAG_ID, run["run_id"], "-o", "json")
    assert states.returncode == 0, states.stderr[-3000:]
    by_task = {row["task_id"]: row["state"] for row in _json_rows(states.stdout)}
    assert by_task == dict.fromkeys(TASKS, "success")


def test_delta_tables_exist(pipeline_run: dict) -> None:
    settings = load_settings({"LAKECEP_HOME": str(pipeline_run["lake_home"])})
    for layer in ("bronze", "silver", "gold"):
        logs = sorted((settings.lake / layer).glob("*/_delta_log"))
        assert logs, f"no Delta table under {settings.lake / layer}"
    assert (settings.table_path("bronze.events") / "_delta_log").is_dir()
    assert (settings.table_path("silver.events") / "_delta_log").is_dir()
    assert (settings.table_path("gold.complex_events") / "_delta_log").is_dir()
    assert (settings.table_path("gold.quality_results") / "_delta_log").is_dir()
