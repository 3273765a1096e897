"""The fast path: vectorised DEFINE evaluation plus an array-based matcher.

For a query whose DEFINE conditions read only the current row, or the current row's
physical neighbours through ``PREV``/``NEXT`` with constant offsets, every condition is
evaluated once over the whole partition-sorted table with pandas/numpy (``PREV(x, k)``
becomes the column ``x`` shifted by ``k`` rows within each partition, NULL beyond it).
Whether a row satisfies a variable then no longer depends on the match, and the pattern
matcher becomes a function of a few boolean arrays.

The pattern must be a concatenation of *items*, each a single variable with any quantifier
(``A``, ``B+``, ``C*?``, ``D{2,5}``, ...). For such a pattern the standard's preferred
match from a start row is the lexicographically preferred vector of iteration counts
``(c1, c2, ...)``: the backtracking matcher explores every path with more (greedy) or fewer
(reluctant) iterations of item 1 before the others, and so on. Because conditions are
row-local, "items i..k can match starting at position p" (``F_i[p]``) depends on ``p``
only, so it is computed right to left over the whole table with prefix scans:

* ``run_v[p]``: the number of consecutive rows from ``p`` that satisfy ``v`` (partitions are
  separated by a virtual row that satisfies nothing, so runs never cross them);
* item ``i`` at ``p`` may take ``c`` rows for ``low <= c <= min(high, run[p])`` when
  ``F_{i+1}[p + c]``; greedy takes the largest such ``c`` (the last true ``F_{i+1}`` at or
  before ``p + cmax``), reluctant the smallest (the next true at or after ``p + low``).

Every start row's preferred match follows by gathering ``choice_i`` along the path. The
AFTER MATCH SKIP chain (which start rows are actually tried) only visits matches, in a
short Python loop. MEASURES made of column references, ``FIRST``/``LAST`` with constant
offsets, ``COUNT(*)``, ``CLASSIFIER()`` and ``MATCH_NUMBER()`` are computed from the match
segments with numpy; any other measure is evaluated per match with the general compiled
expressions, so the result is identical to the general matcher's.

The planner (which queries are eligible, the items and vectorised measures) is
:mod:`cep_core.compile.fast_plan`; this module executes its plan.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd  # type: ignore[import-untyped, unused-ignore]

from ..compile.expressions import Scope
from ..compile.fast_plan import FastMeasure, FastPlan, vector_measures
from ..compile.nfa import Automaton
from ..compile.state import MatchState
from ..compile.values import column_values, to_python
from ..errors import QueryError
from ..language import ast
from .matcher import Partition, RawMatch, SkipPolicy
from .output import Match, select
from .time_axis import is_duration, is_number, is_timestamp, ns_and_missing, within_seconds
from .values import LazyColumn
from .vectorized import evaluate_condition

if TYPE_CHECKING:
    from ..api import Bound


class FastRunner:
    """A fast plan (:class:`cep_core.compile.fast_plan.FastPlan`) run over DataFrames,
    bound once per input schema."""

    def __init__(self, plan: FastPlan):
        self.plan = plan
        self._bound: dict[tuple[str, ...], _FastBound] = {}

    def _fast_bound(self, bound: Bound) -> _FastBound:
        fb = self._bound.get(bound.columns)
        if fb is None:
            fb = self._bound[bound.columns] = _FastBound(self.plan, bound)
        return fb

    def kernel_for(self, bound: Bound) -> tuple[_FastBound, Automaton] | None:
        """For the incremental matcher: the bound plan and the automaton, if it builds."""
        automaton = self.plan.automaton()
        return None if automaton is None else (self._fast_bound(bound), automaton)

    # ------------------------------------------------------------------ entry points
    def find_matches(self, bound: Bound, df: pd.DataFrame) -> list[Match] | None:
        """Matches as :meth:`CompiledQuery.find_matches` returns them, or None when this
        input needs the general path (a condition raised an error)."""
        res = self._fast_bound(bound).match(df)
        if res is None:
            return None
        return res.matches()

    def run(self, bound: Bound, df: pd.DataFrame) -> pd.DataFrame | None:
        res = self._fast_bound(bound).match(df)
        if res is None:
            return None
        return res.frame()


# ---------------------------------------------------------------------- binding
_SHIFT_PREFIX = "\x00shift"


class _FastBound:
    """A fast plan bound to one input schema."""

    def __init__(self, plan: FastPlan, bound: Bound):
        self.plan = plan
        self.bound = bound
        q = plan.q
        self.shifts: dict[str, tuple[str, int]] = {}  # helper column -> (column, shift)
        self.conditions: list[ast.Expr | None] = [None] * len(q.variables)
        index = {n: i for i, n in enumerate(q.variables)}
        scopes = {v: Scope(bound.columns, q._sets, "DEFINE", v) for v in q.variables}
        scope = Scope(bound.columns, q._sets, "DEFINE")
        for d in q.match.defines:
            cond = plan.local[d.var]
            self.conditions[index[d.var]] = None if cond is None else self._rewrite(
                cond, scopes[d.var], 0)
        # aggregate conditions (compiled kernel): the column aggregated, the other side
        self.agg_columns = [None if a.column is None else scope.column(a.column)
                            for a in plan.agg_checks]
        owner = [scopes[q.variables[a.owner]] if a.owner >= 0 else scope
                 for a in plan.agg_checks]
        self.agg_others = [self._rewrite(a.other, sc, 0)
                           for a, sc in zip(plan.agg_checks, owner, strict=True)]
        self.agg_extras = [None if a.extra is None else self._rewrite(a.extra, sc, 0)
                           for a, sc in zip(plan.agg_checks, owner, strict=True)]
        self.agg_factors = [None if a.factor is None else self._rewrite(a.factor, sc, 0)
                            for a, sc in zip(plan.agg_checks, owner, strict=True)]
        # an aggregate's FILTER: a condition on the aggregated row (qualifiers dropped)
        self.agg_filters = [None if a.filter is None else self._rewrite(a.filter, scope, 0)
                            for a in plan.agg_checks]
        within = q.match.within
        self.window_column = bound.order_cols[0] if within is not None else None
        self.needed = list(dict.fromkeys(
            [*bound.used_columns, *(name for name, _ in self.shifts.values()),
             *([] if self.window_column is None else [self.window_column])]))
        self.measure_columns: list[str | None] = []
        # The vectorisable measures (the kernel path decides here, the items path in plan)
        self.vector_measures = plan.measures if plan.items is not None else vector_measures(q)
        if self.vector_measures is not None:
            mscope = Scope(bound.columns, q._sets, "MEASURES")
            for me in self.vector_measures:
                self.measure_columns.append(
                    mscope.column(me.column) if me.column is not None else None)

    def _rewrite(self, e: ast.Expr, scope: Scope, shift: int) -> ast.Expr:
        """``e`` with PREV/NEXT replaced by references to shifted helper columns, and
        CLASSIFIER() (the current row's) by the name of the variable defined (NEXT's:
        NULL)."""
        if (isinstance(e, ast.Call) and e.name == "CLASSIFIER" and not e.args
                and shift >= 0 and scope.define_var is not None):
            # a later row is not matched yet: NULL
            return ast.Literal(scope.define_var if shift == 0 else None, e.pos)
        if isinstance(e, ast.Call) and e.name in ("PREV", "NEXT"):
            offset = int(e.args[1].value) if len(e.args) > 1 else 1  # type: ignore[attr-defined]
            step = -offset if e.name == "PREV" else offset
            return self._rewrite(e.args[0], scope, shift + step)
        if isinstance(e, ast.Column):
            name = scope.column(e)
            if shift == 0:
                return ast.Column(name, None, True, e.pos)
            helper = f"{_SHIFT_PREFIX}{shift}\x00{name}"
            self.shifts[helper] = (name, shift)
            return ast.Column(helper, None, True, e.pos)
        if isinstance(e, ast.Unary):
            return ast.Unary(e.op, self._rewrite(e.operand, scope, shift), e.pos)
        if isinstance(e, ast.Binary):
            return ast.Binary(e.op, self._rewrite(e.left, scope, shift),
                              self._rewrite(e.right, scope, shift), e.pos)
        if isinstance(e, ast.IsNull):
            return ast.IsNull(self._rewrite(e.operand, scope, shift), e.negated, e.pos)
        if isinstance(e, ast.Between):
            return ast.Between(self._rewrite(e.operand, scope, shift),
                               self._rewrite(e.low, scope, shift),
                               self._rewrite(e.high, scope, shift), e.negated, e.pos)
        if isinstance(e, ast.InList):
            return ast.InList(self._rewrite(e.operand, scope, shift),
                              tuple(self._rewrite(i, scope, shift) for i in e.items),
                              e.negated, e.pos)
        if isinstance(e, ast.Case):
            return ast.Case(
                None if e.operand is None else self._rewrite(e.operand, scope, shift),
                tuple((self._rewrite(c, scope, shift), self._rewrite(v, scope, shift))
                      for c, v in e.whens),
                None if e.default is None else self._rewrite(e.default, scope, shift),
                e.pos)
        if isinstance(e, ast.Cast):
            return ast.Cast(self._rewrite(e.operand, scope, shift), e.type_name, e.pos)
        if isinstance(e, ast.Like):
            return ast.Like(self._rewrite(e.operand, scope, shift),
                            self._rewrite(e.pattern, scope, shift),
                            None if e.escape is None else self._rewrite(e.escape, scope, shift),
                            e.negated, e.pos)
        if isinstance(e, ast.Call):
            return ast.Call(e.name, tuple(self._rewrite(a, scope, shift) for a in e.args),
                            e.semantics, e.pos, e.distinct,
                            None if e.filter is None else self._rewrite(e.filter, scope, shift))
        return e

    # ------------------------------------------------------------------ matching
    def match(self, df: pd.DataFrame) -> _Result | KernelResult | None:
        if self.plan.items is None:
            return self._match_kernel(df)
        bound = self.bound
        work, positions, bounds = prepare(bound, df, self.needed)
        n = len(positions)
        nparts = len(bounds) - 1
        starts_of = np.asarray(bounds[:-1], dtype=np.int64)
        sizes: np.ndarray = np.diff(np.asarray(bounds, dtype=np.int64))
        part_of_row = np.repeat(np.arange(nparts, dtype=np.int64), sizes)
        try:
            masks = self._masks(work, n, starts_of, part_of_row)
        except QueryError:
            return None  # let the general path evaluate (and report) row by row
        # Padded coordinates: row r of partition j sits at r + j; position hi + j is a
        # separator that satisfies no variable, so runs never cross partitions.
        length = n + nparts
        itype = np.int32 if length < 2**31 - 2 else np.int64
        pad_of_row = np.arange(n, dtype=itype) + part_of_row.astype(itype)
        row_of_pad = np.full(length + 1, -1, dtype=itype)
        row_of_pad[pad_of_row] = np.arange(n, dtype=itype)
        idx: np.ndarray = np.arange(length + 1, dtype=itype)
        padded: dict[int, np.ndarray] = {}
        runs: dict[int, np.ndarray] = {}

        def padded_mask(v: int) -> np.ndarray:
            if v not in padded:
                out = np.zeros(length + 1, dtype=bool)
                mask = masks[v]
                out[pad_of_row] = True if mask is None else mask
                padded[v] = out
            return padded[v]

        def run_of(v: int) -> np.ndarray:
            if v not in runs:
                stop = np.where(padded_mask(v), length, idx)
                runs[v] = np.minimum.accumulate(stop[::-1])[::-1] - idx
            return runs[v]

        window: _Window | None = None
        if self.window_column is not None:
            window = _Window.build(work[self.window_column], self.plan.q.match, pad_of_row,
                                   length, itype)
            if window is None:
                return None  # an order column the vectorised window cannot read exactly
        # Right to left: feasible[p] = the remaining items can match from p; choice[p] =
        # the preferred number of rows for the item at p (None: always one row). With a
        # WITHIN window also least_end[p]: the smallest end (one past the last row) of a
        # match of the remaining items from p, and per item what its rest looks like.
        feasible = np.ones(length + 1, dtype=bool)
        all_feasible = True
        least_end: np.ndarray = idx
        choices: list[np.ndarray | None] = []
        rests: list[_Rest] = []
        for it in reversed(self.plan.item_list):
            rest = _Rest(None if all_feasible else feasible, least_end)
            if window is not None:
                rests.append(rest)
            if it.low == 1 and it.high == 1:
                ok = padded_mask(it.var).copy()
                if not all_feasible:
                    ok[:-1] &= feasible[1:]
                ok[-1] = False
                if window is not None:
                    least_end = np.empty_like(idx)
                    least_end[:-1] = rest.least_end[1:]
                    least_end[-1] = length + 1
                feasible, all_feasible = ok, False
                choices.append(None)
                continue
            run = run_of(it.var)
            cmax = run if it.high is None else np.minimum(run, it.high)
            rest.cmax = cmax
            if all_feasible:
                ok = cmax >= it.low
                choice = cmax if it.greedy else np.full(length + 1, it.low, dtype=itype)
                if window is not None:
                    least_end = idx + it.low
            else:
                first_true: np.ndarray | None = None
                if it.greedy:
                    last_true = np.maximum.accumulate(np.where(feasible, idx, -1))
                    rest.last_true = last_true
                    target = last_true[idx + cmax]
                    ok = target >= idx + it.low
                    choice = target - idx
                if not it.greedy or window is not None:
                    first_true = np.minimum.accumulate(
                        np.where(feasible, idx, length + 1)[::-1])[::-1]
                    at = np.minimum(idx + it.low, length)
                    first = first_true[at]
                    reachable = (idx + it.low <= length) & (first <= idx + cmax)
                    if not it.greedy:
                        ok, choice = reachable, first - idx
                    if window is not None:
                        # The fewest rows give the smallest end (least_end is monotone).
                        least_end = np.where(
                            reachable, rest.least_end[np.minimum(first, length)], length + 1)
            feasible, all_feasible = ok, False
            choices.append(choice)
        choices.reverse()
        rests.reverse()
        # Every row where a match starts (if the skip chain tries it), with its segments.
        real = np.zeros(length + 1, dtype=bool)
        real[pad_of_row] = True
        cand = np.flatnonzero(feasible & real).astype(itype)
        if window is not None:
            # A match from s must end inside the window of s: some match does iff the
            # smallest end does.
            cand = cand[window.reaches(cand, least_end[cand])]
        seg_start: list[np.ndarray] = []
        seg_len: list[np.ndarray] = []
        pos: np.ndarray = cand
        for ch in choices:
            c: np.ndarray = np.ones(len(pos), dtype=itype) if ch is None else ch[pos]
            seg_start.append(pos)
            seg_len.append(c)
            pos = pos + c
        ends = pos
        if window is not None:
            over = np.flatnonzero(~window.reaches(cand, ends))
            if len(over):
                # The preferred match overruns the window: the preferred match among those
                # that end inside it (only greedy items choose differently).
                starts = cand[over]
                horizon = window.horizon(starts)
                pos = starts
                for k, (it, ch, rest) in enumerate(zip(self.plan.item_list, choices, rests,
                                                       strict=True)):
                    if ch is None:
                        c = np.ones(len(pos), dtype=itype)
                    elif it.greedy and it.low != it.high:
                        c = rest.greedy_within(pos, horizon)
                    else:
                        c = ch[pos]
                    seg_start[k][over] = pos
                    seg_len[k][over] = c
                    pos = pos + c
                ends[over] = pos
        cand_part = part_of_row[row_of_pad[cand]]
        chosen = self._chain(cand, ends, seg_start, seg_len, cand_part, row_of_pad)
        cand = cand[chosen]
        seg_start = [s[chosen] for s in seg_start]
        seg_len = [c[chosen] for c in seg_len]
        part = part_of_row[row_of_pad[cand]] if len(cand) else np.zeros(0, dtype=np.int64)
        # Match numbers restart at 1 in every partition.
        first_in_part = np.searchsorted(part, np.arange(nparts), side="left")
        number = np.arange(len(cand), dtype=np.int64) - first_in_part[part] + 1
        return _Result(self, df, work, positions, bounds, row_of_pad, cand, seg_start,
                       seg_len, part, number)

    def _match_kernel(self, df: pd.DataFrame) -> KernelResult | None:
        """Any pattern: the compiled automaton over per-row condition bits (see
        :mod:`cep_core.runtime.kernel`); None when this input needs the general path."""
        if self.plan.q.match.consumption is not None:
            return self._match_consume(df)
        automaton = self.plan.automaton()
        if automaton is None:
            return None
        bound = self.bound
        q = self.plan.q
        work, positions, bounds = prepare(bound, df, self.needed)
        n = len(positions)
        inputs = self.kernel_inputs(work, n, bounds)
        if inputs is None:
            return None
        bits, horizon, aggs = inputs
        part_of_row = row_partitions(bounds)
        skip = bound.skip
        timeouts = bool(q.match.emit_timeouts)
        o_start, o_end, o_num, o_unm, o_lab, bad, o_tmo, _ = run_kernel(
            automaton, bits, bounds, horizon, skip, q.match.rows_per_match == "ALL UNMATCHED",
            selection=q.match.selection, aggs=aggs,
            present=self.present(work) if automaton.negation else None, timeouts=timeouts)
        if bad == TOO_MANY_THREADS:
            return None
        if bad >= 0:
            raw = raw_matches(o_start[:bad + 1], o_end[:bad + 1], o_num[:bad + 1],
                               o_unm[:bad + 1], o_lab, automaton, o_tmo[:bad + 1])[-1]
            skip.next_start(raw)  # raises the general matcher's error
            raise AssertionError("unreachable")  # pragma: no cover
        keep = ~o_unm
        arrays = (o_start[keep], o_end[keep], o_num[keep], automaton.label_var(o_lab),
                  automaton.label_excluded(o_lab))
        records = (o_start, o_end, o_num, o_unm, o_lab, automaton, part_of_row, o_tmo)
        return KernelResult(self, df, work, positions, bounds, records, arrays)

    def _match_consume(self, df: pd.DataFrame) -> KernelResult | None:
        """CONSUMPTION (row-local DEFINEs): :func:`cep_core.runtime.kernel.consume`."""
        work, positions, bounds = prepare(self.bound, df, self.needed)
        n = len(positions)
        inputs = self.consume_inputs(work, n, bounds)
        if inputs is None:
            return None
        nparts = len(bounds) - 1
        q = self.plan.q
        found = consume_partitions(q.match.consumption or "", len(q.variables), inputs, bounds,
                                   bounds[:-1], [0] * nparts, [[] for _ in range(nparts)])[0]
        return KernelResult(self, df, work, positions, bounds, None, None, found)

    def consume_inputs(self, work: Any, n: int, bounds: list[int]) -> tuple[
            np.ndarray, np.ndarray | None, np.ndarray | None,
            tuple[np.ndarray, ...] | None] | None:
        """:meth:`kernel_inputs` for CONSUMPTION: the condition bits, with WITHIN the
        window's end row per row and whether the row has an order value, and the
        aggregate conditions."""
        inputs = self.kernel_inputs(work, n, bounds)
        if inputs is None:
            return None
        bits, horizon, aggs = inputs
        return bits, horizon, self.present(work), aggs

    def present(self, work: Any) -> np.ndarray | None:
        """With WITHIN, whether each of the sorted rows ``work`` has an order value (after
        :meth:`kernel_inputs` succeeded on them); else None."""
        if self.window_column is None:
            return None
        values = _order_values(work[self.window_column])
        assert values is not None  # kernel_inputs read it
        return ~values[1]

    def kernel_inputs(self, work: Any, n: int, bounds: list[int]) -> tuple[
            np.ndarray, np.ndarray | None, tuple[np.ndarray, ...] | None] | None:
        """The kernel's per-row inputs over sorted rows ``work`` (a mapping of the needed
        columns) with partitions ``bounds``: the condition bits, with WITHIN the end row of
        each start row's window, and the aggregate conditions' arrays (see
        :func:`cep_core.runtime.kernel.run`; None: no aggregate conditions); None when
        this input needs the general path."""
        nparts = len(bounds) - 1
        starts_of = np.asarray(bounds[:-1], dtype=np.int64)
        part_of_row = row_partitions(bounds)
        try:
            k = len(self.conditions)
            masks = self._masks(work, n, starts_of, part_of_row,
                                self.conditions + self.agg_filters)
            aggs = None if not self.plan.agg_checks else self._agg_inputs(
                self._column_reader(work, n, starts_of, part_of_row), n, masks[k:])
            masks = masks[:k]
        except QueryError:
            return None  # let the general path evaluate (and report) row by row
        except _NotSimple:
            return None  # an aggregate over values float64 does not hold exactly
        bits = row_bits(masks, n)
        if self.window_column is None:
            return bits, None, aggs
        pad_of_row = np.arange(n, dtype=np.int64) + part_of_row
        window = _Window.build(work[self.window_column], self.plan.q.match, pad_of_row,
                               n + nparts, np.int64)
        if window is None:
            return None
        return (bits, np.asarray(window.horizon(pad_of_row), dtype=np.int64) - part_of_row,
                aggs)

    def _agg_inputs(self, column: Any, n: int, filters: list[np.ndarray | None]
                    ) -> tuple[np.ndarray, ...]:
        """The aggregate conditions as the kernel takes them (``filters``: per condition
        the rows its FILTER keeps, None: all); raises _NotSimple when a value is not a
        number float64 holds exactly (integers whose running sums could pass 2**53)."""
        from . import kernel

        checks = self.plan.agg_checks
        k = len(checks)
        val = np.zeros((k, n), dtype=np.float64)
        ok = np.ones((k, n), dtype=bool)
        rhs = np.zeros((k, n), dtype=np.float64)
        rhs_ok = np.ones((k, n), dtype=bool)
        # (one column when no condition has an addend / a factor: the kernel then reads
        # neither per row)
        extra = np.zeros((k, n if any(e is not None for e in self.agg_extras) else 1))
        factor = np.ones((k, n if any(f is not None for f in self.agg_factors) else 1))
        n_vars = len(self.plan.q.variables)
        for i, (name, other, added, scale, check) in enumerate(zip(
                self.agg_columns, self.agg_others, self.agg_extras, self.agg_factors, checks,
                strict=True)):
            # integers must stay exact in float64 (with an addend: half the range, so
            # the sum does too); sums must, navigation only reads single values
            exact = _EXACT if added is None else _EXACT // 2
            biggest = float(n)  # COUNT
            # the value is an integer (Python: int)
            whole = check.func in ("COUNT", "MATCH_NUMBER")
            if name is not None:
                values, null = column(name)
                size = np.max if check.func in ("FIRST", "LAST", "MIN", "MAX") else np.sum
                largest = float(size(np.abs(values.astype(np.float64)))) if len(values) else 0
                if values.dtype.kind in "iu" and largest >= exact:
                    raise _NotSimple
                if check.func != "COUNT":
                    biggest = largest
                    whole = values.dtype.kind in "iu" and check.func != "AVG"
                val[i] = values
                ok[i] = ~null
            if filters[i] is not None:
                ok[i] &= filters[i]  # rows the FILTER drops are not aggregated
            if scale is not None:
                f, f_null = _row_numbers(scale, column, n, exact)
                # int * int is exact in Python: in float64 while the product stays below
                # the bound (a float on either side: IEEE, as Python multiplies)
                if whole and n and f.dtype.kind in "iu" and (
                        biggest * float(np.abs(f).max()) >= exact):
                    raise _NotSimple
                factor[i] = f
                rhs_ok[i] &= ~f_null
            y, y_null = _row_numbers(other, column, n, exact)
            rhs[i] = y
            rhs_ok[i] &= ~y_null  # (a NULL factor above: NULL too)
            if added is not None:
                x, x_null = _row_numbers(added, column, n, exact)
                extra[i] = x if check.extra_sign == 1 else -x
                rhs_ok[i] &= ~x_null  # a NULL addend: the comparison is NULL
        over = [sum(1 << v for v in (c.over if c.over is not None else range(n_vars)))
                for c in checks]
        return (val, ok, np.asarray(over, dtype=np.uint64),
                np.asarray([kernel.AGG_FUNCS[c.func] for c in checks], dtype=np.int64),
                np.asarray([c.owner for c in checks], dtype=np.int64),
                np.asarray([kernel.AGG_OPS.index(c.op) for c in checks], dtype=np.int64),
                rhs, rhs_ok, np.asarray([c.sign for c in checks], dtype=np.float64), extra,
                factor)

    def _column_reader(self, work: dict[str, pd.Series], n: int, starts_of: np.ndarray,
                       part_of_row: np.ndarray) -> Any:
        """``column(name)``: a numeric input or shifted helper column as (values, NULL
        mask), for :func:`_np_bool`; raises _NotSimple for other columns."""
        rows = np.arange(n, dtype=np.int64)
        part_lo = starts_of[part_of_row] if n else rows
        part_hi = np.append(starts_of[1:], n)[part_of_row] if n else rows
        cache: dict[tuple[str, int], tuple[np.ndarray, np.ndarray]] = {}

        def column(name: str) -> tuple[np.ndarray, np.ndarray]:
            if name.startswith(_SHIFT_PREFIX):
                source, shift = self.shifts[name]
            else:
                source, shift = name, 0
            key = (source, shift)
            if key not in cache:
                cache[key] = _np_column(work[source], shift, rows, part_lo, part_hi)
            return cache[key]

        return column

    def _masks(self, work: dict[str, pd.Series], n: int, starts_of: np.ndarray,
               part_of_row: np.ndarray, conditions: list[ast.Expr | None] | None = None
               ) -> list[np.ndarray | None]:
        """Per condition (default: the variables' row-local DEFINEs; None: no condition)
        the rows where it is TRUE."""
        q = self.plan.q
        rows = np.arange(n, dtype=np.int64)
        part_lo = starts_of[part_of_row] if n else rows
        part_hi = np.append(starts_of[1:], n)[part_of_row] if n else rows
        column = self._column_reader(work, n, starts_of, part_of_row)

        codes_cache: dict[str, tuple[np.ndarray, list[str]] | None] = {}

        def strings(name: str) -> tuple[np.ndarray, list[str]]:
            """A column of Python strings (and NULLs) as codes (-1: NULL) and the distinct
            strings, for comparisons with string literals; else _NotSimple."""
            if name not in codes_cache:
                codes_cache[name] = None
                series = work.get(name)
                if series is not None and series.dtype == object and (
                        pd.api.types.infer_dtype(series, skipna=True) == "string"):
                    codes, uniques = pd.factorize(series)
                    codes_cache[name] = (np.asarray(codes), list(uniques))
            found = codes_cache[name]
            if found is None:
                raise _NotSimple
            return found

        frame: pd.DataFrame | None = None
        out: list[np.ndarray | None] = []
        for i, cond in enumerate(self.conditions if conditions is None else conditions):
            if cond is None:
                out.append(None)
                continue
            try:
                value, null = _np_bool(cond, column, strings)
                out.append(np.broadcast_to(value & ~null, (n,)).copy())
                continue
            except _NotSimple:
                pass
            if frame is None:
                extra = {helper: _shifted(work[name], shift, rows, part_lo, part_hi)
                         for helper, (name, shift) in self.shifts.items()}
                frame = pd.DataFrame({**work, **extra}, index=pd.RangeIndex(n))
            columns = tuple(str(c) for c in frame.columns)
            scope = Scope(columns, q._sets, "DEFINE",
                          q.variables[i] if i < len(q.variables) else None)
            out.append(evaluate_condition(cond, frame, scope))
        return out

    def _chain(self, cand: np.ndarray, ends: np.ndarray, seg_start: list[np.ndarray],
               seg_len: list[np.ndarray], cand_part: np.ndarray,
               row_of_pad: np.ndarray) -> np.ndarray:
        """Which candidate starts the AFTER MATCH SKIP chain actually reaches."""
        skip = self.bound.skip
        m = len(cand)
        if m == 0:
            return np.zeros(0, dtype=np.int64)
        empty = ends == cand
        if skip.kind == "TO NEXT ROW":
            return np.arange(m, dtype=np.int64)  # every row is tried
        if skip.kind == "PAST LAST ROW":
            resume = np.where(empty, cand + 1, ends)
        else:
            resume, bad = self._skip_targets(cand, empty, seg_start, seg_len)
        nxt = np.searchsorted(cand, resume, side="left").tolist()
        taken: list[int] = []
        i = 0
        if skip.kind == "PAST LAST ROW":
            while i < m:
                taken.append(i)
                i = nxt[i]
        else:
            bad_list = bad.tolist()
            while i < m:
                taken.append(i)
                if bad_list[i]:
                    part = cand_part[taken]
                    number = int((part == cand_part[i]).sum())
                    self._raise_skip(i, number, cand, seg_start, seg_len, row_of_pad)
                i = nxt[i]
        return np.asarray(taken, dtype=np.int64)

    def _skip_targets(self, cand: np.ndarray, empty: np.ndarray, seg_start: list[np.ndarray],
                      seg_len: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        skip = self.bound.skip
        assert skip.var is not None
        items = list(enumerate(self.plan.item_list))
        target = np.full(len(cand), -1, dtype=np.int64)
        if skip.kind == "TO FIRST":
            for k, it in reversed(items):
                if it.var in skip.var:
                    target = np.where(seg_len[k] > 0, seg_start[k], target)
        else:
            for k, it in items:
                if it.var in skip.var:
                    target = np.where(seg_len[k] > 0, seg_start[k] + seg_len[k] - 1, target)
        bad = ~empty & ((target < 0) | (target == cand))
        resume = np.where(empty, cand + 1, target)
        return resume, bad

    def _raise_skip(self, i: int, number: int, cand: np.ndarray,
                    seg_start: list[np.ndarray], seg_len: list[np.ndarray],
                    row_of_pad: np.ndarray) -> None:
        """Raise the general matcher's error for the skip after candidate ``i``."""
        rows: list[int] = []
        labels: list[int] = []
        for k, it in enumerate(self.plan.item_list):
            s, c = int(seg_start[k][i]), int(seg_len[k][i])
            if c:
                base = int(row_of_pad[s])
                rows += range(base, base + c)
                labels += [it.var] * c
        self.bound.skip.next_start(RawMatch(int(row_of_pad[cand[i]]), number, rows, labels,
                                            [False] * len(rows)))
        raise AssertionError("unreachable")  # pragma: no cover


class _Rest:
    """What the items after one item look like (for choices inside a WITHIN window):
    where they can match (None: anywhere, no items left) and their smallest end; the
    item's own largest count and, if greedy, the last feasible position at or before p."""

    def __init__(self, feasible: np.ndarray | None, least_end: np.ndarray):
        self.feasible = feasible
        self.least_end = least_end
        self.cmax: np.ndarray | None = None
        self.last_true: np.ndarray | None = None
        self._positions: np.ndarray | None = None
        self._ends: np.ndarray | None = None

    def greedy_within(self, pos: np.ndarray, horizon: np.ndarray) -> np.ndarray:
        """The greedy item's count at ``pos`` when its match must end by ``horizon``: the
        most rows after which the rest can still match and end by ``horizon``. The
        smallest end of the rest never decreases from one feasible position to the next,
        so the positions whose rest ends in time are the feasible ones up to a bound."""
        assert self.cmax is not None
        cmax = self.cmax[pos]
        if self.feasible is None:
            return np.asarray(np.minimum(cmax, horizon - pos))
        assert self.last_true is not None
        if self._positions is None:
            self._positions = np.flatnonzero(self.feasible)
            self._ends = self.least_end[self._positions]
        assert self._ends is not None
        j = np.searchsorted(self._ends, horizon, side="right") - 1
        bound = self._positions[np.maximum(j, 0)]
        return np.asarray(self.last_true[np.minimum(pos + cmax, bound)] - pos)


class _Window:
    """WITHIN as the general matcher applies it (:class:`cep_core.runtime.matcher.Window`):
    row r may join a match that starts at row s iff both have an ORDER BY value and
    ``not sign * (t[r] - t[s]) > limit``. Rows are sorted by that value within a
    partition, so from s the rows that may join are the run s..horizon(s)-1."""

    def __init__(self, key: np.ndarray, nn_run: np.ndarray, limit: float | int,
                 descending: bool):
        self.key = key  # per padded position: the order value (int64 or float64)
        self.nn_run = nn_run  # consecutive positions with a value, from each position
        self.limit = limit
        self.descending = descending

    @staticmethod
    def build(series: pd.Series, m: ast.MatchRecognize, pad_of_row: np.ndarray,
              length: int, itype: Any) -> _Window | None:
        """None when the column is not one the vectorised window reads exactly (the
        general path then runs, and reports unusable columns)."""
        assert m.within is not None
        values = _order_values(series)
        if values is None:
            return None
        key, missing, is_time = values
        seconds = within_seconds(m.within)
        limit: float | int = seconds * 1e9 if is_time else seconds
        if key.dtype.kind == "i":
            # Integers: compare exactly with the float limit (Python compares int with
            # float exactly); differences must not overflow int64.
            present = key[~missing]
            if len(present) and int(present.max()) - int(present.min()) >= 2**63:
                return None
            if math.isnan(limit) or limit >= 2**63:
                limit = 2**63 - 1  # never beyond (NaN: `diff > NaN` is never true)
            elif limit < -(2**63):
                limit = -(2**63)
            else:
                limit = math.floor(limit)
        descending = m.order_by[0].descending
        padded = np.zeros(length + 1, dtype=key.dtype)
        padded[pad_of_row] = key
        has = np.zeros(length + 1, dtype=bool)
        has[pad_of_row] = ~missing
        both = has[:-1] & has[1:]
        step = padded[1:] - padded[:-1]
        if ((step > 0) if descending else (step < 0))[both].any():
            return None  # not sorted by the order value (cannot happen; be safe)
        idx = np.arange(length + 1, dtype=itype)
        stop = np.where(has, length, idx)
        nn_run = np.minimum.accumulate(stop[::-1])[::-1] - idx
        return _Window(padded, nn_run, limit, descending)

    def inside(self, s: np.ndarray, r: np.ndarray) -> np.ndarray:
        """Whether row ``r`` (>= ``s``, same partition) may join a match started at ``s``."""
        ok = (r - s) < self.nn_run[s]
        rr = np.where(ok, r, s)
        a, b = self.key[rr], self.key[s]
        diff = b - a if self.descending else a - b
        return np.asarray(ok & ~(diff > self.limit), dtype=bool)

    def reaches(self, s: np.ndarray, end: np.ndarray) -> np.ndarray:
        """Whether a match of rows ``s..end-1`` lies inside the window of ``s``."""
        return np.asarray((end == s) | self.inside(s, np.maximum(end - 1, s)), dtype=bool)

    def horizon(self, s: np.ndarray) -> np.ndarray:
        """One past the last row that may join a match started at ``s``."""
        if self.key.dtype.kind == "i":
            return self._int_horizon(s)
        # Floats: ``a - b > limit`` rounds, so no threshold on ``a`` is exact; a binary
        # search of :meth:`inside` (monotone in r within a run: subtraction is) is.
        lo = s.copy()
        hi = s + self.nn_run[s]
        while True:
            active = lo < hi
            if not active.any():
                return lo
            mid = (lo + hi) // 2
            inn = self.inside(s, np.where(active, mid, s))
            lo = np.where(active & inn, mid + 1, lo)
            hi = np.where(active & ~inn, mid, hi)

    def _int_horizon(self, s: np.ndarray) -> np.ndarray:
        """:meth:`horizon` for integer order values, exactly: within a run of positions
        with a value the keys are sorted, so ``diff > limit`` turns into ``k[r] > k[s] +
        limit`` on keys shifted to start at 0 (``uint64``, where ``k + limit`` cannot
        overflow: both are below 2**63), and one ``searchsorted`` over keys that also order
        the runs finds, for every ``s`` at once, the first position after the last one
        within reach (:meth:`_packed_horizon`, or :meth:`_ranked_horizon` when the runs'
        keys do not fit in 64 bits side by side)."""
        key, limit = self.key, self.limit
        has = self.nn_run > 0
        if limit < 0 or not has.any():
            return s.copy()  # a row is not even in the window of its own start
        present = key[has]
        shifted = (present.max() - key if self.descending else key - present.min())
        k = shifted.astype(np.uint64)
        run_start = has & ~np.concatenate(([False], has[:-1]))
        run = np.cumsum(run_start, dtype=np.int64)
        out = self._packed_horizon(s, k, has, run_start, run)
        if out is None:
            out = self._ranked_horizon(s, k, has, run)
        return np.where(has[s], out.astype(s.dtype, copy=False), s)

    def _packed_horizon(self, s: np.ndarray, k: np.ndarray, has: np.ndarray,
                        run_start: np.ndarray, run: np.ndarray) -> np.ndarray | None:
        """The horizon by the key ``run * M + (k - k at the run's first position)`` (a gap
        after a run gets ``M - 1``, above every reachable key of the run): sorted, and
        the queries ``key[s] + limit`` are as sorted as ``s``, so the search walks the
        array once (1M rows: ~0.04 CPU-s against ~0.28 for :meth:`_ranked_horizon`, whose
        searches jump between partitions). A limit past the widest run is the width plus
        one (every row of the run is in reach). None if ``M * (runs + 1)`` does not fit in
        ``uint64``."""
        n = len(k)
        base = np.maximum.accumulate(np.where(run_start, np.arange(n), 0))
        rel = k - k[base]  # (garbage at gaps, replaced below)
        span = int(rel[has].max())
        reach = min(int(self.limit), span + 1)
        m = span + reach + 2
        if (int(run[-1]) + 1) * m >= 2**64:
            return None
        big = np.uint64(m)
        combined = run.astype(np.uint64) * big + np.where(has, rel, big - np.uint64(1))
        query = combined[s] + np.uint64(reach)  # (garbage at gaps: masked by the caller)
        return np.asarray(np.searchsorted(combined, query, side="right"))

    def _ranked_horizon(self, s: np.ndarray, k: np.ndarray, has: np.ndarray,
                        run: np.ndarray) -> np.ndarray:
        """The horizon by one sort and three ``searchsorted`` calls: a key ``run * (R + 1)
        + rank of k`` (R distinct keys) orders the positions as they stand (a gap between
        runs carries rank R, above any reachable rank, so no search leaves its run)."""
        uniq = np.sort(k[has])  # (np.unique is ~30x slower here: it hashes)
        uniq = uniq[np.concatenate(([True], uniq[1:] != uniq[:-1]))]
        r_total = len(uniq)
        rank = np.full(len(k), r_total, dtype=np.int64)
        rank[has] = np.searchsorted(uniq, k[has])
        combined = run * (r_total + 1) + rank
        reach = k[s] + np.uint64(min(int(self.limit), 2**63 - 1))
        rank_q = np.searchsorted(uniq, reach, side="right") - 1
        query = run[s] * (r_total + 1) + rank_q
        return np.asarray(np.searchsorted(combined, query, side="right"))


def _order_values(series: pd.Series) -> tuple[np.ndarray, np.ndarray, bool] | None:
    """The WITHIN column as :func:`cep_core.runtime.time_axis.order_numbers` reads it, as
    arrays: (values as int64 or float64, missing mask, is a time column); None if not
    exactly representable."""
    dt = series.dtype
    if is_timestamp(dt) or is_duration(dt):
        ints, missing = ns_and_missing(series)
        return ints.astype(np.int64), missing, True
    if not is_number(dt):
        return None
    missing = np.asarray(series.isna().to_numpy(), dtype=bool)
    try:
        if pd.api.types.is_float_dtype(dt):
            key = np.asarray(series.to_numpy(dtype="float64", na_value=np.nan))
            missing = missing | np.isnan(key)
            if np.isinf(key).any():
                return None
            return key, missing, False
        if pd.api.types.is_integer_dtype(dt):
            if pd.api.types.is_unsigned_integer_dtype(dt) and len(series) and (
                    int(series.max()) >= 2**63):
                return None
            key = np.asarray(series.to_numpy(dtype="int64", na_value=0))
            return key, missing, False
    except (TypeError, ValueError, OverflowError):
        return None
    return None


def _shifted(series: pd.Series, shift: int, rows: np.ndarray, part_lo: np.ndarray,
             part_hi: np.ndarray) -> pd.Series:
    """``series`` moved by ``shift`` rows (value of row r + shift), NULL outside the
    partition of row r."""
    s = series.reset_index(drop=True)
    if pd.api.types.is_integer_dtype(s.dtype) and not isinstance(s.dtype, pd.CategoricalDtype):
        s = s.astype("Int64") if str(s.dtype) == "int64" else s
    elif pd.api.types.is_bool_dtype(s.dtype):
        s = s.astype("boolean")
    moved = s.shift(-shift)
    target = rows + shift
    outside = (target < part_lo) | (target >= part_hi)
    if outside.any():
        moved = moved.mask(outside)
    return moved


class _NotSimple(Exception):
    """The condition needs the general vectorised evaluator (pandas, or row by row)."""


_NP_CMP = {"=": np.equal, "<>": np.not_equal, "!=": np.not_equal, "<": np.less,
           "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal}
_NP_ARITH = {"+": np.add, "-": np.subtract, "*": np.multiply}
_EXACT = 2**53  # integers up to this compare with floats exactly after conversion

NpValue = tuple[Any, Any]  # (values, NULL mask): arrays or scalars


def _np_column(series: pd.Series, shift: int, rows: np.ndarray, part_lo: np.ndarray,
               part_hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A numeric column (moved by ``shift`` rows within partitions) and its NULL mask;
    numpy numbers (NaN: NULL) or pandas' nullable integers (``Int64``, ...: NA)."""
    dt = series.dtype
    if isinstance(dt, np.dtype) and dt.kind in "iuf":
        a = series.to_numpy()
        null = np.isnan(a) if dt.kind == "f" else np.zeros(len(a), dtype=bool)
    elif (isinstance(dt, pd.api.extensions.ExtensionDtype)
          and pd.api.types.is_integer_dtype(dt) and isinstance(
              getattr(dt, "numpy_dtype", None), np.dtype)):
        null = np.asarray(series.isna().to_numpy(), dtype=bool)
        a = series.to_numpy(dtype=dt.numpy_dtype, na_value=0)
    else:
        raise _NotSimple
    n = len(a)
    if shift == 0:
        return a, null
    moved = np.zeros_like(a)
    moved_null = np.ones(n, dtype=bool)
    k = abs(shift)
    if k < n:
        if shift < 0:
            moved[k:] = a[:n - k]
            moved_null[k:] = null[:n - k]
        else:
            moved[:n - k] = a[k:]
            moved_null[:n - k] = null[k:]
    target = rows + shift
    return moved, moved_null | (target < part_lo) | (target >= part_hi)


def _np_bool(e: ast.Expr, column: Any, strings: Any = None) -> NpValue:
    """A condition in SQL three-valued logic with numpy: (value, NULL mask)."""
    if isinstance(e, ast.Binary) and e.op in ("AND", "OR"):
        a, an = _np_bool(e.left, column, strings)
        b, bn = _np_bool(e.right, column, strings)
        a_true, b_true = a & ~an, b & ~bn
        a_false, b_false = ~a & ~an, ~b & ~bn
        if e.op == "AND":
            true, false = a_true & b_true, a_false | b_false
        else:
            true, false = a_true | b_true, a_false & b_false
        return true, ~true & ~false
    if isinstance(e, ast.Unary) and e.op == "NOT":
        a, an = _np_bool(e.operand, column, strings)
        return ~a, an
    if (strings is not None and isinstance(e, ast.Binary) and e.op in ("=", "<>", "!=")
            and isinstance(e.left, ast.Column) and isinstance(e.right, ast.Literal)
            and type(e.right.value) is str):
        # A string column against a string literal: compare factorised codes.
        codes, uniques = strings(e.left.name)
        k = uniques.index(e.right.value) if e.right.value in uniques else -2
        null = codes < 0
        return (codes == k) if e.op == "=" else (codes != k), null
    if isinstance(e, ast.Binary) and e.op in _NP_CMP:
        x, xn = _np_number(e.left, column)
        y, yn = _np_number(e.right, column)
        _check_exact(x, y)
        return _NP_CMP[e.op](x, y), xn | yn
    if isinstance(e, ast.IsNull):
        _, xn = _np_number(e.operand, column)
        return (~xn if e.negated else xn), np.zeros_like(xn, dtype=bool)
    raise _NotSimple


def _np_number(e: ast.Expr, column: Any) -> NpValue:
    if isinstance(e, ast.Column):
        values, null = column(e.name)
        return values, null
    if isinstance(e, ast.Literal):
        v = e.value
        if isinstance(v, bool) or not isinstance(v, int | float):
            raise _NotSimple
        if isinstance(v, int) and abs(v) >= _EXACT:
            raise _NotSimple
        return v, False
    if isinstance(e, ast.Unary) and e.op in ("-", "+"):
        x, xn = _np_number(e.operand, column)
        if not _is_float(x):
            raise _NotSimple  # integer negation could overflow numpy's int64
        return (-x if e.op == "-" else x), xn
    if isinstance(e, ast.Binary) and e.op in _NP_ARITH:
        x, xn = _np_number(e.left, column)
        y, yn = _np_number(e.right, column)
        if not (_is_float(x) or _is_float(y)) and not _fits_int64(x, y, e.op):
            raise _NotSimple  # Python integers do not overflow; numpy's do
        _check_exact(x, y)
        return _NP_ARITH[e.op](x, y), xn | yn
    raise _NotSimple


def _row_numbers(e: ast.Expr, column: Any, n: int, exact: int) -> tuple[np.ndarray,
                                                                        np.ndarray]:
    """A row-local numeric expression per row (numpy numbers) and its NULL mask;
    _NotSimple unless numeric with integers below ``exact`` in magnitude."""
    y, y_null = _np_number(e, column)
    y = np.broadcast_to(np.asarray(y), (n,))
    if y.dtype.kind not in "iuf" or (
            y.dtype.kind in "iu" and n and int(np.abs(y).max()) >= exact):
        raise _NotSimple
    return y, np.broadcast_to(np.asarray(y_null, dtype=bool), (n,))


def _fits_int64(x: Any, y: Any, op: str) -> bool:
    """Integer arithmetic ``x op y`` cannot overflow int64 (numpy then computes what
    Python's integers do)."""
    def biggest(v: Any) -> int:
        if isinstance(v, np.ndarray):
            if v.dtype.kind != "i":  # (unsigned: numpy may promote to float)
                return 2**64
            return max(abs(int(v.max())), abs(int(v.min()))) if len(v) else 0
        return abs(int(v))

    bx, by = biggest(x), biggest(y)
    return (bx * by if op == "*" else bx + by) < 2**63


def _is_float(x: Any) -> bool:
    return isinstance(x, float) or (isinstance(x, np.ndarray) and x.dtype.kind == "f")


def _check_exact(x: Any, y: Any) -> None:
    """Comparing or combining an integer with a float: only if numpy's conversion of the
    integers to float is exact (as Python's mixed comparison is)."""
    if _is_float(x) == _is_float(y):
        return
    ints = y if _is_float(x) else x
    if isinstance(ints, np.ndarray):
        if ints.dtype.kind not in "iu":
            raise _NotSimple
        if len(ints) and max(abs(int(ints.max())), abs(int(ints.min()))) >= _EXACT:
            raise _NotSimple


# ---------------------------------------------------------------------- sorting
def prepare(bound: Bound, df: pd.DataFrame, needed: list[str]) -> tuple[
        dict[str, pd.Series], np.ndarray, list[int]]:
    """As ``Bound._prepare``: the ``needed`` columns sorted by partition and order keys,
    the original positions of the sorted rows, and the partition boundaries."""
    found = sort_order(bound, df)
    if found is None:
        work, positions, bounds = bound._prepare(df)
        return {c: work[c] for c in needed}, positions, bounds
    perm, bounds = found
    n = len(df)
    identity = bool((perm == np.arange(n)).all())
    data: dict[str, pd.Series] = {}
    index = pd.RangeIndex(n)
    for c in needed:
        col = df[c]
        if isinstance(col.dtype, np.dtype):
            values = col.to_numpy()
            data[c] = pd.Series(values if identity else values[perm], index=index, name=c)
        else:
            data[c] = pd.Series(col.array if identity else col.array.take(perm), index=index,
                                name=c)
    return data, perm, bounds


def sort_order(bound: Bound, df: pd.DataFrame) -> tuple[np.ndarray, list[int]] | None:
    """The order ``Bound._prepare`` sorts ``df`` in (by partition and order keys, stable)
    and the partition boundaries, computed with numpy; None when the keys need pandas'
    sort (no rows, NULL keys, mixed types, a descending or second ORDER BY key)."""
    m = bound.q.match
    n = len(df)
    if n == 0 or len(bound.order_cols) != 1 or m.order_by[0].descending:
        return None
    codes_list: list[np.ndarray] = []
    for col in bound.partition_cols:
        codes = _sort_codes(df[col])
        if codes is None:
            return None
        codes_list.append(codes)
    order = df[bound.order_cols[0]]
    dt = order.dtype
    if not isinstance(dt, np.dtype) or dt.kind not in "iufM":
        return None
    okeys = order.to_numpy()
    if dt.kind == "f" and np.isnan(okeys).any():
        return None
    if dt.kind == "M" and np.isnat(okeys).any():
        return None
    if codes_list:
        key = codes_list[0].astype(np.int64)
        for codes in codes_list[1:]:
            width = int(codes.max()) + 1
            if int(key.max()) + 1 > (2**62) // width:
                return None
            key = key * width + codes
        parts = int(key.max()) + 1
        small = key.astype(np.int16 if parts < 2**15 else np.int32 if parts < 2**31
                           else np.int64)
        if n < 2 or bool((okeys[1:] >= okeys[:-1]).all()):
            # Already in ORDER BY order (e.g. events in arrival order): a stable sort by
            # partition keeps it within every partition.
            perm = np.argsort(small, kind="stable")
        else:
            perm = np.lexsort((okeys, small))
        ks = small[perm]
        bounds = [0, *(np.flatnonzero(ks[1:] != ks[:-1]) + 1).tolist(), n]
    else:
        perm = np.argsort(okeys, kind="stable")
        bounds = [0, n]
    return perm, bounds


def _sort_codes(s: pd.Series) -> np.ndarray | None:
    """Codes that sort like pandas sorts ``s``, or None (NULLs, mixed types, ...)."""
    dt = s.dtype
    if not isinstance(dt, np.dtype) or dt.kind not in "iufO":
        return None
    try:
        codes, uniques = pd.factorize(s, sort=True)
    except TypeError:
        return None
    codes = np.asarray(codes)
    if len(codes) and int(codes.min()) < 0:
        return None
    if dt.kind == "O" and not all(type(u) is str for u in uniques.tolist()):
        return None
    return codes


# ---------------------------------------------------------------------- results
class _Result:
    """The matches of one input, as arrays over matches (sorted coordinates)."""

    def __init__(self, fb: _FastBound, df: pd.DataFrame, work: dict[str, pd.Series],
                 positions: np.ndarray,
                 bounds: list[int], row_of_pad: np.ndarray, cand: np.ndarray,
                 seg_start: list[np.ndarray], seg_len: list[np.ndarray], part: np.ndarray,
                 number: np.ndarray):
        self.fb = fb
        self.df = df  # the input as given (partition keys are read from it)
        self.work = work
        self.positions = positions
        self.bounds = bounds
        self.row_of_pad = row_of_pad
        self.cand = cand
        self.seg_start = seg_start
        self.seg_len = seg_len
        self.part = part
        self.number = number

    def __len__(self) -> int:
        return len(self.cand)

    # ------------------------------------------------------------------ measures
    def _nav_rows(self, me: FastMeasure) -> np.ndarray:
        """Sorted row of the measure's navigation target per match, -1 for NULL."""
        items = list(enumerate(self.fb.plan.item_list))
        if me.from_end:
            items.reverse()
        found = np.full(len(self.cand), -1, dtype=np.int64)
        need = np.full(len(self.cand), me.offset, dtype=np.int64)
        for k, it in items:
            if me.var is not None and it.var not in me.var:
                continue
            c = self.seg_len[k]
            hit = (found < 0) & (need < c)
            if me.from_end:
                at = self.seg_start[k] + c - 1 - need
            else:
                at = self.seg_start[k] + need
            found = np.where(hit, at, found)
            need = np.where(found < 0, need - c, need)
        rows = np.where(found >= 0, self.row_of_pad[np.maximum(found, 0)], -1)
        return rows

    def _measure_values(self) -> list[tuple[pd.Series, np.ndarray | None]]:
        """Per measure: the values (one per match) and a mask of NULLs (or None)."""
        fb = self.fb
        assert fb.plan.measures is not None
        out: list[tuple[pd.Series, np.ndarray | None]] = []
        names = fb.plan.q.variables
        for me, col in zip(fb.plan.measures, fb.measure_columns, strict=True):
            if me.kind == "nav":
                assert col is not None
                rows = self._nav_rows(me)
                missing = rows < 0
                values = self.work[col].take(np.maximum(rows, 0)).reset_index(drop=True)
                out.append((values, missing if missing.any() else None))
            elif me.kind == "number":
                out.append((pd.Series(self.number), None))
            elif me.kind == "count":
                total = np.zeros(len(self.cand), dtype=np.int64)
                for k, it in enumerate(fb.plan.item_list):
                    if me.var is None or it.var in me.var:
                        total += self.seg_len[k]
                out.append((pd.Series(total), None))
            else:  # classifier: the variable of the last row
                label = np.full(len(self.cand), -1, dtype=np.int64)
                for k, it in enumerate(fb.plan.item_list):
                    label = np.where(self.seg_len[k] > 0, it.var, label)
                text = np.array(names + [None], dtype=object)[label]
                missing = label < 0
                out.append((pd.Series(text, dtype=object), missing if missing.any() else None))
        return out

    def _raw(self, i: int) -> RawMatch:
        rows: list[int] = []
        labels: list[int] = []
        row_of_pad = self.row_of_pad
        for k, it in enumerate(self.fb.plan.item_list):
            s, c = int(self.seg_start[k][i]), int(self.seg_len[k][i])
            if c:
                base = int(row_of_pad[s])
                rows += range(base, base + c)
                labels += [it.var] * c
        return RawMatch(int(row_of_pad[self.cand[i]]), int(self.number[i]), rows, labels,
                        [False] * len(rows))

    def _general_measures(self) -> list[list[Any]]:
        """Every measure per match, with the general compiled expressions."""

        bound = self.fb.bound
        cols: dict[str, Any] = {c: LazyColumn(self.work[c]) for c in bound.used_columns}
        st = MatchState(cols, self.fb.plan.q.variables)
        out: list[list[Any]] = []
        part = self.part.tolist()
        for i in range(len(self.cand)):
            j = part[i]
            st.lo, st.hi = self.bounds[j], self.bounds[j + 1]
            raw = self._raw(i)
            out.append(bound._measures_at(st, raw, len(raw.rows)))
        return out

    def _keys(self) -> list[tuple[Any, ...]]:
        pcols = [self.df[c] for c in self.fb.bound.partition_cols]
        keys = [tuple(to_python(c.iat[int(self.positions[lo])]) for c in pcols)
                for lo in self.bounds[:-1]]
        return [keys[j] for j in self.part.tolist()]

    # ------------------------------------------------------------------ outputs
    def matches(self) -> list[Match]:
        fb = self.fb
        bound = fb.bound
        names = fb.plan.q.variables
        keys = self._keys()
        if fb.plan.measures is not None:
            columns = []
            for values, missing in self._measure_values():
                vals = column_values(values)
                if missing is not None:
                    for j in np.flatnonzero(missing).tolist():
                        vals[j] = None
                columns.append(vals)
            per_match = [list(t) for t in zip(*columns, strict=True)] if columns else [
                [] for _ in range(len(self.cand))]
        else:
            per_match = self._general_measures()
        positions = self.positions
        out: list[Match] = []
        numbers = self.number.tolist()
        for i in range(len(self.cand)):
            raw = self._raw(i)
            out.append(Match(keys[i], numbers[i], tuple(int(positions[r]) for r in raw.rows),
                             tuple(names[v] for v in raw.labels),
                             dict(zip(bound.measure_names, per_match[i], strict=True))))
        return out

    def frame(self) -> pd.DataFrame:

        bound = self.fb.bound
        tree = self.fb.plan.q.tree
        if self.fb.plan.q.match.rows_per_match != "ONE":
            return select(tree, self._all_rows())
        if len(self.cand) == 0:
            return select(tree, bound._one_row(self.df.reset_index(drop=True),
                                                MatchState({}, []), []))
        starts = self.row_of_pad[self.cand]
        data: dict[str, pd.Series] = {}
        names = [*bound.partition_cols, *bound.measure_names]
        columns: list[pd.Series] = []
        origin = self.positions[starts]
        for c in bound.partition_cols:
            columns.append(_like_records(self.df[c].take(origin).reset_index(drop=True),
                                         None))
        if self.fb.plan.measures is not None:
            for values, missing in self._measure_values():
                columns.append(_like_records(values, missing))
        else:
            rows = self._general_measures()
            for j in range(len(bound.measure_names)):
                columns.append(_from_python([r[j] for r in rows]))
        if not names:
            return select(tree, pd.DataFrame(index=range(len(self.cand))))
        if len(set(names)) != len(names):
            # Duplicate names: build as the general path does.
            records = [list(r) for r in zip(*[c.tolist() for c in columns], strict=True)]
            return select(tree, pd.DataFrame.from_records(records, columns=names))
        for name, col in zip(names, columns, strict=True):
            data[name] = col
        return select(tree, pd.DataFrame(data))


    def _all_rows(self) -> pd.DataFrame:
        """ALL ROWS PER MATCH: the matches found here, one output row per matched row with
        RUNNING measures, built by the general path's own output code."""
        bound = self.fb.bound
        if len(self.cand) and self.seg_len:
            items = self.fb.plan.item_list
            lengths = np.stack([np.asarray(c, dtype=np.int64) for c in self.seg_len], axis=1)
            item_vars = np.tile(np.asarray([it.var for it in items], dtype=np.int64),
                                len(self.cand))
            labels = np.repeat(item_vars, lengths.ravel())
            start = np.asarray(self.row_of_pad[self.cand], dtype=np.int64)
            table = all_rows_vectorised(self.fb, self.df, self.work, self.positions, start,
                                        start + lengths.sum(axis=1), self.number, labels,
                                        np.zeros(len(labels), dtype=bool))
            if table is not None:
                return table
        full = self.df.reset_index(drop=True)
        work = full.take(self.positions).reset_index(drop=True)
        cols: dict[str, Any] = {c: LazyColumn(self.work[c]) for c in bound.used_columns}
        st = MatchState(cols, self.fb.plan.q.variables)
        nparts = len(self.bounds) - 1
        found: list[list[RawMatch]] = [[] for _ in range(nparts)]
        for i, j in enumerate(self.part.tolist()):
            found[j].append(self._raw(i))
        pcols = [work[c] for c in bound.partition_cols]
        parts = [Partition(tuple(to_python(c.iat[lo]) for c in pcols), lo, hi, found[j])
                 for j, (lo, hi) in enumerate(zip(self.bounds[:-1], self.bounds[1:],
                                                  strict=True)) if found[j]]
        return bound._all_rows(work, st, parts)


def row_partitions(bounds: list[int]) -> np.ndarray:
    """The partition number of every row, partitions being ``bounds[i]:bounds[i + 1]``."""
    sizes: np.ndarray = np.diff(np.asarray(bounds, dtype=np.int64))
    return np.repeat(np.arange(len(sizes), dtype=np.int64), sizes)


def row_bits(masks: list[np.ndarray | None], n: int) -> np.ndarray:
    """One uint64 per row: bit v set where variable v's condition holds."""
    bits = np.zeros(n, dtype=np.uint64)
    for v, mask in enumerate(masks):
        bit = np.uint64(1) << np.uint64(v)
        if mask is None:
            bits |= bit
        else:
            bits[np.asarray(mask, dtype=bool)] |= bit
    return bits


TOO_MANY_THREADS = -2  # run_kernel's bad index when the general matcher must run


def run_kernel(automaton: Automaton, bits: np.ndarray, bounds: list[int],
               horizon: np.ndarray | None,
               skip: SkipPolicy, report_unmatched: bool, first: list[int] | None = None,
               covered: list[int] | None = None, begin: list[int] | None = None,
               numbers: list[int] | None = None, open_: bool = False, selection: str = "STRICT",
               aggs: tuple[np.ndarray, ...] | None = None, ahead: int = 0,
               present: np.ndarray | None = None, timeouts: bool = False
               ) -> tuple[Any, ...]:
    """:func:`cep_core.runtime.kernel.run` over the partitions ``bounds`` (defaults: every
    partition from its first row, '^' there, closed); returns its results and the stop
    row per partition. Each match's labels cover its rows ``start..end-1``; under SKIP
    TILL ... MATCH (``selection``) rows it skipped have the label ``n_states``
    (:meth:`cep_core.compile.nfa.Automaton.label_var` -1). ``aggs``: the aggregate
    conditions (:meth:`_FastBound.kernel_inputs`); the bad record index is then
    ``TOO_MANY_THREADS`` if the kernel gave up (the general matcher must run). ``ahead``
    (with ``open_``): the rows at the end of each partition whose conditions read rows
    that have not arrived (NEXT); no attempt uses them, the first one that would waits.
    ``numbers``: the matches before, per partition (default none; the kernel numbers
    its matches from there, MATCH_NUMBER() in DEFINE reads it).
    ``present`` (with WITHIN): whether each row has an order value (a trailing NOT reads
    it). ``timeouts``: EMIT TIMEOUTS; the results flag the timed-out partial matches
    (after the bad record index; all False without it). The kernel takes it as ``True``
    or ``None``, so that queries without it run a kernel compiled without its code (one
    numba specialisation more per kind of kernel that EMIT TIMEOUTS queries use)."""
    from . import kernel

    b = np.asarray(bounds if len(bounds) > 1 else [0, 0], dtype=np.int64)
    lows = b[:-1]
    kind = {"PAST LAST ROW": kernel.PAST_LAST_ROW, "TO NEXT ROW": kernel.TO_NEXT_ROW,
            "TO FIRST": kernel.TO_FIRST, "TO LAST": kernel.TO_LAST}[skip.kind]
    mask_bits = sum(1 << v for v in (skip.var or ()))
    if mask_bits >= 1 << 63:
        mask_bits -= 1 << 64
    stops = np.zeros(len(lows), dtype=np.int64)

    def arr(values: list[int] | None) -> np.ndarray:
        return lows.copy() if values is None else np.asarray(values, dtype=np.int64)

    out = kernel.run(bits, b, np.zeros(0, dtype=np.int64) if horizon is None else horizon,
                     horizon is not None,
                     automaton.var, automaton.ptr, automaton.targets, kind,
                     np.int64(mask_bits), report_unmatched, kernel.MEMO_LIMIT, arr(first),
                     arr(covered), arr(begin),
                     np.zeros(len(lows), dtype=np.int64) if numbers is None else arr(numbers),
                     open_, automaton.touches_end, stops,
                     None if selection == "STRICT" else kernel.SELECTIONS[selection], aggs,
                     kernel.MAX_AGG_THREADS, ahead if open_ else 0,
                     (automaton.guard, automaton.accept_guard,
                      np.ones(len(bits), dtype=np.bool_) if present is None else present)
                     if automaton.negation else None, True if timeouts else None)
    if not timeouts:  # (the kernel left its flags unset)
        out = (*out[:-1], np.zeros(len(out[0]), dtype=np.bool_))
    return (*out, stops)


def consume_partitions(mode: str, k: int, inputs: tuple[np.ndarray, np.ndarray | None,
                                                np.ndarray | None,
                                                tuple[np.ndarray, ...] | None],
                       bounds: list[int], first: list[int], emitted: list[int],
                       stages: list[list[list[tuple[list[int], list[int]]]]], ahead: int = 0
                       ) -> tuple[list[list[RawMatch]], list[list[list[tuple[list[int],
                                                                           list[int]]]]],
                                  list[int], list[int]]:
    """:func:`cep_core.runtime.kernel.consume` (``k`` pattern variables) over the
    partitions ``bounds`` from rows
    ``first`` with ``emitted`` matches before and the open instances ``stages`` (per
    partition, as :class:`cep_core.runtime.consumption.Instance` lists; rows in these
    coordinates) with ``inputs`` from :meth:`_FastBound.consume_inputs`. Returns per
    partition the matches, the open instances by stage (stage 0 empty), the matches
    emitted so far and the next row to process."""
    from . import kernel

    nparts = len(bounds) - 1
    init_part: list[int] = []
    init_stage: list[int] = []
    init_len: list[int] = []
    init_rows: list[int] = []
    init_labs: list[int] = []
    for j, part_stages in enumerate(stages):
        for s, stage in enumerate(part_stages):
            for rows, labs in stage:
                init_part.append(j)
                init_stage.append(s)
                init_len.append(len(rows))
                init_rows += rows
                init_labs += labs
    bits, horizon, present, aggs = inputs

    def arr(values: list[int]) -> np.ndarray:
        return np.asarray(values, dtype=np.int64)

    out = kernel.consume(bits, arr(bounds if nparts else [0]),
                         arr([]) if horizon is None else horizon,
                         np.zeros(0, dtype=np.bool_) if present is None else present,
                         horizon is not None, kernel.MODES[mode], k, arr(first), ahead,
                         arr(init_part), arr(init_stage), arr(init_len), arr(init_rows),
                         arr(init_labs), arr(emitted), aggs)
    (m_part, m_num, m_len, m_rows, m_labs, f_part, f_stage, f_len, f_rows, f_labs,
     numbers, stops) = (a.tolist() for a in out)
    found: list[list[RawMatch]] = [[] for _ in range(nparts)]
    at = 0
    for j, num, length in zip(m_part, m_num, m_len, strict=True):
        rows = m_rows[at:at + length]
        found[j].append(RawMatch(rows[0], num, rows, m_labs[at:at + length],
                                 [False] * length))
        at += length
    left: list[list[list[tuple[list[int], list[int]]]]] = [
        [[] for _ in range(k)] for _ in range(nparts)]
    at = 0
    for j, s, length in zip(f_part, f_stage, f_len, strict=True):
        left[j][s].append((f_rows[at:at + length], f_labs[at:at + length]))
        at += length
    return found, left, numbers, stops


class KernelResult:
    """The matches the compiled kernel found, per partition, output by the general path's
    own code (measures with the general compiled expressions). ``found``: the matches
    per partition already made (CONSUMPTION; no match arrays, measures per match)."""

    def __init__(self, fb: _FastBound, df: pd.DataFrame, work: dict[str, pd.Series],
                 positions: np.ndarray, bounds: list[int], records: tuple[Any, ...] | None,
                 arrays: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray,
                               np.ndarray] | None,
                 found: list[list[RawMatch]] | None = None):
        self.fb = fb
        self.df = df
        self.work = work
        self.positions = positions
        self.bounds = bounds
        self._records = records
        self._found = found
        # The matches (no unmatched rows) as arrays: first row, one past the last row,
        # match number, and the variable of every matched row (concatenated).
        if arrays is not None:
            self.start, self.end, self.number, self.labels, self.excluded = arrays

    def _measure_values(self) -> list[tuple[pd.Series, np.ndarray | None]]:
        """Per measure of a vectorisable plan (``FastPlan.measures``): the values (one per
        match) and a mask of NULLs (or None), from the match arrays."""
        return match_measure_values(self.fb, self.work, self.start, self.end, self.number,
                                    self.labels)

    def _one_row_vectorised(self) -> pd.DataFrame:
        """ONE ROW PER MATCH with every measure from the match arrays (as _Result.frame)."""
        bound = self.fb.bound
        tree = self.fb.plan.q.tree
        origin = self.positions[self.start]
        names = [*bound.partition_cols, *bound.measure_names]
        columns = [_like_records(self.df[c].take(origin).reset_index(drop=True), None)
                   for c in bound.partition_cols]
        for values, missing in self._measure_values():
            columns.append(_like_records(values, missing))
        if not names:
            return select(tree, pd.DataFrame(index=range(len(self.start))))
        if len(set(names)) != len(names):
            records = [list(r) for r in zip(*[c.tolist() for c in columns], strict=True)]
            return select(tree, pd.DataFrame.from_records(records, columns=names))
        return select(tree, pd.DataFrame(dict(zip(names, columns, strict=True))))

    def _state(self) -> MatchState:
        bound = self.fb.bound
        cols: dict[str, Any] = {c: LazyColumn(self.work[c]) for c in bound.used_columns}
        return MatchState(cols, self.fb.plan.q.variables)

    def _parts(self) -> list[Partition]:
        if self._found is None:
            assert self._records is not None
            (o_start, o_end, o_num, o_unm, o_lab, automaton, part_of_row,
             o_tmo) = self._records
            found: list[list[RawMatch]] = [[] for _ in range(len(self.bounds) - 1)]
            raws = raw_matches(o_start, o_end, o_num, o_unm, o_lab, automaton, o_tmo)
            for raw, j in zip(raws, part_of_row[o_start].tolist(), strict=True):
                found[j].append(raw)
            self._found = found
        pcols = [self.df[c] for c in self.fb.bound.partition_cols]
        out = []
        for j, (lo, hi) in enumerate(zip(self.bounds[:-1], self.bounds[1:], strict=True)):
            if self._found[j]:
                origin = int(self.positions[lo])
                key = tuple(to_python(c.iat[origin]) for c in pcols)
                out.append(Partition(key, lo, hi, self._found[j]))
        return out

    def matches(self) -> list[Match]:
        st = self._state()
        return self.fb.bound._matches(self._parts(), self.positions, st)

    def frame(self) -> pd.DataFrame:
        bound = self.fb.bound
        tree = self.fb.plan.q.tree
        if self.fb.plan.q.match.rows_per_match == "ONE":
            if (self._records is not None and len(self.start)
                    and _vector_measures_of(self.fb) is not None
                    and not self.fb.plan.q.match.emit_timeouts):  # (its timed_out column)
                return self._one_row_vectorised()
            parts = self._parts()
            if not parts:
                return select(tree, bound._one_row(self.df.reset_index(drop=True),
                                                    MatchState({}, []), []))
            return select(tree, bound._one_row(self.df.reset_index(drop=True), self._state(),
                                                parts))
        if (self._records is not None and not self._records[3].any()  # no unmatched rows
                and not self.fb.plan.q.match.emit_timeouts):  # nor a timed_out column
            table = all_rows_vectorised(self.fb, self.df, self.work, self.positions, self.start,
                                        self.end, self.number, self.labels, self.excluded)
            if table is not None:
                return select(tree, table)
        full = self.df.reset_index(drop=True)
        work = full.take(self.positions).reset_index(drop=True)
        return select(tree, bound._all_rows(work, self._state(), self._parts()))


def match_measure_values(fb: _FastBound, work: Any, start: np.ndarray, end: np.ndarray,
                         number: np.ndarray, labels: np.ndarray
                         ) -> list[tuple[pd.Series, np.ndarray | None]]:
    """Per measure of a vectorisable plan (``_FastBound.vector_measures``): the values (one
    per match) and a mask of NULLs (or None), from the match arrays over the sorted rows
    ``work`` (a mapping of columns): first row, one past the last row, match number, and
    the variable of every matched row (concatenated). The batch kernel's ONE ROW output
    and the incremental matcher's matches share it."""
    measures = _vector_measures_of(fb)
    assert measures is not None
    return measure_values(measures, fb.measure_columns, fb.plan.q.variables, work, start,
                          end, number, labels)


def measure_values(measures: list[FastMeasure], columns: list[str | None], names: list[str],
                   work: Any, start: np.ndarray, end: np.ndarray, number: np.ndarray,
                   labels: np.ndarray, rows: np.ndarray | None = None
                   ) -> list[tuple[pd.Series, np.ndarray | None]]:
    """:func:`match_measure_values` for ``measures`` (see
    :func:`cep_core.compile.fast_plan.vector_measures`) reading ``columns``; ``rows``: the
    row of every matched row (concatenated), when matches are not runs of consecutive
    rows (SKIP TILL ... MATCH); ``end - start`` is then each match's number of rows."""
    m = len(start)
    length = end - start
    offsets = np.zeros(m + 1, dtype=np.int64)
    np.cumsum(length, out=offsets[1:])
    match_of = np.repeat(np.arange(m, dtype=np.int64), length)
    flat_row = rows if rows is not None else (
        np.arange(len(labels), dtype=np.int64) - offsets[match_of] + start[match_of])
    out: list[tuple[pd.Series, np.ndarray | None]] = []
    for me, col in zip(measures, columns, strict=True):
        if me.kind in ("nav", "count"):
            if me.var is None:
                inside = labels >= 0  # not a row skipped under SKIP TILL ... MATCH
            else:
                inside = np.isin(labels, np.fromiter(me.var, dtype=np.int64))
            cs = np.zeros(len(labels) + 1, dtype=np.int64)
            np.cumsum(inside, out=cs[1:])
            total = cs[offsets[1:]] - cs[offsets[:-1]]
        if me.kind == "count":
            out.append((pd.Series(total), None))
        elif me.kind == "nav":
            assert col is not None
            if me.from_end:
                rank = cs[offsets[1:]][match_of] - cs[1:]  # in-set rows after this one
            else:
                rank = cs[:-1] - cs[offsets[:-1]][match_of]  # in-set rows before it
            hit = np.flatnonzero(inside & (rank == me.offset))
            rows = np.full(m, -1, dtype=np.int64)
            rows[match_of[hit]] = flat_row[hit]
            missing = rows < 0
            values = work[col].take(np.maximum(rows, 0)).reset_index(drop=True)
            out.append((values, missing if missing.any() else None))
        elif me.kind == "number":
            out.append((pd.Series(number), None))
        else:  # classifier: the variable of the last row
            last = np.where(length > 0, labels[np.maximum(offsets[1:] - 1, 0)]
                            if len(labels) else -1, -1)
            text = np.array([*names, None], dtype=object)[last]
            missing = last < 0
            out.append((pd.Series(text, dtype=object), missing if missing.any() else None))
    return out


def raw_matches(o_start: np.ndarray, o_end: np.ndarray, o_num: np.ndarray,
                 o_unm: np.ndarray, o_lab: np.ndarray, automaton: Automaton,
                 o_tmo: np.ndarray | None = None) -> list[RawMatch]:
    """The kernel's output records as the general matcher's RawMatch objects (``o_tmo``:
    which are timed-out partial matches, EMIT TIMEOUTS)."""
    lab_var = automaton.label_var(o_lab).tolist()
    lab_excl = automaton.label_excluded(o_lab).tolist()
    skipped = bool(len(o_lab)) and bool((o_lab == automaton.n_states).any())
    out: list[RawMatch] = []
    at = 0
    timed = [False] * len(o_start) if o_tmo is None else o_tmo.tolist()
    for a, b, num, unm, tmo in zip(o_start.tolist(), o_end.tolist(), o_num.tolist(),
                                   o_unm.tolist(), timed, strict=True):
        if unm:
            out.append(RawMatch(a, 0, unmatched=True))
            continue
        if skipped:  # SKIP TILL ... MATCH: the rows skipped are not in the match
            kept = [i for i in range(b - a) if lab_var[at + i] >= 0]
            out.append(RawMatch(a, num, [a + i for i in kept], [lab_var[at + i] for i in kept],
                                [lab_excl[at + i] for i in kept], timed_out=tmo))
        else:
            out.append(RawMatch(a, num, list(range(a, b)), lab_var[at:at + b - a],
                                lab_excl[at:at + b - a], timed_out=tmo))
        at += b - a
    return out


def all_rows_vectorised(fb: _FastBound, df: pd.DataFrame, work: dict[str, pd.Series],
                        positions: np.ndarray, start: np.ndarray, end: np.ndarray,
                        number: np.ndarray, labels: np.ndarray,
                        excluded: np.ndarray) -> pd.DataFrame | None:
    """ALL ROWS PER MATCH (SHOW or OMIT EMPTY MATCHES) from the match arrays, with
    RUNNING measures per output row, laid out as ``Bound._all_rows`` lays them out; None
    when a measure is not vectorisable (FINAL, aggregates, ...) or nothing is output."""
    measures = fb.vector_measures
    q = fb.plan.q
    if measures is None or any(getattr(me.expr, "semantics", None) == "FINAL"
                               for me in q.match.measures) or (
            len(labels) and bool((labels < 0).any())):  # rows skipped by SKIP TILL
        return None
    m = len(start)
    length = end - start
    offsets = np.zeros(m + 1, dtype=np.int64)
    np.cumsum(length, out=offsets[1:])
    match_of = np.repeat(np.arange(m, dtype=np.int64), length)
    flat = np.arange(len(labels), dtype=np.int64)
    flat_row = flat - offsets[match_of] + start[match_of]
    # Output rows: every row of a match that is not excluded, and the start row of an
    # empty match (SHOW EMPTY MATCHES), in match order.
    show_empty = q.match.rows_per_match != "ALL OMIT"
    out_flat = np.flatnonzero(~excluded)
    empty = np.flatnonzero(length == 0) if show_empty else np.zeros(0, dtype=np.int64)
    # merge: an empty match sorts at its place among the matches (by match index)
    keys = np.concatenate([match_of[out_flat], empty])
    order = np.argsort(keys, kind="stable")
    is_empty = np.concatenate([np.zeros(len(out_flat), bool), np.ones(len(empty), bool)])[order]
    src = np.concatenate([out_flat, empty])[order]  # flat index, or match index if empty
    n_out = len(src)
    if n_out == 0:
        return None
    out_match = np.where(is_empty, src, match_of[np.where(is_empty, 0, src)] if len(labels)
                         else 0)
    take = np.where(is_empty, start[out_match], flat_row[np.where(is_empty, 0, src)]
                    if len(labels) else 0)
    upto = np.where(is_empty, offsets[out_match], src + 1)  # flat rows of the running match
    names = q.variables
    series: list[pd.Series] = []
    for me, col in zip(measures, fb.measure_columns, strict=True):
        if me.kind in ("nav", "count"):
            inside = (np.ones(len(labels), dtype=bool) if me.var is None
                      else np.isin(labels, np.fromiter(me.var, dtype=np.int64)))
            cs = np.zeros(len(labels) + 1, dtype=np.int64)
            np.cumsum(inside, out=cs[1:])
            first_cs = cs[offsets[out_match]]
            upto_cs = cs[upto]
        if me.kind == "count":
            values: pd.Series = pd.Series(upto_cs - first_cs)
            missing = None
        elif me.kind == "nav":
            assert col is not None
            where = np.flatnonzero(inside)
            target = upto_cs - 1 - me.offset if me.from_end else first_cs + me.offset
            ok = (target >= first_cs) & (target < upto_cs)
            rows = np.where(ok, flat_row[where[np.where(ok, target, 0)]] if len(where)
                            else -1, -1)
            missing = rows < 0
            values = work[col].take(np.maximum(rows, 0)).reset_index(drop=True)
            missing = missing if missing.any() else None
        elif me.kind == "number":
            values, missing = pd.Series(number[out_match]), None
        else:  # classifier: the current row's variable
            label = np.where(is_empty, -1, labels[np.where(is_empty, 0, src)] if len(labels)
                             else -1)
            values = pd.Series(np.array([*names, None], dtype=object)[label], dtype=object)
            missing = label < 0
            missing = missing if missing.any() else None
        series.append(_like_records(values, missing))
    bound = fb.bound
    full = df.reset_index(drop=True)
    base = full.take(positions[take]).reset_index(drop=True)
    lead = list(dict.fromkeys(bound.partition_cols + bound.order_cols))
    rest = [c for c in base.columns if c not in lead]
    out_names: list[str] = [*lead, *bound.measure_names, *rest]
    columns = [base[c] for c in lead] + series + [base[c] for c in rest]
    frame = pd.concat([c.reset_index(drop=True) for c in columns], axis=1, ignore_index=True)
    frame.columns = out_names
    return frame


def _vector_measures_of(fb: _FastBound) -> list[FastMeasure] | None:
    return fb.vector_measures


def vector_measure_columns(bound: Bound) -> tuple[list[FastMeasure], list[str | None]] | None:
    """The query's measures if :func:`measure_values` can compute them all (else None),
    and the input column each one reads, as named in ``bound``'s input."""
    q = bound.q
    measures = vector_measures(q)
    if measures is None:
        return None
    scope = Scope(bound.columns, q._sets, "MEASURES")
    return measures, [None if me.column is None else scope.column(me.column)
                      for me in measures]


def _from_python(values: list[Any]) -> pd.Series:
    """A column as ``DataFrame.from_records`` infers it from Python values."""
    frame = pd.DataFrame.from_records([(v,) for v in values], columns=["v"])
    return frame["v"]


def _like_records(values: pd.Series, missing: np.ndarray | None) -> pd.Series:
    """``values`` (NULL where ``missing``) typed as the general path's from_records would
    type the equivalent Python values."""
    dt = values.dtype
    n = len(values)
    has_na = bool(values.isna().any()) if dt.kind in "fOM" or not isinstance(
        dt, np.dtype) else False
    if missing is not None and missing.all():
        return pd.Series([None] * n, dtype=object)
    if isinstance(dt, np.dtype):
        if dt == np.int64:
            if missing is None:
                return values.reset_index(drop=True)
            out = values.to_numpy().astype(np.float64)
            out[missing] = np.nan
            return pd.Series(out)
        if dt == np.float64:
            out = values.to_numpy().copy()
            if missing is not None:
                out[missing] = np.nan
            if np.isnan(out).all():
                return pd.Series([None] * n, dtype=object)
            return pd.Series(out)
        if dt == np.bool_ and missing is None:
            return values.reset_index(drop=True)
        if dt == np.dtype(object) and pd.api.types.infer_dtype(values, skipna=True) == "string":
            arr = values.to_numpy().copy()
            nulls = values.isna().to_numpy()
            if missing is not None:
                nulls = nulls | missing
            if nulls.all():
                return pd.Series([None] * n, dtype=object)
            if nulls.any() or has_na:
                arr[nulls] = None
            return pd.Series(arr, dtype=object)
    if (isinstance(dt, np.dtype) and dt.kind == "M") or isinstance(dt, pd.DatetimeTZDtype):
        # from_records turns Timestamps into nanosecond columns.
        target = "datetime64[ns]" if isinstance(dt, np.dtype) else pd.DatetimeTZDtype(
            "ns", dt.tz)
        try:
            out_dt = values.astype(target).reset_index(drop=True)
        except (ValueError, OverflowError):
            out_dt = None
        if out_dt is not None:
            nulls = out_dt.isna().to_numpy()
            if missing is not None:
                nulls = nulls | missing
            if nulls.all():
                return pd.Series([None] * n, dtype=object)
            if missing is not None:
                out_dt[missing] = pd.NaT
            return out_dt
    # Anything else: go through Python values like the general path.
    py = column_values(values)
    if missing is not None:
        for j in np.flatnonzero(missing).tolist():
            py[j] = None
    return _from_python(py)
