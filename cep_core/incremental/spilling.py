"""Bounded partial-match store: spill cold partition keys to local disk (TPM / STPM).

The unit of spilling is one partition key's state -- its buffered rows, their "settled"
marks and its :class:`~cep_core.partial_matches.PartitionState` -- the entity (TID) of seed
000. :class:`SpillManager` keeps at most ``capacity`` keys in memory between feeds (during a
feed, every key the batch touches is in memory as well). When there are more, it writes the
lowest-priority keys to a segment file, at least ``spill_batch`` (ΔR) of them at a time:

* ``"tpm"`` (temporal): oldest first, in the order the keys entered memory (created, or
  read back after a miss); updates do not move a key -- the paper's creation-ordered buffer.
* ``"stpm"`` (spatio-temporal): lowest ``W = e.t + Δt_i · p(E_{i+1} | E_i)`` first, where
  ``e.t`` is the time of the key's last row, ``i`` how far its open partial match got (see
  :class:`Progress`), and ``Δt_i``, ``p_i`` come from :class:`TransitionStats`. A heap with
  lazy deletion: every update pushes a new record, stale records are dropped when popped.

A batch row for a key on disk is a *miss*: the key is read back before matching. A key in
memory is a *hit*, a key never seen is *new*; so ``hits + misses + new_keys`` is the number
of (feed, distinct key) pairs. Spilling never changes the output: a key's state is written
and read back unchanged, and a key is always in memory when its rows are matched.

Records go to a record store: :class:`DiskRecords` (default) or :class:`HandedRecords`
(kept by the caller -- the Spark job's Delta table). A record is one pickle per key:
``(rows, settled, state, open_since)`` with ``rows`` the key's buffered rows (``(names,
arrays)``, see :func:`_columns`), ``settled`` their marks (a bool array), ``state`` the
PartitionState fields and ``open_since`` the start time of its open partial match. On
disk: one directory per matcher (a fresh ``lakecep-spill-*`` directory, inside
``spill_dir`` if given, else in the system temporary directory); each spill appends one
segment file ``seg-<n>.bin``; an in-memory index maps each spilled key to (segment,
offset, length); a segment is deleted once all its keys have been read back, and the
directory on :meth:`SpillManager.close` (or when the manager is garbage-collected). The
files are private scratch space: they are pickles, read only by the process that wrote
them.

>>> TransitionStats.from_dict({"max_gap": [0, 5, 2], "probability": [0, 0.5, 1]}).weight(1)
2.5
"""

from __future__ import annotations

import heapq
import itertools
import pickle
import shutil
import tempfile
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd  # type: ignore[import-untyped, unused-ignore]

from ..api import CompiledQuery, compile_query
from ..compile.patterns import pattern_variables
from ..compile.values import to_python
from ..runtime.time_axis import order_numbers, time_numbers
from .store import PartialMatchStore, PartitionState

POLICIES = ("tpm", "stpm")
Key = tuple[Any, ...]


# ---------------------------------------------------------------------- statistics
@dataclass
class TransitionStats:
    """Per state ``i`` (how many variables of the chain an open partial match has
    matched, see :class:`Progress`): ``max_gap[i]`` = Δt_i, the largest observed time
    between entering state ``i`` and entering ``i + 1``, in the units of the first ORDER
    BY column (nanoseconds for timestamps); ``probability[i]`` = p(E_{i+1} | E_i), the
    share of partial matches that entered state ``i`` and went on to ``i + 1``. State 0 is
    "no open partial match" (the estimator gives it 0, 0). States beyond the lists weigh 0.
    """

    max_gap: list[float] = field(default_factory=list)
    probability: list[float] = field(default_factory=list)

    def __post_init__(self) -> None:
        if len(self.max_gap) != len(self.probability):
            raise ValueError("TransitionStats: max_gap and probability need the same length")
        if any(not 0.0 <= p <= 1.0 for p in self.probability):
            raise ValueError("TransitionStats: probabilities must lie in [0, 1]")
        if any(g < 0 for g in self.max_gap):
            raise ValueError("TransitionStats: gaps must not be negative")

    def weight(self, state: int) -> float:
        """Δt_i · p_i (0 for states without statistics)."""
        if 0 <= state < len(self.max_gap):
            return float(self.max_gap[state]) * float(self.probability[state])
        return 0.0

    def to_dict(self) -> dict[str, list[float]]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Sequence[float]]) -> TransitionStats:
        return cls([float(g) for g in data["max_gap"]],
                   [float(p) for p in data["probability"]])


