"""gold on real Spark + Delta: pattern and live-archive queries with lineage, exactly once,
late events handled, pinned history version recorded."""

from __future__ import annotations

import dataclasses
import json
import shutil
from datetime import datetime, timedelta
from pathlib import Path
from types import SimpleNamespace

import pytest
from pyspark.sql import functions as F

from lakecep.jobs import bronze, gold, silver
from lakecep.jobs.catalog import register_tables
from lakecep.jobs.tables import LakeTable

pytestmark = pytest.mark.spark
T0 = datetime(2026, 1, 1)


def read(n: int, tag: str, reader: str, hours: float) -> str:
    when = T0 + timedelta(hours=hours)
    return json.dumps({"event_id": f"e{n}", "object_id": tag, "event_type": "read",
                       "source_id": reader, "event_time": when.isoformat() + "Z"})


def land_and_run(spark, local, name: str, lines: list[str]) -> None:  # noqa: ANN001
    local.landing.mkdir(parents=True, exist_ok=True)
    (local.landing / name).write_text("\n".join(lines) + "\n")
    for job in (bronze, silver, gold):
        job.run(spark, local)


def gold_rows(spark, local) -> dict[tuple[str, tuple[str, ...]], object]:  # noqa: ANN001
    rows = LakeTable(spark, local, "gold.complex_events").read().collect()
    return {(r.query_id, tuple(r.live_event_ids) + tuple(r.archive_event_ids)): r for r in rows}


def of_tags(rows: dict, tags: set[str]) -> dict:
    """The rows of one scenario's tags."""
    return {k: r for k, r in rows.items() if r.partition_key in tags}


#: Two scenarios share one lake (a gold run costs tens of seconds; the tags keep them apart):
#: t1-t3, pattern matches and late events; t4, t5, the live-archive query with late archive
#: events. Batch 2 brings the late ones.
PATTERN_TAGS = {"t1", "t2", "t3"}
ARCHIVE_TAGS = {"t4", "t5"}
BATCHES = [
    [read(1, "t1", "A", 0), read(2, "t1", "B", 2), read(3, "t1", "C", 4),    # ABC in 4 h
     read(4, "t2", "A", 0), read(5, "t2", "B", 5), read(6, "t2", "C", 11),   # too slow
     read(7, "t3", "A", 1), read(9, "t3", "C", 3),                           # B comes late
     read(10, "t1", "D", 6),                                                  # exit of t1
     # t5 exits at D before its A and B have arrived (the readers upload late)
     read(21, "t4", "A", 0), read(22, "t4", "B", 1), read(23, "t4", "D", 3),
     read(24, "t5", "D", 10)],
    # t3's late B completes A B C, its exit at D joins its history; t5's late A and B
    # (inside the 24 h before its D) join the earlier live match
    [read(8, "t3", "B", 2), read(11, "t3", "D", 5), read(25, "t5", "A", 2),
     read(26, "t5", "B", 4)],
]


@pytest.fixture(scope="module")
def lake(spark, settings, tmp_path_factory: pytest.TempPathFactory) -> SimpleNamespace:  # noqa: ANN001
    """The shared lake after the two batches (bronze, silver, gold each): gold after each,
    silver's version after the first, gold.archive_access, and a copy of the lake as it was
    then (``copy``: for a test that writes to it; the first test goes on with this one)."""
    local = dataclasses.replace(settings, home=tmp_path_factory.mktemp("gold_lake"))
    land_and_run(spark, local, "f1.jsonl", BATCHES[0])
    first = gold_rows(spark, local)
    first_silver = LakeTable(spark, local, "silver.events").version()
    land_and_run(spark, local, "f2.jsonl", BATCHES[1])
    access = LakeTable(spark, local, "gold.archive_access").read().orderBy("batch_id").collect()
    copy = dataclasses.replace(settings, home=tmp_path_factory.mktemp("gold_lake_copy") / "home")
    shutil.copytree(local.home, copy.home)
    return SimpleNamespace(local=local, first=first, first_silver=first_silver,
                           second=gold_rows(spark, local), access=access, copy=copy)


