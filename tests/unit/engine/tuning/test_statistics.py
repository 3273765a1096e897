"""cep_core.tuning.statistics: arrival rates with the Poisson dispersion test, and selectivities of
a pattern and its prefixes."""

from __future__ import annotations

import doctest

import numpy as np
import pandas as pd
import pytest

import cep_core.tuning.statistics
from cep_core.tuning.statistics import (
    arrival_rates,
    pattern_variables,
    prefix_queries,
    processing_costs,
    rates_from_counts,
    selectivities,
    stream_labels,
)

QUERY = """SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts
    MEASURES LAST(C.ts) AS c_ts ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW
    PATTERN (A B C) DEFINE A AS v = 'A', B AS v = 'B', C AS v = 'C')"""


def test_docstrings() -> None:
    assert doctest.testmod(cep_core.tuning.statistics).failed == 0


def test_rates_and_the_poisson_test_tell_poisson_from_clumped_and_regular() -> None:
    rng = np.random.default_rng(3)
    poisson = np.cumsum(rng.exponential(1 / 5.0, size=20_000))  # 5 events/s
    regular = np.arange(0, poisson.max(), 0.2)  # one event every 0.2 s: far too regular
    bursts = np.repeat(np.arange(0, poisson.max(), 10.0), 50)  # 50 at once every 10 s
    frame = pd.DataFrame({
        "t": pd.to_datetime(np.concatenate([poisson, regular, bursts]), unit="s"),
        "kind": ["poisson"] * len(poisson) + ["regular"] * len(regular)
        + ["bursts"] * len(bursts)})
    rates = {r.subject: r for r in arrival_rates(frame, "t", "kind", bin_seconds=1.0)}
    assert rates["poisson"].rate == pytest.approx(5.0, rel=0.03)
    assert rates["regular"].rate == pytest.approx(5.0, rel=0.01)
    assert rates["poisson"].poisson() and rates["poisson"].dispersion == pytest.approx(1, abs=0.1)
    assert rates["regular"].poisson() is False and rates["regular"].dispersion < 0.1
    assert rates["bursts"].poisson() is False and rates["bursts"].dispersion > 10
    assert arrival_rates(frame.iloc[:0], "t", "kind") == []
    with pytest.raises(ValueError, match="bin_seconds"):
        arrival_rates(frame, "t", "kind", bin_seconds=0)


def test_selectivity_of_the_pattern_and_each_prefix() -> None:
    # k1: A B C (a match), k2: A B X, k3: A X, k4: X -> per 10 rows: A 3, A B 2, A B C 1
    rows = [("k1", "A"), ("k1", "B"), ("k1", "C"), ("k2", "A"), ("k2", "B"), ("k2", "X"),
            ("k3", "A"), ("k3", "X"), ("k4", "X"), ("k4", "X")]
    sample = pd.DataFrame({"ts": range(len(rows)), "k": [k for k, _ in rows],
                           "v": [v for _, v in rows]})
    assert [q.split("PATTERN")[1].split(")")[0].strip(" (") for q in prefix_queries(QUERY)] \
        == ["A", "A B"]
    assert selectivities(QUERY, sample) == {"A": 0.3, "A B": 0.2, "*": 0.1}
    assert prefix_queries(QUERY.replace("(A B C)", "(A B+ C)")) == []
    assert selectivities(QUERY.replace("(A B C)", "(A B+ C)"), sample) == {"*": 0.1}


def test_rates_from_counts_equal_arrival_rates_over_the_same_bins() -> None:
    rng = np.random.default_rng(5)
    times = np.sort(rng.uniform(0, 100, 400))
    frame = pd.DataFrame({"t": times, "kind": rng.choice(["a", "b"], 400)})
    direct = arrival_rates(frame, "t", "kind", bin_seconds=10.0)
    lo = times.min()
    bins = len(np.histogram([], bins=direct[0].bins)[0])
    counts = {k: np.bincount(np.minimum(((g - lo) // 10).astype(int), bins - 1),
                             minlength=bins) for k, g in frame.groupby("kind")["t"]}
    assert rates_from_counts(counts, 10.0) == direct
    with pytest.raises(ValueError, match="same number of bins"):
        rates_from_counts({"a": [1, 2], "b": [1]}, 1.0)
    with pytest.raises(ValueError, match="negative"):
        rates_from_counts({"a": [1, -2]}, 1.0)


def test_stream_labels_give_each_row_the_first_variable_that_accepts_it() -> None:
    frame = pd.DataFrame({"k": [1, 1, 1, 2, 2, 2], "ts": [1, 2, 3, 1, 2, 3],
                          "v": ["A", "B", "C", "C", "X", "A"]})
    assert pattern_variables(QUERY) == ["A", "B", "C"]
    assert stream_labels(QUERY, frame).tolist() == ["A", "B", "C", "C", "", "A"]
    alternation = QUERY.replace("PATTERN (A B C)", "PATTERN (A | B | C)")
    assert pattern_variables(alternation) == []
    assert stream_labels(alternation, frame).tolist() == [""] * 6


def test_processing_costs_recover_planted_per_event_work() -> None:
    """Work of 3 units per 'b' event and 1 per 'a' event, plus 50 per call: the fit finds
    both exactly when the clock counts work units (the fit, free of machine noise)."""
    frame = pd.DataFrame({"kind": np.random.default_rng(1).choice(["a", "b"], 400)})
    units = [0.0]

    def counted(part: pd.DataFrame) -> None:
        units[0] += 50 + sum(3 if kind == "b" else 1 for kind in part["kind"])

    costs = processing_costs(counted, frame, "kind", runs=10, clock=lambda: units[0])
    assert costs.per_event == pytest.approx({"a": 1.0, "b": 3.0})
    assert costs.overhead == pytest.approx(50.0)


def test_processing_costs_on_the_process_clock_rank_heavier_work_higher() -> None:
    """The default clock (CPU seconds) on real work: 'b' does 3x the loop of 'a'. Only the
    order is asserted -- the measured ratio moves with the machine's load (a CI run under
    load measured 16x for a planted 3x)."""
    frame = pd.DataFrame({"kind": np.random.default_rng(1).choice(["a", "b"], 400)})

    def work(part: pd.DataFrame) -> None:
        total = 0
        for kind in part["kind"]:
            for _ in range(9000 if kind == "b" else 3000):
                total += 1

    costs = processing_costs(work, frame, "kind", runs=10)
    assert costs.runs == 10 and set(costs.per_event) == {"a", "b"}
    assert costs.per_event["b"] > costs.per_event["a"]
    with pytest.raises(ValueError, match="runs"):
        processing_costs(work, frame, "kind", runs=1)
