"""Live-archive detection (cep_core.live_archive): every strategy and store gives exactly
the result of a brute-force reference written here (per live match, slice the archive by
plain masks and run the archive query on the slice), plus hand-computed cases for the
plans, Lemma-1 sub-windows, range locality, the recent buffer and the spec checks."""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cep_core
from cep_core.api import Match
from cep_core.live_archive import (
    FrameArchive,
    LiveArchiveSpec,
    LiveInstance,
    RecentBuffer,
    Result,
    SqliteArchive,
    StrategyError,
    StrategySettings,
    detect,
    range_local,
    subwindows,
)

STRATEGY_NAMES = ("alaa", "llaa", "ollaa", "sllaa", "auto")
T0 = pd.Timestamp("2024-03-01")


def _q(body: str) -> str:
    return f"SELECT * FROM t MATCH_RECOGNIZE ({body})"


# ----------------------------------------------------------------------------- queries

LIVE = {
    # one row per live match: a 'd' reading
    "single": _q("PARTITION BY tag ORDER BY ts MEASURES D.price AS l_price "
                 "ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW "
                 "PATTERN (D) DEFINE D AS source_id = 'd'"),
    # two rows, the second dearer
    "pair": _q("PARTITION BY tag ORDER BY ts MEASURES LAST(Y.price) AS l_price "
               "ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW "
               "PATTERN (X Y) DEFINE X AS source_id = 'c', Y AS price > X.price"),
    # greedy with PREV, a secondary order column
    "rise": _q("PARTITION BY tag ORDER BY ts, event_id MEASURES LAST(U.price) AS l_price, "
               "MATCH_NUMBER() AS l_mn ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW "
               "PATTERN (S U+) DEFINE S AS source_id = 'd', U AS price >= PREV(price)"),
}

ARCHIVE = {
    # range-local: fixed sequence, exclusive equalities, skip past last row
    "ab": (_q("PARTITION BY tag ORDER BY ts MEASURES A.price AS a_price, B.price AS b_price "
              "ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW "
              "PATTERN (A B) DEFINE A AS source_id = 'a', B AS source_id = 'b'"), True),
    # range-local: fixed sequence, skip to next row
    "abc_next": (_q("PARTITION BY tag ORDER BY ts MEASURES C.price AS a_price "
                    "ONE ROW PER MATCH AFTER MATCH SKIP TO NEXT ROW "
                    "PATTERN (A B C) DEFINE A AS source_id <> 'd', B AS price <= A.price, "
                    "C AS price > B.price"), True),
    # not range-local: greedy quantifier
    "ab_plus": (_q("PARTITION BY tag ORDER BY ts MEASURES A.price AS a_price, "
                   "COUNT(B.price) AS a_n, LAST(B.tag) AS a_tag ONE ROW PER MATCH "
                   "AFTER MATCH SKIP PAST LAST ROW PATTERN (A B+) "
                   "DEFINE A AS source_id = 'a', B AS source_id <> 'a'"), False),
    # range-local, reading the key column in DEFINE and MEASURES
    "keyed": (_q("PARTITION BY tag ORDER BY ts MEASURES A.tag * 10 + B.price AS a_price "
                 "ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW PATTERN (A B) "
                 "DEFINE A AS source_id = 'a' AND tag = 2, B AS source_id = 'b'"), True),
    # not range-local: B does not exclude A, skip past last row
    "ab_overlap": (_q("PARTITION BY tag ORDER BY ts MEASURES B.price AS a_price "
                      "ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW "
                      "PATTERN (A B) DEFINE A AS source_id = 'a', "
                      "B AS source_id IN ('a', 'b')"), False),
    # not range-local: PREV in DEFINE
    "prev": (_q("PARTITION BY tag ORDER BY ts MEASURES B.price AS a_price "
                "ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW "
                "PATTERN (A B) DEFINE A AS source_id = 'a', "
                "B AS source_id = 'b' AND price > PREV(price)"), False),
    # not range-local: MATCH_NUMBER in the measures
    "numbered": (_q("PARTITION BY tag ORDER BY ts MEASURES MATCH_NUMBER() AS a_mn, "
                    "B.price AS a_price ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW "
                    "PATTERN (A B) DEFINE A AS source_id = 'a', B AS source_id = 'b'"), False),
    # not range-local: check mark on price
    "check": (_q("PARTITION BY tag ORDER BY ts, event_id MEASURES LAST(UP.price) AS a_price, "
                 "FIRST(DOWN.price) AS a_low ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW "
                 "PATTERN (STRT DOWN+ UP+) DEFINE DOWN AS price < PREV(price), "
                 "UP AS price > PREV(price)"), False),
    # not range-local: can match the empty sequence (empty matches are not joined)
    "star": (_q("PARTITION BY tag ORDER BY ts MEASURES COUNT(A.price) AS a_n, "
                "LAST(A.price) AS a_price ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW "
                "PATTERN (A*) DEFINE A AS source_id = 'b'"), False),
}

Cond = tuple[str | None, Callable[[dict[str, Any]], bool]]
CONDITIONS: dict[str, Cond] = {
    "none": (None, lambda m: True),
    "cheaper": ("a_price < l_price",
                lambda m: m["a_price"] is not None and m["l_price"] is not None
                and m["a_price"] < m["l_price"]),
}

