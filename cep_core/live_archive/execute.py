"""Running a plan: loads from the store, the archive pattern detected over each access
range, joined with the live matches (:func:`detect`, :func:`execute`, :func:`join_active`)."""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd  # type: ignore[import-untyped, unused-ignore]

from ..api import CompiledQuery, compile_query
from ..compile.expressions import Scope, walk
from ..errors import QueryError
from ..language import ast
from ..language.parser import parse
from ..language.printer import to_sql
from ..runtime.time_axis import is_timestamp, time_values
from ..runtime.vectorized import evaluate_condition
from .plans import (
    LiveInstance,
    Load,
    Plan,
    key_position,
    live_instances,
    plan_alaa,
    plan_by_key,
    plan_llaa,
    plan_sllaa,
    resolve,
    sample_selectivity,
    unknown_strategy,
)
from .spec import LiveArchiveSpec, Selectivity, StrategyError, StrategySettings, duration_value
from .stores import AccessStats, ArchiveStore

# ----------------------------------------------------------------------------- execution


@dataclass(frozen=True)
class Joined:
    """One result: a live match and one archive match in its RA."""

    live: LiveInstance
    number: int  # the archive match's number within RA_i (1-based, by first row)
    archive_ids: tuple[Any, ...]
    archive_start: float | None
    archive_end: float | None
    measures: dict[str, Any]


@dataclass
class Result:
    plan: Plan
    joined: list[Joined]
    live_count: int
    stats: AccessStats
    seconds: dict[str, float]

    def keys(self) -> list[tuple[tuple[Any, ...], tuple[Any, ...]]]:
        """(live ids, archive ids) of every result, sorted: what must not depend on the
        strategy."""
        return sorted((j.live.ids, j.archive_ids) for j in self.joined)


def detect_in_ranges(spec: LiveArchiveSpec, instances: Sequence[LiveInstance],
                     serves: Sequence[int], rows: pd.DataFrame) -> list[Joined]:
    """Archive matches of PA within each served instance's RA, cut out of ``rows`` (which
    hold at least every event of the instance's key in its RA). One engine call for all
    ranges: each range's rows are copied under an owner column unique to its live match,
    and PA runs partitioned by that column first (the key column keeps its values, so
    DEFINE and MEASURES that read it see the real key)."""
    if len(rows) == 0 or not serves:
        return []
    t = time_values(rows[spec.time])
    key_values = rows[spec.key].to_numpy()
    order = np.argsort(t, kind="stable")
    by_key: dict[Any, np.ndarray] = {}
    for k in pd.unique(key_values):
        by_key[k] = order[key_values[order] == k]
    parts, owners = [], []
    for n in serves:
        inst = instances[n]
        idx = by_key.get(inst.key)
        if idx is None:
            continue
        ts = t[idx]
        a, b = np.searchsorted(ts, [inst.lo, inst.hi], side="left")
        if b > a:
            parts.append(idx[a:b])
            owners.append(np.full(b - a, n))
    if not parts:
        return []
    take = np.concatenate(parts)
    expanded = rows.iloc[take].reset_index(drop=True)
    expanded[_OWNER] = np.concatenate(owners)
    return _joined(spec, instances, expanded, 0)


_OWNER = "__live_archive_owner"


@functools.lru_cache(maxsize=128)
def _owned(text: str) -> CompiledQuery:
    """The archive query ``text`` partitioned first by the owner column."""
    tree = parse(text)
    match = dataclasses.replace(tree.match, partition_by=(
        ast.Column(_OWNER), *tree.match.partition_by))
    return compile_query(to_sql(dataclasses.replace(tree, match=match)))


def _joined(spec: LiveArchiveSpec, instances: Sequence[LiveInstance], expanded: pd.DataFrame,
            owner_at: int) -> list[Joined]:
    ids = expanded[spec.id_column].tolist()
    t = time_values(expanded[spec.time])
    out: list[Joined] = []
    number: dict[int, int] = {}
    for m in _owned(spec.archive.text).find_matches(expanded):
        if not m.rows:
            # An empty match (PATTERN (A*) over rows without an A) joins nothing: it has no
            # first row to number it by, and ALAA's join and OLLAA's key pruning skip it.
            continue
        n = int(m.partition[owner_at])
        inst = instances[n]
        number[n] = number.get(n, 0) + 1
        times = t[list(m.rows)] if m.rows else None
        out.append(Joined(
            inst, number[n], tuple(ids[r] for r in m.rows),
            None if times is None else times.min().item(),
            None if times is None else times.max().item(),
            {**_live_measures(inst), **m.measures}))
    return _filter(spec, out)


