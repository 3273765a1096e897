"""Seed 003 (Akdere, Cetintemel, Tatbul, VLDB 2008): plan-based acquisition, the planners.

Pure planning experiments on the cost model of ``cep_core.planning`` (docs/acquisition.md):

1. the cost/latency pareto frontier of an example query, with the baselines "pull
   everything" (one step with every type) and "frequency order" (one type per step, rarest
   first: lazy evaluation), and the model's predicted rows against a simulation of Poisson
   streams executing the chosen plans;
2. planning time vs |S|: Algorithm 1 (k unbounded and k = 1, 3, 10) up to |S| = 10 and the
   merged forward/backward heuristics up to |S| = 20 (targets: DP |S| = 10 < 10 s,
   heuristics |S| = 20 < 1 s);
3. plan quality: the heuristics' best feasible plan against the DP optimum on random
   instances with <= 8 sub-events (target, ours: within 1.1x on >= 90 %), and the baselines;
4. the four ways of keeping k plans per DP table entry (random, cost, latency, mixed).

Output: ``benchmarks/results/acquisition_planning.{json,png}``.

    .venv/bin/python benchmarks/acquisition_planning.py            # the real run
    .venv/bin/python benchmarks/acquisition_planning.py --quick    # a smoke run
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
sys.path.insert(0, str(ROOT))

from engine_throughput import machine  # noqa: E402

from cep_core.planning import (  # noqa: E402
    KEEP_STRATEGIES,
    LatencyModel,
    NodeModel,
    Planner,
    Statistics,
    acquire,
    and_,
    backward,
    choose,
    dp,
    expected_reads,
    forward,
    frequency_order,
    heuristic,
    pull_everything,
    seq,
)


def random_model(rng: random.Random, n: int, delays: bool) -> tuple[NodeModel, Any]:
    names = [f"T{i}" for i in range(n)]
    rates = {t: 10 ** rng.uniform(-3, 1) for t in names}
    children: list[str] = list(names)
    if rng.random() < 0.3:
        rates["N"] = 10 ** rng.uniform(-2, 0)
        children.insert(rng.randrange(1, n + 1), "!N")
    window = rng.choice([1.0, 5.0, 20.0])
    make = and_ if rng.random() < 0.5 else seq
    pattern = make(*children, window=window)
    lat = LatencyModel(1.0, {t: rng.choice([0.5, 1.0, 2.0]) for t in names} if delays else {})
    return Planner(Statistics.poisson(rates, 1000.0), lat).node_model(pattern), pattern


def timed(fn: Any) -> tuple[float, Any]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def frontier(reps: int) -> dict[str, Any]:
    rates = {"fire_alarm": 0.002, "door_forced": 0.001, "badge_denied": 0.02,
             "motion": 0.5, "temp_reading": 2.0, "network_packet": 10.0}
    pattern = seq("door_forced", "badge_denied", "motion", "!fire_alarm", "network_packet",
                  "temp_reading", window=30.0)
    stats = Statistics.poisson(rates, 3600.0)
    lat = LatencyModel(1.0, {"network_packet": 2.0, "temp_reading": 1.5})
    model = Planner(stats, lat).node_model(pattern)
    plans = dp(model)
    heur = heuristic(model)
    everything, lazy = pull_everything(model), frequency_order(model)
    # predicted vs simulated rows of a few plans (Poisson streams, executor semantics)
    rng = np.random.default_rng(0)
    chosen = [plans[0], plans[len(plans) // 2], plans[-1], everything, lazy]
    simulated = np.zeros(len(chosen))
    simulated_all = np.zeros(len(chosen))
    for _ in range(reps):
        ev = {t: np.sort(rng.uniform(0, 3600.0, rng.poisson(r * 3600.0)))
              for t, r in rates.items()}
        for i, p in enumerate(chosen):
            simulated[i] += sum(sum(s.rows.values()) for s in acquire(pattern, p, ev, 3600.0))
            simulated_all[i] += sum(sum(s.rows.values())
                                    for s in acquire(pattern, p, ev, 3600.0, "all"))
    return {
        "pattern": str(pattern), "rates_per_s": rates, "horizon_s": 3600.0,
        "latency": {"step_delay": 1.0, "type_delay": dict(lat.type_delay)},
        "dp_pareto": [{"steps": p.steps, "cost": p.cost, "latency": p.latency} for p in plans],
        "heuristic_pareto": [{"steps": p.steps, "cost": p.cost, "latency": p.latency}
                             for p in heur],
        "pull_everything": {"steps": everything.steps, "cost": everything.cost,
                            "latency": everything.latency},
        "frequency_order": {"steps": lazy.steps, "cost": lazy.cost, "latency": lazy.latency},
        "cheapest_vs_pull_everything": everything.cost / plans[-1].cost,
        "model_vs_simulation": [
            {"steps": p.steps, "predicted_rows": p.cost, "simulated_rows_read": s / reps,
             "simulated_rows_model_semantics": sa / reps,
             "predicted_over_simulated": p.cost / (s / reps),
             # the executor-semantics prediction (cep_core.planning.expected_reads)
             "executor_prediction": (e := sum(expected_reads(pattern, p, stats, 400))),
             "executor_prediction_over_simulated": e / (s / reps)}
            for p, s, sa in zip(chosen, simulated, simulated_all, strict=True)],
    }


def planning_time(max_dp: int, max_heur: int, seed: int = 1) -> dict[str, Any]:
    rng = random.Random(seed)
    out: dict[str, Any] = {"dp": {}, "heuristic": {}}
    for k in (None, 1, 3, 10):
        rows = []
        for n in range(2, max_dp + 1):
            model, _ = random_model(rng, n, delays=False)
            secs, plans = timed(lambda m=model, k=k: dp(m, k=k, strategy="mixed"))
            rows.append({"n": n, "seconds": secs, "plans": len(plans)})
        out["dp"]["unbounded" if k is None else f"k={k}"] = rows
    rows = []
    for n in range(2, max_heur + 1):
        model, _ = random_model(rng, n, delays=False)
        bound = float(max(1, n // 2))
        secs, plans = timed(lambda m=model, b=bound: heuristic(m, b))
        rows.append({"n": n, "seconds": secs, "plans": len(plans), "bound": bound})
    out["heuristic"]["merged"] = rows
    dp10 = out["dp"]["unbounded"][-1]
    h20 = rows[-1]
    out["targets"] = {
        f"dp_unbounded_n{dp10['n']}_seconds": dp10["seconds"],
        "dp_n10_under_10s": dp10["n"] == 10 and dp10["seconds"] < 10,
        f"heuristic_n{h20['n']}_seconds": h20["seconds"],
        "heuristic_n20_under_1s": h20["n"] == 20 and h20["seconds"] < 1,
    }
    return out


def quality(instances: int, seed: int = 2) -> dict[str, Any]:
    rng = random.Random(seed)
    ratios: dict[str, list[float]] = {"merged": [], "forward": [], "backward": [],
                                      "pull_everything": [], "frequency_order": []}
    infeasible = {"pull_everything": 0, "frequency_order": 0}
    for _ in range(instances):
        n = rng.randint(2, 8)
        model, _ = random_model(rng, n, delays=rng.random() < 0.5)
        steps = rng.randint(1, n)
        bound = steps * 1.0 + (model.negation_latency() if model.negated else 0.0)
        if rng.random() < 0.5:
            bound = steps * 1.5
        bound = max(bound, pull_everything(model).latency)  # at least one plan is feasible
        plans_all = dp(model)
        optimum = choose(plans_all if bound >= max(p.latency for p in plans_all)
                         else dp(model, bound=bound), bound)
        cheapest = choose(plans_all)  # baselines against the optimum without a bound
        for name, plans in (("merged", heuristic(model, bound)),
                            ("forward", forward(model, bound)),
                            ("backward", [p for p in backward(model)
                                          if p.latency <= bound + 1e-12])):
            ratios[name].append(choose(plans, bound).cost / optimum.cost if plans
                                else float("inf"))
        for name, base in (("pull_everything", pull_everything(model)),
                           ("frequency_order", frequency_order(model))):
            ratios[name].append(base.cost / cheapest.cost)
            infeasible[name] += base.latency > bound + 1e-12

    def summary(xs: list[float]) -> dict[str, Any]:
        finite = [x for x in xs if np.isfinite(x)]
        return {"n": len(xs), "none_feasible": len(xs) - len(finite),
                "within_1.1x": sum(x <= 1.1 + 1e-9 for x in xs) / len(xs),
                "exactly_optimal": sum(x <= 1 + 1e-9 for x in xs) / len(xs),
                "median": statistics.median(finite), "p90": float(np.quantile(finite, 0.9)),
                "max": max(finite), "mean": statistics.fmean(finite),
                "quantiles": {str(q): float(np.quantile(finite, q))
                              for q in (0.5, 0.75, 0.9, 0.95, 0.99, 1.0)}}
    return {"instances": instances, "sub_events": "2..8 (uniform), 30 % with one negation",
            "note": "heuristics: best plan within the latency bound / DP optimum within it; "
                    "baselines: their cost / the cheapest plan without a bound",
            "summary": {k: summary(v) for k, v in ratios.items()},
            "baseline_latency_infeasible": infeasible, "ratios": ratios}


def k_strategies(instances: int, seed: int = 3) -> dict[str, Any]:
    rng = random.Random(seed)
    models = []
    for _ in range(instances):
        model, _ = random_model(rng, 8, delays=True)
        bound = max(float(rng.randint(2, 6)), pull_everything(model).latency)
        models.append((model, bound, choose(dp(model, bound=bound), bound).cost))
    out: dict[str, Any] = {}
    for k in (1, 2, 3, 5):
        for strategy in KEEP_STRATEGIES:
            rs, secs = [], 0.0
            for model, bound, best in models:
                s, plans = timed(lambda m=model, b=bound, k=k, st=strategy:
                                 dp(m, k=k, strategy=st, seed=7, bound=b))
                secs += s
                ok = [p for p in plans if p.latency <= bound + 1e-12]
                rs.append(choose(ok, bound).cost / best if ok else float("inf"))
            out[f"k={k}/{strategy}"] = {
                "k": k, "strategy": strategy, "mean_seconds": secs / len(models),
                "within_1.1x": sum(r <= 1.1 + 1e-9 for r in rs) / len(rs),
                "exactly_optimal": sum(r <= 1 + 1e-9 for r in rs) / len(rs),
                "none_feasible": sum(not np.isfinite(r) for r in rs),
                "median_ratio": statistics.median(rs)}
    return {"instances": instances, "sub_events": 8, "results": out}


def plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(2, 2, figsize=(13, 9.5))
    f = result["frontier"]
    a = ax[0][0]
    a.step([p["latency"] for p in f["dp_pareto"]], [p["cost"] for p in f["dp_pareto"]],
           where="post", marker="o", label="DP pareto frontier")
    a.scatter([p["latency"] for p in f["heuristic_pareto"]],
              [p["cost"] for p in f["heuristic_pareto"]], marker="x", s=70, color="C2",
              label="heuristics (merged)", zorder=3)
    for name, m in (("pull everything", "s"), ("frequency order", "^")):
        b = f[name.replace(" ", "_")]
        a.scatter([b["latency"]], [b["cost"]], marker=m, s=80, label=name, zorder=3)
    a.set_yscale("log")
    a.set_xlabel("latency (step delays)")
    a.set_ylabel("expected rows read")
    a.set_title("cost/latency frontier: " + f["pattern"][:60], fontsize=9)
    a.legend(fontsize=8)
    a = ax[0][1]
    t = result["planning_time"]
    for name, rows in t["dp"].items():
        a.plot([r["n"] for r in rows], [r["seconds"] for r in rows], marker="o",
               label=f"DP {name}")
    rows = t["heuristic"]["merged"]
    a.plot([r["n"] for r in rows], [r["seconds"] for r in rows], marker="x", color="k",
           label="heuristics (fwd+bwd)")
    a.axhline(10, ls=":", color="C3")
    a.axhline(1, ls=":", color="grey")
    a.set_yscale("log")
    a.set_xlabel("|S| (sub-events)")
    a.set_ylabel("planning seconds")
    a.set_title("planning time", fontsize=10)
    a.legend(fontsize=8)
    a = ax[1][0]
    q = result["quality"]
    for name, label in (("merged", "heuristics merged"), ("forward", "forward"),
                        ("backward", "backward"),
                        ("frequency_order", "frequency order (no bound; 70 % over it)")):
        xs = np.sort([x for x in q["ratios"][name] if np.isfinite(x)])
        a.plot(xs, np.arange(1, len(xs) + 1) / len(q["ratios"][name]), label=label)
    a.axvline(1.1, ls=":", color="C3")
    a.axhline(0.9, ls=":", color="grey")
    a.set_xscale("log")
    a.set_xlabel("cost / DP optimum (best plan within the latency bound)")
    a.set_ylabel("share of instances (CDF)")
    a.set_title(f"plan quality, {q['instances']} random instances, |S| <= 8", fontsize=10)
    a.legend(fontsize=8)
    a = ax[1][1]
    ks = result["k_strategies"]["results"]
    labels = sorted({v["k"] for v in ks.values()})
    width = 0.2
    for i, s in enumerate(KEEP_STRATEGIES):
        vals = [ks[f"k={k}/{s}"]["exactly_optimal"] for k in labels]
        a.bar(np.arange(len(labels)) + (i - 1.5) * width, vals, width, label=s)
    a.set_xticks(np.arange(len(labels)), [f"k={k}" for k in labels])
    a.set_ylabel("share of instances where DP(k) finds the optimum")
    a.set_title("k-limited pareto tables: ways of keeping k plans (|S| = 8)", fontsize=10)
    a.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--replot", action="store_true", help="redraw the PNG from the JSON")
    args = ap.parse_args()
    if args.replot:
        plot(json.loads((RESULTS / "acquisition_planning.json").read_text()),
             RESULTS / "acquisition_planning.png")
        return
    q = args.quick
    started = time.perf_counter()
    result: dict[str, Any] = {"machine": machine(), "load_average": os.getloadavg()}
    result["frontier"] = frontier(20 if q else 200)
    result["planning_time"] = planning_time(6 if q else 10, 8 if q else 20)
    result["quality"] = quality(20 if q else 300)
    result["k_strategies"] = k_strategies(5 if q else 40)
    result["seconds"] = time.perf_counter() - started
    merged = result["quality"]["summary"]["merged"]
    pt = result["planning_time"]["targets"]
    result["verdict"] = (
        f"heuristics within 1.1x of the DP optimum on {merged['within_1.1x']:.0%} of "
        f"{result['quality']['instances']} instances (target >= 90 %); DP |S|=10 "
        f"{pt.get('dp_unbounded_n10_seconds', float('nan')):.2f} s (target < 10 s); "
        f"heuristics |S|=20 {pt.get('heuristic_n20_seconds', float('nan')):.2f} s "
        f"(target < 1 s); cheapest plan reads "
        f"{result['frontier']['cheapest_vs_pull_everything']:.0f}x fewer rows than pulling "
        f"every type")
    name = "acquisition_planning_quick" if q else "acquisition_planning"
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{name}.json").write_text(json.dumps(result, indent=1, default=str))
    plot(result, RESULTS / f"{name}.png")
    print(result["verdict"])


if __name__ == "__main__":
    main()
