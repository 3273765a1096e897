"""The continuous app's pid file and heartbeat as a supervisor reads them (lakecep.continuous),
with real processes standing in for the app (no Spark): alive or dead, fresh or stale, a
pid reused by another program, a clean stop by SIGTERM, a stop on request that the
supervisor respects. The real app under the real DAG: tests/e2e/test_continuous_e2e.py."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from lakecep import continuous
from lakecep.config import load_settings

#: A stand-in for the app: its command line says lakecep; SIGTERM ends it cleanly.
APP = ("import signal, sys, time; signal.signal(signal.SIGTERM, lambda *a: sys.exit(0)); "
       "print('ready', flush=True); time.sleep(120)")


@pytest.fixture
def cfg(tmp_path: Path):  # noqa: ANN201
    return dataclasses.replace(load_settings(), home=tmp_path)


@pytest.fixture
def app():  # noqa: ANN201
    proc = subprocess.Popen([sys.executable, "-c", APP, "lakecep-stand-in"],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline() == "ready\n"  # handler set
    yield proc
    proc.kill()
    proc.wait()


def beat(cfg, pid: int, age: float, **extra: object) -> None:  # noqa: ANN001
    alive = (datetime.now(UTC) - timedelta(seconds=age)).isoformat()
    continuous.write_atomic(continuous.heartbeat_path(cfg),
                            {"pid": pid, "phase": "running", "alive_at": alive, **extra})
    continuous.pid_path(cfg).write_text(f"{pid}\n")


def test_fresh_heartbeat_of_a_live_app_is_healthy_and_left_alone(cfg, app) -> None:  # noqa: ANN001
    beat(cfg, app.pid, age=3)
    found = continuous.state(cfg, stale_after=60)
    assert (found.running, found.stale, found.healthy) == (True, False, True)
    assert 2 <= (found.age or 0) < 30
    done = continuous.supervise(cfg, sys.executable, stale_after=60)
    assert done["action"] == "none" and done["pid"] == app.pid
    assert app.poll() is None


def test_stale_heartbeat_and_dead_or_foreign_pid(cfg, app) -> None:  # noqa: ANN001
    beat(cfg, app.pid, age=400)
    found = continuous.state(cfg, stale_after=300)
    assert found.running and found.stale and not found.healthy
    app.kill()
    app.wait()
    assert not continuous.state(cfg).running
    assert continuous.already_running(cfg) is None
    # a live pid of another program (no "lakecep" in its command line) is not the app
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        beat(cfg, other.pid, age=1)
        assert not continuous.pid_alive(other.pid)
        assert not continuous.state(cfg).running
    finally:
        other.kill()
        other.wait()


def test_stop_sends_sigterm_and_records_the_request(cfg, app) -> None:  # noqa: ANN001
    beat(cfg, app.pid, age=1)
    done = continuous.stop(cfg, timeout=30)
    assert done == {"action": "stopped", "pid": app.pid}
    assert app.wait(timeout=5) == 0  # its SIGTERM handler ran: a clean exit
    # the app's last heartbeat (written as it stops) does not undo the request
    continuous.write_atomic(continuous.heartbeat_path(cfg), {"pid": app.pid,
                                                             "phase": "stopped"})
    assert continuous.stop_request_path(cfg).read_text().strip()
    # the supervisor does not start an app stopped on request
    started = time.monotonic()
    done = continuous.supervise(cfg, sys.executable)
    assert done["action"] == "none" and "stopped on request" in done["reason"]
    assert time.monotonic() - started < 5
    assert not continuous.log_path(cfg).exists()  # nothing was launched


def test_heartbeat_is_replaced_whole(cfg) -> None:  # noqa: ANN001
    path = continuous.heartbeat_path(cfg)
    for n in range(50):
        continuous.write_atomic(path, {"n": n, "pad": "x" * 10_000})
        assert json.loads(path.read_text())["n"] == n
    assert [p.name for p in path.parent.iterdir()] == ["continuous.json"]  # no temp files
    assert continuous.read_heartbeat(cfg) == {"n": 49, "pad": "x" * 10_000}


def test_a_crash_loop_backs_off_and_a_healthy_run_ends_it(cfg, tmp_path: Path, app) -> None:  # noqa: ANN001
    # an "app" that dies at once (as one with a broken query file would): each supervise
    # call finds it dead; restarts go out at once, then after 1 s, then after 2 s
    crash = tmp_path / "crash"
    crash.write_text("#!/bin/sh\nexit 3\n")
    crash.chmod(0o755)

    def supervise(**kw: object) -> dict:
        done = continuous.supervise(cfg, str(crash), backoff=1.0, **kw)  # type: ignore[arg-type]
        time.sleep(0.3)  # let the launched stand-in exit
        return done

    assert supervise()["action"] == "started"
    first = supervise()
    assert (first["action"], first["failures_in_a_row"]) == ("restarted", 1)
    assert "died" in first["reason"]
    held = supervise()  # the second failure in a row: wait 1 s after the last restart
    assert held["action"] == "none" and held["backing_off"] and held["pid"] is None
    assert held["failures_in_a_row"] == 2 and "next restart in" in held["reason"]
    again = supervise()  # the same dead process is not counted twice
    assert again["backing_off"] and again["failures_in_a_row"] == 2
    time.sleep(1.0)
    assert supervise()["action"] == "restarted"
    held = supervise()  # third failure: 2 s
    assert held["backing_off"] and held["failures_in_a_row"] == 3
    assert continuous.backoff_wait(3, 1.0) == 2.0
    assert continuous.backoff_wait(30, 300.0) == continuous.BACKOFF_CAP
    # an operator's `--start` restarts at once all the same
    assert supervise(start_stopped=True)["action"] == "restarted"
    assert json.loads(continuous.restarts_path(cfg).read_text())["failures"] == 3

    # a run that stays up HEALTHY_AFTER seconds ends the series
    started = (datetime.now(UTC) - timedelta(seconds=continuous.HEALTHY_AFTER + 5)).isoformat()
    beat(cfg, app.pid, age=1, started_at=started)
    done = continuous.supervise(cfg, str(crash), backoff=1.0)
    assert done["action"] == "none" and done["reason"] == "running"
    assert not continuous.restarts_path(cfg).exists()


def test_heartbeat_shows_each_streams_lag(cfg) -> None:  # noqa: ANN001
    """Per-class lag (docs/rules.md, "Priorities"): each gold class stream's last batch
    duration and backlog reach the heartbeat and the `lakecep status` line."""
    from lakecep.console import continuous_line
    from lakecep.jobs.continuous import Heartbeat

    beat = Heartbeat(cfg)
    beat.progress("gold_high", 4, 100, "2026-01-01T00:00:00Z", last_batch_ms=812,
                  backlog_files=0, backlog_bytes=0)
    beat.progress("gold_low", 2, 100, "2026-01-01T00:00:01Z", last_batch_ms=2_400,
                  backlog_files=7, backlog_bytes=None)
    doc = continuous.read_heartbeat(cfg)
    assert doc is not None
    assert doc["queries"]["gold_low"]["backlog_files"] == 7
    assert "backlog_bytes" not in doc["queries"]["gold_low"]   # not reported: left out
    line = continuous_line({"running": False, "heartbeat": doc})
    assert "gold_high: batch 4, 100 rows in 1 batches" in line
    assert "last batch 812 ms, backlog 0 files" in line
    assert "gold_low: batch 2" in line and "last batch 2,400 ms, backlog 7 files" in line


def test_run_and_backfill_refuse_while_the_app_runs(cfg, app, capsys) -> None:  # noqa: ANN001
    """One writer per checkpoint: with the app alive, `lakecep run gold` and `lakecep
    backfill` stop before Spark starts and say how to go on."""
    from lakecep.jobs.cli import main

    beat(cfg, app.pid, age=1)
    for args in (["run", "gold"], ["backfill", "rfid_abc"]):
        assert main(["--home", str(cfg.home), *args]) == 1, args
        err = capsys.readouterr().err
        assert f"pid {app.pid}" in err and "lakecep stop" in err, err
    assert main(["--home", str(cfg.home), "backfill", "no_such_rule"]) == 3
    assert "no query 'no_such_rule'" in capsys.readouterr().err
