"""The queries the rest of lakecep runs first, and a documented example."""

from __future__ import annotations

import pandas as pd
from mr_helpers import rows

import cep_core

GOLD = """SELECT * FROM events MATCH_RECOGNIZE (
  PARTITION BY object_id ORDER BY event_time
  MEASURES A.event_time AS start_time, C.event_time AS end_time, A.event_id AS a_id,
           B.event_id AS b_id, C.event_id AS c_id,
           MATCH_NUMBER() AS match_number
  ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW
  PATTERN (A B C) WITHIN INTERVAL '10' HOUR
  DEFINE A AS source_id = 'A', B AS source_id = 'B', C AS source_id = 'C'
)"""

H = pd.Timedelta(hours=1)
T0 = pd.Timestamp("2024-03-01 00:00", tz="UTC")


def _events() -> pd.DataFrame:
    # Rows are deliberately not in time order; positions matter for Match.rows.
    data = [
        # event_id, object_id, source_id, hours after T0
        ("o1-c", "o1", "C", 2), ("o1-a", "o1", "A", 0), ("o1-b", "o1", "B", 1),
        ("o1-a2", "o1", "A", 3), ("o1-b2", "o1", "B", 4), ("o1-c2", "o1", "C", 14),
        ("o2-a", "o2", "A", 0), ("o2-b", "o2", "B", 5), ("o2-c", "o2", "C", 10),
        ("o3-a", "o3", "A", 0), ("o3-x", "o3", "X", 1), ("o3-b", "o3", "B", 2),
        ("o3-c", "o3", "C", 3),
        ("o0-a", "o0", "A", 0), ("o0-b", "o0", "B", 1), ("o0-c", "o0", "C", 2),
        ("o0-a2", "o0", "A", 3), ("o0-b2", "o0", "B", 4), ("o0-c2", "o0", "C", 5),
    ]
    return pd.DataFrame({
        "event_id": [d[0] for d in data],
        "object_id": [d[1] for d in data],
        "source_id": [d[2] for d in data],
        "event_time": [T0 + d[3] * H for d in data],
    })


def test_gold_query_one_row_per_match() -> None:
    out = cep_core.match_recognize(GOLD, {"events": _events()})
    assert list(out.columns) == ["object_id", "start_time", "end_time", "a_id", "b_id", "c_id",
                                 "match_number"]
    # o1: A B C at 0,1,2h; then A(3) B(4) C(14) spans 11h > 10h: no match.
    # o2: A(0) B(5) C(10) spans exactly 10h: a match. o3: X breaks the sequence.
    # o0: two back-to-back matches. Partitions come out in key order.
    assert rows(out) == [
        ("o0", T0, T0 + 2 * H, "o0-a", "o0-b", "o0-c", 1),
        ("o0", T0 + 3 * H, T0 + 5 * H, "o0-a2", "o0-b2", "o0-c2", 2),
        ("o1", T0, T0 + 2 * H, "o1-a", "o1-b", "o1-c", 1),
        ("o2", T0, T0 + 10 * H, "o2-a", "o2-b", "o2-c", 1),
    ]
    assert isinstance(out["start_time"].iloc[0], pd.Timestamp)
    assert str(out["start_time"].dtype) == "datetime64[ns, UTC]"


def test_gold_query_find_matches_gives_positions_for_lineage() -> None:
    events = _events()
    compiled = cep_core.compile_query(GOLD)
    assert compiled.partition_by == ["object_id"]
    assert compiled.order_by == [("event_time", False)]
    matches = compiled.find_matches(events)
    ids = [tuple(events["event_id"].iloc[list(m.rows)]) for m in matches]
    assert ids == [("o0-a", "o0-b", "o0-c"), ("o0-a2", "o0-b2", "o0-c2"),
                   ("o1-a", "o1-b", "o1-c"), ("o2-a", "o2-b", "o2-c")]
    assert [m.partition for m in matches] == [("o0",), ("o0",), ("o1",), ("o2",)]
    assert [m.match_number for m in matches] == [1, 2, 1, 1]
    assert all(m.labels == ("A", "B", "C") for m in matches)
    assert matches[2].measures["a_id"] == "o1-a"
    assert matches[3].measures["end_time"] == T0 + 10 * H
    # The same compiled query run per partition gives the same as the whole table.
    whole = compiled.run(events)
    per_partition = [compiled.run(g) for _, g in events.groupby("object_id")]
    assert [len(p) for p in per_partition] == [2, 1, 1, 0]
    parts = pd.concat([p for p in per_partition if len(p)], ignore_index=True)
    pd.testing.assert_frame_equal(whole, parts)


