"""The live-archive query: :class:`LiveArchiveSpec` (live pattern, archive pattern, key,
access range, join condition), the strategy settings and selectivities."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pandas as pd  # type: ignore[import-untyped, unused-ignore]

from ..api import CompiledQuery, compile_query
from ..compile.expressions import walk
from ..language import ast
from ..language.parser import parse_expression

STRATEGIES = ("alaa", "llaa", "ollaa", "sllaa")


class StrategyError(ValueError):
    """A live-archive query or strategy setting cannot be used (message says how to fix)."""


# ----------------------------------------------------------------------------- the query


@dataclass(frozen=True)
class LiveArchiveSpec:
    """A live-archive query: live pattern, archive pattern, join key, RA and condition.

    ``before`` is a duration (``pd.Timedelta``) for datetime time columns or a number for
    numeric ones. ``id_column`` names the event id used for lineage and for results that
    must not depend on how the archive was read.
    """

    live: CompiledQuery
    archive: CompiledQuery
    key: str
    before: Any
    condition: str | None = None
    id_column: str = "event_id"
    _condition_ast: ast.Expr | None = field(default=None, repr=False, compare=False)

    @classmethod
    def of(cls, live: str | CompiledQuery, archive: str | CompiledQuery, key: str,
           before: Any, condition: str | None = None,
           id_column: str = "event_id") -> LiveArchiveSpec:
        live_q = live if isinstance(live, CompiledQuery) else compile_query(live)
        archive_q = archive if isinstance(archive, CompiledQuery) else compile_query(archive)
        for side, q in (("live", live_q), ("archive", archive_q)):
            if key.lower() not in (c.lower() for c in q.partition_by):
                raise StrategyError(f"the {side} query must PARTITION BY the join key {key!r} "
                                    f"(it partitions by {q.partition_by or 'nothing'})")
            if not q.order_by:
                raise StrategyError(f"the {side} query needs ORDER BY <time column>")
        if live_q.order_by[0][0].lower() != archive_q.order_by[0][0].lower():
            raise StrategyError("live and archive queries must ORDER BY the same time column "
                                f"first ({live_q.order_by[0][0]} vs {archive_q.order_by[0][0]})")
        if isinstance(before, int | float) and before < 0 or (
                isinstance(before, pd.Timedelta) and before < pd.Timedelta(0)):
            raise StrategyError(f"the access range 'before' must not be negative: {before}")
        shared = {m.lower() for m in live_q.measure_names} & {
            m.lower() for m in archive_q.measure_names}
        if shared:
            raise StrategyError(f"live and archive measures share names {sorted(shared)}; "
                                "rename one side (the joined result holds both)")
        cond = None
        if condition:
            cond = parse_expression(condition)
            known = {m.lower() for m in (*live_q.measure_names, *archive_q.measure_names)}
            for node in walk(cond):
                if isinstance(node, ast.Column) and (node.var is not None
                                                     or node.name.lower() not in known):
                    raise StrategyError(f"join condition {condition!r}: {node.name!r} is not "
                                        f"a measure of either side ({', '.join(sorted(known))})")
        return cls(live_q, archive_q, key, before, condition, id_column, cond)

    @property
    def time(self) -> str:
        return self.live.order_by[0][0]


# ----------------------------------------------------------------------------- statistics


@dataclass(frozen=True)
class Selectivity:
    """Matches per input event of a pattern, and where the figure came from."""

    value: float
    source: str  # 'statistics' or 'sample of N rows'


@dataclass(frozen=True)
class StrategySettings:
    """What ``auto`` and the planners may use: tolerated latency TL (same unit as the time
    column; None: no sub-windows), a cap on live matches per sub-window, the archive
    selectivity from the statistics table (None: estimate from a sample), and the sample
    size for selectivity estimates."""

    tolerated_latency: Any = None
    subwindow: int | None = None
    archive_selectivity: float | None = None
    sample_rows: int = 5000
    #: ``auto`` takes ALAA (one blind load of Rmax) once a batch has this many live matches
    #: (None: never): a lazy strategy's one load per match costs more than the rows it
    #: saves when nearly every key has a match (a first load or a backfill)
    bulk_matches: int | None = None

def duration_value(before: Any, series_is_datetime: bool) -> Any:
    """A duration in the time column's unit: int nanoseconds for datetimes (exact, no
    float rounding at range boundaries), the number itself otherwise."""
    if isinstance(before, pd.Timedelta) or hasattr(before, "total_seconds"):
        if not series_is_datetime:
            raise StrategyError("'before' is a duration but the time column is numeric")
        return int(pd.Timedelta(before).value)
    if series_is_datetime:
        raise StrategyError(f"'before' must be a duration (pd.Timedelta) for a datetime time "
                            f"column, got {before!r}")
    return before
