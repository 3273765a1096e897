"""Throughput of the cep_core engine (rows per second on one core).

Workloads:

* (a) ``stock``: generated stock ticks (seeded random walk per symbol, a few hundred
  symbols), ``PATTERN (STRT DOWN+ UP+)`` -- fast path; also forced onto the general matcher
  and run incrementally (``IncrementalMatcher`` in batches, which uses the general matcher).
* (b) ``seq``: a three-step sequence with ``WITHIN`` and a Kleene variable whose condition
  is an aggregate -- general path.
* (d) ``rfid``: the pipeline's gold query ``queries/rfid_abc.toml`` (``PATTERN (A B C)
  WITHIN INTERVAL '10' HOUR``, one row per match) over generated tag reads -- fast path
  (WITHIN on the fast path) and, on the same input, forced onto the general matcher.
* (e) ``within``: ``PATTERN (A B+ C) WITHIN INTERVAL '30' MINUTE`` with row-local
  conditions over the (b) events: greedy ``B+`` often runs past the window and the fast
  path must cut the match back -- fast and general on the same input.
* (c) ``flights``: real data, ``flights-3m.parquet`` from the npm package
  ``vega-datasets@3.2.1`` (fetched with ``npm pack`` into ``~/.cache/lakecep``), partitioned
  by origin airport: delays rising then falling -- fast path and general.

Every measurement runs in its own process (so the peak RSS belongs to that measurement
alone; one process = one core), reading its input from a Parquet file written beforehand
(reading is not timed). Times are medians of ``--reps`` repetitions. Output:
``benchmarks/results/engine_throughput.json`` and ``engine_throughput.png``.

    .venv/bin/python benchmarks/engine_throughput.py                   # the real run
    .venv/bin/python benchmarks/engine_throughput.py --rows 1000000    # a quick one
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tarfile
import time
import tomllib
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
CACHE = Path(os.environ.get("LAKECEP_CACHE", Path.home() / ".cache" / "lakecep"))

STOCK_QUERY = """
SELECT * FROM ticks MATCH_RECOGNIZE (
  PARTITION BY symbol ORDER BY ts
  MEASURES STRT.ts AS start_ts, LAST(DOWN.ts) AS bottom_ts, LAST(UP.ts) AS end_ts,
           STRT.price AS start_price, LAST(DOWN.price) AS bottom_price,
           LAST(UP.price) AS end_price
  ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW
  PATTERN (STRT DOWN+ UP+)
  DEFINE DOWN AS price < PREV(price), UP AS price > PREV(price)
)"""

SEQ_QUERY = """
SELECT * FROM events MATCH_RECOGNIZE (
  PARTITION BY object_id ORDER BY event_time
  MEASURES A.event_time AS start_time, LAST(C.event_time) AS end_time,
           COUNT(B.*) AS b_count, AVG(B.value) AS b_avg
  ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW
  PATTERN (A B+ C) WITHIN INTERVAL '30' MINUTE
  DEFINE A AS source_id = 'A',
         B AS source_id = 'B' AND AVG(B.value) < 60,
         C AS source_id = 'C'
)"""

FLIGHTS_QUERY = """
SELECT * FROM flights MATCH_RECOGNIZE (
  PARTITION BY origin ORDER BY date
  MEASURES FIRST(date) AS start_date, LAST(RISE.date) AS peak_date, LAST(date) AS end_date,
           LAST(RISE.delay) AS peak_delay, COUNT(*) AS flights
  ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW
  PATTERN (STRT RISE{3,} FALL{3,})
  DEFINE RISE AS delay > PREV(delay), FALL AS delay < PREV(delay)
)"""

RFID_QUERY = tomllib.loads((ROOT / "queries" / "rfid_abc.toml").read_text())["query"]

WITHIN_QUERY = """
SELECT * FROM events MATCH_RECOGNIZE (
  PARTITION BY object_id ORDER BY event_time
  MEASURES A.event_time AS start_time, LAST(C.event_time) AS end_time,
           COUNT(B.*) AS b_count
  ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW
  PATTERN (A B+ C) WITHIN INTERVAL '30' MINUTE
  DEFINE A AS source_id = 'A', B AS source_id = 'B' OR value < 60, C AS source_id = 'C'
)"""

QUERIES = {"stock": STOCK_QUERY, "seq": SEQ_QUERY, "flights": FLIGHTS_QUERY,
           "rfid": RFID_QUERY, "within": WITHIN_QUERY}
TABLES = {"stock": "ticks", "seq": "events", "flights": "flights", "rfid": "events",
          "within": "events"}
LETTERS = {"stock": "a", "seq": "b", "flights": "c", "rfid": "d", "within": "e"}
VEGA = "vega-datasets@3.2.1"


# ---------------------------------------------------------------------- data
def stock_ticks(rows: int, symbols: int = 300, seed: int = 42) -> pd.DataFrame:
    """Ticks in arrival (time) order: a random symbol per tick, strictly increasing
    millisecond timestamps, a per-symbol random walk of prices in cents."""
    rng = np.random.default_rng(seed)
    sym = rng.integers(0, symbols, rows)
    steps = rng.choice(np.array([-3, -2, -1, 0, 1, 2, 3]), rows)
    order = np.argsort(sym, kind="stable")
    walk = np.cumsum(steps[order])
    first = np.searchsorted(sym[order], np.arange(symbols))
    start_of = np.repeat(first, np.bincount(sym, minlength=symbols))
    walk = walk - np.concatenate([[0], walk])[start_of]
    cents = np.empty(rows, dtype=np.int64)
    cents[order] = 10_000 + 100 * (sym[order] % 50) + walk
    names = np.array([f"S{i:03d}" for i in range(symbols)], dtype=object)
    ts = np.datetime64("2024-01-02T09:30:00.000") + np.arange(rows).astype("timedelta64[ms]")
    return pd.DataFrame({"symbol": names[sym], "ts": ts.astype("datetime64[ns]"),
                         "price": cents / 100.0})


def seq_events(rows: int, objects: int = 100, seed: int = 7) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    gaps = rng.integers(0, 3, rows)  # seconds; equal times happen
    t = np.datetime64("2024-01-01T00:00:00") + np.cumsum(gaps).astype("timedelta64[s]")
    return pd.DataFrame({
        "event_id": np.arange(rows),
        "object_id": rng.integers(0, objects, rows),
        "event_time": t.astype("datetime64[ns]"),
        "source_id": np.array(["A", "B", "C", "X"], dtype=object)[
            rng.choice(4, rows, p=[0.3, 0.35, 0.25, 0.1])],
        "value": rng.integers(0, 100, rows)})


def rfid_events(rows: int, objects: int = 10_000, seed: int = 11) -> pd.DataFrame:
    """Tag reads in arrival order: a random tag per read, 0-3 s between reads overall (so
    a tag is read every ~4 h on average and the 10 h window matters), readers A-D."""
    rng = np.random.default_rng(seed)
    gaps = rng.integers(0, 4, rows)
    t = np.datetime64("2024-01-01T00:00:00") + np.cumsum(gaps).astype("timedelta64[s]")
    return pd.DataFrame({
        "event_id": np.arange(rows),
        "object_id": np.array([f"tag{i:05d}" for i in range(objects)], dtype=object)[
            rng.integers(0, objects, rows)],
        "event_time": t.astype("datetime64[ns]"),
        "source_id": np.array(["A", "B", "C", "D"], dtype=object)[rng.integers(0, 4, rows)]})


def flights_file() -> Path:
    """flights-3m.parquet from the npm package (fetched once into the cache)."""
    target = CACHE / "vega" / "flights-3m.parquet"
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    tgz = target.parent / "vega-datasets-3.2.1.tgz"
    if not tgz.exists():
        subprocess.run(["npm", "pack", VEGA], cwd=target.parent, check=True,
                       capture_output=True)
    with tarfile.open(tgz) as tar:
        member = tar.getmember("package/data/flights-3m.parquet")
        data = tar.extractfile(member)
        assert data is not None
        target.write_bytes(data.read())
    return target


def data_file(kind: str, rows: int) -> Path:
    """The input of a workload as Parquet (generated once per size)."""
    if kind == "flights":
        src = flights_file()
        if rows <= 0:
            return src
        path = CACHE / "bench" / f"flights-{rows}.parquet"
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            pd.read_parquet(src).head(rows).to_parquet(path)
        return path
    if kind == "within":
        kind = "seq"  # the same events as (b)
    path = CACHE / "bench" / f"{kind}-{rows}.parquet"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        df = (stock_ticks(rows) if kind == "stock" else rfid_events(rows) if kind == "rfid"
              else seq_events(rows))
        df.to_parquet(path)
    return path


# ---------------------------------------------------------------------- one measurement
def _status_mb(field: str) -> float:
    """VmRSS (now) or VmHWM (peak) of this process. (Not ru_maxrss: Linux carries that over
    from the parent across fork/exec.)"""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return float("nan")


def child(kind: str, engine: str, mode: str, path: str, reps: int, batch_rows: int,
          verify: bool) -> dict[str, Any]:
    import cep_core

    df = pd.read_parquet(path)
    compiled = cep_core.compile_query(QUERIES[kind], engine=engine)
    base = _status_mb("VmRSS")
    times: list[float] = []
    matches = 0
    for _ in range(reps):
        t0 = time.perf_counter()
        if mode == "batch":
            out = compiled.run(df)
            matches = len(out)
        else:
            inc = cep_core.IncrementalMatcher(compiled)
            found = 0
            for lo in range(0, len(df), batch_rows):
                found += len(inc.feed(df.iloc[lo:lo + batch_rows]))
            found += len(inc.flush())
            matches = found
            out = None
        times.append(time.perf_counter() - t0)
    peak = _status_mb("VmHWM")
    verified = None
    if verify and mode == "batch" and out is not None:
        other = cep_core.compile_query(QUERIES[kind],
                                       engine="fast" if engine == "general" else "general")
        pd.testing.assert_frame_equal(out, other.run(df))
        verified = True
    median = statistics.median(times)
    return {"workload": kind, "engine": compiled.engine if mode == "batch" else "general",
            "plan": compiled.plan, "mode": mode, "rows": len(df), "matches": matches,
            "batch_rows": batch_rows if mode == "incremental" else None,
            "times_s": [round(t, 4) for t in times], "median_s": round(median, 4),
            "rows_per_s": round(len(df) / median), "input_rss_mb": round(base, 1),
            "peak_rss_mb": round(peak, 1), "verified_equal_to_other_engine": verified}


def measure(kind: str, engine: str, mode: str, rows: int, reps: int, batch_rows: int = 0,
            verify: bool = False) -> dict[str, Any]:
    path = data_file(kind, rows)
    cmd = [sys.executable, __file__, "--child", kind, engine, mode, str(path), str(reps),
           str(batch_rows), "1" if verify else "0"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("LAKECEP_CEP_ENGINE", None)
    res = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    if res.returncode != 0:
        raise RuntimeError(f"{kind}/{engine}/{mode} failed:\n{res.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(res.stdout.strip().splitlines()[-1])
    print(f"  {kind:8s} {result['engine']:8s} {mode:12s} rows={result['rows']:>10,} "
          f"matches={result['matches']:>9,} median={result['median_s']:8.3f}s "
          f"{result['rows_per_s']:>12,} rows/s  peak RSS {result['peak_rss_mb']:.0f} MB",
          flush=True)
    return result


def machine() -> dict[str, Any]:
    info: dict[str, Any] = {"python": platform.python_version(), "platform": platform.platform(),
                            "cpus": os.cpu_count(), "numpy": np.__version__,
                            "pandas": pd.__version__}
    try:
        info["cpus_usable"] = len(os.sched_getaffinity(0))
        with open("/proc/meminfo") as f:
            info["memory_gb"] = round(int(f.readline().split()[1]) / 1024 / 1024, 1)
        with open("/proc/cpuinfo") as f:
            info["cpu_model"] = next((ln.split(":", 1)[1].strip() for ln in f
                                      if ln.startswith("model name")), None)
    except OSError:
        pass
    return info


def plot(results: list[dict[str, Any]], path: Path) -> None:
    import matplotlib
    import matplotlib.ticker

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [f"({LETTERS[r['workload']]}) {r['workload']} "
              f"{r['engine']} {r['mode']}\n{r['rows']:,} rows" for r in results]
    values = [r["rows_per_s"] for r in results]
    colors = ["tab:green" if r["engine"] == "fast" else "tab:gray" for r in results]
    fig, ax = plt.subplots(figsize=(9, 0.6 * len(results) + 1.5))
    bars = ax.barh(range(len(results)), values, color=colors)
    ax.set_yticks(range(len(results)), labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.axvline(1_000_000, color="tab:red", linestyle="--", linewidth=1,
               label="target 1M rows/s/core")
    for bar, v in zip(bars, values, strict=True):
        ax.text(bar.get_width(), bar.get_y() + bar.get_height() / 2, f" {v:,.0f}",
                va="center", fontsize=8)
    ax.set_xlabel("rows per second, one core (median)")
    ax.set_title("cep_core throughput (green: fast path, grey: general matcher)")
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=10_000_000, help="(a) rows, fast path")
    ap.add_argument("--general-rows", type=int, default=1_000_000,
                    help="rows for general-matcher runs of (a) and (c)")
    ap.add_argument("--incremental-rows", type=int, default=1_000_000)
    ap.add_argument("--batch-rows", type=int, default=100_000, help="incremental batch size")
    ap.add_argument("--seq-rows", type=int, default=500_000, help="(b) rows")
    ap.add_argument("--flights-rows", type=int, default=0, help="(c) rows; 0: all 3M")
    ap.add_argument("--rfid-rows", type=int, default=1_000_000,
                    help="(d) and (e) rows, fast and general")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--out", type=Path, default=RESULTS / "engine_throughput.json")
    ap.add_argument("--child", nargs=7, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        kind, engine, mode, path, reps, batch_rows, verify = args.child
        print(json.dumps(child(kind, engine, mode, path, int(reps), int(batch_rows),
                               verify == "1")))
        return
    general_rows = min(args.general_rows, args.rows)
    results = [
        measure("stock", "auto", "batch", args.rows, args.reps),
        measure("stock", "auto", "batch", general_rows, args.reps),
        measure("stock", "general", "batch", general_rows, args.reps, verify=True),
        measure("stock", "auto", "incremental", min(args.incremental_rows, args.rows),
                args.reps, args.batch_rows),
        measure("seq", "auto", "batch", args.seq_rows, args.reps),
        measure("seq", "auto", "incremental", args.seq_rows, args.reps, args.batch_rows),
        measure("flights", "auto", "batch", args.flights_rows, args.reps),
        measure("flights", "general", "batch", general_rows, args.reps, verify=True),
        measure("rfid", "auto", "batch", args.rfid_rows, args.reps),
        measure("rfid", "general", "batch", args.rfid_rows, args.reps, verify=True),
        measure("within", "auto", "batch", args.rfid_rows, args.reps),
        measure("within", "general", "batch", args.rfid_rows, args.reps, verify=True),
    ]
    ratios = {}
    for kind in ("stock", "flights", "rfid", "within"):
        by_engine = {r["engine"]: r for r in results if r["workload"] == kind
                     and r["mode"] == "batch" and r["rows"] == min(
                         (x["rows"] for x in results if x["workload"] == kind
                          and x["engine"] == "general" and x["mode"] == "batch"),
                         default=-1)}
        if "fast" in by_engine and "general" in by_engine:
            ratios[kind] = round(by_engine["fast"]["rows_per_s"]
                                 / by_engine["general"]["rows_per_s"], 1)
    print("fast / general (same rows):", ratios)
    report = {"machine": machine(), "queries": QUERIES,
              "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]),
              "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
              "fast_over_general": ratios, "results": results}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    plot(results, args.out.with_suffix(".png"))
    print(f"wrote {args.out} and {args.out.with_suffix('.png')}")


if __name__ == "__main__":
    main()
