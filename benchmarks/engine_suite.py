"""Engine benchmark suite (issue 13, item 4): eight MATCH_RECOGNIZE query shapes over 10M
stock ticks and 3M real flights, cep_core against its own general matcher, hand-vectorised
pandas, Apache Flink SQL at parallelism 1 and CORE (VLDB 2022), in one run.

Shapes, their pandas versions and the peer texts: ``benchmarks/suite_shapes.py``; what
each comparison means (and where the peers' semantics differ): ``docs/performance.md``,
"Engine suite". Per shape:

* ``verify`` (one process, ``--verify-rows``): the default engine's output equals the
  general matcher's (``run`` frames), the incremental matcher's matches (batches of
  ``--batch-rows``) equal the batch ones, so do its output rows (``feed_table``), and the
  pandas version finds the same matches
  (first/last row, and labels for ALL ROWS PER MATCH);
* ``batch`` (``compile_query(q).run``: the engine ``auto`` picks), ``general``
  (``compile_query(q, engine="general")``), ``incremental`` (``IncrementalMatcher.feed``
  fed ``--batch-rows`` rows at a time: ``Match`` objects) and ``incremental_table`` (the
  same with ``feed_table``: output rows as ``run`` gives them; ``--skip incremental`` skips
  both): each in its own process (peak RSS = VmHWM of that
  process, input included), median of ``--reps``, after a first call on 2,000 rows
  (one-off costs such as a JIT compile: ``warmup_s``). A probe on 50k rows estimates the time;
  when a full-size repetition would exceed ``--budget`` seconds the measurement runs on
  the largest of 10M/5M/2M/1M/500k/200k/100k/50k rows that fits (``rows`` in the JSON);
* ``pandas``: the hand-vectorised version on the rows of the batch measurement, median
  of ``--reps``;
* ``core`` (CORE's venv, ``benchmarks/core/setup.sh``): the CEQL text over the first
  ``--core-rows`` rows, engine time only (events built beforehand), and its complex events
  checked against cep_core's matches on the same rows;
* ``flink`` (Flink's venv, ``benchmarks/flink/setup.sh``): whole processes on the same CSV
  of the first ``--flink-rows`` rows, lakecep (read CSV, match, write CSV) against Flink
  SQL at parallelism 1, same matches checked, median of ``--flink-reps``.

Output: ``benchmarks/results/engine_suite.json`` and ``engine_suite.png``; the load
average is recorded around every measurement (the machine is shared).

    .venv/bin/python benchmarks/engine_suite.py                        # the full run
    .venv/bin/python benchmarks/engine_suite.py --rows 200000 --flights-rows 200000 \\
        --core-rows 100000 --flink-rows 100000 --flink-reps 1 --out /tmp/suite.json
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
import time
from itertools import chain
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from engine_throughput import (  # noqa: E402
    CACHE,
    ROOT,
    _status_mb,
    flights_file,
    machine,
    stock_ticks,
)
from engine_vs_flink import FLINK_PY, _flink_version, timed  # noqa: E402
from suite_shapes import SHAPES, Shape  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"
CORE_PY = Path(os.environ.get("CORE_VENV", CACHE / "core-venv")) / "bin" / "python"
LADDER = [10_000_000, 5_000_000, 2_000_000, 1_000_000, 500_000, 200_000, 100_000, 50_000]
PROBE_ROWS = 50_000
FULL = {"ticks": 10_000_000, "flights": 3_000_000}
KEY = {"ticks": "symbol", "flights": "origin"}


# ---------------------------------------------------------------------- data
def data_file(data: str, rows: int) -> Path:
    """The first ``rows`` rows of a data set as Parquet (made once per size)."""
    path = CACHE / "bench" / f"suite-{data}-{rows}.parquet"
    if path.exists():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    df = (ticks_with_chg(stock_ticks(rows)) if data == "ticks"
          else flights_total_order(pd.read_parquet(flights_file())).head(rows))
    df.to_parquet(path)
    return path


def ticks_with_chg(df: pd.DataFrame) -> pd.DataFrame:
    """``chg`` = change from the symbol's previous tick in cents (NULL on its first)."""
    prev = df.groupby("symbol", sort=False)["price"].shift(1)
    return df.assign(chg=np.round((df["price"] - prev) * 100))


