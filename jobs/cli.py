"""The ``lakecep`` command line: generate data, run jobs, query the lake, check counts.

The top of the house: it stands on the jobs (``lakecep run <job>``) and on the pure pipeline
code in ``lakecep`` (generators, settings); nothing imports it. Console script ``lakecep``,
or ``python -m lakecep.jobs.cli``. Heavy imports (pyspark, pandas, cep_core) happen inside
the commands, so ``--help`` is fast.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from collections.abc import Sequence
from typing import Any, Protocol

from lakecep.config import ConfigError, Settings, load_settings

#: The jobs of ``lakecep run all`` (the lakecep_pipeline DAG), in order.
JOBS = ("bronze", "silver", "optimize", "gold", "quality")
#: Jobs of the tuning loop (the lakecep_tuning DAG), not part of ``run all``.
TUNING_JOBS = ("statistics", "tune")


class Job(Protocol):
    """What every job module's ``run`` looks like."""

    def __call__(self, spark: Any, settings: Settings, *, run_id: str | None = None,
                 continuous: bool = False) -> object: ...


def job_runners() -> dict[str, Job]:
    """Every job's ``run`` by name (:data:`JOBS` and :data:`TUNING_JOBS`). The job modules
    are imported here, when a job runs, so that ``lakecep --help`` stays fast."""
    from . import bronze, gold, optimize, quality, silver, statistics, tune

    return {"bronze": bronze.run, "silver": silver.run, "optimize": optimize.run,
            "gold": gold.run, "quality": quality.run, "statistics": statistics.run,
            "tune": tune.run}


def _spark(settings: Settings, app: str):  # noqa: ANN202
    from .spark import get_spark

    return get_spark(app, settings)


def cmd_generate(args: argparse.Namespace, settings: Settings) -> int:
    from lakecep.generate import generate

    started = time.monotonic()
    if args.kind == "stock":
        from lakecep.ticks import ticks, write_landing

        frame = ticks(symbols=args.symbols, hours=args.hours, seed=args.seed)
        files = write_landing(frame, settings.landing, lines_per_file=args.lines_per_file,
                              overwrite=args.clean)
        print(f"generated {len(frame)} stock ticks of {args.symbols} symbols in {len(files)} "
              f"files under {settings.landing} in {time.monotonic() - started:.1f}s; run the "
              "stock example with LAKECEP_QUERIES_DIR=queries/examples")
        return 0

    if args.kind == "uncertain":
        from lakecep.uncertain_events import parcels, write_landing

        frame = parcels(args.parcels, seed=args.seed, max_width=args.max_width)
        files = write_landing(frame, settings.landing, settings.truth_dir,
                              lines_per_file=args.lines_per_file, overwrite=args.clean)
        print(f"generated {len(frame)} uncertain events of {args.parcels} parcels in "
              f"{len(files)} files under {settings.landing} in "
              f"{time.monotonic() - started:.1f}s; exact probabilities in "
              f"{settings.truth_dir / 'uncertain_truth.json'}; run the example with "
              "LAKECEP_QUERIES_DIR=queries/examples")
        return 0

    def progress(done: int, total: int) -> None:
        print(f"\r  wrote file {done}/{total}", end="", file=sys.stderr, flush=True)

    summary = generate(
        settings.landing,
        settings.truth_dir,
        events=args.events,
        seed=args.seed,
        lines_per_file=args.lines_per_file,
        rate_per_hour=args.rate_per_hour,
        mean_transit_hours=args.mean_transit_hours,
        duplicate_share=args.duplicate_share,
        malformed_share=args.malformed_share,
        missing_share=args.missing_share,
        wrong_type_share=args.wrong_type_share,
        late_share=args.late_share,
        out_of_order_share=args.out_of_order_share,
        overwrite=args.clean,
        progress=progress,
    )
    print(file=sys.stderr)
    counts = summary.counts
    print(f"generated {counts['lines_written']} lines in {counts['files']} files under "
          f"{settings.landing} in {time.monotonic() - started:.1f}s")
    print(f"ground truth: {settings.truth_dir / 'truth.json'}")
    print(json.dumps(counts, indent=2, default=str))
    return 0


