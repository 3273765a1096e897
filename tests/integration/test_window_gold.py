"""Window queries in the gold job (kind = "window", docs/windows.md "In the pipeline"): three
micro-batches with out-of-order and late readings, then a replayed batch. gold.window_outputs
must equal

* for every query, one ``cep_core.windows`` operator for all keys fed the same batches
  and watermarks (the state carried in gold.window_state per key bucket changes nothing);
* for the time and count windows (allowed lateness covers every late reading), the newest
  revision of every window = plain pandas over all the events;

and a replayed batch (whether its state was saved or not) writes nothing twice."""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pandas as pd
import pytest
from delta.tables import DeltaTable
from pyspark.sql import functions as F

from cep_core.windows import Event, Insert
from lakecep.jobs import bronze, gold, silver
from lakecep.jobs.status import lake_status
from lakecep.jobs.tables import LakeTable
from lakecep.queries import WindowQuery, load_queries

pytestmark = pytest.mark.spark
T0 = datetime(2026, 3, 1, tzinfo=UTC)
US = 1_000_000
AGGS = '["count", "sum", "avg", "var", "min", "max"]'
QUERIES = {
    "sampled": f'''id = "sampled"
kind = "window"
attribute = "temperature"
aggregates = {AGGS}
window = "10 minutes"
every = "2 minutes"
event_types = ["reading"]
watermark_delay = "1 minute"
''',
    "sliding": f'''id = "sliding"
version = "3"
kind = "window"
attribute = "temperature"
aggregates = {AGGS}
window = "10 minutes"
slide = "5 minutes"
event_types = ["reading"]
allowed_lateness = "1 hour"
''',
    "counted": f'''id = "counted"
kind = "window"
attribute = "temperature"
aggregates = {AGGS}
rows = 3
slide = 2
event_types = ["reading"]
allowed_lateness = "1 hour"
''',
}

# (sensor, minute, temperature; None: no reading) -- 'other' events only move the watermark
BATCHES = [
    [("s1", 3, 20.5), ("s1", 0, 19.0), ("s2", 5, 30.25), ("s1", 1, 21.0), ("s3", 4, 5.5),
     ("s1", 7, None), ("s2", 2, 31.0), ("s1", 14, 18.75), ("s2", 11, 29.5), ("s1", 12, 22.0)],
    # late: s1 at 6 (inside a later sample's window), s2 at 1 (before every future sample
    # window); the watermark jumps to 29 min with an 'other' event
    [("s1", 6, 23.25), ("s2", 1, 28.0), ("s1", 20, 17.5), ("s2", 18, 33.0), ("s3", 25, None),
     ("x", 30, "other")],
    # late: s2 at 9 (a correction of closed windows; too old for the sampler)
    [("s1", 40, 16.0), ("s2", 9, 27.75), ("s3", 41, 6.0), ("s1", 44, -2.5),
     ("x", 60, "other")],
]


def _events() -> list[list[dict]]:
    out, n = [], 0
    for batch in BATCHES:
        rows = []
        for sensor, minute, value in batch:
            n += 1
            other = value == "other"
            rows.append({"event_id": f"e{n}", "object_id": sensor,
                         "event_type": "other" if other else "reading", "source_id": "r",
                         "time": int((T0 + timedelta(minutes=minute)).timestamp()) * US,
                         "value": None if other else value})
        out.append(rows)
    return out


def _line(e: dict) -> str:
    attributes = {} if e["value"] is None else {"temperature": e["value"]}
    when = datetime.fromtimestamp(e["time"] / US, UTC).isoformat().replace("+00:00", "Z")
    return json.dumps({"event_id": e["event_id"], "object_id": e["object_id"],
                       "event_type": e["event_type"], "source_id": e["source_id"],
                       "event_time": when, "attributes": attributes})


def _expected_rows(query: WindowQuery, batches: list[list[dict]]) -> set[tuple]:
    """One operator for all keys, fed batch by batch with the gold job's watermarks."""
    op, watermark, out = query.operator(), None, set()
    for batch in batches:
        newest = max(e["time"] for e in batch) - query.watermark_delay // timedelta(
            microseconds=1)
        watermark = newest if watermark is None else max(watermark, newest)
        for e in sorted((e for e in batch if e["event_type"] == "reading"),
                        key=lambda e: (e["time"], e["seq"])):
            op.apply(Insert(Event(e["object_id"], e["time"], e["seq"], e["value"])))
        out |= {(r.key, r.window_start, r.window_end, r.window_id, r.aggregate,
                 _round(r.value), r.count, r.revision, r.emitted_at) for r in op.advance(
                     watermark)}
    return out


def _round(value: float | None) -> float | None:
    return None if value is None else float(f"{value:.12g}")


