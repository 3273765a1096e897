"""Partial-match state that the caller stores: advance one bucket of keys by one batch.

A stateless worker (a Spark task, seed 004) keeps no matcher between micro-batches. For
each *bucket* of join keys the caller stores two kinds of records instead, and
:func:`advance` turns them into an :class:`~cep_core.streaming.IncrementalMatcher`, feeds
the batch, and hands back the new records:

* the **hot** record: the matcher state of the partition keys kept "in memory" -- loaded
  whenever the bucket gets rows; at most ``capacity`` partition keys (the bounded store);
* one **spill** record per *group* (join key value): the states of its partition keys that
  the bounded store spilled (TPM or STPM order, :mod:`cep_core.spilling`). The caller hands
  in the spill records of the groups the batch touches, nothing else; a touched group is
  read back whole, and a spilled group is spilled whole, so a group is always entirely hot
  or entirely in its spill record and a rewritten spill record is complete.

The Spark gold job keeps both in the Delta table ``gold.partial_matches``
(``docs/partial-matches.md``).

**Replays.** A caller that cannot feed a group's rows in time order (a late row sorts
before rows already fed) names it in ``replay`` and feeds the group's whole history
instead: its state is dropped first, so the matches of the group are found again from
the start, exactly as a batch run over its history finds them. The caller must treat
those matches as possibly emitted before (the gold job's MERGE keeps each once).

Replay groups take the **bulk path** (always: a first batch that replays every key of a
lake, a backfill, a large late wave, or one late key alike). Their rows do not go through
the bounded store: one feed of a fresh *unbounded* matcher (the batch engine's compiled
kernel where the batch engine uses it; feed numbers continue the bucket's) finds their
final matches, a flush of a copy of its state their provisional ones, and the state it
keeps (per key only what a future match may still use, and the counters) joins the
bounded store unfed, weighed W = e.t; then the in-order groups are fed and the store is
bounded once. The output equals feeding every row through the bounded store: keys are
matched independently, one feed equals any cutting of it, and spilling never changes
output. With ``expire=True`` (the gold job, whose state MERGE deletes the key rows of
keys more than the WITHIN window behind the query's newest event), an evicted group of
the batch whose newest row is more than WITHIN older than the batch's newest is not
pickled: its state is flushed, and the matches it still holds (a completed greedy match
waiting for an extension that can no longer come) are final matches of this call; then
it is dropped (``SpillStats.expired``). ``docs/partial-matches.md`` has the profile.
"""

from __future__ import annotations

import pickle
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd  # type: ignore[import-untyped, unused-ignore]

from ..api import CompiledQuery
from ..runtime.output import Match
from ..runtime.time_axis import is_timestamp, order_numbers, scalar_ns, time_numbers
from .matcher import IncrementalMatcher
from .spilling import (
    HandedRecords,
    SpillStats,
    TransitionStats,
    records_from_snapshot,
    rows_by_key,
)
from .store import ROW_ID, PartialMatchStore


@dataclass
class Advanced:
    """What :func:`advance` returns.

    ``matches``: the matches that became final (``Match.rows`` are feed numbers, the rows
    are in ``rows``, whose :data:`~cep_core.partial_matches.ROW_ID` column holds them);
    ``hot``: the new hot record; ``groups``: for every group this
    call touched, replayed, read back or spilled, its new spill record (None: the group is
    hot, or has no state); ``last_time``: per group with rows in the batch, the newest time
    of its rows (ORDER BY column, int ns for timestamps); ``stats``: the bounded store's
    counters for this call; ``late_rows``: rows the matcher dropped as out of order (0
    when the caller replays every group with a late row); ``keys_in_memory`` /
    ``rows_in_memory``: the size of the hot record's store; ``provisional`` (only with
    ``provisional=True``): the matches the touched groups would add if their input ended
    now (a flush of a copy of their state; the state itself is not changed), their rows in
    ``provisional_rows`` -- with ``matches``, every match a batch run over the groups'
    rows so far finds."""

    matches: list[Match]
    rows: pd.DataFrame | None
    hot: bytes
    groups: dict[Any, bytes | None] = field(default_factory=dict)
    last_time: dict[Any, Any] = field(default_factory=dict)
    stats: SpillStats = field(default_factory=SpillStats)
    late_rows: int = 0
    keys_in_memory: int = 0
    rows_in_memory: int = 0
    provisional: list[Match] = field(default_factory=list)
    provisional_rows: pd.DataFrame | None = None