def test_gold_patterns_late_events_and_exactly_once(spark, lake) -> None:  # noqa: ANN001
    local = lake.local
    first = of_tags(lake.first, PATTERN_TAGS)
    assert set(first) == {("rfid_abc", ("e1", "e2", "e3")), ("rfid_transit", ("e10", "e1", "e2"))}
    abc = first[("rfid_abc", ("e1", "e2", "e3"))]
    assert abc.partition_key == "t1" and abc.strategy == "batch"
    assert abc.measures["a_id"] == "e1" and abc.start_time == T0
    hashes = {q.id: q.rule_hash for q in gold.load_queries()}
    assert {r.rule_hash for r in first.values()} == set(hashes.values())  # the definitions
    assert all(r.rule_hash == hashes[q] for (q, _), r in first.items())
    transit = first[("rfid_transit", ("e10", "e1", "e2"))]
    assert transit.strategy == "llaa" and transit.end_time == T0 + timedelta(hours=6)
    assert transit.history_version == lake.first_silver

    # The late B of t3 completes A B C; t3's exit at D joins its history.
    second = lake.second
    assert set(of_tags(second, PATTERN_TAGS)) - set(first) == {
        ("rfid_abc", ("e7", "e8", "e9")), ("rfid_transit", ("e11", "e7", "e8"))}
    late = second[("rfid_abc", ("e7", "e8", "e9"))]
    assert late.history_version > transit.history_version

    # Replaying detection over all of silver writes nothing new (merge on match_id) and
    # supersedes nothing (every recomputed key's rows are found again).
    silver_events = LakeTable(spark, local, "silver.events")
    version = silver_events.version()
    found = gold.detect(spark, gold.load_queries(), silver_events.read(),
                        silver_events.as_of(version), version, 99, datetime.now(), local)
    gold.merge_into_gold(spark, local, found.rows)
    assert dict(found.recomputed)["rfid_abc"] == ["t1", "t2", "t3", "t4", "t5"]
    assert gold.supersede(spark, local, found.rows, found.recomputed, version) == (0, 0)
    assert len(LakeTable(spark, local, "gold.complex_events").read().collect()) == len(second)
    assert all(r.superseded_version is None for r in second.values())

    # A late read of t1 at reader X between its A (0 h) and B (2 h) breaks both its A B C
    # (not consecutive any more) and the A -> B passage its transit joined: both rows are
    # superseded by the silver version that recomputed t1; t3's rows stay current (and
    # t4's and t5's transits).
    land_and_run(spark, local, "f3.jsonl", [read(12, "t1", "X", 1)])
    third = gold_rows(spark, local)
    assert set(third) == set(second)  # marked, never deleted
    version = LakeTable(spark, local, "silver.events").version()
    superseded = {k for k, r in third.items() if r.superseded_version is not None}
    assert superseded == {("rfid_abc", ("e1", "e2", "e3")), ("rfid_transit", ("e10", "e1", "e2"))}
    assert {third[k].superseded_version for k in superseded} == {version}
    current = dict(spark.sql("SELECT query_id, count(*) FROM delta.`"
                             + LakeTable(spark, local, "gold.complex_events").path
                             + "` WHERE superseded_version IS NULL GROUP BY query_id").collect())
    assert current == {"rfid_abc": 1, "rfid_transit": 3}
    # A recomputation that holds a superseded match again makes it current again (the
    # answer of a key may come back when a later event breaks the match that replaced it).
    back = found.rows.where("query_id = 'rfid_abc' AND partition_key = 't1'")
    assert gold.supersede(spark, local, back, [("rfid_abc", ["t1"])], version + 1) == (0, 1)
    assert gold_rows(spark, local)[("rfid_abc", ("e1", "e2", "e3"))].superseded_version is None

    # Analysts' view: tables by name, with time travel (what `lakecep sql` runs).
    assert "gold.complex_events" in register_tables(spark, local)
    per_query = dict(spark.sql("SELECT query_id, count(*) FROM gold.complex_events "
                               "GROUP BY query_id").collect())
    assert per_query == {"rfid_abc": 2, "rfid_transit": 4}  # current and superseded rows
    before = spark.sql(f"SELECT count(*) FROM silver.events VERSION AS OF "
                       f"{transit.history_version}").first()[0]
    assert before == len(BATCHES[0]) < spark.sql("SELECT count(*) FROM silver.events").first()[0]


