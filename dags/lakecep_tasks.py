"""Shared pieces of the lakecep DAGs: the lake's Assets, the DAG defaults and the job runner.

A plain module, not a DAG file (``dags/.airflowignore`` lists it, so the DAG processor does
not parse it for DAGs). The DAG files import it as ``from lakecep.dags.lakecep_tasks import
...``: the ``dags/`` folder is installed as the package ``lakecep.dags``, so the import works
wherever Airflow parses the DAG files from (no ``sys.path`` set-up). Like the DAG files it
imports nothing heavy (no pyspark, pandas, great_expectations, cep_core, lakecep.jobs): a task
runs each job in a child process. See docs/airflow.md.

Nothing here depends on the repository: the jobs run with ``$LAKECEP_PYTHON_BIN`` (else the
interpreter running Airflow, which has the ``lakecep`` wheel installed) in ``$LAKECEP_HOME``
(the lake's home), and the code finds its queries, expectations and Spark log configuration
as package data (``importlib.resources``).
"""

from __future__ import annotations

import json
import os
import sys
from collections import deque
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from airflow.sdk import Asset

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
    """Interpreter that runs the jobs: ``$LAKECEP_PYTHON_BIN``, else the one running Airflow
    (``sys.executable``: the usual case, lakecep installed in Airflow's environment)."""
    return os.environ.get("LAKECEP_PYTHON_BIN") or sys.executable


def lakecep_home() -> Path:
    """The lake's home, ``$LAKECEP_HOME``: the jobs' working directory (created if missing).

    Required: without it each job would put its lake under whatever directory the Airflow
    worker happens to run in.
    """
    configured = os.environ.get("LAKECEP_HOME")
    if not configured:
        raise RuntimeError(
            "LAKECEP_HOME is not set in the Airflow worker's environment: set it to the "
            "lake's home (a folder, e.g. /data/lakecep) for the DAG processor and the "
            "workers (docs/airflow.md, 'Managed Airflow')")
    home = Path(configured).expanduser().resolve()
    home.mkdir(parents=True, exist_ok=True)
    return home


