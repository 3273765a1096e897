"""Priorities under overload (issue 16 item 5, docs/rules.md section 4): p95 gold micro-batch
latency per priority class, a 2x overload against the same classes without overload.

One Spark session in FAIR mode runs continuous gold (``gold.run(continuous=True)`` inside
``streaming.concurrently``, as ``lakecep run all --continuous`` does) with pattern rules of
two classes: ``rfid_abc`` (``priority = "high"``) and ``--low-rules`` copies of it
``abc_low1``, ... (``priority = "low"``), so two streams, ``gold_high`` (pool
``class_high``, weight 1000, minShare 1) and ``gold_low`` (``class_low``, weight 1). With
one low rule both classes do the same work, and at 2x the input the high rule alone needs
the whole app: no scheduler can keep its latency. With three (the default) high is a
quarter of the work, and at 2x needs half the app. A feeder appends RFID reads (A, B, C per tag) to
silver, one Delta file per append; ``max_files_per_trigger = 1``, so each stream's k-th
batch is the k-th append.

* **baseline** (no overload, same run): closed loop -- the next append only once both
  streams have processed the previous one. Its cycle time C is what the app processes.
* **overload**: open loop, one append every C / 2 (input at twice what the app processes).

Per class and phase: batch duration (``batchDuration``) and the batch's delay (its end
minus the time its append committed: queueing included), median and p95. The machine's
load (``os.getloadavg``) is recorded at start and end. Writes
``benchmarks/results/priorities.json`` and ``.png``::

    .venv/bin/python benchmarks/priorities.py --rows 2000 --baseline 8 --overload 14 --low-rules 3
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import statistics
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CLASSES = ("gold_high", "gold_low")


def p95(values: list[float]) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(0.95 * len(ordered) + 0.5) - 1))]


def write_queries(folder: Path, low_rules: int) -> None:
    from lakecep.queries import QUERIES_DIR

    folder.mkdir(parents=True)
    text = (QUERIES_DIR / "rfid_abc.toml").read_text()
    (folder / "rfid_abc.toml").write_text(text + 'priority = "high"\n')
    for i in range(1, low_rules + 1):
        (folder / f"abc_low{i}.toml").write_text(
            text.replace('id = "rfid_abc"', f'id = "abc_low{i}"') + 'priority = "low"\n')


class Feeder:
    """Appends ``rows`` silver events per call (tags x readers A, B, C), one file each."""

    def __init__(self, spark, settings, rows: int) -> None:  # noqa: ANN001
        from lakecep import schemas
        from lakecep.jobs.tables import LakeTable

        self.spark, self.rows = spark, rows - rows % 3  # (whole tags: A, B, C each)
        self.table = LakeTable(spark, settings, "silver.events").ensure()
        self.ddl = schemas.ddl("silver.events")
        self.appended: list[float] = []   # wall time (epoch s) each append committed
        self.n = 0

    def append(self) -> None:
        import pandas as pd

        k = self.n
        t0 = datetime(2026, 1, 1) + timedelta(hours=k)
        tags = self.rows // 3
        now = datetime.now(UTC).replace(tzinfo=None)
        frame = pd.DataFrame({
            "event_id": [f"e{k}-{i}" for i in range(tags * 3)],
            "object_id": [f"tag{i // 3}" for i in range(tags * 3)],
            "event_type": "read", "source_id": ["ABC"[i % 3] for i in range(tags * 3)],
            "event_time": [t0 + timedelta(seconds=i % 3) for i in range(tags * 3)],
            "time_lower": None, "time_upper": None, "pmf": None, "attributes": None,
            "source_file": f"bench-{k}", "line_no": list(range(tags * 3)),
            "ingest_time": now, "silver_time": now})
        df = self.spark.createDataFrame(frame, self.ddl.replace(" NOT NULL", ""))
        df.coalesce(1).write.format("delta").mode("append").save(self.table.path)
        self.appended.append(time.time())
        self.n += 1


def main() -> int:  # noqa: C901, PLR0915
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=2000, help="silver rows per append")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--baseline", type=int, default=8, help="closed-loop appends")
    parser.add_argument("--overload", type=int, default=14, help="appends at 2x the rate")
    parser.add_argument("--factor", type=float, default=2.0, help="overload factor")
    parser.add_argument("--low-rules", type=int, default=3,
                        help="low-class copies of the high rule (the low class's share)")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))

    from lakecep.config import load_settings
    from lakecep.jobs import gold
    from lakecep.jobs.spark import get_spark
    from lakecep.jobs.streaming import concurrently, reporting

    load_start = os.getloadavg()
    work = Path(tempfile.mkdtemp(prefix="lakecep-priorities-"))
    write_queries(work / "queries", args.low_rules)
    settings = dataclasses.replace(
        load_settings(), home=work / "home", queries_dir=str(work / "queries"),
        trigger_interval="1 second", max_files_per_trigger=1, tuning_apply=False,
        spark_quick_start=False)   # a long-lived app: full JIT (C1 only fills its code cache)
    spark = get_spark("lakecep-priorities", settings,
                      extra_conf={"spark.scheduler.mode": "FAIR"})
    feeder = Feeder(spark, settings, args.rows)
    logged: list[str] = []
    with reporting(log=logged.append), concurrently() as started:
        gold.run(spark, settings, continuous=True)
    handles = {h.name: h for h in started}
    assert sorted(handles) == sorted(CLASSES), handles
    batches: dict[str, dict[int, dict]] = {name: {} for name in handles}
    stop = threading.Event()

    def poll() -> None:
        while not stop.is_set():
            for name, handle in handles.items():
                for p in handle.recentProgress:
                    if int(p.get("numInputRows", 0)):
                        batches[name][int(p["batchId"])] = p
            stop.wait(0.5)

    def done(name: str) -> int:
        return sum(int(p["numInputRows"]) for p in batches[name].values()) // feeder.rows

    watcher = threading.Thread(target=poll, daemon=True)
    watcher.start()
    phases: list[str] = []

    def closed_loop(count: int, phase: str) -> list[float]:
        cycles = []
        for _ in range(count):
            start = time.time()
            feeder.append()
            phases.append(phase)
            while min(done(n) for n in handles) < feeder.n:
                for h in handles.values():
                    if not h.isActive:
                        raise RuntimeError(f"{h.name} stopped: {h.exception()}")
                time.sleep(0.2)
            cycles.append(time.time() - start)
            print(f"{phase}: append {feeder.n} processed by both in {cycles[-1]:.1f}s",
                  flush=True)
        return cycles

    closed_loop(args.warmup, "warmup")
    cycles = closed_loop(args.baseline, "baseline")
    cycle = statistics.median(cycles)
    interval = cycle / args.factor
    print(f"baseline cycle {cycle:.1f}s ({feeder.rows / cycle:.0f} rows/s); overload: one "
          f"append every {interval:.1f}s", flush=True)
    overload_start = time.time()
    for i in range(args.overload):
        target = overload_start + i * interval
        time.sleep(max(0.0, target - time.time()))
        feeder.append()
        phases.append("overload")
        print(f"overload: append {feeder.n}; processed high {done('gold_high')}, low "
              f"{done('gold_low')}", flush=True)
    deadline = time.time() + 6 * cycle   # let high finish what arrived (low lags)
    while done("gold_high") < feeder.n and time.time() < deadline:
        time.sleep(0.5)
    time.sleep(1.0)
    stop.set()
    watcher.join()
    final = {n: done(n) for n in handles}
    for handle in handles.values():
        handle.stop()
    spark.stop()
    load_end = os.getloadavg()

    def end_time(p: dict) -> float:
        started_at = datetime.fromisoformat(p["timestamp"].replace("Z", "+00:00"))
        return started_at.timestamp() + int(p["batchDuration"]) / 1000

    result: dict = {"classes": {}, "timeline": {}}
    for name, found in batches.items():
        ordered = [found[b] for b in sorted(found)]
        per_phase: dict[str, dict[str, list[float]]] = {}
        timeline = []
        for k, p in enumerate(ordered):   # the k-th non-empty batch is the k-th append
            if k >= len(phases) or int(p["numInputRows"]) != feeder.rows:
                continue
            phase = phases[k]
            delay = end_time(p) - feeder.appended[k]
            slot = per_phase.setdefault(phase, {"duration_s": [], "delay_s": []})
            slot["duration_s"].append(int(p["batchDuration"]) / 1000)
            slot["delay_s"].append(delay)
            timeline.append({"append": k, "phase": phase,
                             "appended_at": feeder.appended[k] - overload_start,
                             "done_at": end_time(p) - overload_start,
                             "duration_s": int(p["batchDuration"]) / 1000, "delay_s": delay})
        result["timeline"][name] = timeline
        result["classes"][name] = {
            phase: {"batches": len(v["duration_s"]),
                    **{f"{m}_{stat}": (f(v[m]) if v[m] else None)
                       for m in ("duration_s", "delay_s")
                       for stat, f in (("median", statistics.median), ("p95", p95))}}
            for phase, v in per_phase.items() if phase != "warmup"}
    summary = {}
    for name, phases_found in result["classes"].items():
        base, over = phases_found.get("baseline", {}), phases_found.get("overload", {})
        summary[name] = {
            f"{m}_p95_{ph}": d.get(f"{m}_p95") for m in ("duration_s", "delay_s")
            for ph, d in (("baseline", base), ("overload", over))}
        for m in ("duration_s", "delay_s"):
            if base.get(f"{m}_p95") and over.get(f"{m}_p95"):
                summary[name][f"{m}_p95_overload_over_baseline"] = (
                    over[f"{m}_p95"] / base[f"{m}_p95"])
    out = {
        "benchmark": "priorities", "created_at": datetime.now(UTC).isoformat(),
        "setup": {"rows_per_append": feeder.rows, "warmup": args.warmup,
                  "baseline_appends": args.baseline, "overload_appends": args.overload,
                  "overload_factor": args.factor, "baseline_cycle_s": cycle,
                  "high_rules": 1, "low_rules": args.low_rules,
                  "baseline_cycles_s": cycles, "overload_interval_s": interval,
                  "capacity_rows_per_s": feeder.rows / cycle,
                  "appended": feeder.n, "processed_at_end": final,
                  "pools": [m for m in logged if "priority" in m and "pools" in m]},
        "summary": summary, **result,
        "machine": {"cpus": os.cpu_count(), "load_average_1_5_15_start": load_start,
                    "load_average_1_5_15_end": load_end, "python": platform.python_version()},
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "priorities.json").write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps({"summary": summary, "setup": out["setup"], "machine": out["machine"]},
                     indent=1))
    plot(out, args.out / "priorities.png")
    return 0


def plot(out: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    colors = {"gold_high": "tab:red", "gold_low": "tab:blue"}
    for name, rows in out["timeline"].items():
        rows = [r for r in rows if r["phase"] != "warmup"]
        left.plot([r["done_at"] for r in rows], [r["delay_s"] for r in rows], "o-",
                  color=colors[name], label=f"{name} delay", markersize=3)
        left.plot([r["done_at"] for r in rows], [r["duration_s"] for r in rows], "x:",
                  color=colors[name], label=f"{name} batch duration", markersize=3)
    left.axvline(0, color="grey", linestyle="--")
    left.set_xlabel("seconds since the overload started (input at 2x what the app processes)")
    left.set_ylabel("seconds")
    left.set_title("per micro-batch: delay (append -> gold) and duration")
    left.legend(fontsize=8)
    names = list(out["summary"])
    labels = ["duration p95\nbaseline", "duration p95\noverload", "delay p95\nbaseline",
              "delay p95\noverload"]
    keys = ["duration_s_p95_baseline", "duration_s_p95_overload", "delay_s_p95_baseline",
            "delay_s_p95_overload"]
    width = 0.8 / len(names)
    for i, name in enumerate(names):
        values = [out["summary"][name].get(k) or 0 for k in keys]
        right.bar([x + i * width for x in range(len(keys))], values, width,
                  color=colors[name], label=name)
    right.set_xticks([x + width / 2 for x in range(len(keys))], labels, fontsize=8)
    right.set_ylabel("seconds")
    load = out["machine"]
    right.set_title(f"p95 per class (load avg start {load['load_average_1_5_15_start'][0]:.1f}"
                    f", end {load['load_average_1_5_15_end'][0]:.1f}; {load['cpus']} cpus)")
    right.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    raise SystemExit(main())
