"""The paper's stock example end to end: generated ticks land as JSON lines with the price
in ``attributes``, go through bronze and silver, and the gold job runs
``queries/examples/stock_check.toml`` (typed attribute ``price``; live fall joined with
check-marks in history). Gold must equal ``cep_core.live_archive`` run directly over the
same silver rows."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pandas as pd
import pytest

from cep_core.live_archive import FrameArchive, detect
from lakecep.jobs import bronze, gold, silver
from lakecep.jobs.tables import LakeTable
from lakecep.queries import QUERIES_DIR, LiveArchiveQuery, load_queries
from lakecep.ticks import ticks, write_landing

pytestmark = pytest.mark.spark


def test_stock_check_example_through_the_pipeline(spark, settings, tmp_path: Path) -> None:  # noqa: ANN001
    examples = QUERIES_DIR / "examples"
    local = dataclasses.replace(settings, home=tmp_path, queries_dir=str(examples),
                                max_files_per_trigger=2, rbuffer_rows=500)
    frame = ticks(symbols=3, hours=30, seed=3, ticks_per_minute=0.5)
    write_landing(frame, local.landing, lines_per_file=600)
    for job in (bronze, silver, gold):
        job.run(spark, local)

    query = next(q for q in load_queries(examples) if q.id == "stock_check")
    assert isinstance(query, LiveArchiveQuery)
    events = LakeTable(spark, local, "silver.events").read().toPandas()
    assert len(events) == len(frame)
    events["price"] = events["attributes"].map(lambda a: float(a["price"]))
    events = events.drop(columns=["attributes", "pmf"])
    expected = detect(query.spec(), events, FrameArchive(events, "object_id", "event_time"),
                      "llaa")
    assert len(expected.joined) > 0  # the generator plants falls and check-marks

    rows = LakeTable(spark, local, "gold.complex_events").read().collect()
    got = sorted((tuple(r.live_event_ids), tuple(r.archive_event_ids), r.match_number)
                 for r in rows)
    assert got == sorted((j.live.ids, j.archive_ids, j.number) for j in expected.joined)
    assert {r.query_id for r in rows} == {"stock_check"}
    one = next(r for r in rows if r.match_number == 1)
    price = float(one.measures["fall_start_price"])
    assert price == pytest.approx(float(pd.Series(frame.price)[
        frame.event_id == one.live_event_ids[0]].iloc[0]))
