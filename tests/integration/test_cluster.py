"""Scale-out path: the jobs' own Spark session code runs against a real standalone cluster.

``infra/cluster.sh`` starts a Spark master and two workers on 127.0.0.1 (ports shifted
from the defaults so a developer's cluster on 7077/8090 is not disturbed). A child
process then builds its session with ``jobs.spark.get_spark`` and
``LAKECEP_SPARK_MASTER=spark://...``, exactly like the jobs, writes and reads a Delta
table (executors need the Delta jars, shipped by Spark from the driver), runs a Python
function on the executors (they must use the venv's interpreter) and MATCH_RECOGNIZE through
``lakecep.spark.match_recognize``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
CLUSTER_SH = REPO / "infra" / "cluster.sh"
MASTER_PORT = 17077
MASTER_UI_PORT = 18090
WORKER_UI_PORT = 18091
WORKERS = 2
MASTER_URL = f"spark://127.0.0.1:{MASTER_PORT}"


def _python() -> str:
    configured = os.environ.get("LAKECEP_PYTHON_BIN")
    if configured:
        return configured
    venv_python = REPO / ".venv" / "bin" / "python"
    return str(venv_python) if venv_python.exists() else sys.executable


def _master_json() -> dict:
    url = f"http://127.0.0.1:{MASTER_UI_PORT}/json/"
    with urllib.request.urlopen(url, timeout=5) as response:  # noqa: S310 - loopback only
        return json.load(response)


@pytest.fixture(scope="module")
def cluster_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """Start the cluster (pid files and logs in a private LAKECEP_HOME), stop it afterwards."""
    home = tmp_path_factory.mktemp("cluster_home")
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAKECEP_")}
    env.update(
        {
            "LAKECEP_HOME": str(home),
            "LAKECEP_PYTHON_BIN": _python(),
            "LAKECEP_SPARK_MASTER_PORT": str(MASTER_PORT),
            "LAKECEP_SPARK_MASTER_UI_PORT": str(MASTER_UI_PORT),
            "LAKECEP_SPARK_WORKER_UI_PORT": str(WORKER_UI_PORT),
        }
    )
    started = time.monotonic()
    result = subprocess.run(
        ["bash", str(CLUSTER_SH), "start", "--workers", str(WORKERS)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    try:
        assert result.returncode == 0, f"cluster start failed:\n{result.stdout}\n{result.stderr}"
        print(f"\ncluster start took {time.monotonic() - started:.1f}s")
        yield env
    finally:
        stop = subprocess.run(
            ["bash", str(CLUSTER_SH), "stop"], env=env, capture_output=True, text=True, timeout=120
        )
        print(stop.stdout, stop.stderr)


def test_cluster_is_up_and_idempotent(cluster_env: dict[str, str]) -> None:
    state = _master_json()
    assert state["status"] == "ALIVE"
    assert state["aliveworkers"] == WORKERS
    # A second start finds everything running and returns at once.
    again = subprocess.run(
        ["bash", str(CLUSTER_SH), "start", "--workers", str(WORKERS)],
        env=cluster_env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert again.returncode == 0, again.stderr
    assert "master already running" in again.stdout
    status = subprocess.run(
        ["bash", str(CLUSTER_SH), "status"], env=cluster_env, capture_output=True, text=True
    )
    assert status.returncode == 0
    assert f"{WORKERS} worker(s) alive" in status.stdout


JOB = textwrap.dedent(
    """
    import json, sys, time
    from lakecep.jobs.spark import get_spark
    from lakecep.config import load_settings

    settings = load_settings()
    started = time.monotonic()
    spark = get_spark("lakecep-cluster-test", settings)
    sc = spark.sparkContext
    path = str(settings.lake / "cluster_test" / "numbers")
    df = spark.range(0, 10000, numPartitions=4).selectExpr("id", "id % 7 AS k")
    df.write.format("delta").mode("overwrite").save(path)
    back = spark.read.format("delta").load(path)
    count = back.count()
    groups = back.groupBy("k").count().count()
    # MATCH_RECOGNIZE on the executors (lakecep.spark): per k, ids step by 7, so every
    # partition of n rows holds n // 2 non-overlapping pairs A B.
    from lakecep.spark import match_recognize
    pairs = match_recognize(back, "MATCH_RECOGNIZE (PARTITION BY k ORDER BY id MEASURES "
                                  "B.id AS b PATTERN (A B) DEFINE B AS id = PREV(id) + 7)")
    mr_matches = pairs.count()
    executor_pythons = sorted(
        set(sc.parallelize(range(4), 4).map(lambda _: __import__("sys").executable).collect())
    )
    executors = sc._jsc.sc().getExecutorMemoryStatus().size() - 1  # minus the driver
    result = {
        "master": sc.master, "app_id": sc.applicationId, "count": count, "groups": groups,
        "executors": executors, "executor_pythons": executor_pythons,
        "mr_matches": mr_matches,
        "seconds": time.monotonic() - started,
    }
    spark.stop()
    print("RESULT " + json.dumps(result))
    """
)


def test_delta_job_runs_on_the_cluster(cluster_env: dict[str, str], tmp_path: Path) -> None:
    python = cluster_env["LAKECEP_PYTHON_BIN"]
    env = dict(cluster_env)
    env.update(
        {
            "LAKECEP_HOME": str(tmp_path / "lake_home"),
            "LAKECEP_SPARK_MASTER": MASTER_URL,
            "SPARK_LOCAL_IP": "127.0.0.1",
            "PYSPARK_PYTHON": python,
        }
    )
    started = time.monotonic()
    result = subprocess.run(
        [python, "-c", JOB], env=env, cwd=REPO, capture_output=True, text=True, timeout=900
    )
    elapsed = time.monotonic() - started
    assert result.returncode == 0, f"job failed:\n{result.stderr[-5000:]}"
    lines = [line for line in result.stdout.splitlines() if line.startswith("RESULT ")]
    assert lines, result.stdout[-3000:]
    out = json.loads(lines[-1][len("RESULT ") :])
    print(f"\ncluster job took {elapsed:.1f}s (session+work {out['seconds']:.1f}s): {out}")

    assert out["master"] == MASTER_URL
    assert out["count"] == 10000
    assert out["groups"] == 7
    assert out["mr_matches"] == 4 * (1429 // 2) + 3 * (1428 // 2)
    assert out["executors"] >= 1
    assert out["executor_pythons"] == [python]
    assert (tmp_path / "lake_home" / "lake" / "cluster_test" / "numbers" / "_delta_log").is_dir()

    # The master ran it as a standalone application, now finished.
    completed = {app["id"]: app for app in _master_json()["completedapps"]}
    assert out["app_id"] in completed
    assert completed[out["app_id"]]["name"] == "lakecep-cluster-test"