def chain(compiled: CompiledQuery) -> list[int]:
    """The variables whose progress defines the state of a partial match, as indices into
    ``compiled.variables``: for a concatenation of single variables ``(A B C D)`` exactly
    those; for any other pattern (the generic fallback) the non-negated variables in order of
    first appearance, e.g. ``A B+ C`` -> A, B, C."""
    names = pattern_variables(compiled.match.pattern, negated=False)
    index = {name: i for i, name in enumerate(compiled.variables)}
    return [index[n] for n in names]


class Progress:
    """How far the open partial match of a partition got (its state ``i``), from the rows
    of the open attempt and the row-local part of each variable's DEFINE condition (a
    variable without one accepts every row).

    With the default contiguity (STRICT) the state is the length of the longest prefix of
    :func:`chain` matched by consecutive rows from the attempt's first row; with SKIP TILL
    NEXT/ANY MATCH, by a subsequence (greedy). For ``(A B C D)`` this is exactly the number
    of variables the open attempt has matched; for other patterns it is a heuristic. It
    only decides which keys are spilled first, never what is matched."""

    def __init__(self, compiled: CompiledQuery, local: Sequence[np.ndarray | None],
                 times: np.ndarray):
        self.steps = [local[v] for v in chain(compiled)]
        self.strict = compiled.match.selection == "STRICT"
        self.times = times

    def state(self, lo: int, hi: int) -> int:
        """The state of an open attempt over rows ``lo..hi-1``."""
        i = 0
        n = len(self.steps)
        for r in range(lo, hi):
            if i == n:
                break
            mask = self.steps[i]
            if mask is None or mask[r]:
                i += 1
            elif self.strict:
                break
        return i


def estimate_transitions(sample: pd.DataFrame, query: str | CompiledQuery) -> TransitionStats:
    """Estimate Δt_i and p(E_{i+1} | E_i) from a sample of the input.

    Each partition's rows are read in order, tracking one attempt of :func:`chain` as
    :class:`Progress` defines it: a row that the next variable accepts advances the state
    (recording the time since the previous step); a complete chain, a row that breaks a
    STRICT attempt, or a WITHIN window that has closed starts a new attempt (at that row
    if the first variable accepts it). ``probability[i]`` = entries into ``i + 1`` / entries
    into ``i``; state 0 gets gap 0 and probability 0."""
    compiled = query if isinstance(query, CompiledQuery) else compile_query(query)
    sample = compiled.with_keys(sample)  # PARTITION BY / ORDER BY expressions
    bound = compiled._bind(sample)
    work, _, bounds = bound._prepare(sample)
    matcher, _ = bound._matcher(work)
    progress = Progress(compiled, matcher.conditions.local,
                        time_numbers(work, bound.order_cols))
    steps, times, n = progress.steps, progress.times, len(progress.steps)
    limit = np.inf
    within = compiled.match.within
    if within is not None and len(work):
        limit = order_numbers(work[bound.order_cols[0]], within)[1]
    entered = [0] * (n + 1)
    gaps = [0.0] * n

    def accepts(step: int, r: int) -> bool:
        mask = steps[step]
        return mask is None or bool(mask[r])

    for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
        state, first, last = 0, 0.0, 0.0
        for r in range(lo, hi):
            t = float(times[r])
            if state and t - first > limit:
                state = 0  # the window closed on the open attempt
            if state < n and accepts(state, r):
                if state == 0:
                    first = t
                else:
                    gaps[state] = max(gaps[state], t - last)
                state += 1
                last = t
                entered[state] += 1
                if state == n:
                    state = 0
            elif state and progress.strict:
                state = 0
                if n and accepts(0, r):
                    state, first, last = 1, t, t
                    entered[1] += 1
    probability = [0.0] + [entered[i + 1] / entered[i] if entered[i] else 0.0
                           for i in range(1, n)]
    return TransitionStats(gaps[:n], probability[:n])


