"""Aggregates and CLASSIFIER over a (partial) match: COUNT/SUM/AVG/MIN/MAX over the
visible rows of a variable, with their running state cached per match epoch."""

from __future__ import annotations

from typing import Any

from ..errors import QueryError
from ..language import ast
from .state import Fn, MatchState, RowFn
from .values import is_null


def count_rows(var: frozenset[int] | None, final: bool) -> Fn:
    cache = [-1, 0, 0]  # epoch, rows looked at, count

    def count(st: MatchState) -> Any:
        total = len(st.rows) if final else st.upto
        if var is None:
            return total
        epoch, k, n = cache
        if epoch != st.epoch or k > total:
            k, n = 0, 0
        labels = st.labels
        for i in range(k, total):
            if labels[i] in var:
                n += 1
        cache[0], cache[1], cache[2] = st.epoch, total, n
        return n

    return count


def aggregate(name: str, row_fn: RowFn, var: frozenset[int] | None, final: bool,
              pos: ast.Pos, distinct: bool = False, keep: RowFn | None = None) -> Fn:
    """COUNT/SUM/AVG/MIN/MAX over the visible rows of ``var`` (NULLs skipped);
    ``distinct`` (COUNT only): the accumulator is the set of values seen; ``keep``
    (``FILTER (WHERE ...)``): only rows where it is TRUE are aggregated.

    The running state is cached per ``MatchState.epoch``, so extending a match by one row
    costs one step instead of a pass over the whole match.
    """
    cache: list[Any] = [-1, 0, 0, None]  # epoch, rows looked at, non-null count, accumulator

    def agg(st: MatchState) -> Any:
        total = len(st.rows) if final else st.upto
        epoch, k, n, acc = cache
        if epoch != st.epoch or k > total:
            k, n, acc = 0, 0, None
        rows, labels = st.rows, st.labels
        try:
            for i in range(k, total):
                if var is not None and labels[i] not in var:
                    continue
                if keep is not None and keep(st, rows[i]) is not True:
                    continue
                v = row_fn(st, rows[i])
                if is_null(v):
                    continue
                n += 1
                if distinct:
                    acc = set() if acc is None else acc  # grows only within an epoch
                    acc.add(v)
                elif acc is None:
                    acc = v
                elif name in ("SUM", "AVG"):
                    acc = acc + v
                elif name == "MIN":
                    acc = v if v < acc else acc
                elif name == "MAX":
                    acc = v if v > acc else acc
        except TypeError as err:
            raise QueryError(f"{name}: {err}", *pos) from None
        cache[0], cache[1], cache[2], cache[3] = st.epoch, total, n, acc
        if name == "COUNT":
            return len(acc) if distinct and acc is not None else n
        if n == 0:
            return None
        return acc / n if name == "AVG" else acc

    return agg


def classifier(var: frozenset[int] | None, final: bool) -> Fn:
    def classifier(st: MatchState) -> Any:
        count = len(st.rows) if final else st.upto
        for i in range(count - 1, -1, -1):
            if var is None or st.labels[i] in var:
                return st.names[st.labels[i]]
        return None

    return classifier
