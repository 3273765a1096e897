"""Live-archive detection: a pattern on the live stream joined with a pattern in history.

A :class:`LiveArchiveSpec` pairs a *live* query PL with an *archive* query PA (both
MATCH_RECOGNIZE, both partitioned by the join ``key`` and ordered by the same time column
first), an access range RA relative to each live match (``RA_i = [start_i - before,
start_i)``) and an optional join ``condition`` over the measures of both sides.

Semantics (what every strategy returns, exactly): for each live match *i* of PL, the
matches of PA over the events of key ``k_i`` whose time lies in ``RA_i``, numbered 1.. in
order of their first row; one joined result per (live match, archive match) pair for which
``condition`` holds. Because PA is evaluated over RA_i itself, a pattern with greedy
quantifiers, PREV or AFTER MATCH SKIP gives the same answer whatever else the archive holds.

How the archive is read is the *strategy* (seed 000):

* ``alaa`` (active): one blind load of the maximal range Rmax (every key, from the earliest
  RA start to the latest RA end); PA is detected over it and joined.
* ``llaa`` (lazy): one load per completed live match, of its own RA_i.
* ``ollaa`` (selectivity-ordered): drives from the side with the lower selectivity. Live
  side first (= LLAA) when Sel(PL) <= Sel(PA); otherwise archive side first: one load per
  key of the hull of its ranges, PA detected over it, and PL evaluated only for keys that
  have an archive match at all. Sel(PA) comes from statistics (issue 6's table) or, when
  none are given, from a sample; Sel(PL) from a sample of the live input.
* ``sllaa`` (sub-window lazy): live matches in completion order are cut into sub-windows by
  Lemma 1 (a sub-window grows while ``max end - min start <= TL``, the tolerated latency;
  optionally also capped at ``subwindow`` matches); one load per sub-window, of the union of
  its ranges (its keys, from the smallest RA start to the largest RA end).
* ``auto`` picks one of them from the statistics and TL and says why.

A strategy is a *plan*: ordered steps, each a set of :class:`Load` requests (keys, time
range and optionally event types) and the live matches each load serves. The four
strategies are one- or two-step plans; seed 003's multi-step acquisition plans (pull some
event types for the intervals still open, then the next ones) are further planners that
return the same :class:`Plan` and run through the same executor.

Archive access goes through an :class:`ArchiveStore`; :class:`FrameArchive` (an in-memory
index by key and time), :class:`SqliteArchive` (a B-tree indexed table, the paper's
relational archive) and :class:`RecentBuffer` (RBuffer: the newest events in memory, in
front of a store) count loads, rows read and buffer hits in :class:`AccessStats`.
"""

from __future__ import annotations

import dataclasses
import functools
import sqlite3
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import pandas as pd  # type: ignore[import-untyped, unused-ignore]

from ..api import CompiledQuery, compile_query
from ..compile.expressions import Scope, walk
from ..errors import QueryError
from ..language import ast
from ..language.parser import parse, parse_expression
from ..language.printer import to_sql
from ..runtime.output import Match
from ..runtime.time_axis import from_ns, is_timestamp, time_values
from ..runtime.vectorized import evaluate_condition

STRATEGIES = ("alaa", "llaa", "ollaa", "sllaa")


class StrategyError(ValueError):
    """A live-archive query or strategy setting cannot be used (message says how to fix)."""


# ----------------------------------------------------------------------------- the query


@dataclass(frozen=True)
class LiveArchiveSpec:
    """A live-archive query: live pattern, archive pattern, join key, RA and condition.

    ``before`` is a duration (``pd.Timedelta``) for datetime time columns or a number for
    numeric ones. ``id_column`` names the event id used for lineage and for results that
    must not depend on how the archive was read.
    """

    live: CompiledQuery
    archive: CompiledQuery
    key: str
    before: Any
    condition: str | None = None
    id_column: str = "event_id"
    _condition_ast: ast.Expr | None = field(default=None, repr=False, compare=False)

    @classmethod
    def of(cls, live: str | CompiledQuery, archive: str | CompiledQuery, key: str,
           before: Any, condition: str | None = None,
           id_column: str = "event_id") -> LiveArchiveSpec:
        live_q = live if isinstance(live, CompiledQuery) else compile_query(live)
        archive_q = archive if isinstance(archive, CompiledQuery) else compile_query(archive)
        for side, q in (("live", live_q), ("archive", archive_q)):
            if key.lower() not in (c.lower() for c in q.partition_by):
                raise StrategyError(f"the {side} query must PARTITION BY the join key {key!r} "
                                    f"(it partitions by {q.partition_by or 'nothing'})")
            if not q.order_by:
                raise StrategyError(f"the {side} query needs ORDER BY <time column>")
        if live_q.order_by[0][0].lower() != archive_q.order_by[0][0].lower():
            raise StrategyError("live and archive queries must ORDER BY the same time column "
                                f"first ({live_q.order_by[0][0]} vs {archive_q.order_by[0][0]})")
        if isinstance(before, int | float) and before < 0 or (
                isinstance(before, pd.Timedelta) and before < pd.Timedelta(0)):
            raise StrategyError(f"the access range 'before' must not be negative: {before}")
        shared = {m.lower() for m in live_q.measure_names} & {
            m.lower() for m in archive_q.measure_names}
        if shared:
            raise StrategyError(f"live and archive measures share names {sorted(shared)}; "
                                "rename one side (the joined result holds both)")
        cond = None
        if condition:
            cond = parse_expression(condition)
            known = {m.lower() for m in (*live_q.measure_names, *archive_q.measure_names)}
            for node in walk(cond):
                if isinstance(node, ast.Column) and (node.var is not None
                                                     or node.name.lower() not in known):
                    raise StrategyError(f"join condition {condition!r}: {node.name!r} is not "
                                        f"a measure of either side ({', '.join(sorted(known))})")
        return cls(live_q, archive_q, key, before, condition, id_column, cond)

    @property
    def time(self) -> str:
        return self.live.order_by[0][0]


