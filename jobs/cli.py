"""The ``lakecep`` command line: generate data, run jobs, query the lake, check counts.

The top of the house: it stands on the jobs (``lakecep run <job>``) and on the pure pipeline
code in ``lakecep`` (generators, settings, ``lakecep.console`` for tables, progress and
errors); nothing imports it. Console script ``lakecep``, or ``python -m lakecep.jobs.cli``.
Built on typer (click) and rich. Each command is a thin wrapper around functions in other
modules. Heavy imports (pyspark, pandas, cep_core) happen inside the commands, so
``--help`` and ``--version`` are fast.

Exit codes: 0 done; 1 the command failed (or ``status --strict`` found a failed check, or
``validate`` found a problem);
2 bad usage or configuration.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Annotated, Any, Protocol

import typer
from rich.markup import escape

from lakecep import console
from lakecep.config import ConfigError, Settings, load, parse_overrides, unknown_environment

#: The jobs of ``lakecep run all`` (the lakecep_pipeline DAG), in order.
JOBS = ("bronze", "silver", "optimize", "gold", "quality")
#: Jobs of the tuning loop (the lakecep_tuning DAG), not part of ``run all``.
TUNING_JOBS = ("statistics", "tune")
#: Housekeeping (the daily lakecep_maintenance DAG): retention check, compaction, VACUUM.
MAINTENANCE_JOBS = ("maintain",)


class Job(Protocol):
    """What every job module's ``run`` looks like."""

    def __call__(self, spark: Any, settings: Settings, *, run_id: str | None = None,
                 continuous: bool = False) -> object: ...


def job_runners() -> dict[str, Job]:
    """Every job's ``run`` by name (:data:`JOBS`, :data:`TUNING_JOBS`,
    :data:`MAINTENANCE_JOBS`). The job modules are imported here, when a job runs, so that
    ``lakecep --help`` stays fast."""
    from . import bronze, gold, maintain, optimize, quality, silver, statistics, tune

    return {"bronze": bronze.run, "silver": silver.run, "optimize": optimize.run,
            "gold": gold.run, "quality": quality.run, "statistics": statistics.run,
            "tune": tune.run, "maintain": maintain.run}


@dataclass
class _State:
    """Global options of this invocation (set by the root callback)."""

    debug: bool = False
    overrides: dict[str, Any] = field(default_factory=dict)
    set_pairs: list[str] = field(default_factory=list)


STATE = _State()


def settings() -> Settings:
    """Settings of this invocation: defaults < file < environment < ``--home``/``--set``."""
    return _loaded().settings


def _loaded():  # noqa: ANN202 - lakecep.config.Loaded
    overrides = {**parse_overrides(STATE.set_pairs), **STATE.overrides}
    if STATE.debug:
        overrides.setdefault("spark_log_level", "warn")
    for warning in unknown_environment():
        console.err.print(f"[yellow]warning:[/] {warning}")
    return load(overrides=overrides)


def _spark(cfg: Settings, app: str):  # noqa: ANN202
    from .spark import get_spark

    with console.err.status(f"starting Spark ({cfg.spark_master})", spinner="dots") \
            if console.err.is_terminal else _nothing():
        return get_spark(app, cfg)


class _nothing:  # noqa: N801 - a null context manager that reads like one
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        def v(name: str) -> str:
            try:
                return version(name)
            except PackageNotFoundError:
                return "not installed"

        print(f"lakecep {v('lakecep')} (Python {sys.version.split()[0]}, PySpark "
              f"{v('pyspark')}, Delta {v('delta-spark')}, Great Expectations "
              f"{v('great-expectations')})")
        raise typer.Exit()


def _flag(name: str, help: str) -> Any:  # noqa: A002 - typer's word
    """An on/off option (no value, no type shown)."""
    return typer.Option(name, metavar="", help=help)


app = typer.Typer(
    name="lakecep",
    help="Complex event processing for the lakehouse. Tables and files live under "
    "$LAKECEP_HOME (default ./.lakecep); settings: $LAKECEP_HOME/lakecep.toml, LAKECEP_<KEY> "
    "environment variables or --set key=value (docs/configuration.md; `lakecep config` "
    "shows them).",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode="markdown",
    context_settings={"help_option_names": ["-h", "--help"]},
)


@app.callback()
def root(
    version: Annotated[bool, typer.Option("--version", metavar="", callback=_version,
                                          is_eager=True, help="print the versions and "
                                          "exit")] = False,
    debug: Annotated[bool, _flag("--debug", "show tracebacks and Spark's own "
                                        "warnings (spark_log_level=warn)")] = False,
    home: Annotated[str | None, typer.Option("--home", metavar="PATH",
                                             help="lakecep home (overrides $LAKECEP_HOME)")]
    = None,
    set_: Annotated[list[str] | None, typer.Option(
        "--set", metavar="KEY=VALUE", help="override a setting for this command (repeatable; "
        "wins over file and environment)")] = None,
) -> None:
    STATE.debug = debug or os.environ.get("LAKECEP_DEBUG", "") not in ("", "0")
    STATE.set_pairs = list(set_ or [])
    STATE.overrides = {"home": home} if home else {}


# ---------------------------------------------------------------------------- generate
class Kind(StrEnum):
    rfid = "rfid"
    stock = "stock"
    uncertain = "uncertain"


