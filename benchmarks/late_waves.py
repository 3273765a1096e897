"""Gold = truth when files land in waves (late events across runs), run by run.

The scenario of issue 15: ``lakecep generate --events N --seed S --lines-per-file L``
writes the landing files; they are moved into the landing folder in ``--waves`` waves
(file order, or shuffled with ``--shuffle``), ``lakecep run all`` runs after each wave,
and ``lakecep status --json`` after the last one (and, with ``--check-every-wave``,
after each) compares the current gold answer with the generator's truth. Before
superseded rows existed the last status failed (rfid_abc: one unexpected match that a
later wave's late read invalidated).

Writes ``benchmarks/results/late_waves.json`` (checks, gold counts, superseded rows and
seconds per wave) and a plot of seconds per wave. Example (about 5 min a wave on 2 cores)::

    .venv/bin/python benchmarks/late_waves.py --events 30000 --seed 7 --waves 5
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LAKECEP = [sys.executable, "-m", "lakecep.jobs.cli"]


def lakecep(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "LAKECEP_HOME": str(home)}
    return subprocess.run([*LAKECEP, *args], env=env, capture_output=True, text=True,
                          check=False)


def superseded(home: Path) -> dict[str, int]:
    from lakecep.lake_sql import read_delta

    gold = read_delta(home / "lake" / "gold" / "complex_events",
                      ["query_id", "superseded_version"]).to_pandas()
    old = gold[gold["superseded_version"].notna()]
    return {str(k): int(v) for k, v in old.groupby("query_id").size().items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=30_000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--lines-per-file", type=int, default=1000)
    parser.add_argument("--waves", type=int, default=5)
    parser.add_argument("--shuffle", action="store_true", help="land files in random order")
    parser.add_argument("--check-every-wave", action="store_true")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    args = parser.parse_args()

    home = Path(tempfile.mkdtemp(prefix="lakecep-waves-"))
    done = lakecep(home, "generate", "--events", str(args.events), "--seed", str(args.seed),
                   "--lines-per-file", str(args.lines_per_file))
    if done.returncode:
        sys.exit(f"generate failed: {done.stderr.strip()}")
    landing = home / "landing" / "events"
    staging = home / "staging"
    shutil.move(str(landing), staging)
    landing.mkdir()
    files = sorted(p for p in staging.iterdir() if p.is_file())
    if args.shuffle:
        random.Random(args.seed).shuffle(files)
    per_wave = -(-len(files) // args.waves)
    waves = []
    for n in range(args.waves):
        batch = files[n * per_wave:(n + 1) * per_wave]
        for f in batch:
            shutil.move(str(f), landing / f.name)
        started = time.perf_counter()
        run = lakecep(home, "run", "all")
        seconds = time.perf_counter() - started
        if run.returncode:
            sys.exit(f"wave {n + 1}: run all failed: {run.stderr.strip()[-2000:]}")
        wave = {"wave": n + 1, "files": [f.name for f in batch], "run_all_s": round(seconds, 1)}
        if args.check_every_wave or n == args.waves - 1:
            status = json.loads(lakecep(home, "status", "--json").stdout)
            wave["ok"] = status["ok"]
            wave["checks"] = status["checks"]
            wave["counts"] = status["counts"]
        wave["superseded"] = superseded(home)
        print(f"wave {n + 1}: {len(batch)} files, run all {seconds:.0f} s, "
              f"superseded {wave['superseded']}, ok {wave.get('ok', '-')}", flush=True)
        waves.append(wave)

    result = {
        "scenario": {"events": args.events, "seed": args.seed, "waves": args.waves,
                     "lines_per_file": args.lines_per_file,
                     "shuffle": args.shuffle, "files": len(files)},
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "platform": platform.platform()},
        "ok": waves[-1]["ok"],
        "waves": waves,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "late_waves.json").write_text(json.dumps(result, indent=1) + "\n")

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.2))
    ax.bar([w["wave"] for w in waves], [w["run_all_s"] for w in waves], color="#4c72b0")
    ax.set_xlabel("wave")
    ax.set_ylabel("lakecep run all (s)")
    ax.set_title(f"{len(files)} files in {args.waves} waves: final status "
                 f"{'PASS' if result['ok'] else 'FAIL'}")
    fig.tight_layout()
    fig.savefig(args.out / "late_waves.png", dpi=110)
    shutil.rmtree(home, ignore_errors=True)
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