# ----------------------------------------------------------------------------- statistics


@dataclass(frozen=True)
class Selectivity:
    """Matches per input event of a pattern, and where the figure came from."""

    value: float
    source: str  # 'statistics' or 'sample of N rows'


@dataclass(frozen=True)
class StrategySettings:
    """What ``auto`` and the planners may use: tolerated latency TL (same unit as the time
    column; None: no sub-windows), a cap on live matches per sub-window, the archive
    selectivity from the statistics table (None: estimate from a sample), and the sample
    size for selectivity estimates."""

    tolerated_latency: Any = None
    subwindow: int | None = None
    archive_selectivity: float | None = None
    sample_rows: int = 5000


# ----------------------------------------------------------------------------- archive stores


@dataclass
class AccessStats:
    """Archive access counters (added up over a run)."""

    loads: int = 0
    rows_read: int = 0
    buffer_loads: int = 0
    buffer_rows: int = 0
    seconds: float = 0.0

    def add(self, other: AccessStats) -> None:
        self.loads += other.loads
        self.rows_read += other.rows_read
        self.buffer_loads += other.buffer_loads
        self.buffer_rows += other.buffer_rows
        self.seconds += other.seconds


class ArchiveStore(Protocol):
    stats: AccessStats

    def load(self, keys: Sequence[Any] | None, lo: float, hi: float) -> pd.DataFrame:
        """Events of ``keys`` (None: every key) with ``lo <= time < hi``."""
        ...


def duration_value(before: Any, series_is_datetime: bool) -> Any:
    """A duration in the time column's unit: int nanoseconds for datetimes (exact, no
    float rounding at range boundaries), the number itself otherwise."""
    if isinstance(before, pd.Timedelta) or hasattr(before, "total_seconds"):
        if not series_is_datetime:
            raise StrategyError("'before' is a duration but the time column is numeric")
        return int(pd.Timedelta(before).value)
    if series_is_datetime:
        raise StrategyError(f"'before' must be a duration (pd.Timedelta) for a datetime time "
                            f"column, got {before!r}")
    return before


class FrameArchive:
    """An in-memory archive indexed by key (hash) and time (sorted), as the paper's archive
    store: a load costs a lookup per key and a binary search, plus the rows it returns."""

    def __init__(self, frame: pd.DataFrame, key: str, time: str):
        self.key, self.time = key, time
        self.stats = AccessStats()
        frame = frame.sort_values([key, time], kind="stable").reset_index(drop=True)
        self.frame = frame
        self._t = time_values(frame[time])
        keys = frame[key].to_numpy()
        self._spans: dict[Any, tuple[int, int]] = {}
        if len(frame):
            cuts = np.flatnonzero(keys[1:] != keys[:-1]) + 1
            starts = np.concatenate([[0], cuts])
            ends = np.concatenate([cuts, [len(frame)]])
            for s, e in zip(starts.tolist(), ends.tolist(), strict=True):
                self._spans[keys[s]] = (s, e)
        order = np.argsort(self._t, kind="stable")
        self._by_time, self._sorted_t = order, self._t[order]

    def load(self, keys: Sequence[Any] | None, lo: float, hi: float) -> pd.DataFrame:
        started = time.perf_counter()
        if keys is None:
            a, b = np.searchsorted(self._sorted_t, [lo, hi], side="left")
            idx = np.sort(self._by_time[a:b])
        else:
            parts = []
            for k in dict.fromkeys(keys):  # a key named twice is read once
                span = self._spans.get(k)
                if span is None:
                    continue
                s, e = span
                a, b = np.searchsorted(self._t[s:e], [lo, hi], side="left")
                parts.append(np.arange(s + a, s + b))
            idx = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
        out = self.frame.iloc[idx]
        self.stats.loads += 1
        self.stats.rows_read += len(out)
        self.stats.seconds += time.perf_counter() - started
        return out


