"""Pattern queries over events with uncertain timestamps (``UNCERTAIN TIME``).

A lakecep extension of MATCH_RECOGNIZE after Li, Liu and Yu, "Queries over event streams
with uncertain timestamps and event constraints": every input row is an event whose time
is one of several points (an interval ``[LOWER, UPPER]`` at a granularity, with an optional
probability mass function), event classes may be linked by constraints (PRIOR, EXCLUSIVE,
REQUIRE), and the answer is every *characteristic sequence* (which event fills which
pattern variable) with the probability that it matches, summed over the possible worlds.
The exact semantics are in docs/uncertain.md; they are implemented four ways:

* ``possible_worlds``: enumerate every world of a partition (the correctness reference;
  :mod:`.worlds`);
* ``point``: joint pmfs of the PRIOR-connected events first (:mod:`.joint`), then per
  candidate sequence the combinations of its events' points (:mod:`.constraints_first`);
* ``event``: as ``point``, after pruning each event's points with the query;
* ``dp`` (default): a dynamic programme over (first, last) span distributions
  (:mod:`cep_core.uncertain.dp`) for sequences of independent events, ``event`` otherwise.

This module runs a checked query (:mod:`.plan`) over a table: it prepares the events
(:mod:`.data`), calls the chosen method per partition, keeps the sequences above the
threshold, orders them and builds the output table (MEASURES: :mod:`.measures`).
Entry point: :func:`evaluate`; :func:`cep_core.match_recognize` and
``CompiledQuery.run`` call it for queries with ``UNCERTAIN TIME``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pandas as pd  # type: ignore[import-untyped, unused-ignore]

from ..errors import QueryError
from ..runtime.output import select
from .constraints_first import constraint_first
from .data import Data, prepare, sort_key
from .plan import METHODS, PROBABILITY, Sigma
from .results import XI_EPS, Diagnostics, UncertainResult
from .worlds import possible_worlds

if TYPE_CHECKING:
    from ..api import CompiledQuery


def evaluate_compiled(q: CompiledQuery, table: pd.DataFrame, method: str = "auto",
                      max_worlds: int = 1_000_000, id_column: str | None = None, *,
                      max_points: int = 100_000) -> UncertainResult:
    """:func:`cep_core.uncertain.evaluate` for a compiled query (what
    ``CompiledQuery.run`` calls; the arguments are documented there)."""
    plan = q.uncertain_plan
    if plan is None:
        raise ValueError("the query has no UNCERTAIN TIME clause; use match_recognize")
    if method not in METHODS:
        raise ValueError(f"method must be one of {', '.join(METHODS)}, not {method!r}")
    chosen = "dp" if method == "auto" else method
    df = table.reset_index(drop=True)
    try:
        data = prepare(q, plan, df, id_column, max_points)
    except QueryError as err:
        raise err.with_query(q.text) from None
    diag = Diagnostics(method=chosen)
    rows: list[tuple[tuple[Any, ...], Any, Sigma, float]] = []
    for part in data.partitions:
        if chosen == "possible_worlds":
            found = possible_worlds(plan, part, data.window, max_worlds, diag)
        else:
            found = constraint_first(plan, part, data.window, chosen, max_worlds, diag)
        starts = {e.row: min((t for t, p in zip(e.points, e.probs, strict=True) if p > 0))
                  for e in part.events}
        for sigma, p in found.items():
            if p > 0 and p >= plan.min_probability - XI_EPS:
                rows.append((part.key, min(starts[r] for _, r in sigma), sigma, p))
    ids = data.ids

    def order(item: tuple[tuple[Any, ...], Any, Sigma, float]) -> tuple[Any, ...]:
        key, start, sigma, _ = item
        names = tuple(r if ids is None else ids[r] for _, r in sigma)
        return sort_key(key), start, names

    rows.sort(key=order)
    groups = [(key, sigma, p) for key, _, sigma, p in rows]
    out = _table(data, groups, df)
    try:
        selected = select(q.tree, out)
    except QueryError as err:
        raise err.with_query(q.text) from None
    return UncertainResult(selected, groups, diag)


def _table(data: Data, groups: list[tuple[tuple[Any, ...], Sigma, float]],
           df: pd.DataFrame) -> pd.DataFrame:
    names = [*data.partition_columns, *data.measures.names, PROBABILITY]
    records = [[*key, *data.measures.values(sigma, p), p] for key, sigma, p in groups]
    if records:
        return pd.DataFrame.from_records(records, columns=names)
    frame = pd.DataFrame({c: df[c].iloc[:0] for c in data.partition_columns})
    for name in data.measures.names:
        frame[name] = pd.Series([], dtype=object)
    frame[PROBABILITY] = pd.Series([], dtype=float)
    return frame.reset_index(drop=True)
