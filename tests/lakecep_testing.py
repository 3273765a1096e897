"""Helpers shared by the Airflow and end-to-end tests (importable: tests/ is on pythonpath)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

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


def json_rows(output: str) -> list[dict]:
    """The JSON array an Airflow ``-o json`` command printed (warnings go to stdout too)."""
    for line in reversed(output.splitlines()):
        if line.startswith("[{") or line.strip() == "[]":
            return json.loads(line)
    raise AssertionError(f"no JSON array in the CLI output:\n{output[-3000:]}")
