"""The tuned configuration: computed from a statistics run, versioned on disk, read by jobs.

:func:`compute` (pure: statistics rows + queries + settings -> configuration) applies the
seed-002 allocation model of :mod:`cep_core.allocation` and checks it with
:mod:`cep_core.simulator`; :func:`write` stores it as
``$LAKECEP_HOME/tuning/config-vN.json`` (N = 1, 2, ...; with ``fairscheduler-vN.xml``);
:func:`load_latest` is what the jobs call at start. ``docs/tuning.md`` has the model and
every field.

Importing this module is cheap (no pyspark, numpy or cep_core at import time): the Spark
session factory reads the scheduler file from here.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from lakecep.config import Settings

CONFIG_NAME = re.compile(r"^config-v(\d+)\.json$")
#: Events simulated per query to check an allocation (time-sharing vs FIFO).
SIMULATED_EVENTS = 40_000


class TuningError(ValueError):
    """The statistics cannot give a configuration (the message says what is missing)."""


# ----------------------------------------------------------------------------- files


def versions(settings: Settings) -> list[int]:
    folder = settings.tuning_dir
    if not folder.is_dir():
        return []
    return sorted(int(m.group(1)) for p in folder.iterdir() if (m := CONFIG_NAME.match(p.name)))


def config_path(settings: Settings, version: int) -> Path:
    return settings.tuning_dir / f"config-v{version}.json"


def load_latest(settings: Settings) -> dict[str, Any] | None:
    """The newest tuned configuration, or None when there is none or ``tuning_apply`` is
    off. A newest file that cannot be read raises (a job must not run silently on an
    older configuration than the one the tuning loop last wrote)."""
    if not settings.tuning_apply:
        return None
    found = versions(settings)
    if not found:
        return None
    path = config_path(settings, found[-1])
    try:
        config = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise TuningError(f"tuned configuration {path} cannot be read ({exc}); delete it to "
                          "fall back to the previous version, or set "
                          "LAKECEP_TUNING_APPLY=false") from None
    if config.get("version") != found[-1]:
        raise TuningError(f"{path} says version {config.get('version')!r}, its name "
                          f"{found[-1]}")
    return config


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def fair_scheduler_xml(pools: Mapping[str, int]) -> str:
    """Spark FAIR scheduler allocation file: one pool per query with its weight."""
    lines = ['<?xml version="1.0"?>', "<allocations>"]
    for name, weight in sorted(pools.items()):
        lines += [f'  <pool name="{name}">', "    <schedulingMode>FAIR</schedulingMode>",
                  f"    <weight>{int(weight)}</weight>", "    <minShare>0</minShare>",
                  "  </pool>"]
    return "\n".join([*lines, "</allocations>", ""])


def write(settings: Settings, config: dict[str, Any]) -> tuple[int, Path]:
    """Store ``config`` as the next version (its FAIR pool file beside it)."""
    folder = settings.tuning_dir
    folder.mkdir(parents=True, exist_ok=True)
    version = (versions(settings) or [0])[-1] + 1
    scheduler = folder / f"fairscheduler-v{version}.xml"
    _atomic_write(scheduler, fair_scheduler_xml(config["gold"]["pools"]))
    config = {**config, "version": version,
              "gold": {**config["gold"], "scheduler_file": str(scheduler)}}
    path = config_path(settings, version)
    _atomic_write(path, json.dumps(config, indent=2, sort_keys=True) + "\n")
    return version, path


def pool_name(query_id: str) -> str:
    return f"q_{query_id}"


# ----------------------------------------------------------------------------- model


def _select(stats: Sequence[Mapping[str, Any]], kind: str, query_id: str | None = None,
            side: str | None = None) -> list[Mapping[str, Any]]:
    return [r for r in stats if r["kind"] == kind
            and (query_id is None or r.get("query_id") == query_id)
            and (side is None or r.get("side") == side)]


def _streams(stats: Sequence[Mapping[str, Any]], query_id: str, side: str,
             variables: Sequence[str]) -> list[dict[str, Any]]:
    rates = {r["subject"]: float(r["value"]) for r in _select(stats, "stream", query_id, side)}
    costs = {r["subject"]: float(r["value"] or 0.0)
             for r in _select(stats, "cost", query_id, side)}
    if not variables or any(v not in rates for v in variables):
        return []
    positive = [c for v, c in costs.items() if v in variables and c > 0]
    # nnls may put a rare stream's cost at 0; a processor never serves anything for free
    floor = max(1e-7, 0.1 * (sum(positive) / len(positive))) if positive else 1e-5
    return [{"stream": v, "arrival_rate": rates[v], "cost_seconds": max(costs.get(v, 0.0),
                                                                        floor)}
            for v in variables]


def _query_view(query: Any, settings: Settings) -> tuple[str, str, float] | None:
    """(side, pattern SQL, deadline td in seconds) of a query the allocation covers."""
    from lakecep.queries import LiveArchiveQuery, PatternQuery

    if isinstance(query, LiveArchiveQuery):
        td = (query.tolerated_latency.total_seconds() if query.tolerated_latency
              else settings.tuning_deadline_seconds)
        return "live", query.live, td
    if isinstance(query, PatternQuery):
        return "pattern", query.query, settings.tuning_deadline_seconds
    return None


def _allocate(streams: list[dict[str, Any]], share: float, td: float, sigma: float,
              mode: str) -> dict[str, Any]:
    """Split a query's processor share between its streams (seed 002)."""
    from cep_core.tuning import allocation as A

    lams = [s["arrival_rate"] for s in streams]
    costs = [s["cost_seconds"] for s in streams]
    load = sum(lam * c for lam, c in zip(lams, costs, strict=True))
    n = len(streams)
    result: dict[str, Any] = {"disorder": 0.0, "disorder_estimate": 0.0}
    try:
        if load >= share:
            raise ValueError(f"load {load:.3g} of a core exceeds the share {share:.3g}")
        if n == 1:
            mus = [share / costs[0]]
            model = "single stream: the whole share"
        elif n == 2:
            opt = A.optimise_two_streams(share / costs[0], lams[0], lams[1], td, mode,
                                         k=costs[1] / costs[0], model="exact")
            mus = [opt.mu1, opt.mu2]
            theta = A.satisfaction(opt.mu2, lams[1], td, "exact")
            omega = 1.0 - opt.value / theta if theta > 0 else 1.0
            result.update(disorder=omega, disorder_estimate=omega)
            model = "two streams: max θσ(μ2)(1 - ω_avg), μ1 + kμ2 = μ (exact M/D/1)"
        else:
            mean_cost = load / sum(lams) if sum(lams) > 0 else sum(costs) / n
            mu = share / mean_cost
            floors = [A.min_capacity(lam, td, sigma, "exact") if lam > 0 else 1.0 / td
                      for lam in lams]
            plan = A.allocate(lams, mu, td, floors, mode, "exact")
            mus = [float(m) for m in plan.allocation.mus]
            result.update(disorder=plan.allocation.omega,
                          disorder_estimate=plan.allocation.omega_estimate)
            model = (f"{n} streams: algorithm 1 (Γ = 20) with Theorem 1, equal-cost "
                     "approximation (mean cost)")
            costs = [mean_cost] * n
    except ValueError as exc:  # overloaded or infeasible: share in proportion to load
        weights = [lam * c for lam, c in zip(lams, costs, strict=True)]
        total = sum(weights) or 1.0
        mus = [share * w / total / c if w else share / n / c
               for w, c in zip(weights, costs, strict=True)]
        model = f"proportional to load: the model found no feasible allocation ({exc})"
        result.update(disorder=None, disorder_estimate=None)
    quotas = [m * c / share for m, c in zip(mus, costs, strict=True)]
    for s, m, q in zip(streams, mus, quotas, strict=True):
        s.update(mu=m, quota=q, satisfaction=(A.satisfaction(m, s["arrival_rate"], td, "exact")
                                              if m > s["arrival_rate"] else 0.0))
    result.update(model=model, streams=streams)
    return result


