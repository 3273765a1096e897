"""Seed 000, experiment 5 (in shape): TPM vs STPM partial-match spilling over MRatio.

Data: ``--entities`` objects (TIDs) each run sequences A B C D one after another, with an
idle gap between sequences; a sequence completes with probability MRatio, otherwise it
stops after A, A B or A B C (uniformly). Event gaps within a sequence are 1..``--gap``
seconds, idle gaps ``--idle`` times longer on average; all entities interleave in time.
The query is ``PATTERN (A B C D) WITHIN ...`` partitioned by entity, fed in batches of
``--batch`` rows (|WSub|) through an :class:`IncrementalMatcher` that keeps at most
``--capacity`` entities in memory (the partial-match buffer). STPM's Δt_i and p_i are
estimated from the first ``--sample`` share of the data. For each MRatio and policy:
CPU time of the feed loop (``time.process_time``, median of ``--reps``), misses, hits and
spills; the unbounded matcher is the baseline (and must give the same matches). Output:
``benchmarks/results/exp5_spilling.json`` and ``exp5_spilling.png``.

    .venv/bin/python benchmarks/exp5_spilling.py            # the real run (~2.5 min, 2 cores)
    .venv/bin/python benchmarks/exp5_spilling.py --quick    # a smoke run
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
sys.path.insert(0, str(ROOT))

from engine_throughput import machine  # noqa: E402

from cep_core.incremental.matcher import IncrementalMatcher  # noqa: E402
from cep_core.incremental.spilling import estimate_transitions  # noqa: E402

QUERY = """
SELECT * FROM readings MATCH_RECOGNIZE (
  PARTITION BY tid ORDER BY ts
  MEASURES A.ts AS a_ts, D.ts AS d_ts
  ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW
  PATTERN (A B C D) WITHIN {within}
  DEFINE A AS state = 'A', B AS state = 'B', C AS state = 'C', D AS state = 'D'
)"""


def sequences(entities: int, rows: int, mratio: float, gap: int, idle: int,
              seed: int = 5) -> pd.DataFrame:
    """About ``rows`` events: per entity, back-to-back sequences A B C D (complete with
    probability ``mratio``, else cut after 1-3 events), in time order over all entities."""
    rng = np.random.default_rng(seed)
    per_entity = max(1, rows // entities)
    tids: list[np.ndarray] = []
    times: list[np.ndarray] = []
    states: list[np.ndarray] = []
    letters = np.array(["A", "B", "C", "D"], dtype=object)
    for tid in range(entities):
        t = float(rng.uniform(0, idle * gap))
        n = 0
        ts: list[float] = []
        st: list[int] = []
        while n < per_entity:
            length = 4 if rng.random() < mratio else int(rng.integers(1, 4))
            for k in range(length):
                ts.append(t)
                st.append(k)
                t += float(rng.integers(1, gap + 1))
            n += length
            t += float(rng.exponential(idle * gap))
        tids.append(np.full(len(ts), tid))
        times.append(np.array(ts))
        states.append(letters[np.array(st)])
    df = pd.DataFrame({"tid": np.concatenate(tids), "ts": np.concatenate(times),
                       "state": np.concatenate(states)})
    return df.sort_values("ts", kind="mergesort").reset_index(drop=True)


def run(df: pd.DataFrame, query: str, batch: int, **options: Any,
        ) -> tuple[float, list[Any], dict[str, int] | None]:
    """CPU seconds of feeding ``df`` in batches and flushing, the matches, the counters."""
    with IncrementalMatcher(query, **options) as inc:
        t0 = time.process_time()
        out = [m for lo in range(0, len(df), batch) for m in inc.feed(df.iloc[lo:lo + batch])]
        out += inc.flush()
        cpu = time.process_time() - t0
        stats = inc.spill_stats
        return cpu, out, None if stats is None else stats.as_dict()


def measure(mratio: float, args: argparse.Namespace, query: str) -> dict[str, Any]:
    df = sequences(args.entities, args.rows, mratio, args.gap, args.idle)
    sample = df.iloc[:max(1, int(len(df) * args.sample))]
    transitions = estimate_transitions(sample, query)
    result: dict[str, Any] = {"mratio": mratio, "rows": len(df),
                              "transitions": transitions.to_dict()}
    base_cpu, expected, _ = run(df, query, args.batch)  # one run: reference and check
    result["matches"] = len(expected)
    result["unbounded_cpu_s"] = round(base_cpu, 4)
    for policy in ("tpm", "stpm"):
        times = []
        for _ in range(args.reps):
            cpu, got, stats = run(df, query, args.batch, capacity=args.capacity, policy=policy,
                                  transitions=transitions, spill_batch=args.spill_batch)
            times.append(cpu)
            if got != expected:
                raise AssertionError(f"{policy} at MRatio {mratio}: output differs from the "
                                     "unbounded matcher")
        assert stats is not None
        result[policy] = {"cpu_s": round(statistics.median(times), 4),
                          "times_s": [round(t, 4) for t in times], **stats}
    tpm, stpm = result["tpm"], result["stpm"]
    print(f"  MRatio {mratio:.1f}: rows {len(df):,} matches {len(expected):,} | CPU s "
          f"unbounded {result['unbounded_cpu_s']:.2f} TPM {tpm['cpu_s']:.2f} STPM "
          f"{stpm['cpu_s']:.2f} (TPM/STPM {tpm['cpu_s'] / stpm['cpu_s']:.2f}) | misses (open) "
          f"TPM {tpm['misses']:,} ({tpm['open_misses']:,}) STPM {stpm['misses']:,} "
          f"({stpm['open_misses']:,})", flush=True)
    return result


def compare(results: list[dict[str, Any]]) -> str:
    """One line: the paper's claim next to what was measured."""
    ratios = [r["tpm"]["cpu_s"] / r["stpm"]["cpu_s"] for r in results]
    # the paper's miss: an event for a partial match that is not in the buffer
    tpm = [r["tpm"]["open_misses"] for r in results]
    stpm = [r["stpm"]["open_misses"] for r in results]
    falling = tpm[-1] < tpm[0]
    flat = max(stpm) - min(stpm) <= max(1, 0.25 * max(tpm))
    lower = all(s < t for s, t in zip(stpm, tpm, strict=True))
    return (f"paper: STPM much lower CPU, STPM misses low and flat, TPM misses high and "
            f"falling with MRatio | measured: CPU TPM/STPM {min(ratios):.2f}-"
            f"{max(ratios):.2f}x, open-PM misses TPM {tpm[0]:,}->{tpm[-1]:,} "
            f"({'falling' if falling else 'rising'}), STPM {stpm[0]:,}->{stpm[-1]:,} "
            f"({'flat' if flat else 'not flat'}; "
            f"{'lower than TPM at every MRatio' if lower else 'not always lower than TPM'}, "
            f"{min(s / t for s, t in zip(stpm, tpm, strict=True) if t):.0%}-"
            f"{max(s / t for s, t in zip(stpm, tpm, strict=True) if t):.0%} of TPM)")