def _run_cli(args: list[str], label: str) -> tuple[int, list[str], list[str], list[str]]:
    """Run ``python -m lakecep.jobs.cli ARGS`` in ``$LAKECEP_HOME``, its output streamed
    into the task log; returns (exit code, command, stdout lines, last stderr lines)."""
    import subprocess
    import threading

    cmd = [lakecep_python(), "-m", "lakecep.jobs.cli", *args]
    print(f"lakecep: running {' '.join(cmd)}", flush=True)
    stdout: list[str] = []
    stderr_tail: deque[str] = deque(maxlen=ERROR_TAIL_LINES)

    def pump(stream, name: str, sink: list[str] | deque[str]) -> None:  # noqa: ANN001
        for raw in iter(stream.readline, ""):
            line = raw.rstrip("\n")
            print(f"[{label} {name}] {line}", flush=True)
            sink.append(line)
        stream.close()

    home = lakecep_home()
    proc = subprocess.Popen(
        cmd,
        cwd=home,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        errors="replace",
        bufsize=1,
        # the home made absolute: a relative $LAKECEP_HOME meant the worker's directory
        env={**os.environ, "LAKECEP_HOME": str(home), "PYTHONUNBUFFERED": "1"},
    )
    readers = [
        threading.Thread(target=pump, args=(proc.stdout, "stdout", stdout), daemon=True),
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
    return returncode, cmd, stdout, list(stderr_tail)


def _failed(label: str, returncode: int, cmd: list[str], stderr_tail: list[str]) -> RuntimeError:
    """The task's error for a lakecep command that failed: what ran, its exit code and the
    last lines of its stderr (what the Airflow UI shows first for a failed task)."""
    tail = "\n".join(stderr_tail) or "(no stderr output)"
    return RuntimeError(f"lakecep job {label!r} failed with exit code {returncode}\n"
                        f"command: {' '.join(cmd)}\n"
                        f"last {len(stderr_tail)} lines of stderr:\n{tail}")


def _json_document(lines: list[str]) -> Any:
    """The JSON document ``lakecep ... --json`` printed last (it starts on a line "{")."""
    starts = [n for n, line in enumerate(lines) if line == "{"]
    if not starts:
        return None
    try:
        return json.loads("\n".join(lines[starts[-1]:]))
    except ValueError:
        return None


def run_lakecep_job(job: str, run_id: str, query: str | None = None) -> dict[str, Any]:
    """Run ``lakecep run <job> --run-id <run_id> --json`` (gold: ``--query <query>`` runs
    one query) and stream its output into the task log; returns the run summary.

    stdout and stderr are read concurrently and forwarded line by line (prefixed with the
    stream name), so the Airflow task log shows the job's progress live. On a non-zero exit
    the task fails with an exception whose message holds the exit code, the command and the
    last lines of stderr: that is what the Airflow UI shows first for a failed task.

    The summary is the job's ``--json`` output: per job its table, rows in, rows out,
    quarantined, duplicates, seconds and the Delta versions it wrote (what the tasks put in
    their asset events, :func:`asset_extra`).

    The child inherits the task's environment (LAKECEP_HOME, LAKECEP_SPARK_MASTER, ...). It
    lives in the task-runner's process group, so when Airflow kills the task (timeout,
    "mark failed") the supervisor's ``killpg`` stops the job too.
    """
    args = ["run", job, "--run-id", run_id, "--json"]
    if query is not None:
        args += ["--query", query]
    label = job if query is None else f"{job} {query}"
    returncode, cmd, stdout, stderr_tail = _run_cli(args, label)
    if returncode == NO_RETRY_EXIT:
        from airflow.sdk.exceptions import AirflowFailException

        reason = next((line for line in reversed(stderr_tail) if " error: " in line),
                      stderr_tail[-1] if stderr_tail else "(no stderr output)")
        raise AirflowFailException(f"lakecep job {label!r} failed, and would again on the "
                                   f"same input (no retry): {reason.strip()}")
    if returncode != 0:
        raise _failed(label, returncode, cmd, stderr_tail)
    summary = _json_document(stdout)
    if not isinstance(summary, dict):
        raise RuntimeError(f"lakecep job {label!r} exited 0 but printed no JSON summary "
                           f"(command: {' '.join(cmd)})")
    print(f"lakecep: job {label!r} finished (exit 0)", flush=True)
    return summary


def asset_extra(summary: dict[str, Any]) -> dict[str, Any]:
    """The ``extra`` of the asset event a task emits for its job's output table: the run
    id, the query (gold per query), rows in / out / quarantined / duplicates, the seconds
    and, per table, the Delta versions written (``[]``: nothing new)."""
    (row,) = summary["jobs"]
    extra = {
        "run_id": summary.get("run_id"),
        "job": row["job"],
        "table": row["table"],
        "rows_in": row["rows_in"],
        "input_unit": row["in_unit"],
        "rows_out": row["rows_out"],
        "quarantined": row["quarantined"],
        "duplicates": row["duplicates"],
        "seconds": row["seconds"],
        "note": row.get("note", ""),
        "versions": row.get("versions", {}),
    }
    if summary.get("query"):
        extra["query"] = summary["query"]
    return extra


def publish(outlet_events: Any, asset: Asset, summary: dict[str, Any]) -> dict[str, Any]:
    """Attach :func:`asset_extra` of ``summary`` to the task's event for ``asset``."""
    extra = asset_extra(summary)
    outlet_events[asset].extra = extra
    print(f"lakecep: asset event {asset.uri} extra {json.dumps(extra, default=str)}", flush=True)
    return extra


def generate_landing(events: int, seed: int) -> dict[str, Any]:
    """``lakecep generate --events N --seed S --json``; returns the landing asset event's
    ``extra`` (lines and files written, the landing folder, the seed)."""
    args = ["generate", "--events", str(events), "--seed", str(seed), "--json"]
    returncode, cmd, stdout, stderr_tail = _run_cli(args, "generate")
    result = _json_document(stdout)
    if returncode != 0 or not isinstance(result, dict):
        raise _failed("generate", returncode, cmd, stderr_tail)
    return {"lines": result["lines"], "files": result["files"], "landing": result["landing"],
            "events": events, "seed": seed}


def list_queries() -> list[str]:
    """The ids of the queries gold runs, from ``lakecep validate --json`` (pure Python, no
    Spark: the queries folder of the settings the jobs see, checked as gold checks them).
    A bad query or source file fails the task at once (no retry), with each problem."""
    returncode, cmd, stdout, stderr_tail = _run_cli(["validate", "--json"], "validate")
    report = _json_document(stdout)
    if not isinstance(report, dict):
        raise _failed("validate", returncode, cmd, stderr_tail)
    if not report["ok"]:
        from airflow.sdk.exceptions import AirflowFailException

        problems = "; ".join(f"{p['file']}:{p['line']}:{p['column']}: {p['message']}"
                             for p in report["problems"])
        raise AirflowFailException(f"the queries are not valid (no retry): {problems}")
    ids = [q["id"] for q in report["queries"]]
    if not ids:
        from airflow.sdk.exceptions import AirflowFailException

        raise AirflowFailException("no queries to run: the queries folder "
                                   f"({', '.join(report['query_files']) or 'empty'}) holds none")
    return ids


def supervise_continuous(action: str = "supervise", stale_after: float = 300.0,
                         stop_timeout: float = 180.0) -> dict[str, Any]:
    """The ``lakecep_continuous`` DAG's task: ``lakecep supervise --json`` (``action`` =
    ``supervise``; ``start``: also after a stop on request) or ``lakecep stop --json``
    (``stop``). The app it starts is detached (its own session): it outlives the task and
    is not killed with the task's process group. Returns what was done; fails when the
    command fails, the app it restarted had failed with an error, or a crash loop is
    backing off (the app is down until the next restart)."""
    if action == "stop":
        args = ["stop", "--timeout", str(stop_timeout), "--json"]
    elif action in ("supervise", "start"):
        args = ["supervise", "--stale-after", str(stale_after), "--json"]
        args += ["--start"] if action == "start" else []
    else:
        raise ValueError(f"action {action!r}: use supervise, start or stop")
    returncode, cmd, stdout, stderr_tail = _run_cli(args, action)
    done = _json_document(stdout)
    if not isinstance(done, dict):
        raise _failed(action, returncode, cmd, stderr_tail)
    print(f"lakecep: continuous app: {json.dumps(done, default=str)}", flush=True)
    if done.get("backing_off"):
        raise RuntimeError(f"the continuous app is down, {done['reason']}: see "
                           "$LAKECEP_HOME/run/continuous.log")
    if done.get("previous_error"):
        raise RuntimeError(f"the continuous app had failed ({done['previous_error']}); "
                           f"restarted as pid {done['pid']}: see "
                           "$LAKECEP_HOME/run/continuous.log")
    if returncode != 0:
        raise _failed(action, returncode, cmd, stderr_tail)
    return done