def _share(what: str, default: float) -> Any:
    return typer.Option(min=0.0, max=1.0, help=f"share of {what} (default {default})")


@app.command()
def generate(
    kind: Annotated[Kind, typer.Option(help="rfid: the RFID scenario (default); stock: stock "
                    "ticks with planted falls and check-marks for queries/examples/"
                    "stock_check.toml; uncertain: parcels with interval timestamps and pmfs for "
                    "queries/examples/uncertain_inspection.toml (truth with exact probabilities "
                    "in _truth/uncertain_truth.json)")] = Kind.rfid,
    symbols: Annotated[int, typer.Option(min=1, help="--kind stock: number of symbols")] = 20,
    parcels: Annotated[int, typer.Option(min=1, help="--kind uncertain: parcels")] = 40,
    max_width: Annotated[int, typer.Option(min=0, help="--kind uncertain: most minutes an "
                         "interval reaches on each side of the true time")] = 1,
    hours: Annotated[float, typer.Option(min=0.0, help="--kind stock: hours of ticks")] = 48.0,
    events: Annotated[int, typer.Option(min=1, help="approximate number of lines")] = 20_000,
    seed: Annotated[int, typer.Option(help="random seed (same seed, same files)")] = 7,
    lines_per_file: Annotated[int, typer.Option(min=1, help="lines per landing file")] = 5_000,
    rate_per_hour: Annotated[float, typer.Option(min=0.0, help="Poisson rate of tags entering "
                             "at reader A (tags/hour)")] = 100.0,
    mean_transit_hours: Annotated[float, typer.Option(min=0.0, help="mean time between "
                                  "consecutive readers")] = 3.0,
    duplicate_share: Annotated[float, _share("extra copies of already-sent events (same "
                               "event_id)", 0.02)] = 0.02,
    malformed_share: Annotated[float, _share("lines that are not valid JSON", 0.005)] = 0.005,
    missing_share: Annotated[float, _share("events with a required field missing",
                             0.005)] = 0.005,
    wrong_type_share: Annotated[float, _share("events with a field of the wrong type",
                                0.005)] = 0.005,
    late_share: Annotated[float, _share("events that arrive several files late",
                          0.02)] = 0.02,
    out_of_order_share: Annotated[float, _share("events shuffled within their file",
                                  0.03)] = 0.03,
    clean: Annotated[bool, _flag("--clean", "replace generated files already in "
                     "the landing folder")] = False,
    json_out: Annotated[bool, _flag("--json", "print the result as JSON")] = False,
) -> int:
    """Write a synthetic scenario into the landing folder.

    The RFID scenario: tags passing readers A -> B -> C -> D, with duplicates, malformed
    lines, late and out-of-order events, into $LAKECEP_HOME/landing/events, and its ground
    truth into $LAKECEP_HOME/landing/_truth/truth.json.
    """
    cfg = settings()
    from lakecep.config import local_only

    local_only(cfg.landing, "`lakecep generate` (it writes local files: generate into a local "
               "landing_dir and copy the files to the object store)")
    started = time.monotonic()
    if kind is not Kind.rfid:
        from lakecep import ticks, uncertain_events

        if kind is Kind.stock:
            frame = ticks.ticks(symbols=symbols, hours=hours, seed=seed)
            files = ticks.write_landing(frame, cfg.landing, lines_per_file=lines_per_file,
                                        overwrite=clean)
            what, extra = f"stock ticks of {symbols} symbols", {}
        else:
            frame = uncertain_events.parcels(parcels, seed=seed, max_width=max_width)
            files = uncertain_events.write_landing(frame, cfg.landing, cfg.truth_dir,
                                                   lines_per_file=lines_per_file,
                                                   overwrite=clean)
            what = f"uncertain events of {parcels} parcels"
            extra = {"truth": str(cfg.truth_dir / "uncertain_truth.json")}
        result = {"kind": kind.value, "lines": len(frame), "files": len(files),
                  "landing": str(cfg.landing), "seconds": round(time.monotonic() - started, 2),
                  **extra}
        if json_out:
            console.emit_json(result)
        else:
            console.say(f"generated {len(frame)} {what} in {len(files)} files under "
                        f"{cfg.landing} in {result['seconds']:.1f}s; run the example "
                        "with LAKECEP_QUERIES_DIR=queries/examples")
            if extra:
                console.say(f"exact probabilities in {extra['truth']}")
        return 0

    from lakecep.generate import generate as write_scenario

    with console.progress(disable=json_out) as bar:
        task = bar.add_task("writing landing files", total=None)
        summary = write_scenario(
            cfg.landing, cfg.truth_dir, events=events, seed=seed,
            lines_per_file=lines_per_file, rate_per_hour=rate_per_hour,
            mean_transit_hours=mean_transit_hours, duplicate_share=duplicate_share,
            malformed_share=malformed_share, missing_share=missing_share,
            wrong_type_share=wrong_type_share, late_share=late_share,
            out_of_order_share=out_of_order_share, overwrite=clean,
            progress=lambda done, total: bar.update(task, completed=done, total=total),
        )
    counts = summary.counts
    seconds = time.monotonic() - started
    truth = cfg.truth_dir / "truth.json"
    if json_out:
        console.emit_json({"kind": "rfid", "lines": counts["lines_written"],
                           "files": counts["files"], "landing": str(cfg.landing),
                           "truth": str(truth), "seconds": round(seconds, 2),
                           "counts": counts})
        return 0
    console.say(f"generated {counts['lines_written']} lines in {counts['files']} files "
                f"under {cfg.landing} in {seconds:.1f}s")
    console.say(f"ground truth: {truth}")
    console.out.print(console.counts_table(counts, title="what was generated"))
    return 0


