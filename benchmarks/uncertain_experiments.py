"""Seed 001 (Li, Liu and Yu 2017): uncertain-timestamp evaluation, four methods, four sweeps.

The paper measures processing time against (a) the query length, (b) the number of events
(200-300), (c) the number of event constraints and (d) the interval size (about 3), and finds
constraintsF_QP growing much more slowly than possibleF_QP. We time
:func:`cep_core.uncertain.evaluate` with each of its four methods on the same input:
``possible_worlds`` (possibleF_QP), ``point`` and ``event`` (constraintsF_QP, point- and
event-based) and ``dp`` (span-distribution DP, beyond the paper), and also search, per
method, the largest input it handles within the time budget (events per partition; points
per event).

Data (:func:`uncertain_events`, seeded, plain pandas): per partition, ``per_class`` "trips"
through the pattern variables V1..Vn in order (true-time gaps 1..4 units, a rest of
1..3n units between trips) plus one event of each constraint class X1..Xk, at or just
before the first event of its target variable, its interval ending no later than that
event's (so no probability mass is lost to PRIOR); each event is reported as an interval
``[lo, hi]`` around its true time of a random width (``points`` +- 1 points, so the mean is
``points``) with a random pmf (Dirichlet(1), or NULL = uniform for 30 % of the events).
Times are integers or timestamps (1-second granularity). The data abides by the
constraints: the true times satisfy every ``PRIOR(Xi, Vj)`` (Xi's event is before every Vj
event), the intervals may overlap, which is what conditioning acts on.

Query: ``PATTERN (V1 V2 ... Vn) WITHIN 3n + points``, ``UNCERTAIN TIME BETWEEN lo AND hi
PMF pmf``, ``EVENT CONSTRAINTS (PRIOR(X1, V1), PRIOR(X2, V2), ...)`` (constraint i targets
V((i-1) mod n + 1)) and ``WITH PROBABILITY >= 0.01``; one point of sweep (a) nests
``V1 PERMUTE(V2, V3) (V4 | V5) V6``.

Cost: CPU seconds of ``evaluate`` (``time.process_time``; the query is compiled beforehand,
BLAS is limited to one thread): a first run per method gives the answer, then the median of
``--reps`` samples with the methods interleaved, each sample the mean of enough runs to last
~50 ms (only the first run when it took more than ``--long`` s). Each run has a CPU
budget (``--budget``, default 10 s, enforced by a watchdog thread): a method that exceeds it,
or whose ``max_worlds`` guard raises, is recorded as such and "skipped: over budget" at the
larger sizes of that sweep. Every point checks that all methods that ran returned the same
sequences and probabilities (to 1e-9) and records it (``agree``). Output:
``benchmarks/results/uncertain_experiments.json`` and ``uncertain_experiments.png``.

    .venv/bin/python benchmarks/uncertain_experiments.py            # the real run (~10-15 min)
    .venv/bin/python benchmarks/uncertain_experiments.py --quick    # a smoke run (< 1 min)
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # one core per measurement, as process_time counts all

import argparse  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import signal  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import textwrap  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
sys.path.insert(0, str(ROOT))

from engine_throughput import machine  # noqa: E402

from cep_core.api import CompiledQuery  # noqa: E402
from cep_core.uncertain import evaluate  # noqa: E402

METHODS = ("possible_worlds", "point", "event", "dp")
LABELS = {"possible_worlds": "possible_worlds (possibleF_QP)",
          "point": "point (constraintsF_QP, point-based)",
          "event": "event (constraintsF_QP, event-based)", "dp": "dp (span DP)"}
COLORS = {"possible_worlds": "tab:red", "point": "tab:orange", "event": "tab:blue",
          "dp": "tab:green"}
TOLERANCE = 1e-9
START = pd.Timestamp("2026-01-05")
NESTED = "nested"  # the PERMUTE/OR point of sweep (a)


# ---------------------------------------------------------------------- data and query


def uncertain_events(partitions: int, n_vars: int, per_class: int, points: int,
                     constraints: int = 0, timestamps: bool = False, seed: int = 1,
                     spread: int = 1) -> pd.DataFrame:
    """Seeded uncertain events (see the module docstring). Columns: pid, eid, etype, t
    (the reported time), lo, hi, pmf (a list, or None for uniform)."""
    rng = np.random.default_rng(seed)
    rows: list[tuple[Any, ...]] = []
    eid = 0

    def emit(pid: int, etype: str, true_t: int, latest: int | None = None) -> int:
        """One event around ``true_t``; with ``latest``, its interval ends at or before it.
        Returns the interval's upper end."""
        nonlocal eid
        width = max(1, points + int(rng.integers(-spread, spread + 1))) if spread else points
        highest_lo = true_t if latest is None else min(true_t, latest - width + 1)
        lo = int(rng.integers(true_t - width + 1, highest_lo + 1))  # contains the true time
        pmf = None if rng.random() < 0.3 else [float(p) for p in rng.dirichlet(np.ones(width))]
        rows.append((pid, eid, etype, lo, lo, lo + width - 1, pmf))
        eid += 1
        return lo + width - 1

    for pid in range(partitions):
        t = int(rng.integers(0, 10))
        first: dict[int, tuple[int, int]] = {}  # variable -> (true time, upper end) of trip 1
        for _ in range(per_class):
            for v in range(1, n_vars + 1):
                t += int(rng.integers(1, 5))
                hi = emit(pid, f"V{v}", t)
                first.setdefault(v, (t, hi))
            t += int(rng.integers(1, 3 * n_vars + 1))
        # Xi at or just before its target's first event, its interval ending no later than
        # that event's: PRIOR holds for the true times and no mass is lost to it
        for i in range(1, constraints + 1):
            true_t, hi = first[(i - 1) % n_vars + 1]
            emit(pid, f"X{i}", true_t - int(rng.integers(0, 3)), latest=hi)
    df = pd.DataFrame.from_records(rows, columns=["pid", "eid", "etype", "t", "lo", "hi",
                                                  "pmf"])
    if timestamps:
        for c in ("t", "lo", "hi"):
            df[c] = START + pd.to_timedelta(df[c], unit="s")
    return df