PAIRS = [
    ("single", "ab"), ("single", "abc_next"), ("pair", "ab_plus"), ("single", "ab_overlap"),
    ("rise", "prev"), ("single", "numbered"), ("pair", "check"), ("rise", "star"),
    ("rise", "ab"), ("pair", "abc_next"), ("single", "keyed"), ("rise", "ab_plus"),
]


# ----------------------------------------------------------------------------- data


def _py(v: Any) -> Any:
    if v is None:
        return None
    if isinstance(v, float) and math.isnan(v):
        return None
    if v is pd.NaT:
        return None
    if isinstance(v, np.generic):
        v = v.item()
        if isinstance(v, float) and math.isnan(v):
            return None
    return v


def _events(rows: list[tuple[int, str, int, int]], datetimes: bool) -> pd.DataFrame:
    """Events (tag, source_id, price, time) in arrival order, ids 0.. by arrival."""
    frame = pd.DataFrame(rows, columns=["tag", "source_id", "price", "ts"])
    frame.insert(0, "event_id", np.arange(len(frame), dtype="int64"))
    frame["tag"] = frame["tag"].astype("int64")
    frame["price"] = frame["price"].astype("int64")
    if datetimes:
        frame["ts"] = T0 + pd.to_timedelta(frame["ts"].astype("int64"), unit="h")
    else:
        frame["ts"] = frame["ts"].astype("float64")
    return frame


def _tnum(series: pd.Series) -> np.ndarray:
    """Time as numbers, computed here (not with the module's helper)."""
    if pd.api.types.is_datetime64_any_dtype(series.dtype):
        return np.array([(t - T0) / pd.Timedelta(hours=1) for t in series], dtype="float64")
    return series.to_numpy(dtype="float64")


def _before_num(before: Any) -> float:
    return before / pd.Timedelta(hours=1) if isinstance(before, pd.Timedelta) else float(before)


Triple = tuple[tuple[Any, ...], tuple[Any, ...], int, tuple[tuple[str, Any], ...]]


def reference(spec: LiveArchiveSpec, live: pd.DataFrame, archive: pd.DataFrame,
              cond: Callable[[dict[str, Any]], bool]) -> set[Triple]:
    """Brute force: for each live match, the archive query over the rows of its key with
    start - before <= time < start, numbered by first row; filtered by ``cond``."""
    before = _before_num(spec.before)
    lt, at = _tnum(live["ts"]), _tnum(archive["ts"])
    key_at = [c.lower() for c in spec.live.partition_by].index("tag")
    out: set[Triple] = set()
    for m in spec.live.find_matches(live):
        if not m.rows:
            continue
        start = min(lt[r] for r in m.rows)
        key = m.partition[key_at]
        mask = (archive["tag"].to_numpy() == key) & (at >= start - before) & (at < start)
        part = archive[mask]
        part = part.iloc[np.argsort(_tnum(part["ts"]), kind="stable")].reset_index(drop=True)
        found = [a for a in spec.archive.find_matches(part) if a.rows]
        found.sort(key=lambda a: min(a.rows))
        live_ids = tuple(int(live["event_id"].iloc[r]) for r in m.rows)
        for number, a in enumerate(found, start=1):
            measures = {k: _py(v) for k, v in {**m.measures, **a.measures}.items()}
            if not cond(measures):
                continue
            arch_ids = tuple(int(part["event_id"].iloc[r]) for r in a.rows)
            out.add((live_ids, arch_ids, number, tuple(sorted(measures.items()))))
    return out


def observed(result: Result) -> set[Triple]:
    out = set()
    for j in result.joined:
        measures = {k: _py(v) for k, v in j.measures.items()}
        out.add((tuple(int(i) for i in j.live.ids), tuple(int(i) for i in j.archive_ids),
                 j.number, tuple(sorted(measures.items()))))
    assert len(out) == len(result.joined), "duplicate joined results"
    return out


def _buffered(archive: pd.DataFrame, split: int, capacity: int, chunk: int) -> RecentBuffer:
    """A buffer in front of a store holding every event; events from ``split`` on (arrival
    order) were appended to the buffer; everything before it counts in covered_from."""
    store = FrameArchive(archive, "tag", "ts")
    head = archive.iloc[:split]
    covered = float(np.max(_module_time(head["ts"]))) if len(head) else float("-inf")
    buf = RecentBuffer(store, "tag", "ts", capacity, covered_from=covered)
    for a in range(split, len(archive), max(chunk, 1)):
        buf.append(archive.iloc[a:a + max(chunk, 1)])
    return buf


def _module_time(series: pd.Series) -> np.ndarray:
    """The stores' time unit: int64 ns for datetimes, floats otherwise."""
    if pd.api.types.is_datetime64_any_dtype(series.dtype):
        return series.to_numpy("datetime64[ns]").view("int64").astype("float64")
    return series.to_numpy(dtype="float64")


# ----------------------------------------------------------------------------- 1. differential

event = st.tuples(st.integers(1, 2), st.sampled_from("aabbcd"), st.integers(0, 6),
                  st.integers(0, 24))
