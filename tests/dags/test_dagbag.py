"""The DAG folder parses cleanly with Airflow's real DagBag, with the expected wiring.

Parsing happens in a child process with an isolated AIRFLOW_HOME, so the test session's
interpreter never imports Airflow (it configures logging and settings globally at import
time) and the "no heavy imports at parse time" check sees a clean ``sys.modules``.

The bag is a ``BundleDagBag`` over ``dags/`` as the DAG folder bundle, like the DAG
processor, the task runner and ``airflow dags test`` build it. The DAG files import their
shared module as ``lakecep.dags.lakecep_tasks`` (dags/ is installed as ``lakecep.dags``),
so they need nothing on ``sys.path``.
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

HEAVY_MODULES = [
    "pyspark", "pandas", "great_expectations", "cep_core", "lakecep.jobs", "delta", "numpy",
]

PARSE_SCRIPT = textwrap.dedent(
    """
    import json, os, sys, time
    from pathlib import Path
    started = time.monotonic()
    from airflow.dag_processing.dagbag import BundleDagBag
    imported = time.monotonic()
    bag = BundleDagBag(dag_folder=sys.argv[1], bundle_path=Path(sys.argv[1]),
                       bundle_name="dags-folder")
    filled = time.monotonic()
    heavy = sorted(
        m for m in sys.modules
        if any(m == h or m.startswith(h + ".") for h in sys.argv[2].split(","))
    )
    shared = sys.modules.get("lakecep.dags.lakecep_tasks")

    class Events(dict):
        # outlet_events as a task gets it: one event (with its .extra) per asset
        def __missing__(self, asset):
            self[asset] = type("Event", (), {"extra": None})()
            return self[asset]

    context = {}
    import airflow.sdk
    airflow.sdk.get_current_context = lambda: context

    def jobs_run_by(task):
        # Call a @task's function with the job runner replaced by a recorder that returns
        # a run summary as `lakecep run --json` prints it (only tasks of DAG files that use
        # the runner); the asset events' extra is what the task made of it.
        mapped = getattr(task, "partial_kwargs", None)
        callable_ = (mapped or {}).get("python_callable") or getattr(
            task, "python_callable", None)
        if callable_ is None or "run_lakecep_job" not in callable_.__code__.co_names:
            return None
        calls, events = [], Events()

        def record(job, run_id, query=None):
            calls.append([job, run_id] + ([query] if query else []))
            return {"job": job, "run_id": run_id, "query": query, "jobs": [
                {"job": job, "table": "t", "rows_in": 3, "in_unit": "rows", "rows_out": 2,
                 "quarantined": 1, "duplicates": None, "seconds": 0.5, "note": "",
                 "versions": {"t": [4]}}]}

        callable_.__globals__["run_lakecep_job"] = record
        kwargs = {"run_id": "scheduled__test"}
        if "outlet_events" in callable_.__code__.co_varnames:
            kwargs["outlet_events"] = events
        if "query" in callable_.__code__.co_varnames:
            kwargs["query"] = "q1"
        callable_(**kwargs)
        return {"calls": calls, "context": dict(context),
                "extra": {a.uri: e.extra for a, e in events.items()}}

    dags = {}
    for dag_id, dag in bag.dags.items():
        inner = getattr(dag.timetable, "timetable", dag.timetable)
        dags[dag_id] = {
            "fileloc": dag.fileloc,
            "tags": sorted(dag.tags),
            "catchup": dag.catchup,
            "max_active_runs": dag.max_active_runs,
            "start_date": dag.start_date.isoformat() if dag.start_date else None,
            "dagrun_timeout_s": (
                dag.dagrun_timeout.total_seconds() if dag.dagrun_timeout else None
            ),
            "timetable_class": type(dag.timetable).__name__,
            "inner_timetable_class": type(inner).__name__,
            "schedule": str(getattr(inner, "expression", dag.timetable)),
            "schedule_timezone": str(getattr(inner, "timezone", "")),
            "schedule_assets": sorted(
                a.uri for a in getattr(
                    getattr(dag.timetable, "asset_condition", None), "objects", []
                )
            ),
            "doc_md": dag.doc_md or "",
            "tasks": {
                t.task_id: {
                    "mapped": "MappedOperator" in type(t).__name__, "type": type(t).__name__,
                    "doc_md": t.doc_md or "",
                    "map_index_template": getattr(t, "map_index_template", None),
                    "max_active_tis_per_dagrun": getattr(t, "max_active_tis_per_dagrun", None),
                    "expand_input": sorted(
                        t._get_specified_expand_input().value
                        if hasattr(t, "_get_specified_expand_input") else {}),
                    "upstream": sorted(t.upstream_task_ids),
                    "downstream": sorted(t.downstream_task_ids),
                    "outlets": [a.uri for a in t.outlets],
                    "inlets": [a.uri for a in t.inlets],
                    "retries": t.retries,
                    "retry_delay": t.retry_delay.total_seconds(),
                    "owner": t.owner,
                    "execution_timeout_s": (
                        t.execution_timeout.total_seconds() if t.execution_timeout else None
                    ),
                    "runs_jobs": jobs_run_by(t),
                }
                for t in dag.tasks
            },
        }
    print(json.dumps({
        "import_errors": {str(k): v for k, v in bag.import_errors.items()},
        "parsed_files": sorted(os.path.basename(f) for f in bag.file_last_changed),
        "shared_module": getattr(shared, "__file__", None),
        "shared_names": sorted(vars(shared)) if shared else [],
        "shared_assets": sorted(
            v.uri for v in vars(shared).values() if type(v).__name__ == "Asset"
        ) if shared else [],
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
    assert set(parsed["dags"]) == {"lakecep_pipeline", "lakecep_demo", "lakecep_tuning",
                                   "lakecep_maintenance", "lakecep_continuous"}


def test_shared_module_is_imported_not_parsed(parsed: dict) -> None:
    """lakecep_tasks.py is a plain module: .airflowignore keeps it out of the DAG files."""
    assert parsed["parsed_files"] == [
        "lakecep_continuous.py",
        "lakecep_demo.py",
        "lakecep_maintenance.py",
        "lakecep_pipeline.py",
        "lakecep_tuning.py",
    ]
    # ... yet the DAG files did import it, from dags/ (the editable install maps lakecep.dags
    # to this folder).
    assert parsed["shared_module"] == str(DAGS / "lakecep_tasks.py")
    assert parsed["shared_assets"] == sorted(
        [
            "lakecep://landing/events",
            "lakecep://bronze/events",
            "lakecep://silver/events",
            "lakecep://gold/complex_events",
            "lakecep://gold/quality_results",
            "lakecep://gold/statistics",
            "lakecep://tuning/config",
        ]
    )


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
    assert set(tasks) == {"bronze", "silver", "optimize", "queries", "gold", "quality"}
    assert tasks["bronze"]["upstream"] == []
    assert tasks["silver"]["upstream"] == ["bronze"]
    assert tasks["optimize"]["upstream"] == ["silver"]
    assert tasks["queries"]["upstream"] == []  # validates the queries while bronze runs
    assert tasks["gold"]["upstream"] == ["optimize", "queries"]
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


def test_pipeline_tasks_run_their_jobs(parsed: dict) -> None:
    """Each pipeline task calls the job runner once, for the job of its name, with the run id
    (gold: with its query); ``queries`` runs no job (it lists the query ids)."""
    tasks = parsed["dags"]["lakecep_pipeline"]["tasks"]
    assert tasks["queries"]["runs_jobs"] is None
    for task_id, task in tasks.items():
        if task_id in ("queries", "gold"):
            continue
        assert task["runs_jobs"]["calls"] == [[task_id, "scheduled__test"]], task_id
    assert tasks["gold"]["runs_jobs"]["calls"] == [["gold", "scheduled__test", "q1"]]


def test_gold_is_one_mapped_task_per_query(parsed: dict) -> None:
    """gold is mapped over the ids `queries` returns; each mapped task is labelled with its
    query id in the UI; they run one at a time (each MERGEs into gold.complex_events)."""
    gold = parsed["dags"]["lakecep_pipeline"]["tasks"]["gold"]
    assert gold["mapped"] is True
    assert gold["expand_input"] == ["query"]
    assert gold["map_index_template"] == "{{ query_id }}"
    assert gold["runs_jobs"]["context"] == {"query_id": "q1"}  # what the template renders
    assert gold["max_active_tis_per_dagrun"] == 1
    others = [t for t, v in parsed["dags"]["lakecep_pipeline"]["tasks"].items() if v["mapped"]]
    assert others == ["gold"]


def test_asset_events_carry_counts_and_versions(parsed: dict) -> None:
    """Each task puts its job's summary (rows in/out/quarantined, Delta versions written) in
    the extra of its outlet's asset event; gold's also names its query."""
    expected = {"run_id": "scheduled__test", "table": "t", "rows_in": 3, "input_unit": "rows",
                "rows_out": 2, "quarantined": 1, "duplicates": None, "seconds": 0.5,
                "note": "", "versions": {"t": [4]}}
    for dag_id in ("lakecep_pipeline", "lakecep_tuning"):
        for task_id, task in parsed["dags"][dag_id]["tasks"].items():
            if task["runs_jobs"] is None:
                continue
            extra = task["runs_jobs"]["extra"]
            assert set(extra) == set(task["outlets"]), (dag_id, task_id)
            for uri in task["outlets"]:
                job = {"job": task_id} | ({"query": "q1"} if task_id == "gold" else {})
                assert extra[uri] == expected | job, (dag_id, task_id)
    pipeline = parsed["dags"]["lakecep_pipeline"]["tasks"]
    assert pipeline["optimize"]["runs_jobs"]["extra"] == {}  # no outlet, no event


def test_every_dag_and_task_is_documented(parsed: dict) -> None:
    for dag_id, dag in parsed["dags"].items():
        assert len(dag["doc_md"]) > 200, dag_id
        for task_id, task in dag["tasks"].items():
            assert "`lakecep " in task["doc_md"], (dag_id, task_id)
    pipeline = parsed["dags"]["lakecep_pipeline"]
    for word in ("One gold task per query", "--query", "extra", "versions", "LAKECEP_HOME",
                 "LAKECEP_PYTHON_BIN"):
        assert word in pipeline["doc_md"], word


def test_dags_assume_no_repository(parsed: dict) -> None:
    """Nothing points at the checkout: no REPO_ROOT, no repository .venv, no cwd=."""
    assert "REPO_ROOT" not in parsed["shared_names"]
    for path in DAGS.glob("*.py"):
        text = path.read_text()
        for word in ("REPO_ROOT", ".venv", "parent.parent", "cwd=str("):
            assert word not in text, (path.name, word)


def test_jobs_run_with_airflows_python_in_lakecep_home(tmp_path: Path,
                                                        base_env: dict[str, str]) -> None:
    """Interpreter: $LAKECEP_PYTHON_BIN, else Airflow's own; working directory: $LAKECEP_HOME
    (required, created, made absolute), never the repository."""
    script = textwrap.dedent(
        """
        import json, os, sys
        from lakecep.dags import lakecep_tasks as t
        out = {"python": t.lakecep_python(), "executable": sys.executable}
        os.environ["LAKECEP_PYTHON_BIN"] = "/opt/other/python"
        out["configured"] = t.lakecep_python()
        try:
            t.lakecep_home()
        except RuntimeError as exc:
            out["no_home"] = str(exc)
        os.environ["LAKECEP_HOME"] = "relative/lake"
        out["home"] = str(t.lakecep_home())
        out["home_is_dir"] = os.path.isdir(out["home"])
        print(json.dumps(out))
        """
    )
    env = dict(base_env)
    env["AIRFLOW_HOME"] = str(tmp_path / "airflow")
    result = subprocess.run([sys.executable, "-c", script], env=env, cwd=tmp_path,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out["python"] == out["executable"]
    assert out["configured"] == "/opt/other/python"
    assert "LAKECEP_HOME is not set" in out["no_home"] and "docs/airflow.md" in out["no_home"]
    assert out["home"] == str(tmp_path / "relative" / "lake") and out["home_is_dir"]


def test_tuning_dag_present(parsed: dict) -> None:
    dag = parsed["dags"]["lakecep_tuning"]
    assert Path(dag["fileloc"]).name == "lakecep_tuning.py"
    assert dag["tags"] == ["lakecep", "tuning"]
    assert dag["catchup"] is False
    assert dag["max_active_runs"] == 1
    assert dag["start_date"] == "2026-01-01T00:00:00+00:00"
    assert dag["dagrun_timeout_s"] == 2 * 3600
    for word in ("statistics", "tune", "config-vN.json", "gold.allocations",
                 "tuned configuration vN"):
        assert word in dag["doc_md"], word


def test_tuning_schedule_hourly_and_on_gold(parsed: dict) -> None:
    dag = parsed["dags"]["lakecep_tuning"]
    # Hourly on the hour, UTC ...
    assert dag["timetable_class"] == "AssetOrTimeSchedule"
    assert dag["inner_timetable_class"] == "CronTriggerTimetable"
    assert dag["schedule"] == "0 * * * *"
    assert dag["schedule_timezone"] == "UTC"
    # ... and whenever the pipeline's gold task emits an asset event.
    assert dag["schedule_assets"] == ["lakecep://gold/complex_events"]
    assert "lakecep://gold/complex_events" in (
        parsed["dags"]["lakecep_pipeline"]["tasks"]["gold"]["outlets"]
    )


def test_tuning_task_order(parsed: dict) -> None:
    tasks = parsed["dags"]["lakecep_tuning"]["tasks"]
    assert set(tasks) == {"statistics", "tune"}
    assert tasks["statistics"]["upstream"] == []
    assert tasks["statistics"]["downstream"] == ["tune"]
    assert tasks["tune"]["upstream"] == ["statistics"]
    assert tasks["tune"]["downstream"] == []


def test_tuning_assets(parsed: dict) -> None:
    tasks = parsed["dags"]["lakecep_tuning"]["tasks"]
    assert set(tasks["statistics"]["inlets"]) == {
        "lakecep://silver/events",
        "lakecep://gold/complex_events",
    }
    assert len(tasks["statistics"]["inlets"]) == 2
    assert tasks["statistics"]["outlets"] == ["lakecep://gold/statistics"]
    assert tasks["tune"]["inlets"] == ["lakecep://gold/statistics"]
    assert tasks["tune"]["outlets"] == ["lakecep://tuning/config"]


def test_tuning_tasks_run_their_jobs(parsed: dict) -> None:
    tasks = parsed["dags"]["lakecep_tuning"]["tasks"]
    assert tasks["statistics"]["runs_jobs"]["calls"] == [["statistics", "scheduled__test"]]
    assert tasks["tune"]["runs_jobs"]["calls"] == [["tune", "scheduled__test"]]


def test_maintenance_dag_runs_maintain_daily(parsed: dict) -> None:
    dag = parsed["dags"]["lakecep_maintenance"]
    assert Path(dag["fileloc"]).name == "lakecep_maintenance.py"
    assert dag["tags"] == ["lakecep", "maintenance"]
    assert (dag["catchup"], dag["max_active_runs"]) == (False, 1)
    assert dag["inner_timetable_class"] == "CronTriggerTimetable"
    assert (dag["schedule"], dag["schedule_timezone"]) == ("30 3 * * *", "UTC")
    tasks = dag["tasks"]
    assert set(tasks) == {"maintain"}
    assert tasks["maintain"]["runs_jobs"]["calls"] == [["maintain", "scheduled__test"]]
    assert tasks["maintain"]["outlets"] == []
    for word in ("vacuum_retention", "max_stream_lag", "VACUUM", "OPTIMIZE",
                 "compact_min_files", "Housekeeping"):
        assert word in dag["doc_md"], word


def test_continuous_dag_supervises_every_five_minutes(parsed: dict) -> None:
    """One task, no retry (the next run 5 minutes later is the retry), short timeouts; its
    behaviour is tested for real by tests/e2e/test_continuous_e2e.py."""
    dag = parsed["dags"]["lakecep_continuous"]
    assert Path(dag["fileloc"]).name == "lakecep_continuous.py"
    assert dag["tags"] == ["continuous", "lakecep"]
    assert (dag["catchup"], dag["max_active_runs"]) == (False, 1)
    assert (dag["schedule"], dag["schedule_timezone"]) == ("*/5 * * * *", "UTC")
    assert dag["dagrun_timeout_s"] == 600
    (task,) = dag["tasks"].values()
    assert task["type"] == "_PythonDecoratedOperator" or "Python" in task["type"]
    assert (task["retries"], task["execution_timeout_s"]) == (0, 300)
    assert task["outlets"] == [] and task["doc_md"]
    for word in ("heartbeat", "restarts", "stale_after", "lakecep stop", "backfills"):
        assert word in dag["doc_md"], word


def test_retries_are_short(parsed: dict) -> None:
    for dag_id in ("lakecep_pipeline", "lakecep_tuning", "lakecep_maintenance"):
        for task_id, task in parsed["dags"][dag_id]["tasks"].items():
            assert task["retries"] == 1, (dag_id, task_id)
            assert 0 < task["retry_delay"] <= 120, (dag_id, task_id)
            assert task["owner"] == "lakecep", (dag_id, task_id)
            assert task["execution_timeout_s"] == 3600, (dag_id, task_id)


def test_parsing_imports_nothing_heavy(parsed: dict) -> None:
    # All five DAG files (and lakecep_tasks) were really imported by this parse ...
    assert parsed["parsed_files"] == [
        "lakecep_continuous.py",
        "lakecep_demo.py",
        "lakecep_maintenance.py",
        "lakecep_pipeline.py",
        "lakecep_tuning.py",
    ]
    assert parsed["import_errors"] == {}
    assert parsed["shared_module"] is not None
    # ... and none of them pulled in Spark, pandas, the engine or the jobs.
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
        spec = importlib.util.spec_from_file_location("lakecep_tasks", sys.argv[1])
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
        [sys.executable, "-c", script, str(DAGS / "lakecep_tasks.py")],
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