def pattern(n_vars: int, nested: bool = False) -> str:
    if nested:
        assert n_vars == 6
        return "V1 PERMUTE(V2, V3) (V4 | V5) V6"
    return " ".join(f"V{v}" for v in range(1, n_vars + 1))


def uncertain_query(n_vars: int, constraints: int, points: int, timestamps: bool = False,
                    nested: bool = False, xi: float = 0.01) -> str:
    within = 3 * n_vars + points
    window = f"INTERVAL '{within}' SECOND" if timestamps else str(within)
    granularity = " GRANULARITY INTERVAL '1' SECOND" if timestamps else ""
    prior = ", ".join(f"PRIOR(X{i}, V{(i - 1) % n_vars + 1})"
                      for i in range(1, constraints + 1))
    ec = f"\n  EVENT CONSTRAINTS ({prior})" if constraints else ""
    measures = ", ".join(f"V{v}.eid AS v{v}" for v in range(1, n_vars + 1))
    defines = ", ".join([f"V{v} AS etype = 'V{v}'" for v in range(1, n_vars + 1)]
                        + [f"X{i} AS etype = 'X{i}'" for i in range(1, constraints + 1)])
    return (f"SELECT * FROM ev MATCH_RECOGNIZE (\n  PARTITION BY pid ORDER BY t\n"
            f"  MEASURES {measures}, MATCH_PROBABILITY() AS p\n"
            f"  PATTERN ({pattern(n_vars, nested)}) WITHIN {window}\n"
            f"  UNCERTAIN TIME BETWEEN lo AND hi PMF pmf{granularity}{ec}\n"
            f"  WITH PROBABILITY >= {xi}\n  DEFINE {defines}\n)")


# ---------------------------------------------------------------------- measuring


class OverBudget(BaseException):
    """Raised in the main thread by the watchdog (a BaseException so no ``except Exception``
    inside the engine eats it)."""


_ARMED = False


def _interrupt(signum: int, frame: Any) -> None:
    if _ARMED:
        raise OverBudget