# --------------------------------------------------------------------------------- run
JobName = StrEnum("JobName", {name: name for name in (*JOBS, *TUNING_JOBS, *MAINTENANCE_JOBS,
                                                     "all")})


@app.command()
def run(
    job: Annotated[JobName, typer.Argument(help="bronze, silver, optimize, gold, quality, all "
                   "(those five in order); statistics, tune (the tuning loop); maintain "
                   "(retention check, compaction, VACUUM)")],
    run_id: Annotated[str | None, typer.Option(help="id recorded with quality results and "
                      "statistics (default: a timestamp)")] = None,
    continuous: Annotated[bool, _flag("--continuous", "processing-time trigger "
                          "(settings.trigger_interval) until stopped")] = False,
    json_out: Annotated[bool, _flag("--json", "print the run summary as "
                        "JSON")] = False,
    query: Annotated[str | None, typer.Option(metavar="QUERY_ID", help="gold only: run just "
                     "this query, as its own stream (own checkpoint; one Airflow task per "
                     "query)")] = None,
) -> int:
    """Run a job on what has landed and exit (availableNow), or keep running (--continuous).

    Jobs are idempotent: re-running or restarting after a crash neither loses nor
    duplicates rows. `all` runs bronze, silver, optimize, gold, quality; the tuning loop
    runs statistics (measure silver and gold into gold.statistics) then tune (write the next
    $LAKECEP_HOME/tuning/config-vN.json, which gold applies); maintain checks the Delta
    retention against the queries' time-travel horizons, compacts small files and VACUUMs
    every table (daily, docs/architecture.md "Housekeeping"). Prints one summary table:
    per job its output table, rows in, rows out, quarantined, duplicates and duration
    (--json: the same, with the Delta versions each job wrote).
    """
    from . import run_summary, streaming

    cfg = settings()
    name = job.value
    run_id = run_id or time.strftime("manual__%Y%m%dT%H%M%S")
    runners = job_runners()
    jobs = JOBS if name == "all" else (name,)
    rows: list[run_summary.StageSummary] = []
    started = time.monotonic()
    if continuous:  # a long run: the full JIT pays for its compile time within minutes
        cfg = dataclasses.replace(cfg, spark_quick_start=False)
    if query is not None and name != "gold":
        raise typer.BadParameter(f"--query selects a gold query; it does not apply to {name!r}"
                                 " (use: lakecep run gold --query QUERY_ID)",
                                 param_hint="--query")
    if "gold" in jobs:  # a bad query or source stops the run before Spark starts
        from lakecep.sources import sources_dir
        from lakecep.validation import validate as check

        report = check(cfg.queries_dir, sources_dir(cfg))
        report.raise_for_problems()
        known = [q.id for q in report.queries]
        if query is not None and query not in known:
            raise console.Failure(
                f"no query {query!r} in {cfg.queries_dir or 'the shipped queries'}",
                hint=f"the queries are {', '.join(known)} (`lakecep validate` lists them)",
                code=console.NO_RETRY_EXIT)
    if name in ("all", "bronze", "silver", "gold"):  # they share the app's checkpoints
        _one_writer(cfg)
    if continuous and name == "all":
        return _run_continuous(cfg, run_id, runners)
    if "maintain" in jobs:  # a retention shorter than a query's horizon: before Spark starts
        from lakecep import maintenance
        from lakecep.queries import load_queries

        maintenance.check(cfg, maintenance.needs(load_queries(cfg.queries_dir), cfg))
    spark = _spark(cfg, f"lakecep-{name}")
    try:
        with console.progress(disable=json_out) as bar:
            overall = bar.add_task(f"run {name}", total=len(jobs))
            for stage in jobs:
                task = bar.add_task(stage, total=None)

                def on_batch(query: str, n: int, batches: int, task: Any = task,
                             stage: str = stage) -> None:
                    bar.update(task, description=f"{stage}: {n:,} in, {batches} batches")

                def on_log(message: str) -> None:
                    if bar.live.is_started:
                        bar.console.print(f"[dim]{escape(message)}[/]")
                    else:
                        print(f"[lakecep] {message}", file=sys.stderr, flush=True)

                before = run_summary.versions(cfg, stage)
                stage_started = time.monotonic()
                if not bar.live.is_started:
                    print(f"==> {stage}", file=sys.stderr, flush=True)
                with streaming.reporting(log=on_log, batch=on_batch):
                    if query is not None:  # gold only (checked above)
                        from . import gold

                        result = gold.run(spark, cfg, run_id=run_id, continuous=continuous,
                                          query_id=query)
                    else:
                        result = runners[stage](spark, cfg, run_id=run_id,
                                                continuous=continuous)
                seconds = time.monotonic() - stage_started
                rows.append(run_summary.summarise(cfg, stage, result, seconds, before))
                bar.remove_task(task)
                bar.advance(overall)
                if bar.live.is_started:
                    bar.console.print(console.stage_line(rows[-1].as_dict()))
                else:
                    print(f"    {stage} done in {seconds:.1f}s", file=sys.stderr, flush=True)
    finally:
        spark.stop()
        if rows and not json_out:
            console.out.print(console.summary_table(
                [r.as_dict() for r in rows],
                title=f"run {name} ({run_id}) in {time.monotonic() - started:.1f}s"))
    if json_out:
        console.emit_json({"job": name, "run_id": run_id, "query": query,
                           "seconds": round(time.monotonic() - started, 2),
                           "ok": all(r.ok for r in rows), "jobs": [r.as_dict() for r in rows]})
    return 0