def cmd_run(args: argparse.Namespace, settings: Settings) -> int:
    runners = job_runners()
    jobs = JOBS if args.job == "all" else (args.job,)
    spark = _spark(settings, f"lakecep-{args.job}")
    try:
        for job in jobs:
            started = time.monotonic()
            print(f"==> {job}", file=sys.stderr, flush=True)
            result = runners[job](spark, settings, run_id=args.run_id,
                                  continuous=args.continuous)
            print(result)
            print(f"    {job} done in {time.monotonic() - started:.1f}s", file=sys.stderr)
    finally:
        spark.stop()
    return 0


def cmd_sql(args: argparse.Namespace, settings: Settings) -> int:
    from lakecep.spark import sql as spark_sql  # MATCH_RECOGNIZE clauses (docs/spark.md)

    from .catalog import register_tables

    spark = _spark(settings, "lakecep-sql")
    try:
        registered = register_tables(spark, settings)
        # PySpark also logs failed queries as JSON; the error below says it once, clearly.
        logging.getLogger("SQLQueryContextLogger").setLevel(logging.CRITICAL)
        try:
            frame = spark_sql(spark, args.query)
        except Exception as exc:
            if "TABLE_OR_VIEW_NOT_FOUND" not in str(exc):
                raise
            known = ", ".join(registered) or "none yet (run `lakecep run all` first)"
            raise LookupError(f"{str(exc).splitlines()[0]}\ntables under {settings.lake}: "
                              f"{known}") from None
        if args.format == "table":
            frame.show(args.limit, truncate=args.truncate)
        else:
            rows = frame.limit(args.limit).toPandas()
            out = rows.to_csv(index=False) if args.format == "csv" else rows.to_json(
                orient="records", lines=True, date_format="iso")
            sys.stdout.write(out)
    finally:
        spark.stop()
    return 0


