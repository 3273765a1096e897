"""Shared pieces of the lakecep DAGs: the lake's Assets, the DAG defaults and the job runner.

A plain module, not a DAG file (``dags/.airflowignore`` lists it, so the DAG processor does
not parse it for DAGs). The DAG files import it as ``from lakecep.dags.lakecep_tasks import
...``: the ``dags/`` folder is installed as the package ``lakecep.dags``, so the import works
wherever Airflow parses the DAG files from (no ``sys.path`` set-up). Like the DAG files it
imports nothing heavy (no pyspark, pandas, great_expectations, cep_core, lakecep.jobs): a task
runs each job in a child process. See docs/airflow.md.
"""

from __future__ import annotations

import os
import sys
from collections import deque
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from airflow.sdk import Asset

REPO_ROOT = Path(__file__).resolve().parent.parent

# Lake tables as Airflow Assets. The URIs are the contract between the DAGs (and with any
# producer posting asset events through the REST API): keep them stable.
LANDING_EVENTS = Asset("lakecep://landing/events")
BRONZE_EVENTS = Asset("lakecep://bronze/events")
SILVER_EVENTS = Asset("lakecep://silver/events")
GOLD_COMPLEX_EVENTS = Asset("lakecep://gold/complex_events")
QUALITY_RESULTS = Asset("lakecep://gold/quality_results")
# Tuning loop (lakecep_tuning): the measured statistics and the tuned configuration.
STATISTICS = Asset("lakecep://gold/statistics")
TUNED_CONFIG = Asset("lakecep://tuning/config")

#: Task defaults of the scheduled DAGs (pipeline, tuning): the jobs are idempotent, so one
#: quick retry; an hour per task at most.
DEFAULT_ARGS: dict[str, Any] = {
    "owner": "lakecep",
    "retries": 1,
    "retry_delay": timedelta(seconds=30),
    "execution_timeout": timedelta(hours=1),
}
#: ``@dag`` keyword arguments of every lakecep DAG: no catch-up, one run at a time.
DAG_DEFAULTS: dict[str, Any] = {
    "start_date": datetime(2026, 1, 1, tzinfo=UTC),
    "catchup": False,
    "max_active_runs": 1,
}
#: ... and of the scheduled DAGs, which also get the task defaults and a run timeout.
SCHEDULED_DAG_DEFAULTS: dict[str, Any] = {
    **DAG_DEFAULTS,
    "dagrun_timeout": timedelta(hours=2),
    "default_args": DEFAULT_ARGS,
}

#: Lines of the job's stderr quoted in the task's error message when it fails.
ERROR_TAIL_LINES = 40
#: ``lakecep``'s exit code for a failure the same input would repeat (a quarantine gate;
#: ``lakecep.console.NO_RETRY_EXIT``): the task fails at once, without its retry.
NO_RETRY_EXIT = 3


def lakecep_python() -> str:
    """Interpreter that runs the jobs: $LAKECEP_PYTHON_BIN, else the repo .venv, else ours."""
    configured = os.environ.get("LAKECEP_PYTHON_BIN")
    if configured:
        return configured
    venv_python = REPO_ROOT / ".venv" / "bin" / "python"
    if venv_python.exists():
        return str(venv_python)
    return sys.executable


def run_lakecep_job(job: str, run_id: str) -> None:
    """Run ``lakecep run <job> --run-id <run_id>`` and stream its output into the task log.

    stdout and stderr are read concurrently and forwarded line by line (prefixed with the
    stream name), so the Airflow task log shows the job's progress live. On a non-zero exit
    the task fails with an exception whose message holds the exit code, the command and the
    last lines of stderr: that is what the Airflow UI shows first for a failed task.

    The child inherits the task's environment (LAKECEP_HOME, LAKECEP_SPARK_MASTER, ...). It
    lives in the task-runner's process group, so when Airflow kills the task (timeout,
    "mark failed") the supervisor's ``killpg`` stops the job too.
    """
    import subprocess
    import threading

    cmd = [lakecep_python(), "-m", "lakecep.jobs.cli", "run", job, "--run-id", run_id]
    print(f"lakecep: running {' '.join(cmd)}", flush=True)
    stderr_tail: deque[str] = deque(maxlen=ERROR_TAIL_LINES)

    def pump(stream, name: str, tail: deque[str] | None) -> None:  # noqa: ANN001
        for raw in iter(stream.readline, ""):
            line = raw.rstrip("\n")
            print(f"[{job} {name}] {line}", flush=True)
            if tail is not None:
                tail.append(line)
        stream.close()

    proc = subprocess.Popen(
        cmd,
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        errors="replace",
        bufsize=1,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    readers = [
        threading.Thread(target=pump, args=(proc.stdout, "stdout", None), daemon=True),
        threading.Thread(target=pump, args=(proc.stderr, "stderr", stderr_tail), daemon=True),
    ]
    for reader in readers:
        reader.start()
    try:
        returncode = proc.wait()
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    for reader in readers:
        reader.join(timeout=10)
    if returncode == NO_RETRY_EXIT:
        from airflow.sdk.exceptions import AirflowFailException

        reason = next((line for line in reversed(stderr_tail) if " error: " in line),
                      stderr_tail[-1] if stderr_tail else "(no stderr output)")
        raise AirflowFailException(f"lakecep job {job!r} failed, and would again on the same "
                                   f"input (no retry): {reason.strip()}")
    if returncode != 0:
        tail = "\n".join(stderr_tail) or "(no stderr output)"
        raise RuntimeError(
            f"lakecep job {job!r} failed with exit code {returncode}\n"
            f"command: {' '.join(cmd)}\n"
            f"last {len(stderr_tail)} lines of stderr:\n{tail}"
        )
    print(f"lakecep: job {job!r} finished (exit 0)", flush=True)
