"""Seed 002 (issue 6): the allocation model of ``cep_core.tuning.allocation`` against the
discrete-event simulator ``cep_core.tuning.simulator``.

Five validations, each written to ``benchmarks/results/allocation_<name>.{json,png}`` (plus
``allocation_summary.json`` with every validation's headline numbers):

1. ``satisfaction`` -- SEQ(E1, E2), λ1 = λ2 = 1000/s, ideal time-sharing with μ1 = 2000/s;
   sweep stream 2's service time 1/μ2 from 0.3 to 0.95 of its mean arrival gap 1/λ2;
   θσ(μ2) exact M/D/1 and the paper's approximation vs measured (stream 2's events, and
   the SEQ matches' terminators), td = 2 ms.
2. ``latency`` -- same sweep, mean latency E[W] + 1/μ2 (and the approximation's 1/h + 1/μ2).
3. ``disorder`` -- SEQ(A,B): μ = 3000/s, μ2 = 1100..1900, μ1 = μ - μ2; SEQ(A,B,C): μ3 = 1100
   fixed, μ2 = 1100..1800, μ1 = 4000 - μ2 - μ3; models: approximate waits with the paper's
   gap density, approximate and exact waits with the derived gap density, Theorem 2.
4. ``optimum`` -- share on time and correct, θσ(μ_n)(1 - ω), model vs measured over the
   same sweeps (td = 1 ms); argmax of each, and the model optimiser's answer.
5. ``schedulers`` -- FIFO, EDF (every stream td; and terminator-only: E1 gets 10·td),
   ideal time-sharing and round-robin time-sharing (budget per round = quota x 4 service
   times) with the quotas the model (exact) picks; two loads: symmetric λ = (1000, 1000)
   and skewed λ = (2000, 300); sweep total capacity μ.

Consumption mode "first" everywhere (the paper's experiments). Each point: median over
``--seeds`` seeds of a ``--horizon``-second run (5 % warm-up dropped).

    .venv/bin/python benchmarks/allocation_validation.py    # full, 2-10 min on 2 busy cores
    .venv/bin/python benchmarks/allocation_validation.py --quick    # < 1 min
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
sys.path.insert(0, str(ROOT))

from engine_throughput import machine  # noqa: E402

from cep_core.tuning import allocation as A  # noqa: E402
from cep_core.tuning import simulator as S  # noqa: E402

MODE = "first"
VALIDATIONS = ("satisfaction", "latency", "disorder", "optimum", "schedulers")


def median_runs(run: Callable[[int], S.SimulationResult], seeds: int,
                fields: Sequence[str]) -> dict[str, float]:
    results = [run(seed) for seed in range(seeds)]
    out: dict[str, float] = {}
    for name in fields:
        values = [_field(r, name) for r in results]
        out[name] = statistics.median(values)
        out[name + "_spread"] = (max(values) - min(values)) / 2 if len(values) > 1 else 0.0
    out["matches"] = statistics.median(r.matches for r in results)
    return out


def _field(r: S.SimulationResult, name: str) -> float:
    if "[" in name:
        base, idx = name[:-1].split("[")
        return float(getattr(r, base)[int(idx)])
    return float(getattr(r, name))


def ideal(mus: Sequence[float]) -> tuple[list[float], S.Scheduler]:
    """Service times and scheduler that give stream i exactly μ_i events/s."""
    total = float(sum(mus))
    return [1.0 / total] * len(mus), S.time_sharing([m / total for m in mus])


def errors(model: Sequence[float], measured: Sequence[float]) -> dict[str, float]:
    d = np.abs(np.asarray(model) - np.asarray(measured))
    return {"max_abs": float(d.max()), "mean_abs": float(d.mean())}


# --------------------------------------------------------------------------- 1 + 2

def v_satisfaction_latency(cfg: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    lam1, lam2, mu1, td = 1000.0, 1000.0, 2000.0, 2e-3
    fractions = cfg["fractions"]
    pts: list[dict[str, Any]] = []
    for frac in fractions:
        mu2 = lam2 / frac  # service time 1/μ2 = frac · 1/λ2
        service, sched = ideal([mu1, mu2])
        m = median_runs(lambda s, sv=service, sc=sched: S.simulate(
            [lam1, lam2], sv, sc, td, cfg["horizon"], s, MODE), cfg["seeds"],
            ["stream_satisfaction[1]", "satisfaction", "stream_mean_latency[1]"])
        pts.append({"service_over_gap": frac, "mu2": mu2,
                    "model_exact": A.satisfaction(mu2, lam2, td, "exact"),
                    "model_approx": A.satisfaction(mu2, lam2, td, "approx"),
                    "measured_stream": m["stream_satisfaction[1]"],
                    "measured_stream_spread": m["stream_satisfaction[1]_spread"],
                    "measured_seq": m["satisfaction"],
                    "latency_exact": A.mean_latency(lam2, mu2),
                    "latency_approx": 1.0 / A.approx_rate(lam2, mu2) + 1.0 / mu2,
                    "latency_measured": m["stream_mean_latency[1]"],
                    "latency_measured_spread": m["stream_mean_latency[1]_spread"]})
    meas = [p["measured_stream"] for p in pts]
    sat = {"params": {"lam1": lam1, "lam2": lam2, "mu1": mu1, "td": td, "mode": MODE},
           "points": pts,
           "error_exact": errors([p["model_exact"] for p in pts], meas),
           "error_approx": errors([p["model_approx"] for p in pts], meas),
           "error_exact_vs_seq_terminators": errors([p["model_exact"] for p in pts],
                                                    [p["measured_seq"] for p in pts]),
           "approx_worst_at": max(pts, key=lambda p: abs(p["model_approx"]
                                                         - p["measured_stream"]))[
               "service_over_gap"]}
    lat_meas = [p["latency_measured"] for p in pts]
    rel = [abs(p["latency_exact"] / p["latency_measured"] - 1) for p in pts]
    rel_a = [abs(p["latency_approx"] / p["latency_measured"] - 1) for p in pts]
    lat = {"params": sat["params"], "points": pts,
           "error_exact_s": errors([p["latency_exact"] for p in pts], lat_meas),
           "error_approx_s": errors([p["latency_approx"] for p in pts], lat_meas),
           "rel_error_exact_max": max(rel), "rel_error_approx_max": max(rel_a)}
    return sat, lat


def plot_satisfaction(sat: dict[str, Any], lat: dict[str, Any], out: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    pts = sat["points"]
    x = [p["service_over_gap"] for p in pts]
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(x, [p["model_exact"] for p in pts], "-", label="model, exact M/D/1")
    ax.plot(x, [p["model_approx"] for p in pts], "--", label="model, paper's approximation")
    ax.errorbar(x, [p["measured_stream"] for p in pts],
                yerr=[p["measured_stream_spread"] for p in pts], fmt="o",
                label="measured, stream E2")
    ax.plot(x, [p["measured_seq"] for p in pts], "x", label="measured, SEQ terminators")
    ax.set_xlabel("service time of E2 / mean arrival gap of E2 (= ρ2)")
    ax.set_ylabel(f"deadline satisfaction (td = {sat['params']['td'] * 1e3:g} ms)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "allocation_satisfaction.png", dpi=110)
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(x, [p["latency_exact"] * 1e3 for p in pts], "-", label="E[W] + 1/μ2 (exact)")
    ax.plot(x, [p["latency_approx"] * 1e3 for p in pts], "--", label="1/h + 1/μ2 (approx.)")
    ax.errorbar(x, [p["latency_measured"] * 1e3 for p in pts],
                yerr=[p["latency_measured_spread"] * 1e3 for p in pts], fmt="o",
                label="measured")
    ax.set_yscale("log")
    ax.set_xlabel("service time of E2 / mean arrival gap of E2 (= ρ2)")
    ax.set_ylabel("mean latency of E2 [ms]")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "allocation_latency.png", dpi=110)
    plt.close(fig)


# --------------------------------------------------------------------------- 3 + 4

def _seq2_models(mu2: float, mu: float, lams: Sequence[float], td: float) -> dict[str, float]:
    lam1, lam2 = lams
    mu1 = mu - mu2
    g_paper = A.gap_rate(MODE, lam1, lam2, "paper")
    g_der = A.gap_rate(MODE, lam1, lam2, "derived")
    w = {"approx_paper_gap": A.avg_pair_disorder(lam1, mu1, lam2, mu2, g_paper, "approx"),
         "approx_derived_gap": A.avg_pair_disorder(lam1, mu1, lam2, mu2, g_der, "approx"),
         "exact_derived_gap": A.avg_pair_disorder(lam1, mu1, lam2, mu2, g_der, "exact")}
    out = {"omega_" + k: v for k, v in w.items()}
    for model, key in (("exact", "exact_derived_gap"), ("approx", "approx_paper_gap")):
        theta = A.satisfaction(mu2, lam2, td, model) if td > 1 / mu2 else 0.0  # type: ignore[arg-type]
        out["theta_" + model] = theta
        out["objective_" + model] = theta * (1 - w[key])
    return out


def _seq3_models(mu2: float, mu: float, mu3: float, lams: Sequence[float],
                 td: float) -> dict[str, float]:
    mus = [mu - mu2 - mu3, mu2, mu3]
    out: dict[str, float] = {}
    for src in ("paper", "derived"):
        gaps = A.chain_gap_rates(lams, MODE, src)
        for model in ("approx", "exact"):
            out[f"omega_t1_{model}_{src}_gap"] = A.chain_disorder(lams, mus, gaps, model)  # type: ignore[arg-type]
            out[f"omega_t2_{model}_{src}_gap"] = A.theorem2_disorder(lams, mus, gaps, model)  # type: ignore[arg-type]
    for model in ("exact", "approx"):
        theta = A.satisfaction(mu3, lams[2], td, model)  # type: ignore[arg-type]
        key = "exact_derived_gap" if model == "exact" else "approx_paper_gap"
        out["objective_" + model] = theta * (1 - out[f"omega_t1_{key}"])
    return out


def v_disorder_optimum(cfg: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    lams2 = [1000.0, 1000.0]
    mu_2s, td = 3000.0, 1e-3
    seq2 = []
    for mu2 in cfg["mu2_seq2"]:
        service, sched = ideal([mu_2s - mu2, mu2])
        m = median_runs(lambda s, sv=service, sc=sched: S.simulate(
            lams2, sv, sc, td, cfg["horizon"], s, MODE), cfg["seeds"],
            ["disorder", "on_time_and_correct", "satisfaction"])
        seq2.append({"mu2": mu2, "mu1": mu_2s - mu2, **_seq2_models(mu2, mu_2s, lams2, td),
                     "omega_measured": m["disorder"], "omega_measured_spread":
                     m["disorder_spread"], "objective_measured": m["on_time_and_correct"],
                     "objective_measured_spread": m["on_time_and_correct_spread"],
                     "seq_satisfaction_measured": m["satisfaction"]})
    lams3 = [1000.0, 1000.0, 1000.0]
    mu_3s, mu3 = 4000.0, 1100.0
    seq3 = []
    for mu2 in cfg["mu2_seq3"]:
        service, sched = ideal([mu_3s - mu2 - mu3, mu2, mu3])
        m = median_runs(lambda s, sv=service, sc=sched: S.simulate(
            lams3, sv, sc, td, cfg["horizon"], s, MODE), cfg["seeds"],
            ["disorder", "on_time_and_correct"])
        seq3.append({"mu2": mu2, "mu1": mu_3s - mu2 - mu3, "mu3": mu3,
                     **_seq3_models(mu2, mu_3s, mu3, lams3, td),
                     "omega_measured": m["disorder"],
                     "omega_measured_spread": m["disorder_spread"],
                     "objective_measured": m["on_time_and_correct"],
                     "objective_measured_spread": m["on_time_and_correct_spread"]})
    meas2 = [p["omega_measured"] for p in seq2]
    meas3 = [p["omega_measured"] for p in seq3]
    k2 = ("approx_paper_gap", "approx_derived_gap", "exact_derived_gap")
    k3 = [k[6:] for k in seq3[0] if k.startswith("omega_t")]
    disorder = {
        "params": {"mode": MODE, "seq2": {"lambdas": lams2, "mu": mu_2s},
                   "seq3": {"lambdas": lams3, "mu": mu_3s, "mu3": mu3}},
        "seq2": seq2, "seq3": seq3,
        "seq2_errors": {k: errors([p["omega_" + k] for p in seq2], meas2) for k in k2},
        "seq3_errors": {k: errors([p["omega_" + k] for p in seq3], meas3) for k in k3},
        "seq3_argmin_measured": min(seq3, key=lambda p: p["omega_measured"])["mu2"],
        "seq3_argmin_model": {k: min(seq3, key=lambda p, k=k: p["omega_" + k])["mu2"]
                              for k in k3}}

    def argmax(points: list[dict[str, Any]], key: str) -> float:
        return float(max(points, key=lambda p: p[key])["mu2"])

    opt2 = {m: A.optimise_two_streams(mu_2s, *lams2, td, MODE, 1.0, m,  # type: ignore[arg-type]
                                      "derived" if m == "exact" else "paper")
            for m in ("exact", "approx")}
    optimum = {
        "params": {"td": td, **disorder["params"]},
        "seq2": [{k: p[k] for k in p if k.startswith(("mu", "objective", "theta"))}
                 for p in seq2],
        "seq3": [{k: p[k] for k in p if k.startswith(("mu", "objective"))} for p in seq3],
        "seq2_argmax": {"measured": argmax(seq2, "objective_measured"),
                        "model_exact": argmax(seq2, "objective_exact"),
                        "model_approx": argmax(seq2, "objective_approx"),
                        "optimiser_exact": opt2["exact"].mu2,
                        "optimiser_approx": opt2["approx"].mu2,
                        "step_search_exact": opt2["exact"].step.x,
                        "step_search_steps": opt2["exact"].step.steps},
        "seq3_argmax": {"measured": argmax(seq3, "objective_measured"),
                        "model_exact": argmax(seq3, "objective_exact"),
                        "model_approx": argmax(seq3, "objective_approx")},
        "seq2_objective_error": {m: errors([p["objective_" + m] for p in seq2],
                                           [p["objective_measured"] for p in seq2])
                                 for m in ("exact", "approx")},
        "table1": A.table1() if cfg.get("table1", True) else []}
    return disorder, optimum


def plot_disorder(dis: dict[str, Any], opt: dict[str, Any], out: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for ax, key, models, title in (
            (axes[0], "seq2", ("approx_paper_gap", "approx_derived_gap", "exact_derived_gap"),
             "SEQ(A,B), μ1 = 3000 - μ2"),
            (axes[1], "seq3", ("t1_approx_paper_gap", "t2_approx_paper_gap",
                               "t1_exact_derived_gap", "t2_exact_derived_gap"),
             "SEQ(A,B,C), μ3 = 1100, μ1 = 2900 - μ2")):
        pts = dis[key]
        x = [p["mu2"] for p in pts]
        for m in models:
            ax.plot(x, [p["omega_" + m] for p in pts], "-", label="model " + m)
        ax.errorbar(x, [p["omega_measured"] for p in pts],
                    yerr=[p["omega_measured_spread"] for p in pts], fmt="ko", label="measured")
        ax.set_title(title)
        ax.set_xlabel("μ2 [events/s]")
        ax.set_ylabel("disorder ω")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "allocation_disorder.png", dpi=110)
    plt.close(fig)
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for ax, key, title in ((axes[0], "seq2", "SEQ(A,B)"), (axes[1], "seq3", "SEQ(A,B,C)")):
        pts = opt[key]
        x = [p["mu2"] for p in pts]
        ax.plot(x, [p["objective_exact"] for p in pts], "-", label="model, exact")
        ax.plot(x, [p["objective_approx"] for p in pts], "--", label="model, paper approx.")
        ax.errorbar(x, [p["objective_measured"] for p in pts],
                    yerr=[p["objective_measured_spread"] for p in pts], fmt="ko",
                    label="measured")
        ax.set_title(title + " — on time and correct")
        ax.set_xlabel("μ2 [events/s]")
        ax.set_ylabel("θσ(μn)·(1 - ω)")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "allocation_optimum.png", dpi=110)
    plt.close(fig)


# --------------------------------------------------------------------------- 5

def v_schedulers(cfg: dict[str, Any]) -> dict[str, Any]:
    td = 1e-3
    cases = []
    for name, lams in (("symmetric", [1000.0, 1000.0]), ("skewed", [2000.0, 300.0])):
        pts = []
        for mu in cfg["mu_" + name]:
            service = [1.0 / mu, 1.0 / mu]
            opt = A.optimise_two_streams(mu, *lams, td, MODE, 1.0, "exact")
            quotas = [opt.mu1 / mu, opt.mu2 / mu]
            scheds = {"fifo": S.fifo(), "edf": S.edf(),
                      "edf_terminator": S.edf([10 * td, td]),
                      "ts_ideal": S.time_sharing(quotas),
                      "ts_round_robin": S.time_sharing(quotas, cycle=4.0 / mu)}
            row: dict[str, Any] = {"mu": mu, "quotas": quotas, "model_value": opt.value}
            for sname, sched in scheds.items():
                m = median_runs(lambda s, sc=sched, lm=lams, sv=service: S.simulate(
                    lm, sv, sc, td, cfg["horizon"], s, MODE), cfg["seeds"],
                    ["on_time_and_correct", "satisfaction", "disorder"])
                row[sname] = {k: m[k] for k in ("on_time_and_correct", "satisfaction",
                                                "disorder", "on_time_and_correct_spread")}
            best_ts = max(row["ts_ideal"]["on_time_and_correct"],
                          row["ts_round_robin"]["on_time_and_correct"])
            row["gain_rr_over_fifo"] = (row["ts_round_robin"]["on_time_and_correct"]
                                        - row["fifo"]["on_time_and_correct"])
            row["gain_rr_over_edf"] = (row["ts_round_robin"]["on_time_and_correct"]
                                       - max(row["edf"]["on_time_and_correct"],
                                             row["edf_terminator"]["on_time_and_correct"]))
            row["gain_ideal_over_fifo"] = (row["ts_ideal"]["on_time_and_correct"]
                                           - row["fifo"]["on_time_and_correct"])
            row["gain_best_ts_over_fifo"] = best_ts - row["fifo"]["on_time_and_correct"]
            pts.append(row)
        cases.append({"case": name, "lambdas": lams, "points": pts})
    summary = {c["case"]: {k: [p[k] for p in c["points"]] for k in
                           ("mu", "gain_rr_over_fifo", "gain_rr_over_edf",
                            "gain_ideal_over_fifo")} for c in cases}
    return {"params": {"td": td, "mode": MODE, "rr_cycle": "4 / μ",
                       "edf_terminator": "E1 deadline 10·td, E2 td"},
            "cases": cases, "gains": summary}


def plot_schedulers(res: dict[str, Any], out: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, len(res["cases"]), figsize=(11, 4))
    for ax, case in zip(np.atleast_1d(axes), res["cases"], strict=True):
        x = [p["mu"] for p in case["points"]]
        for s, style in (("fifo", "o-"), ("edf", "x--"), ("edf_terminator", "^-"),
                         ("ts_ideal", "s:"), ("ts_round_robin", "d-")):
            ax.plot(x, [p[s]["on_time_and_correct"] for p in case["points"]], style, label=s)
        ax.plot(x, [p["model_value"] for p in case["points"]], "k--", lw=0.8,
                label="model (ideal TS)")
        ax.set_title(f"{case['case']}: λ = {case['lambdas']}")
        ax.set_xlabel("total capacity μ [events/s]")
        ax.set_ylabel("share on time and correct")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "allocation_schedulers.png", dpi=110)
    plt.close(fig)


# --------------------------------------------------------------------------- main

def config(quick: bool, tiny: bool) -> dict[str, Any]:
    if tiny:
        return {"seeds": 1, "horizon": 2.0, "fractions": [0.5, 0.9],
                "mu2_seq2": [1300.0, 1700.0], "mu2_seq3": [1200.0, 1600.0],
                "mu_symmetric": [3000.0], "mu_skewed": [3500.0], "table1": False}
    if quick:
        return {"seeds": 2, "horizon": 8.0, "fractions": [0.3, 0.5, 0.7, 0.8, 0.9, 0.95],
                "mu2_seq2": [1100.0, 1300.0, 1500.0, 1700.0, 1900.0],
                "mu2_seq3": [1100.0, 1300.0, 1500.0, 1700.0],
                "mu_symmetric": [2600.0, 3000.0, 4000.0], "mu_skewed": [3500.0, 4500.0]}
    return {"seeds": 5, "horizon": 60.0,
            "fractions": [0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95],
            "mu2_seq2": [1100.0 + 50 * i for i in range(17)],
            "mu2_seq3": [1100.0 + 50 * i for i in range(15)],
            "mu_symmetric": [2400.0, 2600.0, 3000.0, 3500.0, 4000.0, 5000.0],
            "mu_skewed": [3200.0, 3500.0, 4000.0, 4500.0, 5000.0, 6000.0]}


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="small sweep, < 1 min")
    p.add_argument("--tiny", action="store_true", help="smoke-test sizes (a few seconds)")
    p.add_argument("--out", type=Path, default=RESULTS)
    p.add_argument("--no-plots", action="store_true")
    args = p.parse_args(argv)
    cfg = config(args.quick, args.tiny)
    args.out.mkdir(parents=True, exist_ok=True)
    info = {"machine": machine(), "config": cfg, "quick": args.quick or args.tiny}
    t0 = time.perf_counter()
    sat, lat = v_satisfaction_latency(cfg)
    dis, opt = v_disorder_optimum(cfg)
    sch = v_schedulers(cfg)
    results = {"satisfaction": sat, "latency": lat, "disorder": dis, "optimum": opt,
               "schedulers": sch}
    for name, body in results.items():
        (args.out / f"allocation_{name}.json").write_text(
            json.dumps({**info, "validation": name, **body}, indent=1))
    if not args.no_plots:
        plot_satisfaction(sat, lat, args.out)
        plot_disorder(dis, opt, args.out)
        plot_schedulers(sch, args.out)
    summary = {**info, "seconds": round(time.perf_counter() - t0, 1),
               "satisfaction": {k: sat[k] for k in ("error_exact", "error_approx",
                                                    "error_exact_vs_seq_terminators",
                                                    "approx_worst_at")},
               "latency": {k: lat[k] for k in ("rel_error_exact_max", "rel_error_approx_max")},
               "disorder": {k: dis[k] for k in ("seq2_errors", "seq3_errors",
                                                "seq3_argmin_measured", "seq3_argmin_model")},
               "optimum": {k: opt[k] for k in ("seq2_argmax", "seq3_argmax",
                                               "seq2_objective_error", "table1")},
               "schedulers": sch["gains"]}
    (args.out / "allocation_summary.json").write_text(json.dumps(summary, indent=1))
    print(json.dumps({k: summary[k] for k in VALIDATIONS + ("seconds",)}, indent=1))
    return summary


if __name__ == "__main__":
    main()
