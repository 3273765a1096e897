"""Rules of the code base that a reviewer would otherwise have to remember."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def test_ruff_clean() -> None:
    result = subprocess.run([sys.executable, "-m", "ruff", "check", "."], cwd=REPO,
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-4000:]


def test_mypy_strict_on_cep_core() -> None:
    result = subprocess.run([sys.executable, "-m", "mypy"], cwd=REPO,
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-4000:]


def test_cep_core_is_free_of_spark() -> None:
    spark_import = re.compile(r"^\s*(import|from)\s+(pyspark|delta)\b", re.MULTILINE)
    offenders = [str(p) for p in (REPO / "cep_core").rglob("*.py")
                 if spark_import.search(p.read_text())]
    assert offenders == []


def test_dag_files_have_no_heavy_top_level_imports() -> None:
    modules = r"pyspark|pandas|numpy|great_expectations|cep_core|lakecep\.jobs"
    heavy = re.compile(rf"^(import|from)\s+({modules})\b", re.MULTILINE)
    offenders = [str(p) for p in (REPO / "dags").glob("*.py") if heavy.search(p.read_text())]
    assert offenders == []


# --- One namespace, layers that point down ---------------------------------------------

#: Source folder -> the package it installs as (pyproject [tool.setuptools] package-dir).
INSTALLED_AS = {"cep_core": "cep_core", "lakecep": "lakecep", "jobs": "lakecep.jobs",
                "schemas": "lakecep.schemas", "dags": "lakecep.dags",
                "expectations": "lakecep.expectations", "queries": "lakecep.shipped_queries"}
#: Old import names that must not come back (they clash with other installed packages).
OLD_NAMES = {"jobs", "schemas", "dags", "lakecep_tasks", "expectations", "queries"}


def _python_files() -> list[Path]:
    skip = {".venv", ".git", "build", "node_modules", ".lakecep"}
    return [p for p in REPO.rglob("*.py") if not skip & set(p.relative_to(REPO).parts)]


def _module_name(path: Path) -> str | None:
    """Installed module name of a file in one of the package folders (None elsewhere)."""
    parts = path.relative_to(REPO).with_suffix("").parts
    if parts[0] not in INSTALLED_AS:
        return None
    rest = parts[1:-1] if parts[-1] == "__init__" else parts[1:]
    return ".".join((INSTALLED_AS[parts[0]], *rest))


def _imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every import in ``path``, function-local ones included; relative
    imports resolved; ``from pkg import name`` also yields ``pkg.name``."""
    import ast

    tree = ast.parse(path.read_text(), str(path))
    own = _module_name(path) or ""
    package = own if path.name == "__init__.py" else own.rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            found.append((node.lineno, base))
            found += [(node.lineno, f"{base}.{alias.name}") for alias in node.names]
    return found


def _floor(module: str) -> int | None:
    """cep_core and data 1 < lakecep's pure code 2 < jobs and lakecep.spark (the public
    Spark API) 3 < CLI and DAGs 4."""
    def under(name: str) -> bool:
        return module == name or module.startswith(name + ".")

    if under("cep_core") or under("lakecep.schemas") or under("lakecep.expectations") \
            or under("lakecep.shipped_queries"):
        return 1
    if under("lakecep.jobs.cli") or under("lakecep.dags"):
        return 4
    if under("lakecep.jobs") or under("lakecep.spark"):
        return 3
    if under("lakecep"):
        return 2
    return None


def test_no_old_top_level_names() -> None:
    """Code, tests, DAGs and benchmarks import jobs/, schemas/, dags/ as lakecep.* only."""
    offenders = [f"{p.relative_to(REPO)}:{line}: {module}"
                 for p in _python_files() for line, module in _imports(p)
                 if module.split(".")[0] in OLD_NAMES or module == "lakecep.cli"]
    assert offenders == []


def test_layers_point_down() -> None:
    """A module imports only from its own floor or below: cep_core <- lakecep's pure code
    <- jobs (Spark adapters) <- CLI and DAGs. (cep_core is checked by its own tests.)"""
    offenders = []
    for path in _python_files():
        own = _module_name(path)
        if own is None or own.startswith("cep_core"):
            continue
        floor = _floor(own)
        assert floor is not None, own
        for line, module in _imports(path):
            target = _floor(module)
            if target is not None and target > floor:
                offenders.append(f"{path.relative_to(REPO)}:{line}: {own} (floor {floor}) "
                                 f"imports {module} (floor {target})")
    assert offenders == []


def test_pyproject_lists_every_package() -> None:
    """Mapped folders are listed by hand in pyproject: a package folder missing there would be
    missing from the wheel (and from the editable install)."""
    import tomllib

    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert config["package-dir"] == {v: k for k, v in INSTALLED_AS.items() if k != v}
    packages = {_module_name(init.parent / "__init__.py")
                for folder in INSTALLED_AS for init in (REPO / folder).rglob("__init__.py")}
    missing = sorted(packages - set(config["packages"]))
    assert missing == [], f"add to [tool.setuptools] packages in pyproject.toml: {missing}"


def test_dag_files_need_no_sys_path_setup() -> None:
    setup = re.compile(r"sys\.path\.(insert|append)|site\.addsitedir")
    offenders = [p.name for p in (REPO / "dags").glob("*.py") if setup.search(p.read_text())]
    assert offenders == []


def test_editable_install_maps_the_folders(tmp_path: Path) -> None:
    """The venv's editable install (bootstrap: setuptools' lenient mode) imports each folder
    under its lakecep name from the repository, from any directory, so a module added to a
    folder later imports without re-installing; the old top-level names do not import."""
    script = (
        "import importlib, json, sys\n"
        "paths = {n: list(importlib.import_module(n).__path__) for n in sys.argv[1:]}\n"
        "old = [n for n in ('jobs', 'schemas', 'lakecep_tasks')\n"
        "       if importlib.util.find_spec(n) is not None]\n"
        "print(json.dumps({'paths': paths, 'old': old}))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    result = subprocess.run([sys.executable, "-c", script, *INSTALLED_AS.values()],
                            cwd=tmp_path, env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    found = json.loads(result.stdout)
    assert found["paths"] == {package: [str(REPO / folder)]
                              for folder, package in INSTALLED_AS.items()}
    assert found["old"] == []


def test_test_module_basenames_are_unique() -> None:
    """pytest imports test modules by basename (rootdir conftest, no packages): two files
    with one name in different folders break collection of the whole suite."""
    names: dict[str, list[str]] = {}
    for path in (REPO / "tests").rglob("test_*.py"):
        names.setdefault(path.name, []).append(str(path.relative_to(REPO)))
    assert {n: p for n, p in names.items() if len(p) > 1} == {}