def _one_writer(cfg: Settings) -> None:
    """One writer per checkpoint: refuse while the continuous app runs for this home."""
    from lakecep import continuous as app_files

    other = app_files.already_running(cfg)
    if other is not None and other != os.getpid():  # (a supervisor wrote our pid)
        raise console.Failure(
            f"the continuous app runs for {cfg.home} (pid {other}): its bronze, silver and"
            " gold streams own these checkpoints and gold's tables",
            hint="stop it first with `lakecep stop` (optimize, quality, statistics, tune "
                 "and maintain may run beside it)")


def _run_continuous(cfg: Settings, run_id: str, runners: dict[str, Job]) -> int:
    """``run all --continuous``: one application, bronze, silver and gold concurrent."""
    from . import continuous
    from .spark import get_spark

    print(f"==> continuous: bronze, silver, gold as concurrent streams (trigger every "
          f"{cfg.trigger_interval}); stop with SIGTERM, Ctrl-C or `lakecep stop`",
          file=sys.stderr, flush=True)
    # FAIR from the start: the gold queries' pools act on the streams' contention, and the
    # pool weights of a newer tuned configuration can be applied while it runs
    spark = get_spark("lakecep-continuous", cfg, extra_conf={"spark.scheduler.mode": "FAIR"})
    try:
        return continuous.run_app(spark, cfg, dict(runners), run_id)
    finally:
        spark.stop()


# ------------------------------------------------------------------------------ backfill
@app.command()
def backfill(
    query: Annotated[str, typer.Argument(metavar="QUERY_ID", help="the id of a deployed "
                     "query (`lakecep validate --json` lists them)")],
    json_out: Annotated[bool, _flag("--json", "print the summary as JSON")] = False,
) -> int:
    """Run a deployed query over the whole history of silver and write what gold lacks.

    For a query deployed without a backfill (the gold stream backfills a query by itself in
    the batch where it first appears): pattern, live-archive and acquisition queries insert
    the complex events gold.complex_events lacks, uncertain queries the probabilistic
    events, window queries the windows (up to the stream's watermark) that
    gold.window_outputs lacks or holds with other values, as their next revision. Running
    it again writes nothing. Refuses while the continuous app runs (`lakecep stop` first).
    Prints progress and one summary line (keys evaluated, rows written).
    """
    from lakecep.sources import sources_dir
    from lakecep.validation import validate as check

    from . import backfill as backfilling

    cfg = settings()
    report = check(cfg.queries_dir, sources_dir(cfg))  # before Spark starts
    report.raise_for_problems()
    known = [q.id for q in report.queries]
    if query not in known:
        raise console.Failure(
            f"no query {query!r} in {cfg.queries_dir or 'the shipped queries'}",
            hint=f"the queries are {', '.join(known)} (`lakecep validate` lists them)",
            code=console.NO_RETRY_EXIT)
    _one_writer(cfg)
    spark = _spark(cfg, "lakecep-backfill")
    try:
        with console.progress(disable=json_out) as bar:
            task = bar.add_task(f"backfill {query}: Spark tasks", total=None)

            def progress(message: str) -> None:
                if bar.live.is_started:
                    bar.console.print(f"[dim]{escape(message)}[/]")
                else:
                    print(f"[lakecep] {message}", file=sys.stderr, flush=True)

            with console.SparkTasks(spark.sparkContext, bar, task):
                done = backfilling.backfill(spark, cfg, query, progress)
    finally:
        spark.stop()
    if json_out:
        console.emit_json(done)
    else:
        console.say(f"backfill {done['query_id']}: {done['keys']:,} keys evaluated, "
                    f"{done['rows_written']:,} rows written to {done['table']} (silver "
                    f"version {done['silver_version']}, {done['events']:,} events; "
                    f"{done['seconds']:.1f}s)")
    return 0


