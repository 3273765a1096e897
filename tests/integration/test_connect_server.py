"""``lakecep serve`` and ``lakecep sql`` / ``lakecep status`` over it: the real commands as
subprocesses.

One server start (the expensive part) for the whole test: start, refuse a second one,
answer a MATCH_RECOGNIZE query through Spark Connect (no per-command JVM), see a write made
after the start and a table created after it, answer a real JDBC client (Spark's
``beeline``, Hive JDBC driver) on the same catalog, stop by process group, clean state.
"""

from __future__ import annotations

import json
import socket
import subprocess
import time
from pathlib import Path

import pyspark
import pytest
from lakecep_testing import clean_env, lakecep_python

from lakecep.config import load_settings
from lakecep.jobs import connect

pytestmark = [pytest.mark.spark, pytest.mark.slow]

STATEMENT = ("SELECT object_id, last_seq FROM silver.events MATCH_RECOGNIZE ("
             "PARTITION BY object_id ORDER BY seq MEASURES C.seq AS last_seq "
             "PATTERN (A B C) DEFINE A AS source_id = 'A', B AS source_id = 'B', "
             "C AS source_id = 'C') ORDER BY object_id")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_serve_then_sql_uses_the_server(spark, tmp_path: Path) -> None:  # noqa: ANN001
    local = load_settings({"LAKECEP_HOME": str(tmp_path)})
    reads = [(o, s, n, {"antenna": str(n)}) for o, s, n in
             [("t1", "A", 1), ("t1", "B", 2), ("t1", "C", 3), ("t2", "A", 1), ("t2", "C", 2)]]
    schema = "object_id string, source_id string, seq bigint, attributes map<string,string>"
    events = str(local.table_path("silver.events"))
    spark.createDataFrame(reads, schema).write.format("delta").save(events)
    env = {**clean_env(), "LAKECEP_HOME": str(tmp_path)}
    cli = [lakecep_python(), "-m", "lakecep.jobs.cli"]

    def lakecep(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*cli, *args], env=env, capture_output=True, text=True,
                              timeout=600)

    port, jdbc_port = _free_port(), _free_port()
    started = lakecep("serve", "--port", str(port), "--jdbc-port", str(jdbc_port))
    state_file = tmp_path / "connect" / "server.json"
    pid = json.loads(state_file.read_text())["pid"] if state_file.exists() else None
    try:
        assert started.returncode == 0, started.stderr[-3000:]
        jdbc_url = f"jdbc:hive2://127.0.0.1:{jdbc_port}/default"
        assert started.stdout.splitlines() == [f"sc://127.0.0.1:{port}", jdbc_url]
        state = json.loads(state_file.read_text())
        assert state["port"] == port and state["home"] == str(tmp_path.resolve())
        assert state["jdbc_port"] == jdbc_port
        assert state["registered"] == ["silver.events"]
        assert connect.alive(pid)

        again = lakecep("serve", "--port", str(_free_port()))
        assert again.returncode == 0 and "already runs" in again.stderr
        assert again.stdout.splitlines() == [f"sc://127.0.0.1:{port}", jdbc_url]  # the running one
        assert json.loads(state_file.read_text())["pid"] == pid

        began = time.monotonic()
        answer = lakecep("sql", "--format", "json", STATEMENT)
        seconds = time.monotonic() - began
        assert answer.returncode == 0, answer.stderr[-3000:]
        assert f"Spark Connect server sc://127.0.0.1:{port} (pid {pid})" in answer.stderr
        assert "new Spark session" not in answer.stderr
        assert [json.loads(line) for line in answer.stdout.splitlines()] == [
            {"object_id": "t1", "last_seq": 3}]

        # written after the server started: a new commit and a new table are both seen
        spark.createDataFrame([("t2", "B", 3, {"antenna": "3"}), ("t2", "C", 4, {})], schema) \
            .write.format("delta").mode("append").save(events)
        spark.createDataFrame([("t9", "x")], "object_id string, reason string") \
            .write.format("delta").save(str(local.table_path("silver.quarantine")))
        later = lakecep("sql", "--format", "csv",
                        "SELECT (SELECT count(*) FROM silver.events) AS n, "
                        "(SELECT count(*) FROM silver.quarantine) AS q, "
                        "(SELECT sum(antenna) FROM silver.events_typed) AS antennas")
        assert later.returncode == 0, later.stderr[-3000:]
        assert later.stdout.splitlines() == ["n,q,antennas", "7,1,12"]  # typed: a sum
        state = json.loads(state_file.read_text())
        assert state["registered"] == ["silver.events", "silver.quarantine"]
        assert state["views"] == ["silver.events_typed"]
        print(f"\nlakecep sql over the Connect server: {seconds:.1f}s")

        # `lakecep status` counts the tables through the server too (no JVM of its own)
        counted = lakecep("status", "--json")
        assert counted.returncode == 0, counted.stderr[-3000:]
        assert f"lakecep status: Spark Connect server sc://127.0.0.1:{port}" in counted.stderr
        counts = json.loads(counted.stdout)["counts"]
        assert counts["silver.events"] == 7 and counts["silver.quarantine"] == 1, counts
        assert counts["bronze.events"] == 0  # (no such table: counted 0, not an error)

        # a JDBC client (beeline: Hive's JDBC driver, shipped with pyspark) sees the same
        # tables and typed views; a bad statement is an error, not a silent empty answer
        beeline = Path(pyspark.__file__).parent / "bin" / "beeline"
        jdbc = subprocess.run(
            [str(beeline), "-u", jdbc_url, "--silent=true", "--outputformat=csv2", "-e",
             "SELECT count(*) AS n, sum(antenna) AS antennas FROM silver.events_typed;"],
            env=env, capture_output=True, text=True, timeout=300)
        assert jdbc.returncode == 0, jdbc.stderr[-3000:]
        assert [line for line in jdbc.stdout.splitlines() if "jdbc:hive2" not in line] == [
            "n,antennas", "7,12"]
        bad = subprocess.run([str(beeline), "-u", jdbc_url, "--silent=true", "-e",
                              "SELECT * FROM silver.no_such_table"], env=env,
                             capture_output=True, text=True, timeout=300)
        assert bad.returncode != 0 and "no_such_table" in bad.stderr

        status = lakecep("serve", "--status")
        assert status.returncode == 0 and f"pid {pid}" in status.stdout
        assert f"JDBC {jdbc_url}" in status.stdout
    finally:
        stopped = lakecep("serve", "--stop")
    assert stopped.returncode == 0, stopped.stderr[-3000:]
    assert f"stopped sc://127.0.0.1:{port} (pid {pid}" in stopped.stdout
    assert not state_file.exists()
    assert not connect.alive(pid) and not connect._group_alive(pid)
    gone = lakecep("serve", "--status")
    assert gone.returncode == 1 and "no Connect server running" in gone.stdout
