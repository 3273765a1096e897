"""Incremental matching: feed batches, get each match once it is final.

:class:`IncrementalMatcher` keeps, per partition key, the rows a future match may still use
(:mod:`cep_core.partial_matches`). Each ``feed`` merges a batch with the buffered rows of
the keys it touches, sorts and evaluates the row-local conditions once for all of them, and
runs the matcher from each partition's next unsettled row. A match (or a failed attempt) is
final only if it did not depend on rows that have not arrived yet -- the matcher reports
when an attempt wanted a row past the end of the buffer, unless the WITHIN window has
already closed. ``flush`` treats the input as complete. Feeding a table in order, in any
batch sizes, and then flushing gives the same matches as :meth:`CompiledQuery.find_matches`
on the whole table, and ``feed_table``/``flush_table`` give the output rows of
:meth:`CompiledQuery.run` (ONE or ALL ROWS PER MATCH; an unmatched row comes out once the
attempt from it and all earlier attempts of its partition are final). CONSUMPTION modes
process each row once it arrives, keeping the open instances of each partition in the
store (:class:`cep_core.runtime.consumption.Consumer`, or the compiled kernel's
:func:`cep_core.runtime.kernel.consume` when the batch engine uses it).

With ``capacity`` set, at most that many partition keys stay in memory between feeds; the
others are spilled to local disk and read back when a batch touches them (TPM or STPM
policy, :mod:`cep_core.spilling`, ``docs/partial-matches.md``). Spilling changes the cost,
never the output.

>>> import pandas as pd
>>> inc = IncrementalMatcher(
...     "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES COUNT(*) AS n "
...     "PATTERN (A B+) DEFINE A AS v = 0, B AS v > 0)")
>>> [m.rows for m in inc.feed(pd.DataFrame({"ts": [1, 2], "v": [0, 1]}))]
[]
>>> [m.rows for m in inc.feed(pd.DataFrame({"ts": [3, 4], "v": [0, 1]}))]
[(0, 1)]
>>> [m.rows for m in inc.flush()]
[(2, 3)]
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from itertools import chain, repeat
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd  # type: ignore[import-untyped, unused-ignore]

from ..api import Bound as _Bound
from ..api import CompiledQuery, compile_query
from ..compile.expressions import children, walk
from ..compile.state import MatchState
from ..compile.values import column_values, to_python
from ..errors import QueryError, query_errors
from ..language import ast
from ..runtime.consumption import Consumer, Instance
from ..runtime.fast import (
    TOO_MANY_THREADS,
    KernelResult,
    consume_partitions,
    match_measure_values,
    measure_values,
    raw_matches,
    row_partitions,
    run_kernel,
    vector_measure_columns,
)
from ..runtime.matcher import Matcher, RawMatch
from ..runtime.matcher import Partition as _Partition
from ..runtime.output import Match, matches
from ..runtime.output import select as _select
from ..runtime.time_axis import order_numbers, time_numbers
from ..runtime.values import LazyColumn
from .spilling import (
    HandedRecords,
    Progress,
    SpillManager,
    SpillStats,
    TransitionStats,
    records_from_snapshot,
    rows_by_key,
)
from .store import ROW_ID, PartialMatchStore, PartitionState

Emitted = tuple[list[Match], pd.DataFrame | None]  # matches, output rows (None: none)


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector during a feed: it makes many short-lived
    containers (frames, Match objects) and no reference cycles of its own, and the
    collections their allocations trigger would traverse every live object of the
    process many times per batch (10-25% of a feed on the engine suite); whatever cycles
    others left are collected after it."""
    paused = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if paused:
            gc.enable()


def lookback(compiled: CompiledQuery) -> int:
    """How many rows before a match ``PREV`` can reach."""
    m = compiled.match
    exprs = [d.condition for d in m.defines] + [me.expr for me in m.measures]
    reach = 0
    for expr in exprs:
        for node in walk(expr):
            if isinstance(node, ast.Call) and node.name == "PREV":
                offset = 1
                if len(node.args) > 1 and isinstance(node.args[1], ast.Literal):
                    offset = int(node.args[1].value)  # type: ignore[call-overload]
                reach = max(reach, offset)
    return reach


def reads_ahead(m: ast.MatchRecognize) -> bool:
    """Whether a DEFINE or measure uses NEXT (reads rows that may not have arrived)."""
    return any(isinstance(node, ast.Call) and node.name == "NEXT"
               for expr in [d.condition for d in m.defines] + [me.expr for me in m.measures]
               for node in walk(expr))


def lookahead(m: ast.MatchRecognize) -> int | None:
    """How many rows after the current row (DEFINE) or a match's last row (MEASURES)
    ``NEXT`` can reach (nested navigation adds up); None if an offset is not a constant."""

    def reach(e: ast.Expr) -> int | None:
        inner = 0
        for child in children(e):
            r = reach(child)
            if r is None:
                return None
            inner = max(inner, r)
        if isinstance(e, ast.Call) and e.name == "NEXT":
            offset = e.args[1] if len(e.args) > 1 else ast.Literal(1)
            if not (isinstance(offset, ast.Literal) and type(offset.value) is int):
                return None
            return max(int(offset.value), 0) + inner
        return inner

    out = 0
    for expr in [d.condition for d in m.defines] + [me.expr for me in m.measures]:
        r = reach(expr)
        if r is None:
            return None
        out = max(out, r)
    return out


