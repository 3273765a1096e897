"""Run one CEQL query in CORE (Bucchi et al., "CORE: a Complex Event Recognition Engine",
VLDB 2022) through its Python bindings ``pycer`` -- the peer of ``engine_suite.py`` and of
``tests/differential/test_vs_core.py``.

Runs in CORE's own virtualenv (``benchmarks/core/setup.sh``: CPython 3.13, ``pycer``
pinned), never in the project venv; standard library only besides ``pycer``:

    ~/.cache/lakecep/core-venv/bin/python benchmarks/core/run_core.py spec.json

``spec.json``: ``{"input": csv, "columns": [[name, "int"|"double"|"string"], ...],
"query": CEQL, "output": path, "reps": n}``. The input is a headerless CSV, one event per
line, all of one event type ``T`` of stream ``S`` with the given attributes (the first is
``rid``, the row's position in the MATCH_RECOGNIZE input). Events are built once (timed
apart as ``build_s``); each repetition sends them to a fresh ``PyOfflineServer`` and reads
its output (timed: ``times_s``, CPU seconds of the process, all threads, in ``cpu_s``).
The complex events of the first repetition are written to ``output`` as ``first,last``
row ids (the smallest and largest ``rid`` of its events), one line each. Prints one JSON
line. A spec ``{"cases": [spec, ...]}`` runs many queries in one process (no timing
report).
"""

from __future__ import annotations

import csv
import json
import os
import re
import statistics
import sys
import tempfile
import time
from typing import Any

EVENT = re.compile(r"attributes: \[(-?\d+)")


def _cpu() -> float:
    t = os.times()
    return t.user + t.system


def _peak_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def run_case(pycer: Any, spec: dict[str, Any]) -> dict[str, Any]:
    kinds = {"int": (pycer.PyIntValue, int), "double": (pycer.PyDoubleValue, float),
             "string": (pycer.PyStringValue, str)}
    columns = spec["columns"]
    decl = ("CREATE STREAM S { EVENT T { "
            + ", ".join(f"{name}:{kind}" for name, kind in columns) + " } }")
    makers = [kinds[kind] for _, kind in columns]
    t0 = time.perf_counter()
    with open(spec["input"], newline="") as f:
        events = [pycer.PyEvent(0, [make(cast(v)) for (make, cast), v in zip(makers, row,
                                                                  strict=True)])
                  for row in csv.reader(f)]
    build_s = time.perf_counter() - t0
    times, cpus, found = [], [], 0
    for rep in range(int(spec.get("reps", 1))):
        server = pycer.PyOfflineServer()
        server.declare_stream(decl)
        server.add_query(spec["query"])
        c0, w0 = _cpu(), time.perf_counter()
        server.send_events(events)
        text = server.get_output()
        times.append(time.perf_counter() - w0)
        cpus.append(_cpu() - c0)
        if rep == 0:
            with open(spec["output"], "w") as out:
                for line in text.splitlines():
                    ids = [int(x) for x in EVENT.findall(line)]
                    if ids:
                        out.write(f"{min(ids)},{max(ids)}\n")
                        found += 1
        del server, text
    return {"pycer_build_s": round(build_s, 3), "events": len(events),
            "complex_events": found, "times_s": [round(t, 4) for t in times],
            "median_s": round(statistics.median(times), 4),
            "cpu_s": [round(c, 4) for c in cpus]}


def main() -> None:
    with open(sys.argv[1]) as f:
        spec = json.load(f)
    # pycer logs into ./logs and prints through stdout: work in a scratch directory
    os.chdir(tempfile.mkdtemp(prefix="lakecep-core-"))
    import pycer

    if "cases" in spec:  # many small queries in one process (the differential test)
        results = [run_case(pycer, case) for case in spec["cases"]]
        print("\n" + json.dumps({"cases": len(results)}), flush=True)
        return
    result = run_case(pycer, spec)
    result["peak_rss_mb"] = round(_peak_mb(), 1)
    print("\n" + json.dumps(result), flush=True)  # on its own line after pycer's prints


if __name__ == "__main__":
    main()
