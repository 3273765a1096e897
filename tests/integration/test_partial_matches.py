"""The live step keeps live-pattern partial matches in gold.partial_matches between
micro-batches: a bounded store of one key per bucket (spilling to the table) gives exactly
the gold rows of an unbounded one, counts its hits and misses, and reads history only for
keys it must replay."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from pyspark.sql import functions as F

from lakecep.jobs import bronze, gold, silver
from lakecep.jobs.tables import LakeTable

pytestmark = pytest.mark.spark
T0 = datetime(2026, 3, 1)

# live: a read at C directly followed by a read at D within 3 h (a two-event partial match
# that can stay open across micro-batches); archive: the tag's A -> B passage in the 24 h
# before C
QUERY = '''
id = "cd_after_ab"
version = "1"
kind = "live_archive"
key = "object_id"
strategy = "llaa"

[live]
query = """SELECT * FROM live MATCH_RECOGNIZE (PARTITION BY object_id ORDER BY event_time
  MEASURES C.event_id AS c_id, D.event_id AS d_id PATTERN (C D) WITHIN INTERVAL '3' HOUR
  DEFINE C AS source_id = 'C', D AS source_id = 'D')"""

[archive]
before = "24 hours"
query = """SELECT * FROM archive MATCH_RECOGNIZE (PARTITION BY object_id ORDER BY event_time
  MEASURES A.event_id AS a_id, B.event_id AS b_id AFTER MATCH SKIP PAST LAST ROW
  PATTERN (A B) DEFINE A AS source_id = 'A', B AS source_id = 'B')"""
'''

BATCHES = [
    # t1, t2 wait at C for their D; t3's C D has no A -> B before it (no gold row)
    [("e1", "t1", "A", 0), ("e2", "t1", "B", 1), ("e3", "t1", "C", 2),
     ("e4", "t2", "A", 0), ("e5", "t2", "B", 1), ("e6", "t2", "C", 3), ("e7", "t3", "C", 1)],
    [("e8", "t1", "D", 3), ("e9", "t2", "X", 4), ("e10", "t3", "D", 2),
     ("e11", "t4", "A", 0), ("e12", "t4", "B", 1), ("e13", "t4", "C", 5)],
    # in order for every key: nothing is read from history
    [("e14", "t2", "C", 6), ("e15", "t2", "D", 7), ("e16", "t4", "D", 6),
     ("e17", "t1", "C", 8), ("e18", "t1", "D", 9)],
    # a late A -> B for t3 (before its C at 1 h): t3 is replayed and its C D joins it
    [("e19", "t3", "A", -3), ("e20", "t3", "B", -2), ("e21", "t4", "C", 7)],
]
EXPECTED = {("e3", "e8", "e1", "e2"), ("e14", "e15", "e4", "e5"), ("e13", "e16", "e11", "e12"),
            ("e17", "e18", "e1", "e2"), ("e7", "e10", "e19", "e20")}


def _line(event_id: str, tag: str, reader: str, hours: float) -> str:
    return json.dumps({"event_id": event_id, "object_id": tag, "event_type": "read",
                       "source_id": reader,
                       "event_time": (T0 + timedelta(hours=hours)).isoformat() + "Z"})


def _run(spark, settings, home: Path, capacity: int):  # noqa: ANN001, ANN202
    queries = home / "queries"
    queries.mkdir(parents=True)
    (queries / "cd.toml").write_text(QUERY)
    local = dataclasses.replace(settings, home=home, queries_dir=str(queries),
                                partial_match_buckets=2, partial_match_capacity=capacity,
                                partial_match_policy="tpm", rbuffer_rows=1)
    local.landing.mkdir(parents=True)
    for n, batch in enumerate(BATCHES):
        (local.landing / f"b{n}.jsonl").write_text(
            "\n".join(_line(*event) for event in batch) + "\n")
        for job in (bronze, silver, gold):
            job.run(spark, local)
    rows = LakeTable(spark, local, "gold.complex_events").read().collect()
    access = LakeTable(spark, local, "gold.archive_access").read().orderBy("batch_id").collect()
    return local, {tuple(r.live_event_ids) + tuple(r.archive_event_ids) for r in rows}, access


def test_tiny_bounded_store_in_delta_gives_the_unbounded_gold(spark, settings, tmp_path,  # noqa: ANN001
                                                               capfd):  # noqa: ANN001
    # The unbounded store's gold is EXPECTED (test_gold runs the default, never-spilling
    # store: no misses, no spills); one run with one key per bucket must give it too.
    local, tiny, access = _run(spark, settings, tmp_path / "tiny", capacity=1)
    assert tiny == EXPECTED
    assert len(access) == len(BATCHES)

    # keys per batch: new ones are replayed (their history is just the batch), known ones
    # in order are not; batch 3 is fully in order; the late A -> B replays t3 alone
    assert [a.replayed_keys for a in access] == [3, 1, 0, 1]
    assert [a.partial_new_keys for a in access] == [3, 1, 0, 1]
    # with one key per bucket in memory the known keys come back from their spill rows
    assert sum(a.partial_misses for a in access) >= 2
    assert sum(a.partial_spilled for a in access) >= 2
    assert all(a.partial_hits + a.partial_misses + a.partial_new_keys
               == len({e[1] for e in batch}) for a, batch in zip(access, BATCHES, strict=True))

    state = LakeTable(spark, local, "gold.partial_matches").read()
    hot = state.where(F.col("kind") == "hot").collect()
    assert len(hot) == 2 and all(r.keys_in_memory <= 1 for r in hot)
    keys = {r.key: r for r in state.where(F.col("kind") == "key").collect()}
    # key expiry: t3's newest event (2 h; its late A -> B replayed it at -3 h and -2 h) is
    # more than the live WITHIN (3 h) behind the query's newest (t1's D at 9 h): its row is
    # gone (batch 2 removed it, the replay's new one was not kept), the others stay
    assert set(keys) == {"t1", "t2", "t4"}
    # newest event time fed per key (ns)
    seven = (T0 + timedelta(hours=7)).replace(tzinfo=UTC)
    assert keys["t4"].last_time == int(seven.timestamp()) * 10**9
    assert all(r.last_time is not None for r in keys.values())
    log = capfd.readouterr().err
    assert "batch 2: cd_after_ab: 1 partial-match key rows expired" in log, log[-3000:]

    # a changed definition (rule_hash; the version label alone changes nothing) drops the
    # query's stored state at the next start (keys are replayed)
    changed = QUERY.replace('version = "1"', 'version = "2"').replace(
        'before = "24 hours"', 'before = "25 hours"')
    (Path(local.queries_dir) / "cd.toml").write_text(changed)
    gold.run(spark, local)
    assert LakeTable(spark, local, "gold.partial_matches").read().count() == 0