def flights_total_order(raw: pd.DataFrame) -> pd.DataFrame:
    """``origin, ts, delay`` with ``ts`` = ``date`` + k ms for the k-th flight of the same
    origin and minute (file order), sorted by ``ts``."""
    k = raw.groupby(["origin", "date"], sort=False).cumcount().to_numpy()
    df = pd.DataFrame({"origin": raw["origin"],
                       "ts": raw["date"].astype("datetime64[ns]") + pd.to_timedelta(k, unit="ms"),
                       "delay": raw["delay"]})
    return df.sort_values("ts", kind="stable").reset_index(drop=True)


def size(data: str, rows: int) -> int:
    return FULL[data] if rows <= 0 else min(rows, FULL[data])


def peer_csv(data: str, rows: int) -> Path:
    """Headerless CSV for Flink, CORE and the whole-process lakecep run: ``key, ts`` (epoch
    ms) and the data's columns (ticks: ``chg`` 0 and ``first`` 1 on a first tick; CORE
    gets a leading ``rid``)."""
    path = CACHE / "bench" / f"suite-{data}-{rows}.csv"
    if not path.exists():
        df = pd.read_parquet(data_file(data, rows))
        out = pd.DataFrame({"key": df[KEY[data]],
                            "ts": df["ts"].to_numpy("datetime64[ms]").view("int64")})
        if data == "ticks":
            out["price"] = df["price"]
            out["chg"] = df["chg"].fillna(0).astype("int64")
            out["first"] = df["chg"].isna().astype("int64")
        else:
            out["delay"] = df["delay"]
        out.to_csv(path, header=False, index=False)
    return path


COLUMNS = {"ticks": [("key", "STRING"), ("ts", "BIGINT"), ("price", "DOUBLE"),
                     ("chg", "INT"), ("first", "INT")],
           "flights": [("key", "STRING"), ("ts", "BIGINT"), ("delay", "INT")]}


# ---------------------------------------------------------------------- children
def _matches_of(found: list[Any]) -> set[tuple[int, int]]:
    return {(m.rows[0], m.rows[-1]) for m in found if m.rows}


def child(job: dict[str, Any]) -> dict[str, Any]:
    import cep_core

    shape = SHAPES[job["shape"]]
    df = pd.read_parquet(job["path"])
    mode = job["mode"]
    if mode == "verify":
        return verify(shape, df, job["batch_rows"])
    if mode == "pairs":
        pairs = sorted(_matches_of(cep_core.compile_query(shape.query).find_matches(df)))
        np.save(job["out"], np.array(pairs, dtype=np.int64).reshape(-1, 2))
        return {"matches": len(pairs)}
    compiled = (cep_core.compile_query(shape.query, engine="general") if mode == "general"
                else cep_core.compile_query(shape.query))

    def once(frame: pd.DataFrame) -> int:
        if mode in ("batch", "general"):
            return len(compiled.run(frame))
        if mode == "incremental":  # Match objects
            inc = cep_core.IncrementalMatcher(compiled)
            step = job["batch_rows"]
            found = sum(len(inc.feed(frame.iloc[lo:lo + step]))
                        for lo in range(0, len(frame), step))
            return found + len(inc.flush())
        if mode == "incremental_table":  # output rows, as the batch run gives them
            inc = cep_core.IncrementalMatcher(compiled)
            step = job["batch_rows"]
            found = sum(len(inc.feed_table(frame.iloc[lo:lo + step]))
                        for lo in range(0, len(frame), step))
            return found + len(inc.flush_table())
        assert shape.pandas is not None
        res = shape.pandas(frame)
        return len(res["row"] if shape.labels else res["first"])

    # first call on 2,000 rows: one-off costs (imports, a JIT compile) are reported apart
    t0 = time.perf_counter()
    once(df.head(2_000))
    warmup = time.perf_counter() - t0
    base = _status_mb("VmRSS")
    times: list[float] = []
    cpus: list[float] = []
    out: int = 0
    for _ in range(job["reps"]):
        c0, t0 = time.process_time(), time.perf_counter()
        out = once(df)
        times.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
    median = statistics.median(times)
    return {"mode": mode,
            "engine": None if mode.startswith("incremental") else compiled.engine,
            "plan": compiled.plan, "rows": len(df), "output_rows": out,
            "warmup_s": round(warmup, 4),
            "times_s": [round(t, 4) for t in times], "median_s": round(median, 4),
            "cpu_s": [round(c, 4) for c in cpus],
            "rows_per_s": round(len(df) / median) if median else None,
            "input_rss_mb": round(base, 1), "peak_rss_mb": round(_status_mb("VmHWM"), 1)}