def run_once(cq: CompiledQuery, df: pd.DataFrame, method: str, budget: float,
             max_worlds: int) -> dict[str, Any]:
    """One evaluation under a CPU budget: status 'ok' (with cpu_s and the answer), 'over
    budget', 'world guard' (the max_worlds ValueError) or 'error'.

    The budget is enforced by a watchdog thread that polls ``time.process_time`` every 20 ms
    and interrupts the main thread with SIGUSR1. (Not ``setitimer(ITIMER_PROF)``: on this
    kernel an armed CPU-time itimer turns the process CPU clock into 4 ms ticks.)"""
    global _ARMED
    previous = signal.signal(signal.SIGUSR1, _interrupt)
    done = threading.Event()
    fired: list[bool] = []
    main_thread = threading.get_ident()
    started = time.process_time()

    def watch() -> None:
        while not done.wait(0.02):
            if time.process_time() - started > budget:
                fired.append(True)
                signal.pthread_kill(main_thread, signal.SIGUSR1)
                return

    watchdog = threading.Thread(target=watch, daemon=True)
    res = None
    _ARMED = True
    try:
        try:
            watchdog.start()
            res = evaluate(cq, df, method=method, max_worlds=max_worlds, id_column="eid")
        finally:
            done.set()
            watchdog.join()
            _ARMED = False  # a signal still pending is now ignored; ``fired`` tells
    except OverBudget:
        pass
    except ValueError as err:
        status = "world guard" if "max_worlds" in str(err) else "error"
        return {"status": status, "cpu_s": round(time.process_time() - started, 3),
                "message": str(err)[:300]}
    finally:
        signal.signal(signal.SIGUSR1, previous)
    cpu = time.process_time() - started
    if fired or res is None:
        return {"status": "over budget", "cpu_s": round(cpu, 3)}
    d = res.diagnostics
    return {"status": "ok", "cpu_s": cpu,
            "answer": {(key, sigma): p for key, sigma, p in res.groups},
            "diagnostics": {"worlds": d.worlds, "candidates": d.candidates,
                            "combinations": d.combinations, "points": d.points, "dp": d.dp,
                            "lost_prior_mass_max": round(max(d.lost_prior_mass.values(),
                                                             default=0.0), 6),
                            "lost_prior_mass_mean": round(statistics.fmean(
                                d.lost_prior_mass.values()) if d.lost_prior_mass else 0.0, 6)}}


def agreement(answers: dict[str, dict[Any, float]]) -> dict[str, Any]:
    """Do all methods that ran return the same sequences and probabilities (to 1e-9)?"""
    names = list(answers)
    if not names:
        return {"agree": None, "compared": [], "reference": None, "problems": []}
    ref_name = names[0]
    ref = answers[ref_name]
    worst, problems = 0.0, []
    for name in names[1:]:
        got = answers[name]
        if got.keys() != ref.keys():
            problems.append(f"{name}: {len(got)} sequences, {ref_name} {len(ref)} "
                            f"({len(got.keys() - ref.keys())} extra, "
                            f"{len(ref.keys() - got.keys())} missing)")
            continue
        diff = max((abs(got[k] - p) for k, p in ref.items()), default=0.0)
        worst = max(worst, diff)
        if diff > TOLERANCE:
            problems.append(f"{name}: probabilities differ by up to {diff:.3g}")
    return {"agree": not problems if len(names) > 1 else None, "compared": names,
            "reference": ref_name, "max_abs_diff": worst, "problems": problems,
            "sequences": len(ref), "probability_sum": round(math.fsum(ref.values()), 6)}


def measure_point(cq: CompiledQuery, df: pd.DataFrame, dead: dict[str, str],
                  args: argparse.Namespace, reps: int) -> dict[str, Any]:
    """Every method on one input. A first run per method gives the answer (checked for
    agreement); then, unless it took more than ``args.long`` s (then it is the only sample),
    ``reps`` timed samples with the methods interleaved, each the mean of enough runs to
    last about 50 ms. ``dead`` maps a method that already failed the budget in this sweep to
    the reason (it is skipped; a new failure is added)."""
    results: dict[str, dict[str, Any]] = {}
    samples: dict[str, list[float]] = {m: [] for m in args.methods}
    inner: dict[str, int] = {}
    answers: dict[str, dict[Any, float]] = {}
    for method in args.methods:
        if method in dead:
            results[method] = {"status": "skipped: over budget", "after": dead[method]}
            continue
        r = run_once(cq, df, method, args.budget, args.max_worlds)
        if r["status"] != "ok":
            results[method] = r
            dead[method] = r["status"]
            continue
        answers[method] = r.pop("answer")
        results[method] = {**r, "first_run_s": round(r["cpu_s"], 5)}
        if r["cpu_s"] > args.long or reps <= 1:
            samples[method].append(r["cpu_s"])
        else:
            inner[method] = max(1, min(50, math.ceil(0.05 / max(r["cpu_s"], 1e-4))))
    for _ in range(reps if inner else 0):
        for method, n in inner.items():
            total = 0.0
            for _ in range(n):
                r = run_once(cq, df, method, args.budget, args.max_worlds)
                total += r["cpu_s"] if r["status"] == "ok" else args.budget
            samples[method].append(total / n)
    for method in args.methods:
        if results[method]["status"] == "ok":
            results[method]["cpu_s"] = round(statistics.median(samples[method]), 5)
            results[method]["cpu_s_samples"] = [round(t, 5) for t in samples[method]]
            results[method]["runs_per_sample"] = inner.get(method, 1)
    return {"methods": results, "check": agreement(answers)}


