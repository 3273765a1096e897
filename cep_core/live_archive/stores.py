"""Archive stores: :class:`FrameArchive` (in memory), :class:`SqliteArchive` (a B-tree
indexed table) and :class:`RecentBuffer` (RBuffer, the newest events in front of a store),
all indexed on the engine's time axis and counting their accesses in :class:`AccessStats`."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import pandas as pd  # type: ignore[import-untyped, unused-ignore]

from ..runtime.time_axis import from_ns, is_timestamp, time_values

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

    def load(self, keys: Sequence[Any] | None, lo: float, hi: float,
             event_types: Sequence[str] | None = None) -> pd.DataFrame:
        """Events of ``keys`` (None: every key) with ``lo <= time < hi`` (and, when given,
        of ``event_types`` only: acquisition plans)."""
        ...


def _types_of(store: object, event_types: Sequence[str] | None) -> str | None:
    """The store's type column when ``event_types`` restricts a load (a clear error when
    the store was built without one)."""
    if event_types is None:
        return None
    column: str | None = getattr(store, "type_column", None)
    if column is None:
        raise ValueError(f"{type(store).__name__} was built without a type_column; loads "
                         "with event_types (acquisition plans) need one")
    return column




class FrameArchive:
    """An in-memory archive indexed by key (hash) and time (sorted), as the paper's archive
    store: a load costs a lookup per key and a binary search, plus the rows it returns."""

    def __init__(self, frame: pd.DataFrame, key: str, time: str,
                 type_column: str | None = None):
        self.key, self.time, self.type_column = key, time, type_column
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

    def load(self, keys: Sequence[Any] | None, lo: float, hi: float,
             event_types: Sequence[str] | None = None) -> pd.DataFrame:
        started = time.perf_counter()
        column = _types_of(self, event_types)
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
        if column is not None:
            out = out[out[column].isin(list(event_types or ()))]
        self.stats.loads += 1
        self.stats.rows_read += len(out)
        self.stats.seconds += time.perf_counter() - started
        return out


class SqliteArchive:
    """An archive in SQLite with a B-tree index on (key, time): each load is a SQL query,
    so it pays a per-query cost like the paper's relational archive (CostRDB)."""

    def __init__(self, frame: pd.DataFrame, key: str, time: str, path: str = ":memory:",
                 type_column: str | None = None):
        self.key, self.time, self.type_column = key, time, type_column
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

    def load(self, keys: Sequence[Any] | None, lo: float, hi: float,
             event_types: Sequence[str] | None = None) -> pd.DataFrame:
        started = time.perf_counter()
        column = _types_of(self, event_types)
        sql = "SELECT * FROM archive WHERE __t >= ? AND __t < ?"
        params: list[Any] = [lo, hi]
        if column is not None:
            types = list(event_types or ())
            sql += f' AND "{column}" IN ({",".join("?" * len(types)) or "NULL"})'
            params += types
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

    @property
    def type_column(self) -> str | None:
        return getattr(self.store, "type_column", None)

    def load(self, keys: Sequence[Any] | None, lo: float, hi: float,
             event_types: Sequence[str] | None = None) -> pd.DataFrame:
        if not self.covers(lo):
            return self.store.load(keys, lo, hi, event_types)
        started = time.perf_counter()
        if self._index is None:
            frame = pd.concat(self._chunks, ignore_index=True) if self._chunks else None
            if frame is None:
                return self.store.load(keys, lo, hi, event_types)
            self._index = FrameArchive(frame, self.key, self.time, self.type_column)
        out = self._index.load(keys, lo, hi, event_types)
        self.stats.buffer_loads += 1
        self.stats.buffer_rows += len(out)
        self.stats.seconds += time.perf_counter() - started
        return out