def _simulate(streams: list[dict[str, Any]], share: float, td: float, mode: str
              ) -> dict[str, float] | None:
    """Share of complex events on time and correct under the allocation's time-sharing
    (round robin with per-stream budgets) and under FIFO, simulated (seeded)."""
    from cep_core.tuning import simulator as S

    lams = [s["arrival_rate"] for s in streams]
    if len(streams) < 2 or sum(lams) <= 0:  # no sequence to get out of order
        return None
    service = [s["cost_seconds"] / share for s in streams]
    horizon = SIMULATED_EVENTS / sum(lams)
    out = {}
    for name, scheduler in (
        ("time_sharing", S.time_sharing([s["quota"] for s in streams],
                                        cycle=4 * max(service))),
        ("fifo", S.fifo()),
    ):
        result = S.simulate(lams, service, scheduler, td=td, horizon=horizon, seed=0,
                            mode=mode)
        out[name] = float(result.on_time_and_correct)
    return out


def _views(stats: Sequence[Mapping[str, Any]], queries: Sequence[Any],
           settings: Settings) -> dict[str, dict[str, Any]]:
    """Per query the allocation covers and whose streams all have a rate: its side,
    deadline and streams."""
    from cep_core.tuning.statistics import pattern_variables

    views: dict[str, dict[str, Any]] = {}
    for query in queries:
        view = _query_view(query, settings)
        if view is None:
            continue
        side, sql, td = view
        streams = _streams(stats, query.id, side, pattern_variables(sql))
        if not streams:
            continue
        views[query.id] = {"query": query, "side": side, "deadline_seconds": td,
                           "streams": streams}
    return views


