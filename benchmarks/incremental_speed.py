"""Incremental matcher speed (issue 13): ``IncrementalMatcher`` fed in batches of
``--batch-rows`` (or, with ``--mode batch``, the batch run) on the eight shapes of
``engine_suite.py``, this checkout against a baseline checkout (a worktree, or ``git
archive main | tar -x -C /tmp/base`` with ``--baseline-label``), in one run.

Each measurement is ``engine_suite.py``'s own ``incremental`` (``batch``) child process
(first call on 2,000 rows apart, then ``--reps`` repetitions over the first ``--rows``
rows of the shape's data), the two checkouts alternating shape by shape so both see the
same machine load. Reported per shape: rows per CPU-second of the measuring process
(median; the rate with a whole core, the least sensitive figure on a shared machine),
rows per wall second, the outputs (which must be equal) and the load average around each
run.

    .venv/bin/python benchmarks/incremental_speed.py --baseline /tmp/base --rows 100000

Output: ``results/incremental_speed.json`` and ``.png``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from engine_suite import RESULTS, ROOT, data_file  # noqa: E402
from engine_throughput import machine  # noqa: E402
from suite_shapes import SHAPES  # noqa: E402


def measure(checkout: Path, shape: str, rows: int, args: argparse.Namespace) -> dict[str, Any]:
    """One ``engine_suite.py --child`` incremental run with ``checkout`` on the path."""
    job = {"shape": shape, "mode": args.mode, "reps": args.reps,
           "path": str(data_file(SHAPES[shape].data, rows)), "batch_rows": args.batch_rows}
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    env.pop("LAKECEP_CEP_ENGINE", None)
    load0 = os.getloadavg()[0]
    res = subprocess.run([sys.executable, str(checkout / "benchmarks" / "engine_suite.py"),
                          "--child", json.dumps(job)], capture_output=True, text=True,
                         env=env, check=False)
    if res.returncode != 0:
        raise RuntimeError(f"{shape} ({checkout}) failed:\n{res.stderr[-3000:]}")
    out: dict[str, Any] = json.loads(res.stdout.strip().splitlines()[-1])
    out["rows_per_cpu_s"] = round(out["rows"] / statistics.median(out["cpu_s"]))
    out["load_avg"] = [round(load0, 2), round(os.getloadavg()[0], 2)]
    return out


def plot(report: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    shapes = list(report["shapes"])
    fig, ax = plt.subplots(figsize=(10, 5.5))
    xs = np.arange(len(shapes))
    for k, (name, color) in enumerate([("baseline", "tab:gray"), ("current", "tab:olive")]):
        vals = [report["shapes"][s][name]["rows_per_cpu_s"] for s in shapes]
        ax.bar(xs + (k - 0.5) * 0.38, vals, 0.38, color=color,
               label=f"{name} ({report[name + '_git']})")
    incremental = report["settings"].get("mode", "incremental") == "incremental"
    target = 500_000 if incremental else 1_000_000
    ax.axhline(target, color="tab:red", linestyle=":", label=f"target {target:,} rows/s per core")
    ax.set_xticks(xs, [f"{s}\nx{report['shapes'][s]['speedup']}" for s in shapes], fontsize=8)
    ax.set_ylabel("input rows per CPU-second (median)")
    what = "IncrementalMatcher" if incremental else "batch run"
    ax.set_title(f"{what}, {report['settings']['rows']:,} rows per shape, batches "
                 f"of {report['settings']['batch_rows']:,} ({report['machine'].get('cpus')} "
                 f"vCPU, load {report['load_avg_start'][0]:.1f} at start)", fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def git_head(checkout: Path) -> str:
    return subprocess.run(["git", "-C", str(checkout), "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True).stdout.strip()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--baseline", type=Path, required=True, help="the baseline checkout")
    ap.add_argument("--baseline-label", help="its commit, if not a git checkout")
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--batch-rows", type=int, default=10_000)
    ap.add_argument("--shapes", nargs="*", default=list(SHAPES))
    ap.add_argument("--mode", default="incremental", choices=["incremental", "batch"],
                    help="the child's mode: IncrementalMatcher.feed, or a batch run")
    ap.add_argument("--out", type=Path, default=RESULTS / "incremental_speed.json")
    args = ap.parse_args()
    report: dict[str, Any] = {
        "machine": machine(), "load_avg_start": list(os.getloadavg()),
        "uptime": subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip(),
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "baseline_git": args.baseline_label or git_head(args.baseline),
        "current_git": git_head(ROOT),
        "settings": {"rows": args.rows, "reps": args.reps, "batch_rows": args.batch_rows,
                     "mode": args.mode},
        "shapes": {}}
    for name in args.shapes:
        rows = args.rows
        entry = {"baseline": measure(args.baseline, name, rows, args),
                 "current": measure(ROOT, name, rows, args)}
        base, cur = entry["baseline"], entry["current"]
        if base["output_rows"] != cur["output_rows"]:
            raise RuntimeError(f"{name}: outputs differ ({base['output_rows']} vs "
                               f"{cur['output_rows']})")
        entry["speedup"] = round(cur["rows_per_cpu_s"] / base["rows_per_cpu_s"], 2)
        report["shapes"][name] = entry
        print(f"{name:14s} baseline {base['rows_per_cpu_s']:>9,} -> current "
              f"{cur['rows_per_cpu_s']:>9,} rows/CPU-s (x{entry['speedup']}); wall "
              f"{base['rows_per_s']:,} -> {cur['rows_per_s']:,}; load {cur['load_avg']}",
              flush=True)
    report["load_avg_end"] = list(os.getloadavg())
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    plot(report, args.out.with_suffix(".png"))
    print(f"wrote {args.out} and {args.out.with_suffix('.png')}")


if __name__ == "__main__":
    main()
