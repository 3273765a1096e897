"""Smoke test of benchmarks/allocation_validation.py on tiny sizes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "benchmarks" / "allocation_validation.py"
VALIDATIONS = ("satisfaction", "latency", "disorder", "optimum", "schedulers")


def test_tiny_run_writes_every_validation(tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, str(SCRIPT), "--quick", "--tiny", "--no-plots",
                             "--out", str(tmp_path)],
                            cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    summary = json.loads((tmp_path / "allocation_summary.json").read_text())
    assert summary["quick"] is True and summary["machine"]["cpus"]
    for name in VALIDATIONS:
        assert name in summary
        body = json.loads((tmp_path / f"allocation_{name}.json").read_text())
        assert body["validation"] == name and body["machine"]
    assert set(summary["satisfaction"]["error_exact"]) == {"max_abs", "mean_abs"}
    assert {"measured", "model_exact", "model_approx"} <= set(summary["optimum"]["seq2_argmax"])
    assert set(summary["schedulers"]) == {"symmetric", "skewed"}
