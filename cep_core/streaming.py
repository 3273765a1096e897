"""Incremental matching: feed batches, get each match once it is final.

:class:`IncrementalMatcher` keeps, per partition key, the rows a future match may still use
(:mod:`cep_core.partial_matches`). Each ``feed`` merges a batch with the buffered rows of
the keys it touches, sorts and evaluates the row-local conditions once for all of them, and
runs the matcher from each partition's next unsettled row. A match (or a failed attempt) is
final only if it did not depend on rows that have not arrived yet -- the matcher reports
when an attempt wanted a row past the end of the buffer, unless the WITHIN window has
already closed. ``flush`` treats the input as complete. Feeding a table in order, in any
batch sizes, and then flushing gives the same matches as :meth:`CompiledQuery.find_matches`
on the whole table.

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

from typing import Any

import numpy as np
import pandas as pd  # type: ignore[import-untyped, unused-ignore]

from . import ast
from .api import CompiledQuery, Match, _Bound, compile_query
from .errors import QueryError
from .expressions import MatchState, to_python, walk
from .matcher import Matcher, RawMatch
from .partial_matches import ROW_ID, PartialMatchStore, PartitionState


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


def _check_streamable(compiled: CompiledQuery) -> None:
    """Reject the lakecep extensions that incremental matching does not implement yet."""
    m = compiled.match
    if m.consumption is not None:
        what = f"CONSUMPTION {m.consumption}"
        raise QueryError(f"{what} is not supported by IncrementalMatcher yet; run the query "
                         "in batch (match_recognize / CompiledQuery.find_matches)",
                         *m.consumption_pos, query=compiled.text)


class IncrementalMatcher:
    """Match a query over a stream of batches (ONE ROW PER MATCH results as Match objects).

    ``Match.rows`` are global feed numbers: the n-th row ever fed (0-based, counting every
    batch in order). Rows of a partition must arrive in ORDER BY order across batches;
    rows that sort before rows already settled are dropped and counted in ``late_rows``.
    """

    def __init__(self, query: str | CompiledQuery, store: PartialMatchStore | None = None):
        self.compiled = query if isinstance(query, CompiledQuery) else compile_query(query)
        _check_streamable(self.compiled)
        self.store = store or PartialMatchStore()
        self.fed = 0
        self.late_rows = 0
        self._lookback = lookback(self.compiled)

    # ------------------------------------------------------------------ public
    def feed(self, batch: pd.DataFrame) -> list[Match]:
        """Add a batch; return the matches that became final, by partition key."""
        if ROW_ID in batch.columns:
            raise ValueError(f"input column name {ROW_ID!r} is reserved")
        self.compiled._bind(batch)  # report unknown columns against the user's columns
        batch = batch.reset_index(drop=True).assign(
            **{ROW_ID: np.arange(self.fed, self.fed + len(batch), dtype=np.int64)})
        self.fed += len(batch)
        return self._process(batch, open_=True)

    def flush(self) -> list[Match]:
        """End of input: settle every partition and return the remaining matches."""
        if self.store.buffered_rows() == 0:
            return []
        return self._process(None, open_=False)

    def buffered_rows(self) -> int:
        return self.store.buffered_rows()

    def to_bytes(self) -> bytes:
        return self.store.to_bytes({"query": self.compiled.text, "fed": self.fed,
                                    "late_rows": self.late_rows})

    @classmethod
    def from_bytes(cls, data: bytes, query: str | CompiledQuery | None = None,
                   ) -> IncrementalMatcher:
        """Restore a matcher saved with :meth:`to_bytes` (the query must be the same)."""
        store, extra = PartialMatchStore.load(data)
        text = extra["query"]
        if query is None:
            query = text
        given = query.text if isinstance(query, CompiledQuery) else query
        if given != text:
            raise ValueError("the saved state belongs to a different query")
        inc = cls(query, store)
        inc.fed = int(extra["fed"])
        inc.late_rows = int(extra["late_rows"])
        return inc

    # ------------------------------------------------------------------ internals
    def _process(self, batch: pd.DataFrame | None, open_: bool) -> list[Match]:
        """Merge the buffer with ``batch``, match the partitions that got new rows (all of
        them when ``open_`` is False), and keep what future matches may still need."""
        store = self.store
        frames = [f for f in (store.frame, batch) if f is not None and len(f)]
        if not frames:
            return []
        combined = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
        old_rows = store.buffered_rows()
        bound = self.compiled._bind(combined)
        is_settled = np.concatenate([store.settled, np.zeros(len(combined) - old_rows, bool)])
        is_new = np.arange(len(combined)) >= old_rows
        work, positions, bounds = bound._prepare(combined)
        is_settled, is_new = is_settled[positions], is_new[positions]
        late = self._late(bounds, is_settled, is_new)
        if late.any():
            self.late_rows += int(late.sum())
            keep_rows = ~late
            work, positions, bounds = bound._prepare(work[keep_rows].reset_index(drop=True))
            is_settled = is_settled[keep_rows][positions]
            is_new = is_new[keep_rows][positions]
        matcher, st = bound._matcher(work)
        matcher.open = open_
        st.open = open_
        ids = work[ROW_ID].to_numpy()
        names = self.compiled.variables
        keep = np.ones(len(work), dtype=bool)
        settled = np.zeros(len(work), dtype=bool)
        reach = max(self._lookback, 1)
        pcols = [work[c] for c in bound.partition_cols]
        out: list[Match] = []
        try:
            for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
                marks = np.flatnonzero(is_settled[lo:hi])
                start = lo + (int(marks[0]) + 1 if len(marks) else 0)
                if open_ and not is_new[lo:hi].any():
                    settled[lo:hi] = is_settled[lo:hi]  # untouched partition: keep as is
                    continue
                key = tuple(to_python(c.iat[lo]) for c in pcols)
                state = store.partitions.get(key)
                if state is None:
                    state = store.partitions[key] = PartitionState()
                matcher.begin = lo if state.trimmed == 0 else -1
                st.lo, st.hi = lo, hi
                start = self._advance(bound, matcher, st, key, state, start, lo, hi, ids,
                                      names, out)
                cut = max(lo, start - reach)
                keep[lo:cut] = False
                state.trimmed += cut - lo
                if start > lo:
                    settled[start - 1] = True
        except QueryError as err:
            raise err.with_query(self.compiled.text) from None
        store.frame = work[keep].reset_index(drop=True)
        store.settled = settled[keep]
        return out

    @staticmethod
    def _late(bounds: list[int], is_settled: np.ndarray, is_new: np.ndarray) -> np.ndarray:
        """New rows that sort before their partition's last settled row."""
        late = np.zeros(len(is_new), dtype=bool)
        for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
            marks = np.flatnonzero(is_settled[lo:hi])
            if len(marks):
                late[lo:lo + int(marks[0])] = is_new[lo:lo + int(marks[0])]
        return late

    def _advance(self, bound: _Bound, matcher: Matcher, st: MatchState, key: tuple[Any, ...],
                 state: PartitionState, start: int, lo: int, hi: int, ids: np.ndarray,
                 names: list[str], out: list[Match]) -> int:
        """Emit final matches of one partition from ``start``; return the next start."""
        starts = matcher.starts
        while start < hi:
            if starts is not None and not starts[start]:
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
                start += 1
                continue
            rows, labels, excluded = found
            raw = RawMatch(start, state.matches + 1, rows, labels, excluded, timed_out=timed_out)
            values = bound._measures_at(st, raw, len(rows))
            if st.touched_end:
                break
            state.matches += 1
            kept = [(r, v) for r, v, x in zip(rows, labels, excluded, strict=True) if not x]
            out.append(Match(key, raw.number, tuple(int(ids[r]) for r, _ in kept),
                             tuple(names[v] for _, v in kept),
                             dict(zip(bound.measure_names, values, strict=True)), timed_out))
            start = start + 1 if timed_out else bound.skip.next_start(raw)
        return min(start, hi)