class SqliteArchive:
    """An archive in SQLite with a B-tree index on (key, time): each load is a SQL query,
    so it pays a per-query cost like the paper's relational archive (CostRDB)."""

    def __init__(self, frame: pd.DataFrame, key: str, time: str, path: str = ":memory:"):
        self.key, self.time = key, time
        self.stats = AccessStats()
        self._datetime = is_timestamp(frame[time].dtype)
        self._columns = list(frame.columns)
        self._dtypes = frame.dtypes
        self.db = sqlite3.connect(path)
        stored = frame.copy()
        stored["__t"] = time_values(frame[time])
        stored = stored.drop(columns=[time])
        stored.to_sql("archive", self.db, index=False)
        self.db.execute(f'CREATE INDEX archive_key_time ON archive("{key}", __t)')
        self.db.execute("CREATE INDEX archive_time ON archive(__t)")

    def load(self, keys: Sequence[Any] | None, lo: float, hi: float) -> pd.DataFrame:
        started = time.perf_counter()
        sql = "SELECT * FROM archive WHERE __t >= ? AND __t < ?"
        params: list[Any] = [lo, hi]
        if keys is not None:
            keys = list(keys)
            sql += f' AND "{self.key}" IN ({",".join("?" * len(keys))})'
            params += [k.item() if hasattr(k, "item") else k for k in keys]
        out = pd.read_sql_query(sql, self.db, params=params)
        if self._datetime:  # back in the caller's dtype and zone
            out[self.time] = from_ns(out["__t"], self._dtypes[self.time], out.index)
        else:
            out[self.time] = out["__t"]
        out = out.drop(columns=["__t"])[self._columns]
        if len(out) == 0:  # SQLite gives an empty result object columns: keep the dtypes
            out = out.astype(self._dtypes.to_dict())
        self.stats.loads += 1
        self.stats.rows_read += len(out)
        self.stats.seconds += time.perf_counter() - started
        return out


class RecentBuffer:
    """RBuffer: the newest ``capacity`` events in memory, in front of an archive store.

    Events are appended in arrival order. A load whose range starts after ``covered_from``
    (the latest event time among everything *not* in the buffer: events older than the
    buffer's start or evicted from it) is complete in the buffer and never touches the
    store; any other load goes to the store. Late events are safe: an event that arrived
    before the buffer's first event counts in ``covered_from`` whatever its time.

    The default ``covered_from = -inf`` says the buffer has seen every event the store
    holds (it was fed from the first one). In front of a store that already holds history,
    pass the latest event time in the store as ``covered_from``.
    """

    def __init__(self, store: ArchiveStore, key: str, time: str, capacity: int,
                 covered_from: float = float("-inf")):
        if capacity < 0:
            raise ValueError(f"RBuffer capacity must be >= 0, got {capacity}")
        self.store, self.key, self.time, self.capacity = store, key, time, capacity
        self.covered_from = covered_from
        self.stats = store.stats
        self._chunks: list[pd.DataFrame] = []
        self._rows = 0
        self._index: FrameArchive | None = None

    def append(self, events: pd.DataFrame) -> None:
        """Add newly archived events (in arrival order), evicting the oldest over capacity."""
        if len(events) == 0:
            return
        self._chunks.append(events)
        self._rows += len(events)
        self._index = None
        while self._rows > self.capacity and self._chunks:
            over = self._rows - self.capacity
            first = self._chunks[0]
            evicted, kept = first.iloc[:over], first.iloc[over:]
            if len(evicted):
                self.covered_from = max(self.covered_from,
                                        time_values(evicted[self.time]).max().item())
            self._rows -= len(evicted)
            if len(kept):
                self._chunks[0] = kept
            else:
                self._chunks.pop(0)

    @property
    def rows(self) -> int:
        return self._rows

    def covers(self, lo: float) -> bool:
        return lo > self.covered_from

    def load(self, keys: Sequence[Any] | None, lo: float, hi: float) -> pd.DataFrame:
        if not self.covers(lo):
            return self.store.load(keys, lo, hi)
        started = time.perf_counter()
        if self._index is None:
            frame = pd.concat(self._chunks, ignore_index=True) if self._chunks else None
            if frame is None:
                return self.store.load(keys, lo, hi)
            self._index = FrameArchive(frame, self.key, self.time)
        out = self._index.load(keys, lo, hi)
        self.stats.buffer_loads += 1
        self.stats.buffer_rows += len(out)
        self.stats.seconds += time.perf_counter() - started
        return out


# ----------------------------------------------------------------------------- live matches


@dataclass(frozen=True)
class LiveInstance:
    """A completed live match: its key, first/last time, RA and lineage."""

    key: Any
    start: float
    end: float
    lo: float  # RA_i = [lo, hi)
    hi: float
    match: Match | None = None  # None: planning only (no join results needed)
    ids: tuple[Any, ...] = ()