def test_live_archive_late_archive_events_and_every_strategy(spark, lake) -> None:  # noqa: ANN001
    # Batch 1: t5 exits at D before its A and B have arrived.
    transit = {k for k in of_tags(lake.first, ARCHIVE_TAGS) if k[0] == "rfid_transit"}
    assert transit == {("rfid_transit", ("e23", "e21", "e22"))}
    # Batch 2: t5's late A and B join the earlier live match.
    transit = {k for k in of_tags(lake.second, ARCHIVE_TAGS) if k[0] == "rfid_transit"}
    assert transit == {("rfid_transit", ("e23", "e21", "e22")),
                       ("rfid_transit", ("e24", "e25", "e26"))}
    access = lake.access
    # batch 1: the exits of t1, t4 and t5; batch 2: t3's exit, and t5's live match re-joined
    assert [a.live_matches for a in access] == [3, 2]
    assert all(a.strategy == "llaa" and a.loads == a.live_matches for a in access)
    # The small table fits in the RBuffer: every range is served from memory.
    assert [(a.buffer_loads, a.delta_rows_scanned) for a in access] == [(3, 0), (2, 0)]
    assert [a.complex_events for a in access] == [2, 2]  # t1's and t4's; t3's and t5's
    # The default store holds every key in memory: no partial match misses or spills.
    assert all(a.partial_misses == a.partial_spilled == 0 for a in access)

    # Every strategy finds the same complex events over the same silver (one batch) of t4
    # and t5.
    silver_events = LakeTable(spark, lake.local, "silver.events")
    version = silver_events.version()
    tags = F.col("object_id").isin(*sorted(ARCHIVE_TAGS))
    queries = [q for q in gold.load_queries() if q.id == "rfid_transit"]
    found = {}
    for strategy in ("alaa", "llaa", "ollaa", "sllaa", "auto"):
        query = dataclasses.replace(queries[0], tolerated_latency=timedelta(hours=1))
        result = gold.detect(spark, [query], silver_events.read().where(tags),
                             silver_events.as_of(version).where(tags), version, 7,
                             datetime.now(), lake.local, strategy=strategy)
        rows = result.rows.collect()
        found[strategy] = sorted((tuple(r.live_event_ids), tuple(r.archive_event_ids),
                                  r.match_number) for r in rows)
        record = result.access[0]
        assert {r.strategy for r in rows} <= {record["strategy"]}
        # No RBuffer here: every load reads Delta.
        assert record["delta_rows_scanned"] >= record["rows_loaded"] > 0
        if strategy == "alaa":
            # Rmax: every event of every tag before the last live start (e24 at 10 h).
            assert record["loads"] == 1 and record["rows_loaded"] == 5
        if strategy == "llaa":
            assert record["loads"] == record["live_matches"] == 2
            assert record["rows_loaded"] == 4  # t4's A, B and t5's A, B
    assert found["llaa"] == [(("e23",), ("e21", "e22"), 1), (("e24",), ("e25", "e26"), 1)]
    assert all(v == found["llaa"] for v in found.values()), found

    # A copy of rfid_transit added to the query folder is backfilled at its first batch
    # (docs/architecture.md): it finds what rfid_transit found, for t4 and t5 too, which
    # that batch (one read of a new tag, t6) does not touch
    from lakecep.queries import QUERIES_DIR

    local = lake.local
    folder = local.home / "queries"
    folder.mkdir()
    for name in ("rfid_abc", "rfid_transit"):
        (folder / f"{name}.toml").write_text((QUERIES_DIR / f"{name}.toml").read_text())
    (folder / "transit_copy.toml").write_text((QUERIES_DIR / "rfid_transit.toml").read_text()
                                              .replace('id = "rfid_transit"',
                                                       'id = "transit_copy"'))
    land_and_run(spark, dataclasses.replace(local, queries_dir=str(folder)), "f4.jsonl",
                 [read(30, "t6", "A", 20)])
    rows = LakeTable(spark, local, "gold.complex_events").read().where(
        "superseded_version IS NULL").collect()

    def matches(query_id: str) -> set[tuple[tuple[str, ...], tuple[str, ...]]]:
        return {(tuple(r.live_event_ids), tuple(r.archive_event_ids)) for r in rows
                if r.query_id == query_id}

    assert matches("transit_copy") == matches("rfid_transit")
    assert {(("e23",), ("e21", "e22")), (("e24",), ("e25", "e26"))} <= matches("transit_copy")


