"""Chained rules with taint (docs/rules.md, section 1) through bronze -> silver -> gold.

``rfid_abc`` (over silver) <- ``abc_twice`` (two A->B->C passages of a tag within a day,
over rfid_abc's complex events) <- ``twice_seen`` (one row per abc_twice event). Batch 1
bootstraps the chained rules; batch 2 brings late reads that break one passage (t1), add
one that pairs (t2), touch a tag without changing its answer (t3) and add one that pairs
with nothing (t4). After each batch: every chained rule's current rows equal a full
recomputation over its inputs' current rows (cep_core directly), and in batch 2 the keys
each rule recomputed are the reachable set: the keys whose input answer changed (t1, t2,
t4 for abc_twice; t1, t2 for twice_seen, since t4's pairing found nothing new), computed
here from gold before and after the batch. A rule cycle is rejected before anything runs.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from datetime import datetime, timedelta
from pathlib import Path

import pandas as pd
import pytest

from lakecep.jobs import bronze, gold, replay, silver
from lakecep.jobs.tables import LakeTable
from lakecep.queries import QUERIES_DIR, load_queries
from lakecep.validation import ValidationError

pytestmark = pytest.mark.spark
T0 = datetime(2026, 1, 1)
TWICE = '''id = "abc_twice"
kind = "pattern"
input = ["rfid_abc"]
query = """
SELECT * FROM events MATCH_RECOGNIZE (
  PARTITION BY object_id ORDER BY event_time
  MEASURES P1.event_id AS first_pass, P2.event_id AS second_pass, P1.a_id AS first_a
  ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW
  PATTERN (P1 P2) WITHIN INTERVAL '1' DAY
  DEFINE P1 AS event_type = 'rfid_abc', P2 AS event_type = 'rfid_abc')
"""
[attributes]
a_id = "string"
'''
SEEN = '''id = "twice_seen"
kind = "pattern"
input = "abc_twice"
query = """
SELECT * FROM events MATCH_RECOGNIZE (
  PARTITION BY object_id ORDER BY event_time
  MEASURES T.event_id AS twice_id, T.start_time AS since
  ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW
  PATTERN (T) DEFINE T AS event_type = 'abc_twice')
"""
'''


def _reads(tag: str, hours: float, first: int, readers: str = "ABC") -> list[str]:
    return [json.dumps({"event_id": f"{tag}-{first + i}", "object_id": tag,
                        "event_type": "read", "source_id": reader,
                        "event_time": (T0 + timedelta(hours=hours + i)).isoformat() + "Z"})
            for i, reader in enumerate(readers)]


def _current(spark, local) -> pd.DataFrame:  # noqa: ANN001
    rows = LakeTable(spark, local, "gold.complex_events").read().where(
        "superseded_version IS NULL").toPandas()
    return rows.sort_values(["query_id", "partition_key", "end_time", "match_id"])


def _answers(frame: pd.DataFrame, query_id: str) -> dict[str, set[str]]:
    """query's current answer per key: its match ids."""
    part = frame[frame["query_id"] == query_id]
    return {k: set(g["match_id"]) for k, g in part.groupby("partition_key")}


def _changed(before: pd.DataFrame, after: pd.DataFrame, query_id: str) -> set[str]:
    old, new = _answers(before, query_id), _answers(after, query_id)
    return {k for k in set(old) | set(new) if old.get(k, set()) != new.get(k, set())}


def _recompute(frame: pd.DataFrame, query, inputs: list[str]) -> set[tuple[str, tuple]]:  # noqa: ANN001
    """The reference: the chained rule over every current row of its inputs, as events,
    run by cep_core directly. (key, event ids) of each match."""
    rows = frame[frame["query_id"].isin(inputs)]
    events = pd.DataFrame({
        "event_id": rows["match_id"], "object_id": rows["partition_key"],
        "event_type": rows["query_id"], "source_id": rows["query_id"],
        "event_time": rows["end_time"], "start_time": rows["start_time"],
        "ingest_time": rows["detection_time"],
        **{name: rows["measures"].map(lambda m, n=name: m.get(n)) for name, _ in
           query.attributes}}).sort_values(["event_time", "event_id"], kind="stable")
    ids = events["event_id"].tolist()
    return {(str(m.partition[0]), tuple(ids[r] for r in m.rows))
            for m in query.compiled().find_matches(events.reset_index(drop=True))}