# ------------------------------------------------------------------------ supervise, stop
@app.command()
def supervise(
    stale_after: Annotated[float, typer.Option(min=1.0, metavar="SECONDS", help="restart the "
                           "app when its heartbeat is older than this")] = 300.0,
    start: Annotated[bool, _flag("--start", "start it even if it was stopped on request "
                     "(`lakecep stop`)")] = False,
    json_out: Annotated[bool, _flag("--json", "print what was done as JSON")] = False,
    backoff: Annotated[float, typer.Option(min=0.0, metavar="SECONDS", help="crash loop: wait "
                       "this long after the last restart once the app failed twice in a row, "
                       "doubling with each further failure (at most 1 h)")] = 300.0,
) -> int:
    """Keep the continuous app (`lakecep run all --continuous`) running: start it if it does
    not run, restart it if it died or its heartbeat is stale (no Spark here).

    The app is started detached (its own session, output in $LAKECEP_HOME/run/
    continuous.log); its pid and heartbeat are in $LAKECEP_HOME/run/. An app stopped with
    `lakecep stop` stays stopped until `--start`. A crash loop backs off (--backoff; a run
    up for 10 minutes ends the series; `--start` restarts at once). The lakecep_continuous
    DAG runs this every few minutes. Exit 1 when the app had failed (it is restarted all
    the same) or is down while backing off.
    """
    from lakecep import continuous

    cfg = settings()
    done = continuous.supervise(cfg, sys.executable, stale_after, start_stopped=start,
                                backoff=backoff)
    if json_out:
        console.emit_json(done)
    else:
        console.say(f"{done['action']}: {done['reason']} (pid {done['pid']})")
    return 1 if done.get("previous_error") or done.get("backing_off") else 0


@app.command()
def stop(
    timeout: Annotated[float, typer.Option(min=0.0, metavar="SECONDS", help="wait this long "
                       "for a clean stop, then kill")] = 180.0,
    json_out: Annotated[bool, _flag("--json", "print what was done as JSON")] = False,
) -> int:
    """Stop the continuous app: SIGTERM, so every query stops after its running micro-batch
    (checkpoints and tables agree); killed after --timeout. It stays stopped (the
    supervising DAG does not start it again) until `lakecep supervise --start`."""
    from lakecep import continuous

    done = continuous.stop(settings(), timeout)
    if json_out:
        console.emit_json(done)
    else:
        console.say(f"{done['action']}" + (f": {done['reason']}" if done.get("reason") else "")
                    + (f" (pid {done['pid']})" if done.get("pid") else ""))
    return 0


# --------------------------------------------------------------------------------- sql
class Format(StrEnum):
    table = "table"
    csv = "csv"
    json = "json"


class Engine(StrEnum):
    spark = "spark"
    duckdb = "duckdb"


def _write_rows(rows: Any, fmt: Format, truncate: int) -> None:
    """A pandas frame of query results as a table for people, CSV or JSON lines."""
    if fmt is Format.table:
        console.out.print(console.frame_table(rows, truncate))
        console.out.print(f"[dim]{len(rows)} row(s)[/]")
    else:
        sys.stdout.write(rows.to_csv(index=False) if fmt is Format.csv else rows.to_json(
            orient="records", lines=True, date_format="iso"))


@app.command()
def sql(
    query: Annotated[str, typer.Argument(help="a Spark SQL query")],
    limit: Annotated[int, typer.Option(min=0, help="rows to show")] = 50,
    fmt: Annotated[Format, typer.Option("--format", help="table for people; csv or json "
                   "(JSON lines) for scripts")] = Format.table,
    truncate: Annotated[int, typer.Option(min=0, help="column width for --format "
                        "table")] = 40,
    engine: Annotated[Engine, typer.Option(help="spark: Spark SQL with Delta time travel; "
                      "duckdb: DuckDB over delta-rs, no JVM (starts in about a second; "
                      "needs lakecep[duckdb])")] = Engine.spark,
) -> int:
    """Run a Spark SQL query over the lake's tables.

    Tables are registered by name: bronze.events, silver.events, silver.quarantine,
    silver.duplicates, gold.complex_events, gold.quality_results, gold.statistics,
    gold.allocations, ... (Delta time travel: ... FROM silver.events VERSION AS OF 3).
    Typed views: silver.events_typed (each source attribute a column of its type) and
    matches.QUERY_ID (a query's current matches, each measure a typed column).
    With --engine duckdb the same names are DuckDB views of the tables' newest versions.
    A table or (subquery) in FROM may be followed by MATCH_RECOGNIZE (...) (docs/spark.md;
    --engine spark only). While `lakecep serve` runs for this home, the query goes to its
    Spark Connect server (seconds) instead of a JVM of its own (tens of seconds); stderr
    says which.
    """
    from .catalog import register_tables

    cfg = settings()
    if engine is Engine.duckdb:
        from lakecep.lake_sql import run_query

        _write_rows(run_query(cfg, query, limit), fmt, truncate)
        return 0
    server = _connect_server(cfg)
    if server is not None:
        from . import connect

        console.err.print(f"lakecep sql: Spark Connect server {server.endpoint} "
                          f"(pid {server.pid})", markup=False, highlight=False)
        spark = connect.session(server)
        try:
            server = connect.register(cfg, server, spark)
            try:
                frame = _run_sql(spark, query, cfg, (*server.registered, *server.views))
            except console.Failure as missing:
                if not _names_a_table(str(missing), (*server.registered, *server.views)):
                    raise
                # the server lost an entry the state file lists (e.g. it was dropped by
                # hand): register everything again, once
                server = connect.register(cfg, connect.forget_tables(cfg, server), spark)
                frame = _run_sql(spark, query, cfg, (*server.registered, *server.views))
            _show(frame, fmt, limit, truncate)
        finally:
            spark.stop()
        return 0
    console.err.print(f"lakecep sql: new Spark session ({cfg.spark_master}; `lakecep serve` "
                      "keeps one running)", markup=False, highlight=False)
    spark = _spark(cfg, "lakecep-sql")
    try:
        registered = register_tables(spark, cfg)
        _show(_run_sql(spark, query, cfg, registered), fmt, limit, truncate)
    finally:
        spark.stop()
    return 0


