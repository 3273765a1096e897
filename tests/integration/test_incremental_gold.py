"""Incremental pattern gold on Spark + Delta (jobs/match_state.py): in-order batches read
no history, a late event replays its key and supersedes the match it broke, provisional
matches are written and superseded, and gold's current answer equals one recomputation.
The lake starts as an older release left it (gold.complex_events without deletion vectors,
its change data feed on): gold upgrades it, and the supersede MERGEs write deletion vectors
that Spark, :func:`lakecep.lake_sql.read_delta` and the DuckDB engine all apply."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from delta.tables import DeltaTable
from pyspark.sql import functions as F

from lakecep.jobs import bronze, gold, silver
from lakecep.jobs.gold_chain import CHANGE_FEED
from lakecep.jobs.tables import LakeTable
from lakecep.queries import QUERIES_DIR

pytestmark = pytest.mark.spark
T0 = datetime(2026, 1, 1)
GREEDY = '''
id = "a_bs"
version = "1"
kind = "pattern"
description = "A then one or more B reads within 6 h"
query = """SELECT * FROM events MATCH_RECOGNIZE (PARTITION BY object_id ORDER BY event_time
  MEASURES COUNT(B.event_id) AS bs PATTERN (A B+) WITHIN INTERVAL '6' HOUR
  DEFINE A AS source_id = 'A', B AS source_id = 'B')"""
'''
WAVES = [
    # t1: A B C; t2: A B (C next wave); t3: A C (its B comes late); t4: A B (B+ grows)
    [(1, "t1", "A", 0), (2, "t1", "B", 1), (3, "t1", "C", 2), (4, "t2", "A", 0),
     (5, "t2", "B", 1), (6, "t3", "A", 0), (7, "t3", "C", 2), (8, "t4", "A", 0),
     (9, "t4", "B", 1)],
    # in order for every key, t5 new
    [(10, "t2", "C", 3), (11, "t4", "B", 2), (12, "t5", "A", 3), (13, "t5", "B", 4)],
    # late: t1's X between its B and C breaks A B C; t3's B completes A B C
    [(14, "t1", "X", 1.5), (15, "t3", "B", 1), (16, "t5", "C", 5)],
]


def _line(n: int, tag: str, reader: str, hours: float) -> str:
    return json.dumps({"event_id": f"e{n}", "object_id": tag, "event_type": "read",
                       "source_id": reader,
                       "event_time": (T0 + timedelta(hours=hours)).isoformat() + "Z"})


def _current(spark, local) -> set[tuple[str, tuple[str, ...]]]:  # noqa: ANN001
    rows = LakeTable(spark, local, "gold.complex_events").read().where(
        "superseded_version IS NULL").collect()
    return {(r.query_id, tuple(r.live_event_ids)) for r in rows}


def test_incremental_pattern_gold_over_waves(spark, settings, tmp_path: Path, capsys) -> None:  # noqa: ANN001
    queries = tmp_path / "queries"
    queries.mkdir()
    (queries / "a_bs.toml").write_text(GREEDY)
    (queries / "rfid_abc.toml").write_text(
        (QUERIES_DIR / "rfid_abc.toml").read_text())
    local = dataclasses.replace(settings, home=tmp_path, queries_dir=str(queries),
                                partial_match_buckets=2, incremental_patterns=True)
    local.landing.mkdir(parents=True)
    gold_table = LakeTable(spark, local, "gold.complex_events")
    (DeltaTable.createIfNotExists(spark).location(gold_table.path)
     .addColumns(gold_table.schema).property(CHANGE_FEED, "true").execute())

    def land(n: int, wave: list[tuple]) -> str:
        """Wave ``n`` landed and run through bronze, silver and gold; their output."""
        (local.landing / f"w{n}.jsonl").write_text("\n".join(_line(*e) for e in wave) + "\n")
        capsys.readouterr()
        for job in (bronze, silver, gold):
            job.run(spark, local)
        out = capsys.readouterr()
        return out.out + out.err

    text = "".join(land(n, wave) for n, wave in enumerate(WAVES))
    history = [line for line in text.splitlines() if "history rows read" in line]
    assert len(history) == 2 * len(WAVES)  # one line per query and batch
    # both queries' state saved in one MERGE per batch (one Delta commit, not one per query)
    assert _operations(local, "gold.partial_matches").count("MERGE") == len(WAVES)
    # wave 1: the first batch of each query replays (bootstrap); wave 2 is in order
    # (t5 is new): no history; wave 3: t1 and t3 replay, t5 does not
    wave2 = [line for line in history if "batch 1:" in line]
    assert all(" 0 history rows read" in line for line in wave2), wave2
    wave3 = [line for line in history if "batch 2:" in line and "rfid_abc" in line]
    assert "2 replayed from history" in wave3[0], wave3

    current = _current(spark, local)
    assert {ids for q, ids in current if q == "rfid_abc"} == {
        ("e4", "e5", "e10"), ("e6", "e15", "e7"), ("e12", "e13", "e16")}
    assert {ids for q, ids in current if q == "a_bs"} == {
        ("e1", "e2"), ("e4", "e5"), ("e6", "e15"), ("e8", "e9", "e11"), ("e12", "e13")}
    all_rows = LakeTable(spark, local, "gold.complex_events").read()
    superseded = {tuple(r.live_event_ids) for r in
                  all_rows.where("superseded_version IS NOT NULL").collect()}
    # t1's A B C broken by the late X; t4's provisional A B grown into A B B
    assert superseded == {("e1", "e2", "e3"), ("e8", "e9")}
    assert all_rows.groupBy("query_id", "match_id").count().where("count > 1").count() == 0
    _deletion_vectors(spark, local, current, superseded)

    # one recomputation over all of silver finds exactly the current answer
    silver_events = LakeTable(spark, local, "silver.events")
    version = silver_events.version()
    found = gold.detect(spark, gold.load_queries(queries), silver_events.read(),
                        silver_events.as_of(version), version, 99, datetime.now(UTC), local)
    assert {(r.query_id, tuple(r.live_event_ids)) for r in found.rows.collect()} == current

    state = LakeTable(spark, local, "gold.partial_matches").read()
    keys = {r.key: r for r in state.where((F.col("kind") == "key")
                                          & (F.col("query_id") == "a_bs")).collect()}
    assert len(keys["t4"].pending_ids) == 1  # A B B may still grow

    # key expiry: t6's reads 15 h later leave every other key idle for more than both
    # WITHIN windows (6 h, 10 h): their key rows go in the state's one MERGE, the query row
    # records the newest time, and a late read of the expired t5 replays its history.
    # t6's A B C is new and in order: its rows are appended (a Delta WRITE). The batch is
    # run again as after a crash between its gold write and its state MERGE (its
    # checkpoint commit and that MERGE undone): its in-order rows are MERGEd, not appended
    # twice, and the same keys expire again
    expiry_batch = len(WAVES)

    def expired_once(text: str) -> None:
        # (both queries' state in the batch's one MERGE: one count for the two)
        lines = [line for line in text.splitlines()
                 if f"batch {expiry_batch}:" in line and "expired" in line]
        assert len(lines) == 1 and "a_bs, rfid_abc: 10 partial-match key rows expired" \
            in lines[0], lines

    expired_once(land(expiry_batch, [(17, "t6", "A", 20), (18, "t6", "B", 21),
                                     (20, "t6", "C", 22)]))
    operations = _operations(local, "gold.complex_events")
    assert operations[-1] == "WRITE"
    before = _current(spark, local)
    assert ("e17", "e18", "e20") in {ids for q, ids in before if q == "rfid_abc"}
    commits = local.checkpoint(gold.QUERY) / "commits"
    assert max(int(p.name) for p in commits.glob("*") if p.name.isdigit()) == expiry_batch
    (commits / str(expiry_batch)).unlink()
    (commits / f".{expiry_batch}.crc").unlink(missing_ok=True)
    state = LakeTable(spark, local, "gold.partial_matches")
    assert _operations(local, "gold.partial_matches")[-1] == "MERGE"
    spark.sql(f"RESTORE TABLE delta.`{state.path}` TO VERSION AS OF {state.version() - 1}")
    capsys.readouterr()
    gold.run(spark, local)
    log = capsys.readouterr().err
    assert f"batch {expiry_batch} planned by an earlier run but not committed: run again" \
        in log, log
    expired_once(log)
    # (MERGEd again: an insert-only MERGE that finds every row in gold commits nothing)
    assert _operations(local, "gold.complex_events") == operations
    rows = LakeTable(spark, local, "gold.complex_events").read()
    assert rows.groupBy("query_id", "match_id").count().where("count > 1").count() == 0
    assert _current(spark, local) == before

    text = land(expiry_batch + 1, [(19, "t5", "B", 4.5)])
    late = [line for line in text.splitlines() if f"batch {expiry_batch + 1}:" in line
            and "a_bs" in line and "history rows read" in line]
    assert "1 replayed from history" in late[0], late
    state = LakeTable(spark, local, "gold.partial_matches").read().where(
        F.col("query_id") == "a_bs").collect()
    # t5 replayed, but its newest read is still far behind t6's: expired again
    assert {r.key for r in state if r.kind == "key"} == {"t6"}
    newest = int((T0 + timedelta(hours=22) - datetime(1970, 1, 1)).total_seconds() * 1e9)
    assert [r.last_time for r in state if r.kind == "query"] == [newest]
    current = _current(spark, local)
    a_bs = {ids for q, ids in current if q == "a_bs"}
    assert ("e12", "e13", "e19") in a_bs and ("e12", "e13") not in a_bs
    version = silver_events.version()
    found = gold.detect(spark, gold.load_queries(queries), silver_events.read(),
                        silver_events.as_of(version), version, 99, datetime.now(UTC), local)
    assert {(r.query_id, tuple(r.live_event_ids)) for r in found.rows.collect()} == current
    assert rows.groupBy("query_id", "match_id").count().where("count > 1").count() == 0


def _deletion_vectors(spark, local, current: set, superseded: set) -> None:  # noqa: ANN001
    """Gold upgraded the table to deletion vectors (change feed kept); each update-only
    supersede MERGE wrote a deletion vector and copied no row; the change feed still
    reports the superseded rows; Spark, read_delta and DuckDB agree on the rows."""
    from lakecep.lake_sql import read_delta, run_query

    gold_table = LakeTable(spark, local, "gold.complex_events")
    detail = spark.sql(f"DESCRIBE DETAIL delta.`{gold_table.path}`").first()
    assert "deletionVectors" in detail.tableFeatures
    assert {k: v for k, v in detail.properties.items() if k.startswith("delta.enable")} == {
        "delta.enableDeletionVectors": "true", CHANGE_FEED: "true"}
    updates, vectors = [], 0
    for path in sorted((Path(gold_table.path) / "_delta_log").glob("*.json"),
                       key=lambda p: int(p.stem)):
        actions = [json.loads(line) for line in path.read_text().splitlines()]
        info = next(a["commitInfo"] for a in actions if "commitInfo" in a)
        metrics = {k: int(v) for k, v in info.get("operationMetrics", {}).items()}
        if info["operation"] == "MERGE" and metrics.get("numTargetRowsUpdated") \
                and not metrics.get("numTargetRowsInserted"):
            updates.append(int(path.stem))
            assert metrics["numTargetRowsCopied"] == 0, metrics  # no file rewritten
            # (a file whose rows are all updated is removed whole: no vector needed)
            added = sum(1 for a in actions if a.get("add", {}).get("deletionVector"))
            assert added == metrics["numTargetDeletionVectorsAdded"], metrics
            vectors += added
    assert len(updates) == 2 and vectors >= 1  # the supersedes of waves 2 and 3
    changes = spark.read.format("delta").option("readChangeFeed", "true").option(
        "startingVersion", min(updates)).option("endingVersion", max(updates)).load(
        gold_table.path).where("_change_type = 'update_postimage'")
    assert {tuple(r.live_event_ids) for r in changes.collect()} == superseded

    arrow = read_delta(gold_table.path, ["query_id", "live_event_ids"],
                       "superseded_version IS NULL")
    assert {(q, tuple(ids)) for q, ids in zip(*arrow.to_pydict().values(), strict=True)} \
        == current
    assert read_delta(gold_table.path).num_rows == gold_table.read().count()
    frame = run_query(local, "SELECT query_id, live_event_ids FROM gold.complex_events "
                      "WHERE superseded_version IS NULL", 100)
    assert {(q, tuple(ids)) for q, ids in frame.itertuples(index=False)} == current


def _operations(local, table: str) -> list[str]:  # noqa: ANN001
    """The operations of a Delta table's commits, oldest first (from its log)."""
    log = Path(local.table_path(table)) / "_delta_log"
    out = []
    for path in sorted(log.glob("*.json"), key=lambda p: int(p.stem)):
        for line in path.read_text().splitlines():
            if '"commitInfo"' in line:
                out.append(json.loads(line)["commitInfo"]["operation"])
    return out
