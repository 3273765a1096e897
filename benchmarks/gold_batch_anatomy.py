"""Where a small gold (bronze, silver) micro-batch's time goes: phases, Spark jobs, Delta
commits, driver Python.

A tiny lake (``--events`` generated events, the shipped queries) is built in a temporary
``LAKECEP_HOME``: the first files land as history (bronze, silver, gold), then one file per
measured run lands (bronze, silver outside the measurement) and ``gold.run`` is measured.
Then one file of new events no shipped query matches (which commits does such a batch
still make?) and a run with no new file: ``gold.run`` with nothing to do (setup only).
Everything runs in one process and one Spark session; the product is not changed: this
script wraps gold's functions (and ``LakeTable``'s methods, ``foreachBatch``'s function)
with timers by monkeypatching, for its own run only.

Per run it reports, per phase (a wrapped function; nested phases are inside their callers):
calls, inclusive and exclusive seconds and share of the run, Spark jobs submitted while it
was the innermost phase (from Spark's status store, with their Python call sites) and Delta
commits (each table's new ``_delta_log/*.json``: operation and whether it wrote nothing),
and a cProfile of the driver's Python (main thread and the foreachBatch callback thread:
py4j round trips, Python's own time). Counts are load-independent; on a loaded machine
read times as shares only.

``--job bronze`` or ``--job silver`` measures that job's run the same way instead: the
jobs before it land the new file outside the measurement (``--job bronze``: nothing), the
jobs after it are not run.

Writes ``benchmarks/results/<job>_batch_anatomy.json``. Example (a few minutes)::

    .venv/bin/python benchmarks/gold_batch_anatomy.py --events 300
    .venv/bin/python benchmarks/gold_batch_anatomy.py --events 300 --job silver
"""

from __future__ import annotations

import argparse
import cProfile
import dataclasses
import functools
import io
import json
import os
import platform
import pstats
import shutil
import tempfile
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

#: (module, attribute) pairs wrapped as phases; the label is ``module.attribute``.
WRAPPED = {
    "lakecep.jobs.gold": [
        "validate", "_start", "seed_checkpoint", "load_latest", "incremental_keys",
        "drop_stale", "drop_stale_windows", "check_live_columns", "run_stream",
        "refresh_tuned", "detect", "merge_into_gold", "supersede", "commit_windows",
        "pattern_state", "live_state", "merge_state", "record_access", "record_plans",
        "supersede_pending", "merge_probabilistic", "window_steps", "find_pattern",
        "pattern_rows", "live_archive_rows", "uncertain_rows", "acquisition_rows",
        "warm_start",
    ],
    "lakecep.jobs.alerts": ["record", "deliver"],
    "lakecep.jobs.snapshots": ["take"],
    "lakecep.jobs.gold_chain": ["run_chained", "enable_change_feed"],
    "lakecep.jobs.gold_live_archive": ["find_live"],
    "lakecep.jobs.bronze": ["run_stream", "make_folder", "_run_one"],
    "lakecep.jobs.silver": ["run_stream", "process_batch", "gate", "quarantine_breaches",
                            "writer_id"],
    "lakecep.jobs.silver_native": ["parse"],
    "lakecep.jobs.silver_state": ["run_sequential"],
}
#: (module, class, methods) wrapped as phases.
WRAPPED_METHODS = [
    ("lakecep.jobs.tables", "LakeTable", ["ensure", "upgrade", "version", "append", "exists",
                                          "drop_other_fingerprints", "read", "as_of"]),
    ("lakecep.jobs.reload", "Rules", ["__init__", "check", "record", "floors"]),
    ("lakecep.jobs.reload", "Newest", ["update", "read"]),
    ("lakecep.jobs.archive", "RecentBuffer", ["update"]),
]


