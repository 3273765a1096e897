"""Fast feedback (issue 18): wall time of one ``lakecep sql`` with and without ``lakecep serve``.

Every ``lakecep`` command used to start its own driver JVM, so one query took 30-70 s.
``lakecep serve`` keeps a Spark Connect server (with Delta) running and ``lakecep sql``
connects to it. We time the real command as a subprocess, the way a person runs it::

    lakecep sql --format csv "SELECT query_id, count(*) FROM gold.complex_events GROUP BY 1"

- ``cold``: no server; the command starts its own JVM (as before issue 18);
- ``warm``: ``lakecep serve`` is up; the command connects to it (Spark Connect);
- ``duckdb``: ``--engine duckdb`` (no JVM; delta-rs + DuckDB), the JVM-free baseline;

the median of ``--runs`` runs each (the modes interleaved run by run, so a change in the
machine's load hits all of them), with the command's CPU seconds (user + system of it and
its children: less sensitive to a shared machine's load than wall time; the server's own
work is not in it). Where the warm time goes, measured apart: ``python +
CLI`` (``lakecep --help``: interpreter, typer, rich, settings), ``python + CLI + Connect
client`` (``python -c`` importing the CLI, the Connect client and ``lakecep.spark``:
pandas, pyarrow, grpc, cep_core; includes the former) and ``server query`` (the same query
through one open Connect session in this process, after a first run: the server's time
plus the round trips; ``SELECT 1`` beside it is the fixed cost of a query). Every mode's
answer must be the same rows (the script stops otherwise); the server start (``lakecep
serve``, JVM + Delta + plugin) is timed once.

The lake: ``--home`` reuses an existing one (it must hold gold.complex_events); else one is
built under ``--build-home`` (default a folder in /tmp, kept for later runs) with
``lakecep generate --events N`` and ``lakecep run all`` (quality's Great Expectations
validations off: not needed for a query's latency). Python writes its bytecode caches on
the first (untimed) run, as in any installed environment (``PYTHONDONTWRITEBYTECODE`` is
removed from the commands' environment: without caches every command compiles ~600
modules, +2-5 s). Output: ``benchmarks/results/sql_latency.{json,png}`` with the machine and
its load average (the machine may be shared).

    .venv/bin/python benchmarks/sql_latency.py                  # builds a 2,000-event lake
    .venv/bin/python benchmarks/sql_latency.py --home PATH      # an existing lake
    .venv/bin/python benchmarks/sql_latency.py --runs 3         # fewer runs
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import resource
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
sys.path.insert(0, str(ROOT / "benchmarks"))

from engine_throughput import machine  # noqa: E402

QUERY = "SELECT query_id, count(*) FROM gold.complex_events GROUP BY 1"
TARGET_SECONDS = 3.0
LAKECEP = [sys.executable, "-m", "lakecep.jobs.cli"]


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("LAKECEP_") and k != "PYTHONDONTWRITEBYTECODE"}
    env["LAKECEP_HOME"] = str(home)
    return env


def lakecep(home: Path, *args: str, timeout: float = 3600) -> subprocess.CompletedProcess[str]:
    result = subprocess.run([*LAKECEP, *args], env=_env(home), capture_output=True, text=True,
                            timeout=timeout, cwd=ROOT)
    if result.returncode != 0:
        sys.exit(f"lakecep {' '.join(args)} failed ({result.returncode}):\n"
                 f"{result.stderr[-3000:]}")
    return result


#: CPU seconds (user + system) of the last command timed by :func:`timed` and its
#: children (the cold command's JVM included; a server's work is not: it is no child).
LAST_CPU: list[float] = [0.0]


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(home: Path, *args: str) -> tuple[float, subprocess.CompletedProcess[str]]:
    cpu = _children_cpu()
    started = time.perf_counter()
    result = lakecep(home, *args)
    seconds = time.perf_counter() - started
    LAST_CPU[0] = _children_cpu() - cpu
    return seconds, result


def build_lake(home: Path, events: int) -> dict[str, float]:
    if (home / "lake" / "gold" / "complex_events" / "_delta_log").is_dir():
        print(f"reusing the lake built earlier in {home}", flush=True)
        return {}
    home.mkdir(parents=True, exist_ok=True)
    seconds = {}
    print(f"building a lake of {events:,} events in {home}", flush=True)
    seconds["generate"], _ = timed(home, "generate", "--events", str(events), "--clean")
    seconds["run_all"], _ = timed(home, "--set", "quality_enabled=false", "run", "all")
    print(f"  generate {seconds['generate']:.1f}s, run all {seconds['run_all']:.1f}s",
          flush=True)
    return seconds


def rows(output: str) -> list[tuple[str, ...]]:
    table = list(csv.reader(io.StringIO(output)))
    return sorted(tuple(r) for r in table[1:])


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def server_query_seconds(port: int, runs: int) -> dict[str, list[float]]:
    """The query and ``SELECT 1`` through one Connect session in this process (after one
    untimed run each)."""
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.remote(f"sc://127.0.0.1:{port}").getOrCreate()
    times: dict[str, list[float]] = {"server query": [], "server SELECT 1": []}
    try:
        for name, query in (("server query", QUERY), ("server SELECT 1", "SELECT 1")):
            spark.sql(query).collect()
            for _ in range(runs):
                started = time.perf_counter()
                spark.sql(query).collect()
                times[name].append(time.perf_counter() - started)
        return times
    finally:
        spark.stop()


def floor_seconds(home: Path, runs: int) -> dict[str, list[float]]:
    env = _env(home)
    imports = ("import pyspark.sql.connect.session, pyspark.sql.connect.dataframe; "
               "import lakecep.spark, lakecep.jobs.cli")
    commands = {"python + CLI": [*LAKECEP, "--help"],
                "python + CLI + Connect client": [sys.executable, "-c", imports]}
    found: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(runs):
        for name, command in commands.items():
            started = time.perf_counter()
            subprocess.run(command, env=env, capture_output=True, check=True, cwd=ROOT)
            found[name].append(time.perf_counter() - started)
    return found


def summary(times: list[float]) -> dict[str, Any]:
    return {"median_s": round(statistics.median(times), 2), "min_s": round(min(times), 2),
            "max_s": round(max(times), 2), "runs_s": [round(t, 2) for t in times]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--home", type=Path, help="an existing lake (LAKECEP_HOME)")
    parser.add_argument("--build-home", type=Path, default=Path("/tmp/lakecep-sql-latency"),
                        help="where to build (or reuse) the demo lake without --home")
    parser.add_argument("--events", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--from-json", action="store_true",
                        help="only redraw the plot from results/sql_latency.json")
    args = parser.parse_args()
    if args.from_json:
        plot(json.loads((RESULTS / "sql_latency.json").read_text()),
             RESULTS / "sql_latency.png")
        return
    load_before = os.getloadavg()
    home = (args.home or args.build_home).resolve()
    build = {} if args.home else build_lake(home, args.events)
    lakecep(home, "serve", "--stop")  # cold means cold
    sql = ("sql", "--format", "csv", QUERY)
    print("untimed first runs (bytecode caches)", flush=True)
    expected = rows(lakecep(home, *sql).stdout)
    assert expected, "gold.complex_events is empty: nothing to compare"
    lakecep(home, *sql, "--engine", "duckdb")

    port = free_port()
    serve_seconds, served = timed(home, "serve", "--port", str(port))
    print(f"lakecep serve: {serve_seconds:.1f}s -> {served.stdout.strip()}", flush=True)
    times: dict[str, list[float]] = {"cold": [], "warm": [], "duckdb": []}
    cpu: dict[str, list[float]] = {mode: [] for mode in times}
    try:
        lakecep(home, *sql)  # the server's first query of this lake (plans, JIT)
        for run in range(args.runs):
            for mode in ("warm", "duckdb", "cold"):
                if mode == "cold":  # the server stays up; this command must not use it
                    seconds, result = timed_cold(home, sql)
                elif mode == "duckdb":
                    seconds, result = timed(home, *sql, "--engine", "duckdb")
                else:
                    seconds, result = timed(home, *sql)
                if rows(result.stdout) != expected:
                    sys.exit(f"{mode} answered differently:\n{result.stdout}\nexpected "
                             f"{expected}")
                used_server = "Spark Connect server" in result.stderr
                if used_server != (mode == "warm") and mode != "duckdb":
                    sys.exit(f"{mode}: unexpected session: {result.stderr[-500:]}")
                times[mode].append(seconds)
                cpu[mode].append(LAST_CPU[0])
                print(f"run {run + 1}: {mode:<6} {seconds:6.2f}s (CPU {LAST_CPU[0]:.2f}s)",
                      flush=True)
        server = server_query_seconds(port, args.runs)
    finally:
        lakecep(home, "serve", "--stop")
    floors = floor_seconds(home, args.runs)
    report = {
        "benchmark": "sql_latency",
        "query": QUERY,
        "command": "lakecep sql --format csv QUERY (subprocess wall time)",
        "target_warm_s": TARGET_SECONDS,
        "lake": {"home": str(home), "events": None if args.home else args.events,
                 "answer_rows": len(expected), "build_s": {k: round(v, 1)
                                                           for k, v in build.items()}},
        "serve_start_s": round(serve_seconds, 1),
        "modes": {mode: summary(t) for mode, t in times.items()},
        "command_cpu_s": {mode: summary(t) for mode, t in cpu.items()},
        "warm_breakdown": {name: summary(t) for name, t in {**floors, **server}.items()},
        "machine": machine(),
        "load_average": {"before": load_before, "after": os.getloadavg()},
        "commit": _commit(),
    }
    warm, cold = report["modes"]["warm"]["median_s"], report["modes"]["cold"]["median_s"]
    report["cold_over_warm"] = round(cold / warm, 1)
    report["target_met"] = warm <= TARGET_SECONDS
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / "sql_latency.json"
    out.write_text(json.dumps(report, indent=2) + "\n")
    plot(report, RESULTS / "sql_latency.png")
    print(json.dumps({k: report[k] for k in ("modes", "command_cpu_s", "warm_breakdown",
                                             "serve_start_s",
                                             "cold_over_warm", "target_met")}, indent=2))
    print(f"wrote {out} and {out.with_suffix('.png')}")


def timed_cold(home: Path, sql: tuple[str, ...]) -> tuple[float, subprocess.CompletedProcess[str]]:
    """``lakecep sql`` with its own JVM while the server is up: the state file is hidden
    from this one command (moved aside and back), which is exactly the no-server path."""
    state = home / "connect" / "server.json"
    aside = state.with_suffix(".bench-aside")
    state.replace(aside)
    try:
        return timed(home, *sql)
    finally:
        aside.replace(state)


def plot(report: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4),
                                      gridspec_kw={"width_ratios": [3, 2]})
    names = {"cold": "cold\n(own JVM)", "warm": "warm\n(lakecep serve)",
             "duckdb": "--engine duckdb\n(no JVM)"}
    colors = {"cold": "tab:red", "warm": "tab:green", "duckdb": "tab:blue"}
    modes = report["modes"]
    for i, (mode, result) in enumerate(modes.items()):
        left.bar(i, result["median_s"], color=colors[mode], alpha=0.8)
        left.scatter([i] * len(result["runs_s"]), result["runs_s"], color="black", s=10,
                     zorder=3)
        left.text(i + 0.42, result["median_s"], f"{result['median_s']:.1f}s", ha="right",
                  va="bottom", fontsize=9)
    left.set_xticks(range(len(modes)), [names[m] for m in modes])
    left.axhline(report["target_warm_s"], color="gray", linestyle="--", linewidth=1,
                 label=f"target warm {report['target_warm_s']:.0f} s")
    left.legend(loc="upper right", fontsize=8)
    left.set_ylabel("wall seconds per command (median, dots: runs)")
    left.set_title(f"lakecep sql, {report['lake']['answer_rows']} rows; "
                   f"cold / warm = {report['cold_over_warm']}x", fontsize=9)
    parts = report["warm_breakdown"]
    labels = list(parts)
    values = [parts[p]["median_s"] for p in labels]
    right.barh(range(len(labels)), values,
               color=["tab:gray", "tab:olive", "tab:green", "tab:cyan"][:len(labels)])
    right.set_yticks(range(len(labels)), labels)
    right.invert_yaxis()
    for y, value in enumerate(values):
        right.text(value, y, f" {value:.2f}s", va="center", fontsize=9)
    right.set_xlim(0, max(values) * 1.35)
    right.set_xlabel("seconds (median)")
    right.set_title(f"where the warm {modes['warm']['median_s']:.1f}s go (measured apart)",
                    fontsize=9)
    load = report["load_average"]
    fig.suptitle(f"lakecep sql latency, Spark Connect server vs a JVM per command; load "
                 f"average {load['before'][0]:.1f} -> {load['after'][0]:.1f} on "
                 f"{report['machine'].get('cpus')} cpus", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def _commit() -> str:
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, text=True,
                              capture_output=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head


if __name__ == "__main__":
    main()
