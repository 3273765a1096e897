"""Every live-archive strategy, run by the real gold streaming job over the silver the
pipeline built from generated data, writes exactly the generator's ground truth to gold."""

from __future__ import annotations

import dataclasses
import json
import shutil
from datetime import timedelta

import pytest

from lakecep.config import load_settings
from lakecep.jobs import gold
from lakecep.jobs.status import gold_sequences
from lakecep.jobs.tables import LakeTable
from lakecep.queries import LiveArchiveQuery, load_queries

pytestmark = [pytest.mark.spark, pytest.mark.airflow, pytest.mark.slow]


STRATEGIES = ("alaa", "llaa", "ollaa", "sllaa")


@pytest.fixture(scope="module")
def every_strategy(pipeline_run: dict, spark, tmp_path_factory: pytest.TempPathFactory) -> dict:  # noqa: ANN001
    """One gold run from scratch over a copy of the pipeline's silver, with rfid_transit
    once per strategy (query ``rfid_transit_<strategy>``, the strategy its own) and a
    small RBuffer (most ranges are read from Delta). One run, not four: the queries keep
    apart state, access records and gold rows by query id."""
    source = load_settings({"LAKECEP_HOME": str(pipeline_run["lake_home"])})
    home = tmp_path_factory.mktemp("every_strategy")
    shutil.copytree(source.table_path("silver.events"), home / "lake" / "silver" / "events")
    settings = dataclasses.replace(source, home=home, live_archive_strategy="",
                                   rbuffer_rows=300)
    query = next(q for q in load_queries() if q.id == "rfid_transit")
    assert isinstance(query, LiveArchiveQuery)
    queries = [dataclasses.replace(query, id=f"rfid_transit_{s}", strategy=s,
                                   tolerated_latency=timedelta(hours=2)) for s in STRATEGIES]
    gold.run(spark, settings, queries=queries)
    truth = json.loads((source.truth_dir / "truth.json").read_text())
    return {"settings": settings, "expected": {tuple(ids) for ids in truth["rfid_transit"]},
            "gold": gold_sequences(spark, settings),
            "access": LakeTable(spark, settings, "gold.archive_access").read().collect(),
            "silver_rows": LakeTable(spark, settings, "silver.events").read().count()}


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_every_strategy_equals_ground_truth(every_strategy: dict, strategy: str) -> None:
    expected, silver_rows = every_strategy["expected"], every_strategy["silver_rows"]
    assert every_strategy["gold"][f"rfid_transit_{strategy}"] == expected
    access = [a for a in every_strategy["access"] if a.query_id == f"rfid_transit_{strategy}"]
    assert access and {a.strategy for a in access} == {strategy}
    assert sum(a.complex_events for a in access) == len(expected)
    assert all(a.delta_files_read >= 1 and a.delta_rows_scanned >= a.rows_from_buffer
               for a in access)
    if strategy == "alaa":  # one blind load of Rmax
        assert all(a.loads == 1 for a in access)
    if strategy == "llaa":  # one load per live match, each its own RA
        assert all(a.loads == a.live_matches for a in access)
        assert sum(a.rows_loaded for a in access) < silver_rows
    if strategy == "ollaa":  # the side with the lower selectivity drives (said in reason)
        for a in access:
            archive_first = a.reason.endswith("archive side drives")
            assert a.loads <= a.live_matches if archive_first else a.loads == a.live_matches
    if strategy == "sllaa":  # sub-windows of 2 h: fewer loads than live matches
        assert all(a.loads < a.live_matches for a in access)
