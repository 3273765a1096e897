"""lakecep pipeline DAG: landing JSON lines -> bronze -> silver -> gold -> quality.

This file only wires tasks. Each task runs ``python -m lakecep.cli run <job> --run-id <id>``
in a child process, so nothing heavy (pyspark, pandas, great_expectations, cep_core, jobs)
is imported when Airflow parses this file. See docs/airflow.md.
"""

from __future__ import annotations

import os
import sys
from collections import deque
from datetime import UTC, datetime, timedelta
from pathlib import Path

from airflow.sdk import Asset, AssetOrTimeSchedule, CronTriggerTimetable, dag, task

REPO_ROOT = Path(__file__).resolve().parent.parent

# Lake tables as Airflow Assets (the URIs are the contract with downstream DAGs, e.g. a
# future tuning DAG scheduled on GOLD_COMPLEX_EVENTS or QUALITY_RESULTS).
LANDING_EVENTS = Asset("lakecep://landing/events")
BRONZE_EVENTS = Asset("lakecep://bronze/events")
SILVER_EVENTS = Asset("lakecep://silver/events")
GOLD_COMPLEX_EVENTS = Asset("lakecep://gold/complex_events")
QUALITY_RESULTS = Asset("lakecep://gold/quality_results")

#: Lines of the job's stderr quoted in the task's error message when it fails.
ERROR_TAIL_LINES = 40


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

    cmd = [lakecep_python(), "-m", "lakecep.cli", "run", job, "--run-id", run_id]
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
    if returncode != 0:
        tail = "\n".join(stderr_tail) or "(no stderr output)"
        raise RuntimeError(
            f"lakecep job {job!r} failed with exit code {returncode}\n"
            f"command: {' '.join(cmd)}\n"
            f"last {len(stderr_tail)} lines of stderr:\n{tail}"
        )
    print(f"lakecep: job {job!r} finished (exit 0)", flush=True)


DOC_MD = """
# lakecep pipeline

Runs the lakecep jobs in order, each as `lakecep run <job> --run-id <Airflow run id>` in a
child process (the Spark jobs never run inside the Airflow worker process):

| task | reads | writes (outlet Asset) |
|------|-------|-----------------------|
| `bronze`  | landing JSON lines (`lakecep://landing/events`) | `lakecep://bronze/events` |
| `silver`  | `lakecep://bronze/events` | `lakecep://silver/events` |
| `optimize` | `lakecep://silver/events` | clusters silver by (object_id, event_time) |
| `gold`    | `lakecep://silver/events` | `lakecep://gold/complex_events` (CEP matches) |
| `quality` | bronze + silver + gold | `lakecep://gold/quality_results` (Great Expectations) |

Schedule: every 15 minutes (no catch-up, one run at a time) and whenever an asset event
for `lakecep://landing/events` arrives (e.g. from the `lakecep_demo` DAG).

Every job processes what is available (Structured Streaming `availableNow`) and exits, so a
run is incremental and the jobs are idempotent: a retry or re-run is safe. A failed task's
error message quotes the last lines of the job's stderr; the full output is in the task log.

Configuration comes from the environment of the Airflow components (`LAKECEP_HOME`,
`LAKECEP_SPARK_MASTER`, ... or `$LAKECEP_HOME/lakecep.toml`), see `docs/airflow.md`.
"""


@dag(
    dag_id="lakecep_pipeline",
    # Every 15 minutes, and as soon as a producer announces new landing data (an asset
    # event on LANDING_EVENTS: the lakecep_demo DAG, or POST /api/v2/assets/events).
    schedule=AssetOrTimeSchedule(
        timetable=CronTriggerTimetable("*/15 * * * *", timezone="UTC"),
        assets=[LANDING_EVENTS],
    ),
    start_date=datetime(2026, 1, 1, tzinfo=UTC),
    catchup=False,
    max_active_runs=1,
    dagrun_timeout=timedelta(hours=2),
    tags=["lakecep", "pipeline"],
    doc_md=DOC_MD,
    default_args={
        "owner": "lakecep",
        "retries": 1,
        "retry_delay": timedelta(seconds=30),
        "execution_timeout": timedelta(hours=1),
    },
)
def lakecep_pipeline() -> None:
    @task(task_id="bronze", inlets=[LANDING_EVENTS], outlets=[BRONZE_EVENTS])
    def bronze(run_id: str | None = None) -> None:
        """Landing JSON lines -> Delta bronze (every line kept, with its parse status)."""
        run_lakecep_job("bronze", run_id or "manual")

    @task(task_id="silver", inlets=[BRONZE_EVENTS], outlets=[SILVER_EVENTS])
    def silver(run_id: str | None = None) -> None:
        """Bronze -> silver events, duplicates and quarantine (with reasons)."""
        run_lakecep_job("silver", run_id or "manual")

    @task(task_id="optimize", inlets=[SILVER_EVENTS])
    def optimize(run_id: str | None = None) -> None:
        """Cluster silver by (object_id, event_time) when enough new files piled up."""
        run_lakecep_job("optimize", run_id or "manual")

    @task(task_id="gold", inlets=[SILVER_EVENTS], outlets=[GOLD_COMPLEX_EVENTS])
    def gold(run_id: str | None = None) -> None:
        """Silver -> gold complex events (MATCH_RECOGNIZE patterns from cep_core)."""
        run_lakecep_job("gold", run_id or "manual")

    @task(
        task_id="quality",
        inlets=[SILVER_EVENTS, GOLD_COMPLEX_EVENTS],
        outlets=[QUALITY_RESULTS],
    )
    def quality(run_id: str | None = None) -> None:
        """Great Expectations validations of bronze, silver and gold."""
        run_lakecep_job("quality", run_id or "manual")

    bronze() >> silver() >> optimize() >> gold() >> quality()


lakecep_pipeline()