def cmd_status(args: argparse.Namespace, settings: Settings) -> int:
    from .status import lake_status

    spark = _spark(settings, "lakecep-status")
    try:
        report = lake_status(spark, settings)
    finally:
        spark.stop()
    print(report)
    return 0 if report.ok or not args.strict else 1


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lakecep",
        description="Complex event processing for the lakehouse. Tables and files live under "
        "$LAKECEP_HOME (default ./.lakecep); settings: $LAKECEP_HOME/lakecep.toml or "
        "LAKECEP_<KEY> environment variables (docs/configuration.md).",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    gen = sub.add_parser("generate", help="write a synthetic RFID scenario into the landing folder",
                         description="Write a seeded RFID supply-chain scenario (tags passing "
                         "readers A -> B -> C -> D, with duplicates, malformed lines, late and "
                         "out-of-order events) into $LAKECEP_HOME/landing/events, and its "
                         "ground truth into $LAKECEP_HOME/landing/_truth/truth.json.")
    gen.add_argument("--kind", choices=("rfid", "stock", "uncertain"), default="rfid",
                     help="rfid: the RFID scenario (default); stock: stock ticks with planted "
                     "falls and check-marks for queries/examples/stock_check.toml; uncertain: "
                     "parcels with interval timestamps and pmfs for "
                     "queries/examples/uncertain_inspection.toml (truth with exact "
                     "probabilities in _truth/uncertain_truth.json)")
    gen.add_argument("--symbols", type=int, default=20, help="--kind stock: number of symbols")
    gen.add_argument("--parcels", type=int, default=40, help="--kind uncertain: parcels")
    gen.add_argument("--max-width", type=int, default=1,
                     help="--kind uncertain: most minutes an interval reaches on each side of "
                     "the true time")
    gen.add_argument("--hours", type=float, default=48.0, help="--kind stock: hours of ticks")
    gen.add_argument("--events", type=int, default=20_000, help="approximate number of lines")
    gen.add_argument("--seed", type=int, default=7, help="random seed (same seed, same files)")
    gen.add_argument("--lines-per-file", type=int, default=5_000, help="lines per landing file")
    gen.add_argument("--rate-per-hour", type=float, default=100.0,
                     help="Poisson rate of tags entering at reader A (tags/hour)")
    gen.add_argument("--mean-transit-hours", type=float, default=3.0,
                     help="mean time between consecutive readers")
    for share, default, what in (
        ("duplicate", 0.02, "extra copies of already-sent events (same event_id)"),
        ("malformed", 0.005, "lines that are not valid JSON"),
        ("missing", 0.005, "events with a required field missing"),
        ("wrong-type", 0.005, "events with a field of the wrong type"),
        ("late", 0.02, "events that arrive several files late"),
        ("out-of-order", 0.03, "events shuffled within their file"),
    ):
        gen.add_argument(f"--{share}-share", type=float, default=default,
                         help=f"share of {what} (default {default})")
    gen.add_argument("--clean", action="store_true",
                     help="replace generated files already in the landing folder")
    gen.set_defaults(func=cmd_generate)

    run = sub.add_parser("run", help="run a job (bronze, silver, optimize, gold, quality, all; "
                         "statistics, tune)",
                         description="Run a job on what has landed and exit (availableNow), or "
                         "keep running with --continuous. Jobs are idempotent: re-running or "
                         "restarting after a crash neither loses nor duplicates rows. `all` runs "
                         f"{', '.join(JOBS)}; the tuning loop runs statistics (measure silver "
                         "and gold into gold.statistics) then tune (write the next "
                         "$LAKECEP_HOME/tuning/config-vN.json, which gold applies).")
    run.add_argument("job", choices=(*JOBS, *TUNING_JOBS, "all"))
    run.add_argument("--run-id", default=None, help="id recorded with quality results and "
                     "statistics (default: a timestamp)")
    run.add_argument("--continuous", action="store_true",
                     help="processing-time trigger (settings.trigger_interval) until stopped")
    run.set_defaults(func=cmd_run)

    sql = sub.add_parser("sql", help="run Spark SQL over the lake's tables",
                         description="Run a Spark SQL query. Tables are registered by name: "
                         "bronze.events, silver.events, silver.quarantine, silver.duplicates, "
                         "gold.complex_events, gold.quality_results, gold.statistics, "
                         "gold.allocations, ... (Delta time travel: "
                         "... FROM silver.events VERSION AS OF 3). A table or (subquery) in "
                         "FROM may be followed by MATCH_RECOGNIZE (...) (docs/spark.md).")
    sql.add_argument("query")
    sql.add_argument("--limit", type=int, default=50, help="rows to show (default 50)")
    sql.add_argument("--format", choices=("table", "csv", "json"), default="table")
    sql.add_argument("--truncate", type=int, default=40, help="column width for --format table")
    sql.set_defaults(func=cmd_sql)

    status = sub.add_parser("status", help="table counts, reconciliation and gold vs ground truth",
                            description="Count every table, check landed = bronze = silver + "
                            "duplicates + quarantine, and compare gold with the generator's "
                            "ground truth when there is one.")
    status.add_argument("--strict", action="store_true", help="exit 1 if any check fails")
    status.set_defaults(func=cmd_status)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if getattr(args, "run_id", "x") is None:
        args.run_id = time.strftime("manual__%Y%m%dT%H%M%S")
    try:
        settings = load_settings()
    except ConfigError as exc:
        print(f"lakecep: configuration error: {exc}", file=sys.stderr)
        return 2
    try:
        return int(args.func(args, settings))
    except Exception as exc:  # noqa: BLE001 - top level: trace for logs, then one clear line
        import traceback

        if not _is_user_error(exc):
            traceback.print_exc()
        print(f"lakecep {args.command}: error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1


def _is_user_error(exc: Exception) -> bool:
    """Errors whose message says everything (bad query, bad config): no traceback."""
    from lakecep.queries import QueryDefinitionError

    names = {"QueryError", "TuningError"}
    if isinstance(exc, KeyError | IndexError):  # LookupErrors that are bugs, not advice
        return False
    return (isinstance(exc, ConfigError | QueryDefinitionError | LookupError)
            or type(exc).__name__ in names)


if __name__ == "__main__":
    sys.exit(main())
