"""Landing and lake on an object store, end to end: a local S3-compatible server (moto's
server mode, started here on 127.0.0.1 and stopped by its PID), the generated RFID demo
landed under ``s3a://``, bronze -> silver -> gold with the lake under ``s3a://``, gold equal
to the generator's ground truth and every reconciliation check of ``lakecep status`` exact.

The S3A settings reach the test session the way a user gives them: as ``spark.hadoop.*``
keys of ``spark_conf`` (``lakecep.jobs.spark.get_spark`` applies them to a session that is
already running, so the shared session is reused; tests/conftest.py starts it with the
S3A jars on its class path)."""

from __future__ import annotations

import dataclasses
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from lakecep.config import Uri
from lakecep.generate import generate
from lakecep.jobs import bronze, gold, silver
from lakecep.jobs.run_summary import rows_written, table_version
from lakecep.jobs.spark import get_spark
from lakecep.jobs.status import count_landed, lake_status
from lakecep.jobs.tables import LakeTable

pytestmark = pytest.mark.spark
BUCKET = "lakecep-test"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def s3_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A moto S3 server on 127.0.0.1 (its own process, stopped by PID at the end)."""
    port = _free_port()
    log = tmp_path_factory.mktemp("moto") / "server.log"
    with log.open("w") as out:
        server = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1",
                                   "-p", str(port)], stdout=out, stderr=subprocess.STDOUT)
    endpoint = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(endpoint, timeout=2).close()
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"moto server did not start:\n{log.read_text()[-2000:]}")
                time.sleep(0.2)
        _request("PUT", f"{endpoint}/{BUCKET}")
        yield endpoint
    finally:
        server.terminate()
        try:
            server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def _request(method: str, url: str, data: bytes | None = None) -> bytes:
    """One plain S3 REST call (moto's server takes unsigned requests). The content type
    is given: urllib's default (a form) would make the server parse the body away."""
    request = urllib.request.Request(url, data=data, method=method,
                                     headers={"Content-Type": "application/octet-stream"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return response.read()


def s3_settings(settings, home: Path, prefix: str, endpoint: str):  # noqa: ANN001, ANN201
    """Settings whose landing and lake are under ``prefix`` of the test bucket, S3A
    configured through ``spark_conf`` (as a settings file's ``[spark]`` table gives it)."""
    return dataclasses.replace(
        settings, home=home,
        landing_dir=f"s3a://{BUCKET}/{prefix}/landing/events",
        lake_dir=f"s3a://{BUCKET}/{prefix}/lake",
        spark_conf={
            "spark.hadoop.fs.s3a.endpoint": endpoint,
            "spark.hadoop.fs.s3a.endpoint.region": "us-east-1",
            "spark.hadoop.fs.s3a.path.style.access": "true",
            "spark.hadoop.fs.s3a.connection.ssl.enabled": "false",
            "spark.hadoop.fs.s3a.access.key": "lakecep",
            "spark.hadoop.fs.s3a.secret.key": "lakecep-secret",
        })


def test_rfid_demo_on_s3a_end_to_end(spark, settings, s3_endpoint: str,  # noqa: ANN001
                                     tmp_path: Path) -> None:
    prefix = tmp_path.name
    cfg = s3_settings(settings, tmp_path / "home", prefix, s3_endpoint)
    assert isinstance(cfg.landing, Uri) and isinstance(cfg.lake, Uri)
    session = get_spark("lakecep-tests", cfg)  # the shared session, S3A settings applied
    assert session is spark
    assert spark.conf.get("fs.s3a.endpoint") == s3_endpoint

    # The generator writes local files (its truth stays local, under home); the files are
    # then put on the object store, where bronze reads them.
    local_landing = tmp_path / "generated"
    summary = generate(local_landing, cfg.truth_dir, events=120, seed=14, lines_per_file=60)
    files = sorted(p for p in local_landing.iterdir() if p.is_file())
    assert len(files) >= 2
    for path in files:
        _request("PUT", f"{s3_endpoint}/{BUCKET}/{prefix}/landing/events/{path.name}",
                 path.read_bytes())
    listing = _request("GET", f"{s3_endpoint}/{BUCKET}?list-type=2&prefix="
                       f"{prefix}/landing/events/").decode()
    assert listing.count("<Key>") == len(files)
    assert count_landed(cfg, spark) == summary.counts["lines_written"]

    for job in (bronze, silver, gold):
        job.run(spark, cfg)

    # Nothing of the lake is on the local disk: the tables are on the object store.
    assert not (cfg.home / "lake").exists()
    keys = _request("GET", f"{s3_endpoint}/{BUCKET}?list-type=2&prefix="
                    f"{prefix}/lake/silver/events/_delta_log/").decode()
    assert "00000000000000000000.json" in keys

    status = lake_status(spark, cfg)
    names = [c.name for c in status.checks]
    assert "landed = bronze" in names
    assert any(n.startswith("gold ") and n.endswith("= ground truth") for n in names)
    assert status.ok, str(status)  # `lakecep status --strict` would exit 0
    assert status.counts["landing (lines)"] == summary.counts["lines_written"]
    assert status.counts["gold.complex_events"] > 0

    # The run summary reads the commit metrics of a lake on S3 through Delta's history.
    silver_events = cfg.table_path("silver.events")
    assert isinstance(silver_events, Uri)
    assert table_version(silver_events) == LakeTable(spark, cfg, "silver.events").version()
    assert rows_written(silver_events, None) == status.counts["silver.events"]

    # A second run over the same landing adds nothing (checkpoints stay local, under home).
    for job in (bronze, silver, gold):
        job.run(spark, cfg)
    again = lake_status(spark, cfg)
    assert again.ok and again.counts == status.counts