def _rows(frame: pd.DataFrame) -> list[tuple[str, ...]]:
    """A frame's rows as sorted tuples of strings (order and dtype aside)."""
    return sorted(frame.astype(str).itertuples(index=False, name=None))


def verify(shape: Shape, df: pd.DataFrame, batch_rows: int) -> dict[str, Any]:
    import cep_core

    auto = cep_core.compile_query(shape.query)
    general = cep_core.compile_query(shape.query, engine="general")
    result: dict[str, Any] = {"rows": len(df), "engine": auto.engine, "plan": auto.plan}
    try:
        pd.testing.assert_frame_equal(auto.run(df), general.run(df))
        result["batch_equals_general"] = True
    except AssertionError as err:
        result["batch_equals_general"] = False
        result["batch_vs_general_diff"] = str(err)[:500]
    found = auto.find_matches(df)
    mine = _matches_of(found)
    inc = cep_core.IncrementalMatcher(auto)
    streamed = [m for lo in range(0, len(df), batch_rows)
                for m in inc.feed(df.iloc[lo:lo + batch_rows])] + inc.flush()
    result["incremental_equals_batch"] = (
        sorted((m.rows, m.labels) for m in streamed) == sorted((m.rows, m.labels)
                                                               for m in found))
    inc = cep_core.IncrementalMatcher(auto)
    tables = [inc.feed_table(df.iloc[lo:lo + batch_rows])
              for lo in range(0, len(df), batch_rows)] + [inc.flush_table()]
    result["incremental_table_equals_batch"] = (
        sorted(chain.from_iterable(map(_rows, tables))) == _rows(auto.run(df)))
    result["matches"] = len(mine)
    if shape.pandas is not None:
        res = shape.pandas(df)
        theirs = set(zip(res["first"].tolist(), res["last"].tolist(), strict=True))
        same = mine == theirs and len(theirs) == len(res["first"])
        if shape.labels:
            rows = sorted((r, lab) for m in found for r, lab in zip(m.rows, m.labels,
                                                                   strict=True))
            same = same and rows == sorted(zip(res["row"].tolist(), res["label"].tolist(),
                                               strict=True))
        result["pandas_equal"] = same
        if not same:
            result["pandas_only"] = sorted(theirs - mine)[:5]
            result["cep_only"] = sorted(mine - theirs)[:5]
    return result


def run_child(job: dict[str, Any]) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("LAKECEP_CEP_ENGINE", None)
    load0 = os.getloadavg()[0]
    res = subprocess.run([sys.executable, __file__, "--child", json.dumps(job)],
                         capture_output=True, text=True, env=env, check=False)
    if res.returncode != 0:
        raise RuntimeError(f"{job['shape']}/{job['mode']} failed:\n{res.stderr[-3000:]}")
    out: dict[str, Any] = json.loads(res.stdout.strip().splitlines()[-1])
    out["load_avg"] = [round(load0, 2), round(os.getloadavg()[0], 2)]
    return out