def _connect_server(cfg: Settings):  # noqa: ANN202 - lakecep.jobs.connect.Server | None
    """The live ``lakecep serve`` server of this home that accepts connections, if any."""
    from . import connect

    server = connect.running(cfg)
    if server is None or not connect.ready(cfg, server) or not connect.answers(server.port):
        return None  # none, or still starting: a session of our own
    return server


def _names_a_table(message: str, tables: Sequence[str]) -> bool:
    """Whether an error message names one of ``tables`` (``layer.table``, maybe quoted)."""
    plain = message.replace("`", "").lower()
    return any(name.lower() in plain for name in tables)


def _run_sql(spark: Any, query: str, cfg: Settings, registered: Sequence[str]) -> Any:
    """``lakecep.spark.sql`` (MATCH_RECOGNIZE clauses, docs/spark.md); a missing table is
    one line naming the tables there are."""
    import logging

    from lakecep.spark import sql as spark_sql

    # PySpark also logs failed queries as JSON; the error below says it once, clearly.
    logging.getLogger("SQLQueryContextLogger").setLevel(logging.CRITICAL)
    try:
        return spark_sql(spark, query)
    except Exception as exc:
        if "TABLE_OR_VIEW_NOT_FOUND" not in str(exc):
            raise
        known = ", ".join(registered) or "none yet (run `lakecep run all` first)"
        raise console.Failure(console.explain(exc).message,
                              f"tables under {cfg.lake}: {known}") from None


def _show(frame: Any, fmt: Format, limit: int, truncate: int) -> None:
    if fmt is Format.table:
        frame.show(limit, truncate=truncate)
    else:
        _write_rows(frame.limit(limit).toPandas(), fmt, truncate)


# ------------------------------------------------------------------------------- serve
@app.command()
def serve(
    port: Annotated[int, typer.Option(min=1, max=65535, help="port of the Connect server "
                    "(bound to 127.0.0.1 only)")] = 15002,
    stop: Annotated[bool, _flag("--stop", "stop this home's server (its whole process "
                    "group) and remove its state file")] = False,
    status_: Annotated[bool, _flag("--status", "say whether a server runs for this home "
                       "(exit 0) or not (exit 1)")] = False,
    json_out: Annotated[bool, _flag("--json", "print the server's state as JSON")] = False,
    jdbc_port: Annotated[int | None, typer.Option(min=1, max=65535, help="also serve JDBC "
                         "(Spark's Thrift server, jdbc:hive2://127.0.0.1:PORT/default) "
                         "for BI tools and beeline")] = None,
) -> int:
    """Keep a Spark Connect server (with Delta and the lake's settings) running in the
    background, so `lakecep sql` answers without starting a JVM.

    Prints the endpoint `sc://127.0.0.1:PORT` once the server answers; notebooks and tools
    connect with `SparkSession.builder.remote(...)` (docs/spark.md). With `--jdbc-port`
    the same server also answers JDBC (HiveServer2 protocol) and prints that URL on a
    second line. One server per
    LAKECEP_HOME: its state (pid, port, start time) is in $LAKECEP_HOME/connect/server.json,
    its log in $LAKECEP_HOME/connect/server.log. `--stop` stops it, `--status` shows it.
    """
    from . import connect

    cfg = settings()
    if stop and status_:
        raise console.Failure("--stop and --status do not go together", code=2)
    if status_ or stop:
        server = connect.stop(cfg) if stop else connect.running(cfg)
        if json_out:
            console.emit_json({"running": bool(server and not stop), "stopped": stop and
                               server is not None, "server": server and server.as_dict()})
        elif server is None:
            console.say(f"no Connect server running for {cfg.home}")
        else:
            verb = "stopped" if stop else "running:"
            jdbc = f", JDBC {server.jdbc_url}" if server.jdbc_url else ""
            console.say(f"{verb} {server.endpoint} (pid {server.pid}, since "
                        f"{server.started_at}{jdbc}, log {server.log})")
        return 0 if stop or server is not None else 1
    started = time.monotonic()
    with console.err.status("starting the Spark Connect server", spinner="dots") \
            if console.err.is_terminal else _nothing():
        try:
            server, new = connect.start(cfg, port, jdbc_port=jdbc_port)
        except connect.ServerError as exc:
            raise console.Failure(str(exc), exc.hint) from None
    if json_out:
        console.emit_json({"started": new, "seconds": round(time.monotonic() - started, 2),
                           "server": server.as_dict()})
    elif new:
        console.err.print(f"Spark Connect server started in {time.monotonic() - started:.1f}s "
                          f"(pid {server.pid}, {len(server.registered)} lake tables; stop it "
                          "with `lakecep serve --stop`)", markup=False, highlight=False)
    else:
        console.err.print(f"a Connect server already runs for {cfg.home} (pid "
                          f"{server.pid}); not starting another", markup=False,
                          highlight=False)
    if not json_out:
        console.say(server.endpoint)
        if server.jdbc_url:
            console.say(server.jdbc_url)
    return 0


