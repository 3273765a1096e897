"""Which queries of the repository's query corpora run on the compiled engine (fast path /
kernel) and which fall back to the general matcher, and why (issue 13: "cep_core at full
speed for every query"). Not a timing: it counts.

The corpora are the queries the engine's tests compile: the hand-written conformance and
example cases (``HAND``) and the differential tests' generated queries (``GENERATED``,
hypothesis), plus the shipped query files (``queries/**.toml``). The test files are run
in-process by pytest with a plugin that records every ``compile_query`` made with the
default engine: the query text and the router's decision (``CompiledQuery.plan``: the
kernel plan, or ``general: <reason>``), and for the incremental matcher the decision of
``IncrementalMatcher`` (``incremental_route``), and how many of the inputs of a compiled
query still ran on the general matcher (the kernel could not read a column exactly, a
condition raised, too many threads). Counts are of distinct query texts.

    .venv/bin/python benchmarks/engine_routing.py                  # every corpus
    .venv/bin/python benchmarks/engine_routing.py --hand-only      # hand-written only
    .venv/bin/python benchmarks/engine_routing.py --json out.json  # also the raw records
"""

from __future__ import annotations

import argparse
import collections
import glob
import json
import os
import re
import sys
import tomllib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
ENGINE_TESTS = ROOT / "tests" / "unit" / "engine"
HAND = ["test_cep_conformance.py", "test_conformance_trino.py", "test_cep_examples.py",
        "test_cep_extensions.py", "test_cep_semantics.py", "test_conformance_expressions.py",
        "test_cep_reference.py", "test_cep_streaming.py", "test_cep_api.py",
        "test_cep_scalar_functions.py"]
GENERATED = ["test_incremental_differential.py", "test_compiled.py", "test_fast.py",
             "test_fuzz_queries.py"]


def reason_kind(plan: str) -> str:
    """A router decision with the query's own names taken out, to count by reason."""
    if plan.startswith("uncertain:"):
        return "UNCERTAIN TIME (its own engine)"
    if not plan.startswith("general:"):
        return "compiled"
    reason = plan.removeprefix("general:").strip()
    reason = re.sub(r"^DEFINE [^:]+: ", "DEFINE: ", reason)
    return re.sub(r"(variable) \S+", r"\1 V", reason)


class Recorder:
    """A pytest plugin: every default-engine compile_query while a test runs."""

    def __init__(self) -> None:
        self.records: dict[str, dict[str, Any]] = {}
        self.group = ""

    def pytest_configure(self, config: Any) -> None:
        import cep_core.api as api
        from cep_core.incremental.matcher import incremental_route

        original = api.plan_fast
        recorder = self

        def plan_fast(q: Any, engine: str | None = None) -> Any:
            plan, text = original(q, engine)
            if engine in (None, "auto") and q.text not in recorder.records:
                recorder.records[q.text] = {"group": recorder.group, "batch": text,
                                            "incremental": None, "q": q}
            return plan, text

        api.plan_fast = plan_fast
        self._route = incremental_route

        # Inputs of a compiled plan that still ran on the general matcher (a column the
        # kernel cannot read exactly, a condition error, too many threads, ...).
        from cep_core.incremental.matcher import IncrementalMatcher
        from cep_core.runtime.fast import _FastBound

        match, kernel = _FastBound.match, IncrementalMatcher._kernel

        def fast_match(fb: Any, df: Any) -> Any:
            out = match(fb, df)
            recorder.input_fallback(fb.plan.q.text, "batch", out is None and len(df) > 0)
            return out

        def incremental_kernel(inc: Any, bound: Any, work: Any, bounds: Any) -> Any:
            out = kernel(inc, bound, work, bounds)
            if incremental_route(inc.compiled) is None:
                recorder.input_fallback(inc.compiled.text, "incremental",
                                        out is None and len(work) > 0)
            return out

        _FastBound.match = fast_match  # type: ignore[method-assign]
        IncrementalMatcher._kernel = incremental_kernel  # type: ignore[method-assign]

    def input_fallback(self, text: str, mode: str, fell_back: bool) -> None:
        rec = self.records.get(text)
        if rec is not None:
            key = f"{mode}_inputs"
            runs, back = rec.get(key, (0, 0))
            rec[key] = (runs + 1, back + int(fell_back))

    def pytest_runtest_setup(self, item: Any) -> None:
        self.group = Path(str(item.fspath)).name

    def finish(self) -> None:
        for rec in self.records.values():
            q = rec.pop("q")
            rec["fast"] = q._fast is not None
            rec["incremental"] = self._route(q)


def shipped_queries() -> list[str]:
    out = []
    for path in sorted(glob.glob(str(ROOT / "queries" / "**" / "*.toml"), recursive=True)):
        with open(path, "rb") as f:
            text = tomllib.load(f).get("query")
        if isinstance(text, str) and "MATCH_RECOGNIZE" in text.upper():
            out.append(text)
    return out


def table(title: str, counts: collections.Counter[str]) -> str:
    total = sum(counts.values())
    lines = [f"{title} ({total} distinct queries)"]
    for kind, n in counts.most_common():
        lines.append(f"  {n:5d}  {100 * n / max(total, 1):5.1f} %  {kind}")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hand-only", action="store_true", help="skip the generated corpora")
    ap.add_argument("--json", help="write every record (query, group, decisions) here")
    args = ap.parse_args()
    os.environ.pop("LAKECEP_CEP_ENGINE", None)
    import pytest

    import cep_core

    rec = Recorder()
    files = [str(ENGINE_TESTS / f) for f in HAND + ([] if args.hand_only else GENERATED)]
    pytest.main(["-q", "-n", "0", "-p", "no:cacheprovider", "--no-header",
                 "-o", "addopts=", *files], plugins=[rec])
    rec.group = "queries/*.toml"
    for text in shipped_queries():
        cep_core.compile_query(text)
    rec.finish()
    groups = {"hand-written": set(HAND) | {"queries/*.toml"}, "generated": set(GENERATED)}
    for name, members in groups.items():
        chosen = [r for r in rec.records.values() if r["group"] in members]
        if not chosen:
            continue
        print(table(f"\n{name}, batch", collections.Counter(
            reason_kind(r["batch"]) for r in chosen)))
        print(table(f"{name}, incremental", collections.Counter(
            "compiled" if r["incremental"] is None else reason_kind(r["incremental"])
            for r in chosen)))
        for mode in ("batch", "incremental"):
            runs = [r[f"{mode}_inputs"] for r in chosen if f"{mode}_inputs" in r]
            some = sum(1 for _, back in runs if back)
            print(f"{name}, {mode}: of {len(runs)} compiled queries run on data, {some} "
                  f"ran some input on the general matcher anyway "
                  f"({sum(b for _, b in runs)} of {sum(n for n, _ in runs)} inputs)")
    if args.json:
        Path(args.json).write_text(json.dumps(
            [{"query": t, **r} for t, r in rec.records.items()], indent=1))
    sys.exit(0)


if __name__ == "__main__":
    main()