# ---------------------------------------------------------------------- measurements
def budgeted(shape: Shape, mode: str, rows: int, args: argparse.Namespace) -> dict[str, Any]:
    """Probe on 50k rows, then measure on the largest size whose repetition fits."""
    probe_rows = min(PROBE_ROWS, rows)
    probe = run_child({"shape": shape.name, "mode": mode, "reps": 1,
                       "path": str(data_file(shape.data, probe_rows)),
                       "batch_rows": args.batch_rows})
    per_row = probe["median_s"] / probe_rows
    n = rows
    if per_row * rows > args.budget:
        n = next((r for r in LADDER if r <= rows and per_row * r <= args.budget),
                 min(LADDER[-1], rows))
    result = run_child({"shape": shape.name, "mode": mode, "reps": args.reps,
                        "path": str(data_file(shape.data, n)), "batch_rows": args.batch_rows})
    result["probe_s"] = probe["median_s"]
    result["probe_rows"] = probe_rows
    result["full_rows"] = rows
    print(f"  {shape.name:14s} {mode:12s} {result.get('engine') or '':8s} "
          f"rows={result['rows']:>10,} median={result['median_s']:8.3f}s "
          f"{result['rows_per_s']:>12,} rows/s  peak {result['peak_rss_mb']:6.0f} MB  "
          f"load {result['load_avg']}", flush=True)
    return result


def core_run(shape: Shape, rows: int, args: argparse.Namespace) -> dict[str, Any]:
    assert shape.core is not None
    query, relation = shape.core
    work = CACHE / "bench" / "suite-core"
    work.mkdir(parents=True, exist_ok=True)
    src = pd.read_csv(peer_csv(shape.data, rows), header=None,
                      names=[c for c, _ in COLUMNS[shape.data]])
    src["key"] = pd.factorize(src["key"])[0]
    src.insert(0, "rid", np.arange(len(src)))
    core_in = work / f"{shape.data}-{rows}.csv"
    if not core_in.exists():
        src.to_csv(core_in, header=False, index=False)
    cols = [["rid", "int"]] + [[c, "double" if c == "price" else "int"]
                               for c, _ in COLUMNS[shape.data]]
    spec = {"input": str(core_in), "columns": cols, "query": query,
            "output": str(work / f"{shape.name}.out"), "reps": args.reps}
    (work / f"{shape.name}.json").write_text(json.dumps(spec))
    load0 = os.getloadavg()[0]
    res = subprocess.run([str(CORE_PY), str(ROOT / "benchmarks" / "core" / "run_core.py"),
                          str(work / f"{shape.name}.json")],
                         capture_output=True, text=True, check=False)
    if res.returncode != 0 or "Failed to process client request" in res.stdout:
        # pycer prints a rejected query's error to stdout and goes on with no query
        print(f"  {shape.name:14s} core FAILED: {res.stdout[:300]} {res.stderr[-300:]}")
        return {"error": res.stderr[-1500:] or res.stdout[-1500:], "query": query}
    out: dict[str, Any] = json.loads(res.stdout.strip().splitlines()[-1])
    out["load_avg"] = [round(load0, 2), round(os.getloadavg()[0], 2)]
    pairs_file = work / f"{shape.name}.cep.npy"
    run_child({"shape": shape.name, "mode": "pairs", "out": str(pairs_file),
               "path": str(data_file(shape.data, rows)), "batch_rows": 0})
    mine = {tuple(p) for p in np.load(pairs_file).tolist()}
    theirs_list = [tuple(int(x) for x in line.split(","))
                   for line in Path(spec["output"]).read_text().splitlines()]
    theirs = set(theirs_list)
    out.update({"query": query, "relation": relation, "rows": len(src),
                "cep_matches": len(mine), "core_distinct_first_last": len(theirs),
                "mr_subset_of_core": mine <= theirs,
                "equal": mine == theirs and len(theirs_list) == len(theirs),
                "rows_per_s": round(len(src) / out["median_s"]) if out["median_s"] else None,
                "rows_per_cpu_s": round(len(src) / statistics.median(out["cpu_s"]))
                if statistics.median(out["cpu_s"]) else None})
    out["check_ok"] = out["equal"] if relation == "equal" else out["mr_subset_of_core"]
    print(f"  {shape.name:14s} core         rows={len(src):>10,} median={out['median_s']:8.3f}s "
          f"{out['rows_per_s']:>12,} rows/s  complex events {out['complex_events']:,} "
          f"({relation}: {out['check_ok']})", flush=True)
    return out