def cpu(point: dict[str, Any], method: str) -> float | None:
    r = point["methods"].get(method)
    return r["cpu_s"] if r and r["status"] == "ok" else None


def show(label: str, point: dict[str, Any]) -> None:
    parts = []
    for method, r in point["methods"].items():
        parts.append(f"{method} {r['cpu_s']:.4f}s" if r["status"] == "ok"
                     else f"{method} {r['status']}")
    check = point["check"]
    agree = ("agree" if check["agree"] else "only one method" if check["agree"] is None
             else "DISAGREE " + "; ".join(check["problems"]))
    print(f"  {label}: " + " | ".join(parts) + f" | {check.get('sequences', 0)} seqs, {agree}",
          flush=True)


# ---------------------------------------------------------------------- sweeps

SWEEPS: dict[str, dict[str, Any]] = {
    "a": {"name": "query length", "x": "query variables n", "fit": "exp",
          "step": "added query variable",
          "full": [2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12], "quick": [2, 3, 4, 5],
          "fixed": {"partitions": 20, "per_class": 1, "points": 3, "constraints": 1,
                    "timestamps": False}},
    "b": {"name": "number of events", "x": "events (all partitions)", "fit": "power",
          "step": "doubling of the events",
          "full": [100, 200, 300, 400, 600, 800, 1200], "quick": [50, 100, 200],
          "fixed": {"n_vars": 3, "per_class": 2, "points": 3, "constraints": 1,
                    "timestamps": True}},
    "c": {"name": "number of event constraints", "x": "PRIOR constraints k", "fit": "exp",
          "step": "added PRIOR constraint",
          "full": [0, 1, 2, 3, 4, 5, 6, 7, 8, 10, 12], "quick": [0, 1, 2, 3],
          "fixed": {"partitions": 20, "n_vars": 4, "per_class": 1, "points": 3,
                    "timestamps": False}},
    "d": {"name": "interval size", "x": "points per event U (mean)", "fit": "exp",
          "step": "added point per event",
          "full": [1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96], "quick": [1, 2, 3, 4],
          "fixed": {"partitions": 20, "n_vars": 3, "per_class": 1, "constraints": 1,
                    "timestamps": False}},
}


def sweep_input(key: str, x: int, fixed: dict[str, Any], seed: int,
                ) -> tuple[pd.DataFrame, str, dict[str, Any]]:
    p = dict(fixed)
    if key == "a":
        p["n_vars"] = x
    elif key == "b":
        per_partition = p["n_vars"] * p["per_class"] + p["constraints"]
        p["partitions"] = max(1, round(x / per_partition))
    elif key == "c":
        p["constraints"] = x
    else:
        p["points"] = x
    df = uncertain_events(p["partitions"], p["n_vars"], p["per_class"], p["points"],
                          p["constraints"], p["timestamps"], seed)
    q = uncertain_query(p["n_vars"], p["constraints"], p["points"], p["timestamps"])
    return df, q, p


def run_sweep(key: str, args: argparse.Namespace) -> dict[str, Any]:
    spec = SWEEPS[key]
    xs = args.sizes.get(key) or spec["quick" if args.quick else "full"]
    print(f"sweep ({key}) {spec['name']}: {spec['x']} in {xs}", flush=True)
    dead: dict[str, str] = {}
    points = []
    for x in xs:
        df, q, p = sweep_input(key, x, spec["fixed"], args.seed)
        point = {"x": x, "events": len(df), "events_per_partition": round(
                     len(df) / p["partitions"], 2), "parameters": p,
                 "mean_points_per_event": round(float((df["hi"] - df["lo"]).map(
                     _units).mean()) + 1, 3),
                 **measure_point(CompiledQuery(q), df, dead, args, args.reps)}
        points.append(point)
        show(f"{spec['x']}={x} ({len(df)} events)", point)
    if key == "a":
        parts = 5 if args.quick else spec["fixed"]["partitions"]
        df = uncertain_events(parts, 6, 1, 3, 1, False, args.seed)
        q = uncertain_query(6, 1, 3, nested=True)
        point = {"x": NESTED, "pattern": pattern(6, nested=True), "events": len(df),
                 "events_per_partition": round(len(df) / parts, 2), "partitions": parts,
                 **measure_point(CompiledQuery(q), df, {}, args, args.reps)}
        points.append(point)
        show(f"n=6 nested {pattern(6, nested=True)}", point)
    report = {"name": spec["name"], "x": spec["x"], "fixed": spec["fixed"],
              "query_example": sweep_input(key, xs[0], spec["fixed"], args.seed)[1],
              "points": points}
    report["summary"] = summarise(report, spec)
    report["verdict"] = verdict(key, report)
    print("  " + report["verdict"], flush=True)
    return report


