"""The compiled matching kernel (numba): the automaton of :mod:`cep_core.compile.nfa`
run over per-row condition bits, for every partition and start row, with the AFTER MATCH
SKIP chain, WITHIN and unmatched rows -- the same matches as the backtracking matcher
(:mod:`cep_core.runtime.matcher`), found without backtracking.

One attempt (from a start row) is a Pike-VM run: the live threads at a row are kept in
preference order, each a state plus a node of its path (the states it consumed, shared
between threads as a tree). A thread that consumes the row follows its closure; a thread
reaching ACCEPT records the match and cuts every less preferred thread; two threads in the
same state at the same row keep the preferred one. The match is the last one recorded
when no thread is left, which is the first accepted path of the depth-first matcher.

Without WITHIN, the (state, row) pairs visited by an attempt that found nothing cannot lead
to a match from any start row (conditions depend on the row only), so later attempts drop
threads that reach them: every (state, row) pair is expanded a bounded number of times,
which keeps patterns like ``(A+)+ B`` linear.

SKIP TILL NEXT / ANY MATCH (the general matcher's LABEL that scans ahead once the match
has a row): a thread that has consumed a row and sits in a state whose condition the
current row fails keeps waiting in that state for a later row; under ANY it also waits
when the row satisfies it, as the alternative less preferred than taking the row (the
depth-first matcher tries later rows for a label only after every path that takes the
earlier one). A waiting thread in state s at row r has the future of a thread entering s
at r, so the (state, row) rules above hold for it too; only the states entered before the
first row of an attempt (which must take that row) are not remembered across attempts.

Aggregates in DEFINE (``UP AS chg > 0 AND SUM(UP.chg) <= 6``; a conjunct ``AGG(column)
<op> row-local expression`` of COUNT/SUM/AVG/MIN/MAX over a column of numbers that float64
holds exactly): each thread carries the running aggregates of its path, updated when it
consumes a row; a row satisfies a variable if its bit is set and its aggregate conditions
hold with the row included. Two threads in the same state at the same row then have the
same future only if their aggregates are equal too: both are kept otherwise, so the number
of threads is no longer bounded by the states (past ``MAX_AGG_THREADS`` the caller falls
back to the general matcher), and nothing is remembered across attempts.

Navigation in DEFINE (``B AS x > A.x``, ``x >= FIRST(x)``: the value of a column at the
first / last row of a variable so far) is carried the same way, as the aggregates FIRST
and LAST (a NULL value is kept as NaN, which the fast path reads as NULL anyway), and so
are ``MATCH_NUMBER()`` (set when an attempt starts: the matches before it plus one) and
``PREV(CLASSIFIER())`` (the variable of the path's last row, if that is the row before).
FILTER and ``CASE WHEN CLASSIFIER() ...`` arguments only change which rows an aggregate
takes (the caller's per-row and per-variable inputs).

Negation (``NOT v``, SKIP TILL): a state carries the variables negated before it
(:mod:`cep_core.compile.nfa`); a thread waiting in it dies at a row that satisfies one of
them, and an ACCEPT after a trailing ``NOT`` holds only if no row after the match inside
the window satisfies it (:func:`_trailing`; otherwise the next target is tried, as the
backtracking matcher tries its next path).

EMIT TIMEOUTS: an attempt without a match whose threads are cut off by the window (or the
partition's end) yields the path of the most preferred of the longest of them, the
backtracking matcher's first longest partial match (under strict contiguity all have the
same length; under SKIP TILL the threads carry a COUNT(*) so that two threads in one state
with different numbers of rows are both kept, as for aggregates).

CONSUMPTION modes (:func:`consume`) are not an automaton: the open instances of
:mod:`cep_core.runtime.consumption` are kept per stage as queues of instances (rows in a
pool, never modified in place); a row extends an instance if its condition bit is set and
the DEFINE's aggregate / navigation conditions hold over the instance's rows and the row.

This module imports numba; it is only imported when a query runs on the kernel.
"""

from __future__ import annotations

import numpy as np
from numba import njit  # type: ignore[import-untyped, unused-ignore]

# Skip kinds as the kernel takes them.
PAST_LAST_ROW, TO_NEXT_ROW, TO_FIRST, TO_LAST = 0, 1, 2, 3
# Selection strategies as the kernel takes them.
STRICT, NEXT, ANY = 0, 1, 2
SELECTIONS = {"STRICT": STRICT, "NEXT": NEXT, "ANY": ANY}
# Aggregates in DEFINE as the kernel takes them; comparisons are in AGG_OPS' order.
# FIRST / LAST (navigation to the first / last row of the set so far, NULL values kept).
# MATCH_NUMBER (the number the attempt's match would get) is carried the same way.
AGG_COUNT, AGG_SUM, AGG_AVG, AGG_MIN, AGG_MAX, AGG_FIRST, AGG_LAST = 0, 1, 2, 3, 4, 5, 6
# PREV(CLASSIFIER()): the variable of the row before, kept as ``row * 64 + variable`` of
# the path's last row (NULL unless that row is the one before the current row).
AGG_NUMBER, AGG_PREV_LABEL = 7, 8
AGG_FUNCS = {"COUNT": AGG_COUNT, "SUM": AGG_SUM, "AVG": AGG_AVG, "MIN": AGG_MIN,
             "MAX": AGG_MAX, "FIRST": AGG_FIRST, "LAST": AGG_LAST,
             "MATCH_NUMBER": AGG_NUMBER, "PREV_CLASSIFIER": AGG_PREV_LABEL}
AGG_OPS = ("=", "<>", "<", "<=", ">", ">=")
MAX_AGG_THREADS = 4096  # live threads per row with aggregates, else the general matcher
MEMO_LIMIT = 1 << 24  # (rows + 1) x states of a partition for cross-attempt memoisation


