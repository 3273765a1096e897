"""Smoke test of benchmarks/uncertain_experiments.py: its --quick path on tiny sizes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "benchmarks" / "uncertain_experiments.py"
METHODS = {"possible_worlds", "point", "event", "dp"}


def test_quick_run_has_every_sweep_and_every_method_agrees(tmp_path: Path) -> None:
    out = tmp_path / "uncertain.json"
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--out", str(out),
         "--sizes", "a=2,3;b=20,40;c=0,2;d=1,3",
         "--search-sizes", "events_per_partition=1,2;events_per_partition_prior=1,2;"
                           "points_per_event=2,3;points_per_event_prior=2,3"],
        cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    report = json.loads(out.read_text())
    assert out.with_suffix(".png").stat().st_size > 0
    assert report["quick"] is True and report["machine"]["cpus"]
    assert set(report["sweeps"]) == {"a", "b", "c", "d"}
    assert set(report["largest_inputs"]) == {"events_per_partition", "events_per_partition_prior",
                                             "points_per_event", "points_per_event_prior"}
    for key, sweep in report["sweeps"].items():
        xs = [p["x"] for p in sweep["points"]]
        assert xs[:2] == {"a": [2, 3], "b": [20, 40], "c": [0, 2], "d": [1, 3]}[key]
        if key == "a":
            assert xs[-1] == "nested"  # the PERMUTE/OR point
        for point in sweep["points"]:
            assert set(point["methods"]) == METHODS
            # tiny sizes: every method ran, and all returned the same answer
            assert all(r["status"] == "ok" for r in point["methods"].values()), point
            assert point["check"]["agree"] is True, point["check"]
            assert point["check"]["compared"] == ["possible_worlds", "point", "event", "dp"]
            assert point["check"]["sequences"] > 0
        assert sweep["summary"]["all_agree"] is True
        assert set(sweep["summary"]["growth"]) == METHODS
        assert sweep["summary"]["speedups"]["possible_worlds/event"]["points"] == 2
        assert sweep["verdict"].startswith(f"({key}) ")
    for search in report["largest_inputs"].values():
        assert set(search["largest"]) == METHODS
        assert all(p["check"]["agree"] is True for p in search["points"])
    assert report["all_agree"] is True
