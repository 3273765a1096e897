"""Seed 004: incremental window aggregates vs full recomputation at every sample.

The paper (ZX-CEP): a 5 min window sampled every 1 s costs 1/300 of recomputing the
window at each sample when the aggregate is maintained from delta events. We run
:class:`cep_core.windows.Sampler` (size 5 min, period 1 s) on generated sensor streams
(``--keys`` sensors, 1 and 10 events/s per sensor, random readings, optionally a share of
late events up to 30 s behind the watermark and of NULL readings) and, at every sample
after the warm-up (the first window), recompute every key's window from scratch with the
same aggregate classes (one ``insert`` per value, ``ops`` counted the same way) and with
numpy (time only). Every sample's incremental values are checked against the
recomputation (to 1e-9).

Cost: ``ops`` = elementary aggregate updates (an insert, a delete, a monotone-deque pop, a
heap push or pop; docs/windows.md) per sample, summed over the keys; time = wall-clock
seconds (``perf_counter``) per sample of (incremental) applying that second's delta
events plus sampling, (recompute) rebuilding the aggregates of every key's window.
Medians over the samples; the ratio is incremental / recomputation.
Output: ``benchmarks/results/window_aggregates.{json,png}``.

    .venv/bin/python benchmarks/window_aggregates.py            # the real run (~9 min)
    .venv/bin/python benchmarks/window_aggregates.py --quick    # a smoke run
"""

from __future__ import annotations

import argparse
import bisect
import json
import math
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

from cep_core.windows import AGGREGATES, Event, Insert, Sampler  # noqa: E402

NS = 1_000_000_000
ALL = ("count", "sum", "avg", "var", "min", "max")