@njit(cache=True)
def _grow(a: np.ndarray, need: int) -> np.ndarray:  # pragma: no cover - compiled
    if need <= len(a):
        return a
    size = max(need, 2 * len(a) + 16)
    b = np.empty(size, dtype=a.dtype)
    b[:len(a)] = a
    return b


@njit(cache=True, inline="always")
def _enter(memo: bool, marks: np.ndarray, failed: np.ndarray, stamp: np.ndarray, m_i: int,
           t: int, start: int, step: int) -> bool:  # pragma: no cover - compiled
    """Whether a thread may enter state ``t`` (and mark it entered). With ``memo`` the mark
    is per (row, state) at index ``m_i`` and holds the attempt's start: refused if this
    attempt was there already or an attempt that failed was; otherwise per state, once per
    ``step``."""
    if memo:
        m = marks[m_i]
        if m == start or (m >= 0 and failed[m]):
            return False
        marks[m_i] = start
        return True
    if stamp[t] == step:
        return False
    stamp[t] = step
    return True


@njit(cache=True)
def _has_twin(n_aggs: int, t: int, n_nxt: int, nxt_s: np.ndarray, nxt_acc: np.ndarray,
              nxt_cnt: np.ndarray, acc: np.ndarray,
              cnt: np.ndarray) -> bool:  # pragma: no cover - compiled
    """A thread of this step is in state ``t`` with the running aggregates ``acc, cnt``."""
    for i in range(n_nxt):
        if nxt_s[i] != t:
            continue
        same = True
        for k in range(n_aggs):
            a = nxt_acc[i, k]
            if nxt_cnt[i, k] != cnt[k] or (cnt[k] > 0 and a != acc[k]
                                           and (a == a or acc[k] == acc[k])):  # NaN: NULL
                same = False
                break
        if same:
            return True
    return False


@njit(cache=True, inline="always")
def _load(acc: np.ndarray, cnt: np.ndarray, from_acc: np.ndarray, from_cnt: np.ndarray,
          i: int) -> None:  # pragma: no cover - compiled
    """Thread ``i``'s running aggregates into ``acc, cnt`` (no work without aggregates)."""
    for k in range(len(acc)):
        acc[k] = from_acc[i, k]
        cnt[k] = from_cnt[i, k]


@njit(cache=True, inline="always")
def _store(to_acc: np.ndarray, to_cnt: np.ndarray, i: int, acc: np.ndarray,
           cnt: np.ndarray) -> None:  # pragma: no cover - compiled
    for k in range(len(acc)):
        to_acc[i, k] = acc[k]
        to_cnt[i, k] = cnt[k]


@njit(cache=True)
def _aggregates_hold(v: int, pos: int, acc: np.ndarray, cnt: np.ndarray, out_acc: np.ndarray,
                     out_cnt: np.ndarray, aggs: tuple[np.ndarray, ...]
                     ) -> bool:  # pragma: no cover - compiled
    """Row ``pos`` mapped to variable ``v`` after a path with running aggregates ``acc,
    cnt``: the aggregates with it (into ``out_acc, out_cnt``) and whether every aggregate
    condition of ``v``'s DEFINE is TRUE (RUNNING semantics: the row is included)."""
    (agg_val, agg_ok, agg_over, agg_func, agg_owner, agg_op, agg_rhs, agg_rhs_ok, agg_sign,
     agg_extra, agg_factor) = aggs
    ok = True
    for k in range(len(agg_func)):
        a = acc[k]
        n = cnt[k]
        f = agg_func[k]
        prev = -1.0  # PREV(CLASSIFIER()): the variable of row pos - 1 (-1: NULL)
        if f == AGG_NUMBER:
            pass  # set when the attempt starts
        elif f == AGG_PREV_LABEL:
            if n > 0 and np.floor(a / 64.0) == pos - 1:
                prev = a - (pos - 1) * 64.0
            a = pos * 64.0 + v
            n = 1
        elif f >= AGG_FIRST:
            if (agg_over[k] >> np.uint64(v)) & np.uint64(1) and (n == 0 or f == AGG_LAST):
                a = agg_val[k, pos] if agg_ok[k, pos] else np.nan  # NaN: a NULL value
                n = 1
        elif (agg_over[k] >> np.uint64(v)) & np.uint64(1) and agg_ok[k, pos]:
            x = agg_val[k, pos]
            if n == 0:
                a = x
            elif f == AGG_SUM or f == AGG_AVG:
                a = a + x
            elif f == AGG_MIN:
                a = x if x < a else a
            elif f == AGG_MAX:
                a = x if x > a else a
            n += 1
        out_acc[k] = a
        out_cnt[k] = n
        if agg_owner[k] != v or not ok:
            continue
        if not agg_rhs_ok[k, pos]:
            ok = False
            continue
        if f == AGG_COUNT:
            value = float(n)
        elif f == AGG_PREV_LABEL:
            if prev < 0:
                ok = False  # NULL
                continue
            value = prev
        elif n == 0 or (f >= AGG_FIRST and a != a):
            ok = False  # NULL
            continue
        elif f == AGG_AVG:
            value = a / n
        else:
            value = a
        # sign * (value * factor) + extra (the addend's sign applied already); a factor /
        # addend array of one column: none in any condition (* 1.0 and + 0.0 change
        # nothing), not read per row
        if agg_factor.shape[1] > 1:
            value = value * agg_factor[k, pos]
        value = agg_sign[k] * value
        if agg_extra.shape[1] > 1:
            value = value + agg_extra[k, pos]
        y = agg_rhs[k, pos]
        op = agg_op[k]
        if op == 0:
            ok = value == y
        elif op == 1:
            ok = value != y
        elif op == 2:
            ok = value < y
        elif op == 3:
            ok = value <= y
        elif op == 4:
            ok = value > y
        else:
            ok = value >= y
    return ok