def test_gold_query_output_columns_before_any_data() -> None:
    compiled = cep_core.compile_query(GOLD)
    columns = ["event_id", "object_id", "source_id", "event_time"]
    assert compiled.output_columns(columns) == [
        "object_id", "start_time", "end_time", "a_id", "b_id", "c_id", "match_number"]


def test_gold_query_with_naive_timestamps_and_numeric_time() -> None:
    events = _events()
    naive = events.assign(event_time=events["event_time"].dt.tz_localize(None))
    assert len(cep_core.match_recognize(GOLD, {"events": naive})) == 4
    hours = events.assign(event_time=(events["event_time"] - T0) / H * 3600.0)
    numeric = cep_core.match_recognize(GOLD, {"events": hours})
    assert list(numeric["end_time"]) == [7200.0, 18000.0, 7200.0, 36000.0]


def _ticker() -> pd.DataFrame:
    # Oracle Database Data Warehousing Guide, "SQL for Pattern Matching", Example 20-1.
    prices = [12, 17, 19, 21, 25, 12, 15, 20, 24, 25, 19, 15, 25, 25, 14, 12, 14, 24, 23, 22]
    days = pd.date_range("2011-04-01", periods=len(prices), freq="D")
    return pd.DataFrame({"symbol": "ACME", "tstamp": days, "price": prices})


def test_oracle_ticker_example() -> None:
    query = """
        SELECT * FROM Ticker MATCH_RECOGNIZE (
          PARTITION BY symbol ORDER BY tstamp
          MEASURES STRT.tstamp AS start_tstamp, LAST(DOWN.tstamp) AS bottom_tstamp,
                   LAST(UP.tstamp) AS end_tstamp
          ONE ROW PER MATCH AFTER MATCH SKIP TO LAST UP
          PATTERN (STRT DOWN+ UP+)
          DEFINE DOWN AS DOWN.price < PREV(DOWN.price),
                 UP AS UP.price > PREV(UP.price)
        ) MR ORDER BY MR.symbol, MR.start_tstamp"""
    out = cep_core.match_recognize(query, {"ticker": _ticker()})
    day = lambda d: pd.Timestamp(f"2011-04-{d:02d}")  # noqa: E731
    # The documented result: 05-APR/06-APR/10-APR, 10-APR/12-APR/13-APR, 14-APR/16-APR/18-APR.
    assert rows(out) == [
        ("ACME", day(5), day(6), day(10)),
        ("ACME", day(10), day(12), day(13)),
        ("ACME", day(14), day(16), day(18)),
    ]


def test_stock_style_query_from_the_brief() -> None:
    df = _ticker().rename(columns={"tstamp": "ts"})
    out = cep_core.match_recognize(
        "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY ts "
        "MEASURES STRT.ts AS start_ts, LAST(DOWN.ts) AS bottom_ts, LAST(UP.ts) AS end_ts "
        "ONE ROW PER MATCH AFTER MATCH SKIP TO LAST UP PATTERN (STRT DOWN+ UP+) "
        "DEFINE DOWN AS price < PREV(price), UP AS price > PREV(price))", {"t": df})
    assert [r[1].day for r in rows(out)] == [5, 10, 14]
    assert [r[3].day for r in rows(out)] == [10, 13, 18]
