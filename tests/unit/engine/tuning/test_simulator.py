"""cep_core.tuning.simulator: schedulers, complex events, and the model against the simulation."""

from __future__ import annotations

import numpy as np
import pytest

from cep_core.tuning import allocation as A
from cep_core.tuning import simulator as S


def test_one_stream_all_schedulers_agree() -> None:
    t, s = S.poisson_arrivals([800.0], 20.0, seed=3)
    ends = [S.process(t, s, [1e-3], sched, td=5e-3)[1]
            for sched in (S.fifo(), S.edf(), S.time_sharing([1.0]),
                          S.time_sharing([1.0], cycle=3e-3))]
    for e in ends[1:]:
        np.testing.assert_allclose(e, ends[0], rtol=0, atol=1e-9)


def test_vectorised_paths_equal_the_event_loop() -> None:
    t, s = S.poisson_arrivals([700.0, 900.0], 10.0, seed=4)
    svc = [1 / 2500, 1 / 3000]
    for sched in (S.fifo(), S.time_sharing([0.55, 0.45])):
        a = S.process(t, s, svc, sched)
        b = S.process(t, s, svc, sched, engine="loop")
        np.testing.assert_allclose(a[1], b[1], atol=1e-9)
    # EDF with one relative deadline for everybody orders exactly like FIFO
    np.testing.assert_allclose(S.process(t, s, svc, S.edf(), td=1e-3)[1],
                               S.process(t, s, svc, S.fifo())[1], atol=1e-9)


def test_schedulers_are_work_conserving_and_keep_stream_order() -> None:
    t, s = S.poisson_arrivals([1000.0, 1000.0], 5.0, seed=5)
    svc = [1 / 3000, 1 / 3000]
    for sched in (S.fifo(), S.edf([5e-3, 1e-3]), S.time_sharing([0.4, 0.6], cycle=1e-3)):
        start, end = S.process(t, s, svc, sched, td=1e-3)
        assert np.all(start >= t - 1e-12)
        order = np.argsort(start)
        assert np.all(start[order][1:] >= end[order][:-1] - 1e-12)  # one server
        for i in (0, 1):
            assert np.all(np.diff(start[s == i]) > 0)  # FIFO within a stream


def test_round_robin_budgets_give_the_quota_shares_under_backlog() -> None:
    # overloaded: both streams always backlogged -> served counts follow the quotas
    t, s = S.poisson_arrivals([3000.0, 3000.0], 2.0, seed=6)
    start, _ = S.process(t, s, [1e-3, 1e-3], S.time_sharing([0.75, 0.25], cycle=4e-3))
    early = start < 1.5
    share = np.mean(s[early] == 0)
    assert share == pytest.approx(0.75, abs=0.02)


def test_complex_events_by_mode() -> None:
    #            A  A  B  A  B  B  A  A  B
    streams = np.array([0, 0, 1, 0, 1, 1, 0, 0, 1])
    def pairs(mode: str) -> list[list[int]]:
        return S.complex_events(streams, 2, mode).first.tolist()
    assert pairs("recent") == [[1, 2], [3, 4], [7, 8]]
    assert pairs("first") == [[0, 2], [3, 4], [6, 8]]
    assert pairs("chronicle") == [[0, 2], [1, 4], [3, 5], [6, 8]]
    assert pairs("continuous") == [[0, 2], [1, 2], [3, 4], [6, 8], [7, 8]]
    cum = S.complex_events(streams, 2, "cumulative")
    assert cum.first.tolist() == [[0, 2], [3, 4], [6, 8]]
    assert cum.last.tolist() == [[1, 2], [3, 4], [7, 8]]
    three = S.complex_events(np.array([0, 1, 0, 1, 2, 2]), 3, "first")
    assert three.first.tolist() == [[0, 1, 4]]


def test_fifo_never_disorders_and_ideal_slicing_can() -> None:
    lams = [1000.0, 1000.0]
    r = S.simulate(lams, [1 / 3000] * 2, S.fifo(), 1e-3, 20.0, seed=1)
    assert r.disorder == 0.0 and r.matches > 5000
    r = S.simulate(lams, [1 / 3000] * 2, S.time_sharing([0.4, 0.6]), 1e-3, 20.0, seed=1)
    assert r.disorder > 0.01
    assert r.on_time_and_correct <= min(r.satisfaction, 1 - r.disorder) + 1e-12


def test_exact_md1_agrees_with_simulation() -> None:
    # ideal slicing: stream 1 is an M/D/1 queue with λ = 900, μ = 1000 (ρ = 0.9)
    lam, mu, td = 900.0, 1000.0, 8e-3
    res = S.simulate([lam, 500.0], [1 / 2000, 1 / 2000], S.time_sharing([0.5, 0.5]),
                     td, 400.0, seed=11, warmup=0.02)
    model = A.satisfaction(mu, lam, td, "exact")
    # sampling tolerance: waits are strongly correlated at ρ = 0.9; 400 s holds ~3,000
    # busy periods; the standard error of the share is ~0.01 -> allow 0.03
    assert res.stream_satisfaction[0] == pytest.approx(model, abs=0.03)
    assert res.stream_mean_wait[0] == pytest.approx(A.mean_wait(lam, mu), rel=0.1)
    # lighter load, tight tolerance
    res = S.simulate([500.0, 500.0], [1 / 2000] * 2, S.time_sharing([0.5, 0.5]),
                     1.5e-3, 100.0, seed=12)
    assert res.stream_satisfaction[0] == pytest.approx(
        A.satisfaction(1000.0, 500.0, 1.5e-3, "exact"), abs=0.01)
    assert res.stream_mean_latency[1] == pytest.approx(A.mean_latency(500.0, 1000.0),
                                                       rel=0.03)


def test_first_mode_gap_is_exponential_with_rate_lambda2() -> None:
    r = S.simulate([1000.0, 600.0], [1e-4, 1e-4], S.fifo(), 1e-3, 30.0, seed=2,
                   keep_gaps=True)
    assert r.mean_gaps[0] == pytest.approx(1 / A.gap_rate("first", 1000, 600), rel=0.05)
    r = S.simulate([1000.0, 600.0], [1e-4, 1e-4], S.fifo(), 1e-3, 30.0, seed=2,
                   mode="recent")
    assert r.mean_gaps[0] == pytest.approx(1 / A.gap_rate("recent", 1000, 600), rel=0.05)


def test_seeded_and_deterministic() -> None:
    a = S.simulate([500.0, 500.0], [1e-3, 1e-3], S.edf([2e-3, 1e-3]), 1e-3, 5.0, seed=7)
    b = S.simulate([500.0, 500.0], [1e-3, 1e-3], S.edf([2e-3, 1e-3]), 1e-3, 5.0, seed=7)
    assert a == b


@pytest.mark.parametrize("call", [
    lambda: S.time_sharing([0.7, 0.7]),
    lambda: S.time_sharing([0.5, 0.0]),
    lambda: S.time_sharing([0.5], cycle=0),
    lambda: S.edf([0.0]),
    lambda: S.simulate([1.0], [1.0, 1.0], S.fifo(), 1.0, 1.0),
    lambda: S.complex_events(np.array([0, 1]), 2, "strict"),
])
def test_errors(call: object) -> None:
    with pytest.raises(ValueError):
        call()  # type: ignore[operator]
