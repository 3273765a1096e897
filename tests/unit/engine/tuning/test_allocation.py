"""cep_core.tuning.allocation: the seed-002 allocation model (M/D/1 waits, formula 10, disorder,
Theorems 1 and 2)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cep_core.tuning import allocation as A


def test_mean_wait_and_latency_by_hand() -> None:
    # ρ = 0.5, μ = 1000: E[W] = 0.5 / (2·1000·0.5) = 0.5 ms; latency + 1 ms
    assert A.mean_wait(500, 1000) == pytest.approx(5e-4)
    assert A.mean_latency(500, 1000) == pytest.approx(1.5e-3)
    assert A.approx_rate(500, 1000) == pytest.approx(500.0)  # 2(500 - 250)


@pytest.mark.parametrize("rho", [0.05, 0.3, 0.7, 0.9, 0.98])
def test_exact_cdf_atom_and_mean(rho: float) -> None:
    mu = 1000.0
    lam = rho * mu
    assert A.wait_cdf(0.0, lam, mu)[0] == pytest.approx(1 - rho, abs=1e-12)
    assert A.wait_cdf(-1.0, lam, mu)[0] == 0.0
    ew = A.mean_wait(lam, mu)
    x = np.linspace(0, ew * 60 + 40 / mu, 60001)
    f = A.wait_cdf(x, lam, mu)
    assert np.all(np.diff(f) >= -1e-12)  # a CDF
    assert float(np.trapezoid(1 - f, x)) == pytest.approx(ew, rel=1e-5)


def test_exact_cdf_known_values() -> None:
    # D = 1 ms. For x <= D only k = 0: P(W <= x) = (1-ρ) e^{λx}
    lam, mu = 600.0, 1000.0
    assert A.wait_cdf(5e-4, lam, mu)[0] == pytest.approx(0.4 * math.exp(0.3), rel=1e-12)
    # D < x <= 2D: (1-ρ)(e^{λx} - λ(x-D) e^{λ(x-D)})
    x = 1.5e-3
    want = 0.4 * (math.exp(lam * x) - lam * (x - 1e-3) * math.exp(lam * (x - 1e-3)))
    assert A.wait_cdf(x, lam, mu)[0] == pytest.approx(want, rel=1e-12)


@pytest.mark.parametrize("rho", [0.1, 0.5, 0.9, 0.99])
def test_crommelin_and_spectral_agree_around_the_switch(rho: float) -> None:
    u = np.array([2.0, 4.5, 7.0, 8.0])
    sum_ = A._crommelin(u, rho)
    spectral = 1 - A._spectral_tail(u, rho)
    assert np.abs(sum_ - spectral).max() < 1e-9


def test_exact_tail_decays_at_the_real_pole() -> None:
    lam, mu = 900.0, 1000.0
    g = A.decay_rate(lam, mu)
    assert lam * math.expm1(g / mu) == pytest.approx(g, rel=1e-10)
    s = A.wait_sf([0.05, 0.06], lam, mu)
    assert math.log(s[0] / s[1]) / 0.01 == pytest.approx(g, rel=1e-6)
    # the paper's h under-states the decay rate (over-states waits) at this load
    assert A.approx_rate(lam, mu) < g


def test_formula_10_root_satisfies_the_equation() -> None:
    lam, td, sigma = 1000.0, 1e-3, 0.5
    mu = A.min_capacity(lam, td, sigma)
    assert 2 * lam * (1 - lam / mu) * (td - 1 / mu) == pytest.approx(-math.log(1 - sigma))
    a = 2 * lam * td + math.log(1 - sigma)
    assert a * mu**2 - 2 * lam * (1 + lam * td) * mu + 2 * lam**2 == pytest.approx(
        0, abs=1e-6 * mu**2)
    assert mu > max(lam, 1 / td)
    assert A.satisfaction(mu, lam, td, "approx") == pytest.approx(sigma, abs=1e-12)


@pytest.mark.parametrize("sigma", [0.1, 0.5, 0.9, 0.99])
def test_exact_min_capacity_hits_sigma(sigma: float) -> None:
    mu = A.min_capacity(800.0, 2e-3, sigma, "exact")
    assert A.satisfaction(mu, 800.0, 2e-3, "exact") == pytest.approx(sigma, abs=1e-7)


def test_approximation_ceiling_is_an_error() -> None:
    ceiling = -math.expm1(-2 * 1000 * 1e-3)  # 1 - e^{-2}
    A.min_capacity(1000.0, 1e-3, ceiling - 0.01)
    with pytest.raises(ValueError, match="out of reach"):
        A.min_capacity(1000.0, 1e-3, ceiling + 0.01)
    assert A.min_capacity(1000.0, 1e-3, ceiling + 0.01, "exact") > 1000


@settings(max_examples=40, deadline=None)
@given(st.floats(0.05, 0.9), st.floats(1.05, 3.0), st.sampled_from(["exact", "approx"]))
def test_satisfaction_grows_with_capacity(rho: float, factor: float, model: str) -> None:
    lam, td = 1000.0, 3e-3
    mu = lam / rho
    assert A.satisfaction(mu * factor, lam, td, model) >= (  # type: ignore[arg-type]
        A.satisfaction(mu, lam, td, model) - 1e-12)  # type: ignore[arg-type]


@settings(max_examples=30, deadline=None)
@given(st.floats(1100, 3000), st.floats(1100, 3000), st.floats(200, 5000))
def test_pair_disorder_monotone(mu1: float, mu2: float, gap: float) -> None:
    lam = 1000.0
    w = A.avg_pair_disorder(lam, mu1, lam, mu2, gap)
    assert 0 <= w <= 1
    # more capacity for E1 -> less disorder; for E2 -> more
    assert A.avg_pair_disorder(lam, mu1 * 1.1, lam, mu2, gap) <= w + 1e-12
    assert A.avg_pair_disorder(lam, mu1, lam, mu2 * 1.1, gap) >= w - 1e-12


def test_chain_grid_matches_closed_form() -> None:
    for mus in ([1800.0, 1200.0], [1200.0, 1800.0]):
        closed = A.avg_pair_disorder(1000, mus[0], 1000, mus[1], 2000.0)
        assert A.chain_disorder([1000, 1000], mus, [2000.0]) == pytest.approx(closed,
                                                                              abs=2e-3)
    # exact chain of two == exact pair average; pair_disorder(t) at t=0 is P(W1 > W2)
    w0 = A.pair_disorder(0.0, 1000, 1500, 1000, 1200, "exact")[0]
    assert 0 < w0 < 1
    assert A.pair_disorder([0.0, 1e-3], 1000, 1500, 1000, 1200, "approx")[1] < (
        A.pair_disorder(0.0, 1000, 1500, 1000, 1200, "approx")[0])


def test_theorem2_close_to_theorem1_at_low_disorder() -> None:
    lams, mus = [200.0, 200.0, 200.0], [3000.0, 2500.0, 2000.0]
    gaps = A.chain_gap_rates(lams, "first")
    # (the approximation never has low disorder: its waits tend to Exp(2λ), not 0)
    t1 = A.chain_disorder(lams, mus, gaps, "exact")
    t2 = A.theorem2_disorder(lams, mus, gaps, "exact")
    assert t1 < 0.1 and t2 == pytest.approx(t1, rel=0.1)


def test_gap_rates() -> None:
    assert A.gap_rate("recent", 1000, 500, "paper") == 2000
    assert A.gap_rate("first", 1000, 500, "paper") == pytest.approx(1 / (1 / 500 - 1 / 2000))
    assert A.gap_rate("first", 500, 1000, "paper") == 2000
    assert A.gap_rate("cumulative", 1000, 500, "paper") == 1000
    assert A.gap_rate("chronicle", 400, 500, "paper") == 100  # falls back to derived
    assert A.gap_rate("recent", 1000, 500) == 1500
    assert A.gap_rate("continuous", 1000, 500) == 500
    with pytest.raises(ValueError, match="chronicle"):
        A.gap_rate("chronicle", 600, 500)
    with pytest.raises(ValueError, match="mode"):
        A.gap_rate("strict", 1, 1)


def test_theorem1_constraints_hold() -> None:
    lams = [1000.0, 1000.0, 1000.0]
    gaps = A.chain_gap_rates(lams, "first", "paper")
    mins = [1020.0, 1020.0, 1200.0]
    alloc = A.theorem1_allocation(lams, 6000.0, mins, gaps)
    assert sum(alloc.mus) == pytest.approx(6000.0)
    assert alloc.mus[-1] == 1200.0
    assert all(m >= lo - 1e-6 for m, lo in zip(alloc.mus, mins, strict=True))
    assert alloc.mus[0] > alloc.mus[1] > alloc.mus[2]  # earlier events get more
    # a local minimum: moving capacity between E1 and E2 does not lower disorder
    for d in (-50.0, 50.0):
        moved = [alloc.mus[0] + d, alloc.mus[1] - d, 1200.0]
        assert A.chain_disorder(lams, moved, gaps) >= alloc.omega - 1e-4


def test_table1_shape() -> None:
    rows = A.table1()
    assert [r["n"] for r in rows] == [3, 4]
    for r in rows:
        assert r["mus"][-1] == 1200.0 and sum(r["mus"]) == pytest.approx(6000, abs=0.5)
        assert r["mus"] == sorted(r["mus"], reverse=True)
    assert rows[1]["omega_numeric"] > rows[0]["omega_numeric"]
    # Theorem 2 under-estimates more with more events (as in the paper)
    err = [r["omega_numeric"] - r["omega_estimate"] for r in rows]
    assert err[1] > err[0]


def test_two_stream_optimum_is_interior_and_step_search_is_close() -> None:
    opt = A.optimise_two_streams(3000.0, 1000.0, 1000.0, 1e-3)
    assert 1000 < opt.mu2 < 2000 and opt.mu1 + opt.mu2 == pytest.approx(3000)
    grid = np.linspace(1001, 1999, 400)
    values = [A.two_stream_objective(m, 3000, 1000, 1000, 1e-3) for m in grid]
    assert opt.value >= max(values) - 1e-9
    assert opt.step.steps <= 21
    assert abs(opt.step.x - opt.mu2) <= 1000 / 20 * 1.01


def test_step_search_stops_at_turning_point() -> None:
    res = A.step_search(lambda x: -(x - 3.3) ** 2, 0.0, 10.0, 20)
    assert res.x == 3.5 and res.steps == 9


@pytest.mark.parametrize("call, match", [
    (lambda: A.mean_wait(1000, 1000), "unstable"),
    (lambda: A.mean_wait(-1, 1000), "positive"),
    (lambda: A.satisfaction(1000, 500, 1e-3), "service time"),
    (lambda: A.min_capacity(1000, 1e-3, 1.0), "sigma"),
    (lambda: A.min_capacity(1000, 1e-3, 0.0), "sigma"),
    (lambda: A.wait_cdf(0.1, 10, 20, "paper"), "model"),  # type: ignore[arg-type]
    (lambda: A.theorem1_allocation([1000, 1000], 2000, [1100, 1100], [1000]), "capacity"),
    (lambda: A.theorem1_allocation([1000, 1000], 5000, [900, 1100], [1000]), "exceed"),
    (lambda: A.step_search(lambda x: x, 1, 0), "lo < hi"),
])
def test_errors(call: object, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        call()  # type: ignore[operator]


def test_min_capacity_exact_at_light_and_heavy_load() -> None:
    # light load: P(W = 0) = 1 - ρ meets σ as soon as the service fits the deadline
    light = A.min_capacity(1e-4, 60.0, 0.95, "exact")
    assert light == pytest.approx(1 / 60.0, rel=1e-6)
    assert A.satisfaction(light * 1.0001, 1e-4, 60.0, "exact") >= 0.95
    # heavy load (λ·td = 18): the root is found past the region where the series fails
    heavy = A.min_capacity(0.3, 60.0, 0.95, "exact")
    assert heavy > 0.3
    assert A.satisfaction(heavy, 0.3, 60.0, "exact") == pytest.approx(0.95, abs=1e-6)


def _chain_disorder_by_matrix(lams: list[float], mus: list[float], gaps: list[float],
                              model: A.Model) -> float:
    """The reference: formula 17's backward recursion with the whole n x n gap kernel."""
    pairs = list(zip(lams, mus, strict=True))
    grid = A.WaitGrid.build(pairs, model)
    points = np.concatenate(([0.0], grid.mid))
    probs = [np.concatenate(([atom], cell)) for atom, cell in
             (grid.masses(lam, mu, model) for lam, mu in pairs)]
    diff = points[:, None] - points[None, :]
    phi = np.ones_like(points)
    for i in range(len(lams) - 2, -1, -1):
        kernel = np.where(diff < 0, 1.0, np.exp(-gaps[i] * np.maximum(diff, 0.0)))
        phi = kernel @ (probs[i + 1] * phi)
    return float(np.clip(1.0 - probs[0] @ phi, 0.0, 1.0))


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.floats(10.0, 2000.0), st.floats(1.05, 6.0)), min_size=2,
                max_size=5),
       st.lists(st.floats(1e-3, 1e5), min_size=4, max_size=4),
       st.sampled_from(["approx", "exact"]))
def test_chain_disorder_equals_the_matrix_recursion(streams: list[tuple[float, float]],
                                                    gaps: list[float], model: A.Model) -> None:
    lams = [lam for lam, _ in streams]
    mus = [lam * load for lam, load in streams]
    gaps = gaps[: len(lams) - 1]
    assert A.chain_disorder(lams, mus, gaps, model) == pytest.approx(
        _chain_disorder_by_matrix(lams, mus, gaps, model), abs=1e-9)