def plot(results: list[dict[str, Any]], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    x = [r["mratio"] for r in results]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    for policy, color in (("tpm", "tab:red"), ("stpm", "tab:green")):
        ax1.plot(x, [r[policy]["cpu_s"] for r in results], "o-", color=color,
                 label=policy.upper())
        ax2.plot(x, [r[policy]["misses"] for r in results], "o-", color=color,
                 label=f"{policy.upper()} all misses")
        ax2.plot(x, [r[policy]["open_misses"] for r in results], "s:", color=color,
                 label=f"{policy.upper()} misses of open partial matches")
    ax1.plot(x, [r["unbounded_cpu_s"] for r in results], "--", color="tab:gray",
             label="unbounded (no spilling)")
    ax1.set_xlabel("MRatio (share of started sequences that complete)")
    ax1.set_ylabel("CPU seconds (median)")
    ax1.set_ylim(bottom=0)
    ax1.legend(fontsize=8)
    ax2.set_xlabel("MRatio")
    ax2.set_ylabel("misses (spilled entity read back)")
    ax2.set_ylim(bottom=0)
    ax2.legend(fontsize=8)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--entities", type=int, default=600, help="entities (TIDs)")
    ap.add_argument("--rows", type=int, default=4800, help="about this many events")
    ap.add_argument("--capacity", type=int, default=60, help="entities kept in memory")
    ap.add_argument("--spill-batch", type=int, default=6, help="ΔR: fewest keys per spill")
    ap.add_argument("--batch", type=int, default=24, help="rows per feed (|WSub|)")
    ap.add_argument("--gap", type=int, default=10, help="largest gap in a sequence (s)")
    ap.add_argument("--idle", type=int, default=20, help="idle gap / sequence gap (mean)")
    ap.add_argument("--sample", type=float, default=0.1, help="share used for statistics")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--mratios", type=str, default="0.1,0.3,0.5,0.7,0.9")
    ap.add_argument("--quick", action="store_true", help="a smoke run (small, 1 rep)")
    ap.add_argument("--out", type=Path, default=RESULTS / "exp5_spilling.json")
    args = ap.parse_args()
    if args.quick:
        args.entities, args.rows, args.capacity, args.reps = 300, 2400, 30, 1
        args.spill_batch, args.batch, args.mratios = 3, 12, "0.1,0.5,0.9"
        if args.out == RESULTS / "exp5_spilling.json":
            args.out = Path("/tmp/exp5_spilling_quick.json")
    query = QUERY.format(within=3 * args.gap)
    mratios = [float(m) for m in args.mratios.split(",")]
    print(f"exp5: {args.entities:,} entities, ~{args.rows:,} events, buffer {args.capacity:,} "
          f"entities, ΔR {args.spill_batch}, batches of {args.batch} rows", flush=True)
    results = [measure(m, args, query) for m in mratios]
    ratios = [r["tpm"]["cpu_s"] / r["stpm"]["cpu_s"] for r in results]
    verdict = compare(results)
    print(verdict)
    parameters = {k: v for k, v in vars(args).items() if k not in ("out",)}
    report = {"machine": machine(), "query": query, "parameters": parameters,
              "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]),
              "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
              "comparison": verdict, "cpu_ratio_tpm_over_stpm": [round(r, 3) for r in ratios],
              "results": results}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2, default=str) + "\n")
    plot(results, args.out.with_suffix(".png"),
         f"Seed 000 exp. 5 shape: TPM vs STPM, buffer {args.capacity:,} of "
         f"{args.entities:,} entities, ΔR {args.spill_batch}")
    print(f"wrote {args.out} and {args.out.with_suffix('.png')}")


if __name__ == "__main__":
    main()