LAKECEP_PROCESS_COLUMNS = {"ticks": ["key", "ts", "price", "chg", "first"],
                           "flights": ["key", "ts", "delay"]}


def lakecep_process(shape_name: str, input_csv: str, output_csv: str) -> None:
    """The whole-process lakecep side of the Flink comparison: read the CSV, match, write."""
    import cep_core

    shape = SHAPES[shape_name]
    assert shape.flink is not None
    query = shape.flink[1] or shape.query
    df = pd.read_csv(input_csv, names=LAKECEP_PROCESS_COLUMNS[shape.data], engine="pyarrow")
    if shape.data == "ticks":
        df["chg"] = df["chg"].where(df["first"] == 0)
    df = df.rename(columns={"key": KEY[shape.data]})
    ms = df["ts"].to_numpy()
    df["ts"] = ms.astype("datetime64[ms]").astype("datetime64[ns]")
    out = cep_core.compile_query(query).run(df)
    pd.DataFrame({"key": out[KEY[shape.data]],
                  "start": out["start_ts"].to_numpy("datetime64[ms]").view("int64"),
                  "end": out["end_ts"].to_numpy("datetime64[ms]").view("int64")}
                 ).to_csv(output_csv, header=False, index=False)


def _read_triples(paths: list[str]) -> list[tuple[str, int, int]]:
    rows: list[tuple[str, int, int]] = []
    for p in paths:
        if os.path.getsize(p):
            df = pd.read_csv(p, header=None, names=["k", "s", "e"], dtype={"k": str})
            rows.extend(zip(df["k"], df["s"].astype(int), df["e"].astype(int), strict=True))
    return sorted(rows)


def flink_window(match: str) -> str:
    """MATCH_RECOGNIZE's WITHIN is inclusive, Flink's exclusive (a match must end strictly
    before start + window): give Flink one more millisecond."""
    import re

    def one_more(m: re.Match[str]) -> str:
        value, unit = int(m.group(1)), m.group(2).upper()
        seconds = value * {"SECOND": 1, "MINUTE": 60, "HOUR": 3600}[unit]
        return (f"WITHIN INTERVAL '{seconds // 3600}:{seconds // 60 % 60:02d}:"
                f"{seconds % 60:02d}.001' HOUR TO SECOND")

    return re.sub(r"WITHIN INTERVAL '(\d+)' (SECOND|MINUTE|HOUR)", one_more, match)


