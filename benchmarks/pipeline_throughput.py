"""Bronze -> silver -> gold throughput on a generated RFID data set (default 1M events).

Lands the generated files in ``--batches`` waves (one wave: all files at once) and after
each wave runs bronze, silver and gold (availableNow, as the DAG does), timing each stage
of each wave; as the baseline in the same run, a plain Spark copy of all the files into
Delta (`spark.read.json(...).write.format("delta")`: no line identity, no checks, no
de-duplication, no CEP). At the end ``lakecep status`` compares gold with the generator's
truth (``checks`` in the JSON). Writes benchmarks/results/pipeline_throughput.{json,png}
(``--out`` another JSON path; the plot beside it).

    .venv/bin/python benchmarks/pipeline_throughput.py --events 1000000
    .venv/bin/python benchmarks/pipeline_throughput.py --events 1000000 --batches 10 \
        --out benchmarks/results/pipeline_throughput_batches.json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import shutil
import tempfile
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


def machine() -> dict[str, object]:
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return {"cpus": os.cpu_count(), "memory_gib": round(mem, 1),
            "python": platform.python_version(), "platform": platform.platform()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--batches", type=int, default=1,
                        help="waves of landing files, each followed by bronze, silver, gold")
    parser.add_argument("--home", type=Path, default=None, help="LAKECEP_HOME (default: temp)")
    parser.add_argument("--out", type=Path, default=RESULTS / "pipeline_throughput.json")
    args = parser.parse_args()
    if args.batches < 1:
        parser.error("--batches must be at least 1")
    home = args.home or Path(tempfile.mkdtemp(prefix="lakecep-bench-"))
    os.environ["LAKECEP_HOME"] = str(home)

    from lakecep.config import load_settings
    from lakecep.generate import generate
    from lakecep.jobs import bronze, gold, silver
    from lakecep.jobs.spark import get_spark
    from lakecep.jobs.status import lake_status

    settings = load_settings()
    stages: dict[str, float] = {}
    started = time.monotonic()
    staged = home / "staged"  # generated here, landed wave by wave
    summary = generate(staged, settings.truth_dir, events=args.events,
                       lines_per_file=min(50_000, -(-args.events // args.batches)))
    stages["generate"] = time.monotonic() - started
    lines = summary.counts["lines_written"]
    files = sorted(p for p in staged.iterdir() if p.is_file())
    if len(files) < args.batches:
        parser.error(f"{len(files)} files generated: fewer than --batches {args.batches}")
    waves = [files[i * len(files) // args.batches:(i + 1) * len(files) // args.batches]
             for i in range(args.batches)]
    print(f"generated {lines:,} lines in {len(files)} files in {stages['generate']:.1f}s; "
          f"{args.batches} waves", flush=True)

    spark = get_spark("lakecep-bench", settings)
    spark.range(1).collect()  # session warm-up is not part of any stage

    started = time.monotonic()
    baseline_path = str(home / "baseline_copy")
    spark.read.json(str(staged)).write.format("delta").save(baseline_path)
    baseline = time.monotonic() - started
    print(f"baseline copy: {baseline:.1f}s", flush=True)

    settings.landing.mkdir(parents=True, exist_ok=True)
    per_batch: list[dict[str, float]] = []
    for number, wave in enumerate(waves, 1):
        for path in wave:
            path.rename(settings.landing / path.name)
        seconds = {}
        for name, job in (("bronze", bronze), ("silver", silver), ("gold", gold)):
            started = time.monotonic()
            job.run(spark, settings)
            seconds[name] = time.monotonic() - started
            stages[name] = stages.get(name, 0.0) + seconds[name]
        per_batch.append({**seconds, "landing_to_gold": sum(seconds.values()),
                          "files": len(wave)})
        print(f"wave {number}/{len(waves)} ({len(wave)} files): " + ", ".join(
            f"{k} {v:.1f}s" for k, v in seconds.items()), flush=True)

    status = lake_status(spark, settings)
    spark.stop()
    pipeline = stages["bronze"] + stages["silver"] + stages["gold"]
    result = {
        "benchmark": "pipeline_throughput",
        "events_requested": args.events,
        "batches": args.batches,
        "landed_lines": lines,
        "counts": status.counts,
        "checks": [dataclasses.asdict(c) for c in status.checks],
        "landing_to_gold_s": pipeline,
        "plain_copy_s": baseline,
        "per_batch_s": per_batch,
        "seconds": {**stages, "baseline_plain_copy": baseline, "bronze_to_gold": pipeline},
        "rows_per_second": {
            "bronze_to_gold": lines / pipeline,
            "bronze": lines / stages["bronze"],
            "silver": lines / stages["silver"],
            "gold": lines / stages["gold"],
            "baseline_plain_copy": lines / baseline,
        },
        "ratio_pipeline_time_to_baseline": pipeline / baseline,
        "share_of_time": {k: stages[k] / pipeline for k in ("bronze", "silver", "gold")},
        "machine": machine(),
        "settings": {k: str(v) for k, v in dataclasses.asdict(settings).items()},
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2, default=str))

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3.5))
    names = ["baseline\nplain copy", "bronze", "silver", "gold"]
    values = [baseline, stages["bronze"], stages["silver"], stages["gold"]]
    ax.barh(names, values, color=["#999999", "#cd7f32", "#a8a9ad", "#d4af37"])
    for y, v in enumerate(values):
        ax.text(v, y, f" {v:.0f}s ({lines / v:,.0f} rows/s)", va="center", fontsize=8)
    ax.set_xlabel("seconds (lower is better)")
    ax.set_title(f"{lines:,} landed lines in {args.batches} waves, {machine()['cpus']} "
                 f"cores, local[2]: {pipeline / baseline:.1f}x the plain copy")
    ax.set_xlim(0, max(values) * 1.6)
    fig.tight_layout()
    fig.savefig(args.out.with_suffix(".png"), dpi=120)
    print(json.dumps(result["rows_per_second"], indent=2))
    if not args.home:
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
