"""Gold's cost per batch as history grows: incremental pattern state vs recomputing keys.

``lakecep generate`` writes the landing files of one scenario; the first ``--history``
files land at once (bronze, silver, gold: the lake's history), then the remaining files
land one per batch and each batch's ``gold`` run is timed. The same files run twice in one
Spark session, in two lakes: ``incremental`` (``incremental_patterns = true``,
jobs/match_state.py) and the baseline ``recompute`` (every touched key over its whole
history, each batch). Only ``rfid_abc`` runs (a pattern query). Per batch: gold seconds
and silver history rows read (incremental: from the gold log; recompute: the silver rows
of the batch's keys at the batch's version, counted outside the timing); the batch's
bronze and silver seconds too (silver de-duplicates against the whole history).
``--deletion-vectors both`` runs each mode twice, with deletion vectors on
``gold.complex_events`` (its declared property, ``schemas/tables.json``) and without (the
property left out of the lake's tables for that run; modes named ``<mode> dv on|off``).

Writes ``benchmarks/results/gold_batch_cost.json`` and ``.png``. Example (about 10 min on
2 cores)::

    .venv/bin/python benchmarks/gold_batch_cost.py --events 40000 --lines-per-file 1000 \
        --history 30
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import re
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=40_000)
    parser.add_argument("--lines-per-file", type=int, default=1000)
    parser.add_argument("--history", type=int, default=30, help="files landed as history")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    parser.add_argument("--files-per-trigger", type=int, default=50,
                        help="max_files_per_trigger while the history lands (micro-batches "
                             "of that many files; 2 GiB of driver heap held 1M lines)")
    parser.add_argument("--modes", default="incremental,recompute",
                        help="run order (the second mode runs on a warmer session)")
    parser.add_argument("--deletion-vectors", choices=("on", "off", "both"), default="on",
                        help="gold.complex_events' deletion vectors (both: on first, then "
                             "off, same files)")
    args = parser.parse_args()

    from lakecep import schemas
    from lakecep.config import load_settings
    from lakecep.generate import generate
    from lakecep.jobs import bronze, gold, silver
    from lakecep.jobs.spark import get_spark
    from lakecep.jobs.streaming import reporting
    from lakecep.jobs.tables import LakeTable
    from lakecep.queries import QUERIES_DIR

    root = Path(tempfile.mkdtemp(prefix="lakecep-goldcost-"))
    base = load_settings()
    staging = root / "staging"
    generate(staging, root / "truth", events=args.events, lines_per_file=args.lines_per_file)
    files = sorted(p for p in staging.iterdir() if p.is_file())
    if len(files) <= args.history:
        sys.exit(f"{len(files)} files: fewer than --history {args.history} + 1")
    queries = root / "queries"
    queries.mkdir()
    shutil.copy(QUERIES_DIR / "rfid_abc.toml", queries / "rfid_abc.toml")
    spark = get_spark("lakecep-gold-batch-cost", base)
    spark.range(1).collect()
    results: dict[str, list[dict[str, float]]] = {}
    gold_table = schemas.tables()["gold.complex_events"]
    declared = gold_table.get("properties", {})
    settings = ("on", "off") if args.deletion_vectors == "both" else (args.deletion_vectors,)
    runs = [(m, dv) for dv in settings for m in args.modes.split(",")]
    for kind, dv in runs:
        mode = f"{kind} dv {dv}" if len(settings) > 1 else kind
        # the lake's tables are made (and upgraded) from schemas.tables(): off = undeclared
        gold_table["properties"] = {**declared, "delta.enableDeletionVectors": "false"} \
            if dv == "off" else declared
        home = root / mode.replace(" ", "_")
        local = dataclasses.replace(base, home=home, queries_dir=str(queries),
                                    incremental_patterns=kind == "incremental",
                                    max_files_per_trigger=args.files_per_trigger)
        local.landing.mkdir(parents=True)
        lines: list[str] = []
        for f in files[:args.history]:
            shutil.copy(f, local.landing / f.name)
        with reporting(log=lines.append):
            for job in (bronze, silver, gold):
                job.run(spark, local)
        batches = []
        for f in files[args.history:]:
            shutil.copy(f, local.landing / f.name)
            silver_table = LakeTable(spark, local, "silver.events")
            before = silver_table.version()
            with reporting(log=lines.append):
                started = time.perf_counter()
                bronze.run(spark, local)
                bronze_s = time.perf_counter() - started
                silver.run(spark, local)
                silver_s = time.perf_counter() - started - bronze_s
                lines.clear()
                started = time.perf_counter()
                gold.run(spark, local)
                seconds = time.perf_counter() - started
            history = silver_table.read().count()
            if kind == "incremental":
                read = sum(int(m.group(1)) for line in lines
                           if (m := re.search(r"(\d+) history rows read", line)))
            else:  # the touched keys' rows at the pinned version (the recompute reads them)
                after = silver_table.version()
                new = silver_table.as_of(after).select("event_id").exceptAll(
                    silver_table.as_of(before).select("event_id"))
                keys = silver_table.as_of(after).join(new, "event_id", "left_semi").select(
                    "object_id").distinct()
                read = silver_table.as_of(after).join(keys, "object_id", "left_semi").count()
            batches.append({"file": f.name, "gold_s": round(seconds, 3),
                            "bronze_s": round(bronze_s, 3), "silver_s": round(silver_s, 3),
                            "load_average_1m": round(os.getloadavg()[0], 2),
                            "history_rows_read": read, "silver_rows": history})
            print(f"{mode} {f.name}: bronze {bronze_s:.1f}s, silver {silver_s:.1f}s, "
                  f"gold {seconds:.1f}s, {read} history rows read, silver rows {history}",
                  flush=True)
            results[mode] = batches
            args.out.mkdir(parents=True, exist_ok=True)  # kept if a later batch fails
            (args.out / "gold_batch_cost.partial.json").write_text(json.dumps(results))
    spark.stop()

    def median(mode: str, key: str) -> float:
        return float(statistics.median(b[key] for b in results[mode]))

    def tail_over_head(mode: str, count: int) -> float:
        """Median gold seconds of the last ``count`` batches over the first ``count``."""
        times = [b["gold_s"] for b in results[mode]]
        count = max(1, min(count, len(times) // 2))
        return round(statistics.median(times[-count:]) / statistics.median(times[:count]), 3)

    n = len(next(iter(results.values())))
    summary: dict[str, Any] = {
        "median_gold_s": {m: median(m, "gold_s") for m in results},
        "median_history_rows_read": {m: median(m, "history_rows_read") for m in results},
        "median_silver_s": {m: median(m, "silver_s") for m in results},
        "median_bronze_s": {m: median(m, "bronze_s") for m in results},
    }
    if "recompute" in results and "incremental" in results:
        summary["recompute_over_incremental_gold_s"] = round(
            median("recompute", "gold_s") / median("incremental", "gold_s"), 3)
    for mode in results:  # issue 15's test: the last 10 batches within 1.3x of the first 10
        summary[f"{mode}_last_over_first_half_gold_s"] = tail_over_head(mode, n // 2)
        summary[f"{mode}_last10_over_first10_gold_s"] = tail_over_head(mode, 10)
    for kind in args.modes.split(","):
        if f"{kind} dv on" in results and f"{kind} dv off" in results:
            summary[f"{kind}_dv_off_over_on_gold_s"] = round(
                median(f"{kind} dv off", "gold_s") / median(f"{kind} dv on", "gold_s"), 3)
    out = {"scenario": {"events": args.events, "lines_per_file": args.lines_per_file,
                        "history_files": args.history, "batches": n, "query": "rfid_abc",
                        "deletion_vectors": args.deletion_vectors},
           "machine": {"cpus": os.cpu_count(), "load_average_1_5_15_end": os.getloadavg(),
                       "python": platform.python_version(), "platform": platform.platform()},
           "files_per_trigger": args.files_per_trigger, "summary": summary, "batches": results}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "gold_batch_cost.json").write_text(json.dumps(out, indent=1) + "\n")
    (args.out / "gold_batch_cost.partial.json").unlink(missing_ok=True)
    print(json.dumps(summary, indent=1))

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    for mode, batches in results.items():
        x = [b["silver_rows"] for b in batches]
        left.plot(x, [b["gold_s"] for b in batches], marker="o", label=mode)
        right.plot(x, [b["history_rows_read"] for b in batches], marker="o", label=mode)
    left.set(xlabel="silver rows (history)", ylabel="gold seconds per batch")
    right.set(xlabel="silver rows (history)", ylabel="silver history rows read per batch")
    left.legend()
    fig.suptitle(f"gold batch cost: {', '.join(results)} (rfid_abc)")
    fig.tight_layout()
    fig.savefig(args.out / "gold_batch_cost.png", dpi=120)
    shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
