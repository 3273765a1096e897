"""The paper's stock example end to end: generated ticks land as JSON lines with the price
in ``attributes``, go through bronze and silver, and the gold job runs the two stock
examples: ``queries/examples/stock_check.toml`` (typed attribute ``price``; live fall joined
with check-marks in history), which must equal ``cep_core.live_archive`` run directly over
the same silver rows, and ``queries/examples/windows/stock_price_window.toml`` (1 h
average/min/max every 5 min), whose newest revision of every sample must equal plain pandas
over all ticks although gold's batches are not in event-time order (the second run brings
one symbol's last 8 hours after the others' newest: without allowed lateness 201 of those
236 ticks were dropped. Silver's second batch also holds ticks hours newer than its third,
600 ticks dropped before gold read a silver commit -- here the first run's initial
snapshot -- as one unit of arrival: docs/architecture.md, "Late events")."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pandas as pd
import pytest

from cep_core.live_archive import FrameArchive, detect
from lakecep.jobs import bronze, gold, silver
from lakecep.jobs.tables import LakeTable
from lakecep.queries import QUERIES_DIR, LiveArchiveQuery, WindowQuery, load_queries, micros
from lakecep.ticks import ticks, write_landing

pytestmark = pytest.mark.spark


def test_stock_check_example_through_the_pipeline(spark, settings, tmp_path: Path) -> None:  # noqa: ANN001
    examples = QUERIES_DIR / "examples"
    queries = tmp_path / "queries"
    queries.mkdir()
    for name in ("stock_check.toml", "windows/stock_price_window.toml"):
        shutil.copy(examples / name, queries)
    local = dataclasses.replace(settings, home=tmp_path, queries_dir=str(queries),
                                max_files_per_trigger=2, rbuffer_rows=500)
    frame = ticks(symbols=3, hours=30, seed=3, ticks_per_minute=0.5)
    # The last symbol's final 8 hours land after a first run has finished: that second run
    # brings ticks hours older than gold's watermark (set by the other symbols' newest) but
    # within allowed_lateness, so it must correct samples already written (revision > 0).
    # A separate run makes that premise deterministic: within one run, which files share a
    # micro-batch depends on how many files each layer happened to write.
    late = ((frame["object_id"] == frame["object_id"].max())
            & (frame["event_time"] >= frame["event_time"].max() - pd.Timedelta(hours=8)))
    assert 0 < late.sum() < len(frame)
    write_landing(frame[~late], local.landing, lines_per_file=600)
    for job in (bronze, silver, gold):
        job.run(spark, local)
    write_landing(frame[late], tmp_path / "late", lines_per_file=len(frame))
    (tmp_path / "late" / "events-00000.jsonl").rename(local.landing / "events-99999.jsonl")
    for job in (bronze, silver, gold):
        job.run(spark, local)

    query = next(q for q in load_queries(queries) if q.id == "stock_check")
    assert isinstance(query, LiveArchiveQuery)
    events = LakeTable(spark, local, "silver.events").read().toPandas()
    assert len(events) == len(frame)
    events["price"] = events["attributes"].map(lambda a: float(a["price"]))
    events = events.drop(columns=["attributes", "pmf"])
    expected = detect(query.spec(), events, FrameArchive(events, "object_id", "event_time"),
                      "llaa")
    assert len(expected.joined) > 0  # the generator plants falls and check-marks

    # the current answer (a match that late ticks change is superseded, not deleted)
    rows = LakeTable(spark, local, "gold.complex_events").read().where(
        "superseded_version IS NULL").collect()
    got = sorted((tuple(r.live_event_ids), tuple(r.archive_event_ids), r.match_number)
                 for r in rows)
    assert got == sorted((j.live.ids, j.archive_ids, j.number) for j in expected.joined)
    assert {r.query_id for r in rows} == {"stock_check"}
    one = next(r for r in rows if r.match_number == 1)
    price = float(one.measures["fall_start_price"])
    assert price == pytest.approx(float(pd.Series(frame.price)[
        frame.event_id == one.live_event_ids[0]].iloc[0]))

    _check_windows(spark, local, events, next(q for q in load_queries(queries)
                                               if q.id == "stock_price_window"))


def _check_windows(spark, local, events: pd.DataFrame, query: WindowQuery) -> None:  # noqa: ANN001
    """Newest revision of every (symbol, sample time, aggregate) = pandas over all ticks;
    every non-empty sample from the first one written to the last one has a row."""
    size, every = micros(query.window), micros(query.every)
    rows = LakeTable(spark, local, "gold.window_outputs").read().toPandas()
    assert set(rows["window_kind"]) == {"sample"} and len(rows) > 0
    assert (rows["revision"] > 0).any()   # the late run corrected samples already written
    ends = rows["window_end"].astype("int64") // 1000
    rows = rows.assign(T=ends).sort_values("revision").drop_duplicates(
        ["key", "T", "aggregate"], keep="last")
    got = {(r.key, r.T, r.aggregate): (r.value, r.event_count) for r in rows.itertuples()}
    times = events["event_time"].astype("datetime64[us]").astype("int64")
    ticks = pd.DataFrame({"key": events["object_id"], "t": times, "price": events["price"]})
    first, last = int(rows["T"].min()), int(rows["T"].max())
    for key, group in ticks.groupby("key"):
        t_sorted = group.sort_values("t")
        for T in range(first, last + 1, every):
            window = t_sorted[(t_sorted.t >= T - size) & (t_sorted.t < T)]["price"]
            if window.empty:
                assert got.get((key, T, "count"), (0.0, 0))[1] == 0, (key, T)
                continue
            want = {"count": float(len(window)), "avg": window.mean(), "min": window.min(),
                    "max": window.max()}
            for name, value in want.items():
                assert (key, T, name) in got, (key, T, name)
                value_got, count = got[(key, T, name)]
                assert count == len(window) and value_got == pytest.approx(value, rel=1e-9)