# ------------------------------------------------------------------------------ status
@app.command()
def status(
    strict: Annotated[bool, _flag("--strict", "exit 1 if any check "
                      "fails")] = False,
    json_out: Annotated[bool, _flag("--json", "print counts and checks as "
                        "JSON")] = False,
) -> int:
    """Table counts, reconciliation and gold vs ground truth.

    Counts every table, checks landed = bronze = silver + duplicates + quarantine (+ the
    operators' terms: filtered, merged_away, pending, split_extra), and compares gold
    with the generator's ground truth when there is one. While `lakecep serve` runs for
    this home, it uses that server instead of starting a JVM; stderr says which.
    """
    from lakecep import continuous

    from .status import lake_status

    cfg = settings()
    app = continuous.state(cfg)
    if app.heartbeat is not None and not json_out:
        console.out.print(console.continuous_line(app.as_dict()), soft_wrap=True)
    server = _connect_server(cfg)
    if server is not None:  # (seconds instead of a JVM of its own)
        from . import connect

        console.err.print(f"lakecep status: Spark Connect server {server.endpoint} "
                          f"(pid {server.pid})", markup=False, highlight=False)
        spark = connect.session(server)
    else:
        spark = _spark(cfg, "lakecep-status")
    try:
        report = lake_status(spark, cfg)
    finally:
        spark.stop()
    if json_out:
        console.emit_json({"ok": report.ok, "counts": report.counts,
                           "continuous": app.as_dict() if app.heartbeat is not None else None,
                           "checks": [{"name": c.name, "ok": c.ok, "detail": c.detail}
                                      for c in report.checks]})
    else:
        for table in console.status_tables(report.counts, report.checks):
            console.out.print(table)
        console.out.print("[green]all checks passed[/]" if report.ok
                          else "[red]some checks failed[/]")
    return 0 if report.ok or not strict else 1


# ------------------------------------------------------------------------------ replay
def _duration(text: str | None, option: str) -> Any:
    """A ``--before`` / ``--after`` duration (None when not given); bad text is a usage
    error."""
    from lakecep.queries import QueryDefinitionError, parse_duration

    if text is None:
        return None
    try:
        return parse_duration(text, option)
    except QueryDefinitionError as exc:
        raise typer.BadParameter(str(exc), param_hint=option) from None


@app.command()
def replay(
    match_id: Annotated[str, typer.Argument(help="a match_id of gold.complex_events (or a "
                        "unique prefix of at least 6 characters)")],
    before: Annotated[str | None, typer.Option(metavar="DURATION", help="context: events "
                      "of the key from this long before the match (default: the query's "
                      "[snapshot] before, else 0)")] = None,
    after: Annotated[str | None, typer.Option(metavar="DURATION", help="context: ... to this "
                     "long after it (default: the query's [snapshot] after, else 0)")] = None,
    json_out: Annotated[bool, _flag("--json", "print the replay as JSON")] = False,
) -> int:
    """Re-run a complex event's rule on the Delta versions gold recorded and show it again.

    Reads silver as of the row's history_version, runs the query on the row's key with the
    gold job's own code, and compares the match found with the stored one (measures, event
    ids, times); shows the events around it and, for an alert with a firing snapshot, the
    snapshot checked against the same window read again (docs/alerts.md). Warns when
    silver's Delta retention is shorter than the replay horizon. Exit 0: reproduced;
    1: it differs or cannot be replayed.
    """
    spans = _duration(before, "--before"), _duration(after, "--after")
    cfg = settings()
    spark = _spark(cfg, "lakecep-replay")
    try:
        from . import replay as replaying

        try:
            (result,) = replaying.replay(spark, cfg, [replaying.resolve(spark, cfg, match_id)],
                                         before=spans[0], after=spans[1])
        except replaying.ReplayError as exc:
            raise console.Failure(str(exc), exc.hint) from None
    finally:
        spark.stop()
    if json_out:
        console.emit_json(result.as_dict())
    else:
        for part in console.replay_tables(result.as_dict()):
            console.out.print(part)
    return 0 if result.reproduced else 1


# ------------------------------------------------------------------------------ report
@app.command()
def report(
    out: Annotated[str | None, typer.Option("--out", metavar="PATH", help="the HTML file to "
                   "write (.html is added to a name without a suffix; a folder: "
                   "lakecep-report.html in it; default "
                   "$LAKECEP_HOME/reports/lakecep-report.html)")] = None,
    json_out: Annotated[bool, _flag("--json", "print the path and each section's status "
                        "as JSON")] = False,
) -> int:
    """Write one self-contained HTML page about the lake, for people (no Spark, no JVM).

    Plots and small tables of: complex events over time per query, detection latency
    p50/p95/p99 per query, silver quarantine reasons, the latest quality results per table,
    live-archive cost per strategy, the tuned allocation in force, window outputs, and a
    link to the Great Expectations Data Docs. Tables are read like `lakecep sql --engine
    duckdb` (delta-rs + DuckDB, newest versions); the page needs no network (plots are
    inline PNG). A table not produced yet gets a short section saying which command makes
    it (docs/report.md).
    """
    from pathlib import Path

    from lakecep.report import build

    cfg = settings()
    started = time.monotonic()
    result = build(cfg, Path(out).expanduser() if out else None)
    if json_out:
        console.emit_json({**result.as_dict(),
                           "seconds": round(time.monotonic() - started, 2)})
        return 0
    marks = {"ok": "[green]✓[/]", "error": "[red]✗[/]"}
    for section in result.sections:
        console.out.print(f"{marks.get(section.status, '[yellow]-[/]')} "
                          f"[bold]{escape(section.title)}[/]: {escape(section.note)}",
                          soft_wrap=True)
    console.say(f"wrote {result.path} in {time.monotonic() - started:.1f}s")
    return 0