def _units(value: Any) -> float:
    return value.total_seconds() if isinstance(value, pd.Timedelta) else float(value)


# ---------------------------------------------------------------------- largest inputs

SEARCHES: dict[str, dict[str, Any]] = {
    "events_per_partition": {
        "what": "events in one partition, PATTERN (V1 V2 V3), U = 3, no constraints",
        "n_vars": 3, "constraints": 0, "points": 3,
        "full": [1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768,
                 1024, 1536, 2048, 3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768,
                 49152],
        "quick": [1, 2, 3, 4, 8, 16]},
    "events_per_partition_prior": {
        "what": "events in one partition, PATTERN (V1 V2 V3), U = 3, PRIOR(X1, V1)",
        "n_vars": 3, "constraints": 1, "points": 3,
        "full": [1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768,
                 1024, 1536, 2048, 3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768,
                 49152],
        "quick": [1, 2, 3, 4, 8]},
    "points_per_event": {
        "what": "points per event, one partition of 6 events: 2 trips of PATTERN (V1 V2 V3), "
                "no constraints",
        "n_vars": 3, "constraints": 0, "per_class": 2,
        "full": [2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768,
                 1024, 1536, 2048],
        "quick": [2, 3, 4, 8, 16]},
    "points_per_event_prior": {
        "what": "points per event, one partition of 7 events: 2 trips of PATTERN (V1 V2 V3) "
                "and X1 with PRIOR(X1, V1)",
        "n_vars": 3, "constraints": 1, "per_class": 2,
        "full": [2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768,
                 1024, 1536, 2048],
        "quick": [2, 3, 4, 8, 16]},
}


def search_input(name: str, x: int, seed: int) -> tuple[pd.DataFrame, str]:
    s = SEARCHES[name]
    if name.startswith("points_per_event"):
        df = uncertain_events(1, s["n_vars"], s["per_class"], x, s["constraints"], seed=seed,
                              spread=0)
        return df, uncertain_query(s["n_vars"], s["constraints"], x)
    df = uncertain_events(1, s["n_vars"], x, s["points"], s["constraints"], seed=seed,
                          spread=0)
    return df, uncertain_query(s["n_vars"], s["constraints"], s["points"])


def largest(name: str, args: argparse.Namespace) -> dict[str, Any]:
    """Per method, grow the input until one run exceeds the search budget (one repetition per
    size; every method on the same input, checked for agreement)."""
    s = SEARCHES[name]
    xs = args.search_sizes.get(name) or s["quick" if args.quick else "full"]
    print(f"largest input within {args.search_budget:g} s: {s['what']}", flush=True)
    dead: dict[str, str] = {}
    search_args = argparse.Namespace(**{**vars(args), "budget": args.search_budget})
    points = []
    for x in xs:
        if all(m in dead for m in args.methods):
            break
        df, q = search_input(name, x, args.seed)
        point = {"x": x, "events": len(df),
                 "mean_points_per_event": float((df["hi"] - df["lo"]).mean()) + 1,
                 **measure_point(CompiledQuery(q), df, dead, search_args, 1)}
        points.append(point)
        show(f"{'U' if name.startswith('points') else 'trips'}={x} ({len(df)} events)", point)
    per_point = name.startswith("points_per_event")
    unit = "points per event" if per_point else "events per partition"
    best: dict[str, Any] = {}
    for method in args.methods:
        ok = [p for p in points if cpu(p, method) is not None]
        failed = next((p for p in points if p["methods"][method]["status"] in
                       ("over budget", "world guard", "error")), None)
        top = ok[-1] if ok else None
        value = None if top is None else (top["x"] if name.startswith("points_per_event")
                                          else top["events"])
        best[method] = {
            unit.replace(" ", "_"): value, "cpu_s": None if top is None else cpu(top, method),
            "stopped_by": None if failed is None else failed["methods"][method]["status"],
            "next_size": None if failed is None else (
                failed["x"] if name.startswith("points_per_event") else failed["events"]),
            "capped": failed is None}
        print(f"  {method}: largest {value} {unit}"
              + (f" ({cpu(top, method):.2f} s)" if top else "")
              + (f", next size {best[method]['next_size']}: {best[method]['stopped_by']}"
                 if failed else " (the largest size tried)"), flush=True)
    return {"what": s["what"], "unit": unit, "budget_s": args.search_budget,
            "points": points, "largest": best}


