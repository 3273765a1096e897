"""Shared fixtures.

- ``spark``: the test session's only SparkSession (lake under a temp ``LAKECEP_HOME``);
- ``airflow_env``: an isolated Airflow home (SQLite) migrated once per session; every
  Airflow CLI call made by the tests uses it, never the developer's ``.lakecep/airflow``;
- ``pipeline_run``: one real ``airflow dags test lakecep_pipeline`` over generated data,
  shared by the DAG and end-to-end tests.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from lakecep_testing import clean_env, lakecep_python, run_airflow

REPO = Path(__file__).resolve().parent.parent
DAGS = REPO / "dags"

#: The slowest files, slowest first (--durations of a CI run). infra/test.sh runs the suite
#: on two workers (pytest-xdist), each taking whole files in collection order (``--dist
#: loadfile --no-loadscope-reorder``); a worker takes its next file as soon as it has at most
#: two tests left, so a one-test file of minutes holds the file after it too. Starting the
#: long files first (longest processing time first) keeps one of them from ending the run
#: alone on one worker while the other is idle.
SLOWEST_FIRST = [
    "e2e/test_pipeline_e2e.py",  # with the other PIPELINE_RUN_FILES: one unit of work
    "e2e/test_continuous_e2e.py",  # one test: the app under its DAG, ~15 min under load
    "integration/test_gold.py",
    "integration/test_hot_reload.py",
    "integration/test_priorities.py",
    "integration/test_maintain.py",
    "integration/test_restart.py",
    "test_wheel.py",
    "integration/test_incremental_gold.py",
    "integration/test_alert_delivery.py",
    "integration/test_chained_rules.py",
    "integration/test_partial_matches.py",
    "integration/test_window_gold.py",
    "integration/test_tuning_loop.py",
    "integration/test_flights_example.py",
    "integration/test_stock_example.py",
    "integration/test_quality.py",
    "integration/test_object_store.py",
    "integration/test_operators_silver.py",
    "integration/test_cluster.py",
    "integration/test_uncertain_gold.py",
    "integration/test_acquisition_gold.py",
    "integration/test_connect_server.py",
    "e2e/test_quarantine_gate_dag.py",
    "integration/test_cards_example.py",
    "integration/test_kafka_source.py",
    "unit/engine/test_second_implementation.py",
    "integration/test_spark_api.py",
    "integration/test_bronze_silver.py",
    "integration/test_run_summary.py",
    "test_repository_rules.py",
]

#: Files that use ``pipeline_run`` (one ``airflow dags test``, the slowest fixture): one
#: worker runs them all, so that the session fixture is built once.
PIPELINE_RUN_FILES = sorted(str(p.relative_to(REPO)) for p in (REPO / "tests").rglob("test_*.py")
                            if "pipeline_run" in p.read_text())


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Run the files of :data:`SLOWEST_FIRST` first, in that order (the others keep theirs)."""
    rank = {REPO / "tests" / name: i for i, name in enumerate(SLOWEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path, len(rank)))


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object | None:
    """``--dist loadfile``, with the :data:`PIPELINE_RUN_FILES` as one unit of work."""
    if config.getoption("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class Scheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            scope = super()._split_scope(nodeid)
            return "pipeline_run" if scope in PIPELINE_RUN_FILES else scope

    return Scheduling(config, log)


@pytest.fixture(scope="session")
def lake_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A private LAKECEP_HOME for the whole test session."""
    home = tmp_path_factory.mktemp("lakecep_home")
    os.environ["LAKECEP_HOME"] = str(home)
    return home


@pytest.fixture(scope="session")
def settings(lake_home: Path):  # noqa: ANN201 - lakecep.config.Settings
    from lakecep.config import load_settings

    return load_settings()


@pytest.fixture(scope="session")
def spark(settings) -> Iterator[object]:  # noqa: ANN001
    """The test session's only SparkSession (local[2], Delta enabled). It lives for the
    whole run, so it gets the full JIT (C2): measured ~17 % faster than the quick-start
    C1-only JVM on test_gold, whose later batches run twice as fast once compiled."""
    import dataclasses

    from lakecep.jobs.spark import get_spark

    # object_store: the S3A jars are on the class path from the start, so that
    # tests/integration/test_object_store.py can reuse this session (docs/object-stores.md)
    # The web UI is off: nothing reads it, and its listener records every job and task of
    # the thousands of small jobs the tests run.
    session = get_spark("lakecep-tests", dataclasses.replace(settings, spark_quick_start=False),
                        extra_conf={"spark.ui.enabled": "false"}, object_store=True)
    yield session
    session.stop()


# --- Airflow ---------------------------------------------------------------------------



@pytest.fixture(scope="session")
def base_env() -> dict[str, str]:
    """The caller's environment minus AIRFLOW*/LAKECEP_* (tests add their own)."""
    return clean_env()


@pytest.fixture(scope="session")
def airflow_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Environment of an isolated, migrated Airflow home (SQLite, LocalExecutor, repo dags/)."""
    home = tmp_path_factory.mktemp("airflow_home")
    env = clean_env()
    env.update(
        {
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home}/airflow.db",
            "AIRFLOW__LOGGING__BASE_LOG_FOLDER": str(home / "logs"),
            "AIRFLOW__CORE__DAGBAG_IMPORT_TIMEOUT": "120",
            "LAKECEP_PYTHON_BIN": lakecep_python(),
        }
    )
    started = time.monotonic()
    result = run_airflow(env, "db", "migrate", timeout=300)
    assert result.returncode == 0, (
        f"airflow db migrate failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    )
    print(f"\nairflow db migrate took {time.monotonic() - started:.1f}s ({home})")
    return env


@pytest.fixture(scope="session")
def pipeline_run(airflow_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> dict:
    """Generate 2,000 events and run ``airflow dags test lakecep_pipeline`` once."""
    lake_home = tmp_path_factory.mktemp("dags_test_lakecep_home")
    env = {**airflow_env, "LAKECEP_HOME": str(lake_home)}
    python = env["LAKECEP_PYTHON_BIN"]
    generate = subprocess.run(
        [python, "-m", "lakecep.jobs.cli", "generate", "--events", "2000", "--seed", "7"],
        env=env, cwd=REPO, capture_output=True, text=True, timeout=300,
    )
    assert generate.returncode == 0, f"lakecep generate failed:\n{generate.stderr[-3000:]}"
    started = time.monotonic()
    result = run_airflow(env, "dags", "test", "lakecep_pipeline", "2026-01-01T00:00:00+00:00",
                         timeout=1800)
    elapsed = time.monotonic() - started
    print(f"\nairflow dags test lakecep_pipeline took {elapsed:.1f}s")
    return {"env": env, "lake_home": lake_home, "result": result, "seconds": elapsed}