event_rows = st.lists(event, max_size=36)


@st.composite
def setups(draw: st.DrawFn) -> dict[str, Any]:
    if draw(st.integers(0, 3)) < 3:
        # dense random histories (hypothesis alone favours tiny, repetitive ones)
        rnd = random.Random(draw(st.integers(0, 2**32)))
        rows = [(rnd.randint(1, 2), rnd.choice("abcd"), rnd.randint(0, 6), rnd.randint(0, 24))
                for _ in range(rnd.randint(10, 40))]
    else:
        rows = draw(event_rows)
    datetimes = draw(st.booleans())
    events = _events(rows, datetimes)
    # the live input: the events from some time on (or all), in arrival order
    cut = draw(st.integers(0, 16))
    live = events[_tnum(events["ts"]) >= cut].reset_index(drop=True)
    hours = draw(st.sampled_from([24, 10, 30, 5, 2, 0]) | st.integers(0, 30))
    before: Any = pd.Timedelta(hours=hours) if datetimes else float(hours)
    tl_hours = draw(st.none() | st.integers(0, 30))
    tl: Any = None
    if tl_hours is not None:
        tl = pd.Timedelta(hours=tl_hours).value if datetimes else float(tl_hours)
        if datetimes and draw(st.booleans()):
            tl = pd.Timedelta(hours=tl_hours)
    sub = draw(st.none() | st.integers(1, 4))
    sel = draw(st.none() | st.floats(0.0, 1.0))
    return {"events": events, "live": live, "before": before,
            "settings": StrategySettings(tolerated_latency=tl, subwindow=sub,
                                         archive_selectivity=sel, sample_rows=draw(
                                             st.sampled_from([5, 5000]))),
            "split": draw(st.integers(0, max(len(events), 0))),
            "capacity": draw(st.integers(0, 30)), "chunk": draw(st.integers(1, 6))}