# ---------------------------------------------------------------------- summaries


def _ratio_stats(values: list[float]) -> dict[str, Any] | None:
    if not values:
        return None
    return {"median": round(statistics.median(values), 3), "min": round(min(values), 3),
            "max": round(max(values), 3), "points": len(values)}


def growth(xs: list[float], ts: list[float], kind: str) -> dict[str, Any] | None:
    """Least-squares fit of log(time) on x ('exp': factor per +1) or on log x ('power':
    exponent; also the factor per doubling)."""
    if len(xs) < 2:
        return None
    x = np.log(np.array(xs, dtype=float)) if kind == "power" else np.array(xs, dtype=float)
    slope = float(np.polyfit(x, np.log(np.array(ts)), 1)[0])
    if kind == "power":
        return {"exponent": round(slope, 3), "factor_per_doubling": round(2 ** slope, 3),
                "points": len(xs)}
    return {"factor_per_step": round(math.exp(slope), 3), "points": len(xs)}


def summarise(report: dict[str, Any], spec: dict[str, Any]) -> dict[str, Any]:
    points = [p for p in report["points"] if p["x"] != NESTED]
    pairs = {"possible_worlds/point": ("possible_worlds", "point"),
             "possible_worlds/event": ("possible_worlds", "event"),
             "point/event": ("point", "event"), "event/dp": ("event", "dp"),
             "possible_worlds/dp": ("possible_worlds", "dp")}
    speedups: dict[str, Any] = {}
    for label, (slow, fast) in pairs.items():
        values = []
        for p in points:
            a, b = cpu(p, slow), cpu(p, fast)
            if a is not None and b is not None and b > 0:
                values.append(a / b)
        speedups[label] = _ratio_stats(values)
    grow: dict[str, Any] = {}
    for method in METHODS:
        ok = [(p["x"], cpu(p, method)) for p in points if cpu(p, method) is not None]
        xs, ts = [x for x, _ in ok], [t for _, t in ok]
        fit = growth(xs, ts, spec["fit"])  # type: ignore[arg-type]
        # the tail: the last three sizes it ran, less dominated by fixed costs
        tail = growth(xs[-3:], ts[-3:], spec["fit"]) if len(ok) >= 3 else None  # type: ignore[arg-type]
        other = "power" if spec["fit"] == "exp" else "exp"
        positive = [(x, t) for x, t in ok if x > 0]  # log x needs x > 0
        alt = growth([x for x, _ in positive], [t for _, t in positive], other)  # type: ignore[misc]
        alt_tail = growth([x for x, _ in positive[-3:]], [t for _, t in positive[-3:]],
                          other) if len(positive) >= 3 else None  # type: ignore[misc]
        over = next((p["x"] for p in points
                     if p["methods"].get(method, {}).get("status") in ("over budget",
                                                                        "world guard")), None)
        grow[method] = {"fit_all": fit, "fit_last3": tail, f"fit_all_{other}": alt,
                        f"fit_last3_{other}": alt_tail,
                        "largest_x_within_budget": ok[-1][0] if ok else None,
                        "first_x_over_budget": over}
    checks = [p["check"]["agree"] for p in report["points"]]
    return {"speedups": speedups, "growth": grow,
            "all_agree": all(c is not False for c in checks),
            "points_checked": sum(c is not None for c in checks),
            "max_abs_diff": max((p["check"].get("max_abs_diff", 0.0)
                                 for p in report["points"]), default=0.0)}


def _factor(g: dict[str, Any] | None, kind: str) -> float | None:
    if g is None:
        return None
    return g["exponent"] if kind == "power" else g["factor_per_step"]


def _fmt(v: float | None, digits: int = 2) -> str:
    return "-" if v is None else f"{v:.{digits}f}"


