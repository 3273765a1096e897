"""cep_core.statistics: arrival rates with the Poisson dispersion test, and selectivities of
a pattern and its prefixes."""

from __future__ import annotations

import doctest

import numpy as np
import pandas as pd
import pytest

import cep_core.statistics
from cep_core.statistics import arrival_rates, prefix_queries, selectivities

QUERY = """SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts
    MEASURES LAST(C.ts) AS c_ts ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW
    PATTERN (A B C) DEFINE A AS v = 'A', B AS v = 'B', C AS v = 'C')"""


def test_docstrings() -> None:
    assert doctest.testmod(cep_core.statistics).failed == 0


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
