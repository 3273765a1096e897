"""Fixtures for the Airflow tests: an isolated Airflow home (SQLite) migrated once per session.

Nothing here touches the developer's ``.lakecep/airflow``: every Airflow CLI call made by the
tests gets the environment from ``airflow_env`` (its own AIRFLOW_HOME, DB, logs), and the
DAG folder is the repo's ``dags/``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DAGS = REPO / "dags"


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


@pytest.fixture(scope="session")
def base_env() -> dict[str, str]:
    """The caller's environment minus AIRFLOW*/LAKECEP_* (tests add their own)."""
    return clean_env()


@pytest.fixture(scope="session")
def airflow_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Environment of an isolated, migrated Airflow home (SQLite, LocalExecutor, repo dags/)."""
    home = tmp_path_factory.mktemp("airflow_home")
    env = clean_env()
    env.update(
        {
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home}/airflow.db",
            "AIRFLOW__LOGGING__BASE_LOG_FOLDER": str(home / "logs"),
            "AIRFLOW__CORE__DAGBAG_IMPORT_TIMEOUT": "120",
            "LAKECEP_PYTHON_BIN": lakecep_python(),
        }
    )
    started = time.monotonic()
    result = run_airflow(env, "db", "migrate", timeout=300)
    assert result.returncode == 0, (
        f"airflow db migrate failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    )
    print(f"\nairflow db migrate took {time.monotonic() - started:.1f}s ({home})")
    return env