def live_instances(spec: LiveArchiveSpec, live: pd.DataFrame,
                   keys: Iterable[Any] | None = None) -> list[LiveInstance]:
    """Live matches of ``live`` (restricted to ``keys`` when given), in completion order
    (end time, then start time)."""
    if keys is not None:
        live = live[live[spec.key].isin(list(keys))].reset_index(drop=True)
    if len(live) == 0:
        return []
    return instances_of(spec, spec.live.find_matches(live), live)


def instances_of(spec: LiveArchiveSpec, matches: Iterable[Match], frame: pd.DataFrame,
                 positions: Callable[[Sequence[int]], Sequence[int]] | None = None,
                 ) -> list[LiveInstance]:
    """Live instances of live-pattern ``matches`` whose rows are in ``frame``, in
    completion order. ``positions`` maps a match's rows to positions in ``frame`` (the
    default: they are positions, as ``find_matches`` gives them)."""
    t = time_values(frame[spec.time])
    before = duration_value(spec.before, is_timestamp(frame[spec.time].dtype))
    ids = frame[spec.id_column].tolist()
    key_at = _key_position(spec.live, spec.key)
    out = []
    for m in matches:
        if not m.rows:
            continue
        at = list(m.rows if positions is None else positions(m.rows))
        times = t[at]
        start, end = times.min().item(), times.max().item()
        out.append(LiveInstance(m.partition[key_at], start, end, start - before, start, m,
                                tuple(ids[r] for r in at)))
    out.sort(key=lambda i: (i.end, i.start))
    return out


def _key_position(q: CompiledQuery, key: str) -> int:
    return [c.lower() for c in q.partition_by].index(key.lower())


# ----------------------------------------------------------------------------- plans


@dataclass(frozen=True)
class Load:
    """One archive request: ``keys`` (None: all) in ``[lo, hi)``, for live matches
    ``serves`` (indices into the live-instance list); ``event_types`` is for acquisition
    plans that pull only some types (None: all)."""

    keys: tuple[Any, ...] | None
    lo: float
    hi: float
    serves: tuple[int, ...]
    event_types: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Plan:
    """How the archive side is acquired: ordered steps of loads. ``drive`` is 'live' (live
    matches first, then their ranges) or 'archive' (OLLAA from the archive side: PA over
    each load first, PL only for keys with an archive match)."""

    strategy: str
    reason: str
    steps: tuple[tuple[Load, ...], ...]
    drive: str = "live"

    @property
    def loads(self) -> list[Load]:
        return [load for step in self.steps for load in step]


def plan_llaa(instances: Sequence[LiveInstance]) -> tuple[Load, ...]:
    return tuple(Load((i.key,), i.lo, i.hi, (n,)) for n, i in enumerate(instances))


def plan_alaa(instances: Sequence[LiveInstance]) -> tuple[Load, ...]:
    if not instances:
        return ()
    return (Load(None, min(i.lo for i in instances), max(i.hi for i in instances),
                 tuple(range(len(instances)))),)


def plan_by_key(instances: Sequence[LiveInstance]) -> tuple[Load, ...]:
    """One load per key: the hull of that key's ranges (OLLAA's archive-side plan)."""
    groups: dict[Any, list[int]] = {}
    for n, i in enumerate(instances):
        groups.setdefault(i.key, []).append(n)
    return tuple(Load((k,), min(instances[n].lo for n in ns), max(instances[n].hi for n in ns),
                      tuple(ns)) for k, ns in groups.items())


def subwindows(instances: Sequence[LiveInstance], tolerated_latency: float | None,
               max_size: int | None = None) -> list[list[int]]:
    """Lemma 1: consecutive live matches (completion order) share a sub-window while
    ``max end - min start <= TL`` (and, if given, while it holds at most ``max_size``)."""
    groups: list[list[int]] = []
    current: list[int] = []
    lo = hi = 0.0
    for n, i in enumerate(instances):
        if current:
            fits = tolerated_latency is None or max(hi, i.end) - min(lo, i.start) <= (
                tolerated_latency)
            if fits and (max_size is None or len(current) < max_size):
                current.append(n)
                lo, hi = min(lo, i.start), max(hi, i.end)
                continue
            groups.append(current)
        current, lo, hi = [n], i.start, i.end
    if current:
        groups.append(current)
    return groups


def plan_sllaa(instances: Sequence[LiveInstance], tolerated_latency: float | None,
               max_size: int | None = None) -> tuple[Load, ...]:
    loads = []
    for group in subwindows(instances, tolerated_latency, max_size):
        keys = tuple(dict.fromkeys(instances[n].key for n in group))
        loads.append(Load(keys, min(instances[n].lo for n in group),
                          max(instances[n].hi for n in group), tuple(group)))
    return tuple(loads)


