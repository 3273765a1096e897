"""Plan-based acquisition against Delta (issue 17 item 5, the Delta side).

Generated door-security data (per key: rare ``door_forced``, ``badge_denied``, rare
``fire_alarm``, frequent ``motion``; the rarest type is <= 1/100 of the most frequent),
written as a silver-like Delta table clustered by ``(event_type, event_time)`` (sorted, at
most ``--rows-per-file`` rows per file, so each file holds one type over a time range).
The pattern ``seq(door_forced, badge_denied, !fire_alarm, motion; 2 minutes)`` is acquired
by the gold job's Delta reader (``lakecep.jobs.gold_acquisition.DeltaSteps``) through
``cep_core.live_archive.acquire`` with three strategies:

* ``plan``: the cheapest plan within the latency bound (Algorithm 1, statistics measured
  from the data);
* ``frequency``: one type per step, rarest first (lazy evaluation, Kolchinsky & Schuster);
* ``all``: one step reading every type (pull everything).

Measured per strategy: rows read and Delta files read (scan metrics, summed over steps), the
complex events (must be identical), and predicted (``expected_reads``) vs measured rows.
Targets: plan reads >= 10x fewer rows and >= 5x fewer files than ``all``; predicted within
+-20 % of measured. Output: ``benchmarks/results/acquisition_delta.{json,png}``.

    .venv/bin/python benchmarks/acquisition_delta.py [--keys 60 --hours 8 --seeds 3]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

RESULTS = Path(__file__).resolve().parent / "results"
PATTERN = "seq(door_forced, badge_denied, !fire_alarm, motion; 2 minutes)"
#: events per second and key
RATES = {"door_forced": 0.00005, "badge_denied": 0.002, "fire_alarm": 0.0002, "motion": 0.05}
T0 = datetime(2026, 1, 1)


def generate(keys: int, hours: float, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    horizon = hours * 3600
    parts = []
    for k in range(keys):
        for kind, rate in RATES.items():
            n = rng.poisson(rate * horizon)
            seconds = np.round(rng.uniform(0, horizon, n), 3)
            parts.append(pd.DataFrame({"object_id": f"tag{k:03d}", "event_type": kind,
                                       "seconds": seconds}))
    frame = pd.concat(parts, ignore_index=True)
    frame["event_time"] = pd.Timestamp(T0) + pd.to_timedelta(frame.pop("seconds"), unit="s")
    frame["event_id"] = [f"e{seed}-{i}" for i in range(len(frame))]
    frame["ingest_time"] = frame["event_time"]
    return frame


def write_clustered(spark, frame: pd.DataFrame, path: str, rows_per_file: int):  # noqa: ANN001, ANN201
    df = spark.createDataFrame(frame[["event_id", "object_id", "event_type", "event_time",
                                      "ingest_time"]])
    (df.orderBy("event_type", "event_time").coalesce(1).write.format("delta")
     .option("maxRecordsPerFile", rows_per_file).mode("overwrite").save(path))
    return spark.read.format("delta").load(path)


def run_one(spark, history, frame: pd.DataFrame, keys: int, hours: float) -> dict[str, Any]:  # noqa: ANN001
    from cep_core.live_archive import acquire
    from cep_core.planning import complex_events, expected_reads, next_steps
    from lakecep.jobs.gold_acquisition import PAD_SECONDS, DeltaSteps, choose_plan, statistics_of
    from lakecep.queries import AcquisitionQuery

    horizon = hours * 3600
    counts = frame["event_type"].value_counts().to_dict()
    rates = {t: counts.get(t, 0) / horizon for t in RATES}  # all keys, as gold.statistics
    out: dict[str, Any] = {"rows_total": len(frame), "files_total": len(history.inputFiles()),
                           "rows_per_type": {t: int(counts.get(t, 0)) for t in RATES}}
    found: dict[str, list[Any]] = {}
    origin = int(pd.Timestamp(T0).value)
    key_list = sorted(frame["object_id"].unique())
    for acquisition in ("plan", "frequency", "all"):
        query = AcquisitionQuery(f"doors_{acquisition}", "1", "", key="object_id",
                                 pattern=PATTERN, acquisition=acquisition,
                                 latency_bound=timedelta(seconds=20),
                                 step_delay=timedelta(seconds=5))
        pattern = query.parsed()
        stats = statistics_of(query, rates, keys, horizon)
        plan, why = choose_plan(query, stats, acquisition)
        store = DeltaSteps(spark, history, query, origin,
                           ["event_id", "object_id", "event_type", "event_time",
                            "ingest_time"])
        began = time.perf_counter()
        got = acquire(len(plan.steps), next_steps(pattern, plan, 0.0, horizon, "object_id",
                                                  "_t", "event_type", key_list, PAD_SECONDS),
                      store, why)
        seconds = time.perf_counter() - began
        events = complex_events(pattern, got.rows, "object_id", "_t", "event_type", "event_id")
        found[acquisition] = [e.ids for e in events]
        predicted = expected_reads(pattern, plan, stats, replications=400)
        out[acquisition] = {
            "plan": [list(s) for s in plan.steps], "reason": why,
            "plan_latency_s": plan.latency, "planning_model_rows": plan.cost,
            "predicted_rows": float(sum(predicted)),
            "predicted_rows_per_step": predicted,
            "rows_read": int(sum(got.rows_per_step)), "rows_read_per_step": got.rows_per_step,
            "files_read": store.metrics.files_read, "files_per_step": store.files_per_step,
            "loads": sum(len(s) for s in got.plan.steps), "complex_events": len(events),
            "seconds": seconds,
        }
        out[acquisition]["predicted_over_measured"] = (
            out[acquisition]["predicted_rows"] / max(out[acquisition]["rows_read"], 1))
    out["same_complex_events"] = found["plan"] == found["all"] == found["frequency"]
    for name in ("plan", "frequency"):
        out[f"{name}_rows_ratio_vs_all"] = out["all"]["rows_read"] / max(
            out[name]["rows_read"], 1)
        out[f"{name}_files_ratio_vs_all"] = out["all"]["files_read"] / max(
            out[name]["files_read"], 1)
    return out


def plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = result["runs"]
    names = ["all", "frequency", "plan"]
    fig, axes = plt.subplots(1, 3, figsize=(14, 4))
    for ax, metric, label in ((axes[0], "rows_read", "rows read"),
                              (axes[1], "files_read", "Delta files read")):
        for n, name in enumerate(names):
            values = [r[name][metric] for r in runs]
            ax.bar(np.arange(len(runs)) + (n - 1) * 0.27, values, 0.27, label=name)
        ax.set_yscale("log")
        ax.set_xticks(range(len(runs)), [f"seed {r['seed']}" for r in runs])
        ax.set_title(label)
        ax.legend()
    ax = axes[2]
    for name in names:
        xs = [r[name]["rows_read"] for r in runs]
        ys = [r[name]["predicted_rows"] for r in runs]
        ax.scatter(xs, ys, label=name)
    lim = [1, max(max(r["all"]["rows_read"], r["all"]["predicted_rows"]) for r in runs) * 2]
    ax.plot(lim, lim, "k--", lw=0.8)
    ax.fill_between(lim, [v * 0.8 for v in lim], [v * 1.2 for v in lim], alpha=0.15,
                    color="grey", label="+-20 %")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("measured rows")
    ax.set_ylabel("predicted rows")
    ax.set_title("predicted vs measured")
    ax.legend()
    fig.suptitle(f"{PATTERN} on Delta clustered by (event_type, event_time)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--keys", type=int, default=60)
    parser.add_argument("--hours", type=float, default=8.0)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--rows-per-file", type=int, default=1000)
    parser.add_argument("--name", default="acquisition_delta", help="results file name")
    args = parser.parse_args()
    from lakecep.config import load_settings
    from lakecep.jobs.spark import get_spark

    started = time.perf_counter()
    home = Path(tempfile.mkdtemp(prefix="acq_delta_"))
    os.environ.setdefault("LAKECEP_HOME", str(home))
    settings = dataclasses.replace(load_settings(), home=home)
    spark = get_spark("acquisition-delta-benchmark", settings)
    runs = []
    for seed in range(args.seeds):
        frame = generate(args.keys, args.hours, seed)
        history = write_clustered(spark, frame, str(home / f"silver_{seed}"), args.rows_per_file)
        run = run_one(spark, history, frame, args.keys, args.hours)
        run["seed"] = seed
        runs.append(run)
        print(json.dumps({k: v for k, v in run.items()
                          if "ratio" in k or k == "same_complex_events"}))
    rows = [r["plan_rows_ratio_vs_all"] for r in runs]
    files = [r["plan_files_ratio_vs_all"] for r in runs]
    pred = [r[s]["predicted_over_measured"] for r in runs for s in ("plan", "frequency", "all")]
    result = {
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(),
                    "load_average": os.getloadavg()},
        "setup": {"pattern": PATTERN, "rates_per_key_s": RATES, "keys": args.keys,
                  "hours": args.hours, "rows_per_file": args.rows_per_file,
                  "rarest_over_most_frequent": min(RATES.values()) / max(RATES.values()),
                  "clustering": "sorted by (event_type, event_time), one type per file range",
                  "latency_bound_s": 20, "step_delay_s": 5},
        "runs": runs,
        "summary": {
            "rows_ratio_plan_vs_all": {"min": min(rows), "median": float(np.median(rows))},
            "files_ratio_plan_vs_all": {"min": min(files), "median": float(np.median(files))},
            "predicted_over_measured": {"min": min(pred), "max": max(pred)},
            "same_complex_events": all(r["same_complex_events"] for r in runs),
        },
        "seconds": time.perf_counter() - started,
    }
    s = result["summary"]
    result["verdict"] = (
        f"plan vs pull-everything: {s['rows_ratio_plan_vs_all']['min']:.0f}x fewer rows (target "
        f">= 10x), {s['files_ratio_plan_vs_all']['min']:.1f}x fewer files (target >= 5x), min "
        f"over {len(runs)} seeds; predicted/measured rows "
        f"{s['predicted_over_measured']['min']:.2f}..{s['predicted_over_measured']['max']:.2f} "
        f"(target 0.8..1.2); same complex events: {s['same_complex_events']}")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{args.name}.json").write_text(json.dumps(result, indent=1, default=str))
    plot(result, RESULTS / f"{args.name}.png")
    print(result["verdict"])
    spark.stop()


if __name__ == "__main__":
    main()