@settings(max_examples=45, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(pair=st.sampled_from(PAIRS), cond_name=st.sampled_from(sorted(CONDITIONS)),
       store_name=st.sampled_from(["frame", "sqlite", "buffer"]), setup=setups())
def test_every_strategy_and_store_equals_the_brute_force_reference(
        pair: tuple[str, str], cond_name: str, store_name: str, setup: dict[str, Any]) -> None:
    live_name, archive_name = pair
    cond_sql, cond_py = CONDITIONS[cond_name]
    spec = LiveArchiveSpec.of(LIVE[live_name], ARCHIVE[archive_name][0], "tag",
                              setup["before"], cond_sql)
    events, live, chosen = setup["events"], setup["live"], setup["settings"]
    expected = reference(spec, live, events, cond_py)
    stores: dict[str, Callable[[], Any]] = {
        "frame": lambda: FrameArchive(events, "tag", "ts"),
        "sqlite": lambda: SqliteArchive(events, "tag", "ts"),
        "buffer": lambda: _buffered(events, setup["split"], setup["capacity"],
                                    setup["chunk"]),
    }
    make = stores[store_name]
    for strategy in STRATEGY_NAMES:
        if strategy == "sllaa" and chosen.tolerated_latency is None and chosen.subwindow is None:
            with pytest.raises(StrategyError, match="sllaa needs a tolerated latency"):
                detect(spec, live, make(), strategy, chosen)
            continue
        result = detect(spec, live, make(), strategy, chosen)
        got = observed(result)
        assert got == expected, (strategy, result.plan.strategy, result.plan.drive,
                                 sorted(got ^ expected))
        keys = [(tuple(map(int, a)), tuple(map(int, b))) for a, b in result.keys()]
        assert keys == sorted((t[0], t[1]) for t in expected)
        if result.plan.drive == "live":
            live_matches = [m for m in spec.live.find_matches(live) if m.rows]
            assert result.live_count == len(live_matches)


def test_the_reference_is_not_vacuous() -> None:
    """The generated cases do join things: a fixed case through the reference."""
    events = _events([(1, "a", 3, 0), (1, "b", 4, 1), (1, "a", 5, 2), (1, "b", 1, 3),
                      (1, "d", 9, 4), (2, "a", 1, 1), (2, "b", 1, 2), (2, "d", 0, 5)], False)
    spec = LiveArchiveSpec.of(LIVE["single"], ARCHIVE["ab"][0], "tag", 4.0,
                              CONDITIONS["cheaper"][0])
    ref = reference(spec, events, events, CONDITIONS["cheaper"][1])
    # tag 1: d at 4, RA [0, 4): (0, 1), (2, 3); tag 2: d at 5 (price 0): nothing cheaper
    assert {(t[0], t[1], t[2]) for t in ref} == {((4,), (0, 1), 1), ((4,), (2, 3), 2)}
    for strategy in STRATEGY_NAMES:
        got = observed(detect(spec, events, SqliteArchive(events, "tag", "ts"), strategy,
                              StrategySettings(subwindow=1)))
        assert got == ref, strategy


# ----------------------------------------------------------------------------- 2. RFID by hand

RFID_LIVE = _q("PARTITION BY tag ORDER BY ts MEASURES D.ts AS seen_at, D.price AS d_price "
               "ONE ROW PER MATCH PATTERN (D) DEFINE D AS source_id = 'D'")
RFID_ARCHIVE = _q("PARTITION BY tag ORDER BY ts MEASURES A.ts AS a_at, B.ts AS b_at, "
                  "B.price AS b_price ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW "
                  "PATTERN (A B) DEFINE A AS source_id = 'A', B AS source_id = 'B'")


def _rfid() -> pd.DataFrame:
    h = pd.Timedelta(hours=1)
    rows = [  # event_id, tag, source_id, price, time (hours after T0)
        (1, 1, "A", 5, 8), (2, 1, "B", 6, 9),            # tag 1, day 0: outside id 9's RA
        (3, 2, "A", 1, 12), (4, 2, "B", 2, 13),          # tag 2, day 0
        (5, 2, "D", 3, 14),                              # live: RA [-10h, 14h) -> (3, 4)
        (6, 1, "A", 7, 31), (7, 1, "B", 8, 31.5),        # tag 1, day 1
        (8, 1, "A", 9, 32), (9, 1, "D", 4, 34),          # live: RA [10h, 34h) -> (6, 7)
        (10, 3, "D", 5, 36),                             # live, tag 3: no history
        (11, 2, "A", 1, 39), (12, 2, "B", 9, 40),        # tag 2, day 1
        (13, 2, "A", 2, 41), (14, 2, "B", 3, 42),
        (15, 2, "D", 6, 44),                             # live: RA [20h, 44h) -> both pairs
    ]
    frame = pd.DataFrame(rows, columns=["event_id", "tag", "source_id", "price", "hours"])
    frame["ts"] = T0 + frame.pop("hours") * h
    return frame


RFID_EXPECTED = {((5,), (3, 4), 1), ((9,), (6, 7), 1), ((15,), (11, 12), 1),
                 ((15,), (13, 14), 2)}


@pytest.mark.parametrize("strategy", STRATEGY_NAMES)
@pytest.mark.parametrize("store", ["frame", "sqlite"])
def test_rfid_example_by_hand(strategy: str, store: str) -> None:
    events = _rfid()
    spec = LiveArchiveSpec.of(RFID_LIVE, RFID_ARCHIVE, "tag", pd.Timedelta(hours=24))
    archive = FrameArchive(events, "tag", "ts") if store == "frame" else SqliteArchive(
        events, "tag", "ts")
    result = detect(spec, events, archive, strategy,
                    StrategySettings(tolerated_latency=pd.Timedelta(hours=12)))
    got = {(tuple(j.live.ids), tuple(j.archive_ids), j.number) for j in result.joined}
    assert got == RFID_EXPECTED
    assert result.live_count == (4 if result.plan.drive == "live" else 3)
    by_live = {j.live.ids: j.measures for j in result.joined if j.number == 2}
    assert by_live[(15,)]["b_price"] == 3 and by_live[(15,)]["d_price"] == 6
    assert by_live[(15,)]["seen_at"] == T0 + pd.Timedelta(hours=44)
    assert by_live[(15,)]["a_at"] == T0 + pd.Timedelta(hours=41)


def test_rfid_join_condition_by_hand() -> None:
    events = _rfid()
    spec = LiveArchiveSpec.of(RFID_LIVE, RFID_ARCHIVE, "tag", pd.Timedelta(hours=24),
                              condition="b_price < d_price")
    for strategy in STRATEGY_NAMES:
        result = detect(spec, events, FrameArchive(events, "tag", "ts"), strategy,
                        StrategySettings(subwindow=2))
        # (3,4): 2 < 3 yes; (6,7): 8 < 4 no; (11,12): 9 < 6 no; (13,14): 3 < 6 yes (number 2)
        got = {(tuple(j.live.ids), tuple(j.archive_ids), j.number) for j in result.joined}
        assert got == {((5,), (3, 4), 1), ((15,), (13, 14), 2)}, strategy


def test_rfid_access_counters_by_hand() -> None:
    events = _rfid()
    spec = LiveArchiveSpec.of(RFID_LIVE, RFID_ARCHIVE, "tag", pd.Timedelta(hours=24))
    h = pd.Timedelta(hours=1)

    # ALAA: one blind load of Rmax = [14h - 24h, 44h): every key, every row before 44h
    alaa = detect(spec, events, FrameArchive(events, "tag", "ts"), "alaa")
    assert alaa.stats.loads == 1
    assert alaa.stats.rows_read == 14  # all but id 15 (at 44h, excluded: hi is open)
    (load,) = alaa.plan.loads
    assert load.keys is None
    assert (load.lo, load.hi) == ((T0 - 10 * h).value, (T0 + 44 * h).value)

    # LLAA: one load per live match (ids 5, 9, 10, 15), each its own key and RA
    llaa = detect(spec, events, FrameArchive(events, "tag", "ts"), "llaa")
    assert llaa.stats.loads == 4
    # id 5: tag 2 in [-10h, 14h): 3, 4 | id 9: tag 1 in [10h, 34h): 6, 7, 8
    # id 10: tag 3 in [12h, 36h): none | id 15: tag 2 in [20h, 44h): 11..14
    assert llaa.stats.rows_read == 2 + 3 + 0 + 4
    assert [ld.keys for ld in llaa.plan.loads] == [(2,), (1,), (3,), (2,)]

    # SLLAA, TL = 12 h: completion order 14h | 34h, 36h, 44h (44 - 34 = 10 <= 12) -> 2 loads
    sllaa = detect(spec, events, FrameArchive(events, "tag", "ts"), "sllaa",
                   StrategySettings(tolerated_latency=pd.Timedelta(hours=12)))
    assert sllaa.stats.loads == 2
    assert [ld.serves for ld in sllaa.plan.loads] == [(0,), (1, 2, 3)]
    assert sllaa.plan.loads[1].keys == (1, 3, 2)
    # second load: tags 1, 3, 2 in [10h, 44h): 6, 7, 8, 9 | 10 | 3, 4, 5, 11, 12, 13, 14
    assert sllaa.stats.rows_read == 2 + 12
    # TL = 12 h and at most 2 per sub-window: 14h | 34h, 36h | 44h -> 3 loads
    capped = detect(spec, events, FrameArchive(events, "tag", "ts"), "sllaa",
                    StrategySettings(tolerated_latency=pd.Timedelta(hours=12), subwindow=2))
    assert capped.stats.loads == 3
    # TL = 9 h: 14h | 34h, 36h | 44h (44 - 34 = 10 > 9) -> 3 loads
    tight = detect(spec, events, FrameArchive(events, "tag", "ts"), "sllaa",
                   StrategySettings(tolerated_latency=pd.Timedelta(hours=9)))
    assert tight.stats.loads == 3
    # TL = 30 h: 44 - 14 = 30 <= 30 -> one sub-window
    wide = detect(spec, events, FrameArchive(events, "tag", "ts"), "sllaa",
                  StrategySettings(tolerated_latency=pd.Timedelta(hours=30)))
    assert wide.stats.loads == 1
    for r in (alaa, llaa, sllaa, capped, tight, wide):
        assert {(j.live.ids, j.archive_ids) for j in r.joined} == {
            (a, b) for a, b, _ in RFID_EXPECTED}


def test_archive_query_reading_the_key_column_sees_the_real_key() -> None:
    """Regression: the per-range engine call used to overwrite the key column with the
    live match's index, so PA's DEFINE/MEASURES reading the key saw 0, 1, 2..."""
    events = _rfid()
    archive = RFID_ARCHIVE.replace("B.price AS b_price", "B.price AS b_price, A.tag AS a_tag")
    archive = archive.replace("B AS source_id = 'B'", "B AS source_id = 'B' AND tag < 3")
    spec = LiveArchiveSpec.of(RFID_LIVE, archive, "tag", pd.Timedelta(hours=24))
    for strategy in STRATEGY_NAMES:
        result = detect(spec, events, FrameArchive(events, "tag", "ts"), strategy,
                        StrategySettings(subwindow=3))
        got = {(j.live.ids, j.archive_ids, j.number, j.measures["a_tag"])
               for j in result.joined}
        assert got == {((5,), (3, 4), 1, 2), ((9,), (6, 7), 1, 1), ((15,), (11, 12), 1, 2),
                       ((15,), (13, 14), 2, 2)}, strategy


def test_sllaa_without_latency_or_subwindow_is_an_error() -> None:
    events = _rfid()
    spec = LiveArchiveSpec.of(RFID_LIVE, RFID_ARCHIVE, "tag", pd.Timedelta(hours=24))
    with pytest.raises(StrategyError, match="sllaa needs a tolerated latency"):
        detect(spec, events, FrameArchive(events, "tag", "ts"), "sllaa")
    with pytest.raises(StrategyError, match="unknown live-archive strategy 'lazy'"):
        detect(spec, events, FrameArchive(events, "tag", "ts"), "lazy")


def test_auto_says_why() -> None:
    events = _rfid()
    spec = LiveArchiveSpec.of(RFID_LIVE, RFID_ARCHIVE, "tag", pd.Timedelta(hours=24))
    with_tl = detect(spec, events, FrameArchive(events, "tag", "ts"), "auto",
                     StrategySettings(tolerated_latency=pd.Timedelta(hours=12)))
    assert with_tl.plan.strategy == "sllaa" and "tolerated latency" in with_tl.plan.reason
    without = detect(spec, events, FrameArchive(events, "tag", "ts"), "auto")
    assert without.plan.strategy == "llaa" and "live side drives" in without.plan.reason
    rare = detect(spec, events, FrameArchive(events, "tag", "ts"), "auto",
                  StrategySettings(archive_selectivity=0.0))
    assert rare.plan.strategy == "ollaa" and rare.plan.drive == "archive"
    assert "archive selectivity 0 (statistics)" in rare.plan.reason
    matches = without.live_count
    bulk = detect(spec, events, FrameArchive(events, "tag", "ts"), "auto",
                  StrategySettings(bulk_matches=matches))
    assert bulk.plan.strategy == "alaa" and len(bulk.plan.loads) == 1
    assert f"bulk batch: {matches:,} live matches" in bulk.plan.reason
    below = detect(spec, events, FrameArchive(events, "tag", "ts"), "auto",
                   StrategySettings(bulk_matches=matches + 1))
    assert below.plan.strategy == "llaa"
    for r in (with_tl, without, rare, bulk, below):
        assert {(j.live.ids, j.archive_ids) for j in r.joined} == {
            (a, b) for a, b, _ in RFID_EXPECTED}


# ----------------------------------------------------------------------------- 3. Lemma 1


def _inst(start: float, end: float, key: Any = 1) -> LiveInstance:
    m = Match((key,), 1, (0,), ("D",), {})
    return LiveInstance(key, start, end, start - 5, start, m, (0,))


def test_subwindows_grow_until_the_span_exceeds_tl() -> None:
    spans = [_inst(0, 1), _inst(2, 3), _inst(5, 6), _inst(6, 10)]
    # 3 - 0 = 3, 6 - 0 = 6 <= 6 (the boundary is inside), 10 - 0 = 10 > 6
    assert subwindows(spans, 6.0) == [[0, 1, 2], [3]]
    # 6 - 0 = 6 > 5.99 cuts before the third; then 10 - 5 = 5 <= 5.99
    assert subwindows(spans, 5.99) == [[0, 1], [2, 3]]
    assert subwindows(spans, 0.5) == [[0], [1], [2], [3]]
    assert subwindows(spans, 10.0) == [[0, 1, 2, 3]]
    assert subwindows(spans, None) == [[0, 1, 2, 3]]
    assert subwindows([], 3.0) == []


def test_subwindows_use_the_smallest_start_not_the_first() -> None:
    # completion order by end, but the second starts earlier: span 11 - (-5) = 16
    spans = [_inst(0, 10), _inst(-5, 11), _inst(9, 12)]
    assert subwindows(spans, 15.0) == [[0], [1], [2]]  # 16 > 15, then 17 > 15
    assert subwindows(spans, 16.0) == [[0, 1], [2]]  # 12 - (-5) = 17 > 16
    assert subwindows(spans, 17.0) == [[0, 1, 2]]


def test_subwindows_max_size_caps_each_window() -> None:
    spans = [_inst(t, t) for t in range(7)]
    assert subwindows(spans, None, 3) == [[0, 1, 2], [3, 4, 5], [6]]
    assert subwindows(spans, 100.0, 2) == [[0, 1], [2, 3], [4, 5], [6]]
    assert subwindows(spans, 1.0, 5) == [[0, 1], [2, 3], [4, 5], [6]]  # TL binds first
    assert subwindows(spans, 4.0, 3) == [[0, 1, 2], [3, 4, 5], [6]]  # the cap binds first
    assert subwindows(spans, None, 1) == [[n] for n in range(7)]


# ----------------------------------------------------------------------------- 4. range_local


def _body(pattern: str, define: str, skip: str = "PAST LAST ROW",
          measures: str = "COUNT(*) AS n") -> str:
    return _q(f"PARTITION BY tag ORDER BY ts MEASURES {measures} ONE ROW PER MATCH "
              f"AFTER MATCH SKIP {skip} PATTERN ({pattern}) DEFINE {define}")


RANGE_LOCAL = [
    # fixed sequence, first variable excluded by every later one, skip past last: local
    ("exclusive", _body("A B", "A AS source_id = 'a', B AS source_id = 'b'"), True),
    ("exclusive3", _body("A B C", "A AS source_id = 'a' AND price > 1, "
                         "B AS source_id = 'b', C AS price > 3 AND source_id = 'c'"), True),
    # B's condition does not exclude A's rows: a match can start inside another
    ("overlap", _body("A B", "A AS source_id = 'a', B AS price > 2"), False),
    ("same", _body("A B", "A AS source_id = 'a', B AS source_id = 'a'"), False),
    ("or", _body("A B", "A AS source_id = 'a', B AS source_id = 'b' OR price > 1"), False),
    # quantifiers, alternation, groups
    ("plus", _body("A B+", "A AS source_id = 'a', B AS source_id = 'b'"), False),
    ("optional", _body("A B?", "A AS source_id = 'a', B AS source_id = 'b'"), False),
    ("alternation", _body("A | B", "A AS source_id = 'a', B AS source_id = 'b'"), False),
    # navigation outside the match
    ("prev", _body("A B", "A AS source_id = 'a', B AS source_id = 'b' AND "
                   "price > PREV(price)"), False),
    ("next", _body("A B", "A AS source_id = 'a' AND NEXT(price) > 0, "
                   "B AS source_id = 'b'"), False),
    ("match_number", _body("A B", "A AS source_id = 'a', B AS source_id = 'b'",
                           measures="MATCH_NUMBER() AS mn"), False),
    # skip to next row: every start row is tried, a fixed sequence is local
    ("next_row", _body("A B C", "A AS price > 1, B AS price > A.price, C AS price < 5",
                       skip="TO NEXT ROW"), True),
    ("next_row_overlap", _body("A B", "A AS source_id = 'a', B AS source_id = 'a'",
                               skip="TO NEXT ROW"), True),
    ("single", _body("A", "A AS price > 1"), True),
]


@pytest.mark.parametrize(("name", "query", "local"), RANGE_LOCAL, ids=[r[0] for r in RANGE_LOCAL])
def test_range_local_table(name: str, query: str, local: bool) -> None:
    assert range_local(cep_core.compile_query(query)) is local
    assert ARCHIVE  # the differential pairs below cover both kinds


@pytest.mark.parametrize("name", sorted(ARCHIVE))
def test_range_local_of_the_differential_queries(name: str) -> None:
    query, local = ARCHIVE[name]
    assert range_local(cep_core.compile_query(query)) is local


# ----------------------------------------------------------------------------- 5. RecentBuffer


def _plain(times: list[float], tags: list[int] | None = None) -> pd.DataFrame:
    return pd.DataFrame({"event_id": np.arange(len(times)), "tag": tags or [1] * len(times),
                         "ts": np.array(times, dtype="float64")})


def test_buffer_serves_ranges_after_covered_from_from_memory() -> None:
    events = _plain([1, 2, 3, 4, 5, 6, 7, 8])
    store = FrameArchive(events, "tag", "ts")
    buf = RecentBuffer(store, "tag", "ts", capacity=4, covered_from=4.0)
    buf.append(events.iloc[4:])
    assert buf.rows == 4 and buf.covered_from == 4.0
    out = buf.load([1], 4.5, 100)
    assert out["event_id"].tolist() == [4, 5, 6, 7]
    assert (buf.stats.buffer_loads, buf.stats.buffer_rows, buf.stats.loads) == (1, 4, 0)
    # lo == covered_from: the event at 4 is not buffered -> the store answers
    out = buf.load([1], 4.0, 100)
    assert out["event_id"].tolist() == [3, 4, 5, 6, 7]
    assert (buf.stats.buffer_loads, buf.stats.loads, buf.stats.rows_read) == (1, 1, 5)
    # keys=None and an unknown key from memory
    assert buf.load(None, 6, 8)["event_id"].tolist() == [5, 6]
    assert len(buf.load([9], 5, 8)) == 0
    assert buf.stats.buffer_loads == 3 and buf.stats.loads == 1
    assert buf.stats is store.stats


def test_buffer_eviction_raises_covered_from_to_the_latest_evicted_time() -> None:
    events = _plain([10, 30, 20, 40, 50, 45])
    buf = RecentBuffer(FrameArchive(events, "tag", "ts"), "tag", "ts", capacity=3)
    buf.append(events.iloc[:2])
    assert buf.covered_from == float("-inf") and buf.rows == 2
    buf.append(events.iloc[2:4])  # 4 rows: evict the 10
    assert buf.covered_from == 10.0 and buf.rows == 3
    buf.append(events.iloc[4:])  # 5 rows: evict 30 and 20 -> max 30, not the last (20)
    assert buf.covered_from == 30.0 and buf.rows == 3
    before = buf.stats.loads
    assert buf.load([1], 31, 100)["event_id"].tolist() == [3, 5, 4]
    assert buf.stats.loads == before and buf.stats.buffer_loads == 1
    # [25, 100) would miss the evicted 30: the store answers
    assert buf.load([1], 25, 100)["event_id"].tolist() == [1, 3, 5, 4]
    assert buf.stats.loads == before + 1


def test_buffer_with_late_events_does_not_claim_missing_coverage() -> None:
    # arrival order: times 5, 9 (before the buffer starts), then 3 (late), 7, 8
    events = _plain([5, 9, 3, 7, 8])
    store = FrameArchive(events, "tag", "ts")
    head = events.iloc[:2]
    buf = RecentBuffer(store, "tag", "ts", capacity=10,
                       covered_from=float(head["ts"].max()))
    buf.append(events.iloc[2:])
    # the buffer holds 3, 7, 8 but the 9 arrived earlier: [6, 10) must not come from memory
    out = buf.load([1], 6, 10)
    assert sorted(out["event_id"].tolist()) == [1, 3, 4]
    assert buf.stats.buffer_loads == 0 and buf.stats.loads == 1
    out = buf.load([1], 9.5, 10)
    assert len(out) == 0 and buf.stats.buffer_loads == 1
    # detection through the buffer equals detection on the store for any range
    for lo in np.arange(0, 11, 0.5):
        for hi in (lo + 1, lo + 4, 20):
            a = set(buf.load([1], float(lo), float(hi))["event_id"])
            b = set(FrameArchive(events, "tag", "ts").load([1], float(lo), float(hi))[
                "event_id"])
            assert a == b, (lo, hi)


def test_buffer_capacity_zero_and_negative() -> None:
    events = _plain([1, 2, 3])
    buf = RecentBuffer(FrameArchive(events, "tag", "ts"), "tag", "ts", capacity=0)
    buf.append(events)
    assert buf.rows == 0 and buf.covered_from == 3.0
    assert buf.load([1], 0, 10)["event_id"].tolist() == [0, 1, 2]
    assert buf.load([1], 3.5, 10).empty
    assert buf.stats.buffer_loads == 0 and buf.stats.loads == 2
    with pytest.raises(ValueError, match="capacity must be >= 0"):
        RecentBuffer(FrameArchive(events, "tag", "ts"), "tag", "ts", capacity=-1)


# ----------------------------------------------------------------------------- 6. spec errors

GOOD_LIVE = RFID_LIVE
GOOD_ARCH = RFID_ARCHIVE


@pytest.mark.parametrize(("live", "archive", "kwargs", "message"), [
    (GOOD_LIVE.replace("PARTITION BY tag ", ""), GOOD_ARCH, {},
     "live query must PARTITION BY the join key 'tag'"),
    (GOOD_LIVE, GOOD_ARCH.replace("PARTITION BY tag", "PARTITION BY source_id"), {},
     "archive query must PARTITION BY the join key 'tag'"),
    (GOOD_LIVE, GOOD_ARCH.replace("ORDER BY ts", "ORDER BY price"), {},
     r"must ORDER BY the same time column first \(ts vs price\)"),
    (GOOD_LIVE, GOOD_ARCH.replace("B.price AS b_price", "B.price AS d_price"), {},
     r"measures share names \['d_price'\]"),
    (GOOD_LIVE, GOOD_ARCH, {"condition": "b_price < nope"},
     "'nope' is not a measure of either side"),
    (GOOD_LIVE, GOOD_ARCH, {"condition": "A.price < d_price"},
     "'price' is not a measure of either side"),
    (GOOD_LIVE, GOOD_ARCH, {"before": pd.Timedelta(hours=-1)},
     "'before' must not be negative"),
    (GOOD_LIVE, GOOD_ARCH, {"before": -2}, "'before' must not be negative: -2"),
])
def test_spec_errors_name_the_problem(live: str, archive: str, kwargs: dict[str, Any],
                                      message: str) -> None:
    args: dict[str, Any] = {"before": pd.Timedelta(hours=24), **kwargs}
    with pytest.raises(StrategyError, match=message):
        LiveArchiveSpec.of(live, archive, "tag", **args)


def test_spec_accepts_the_key_in_any_case_and_unknown_strategy_is_an_error() -> None:
    spec = LiveArchiveSpec.of(GOOD_LIVE, GOOD_ARCH, "TAG", pd.Timedelta(0),
                              condition="b_price < d_price")
    assert spec.time == "ts"
    events = _rfid()
    spec = LiveArchiveSpec.of(GOOD_LIVE, GOOD_ARCH, "tag", pd.Timedelta(hours=1))
    with pytest.raises(StrategyError, match=r"unknown live-archive strategy 'fast'; use one of "
                       "alaa, llaa, ollaa, sllaa, auto"):
        detect(spec, events, FrameArchive(events, "tag", "ts"), "fast")


def test_before_must_match_the_time_column_kind() -> None:
    events = _rfid()  # datetime time column
    spec = LiveArchiveSpec.of(GOOD_LIVE, GOOD_ARCH, "tag", 24)
    with pytest.raises(StrategyError, match="'before' must be a duration"):
        detect(spec, events, FrameArchive(events, "tag", "ts"), "llaa")
    numeric = events.assign(ts=np.arange(len(events), dtype="float64"))
    spec = LiveArchiveSpec.of(GOOD_LIVE, GOOD_ARCH, "tag", pd.Timedelta(hours=1))
    with pytest.raises(StrategyError, match="'before' is a duration but the time column is "
                       "numeric"):
        detect(spec, numeric, FrameArchive(numeric, "tag", "ts"), "llaa")


# ----------------------------------------------------------------------------- 7. SQLite


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=event_rows, datetimes=st.booleans(),
       loads=st.lists(st.tuples(st.none() | st.lists(st.integers(0, 4), max_size=3),
                                st.integers(-2, 42), st.integers(0, 45)),
                      min_size=1, max_size=6))