# ---------------------------------------------------------------------- counters
@dataclass
class SpillStats:
    """Counters of a bounded store. ``hits``/``misses``/``new_keys``: (feed, distinct key)
    pairs whose key was in memory / on disk (read back) / never seen; ``open_misses``: the
    misses whose key has a live partial match (an attempt or CONSUMPTION instance waiting
    for rows, whose WITHIN window has not closed at the batch's earliest time) -- the
    paper's notion of a miss; the other misses only restore a key's counters and last
    rows; ``spilled``: keys written; ``bytes_written``/``bytes_read``: bytes of spill
    records; ``reloaded``: keys read back without a miss (flush, restoring a checkpoint);
    ``on_disk``/``in_memory``: keys there now; ``expired``: keys dropped instead of
    spilled because the caller deletes their state anyway (:attr:`SpillManager.expendable`)."""

    hits: int = 0
    misses: int = 0
    open_misses: int = 0
    new_keys: int = 0
    spilled: int = 0
    bytes_written: int = 0
    bytes_read: int = 0
    reloaded: int = 0
    on_disk: int = 0
    in_memory: int = 0
    expired: int = 0

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


# ---------------------------------------------------------------------- record stores
class DiskRecords:
    """Spill records in segment files on local disk (the default of the pure engine).

    Each :meth:`put` appends one segment file ``seg-<n>.bin``; an in-memory index maps each
    key to (segment, offset, length); a segment is deleted once all its keys were taken
    back, the directory by :meth:`close` (or when this object is garbage-collected)."""

    def __init__(self, spill_dir: str | Path | None = None) -> None:
        self._parent = Path(spill_dir) if spill_dir is not None else None
        self.directory: Path | None = None
        self._cleanup: weakref.finalize[Any, Any] | None = None
        self._index: dict[Key, tuple[int, int, int]] = {}
        self._live: dict[int, int] = {}  # segment -> keys still in it
        self._segments = itertools.count()

    def __contains__(self, key: object) -> bool:
        return key in self._index

    def __len__(self) -> int:
        return len(self._index)

    def keys(self) -> list[Key]:
        return list(self._index)

    def _segment(self, seg: int) -> Path:
        assert self.directory is not None
        return self.directory / f"seg-{seg:06d}.bin"

    def put(self, records: Mapping[Key, bytes]) -> None:
        if not records:
            return
        if self.directory is None:
            if self._parent is not None:
                self._parent.mkdir(parents=True, exist_ok=True)
            self.directory = Path(tempfile.mkdtemp(prefix="lakecep-spill-", dir=self._parent))
            self._cleanup = weakref.finalize(self, shutil.rmtree, self.directory, True)
        seg = next(self._segments)
        offset = 0
        with open(self._segment(seg), "wb") as f:
            for key, data in records.items():
                f.write(data)
                self._index[key] = (seg, offset, len(data))
                offset += len(data)
        self._live[seg] = len(records)

    def take(self, keys: Sequence[Key]) -> dict[Key, bytes]:
        """Read the records of ``keys`` and forget them."""
        out: dict[Key, bytes] = {}
        by_segment: dict[int, list[Key]] = {}
        for key in keys:
            by_segment.setdefault(self._index[key][0], []).append(key)
        for seg, seg_keys in by_segment.items():
            path = self._segment(seg)
            with open(path, "rb") as f:
                for key in seg_keys:
                    _, offset, length = self._index.pop(key)
                    f.seek(offset)
                    out[key] = f.read(length)
            self._live[seg] -= len(seg_keys)
            if self._live[seg] == 0:
                del self._live[seg]
                path.unlink()
        return out

    def peek(self) -> dict[Key, bytes]:
        """Every record, without taking it."""
        out: dict[Key, bytes] = {}
        for key, (seg, offset, length) in self._index.items():
            with open(self._segment(seg), "rb") as f:
                f.seek(offset)
                out[key] = f.read(length)
        return out

    def close(self) -> None:
        if self._cleanup is not None:
            self._cleanup()
        self._index.clear()
        self._live.clear()