class Recorder:
    """Phase intervals (wall clock, per thread, nested) of the wrapped functions."""

    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []
        self.local = threading.local()

    def wrap(self, label: str, func: Any) -> Any:
        @functools.wraps(func)
        def timed(*args: Any, **kwargs: Any) -> Any:
            stack = self.local.__dict__.setdefault("stack", [])
            record = {"label": label, "depth": len(stack), "t0": time.time(), "t1": None,
                      "thread": threading.get_ident(), "py4j": 0,
                      "parent": stack[-1]["label"] if stack else None}
            stack.append(record)
            self.records.append(record)
            try:
                return func(*args, **kwargs)
            finally:
                record["t1"] = time.time()
                stack.pop()
        timed.__wrapped_phase__ = True  # type: ignore[attr-defined]
        return timed

    def count_py4j(self) -> None:
        """Count each py4j round trip (Python -> JVM call) in the innermost phase."""
        from py4j.clientserver import ClientServerConnection

        send = ClientServerConnection.send_command
        local = self.local

        def counted(connection: Any, command: Any, *args: Any, **kwargs: Any) -> Any:
            stack = local.__dict__.get("stack")
            if stack:
                stack[-1]["py4j"] += 1
            return send(connection, command, *args, **kwargs)
        ClientServerConnection.send_command = counted  # type: ignore[method-assign]


def instrument(recorder: Recorder, profiles: list[cProfile.Profile]) -> None:
    import importlib

    from pyspark.sql.streaming import DataStreamWriter

    for module_name, names in WRAPPED.items():
        module = importlib.import_module(module_name)
        short = module_name.rsplit(".", 1)[1]
        for name in names:
            if hasattr(module, name):
                setattr(module, name, recorder.wrap(f"{short}.{name}", getattr(module, name)))
    for module_name, cls_name, methods in WRAPPED_METHODS:
        cls = getattr(importlib.import_module(module_name), cls_name)
        for name in methods:
            setattr(cls, name, recorder.wrap(f"{cls_name}.{name}", getattr(cls, name)))
    recorder.count_py4j()
    original = DataStreamWriter.foreachBatch

    def foreach_batch(self: Any, func: Any) -> Any:
        timed = recorder.wrap("each_batch (foreachBatch function)", func)

        def profiled(batch: Any, batch_id: int) -> None:  # the py4j callback thread
            profile = cProfile.Profile()
            profiles.append(profile)
            profile.enable()
            try:
                timed(batch, batch_id)
            finally:
                profile.disable()
        return original(self, profiled)
    DataStreamWriter.foreachBatch = foreach_batch  # type: ignore[method-assign]


def spark_jobs(spark: Any) -> list[dict[str, Any]]:
    """Every job in the status store: id, call site, submission and completion (s)."""
    store = spark.sparkContext._jsc.sc().statusStore()  # noqa: SLF001 - no Python API
    jobs = spark._jvm.scala.jdk.javaapi.CollectionConverters.asJava(  # noqa: SLF001
        store.jobsList(None))
    out = []
    for i in range(jobs.size()):
        job = jobs.get(i)
        submitted, completed = job.submissionTime(), job.completionTime()
        description = job.description()
        out.append({
            "id": int(job.jobId()), "name": str(job.name()),
            "description": str(description.get()).split("\n")[0][:80]
            if description.isDefined() else "",
            "t0": submitted.get().getTime() / 1000 if submitted.isDefined() else None,
            "t1": completed.get().getTime() / 1000 if completed.isDefined() else None,
            "tasks": int(job.numTasks()), "stages": int(job.stageIds().size()),
        })
    return out


def delta_logs(home: Path) -> dict[str, set[str]]:
    """Table (path under home) -> its ``_delta_log`` commit files."""
    return {str(log.parent.relative_to(home)): {p.name for p in log.glob("*.json")}
            for log in home.rglob("_delta_log")}