def _live_measures(inst: LiveInstance) -> dict[str, Any]:
    return {} if inst.match is None else inst.match.measures


def _filter(spec: LiveArchiveSpec, joined: list[Joined]) -> list[Joined]:
    if spec._condition_ast is None or not joined:
        return joined
    names = [*spec.live.measure_names, *spec.archive.measure_names]
    frame = pd.DataFrame([{n: j.measures.get(n) for n in names} for j in joined], columns=names)
    scope = Scope(names, {"_": frozenset([0])}, "DEFINE", None)
    try:
        keep = evaluate_condition(spec._condition_ast, frame, scope)
    except QueryError as err:
        raise err.with_query(spec.condition or "") from None
    return [j for j, k in zip(joined, keep.tolist(), strict=True) if k]


def make_plan(spec: LiveArchiveSpec, strategy: str, instances: Sequence[LiveInstance],
              settings: StrategySettings, reason: str = "", drive: str = "live") -> Plan:
    """The loads of ``strategy`` for live matches ``instances``. OLLAA driven from the
    archive side loads the hull of each key's ranges once (PA over it first)."""
    tl = settings.tolerated_latency
    if strategy == "alaa":
        return Plan("alaa", reason or "active: one blind load of Rmax", (plan_alaa(instances),))
    if strategy == "llaa":
        return Plan("llaa", reason or "lazy: one load per live match", (plan_llaa(instances),))
    if strategy == "sllaa":
        if tl is None and settings.subwindow is None:
            raise StrategyError("sllaa needs a tolerated latency TL (tolerated_latency) or "
                                "a sub-window size (subwindow)")
        tl_value = None if tl is None else duration_value(tl, isinstance(tl, pd.Timedelta))
        return Plan("sllaa", reason or f"sub-windows by Lemma 1, TL={tl}, "
                    f"max size {settings.subwindow}",
                    (plan_sllaa(instances, tl_value, settings.subwindow),))
    if strategy == "ollaa":
        if drive == "archive":
            return Plan("ollaa", reason, (plan_by_key(instances),), drive="archive")
        return Plan("ollaa", reason or "live side drives", (plan_llaa(instances),))
    raise unknown_strategy(strategy)


def detect(spec: LiveArchiveSpec, live: pd.DataFrame, archive: ArchiveStore,
           strategy: str = "auto", settings: StrategySettings | None = None,
           keep: Callable[[LiveInstance], bool] | None = None) -> Result:
    """Run a live-archive query: live matches over ``live``, archive matches from
    ``archive``, joined. ``keep`` filters the live matches that are joined (e.g. only
    those with a new event). Every strategy returns the same results."""
    settings = settings or StrategySettings()
    seconds: dict[str, float] = {}
    clock = time.perf_counter()
    stats_before = AccessStats()
    stats_before.add(archive.stats)

    def sample_archive() -> Selectivity:
        """No statistics: sample the archive over the ranges of a few live keys."""
        keys = pd.Series(live[spec.key].unique())
        keys = keys.sample(n=min(len(keys), 50), random_state=0).tolist()
        hull = _hull(spec, live[live[spec.key].isin(keys)])
        sample = archive.load(keys, *hull) if hull else live.iloc[:0]
        return sample_selectivity(spec.archive, sample, spec.key, settings.sample_rows)

    def matches() -> list[LiveInstance]:
        found = live_instances(spec, live)
        return found if keep is None else [i for i in found if keep(i)]

    counted = matches() if strategy == "auto" and settings.bulk_matches is not None else None
    strategy, drive, reason = resolve(
        spec, strategy, settings,
        lambda: sample_selectivity(spec.live, live, spec.key, settings.sample_rows),
        sample_archive, len(counted or ()))
    if drive == "archive":
        joined, instances, plan = _archive_first(spec, live, archive, reason, keep)
    else:
        instances = counted if counted is not None else matches()
        seconds["live"] = time.perf_counter() - clock
        plan = make_plan(spec, strategy, instances, settings, reason)
        joined = execute(spec, plan, instances, archive)
    seconds["total"] = time.perf_counter() - clock
    used = AccessStats(archive.stats.loads - stats_before.loads,
                       archive.stats.rows_read - stats_before.rows_read,
                       archive.stats.buffer_loads - stats_before.buffer_loads,
                       archive.stats.buffer_rows - stats_before.buffer_rows,
                       archive.stats.seconds - stats_before.seconds)
    return Result(plan, joined, len(instances), used, seconds)