def flink_run(shape: Shape, rows: int, args: argparse.Namespace) -> dict[str, Any]:
    assert shape.flink is not None
    match = "AFTER MATCH SKIP " + shape.query.split("AFTER MATCH SKIP ", 1)[1].split(
        "\n", 1)[0] + "\n  " + flink_window(shape.flink[0])
    data = peer_csv(shape.data, rows)
    work = CACHE / "bench" / "suite-flink" / shape.name
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    lake, flink, logs = [], [], []
    for rep in range(args.flink_reps):
        wall, peak, _ = timed([sys.executable, __file__, "--lakecep-run", shape.name, str(data),
                               str(work / "lakecep.csv")])
        lake.append((wall, peak))
        spec = {"input": str(data), "columns": COLUMNS[shape.data],
                "queries": [{"output": str(work / f"flink-{rep}"), "match": match}]}
        (work / "spec.json").write_text(json.dumps(spec))
        wall, peak, out = timed([str(FLINK_PY), str(ROOT / "benchmarks" / "flink" /
                                                    "run_queries.py"), str(work / "spec.json")])
        flink.append((wall, peak))
        logs.append(json.loads(out.strip().splitlines()[-1]))
        print(f"  {shape.name:14s} flink rep {rep}: lakecep {lake[-1][0]:.2f}s, flink "
              f"{wall:.2f}s {logs[-1]}  load {os.getloadavg()[0]:.1f}", flush=True)
    mine = _read_triples([str(work / "lakecep.csv")])
    theirs = _read_triples(glob.glob(str(work / "flink-0" / "**" / "part-*"), recursive=True))
    lake_s = statistics.median(w for w, _ in lake)
    flink_s = statistics.median(w for w, _ in flink)
    return {"rows": rows, "flink_match": match, "lakecep_query": shape.flink[1] or shape.query,
            "lakecep_wall_s": [round(w, 3) for w, _ in lake], "lakecep_median_s": round(lake_s, 3),
            "lakecep_peak_mb": round(max(p for _, p in lake)),
            "flink_wall_s": [round(w, 3) for w, _ in flink], "flink_median_s": round(flink_s, 3),
            "flink_peak_mb": round(max(p for _, p in flink)), "flink_logs": logs,
            "matches": len(mine), "flink_matches": len(theirs), "same_matches": mine == theirs,
            "speedup": round(flink_s / lake_s, 2)}


# ---------------------------------------------------------------------- report
def ratios(entry: dict[str, Any]) -> dict[str, Any]:
    def rate(name: str) -> float | None:
        m = entry.get(name)
        return m.get("rows_per_s") if isinstance(m, dict) else None

    out: dict[str, Any] = {}
    batch, general, pandas_, core = rate("batch"), rate("general"), rate("pandas"), None
    if isinstance(entry.get("core"), dict) and "error" not in entry["core"]:
        core = entry["core"]["rows_per_s"]
    if batch and general:
        out["batch_over_general"] = round(batch / general, 2)
    if batch and entry.get("incremental", {}).get("rows_per_s") and general:
        out["incremental_over_general"] = round(entry["incremental"]["rows_per_s"] / general, 2)
    if batch and pandas_:
        out["pandas_over_batch"] = round(pandas_ / batch, 2)
    if batch and core:
        out["batch_over_core"] = round(batch / core, 2)
        # CORE's offline server mostly waits on its worker threads (CPU << wall on a
        # loaded machine): also compare rows per CPU-second of each process
        cpu_batch = entry["batch"]["rows"] / statistics.median(entry["batch"]["cpu_s"])
        cpu_core = entry["core"]["rows"] / statistics.median(entry["core"]["cpu_s"])
        out["batch_over_core_cpu"] = round(cpu_batch / cpu_core, 2)
    if isinstance(entry.get("flink"), dict) and "speedup" in entry["flink"]:
        out["lakecep_over_flink"] = entry["flink"]["speedup"]
    return out