def _empty(operation: str, metrics: dict[str, str]) -> bool | None:
    """Whether a commit changed no row (None: cannot tell from its metrics)."""
    def m(name: str) -> int:
        return int(metrics.get(name, 0) or 0)
    if operation == "MERGE":
        return m("numTargetRowsInserted") + m("numTargetRowsUpdated") + \
            m("numTargetRowsDeleted") == 0
    if operation in ("WRITE", "STREAMING UPDATE"):
        return m("numOutputRows") == 0
    if operation == "DELETE":
        return m("numDeletedRows") == 0 and m("numRemovedFiles") == 0
    if operation == "UPDATE":
        return m("numUpdatedRows") == 0
    return None


def new_commits(home: Path, before: dict[str, set[str]]) -> list[dict[str, Any]]:
    out = []
    for table, files in delta_logs(home).items():
        for name in sorted(files - before.get(table, set())):
            info: dict[str, Any] = {}
            adds = 0
            for line in (home / table / "_delta_log" / name).read_text().splitlines():
                action = json.loads(line)
                info = action.get("commitInfo", info)
                adds += "add" in action
            metrics = info.get("operationMetrics", {})
            operation = info.get("operation", "?")
            out.append({"table": table, "version": int(name.split(".")[0]),
                        "operation": operation, "t": info.get("timestamp", 0) / 1000,
                        "files_added": adds, "empty": _empty(operation, metrics),
                        "metrics": {k: v for k, v in metrics.items() if k.startswith(
                            ("numOutputRows", "numTarget", "numSourceRows", "numDeleted",
                             "numUpdated", "executionTimeMs"))}})
    return sorted(out, key=lambda c: c["t"])


def innermost(records: list[dict[str, Any]], t: float | None) -> str:
    if t is None:
        return "(unknown)"
    best = None
    for r in records:
        if r["t0"] <= t <= (r["t1"] or t) and (best is None or r["t0"] >= best["t0"]):
            best = r
    return best["label"] if best else "(outside the measured run)"


def anatomy(records: list[dict[str, Any]], jobs: list[dict[str, Any]],
            commits: list[dict[str, Any]], total: float) -> list[dict[str, Any]]:
    """Per phase: calls, inclusive/exclusive seconds, share of the run, jobs, commits."""
    phases: dict[str, dict[str, Any]] = defaultdict(lambda: {
        "calls": 0, "inclusive_s": 0.0, "exclusive_s": 0.0, "jobs": 0, "job_s": 0.0,
        "py4j": 0, "commits": Counter()})
    for r in records:
        children = sum(c["t1"] - c["t0"] for c in records
                       if r["t0"] <= c["t0"] and c["t1"] <= r["t1"] and (
                           (c["thread"] == r["thread"] and c["depth"] == r["depth"] + 1)
                           # the stream's batches run on the py4j callback thread
                           or (r["label"].endswith(".run_stream") and c["depth"] == 0
                               and c["thread"] != r["thread"])))
        p = phases[r["label"]]
        p["calls"] += 1
        if r["depth"] <= 0 or not any(  # recursion (a method calling itself) counted once
                o is not r and o["label"] == r["label"] and o["t0"] <= r["t0"]
                and r["t1"] <= o["t1"] for o in records):
            p["inclusive_s"] += r["t1"] - r["t0"]
        p["exclusive_s"] += r["t1"] - r["t0"] - children
        p["py4j"] += r.get("py4j", 0)
    for job in jobs:
        p = phases[innermost(records, job["t0"])]
        p["jobs"] += 1
        p["job_s"] += (job["t1"] or job["t0"]) - job["t0"]
    for commit in commits:
        phases[innermost(records, commit["t"])]["commits"][
            f"{commit['table']} {commit['operation']}"] += 1
    rows = []
    for label, p in phases.items():
        rows.append({"phase": label, "calls": p["calls"],
                     "inclusive_s": round(p["inclusive_s"], 2),
                     "exclusive_s": round(p["exclusive_s"], 2),
                     "inclusive_share": round(p["inclusive_s"] / total, 3),
                     "exclusive_share": round(p["exclusive_s"] / total, 3),
                     "spark_jobs": p["jobs"], "spark_job_s": round(p["job_s"], 2),
                     # exclusive time outside Spark jobs: planning, Delta log and commit
                     # work on the driver, py4j, Python
                     "outside_jobs_s": round(max(0.0, p["exclusive_s"] - p["job_s"]), 2),
                     "py4j_round_trips": p["py4j"],
                     "delta_commits": dict(p["commits"])})
    return sorted(rows, key=lambda r: -r["inclusive_s"])


