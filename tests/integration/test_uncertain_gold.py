"""Uncertain timestamps through the pipeline: landing lines with intervals and pmfs ->
bronze -> silver -> gold.probabilistic_events, equal to the generator's exact truth
(its own enumeration of possible worlds), recomputed as a parcel's events arrive over
several micro-batches; a pmf that does not fit the query's granularity becomes an error
row of its partition, not a failed batch."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest
from delta.tables import DeltaTable

from lakecep.jobs import bronze, gold, silver
from lakecep.jobs.tables import LakeTable
from lakecep.queries import QUERIES_DIR
from lakecep.uncertain_events import parcels, truth, write_landing

pytestmark = pytest.mark.spark
THRESHOLD = 0.05  # the example query's WITH PROBABILITY >= 0.05


def test_probabilistic_events_equal_the_generators_truth(spark, settings, tmp_path: Path):  # noqa: ANN001
    queries = tmp_path / "queries"
    queries.mkdir()
    shutil.copy(QUERIES_DIR / "examples" / "uncertain_inspection.toml", queries)
    local = dataclasses.replace(settings, home=tmp_path / "home", queries_dir=str(queries),
                                max_files_per_trigger=1)
    frame = parcels(24, seed=5, max_width=1)
    # rows are per parcel in story order: 30 lines per file splits parcels across files,
    # so a parcel's probabilities are computed on part of its events, then recomputed
    files = write_landing(frame, local.landing, local.truth_dir, lines_per_file=30)
    assert len(files) >= 3
    bad = {"event_id": "bad-pmf", "object_id": "parcel-bad", "event_type": "A",
           "source_id": "reader-A", "event_time": "2026-05-04T08:00:00.000Z",
           "time_lower": "2026-05-04T08:00:00.000Z", "time_upper": "2026-05-04T08:01:00.000Z",
           "pmf": [0.2, 0.3, 0.5]}  # 3 probabilities for 2 one-minute points
    (local.landing / "events-99999.jsonl").write_text(json.dumps(bad) + "\n")
    # one run of each job reads every file, one per micro-batch (availableNow keeps the
    # rate limit): several gold batches
    for job in (bronze, silver, gold):
        job.run(spark, local)

    table = LakeTable(spark, local, "gold.probabilistic_events")
    rows = table.read().collect()
    errors = [r for r in rows if r.error is not None]
    assert [(r.partition_key, r.probability) for r in errors] == [("parcel-bad", None)]
    assert "bad-pmf" in errors[0].error and "PMF has 3 values" in errors[0].error

    expected = {(t["object_id"], (t["A"], t["B"], t["C"], t["D"])): t["probability"]
                for t in json.loads((local.truth_dir / "uncertain_truth.json").read_text())
                if t["probability"] >= THRESHOLD}
    assert expected == {(t["object_id"], (t["A"], t["B"], t["C"], t["D"])): t["probability"]
                        for t in truth(frame) if t["probability"] >= THRESHOLD}
    got = {(r.partition_key, tuple(r.event_ids)): r.probability for r in rows if r.error is None}
    assert set(got) == set(expected)
    assert all(abs(got[k] - expected[k]) < 1e-9 for k in expected)
    assert 0 < min(got.values()) < 1  # genuinely uncertain answers, not only certain ones
    one = next(r for r in rows if r.error is None)
    assert one.variables == ["A", "B", "C", "D"] and one.measures["a_id"] == one.event_ids[0]
    assert one.earliest_start <= one.latest_end and one.method == "auto"
    # several micro-batches wrote the table; each key's newest computation is what is kept
    assert len({r.batch_id for r in rows}) >= 2
    detail = DeltaTable.forPath(spark, table.path).detail().first()
    assert list(detail.clusteringColumns) == ["query_id", "partition_key"]

    # A copy of the query added to the lake is backfilled at its first batch
    # (docs/architecture.md): the same answer for every parcel, though that batch holds
    # one event of a new parcel only
    (queries / "copy.toml").write_text((queries / "uncertain_inspection.toml").read_text()
                                       .replace('id = "uncertain_inspection"', 'id = "copy"'))
    (local.landing / "events-99998.jsonl").write_text(json.dumps(
        {"event_id": "one-more", "object_id": "parcel-new", "event_type": "R",
         "source_id": "reader-R", "event_time": "2026-05-04T09:00:00.000Z"}) + "\n")
    for job in (bronze, silver, gold):
        job.run(spark, local)
    answer: dict[str, dict[tuple, float | None]] = {}
    for r in table.read().collect():
        answer.setdefault(r.query_id, {})[(r.partition_key, tuple(r.event_ids or ()))] = \
            r.probability
    assert answer["copy"] == answer["uncertain_inspection"]
    assert {k for k, _ in answer["copy"]} >= {k for k, _ in got}