@njit(cache=True)
def _trailing(bits: np.ndarray, present: np.ndarray, mask: np.uint64, start: int, pos: int,
              hi: int, horizon: np.ndarray, has_window: bool) -> int:  # pragma: no cover
    """A trailing ``NOT`` (variables ``mask``) after a match of rows ``start..pos-1``: 0 if
    a row after it inside the window (rows ``pos..``, up to the window's end) satisfies
    one of them, 1 if none does and the window has passed (a later row with an order value
    lies beyond it), 2 if none does so far but the window reaches the last row ``hi - 1``
    (incremental matching waits; at the end of the input the match holds). Rows without an
    order value are not checked."""
    if mask == 0 or not has_window or not present[start]:
        return 1
    end = min(hi, horizon[start])
    for r in range(pos, end):
        if present[r] and (bits[r] & mask) != 0:
            return 0
    if end < hi and present[end]:
        return 1
    return 2


@njit(cache=True, inline="always")
def _path(o_lab: np.ndarray, at: int, length: int, node: int, node_parent: np.ndarray,
          node_state: np.ndarray, node_row: np.ndarray, start: int, n_states: int,
          skipping: bool) -> None:  # pragma: no cover - compiled
    """The states of the path ending at ``node`` into ``o_lab[at:at + length]`` (its rows
    ``start..start+length-1``; ``skipping``, SKIP TILL: a row the path skipped gets
    ``n_states``)."""
    if skipping:
        o_lab[at:at + length] = n_states
        while node >= 0:
            o_lab[at + node_row[node] - start] = node_state[node]
            node = node_parent[node]
    else:
        for r in range(length - 1, -1, -1):
            o_lab[at + r] = node_state[node]
            node = node_parent[node]