def profile_summary(profiles: list[cProfile.Profile]) -> dict[str, Any]:
    stats = None
    for profile in profiles:
        if stats is None:
            stats = pstats.Stats(profile, stream=io.StringIO())
        else:
            stats.add(profile)
    if stats is None:
        return {}
    entries = stats.stats  # type: ignore[attr-defined]
    py4j_calls = sum(v[1] for (f, _, name), v in entries.items()
                     if "clientserver" in f and name == "send_command")
    waiting = sum(v[2] for (f, _, name), v in entries.items()
                  if name in ("readline", "recv_into", "<method 'readline' of "
                              "'_io.BufferedReader' objects>")
                  or "recv_into" in name or ("readline" in name and "socket" in f))
    own = sum(v[2] for v in entries.values())

    def top(key: int, only_project: bool, n: int) -> list[dict[str, Any]]:
        rows = [(k, v) for k, v in entries.items()
                if not only_project or "/jobs/" in k[0] or "/lakecep/" in k[0]]
        rows.sort(key=lambda kv: -kv[1][key])
        return [{"function": f"{Path(k[0]).name}:{k[1]}:{k[2]}", "calls": v[1],
                 "tottime_s": round(v[2], 3), "cumtime_s": round(v[3], 3)}
                for k, v in rows[:n]]
    return {"py4j_round_trips": py4j_calls,
            "python_total_s": round(own, 2),
            "python_socket_wait_s": round(waiting, 2),
            "python_own_s_excluding_socket_wait": round(own - waiting, 2),
            "top_project_by_cumtime": top(3, True, 30),
            "top_by_tottime": top(2, False, 15)}


#: Phases inside the batch function grouped for the summary.
GROUPS = {
    "batch: detection (queries' Spark work, RBuffer)": ["gold.detect", "RecentBuffer.update"],
    "batch: gold writes (Delta commits)": [
        "gold.merge_into_gold", "gold.supersede", "gold.merge_state",
        "LakeTable.append", "gold.supersede_pending", "gold.commit_windows",
        "gold.record_plans", "gold.merge_probabilistic", "alerts.record", "alerts.deliver",
        "snapshots.take", "gold_chain.run_chained"],
    "batch: silver version (LakeTable.version)": ["LakeTable.version"],
}


def summarise(records: list[dict[str, Any]], total: float, job: str = "gold") -> dict[str, Any]:
    """Seconds and share of the run: setup before and after the stream (validate, ensure,
    drop_stale, Rules), the stream's own overhead, and the batch function's groups of
    :data:`GROUPS` (outermost calls only) and own work (persist, newest, counts, logs)."""
    def outermost(labels: list[str]) -> float:
        chosen = [r for r in records if r["label"] in labels]
        return sum(r["t1"] - r["t0"] for r in chosen if not any(
            o is not r and o in chosen and o["t0"] <= r["t0"] and r["t1"] <= o["t1"]
            for o in chosen))
    stream = outermost([f"{job}.run_stream"])
    batch = outermost(["each_batch (foreachBatch function)"])
    if job != "gold":  # bronze has no batch function: its stream writes to Delta itself
        out = {"setup (ensure, sources; before the stream)": total - stream,
               "stream (its Delta sink or batch function included)": stream - batch,
               "batch function": batch}
        return {name: {"s": round(v, 2), "share": round(v / total, 3)}
                for name, v in out.items()}
    out = {"setup (validate, ensure, drop_stale, Rules; before the stream)": total - stream,
           "stream start/stop, offsets and commits (run_stream's own)": stream - batch}
    out |= {name: outermost(labels) for name, labels in GROUPS.items()}
    out["batch: own (persist, newest, per-query counts collect, logs)"] = batch - sum(
        out[g] for g in GROUPS)
    return {name: {"s": round(v, 2), "share": round(v / total, 3)} for name, v in out.items()}