class HandedRecords:
    """Spill records kept by the caller between runs instead of on local disk -- the Spark
    gold job keeps them in the Delta table ``gold.partial_matches``.

    The caller hands in (``records=``) the records of every spilled key its next batch may
    touch; :attr:`held` is what is spilled now (records handed in and not taken back, plus
    records written since), :attr:`taken` the keys read back into memory. The caller
    persists :attr:`held` and marks :attr:`taken` as in memory."""

    def __init__(self, records: Mapping[Key, bytes] | None = None) -> None:
        self.held: dict[Key, bytes] = dict(records or {})
        self.taken: set[Key] = set()
        self.directory = None

    def __contains__(self, key: object) -> bool:
        return key in self.held

    def __len__(self) -> int:
        return len(self.held)

    def keys(self) -> list[Key]:
        return list(self.held)

    def put(self, records: Mapping[Key, bytes]) -> None:
        self.held.update(records)
        self.taken.difference_update(records)

    def take(self, keys: Sequence[Key]) -> dict[Key, bytes]:
        self.taken.update(keys)
        return {key: self.held.pop(key) for key in keys}

    def peek(self) -> dict[Key, bytes]:
        return dict(self.held)

    def close(self) -> None:
        self.held.clear()


# ---------------------------------------------------------------------- the manager
class SpillManager:
    """Moves partition keys of a :class:`PartialMatchStore` between memory and a record
    store (:class:`DiskRecords` by default, or :class:`HandedRecords`).

    ``group`` (optional) maps a key to its spill group: keys of one group are spilled
    together (the Spark job spills per join key, which may hold several partition keys)."""

    def __init__(self, capacity: int, policy: str = "tpm", spill_dir: str | Path | None = None,
                 transitions: TransitionStats | Mapping[str, Sequence[float]] | None = None,
                 spill_batch: int = 1, records: DiskRecords | HandedRecords | None = None,
                 group: Callable[[Key], Any] | None = None):
        if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 1:
            raise ValueError(f"capacity must be a whole number of partition keys >= 1 "
                             f"(or None for an unbounded store), got {capacity!r}")
        if policy not in POLICIES:
            raise ValueError(f"policy must be one of {', '.join(POLICIES)}, got {policy!r}")
        if isinstance(spill_batch, bool) or not isinstance(spill_batch, int) or spill_batch < 1:
            raise ValueError(f"spill_batch must be a whole number >= 1, got {spill_batch!r}")
        if transitions is not None and not isinstance(transitions, TransitionStats):
            transitions = TransitionStats.from_dict(transitions)
        self.capacity = capacity
        self.policy = policy
        self.spill_batch = spill_batch
        self.transitions = transitions or TransitionStats()
        self.stats = SpillStats()
        self.records = records if records is not None else DiskRecords(spill_dir)
        self.group = group
        # The queue orders spill *units*: a key, or with ``group`` a whole group (weighed by
        # its hottest key). TPM: units in the order they entered memory. STPM: heap of
        # (W, tick, unit) with the current record of each unit in _current (older records
        # are stale). _weight: each in-memory key's own W; _members: the keys of a unit.
        self._fifo: OrderedDict[Any, None] = OrderedDict()
        self._heap: list[tuple[float, int, Any]] = []
        self._current: dict[Any, int] = {}
        self._weight: dict[Key, float] = {}
        self._members: dict[Any, dict[Key, None]] = {}
        self._ticks = itertools.count()
        # Start time of each in-memory key's open partial match (None: nothing open) and
        # the WITHIN limit (same units; set by the matcher).
        self._open_since: dict[Key, float | None] = {}
        self.window = np.inf
        #: units (keys, or groups with ``group``) whose state the caller will delete anyway
        #: (expired, ``cep_core.incremental.stored_state``): spilled, they are not written
        #: but kept in :attr:`expired` (unpickled) for the caller to flush
        self.expendable: set[Any] = set()
        #: the spill records (as tuples, not pickled) of the expendable keys evicted
        self.expired: dict[Key, tuple[Any, ...]] = {}

    # ------------------------------------------------------------------ queries
    @property
    def directory(self) -> Path | None:
        """The directory spill files go to (None until the first spill, or not on disk)."""
        return self.records.directory

    def on_disk(self, key: Key) -> bool:
        return key in self.records

    def spilled_keys(self) -> list[Key]:
        return self.records.keys()

    def queue(self) -> list[tuple[Key, float, float | None]]:
        """The in-memory keys in spilling order's bookkeeping: (key, W, open since); saved
        with a checkpoint so that a restored store spills in the same order."""
        units = list(self._fifo) if self.policy == "tpm" else list(self._current)
        return [(k, self._weight.get(k, -np.inf), self._open_since.get(k))
                for u in units for k in self._members.get(u, ())]

    def _unit(self, key: Key) -> Any:
        return key if self.group is None else ("group", self.group(key))

    # ------------------------------------------------------------------ bookkeeping
    def adopt(self, store: PartialMatchStore,
              queue: Sequence[tuple[Key, float, float | None]] = ()) -> None:
        """Register the keys already in ``store`` (a restored or shared store), in the
        order and with the priorities of ``queue`` where it has them."""
        known = {k: (w, since) for k, w, since in queue}
        for key, (w, since) in known.items():
            if key in store.partitions:
                self.touched(key, w, since)
        for key in store.partitions:
            if key not in known:
                self.touched(key, -np.inf)

    def touched(self, key: Key, priority: float, open_since: float | None = None) -> None:
        """``key`` was matched; ``priority`` is its STPM weight W (ignored by TPM, where a
        key keeps its place from when it entered memory); ``open_since`` the time its open
        partial match started (None: nothing open)."""
        self._open_since[key] = open_since
        self._weight[key] = priority
        unit = self._unit(key)
        members = self._members.setdefault(unit, {})
        members[key] = None
        if self.policy == "tpm":
            if unit not in self._fifo:
                self._fifo[unit] = None
            return
        weight = max(self._weight[k] for k in members)
        tick = next(self._ticks)
        self._current[unit] = tick
        heapq.heappush(self._heap, (weight, tick, unit))
        if len(self._heap) > 4 * len(self._current) + 64:  # drop stale records
            self._heap = [rec for rec in self._heap if self._current.get(rec[2]) == rec[1]]
            heapq.heapify(self._heap)

    def _forget(self, key: Key) -> None:
        self._open_since.pop(key, None)
        self._weight.pop(key, None)
        unit = self._unit(key)
        members = self._members.get(unit)
        if members is not None:
            members.pop(key, None)
            if members:
                return
            del self._members[unit]
        self._fifo.pop(unit, None)
        self._current.pop(unit, None)

    def _coldest(self, n: int) -> list[Key]:
        """Take the lowest-priority units out of the queue until they hold ``n`` keys; return
        their keys."""
        out: list[Key] = []
        while len(out) < n:
            if self.policy == "tpm":
                if not self._fifo:
                    break
                unit = self._fifo.popitem(last=False)[0]
            else:
                if not self._heap:
                    break
                _, tick, unit = heapq.heappop(self._heap)
                if self._current.get(unit) != tick:
                    continue
                del self._current[unit]
            out.extend(self._members.pop(unit, {}))
        return out

    # ------------------------------------------------------------------ feed hooks
    def before_feed(self, store: PartialMatchStore, keys: Iterable[Key],
                    now: float = np.inf) -> None:
        """Count hits, misses and new keys of a batch's distinct keys (``now``: the batch's
        earliest time); read missed keys back into ``store``."""
        missed = []
        for key in keys:
            if key in store.partitions:
                self.stats.hits += 1
            elif key in self.records:
                self.stats.misses += 1
                missed.append(key)
            else:
                self.stats.new_keys += 1
        for since in self._load(store, missed).values():
            self.stats.open_misses += since is not None and now - since <= self.window

    def reload_all(self, store: PartialMatchStore) -> None:
        """Read every spilled key back (before a flush)."""
        self.reload(store, self.records.keys())

    def reload(self, store: PartialMatchStore, keys: Sequence[Key]) -> None:
        """Read ``keys`` back without a miss (counted in ``reloaded``)."""
        keys = [k for k in keys if k in self.records]
        self.stats.reloaded += len(keys)
        self._load(store, keys)

    def enforce(self, store: PartialMatchStore, partition_cols: Sequence[str]) -> None:
        """Spill the lowest-priority keys while more than ``capacity`` are in memory."""
        excess = len(store.partitions) - self.capacity
        if excess > 0:
            n = max(excess, min(self.spill_batch, len(store.partitions)))
            victims = self._coldest(n)
            if len(victims) < n:  # keys the queue never saw (cannot happen via the matcher)
                seen = set(victims)
                victims += [k for k in store.partitions if k not in seen][:n - len(victims)]
            self._spill(store, partition_cols, victims)
        self.stats.in_memory = len(store.partitions)
        self.stats.on_disk = len(self.records)

    def snapshot(self) -> dict[Key, bytes]:
        """The spill records of all spilled keys (for a checkpoint; nothing is moved)."""
        return self.records.peek()

    def close(self) -> None:
        """Delete the spilled records (spilled keys are lost)."""
        self.records.close()
        self.stats.on_disk = 0

    # ------------------------------------------------------------------ moving keys
    def _spill(self, store: PartialMatchStore, partition_cols: Sequence[str],
               keys: list[Key]) -> None:
        if not keys:
            return
        rows = rows_by_key(store.frame, partition_cols)
        frame = store.frame
        keep = np.ones(0 if frame is None else len(frame), dtype=bool)
        columns = None if frame is None else _columns(frame)
        records: dict[Key, bytes] = {}
        for key in keys:
            state = store.partitions.pop(key)
            at = rows.get(key)
            if at is not None:
                keep[at] = False
            part = None if at is None or columns is None else (
                columns[0], [_take(values, at) for values in columns[1]])
            marks = np.zeros(0, dtype=bool) if at is None else store.settled[at]
            record = (part, marks, (state.matches, state.trimmed, state.covered, state.stages),
                      self._open_since.get(key))
            if self.expendable and (key if self.group is None else self.group(key)) in \
                    self.expendable:
                self.expired[key] = record
                self.stats.expired += 1
            else:
                records[key] = pickle.dumps(record, protocol=pickle.HIGHEST_PROTOCOL)
            self._forget(key)
        self.records.put(records)
        self.stats.spilled += len(records)
        self.stats.bytes_written += sum(len(d) for d in records.values())
        if frame is not None and not keep.all():
            store.frame = frame[keep].reset_index(drop=True)
            store.settled = store.settled[keep]

    def _load(self, store: PartialMatchStore, keys: list[Key]) -> dict[Key, float | None]:
        """Read ``keys`` back into ``store``; returns each key's open-since time."""
        if not keys:
            return {}
        records = self.records.take(keys)
        self.stats.bytes_read += sum(len(d) for d in records.values())
        since = records_from_snapshot(store, records)
        for key in keys:
            self.touched(key, -np.inf)  # re-weighed when matched this feed
        self.stats.on_disk = len(self.records)
        return since