def sample_selectivity(query: CompiledQuery, frame: pd.DataFrame, key: str,
                       rows: int) -> Selectivity:
    """Matches per row of ``query`` on a sample of whole keys (about ``rows`` rows)."""
    if len(frame) == 0:
        return Selectivity(0.0, "sample of 0 rows")
    if len(frame) > rows:
        keys = frame[key].drop_duplicates()
        share = rows / len(frame)
        chosen = keys.sample(frac=min(1.0, share), random_state=0) if len(keys) > 1 else keys
        frame = frame[frame[key].isin(chosen)]
    n = sum(1 for m in query.find_matches(frame) if m.rows)
    return Selectivity(n / max(len(frame), 1), f"sample of {len(frame)} rows")


def choose(settings: StrategySettings, live: Selectivity | None,
           archive: Selectivity | None, archive_first_exact: bool) -> tuple[str, str]:
    """``auto``: the strategy and why.

    With a tolerated latency TL (or a sub-window size), SLLAA: one load per sub-window
    instead of one per live match. Otherwise OLLAA from the archive side when the archive
    pattern is markedly (2x) more selective than the live one and pruning keys by it is
    exact, else LLAA. ALAA is never chosen: its blind load of Rmax reads every key's
    history, which the lazy strategies never need.
    """
    if settings.tolerated_latency is not None or settings.subwindow is not None:
        return "sllaa", (f"tolerated latency TL={settings.tolerated_latency}, sub-window "
                         f"{settings.subwindow}: one load per sub-window")
    drive, why = ollaa_drive(live, archive, archive_first_exact, margin=2.0)
    return ("ollaa" if drive == "archive" else "llaa"), why


def ollaa_drive(live: Selectivity | None, archive: Selectivity | None,
                archive_first_exact: bool, margin: float = 1.0) -> tuple[str, str]:
    """OLLAA's choice of driving side ('live' or 'archive') and why."""
    if live is None or archive is None:
        return "live", "no selectivity figures: live side drives"
    figures = (f"archive selectivity {archive.value:.3g} ({archive.source}), live "
               f"{live.value:.3g} ({live.source})")
    if not archive_first_exact:
        return "live", f"{figures}; the archive pattern cannot prune keys exactly: live drives"
    if archive.value * margin < live.value:
        return "archive", f"{figures}: archive side drives"
    return "live", f"{figures}: live side drives"


def _unknown(strategy: str) -> StrategyError:
    return StrategyError(f"unknown live-archive strategy {strategy!r}; "
                         f"use one of {', '.join((*STRATEGIES, 'auto'))}")


def resolve(spec: LiveArchiveSpec, strategy: str, settings: StrategySettings,
            live: Callable[[], Selectivity], archive: Callable[[], Selectivity]
            ) -> tuple[str, str, str]:
    """``(strategy, drive, reason)`` for a requested strategy. ``auto`` and OLLAA weigh the
    selectivities: the archive side's from ``settings.archive_selectivity`` (statistics)
    or else ``archive()`` (a sample), the live side's from ``live()``; the callables run
    only when a figure is needed."""
    if strategy not in (*STRATEGIES, "auto"):
        raise _unknown(strategy)
    if strategy not in ("auto", "ollaa"):
        return strategy, "live", ""
    sel_l = live()
    sel_a = (Selectivity(settings.archive_selectivity, "statistics")
             if settings.archive_selectivity is not None else archive())
    exact = archive_first_exact(spec)
    if strategy == "auto":
        chosen, reason = choose(settings, sel_l, sel_a, exact)
        return chosen, ("archive" if chosen == "ollaa" else "live"), reason
    drive, reason = ollaa_drive(sel_l, sel_a, exact)
    return "ollaa", drive, reason


def archive_first_exact(spec: LiveArchiveSpec) -> bool:
    """Archive-side-first prunes keys without an archive match over the hull of their
    ranges; sound when a match inside a sub-range is also a match over the hull: no
    anchors, no negation, no PREV/NEXT (which could read rows outside a match), no
    consumption mode or relaxed selection."""
    m = spec.archive.match
    if (m.consumption is not None or m.selection != "STRICT"
            or _has(m.pattern, (ast.Anchor, ast.Negation))):
        return False
    exprs = [d.condition for d in m.defines]
    return not any(isinstance(n, ast.Call) and n.name in ("PREV", "NEXT")
                   for e in exprs for n in walk(e))


def _has(p: ast.Pattern, kinds: tuple[type, ...]) -> bool:
    if isinstance(p, kinds):
        return True
    for attr in ("items", "body"):
        child = getattr(p, attr, None)
        if isinstance(child, tuple) and any(_has(c, kinds) for c in child):
            return True
        if isinstance(child, ast.Pattern) and _has(child, kinds):
            return True
    return False


# ----------------------------------------------------------------------------- execution


