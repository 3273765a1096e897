"""Silver's parse step, native (``jobs/silver_native.py``) against Python
(``jobs/silver.arrow_batches`` in ``mapInArrow``, silver's default), on the same
``lakecep generate`` lines.

For each size (default 20k and 100k lines, ``uncertain_share`` 0.05 so pmf and interval
rows are in), the generated files are cut into bronze rows exactly as bronze does
(``lakecep.events.judge_line``), put into one cached DataFrame (2 partitions), and each
parser's output is materialised the way ``jobs/silver.process_batch`` uses it: persisted
and read once in full (Spark's ``noop`` sink). Python: ``mapInArrow(arrow_batches)``;
native: ``silver_native.parse`` (Spark SQL, then one ``mapInArrow`` that passes the sure
rows on and parses the others with ``arrow_batches``). Both outputs are first compared
row for row (the script stops on a difference). Times: wall seconds and CPU seconds of
the Spark process tree (JVM + Python workers; less sensitive to other load), median of
``--runs`` runs, parsers interleaved. Output: ``benchmarks/results/silver_parse.{json,png}``
with the machine and its load average (the machine may be shared: compare the ratio).

    .venv/bin/python benchmarks/silver_parse.py                  # 20k and 100k, 3 runs
    .venv/bin/python benchmarks/silver_parse.py --sizes 5000 --runs 1 --out /tmp/x.json  # smoke
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


def machine() -> dict[str, object]:
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return {"cpus": os.cpu_count(), "memory_gib": round(mem, 1),
            "python": platform.python_version(), "platform": platform.platform()}


def cpu_seconds() -> float:
    """User + system CPU seconds of this process's children (the Spark JVM and its Python
    workers)."""
    import psutil

    total = 0.0
    for proc in psutil.Process().children(recursive=True):
        try:
            times = proc.cpu_times()
        except psutil.NoSuchProcess:
            continue
        total += times.user + times.system
    return total


def bronze_rows(spark, lines: list[bytes], max_line_bytes: int):  # noqa: ANN001, ANN201
    from lakecep.events import judge_line

    rows = []
    for n, line in enumerate(lines):
        raw, _, status, error = judge_line(line, max_line_bytes)
        rows.append((raw, status, error, "landing/events.jsonl", n + 1, None))
    frame = spark.createDataFrame(rows, "raw STRING, parse_status STRING, parse_error STRING, "
                                        "source_file STRING, line_no BIGINT, "
                                        "ingest_time TIMESTAMP").repartition(2).persist()
    frame.count()
    return frame


def python_parsed(bronze, max_line_bytes: int):  # noqa: ANN001, ANN201
    from lakecep.jobs.silver import PARSE_INPUT, PARSED_DDL, arrow_batches, arrow_schema

    return bronze.select(*PARSE_INPUT).mapInArrow(
        arrow_batches(max_line_bytes, arrow_schema()), PARSED_DDL)


def native_parsed(bronze, max_line_bytes: int):  # noqa: ANN001, ANN201
    from lakecep.jobs import silver_native

    return silver_native.parse(bronze, max_line_bytes)


def materialise(parsed) -> None:  # noqa: ANN001
    """As process_batch: persisted, then read in full."""
    parsed = parsed.persist()
    parsed.write.format("noop").mode("overwrite").save()
    parsed.unpersist()


def run_python(bronze, max_line_bytes: int) -> None:  # noqa: ANN001
    materialise(python_parsed(bronze, max_line_bytes))


def run_native(bronze, max_line_bytes: int) -> None:  # noqa: ANN001
    materialise(native_parsed(bronze, max_line_bytes))


def same_rows(bronze, max_line_bytes: int) -> dict[str, int]:  # noqa: ANN001
    """Both parsers' outputs, compared row for row; how many rows the native step left to
    Python."""
    from lakecep.jobs import silver_native
    from lakecep.jobs.silver import EVENT_COLUMNS

    columns = ["line_no", "ok", "reason", *EVENT_COLUMNS, "raw"]
    python = {r.line_no: r for r in python_parsed(bronze, max_line_bytes)
              .select(*columns).collect()}
    native = {r.line_no: r for r in native_parsed(bronze, max_line_bytes)
              .select(*columns).collect()}
    to_python = silver_native.native_frame(bronze).where("NOT _sure").count()
    differ = [n for n in python if python[n] != native.get(n)]
    if differ or len(native) != len(python):
        raise SystemExit(f"native and Python differ on {len(differ)} rows, e.g. line "
                         f"{differ[:1]}: {python[differ[0]] if differ else ''} vs "
                         f"{native.get(differ[0]) if differ else ''}")
    return {"rows": len(python), "rows_to_python": to_python,
            "valid": sum(1 for r in python.values() if r.ok)}


def measure(spark, size: int, runs: int, work: Path) -> dict[str, object]:  # noqa: ANN001
    from lakecep.events import landing_lines
    from lakecep.generate import generate

    landing = work / f"landing-{size}"
    summary = generate(landing, work / f"truth-{size}", events=size, uncertain_share=0.05,
                       lines_per_file=size)
    lines = [line for f in summary.files for line in landing_lines(f.read_bytes())]
    max_line_bytes = 65536
    bronze = bronze_rows(spark, lines, max_line_bytes)
    result: dict[str, object] = {"lines": len(lines), **same_rows(bronze, max_line_bytes)}
    for fn in (run_python, run_native):  # warm-up (JIT, Python workers)
        fn(bronze, max_line_bytes)
    samples: dict[str, dict[str, list[float]]] = {
        "python": {"wall_s": [], "cpu_s": []}, "native": {"wall_s": [], "cpu_s": []}}
    for _ in range(runs):
        for name, fn in (("python", run_python), ("native", run_native)):
            cpu, wall = cpu_seconds(), time.perf_counter()
            fn(bronze, max_line_bytes)
            samples[name]["wall_s"].append(round(time.perf_counter() - wall, 3))
            samples[name]["cpu_s"].append(round(cpu_seconds() - cpu, 3))
    bronze.unpersist()
    for name, got in samples.items():
        result[name] = {**got, **{f"median_{k}": statistics.median(v) for k, v in got.items()}}
    for unit in ("wall_s", "cpu_s"):
        result[f"python_over_native_{unit.removesuffix('_s')}"] = round(
            result["python"][f"median_{unit}"] / result["native"][f"median_{unit}"], 2)  # type: ignore[index]
    return result


def plot(report: dict[str, object], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = report["sizes"]
    assert isinstance(sizes, dict)
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, unit, label in ((axes[0], "wall_s", "wall seconds"), (axes[1], "cpu_s",
                                                                  "CPU seconds (Spark tree)")):
        names = list(sizes)
        for offset, parser in ((-0.2, "python"), (0.2, "native")):
            values = [sizes[n][parser][f"median_{unit}"] for n in names]
            bars = ax.bar([i + offset for i in range(len(names))], values, width=0.4,
                          label=parser)
            ax.bar_label(bars, fmt="%.2f")
        ax.set_xticks(range(len(names)), [f"{int(n):,} lines" for n in names])
        ax.set_ylabel(label)
        ax.legend()
    load = report["load_average"]
    assert isinstance(load, dict)
    fig.suptitle(f"silver parse step: Python vs native (median of {report['runs']}); load "
                 f"average {load['before'][0]:.1f} -> {load['after'][0]:.1f}")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[20_000, 100_000])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--out", type=Path, default=RESULTS / "silver_parse.json")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="lakecep-silver-parse-"))
    os.environ.setdefault("LAKECEP_HOME", str(work / "home"))

    from lakecep.config import load_settings
    from lakecep.jobs.spark import get_spark

    spark = get_spark("lakecep-silver-parse", load_settings(),
                      extra_conf={"spark.ui.enabled": "false"})
    load_before = os.getloadavg()
    sizes = {str(n): measure(spark, n, args.runs, work) for n in args.sizes}
    report = {
        "benchmark": "silver_parse", "runs": args.runs, "machine": machine(),
        "spark_master": spark.sparkContext.master,
        "load_average": {"before": [round(x, 2) for x in load_before],
                         "after": [round(x, 2) for x in os.getloadavg()]},
        # other work on the machine when the run began (the run's own Spark raises the
        # load after it): the figures are not the parsers' own (do not publish)
        "loaded": load_before[0] > 0.5 * (os.cpu_count() or 1),
        "sizes": sizes,
    }
    spark.stop()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    plot(report, args.out.with_suffix(".png"))
    if report["loaded"]:
        print("warning: the machine was loaded (load average above half its CPUs): "
              "compare the ratios only, and do not publish these figures")
    for n, r in sizes.items():
        print(f"{n} lines: python/native wall {r['python_over_native_wall']}x, "
              f"cpu {r['python_over_native_cpu']}x; {r['rows_to_python']} rows to Python")


if __name__ == "__main__":
    main()
