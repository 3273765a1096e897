"""``lakecep serve``'s bookkeeping without Spark: the state file, stale servers, table
registration that costs no round trip when nothing changed, and the CLI's answers when no
server runs (the real server: tests/integration/test_connect_server.py)."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lakecep.config import load_settings
from lakecep.jobs import connect
from lakecep.jobs.cli import _names_a_table, main


def _settings(home: Path):  # noqa: ANN202 - Settings
    return load_settings({"LAKECEP_HOME": str(home)})


def _dead_pid() -> int:
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    return int(done.stdout)


def _state(lake: Path, **fields: object) -> Path:
    """Write ``lake``'s state file (default: a dead pid serving ``lake``)."""
    data = {"pid": _dead_pid(), "port": 15002, "started_at": "2026-01-01T00:00:00+00:00",
            "home": str(lake.resolve()), "log": str(lake / "connect" / "server.log"),
            "registered": [], **fields}
    path = lake / "connect" / "server.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    return path


def test_a_state_file_naming_a_dead_process_is_removed(tmp_path: Path) -> None:
    path = _state(tmp_path)
    assert connect.read_state(_settings(tmp_path)) is not None
    assert connect.running(_settings(tmp_path)) is None
    assert not path.exists()


def _wait_for_exec(pid: int, seconds: float = 30) -> None:
    """Wait until process ``pid`` runs its own program (Linux: its /proc command line names
    the marker argument); elsewhere there is nothing to wait for."""
    cmdline = Path(f"/proc/{pid}/cmdline")
    deadline = time.monotonic() + seconds
    while cmdline.exists() and b"lakecep.jobs.connect" not in cmdline.read_bytes():
        if time.monotonic() > deadline:
            return
        time.sleep(0.05)


def test_a_live_process_that_is_not_a_server_or_another_home_is_stale(tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    path = _state(tmp_path, pid=os.getpid())  # pytest: alive, but not lakecep.jobs.connect
    if sys.platform == "linux":  # the command line is checked there
        assert not connect.alive(os.getpid())
    assert connect.running(settings) is None and not path.exists()
    # a live server of another home (e.g. the state file came with a copied lake)
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)",
                              "lakecep.jobs.connect"])
    try:
        _wait_for_exec(other.pid)   # until exec, the child shows pytest's command line
        assert connect.alive(other.pid)
        path = _state(tmp_path, pid=other.pid, home="/somewhere/else")
        assert connect.stop(settings) is None and not path.exists()
        assert other.poll() is None  # not ours to stop
        _state(tmp_path, pid=other.pid, home="/somewhere/else")
        assert connect.running(settings) is None and not path.exists()
    finally:
        other.kill()
        other.wait()
    assert not connect.alive(other.pid)


def test_register_makes_no_round_trip_when_the_tables_did_not_change(tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    for name, commit in (("silver.events", "00000000000000000000.json"),
                         ("gold.complex_events", "00000000000000000000.json")):
        log = settings.table_path(name) / "_delta_log"
        log.mkdir(parents=True)
        (log / commit).write_text("{}")
    (settings.table_path("silver.quarantine") / "_delta_log").mkdir(parents=True)  # empty
    assert set(connect.lake_tables(settings)) == {"silver.events", "gold.complex_events"}
    registered = connect.Server(pid=1, port=1, started_at="", home=str(tmp_path), log="",
                                registered=("gold.complex_events", "silver.events"))

    class Recorder:
        def __init__(self) -> None:
            self.statements: list[str] = []

        def sql(self, text: str) -> None:
            self.statements.append(text)

    # tables registered, typed views not yet: only the views are made
    spark = Recorder()
    server = connect.register(settings, registered, spark)  # type: ignore[arg-type]
    assert server.registered == registered.registered
    assert server.views == ("silver.events_typed", "matches.rfid_abc", "matches.rfid_transit")
    assert not [s for s in spark.statements if "TABLE" in s]
    assert sum(s.startswith("CREATE OR REPLACE VIEW") for s in spark.statements) == 3
    # a session that fails on any use: register must not touch it
    assert connect.register(settings, server, spark=object()) is server  # type: ignore[arg-type]

    spark = Recorder()
    stale = dataclasses.replace(server, registered=("old.gone",))
    changed = connect.register(settings, stale, spark)  # type: ignore[arg-type]
    assert changed.registered == ("gold.complex_events", "silver.events")
    # the views go first (they may read a table that goes), then the gone table
    assert spark.statements[:4] == [*(f"DROP VIEW IF EXISTS {v}" for v in server.views),
                                    "DROP TABLE IF EXISTS old.gone"]
    assert ("CREATE TABLE silver.events USING delta LOCATION "
            f"'{settings.table_path('silver.events')}'") in spark.statements


def test_missing_table_errors_are_matched_to_registered_names() -> None:
    message = "[TABLE_OR_VIEW_NOT_FOUND] The table or view `silver`.`events` cannot be found."
    assert _names_a_table(message, ["silver.events"])
    assert not _names_a_table(message, ["gold.complex_events"])
    assert not _names_a_table("The table or view `_lakecep_mr_1` cannot be found", [])


def test_serve_status_and_stop_without_a_server(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    home = str(tmp_path)
    assert main(["--home", home, "serve", "--status"]) == 1
    assert "no Connect server running" in capsys.readouterr().out
    _state(tmp_path)
    assert main(["--home", home, "serve", "--stop", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["stopped"] is False
    assert not (tmp_path / "connect" / "server.json").exists()
    assert main(["--home", home, "serve", "--stop", "--status"]) == 2
    assert "do not go together" in capsys.readouterr().err


def test_serve_help_names_the_endpoint(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "--help"]) == 0
    out = capsys.readouterr().out
    assert "lakecep serve" in out and "--stop" in out and "sc://127.0.0.1:PORT" in out