@dataclass(frozen=True)
class Joined:
    """One result: a live match and one archive match in its RA."""

    live: LiveInstance
    number: int  # the archive match's number within RA_i (1-based, by first row)
    archive_ids: tuple[Any, ...]
    archive_start: float | None
    archive_end: float | None
    measures: dict[str, Any]


@dataclass
class Result:
    plan: Plan
    joined: list[Joined]
    live_count: int
    stats: AccessStats
    seconds: dict[str, float]

    def keys(self) -> list[tuple[tuple[Any, ...], tuple[Any, ...]]]:
        """(live ids, archive ids) of every result, sorted: what must not depend on the
        strategy."""
        return sorted((j.live.ids, j.archive_ids) for j in self.joined)


def detect_in_ranges(spec: LiveArchiveSpec, instances: Sequence[LiveInstance],
                     serves: Sequence[int], rows: pd.DataFrame) -> list[Joined]:
    """Archive matches of PA within each served instance's RA, cut out of ``rows`` (which
    hold at least every event of the instance's key in its RA). One engine call for all
    ranges: each range's rows are copied under an owner column unique to its live match,
    and PA runs partitioned by that column first (the key column keeps its values, so
    DEFINE and MEASURES that read it see the real key)."""
    if len(rows) == 0 or not serves:
        return []
    t = time_values(rows[spec.time])
    key_values = rows[spec.key].to_numpy()
    order = np.argsort(t, kind="stable")
    by_key: dict[Any, np.ndarray] = {}
    for k in pd.unique(key_values):
        by_key[k] = order[key_values[order] == k]
    parts, owners = [], []
    for n in serves:
        inst = instances[n]
        idx = by_key.get(inst.key)
        if idx is None:
            continue
        ts = t[idx]
        a, b = np.searchsorted(ts, [inst.lo, inst.hi], side="left")
        if b > a:
            parts.append(idx[a:b])
            owners.append(np.full(b - a, n))
    if not parts:
        return []
    take = np.concatenate(parts)
    expanded = rows.iloc[take].reset_index(drop=True)
    expanded[_OWNER] = np.concatenate(owners)
    return _joined(spec, instances, expanded, 0)


_OWNER = "__live_archive_owner"


@functools.lru_cache(maxsize=128)
def _owned(text: str) -> CompiledQuery:
    """The archive query ``text`` partitioned first by the owner column."""
    tree = parse(text)
    match = dataclasses.replace(tree.match, partition_by=(
        ast.Column(_OWNER), *tree.match.partition_by))
    return compile_query(to_sql(dataclasses.replace(tree, match=match)))


def _joined(spec: LiveArchiveSpec, instances: Sequence[LiveInstance], expanded: pd.DataFrame,
            owner_at: int) -> list[Joined]:
    ids = expanded[spec.id_column].tolist()
    t = time_values(expanded[spec.time])
    out: list[Joined] = []
    number: dict[int, int] = {}
    for m in _owned(spec.archive.text).find_matches(expanded):
        if not m.rows:
            # An empty match (PATTERN (A*) over rows without an A) joins nothing: it has no
            # first row to number it by, and ALAA's join and OLLAA's key pruning skip it.
            continue
        n = int(m.partition[owner_at])
        inst = instances[n]
        number[n] = number.get(n, 0) + 1
        times = t[list(m.rows)] if m.rows else None
        out.append(Joined(
            inst, number[n], tuple(ids[r] for r in m.rows),
            None if times is None else times.min().item(),
            None if times is None else times.max().item(),
            {**_live_measures(inst), **m.measures}))
    return _filter(spec, out)


def _live_measures(inst: LiveInstance) -> dict[str, Any]:
    return {} if inst.match is None else inst.match.measures


def _filter(spec: LiveArchiveSpec, joined: list[Joined]) -> list[Joined]:
    if spec._condition_ast is None or not joined:
        return joined
    names = [*spec.live.measure_names, *spec.archive.measure_names]
    frame = pd.DataFrame([{n: j.measures.get(n) for n in names} for j in joined], columns=names)
    scope = Scope(names, {"_": frozenset([0])}, "DEFINE", None)
    try:
        keep = evaluate_condition(spec._condition_ast, frame, scope)
    except QueryError as err:
        raise err.with_query(spec.condition or "") from None
    return [j for j, k in zip(joined, keep.tolist(), strict=True) if k]


