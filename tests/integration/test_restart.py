"""Kill a job mid-run (SIGKILL, no clean shutdown), restart it, and check that nothing was
lost or written twice: the crash-recovery guarantee of every job."""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lakecep.generate import generate
from lakecep.jobs.status import lake_status
from lakecep.jobs.tables import LakeTable

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


def run_job(job: str, env: dict[str, str], *, kill_after_commits: int | None = None,
            table: Path | None = None) -> bool:
    """Run ``lakecep run <job>``; with ``kill_after_commits``, SIGKILL it once ``table`` has
    that many Delta commits. Returns True if the job was killed before it finished."""
    proc = subprocess.Popen([sys.executable, "-m", "lakecep.jobs.cli", "run", job], cwd=REPO,
                            env=env, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if kill_after_commits is None:
        _, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, _why(err)
        return False
    assert table is not None
    deadline = time.monotonic() + 600
    while proc.poll() is None and time.monotonic() < deadline:
        if commits(table) >= kill_after_commits:
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
    local = dataclasses.replace(settings, home=tmp_path, max_files_per_trigger=1)
    summary = generate(local.landing, local.truth_dir, events=500, seed=11, lines_per_file=250)
    assert summary.counts["files"] == 2
    env = {**os.environ, "LAKECEP_HOME": str(tmp_path), "LAKECEP_MAX_FILES_PER_TRIGGER": "1"}

    killed = {}
    for job, table in (("bronze", "bronze.events"), ("silver", "silver.events"),
                       ("gold", "gold.complex_events")):
        path = local.table_path(table)
        # Commit 0 creates the table; kill after the first data commit (two for silver:
        # its three tables are written in turn, so the kill lands between batches).
        killed[job] = run_job(job, env, kill_after_commits=2, table=path)
        run_job(job, env)

    assert any(killed.values()), "no job was killed mid-run; the test proved nothing"
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