def advance(query: CompiledQuery, batch: pd.DataFrame, *, key: str, hot: bytes | None,
            spilled: Mapping[Any, bytes], replay: Collection[Any] = (), capacity: int,
            policy: str = "stpm",
            transitions: TransitionStats | Mapping[str, Any] | None = None,
            provisional: bool = False, expire: bool = False) -> Advanced:
    """Feed ``batch`` (the rows of one bucket, in any order) to the stored state.

    ``key``: the PARTITION BY column whose value is a row's group; ``hot``/``spilled``:
    the bucket's hot record and the spill records (by group) of the groups the batch
    touches; ``replay``: groups whose whole history ``batch`` holds (their state is dropped
    first). ``capacity``/``policy``/``transitions``: the bounded store
    (:class:`~cep_core.streaming.IncrementalMatcher`). ``provisional``: also compute
    :attr:`Advanced.provisional` for the groups the batch touched. ``expire``: groups of
    the batch whose newest row is more than the WITHIN window older than the batch's
    newest row are dropped instead of spilled when the bounded store evicts them -- only
    for a caller that deletes such groups' state itself and replays a group whose later
    event could share a window with its dropped rows (module docstring)."""
    partition_by = [c.lower() for c in query.partition_by]
    if key.lower() not in partition_by:
        raise ValueError(f"the query must PARTITION BY the group column {key!r}")
    at = partition_by.index(key.lower())

    def group(partition: tuple[Any, ...]) -> Any:
        return partition[at]

    handed: dict[tuple[Any, ...], bytes] = {}
    for g, blob in spilled.items():
        if g not in replay:
            handed.update(pickle.loads(blob))
    records = HandedRecords(handed)
    options: dict[str, Any] = {"capacity": capacity, "policy": policy,
                               "transitions": transitions, "records": records,
                               "spill_group": group}
    inc = (IncrementalMatcher.from_bytes(hot, query, **options) if hot is not None
           else IncrementalMatcher(query, **options))
    replay = set(replay)
    if replay:
        inc.forget([p for p in inc.store.partitions if group(p) in replay])
    spill = inc._spill
    assert spill is not None
    batch = query.with_keys(batch)  # PARTITION BY / ORDER BY expressions as columns
    in_order, history = batch, batch.iloc[:0]
    if replay and len(batch):
        is_replay = batch[query._bind(batch).partition_cols[at]].isin(replay).to_numpy()
        in_order, history = batch[~is_replay], batch[is_replay]
    # replay groups: the bulk path (module docstring), their state joins the store unfed
    bulk = _bulk(inc, query, history, provisional) if len(history) else None
    if bulk is not None:
        _adopt(inc, bulk.store, bulk.weights)
    # a touched group comes back whole: its partition keys the batch has no rows for too
    fed_keys = set(inc._keys(in_order)) if len(in_order) else set()
    rest = [p for p in handed if p not in fed_keys]
    spill.reload(inc.store, rest)
    spill.expendable = _expired(query, batch, at) if expire else set()
    late_before = inc.late_rows
    matches = inc.feed(in_order) if len(in_order) else []
    if not len(in_order):
        spill.enforce(inc.store, inc._partition_columns(inc.store.frame))
    spill.expendable = set()
    matched: list[pd.DataFrame] = []
    if len(in_order):
        assert inc.matched is not None
        matched.append(inc.matched)
    ended_groups = {group(p) for p in spill.expired}
    if spill.expired:  # dropped groups: what their state still holds is final now
        ended, ended_rows = _flush_expired(query, spill.expired)
        spill.expired = {}
        matches = matches + ended
        if ended_rows is not None:
            matched.append(ended_rows)
    if bulk is not None:
        matches = bulk.matches + matches
        matched.insert(0, bulk.rows)
        spill.stats.new_keys += len(bulk.store.partitions)  # a replayed key counts as new

    moved = {group(p) for p in (*records.held, *records.taken)}
    touched = {group(p) for p in fed_keys} | replay
    last: dict[Any, Any] = {}
    for frame in matched:
        bound = query._bind(frame)
        newest = frame.groupby(bound.partition_cols[at], sort=False,
                               observed=True)[bound.order_cols[0]].max()
        last.update({g: scalar_ns(t) for g, t in newest.items() if g in touched})
    rows = matched[0] if len(matched) == 1 else None
    if len(matched) > 1:  # the in-order feed matched over the replayed groups' state too
        rows = pd.concat(matched, ignore_index=True).drop_duplicates(ROW_ID,
                                                                     ignore_index=True)
    held: dict[Any, dict[tuple[Any, ...], bytes]] = {}
    for p, rec in records.held.items():
        held.setdefault(group(p), {})[p] = rec
    out = {g: pickle.dumps(held[g], protocol=pickle.HIGHEST_PROTOCOL) if g in held else None
           for g in moved | touched}
    pending: list[Match] = []
    pending_rows = []
    fed = {group(p) for p in fed_keys}
    if provisional and fed:
        # a copy of the in-order touched groups' state (hot or just spilled), flushed
        probe = IncrementalMatcher.from_bytes(inc.to_bytes(spilled=False), inc.compiled)
        probe.forget([p for p in probe.store.partitions if group(p) not in fed])
        records_from_snapshot(probe.store, {p: rec for p, rec in records.held.items()
                                            if group(p) in fed})
        pending = probe.flush()
        if probe.matched is not None:
            pending_rows.append(probe.matched)
    if bulk is not None and bulk.pending:  # less the expired groups': final now
        pending = [m for m in bulk.pending if group(m.partition) not in ended_groups] + pending
        pending_rows.insert(0, bulk.pending_rows)
    stats = spill.stats
    # kept even with no key in memory: it holds the feed counter, which must keep growing
    # (spilled rows carry their feed numbers)
    return Advanced(matches, rows, inc.to_bytes(spilled=False), out, last, stats,
                    inc.late_rows - late_before, len(inc.store.partitions),
                    inc.store.buffered_rows(), pending,
                    (pending_rows[0] if len(pending_rows) == 1 else
                     pd.concat(pending_rows, ignore_index=True)) if pending_rows else None)


