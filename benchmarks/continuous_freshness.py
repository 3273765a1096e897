"""Continuous mode under a steady arrival rate: freshness from landing to gold.

Generates ``rate x minutes x 60`` RFID events (``lakecep generate``, one file per
``--period`` seconds of arrivals), starts the continuous app (``lakecep run all
--continuous``, one Spark application, as the supervising DAG starts it) with the trigger
``--trigger``, and lands one file every ``--period`` seconds (an atomic rename into the
landing folder, its landing time noted). After the last file it waits up to ``--drain``
seconds for the app to catch up, stops it cleanly (SIGTERM) and reads the lake with plain
Python (``deltalake``, ``pyarrow``: no second JVM):

* **freshness** of each complex event: the commit time of the first gold version that
  holds it (read from gold's Delta log and the files each commit added) minus the landing
  time of the newest file among its events' files (silver's ``source_file``); p50 / p95 /
  max, against the issue's target p95 <= 2 trigger intervals;
* **throughput**: the rows each layer had processed when the feed ended (from the
  Delta logs) over the feed's duration, and the backlog left then; whether the app kept up;
* **where the time goes**: each stream's batch durations (the app's progress lines);
* **correctness**: gold's current rows per query against the generator's truth (when the
  app drained everything).

Writes benchmarks/results/continuous_freshness.{json,png} (``--out`` another JSON path).

    .venv/bin/python benchmarks/continuous_freshness.py --rate 30000 --minutes 10
    .venv/bin/python benchmarks/continuous_freshness.py --rate 5000 --minutes 3 \
        --out benchmarks/results/continuous_freshness_5k.json
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from pipeline_throughput import RESULTS, machine  # noqa: E402

STREAMS = ("bronze_events", "silver_events", "gold_complex_events")
PROGRESS = re.compile(r"(\w+): batch (\d+): (\d+) input rows.*?(\d+) ms")


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def commits(table: Path) -> list[tuple[int, float, list[str], int]]:
    """(version, commit time in s, data files added, rows added) of each commit of a
    Delta table, from its log."""
    out = []
    for path in sorted((table / "_delta_log").glob("*.json")):
        stamp, added, rows = 0.0, [], 0
        for line in path.read_text().splitlines():
            action = json.loads(line)
            if "commitInfo" in action:
                stamp = action["commitInfo"]["timestamp"] / 1000
            elif "add" in action:
                added.append(action["add"]["path"])
                stats = json.loads(action["add"].get("stats") or "{}")
                rows += int(stats.get("numRecords", 0))
        out.append((int(path.stem), stamp, added, rows))
    return out


def rows_committed_by(table: Path, when: float) -> int:
    """Rows appended to an append-only table by commits made at or before ``when``."""
    return sum(rows for _, stamp, _, rows in commits(table) if stamp <= when)


def first_commit_of_matches(gold: Path) -> dict[str, float]:
    """match key (query_id|match_id) -> commit time of the first gold version holding it."""
    from urllib.parse import unquote

    import pyarrow.parquet as pq

    first: dict[str, float] = {}
    for _, stamp, added, _ in commits(gold):
        for name in added:
            table = pq.read_table(gold / unquote(name), columns=["query_id", "match_id"])
            for query_id, match_id in zip(table.column("query_id").to_pylist(),
                                          table.column("match_id").to_pylist(), strict=True):
                key = f"{query_id}|{match_id}"
                if key not in first or stamp < first[key]:
                    first[key] = stamp
    return first


def main() -> None:  # noqa: PLR0915 - one linear script
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=int, default=30_000, help="events per second landed")
    parser.add_argument("--minutes", type=float, default=10.0, help="how long files land")
    parser.add_argument("--period", type=float, default=2.0, help="seconds between files")
    parser.add_argument("--trigger", default="10 seconds", help="the app's trigger interval")
    parser.add_argument("--drain", type=float, default=300.0,
                        help="seconds to wait after the feed for the app to catch up")
    parser.add_argument("--home", type=Path, default=None, help="LAKECEP_HOME (default: temp)")
    parser.add_argument("--out", type=Path, default=RESULTS / "continuous_freshness.json")
    args = parser.parse_args()
    trigger_s = float(args.trigger.split()[0])
    home = (args.home or Path(tempfile.mkdtemp(prefix="lakecep-fresh-"))).resolve()
    env = {**os.environ, "LAKECEP_HOME": str(home), "LAKECEP_TRIGGER_INTERVAL": args.trigger}
    os.environ.update(env)

    from lakecep import continuous
    from lakecep.config import load_settings
    from lakecep.generate import generate

    settings = load_settings()
    per_file = max(1, int(args.rate * args.period))
    files_wanted = max(1, int(args.minutes * 60 / args.period))
    started = time.monotonic()
    staged = home / "staged"
    summary = generate(staged, settings.truth_dir, events=per_file * files_wanted,
                       lines_per_file=per_file)
    files = sorted(p for p in staged.iterdir() if p.is_file())
    lines = summary.counts["lines_written"]
    print(f"generated {lines:,} lines in {len(files)} files in "
          f"{time.monotonic() - started:.0f}s", flush=True)

    def heartbeat() -> dict:
        return continuous.read_heartbeat(settings) or {}

    settings.landing.mkdir(parents=True, exist_ok=True)
    pid = continuous.start(settings, sys.executable, env)
    deadline = time.monotonic() + 600
    while heartbeat().get("phase") != "running":
        if time.monotonic() > deadline or not continuous.pid_alive(pid):
            sys.exit(f"the app did not start; log: {continuous.log_path(settings)}")
        time.sleep(1)
    print(f"app running (pid {pid}); landing {len(files)} files, one every "
          f"{args.period}s", flush=True)

    landed: dict[str, float] = {}
    feed_start = time.time()
    for number, path in enumerate(files):
        time.sleep(max(0.0, feed_start + number * args.period - time.time()))
        path.rename(settings.landing / path.name)
        landed[path.name] = time.time()
        if number % max(1, len(files) // 10) == 0:
            beat = heartbeat().get("queries", {})
            print(f"  landed {number + 1}/{len(files)}; rows read so far: " + ", ".join(
                f"{q} {beat.get(q, {}).get('rows', 0):,}" for q in STREAMS), flush=True)
    feed_end = time.time()

    def drained() -> bool:
        """Bronze and silver read every file and line and went idle, and gold went idle
        after silver did (a gold trigger found nothing new after silver's last commit)."""
        beat = heartbeat().get("queries", {})
        bronze, silver, gold = (beat.get(q, {}) for q in STREAMS)
        silver_idle = silver.get("idle_at", "")
        return (bronze.get("rows", 0) >= len(files) and silver.get("rows", 0) >= lines
                and silver_idle > silver.get("last_progress_at", "")
                and gold.get("idle_at", "") > max(silver_idle, gold.get("last_progress_at", "")))

    deadline = time.monotonic() + args.drain
    while not drained() and time.monotonic() < deadline:
        time.sleep(2)
    caught_up = drained()
    drain_s = time.time() - feed_end
    print(f"drained: {caught_up} after {drain_s:.0f}s; stopping the app", flush=True)
    stopped = continuous.stop(settings)

    from lakecep.lake_sql import read_delta

    lake = home / "lake"
    silver = read_delta(lake / "silver" / "events", ["event_id", "source_file"]).to_pandas()
    file_of = dict(zip(silver["event_id"], silver["source_file"].map(os.path.basename),
                       strict=True))
    gold_path = lake / "gold" / "complex_events"
    gold = read_delta(gold_path, [
        "query_id", "match_id", "live_event_ids", "archive_event_ids",
        "superseded_version"]).to_pandas()
    current = gold[gold["superseded_version"].isna()]
    first = first_commit_of_matches(gold_path)
    freshness: dict[str, list[float]] = defaultdict(list)
    unknown = 0
    for row in current.itertuples(index=False):
        ids = [*row.live_event_ids, *row.archive_event_ids]
        times = [landed.get(file_of.get(e, ""), None) for e in ids]
        if not ids or None in times:
            unknown += 1
            continue
        freshness[row.query_id].append(first[f"{row.query_id}|{row.match_id}"] - max(times))
    every = [v for values in freshness.values() for v in values]

    batches: dict[str, list[float]] = defaultdict(list)
    for line in continuous.log_path(settings).read_text().splitlines():
        found = PROGRESS.search(line)
        if found and int(found.group(3)) > 0:
            batches[found.group(1)].append(int(found.group(4)) / 1000)

    feed_s = feed_end - feed_start
    processed = {
        "bronze.events": rows_committed_by(lake / "bronze" / "events", feed_end),
        "silver (events + duplicates + quarantine)": sum(
            rows_committed_by(lake / "silver" / t, feed_end)
            for t in ("events", "duplicates", "quarantine")),
    }
    truth = json.loads((settings.truth_dir / "truth.json").read_text())
    counts = current.groupby("query_id").size().to_dict()
    expected = {q: len(truth[q]) for q in counts if q in truth}
    p95 = percentile(every, 0.95)
    result = {
        "benchmark": "continuous_freshness",
        "rate_events_per_s": args.rate, "minutes": args.minutes, "period_s": args.period,
        "trigger_s": trigger_s, "files": len(files), "landed_lines": lines,
        "feed_s": feed_s, "kept_up": caught_up, "drain_s": drain_s, "stop": stopped,
        "freshness_s": {
            "p50": percentile(every, 0.5), "p95": p95, "max": max(every, default=None),
            "matches": len(every), "matches_unmeasured": unknown,
            "per_query": {q: {"p50": percentile(v, 0.5), "p95": percentile(v, 0.95),
                              "matches": len(v)} for q, v in sorted(freshness.items())},
        },
        "target": {"p95_s_at_most": 2 * trigger_s,
                   "met": p95 is not None and caught_up and p95 <= 2 * trigger_s},
        "rows_processed_by_feed_end": processed,
        "rows_per_s_during_feed": {k: v / feed_s for k, v in processed.items()},
        "batch_seconds": {q: {"batches": len(v), "median": statistics.median(v),
                              "p95": percentile(v, 0.95), "total": sum(v)}
                          for q, v in sorted(batches.items()) if v},
        "gold_current_rows": counts, "truth_rows": expected,
        "gold_equals_truth": caught_up and counts == expected,
        "machine": machine(), "home": str(home),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2, default=str))
    print(json.dumps({k: result[k] for k in ("freshness_s", "target", "kept_up",
                                             "rows_per_s_during_feed")}, indent=1,
                     default=str))

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3.5))
    for query, values in sorted(freshness.items()):
        ordered = sorted(values)
        ax.plot(ordered, [i / len(ordered) for i in range(len(ordered))], label=query)
    ax.axvline(2 * trigger_s, color="grey", linestyle="--", label="target p95 (2 triggers)")
    ax.set_xlabel("seconds from landing to gold")
    ax.set_ylabel("share of complex events")
    ax.set_title(f"{args.rate:,} events/s for {args.minutes:g} min, trigger "
                 f"{args.trigger}, {machine()['cpus']} cores: kept up {caught_up}")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(args.out.with_suffix(".png"), dpi=120)


if __name__ == "__main__":
    main()
