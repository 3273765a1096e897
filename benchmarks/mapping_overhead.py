"""Bring your own events: the cost of a source's mapping + operators against a plain copy.

Issue 14 asks for the overhead of mapping a user's records onto the event contract
(``lakecep.sources``) against a plain copy of the same lines. We time, in one Python
process (one core), the code bronze and silver run per record -- nothing else:

- ``plain copy``: parse each record and nothing more (JSON lines: ``json.loads`` of each
  line; CSV: Python's ``csv.reader`` over the text) -- what any copy must do;
- ``records`` (bronze): :func:`lakecep.sources.file_records`, cutting the landed file into
  records with their status (CSV: each record becomes a JSON object of strings);
- ``mapping`` (silver): :func:`lakecep.sources.map_frame` over the records -- JSON parse,
  field types, mapping expressions (cep_core), contract checks, typed attributes;
- ``mapping + operators``: the same with two preprocessing operators (``fill`` a default
  merchant, ``filter`` an amount range; neither drops a record here);
- ``mapping + all operators``: those two plus the sequential ones, which run over the
  records in order with state (:func:`lakecep.operators.run_operators`, state saved as
  JSON at the end): ``fill_forward`` the merchant per card and ``merge`` a card's
  transactions within one second (summing amounts; card data rarely has any) -- every operator but
  ``split``, which needs an array the card records do not have;
- ``split`` (JSON lines only, its own data): the same records with the amount as a
  one-element array (``"amounts": [612.5]``), mapped with ``split`` ``into = "amount"``,
  against a plain copy of those lines;
- ``mapping, fast paths off``: the mapping as it was before its fast paths (every time
  through ``strptime``, ``_raw_hash`` computed for every record), same process and load:
  what the fast paths gained (their outputs are compared record by record first).

Data: :func:`lakecep.cards.transactions` (the card example's shape ``txn_id, card,
merchant, amount, ts``; ``ts`` local New York time parsed by a strptime format) with the
shipped sources ``queries/examples/cards/sources/cards_{jsonl,csv}.toml``. Every record must
map (the script stops otherwise). Time: ``perf_counter`` seconds, the median of ``--runs``
runs (each stage timed alone, stages interleaved within a run); rows/s = records / median.
Overhead = (records + mapping) / plain copy. Spark's own costs (scheduling, Arrow, Delta
writes) are the same for both and are not included (see pipeline_throughput.py for those).
Output: ``benchmarks/results/mapping_overhead.{json,png}`` with the machine and its load
average (the machine may be shared).

    .venv/bin/python benchmarks/mapping_overhead.py              # 200k records, 5 runs
    .venv/bin/python benchmarks/mapping_overhead.py --quick      # a smoke run
    .venv/bin/python benchmarks/mapping_overhead.py --profile    # also cProfile the mapping
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
sys.path.insert(0, str(ROOT))

from engine_throughput import machine  # noqa: E402

from lakecep.cards import transactions  # noqa: E402
from lakecep.operators import run_operators  # noqa: E402
from lakecep.queries import QUERIES_DIR  # noqa: E402
from lakecep.sources import (  # noqa: E402
    _MAPPINGS,
    Source,
    file_records,
    load_source,
    map_frame,
    mapping_of,
    time_parser,
)

SOURCES = QUERIES_DIR / "examples" / "cards" / "sources"
OPERATORS = """
[[operators]]
op = "fill"
field = "merchant"
value = "COALESCE(merchant, 'unknown')"
[[operators]]
op = "filter"
where = "amount >= 0 AND amount < 100000"
"""
SEQUENTIAL = """
[[operators]]
op = "fill_forward"
fields = ["merchant"]
[[operators]]
op = "merge"
within = 1
combine = { amount = "sum" }
"""
SPLIT = """
[[operators]]
op = "split"
field = "amounts"
into = "amount"
"""
MAX_LINE = 65536


def landed(frame: Any, fmt: str) -> bytes:
    """The bytes write_landing would land for ``frame`` in one file of ``fmt``."""
    if fmt == "jsonl":
        return "".join(json.dumps(r) + "\n" for r in frame.to_dict(orient="records")).encode()
    text = frame.assign(amount=frame["amount"].map(lambda a: f"{a:.2f}"))
    return text.to_csv(index=False).encode()


def plain_copy(fmt: str) -> Callable[[bytes], int]:
    if fmt == "jsonl":
        def copy(data: bytes) -> int:
            return len([json.loads(line) for line in data.decode().splitlines() if line])
    else:
        def copy(data: bytes) -> int:
            reader = csv.reader(io.StringIO(data.decode(), newline=""))
            next(reader)
            return len(list(reader))
    return copy


def sources(fmt: str, folder: Path, operators: str = OPERATORS) -> tuple[Source, Source]:
    shipped = SOURCES / f"cards_{fmt}.toml"
    with_ops = folder / f"cards_{fmt}_ops{len(operators)}.toml"
    with_ops.write_text(shipped.read_text() + operators)
    return load_source(shipped), load_source(with_ops)


def sequence(source: Source, raws: list[str]) -> list[Any]:
    """:func:`run_operators` over the records (as bronze hands them to silver)."""
    outcomes, _ = run_operators(source, ((r, "f", n, None) for n, r in enumerate(raws, 1)))
    return outcomes


def split_stage(frame: Any, runs: int, folder: Path) -> dict[str, Any]:
    """``split`` on JSON lines whose amount is a one-element array, against a plain copy."""
    records = frame.to_dict(orient="records")
    data = "".join(json.dumps({**{k: v for k, v in r.items() if k != "amount"},
                               "amounts": [r["amount"]]}) + "\n" for r in records).encode()
    source = sources("jsonl", folder, SPLIT)[1]
    raws = [r[0] for r in file_records(source, data, MAX_LINE)]
    assert all(o[0] for o in sequence(source, raws[:1000]))
    copy = plain_copy("jsonl")
    seconds: dict[str, list[float]] = {"plain copy": [], "records + split + mapping": []}
    for _ in range(runs):
        seconds["plain copy"].append(timed(lambda: copy(data))[0])
        seconds["records + split + mapping"].append(timed(lambda: sequence(source, [
            r[0] for r in file_records(source, data, MAX_LINE)]))[0])
    median = {k: statistics.median(v) for k, v in seconds.items()}
    n = len(records)
    return {"records": n, **{k: {"median_s": round(v, 4), "rows_per_s": round(n / v)}
                             for k, v in median.items()},
            "overhead_vs_plain": round(median["records + split + mapping"]
                                       / median["plain copy"], 2)}


def without_fast_paths(source: Source) -> Source:
    """A copy of ``source`` whose cached mapping has the fast paths off."""
    import dataclasses

    slow = dataclasses.replace(source)
    mapping = mapping_of(source)
    _MAPPINGS[id(slow)] = (slow, dataclasses.replace(
        mapping, hashed=True,
        time=time_parser(source.time_format, source.timezone, fast=False)))
    return slow


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    started = time.perf_counter()
    out = fn()
    return time.perf_counter() - started, out


def run_format(fmt: str, frame: Any, runs: int, folder: Path) -> dict[str, Any]:
    data = landed(frame, fmt)
    source, with_ops = sources(fmt, folder)
    with_all = sources(fmt, folder, OPERATORS + SEQUENTIAL)[1]
    copy = plain_copy(fmt)
    n = len(frame)
    raws = [r[0] for r in file_records(source, data, MAX_LINE)]
    assert len(raws) == n, (fmt, len(raws))
    for mapped in (map_frame(source, raws[:1000]), map_frame(with_ops, raws[:1000])):
        bad = [r for r in mapped if isinstance(r, str)]
        assert not bad, bad[:3]  # every record maps (and the filter keeps every one)
    slow = without_fast_paths(source)
    assert map_frame(slow, raws) == map_frame(source, raws)  # same output, record by record
    stages: dict[str, Callable[[], Any]] = {
        "plain copy": lambda: copy(data),
        "records": lambda: [r[0] for r in file_records(source, data, MAX_LINE)],
        "mapping": lambda: map_frame(source, raws),
        "mapping + operators": lambda: map_frame(with_ops, raws),
        "mapping + all operators": lambda: sequence(with_all, raws),
        "mapping, fast paths off": lambda: map_frame(slow, raws),
    }
    merged = sum(1 for o in sequence(with_all, raws) if not o[0])
    seconds: dict[str, list[float]] = {name: [] for name in stages}
    for k in range(runs):
        for name, fn in stages.items():
            took, out = timed(fn)
            seconds[name].append(took)
            count = out if isinstance(out, int) else len(out)
            assert count >= n - merged - 2, (name, count)  # merge keeps <= 1 group pending
            if name.startswith("mapping") and k == 0 and name != "mapping + all operators":
                assert not any(isinstance(r, str) for r in out), name
        print(f"  {fmt} run {k + 1}/{runs}: " + ", ".join(
            f"{name} {seconds[name][-1]:.2f}s" for name in stages), flush=True)
    median = {name: statistics.median(v) for name, v in seconds.items()}
    lakecep = median["records"] + median["mapping"]
    lakecep_ops = median["records"] + median["mapping + operators"]
    lakecep_all = median["records"] + median["mapping + all operators"]
    return {
        "format": fmt, "records": n, "bytes": len(data),
        "stages": {name: {"median_s": round(median[name], 4),
                          "rows_per_s": round(n / median[name]),
                          "us_per_row": round(1e6 * median[name] / n, 2),
                          "runs_s": [round(s, 4) for s in seconds[name]]}
                   for name in stages},
        "lakecep_s": round(lakecep, 4), "lakecep_rows_per_s": round(n / lakecep),
        "lakecep_ops_s": round(lakecep_ops, 4),
        "lakecep_ops_rows_per_s": round(n / lakecep_ops),
        "overhead_vs_plain": round(lakecep / median["plain copy"], 2),
        "overhead_ops_vs_plain": round(lakecep_ops / median["plain copy"], 2),
        "overhead_all_ops_vs_plain": round(lakecep_all / median["plain copy"], 2),
        "all_operators_cost_vs_mapping": round(median["mapping + all operators"]
                                               / median["mapping"], 3),
        "merged_away": merged,
        "operators_cost_vs_mapping": round(median["mapping + operators"] / median["mapping"],
                                           3),
        "fast_paths_speedup": round(median["mapping, fast paths off"] / median["mapping"], 3),
    }


def profile(frame: Any, folder: Path, top: int = 15) -> list[dict[str, Any]]:
    """cProfile of the mapping of 20,000 JSON lines: the functions with most own time."""
    import cProfile
    import pstats

    data = landed(frame.iloc[:20_000], "jsonl")
    source, _ = sources("jsonl", folder)
    raws = [r[0] for r in file_records(source, data, MAX_LINE)]
    prof = cProfile.Profile()
    prof.enable()
    map_frame(source, raws)
    prof.disable()
    stats = pstats.Stats(prof)
    rows = []
    for (file, line, name), (_, calls, own, cumulative, _) in stats.stats.items():  # type: ignore[attr-defined]
        rows.append({"function": f"{Path(file).name}:{line}({name})", "calls": calls,
                     "own_s": round(own, 4), "cumulative_s": round(cumulative, 4)})
    rows.sort(key=lambda r: -r["own_s"])
    return rows[:top]


def plot(report: dict[str, Any], path: Path) -> None:
    import matplotlib
    import matplotlib.ticker

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    results = report["results"]
    fig, axes = plt.subplots(1, len(results), figsize=(6 * len(results), 3.8), squeeze=False)
    colors = {"plain copy": "tab:gray", "records": "tab:blue", "mapping": "tab:orange",
              "mapping + operators": "tab:red", "mapping + all operators": "tab:purple",
              "mapping, fast paths off": "tab:olive"}
    for ax, result in zip(axes[0], results, strict=True):
        names = [*result["stages"], "records + mapping"]
        values = [s["rows_per_s"] for s in result["stages"].values()] + [
            result["lakecep_rows_per_s"]]
        bars = ax.barh(range(len(names)), values,
                       color=[colors.get(n, "tab:green") for n in names])
        ax.set_yticks(range(len(names)), names)
        ax.invert_yaxis()
        for bar, value in zip(bars, values, strict=True):
            ax.text(bar.get_width(), bar.get_y() + bar.get_height() / 2, f" {value:,.0f}",
                    va="center", fontsize=8)
        ax.set_xlabel("records/s (one core, median of runs)")
        ax.set_title(f"{result['format']}: {result['records']:,} card records; "
                     f"lakecep / plain = {result['overhead_vs_plain']}x", fontsize=9)
        ax.set_xlim(0, max(values) * 1.3)
        ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(
            lambda x, _: f"{x / 1000:,.0f}k"))
    load = report["load_average"]
    fig.suptitle(f"Source mapping overhead (lakecep.sources) vs a plain parse; load average "
                 f"{load['before'][0]:.1f} -> {load['after'][0]:.1f} on "
                 f"{report['machine'].get('cpus')} cpus", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def _commit() -> str:
    import subprocess

    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, text=True,
                              capture_output=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "lakecep", "cep_core"],
                               cwd=ROOT, text=True, capture_output=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + (" (lakecep/ or cep_core/ modified)" if dirty else "")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="20,000 records, 2 runs")
    ap.add_argument("--profile", action="store_true", help="cProfile the JSON mapping")
    ap.add_argument("--out", type=Path, default=RESULTS / "mapping_overhead.json")
    ap.add_argument("--from-json", action="store_true", help="only redraw the plot of --out")
    args = ap.parse_args()
    if args.from_json:
        plot(json.loads(args.out.read_text()), args.out.with_suffix(".png"))
        return
    if args.quick:
        args.records, args.runs = 20_000, 2
    started = time.time()
    load_before = os.getloadavg()
    frame, _ = transactions(n=args.records, cards=max(40, args.records // 25),
                            frauds=12, seed=14)
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for fmt in ("jsonl", "csv"):
            results.append(run_format(fmt, frame, args.runs, Path(tmp)))
        split = split_stage(frame, args.runs, Path(tmp))
        hot = profile(frame, Path(tmp)) if args.profile else None
    report: dict[str, Any] = {
        "machine": machine(), "elapsed_s": round(time.time() - started, 1),
        "commit": _commit(),
        "load_average": {"before": [round(x, 2) for x in load_before],
                         "after": [round(x, 2) for x in os.getloadavg()]},
        "parameters": {"records": args.records, "runs": args.runs, "max_line_bytes": MAX_LINE,
                       "sources": [f"queries/examples/cards/sources/cards_{f}.toml"
                                   for f in ("jsonl", "csv")], "operators": OPERATORS.strip(),
                       "all_operators": (OPERATORS + SEQUENTIAL).strip(),
                       "split": SPLIT.strip()},
        "results": results, "split_jsonl": split,
    }
    if hot is not None:
        report["profile_jsonl_mapping_20k"] = hot
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    plot(report, args.out.with_suffix(".png"))
    for r in results:
        print(f"{r['format']}: plain {r['stages']['plain copy']['rows_per_s']:,}/s, records "
              f"{r['stages']['records']['rows_per_s']:,}/s, mapping "
              f"{r['stages']['mapping']['rows_per_s']:,}/s, + operators "
              f"{r['stages']['mapping + operators']['rows_per_s']:,}/s, + all operators "
              f"{r['stages']['mapping + all operators']['rows_per_s']:,}/s "
              f"({r['overhead_all_ops_vs_plain']}x plain), fast paths off "
              f"{r['stages']['mapping, fast paths off']['rows_per_s']:,}/s; records + mapping "
              f"{r['lakecep_rows_per_s']:,}/s = {r['overhead_vs_plain']}x the plain copy")
    print(f"split (jsonl): {split['records + split + mapping']['rows_per_s']:,}/s vs plain "
          f"{split['plain copy']['rows_per_s']:,}/s = {split['overhead_vs_plain']}x")
    print(f"wrote {args.out} and {args.out.with_suffix('.png')}")


if __name__ == "__main__":
    main()