def py4j_latency(spark: Any, n: int = 500) -> float:
    """Seconds per trivial py4j round trip (Python -> JVM -> Python) on this machine now."""
    clock = spark._jvm.java.lang.System  # noqa: SLF001
    started = time.perf_counter()
    for _ in range(n):
        clock.nanoTime()
    return (time.perf_counter() - started) / n


def no_match_file(last: Path, root: Path, events: int = 20) -> Path:
    """A landing file of ``events`` reads at reader A of new tags, after ``last``'s events:
    a batch in which no shipped query finds anything (what it writes is pure cost)."""
    from datetime import datetime, timedelta

    times = []
    for line in last.read_text().splitlines():  # the generator's bad lines are skipped
        try:
            times.append(str(json.loads(line)["event_time"]))
        except (ValueError, KeyError, TypeError):
            continue
    start = datetime.fromisoformat(max(times).replace("Z", "+00:00"))
    rows = [{"event_id": f"nomatch-{i}", "object_id": f"tag-nomatch-{i}", "event_type": "read",
             "source_id": "A", "event_time": (start + timedelta(minutes=i + 1)).isoformat(
                 timespec="milliseconds").replace("+00:00", "Z"),
             "attributes": {"rssi": -50.0, "antenna": 1}} for i in range(events)]
    path = root / "events-nomatch.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def main() -> int:  # noqa: PLR0915
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--job", choices=("bronze", "silver", "gold"), default="gold",
                        help="the job whose run is measured")
    parser.add_argument("--events", type=int, default=300)
    parser.add_argument("--lines-per-file", type=int, default=40)
    parser.add_argument("--history", type=int, default=4, help="files landed as history")
    parser.add_argument("--runs", type=int, default=3, help="measured runs with a new file")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                        help="a setting for the lake (e.g. incremental_patterns=false)")
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                        help="an extra Spark configuration (e.g. a Delta knob to compare)")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    args = parser.parse_args()

    from lakecep.config import load_settings
    from lakecep.generate import generate
    from lakecep.jobs import bronze, gold, silver
    from lakecep.jobs.spark import get_spark
    from lakecep.jobs.streaming import reporting

    root = Path(tempfile.mkdtemp(prefix="lakecep-anatomy-"))
    base = load_settings()
    overrides: dict[str, Any] = {"home": root / "home", "quality_enabled": False}
    for item in args.set:
        name, value = item.split("=", 1)
        kind = type(getattr(base, name))
        overrides[name] = (value.lower() in ("1", "true", "yes")) if kind is bool else kind(value)
    settings = dataclasses.replace(base, **overrides)
    staging = root / "staging"
    generate(staging, root / "truth", events=args.events, lines_per_file=args.lines_per_file)
    files = sorted(p for p in staging.iterdir() if p.is_file())
    if len(files) < args.history + args.runs:
        raise SystemExit(f"{len(files)} files: fewer than --history + --runs")
    settings.landing.mkdir(parents=True)
    spark = get_spark(f"lakecep-{args.job}-batch-anatomy", settings,
                      extra_conf=dict(c.split("=", 1) for c in args.conf))
    lines: list[str] = []
    for f in files[:args.history]:
        shutil.copy(f, settings.landing / f.name)
    with reporting(log=lines.append):
        for job in (bronze, silver, gold):
            job.run(spark, settings)

    recorder = Recorder()
    profiles: list[cProfile.Profile] = []
    instrument(recorder, profiles)
    home = settings.home
    runs = []
    measured = files[args.history:args.history + args.runs]
    batches: list[Path | None] = [*measured, no_match_file(measured[-1], root), None]
    for n, new_file in enumerate(batches):
        if new_file is not None:
            shutil.copy(new_file, settings.landing / new_file.name)
        measured_job = {"bronze": bronze, "silver": silver, "gold": gold}[args.job]
        with reporting(log=lines.append):
            for job in (bronze, silver, gold)[:(bronze, silver, gold).index(measured_job)]:
                job.run(spark, settings)
        known_jobs = {j["id"] for j in spark_jobs(spark)}
        logs_before = delta_logs(home)
        recorder.records.clear()
        profiles.clear()
        lines.clear()
        main_profile = cProfile.Profile()
        profiles.append(main_profile)
        with reporting(log=lines.append):
            t0 = time.time()
            main_profile.enable()
            measured_job.run(spark, settings)
            main_profile.disable()
            t1 = time.time()
        total = t1 - t0
        records = [dict(r) for r in recorder.records]
        records.append({"label": f"{args.job}.run (own)", "depth": -1, "t0": t0, "t1": t1,
                        "thread": threading.get_ident(), "parent": None})
        jobs = [j for j in spark_jobs(spark) if j["id"] not in known_jobs]
        commits = new_commits(home, logs_before)
        for job in jobs:
            job["phase"] = innermost(records, job["t0"])
        for commit in commits:
            commit["phase"] = innermost(records, commit["t"])
        phases = anatomy(records, jobs, commits, total)
        per_table = Counter(c["table"] for c in commits)
        run = {
            "run": n, "new_file": new_file.name if new_file else None,
            f"{args.job}_run_s": round(total, 2),
            "each_batch_s": round(sum(r["t1"] - r["t0"] for r in records
                                      if r["label"].startswith("each_batch")), 2),
            "spark_jobs": len(jobs),
            "spark_job_s": round(sum((j["t1"] or j["t0"]) - j["t0"] for j in jobs), 2),
            "spark_jobs_by_call_site": Counter(j["name"] for j in jobs).most_common(),
            "delta_commits": len(commits),
            "delta_commits_per_table": dict(per_table),
            "empty_delta_commits": [f"{c['table']} {c['operation']}" for c in commits
                                    if c["empty"]],
            "py4j_round_trips": sum(r.get("py4j", 0) for r in records),
            "py4j_round_trip_s": round(py4j_latency(spark), 5),
            "summary": summarise(records, total, args.job),
            "phases": phases, "commits": commits, "jobs": jobs,
            "profile": profile_summary(profiles),
            "log": list(lines),
            "load_average_1m": round(os.getloadavg()[0], 2),
        }
        runs.append(run)
        print(f"run {n} ({run['new_file']}): {args.job} {total:.1f}s, each_batch "
              f"{run['each_batch_s']}s, {len(jobs)} Spark jobs, {len(commits)} Delta commits "
              f"{dict(per_table)}; empty {run['empty_delta_commits']}", flush=True)
        print(f"  py4j: {run['py4j_round_trips']} round trips, "
              f"{run['py4j_round_trip_s'] * 1000:.2f} ms each now; summary "
              f"{json.dumps(run['summary'])}", flush=True)
        for p in phases[:25]:
            print(f"  {p['phase']:<44} x{p['calls']:<3} incl {p['inclusive_s']:>6.2f}s "
                  f"excl {p['exclusive_s']:>6.2f}s ({p['exclusive_share']:>5.1%}) jobs "
                  f"{p['spark_jobs']:>3} ({p['spark_job_s']:.1f}s) py4j {p['py4j_round_trips']:>4}"
                  f" commits {p['delta_commits']}", flush=True)
    spark.stop()
    out = {"scenario": {"job": args.job, "events": args.events,
                        "lines_per_file": args.lines_per_file, "history_files": args.history,
                        "settings": args.set, "queries": base.queries_dir},
           "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                       "platform": platform.platform(),
                       "note": "loaded shared machine: read seconds as shares only"},
           "runs": runs}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{args.job}_batch_anatomy.json").write_text(json.dumps(out, indent=1, default=str)
                                                      + "\n")
    shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