def incremental_route(compiled: CompiledQuery) -> str | None:
    """Why :class:`IncrementalMatcher` runs ``compiled`` on the general matcher (None: on
    the compiled kernel, as the batch engine does; with NEXT, each open partition's last
    :func:`lookahead` rows wait for the rows after them)."""
    if compiled._fast is None:
        return compiled.plan
    if lookahead(compiled.match) is None:
        return "general: NEXT with an offset that is not a constant (incremental)"
    return None


class IncrementalMatcher:
    """Match a query over a stream of batches: ``feed``/``flush`` return Match objects,
    ``feed_table``/``flush_table`` the query's output rows (as ``run`` gives them).

    ``Match.rows`` are global feed numbers: the n-th row ever fed (0-based, counting every
    batch in order). Rows of a partition must arrive in ORDER BY order across batches;
    rows that sort before rows already settled are dropped and counted in ``late_rows``.

    Bounded store (``docs/partial-matches.md``): ``capacity`` = the most partition keys kept
    in memory between feeds (None: unbounded, the default); ``policy`` = ``"tpm"`` (spill
    the keys that entered memory first) or ``"stpm"`` (spill the lowest
    ``W = e.t + Δt_i · p_i`` first, with ``transitions`` giving Δt_i and p_i -- a
    :class:`~cep_core.spilling.TransitionStats` or its dict; without it W = e.t);
    ``spill_dir`` = where the spill directory is made (default: the temporary directory);
    ``spill_batch`` = the fewest keys written per spill (ΔR); ``records`` = where spilled
    keys go: local disk by default, or a :class:`~cep_core.spilling.HandedRecords` the
    caller persists (the Spark job: a Delta table; the bound is then enforced after the next
    feed, not when the matcher is made); ``spill_group`` = a function of the key
    whose equal values are spilled together. Counters: :attr:`spill_stats`.
    Call :meth:`close` (or use ``with``) to delete the spill files.

    :attr:`matched` is the frame the last feed or flush matched over (the input columns and
    the feed-number column :data:`~cep_core.partial_matches.ROW_ID`): every row of a match
    it returned is there, so callers can read a match's rows by feed number.
    """

    def __init__(self, query: str | CompiledQuery, store: PartialMatchStore | None = None,
                 *, capacity: int | None = None, policy: str = "tpm",
                 spill_dir: str | Path | None = None,
                 transitions: TransitionStats | Mapping[str, Sequence[float]] | None = None,
                 spill_batch: int = 1, records: HandedRecords | None = None,
                 spill_group: Callable[[tuple[Any, ...]], Any] | None = None,
                 _queue: Sequence[tuple[Any, float, float | None]] = ()):
        self.compiled = query if isinstance(query, CompiledQuery) else compile_query(query)
        self.store = store or PartialMatchStore()
        self.fed = 0
        self.late_rows = 0
        self.matched: pd.DataFrame | None = None
        self._spill: SpillManager | None = None
        if capacity is not None:
            self._spill = SpillManager(capacity, policy, spill_dir, transitions, spill_batch,
                                       records, spill_group)
            self._spill.adopt(self.store, _queue)
            if records is None:  # a caller-kept store is bounded after its next feed
                self._spill.enforce(self.store, self._partition_columns(self.store.frame))
        elif records is not None:
            raise ValueError("records= needs a capacity (it is where spilled keys go)")
        self._lookback = lookback(self.compiled)
        m = self.compiled.match
        # Only NEXT can read rows that have not arrived yet (CONSUMPTION undoes such rows).
        self._reads_ahead = reads_ahead(m)
        self._lookahead = lookahead(m) or 0

    # ------------------------------------------------------------------ public
    def feed(self, batch: pd.DataFrame) -> list[Match]:
        """Add a batch; return the matches that became final, by partition key."""
        with query_errors(self.compiled.text), _gc_paused():
            return self._feed(batch, table=False)[0]

    def flush(self) -> list[Match]:
        """End of input: settle every partition and return the remaining matches."""
        with query_errors(self.compiled.text), _gc_paused():
            return self._flush(table=False)[0]

    def feed_table(self, batch: pd.DataFrame) -> pd.DataFrame:
        """Add a batch; return the query's output rows (as :meth:`CompiledQuery.run` gives
        them: ONE ROW or ALL ROWS PER MATCH, incl. unmatched rows) that became final."""
        with query_errors(self.compiled.text), _gc_paused():
            return self._table(self._feed(batch, table=True)[1], batch)

    def flush_table(self) -> pd.DataFrame:
        """End of input: the remaining output rows (see :meth:`feed_table`)."""
        frame = self.store.frame
        with query_errors(self.compiled.text), _gc_paused():
            return self._table(self._flush(table=True)[1],
                               None if frame is None else frame.drop(columns=[ROW_ID]))

    def buffered_rows(self) -> int:
        """Rows buffered in memory (not counting spilled keys)."""
        return self.store.buffered_rows()

    @property
    def spill_stats(self) -> SpillStats | None:
        """Counters of the bounded store (hits, misses, spilled, ...); None if unbounded."""
        return None if self._spill is None else self._spill.stats

    def close(self) -> None:
        """Delete the spill files (keys on disk are lost: flush first)."""
        if self._spill is not None:
            self._spill.close()

    def __enter__(self) -> IncrementalMatcher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def forget(self, keys: Sequence[tuple[Any, ...]]) -> None:
        """Drop the state of partition ``keys`` (in memory or spilled), as if never seen:
        a caller that feeds a key's whole history again (after a late row) calls this
        first."""
        store = self.store
        gone = [k for k in keys if k in store.partitions]
        for key in gone:
            del store.partitions[key]
        if self._spill is not None:
            for key in gone:
                self._spill._forget(key)
            on_disk = [k for k in keys if self._spill.on_disk(k)]
            if on_disk:
                self._spill.records.take(on_disk)
        if gone and store.frame is not None:
            rows = rows_by_key(store.frame, self._partition_columns(store.frame))
            keep = np.ones(len(store.frame), dtype=bool)
            for key in gone:
                if key in rows:
                    keep[rows[key]] = False
            store.frame = store.frame[keep].reset_index(drop=True)
            store.settled = store.settled[keep]

    def to_bytes(self, *, spilled: bool = True) -> bytes:
        """The state as bytes; spilled keys are read (without moving them) and saved with
        it, so the bytes hold everything -- unless ``spilled=False`` (the caller keeps the
        spilled records itself, see ``records=``)."""
        extra: dict[str, Any] = {"query": self.compiled.text, "fed": self.fed,
                                 "late_rows": self.late_rows}
        if self._spill is not None:
            extra["queue"] = self._spill.queue()
            if spilled and self._spill.spilled_keys():
                extra["spilled"] = self._spill.snapshot()
        return self.store.to_bytes(extra)

    @classmethod
    def from_bytes(cls, data: bytes, query: str | CompiledQuery | None = None,
                   **options: Any) -> IncrementalMatcher:
        """Restore a matcher saved with :meth:`to_bytes` (the query must be the same).
        ``options`` are the bounded-store arguments of the constructor (``capacity``, ...);
        saved spilled keys are read into memory, then spilled again if over capacity."""
        store, extra = PartialMatchStore.load(data)
        records_from_snapshot(store, extra.get("spilled", {}))
        text = extra["query"]
        if query is None:
            query = text
        given = query.text if isinstance(query, CompiledQuery) else query
        if given != text:
            raise ValueError("the saved state belongs to a different query")
        inc = cls(query, store, **options, _queue=extra.get("queue", ()))
        inc.fed = int(extra["fed"])
        inc.late_rows = int(extra["late_rows"])
        return inc

    # ------------------------------------------------------------------ internals
    def _feed(self, batch: pd.DataFrame, table: bool) -> Emitted:
        batch = self.compiled.with_keys(batch)  # PARTITION BY / ORDER BY expressions
        if ROW_ID in batch.columns:
            raise ValueError(f"input column name {ROW_ID!r} is reserved")
        self.compiled._bind(batch)  # report unknown columns against the user's columns
        batch = batch.reset_index(drop=True)  # a copy: the caller's frame is left as is
        batch[ROW_ID] = np.arange(self.fed, self.fed + len(batch), dtype=np.int64)
        self.fed += len(batch)
        if self._spill is None:
            return self._process(batch, open_=True, want_table=table)
        times = time_numbers(batch, self.compiled._bind(batch).order_cols)
        self._spill.before_feed(self.store, self._keys(batch),
                                float(times.min()) if len(times) else np.inf)
        emitted = self._process(batch, open_=True, want_table=table)
        self._spill.enforce(self.store, self._partition_columns(batch))
        return emitted

    def _flush(self, table: bool) -> Emitted:
        if self._spill is not None:
            self._spill.reload_all(self.store)
        emitted: Emitted = [], None
        if self.store.buffered_rows():
            emitted = self._process(None, open_=False, want_table=table)
        if self._spill is not None:
            self._spill.enforce(self.store, self._partition_columns(self.store.frame))
        return emitted

    def _partition_columns(self, like: pd.DataFrame | None) -> list[str]:
        """The PARTITION BY columns as named in frames like ``like``."""
        if like is None or not self.compiled.match.partition_by:
            return []
        return self.compiled._bind(like).partition_cols

    def _keys(self, batch: pd.DataFrame) -> list[tuple[Any, ...]]:
        """The distinct partition keys of ``batch`` (as the matcher makes them)."""
        cols = self._partition_columns(batch)
        if not cols:
            return [()] if len(batch) else []
        rows = zip(*(batch[c].tolist() for c in cols), strict=True)
        return list(dict.fromkeys(tuple(to_python(v) for v in row) for row in rows))

    def _table(self, table: pd.DataFrame | None, like: pd.DataFrame | None) -> pd.DataFrame:
        """``table``, or (if nothing was emitted) an empty result with the columns an input
        like ``like`` gives."""
        if table is not None:
            return table
        if like is None:
            return pd.DataFrame()
        return self.compiled.run(like.iloc[:0])

    def _process(self, batch: pd.DataFrame | None, open_: bool, want_table: bool) -> Emitted:
        """Merge the buffer with ``batch``, match the partitions that got new rows (all of
        them when ``open_`` is False), and keep what future matches may still need."""
        store = self.store
        frames = [f for f in (store.frame, batch) if f is not None and len(f)]
        if not frames:
            self.matched = None
            return [], None
        combined = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
        old_rows = store.buffered_rows()
        bound = self.compiled._bind(combined)
        is_settled = np.concatenate([store.settled, np.zeros(len(combined) - old_rows, bool)])
        is_new = np.arange(len(combined)) >= old_rows
        work, positions, bounds = bound._prepare(combined)
        is_settled, is_new = is_settled[positions], is_new[positions]
        late, first_mark = self._late(bounds, is_settled, is_new)
        if late.any():
            self.late_rows += int(late.sum())
            keep_rows = ~late
            work, positions, bounds = bound._prepare(work[keep_rows].reset_index(drop=True))
            is_settled = is_settled[keep_rows][positions]
            is_new = is_new[keep_rows][positions]
            first_mark = self._late(bounds, is_settled, is_new)[1]
        kernel = self._kernel(bound, work, bounds)
        plain = work.drop(columns=[ROW_ID]) if want_table else None  # the output's input
        spill = self._spill
        if kernel is None or spill is not None:
            matcher: Matcher | None
            matcher, st = bound._matcher(work)
            matcher.open = open_
        else:  # the kernel evaluates the conditions itself; measures read these columns
            matcher = None
            cols: dict[str, Any] = {c: LazyColumn(work[c]) for c in bound.used_columns}
            st = MatchState(cols, self.compiled.variables)
        st.open = open_
        ids = work[ROW_ID].to_numpy()
        names = self.compiled.variables
        keep = np.ones(len(work), dtype=bool)
        settled = np.zeros(len(work), dtype=bool)
        reach = max(self._lookback, 1)
        pcols = [work[c] for c in bound.partition_cols]
        out: list[Match] = []
        parts: list[_Partition] = []
        mode = self.compiled.match.consumption
        progress = None
        if spill is not None:
            assert matcher is not None
            progress = Progress(self.compiled, matcher.conditions.local,
                                time_numbers(work, bound.order_cols))
            within = self.compiled.match.within
            if within is not None and len(work) and spill.window == np.inf:
                spill.window = order_numbers(work[bound.order_cols[0]].iloc[:1], within)[1]
        try:
            # The partitions that got new rows (all of them when closing), from their
            # first unsettled row.
            todo: list[tuple[int, int, int, tuple[Any, ...], PartitionState]] = []
            los = np.asarray(bounds[:-1], dtype=np.int64)
            touched = np.ones(len(los), dtype=bool)
            if open_ and len(los):
                touched = np.logical_or.reduceat(is_new, los)
                untouched = ~np.repeat(touched, np.diff(bounds))
                settled[untouched] = is_settled[untouched]  # untouched partition: as is
            starts = np.where(first_mark >= 0, first_mark + 1, los).tolist()
            firsts = los[touched]  # the first row of each touched partition: its key
            values = [column_values(c.take(firsts)) for c in pcols]
            keys = list(zip(*values, strict=True)) if values else [()] * len(firsts)
            for j, key in zip(np.flatnonzero(touched).tolist(), keys, strict=True):
                state = store.partitions.get(key)
                if state is None:
                    state = store.partitions[key] = PartitionState()
                todo.append((bounds[j], bounds[j + 1], starts[j], key, state))
            next_starts: list[int] | None = None
            kernel_found: KernelResult | None = None
            vector = None if self._reads_ahead else vector_measure_columns(bound)
            pending: list[tuple[tuple[Any, ...], RawMatch]] | None = (
                [] if vector is not None else None)
            consumed = None
            if kernel is not None and mode is not None:
                consumed = self._consume_kernel(kernel, open_, bounds, todo, ids)
            elif kernel is not None:
                advanced = self._advance_kernels(bound, kernel, open_, st, work, bounds, todo,
                                                 ids, names, out, plain)
                if advanced is not None:
                    next_starts, kernel_found = advanced
                else:  # the kernel gave up: the general matcher
                    matcher, st = bound._matcher(work)
                    matcher.open = open_
                    st.open = open_
            for i, (lo, hi, start, key, state) in enumerate(todo):
                st.lo, st.hi = lo, hi
                part = _Partition(key, lo, hi, [])
                if next_starts is not None:
                    start = needed = next_starts[i]
                    assert matcher is None or spill is not None
                elif consumed is not None:
                    found, start, needed = consumed[i]
                    all_rows = self.compiled.match.rows_per_match != "ONE"
                    for raw in found:  # (the kernel left the rows NEXT reads waiting)
                        emitted = self._emit(bound, st, key, raw, ids, names, out, part,
                                             all_rows)
                        assert emitted
                elif mode is not None:
                    assert matcher is not None
                    matcher.begin = lo if state.trimmed == 0 else -1
                    start, needed = self._consume(bound, matcher, st, mode, key, state, start,
                                                  lo, hi, ids, names, out, part)
                else:
                    assert matcher is not None
                    matcher.begin = lo if state.trimmed == 0 else -1
                    start = self._advance(bound, matcher, st, key, state, start, lo, hi, ids,
                                          names, out, part, pending)
                    needed = start
                if part.matches:
                    parts.append(part)
                if spill is not None and progress is not None:
                    first_open = min(start, needed)
                    weight = 0.0
                    if spill.policy == "stpm":  # W = e.t + Δt_i · p_i
                        at = progress.state(first_open, hi)
                        weight = float(progress.times[hi - 1]) + spill.transitions.weight(at)
                    spill.touched(key, weight, float(progress.times[first_open])
                                  if first_open < hi else None)
                cut = max(lo, min(start, needed) - reach)
                keep[lo:cut] = False
                state.trimmed += cut - lo
                if start > lo:
                    settled[start - 1] = True
            if pending:
                assert vector is not None
                self._emit_pending(work, vector, pending, ids, names, out)
        except QueryError as err:
            raise err.with_query(self.compiled.text) from None
        table = self._output(bound, plain, st, parts, kernel_found) if (
            plain is not None and (parts or kernel_found is not None)) else None
        kept = work[keep]  # a new frame: renumber it without another copy
        kept.index = pd.RangeIndex(len(kept))
        store.frame = kept
        store.settled = settled[keep]
        self.matched = work
        return out, table

    def _output(self, bound: _Bound, work: pd.DataFrame, st: MatchState,
                parts: list[_Partition], found: KernelResult | None) -> pd.DataFrame:
        """The output rows of the final matches (and unmatched rows) in ``parts``, or of
        the kernel's ``found`` (built from its arrays as the batch engine builds them)."""
        st.open = False  # these matches are final: their measures no longer wait
        try:
            if found is not None:
                return found.frame()
            if self.compiled.match.rows_per_match == "ONE":
                table = bound._one_row(work, st, parts)
            else:
                table = bound._all_rows(work, st, parts)
            return _select(self.compiled.tree, table)
        except QueryError as err:
            raise err.with_query(self.compiled.text) from None

    @staticmethod
    def _late(bounds: list[int], is_settled: np.ndarray, is_new: np.ndarray) -> tuple[
            np.ndarray, np.ndarray]:
        """New rows that sort before their partition's first settled row, and that row
        per partition (-1: none)."""
        ends = np.asarray(bounds[1:], dtype=np.int64)
        marks = np.flatnonzero(is_settled)
        first_mark = np.full(len(ends), -1, dtype=np.int64)
        first_mark[np.searchsorted(ends, marks, side="right")[::-1]] = marks[::-1]
        row_mark = np.repeat(first_mark, np.diff(bounds)) if len(ends) else first_mark
        late = is_new & (np.arange(len(is_new)) < row_mark)
        return late, first_mark

    def _advance(self, bound: _Bound, matcher: Matcher, st: MatchState, key: tuple[Any, ...],
                 state: PartitionState, start: int, lo: int, hi: int, ids: np.ndarray,
                 names: list[str], out: list[Match], part: _Partition,
                 pending: list[tuple[tuple[Any, ...], RawMatch]] | None = None) -> int:
        """Emit final matches of one partition from ``start``; return the next start.

        A failed attempt is final like a match; with WITH UNMATCHED ROWS its start row is
        then reported as unmatched unless an emitted match covers it (as in
        :meth:`Matcher.partition`). With ``pending`` the matches are added there instead
        (their measures computed later for the whole feed, :meth:`_emit_pending`)."""
        starts = matcher.starts
        unmatched = matcher.report_unmatched
        all_rows = self.compiled.match.rows_per_match != "ONE"
        covered = start + state.covered  # rows below this belong to an emitted match
        while start < hi:
            if starts is not None and not starts[start]:
                if unmatched and start >= covered:
                    part.matches.append(RawMatch(start, 0, unmatched=True))
                start += 1
                continue
            matcher.touched_end = False
            st.touched_end = False
            st.match_number = state.matches + 1
            matcher.timeout = None
            found = matcher._match_at(st, start, lo, hi)
            if matcher.touched_end or st.touched_end:
                break  # wait for more rows
            timed_out = found is None and matcher.timeout is not None
            if found is None and matcher.timeout is not None:
                found = matcher.timeout  # EMIT TIMEOUTS: a partial match cut off by the window
            if found is None:
                if unmatched and start >= covered:
                    part.matches.append(RawMatch(start, 0, unmatched=True))
                start += 1
                continue
            rows, labels, excluded = found
            raw = RawMatch(start, state.matches + 1, rows, labels, excluded, timed_out=timed_out)
            if pending is not None:  # emitted after the loop (cannot wait: no NEXT)
                pending.append((key, raw))
                part.matches.append(raw)
            elif not self._emit(bound, st, key, raw, ids, names, out, part, all_rows):
                break
            state.matches += 1
            if not timed_out:
                if rows:
                    covered = max(covered, rows[-1] + 1)
                elif unmatched:
                    covered = max(covered, start + 1)
            start = start + 1 if timed_out else bound.skip.next_start(raw)
        start = min(start, hi)
        state.covered = max(0, covered - start)
        return start

    def _kernel(self, bound: _Bound, work: pd.DataFrame, bounds: list[int]) -> tuple[
            Any, ...] | None:
        """The compiled kernel's inputs for this feed (see :mod:`cep_core.runtime.kernel`;
        CONSUMPTION: :meth:`~cep_core.runtime.fast._FastBound.consume_inputs`), or None:
        the general matcher runs. Used when the batch engine would use it too, and NEXT
        has constant offsets (it reads rows that have not arrived)."""
        runner = self.compiled._fast
        if runner is None or incremental_route(self.compiled) is not None:
            return None
        found = runner.kernel_for(bound)
        if found is None:
            return None
        fb, automaton = found
        inputs: tuple[Any, ...] | None
        if self.compiled.match.consumption is not None:
            inputs = fb.consume_inputs(work, len(work), bounds)
        else:
            inputs = fb.kernel_inputs(work, len(work), bounds)
        if inputs is None:
            return None
        return fb, automaton, *inputs, self._lookahead

    def _consume_kernel(self, kernel: tuple[Any, ...], open_: bool, bounds: list[int],
                        todo: list[tuple[int, int, int, tuple[Any, ...], PartitionState]],
                        ids: np.ndarray) -> list[tuple[list[RawMatch], int, int]]:
        """:meth:`_consume` with the compiled kernel for every partition of ``todo``
        (:func:`cep_core.runtime.fast.consume_partitions`): per partition, the matches
        completed (to emit), the next row to process and the first row the open instances
        still use; the partition states are updated. With NEXT (reaching ``ahead`` rows)
        the last ``ahead`` rows of an open partition wait for the rows after them."""
        _, _, bits, horizon, present, aggs, ahead = kernel
        nparts = len(bounds) - 1
        first = list(bounds[1:])
        emitted = [0] * nparts
        stages: list[list[list[Instance]]] = [[] for _ in range(nparts)]
        where: list[int] = []
        j = 0
        for lo, hi, start, _, state in todo:
            while bounds[j] != lo:
                j += 1
            where.append(j)
            first[j] = start
            emitted[j] = state.matches
            at = {int(ids[i]): i for i in range(lo, hi)} if state.stages else {}
            stages[j] = [[([at[x] for x in rows], list(labels)) for rows, labels in stage]
                         for stage in state.stages]
        mode = self.compiled.match.consumption or ""
        found, left, numbers, stops = consume_partitions(
            mode, len(self.compiled.variables), (bits, horizon, present, aggs), bounds, first,
            emitted, stages, ahead if open_ else 0)
        out = []
        for j, (_, _, _, _, state) in zip(where, todo, strict=True):
            r = stops[j]
            state.matches = numbers[j]
            state.stages = [[([int(ids[x]) for x in rows], list(labels))
                             for rows, labels in stage] for stage in left[j]]
            needed = min((inst[0][0] for stage in left[j] for inst in stage), default=r)
            out.append((found[j], r, min(needed, r)))
        return out

    def _advance_kernels(self, bound: _Bound, kernel: tuple[Any, ...], open_: bool,
                         st: MatchState, work: pd.DataFrame, bounds: list[int],
                         todo: list[tuple[int, int, int, tuple[Any, ...], PartitionState]],
                         ids: np.ndarray, names: list[str], out: list[Match],
                         plain: pd.DataFrame | None
                         ) -> tuple[list[int], KernelResult | None] | None:
        """:meth:`_advance` with the compiled kernel, for every partition of ``todo``
        (``lo, hi, start, key, state``) in one call: it runs each partition's attempts from
        ``start`` up to the first one that waits for more rows, and the matches before it
        are emitted, with vectorisable measures computed over all of them at once
        (:func:`cep_core.runtime.fast.match_measure_values`). Returns the next start of
        each partition, or None if the kernel gave up (too many threads with aggregates in
        DEFINE; nothing was emitted). With NEXT (reaching ``ahead`` rows), the kernel does
        not match the last ``ahead`` rows of an open partition: a match it finds and its
        measures read only rows that have arrived, so it never waits. With ``plain`` (the
        rows of ``work`` without the feed numbers: output rows are wanted) nothing goes to
        ``out``: the matches and unmatched rows are returned as a
        :class:`~cep_core.runtime.fast.KernelResult` (None: none), whose ``frame`` builds
        the output rows from the arrays as the batch engine does."""
        fb, automaton, bits, horizon, aggs, ahead = kernel
        unmatched = self.compiled.match.rows_per_match == "ALL UNMATCHED"
        first = list(bounds[1:])
        covered = list(first)
        begin = [-1] * len(first)
        base = [0] * len(first)  # matches emitted before, per partition
        where: dict[int, int] = {}  # partition index in bounds -> index in todo
        j = 0
        for t, (lo, _, start, _, state) in enumerate(todo):
            while bounds[j] != lo:
                j += 1
            where[j] = t
            first[j] = start
            covered[j] = start + state.covered
            begin[j] = lo if state.trimmed == 0 else -1
            base[j] = state.matches
        o_start, o_end, number, o_unm, o_lab, bad, o_tmo, stops = run_kernel(
            automaton, bits, bounds, horizon, bound.skip, unmatched, first=first,
            covered=covered, begin=begin, numbers=base, open_=open_,
            selection=self.compiled.match.selection,
            aggs=aggs, ahead=ahead, present=fb.present(work) if automaton.negation else None,
            timeouts=bool(self.compiled.match.emit_timeouts))
        if bad == TOO_MANY_THREADS:
            return None  # nothing emitted yet: the general matcher runs this feed
        part_of = np.searchsorted(np.asarray(bounds[1:], dtype=np.int64), o_start,
                                  side="right")
        if bad >= 0:  # an invalid AFTER MATCH SKIP target: raise the general matcher's error
            raw = raw_matches(o_start[bad:bad + 1], o_end[bad:bad + 1], number[bad:bad + 1],
                              o_unm[bad:bad + 1],
                              o_lab[len(o_lab) - int(o_end[bad] - o_start[bad]):], automaton,
                              o_tmo[bad:bad + 1])[0]
            bound.skip.next_start(raw)
            raise AssertionError("unreachable")  # pragma: no cover
        ok = ~o_unm
        m_start, m_end, m_number, m_part = o_start[ok], o_end[ok], number[ok], part_of[ok]
        m_timed = o_tmo[ok]
        label_var = automaton.label_var(o_lab)
        if len(m_start) and plain is None:
            self._emit_all(bound, fb, st, work, todo, where, m_start, m_end, m_number, m_part,
                           label_var, automaton.label_excluded(o_lab), ids, names, out,
                           m_timed)
        # per partition: matches emitted (timed-out partial matches too: they are
        # numbered), rows covered by a match (not by those), the next start
        counts = np.bincount(m_part, minlength=len(first))
        reach = np.where(m_timed, -1, np.where(m_end > m_start, m_end,
                                               m_start + 1 if unmatched else -1))
        cover = np.full(len(first), -1, dtype=np.int64)
        np.maximum.at(cover, m_part, reach)
        found = None
        if plain is not None and len(o_start):
            found = KernelResult(
                fb, plain, work, np.arange(len(work)), bounds,
                (o_start, o_end, number, o_unm, o_lab, automaton, row_partitions(bounds), o_tmo),
                (m_start, m_end, m_number, label_var, automaton.label_excluded(o_lab)))
        nexts: list[int] = []
        stop_at, count_of, cover_to = stops.tolist(), counts.tolist(), cover.tolist()
        for j, t in where.items():
            _, hi, start, _, state = todo[t]
            next_start = min(stop_at[j], hi)
            state.matches += count_of[j]
            state.covered = max(0, max(start + state.covered, cover_to[j]) - next_start)
            nexts.append(next_start)
        return nexts, found

    def _emit_all(self, bound: _Bound, fb: Any, st: MatchState, work: pd.DataFrame,
                  todo: list[tuple[int, int, int, tuple[Any, ...], PartitionState]],
                  where: dict[int, int], start: np.ndarray, end: np.ndarray,
                  number: np.ndarray, part: np.ndarray, label_var: np.ndarray,
                  excluded: np.ndarray, ids: np.ndarray, names: list[str],
                  out: list[Match], timed: np.ndarray) -> None:
        """Emit the kernel's matches (arrays over matches, in partition order; the
        variable and exclusion flag of every row ``start..end-1``, concatenated; variable
        -1: a row skipped under SKIP TILL ... MATCH; ``timed``: which are timed-out
        partial matches, EMIT TIMEOUTS) as Match objects, their measures vectorised when
        the plan allows, else per match."""
        all_rows = self.compiled.match.rows_per_match != "ONE"
        measure_names = bound.measure_names
        key_of = {j: todo[t][3] for j, t in where.items()}
        keys = [key_of[j] for j in part.tolist()]
        numbers = number.tolist()
        firsts, ends = start.tolist(), end.tolist()
        offsets = np.zeros(len(start) + 1, dtype=np.int64)
        np.cumsum(end - start, out=offsets[1:])
        # tuples sliced once per match (a tuple's slice is a tuple)
        row_ids = tuple(ids.tolist())
        lab_name = tuple(np.array(names, dtype=object)[label_var].tolist())
        skipped = label_var < 0
        if excluded.any() or skipped.any():  # rows inside {- -} and skipped rows are
            shown = (~excluded & ~skipped).tolist()  # left out of Match.rows/labels
            spans = list(zip(firsts, ends, offsets[:-1].tolist(), strict=True))
            rows = [tuple(row_ids[a + i] for i in range(b - a) if shown[o + i])
                    for a, b, o in spans]
            labels = [tuple(lab_name[o + i] for i in range(b - a) if shown[o + i])
                      for a, b, o in spans]
        else:
            rows = list(map(row_ids.__getitem__, map(slice, firsts, ends)))
            edges = offsets.tolist()
            labels = list(map(lab_name.__getitem__, map(slice, edges[:-1], edges[1:])))
        measures: Iterable[dict[str, Any]]
        if fb.vector_measures is not None:
            columns = []
            for values, missing in match_measure_values(fb, work, start, end, number,
                                                        label_var):
                vals = column_values(values)
                if missing is not None:
                    for k in np.flatnonzero(missing).tolist():
                        vals[k] = None
                columns.append(vals)
            per_match = zip(*columns, strict=True) if columns else repeat((), len(firsts))
            measures = map(dict, map(zip, repeat(measure_names), per_match))
        else:
            measures = []
            lab_vars = label_var.tolist()
            flags = excluded.tolist()
            for a, b, o, num, j, tmo in zip(firsts, ends, offsets[:-1].tolist(), numbers,
                                            part.tolist(), timed.tolist(), strict=True):
                st.lo, st.hi = todo[where[j]][0], todo[where[j]][1]
                kept = [i for i in range(b - a) if lab_vars[o + i] >= 0]
                raw = RawMatch(a, num, [a + i for i in kept], [lab_vars[o + i] for i in kept],
                               [flags[o + i] for i in kept], timed_out=tmo)
                values = bound._measures_at(st, raw, len(kept))
                if all_rows:  # RUNNING measures at each row, as the general path
                    for i in range(len(kept)):
                        bound._measures_at(st, raw, i + 1)
                measures.append(dict(zip(measure_names, values, strict=True)))
        out.extend(matches(keys, numbers, rows, labels, measures, timed.tolist()))

    def _emit_pending(self, work: pd.DataFrame,
                      vector: tuple[list[Any], list[str | None]],
                      pending: list[tuple[tuple[Any, ...], RawMatch]], ids: np.ndarray,
                      names: list[str], out: list[Match]) -> None:
        """Emit the general matcher's matches of a feed with their measures computed over
        all of them at once (:func:`cep_core.runtime.fast.measure_values`)."""
        raws = [raw for _, raw in pending]
        length = np.fromiter((len(r.rows) for r in raws), dtype=np.int64, count=len(raws))
        rows = np.fromiter(chain.from_iterable(r.rows for r in raws), dtype=np.int64,
                           count=int(length.sum()))
        labels = np.fromiter(chain.from_iterable(r.labels for r in raws), dtype=np.int64,
                             count=len(rows))
        number = np.fromiter((r.number for r in raws), dtype=np.int64, count=len(raws))
        columns = []
        for values, missing in measure_values(*vector, self.compiled.variables, work,
                                              np.zeros(len(raws), dtype=np.int64),
                                              length, number, labels, rows):
            vals = column_values(values)
            if missing is not None:
                for k in np.flatnonzero(missing).tolist():
                    vals[k] = None
            columns.append(vals)
        measure_names = [me.name for me in self.compiled.match.measures]
        measures = [dict(zip(measure_names, v, strict=True))
                    for v in zip(*columns, strict=True)] if columns else [
            {} for _ in raws]
        row_ids = ids.tolist()
        for (key, raw), values in zip(pending, measures, strict=True):
            kept = [(r, v) for r, v, x in zip(raw.rows, raw.labels, raw.excluded,
                                              strict=True) if not x]
            out.append(Match(key, raw.number, tuple(row_ids[r] for r, _ in kept),
                             tuple(names[v] for _, v in kept), values, raw.timed_out))

    @staticmethod
    def _emit(bound: _Bound, st: MatchState, key: tuple[Any, ...], raw: RawMatch,
              ids: np.ndarray, names: list[str], out: list[Match], part: _Partition,
              all_rows: bool) -> bool:
        """Compute the measures of ``raw`` and emit it, unless they read rows that have not
        arrived yet (then return False: the match must wait)."""
        values = bound._measures_at(st, raw, len(raw.rows))
        if all_rows:  # RUNNING measures at each output row may read other rows
            for i in range(len(raw.rows)):
                bound._measures_at(st, raw, i + 1)
        if st.touched_end:
            return False
        kept = [(r, v) for r, v, x in zip(raw.rows, raw.labels, raw.excluded, strict=True)
                if not x]
        out.append(Match(key, raw.number, tuple(int(ids[r]) for r, _ in kept),
                         tuple(names[v] for _, v in kept),
                         dict(zip(bound.measure_names, values, strict=True)), raw.timed_out))
        part.matches.append(raw)
        return True

    def _consume(self, bound: _Bound, matcher: Matcher, st: MatchState, mode: str,
                 key: tuple[Any, ...], state: PartitionState, start: int, lo: int, hi: int,
                 ids: np.ndarray, names: list[str], out: list[Match],
                 part: _Partition) -> tuple[int, int]:
        """CONSUMPTION: advance the partition's open instances over rows ``start..hi-1``,
        emitting the matches they complete. A row whose DEFINE or whose matches' MEASURES
        read rows that have not arrived yet (NEXT) is undone and waits. Returns the next
        row to process and the first row the open instances still use."""
        where = {int(ids[i]): i for i in range(lo, hi)} if state.stages else {}
        stages: list[list[Instance]] | None = [
            [([where[x] for x in rows], list(labels)) for rows, labels in stage]
            for stage in state.stages] or None
        consumer = Consumer(matcher, st, mode, stages, state.matches)
        all_rows = self.compiled.match.rows_per_match != "ONE"
        r = start
        careful = st.open and self._reads_ahead
        while r < hi:
            saved = consumer.snapshot() if careful else None
            n_out, n_part = len(out), len(part.matches)
            st.touched_end = False
            found = consumer.step(r)
            ok = not st.touched_end
            for raw in found if ok else []:
                if not self._emit(bound, st, key, raw, ids, names, out, part, all_rows):
                    ok = False
                    break
            if not ok:
                assert saved is not None  # st.touched_end is only set when careful
                consumer.restore(saved)
                del out[n_out:]
                del part.matches[n_part:]
                break
            r += 1
        state.matches = consumer.emitted
        state.stages = [[([int(ids[x]) for x in rows], list(labels)) for rows, labels in stage]
                        for stage in consumer.stages]
        needed = min((inst[0][0] for stage in consumer.stages for inst in stage), default=r)
        return r, min(needed, r)
