"""The continuous app under its supervising DAG, for real: ``airflow dags test
lakecep_continuous`` starts ``lakecep run all --continuous`` (one Spark application, bronze,
silver and gold as concurrent streams, 2-second trigger) on half of a generated landing;
gold grows; a new tuned configuration is picked up by the running app between micro-batches;
the rest of the files land and the app is killed with SIGKILL (driver and JVM, whatever it
was doing); the next DAG run sees the dead process and restarts it; gold ends equal to the
generator's ground truth -- every current match once, no (query_id, match_id) twice --
and `lakecep status --strict` (reconciliation: landed = bronze = silver + duplicates +
quarantine) passes after a stop through the DAG (`action = stop`) (the command on the
tests' Spark session).

Small data (600 events in four files), one test; the app is killed by pid in a finally.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from lakecep_testing import REPO, cli_in_session, run_airflow

pytestmark = [pytest.mark.airflow, pytest.mark.slow]

DAG_ID = "lakecep_continuous"


def wait_for(what: str, check: Callable[[], bool], timeout: float, log: Path) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(1)
    tail = log.read_text()[-6000:] if log.exists() else "(no log)"
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}; app log:\n{tail}")


def gold_rows(home: Path):  # noqa: ANN201 - a pandas frame
    from lakecep.lake_sql import read_delta

    path = home / "lake" / "gold" / "complex_events"
    if not any((path / "_delta_log").glob("*.json")):  # (no first commit yet)
        return None
    return read_delta(path, ["query_id", "match_id", "superseded_version"]).to_pandas()


def current_counts(home: Path) -> dict[str, int]:
    rows = gold_rows(home)
    if rows is None:
        return {}
    current = rows[rows["superseded_version"].isna()]
    return {str(k): int(v) for k, v in current.groupby("query_id").size().items()}


def heartbeat(home: Path) -> dict:
    try:
        return json.loads((home / "run" / "continuous.json").read_text())
    except (OSError, ValueError):
        return {}


def launched_pid(home: Path) -> int:
    """The app's pid, from its pid file: the supervisor writes it at the launch, the app
    again at its start (the heartbeat's ``launched_pid`` is gone once the starting app
    writes its first heartbeat, which under load may come before the DAG run ends)."""
    return int((home / "run" / "continuous.pid").read_text())


def bronze_batches(home: Path) -> int:
    """Micro-batches bronze has planned (its checkpoint's offset files, written at the
    start of a batch, before it reads anything)."""
    offsets = home / "checkpoints" / "bronze_events" / "offsets"
    return sum(1 for p in offsets.glob("*") if p.name.isdigit()) if offsets.is_dir() else 0


def dag_run(env: dict, date: str, conf: dict | None = None) -> str:
    args = ["dags", "test", DAG_ID, date] + (["--conf", json.dumps(conf)] if conf else [])
    result = run_airflow(env, *args, timeout=900)
    log = result.stdout + result.stderr
    assert result.returncode == 0, log[-5000:]
    return log


def test_supervised_app_survives_a_kill_and_ends_equal_to_the_truth(
        airflow_env: dict, spark, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,  # noqa: ANN001
        capsys: pytest.CaptureFixture[str]) -> None:
    home = tmp_path / "lake"
    env = {**airflow_env, "LAKECEP_HOME": str(home), "LAKECEP_TRIGGER_INTERVAL": "2 seconds"}
    python = env["LAKECEP_PYTHON_BIN"]
    cli = [python, "-m", "lakecep.jobs.cli"]
    made = subprocess.run([*cli, "generate", "--events", "600", "--seed", "7",
                           "--lines-per-file", "150"], env=env, cwd=REPO,
                          capture_output=True, text=True, timeout=300)
    assert made.returncode == 0, made.stderr[-3000:]
    landing = home / "landing" / "events"
    held = tmp_path / "held"
    held.mkdir()
    files = sorted(landing.glob("events-*.jsonl"))
    assert len(files) == 4
    for f in files[2:]:
        f.rename(held / f.name)
    truth = json.loads((home / "landing" / "_truth" / "truth.json").read_text())
    expected = {q: len(truth[q]) for q in ("rfid_abc", "rfid_transit")}
    log = home / "run" / "continuous.log"
    pids: list[int] = []
    try:
        # 1. the DAG starts the app (detached: it outlives `airflow dags test`)
        out = dag_run(env, "2026-01-01T00:00:00+00:00")
        assert '"action": "started"' in out, out[-3000:]
        pids.append(launched_pid(home))
        wait_for("gold rows from the first two files",
                 lambda: sum(current_counts(home).values()) > 0, 900, log)
        first = current_counts(home)
        beat = heartbeat(home)
        assert beat["phase"] == "running" and beat["pid"] == pids[0]
        assert set(beat["queries"]) == {"bronze_events", "silver_events",
                                        "gold_complex_events"}
        assert beat["queries"]["silver_events"]["rows"] > 0

        # 2. a new tuned configuration is picked up by the running app (no restart)
        subprocess.run([python, "-c", (
            "from lakecep.config import load_settings; from lakecep import tuning; "
            "tuning.write(load_settings(), {'statistics_run': 'e2e', 'queries': {}, 'gold': "
            "{'max_files_per_trigger': 1, 'pools': {'q_rfid_abc': 3, 'q_rfid_transit': 1}}})"
        )], env=env, check=True, timeout=60)
        landing.joinpath(files[2].name).write_bytes((held / files[2].name).read_bytes())
        wait_for("tuned configuration v1 in the heartbeat",
                 lambda: heartbeat(home).get("tuned_version") == 1, 900, log)
        assert "tuned configuration v1 picked up between micro-batches" in log.read_text()
        assert "pools q_rfid_abc weight 3, q_rfid_transit weight 1" in log.read_text()
        assert heartbeat(home)["pid"] == pids[0]  # the same process
        wait_for("gold to grow with the third file",
                 lambda: sum(current_counts(home).values()) > sum(first.values()), 900, log)

        # 3. the last file lands and the driver is killed (SIGKILL, JVM included)
        planned = bronze_batches(home)
        landing.joinpath(files[3].name).write_bytes((held / files[3].name).read_bytes())
        # let bronze start on it (its batch planned: the kill may cut any stage after that)
        wait_for("bronze to start on the last file",
                 lambda: bronze_batches(home) > planned, 300, log)
        os.killpg(pids[0], signal.SIGKILL)
        wait_for("the killed app to be gone", lambda: not Path(f"/proc/{pids[0]}").exists()
                 or "Z" in Path(f"/proc/{pids[0]}/stat").read_text().split()[2], 60, log)

        # 4. the next DAG run restarts it; it catches up
        out = dag_run(env, "2026-01-01T00:05:00+00:00")
        assert '"action": "restarted"' in out and "died" in out, out[-3000:]
        pids.append(launched_pid(home))
        assert pids[1] != pids[0]
        wait_for(f"gold = truth {expected}", lambda: current_counts(home) == expected, 900, log)
        assert heartbeat(home)["pid"] == pids[1]

        # 5. stopped through the DAG: a clean stop, and the supervisor leaves it stopped
        out = dag_run(env, "2026-01-01T00:10:00+00:00", {"action": "stop"})
        assert '"action": "stopped"' in out, out[-3000:]
        assert heartbeat(home)["phase"] == "stopped"
        out = dag_run(env, "2026-01-01T00:15:00+00:00")
        assert '"action": "none"' in out and "stopped on request" in out, out[-3000:]
    finally:
        for pid in pids:
            try:
                os.killpg(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

    rows = gold_rows(home)
    assert rows is not None
    assert not rows.duplicated(["query_id", "match_id"]).any()
    # `lakecep status --strict --json` on this worker's Spark session (no third driver JVM)
    from lakecep.jobs import cli as lakecep_cli

    cli_in_session(spark, monkeypatch)
    monkeypatch.setenv("LAKECEP_HOME", str(home))
    capsys.readouterr()
    code = lakecep_cli.main(["status", "--strict", "--json"])
    out = capsys.readouterr()
    assert code == 0, out.out[-4000:] + out.err[-3000:]
    report = json.loads(out.out[out.out.index("{"):])
    assert report["ok"] and report["continuous"]["heartbeat"]["phase"] == "stopped"
    failed = [c for c in report["checks"] if not c["ok"]]
    assert failed == []
    assert any(c["name"] == "gold rfid_abc = ground truth" for c in report["checks"])
