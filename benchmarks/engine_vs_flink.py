"""lakecep (cep_core) against Apache Flink SQL MATCH_RECOGNIZE at parallelism 1.

Both run as whole processes on the same input file (generated stock ticks, the data of
workload (a) in ``engine_throughput.py``, written as headerless CSV ``symbol,ts,price``
with ``ts`` in epoch milliseconds) and write their matches to files; the script checks that
both found exactly the same matches and reports whole-process wall time (interpreter/JVM
start, reading the CSV, matching, writing the result), peak memory of the process tree and
the ratio. Flink runs in its own virtualenv (``benchmarks/flink/setup.sh``).

The query is workload (a) closed by a ``STOP`` row, ``PATTERN (STRT DOWN+ UP+ STOP)``,
because Flink rejects a greedy quantifier as the last element of a pattern; see
``benchmarks/flink/match_recognize.py`` for the Flink text (which also has to avoid
``PREV``). lakecep runs the plain ``PREV`` form on its fast path.

    .venv/bin/python benchmarks/engine_vs_flink.py --rows 5000000
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
CACHE = Path(os.environ.get("LAKECEP_CACHE", Path.home() / ".cache" / "lakecep"))
FLINK_PY = Path(os.environ.get("FLINK_VENV", CACHE / "flink-venv")) / "bin" / "python"
COLUMNS = ["symbol", "start_ts", "bottom_ts", "end_ts", "start_price", "bottom_price",
           "end_price"]

LAKECEP_QUERY = """
SELECT * FROM ticks MATCH_RECOGNIZE (
  PARTITION BY symbol ORDER BY ts
  MEASURES STRT.ts AS start_ts, LAST(DOWN.ts) AS bottom_ts, LAST(UP.ts) AS end_ts,
           STRT.price AS start_price, LAST(DOWN.price) AS bottom_price,
           LAST(UP.price) AS end_price
  ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW
  PATTERN (STRT DOWN+ UP+ STOP)
  DEFINE DOWN AS price < PREV(price), UP AS price > PREV(price),
         STOP AS price <= PREV(price)
)"""


def lakecep_process(input_csv: str, output_csv: str) -> None:
    """The lakecep side, as one process: read the CSV, match, write the matches."""
    import pandas as pd

    sys.path.insert(0, str(ROOT))
    import cep_core

    df = pd.read_csv(input_csv, names=["symbol", "ts", "price"], engine="pyarrow")
    compiled = cep_core.compile_query(LAKECEP_QUERY)
    out = compiled.run(df)
    out.to_csv(output_csv, header=False, index=False)
    print(json.dumps({"engine": compiled.engine, "matches": len(out)}))


# ---------------------------------------------------------------------- measuring
def _tree_rss_kb(root: int) -> int:
    """Resident memory of ``root`` and all its descendants (from /proc)."""
    parent: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            parent[int(entry)] = int(fields[1])
        except OSError:
            continue
    tree = {root}
    changed = True
    while changed:
        changed = False
        for pid, ppid in parent.items():
            if ppid in tree and pid not in tree:
                tree.add(pid)
                changed = True
    total = 0
    for pid in tree:
        try:
            with open(f"/proc/{pid}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
        except OSError:
            continue
    return total


def timed(cmd: list[str]) -> tuple[float, float, str]:
    """Run ``cmd``; wall seconds, peak RSS of its process tree (MB), stdout."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    peak = 0
    done = threading.Event()

    def poll() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, _tree_rss_kb(proc.pid))
            done.wait(0.2)

    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    out, err = proc.communicate()
    wall = time.perf_counter() - t0
    done.set()
    poller.join()
    if proc.returncode != 0:
        raise RuntimeError(f"{cmd[:3]} failed:\n{err[-3000:]}")
    return wall, peak / 1024, out


def input_csv(rows: int) -> Path:
    path = CACHE / "bench" / f"flink-ticks-{rows}.csv"
    if not path.exists():
        sys.path.insert(0, str(ROOT / "benchmarks"))
        from engine_throughput import stock_ticks

        df = stock_ticks(rows)
        df["ts"] = df["ts"].astype("int64") // 1_000_000
        path.parent.mkdir(parents=True, exist_ok=True)
        df.to_csv(path, header=False, index=False)
    return path