def rows_by_key(frame: pd.DataFrame | None,
                 partition_cols: Sequence[str]) -> dict[Key, np.ndarray]:
    """The row positions of each partition key in ``frame`` (keys as the matcher makes
    them: Python scalars, missing values as None)."""
    if frame is None or len(frame) == 0:
        return {}
    if not partition_cols:
        return {(): np.arange(len(frame))}
    cols = list(partition_cols)
    groups = frame.groupby(cols if len(cols) > 1 else cols[0], sort=False, dropna=False,
                           observed=True).indices
    out: dict[Key, np.ndarray] = {}
    for value, at in groups.items():
        values = value if len(cols) > 1 else (value,)
        out[tuple(to_python(v) for v in values)] = at
    return out


def _columns(frame: pd.DataFrame) -> tuple[list[Any], list[Any]]:
    """A frame as (names, arrays): numpy arrays where the dtype is numpy's, else pandas'
    arrays. A spill record holds a key's rows as these arrays indexed by its positions:
    slicing and pickling arrays costs a fraction of a DataFrame slice per key."""
    names = list(frame.columns)
    return names, [frame[c].to_numpy() if isinstance(frame[c].dtype, np.dtype)
                   else frame[c].array for c in names]


def _take(values: Any, at: np.ndarray) -> Any:
    """``values[at]``; a pandas array by ``take`` (a tz-aware DatetimeArray's ``[at]`` costs
    ~14 µs, its ``take`` ~2 µs: a spill of 11,000 keys x 5 timestamp columns was 3 s)."""
    return values[at] if isinstance(values, np.ndarray) else values.take(at)


