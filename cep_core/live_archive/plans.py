"""Strategies as plans: live matches (:class:`LiveInstance`) and the planners that turn
them into :class:`Load` requests (ALAA, LLAA, OLLAA, SLLAA with Lemma-1 sub-windows, auto)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd  # type: ignore[import-untyped, unused-ignore]

from ..api import CompiledQuery
from ..compile.expressions import walk
from ..language import ast
from ..runtime.output import Match
from ..runtime.time_axis import is_timestamp, time_values
from .spec import (
    STRATEGIES,
    LiveArchiveSpec,
    Selectivity,
    StrategyError,
    StrategySettings,
    duration_value,
)

# ----------------------------------------------------------------------------- live matches


@dataclass(frozen=True)
class LiveInstance:
    """A completed live match: its key, first/last time, RA and lineage."""

    key: Any
    start: float
    end: float
    lo: float  # RA_i = [lo, hi)
    hi: float
    match: Match | None = None  # None: planning only (no join results needed)
    ids: tuple[Any, ...] = ()


def live_instances(spec: LiveArchiveSpec, live: pd.DataFrame,
                   keys: Iterable[Any] | None = None) -> list[LiveInstance]:
    """Live matches of ``live`` (restricted to ``keys`` when given), in completion order
    (end time, then start time)."""
    if keys is not None:
        live = live[live[spec.key].isin(list(keys))].reset_index(drop=True)
    if len(live) == 0:
        return []
    return instances_of(spec, spec.live.find_matches(live), live)


def instances_of(spec: LiveArchiveSpec, matches: Iterable[Match], frame: pd.DataFrame,
                 positions: Callable[[Sequence[int]], Sequence[int]] | None = None,
                 ) -> list[LiveInstance]:
    """Live instances of live-pattern ``matches`` whose rows are in ``frame``, in
    completion order. ``positions`` maps a match's rows to positions in ``frame`` (the
    default: they are positions, as ``find_matches`` gives them)."""
    t = time_values(frame[spec.time])
    before = duration_value(spec.before, is_timestamp(frame[spec.time].dtype))
    ids = frame[spec.id_column].tolist()
    key_at = key_position(spec.live, spec.key)
    out = []
    for m in matches:
        if not m.rows:
            continue
        at = list(m.rows if positions is None else positions(m.rows))
        times = t[at]
        start, end = times.min().item(), times.max().item()
        out.append(LiveInstance(m.partition[key_at], start, end, start - before, start, m,
                                tuple(ids[r] for r in at)))
    out.sort(key=lambda i: (i.end, i.start))
    return out


def key_position(q: CompiledQuery, key: str) -> int:
    return [c.lower() for c in q.partition_by].index(key.lower())


# ----------------------------------------------------------------------------- plans


@dataclass(frozen=True)
class Load:
    """One archive request: ``keys`` (None: all) in ``[lo, hi)``, for live matches
    ``serves`` (indices into the live-instance list); ``event_types`` is for acquisition
    plans that pull only some types (None: all)."""

    keys: tuple[Any, ...] | None
    lo: float
    hi: float
    serves: tuple[int, ...]
    event_types: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Plan:
    """How the archive side is acquired: ordered steps of loads. ``drive`` is 'live' (live
    matches first, then their ranges) or 'archive' (OLLAA from the archive side: PA over
    each load first, PL only for keys with an archive match)."""

    strategy: str
    reason: str
    steps: tuple[tuple[Load, ...], ...]
    drive: str = "live"

    @property
    def loads(self) -> list[Load]:
        return [load for step in self.steps for load in step]


def plan_llaa(instances: Sequence[LiveInstance]) -> tuple[Load, ...]:
    return tuple(Load((i.key,), i.lo, i.hi, (n,)) for n, i in enumerate(instances))


def plan_alaa(instances: Sequence[LiveInstance]) -> tuple[Load, ...]:
    if not instances:
        return ()
    return (Load(None, min(i.lo for i in instances), max(i.hi for i in instances),
                 tuple(range(len(instances)))),)


def plan_by_key(instances: Sequence[LiveInstance]) -> tuple[Load, ...]:
    """One load per key: the hull of that key's ranges (OLLAA's archive-side plan)."""
    groups: dict[Any, list[int]] = {}
    for n, i in enumerate(instances):
        groups.setdefault(i.key, []).append(n)
    return tuple(Load((k,), min(instances[n].lo for n in ns), max(instances[n].hi for n in ns),
                      tuple(ns)) for k, ns in groups.items())


def subwindows(instances: Sequence[LiveInstance], tolerated_latency: float | None,
               max_size: int | None = None) -> list[list[int]]:
    """Lemma 1: consecutive live matches (completion order) share a sub-window while
    ``max end - min start <= TL`` (and, if given, while it holds at most ``max_size``)."""
    groups: list[list[int]] = []
    current: list[int] = []
    lo = hi = 0.0
    for n, i in enumerate(instances):
        if current:
            fits = tolerated_latency is None or max(hi, i.end) - min(lo, i.start) <= (
                tolerated_latency)
            if fits and (max_size is None or len(current) < max_size):
                current.append(n)
                lo, hi = min(lo, i.start), max(hi, i.end)
                continue
            groups.append(current)
        current, lo, hi = [n], i.start, i.end
    if current:
        groups.append(current)
    return groups


def plan_sllaa(instances: Sequence[LiveInstance], tolerated_latency: float | None,
               max_size: int | None = None) -> tuple[Load, ...]:
    loads = []
    for group in subwindows(instances, tolerated_latency, max_size):
        keys = tuple(dict.fromkeys(instances[n].key for n in group))
        loads.append(Load(keys, min(instances[n].lo for n in group),
                          max(instances[n].hi for n in group), tuple(group)))
    return tuple(loads)


def sample_selectivity(query: CompiledQuery, frame: pd.DataFrame, key: str,
                       rows: int) -> Selectivity:
    """Matches per row of ``query`` on a sample of whole keys (about ``rows`` rows)."""
    if len(frame) == 0:
        return Selectivity(0.0, "sample of 0 rows")
    if len(frame) > rows:
        keys = frame[key].drop_duplicates()
        share = rows / len(frame)
        chosen = keys.sample(frac=min(1.0, share), random_state=0) if len(keys) > 1 else keys
        frame = frame[frame[key].isin(chosen)]
    n = sum(1 for m in query.find_matches(frame) if m.rows)
    return Selectivity(n / max(len(frame), 1), f"sample of {len(frame)} rows")


def choose(settings: StrategySettings, live: Selectivity | None,
           archive: Selectivity | None, archive_first_exact: bool) -> tuple[str, str]:
    """``auto``: the strategy and why.

    With a tolerated latency TL (or a sub-window size), SLLAA: one load per sub-window
    instead of one per live match. Otherwise OLLAA from the archive side when the archive
    pattern is markedly (2x) more selective than the live one and pruning keys by it is
    exact, else LLAA. ALAA is not chosen here: its blind load of Rmax reads every key's
    history, which the lazy strategies never need -- except in a bulk batch
    (:func:`resolve`), where nearly every key has a match and one load per match costs
    more than the rows it saves.
    """
    if settings.tolerated_latency is not None or settings.subwindow is not None:
        return "sllaa", (f"tolerated latency TL={settings.tolerated_latency}, sub-window "
                         f"{settings.subwindow}: one load per sub-window")
    drive, why = ollaa_drive(live, archive, archive_first_exact, margin=2.0)
    return ("ollaa" if drive == "archive" else "llaa"), why


def ollaa_drive(live: Selectivity | None, archive: Selectivity | None,
                archive_first_exact: bool, margin: float = 1.0) -> tuple[str, str]:
    """OLLAA's choice of driving side ('live' or 'archive') and why."""
    if live is None or archive is None:
        return "live", "no selectivity figures: live side drives"
    figures = (f"archive selectivity {archive.value:.3g} ({archive.source}), live "
               f"{live.value:.3g} ({live.source})")
    if not archive_first_exact:
        return "live", f"{figures}; the archive pattern cannot prune keys exactly: live drives"
    if archive.value * margin < live.value:
        return "archive", f"{figures}: archive side drives"
    return "live", f"{figures}: live side drives"