def read_matches(paths: list[str]) -> Any:
    import pandas as pd

    frames = [pd.read_csv(p, names=COLUMNS) for p in paths if os.path.getsize(p)]
    df = pd.concat(frames) if frames else pd.DataFrame(columns=COLUMNS)
    return df.sort_values(["symbol", "start_ts"]).reset_index(drop=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=5_000_000)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--flink-reps", type=int, default=None, help="default: --reps")
    ap.add_argument("--out", type=Path, default=RESULTS / "engine_vs_flink.json")
    ap.add_argument("--lakecep-run", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.lakecep_run:
        lakecep_process(*args.lakecep_run)
        return
    import pandas as pd

    data = input_csv(args.rows)
    work = CACHE / "bench" / "vs-flink"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    env_py = str(ROOT / ".venv" / "bin" / "python")
    lake: list[tuple[float, float]] = []
    lake_info: dict[str, Any] = {}
    for _ in range(args.reps):
        wall, peak, out = timed([env_py, __file__, "--lakecep-run", str(data),
                                 str(work / "lakecep.csv")])
        lake.append((wall, peak))
        lake_info = json.loads(out.strip().splitlines()[-1])
        print(f"  lakecep {wall:8.2f}s  peak {peak:7.0f} MB  {lake_info}", flush=True)
    flink: list[tuple[float, float]] = []
    flink_log = ""
    for rep in range(args.flink_reps or args.reps):
        target = work / f"flink-{rep}"
        wall, peak, out = timed([str(FLINK_PY), str(ROOT / "benchmarks" / "flink" /
                                                     "match_recognize.py"),
                                 "--input", str(data), "--output", str(target)])
        flink.append((wall, peak))
        flink_log = out.strip()
        print(f"  flink   {wall:8.2f}s  peak {peak:7.0f} MB  {flink_log}", flush=True)
    mine = read_matches([str(work / "lakecep.csv")])
    theirs = read_matches(glob.glob(str(work / "flink-0" / "**" / "part-*"), recursive=True))
    same = len(mine) == len(theirs) and bool(
        (mine.astype(str).to_numpy() == theirs.astype(str).to_numpy()).all())
    lake_s = statistics.median(w for w, _ in lake)
    flink_s = statistics.median(w for w, _ in flink)
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from engine_throughput import machine

    report = {
        "machine": machine(), "rows": args.rows, "input": data.name,
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "lakecep": {"query": LAKECEP_QUERY, "engine": lake_info.get("engine"),
                    "wall_s": [round(w, 3) for w, _ in lake], "median_s": round(lake_s, 3),
                    "peak_rss_mb": round(max(p for _, p in lake)), "matches": len(mine),
                    "rows_per_s": round(args.rows / lake_s)},
        "flink": {"version": _flink_version(), "parallelism": 1,
                  "wall_s": [round(w, 3) for w, _ in flink], "median_s": round(flink_s, 3),
                  "peak_rss_mb": round(max(p for _, p in flink)), "matches": len(theirs),
                  "rows_per_s": round(args.rows / flink_s), "last_log": flink_log},
        "same_matches": same,
        "speedup_lakecep_over_flink": round(flink_s / lake_s, 2),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    _plot(report, args.out.with_suffix(".png"))
    print(json.dumps({k: report[k] for k in ("same_matches", "speedup_lakecep_over_flink")}))
    if not same:
        pd.set_option("display.width", 200)
        print("lakecep:\n", mine.head(), "\nflink:\n", theirs.head())
        sys.exit(1)


def _flink_version() -> str | None:
    try:
        res = subprocess.run([str(FLINK_PY), "-c", "import importlib.metadata as m; "
                              "print(m.version('apache-flink'))"],
                             capture_output=True, text=True, check=True)
        return res.stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def _plot(report: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = ["lakecep (fast path)", f"Flink {report['flink']['version']} (parallelism 1)"]
    values = [report["lakecep"]["median_s"], report["flink"]["median_s"]]
    fig, ax = plt.subplots(figsize=(8, 2.8))
    bars = ax.barh(names, values, color=["tab:green", "tab:blue"])
    for bar, v in zip(bars, values, strict=True):
        ax.text(bar.get_width(), bar.get_y() + bar.get_height() / 2, f" {v:.1f} s",
                va="center")
    ax.invert_yaxis()
    ax.set_xlim(0, max(values) * 1.15)
    ax.set_xlabel("whole-process wall time, seconds (median)")
    ax.set_title(f"STRT DOWN+ UP+ STOP over {report['rows']:,} ticks: "
                 f"lakecep {report['speedup_lakecep_over_flink']}x faster", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    main()
