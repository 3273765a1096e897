"""The query shapes of ``engine_suite.py``: one MATCH_RECOGNIZE query per shape, with its
hand-vectorised pandas/numpy version and, where the peer can express it, the Flink SQL and
CORE (CEQL) texts. Semantics of each mapping: ``docs/performance.md``, "Engine suite".

Data (both in time order, one row per event):

* ``ticks``: ``symbol, ts, price, chg`` -- seeded stock ticks (``engine_throughput.
  stock_ticks``: 300 symbols, one tick per millisecond overall, prices in cents / 100) and
  ``chg`` = the change from the symbol's previous tick in cents (NULL on its first tick).
* ``flights``: ``origin, ts, delay`` -- ``flights-3m.parquet`` (vega-datasets), where
  ``ts`` = the scheduled minute plus k milliseconds for the k-th flight of the same origin
  and minute in file order (a total order per origin that every engine agrees on), sorted
  by ``ts``.

Every pandas version returns the matches as ``(first, last)`` row positions into the input
frame (and, for ``all_rows``, the positions and classifier labels of every matched row),
computed without a Python loop over rows or matches.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

SECOND_NS = 1_000_000_000


@dataclass(frozen=True)
class Shape:
    name: str
    data: str  # 'ticks' | 'flights'
    query: str  # cep_core
    pandas: Callable[[pd.DataFrame], dict[str, np.ndarray]] | None
    #: Flink SQL: (pattern/define part, the cep_core query with the same matches when it
    #: differs from ``query``); None: Flink cannot express the shape
    flink: tuple[str, str | None] | None = None
    #: CEQL query and how its complex events relate to the MATCH_RECOGNIZE matches:
    #: 'equal' (same (first, last) sets) or 'superset' (CORE enumerates every match, MR
    #: keeps one per start row: every MR match must be a CORE complex event)
    core: tuple[str, str] | None = None
    note: str = ""
    labels: bool = field(default=False)  # compare classifier labels too (ALL ROWS)


def _mr(table: str, key: str, body: str, rows: str = "ONE ROW PER MATCH") -> str:
    return (f"SELECT * FROM {table} MATCH_RECOGNIZE (\n  PARTITION BY {key} ORDER BY ts\n"
            f"  MEASURES FIRST(ts) AS start_ts, LAST(ts) AS end_ts\n  {rows}\n{body}\n)")


# ---------------------------------------------------------------------- layout helpers
class Layout:
    """Rows sorted by partition (stable, so time order within a partition)."""

    def __init__(self, df: pd.DataFrame, key: str):
        codes = pd.factorize(df[key])[0]
        self.order = np.argsort(codes, kind="stable")
        self.key = codes[self.order]
        self.n = len(df)
        #: row i has a predecessor in its partition
        self.has_prev = np.r_[False, self.key[1:] == self.key[:-1]]
        self.ts = df["ts"].to_numpy("datetime64[ns]").view("int64")[self.order]

    def col(self, df: pd.DataFrame, name: str) -> np.ndarray:
        return df[name].to_numpy()[self.order]

    def directions(self, price: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """up / down / flat against the previous row of the partition (PREV)."""
        prev = np.r_[np.nan, price[:-1]]
        ok = self.has_prev
        return ok & (price > prev), ok & (price < prev), ok & (price == prev)

    def same(self, i: np.ndarray, j: np.ndarray) -> np.ndarray:
        """positions ``j`` exist and are in the partition of ``i``"""
        inside = j < self.n
        out = np.zeros(len(i), dtype=bool)
        out[inside] = self.key[j[inside]] == self.key[i[inside]]
        return out

    def result(self, first: np.ndarray, last: np.ndarray) -> dict[str, np.ndarray]:
        return {"first": self.order[first], "last": self.order[last]}


def shifted(a: np.ndarray, k: int) -> np.ndarray:
    """a[i + k] (False past the end)."""
    out = np.zeros_like(a)
    out[:len(a) - k] = a[k:]
    return out


def run_bounds(mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """First and last index of every maximal run of True."""
    start = np.flatnonzero(mask & ~np.r_[False, mask[:-1]])
    end = np.flatnonzero(mask & ~np.r_[mask[1:], False])
    return start, end


def alternate_after_reset(reset: np.ndarray) -> np.ndarray:
    """Match status along a chain where a run is matched if ``reset`` or else if the run
    before it was not (True, False, True, ... after each reset)."""
    idx = np.arange(len(reset))
    last_reset = np.maximum.accumulate(np.where(reset, idx, 0))
    return (idx - last_reset) % 2 == 0


def next_of(positions: np.ndarray, after: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The first of ``positions`` (sorted) at or after each ``after``; (index, exists)."""
    k = np.searchsorted(positions, after)
    exists = k < len(positions)
    return positions[np.minimum(k, max(len(positions) - 1, 0))] if len(positions) else \
        np.zeros(len(after), dtype=np.int64), exists


