"""The built wheel: one namespace, every module importable, the data the code loads shipped.

Builds the wheel from a copy of the package folders (so the build leaves nothing in the
repository), installs it with the pinned dependencies into a fresh virtual environment and,
from a directory outside the repository, imports every module of ``lakecep`` and
``cep_core``, finds the package data through ``importlib.resources``, runs ``lakecep --help``
and checks that no other top-level name (``jobs``, ``schemas``, ...) was installed.

``test_installed_package_runs_the_demo_elsewhere`` then uses the installed package the way a
user (or a managed Airflow) does, from a directory outside the repository: ``lakecep
generate`` (small), ``lakecep run all``, ``lakecep status --strict``; Airflow's DagBag over
the installed DAG folder; and the installed pipeline DAG's ``queries`` and one ``gold``
task run for real (interpreter: the venv's; working directory: ``$LAKECEP_HOME``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap
import time
import tomllib
import zipfile
from pathlib import Path

import pytest
from lakecep_testing import clean_env

from lakecep.jobs.spark import CDS_DIR

REPO = Path(__file__).resolve().parent.parent
UV = Path(sys.executable).with_name("uv")

pytestmark = pytest.mark.slow

#: Top-level names that must not be installed (they clash with other distributions).
CLASHING = ["jobs", "schemas", "dags", "expectations", "queries", "lakecep_tasks", "tests",
            "benchmarks", "infra"]


def _run(cmd: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=1500, **kwargs)
    assert result.returncode == 0, (
        f"{' '.join(cmd)} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
    return result


def _source_folders() -> dict[str, Path]:
    """Package name -> source folder, from pyproject (cep_core and lakecep map to themselves)."""
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    mapped = config.get("package-dir", {})
    return {name: REPO / mapped.get(name, name.replace(".", "/"))
            for name in config["packages"] if "." not in name or name in mapped}


def _expected_modules() -> set[str]:
    """Every module the source folders hold, under its installed name."""
    names = set()
    for package, folder in _source_folders().items():
        for path in folder.rglob("*.py"):
            if "__pycache__" in path.parts:
                continue
            parts = path.relative_to(folder).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            names.add(".".join((package, *parts)))
    return names


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    source = tmp_path_factory.mktemp("source")
    shutil.copy(REPO / "pyproject.toml", source)
    shutil.copy(REPO / "README.md", source)
    folders = {folder.relative_to(REPO).parts[0] for folder in _source_folders().values()}
    for name in sorted(folders):
        shutil.copytree(REPO / name, source / name,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    out = tmp_path_factory.mktemp("dist")
    _run([str(UV), "build", "--wheel", "--out-dir", str(out), str(source)])
    (built,) = out.glob("lakecep-*.whl")
    return built


@pytest.fixture(scope="module")
def venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv holding only the wheel; the pinned dependencies come from the test's
    own venv (installed from infra/requirements.lock), appended to ``sys.path`` after the
    fresh venv's site-packages. A plain path line in a ``.pth`` file does not run that
    folder's ``.pth`` files, so the editable install of the repository stays off: lakecep
    and cep_core can only come from the wheel (the tests check every module's file).
    Installing the lock again would rebuild the pyspark sdists every time (about a minute).
    """
    root = tmp_path_factory.mktemp("wheel_venv") / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(root)])
    python = str(root / "bin" / "python")
    site = _run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]
                ).stdout.strip()
    (Path(site) / "lakecep-test-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    _run([str(UV), "pip", "install", "-q", "-p", python, "--no-deps", str(wheel)])
    return root


@pytest.fixture(scope="module")
def installed(venv: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """What the installed package looks like from a directory outside the repository."""
    outside = tmp_path_factory.mktemp("outside")
    env = clean_env()
    env.pop("PYTHONPATH", None)
    env.update({"AIRFLOW_HOME": str(outside / "airflow"), "LAKECEP_HOME": str(outside / "home"),
                "AIRFLOW__CORE__LOAD_EXAMPLES": "False"})
    script = textwrap.dedent(
        """
        import importlib, json, pkgutil, sys
        from importlib.resources import files

        out = {"modules": {}, "errors": {}, "clashing": {}}
        for top in ("cep_core", "lakecep"):
            package = importlib.import_module(top)
            out["modules"][top] = package.__file__
            for info in pkgutil.walk_packages(package.__path__, top + "."):
                try:
                    out["modules"][info.name] = importlib.import_module(info.name).__file__
                except Exception as exc:  # reported by the test, with the module's name
                    out["errors"][info.name] = f"{type(exc).__name__}: {exc}"
        for name in sys.argv[1].split(","):
            try:
                importlib.import_module(name)
                out["clashing"][name] = "imported"
            except ModuleNotFoundError:
                pass

        def listing(package):
            return sorted(p.name for p in files(package).iterdir()
                          if not p.name.startswith("__"))

        from lakecep.jobs import quality, spark
        from lakecep.queries import QUERIES_DIR, load_queries
        out["expectations"] = listing("lakecep.expectations")
        out["suite"] = str(quality.suite_path("silver.events"))
        out["queries"] = listing("lakecep.shipped_queries")
        out["examples"] = sorted(p.name for p in (QUERIES_DIR / "examples").glob("*.toml"))
        out["loaded_queries"] = [q.id for q in load_queries()]
        out["dags"] = listing("lakecep.dags")
        out["log4j"] = str(spark.LOG4J_CONFIG)
        out["log4j_exists"] = spark.LOG4J_CONFIG.is_file()
        out["site"] = str(files("lakecep").parent)
        print(json.dumps(out))
        """
    )
    result = _run([str(venv / "bin" / "python"), "-c", script, ",".join(CLASHING)],
                  cwd=outside, env=env)
    data = json.loads(result.stdout.strip().splitlines()[-1])
    data["help"] = _run([str(venv / "bin" / "lakecep"), "--help"], cwd=outside, env=env).stdout
    return data


def test_wheel_holds_only_the_two_packages(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        tops = {name.split("/")[0] for name in archive.namelist()}
    assert tops == {"cep_core", "lakecep", "lakecep-0.1.0.dist-info"}


def test_every_module_imports_from_the_installed_wheel(installed: dict) -> None:
    assert installed["errors"] == {}
    # Every source module is in the wheel, under its lakecep.* name ...
    assert set(installed["modules"]) == _expected_modules()
    # ... and was imported from the venv, not from the repository.
    site = installed["site"]
    outside = {m: f for m, f in installed["modules"].items() if not f.startswith(site)}
    assert outside == {}
    assert not site.startswith(str(REPO))


def test_no_clashing_top_level_names(installed: dict) -> None:
    """``import jobs`` / ``import schemas`` (and the other folder names) fail."""
    assert installed["clashing"] == {}


def test_package_data_is_shipped(installed: dict) -> None:
    site = installed["site"]
    suites = sorted(p.name for p in (REPO / "expectations").glob("*.json"))
    assert installed["expectations"] == suites
    assert installed["suite"].startswith(site) and installed["suite"].endswith(
        "lakecep/expectations/silver.events.json")
    assert installed["queries"] == sorted(
        [*(p.name for p in (REPO / "queries").glob("*.toml")), "examples"])
    assert installed["examples"] == sorted(
        p.name for p in (REPO / "queries" / "examples").glob("*.toml"))
    assert installed["loaded_queries"] == sorted(
        tomllib.loads(p.read_text())["id"] for p in (REPO / "queries").glob("*.toml"))
    assert installed["dags"] == sorted(
        [".airflowignore", *(p.name for p in (REPO / "dags").glob("*.py")
                             if p.name != "__init__.py")])
    assert installed["log4j_exists"] and installed["log4j"].startswith(site)


def test_console_script_runs(installed: dict) -> None:
    assert installed["help"].lstrip().startswith("Usage: lakecep")
    for command in ("generate", "run", "sql", "status", "config"):
        assert command in installed["help"]


def test_clashing_names_are_real_folders_of_the_repository() -> None:
    """The check above means something: each name is a folder (or module) of the repository."""
    assert [n for n in CLASHING if not (REPO / n).is_dir()] == ["lakecep_tasks"]
    assert (REPO / "dags" / "lakecep_tasks.py").is_file()


#: Runs in the fresh venv: Airflow's DagBag over the installed DAG folder, then the
#: installed pipeline DAG's ``queries`` task and one mapped ``gold`` task, called as the
#: task runner calls them (their functions, with the task context they read).
INSTALLED_DAGS_SCRIPT = textwrap.dedent(
    """
    import json, os, sys
    from pathlib import Path
    from importlib.resources import files
    from airflow.dag_processing.dagbag import BundleDagBag
    import airflow.sdk

    folder = Path(str(files("lakecep.dags")))
    bag = BundleDagBag(dag_folder=str(folder), bundle_path=folder, bundle_name="dags-folder")
    shared = sys.modules["lakecep.dags.lakecep_tasks"]
    pipeline = bag.dags["lakecep_pipeline"]
    tasks = {t.task_id: t for t in pipeline.tasks}

    def function(task):
        return (getattr(task, "partial_kwargs", None) or {}).get("python_callable") or (
            task.python_callable)

    class Events(dict):
        def __missing__(self, asset):
            self[asset] = type("Event", (), {"extra": None})()
            return self[asset]

    context = {}
    airflow.sdk.get_current_context = lambda: context
    query_ids = function(tasks["queries"])()
    events = Events()
    function(tasks["gold"])(query=query_ids[0], run_id="wheel_test", outlet_events=events)
    print(json.dumps({
        "folder": str(folder),
        "import_errors": {str(k): v for k, v in bag.import_errors.items()},
        "dags": sorted(bag.dags),
        "filelocs": sorted(d.fileloc for d in bag.dags.values()),
        "shared_module": shared.__file__,
        "python": shared.lakecep_python(),
        "executable": sys.executable,
        "query_ids": query_ids,
        "map_index": context.get("query_id"),
        "gold_extra": {a.uri: e.extra for a, e in events.items()},
    }))
    """
)


def _json_output(stdout: str) -> dict:
    """The JSON document a ``--json`` command printed (it starts on a line "{")."""
    lines = stdout.splitlines()
    start = max(n for n, line in enumerate(lines) if line == "{")
    return json.loads("\n".join(lines[start:]))


def test_installed_package_runs_the_demo_elsewhere(
    venv: Path, installed: dict, tmp_path: Path
) -> None:
    """A user's view of the wheel: the whole demo from a directory that is neither the
    repository nor the lake, then the installed DAGs parse and their tasks run jobs."""
    elsewhere, home = tmp_path / "elsewhere", tmp_path / "lake-home"
    elsewhere.mkdir()
    env = clean_env()
    env.pop("PYTHONPATH", None)
    env.update({"LAKECEP_HOME": str(home), "AIRFLOW_HOME": str(tmp_path / "airflow"),
                "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
                "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{tmp_path}/airflow.db",
                # The fresh venv has no class-data-sharing archive of its own (`python -m
                # lakecep.jobs.spark fetch-jars` writes one; docs/configuration.md). Its
                # Spark is this venv's (the .pth of the `venv` fixture), so this venv's
                # archive fits: each of the three driver JVMs (run all, status, the gold
                # task) starts with about half the CPU.
                "LAKECEP_CDS_DIR": str(CDS_DIR),
                # the repository's venv off PATH: only the fresh venv's lakecep is found
                "PATH": os.pathsep.join([str(venv / "bin"), *(
                    p for p in env.get("PATH", "").split(os.pathsep)
                    if not p.startswith(str(REPO)))])})
    lakecep = str(venv / "bin" / "lakecep")
    seconds: dict[str, float] = {}

    def cli(*args: str) -> dict:
        started = time.monotonic()
        result = _run([lakecep, *args, "--json"], cwd=elsewhere, env=env)
        seconds[" ".join(args[:2])] = round(time.monotonic() - started, 1)
        return _json_output(result.stdout)

    generated = cli("generate", "--events", "300", "--seed", "7")
    assert generated["landing"] == str(home.resolve() / "landing" / "events")
    ran = cli("run", "all")
    assert ran["ok"] and [j["job"] for j in ran["jobs"]] == [
        "bronze", "silver", "optimize", "gold", "quality"]
    by_job = {j["job"]: j for j in ran["jobs"]}
    assert by_job["bronze"]["rows_out"] == generated["lines"]
    assert by_job["gold"]["rows_out"] > 0 and by_job["gold"]["versions"]["gold.complex_events"]
    status = cli("status", "--strict")
    assert status["ok"], status
    # Everything landed in $LAKECEP_HOME; nothing in the directory the commands ran from.
    assert list(elsewhere.iterdir()) == []
    assert {"landing", "lake", "checkpoints"} <= {p.name for p in home.iterdir()}

    started = time.monotonic()
    result = _run([str(venv / "bin" / "python"), "-c", INSTALLED_DAGS_SCRIPT],
                  cwd=elsewhere, env=env)
    seconds["installed DAGs"] = round(time.monotonic() - started, 1)
    dags = json.loads(result.stdout.strip().splitlines()[-1])
    site = installed["site"]
    assert dags["import_errors"] == {}
    assert dags["dags"] == ["lakecep_continuous", "lakecep_demo", "lakecep_maintenance",
                            "lakecep_pipeline", "lakecep_tuning"]
    assert dags["folder"].startswith(site) and not dags["folder"].startswith(str(REPO))
    assert all(f.startswith(dags["folder"]) for f in dags["filelocs"])
    assert dags["shared_module"].startswith(site)
    # The jobs run with the venv's interpreter (Airflow's own: no LAKECEP_PYTHON_BIN) ...
    assert dags["python"] == dags["executable"] == str(venv / "bin" / "python")
    # ... the queries task listed the shipped queries, and gold ran the first one as its
    # own stream: seeded from `run all`'s checkpoint, so nothing new to read.
    assert dags["query_ids"] == installed["loaded_queries"]
    assert dags["map_index"] == dags["query_ids"][0]
    (extra,) = dags["gold_extra"].values()
    assert (extra["query"], extra["rows_in"], extra["rows_out"]) == (
        dags["query_ids"][0], 0, 0)
    assert (home / "checkpoints" / f"gold_complex_events__{dags['query_ids'][0]}").is_dir()
    print(f"\nwheel demo from elsewhere: {seconds}")
