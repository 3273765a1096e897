"""Rules of the code base that a reviewer would otherwise have to remember."""

from __future__ import annotations

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
    modules = "pyspark|pandas|numpy|great_expectations|cep_core|jobs"
    heavy = re.compile(rf"^(import|from)\s+({modules})\b", re.MULTILINE)
    offenders = [str(p) for p in (REPO / "dags").glob("*.py") if heavy.search(p.read_text())]
    assert offenders == []