@dataclass
class _Bulk:
    """The replay groups' run: their matches (``rows``: the rows they were found in), the
    state an incremental run over their rows leaves (``store``; ``weights``: per
    partition key its spill priority and open-since time) and, if asked for, the
    provisional matches."""

    matches: list[Match]
    rows: pd.DataFrame
    store: PartialMatchStore
    weights: dict[tuple[Any, ...], tuple[float, float | None]]
    pending: list[Match]
    pending_rows: pd.DataFrame | None


def _bulk(inc: IncrementalMatcher, query: CompiledQuery, history: pd.DataFrame,
          provisional: bool) -> _Bulk:
    """Match the replay groups' whole history in one feed of an *unbounded* matcher (the
    batch engine's path: compiled kernel, no spilling bookkeeping), numbering the rows
    after ``inc``'s so that feed numbers stay unique; the matcher's state afterwards is
    what the bounded store would hold for them (only the rows a future match may still
    use: the open attempt, ``PREV``'s reach, the last settled row, and the counters)."""
    side = IncrementalMatcher(query)
    side.fed = inc.fed
    matches = side.feed(history)
    rows = side.matched
    assert rows is not None and side.late_rows == 0  # one feed of a fresh state
    inc.fed = side.fed
    pending: list[Match] = []
    pending_rows = None
    store = side.store
    if provisional:  # a copy is flushed: what a batch run would add if the input ended now
        store = PartialMatchStore.from_bytes(side.store.to_bytes())
        pending = side.flush()
        pending_rows = side.matched
    return _Bulk(matches, rows, store, _weights(inc, store), pending, pending_rows)