# ---------------------------------------------------------------------------- validate
@app.command()
def validate(
    json_out: Annotated[bool, _flag("--json", "print the problems as JSON")] = False,
) -> int:
    """Check every query and source file against the silver schema, without Spark.

    The queries the gold job runs (queries_dir; default the shipped queries) and the source
    files (sources_dir): unknown columns (with "did you mean"), type mismatches the types
    show without data (a number compared with a string, arithmetic on a string), a
    PARTITION BY that is not the key (object_id), bad source files (TOML, unknown keys,
    mapping expressions). Each problem as file:line:column. The gold job runs the same
    check when it starts. Exit 0: all valid; 1: problems found; 2: bad settings.
    """
    from lakecep.sources import sources_dir
    from lakecep.validation import validate as check

    cfg = settings()
    started = time.monotonic()
    report = check(cfg.queries_dir, sources_dir(cfg))
    seconds = round(time.monotonic() - started, 3)
    if json_out:
        console.emit_json({
            "ok": report.ok, "seconds": seconds,
            "queries": [{"id": q.id, "kind": type(q).__name__, "version": q.version,
                         "rule_hash": q.rule_hash} for q in report.queries],
            "query_files": report.query_files, "source_files": report.source_files,
            "sources": [s.name for s in report.sources], "columns": report.columns,
            "problems": [p.as_dict() for p in report.problems]})
        return 0 if report.ok else 1
    for problem in report.problems:
        console.out.print(f"{escape(problem.location)}: [bold red]{problem.code}:[/] "
                          f"{escape(problem.message)}", soft_wrap=True)
        if problem.hint:
            console.out.print(f"  [bold]hint:[/] {escape(problem.hint)}", soft_wrap=True)
    checked = (f"{len(report.query_files)} query files and {len(report.source_files)} "
               f"source files")
    if report.ok:
        console.say(f"ok: {checked} valid ({len(report.columns)} silver columns; "
                    f"{seconds:.2f}s)")
        return 0
    console.say(f"{len(report.problems)} problem(s) in {checked}")
    return 1


# ------------------------------------------------------------------------------ config
@app.command("config")
def show_config(
    json_out: Annotated[bool, _flag("--json", "print settings and sources as "
                        "JSON")] = False,
) -> int:
    """Show every setting, its value and where it came from (default, file, environment,
    command line)."""
    from dataclasses import asdict

    from lakecep.config import redacted

    loaded = _loaded()
    values = asdict(loaded.settings)
    values["spark_conf"] = redacted(values["spark_conf"])  # no credentials on the screen
    if json_out:
        console.emit_json({"config_file": loaded.config_file,
                           "settings": {k: {"value": v, "source": loaded.sources[k]}
                                        for k, v in values.items()}})
    else:
        console.out.print(console.settings_table(values, loaded.sources))
        console.say(f"config file: {loaded.config_file or 'none'}")
    return 0


# -------------------------------------------------------------------------------- main
def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code (the console script exits with it)."""
    command = typer.main.get_command(app)
    args = list(sys.argv[1:] if argv is None else argv)
    STATE.debug = "--debug" in args or os.environ.get("LAKECEP_DEBUG", "") not in ("", "0")
    name = next((a for a in args if a in getattr(command, "commands", {})), "")
    try:
        result = command.main(args=args, prog_name="lakecep", standalone_mode=False)
    except typer.Exit as done:
        return done.exit_code
    except typer.Abort:
        console.err.print("lakecep: aborted")
        return 130
    except typer.TyperException as exc:  # usage errors (click's): its message, exit 2
        from typer import rich_utils

        rich_utils.rich_format_error(exc)  # type: ignore[arg-type]
        return exc.exit_code
    except Exception as exc:  # noqa: BLE001 - the top: one clear line (traceback with --debug)
        if STATE.debug:
            console.err.print_exception(show_locals=False)
        explained = console.explain(exc)
        prefix = f"lakecep {name}: error" if name else "lakecep: error"
        console.err.print(f"[bold red]{prefix}:[/] {escape(explained.message)}",
                          soft_wrap=True)
        if explained.hint:
            console.err.print(f"  [bold]hint:[/] {escape(explained.hint)}", soft_wrap=True)
        if isinstance(exc, ConfigError):
            return 2
        if type(exc).__name__ in console.NO_RETRY:
            return console.NO_RETRY_EXIT
        return exc.code if isinstance(exc, console.Failure) else 1
    return result if isinstance(result, int) else 0


if __name__ == "__main__":
    sys.exit(main())