# ---------------------------------------------------------------------- pandas versions
def _vshape_runs(lay: Layout, up: np.ndarray, down: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """STRT DOWN+ UP+, AFTER MATCH SKIP PAST LAST ROW: (first, last, first down row)."""
    ds, de = run_bounds(down)
    ok = shifted(up, 1)[de]  # the down run is followed by an up row (same partition)
    ds, de = ds[ok], de[ok]
    _, up_end = run_bounds(up)
    ue = up_end[np.searchsorted(up_end, de + 1)]
    # a match ends at ue; the next down run's STRT row ds-1 may be that same row (consumed):
    # it then starts at ds, which needs a second DOWN row, else that run has no match and
    # the one after it is not blocked
    adjacent = np.r_[False, ds[1:] - 1 == ue[:-1]]
    matched = alternate_after_reset(~adjacent | (de - ds >= 1))
    blocked = adjacent & np.r_[False, matched[:-1]]
    first = ds - 1 + blocked
    return first[matched], ue[matched], (ds)[matched]


def pandas_vshape(df: pd.DataFrame) -> dict[str, np.ndarray]:
    lay = Layout(df, "symbol")
    up, down, _ = lay.directions(lay.col(df, "price"))
    first, last, _ = _vshape_runs(lay, up, down)
    return lay.result(first, last)


def pandas_all_rows(df: pd.DataFrame) -> dict[str, np.ndarray]:
    lay = Layout(df, "symbol")
    up, down, _ = lay.directions(lay.col(df, "price"))
    first, last, _ = _vshape_runs(lay, up, down)
    lengths = last - first + 1
    starts = np.repeat(first, lengths)
    pos = starts + (np.arange(lengths.sum()) - np.repeat(np.cumsum(lengths) - lengths, lengths))
    label = np.where(pos == starts, "STRT", np.where(down[pos], "DOWN", "UP"))
    out = lay.result(first, last)
    out["row"] = lay.order[pos]
    out["label"] = label
    return out


def pandas_within_abc(df: pd.DataFrame) -> dict[str, np.ndarray]:
    lay = Layout(df, "origin")
    delay = lay.col(df, "delay")
    i = np.arange(max(lay.n - 2, 0))
    ok = ((delay[i] > 20) & (delay[i + 1] > 20) & (delay[i + 2] > 60)
          & (lay.key[i + 2] == lay.key[i]) & (lay.ts[i + 2] - lay.ts[i] <= 600 * SECOND_NS))
    first = i[ok]
    return lay.result(first, first + 2)


def pandas_alternation(df: pd.DataFrame) -> dict[str, np.ndarray]:
    lay = Layout(df, "symbol")
    up, down, flat = lay.directions(lay.col(df, "price"))
    # up/down/flat imply "same partition as the row before", so the rows chain up
    long = up & shifted(down, 1) & shifted(down, 2) & shifted(up, 3)
    short = up & shifted(flat, 1) & shifted(up, 2)
    first = np.flatnonzero(long | short)
    return lay.result(first, first + np.where(long[first], 3, 2))


def pandas_reluctant(df: pd.DataFrame) -> dict[str, np.ndarray]:
    lay = Layout(df, "symbol")
    chg = lay.col(df, "chg")
    bigup, bigdown = np.flatnonzero(chg >= 3), np.flatnonzero(chg <= -3)
    nd, exists = next_of(bigdown, bigup + 1)  # X*? takes as few rows as possible
    ok = exists & lay.same(bigup, nd)
    ok[ok] = lay.ts[nd[ok]] - lay.ts[bigup[ok]] <= 5 * SECOND_NS
    start, end = bigup[ok], nd[ok]
    # SKIP PAST LAST ROW: starts sharing an end lie inside the first one's match
    keep = np.r_[True, end[1:] != end[:-1]] if len(end) else np.zeros(0, dtype=bool)
    return lay.result(start[keep], end[keep])


def pandas_permute(df: pd.DataFrame) -> dict[str, np.ndarray]:
    lay = Layout(df, "symbol")
    up, down, flat = lay.directions(lay.col(df, "price"))
    code = up * 1 + down * 2 + flat * 4
    three = (code != 0) & (shifted(code, 1) != 0) & (shifted(code, 2) != 0)
    first = np.flatnonzero(three & ((code | shifted(code, 1) | shifted(code, 2)) == 7))
    return lay.result(first, first + 2)


def pandas_skip_till_any(df: pd.DataFrame) -> dict[str, np.ndarray]:
    lay = Layout(df, "symbol")
    chg = lay.col(df, "chg")
    a, b = np.flatnonzero(chg >= 3), np.flatnonzero(chg <= -3)
    nb, ok_b = next_of(b, a + 1)
    ok = ok_b & lay.same(a, nb)
    nc, ok_c = next_of(a, nb + 1)  # C has A's condition
    ok &= ok_c & lay.same(a, nc)
    ok[ok] = lay.ts[nc[ok]] - lay.ts[a[ok]] <= 5 * SECOND_NS
    return lay.result(a[ok], nc[ok])


def pandas_agg_define(df: pd.DataFrame) -> dict[str, np.ndarray]:
    lay = Layout(df, "symbol")
    chg = lay.col(df, "chg")
    up, down = chg > 0, chg < 0
    a, e = run_bounds(up)
    ok = shifted(down, 1)[e]
    a, e = a[ok], e[ok]
    # starts s in [a-1, e-1] with SUM(chg[s+1..e]) <= 6, i.e. cs[s] >= cs[e] - 6
    cs = np.cumsum(np.nan_to_num(chg)).astype(np.int64)
    lengths = e - a + 1
    run = np.repeat(np.arange(len(a)), lengths)
    s = np.repeat(a - 1, lengths) + (np.arange(lengths.sum())
                                     - np.repeat(np.cumsum(lengths) - lengths, lengths))
    big = np.int64(1) << 40
    keys = run * big + cs[s]
    first_ok = np.searchsorted(keys, np.arange(len(a)) * big + cs[e] - 6)
    keep = np.arange(len(s)) >= first_ok[run]
    return lay.result(s[keep], e[run[keep]] + 1)


# ---------------------------------------------------------------------- the shapes
_OPS = {"DOWN": "<", "UP": ">", "FLAT": "="}


def _dirs(*names: str) -> str:
    """DEFINE of the direction variables against the previous tick (PREV)."""
    return "DEFINE " + ", ".join(f"{v} AS price {_OPS[v]} PREV(price)" for v in names)


_CEQL_DIR = {"UP": "chg > 0", "DOWN": "chg < 0", "FLAT": "chg = 0 AND first = 0"}


NEGATIVE, POSITIVE = re.compile(r"-(\d)"), r"0 - \1"


def _ceql(formula: str, filters: dict[str, str], window_ms: int | None = None) -> str:
    # pycer 0.1.6 rejects a negative literal ("chg <= -3": "Failed to process client
    # request"); "0 - 3" is accepted
    where = " AND ".join(f"{v}[{NEGATIVE.sub(POSITIVE, c)}]" for v, c in filters.items())
    within = f" WITHIN {window_ms + 1} [ts]" if window_ms is not None else ""
    return f"SELECT * FROM S WHERE ({formula}) FILTER {where} PARTITION BY [key]{within}"


SHAPES: dict[str, Shape] = {s.name: s for s in [
    Shape("vshape", "ticks", _mr("ticks", "symbol", "  AFTER MATCH SKIP PAST LAST ROW\n"
                                 "  PATTERN (STRT DOWN+ UP+)\n  " + _dirs("DOWN", "UP")),
          pandas_vshape,
          flink=("PATTERN (STRT DOWN+ UP+ STOP)\n  DEFINE DOWN AS DOWN.chg < 0, "
                 "UP AS UP.chg > 0, STOP AS STOP.chg <= 0",
                 _mr("ticks", "symbol", "  AFTER MATCH SKIP PAST LAST ROW\n"
                     "  PATTERN (STRT DOWN+ UP+ STOP)\n  DEFINE DOWN AS price < PREV(price), "
                     "UP AS price > PREV(price), STOP AS price <= PREV(price)")),
          core=(_ceql("T as STRT : (T as DOWN):+ : (T as UP):+",
                      {"DOWN": _CEQL_DIR["DOWN"], "UP": _CEQL_DIR["UP"]}), "superset"),
          note="Flink rejects a greedy last element: its run and the lakecep run compared "
               "with it use PATTERN (STRT DOWN+ UP+ STOP)"),
    Shape("within_abc", "flights", _mr(
        "flights", "origin", "  AFTER MATCH SKIP TO NEXT ROW\n"
        "  PATTERN (A B C) WITHIN INTERVAL '10' MINUTE\n"
        "  DEFINE A AS delay > 20, B AS delay > 20, C AS delay > 60"), pandas_within_abc,
          flink=("PATTERN (A B C) WITHIN INTERVAL '10' MINUTE\n  DEFINE A AS A.delay > 20, "
                 "B AS B.delay > 20, C AS C.delay > 60", None),
          core=(_ceql("T as A : T as B : T as C",
                      {"A": "delay > 20", "B": "delay > 20", "C": "delay > 60"}, 600_000),
                "equal")),
    Shape("alternation", "ticks", _mr(
        "ticks", "symbol", "  AFTER MATCH SKIP TO NEXT ROW\n"
        "  PATTERN (UP (DOWN DOWN | FLAT) UP)\n  " + _dirs("UP", "DOWN", "FLAT")),
          pandas_alternation,
          core=(_ceql("T as U1 : ((T as D1 : T as D2) OR T as F) : T as U2",
                      {"U1": _CEQL_DIR["UP"], "D1": _CEQL_DIR["DOWN"],
                       "D2": _CEQL_DIR["DOWN"], "F": _CEQL_DIR["FLAT"],
                       "U2": _CEQL_DIR["UP"]}), "equal")),
    Shape("reluctant", "ticks", _mr(
        "ticks", "symbol", "  AFTER MATCH SKIP PAST LAST ROW\n"
        "  PATTERN (BIGUP X*? BIGDOWN) WITHIN INTERVAL '5' SECOND\n"
        "  DEFINE BIGUP AS chg >= 3, BIGDOWN AS chg <= -3"), pandas_reluctant,
          flink=("PATTERN (BIGUP X*? BIGDOWN) WITHIN INTERVAL '5' SECOND\n"
                 "  DEFINE BIGUP AS BIGUP.chg >= 3, BIGDOWN AS BIGDOWN.chg <= -3", None),
          core=(_ceql("T as BIGUP ; T as BIGDOWN", {"BIGUP": "chg >= 3",
                                                     "BIGDOWN": "chg <= -3"}, 5_000),
                "superset")),
    Shape("all_rows", "ticks", _mr(
        "ticks", "symbol", "  AFTER MATCH SKIP PAST LAST ROW\n"
        "  PATTERN (STRT DOWN+ UP+)\n  " + _dirs("DOWN", "UP"),
        rows="ALL ROWS PER MATCH").replace(
            "MEASURES FIRST(ts) AS start_ts, LAST(ts) AS end_ts",
            "MEASURES CLASSIFIER() AS cls, RUNNING COUNT(*) AS n"),
          pandas_all_rows, labels=True),
    Shape("permute", "ticks", _mr(
        "ticks", "symbol", "  AFTER MATCH SKIP TO NEXT ROW\n"
        "  PATTERN (PERMUTE(UP, DOWN, FLAT))\n  " + _dirs("UP", "DOWN", "FLAT")), pandas_permute,
          core=(_ceql(" OR ".join(f"(T as {a} : T as {b} : T as {c})" for a, b, c in [
              ("UP", "DOWN", "FLAT"), ("UP", "FLAT", "DOWN"), ("DOWN", "UP", "FLAT"),
              ("DOWN", "FLAT", "UP"), ("FLAT", "UP", "DOWN"), ("FLAT", "DOWN", "UP")]),
              _CEQL_DIR), "equal")),
    Shape("skip_till_any", "ticks", _mr(
        "ticks", "symbol", "  AFTER MATCH SKIP TO NEXT ROW\n"
        "  PATTERN (A B C) WITHIN INTERVAL '5' SECOND SKIP TILL ANY MATCH\n"
        "  DEFINE A AS chg >= 3, B AS chg <= -3, C AS chg >= 3"), pandas_skip_till_any,
          core=(_ceql("T as A ; T as B ; T as C", {"A": "chg >= 3", "B": "chg <= -3",
                                                    "C": "chg >= 3"}, 5_000), "superset")),
    Shape("agg_define", "ticks", _mr(
        "ticks", "symbol", "  AFTER MATCH SKIP TO NEXT ROW\n"
        "  PATTERN (STRT UP+ DOWN)\n"
        "  DEFINE UP AS chg > 0 AND SUM(UP.chg) <= 6, DOWN AS chg < 0"), pandas_agg_define,
          flink=("PATTERN (STRT UP+ DOWN)\n  DEFINE UP AS UP.chg > 0 AND SUM(UP.chg) <= 6, "
                 "DOWN AS DOWN.chg < 0", None)),
]}