@njit(cache=True)
def run(bits: np.ndarray, bounds: np.ndarray, horizon: np.ndarray, has_window: bool,
        state_var: np.ndarray, ptr: np.ndarray, targets: np.ndarray, skip_kind: int,
        skip_mask: np.int64, report_unmatched: bool, memo_limit: int,
        first: np.ndarray, covered_from: np.ndarray, begin: np.ndarray,
        numbers: np.ndarray, open_: bool,
        touches_end: np.ndarray, stops: np.ndarray, selection: int | None,
        aggs: tuple[np.ndarray, ...] | None, max_threads: int, ahead: int,
        neg: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
        timeouts: bool | None = None
        ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray,
                   int, np.ndarray]:  # pragma: no cover - compiled
    """Matches of every partition ``bounds[j]..bounds[j+1]-1``, from its row ``first[j]``
    (rows below ``covered_from[j]`` count as covered by a match; '^' matches at row
    ``begin[j]``).

    Matches are numbered from ``numbers[j] + 1`` (the matches before).

    Returns (start, end, number, unmatched flag) per output record, the states of the
    matched rows (concatenated, ``end - start`` per match, none for unmatched rows), and
    the index of a record whose AFTER MATCH SKIP target is invalid (-1: none; matching
    stopped there).

    ``open_`` (incremental matching): more rows may follow each partition; the first
    attempt whose outcome depends on them (a thread still alive after the last row, or a
    '$' passed there) stops the partition, and ``stops[j]`` is set to its start row (else
    to the end of the partition). The last ``ahead`` rows of each partition (whose
    conditions or measures read rows that may follow: NEXT) count as not arrived yet.

    ``selection`` (SKIP TILL NEXT / ANY MATCH, see the module docstring; None: STRICT, and
    numba compiles the kernel without that code): a matched row between two others may be
    skipped; the label of a skipped row is ``n_states``.

    ``aggs`` (None: no aggregate conditions; numba then compiles the kernel without their
    code): per aggregate condition ``AGG(column) <op> rhs`` of a DEFINE (see the module
    docstring), the column per row and whether it is non-NULL, the variables aggregated
    over (bit mask), the function, the variable whose DEFINE has the condition, the
    comparison and its right-hand side per row and whether that is non-NULL (and that of
    the addend and factor), the sign of the value, the addend and the factor per row (the
    left side is ``sign * (value * factor) + addend``). If a step
    needs more than ``max_threads`` threads, matching stops and the bad record index is -2
    (the caller runs the general matcher).

    ``neg`` (negation, :mod:`cep_core.compile.nfa`; None: none, numba compiles without
    it): per state the variables (bit mask) a row it skips may not satisfy, per ACCEPT
    target ``n_states + i`` those of a trailing NOT (:func:`_trailing`), and per row
    whether it has an order value.

    ``timeouts`` (EMIT TIMEOUTS; None: none, numba compiles the kernel without its code,
    which every query paid ~4 % for as a run-time flag, and the last array is then not
    filled): an attempt that finds no match but has threads left when the window (or the
    partition) ends yields a timed-out partial match, the path of the most preferred of
    the longest of them (under STRICT all have the same length; under SKIP TILL the caller
    keeps threads with different numbers of rows apart, see
    :class:`cep_core.compile.fast_plan.FastPlan`), numbered like a match; the last array
    flags these records."""
    n_states = len(state_var)
    accept = n_states
    o_start = np.empty(16, dtype=np.int64)
    o_end = np.empty(16, dtype=np.int64)
    o_num = np.empty(16, dtype=np.int64)
    o_unm = np.empty(16, dtype=np.bool_)
    o_lab = np.empty(16, dtype=np.int32)
    o_tmo = np.zeros(16, dtype=np.bool_)
    n_out = 0
    n_lab = 0
    n_aggs = 0
    with_number = False  # a DEFINE compares MATCH_NUMBER()
    cap = n_states + 1
    if aggs is not None:
        n_aggs = len(aggs[3])
        cap = max(cap, max_threads)
        for k in range(n_aggs):
            if aggs[3][k] == AGG_NUMBER:
                with_number = True
    cur_s = np.empty(cap, dtype=np.int64)
    cur_n = np.empty(cap, dtype=np.int64)
    nxt_s = np.empty(cap, dtype=np.int64)
    nxt_n = np.empty(cap, dtype=np.int64)
    cur_acc = np.zeros((cap, n_aggs), dtype=np.float64)
    cur_cnt = np.zeros((cap, n_aggs), dtype=np.int64)
    nxt_acc = np.zeros((cap, n_aggs), dtype=np.float64)
    nxt_cnt = np.zeros((cap, n_aggs), dtype=np.int64)
    new_acc = np.zeros(n_aggs, dtype=np.float64)
    new_cnt = np.zeros(n_aggs, dtype=np.int64)
    zero_acc = np.zeros(n_aggs, dtype=np.float64)
    zero_cnt = np.zeros(n_aggs, dtype=np.int64)
    old_acc = np.zeros(n_aggs, dtype=np.float64)
    old_cnt = np.zeros(n_aggs, dtype=np.int64)
    node_parent = np.empty(64, dtype=np.int64)
    node_state = np.empty(64, dtype=np.int64)
    node_row = np.empty(64, dtype=np.int64)
    stamp = np.full(n_states + 1, -1, dtype=np.int64)
    step = 0
    failed = np.zeros(len(bits) + 1, dtype=np.bool_)
    var_bit = np.empty(n_states, dtype=np.uint64)
    for k in range(n_states):
        var_bit[k] = np.uint64(1) << np.uint64(state_var[k])
    for j in range(len(bounds) - 1):
        lo = bounds[j]
        hi = max(lo, bounds[j + 1] - ahead)
        memo = (not has_window) and (hi - lo + 1) * n_states <= memo_limit
        if aggs is not None:
            memo = False
        # under SKIP TILL, a state entered before the first row must take that very row:
        # not the future of the same state entered later, so not remembered
        memo_first = memo
        if selection is not None:
            memo_first = False
        marks = np.full((hi - lo + 1) * n_states if memo else 1, -1, dtype=np.int64)
        start = first[j]
        covered = covered_from[j]
        number = numbers[j]
        stops[j] = max(hi, first[j])  # (a start past hi: rows are still to come)
        at_begin = begin[j]
        while start < hi:
            # ---- one attempt from `start`
            limit = hi
            if has_window:
                limit = min(hi, horizon[start])
            n_nodes = 0
            t_end = -1  # EMIT TIMEOUTS: the end and path of the partial match cut off
            t_node = -1
            best_end = -1
            best_node = -1
            pos = start
            step += 1
            n_cur = 0
            touched = False
            if aggs is not None and with_number:
                for k in range(n_aggs):
                    if aggs[3][k] == AGG_NUMBER:  # MATCH_NUMBER() of this attempt
                        zero_acc[k] = number + 1
                        zero_cnt[k] = 1
            case = (2 if pos == at_begin else 0) + (1 if pos == hi else 0)
            i = case
            for t_i in range(ptr[i], ptr[i + 1]):
                t = targets[t_i]
                if t >= accept:
                    if neg is not None:
                        verdict = _trailing(bits, neg[2], neg[1][t - accept], start, pos, hi,
                                            horizon, has_window)
                        if verdict == 0:
                            continue
                        if verdict == 2 and open_:
                            touched = True
                    best_end = pos
                    best_node = -1
                    break
                if aggs is None:
                    if not _enter(memo_first, marks, failed, stamp,
                                  (pos - lo) * n_states + t, t, start, step):
                        continue
                else:
                    if _has_twin(n_aggs, t, n_cur, cur_s, cur_acc, cur_cnt, zero_acc,
                                 zero_cnt):
                        continue
                    _store(cur_acc, cur_cnt, n_cur, zero_acc, zero_cnt)
                cur_s[n_cur] = t
                cur_n[n_cur] = -1
                n_cur += 1
            while n_cur > 0:
                step += 1
                n_nxt = 0
                if pos == hi and open_:
                    touched = True  # the thread waits for the next row
                    break
                if pos < limit:
                    b = bits[pos]
                    case = (2 if pos + 1 == at_begin else 0) + (1 if pos + 1 == hi else 0)
                    for c in range(n_cur):
                        s = cur_s[c]
                        holds = (b & var_bit[s]) != 0
                        if aggs is not None:
                            _load(old_acc, old_cnt, cur_acc, cur_cnt, c)
                            if holds:
                                holds = _aggregates_hold(state_var[s], pos, old_acc, old_cnt,
                                                         new_acc, new_cnt, aggs)
                        if not holds:
                            if selection is None or pos == start:
                                continue  # (numba prunes the rest under STRICT)
                        else:
                            if n_nodes == len(node_parent):
                                node_parent = _grow(node_parent, n_nodes + 1)
                                node_state = _grow(node_state, n_nodes + 1)
                            node_parent[n_nodes] = cur_n[c]
                            node_state[n_nodes] = s
                            if selection is not None:
                                node_row = _grow(node_row, n_nodes + 1)
                                node_row[n_nodes] = pos
                            node = n_nodes
                            n_nodes += 1
                            i = (s + 1) * 4 + case
                            if open_ and touches_end[i]:
                                touched = True
                            accepted = False
                            for t_i in range(ptr[i], ptr[i + 1]):
                                t = targets[t_i]
                                if t >= accept:
                                    if neg is not None:
                                        verdict = _trailing(bits, neg[2], neg[1][t - accept],
                                                            start, pos + 1, hi, horizon,
                                                            has_window)
                                        if verdict == 0:
                                            continue  # the trailing NOT fails this path
                                        if verdict == 2 and open_:
                                            touched = True
                                    best_end = pos + 1
                                    best_node = node
                                    accepted = True
                                    break
                                if aggs is None:
                                    if not _enter(memo, marks, failed, stamp,
                                                  (pos + 1 - lo) * n_states + t, t, start, step):
                                        continue
                                else:
                                    if _has_twin(n_aggs, t, n_nxt, nxt_s, nxt_acc, nxt_cnt,
                                                 new_acc, new_cnt):
                                        continue
                                    if n_nxt == cap:
                                        return (o_start[:n_out], o_end[:n_out], o_num[:n_out],
                                                o_unm[:n_out], o_lab[:n_lab], -2, o_tmo[:n_out])
                                    _store(nxt_acc, nxt_cnt, n_nxt, new_acc, new_cnt)
                                nxt_s[n_nxt] = t
                                nxt_n[n_nxt] = node
                                n_nxt += 1
                            if accepted:
                                break  # less preferred threads are cut
                            if selection is None or selection != ANY or pos == start:
                                continue
                        # SKIP TILL NEXT / ANY MATCH: wait in s for a later row (the row
                        # fails; under ANY also when it holds, as the alternative less
                        # preferred than taking it) -- unless the row satisfies a variable
                        # negated before s (NOT v: it may not be skipped over)
                        if neg is not None and (b & neg[0][s]) != 0:
                            continue
                        if aggs is None:
                            if _enter(memo, marks, failed, stamp,
                                      (pos + 1 - lo) * n_states + s, s, start, step):
                                nxt_s[n_nxt] = s
                                nxt_n[n_nxt] = cur_n[c]
                                n_nxt += 1
                        elif not _has_twin(n_aggs, s, n_nxt, nxt_s, nxt_acc, nxt_cnt,
                                           old_acc, old_cnt):
                            if n_nxt == cap:
                                return (o_start[:n_out], o_end[:n_out], o_num[:n_out],
                                        o_unm[:n_out], o_lab[:n_lab], -2, o_tmo[:n_out])
                            nxt_s[n_nxt] = s
                            nxt_n[n_nxt] = cur_n[c]
                            _store(nxt_acc, nxt_cnt, n_nxt, old_acc, old_cnt)
                            n_nxt += 1
                if timeouts is not None and pos >= limit and pos > start:
                    # the threads left are cut off by the window: the most preferred of
                    # the longest (under SKIP TILL they differ in the rows they took)
                    t_end = pos
                    t_node = cur_n[0]
                    if selection is not None:
                        most = -1
                        for c in range(n_cur):
                            length = 0
                            node = cur_n[c]
                            while node >= 0:
                                length += 1
                                node = node_parent[node]
                            if length > most:
                                most = length
                                t_node = cur_n[c]
                        t_end = node_row[t_node] + 1
                tmp_s = cur_s
                cur_s = nxt_s
                nxt_s = tmp_s
                tmp_n = cur_n
                cur_n = nxt_n
                nxt_n = tmp_n
                if aggs is not None:
                    tmp_acc = cur_acc
                    cur_acc = nxt_acc
                    nxt_acc = tmp_acc
                    tmp_cnt = cur_cnt
                    cur_cnt = nxt_cnt
                    nxt_cnt = tmp_cnt
                n_cur = n_nxt
                pos += 1
            # ---- record the outcome
            if touched:
                stops[j] = start
                break
            if timeouts is not None and best_end < 0 and t_end >= 0:
                # a timed-out partial match; resume at start + 1
                number += 1
                need = n_out + 1
                o_start = _grow(o_start, need)
                o_end = _grow(o_end, need)
                o_num = _grow(o_num, need)
                o_unm = _grow(o_unm, need)
                o_tmo = _grow(o_tmo, need)
                o_start[n_out] = start
                o_end[n_out] = t_end
                o_num[n_out] = number
                o_unm[n_out] = False
                o_tmo[n_out] = True
                n_out += 1
                length = t_end - start
                o_lab = _grow(o_lab, n_lab + length)
                _path(o_lab, n_lab, length, t_node, node_parent, node_state, node_row, start,
                      n_states, selection is not None)
                n_lab += length
                start += 1
                continue
            if best_end < 0:
                if memo:
                    failed[start] = True
                if report_unmatched and start >= covered:
                    need = n_out + 1
                    o_start = _grow(o_start, need)
                    o_end = _grow(o_end, need)
                    o_num = _grow(o_num, need)
                    o_unm = _grow(o_unm, need)
                    if timeouts is not None:
                        o_tmo = _grow(o_tmo, need)
                        o_tmo[n_out] = False
                    o_start[n_out] = start
                    o_end[n_out] = start
                    o_num[n_out] = 0
                    o_unm[n_out] = True
                    n_out += 1
                start += 1
                continue
            number += 1
            need = n_out + 1
            o_start = _grow(o_start, need)
            o_end = _grow(o_end, need)
            o_num = _grow(o_num, need)
            o_unm = _grow(o_unm, need)
            if timeouts is not None:
                o_tmo = _grow(o_tmo, need)
                o_tmo[n_out] = False
            o_start[n_out] = start
            o_end[n_out] = best_end
            o_num[n_out] = number
            o_unm[n_out] = False
            n_out += 1
            length = best_end - start
            o_lab = _grow(o_lab, n_lab + length)
            _path(o_lab, n_lab, length, best_node, node_parent, node_state, node_row, start,
                  n_states, selection is not None)
            first_lab = n_lab
            n_lab += length
            if length > 0:
                covered = max(covered, best_end)
            elif report_unmatched:
                covered = max(covered, start + 1)
            if length == 0 or skip_kind == TO_NEXT_ROW:
                start += 1
            elif skip_kind == PAST_LAST_ROW:
                start = best_end
            else:
                target = -1
                if skip_kind == TO_FIRST:
                    for r in range(length):
                        lab = o_lab[first_lab + r]
                        if lab < n_states and (skip_mask >> state_var[lab]) & 1:
                            target = start + r
                            break
                else:
                    for r in range(length - 1, -1, -1):
                        lab = o_lab[first_lab + r]
                        if lab < n_states and (skip_mask >> state_var[lab]) & 1:
                            target = start + r
                            break
                if target < 0 or target == start:
                    return (o_start[:n_out], o_end[:n_out], o_num[:n_out], o_unm[:n_out],
                            o_lab[:n_lab], n_out - 1, o_tmo[:n_out])
                start = target
    return (o_start[:n_out], o_end[:n_out], o_num[:n_out], o_unm[:n_out], o_lab[:n_lab], -1,
            o_tmo[:n_out])