def _hull(spec: LiveArchiveSpec, live: pd.DataFrame) -> tuple[float, float] | None:
    if len(live) == 0:
        return None
    t = time_values(live[spec.time])
    before = duration_value(spec.before, is_timestamp(live[spec.time].dtype))
    return t.min().item() - before, t.max().item()


def execute(spec: LiveArchiveSpec, plan: Plan, instances: Sequence[LiveInstance],
            archive: ArchiveStore) -> list[Joined]:
    """Run a live-side-first plan: each load once, PA over the RA of each match it serves.

    The result does not depend on the plan as long as each served match's key and RA are
    inside its load (which every planner here guarantees)."""
    out: list[Joined] = []
    for step in plan.steps:
        for load in step:
            if not load.serves:
                continue
            rows = archive.load(load.keys, load.lo, load.hi)
            if plan.strategy == "alaa" and range_local(spec.archive):
                out.extend(join_active(spec, instances, load.serves, rows))
            else:
                out.extend(detect_in_ranges(spec, instances, load.serves, rows))
    return out


def join_active(spec: LiveArchiveSpec, instances: Sequence[LiveInstance],
                serves: Sequence[int], rows: pd.DataFrame) -> list[Joined]:
    """ALAA's join: PA over all of ``rows`` (blind), then each archive match joins the
    served live matches of its key whose RA contains it. Exact for range-local patterns
    (:func:`range_local`), where the matches inside a range are the range's matches."""
    if len(rows) == 0:
        return []
    rows = rows.reset_index(drop=True)
    t = time_values(rows[spec.time])
    ids = rows[spec.id_column].tolist()
    by_key: dict[Any, list[int]] = {}
    for n in serves:
        by_key.setdefault(instances[n].key, []).append(n)
    key_at = key_position(spec.archive, spec.key)
    number: dict[int, int] = {}
    out: list[Joined] = []
    for m in spec.archive.find_matches(rows):
        if not m.rows:
            continue
        times = t[list(m.rows)]
        start, end = times.min().item(), times.max().item()
        for n in by_key.get(m.partition[key_at], ()):
            inst = instances[n]
            if inst.lo <= start and end < inst.hi:
                number[n] = number.get(n, 0) + 1
                out.append(Joined(inst, number[n], tuple(ids[r] for r in m.rows), start, end,
                                  {**_live_measures(inst), **m.measures}))
    return _filter(spec, out)


def range_local(q: CompiledQuery) -> bool:
    """True when the matches of ``q`` inside any time range of a partition are exactly its
    matches over the whole partition that lie in the range: a fixed sequence of single
    variables, no navigation to other rows (PREV/NEXT), no MATCH_NUMBER, no consumption
    or relaxed selection, and AFTER MATCH SKIP TO NEXT ROW or a first variable that no
    later variable's row can satisfy (so matches never overlap and skipping loses none)."""
    m = q.match
    if m.consumption is not None or m.selection != "STRICT" or m.emit_timeouts:
        return False
    items = m.pattern.items if isinstance(m.pattern, ast.Concat) else (m.pattern,)
    if not all(isinstance(v, ast.Var) for v in items):
        return False
    exprs = [d.condition for d in m.defines] + [me.expr for me in m.measures]
    if any(isinstance(n, ast.Call) and n.name in ("PREV", "NEXT", "MATCH_NUMBER")
           for e in exprs for n in walk(e)):
        return False
    if m.skip.kind == "TO NEXT ROW":
        return True
    names = [v.name for v in items if isinstance(v, ast.Var)]
    tests = {d.var: _equalities(d.condition) for d in m.defines}
    first = tests.get(names[0], {})
    return all(
        any(col in tests.get(other, {}) and tests[other][col] != value
            for col, value in first.items())
        for other in names[1:])