def _pandas_windows(query: WindowQuery, events: pd.DataFrame) -> dict[tuple, tuple]:
    """Plain pandas over every reading: (key, window_start, aggregate) -> (value, count)."""
    out = {}
    readings = events[events["event_type"] == "reading"]
    for key, group in readings.groupby("object_id"):
        group = group.sort_values("time")
        windows: list[tuple[int, pd.Series]] = []   # (window_id, values)
        if query.mode == "count":
            assert query.rows is not None and isinstance(query.slide, int)
            for first in range(0, len(group) - query.rows + 1, query.slide):
                part = group.iloc[first:first + query.rows]
                windows.append((first, part["value"]))
        else:
            assert query.window is not None and isinstance(query.slide, timedelta)
            size = query.window // timedelta(microseconds=1)
            slide = query.slide // timedelta(microseconds=1)
            lo = (group["time"].min() - size) // slide * slide
            for start in range(lo, group["time"].max() + 1, slide):
                part = group[(group["time"] >= start) & (group["time"] < start + size)]
                if len(part):
                    windows.append((start, part["value"]))
        for wid, values in windows:
            v = values.dropna().astype(float)
            stats = {"count": float(len(v)), "sum": v.sum() if len(v) else None,
                     "avg": v.mean() if len(v) else None,
                     "var": v.var(ddof=1) if len(v) > 1 else None,
                     "min": v.min() if len(v) else None, "max": v.max() if len(v) else None}
            for name, value in stats.items():
                out[(key, wid, name)] = (value, len(values))
    return out


def _uncommit(commits: Path, batch: int) -> None:
    """Remove the stream's commit of ``batch`` (and its checksum): the next run re-runs it."""
    (commits / str(batch)).unlink()
    (commits / f".{batch}.crc").unlink(missing_ok=True)


def test_window_queries_in_gold_equal_recomputation(spark, settings, tmp_path: Path) -> None:  # noqa: ANN001
    queries_dir = tmp_path / "queries"
    queries_dir.mkdir()
    for name, text in QUERIES.items():
        (queries_dir / f"{name}.toml").write_text(text)
    local = dataclasses.replace(settings, home=tmp_path / "home", queries_dir=str(queries_dir),
                                partial_match_buckets=2)
    local.landing.mkdir(parents=True)
    batches = _events()
    for n, batch in enumerate(batches):
        (local.landing / f"b{n}.jsonl").write_text("\n".join(map(_line, batch)) + "\n")
        for job in (bronze, silver, gold):
            job.run(spark, local)

    outputs = LakeTable(spark, local, "gold.window_outputs")
    state = LakeTable(spark, local, "gold.window_state")
    silver_rows = LakeTable(spark, local, "silver.events").read().select(
        "event_id", F.xxhash64("event_id").alias("seq")).collect()
    seq = {r.event_id: r.seq for r in silver_rows}
    assert len(seq) == sum(map(len, batches))
    for batch in batches:
        for e in batch:
            e["seq"] = seq[e["event_id"]]

    def read() -> dict[str, set[tuple]]:
        got: dict[str, set[tuple]] = {}
        for r in outputs.read().select(
                "*", F.unix_micros("window_start").alias("ws"),
                F.unix_micros("window_end").alias("we"),
                F.unix_micros("emitted_at").alias("at")).collect():
            got.setdefault(r.query_id, set()).add(
                (r.key, r.ws, r.we, r.window_id, r.aggregate, _round(r.value), r.event_count,
                 r.revision, r.at))
        return got

    before = read()
    total = outputs.read().count()
    assert total == sum(len(rows) for rows in before.values())  # no row twice
    queries = {q.id: q for q in load_queries(queries_dir)}
    for query_id, query in queries.items():
        assert isinstance(query, WindowQuery)
        assert before[query_id] == _expected_rows(query, batches), query_id

    # the late readings made corrections (time windows) and late samples (sampler)
    corrected = outputs.read().where("query_id = 'sliding' AND revision > 0").count()
    assert corrected > 0
    kinds = {r.query_id: (r.window_kind, r.query_version, r.rule_hash) for r in
             outputs.read().select("query_id", "window_kind", "query_version", "rule_hash")
             .distinct().collect()}
    assert kinds == {"sampled": ("sample", "1", queries["sampled"].rule_hash),
                     "sliding": ("time", "3", queries["sliding"].rule_hash),
                     "counted": ("count", "1", queries["counted"].rule_hash)}

    # newest revision of each time / count window = plain pandas over all the events
    events = pd.DataFrame([e for batch in batches for e in batch])
    for query_id in ("sliding", "counted"):
        query = queries[query_id]
        assert isinstance(query, WindowQuery)
        newest: dict[tuple, tuple] = {}
        for key, _, _, wid, name, value, count, _, _ in sorted(
                before[query_id], key=lambda r: r[7]):
            newest[(key, wid, name)] = (value, count)
        want = _pandas_windows(query, events)
        assert set(newest) == set(want), query_id
        for k, (value, count) in want.items():
            got_value, got_count = newest[k]
            assert got_count == count, (query_id, k)
            assert (got_value is None) == (value is None or math.isnan(value)), (query_id, k)
            if got_value is not None:
                assert got_value == pytest.approx(value, rel=1e-9, abs=1e-12), (query_id, k)

    # a replayed batch: the stream re-runs its last batch (commit removed: a crash after
    # gold, the window rows and the state were written) -- nothing is written twice
    commits = local.checkpoint(gold.QUERY) / "commits"
    last = max(int(p.name) for p in commits.iterdir() if p.name.isdigit())
    state_rows = state.read().where("bucket = -1").collect()
    assert {r.batch_id for r in state_rows} == {last}
    _uncommit(commits, last)
    gold.run(spark, local)
    assert read() == before and outputs.read().count() == total
    # ... and a crash after the window rows, before the state was saved: the state table
    # goes back to before the last batch's merges, the batch runs again from that state
    history = DeltaTable.forPath(spark, state.path).history().select(
        "version", "operation").orderBy("version").collect()
    merges = [h.version for h in history if h.operation == "MERGE"]  # one per batch
    DeltaTable.forPath(spark, state.path).restoreToVersion(merges[-3])
    assert {r.batch_id for r in state.read().where("bucket = -1").collect()} == {last - 1}
    _uncommit(commits, last)
    gold.run(spark, local)
    assert read() == before and outputs.read().count() == total
    assert {r.batch_id for r in state.read().where("bucket = -1").collect()} == {last}
    assert lake_status(spark, local).counts["gold.window_outputs"] == total