def _frame_of(parts: list[tuple[list[Any], list[Any]]]) -> pd.DataFrame:
    """One frame of the rows of several spill records, in order."""
    names = parts[0][0]
    if any(p[0] != names for p in parts):  # columns differ: let pandas align them
        return pd.concat([pd.DataFrame(dict(zip(n, v, strict=True))) for n, v in parts],
                         ignore_index=True)
    columns: dict[Any, Any] = {}
    for i, name in enumerate(names):
        arrays = [p[1][i] for p in parts]
        first = arrays[0]
        if isinstance(first, np.ndarray) and all(
                isinstance(a, np.ndarray) and a.dtype == first.dtype for a in arrays):
            columns[name] = np.concatenate(arrays)
        elif all(type(a) is type(first) and a.dtype == first.dtype for a in arrays):
            # pandas arrays of one dtype: the ExtensionArray interface's own concatenation
            # (a Series per record was ~100x slower: 7.6 s to read 11,000 keys back)
            columns[name] = type(first)._concat_same_type(arrays)
        else:  # dtypes that differ: pandas' concatenation rules
            columns[name] = pd.concat([pd.Series(a, dtype=getattr(a, "dtype", None))
                                       for a in arrays], ignore_index=True)
    return pd.DataFrame(columns)


def records_from_snapshot(store: PartialMatchStore, records: Mapping[
        Key, bytes | tuple[Any, ...]]) -> dict[Key, float | None]:
    """Fold spill records (read back, or saved by :meth:`SpillManager.snapshot`; pickled,
    or as :attr:`SpillManager.expired` keeps them) into ``store``; returns the start time
    of each key's open partial match (None: none)."""
    parts: list[tuple[list[Any], list[Any]]] = []
    marks: list[np.ndarray] = []
    since: dict[Key, float | None] = {}
    for key, data in records.items():
        part, settled, (matches, trimmed, covered, stages), *rest = (
            pickle.loads(data) if isinstance(data, bytes) else data)
        since[key] = rest[0] if rest else None
        store.partitions[key] = PartitionState(matches, trimmed, covered, stages)
        if part is not None and len(settled):
            parts.append(part)
            marks.append(settled)
    if parts:
        # Appended after the other keys' rows: matching sorts stably by partition and
        # order keys, so each key's rows keep their order.
        frame = _frame_of(parts)
        store.frame = pd.concat([store.frame, frame], ignore_index=True) if (
            store.buffered_rows()) else frame
        store.settled = np.concatenate([store.settled, *marks])
    return since
