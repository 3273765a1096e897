"""One time axis (cep_core.runtime.time_axis): elapsed time as UTC nanoseconds on every path.

Class-wide: every live-archive strategy over every store, on tz-aware time columns in
several zones (units ns/us/ms) with data spanning the last Sunday of October (the Europe/
Berlin wall clock steps back an hour), gives exactly the matches of the same data in naive
UTC; so do the engine's other readers of a time column (ordering/WITHIN, spilling's time
numbers, statistics' arrival rates). Plus the regressions of issue 20 item 3: SqliteArchive
raised TypeError on tz-aware columns, and across the DST change the frame archive joined
the wrong pairs because it used wall-clock time."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_live_archive import (
    ARCHIVE,
    CONDITIONS,
    LIVE,
    PAIRS,
    STRATEGY_NAMES,
    observed,
)

import cep_core
from cep_core.live_archive import (
    FrameArchive,
    LiveArchiveSpec,
    RecentBuffer,
    SqliteArchive,
    StrategySettings,
    detect,
)
from cep_core.runtime.time_axis import from_ns, scalar_ns, time_numbers, time_values
from cep_core.tuning.statistics import arrival_rates

# 2024-10-27 01:00 UTC: Europe/Berlin goes from 03:00 CEST back to 02:00 CET.
CHANGE = pd.Timestamp("2024-10-27 01:00")
START = CHANGE - pd.Timedelta(hours=2)  # naive UTC
ZONES = ["UTC", "Europe/Berlin", "America/New_York", "Asia/Kolkata", "Australia/Sydney",
         "Europe/London"]
UNITS = ["ns", "us", "ms"]
STEP = pd.Timedelta(minutes=10)


def _events(rows: list[tuple[int, str, int, int]]) -> pd.DataFrame:
    """Events (tag, source_id, price, 10-minute steps from START) in naive UTC."""
    frame = pd.DataFrame(rows, columns=["tag", "source_id", "price", "ts"])
    frame.insert(0, "event_id", np.arange(len(frame), dtype="int64"))
    frame["tag"] = frame["tag"].astype("int64")
    frame["price"] = frame["price"].astype("int64")
    frame["ts"] = START + STEP * frame["ts"].astype("int64")
    return frame


def _zoned(frame: pd.DataFrame, zone: str, unit: str) -> pd.DataFrame:
    """The same instants as a tz-aware column in ``zone`` (and ``unit``)."""
    out = frame.copy()
    out["ts"] = out["ts"].dt.tz_localize("UTC").dt.tz_convert(zone).astype(
        pd.DatetimeTZDtype(unit, zone))
    return out


def _store(name: str, events: pd.DataFrame, split: int) -> Any:
    if name == "frame":
        return FrameArchive(events, "tag", "ts")
    if name == "sqlite":
        return SqliteArchive(events, "tag", "ts")
    store = FrameArchive(events, "tag", "ts")
    head = events.iloc[:split]
    covered = float(time_values(head["ts"]).max()) if len(head) else float("-inf")
    buf = RecentBuffer(store, "tag", "ts", 40, covered_from=covered)
    buf.append(events.iloc[split:])
    return buf


@st.composite
def histories(draw: st.DrawFn) -> list[tuple[int, str, int, int]]:
    rnd = random.Random(draw(st.integers(0, 2**32)))
    # 0..24 steps of 10 minutes from 23:00 UTC: both sides of the 01:00 UTC change
    return [(rnd.randint(1, 2), rnd.choice("abcd"), rnd.randint(0, 6), rnd.randint(0, 24))
            for _ in range(rnd.randint(8, 36))]


@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(rows=histories(), pair=st.sampled_from(PAIRS),
       cond_name=st.sampled_from(sorted(CONDITIONS)), zone=st.sampled_from(ZONES),
       unit=st.sampled_from(UNITS), store_name=st.sampled_from(["frame", "sqlite", "buffer"]),
       minutes=st.sampled_from([30, 60, 90, 150]), tl=st.none() | st.integers(0, 120),
       sub=st.none() | st.integers(1, 3), split=st.integers(0, 36))
def test_every_strategy_and_store_on_zoned_times_equals_naive_utc(
        rows: list[tuple[int, str, int, int]], pair: tuple[str, str], cond_name: str,
        zone: str, unit: str, store_name: str, minutes: int, tl: int | None,
        sub: int | None, split: int) -> None:
    naive = _events(rows)
    zoned = _zoned(naive, zone, unit)
    live_name, archive_name = pair
    spec = LiveArchiveSpec.of(LIVE[live_name], ARCHIVE[archive_name][0], "tag",
                              pd.Timedelta(minutes=minutes), CONDITIONS[cond_name][0])
    chosen = StrategySettings(
        tolerated_latency=None if tl is None else pd.Timedelta(minutes=tl),
        subwindow=1 if tl is None and sub is None else sub)  # sllaa needs one of the two
    for strategy in STRATEGY_NAMES:
        want = detect(spec, naive, _store(store_name, naive, split), strategy, chosen)
        got = detect(spec, zoned, _store(store_name, zoned, split), strategy, chosen)
        assert observed(got) == observed(want), (strategy, zone, unit, store_name)
        assert got.plan.strategy == want.plan.strategy


@settings(max_examples=40, deadline=None)
@given(rows=histories(), zone=st.sampled_from(ZONES), unit=st.sampled_from(UNITS),
       keys=st.none() | st.lists(st.integers(1, 3), max_size=2),
       lo=st.integers(-2, 26), width=st.integers(0, 26))
def test_every_store_loads_the_same_rows_and_keeps_the_dtype(
        rows: list[tuple[int, str, int, int]], zone: str, unit: str, keys: list[int] | None,
        lo: int, width: int) -> None:
    naive = _events(rows)
    zoned = _zoned(naive, zone, unit)
    a, b = scalar_ns(START + STEP * lo), scalar_ns(START + STEP * (lo + width))
    for name in ("frame", "sqlite", "buffer"):
        want = _store(name, naive, len(rows) // 2).load(keys, a, b)
        got = _store(name, zoned, len(rows) // 2).load(keys, a, b)
        assert got["ts"].dtype == zoned["ts"].dtype, name
        assert sorted(got["event_id"]) == sorted(want["event_id"]), name
        back = got.sort_values("event_id")["ts"].dt.tz_convert("UTC").dt.tz_localize(None)
        assert back.astype("datetime64[ns]").tolist() == want.sort_values("event_id")[
            "ts"].tolist(), name


@settings(max_examples=40, deadline=None)
@given(rows=histories(), zone=st.sampled_from(ZONES), unit=st.sampled_from(UNITS),
       missing=st.lists(st.integers(0, 35), max_size=3))
def test_time_readers_see_elapsed_time_whatever_the_zone(
        rows: list[tuple[int, str, int, int]], zone: str, unit: str,
        missing: list[int]) -> None:
    naive = _events(rows)
    zoned = _zoned(naive, zone, unit)
    np.testing.assert_array_equal(time_values(zoned["ts"]), time_values(naive["ts"]))
    np.testing.assert_array_equal(from_ns(time_values(zoned["ts"]), zoned["ts"].dtype),
                                  zoned["ts"])
    holes_naive, holes_zoned = naive.copy(), zoned.copy()
    for i in missing:
        if i < len(rows):
            holes_naive.loc[i, "ts"] = pd.NaT
            holes_zoned.loc[i, "ts"] = pd.NaT
    np.testing.assert_array_equal(time_numbers(holes_zoned, ["ts"]),
                                  time_numbers(holes_naive, ["ts"]))
    assert arrival_rates(zoned, "ts", "tag", 600.0) == arrival_rates(naive, "ts", "tag", 600.0)


@settings(max_examples=30, deadline=None)
@given(rows=histories(), zone=st.sampled_from(ZONES), unit=st.sampled_from(UNITS),
       within=st.sampled_from([20, 40, 70]))
def test_batch_within_on_zoned_times_equals_naive_utc(
        rows: list[tuple[int, str, int, int]], zone: str, unit: str, within: int) -> None:
    query = ("SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY tag ORDER BY ts "
             "MEASURES FIRST(A.event_id) AS a, LAST(B.event_id) AS b "
             "ONE ROW PER MATCH AFTER MATCH SKIP TO NEXT ROW PATTERN (A B+) "
             f"WITHIN INTERVAL '{within}' MINUTE "
             "DEFINE A AS source_id = 'a', B AS source_id <> 'a')")
    naive = _events(rows)
    compiled = cep_core.compile_query(query)

    def pairs(frame: pd.DataFrame) -> list[tuple[Any, ...]]:
        return sorted((m.partition, m.rows) for m in compiled.find_matches(frame))

    assert pairs(_zoned(naive, zone, unit)) == pairs(naive)


# ----------------------------------------------------------------------------- regressions

RFID_LIVE = ("SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY tag ORDER BY ts "
             "MEASURES D.price AS d_price ONE ROW PER MATCH PATTERN (D) "
             "DEFINE D AS source_id = 'D')")
RFID_ARCHIVE = ("SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY tag ORDER BY ts "
                "MEASURES B.price AS b_price ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW "
                "PATTERN (A B) DEFINE A AS source_id = 'A', B AS source_id = 'B')")


def _dst_events() -> pd.DataFrame:
    """Tag 1 around the Berlin change. In UTC: A/B at 23:40/23:45 (wall 01:40/01:45 CEST),
    A/B at 00:50/00:55 (wall 02:50/02:55 CEST), D at 01:20 (wall 02:20 CET, after the
    clock went back). With RA = the hour before D (00:20-01:20 UTC) only the second pair is
    in range; on the wall clock (01:20-02:20) only the first one would be."""
    utc = pd.to_datetime(["2024-10-26 23:40", "2024-10-26 23:45", "2024-10-27 00:50",
                          "2024-10-27 00:55", "2024-10-27 01:20"]).tz_localize("UTC")
    return pd.DataFrame({"event_id": [1, 2, 3, 4, 5], "tag": [1] * 5,
                         "source_id": ["A", "B", "A", "B", "D"], "price": [1, 2, 3, 4, 5],
                         "ts": utc.tz_convert("Europe/Berlin")})


@pytest.mark.parametrize("store", ["frame", "sqlite", "buffer"])
@pytest.mark.parametrize("strategy", STRATEGY_NAMES)
def test_dst_change_joins_the_pair_within_the_elapsed_hour(strategy: str, store: str) -> None:
    events = _dst_events()
    assert list(events["ts"].dt.strftime("%H:%M")) == ["01:40", "01:45", "02:50", "02:55",
                                                       "02:20"]
    spec = LiveArchiveSpec.of(RFID_LIVE, RFID_ARCHIVE, "tag", pd.Timedelta(hours=1))
    result = detect(spec, events, _store(store, events, 2), strategy,
                    StrategySettings(tolerated_latency=pd.Timedelta(hours=1)))
    got = {(tuple(j.live.ids), tuple(j.archive_ids), j.number) for j in result.joined}
    assert got == {((5,), (3, 4), 1)}


def test_sqlite_archive_on_a_zoned_column_loads_without_type_error() -> None:
    events = _dst_events()
    store = SqliteArchive(events, "tag", "ts")
    out = store.load([1], scalar_ns(pd.Timestamp("2024-10-27 00:00", tz="UTC")),
                     scalar_ns(pd.Timestamp("2024-10-27 02:00", tz="UTC")))
    assert out["ts"].dtype == events["ts"].dtype
    pd.testing.assert_series_equal(out["ts"].reset_index(drop=True),
                                   events["ts"].iloc[2:].reset_index(drop=True))