def _check_equal_to_recomputation(spark, local, queries: dict) -> pd.DataFrame:  # noqa: ANN001
    frame = _current(spark, local)
    for query_id, inputs in (("abc_twice", ["rfid_abc"]), ("twice_seen", ["abc_twice"])):
        got = {(r.partition_key, tuple(r.live_event_ids))
               for r in frame[frame["query_id"] == query_id].itertuples()}
        assert got == _recompute(frame, queries[query_id], inputs), query_id
    return frame


def test_chained_rules_recompute_the_reachable_keys(spark, settings, tmp_path: Path) -> None:  # noqa: ANN001
    folder = tmp_path / "queries"
    folder.mkdir()
    shutil.copy(QUERIES_DIR / "rfid_abc.toml", folder)
    (folder / "abc_twice.toml").write_text(TWICE)
    (folder / "twice_seen.toml").write_text(SEEN.replace('input = "abc_twice"',
                                                         'input = "twice_seen"'))
    local = dataclasses.replace(settings, home=tmp_path / "home", queries_dir=str(folder))
    local.landing.mkdir(parents=True)
    with pytest.raises(ValidationError, match="in a cycle: twice_seen -> twice_seen"):
        gold.run(spark, local)
    (folder / "twice_seen.toml").write_text(SEEN)
    queries = {q.id: q for q in load_queries(folder)}

    first = []
    for tag in ("t1", "t2", "t3", "t4"):
        first += _reads(tag, 0, 0)
    first += _reads("t1", 5, 3) + _reads("t3", 5, 3)
    (local.landing / "f1.jsonl").write_text("\n".join(first) + "\n")
    for job in (bronze, silver, gold):
        job.run(spark, local)
    before = _check_equal_to_recomputation(spark, local, queries)
    assert set(_answers(before, "abc_twice")) == {"t1", "t3"}

    late = (_reads("t1", 1.5, 10, "X")       # between B and C: breaks t1's first passage
            + _reads("t2", 10, 10)           # a second passage of t2 within the day
            + _reads("t3", 8, 10, "X")       # touches t3, changes nothing
            + _reads("t4", 50, 10))          # a passage two days later: pairs with nothing
    (local.landing / "f2.jsonl").write_text("\n".join(late) + "\n")
    for job in (bronze, silver, gold):
        job.run(spark, local)
    after = _check_equal_to_recomputation(spark, local, queries)

    runs = LakeTable(spark, local, "gold.rule_runs").read().toPandas()
    assert runs.groupby("query_id")["batch_id"].nunique().to_dict() == {
        "abc_twice": 2, "twice_seen": 2}
    boot = runs[runs["bootstrap"]]
    assert sorted(boot["query_id"]) == ["abc_twice", "twice_seen"]
    assert boot.set_index("query_id")["keys_recomputed"].to_dict() == {
        "abc_twice": 4, "twice_seen": 2}       # every key of the inputs (and its own)
    second = runs[~runs["bootstrap"]].set_index("query_id")
    reachable = {"abc_twice": _changed(before, after, "rfid_abc"),
                 "twice_seen": _changed(before, after, "abc_twice")}
    assert reachable == {"abc_twice": {"t1", "t2", "t4"}, "twice_seen": {"t1", "t2"}}
    for query_id, keys in reachable.items():
        assert second.loc[query_id, "keys_recomputed"] == len(keys), query_id
    assert second.loc["abc_twice", "keys_total"] == 4
    print("\nchained rules, batch 2: " + "; ".join(
        f"{q}: {second.loc[q, 'keys_recomputed']} keys recomputed = reachable "
        f"{len(k)} of {second.loc[q, 'keys_total']}" for q, k in reachable.items()))

    # every row replays at the version it was found at: chained rules over gold's rows
    # then, silver rules over silver's (superseded ones included)
    rows = LakeTable(spark, local, "gold.complex_events").read().collect()
    results = replay.replay(spark, local, [r.match_id for r in rows])
    assert len(results) == len(rows) == 14   # rfid_abc 8, abc_twice 3, twice_seen 3
    assert [(r.match_id, r.differences, r.error) for r in results if not r.reproduced] == []
    assert {(r.query_id, r.stored["superseded_version"] is None) for r in results} == {
        (q, current) for q in ("rfid_abc", "abc_twice", "twice_seen") for current in (False, True)}
