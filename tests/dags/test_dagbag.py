"""The DAG folder parses cleanly with Airflow's real DagBag, with the expected wiring.

Parsing happens in a child process with an isolated AIRFLOW_HOME, so the test session's
interpreter never imports Airflow (it configures logging and settings globally at import
time) and the "no heavy imports at parse time" check sees a clean ``sys.modules``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DAGS = REPO / "dags"

pytestmark = pytest.mark.airflow

HEAVY_MODULES = ["pyspark", "pandas", "great_expectations", "cep_core", "jobs", "delta", "numpy"]

PARSE_SCRIPT = textwrap.dedent(
    """
    import json, sys, time
    started = time.monotonic()
    from airflow.dag_processing.dagbag import DagBag
    imported = time.monotonic()
    bag = DagBag(dag_folder=sys.argv[1])
    filled = time.monotonic()
    heavy = sorted(
        m for m in sys.modules if m.split(".")[0] in set(sys.argv[2].split(","))
    )
    dags = {}
    for dag_id, dag in bag.dags.items():
        dags[dag_id] = {
            "fileloc": dag.fileloc,
            "tags": sorted(dag.tags),
            "catchup": dag.catchup,
            "max_active_runs": dag.max_active_runs,
            "timetable_class": type(dag.timetable).__name__,
            "schedule": str(getattr(
                getattr(dag.timetable, "timetable", dag.timetable), "expression", dag.timetable
            )),
            "schedule_assets": sorted(
                a.uri for a in getattr(
                    getattr(dag.timetable, "asset_condition", None), "objects", []
                )
            ),
            "doc_md": dag.doc_md or "",
            "tasks": {
                t.task_id: {
                    "upstream": sorted(t.upstream_task_ids),
                    "downstream": sorted(t.downstream_task_ids),
                    "outlets": [a.uri for a in t.outlets],
                    "inlets": [a.uri for a in t.inlets],
                    "retries": t.retries,
                    "retry_delay": t.retry_delay.total_seconds(),
                }
                for t in dag.tasks
            },
        }
    print(json.dumps({
        "import_errors": {str(k): v for k, v in bag.import_errors.items()},
        "dags": dags,
        "heavy_modules": heavy,
        "airflow_import_s": imported - started,
        "dagbag_fill_s": filled - imported,
    }))
    """
)


@pytest.fixture(scope="module")
def parsed(tmp_path_factory: pytest.TempPathFactory, base_env: dict[str, str]) -> dict:
    home = tmp_path_factory.mktemp("dagbag_airflow_home")
    env = dict(base_env)
    env.update(
        {
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS),
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home}/airflow.db",
        }
    )
    result = subprocess.run(
        [sys.executable, "-c", PARSE_SCRIPT, str(DAGS), ",".join(HEAVY_MODULES)],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    last_line = result.stdout.strip().splitlines()[-1]
    data = json.loads(last_line)
    print(
        f"\nairflow import {data['airflow_import_s']:.2f}s, "
        f"DagBag fill {data['dagbag_fill_s']:.2f}s"
    )
    return data


def test_no_import_errors(parsed: dict) -> None:
    assert parsed["import_errors"] == {}
    assert set(parsed["dags"]) == {"lakecep_pipeline", "lakecep_demo"}


def test_pipeline_dag_present(parsed: dict) -> None:
    assert "lakecep_pipeline" in parsed["dags"]
    dag = parsed["dags"]["lakecep_pipeline"]
    assert Path(dag["fileloc"]).name == "lakecep_pipeline.py"
    assert dag["catchup"] is False
    assert dag["max_active_runs"] == 1
    assert "lakecep" in dag["tags"]
    assert dag["schedule"] == "*/15 * * * *"
    # ... and also runs when new landing data is announced as an asset event.
    assert dag["timetable_class"] == "AssetOrTimeSchedule"
    assert dag["schedule_assets"] == ["lakecep://landing/events"]
    assert "bronze" in dag["doc_md"] and "quality" in dag["doc_md"]


def test_pipeline_task_order(parsed: dict) -> None:
    tasks = parsed["dags"]["lakecep_pipeline"]["tasks"]
    assert set(tasks) == {"bronze", "silver", "optimize", "gold", "quality"}
    assert tasks["bronze"]["upstream"] == []
    assert tasks["silver"]["upstream"] == ["bronze"]
    assert tasks["optimize"]["upstream"] == ["silver"]
    assert tasks["gold"]["upstream"] == ["optimize"]
    assert tasks["quality"]["upstream"] == ["gold"]
    assert tasks["quality"]["downstream"] == []


def test_pipeline_assets(parsed: dict) -> None:
    tasks = parsed["dags"]["lakecep_pipeline"]["tasks"]
    assert tasks["bronze"]["outlets"] == ["lakecep://bronze/events"]
    assert tasks["silver"]["outlets"] == ["lakecep://silver/events"]
    assert tasks["gold"]["outlets"] == ["lakecep://gold/complex_events"]
    assert tasks["quality"]["outlets"] == ["lakecep://gold/quality_results"]
    assert tasks["silver"]["inlets"] == ["lakecep://bronze/events"]
    assert tasks["gold"]["inlets"] == ["lakecep://silver/events"]
    assert set(tasks["quality"]["inlets"]) == {
        "lakecep://silver/events",
        "lakecep://gold/complex_events",
    }


def test_demo_dag_feeds_the_pipeline(parsed: dict) -> None:
    demo = parsed["dags"]["lakecep_demo"]
    assert demo["timetable_class"] == "NullTimetable"  # manual only
    assert list(demo["tasks"]) == ["generate"]
    assert demo["tasks"]["generate"]["outlets"] == ["lakecep://landing/events"]
    assert parsed["dags"]["lakecep_pipeline"]["schedule_assets"] == ["lakecep://landing/events"]


def test_retries_are_short(parsed: dict) -> None:
    for task in parsed["dags"]["lakecep_pipeline"]["tasks"].values():
        assert task["retries"] == 1
        assert 0 < task["retry_delay"] <= 120


def test_parsing_imports_nothing_heavy(parsed: dict) -> None:
    assert parsed["heavy_modules"] == [], (
        "DAG files must not import these at parse time: " + ", ".join(parsed["heavy_modules"])
    )
    # A DAG file that imports Spark or pandas at the top takes seconds to parse.
    assert parsed["dagbag_fill_s"] < 5


def test_failed_job_reports_stderr_tail(tmp_path: Path, base_env: dict[str, str]) -> None:
    """A job that exits non-zero fails the task with its exit code and stderr in the message.

    Uses the real CLI with an unknown job name (a real non-zero exit, nothing faked).
    """
    script = textwrap.dedent(
        """
        import importlib.util, sys
        spec = importlib.util.spec_from_file_location("lakecep_pipeline_dag", sys.argv[1])
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        try:
            module.run_lakecep_job("no-such-job", "test-run")
        except RuntimeError as exc:
            print("RAISED:" + str(exc))
        else:
            print("NO ERROR")
        """
    )
    env = dict(base_env)
    env.update({"AIRFLOW_HOME": str(tmp_path / "airflow"), "LAKECEP_HOME": str(tmp_path / "home")})
    result = subprocess.run(
        [sys.executable, "-c", script, str(DAGS / "lakecep_pipeline.py")],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    out = result.stdout
    assert "RAISED:lakecep job 'no-such-job' failed with exit code" in out
    assert "run no-such-job --run-id test-run" in out
    assert "lines of stderr:" in out
    # The child's stderr was streamed into the (task) log line by line as well.
    assert "[no-such-job stderr]" in out