SPLIT_QUERY = '''id = "split"
kind = "window"
attribute = "temperature"
aggregates = ["count"]
window = "10 minutes"
event_types = ["reading"]
watermark_delay = "1 minute"
'''


def test_a_silver_commit_split_across_gold_batches_is_read_as_one(spark, settings,  # noqa: ANN001
                                                                   tmp_path: Path) -> None:
    """Each silver commit below is two files, each spanning the commit's whole time range
    (silver's hash partitioning); gold reads one file per micro-batch. Its window watermark
    must move only where a commit ends (docs/architecture.md, "Late events"): the first
    file's newest reading must not make the other file's readings too late (no allowed
    lateness). Run 1 reads commit A as the stream's initial snapshot, run 2 commit B."""
    queries_dir = tmp_path / "queries"
    queries_dir.mkdir()
    (queries_dir / "split.toml").write_text(SPLIT_QUERY)
    local = dataclasses.replace(settings, home=tmp_path / "home", queries_dir=str(queries_dir),
                                partial_match_buckets=2, max_files_per_trigger=1)
    silver_events = LakeTable(spark, local, "silver.events").ensure()
    now = datetime.now(UTC)

    def commit(minutes: Sequence[int], files: int) -> None:
        rows = [(f"{key}-{m}", key, "reading", "r", T0 + timedelta(minutes=m),
                 {"temperature": str(m)}, "f", m, now, now)
                for key in ("s1", "s2") for m in minutes]
        frame = spark.createDataFrame(rows, (
            "event_id STRING, object_id STRING, event_type STRING, source_id STRING, "
            "event_time TIMESTAMP, attributes MAP<STRING,STRING>, source_file STRING, "
            "line_no BIGINT, ingest_time TIMESTAMP, silver_time TIMESTAMP"))
        frame = frame.select(*[F.col(f.name).cast(f.dataType) if f.name in frame.columns
                               else F.lit(None).cast(f.dataType).alias(f.name)
                               for f in silver_events.schema])
        # round robin: every file holds every other reading, so spans the commit's range
        frame.repartition(files).write.format("delta").mode("append").save(silver_events.path)

    def windows() -> dict[tuple[str, int], tuple[int, int, int]]:
        """(key, window start minute) -> (count, revision, batch id) of every output row."""
        out: dict[tuple[str, int], tuple[int, int, int]] = {}
        for r in LakeTable(spark, local, "gold.window_outputs").read().where(
                "aggregate = 'count'").collect():
            start = int((r.window_start.replace(tzinfo=UTC) - T0) / timedelta(minutes=1))
            assert (r.key, start) not in out, "a window emitted twice"
            out[(r.key, start)] = (r.event_count, r.revision, r.batch_id)
        return out

    keys = ("s1", "s2")
    commit(range(20), 2)  # commit A: readings at minutes 0..19 in 2 files
    gold.run(spark, local)  # the stream's initial snapshot: batch 0 inside it, 1 its end
    assert windows() == {(k, 0): (10, 0, 1) for k in keys}  # watermark 18 min
    commit([*range(20, 40), 90], 2)  # commit B: 20..39 and an event at 90 in 2 files
    gold.run(spark, local)  # batch 2 inside commit B, 3 its end
    assert windows() == {(k, m): (10, 0, 1 if m == 0 else 3)
                         for k in keys for m in range(0, 40, 10)}
    marks = [json.loads(r.state) for r in LakeTable(spark, local, "gold.window_state").read()
             .where("bucket = -1").collect()]
    assert marks == [{"watermark": int((T0 + timedelta(minutes=89)).timestamp()) * US}]