def plot(report: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shapes = list(report["shapes"])
    series = [("batch", "tab:green"), ("incremental", "tab:olive"),
              ("incremental_table", "tab:cyan"), ("general", "tab:gray"),
              ("pandas", "tab:purple"), ("core", "tab:orange")]
    fig, ax = plt.subplots(figsize=(11, 7))
    width = 0.14
    for j, (name, color) in enumerate(series):
        vals = []
        for s in shapes:
            m = report["shapes"][s].get(name)
            vals.append(m.get("rows_per_s") or 0 if isinstance(m, dict) else 0)
        xs = np.arange(len(shapes)) + (j - 2.5) * width
        ax.bar(xs, [v or np.nan for v in vals], width, color=color,
               label={"batch": "cep_core batch (auto)", "incremental":
                      "cep_core incremental (10k-row batches, Match objects)",
                      "incremental_table": "cep_core incremental (10k-row batches, feed_table)",
                      "general": "general matcher (forced)", "pandas": "hand-vectorised pandas",
                      "core": "CORE (pycer, engine time)"}[name])
    ax.axhline(1_000_000, color="tab:red", linestyle="--", linewidth=1,
               label="target batch 1M rows/s")
    ax.axhline(500_000, color="tab:red", linestyle=":", linewidth=1,
               label="target incremental 500k rows/s")
    ax.set_yscale("log")
    ax.set_xticks(np.arange(len(shapes)),
                  [f"{s}\n({report['shapes'][s]['data']})" for s in shapes], fontsize=8)
    ax.set_ylabel("input rows per second, one process (median)")
    load = report["load_avg_start"]
    ax.set_title(f"cep_core engine suite ({report['machine'].get('cpus')} vCPU, load "
                 f"{load[0]:.1f} at start; Flink p=1 speedups in the JSON)", fontsize=10)
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.1), ncol=4)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def summary(report: dict[str, Any]) -> str:
    """The results as a Markdown table (docs/performance.md)."""
    def rate(m: Any) -> str:
        if not isinstance(m, dict) or not m.get("rows_per_s"):
            return "-"
        return f"{m['rows_per_s']:,} ({m['rows']:,})"

    lines = ["| shape | batch rows/s (rows) | incremental | incremental (table) | general | "
             "pandas | CORE | "
             "batch / general | pandas / batch | batch / CORE (CPU) | lakecep / Flink | "
             "checks |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for name, e in report["shapes"].items():
        r = e.get("ratios", {})
        v = e.get("verify", {})
        checks = [k for k in ("batch_equals_general", "incremental_equals_batch",
                              "incremental_table_equals_batch", "pandas_equal")
                  if v.get(k) is False]
        core = e.get("core") if isinstance(e.get("core"), dict) else {}
        if core and "check_ok" in core:
            checks += [] if core["check_ok"] else [f"CORE {core['relation']}"]
        flink = e.get("flink") if isinstance(e.get("flink"), dict) else {}
        if flink and "same_matches" in flink and not flink["same_matches"]:
            checks.append("Flink")
        engine = e["batch"].get("engine", "")
        lines.append(
            f"| {name} | {rate(e['batch'])} {engine} | {rate(e.get('incremental'))} | "
            f"{rate(e.get('incremental_table'))} | "
            f"{rate(e.get('general'))} | {rate(e.get('pandas'))} | {rate(core)} | "
            f"{r.get('batch_over_general', '-')} | {r.get('pandas_over_batch', '-')} | "
            f"{r.get('batch_over_core', '-')} ({r.get('batch_over_core_cpu', '-')}) | "
            f"{r.get('lakecep_over_flink', '-')} | "
            f"{'FAILED: ' + ', '.join(checks) if checks else 'all equal'} |")
    lines += ["", "Rows per CPU-second of the measuring process (all its threads): the rate "
              "with a whole\ncore, less sensitive to the machine's load.", "",
              "| shape | batch | incremental | incremental (table) | general | pandas | CORE |",
              "|---|---:|---:|---:|---:|---:|---:|"]
    for name, e in report["shapes"].items():
        cells = []
        for mode in ("batch", "incremental", "incremental_table", "general", "pandas",
                     "core"):
            m = e.get(mode)
            ok = isinstance(m, dict) and m.get("cpu_s") and statistics.median(m["cpu_s"])
            cells.append(f"{round(m['rows'] / statistics.median(m['cpu_s'])):,}" if ok else "-")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=0, help="tick rows (0: 10M)")
    ap.add_argument("--flights-rows", type=int, default=0, help="flight rows (0: all 3M)")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--budget", type=float, default=20.0,
                    help="seconds per repetition before a cep_core measurement is scaled down")
    ap.add_argument("--batch-rows", type=int, default=10_000, help="incremental batch size")
    ap.add_argument("--verify-rows", type=int, default=200_000)
    ap.add_argument("--core-rows", type=int, default=1_000_000)
    ap.add_argument("--flink-rows", type=int, default=1_000_000)
    ap.add_argument("--flink-reps", type=int, default=3)
    ap.add_argument("--shapes", nargs="*", default=list(SHAPES))
    ap.add_argument("--skip", nargs="*", default=[], choices=["core", "flink", "general",
                                                              "incremental", "pandas"])
    ap.add_argument("--out", type=Path, default=RESULTS / "engine_suite.json")
    ap.add_argument("--from-json", action="store_true",
                    help="only redraw the plot and print the table from --out")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--lakecep-run", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(json.loads(args.child))))
        return
    if args.lakecep_run:
        lakecep_process(*args.lakecep_run)
        return
    if args.from_json:
        report = json.loads(args.out.read_text())
        for entry in report["shapes"].values():
            entry["ratios"] = ratios(entry)
        args.out.write_text(json.dumps(report, indent=2) + "\n")
        plot(report, args.out.with_suffix(".png"))
        print(summary(report))
        return
    have_core, have_flink = CORE_PY.exists(), FLINK_PY.exists()
    report: dict[str, Any] = {
        "machine": machine(), "load_avg_start": list(os.getloadavg()),
        "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]),
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "git": subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True).stdout.strip(),
        "settings": {k: v for k, v in vars(args).items() if k not in ("child", "lakecep_run",
                                                                         "out")},
        "peers": {"core": "pycer 0.1.6" if have_core else "not installed",
                  "flink": _flink_version() if have_flink else "not installed"},
        "shapes": {}}
    report["settings"]["out"] = str(args.out)
    for name in args.shapes:
        shape = SHAPES[name]
        rows = size(shape.data, args.flights_rows if shape.data == "flights" else args.rows)
        print(f"{name} ({shape.data}, {rows:,} rows)", flush=True)
        entry: dict[str, Any] = {"data": shape.data, "query": shape.query, "note": shape.note}
        entry["verify"] = run_child({"shape": name, "mode": "verify",
                                     "path": str(data_file(shape.data,
                                                           min(args.verify_rows, rows))),
                                     "batch_rows": args.batch_rows})
        print(f"  verify: {entry['verify']}", flush=True)
        entry["batch"] = budgeted(shape, "batch", rows, args)
        for mode in ("general", "incremental", "incremental_table"):
            if mode.split("_")[0] not in args.skip:
                entry[mode] = budgeted(shape, mode, rows, args)
        if shape.pandas is not None and "pandas" not in args.skip:
            # on the rows of the batch measurement: ratios at the same size
            n = entry["batch"]["rows"]
            entry["pandas"] = run_child({"shape": name, "mode": "pandas", "reps": args.reps,
                                         "path": str(data_file(shape.data, n)),
                                         "batch_rows": 0})
            print(f"  {name:14s} pandas       rows={n:>10,} median="
                  f"{entry['pandas']['median_s']:8.3f}s {entry['pandas']['rows_per_s']:>12,}"
                  " rows/s", flush=True)
        for peer, runner, installed, rows_ in (
                ("core", core_run, have_core and shape.core is not None, args.core_rows),
                ("flink", flink_run, have_flink and shape.flink is not None, args.flink_rows)):
            if peer in args.skip or getattr(shape, peer) is None:
                continue
            if not installed:
                entry[peer] = {"skipped": f"not installed: benchmarks/{peer}/setup.sh"}
                continue
            try:  # a peer's failure is a result, not the end of the run
                entry[peer] = runner(shape, min(rows_, rows), args)
            except Exception as err:  # noqa: BLE001
                print(f"  {name:14s} {peer} FAILED: {err}", flush=True)
                entry[peer] = {"error": str(err)[-1500:]}
        entry["ratios"] = ratios(entry)
        print(f"  ratios: {entry['ratios']}", flush=True)
        report["shapes"][name] = entry
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=2) + "\n")  # partial results survive
    report["load_avg_end"] = list(os.getloadavg())
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    plot(report, args.out.with_suffix(".png"))
    print(summary(report))
    print(f"wrote {args.out} and {args.out.with_suffix('.png')}")


if __name__ == "__main__":
    main()