@njit(cache=True)
def _instance_holds(v: int, r: int, off: int, length: int, pool_r: np.ndarray,
                    pool_l: np.ndarray, aggs: tuple[np.ndarray, ...], acc: np.ndarray,
                    cnt: np.ndarray, out_acc: np.ndarray,
                    out_cnt: np.ndarray) -> bool:  # pragma: no cover - compiled
    """Whether the aggregate conditions of ``v``'s DEFINE hold for row ``r`` mapped to
    ``v`` after the instance whose rows and variables are ``pool_r/pool_l[off:off +
    length]`` (their running aggregates, as a thread of :func:`run` carries them)."""
    acc[:] = 0.0
    cnt[:] = 0
    for x in range(off, off + length):
        _aggregates_hold(pool_l[x], pool_r[x], acc, cnt, out_acc, out_cnt, aggs)
        acc[:] = out_acc
        cnt[:] = out_cnt
    return _aggregates_hold(v, r, acc, cnt, out_acc, out_cnt, aggs)


# Consumption modes as :func:`consume` takes them.
RECENT, FIRST, CHRONICLE, CUMULATIVE, CONTINUOUS = 0, 1, 2, 3, 4
MODES = {"RECENT": RECENT, "FIRST": FIRST, "CHRONICLE": CHRONICLE, "CUMULATIVE": CUMULATIVE,
         "CONTINUOUS": CONTINUOUS}