def test_sqlite_archive_returns_the_frame_archive_rows(
        rows: list[tuple[int, str, int, int]], datetimes: bool,
        loads: list[tuple[list[int] | None, int, int]]) -> None:
    events = _events(rows, datetimes)
    frame, sql = FrameArchive(events, "tag", "ts"), SqliteArchive(events, "tag", "ts")
    t = _module_time(events["ts"])
    unit = float(pd.Timedelta(hours=1).value) if datetimes else 1.0
    base = float(T0.value) if datetimes else 0.0
    for keys, lo_h, width in loads:
        lo, hi = base + lo_h * unit, base + (lo_h + width) * unit
        a = frame.load(keys, lo, hi)
        b = sql.load(keys, lo, hi)
        assert list(b.columns) == list(events.columns)
        assert b.dtypes.to_dict() == events.dtypes.to_dict()
        mask = (t >= lo) & (t < hi)
        if keys is not None:
            mask &= events["tag"].isin(keys).to_numpy()
        want = sorted(events.loc[mask, "event_id"].tolist())
        assert sorted(a["event_id"].tolist()) == want
        key = ["event_id"]
        left = a.sort_values(key).reset_index(drop=True)
        right = b.sort_values(key).reset_index(drop=True)
        pd.testing.assert_frame_equal(left, right, check_dtype=True)
    assert frame.stats.loads == sql.stats.loads == len(loads)
    assert frame.stats.rows_read == sql.stats.rows_read
