"""Incremental aggregates = recomputation under random inserts, deletes and replaces."""

from __future__ import annotations

import doctest
import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from window_oracle import NAMES, close, expect, values

import cep_core.windows.aggregates as aggregates_module
import cep_core.windows.events as events_module
import cep_core.windows.operator as operator_module
import cep_core.windows.sampler as sampler_module
from cep_core.windows import AGGREGATES, FIFO_AGGREGATES, Aggregate, Event, Sum, Var


@pytest.mark.parametrize("module", [aggregates_module, events_module, operator_module,
                                    sampler_module])
def test_window_doctests_run(module: object) -> None:
    result = doctest.testmod(module)  # type: ignore[arg-type]
    assert result.attempted > 0 and result.failed == 0


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 10**6), values), max_size=60),
       st.booleans())
def test_window_aggregates_equal_recomputation(steps: list[tuple[int, int, float | None]],
                                               round_trip: bool) -> None:
    aggs: dict[str, Aggregate] = {n: AGGREGATES[n]() for n in NAMES}
    held: list[float | None] = []
    for step, (kind, pick, x) in enumerate(steps):
        if kind <= 1 or not held:                      # insert
            for a in aggs.values():
                a.insert(x)
            held.append(x)
        elif kind == 2:                                # delete an arbitrary held value
            old = held.pop(pick % len(held))
            for a in aggs.values():
                a.delete(old)
        else:                                          # replace
            i = pick % len(held)
            for a in aggs.values():
                a.replace(held[i], x)
            held[i] = x
        if round_trip and step % 7 == 3:
            aggs = {n: AGGREGATES[n].from_state(json.loads(json.dumps(a.to_state())))
                    for n, a in aggs.items()}
        for n, a in aggs.items():
            assert close(a.value(), expect(n, held)), (n, a.value(), expect(n, held), held)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.booleans(), values), max_size=80))
def test_window_monotone_deques_equal_recomputation_on_fifo(
        steps: list[tuple[bool, float | None]]) -> None:
    aggs = {n: FIFO_AGGREGATES[n]() for n in ("min", "max")}
    queue: list[float | None] = []
    for push, x in steps:
        if push or not queue:
            queue.append(x)
            for a in aggs.values():
                a.insert(x)
        else:
            old = queue.pop(0)
            for a in aggs.values():
                a.delete(old)
        for n, a in aggs.items():
            assert a.value() == expect(n, queue)
    # amortised O(1): every value is appended once and popped at most once
    assert all(a.ops <= 3 * len(steps) for a in aggs.values())


def test_window_exact_sums_do_not_drift() -> None:
    s, v = Sum(), Var()
    for i in range(5000):           # long churn on a window of two values
        x = 1e8 + (i % 7) * 0.1
        for a in (s, v):
            a.insert(x)
            a.insert(0.3)
            a.delete(x)
            a.delete(0.3)
    for a in (s, v):
        a.insert(1e8 + 0.1)
        a.insert(1e8 + 0.3)
    assert s.value() == expect("sum", [1e8 + 0.1, 1e8 + 0.3])   # exact: no drift at all
    assert v.value() == expect("var", [1e8 + 0.1, 1e8 + 0.3])
    assert not math.isnan(v.value() or math.nan)


def test_window_null_nan_and_infinity() -> None:
    assert Event("k", 1, 1, math.nan).value is None
    with pytest.raises(ValueError, match="finite"):
        Event("k", 1, 1, math.inf)
    with pytest.raises(TypeError, match="integer nanoseconds"):
        Event("k", 1.5, 1, 1.0)  # type: ignore[arg-type]
    a = AGGREGATES["avg"]()
    a.insert(None)
    assert a.value() is None and AGGREGATES["count"]().value() == 0.0