def make_plan(spec: LiveArchiveSpec, strategy: str, instances: Sequence[LiveInstance],
              settings: StrategySettings, reason: str = "", drive: str = "live") -> Plan:
    """The loads of ``strategy`` for live matches ``instances``. OLLAA driven from the
    archive side loads the hull of each key's ranges once (PA over it first)."""
    tl = settings.tolerated_latency
    if strategy == "alaa":
        return Plan("alaa", reason or "active: one blind load of Rmax", (plan_alaa(instances),))
    if strategy == "llaa":
        return Plan("llaa", reason or "lazy: one load per live match", (plan_llaa(instances),))
    if strategy == "sllaa":
        if tl is None and settings.subwindow is None:
            raise StrategyError("sllaa needs a tolerated latency TL (tolerated_latency) or "
                                "a sub-window size (subwindow)")
        tl_value = None if tl is None else duration_value(tl, isinstance(tl, pd.Timedelta))
        return Plan("sllaa", reason or f"sub-windows by Lemma 1, TL={tl}, "
                    f"max size {settings.subwindow}",
                    (plan_sllaa(instances, tl_value, settings.subwindow),))
    if strategy == "ollaa":
        if drive == "archive":
            return Plan("ollaa", reason, (plan_by_key(instances),), drive="archive")
        return Plan("ollaa", reason or "live side drives", (plan_llaa(instances),))
    raise _unknown(strategy)


def detect(spec: LiveArchiveSpec, live: pd.DataFrame, archive: ArchiveStore,
           strategy: str = "auto", settings: StrategySettings | None = None,
           keep: Callable[[LiveInstance], bool] | None = None) -> Result:
    """Run a live-archive query: live matches over ``live``, archive matches from
    ``archive``, joined. ``keep`` filters the live matches that are joined (e.g. only
    those with a new event). Every strategy returns the same results."""
    settings = settings or StrategySettings()
    seconds: dict[str, float] = {}
    clock = time.perf_counter()
    stats_before = AccessStats()
    stats_before.add(archive.stats)

    def sample_archive() -> Selectivity:
        """No statistics: sample the archive over the ranges of a few live keys."""
        keys = pd.Series(live[spec.key].unique())
        keys = keys.sample(n=min(len(keys), 50), random_state=0).tolist()
        hull = _hull(spec, live[live[spec.key].isin(keys)])
        sample = archive.load(keys, *hull) if hull else live.iloc[:0]
        return sample_selectivity(spec.archive, sample, spec.key, settings.sample_rows)

    strategy, drive, reason = resolve(
        spec, strategy, settings,
        lambda: sample_selectivity(spec.live, live, spec.key, settings.sample_rows),
        sample_archive)
    if drive == "archive":
        joined, instances, plan = _archive_first(spec, live, archive, reason, keep)
    else:
        instances = live_instances(spec, live)
        if keep is not None:
            instances = [i for i in instances if keep(i)]
        seconds["live"] = time.perf_counter() - clock
        plan = make_plan(spec, strategy, instances, settings, reason)
        joined = execute(spec, plan, instances, archive)
    seconds["total"] = time.perf_counter() - clock
    used = AccessStats(archive.stats.loads - stats_before.loads,
                       archive.stats.rows_read - stats_before.rows_read,
                       archive.stats.buffer_loads - stats_before.buffer_loads,
                       archive.stats.buffer_rows - stats_before.buffer_rows,
                       archive.stats.seconds - stats_before.seconds)
    return Result(plan, joined, len(instances), used, seconds)


def _hull(spec: LiveArchiveSpec, live: pd.DataFrame) -> tuple[float, float] | None:
    if len(live) == 0:
        return None
    t = time_values(live[spec.time])
    before = duration_value(spec.before, is_timestamp(live[spec.time].dtype))
    return t.min().item() - before, t.max().item()


def execute(spec: LiveArchiveSpec, plan: Plan, instances: Sequence[LiveInstance],
            archive: ArchiveStore) -> list[Joined]:
    """Run a live-side-first plan: each load once, PA over the RA of each match it serves.

    The result does not depend on the plan as long as each served match's key and RA are
    inside its load (which every planner here guarantees)."""
    out: list[Joined] = []
    for step in plan.steps:
        for load in step:
            if not load.serves:
                continue
            rows = archive.load(load.keys, load.lo, load.hi)
            if plan.strategy == "alaa" and range_local(spec.archive):
                out.extend(join_active(spec, instances, load.serves, rows))
            else:
                out.extend(detect_in_ranges(spec, instances, load.serves, rows))
    return out


def join_active(spec: LiveArchiveSpec, instances: Sequence[LiveInstance],
                serves: Sequence[int], rows: pd.DataFrame) -> list[Joined]:
    """ALAA's join: PA over all of ``rows`` (blind), then each archive match joins the
    served live matches of its key whose RA contains it. Exact for range-local patterns
    (:func:`range_local`), where the matches inside a range are the range's matches."""
    if len(rows) == 0:
        return []
    rows = rows.reset_index(drop=True)
    t = time_values(rows[spec.time])
    ids = rows[spec.id_column].tolist()
    by_key: dict[Any, list[int]] = {}
    for n in serves:
        by_key.setdefault(instances[n].key, []).append(n)
    key_at = _key_position(spec.archive, spec.key)
    number: dict[int, int] = {}
    out: list[Joined] = []
    for m in spec.archive.find_matches(rows):
        if not m.rows:
            continue
        times = t[list(m.rows)]
        start, end = times.min().item(), times.max().item()
        for n in by_key.get(m.partition[key_at], ()):
            inst = instances[n]
            if inst.lo <= start and end < inst.hi:
                number[n] = number.get(n, 0) + 1
                out.append(Joined(inst, number[n], tuple(ids[r] for r in m.rows), start, end,
                                  {**_live_measures(inst), **m.measures}))
    return _filter(spec, out)