@njit(cache=True)
def consume(bits: np.ndarray, bounds: np.ndarray, horizon: np.ndarray, present: np.ndarray,
            has_window: bool, mode: int, k: int, first: np.ndarray, ahead: int,
            init_part: np.ndarray, init_stage: np.ndarray, init_len: np.ndarray,
            init_rows: np.ndarray, init_labs: np.ndarray, emitted: np.ndarray,
            aggs: tuple[np.ndarray, ...] | None = None
            ) -> tuple[np.ndarray, ...]:  # pragma: no cover - compiled
    """CONSUMPTION ``mode`` over the partitions ``bounds[j]..bounds[j+1]-1`` for
    ``PATTERN (V0 .. V(k-1))`` (row-local conditions: bit ``v`` of ``bits[r]``): the
    instance semantics of :mod:`cep_core.runtime.consumption`. Partition ``j`` is
    processed from row ``first[j]`` up to its last ``ahead`` rows (rows whose conditions
    read rows not arrived yet), starting from the open instances given as ``init_*``
    (partition, stage, number of rows, and their rows and variables concatenated; grouped
    by partition, in stage order) and ``emitted[j]`` matches emitted before. ``aggs`` (as
    :func:`run` takes them; None: none): the DEFINEs' conditions on the match so far,
    evaluated over an instance's rows and the row (:func:`_instance_holds`); a terminator
    then takes the oldest instance they hold for (CHRONICLE), every such instance
    (CONTINUOUS, which still empties the stage), or the single one if they hold. With a
    window, an instance is dropped at a row ``r >= horizon[its first row]`` (a CUMULATIVE
    stage-1 aggregate drops its rows one by one) and rows without an order value
    (``present``) are ignored.

    Returns the matches (partition, number, rows' count; rows and variables
    concatenated), the open instances at the end (as ``init_*``), and per partition the
    matches emitted and the next row to process."""
    n_parts = len(bounds) - 1
    pool_r = np.empty(64, dtype=np.int64)
    pool_l = np.empty(64, dtype=np.int64)
    n_pool = 0
    inst_off = np.empty(16, dtype=np.int64)
    inst_len = np.empty(16, dtype=np.int64)
    n_inst = 0
    cap = 16
    queue = np.empty((k, cap), dtype=np.int64)
    head = np.zeros(k, dtype=np.int64)
    tail = np.zeros(k, dtype=np.int64)
    pend = np.empty(16, dtype=np.int64)
    m_part = np.empty(16, dtype=np.int64)
    m_num = np.empty(16, dtype=np.int64)
    m_len = np.empty(16, dtype=np.int64)
    m_rows = np.empty(16, dtype=np.int64)
    m_labs = np.empty(16, dtype=np.int64)
    n_m = 0
    n_mr = 0
    f_part = np.empty(16, dtype=np.int64)
    f_stage = np.empty(16, dtype=np.int64)
    f_len = np.empty(16, dtype=np.int64)
    f_rows = np.empty(16, dtype=np.int64)
    f_labs = np.empty(16, dtype=np.int64)
    n_f = 0
    n_fr = 0
    numbers = emitted.copy()
    stops = np.zeros(n_parts, dtype=np.int64)
    sel = np.empty(16, dtype=np.int64)
    n_aggs = 0 if aggs is None else len(aggs[3])
    acc = np.zeros(n_aggs, dtype=np.float64)
    cnt = np.zeros(n_aggs, dtype=np.int64)
    out_acc = np.zeros(n_aggs, dtype=np.float64)
    out_cnt = np.zeros(n_aggs, dtype=np.int64)
    c = 0  # next initial instance
    c_row = 0
    for j in range(n_parts):
        gc_at = 4096
        lo = bounds[j]
        end = max(lo, bounds[j + 1] - ahead)
        head[:] = 0
        tail[:] = 0
        n_pool = 0
        n_inst = 0
        while c < len(init_part) and init_part[c] == j:
            length = init_len[c]
            pool_r = _grow(pool_r, n_pool + length)
            pool_l = _grow(pool_l, n_pool + length)
            pool_r[n_pool:n_pool + length] = init_rows[c_row:c_row + length]
            pool_l[n_pool:n_pool + length] = init_labs[c_row:c_row + length]
            inst_off = _grow(inst_off, n_inst + 1)
            inst_len = _grow(inst_len, n_inst + 1)
            inst_off[n_inst] = n_pool
            inst_len[n_inst] = length
            s = init_stage[c]
            if tail[s] == cap:
                bigger = np.empty((k, 2 * cap), dtype=np.int64)
                bigger[:, :cap] = queue
                queue = bigger
                cap *= 2
            queue[s, tail[s]] = n_inst
            tail[s] += 1
            n_inst += 1
            n_pool += length
            c_row += length
            c += 1
        number = numbers[j]
        for r in range(first[j], end):
            if has_window:
                if not present[r]:
                    continue
                for s in range(1, k):
                    w = head[s]
                    for q in range(head[s], tail[s]):
                        i = queue[s, q]
                        off = inst_off[i]
                        length = inst_len[i]
                        if mode == CUMULATIVE and s == 1:
                            kept = 0
                            for x in range(off, off + length):
                                if r < horizon[pool_r[x]]:
                                    kept += 1
                            if kept == 0:
                                continue
                            if kept < length:  # a new instance of the rows kept
                                pool_r = _grow(pool_r, n_pool + kept)
                                pool_l = _grow(pool_l, n_pool + kept)
                                at = n_pool
                                for x in range(off, off + length):
                                    if r < horizon[pool_r[x]]:
                                        pool_r[at] = pool_r[x]
                                        pool_l[at] = pool_l[x]
                                        at += 1
                                inst_off = _grow(inst_off, n_inst + 1)
                                inst_len = _grow(inst_len, n_inst + 1)
                                inst_off[n_inst] = n_pool
                                inst_len[n_inst] = kept
                                n_pool += kept
                                i = n_inst
                                n_inst += 1
                        elif r >= horizon[pool_r[off]]:
                            continue
                        queue[s, w] = i
                        w += 1
                    tail[s] = w
            # ---- the row's role: terminator of the highest stage that takes it, else
            # initiator; the new instances to deliver to stage `target` go to `pend`
            n_pend = 0
            target = -1
            b = bits[r]
            for s in range(k - 1, 0, -1):
                if head[s] == tail[s] or not (b >> np.uint64(s)) & np.uint64(1):
                    continue
                if mode == FIRST and s + 1 < k and head[s + 1] < tail[s + 1]:
                    continue  # the next stage is taken: the row does not play this role
                # the instances the row terminates (queue positions, oldest first)
                last = tail[s] if mode == CHRONICLE or mode == CONTINUOUS else head[s] + 1
                sel = _grow(sel, last - head[s])
                n_sel = 0
                for q in range(head[s], last):
                    i = queue[s, q]
                    if aggs is None or _instance_holds(s, r, inst_off[i], inst_len[i], pool_r,
                                                       pool_l, aggs, acc, cnt, out_acc,
                                                       out_cnt):
                        sel[n_sel] = q
                        n_sel += 1
                        if mode != CONTINUOUS:
                            break
                if n_sel == 0:
                    continue
                pend = _grow(pend, n_sel)
                for e in range(n_sel):
                    i = queue[s, sel[e]]
                    off = inst_off[i]
                    length = inst_len[i]
                    pool_r = _grow(pool_r, n_pool + length + 1)
                    pool_l = _grow(pool_l, n_pool + length + 1)
                    pool_r[n_pool:n_pool + length] = pool_r[off:off + length]
                    pool_l[n_pool:n_pool + length] = pool_l[off:off + length]
                    pool_r[n_pool + length] = r
                    pool_l[n_pool + length] = s
                    inst_off = _grow(inst_off, n_inst + 1)
                    inst_len = _grow(inst_len, n_inst + 1)
                    inst_off[n_inst] = n_pool
                    inst_len[n_inst] = length + 1
                    n_pool += length + 1
                    pend[n_pend] = n_inst
                    n_pend += 1
                    n_inst += 1
                if mode == CONTINUOUS:
                    head[s] = tail[s]  # the stage is emptied
                else:  # the instance taken leaves the queue (the others keep their order)
                    for q in range(sel[0], head[s], -1):
                        queue[s, q] = queue[s, q - 1]
                    head[s] += 1
                if head[s] == tail[s]:
                    head[s] = 0
                    tail[s] = 0
                target = s + 1
                break
            if target < 0:
                if mode == FIRST and head[1] < tail[1]:
                    continue  # later initiators wait until the first one is consumed
                if not b & np.uint64(1):
                    continue
                if aggs is not None:  # V0's DEFINE after the CUMULATIVE aggregate, if any
                    base_off = 0
                    base_len = 0
                    if mode == CUMULATIVE and head[1] < tail[1]:
                        base_off = inst_off[queue[1, head[1]]]
                        base_len = inst_len[queue[1, head[1]]]
                    if not _instance_holds(0, r, base_off, base_len, pool_r, pool_l, aggs, acc,
                                           cnt, out_acc, out_cnt):
                        continue
                pool_r = _grow(pool_r, n_pool + 1)
                pool_l = _grow(pool_l, n_pool + 1)
                pool_r[n_pool] = r
                pool_l[n_pool] = 0
                inst_off = _grow(inst_off, n_inst + 1)
                inst_len = _grow(inst_len, n_inst + 1)
                inst_off[n_inst] = n_pool
                inst_len[n_inst] = 1
                n_pool += 1
                pend = _grow(pend, 1)
                pend[0] = n_inst
                n_pend = 1
                n_inst += 1
                target = 1
            # ---- deliver
            for p in range(n_pend):
                i = pend[p]
                off = inst_off[i]
                length = inst_len[i]
                if target == k:  # a match
                    number += 1
                    m_part = _grow(m_part, n_m + 1)
                    m_num = _grow(m_num, n_m + 1)
                    m_len = _grow(m_len, n_m + 1)
                    m_rows = _grow(m_rows, n_mr + length)
                    m_labs = _grow(m_labs, n_mr + length)
                    m_part[n_m] = j
                    m_num[n_m] = number
                    m_len[n_m] = length
                    m_rows[n_mr:n_mr + length] = pool_r[off:off + length]
                    m_labs[n_mr:n_mr + length] = pool_l[off:off + length]
                    n_m += 1
                    n_mr += length
                    continue
                s = target
                if mode == RECENT or mode == FIRST:
                    head[s] = 0
                    tail[s] = 0
                elif mode == CUMULATIVE and head[s] < tail[s]:
                    # merged (sorted by row) into the aggregate instance there
                    i0 = queue[s, head[s]]
                    off0 = inst_off[i0]
                    len0 = inst_len[i0]
                    pool_r = _grow(pool_r, n_pool + len0 + length)
                    pool_l = _grow(pool_l, n_pool + len0 + length)
                    a = off0
                    z = off
                    at = n_pool
                    while a < off0 + len0 or z < off + length:
                        if z == off + length or (a < off0 + len0 and pool_r[a] < pool_r[z]):
                            pool_r[at] = pool_r[a]
                            pool_l[at] = pool_l[a]
                            a += 1
                        else:
                            pool_r[at] = pool_r[z]
                            pool_l[at] = pool_l[z]
                            z += 1
                        at += 1
                    inst_off = _grow(inst_off, n_inst + 1)
                    inst_len = _grow(inst_len, n_inst + 1)
                    inst_off[n_inst] = n_pool
                    inst_len[n_inst] = len0 + length
                    n_pool += len0 + length
                    queue[s, head[s]] = n_inst
                    n_inst += 1
                    continue
                if tail[s] == cap:
                    if head[s] > 0:
                        live = tail[s] - head[s]
                        queue[s, :live] = queue[s, head[s]:tail[s]].copy()
                        head[s] = 0
                        tail[s] = live
                    else:
                        bigger = np.empty((k, 2 * cap), dtype=np.int64)
                        bigger[:, :cap] = queue
                        queue = bigger
                        cap *= 2
                queue[s, tail[s]] = i
                tail[s] += 1
            # ---- keep the pool small: copy the open instances out when it has grown
            if n_pool > gc_at:
                live = 0
                for s in range(1, k):
                    for q in range(head[s], tail[s]):
                        live += inst_len[queue[s, q]]
                if 2 * live < n_pool:
                    new_r = np.empty(max(64, 2 * live), dtype=np.int64)
                    new_l = np.empty(max(64, 2 * live), dtype=np.int64)
                    new_off = np.empty(16, dtype=np.int64)
                    new_len = np.empty(16, dtype=np.int64)
                    at = 0
                    n_new = 0
                    for s in range(1, k):
                        for q in range(head[s], tail[s]):
                            i = queue[s, q]
                            off = inst_off[i]
                            length = inst_len[i]
                            new_r[at:at + length] = pool_r[off:off + length]
                            new_l[at:at + length] = pool_l[off:off + length]
                            new_off = _grow(new_off, n_new + 1)
                            new_len = _grow(new_len, n_new + 1)
                            new_off[n_new] = at
                            new_len[n_new] = length
                            queue[s, q] = n_new
                            n_new += 1
                            at += length
                    pool_r, pool_l, inst_off, inst_len = new_r, new_l, new_off, new_len
                    n_pool = at
                    n_inst = n_new
                gc_at = max(4096, 2 * n_pool)
        numbers[j] = number
        stops[j] = max(end, first[j])
        for s in range(1, k):  # the open instances at the end
            for q in range(head[s], tail[s]):
                i = queue[s, q]
                off = inst_off[i]
                length = inst_len[i]
                f_part = _grow(f_part, n_f + 1)
                f_stage = _grow(f_stage, n_f + 1)
                f_len = _grow(f_len, n_f + 1)
                f_rows = _grow(f_rows, n_fr + length)
                f_labs = _grow(f_labs, n_fr + length)
                f_part[n_f] = j
                f_stage[n_f] = s
                f_len[n_f] = length
                f_rows[n_fr:n_fr + length] = pool_r[off:off + length]
                f_labs[n_fr:n_fr + length] = pool_l[off:off + length]
                n_f += 1
                n_fr += length
    return (m_part[:n_m], m_num[:n_m], m_len[:n_m], m_rows[:n_mr], m_labs[:n_mr],
            f_part[:n_f], f_stage[:n_f], f_len[:n_f], f_rows[:n_fr], f_labs[:n_fr],
            numbers, stops)
