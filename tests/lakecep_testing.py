"""Helpers shared by the Airflow and end-to-end tests (importable: tests/ is on pythonpath)."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def lakecep_python() -> str:
    """The interpreter the DAG tasks use for the jobs (same rule as the DAG file)."""
    configured = os.environ.get("LAKECEP_PYTHON_BIN")
    if configured:
        return configured
    venv_python = REPO / ".venv" / "bin" / "python"
    return str(venv_python) if venv_python.exists() else sys.executable


def clean_env() -> dict[str, str]:
    """os.environ without any Airflow or lakecep settings inherited from the caller's shell."""
    return {
        k: v
        for k, v in os.environ.items()
        if not (k.startswith("AIRFLOW") or k.startswith("LAKECEP_"))
    }


def run_airflow(
    env: dict[str, str], *args: str, timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    """Run the real ``airflow`` CLI (this interpreter's) with the given environment."""
    return subprocess.run(
        [sys.executable, "-m", "airflow", *args],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _airflow_db(env: dict[str, str], sql: str, *params: str) -> list[dict]:
    """Rows of a query on the (SQLite) metadata database of the Airflow home in ``env``."""
    url = env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"]
    assert url.startswith("sqlite:///"), url
    with sqlite3.connect(url.removeprefix("sqlite:///")) as connection:
        connection.row_factory = sqlite3.Row
        return [dict(row) for row in connection.execute(sql, params).fetchall()]


def dag_runs(env: dict[str, str], dag_id: str) -> list[dict]:
    """The DAG's runs (``run_id``, ``state``), oldest first: what ``airflow dags list-runs``
    prints, read from the metadata database (an Airflow CLI start costs 10-30 s)."""
    return _airflow_db(env, "SELECT run_id, state FROM dag_run WHERE dag_id = ? ORDER BY id",
                       dag_id)


def task_states(env: dict[str, str], dag_id: str, run_id: str) -> list[dict]:
    """The run's task instances (``task_id``, ``map_index``, ``state``): what ``airflow tasks
    states-for-dag-run`` prints, read from the metadata database."""
    return _airflow_db(env, "SELECT task_id, map_index, state FROM task_instance "
                       "WHERE dag_id = ? AND run_id = ? ORDER BY task_id, map_index",
                       dag_id, run_id)


def cli_in_session(spark: object, monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the commands of ``lakecep.jobs.cli.main`` run on the test's Spark session (which
    they must not stop) instead of starting a driver JVM each: what is tested is the command,
    and a JVM start costs tens of seconds."""
    from lakecep.jobs import cli

    class Session:
        def __getattr__(self, name: str) -> object:
            return getattr(spark, name)

        def stop(self) -> None:
            pass

    monkeypatch.setattr(cli, "_spark", lambda cfg, app: Session())