def test_per_query_streams_equal_the_stream_of_every_query(spark, settings, lake,  # noqa: ANN001
                                                            tmp_path: Path) -> None:
    """``lakecep run gold --query`` (one Airflow task per query): each query as its own
    stream, with its own checkpoint, batch after batch, finds what the stream of every query
    finds (the shared lake, same batches); a re-run reads nothing; the other queries' stored
    state is left alone; and on a lake that ran the stream of every query, a query's first
    own run continues from there."""
    from lakecep.jobs import live_step

    per = dataclasses.replace(settings, home=tmp_path / "per")
    ids = ("rfid_abc", "rfid_transit")
    for n, lines in enumerate(BATCHES):
        per.landing.mkdir(parents=True, exist_ok=True)
        (per.landing / f"f{n}.jsonl").write_text("\n".join(lines) + "\n")
        bronze.run(spark, per)
        silver.run(spark, per)
        runs = {q: gold.run(spark, per, query_id=q) for q in ids}
        assert {q: r.input_rows for q, r in runs.items()} == dict.fromkeys(ids, len(lines))
        # rfid_abc's own run kept rfid_transit's partial matches (and the reverse)
        state = LakeTable(spark, per, live_step.TABLE).read()
        assert state.where("query_id = 'rfid_transit'").count() > 0
    found = gold_rows(spark, per)
    assert {("rfid_abc", ("e1", "e2", "e3")), ("rfid_abc", ("e7", "e8", "e9"))} <= set(found)
    assert sorted(p.name for p in per.checkpoints.iterdir()) == sorted(
        ["bronze_events", "silver_events", *(gold.stream_name(q) for q in ids)])

    # Exactly once: a re-run of one query reads nothing and writes no gold version.
    version = LakeTable(spark, per, "gold.complex_events").version()
    assert gold.run(spark, per, query_id="rfid_abc").input_rows == 0
    assert LakeTable(spark, per, "gold.complex_events").version() == version

    # The stream of every query over the same batches (the shared lake) found the same
    # complex events.
    assert set(found) == set(lake.second)

    # Migration: that lake's first per-query run (on its copy) starts where the stream of
    # every query stopped (seeded checkpoint: nothing re-read), with its own writer id.
    shared = lake.copy
    assert gold.run(spark, shared, query_id="rfid_abc").input_rows == 0
    seeded = shared.checkpoint(gold.stream_name("rfid_abc"))
    assert (seeded / "lakecep_writer_id").read_text() != (
        shared.checkpoint(gold.QUERY) / "lakecep_writer_id").read_text()

    with pytest.raises(ValueError, match="no such query"):
        gold.run(spark, per, query_id="no_such_query")
