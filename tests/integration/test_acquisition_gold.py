"""Plan-based acquisition in the real gold job (issue 17 items 3 and 4, Spark side): the plan
strategy finds exactly the complex events of pulling every type while reading fewer rows;
plans come from the newest statistics run and are re-planned only when it changes; the
retention guard fails clearly."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from lakecep.jobs import gold, statistics
from lakecep.jobs.gold_acquisition import RetentionError, check_retention, coarse_ranges
from lakecep.jobs.tables import LakeTable
from lakecep.queries import AcquisitionQuery

pytestmark = pytest.mark.spark
T0 = datetime(2026, 1, 1)
PATTERN = "seq(door_forced, badge_denied, !fire_alarm, motion; 60 seconds)"


def _query(qid: str, acquisition: str) -> AcquisitionQuery:
    return AcquisitionQuery(qid, "1", "", key="object_id", pattern=PATTERN,
                            acquisition=acquisition, latency_bound=timedelta(seconds=30))


def _silver(seed: int, start: float, hours: float) -> pd.DataFrame:
    """Doors: rare forced doors and alarms, some badges, frequent motion; whole seconds,
    shuffled (out of order), a fifth of them ingested late."""
    rng = np.random.default_rng(seed)
    rows = []
    for key in ("d1", "d2", "d3", "d4"):
        for kind, rate in (("door_forced", 0.004), ("badge_denied", 0.03),
                           ("fire_alarm", 0.003), ("motion", 0.5)):
            for t in np.round(rng.uniform(start, start + hours * 3600,
                                          rng.poisson(rate * hours * 3600))):
                rows.append((key, kind, T0 + timedelta(seconds=float(t))))
    frame = pd.DataFrame(rows, columns=["object_id", "event_type", "event_time"])
    frame = frame.sample(frac=1.0, random_state=seed).reset_index(drop=True)
    frame["event_id"] = [f"s{seed}-{i}" for i in range(len(frame))]
    frame["source_id"] = "gate"
    frame["source_file"] = f"f{seed}.jsonl"
    frame["line_no"] = np.arange(len(frame))
    now = datetime.now(UTC).replace(tzinfo=None)
    frame["ingest_time"] = [now - timedelta(seconds=5 if i % 5 else 900)
                            for i in range(len(frame))]
    frame["silver_time"] = now
    return frame


def _append(spark, local, frame: pd.DataFrame, version: int) -> None:  # noqa: ANN001
    table = LakeTable(spark, local, "silver.events").ensure()
    frame = frame.copy()
    for name in table.schema.fieldNames():
        if name not in frame:
            frame[name] = pd.Series([None] * len(frame), dtype=object)
    df = spark.createDataFrame(frame[table.schema.fieldNames()], table.schema)
    table.append(df.repartition(4), "test-acq", version)


def test_plan_acquisition_in_gold_equals_pulling_everything_and_replans_on_new_statistics(
        spark, settings, tmp_path: Path) -> None:  # noqa: ANN001
    local = dataclasses.replace(settings, home=tmp_path)
    queries = [_query("doors_plan", "plan"), _query("doors_all", "all")]
    _append(spark, local, _silver(1, 0.0, 2.0), 1)
    statistics.run(spark, local, run_id="r1", queries=queries)
    gold.run(spark, local, queries=queries)

    events = LakeTable(spark, local, "gold.complex_events").read().toPandas()
    found = {q: {tuple(r) for r in events.loc[events.query_id == q, "live_event_ids"]}
             for q in ("doors_plan", "doors_all")}
    assert found["doors_plan"] == found["doors_all"] and found["doors_all"]
    plans = LakeTable(spark, local, "gold.acquisition_plans").read().toPandas()
    by = plans.set_index("query_id")
    plan, everything = by.loc["doors_plan"], by.loc["doors_all"]
    assert plan.statistics_run_id == "r1" and plan.replanned
    assert plan.steps >= 3 and everything.steps == 1  # every type at once
    assert plan.rows_read * 5 < everything.rows_read
    assert plan.complex_events == everything.complex_events == len(found["doors_all"])
    assert plan.delta_files_read > 0 and plan.delta_files_total >= 4
    assert abs(everything.predicted_rows / everything.rows_read - 1) < 0.25

    # A new batch (a restarted job) under the same statistics run keeps the plan.
    _append(spark, local, _silver(2, 7200.0, 0.5), 2)
    gold.run(spark, local, queries=queries[:1])
    rows = (LakeTable(spark, local, "gold.acquisition_plans").read()
            .where("query_id = 'doors_plan'").orderBy("batch_id").toPandas())
    assert rows["statistics_run_id"].tolist() == ["r1", "r1"]
    assert rows["replanned"].tolist() == [True, False]
    assert rows["plan"].iloc[0] == rows["plan"].iloc[1]

    # A new statistics run re-plans, and the retention guard (run at each plan) fails in
    # one line when silver keeps deleted files for less than window + plan latency.
    stats = LakeTable(spark, local, "gold.statistics").read().where("run_id = 'r1'")
    statistics.write(spark, local, [{**r.asDict(), "run_id": "r2",
                                     "computed_at": datetime.now()} for r in stats.collect()],
                     "r2")
    path = LakeTable(spark, local, "silver.events").path
    spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES "
              "('delta.deletedFileRetentionDuration' = 'interval 30 seconds')")
    _append(spark, local, _silver(3, 9000.0, 0.2), 3)
    with pytest.raises(Exception, match="deletedFileRetentionDuration") as err:
        gold.run(spark, local, queries=queries[:1])
    assert "window 60s + plan latency" in str(err.value)


def test_retention_guard_messages() -> None:
    check_retention("q", "silver.events", {}, 600, 30)  # Delta's defaults: plenty
    with pytest.raises(RetentionError) as err:
        check_retention("q", "silver.events", {"delta.logRetentionDuration": "interval 5 minutes"},
                        600, 30)
    message = str(err.value)
    assert "\n" not in message and "silver.events" in message and "630s" in message
    with pytest.raises(ValueError, match="interval 7 days"):
        check_retention("q", "t", {"delta.logRetentionDuration": "7 days"}, 1, 1)


def test_coarse_ranges_cover_every_interval_with_at_most_the_limit() -> None:
    spans = [(0, 5), (3, 8), (20, 21), (30, 40), (41, 42), (100, 101)]
    assert coarse_ranges(spans, 10) == [(0, 8), (20, 21), (30, 40), (41, 42), (100, 101)]
    assert coarse_ranges(spans, 3) == [(0, 8), (20, 42), (100, 101)]
    assert coarse_ranges(spans, 1) == [(0, 101)]