def verdict(key: str, report: dict[str, Any]) -> str:
    spec = SWEEPS[key]
    s = report["summary"]
    kind = spec["fit"]
    unit = "exponent" if kind == "power" else f"x per {spec['step']}"
    g = {m: _factor(s["growth"][m]["fit_all"], kind) for m in METHODS}
    sp = s["speedups"]
    over = s["growth"]["possible_worlds"]["first_x_over_budget"]
    powers = ""
    if key == "d":  # cost is polynomial in U: also power-law exponents of the last 3 sizes
        e = {m: (s["growth"][m].get("fit_last3_power") or {}).get("exponent") for m in METHODS}
        top = {m: s["growth"][m]["largest_x_within_budget"] for m in METHODS}
        powers = (" (power-law exponent over each method's last 3 sizes: " + ", ".join(
            f"{m} {_fmt(e[m])} up to U={top[m]}" for m in METHODS) + ")")

    def med(label: str) -> str:
        r = sp.get(label)
        return "-" if r is None else (f"{r['median']:.2f}x ({r['min']:.2f}-{r['max']:.2f}, "
                                      f"{r['points']} pts)")

    def slower(m: str) -> bool:  # grows clearly more slowly than possible_worlds
        a, b = g["possible_worlds"], g[m]
        if a is None or b is None:
            return False
        return (b < a - 0.25) if kind == "power" else (math.log(b) < 0.75 * math.log(a))

    cf = [m for m in ("point", "event") if slower(m)]
    level = sp.get("possible_worlds/event")
    faster = level is not None and level["min"] > 2
    if len(cf) == 2:
        outcome = "agree"
    elif cf:
        other = "event" if cf[0] == "point" else "point"
        outcome = (f"partly agree: only {cf[0]}-based grows clearly more slowly, "
                   f"{other}-based grows like possibleF_QP")
    elif faster:
        outcome = ("disagree on growth: every method grows alike here, but possibleF_QP is "
                   f"{level['min']:.0f}-{level['max']:.0f}x slower at every size")
    else:
        outcome = "disagree: constraintsF_QP grows about as fast as possibleF_QP"
    return (f"({key}) {spec['name']}: paper: constraintsF_QP grows much more slowly than "
            f"possibleF_QP | measured growth ({unit}): possible_worlds {_fmt(g['possible_worlds'])}"
            f", point {_fmt(g['point'])}, event {_fmt(g['event'])}, dp {_fmt(g['dp'])}{powers}; "
            f"median speed-up possible_worlds/point {med('possible_worlds/point')}, "
            f"possible_worlds/event {med('possible_worlds/event')}, point/event "
            f"{med('point/event')}, event/dp {med('event/dp')}"
            + (f"; possible_worlds over budget from {spec['x']}={over}" if over is not None
               else "") + f"; {outcome}; all methods agree: {s['all_agree']}")


# ---------------------------------------------------------------------- plot


