"""Kill a job mid-run (SIGKILL, no clean shutdown), restart it, and check that nothing was
lost or written twice: the crash-recovery guarantee of every job. Gold runs an alerting
query with a firing snapshot and a real webhook, and is killed while the webhook holds its
first answer: after the restart every alert is in gold.alerts once, with its snapshot, and
the receiver has seen every alert id, duplicates only with the same key and body (at-least-
once delivery with an idempotency key, docs/alerts.md)."""

from __future__ import annotations

import dataclasses
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from webhook import Webhook

from lakecep.generate import generate
from lakecep.jobs.cli import job_runners
from lakecep.jobs.status import lake_status
from lakecep.jobs.tables import LakeTable
from lakecep.queries import QUERIES_DIR

pytestmark = [pytest.mark.spark, pytest.mark.slow]
REPO = Path(__file__).resolve().parents[2]


def commits(table_path: Path) -> int:
    log = table_path / "_delta_log"
    return len(list(log.glob("*.json"))) if log.exists() else 0


def _why(err: str) -> str:
    """A failed job's stderr for the report: the exception lines (Python and Java, which a
    plain tail cuts off under a long stack), then the tail."""
    causes = [line for line in err.splitlines()
              if any(w in line for w in ("Error", "Exception", "Caused by", 'File "'))]
    return "\n".join(causes[:60]) + "\n...\n" + err[-1500:]


def run_and_kill(job: str, env: dict[str, str], kill_when: Callable[[], bool]) -> bool:
    """Run ``lakecep run <job>`` and SIGKILL it (no clean shutdown) as soon as ``kill_when``
    turns true. Returns True if the job was killed before it finished."""
    proc = subprocess.Popen([sys.executable, "-m", "lakecep.jobs.cli", "run", job], cwd=REPO,
                            env=env, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 600
    while proc.poll() is None and time.monotonic() < deadline:
        if kill_when():
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            return True
        time.sleep(0.05)
    _, err = proc.communicate()
    assert proc.returncode == 0, _why(err)
    return False


def test_killed_jobs_restart_without_loss_or_duplicates(spark, settings, tmp_path: Path) -> None:  # noqa: ANN001
    # Two files, one per micro-batch: each job is killed after its first batch and its
    # restart must do exactly the second (a kill between batches is what is tested, and
    # every further batch would only repeat it at ~10-25 s each).
    queries = tmp_path / "queries"
    queries.mkdir()
    shutil.copy(QUERIES_DIR / "rfid_transit.toml", queries)
    (queries / "rfid_abc.toml").write_text((QUERIES_DIR / "rfid_abc.toml").read_text()
                                           + 'alert = true\n[snapshot]\nbefore = "1 hour"\n')
    hook = Webhook()
    hook.hold = threading.Event()
    local = dataclasses.replace(settings, home=tmp_path / "home", max_files_per_trigger=1,
                                queries_dir=str(queries))
    summary = generate(local.landing, local.truth_dir, events=500, seed=11, lines_per_file=250)
    assert summary.counts["files"] == 2
    env = {**os.environ, "LAKECEP_HOME": str(local.home), "LAKECEP_MAX_FILES_PER_TRIGGER": "1",
           "LAKECEP_QUERIES_DIR": str(queries), "LAKECEP_ALERT_WEBHOOK": hook.url,
           "LAKECEP_ALERT_TIMEOUT_SECONDS": "60"}

    # The restart runs the same job in this process (the shared Spark session, the same
    # settings as the environment above): what is tested is that it resumes from what the
    # killed process left (checkpoints, Delta commits, gold.alerts), not the CLI's start-up,
    # and a JVM start per restart cost ~30 s.
    restart = dataclasses.replace(local, alert_webhook=hook.url, alert_timeout_seconds=60.0)
    runners = job_runners()
    killed = {}
    try:
        for job, table in (("bronze", "bronze.events"), ("silver", "silver.events"),
                           ("gold", "gold.complex_events")):
            path = local.table_path(table)
            # Commit 0 creates the table; kill after the first data commit (two for
            # silver: its three tables are written in turn, so the kill lands between
            # batches). Gold: after its first commit, while the webhook holds the answer
            # to the first alert (between a request and the MERGE that records it).
            if job == "gold":
                killed[job] = run_and_kill(job, env, lambda path=path: bool(
                    hook.requests) and commits(path) >= 2)
                hook.hold.set()
            else:
                killed[job] = run_and_kill(job, env, lambda path=path: commits(path) >= 2)
            runners[job](spark, restart)
    finally:
        hook.close()

    assert killed["gold"], "gold was not killed while delivering; the test proved nothing"
    status = lake_status(spark, local)
    assert status.counts["landing (lines)"] == summary.counts["lines_written"]
    assert status.ok, str(status)

    bronze_rows = LakeTable(spark, local, "bronze.events").read()
    assert bronze_rows.select("source_file", "line_no").distinct().count() == bronze_rows.count()
    silver_rows = LakeTable(spark, local, "silver.events").read()
    assert silver_rows.select("event_id").distinct().count() == silver_rows.count()
    gold_rows = LakeTable(spark, local, "gold.complex_events").read()
    assert gold_rows.select("query_id", "match_id").distinct().count() == gold_rows.count()
    access = LakeTable(spark, local, "gold.archive_access").read()  # one record per batch
    assert access.select("query_id", "batch_id").distinct().count() == access.count() > 0
    _check_alerts(spark, local, gold_rows, hook)


def _check_alerts(spark, local, gold_rows, hook: Webhook) -> None:  # noqa: ANN001
    """No alert lost, none recorded twice, each with its snapshot; the receiver saw every
    alert, a repeat only with the same Idempotency-Key and body."""
    matches = {r.match_id for r in gold_rows.where("query_id = 'rfid_abc'").collect()}
    alerts = LakeTable(spark, local, "gold.alerts").read().collect()
    assert {a.alert_id for a in alerts} == matches and len(alerts) == len(matches) > 0
    assert all(a.delivered_time is not None for a in alerts)
    keys = [key for key, _ in hook.requests]
    assert set(keys) == matches
    assert all(body["alert_id"] == key for key, body in hook.requests)
    bodies: dict[str, list[dict]] = {}
    for key, body in hook.requests:
        bodies.setdefault(key, []).append(body)
    repeated = {key: seen for key, seen in bodies.items() if len(seen) > 1}
    assert hook.requests[0][0] in repeated     # the held one was sent again after the restart
    assert all(seen[1:] == seen[:-1] for seen in repeated.values())
    snapshots = LakeTable(spark, local, "gold.alert_snapshots").read()
    assert {r.alert_id for r in snapshots.select("alert_id").distinct().collect()} == matches
    assert snapshots.select("alert_id", "event_id").distinct().count() == snapshots.count()
    assert snapshots.where("role = 'match'").count() == 3 * len(matches)   # A, B, C each