def unknown_strategy(strategy: str) -> StrategyError:
    return StrategyError(f"unknown live-archive strategy {strategy!r}; "
                         f"use one of {', '.join((*STRATEGIES, 'auto'))}")


def resolve(spec: LiveArchiveSpec, strategy: str, settings: StrategySettings,
            live: Callable[[], Selectivity], archive: Callable[[], Selectivity],
            live_matches: int = 0) -> tuple[str, str, str]:
    """``(strategy, drive, reason)`` for a requested strategy. ``auto`` and OLLAA weigh the
    selectivities: the archive side's from ``settings.archive_selectivity`` (statistics)
    or else ``archive()`` (a sample), the live side's from ``live()``; the callables run
    only when a figure is needed. ``auto`` takes ALAA for a bulk batch (``live_matches`` at
    least ``settings.bulk_matches``)."""
    if strategy not in (*STRATEGIES, "auto"):
        raise unknown_strategy(strategy)
    if strategy == "auto" and settings.bulk_matches is not None \
            and live_matches >= settings.bulk_matches:
        return "alaa", "live", (f"bulk batch: {live_matches:,} live matches (>= "
                                f"{settings.bulk_matches:,}): one blind load of Rmax instead "
                                "of one load per match")
    if strategy not in ("auto", "ollaa"):
        return strategy, "live", ""
    sel_l = live()
    sel_a = (Selectivity(settings.archive_selectivity, "statistics")
             if settings.archive_selectivity is not None else archive())
    exact = archive_first_exact(spec)
    if strategy == "auto":
        chosen, reason = choose(settings, sel_l, sel_a, exact)
        return chosen, ("archive" if chosen == "ollaa" else "live"), reason
    drive, reason = ollaa_drive(sel_l, sel_a, exact)
    return "ollaa", drive, reason


def archive_first_exact(spec: LiveArchiveSpec) -> bool:
    """Archive-side-first prunes keys without an archive match over the hull of their
    ranges; sound when a match inside a sub-range is also a match over the hull: no
    anchors, no negation, no PREV/NEXT (which could read rows outside a match), no
    consumption mode or relaxed selection."""
    m = spec.archive.match
    if (m.consumption is not None or m.selection != "STRICT"
            or _has(m.pattern, (ast.Anchor, ast.Negation))):
        return False
    exprs = [d.condition for d in m.defines]
    return not any(isinstance(n, ast.Call) and n.name in ("PREV", "NEXT")
                   for e in exprs for n in walk(e))


def _has(p: ast.Pattern, kinds: tuple[type, ...]) -> bool:
    if isinstance(p, kinds):
        return True
    for attr in ("items", "body"):
        child = getattr(p, attr, None)
        if isinstance(child, tuple) and any(_has(c, kinds) for c in child):
            return True
        if isinstance(child, ast.Pattern) and _has(child, kinds):
            return True
    return False