def _equalities(expr: ast.Expr) -> dict[str, Any]:
    """``column = literal`` conjuncts of a DEFINE condition."""
    out: dict[str, Any] = {}
    parts = [expr]
    while parts:
        e = parts.pop()
        if isinstance(e, ast.Binary) and e.op == "AND":
            parts += [e.left, e.right]
        elif isinstance(e, ast.Binary) and e.op == "=":
            for col, lit in ((e.left, e.right), (e.right, e.left)):
                if isinstance(col, ast.Column) and isinstance(lit, ast.Literal):
                    out[col.name.lower()] = lit.value
    return out


def _archive_first(spec: LiveArchiveSpec, live: pd.DataFrame, archive: ArchiveStore,
                   reason: str, keep: Callable[[LiveInstance], bool] | None
                   ) -> tuple[list[Joined], list[LiveInstance], Plan]:
    """OLLAA from the archive side: per key, load the hull of every range its live events
    could ask for, detect PA there; run PL only for keys with an archive match, then cut
    each live match's RA out of the rows already loaded (no second load)."""
    t = time_values(live[spec.time])
    before = duration_value(spec.before, is_timestamp(live[spec.time].dtype))
    frame = pd.DataFrame({"k": live[spec.key].to_numpy(), "t": t})
    hulls = frame.groupby("k", sort=False)["t"].agg(["min", "max"])
    loads = [Load((k,), lo - before, hi, ()) for k, lo, hi in zip(
        hulls.index.tolist(), hulls["min"].tolist(), hulls["max"].tolist(), strict=True)]
    by_key: dict[Any, pd.DataFrame] = {}
    candidates = []
    for load in loads:
        assert load.keys is not None
        rows = archive.load(load.keys, load.lo, load.hi)
        if len(rows) and any(m.rows for m in spec.archive.find_matches(rows)):
            candidates.append(load.keys[0])
            by_key[load.keys[0]] = rows
    instances = live_instances(spec, live, candidates)
    if keep is not None:
        instances = [i for i in instances if keep(i)]
    out: list[Joined] = []
    served: dict[Any, list[int]] = {}
    for n, inst in enumerate(instances):
        served.setdefault(inst.key, []).append(n)
    for k, ns in served.items():
        out.extend(detect_in_ranges(spec, instances, ns, by_key[k]))
    return out, instances, Plan("ollaa", reason, (tuple(loads),), drive="archive")


# ----------------------------------------------------------------------------- acquisition


@dataclass
class Acquired:
    """What a multi-step acquisition read: the plan as executed (the loads of every step),
    the rows (each read once) and the rows read per step."""

    plan: Plan
    rows: pd.DataFrame
    rows_per_step: list[int]
    seconds: float


def acquire(steps: int, next_step: Callable[[int, pd.DataFrame], tuple[Load, ...]],
            archive: ArchiveStore, reason: str = "", strategy: str = "acquisition"
            ) -> Acquired:
    """Run a multi-step acquisition plan (seed 003): step ``j``'s loads are
    ``next_step(j, rows read in steps < j)``, so a later step reads only where the earlier
    steps left a match possible (``cep_core.planning.loads.next_steps`` builds them).

    A store with a ``load_step(loads)`` method (e.g. the gold job's Delta reader) gets
    each step's loads at once; any other store gets one ``load`` per request."""
    started = time.perf_counter()
    issued: list[tuple[Load, ...]] = []
    parts: list[pd.DataFrame] = []
    per_step: list[int] = []
    read = pd.DataFrame()
    for j in range(steps):
        loads = next_step(j, read)
        issued.append(loads)
        batch = getattr(archive, "load_step", None)
        if not loads:
            got = read.iloc[:0]
        elif batch is not None:
            got = batch(loads)
        else:
            got_parts = [archive.load(ld.keys, ld.lo, ld.hi, ld.event_types) for ld in loads]
            got = pd.concat(got_parts, ignore_index=True)
        per_step.append(len(got))
        parts.append(got)
        read = pd.concat([p for p in parts if len(p.columns)], ignore_index=True) if any(
            len(p.columns) for p in parts) else got
    return Acquired(Plan(strategy, reason, tuple(issued)), read, per_step,
                    time.perf_counter() - started)