def range_local(q: CompiledQuery) -> bool:
    """True when the matches of ``q`` inside any time range of a partition are exactly its
    matches over the whole partition that lie in the range: a fixed sequence of single
    variables, no navigation to other rows (PREV/NEXT), no MATCH_NUMBER, no consumption
    or relaxed selection, and AFTER MATCH SKIP TO NEXT ROW or a first variable that no
    later variable's row can satisfy (so matches never overlap and skipping loses none)."""
    m = q.match
    if m.consumption is not None or m.selection != "STRICT" or m.emit_timeouts:
        return False
    items = m.pattern.items if isinstance(m.pattern, ast.Concat) else (m.pattern,)
    if not all(isinstance(v, ast.Var) for v in items):
        return False
    exprs = [d.condition for d in m.defines] + [me.expr for me in m.measures]
    if any(isinstance(n, ast.Call) and n.name in ("PREV", "NEXT", "MATCH_NUMBER")
           for e in exprs for n in walk(e)):
        return False
    if m.skip.kind == "TO NEXT ROW":
        return True
    names = [v.name for v in items if isinstance(v, ast.Var)]
    tests = {d.var: _equalities(d.condition) for d in m.defines}
    first = tests.get(names[0], {})
    return all(
        any(col in tests.get(other, {}) and tests[other][col] != value
            for col, value in first.items())
        for other in names[1:])


def _equalities(expr: ast.Expr) -> dict[str, Any]:
    """``column = literal`` conjuncts of a DEFINE condition."""
    out: dict[str, Any] = {}
    parts = [expr]
    while parts:
        e = parts.pop()
        if isinstance(e, ast.Binary) and e.op == "AND":
            parts += [e.left, e.right]
        elif isinstance(e, ast.Binary) and e.op == "=":
            for col, lit in ((e.left, e.right), (e.right, e.left)):
                if isinstance(col, ast.Column) and isinstance(lit, ast.Literal):
                    out[col.name.lower()] = lit.value
    return out


def _archive_first(spec: LiveArchiveSpec, live: pd.DataFrame, archive: ArchiveStore,
                   reason: str, keep: Callable[[LiveInstance], bool] | None
                   ) -> tuple[list[Joined], list[LiveInstance], Plan]:
    """OLLAA from the archive side: per key, load the hull of every range its live events
    could ask for, detect PA there; run PL only for keys with an archive match, then cut
    each live match's RA out of the rows already loaded (no second load)."""
    t = time_values(live[spec.time])
    before = duration_value(spec.before, is_timestamp(live[spec.time].dtype))
    frame = pd.DataFrame({"k": live[spec.key].to_numpy(), "t": t})
    hulls = frame.groupby("k", sort=False)["t"].agg(["min", "max"])
    loads = [Load((k,), lo - before, hi, ()) for k, lo, hi in zip(
        hulls.index.tolist(), hulls["min"].tolist(), hulls["max"].tolist(), strict=True)]
    by_key: dict[Any, pd.DataFrame] = {}
    candidates = []
    for load in loads:
        assert load.keys is not None
        rows = archive.load(load.keys, load.lo, load.hi)
        if len(rows) and any(m.rows for m in spec.archive.find_matches(rows)):
            candidates.append(load.keys[0])
            by_key[load.keys[0]] = rows
    instances = live_instances(spec, live, candidates)
    if keep is not None:
        instances = [i for i in instances if keep(i)]
    out: list[Joined] = []
    served: dict[Any, list[int]] = {}
    for n, inst in enumerate(instances):
        served.setdefault(inst.key, []).append(n)
    for k, ns in served.items():
        out.extend(detect_in_ranges(spec, instances, ns, by_key[k]))
    return out, instances, Plan("ollaa", reason, (tuple(loads),), drive="archive")


__all__ = [
    "STRATEGIES", "AccessStats", "ArchiveStore", "FrameArchive", "Joined", "LiveArchiveSpec",
    "LiveInstance", "Load", "Plan", "RecentBuffer", "Result", "Selectivity", "SqliteArchive",
    "StrategyError", "StrategySettings", "archive_first_exact", "choose", "detect",
    "detect_in_ranges", "execute", "join_active", "live_instances", "make_plan",
    "ollaa_drive", "plan_alaa", "plan_by_key", "plan_llaa", "plan_sllaa", "range_local",
    "resolve", "subwindows", "time_values",
]