def run(rate: int, aggregates: tuple[str, ...], *, keys: int, window_s: int, seconds: int,
        late_share: float, null_share: float, seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    sampler = Sampler(window_s * NS, NS, aggregates)
    held: dict[str, list[tuple[int, int, float | None]]] = {f"s{k}": [] for k in range(keys)}
    seq = 0
    inc_ops: list[int] = []
    rec_ops: list[int] = []
    inc_s: list[float] = []
    rec_s: list[float] = []
    np_s: list[float] = []
    agree = True
    late = 0
    for second in range(seconds):
        batch: list[Event] = []
        for key in held:
            for _ in range(rate):
                seq += 1
                t = second * NS + rng.randrange(NS)
                if second > 30 and rng.random() < late_share:
                    t -= rng.randrange(1, 30) * NS
                    late += 1
                v = None if rng.random() < null_share else round(rng.gauss(20.0, 5.0), 3)
                batch.append(Event(key, t, seq, v))
        ops0 = sampler.ops
        t0 = time.perf_counter()
        for e in batch:
            sampler.apply(Insert(e))
        rows = sampler.advance((second + 1) * NS)
        t1 = time.perf_counter()
        for e in batch:
            bisect.insort(held[str(e.key)], (e.time, e.seq, e.value))
        if second < window_s:      # warm-up: the first window fills
            continue
        inc_ops.append(sampler.ops - ops0)
        inc_s.append(t1 - t0)
        sample_t = (second + 1) * NS
        got = {(str(r.key), r.aggregate): r.value for r in rows}
        ops = 0
        t2 = time.perf_counter()
        recomputed: dict[tuple[str, str], float | None] = {}
        for key, evs in held.items():
            lo = bisect.bisect_left(evs, (sample_t - window_s * NS,))
            hi = bisect.bisect_left(evs, (sample_t,))
            window = [v for _, _, v in evs[lo:hi]]
            for name in aggregates:
                agg = AGGREGATES[name]()
                for v in window:
                    agg.insert(v)
                recomputed[(key, name)] = agg.value()
                ops += agg.ops
        t3 = time.perf_counter()
        rec_ops.append(ops)
        rec_s.append(t3 - t2)
        # numpy baseline (time only): float64 arrays per key, NULLs as NaN
        arrays = {key: np.array([math.nan if v is None else v for _, _, v in evs[
            bisect.bisect_left(evs, (sample_t - window_s * NS,)):
            bisect.bisect_left(evs, (sample_t,))]]) for key, evs in held.items()}
        t4 = time.perf_counter()
        for a in arrays.values():
            for name in aggregates:
                {"count": lambda x: np.count_nonzero(~np.isnan(x)), "sum": np.nansum,
                 "avg": np.nanmean, "var": lambda x: np.nanvar(x, ddof=1),
                 "min": np.nanmin, "max": np.nanmax}[name](a)
        np_s.append(time.perf_counter() - t4)
        for k, want in recomputed.items():
            have = got.get(k)
            if (have is None) != (want is None) or (
                    have is not None and want is not None
                    and not math.isclose(have, want, rel_tol=1e-9, abs_tol=1e-9)):
                agree = False
        # trim the reference to what later windows can see
        for evs in held.values():
            del evs[:bisect.bisect_left(evs, (sample_t - window_s * NS,))]
    med_inc, med_rec = statistics.median(inc_ops), statistics.median(rec_ops)
    return {
        "rate_per_key": rate, "aggregates": list(aggregates), "keys": keys,
        "window_s": window_s, "period_s": 1, "samples": len(inc_ops),
        "late_share": late_share, "late_events": late, "null_share": null_share,
        "events_per_window_per_key": rate * window_s,
        "ops_per_sample": {"incremental_median": med_inc, "recompute_median": med_rec,
                           "incremental_mean": statistics.fmean(inc_ops),
                           "recompute_mean": statistics.fmean(rec_ops)},
        "ops_ratio_median": med_inc / med_rec,
        "ops_ratio_total": sum(inc_ops) / sum(rec_ops),
        "seconds_per_sample": {"incremental_median": statistics.median(inc_s),
                               "recompute_median": statistics.median(rec_s),
                               "numpy_recompute_median": statistics.median(np_s)},
        "time_ratio_median": statistics.median(inc_s) / statistics.median(rec_s),
        "time_ratio_vs_numpy_median": statistics.median(inc_s) / statistics.median(np_s),
        "sampler_rebuilds": sampler.rebuilds,
        "agree": agree,
    }


def plot(results: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [f"{r['rate_per_key']} ev/s, "
              f"{'+'.join(r['aggregates']) if len(r['aggregates']) < 6 else 'all 6'}"
              + (f"\n{r['late_share']:.0%} late, {r['null_share']:.0%} NULL" if r["late_share"]
                 else "") for r in results]
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.8))
    x = np.arange(len(results))
    for ax, metric, title in ((axes[0], "ops_ratio_median", "operations: incremental / recompute"),
                              (axes[1], "time_ratio_median", "time: incremental / recompute")):
        vals = [r[metric] for r in results]
        ax.bar(x, vals, color="tab:blue")
        ax.axhline(1 / 100, color="tab:red", ls="--", label="target 1/100")
        ax.axhline(1 / 300, color="tab:green", ls=":", label="paper 1/300")
        ax.set_yscale("log")
        ax.set_xticks(x, labels, rotation=30, ha="right", fontsize=8)
        ax.set_title(title + " per sample (median)")
        for xi, v in zip(x, vals, strict=True):
            ax.annotate(f"1/{1 / v:.0f}", (xi, v), ha="center", va="bottom", fontsize=8)
        ax.legend(fontsize=8)
    fig.suptitle("5 min window sampled every 1 s (cep_core.windows.Sampler)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--keys", type=int, default=4)
    ap.add_argument("--seconds", type=int, default=900)
    ap.add_argument("--window", type=int, default=300)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", type=Path, default=RESULTS / "window_aggregates.json")
    args = ap.parse_args()
    if args.quick:
        args.seconds, args.window, args.keys = 90, 30, 2
    configs = [(1, ("avg",), 0.0, 0.0), (1, ALL, 0.0, 0.0), (10, ("avg",), 0.0, 0.0),
               (10, ALL, 0.0, 0.0), (10, ALL, 0.01, 0.02)]
    results = []
    started = time.time()
    for i, (rate, aggs, late, nulls) in enumerate(configs):
        r = run(rate, aggs, keys=args.keys, window_s=args.window, seconds=args.seconds,
                late_share=late, null_share=nulls, seed=i)
        results.append(r)
        print(f"{rate:>3} ev/s {'+'.join(aggs):<28} late {late:.0%}: ops 1/"
              f"{1 / r['ops_ratio_median']:.0f}  time 1/{1 / r['time_ratio_median']:.0f} "
              f"(vs numpy 1/{1 / r['time_ratio_vs_numpy_median']:.1f})  agree={r['agree']}",
              flush=True)
    report = {"machine": machine(), "elapsed_s": round(time.time() - started, 1),
              "args": {k: str(v) for k, v in vars(args).items()}, "results": results,
              "target_ops_ratio": 1 / 100, "paper_ops_ratio": 1 / 300}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    plot(results, args.out.with_suffix(".png"))
    print(f"wrote {args.out} and {args.out.with_suffix('.png')}")


if __name__ == "__main__":
    main()