def _shares(views: dict[str, dict[str, Any]], cores: float, sigma: float
            ) -> tuple[dict[str, float], dict[str, float], dict[str, float], bool]:
    """(need, load, share) per query and whether the needs exceed the cores: each query
    gets its need plus spare in proportion to its load, or its need scaled down."""
    from cep_core.tuning import allocation as A

    needs, loads = {}, {}
    for qid, view in views.items():
        td = view["deadline_seconds"]
        needs[qid] = sum(A.min_capacity(s["arrival_rate"], td, sigma, "exact")
                         * s["cost_seconds"] if s["arrival_rate"] > 0 else 0.0
                         for s in view["streams"])
        loads[qid] = sum(s["arrival_rate"] * s["cost_seconds"] for s in view["streams"])
    need = sum(needs.values())
    overloaded = need >= cores
    spare = max(cores - need, 0.0)
    total_load = sum(loads.values())
    shares = {qid: (cores * needs[qid] / need if overloaded else needs[qid] + spare * (
        loads[qid] / total_load if total_load > 0 else 1.0 / len(views)))
        for qid in views}
    return needs, loads, shares, overloaded


def _query_entry(stats: Sequence[Mapping[str, Any]], qid: str, view: dict[str, Any],
                 share: float, need: float, load: float, top: float, sigma: float,
                 mode: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """One query's entry of the configuration and its gold.allocations rows."""
    from cep_core.tuning import allocation as A

    query, td = view["query"], view["deadline_seconds"]
    result = _allocate([dict(s) for s in view["streams"]], share, td, sigma, mode)
    simulated = _simulate(result["streams"], share, td, mode)
    entry: dict[str, Any] = {
        "kind": "live_archive" if view["side"] == "live" else "pattern",
        "deadline_seconds": td, "share": share, "need": need, "load": load,
        "pool": pool_name(qid), "weight": max(1, round(1000 * share / top)),
        "model": result["model"], "disorder": result["disorder"],
        "disorder_estimate": result["disorder_estimate"], "streams": result["streams"],
        "simulated": simulated,
    }
    transitions = sorted(_select(stats, "transition", qid, view["side"]),
                         key=lambda r: int(r["subject"]))
    if transitions:
        entry["stpm"] = {
            "max_gap_seconds": [0.0] + [float(r["gap_seconds"] or 0.0)
                                        for r in transitions],
            "probability": [0.0] + [float(r["value"]) for r in transitions]}
    if view["side"] == "live":
        archive = _select(stats, "selectivity", qid, "archive")
        whole = [r for r in archive if r["subject"] == "*"]
        entry["archive_selectivity"] = float(whole[0]["value"]) if whole else None
        tl = query.tolerated_latency
        if tl is not None:
            lam = sum(s["arrival_rate"] for s in result["streams"])
            mu = sum(s["mu"] for s in result["streams"])
            wait = A.mean_latency(lam, mu) if 0 < lam < mu else 0.0
            entry["tolerated_latency_seconds"] = max(tl.total_seconds() - wait,
                                                     tl.total_seconds() * 0.1)
        ratio = _select(stats, "match_ratio", qid)
        entry["match_ratio"] = float(ratio[0]["value"]) if ratio else None
    allocations = []
    for s in result["streams"]:
        allocations.append({
            "query_id": qid, "stream": s["stream"], "arrival_rate": s["arrival_rate"],
            "cost_seconds": s["cost_seconds"], "mu": s["mu"], "quota": s["quota"],
            "satisfaction": s["satisfaction"], "deadline_seconds": td,
            "disorder": result["disorder"],
            "disorder_estimate": result["disorder_estimate"], "pool": entry["pool"],
            "pool_weight": entry["weight"],
            "simulated_time_sharing": (simulated or {}).get("time_sharing"),
            "simulated_fifo": (simulated or {}).get("fifo"), "model": result["model"]})
    return entry, allocations


def compute(stats: Sequence[Mapping[str, Any]], queries: Sequence[Any],
            settings: Settings) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The tuned configuration for one statistics run (rows of gold.statistics), and its
    rows for gold.allocations (one per query and stream)."""
    if not stats:
        raise TuningError("no statistics rows: run `lakecep run statistics` first")
    runs = {r["run_id"] for r in stats}
    if len(runs) != 1:
        raise TuningError(f"statistics rows of several runs given: {sorted(runs)}")
    first = stats[0]
    sigma, mode = settings.tuning_sigma, settings.tuning_consumption
    views = _views(stats, queries, settings)
    if not views:
        raise TuningError("the statistics run has no stream rates of any pattern or "
                          "live-archive query; nothing to allocate")

    every = [s for v in views.values() for s in v["streams"]]
    total_rate = sum(s["arrival_rate"] for s in every)
    mean_cost = (sum(s["arrival_rate"] * s["cost_seconds"] for s in every) / total_rate
                 if total_rate > 0 else sum(s["cost_seconds"] for s in every) / len(every))
    if settings.tuning_capacity > 0:
        capacity, source = settings.tuning_capacity, "setting tuning_capacity"
    else:
        capacity, source = 1.0 / mean_cost, "measured: one core at the mean engine cost"
    cores = capacity * mean_cost  # the capacity as a share of one core's time

    needs, loads, shares, overloaded = _shares(views, cores, sigma)
    top = max(shares.values())
    out_queries: dict[str, Any] = {}
    allocations: list[dict[str, Any]] = []
    for qid, view in views.items():
        entry, rows = _query_entry(stats, qid, view, shares[qid], needs[qid], loads[qid],
                                   top, sigma, mode)
        out_queries[qid] = entry
        allocations.extend(rows)

    per_file = [float(r["value"]) for r in _select(stats, "events_per_file")]
    tightest = min(v["deadline_seconds"] for v in views.values())
    per_trigger = capacity * tightest
    files = settings.max_files_per_trigger
    if per_file and per_file[0] > 0:
        files = max(1, min(settings.max_files_per_trigger,
                           math.floor(per_trigger / per_file[0])))
    config = {
        "created_at": datetime.now(UTC).isoformat(),
        "statistics_run": first["run_id"],
        "silver_version": int(first["silver_version"]),
        "window": [str(first.get("window_start")), str(first.get("window_end"))],
        "model": {"sigma": sigma, "consumption": mode, "capacity_events_per_second": capacity,
                  "capacity_source": source, "mean_cost_seconds": mean_cost,
                  "cores": cores, "overloaded": overloaded},
        "gold": {"max_files_per_trigger": int(files),
                 "events_per_trigger": per_trigger,
                 "pools": {e["pool"]: e["weight"] for e in out_queries.values()}},
        "queries": out_queries,
    }
    return config, allocations


def transitions_for(config: Mapping[str, Any] | None, query_id: str,
                    seconds_per_unit: float = 1e-9) -> dict[str, list[float]] | None:
    """STPM's (Δt_i, p_i) for ``cep_core.incremental.stored_state.advance`` in the time
    column's unit (nanoseconds for timestamps), or None."""
    stpm = ((config or {}).get("queries", {}).get(query_id) or {}).get("stpm")
    if not stpm:
        return None
    return {"max_gap": [g / seconds_per_unit for g in stpm["max_gap_seconds"]],
            "probability": list(stpm["probability"])}