def _weights(inc: IncrementalMatcher, store: PartialMatchStore) -> dict[
        tuple[Any, ...], tuple[float, float | None]]:
    """Per partition key of ``store``: its spill priority (W = e.t, the time of its last
    row: the progress term Δt_i · p_i of STPM is left out, which only changes which keys
    are spilled first) and the time its open partial match started (its first row after
    the last settled one; None: nothing open)."""
    frame = store.frame
    if frame is None or not len(frame):
        return {}
    bound = inc.compiled._bind(frame)
    times = time_numbers(frame, bound.order_cols)
    out: dict[tuple[Any, ...], tuple[float, float | None]] = {}
    settled = store.settled
    for key, at in rows_by_key(frame, bound.partition_cols).items():
        marks = np.flatnonzero(settled[at])
        first_open = int(marks[-1]) + 1 if len(marks) else 0
        out[key] = (float(times[at[-1]]),
                    float(times[at[first_open]]) if first_open < len(at) else None)
    return out


def _adopt(inc: IncrementalMatcher, store: PartialMatchStore,
           weights: dict[tuple[Any, ...], tuple[float, float | None]]) -> None:
    """Add ``store``'s partition keys (none of them in ``inc``) to ``inc``'s store as if
    they had been fed: their rows after the others', their priorities queued."""
    mine = inc.store
    if store.buffered_rows():
        frames = [mine.frame, store.frame] if mine.buffered_rows() else [store.frame]
        mine.frame = pd.concat(frames, ignore_index=True)
        mine.settled = np.concatenate([mine.settled, store.settled])
    spill = inc._spill
    assert spill is not None
    for key, state in store.partitions.items():
        mine.partitions[key] = state
        w, since = weights.get(key, (-np.inf, None))
        spill.touched(key, w, since)


def _flush_expired(query: CompiledQuery, records: Mapping[Any, tuple[Any, ...]],
                   ) -> tuple[list[Match], pd.DataFrame | None]:
    """The matches that the states of expired partition keys (dropped by the bounded
    store, :attr:`~cep_core.incremental.spilling.SpillManager.expired`) still hold, and
    their rows: a flush of a fresh matcher holding only them. No later row can join a
    match of theirs (it would be outside the WITHIN window), so these matches are final --
    a completed greedy ``B+`` still waiting for its extension is one."""
    ended = IncrementalMatcher(query)
    records_from_snapshot(ended.store, records)
    return ended.flush(), ended.matched


def _expired(query: CompiledQuery, batch: pd.DataFrame, at: int) -> set[Any]:
    """The groups of ``batch`` whose newest row is more than the WITHIN window older than
    the batch's newest row: the caller's expiry (``docs/partial-matches.md``) deletes
    their state anyway, so the bounded store drops them rather than spilling them. Empty
    without WITHIN. (A margin of 1 ms keeps float rounding on the safe side.)"""
    within = query.match.within
    if within is None or not len(batch):
        return set()
    frame = batch
    bound = query._bind(frame)
    times = time_numbers(frame, bound.order_cols)
    if not len(times) or np.isnan(times).all():
        return set()
    window = order_numbers(frame[bound.order_cols[0]].iloc[:1], within)[1]
    margin = 1e6 if is_timestamp(frame[bound.order_cols[0]].dtype) else 0.0
    cutoff = float(np.nanmax(times)) - window - margin
    newest = pd.Series(times).groupby(frame[bound.partition_cols[at]].to_numpy(),
                                      sort=False, dropna=True).max()
    return {group_ for group_, t in newest.items() if t < cutoff}


__all__ = ["ROW_ID", "Advanced", "advance"]