def plot(report: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sweeps, searches = report["sweeps"], report["largest_inputs"]
    panels = len(sweeps) + len(searches)
    cols = 4
    rows = math.ceil(panels / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5.2 * cols, 4.0 * rows), squeeze=False)
    flat = list(axes.ravel())
    budget = report["parameters"]["budget"]
    for ax, (key, sw) in zip(flat, sweeps.items(), strict=False):
        pts = [p for p in sw["points"] if p["x"] != NESTED]
        for m in METHODS:
            xy = [(p["x"], cpu(p, m)) for p in pts if cpu(p, m) is not None]
            if xy:
                ax.plot(*zip(*xy, strict=True), "o-", color=COLORS[m], label=LABELS[m],
                        markersize=4)
            nested = next((p for p in sw["points"] if p["x"] == NESTED), None)
            if nested is not None and cpu(nested, m) is not None:
                ax.plot([6], [cpu(nested, m)], "*", color=COLORS[m], markersize=11)
        ax.axhline(budget, color="gray", linestyle="--", linewidth=1)
        ax.set_yscale("log")
        if key in ("b", "d"):
            ax.set_xscale("log")
        ax.set_xlabel(sw["x"] + (" (* = PERMUTE/OR at n=6)" if key == "a" else ""))
        ax.set_ylabel("CPU seconds (median)")
        ax.set_title(f"({key}) {sw['name']}", fontsize=10)
        ax.grid(alpha=0.3)
    for ax, (_, se) in zip(flat[len(sweeps):], searches.items(), strict=False):
        for m in METHODS:
            xy = [(p["x"] if se["unit"] == "points per event" else p["events"], cpu(p, m))
                  for p in se["points"] if cpu(p, m) is not None]
            if xy:
                ax.plot(*zip(*xy, strict=True), "o-", color=COLORS[m], label=LABELS[m],
                        markersize=4)
        ax.axhline(se["budget_s"], color="gray", linestyle="--", linewidth=1)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel(se["unit"])
        ax.set_ylabel("CPU seconds (one run)")
        ax.set_title(textwrap.fill("largest input: " + se["what"], 60), fontsize=8)
        ax.grid(alpha=0.3)
    for ax in flat[panels:]:
        ax.axis("off")
    flat[0].legend(fontsize=7, loc="upper left")
    fig.suptitle(f"Seed 001: uncertain timestamps, four methods (dashed: {budget:g} s budget; "
                 "CPU s, 2 busy cores)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ---------------------------------------------------------------------- main


def _sizes(text: str | None) -> dict[str, list[int]]:
    """'a=2,3,4;b=50,100' -> {'a': [2, 3, 4], 'b': [50, 100]}"""
    out: dict[str, list[int]] = {}
    for part in (text or "").split(";"):
        if part.strip():
            name, values = part.split("=", 1)
            out[name.strip()] = [int(v) for v in values.split(",") if v.strip()]
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="small sizes, 1 rep, 2 s budgets")
    ap.add_argument("--sweeps", default="a,b,c,d", help="which sweeps (comma-separated)")
    ap.add_argument("--searches", default=",".join(SEARCHES),
                    help="which largest-input searches (comma-separated; '' for none)")
    ap.add_argument("--sizes", type=_sizes, default={},
                    help="override sweep sizes, e.g. 'a=2,3;c=0,1'")
    ap.add_argument("--search-sizes", type=_sizes, default={},
                    help="override search sizes, e.g. 'points_per_event=2,4'")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--budget", type=float, default=10.0, help="CPU s per run in the sweeps")
    ap.add_argument("--search-budget", type=float, default=10.0,
                    help="CPU s per run in the largest-input searches")
    ap.add_argument("--long", type=float, default=1.0,
                    help="a run longer than this (CPU s) is not repeated")
    ap.add_argument("--max-worlds", type=int, default=1_000_000,
                    help="evaluate(max_worlds=...): the world / joint-assignment guard")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument("--out", type=Path, default=RESULTS / "uncertain_experiments.json")
    ap.add_argument("--from-json", action="store_true",
                    help="do not measure: recompute summaries, verdicts and plot from --out")
    args = ap.parse_args(argv)
    args.methods = [m for m in args.methods.split(",") if m]
    if args.from_json:
        report = json.loads(args.out.read_text())
        for key, sweep in report["sweeps"].items():
            sweep["summary"] = summarise(sweep, SWEEPS[key])
            sweep["verdict"] = verdict(key, sweep)
            print(sweep["verdict"])
        report["verdicts"] = [s["verdict"] for s in report["sweeps"].values()]
        args.out.write_text(json.dumps(report, indent=2, default=str) + "\n")
        plot(report, args.out.with_suffix(".png"))
        return
    if args.quick:
        args.reps = 1
        args.budget = min(args.budget, 2.0)
        args.search_budget = min(args.search_budget, 1.0)
        if args.out == RESULTS / "uncertain_experiments.json":
            args.out = Path("/tmp/uncertain_experiments_quick.json")
    began = time.perf_counter()
    load_before = os.getloadavg()
    print(f"uncertain experiments{' (quick)' if args.quick else ''}: methods "
          f"{', '.join(args.methods)}, budget {args.budget:g} s per run, search budget "
          f"{args.search_budget:g} s, {args.reps} reps, load average {load_before[0]:.2f}",
          flush=True)
    sweeps = {k: run_sweep(k, args) for k in args.sweeps.split(",") if k}
    searches = {n: largest(n, args) for n in args.searches.split(",") if n}
    parameters = {k: v for k, v in vars(args).items() if k != "out"}
    report = {"machine": {**machine(), "load_average_start": [round(v, 2) for v in load_before],
                          "load_average_end": [round(v, 2) for v in os.getloadavg()],
                          "blas_threads": os.environ.get("OPENBLAS_NUM_THREADS")},
              "command": " ".join([Path(sys.argv[0]).name, *(sys.argv[1:] if argv is None
                                                              else argv)]),
              "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
              "quick": args.quick, "parameters": parameters,
              "timing": "CPU s of evaluate() (time.process_time), median of the repeats, "
                        "methods interleaved; other jobs shared the 2 cores: read ratios",
              "data": "uncertain_events(): trips V1..Vn per partition, Xi before its target, "
                      "interval widths points+-1 around the true time, Dirichlet(1) pmfs "
                      f"(30 % uniform), seed {args.seed}",
              "sweeps": sweeps, "largest_inputs": searches,
              "verdicts": [s["verdict"] for s in sweeps.values()],
              "all_agree": all(s["summary"]["all_agree"] for s in sweeps.values())
              and all(p["check"]["agree"] is not False for se in searches.values()
                      for p in se["points"]),
              "wall_s": round(time.perf_counter() - began, 1)}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2, default=str) + "\n")
    plot(report, args.out.with_suffix(".png"))
    print(f"all methods agree at every point: {report['all_agree']}")
    print(f"wrote {args.out} and {args.out.with_suffix('.png')} ({report['wall_s']} s)",
          flush=True)


if __name__ == "__main__":
    main()
