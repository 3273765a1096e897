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
"""

from __future__ import annotations

import pickle
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

import pandas as pd  # type: ignore[import-untyped, unused-ignore]

from ..api import CompiledQuery
from ..runtime.output import Match
from ..runtime.time_axis import scalar_ns
from .matcher import IncrementalMatcher
from .spilling import HandedRecords, SpillStats, TransitionStats, records_from_snapshot
from .store import ROW_ID


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
            provisional: bool = False) -> Advanced:
    """Feed ``batch`` (the rows of one bucket, in any order) to the stored state.

    ``key``: the PARTITION BY column whose value is a row's group; ``hot``/``spilled``:
    the bucket's hot record and the spill records (by group) of the groups the batch
    touches; ``replay``: groups whose whole history ``batch`` holds (their state is dropped
    first). ``capacity``/``policy``/``transitions``: the bounded store
    (:class:`~cep_core.streaming.IncrementalMatcher`). ``provisional``: also compute
    :attr:`Advanced.provisional` for the groups the batch touched."""
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
    # a touched group comes back whole: its partition keys the batch has no rows for too
    fed_keys = set(inc._keys(batch)) if len(batch) else set()
    rest = [p for p in handed if p not in fed_keys]
    spill = inc._spill
    assert spill is not None
    spill.reload(inc.store, rest)
    late_before = inc.late_rows
    matches = inc.feed(batch) if len(batch) else []
    if not len(batch):
        spill.enforce(inc.store, inc._partition_columns(inc.store.frame))

    moved = {group(p) for p in (*records.held, *records.taken)}
    touched: set[Any] = set()
    last: dict[Any, Any] = {}
    if len(batch):
        touched = {group(p) for p in fed_keys}
        frame = inc.matched
        assert frame is not None
        bound = inc.compiled._bind(frame)
        order = bound.order_cols[0]
        newest = frame.groupby(bound.partition_cols[at], sort=False,
                               observed=True)[order].max()
        last = {g: scalar_ns(t) for g, t in newest.items() if g in touched}
    held: dict[Any, dict[tuple[Any, ...], bytes]] = {}
    for p, rec in records.held.items():
        held.setdefault(group(p), {})[p] = rec
    out = {g: pickle.dumps(held[g], protocol=pickle.HIGHEST_PROTOCOL) if g in held else None
           for g in moved | touched | replay}
    pending: list[Match] = []
    pending_rows = None
    if provisional and touched:
        # a copy of the touched groups' state (hot or just spilled), flushed
        probe = IncrementalMatcher.from_bytes(inc.to_bytes(spilled=False), inc.compiled)
        probe.forget([p for p in probe.store.partitions if group(p) not in touched])
        records_from_snapshot(probe.store, {p: rec for p, rec in records.held.items()
                                            if group(p) in touched})
        pending = probe.flush()
        pending_rows = probe.matched
    stats = spill.stats
    # kept even with no key in memory: it holds the feed counter, which must keep growing
    # (spilled rows carry their feed numbers)
    return Advanced(matches, inc.matched, inc.to_bytes(spilled=False), out, last, stats,
                    inc.late_rows - late_before, len(inc.store.partitions),
                    inc.store.buffered_rows(), pending, pending_rows)


__all__ = ["ROW_ID", "Advanced", "advance"]
