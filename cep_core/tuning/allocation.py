"""Deadline-aware capacity allocation for CEP over Poisson streams (seed 002; issue 6).

Model. Stream ``i`` brings events of type ``E_i`` as a Poisson process of rate ``λ_i``
(events per second). Time-sharing gives it a virtual processor that handles ``μ_i`` events
per second, each in the constant time ``1/μ_i`` seconds: an M/D/1 queue, stable only for
``ρ_i = λ_i / μ_i < 1``. ``W`` is the waiting time (seconds, before service starts), the
latency of an event ``W + 1/μ``. A complex event ``SEQ(E1, .., En)`` is *on time* when the
latency of its terminator ``e_n`` is at most ``td`` seconds, and *correct* when its
sub-events were processed in arrival order under the paper's relaxed condition: ``e_i``
starts being processed before ``e_{i+1}`` does, i.e. ``W_i < W_{i+1} + t_i`` with ``t_i``
the arrival gap between them (processing an event starts with its automaton transition, so
``e_{i+1}`` may overtake ``e_i`` once ``e_i`` has started).

Units everywhere: rates in events per second, times in seconds.

What is exact and what is approximate:

* :func:`mean_wait` -- exact (Pollaczek-Khinchine): ``E[W] = ρ / (2μ(1-ρ))``.
* :func:`wait_cdf` ``model="exact"`` -- the exact M/D/1 FIFO waiting-time CDF, with the atom
  ``P(W=0) = 1-ρ``. For ``x`` up to ``CROMMELIN_SWITCH`` service times it is Erlang's /
  Crommelin's finite sum ``(1-ρ) Σ_{k<=x/D} (ρ(k - x/D))^k / k! · e^{-ρ(k - x/D)}`` (``D =
  1/μ``), whose alternating terms cancel badly for larger ``x``; beyond it, the residue
  (spectral) expansion of the Pollaczek-Khinchine transform: the poles of
  ``W*(s) = (1-ρ)s / (s - λ + λe^{-sD})`` are ``s_k = (ρ - z_k)/D`` with
  ``z_k = -W_k(-ρe^{-ρ})`` (Lambert W, branches k != 0), and
  ``P(W > x) = Σ_k (1-ρ) e^{s_k x} / (z_k - 1)``. Branch -1 is the dominant real pole; the
  complex ones decay like ``k^{-x/D}``, so ``SPECTRAL_TERMS`` conjugate pairs leave an error
  far below 1e-12 at the switch. Both methods agree to ~1e-12 around the switch (tested).
* ``model="approx"`` -- the paper's near-saturation approximation: ``W ~ Exp(h)`` with
  ``h = 2(λ - λ²/μ)`` (no atom at 0). Its mean ``1/h = 1/(2λ(1-ρ))`` is ``E[W]/ρ``, so it
  over-states waits, more so at low load; and as ``μ -> ∞`` it tends to ``Exp(2λ)``, not 0,
  so satisfaction saturates at ``1 - e^{-2λ td}`` (formula 10 has no solution beyond).
* Disorder: the waits of different streams are taken as independent, and the arrival gap
  as exponential with a rate per consumption mode (:func:`gap_rate`); both are assumptions
  of the paper, checked against :mod:`cep_core.simulator`.
* n streams: :func:`chain_disorder` integrates the chain ``∧ W_i < W_{i+1} + t_i``
  numerically on a grid (the paper's formula 17, "Theorem 1" value), :func:`theorem2_disorder`
  is the product estimate of Theorem 2.

>>> round(mean_wait(500.0, 1000.0) * 1e3, 3)  # ms
0.5
>>> round(float(wait_cdf(0.0, 500.0, 1000.0)[0]), 3)
0.5
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from scipy import optimize, special  # type: ignore[import-untyped, unused-ignore]

Model = Literal["exact", "approx"]
MODELS = ("exact", "approx")
MODES = ("recent", "first", "chronicle", "cumulative", "continuous")
GAP_SOURCES = ("paper", "derived")

CROMMELIN_SWITCH = 8.0
"""Service times (x / D) up to which the Crommelin sum is used; the spectral series beyond."""
SPECTRAL_TERMS = 200
"""Complex-conjugate pole pairs kept in the spectral series."""

FloatArray = np.ndarray[Any, np.dtype[np.float64]]


# --------------------------------------------------------------------------- validation

def _positive(name: str, value: float) -> float:
    value = float(value)
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a positive finite number, got {value!r}")
    return value


def _check_model(model: str) -> None:
    if model not in MODELS:
        raise ValueError(f"model must be one of {MODELS}, got {model!r}")


def _check_sigma(sigma: float) -> float:
    sigma = float(sigma)
    if not 0.0 < sigma < 1.0:
        raise ValueError(f"sigma must lie in (0, 1), got {sigma!r}")
    return sigma


def utilisation(lam: float, mu: float) -> float:
    """``ρ = λ/μ`` for arrival rate ``lam`` and service rate ``mu`` (events/s); raises
    ``ValueError`` unless ``0 < ρ < 1`` (the queue is unstable at ``ρ >= 1``)."""
    lam = _positive("arrival rate λ", lam)
    mu = _positive("service rate μ", mu)
    rho = lam / mu
    if rho >= 1.0:
        raise ValueError(f"unstable queue: ρ = λ/μ = {lam:g}/{mu:g} = {rho:.4f} >= 1")
    return rho


# --------------------------------------------------------------------------- one stream

def mean_wait(lam: float, mu: float) -> float:
    """Exact mean M/D/1 waiting time ``ρ / (2μ(1-ρ))`` in seconds (formula 5)."""
    rho = utilisation(lam, mu)
    return rho / (2.0 * mu * (1.0 - rho))


def mean_latency(lam: float, mu: float) -> float:
    """Mean latency ``E[W] + 1/μ`` in seconds."""
    return mean_wait(lam, mu) + 1.0 / mu


def approx_rate(lam: float, mu: float) -> float:
    """The paper's exponential wait rate ``h = 2(λ - λ²/μ)`` in 1/s (formula 7)."""
    rho = utilisation(lam, mu)
    return 2.0 * lam * (1.0 - rho)


def _crommelin(u: FloatArray, rho: float) -> FloatArray:
    """``P(W <= u·D)`` by the finite sum, ``u`` in service times (``0 <= u``)."""
    out = np.empty_like(u)
    for j, x in enumerate(u):
        total = 0.0
        for k in range(int(math.floor(x)) + 1):
            y = rho * (k - x)  # <= 0
            total += (y ** k) / math.factorial(k) * math.exp(-y) if k else math.exp(-y)
        out[j] = (1.0 - rho) * total
    return out


def _poles(rho: float, terms: int = SPECTRAL_TERMS) -> tuple[float, np.ndarray[Any, Any]]:
    """Real pole ``z_{-1}`` and the complex ``z_k`` (k = 1..terms) of the M/D/1 transform."""
    arg = -rho * math.exp(-rho)
    z_real = float(-special.lambertw(arg, -1).real)
    ks = np.arange(1, terms + 1)
    z_cplx = -special.lambertw(arg, ks)
    return z_real, np.asarray(z_cplx)


def _spectral_tail(u: FloatArray, rho: float) -> FloatArray:
    """``P(W > u·D)`` by the residue series (accurate for ``u`` not too small)."""
    z_real, z_c = _poles(rho)
    tail = (1.0 - rho) * np.exp((rho - z_real) * u) / (z_real - 1.0)
    # a complex pole's term is at most |e^{(ρ - z_k) u_min} / (z_k - 1)|: only the first few
    # reach 1e-20 (the others underflow far below a double's resolution of 1 - tail)
    bound = np.exp((rho - z_c.real) * float(u.min())) / np.abs(z_c - 1.0)
    z_c = z_c[bound > 1e-20]
    terms = (1.0 - rho) * np.exp(np.outer(u, rho - z_c)) / (z_c - 1.0)
    return np.asarray(tail + 2.0 * terms.real.sum(axis=1), dtype=np.float64)


def decay_rate(lam: float, mu: float) -> float:
    """Exact asymptotic decay rate ``γ`` (1/s) of the M/D/1 wait: ``P(W > x) ~ C e^{-γx}``;
    ``γ`` solves ``λ(e^{γ/μ} - 1) = γ``. Compare with the paper's ``h``."""
    rho = utilisation(lam, mu)
    z_real, _ = _poles(rho, 1)
    return (z_real - rho) * mu


def wait_cdf(x: float | Sequence[float] | FloatArray, lam: float, mu: float,
             model: Model = "exact") -> FloatArray:
    """``P(W <= x)`` for waiting time(s) ``x`` in seconds (vectorised; 0 for ``x < 0``).

    ``model="exact"``: M/D/1 FIFO, atom ``1-ρ`` at 0 (see the module docstring for the
    method). ``model="approx"``: the paper's ``1 - e^{-h x}``."""
    _check_model(model)
    rho = utilisation(lam, mu)
    xs = np.atleast_1d(np.asarray(x, dtype=np.float64))
    if np.isnan(xs).any():
        raise ValueError("x contains NaN")
    out = np.zeros_like(xs)
    pos = xs >= 0
    if model == "approx":
        out[pos] = -np.expm1(-approx_rate(lam, mu) * xs[pos])
        return out
    u = xs * mu
    small = pos & (u <= CROMMELIN_SWITCH)
    large = u > CROMMELIN_SWITCH
    if small.any():
        out[small] = _crommelin(u[small], rho)
    if large.any():
        out[large] = 1.0 - _spectral_tail(u[large], rho)
    return np.clip(out, 0.0, 1.0)


def wait_sf(x: float | Sequence[float] | FloatArray, lam: float, mu: float,
            model: Model = "exact") -> FloatArray:
    """``P(W > x)`` (the complement of :func:`wait_cdf`)."""
    return 1.0 - wait_cdf(x, lam, mu, model)


def _slack(mu: float, td: float) -> float:
    mu = _positive("service rate μ", mu)
    td = _positive("deadline td", td)
    if td <= 1.0 / mu:
        raise ValueError(f"deadline td = {td:g} s is not longer than the service time "
                         f"1/μ = {1.0 / mu:g} s: no event can meet it")
    return td - 1.0 / mu


def satisfaction(mu: float, lam: float, td: float, model: Model = "exact") -> float:
    """Deadline satisfaction ``θσ(μ) = P(W <= td - 1/μ)`` (formula 9 for ``"approx"``): the
    share of a stream's events whose latency is at most ``td`` seconds."""
    slack = _slack(mu, td)
    return float(wait_cdf(slack, lam, mu, model)[0])


def min_capacity(lam: float, td: float, sigma: float, model: Model = "approx") -> float:
    """Smallest service rate ``μ`` (events/s) with ``θσ(μ) >= σ`` for deadline ``td`` (s).

    ``"approx"``: formula 10 in closed form, the larger root of
    ``(2λtd + ln(1-σ))μ² - 2λ(1+λtd)μ + 2λ² = 0``, written as
    ``μ = 2λ / (1 + λtd - sqrt((1 + λtd)² - 2(2λtd + ln(1-σ))))`` (no cancellation issue for
    the root we need). Infeasible -- ``ValueError`` -- when ``σ >= 1 - e^{-2λ td}``, the
    approximation's ceiling. ``"exact"``: root of the exact ``θσ(μ) = σ`` (always feasible)."""
    _check_model(model)
    lam = _positive("arrival rate λ", lam)
    td = _positive("deadline td", td)
    sigma = _check_sigma(sigma)
    if model == "approx":
        a = 2.0 * lam * td + math.log1p(-sigma)
        if a <= 0:
            raise ValueError(f"σ = {sigma:g} is out of reach of the paper's approximation "
                             f"for λ = {lam:g}/s, td = {td:g} s (ceiling "
                             f"{-math.expm1(-2 * lam * td):.4f})")
        b = 1.0 + lam * td
        return 2.0 * lam / (b - math.sqrt(b * b - 2.0 * a))
    lo = max(lam, 1.0 / td) * (1.0 + 1e-9)
    hi = 2.0 * lo

    def gap(m: float) -> float:
        value = satisfaction(m, lam, td, "exact")
        # at ρ -> 1 the series loses every digit; satisfaction tends to 0 there
        return (value if math.isfinite(value) else 0.0) - sigma

    if gap(lo) >= 0:  # light load: P(W = 0) = 1 - ρ already meets σ at μ just above 1/td
        return lo
    while gap(hi) < 0:
        hi *= 2.0
    return float(optimize.brentq(gap, lo, hi, xtol=1e-9 * hi, rtol=1e-12))


# --------------------------------------------------------------------------- disorder

def gap_rate(mode: str, lam1: float, lam2: float, source: str = "derived") -> float:
    """Rate (1/s) of the exponential arrival gap ``t = t_a(e2) - t_a(e1)`` between the two
    sub-events of a ``SEQ(E1, E2)`` match, for arrival rates ``lam1``, ``lam2`` (events/s).

    ``source="paper"`` (seed 002; only recent, first and cumulative are given there):
    recent mean ``1/(2 max(λ1, λ2))``; first ``1/λ2 - 1/(2λ1)`` if ``λ1 > λ2`` else
    ``1/(2λ2)``; cumulative ``1/(2λ2)``; chronicle and continuous fall back to ``"derived"``.

    ``source="derived"`` (exact for Poisson streams, no window, matches consumed as in
    :mod:`cep_core.simulator`): recent ``λ1 + λ2`` (the terminator is the first ``E2`` after
    an ``E1``, and the last ``E1`` before it is at ``min(Exp(λ1), Exp(λ2))``); first ``λ2``
    (the first ``E2`` after the first ``E1``); chronicle ``λ2 - λ1`` (each ``E1`` waits in an
    M/M/1 queue served by ``E2`` arrivals; requires ``λ1 < λ2``, otherwise the gaps grow
    without bound); cumulative ``λ1 + λ2`` (gap from the aggregate's *last* ``E1``, the one
    that decides disorder); continuous ``λ2`` (every open ``E1`` waits for the next ``E2``).
    For chains, apply it to each adjacent pair (exact for first/continuous, approximate for
    the others)."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    if source not in GAP_SOURCES:
        raise ValueError(f"source must be one of {GAP_SOURCES}, got {source!r}")
    lam1 = _positive("λ1", lam1)
    lam2 = _positive("λ2", lam2)
    if source == "paper":
        if mode == "recent":
            return 2.0 * max(lam1, lam2)
        if mode == "first":
            return 1.0 / (1.0 / lam2 - 1.0 / (2.0 * lam1)) if lam1 > lam2 else 2.0 * lam2
        if mode == "cumulative":
            return 2.0 * lam2
    if mode in ("recent", "cumulative"):
        return lam1 + lam2
    if mode in ("first", "continuous"):
        return lam2
    if lam1 >= lam2:
        raise ValueError("chronicle SEQ(E1, E2) needs λ1 < λ2: otherwise unmatched E1 pile "
                         "up and the gap has no stationary distribution")
    return lam2 - lam1


def pair_disorder(t: float | Sequence[float] | FloatArray, lam1: float, mu1: float,
                  lam2: float, mu2: float, model: Model = "approx") -> FloatArray:
    """``ω(t) = P(W1 > W2 + t)``: probability that ``e1`` (stream 1) starts after ``e2``
    (stream 2) although it arrived ``t >= 0`` seconds earlier (formula 15 for ``"approx"``:
    ``h2/(h1+h2) · e^{-h1 t}``). ``"exact"`` integrates the exact M/D/1 waits numerically."""
    _check_model(model)
    ts = np.atleast_1d(np.asarray(t, dtype=np.float64))
    if (ts < 0).any():
        raise ValueError("arrival gaps t must be >= 0")
    if model == "approx":
        h1, h2 = approx_rate(lam1, mu1), approx_rate(lam2, mu2)
        return np.asarray(h2 / (h1 + h2) * np.exp(-h1 * ts), dtype=np.float64)
    grid = WaitGrid.build([(lam1, mu1), (lam2, mu2)], "exact")
    atom2, mass2 = grid.masses(lam2, mu2, "exact")
    # P(W1 > W2 + t) = atom2·S1(t) + Σ_j mass2_j · S1(w_j + t)
    s1 = wait_sf(np.add.outer(ts, np.concatenate(([0.0], grid.mid))).ravel(), lam1, mu1,
                 "exact").reshape(len(ts), -1)
    return np.asarray(s1 @ np.concatenate(([atom2], mass2)), dtype=np.float64)


def avg_pair_disorder(lam1: float, mu1: float, lam2: float, mu2: float, gap: float,
                      model: Model = "approx") -> float:
    """``ω_avg = ∫ f(t) ω(t) dt`` (formula 16) for an exponential gap of rate ``gap`` (1/s).
    ``"approx"`` in closed form: ``h2/(h1+h2) · gap/(gap + h1)``."""
    _check_model(model)
    gap = _positive("gap rate", gap)
    if model == "approx":
        h1, h2 = approx_rate(lam1, mu1), approx_rate(lam2, mu2)
        return h2 / (h1 + h2) * gap / (gap + h1)
    return chain_disorder([lam1, lam2], [mu1, mu2], [gap], "exact")


@dataclass(frozen=True)
class WaitGrid:
    """A common grid (cell width ``step`` seconds, cell midpoints ``mid``) on which the wait
    distributions of several streams are discretised for :func:`chain_disorder`."""

    step: float
    mid: FloatArray = field(repr=False)

    @staticmethod
    def build(streams: Sequence[tuple[float, float]], model: Model, cells: int = 1200,
              tail: float = 1e-10) -> WaitGrid:
        """Grid to the point where every stream's ``P(W > x) < tail``."""
        horizon = 0.0
        for lam, mu in streams:
            rho = utilisation(lam, mu)
            rate = approx_rate(lam, mu) if model == "approx" else decay_rate(lam, mu)
            horizon = max(horizon, math.log(max(rho, 1e-300) / tail) / rate + 1.0 / mu)
        step = horizon / cells
        mid = (np.arange(cells, dtype=np.float64) + 0.5) * step
        return WaitGrid(step, mid)

    def masses(self, lam: float, mu: float, model: Model) -> tuple[float, FloatArray]:
        """(atom at 0, probability of each cell) of the wait of stream (lam, mu)."""
        edges = np.arange(len(self.mid) + 1, dtype=np.float64) * self.step
        cdf = wait_cdf(edges, lam, mu, model)
        atom = float(cdf[0])
        cell = np.diff(cdf)
        cell[-1] += 1.0 - cdf[-1]
        return atom, cell


def chain_disorder(lams: Sequence[float], mus: Sequence[float], gaps: Sequence[float],
                   model: Model = "approx", grid: WaitGrid | None = None) -> float:
    """Disorder rate of ``SEQ(E1, .., En)``: ``1 - P(W_i < W_{i+1} + t_i for all i)`` with
    independent waits ``W_i`` (M/D/1 of ``λ_i, μ_i``, exact or approximate) and independent
    exponential gaps ``t_i`` of rates ``gaps[i]`` (1/s) -- the paper's formula 17, evaluated
    by backward recursion on a grid of the waits (``φ_n = 1``,
    ``φ_i(w) = E[1{w < W_{i+1} + t_i} φ_{i+1}(W_{i+1})]``, ``ω = 1 - E[φ_1(W_1)]``).
    Pass a fixed ``grid`` to keep it smooth in ``mus`` (the optimiser does)."""
    _check_model(model)
    n = len(lams)
    if n < 2 or len(mus) != n or len(gaps) != n - 1:
        raise ValueError("need n >= 2 arrival rates, n service rates and n-1 gap rates")
    pairs = list(zip(lams, mus, strict=True))
    for lam, mu in pairs:
        utilisation(lam, mu)
    rates = [_positive("gap rate", g) for g in gaps]
    if grid is None:
        grid = WaitGrid.build(pairs, model)
    points = np.concatenate(([0.0], grid.mid))
    probs = []
    for lam, mu in pairs:
        atom, cell = grid.masses(lam, mu, model)
        probs.append(np.concatenate(([atom], cell)))
    phi = np.ones_like(points)
    for i in range(n - 2, -1, -1):
        phi = _gap_kernel(points, rates[i], probs[i + 1] * phi)
    return float(np.clip(1.0 - probs[0] @ phi, 0.0, 1.0))


def _gap_kernel(points: FloatArray, rate: float, x: FloatArray) -> FloatArray:
    """``y_j = Σ_k K(p_j, p_k) x_k`` with ``K(w, v) = P(w < v + t)`` for ``t ~ Exp(rate)``:
    1 where ``v >= w``, ``exp(-rate (w - v))`` where ``v < w``; ``points`` ascending.
    O(n): a suffix sum plus the exponentially weighted prefix sum
    ``E_j = exp(-rate (p_j - p_{j-1})) E_{j-1} + x_j`` (factors <= 1: stable). The n x n
    kernel matrix it replaces cost ~0.2 s per call at 1,200 cells."""
    after = np.cumsum(x[::-1])[::-1] - x  # Σ_{k > j} x_k
    decay = np.exp(-rate * np.diff(points)).tolist()
    values = x.tolist()
    weighted = [values[0]]
    for a, value in zip(decay, values[1:], strict=True):
        weighted.append(a * weighted[-1] + value)
    return np.asarray(after + np.asarray(weighted), dtype=np.float64)


def theorem2_disorder(lams: Sequence[float], mus: Sequence[float], gaps: Sequence[float],
                      model: Model = "approx") -> float:
    """Theorem 2's estimate ``1 - Π_i (1 - ω_avg(E_i, E_{i+1}))`` (adjacent pairs taken as
    independent; good only when disorder is low)."""
    n = len(lams)
    if n < 2 or len(mus) != n or len(gaps) != n - 1:
        raise ValueError("need n >= 2 arrival rates, n service rates and n-1 gap rates")
    keep = 1.0
    for i in range(n - 1):
        keep *= 1.0 - avg_pair_disorder(lams[i], mus[i], lams[i + 1], mus[i + 1], gaps[i],
                                        model)
    return 1.0 - keep


def chain_gap_rates(lams: Sequence[float], mode: str, source: str = "derived") -> list[float]:
    """:func:`gap_rate` for every adjacent pair of ``SEQ(E1, .., En)``."""
    return [gap_rate(mode, lams[i], lams[i + 1], source) for i in range(len(lams) - 1)]


# --------------------------------------------------------------------------- two streams

def two_stream_objective(mu2: float, mu: float, lam1: float, lam2: float, td: float,
                         mode: str = "first", k: float = 1.0, model: Model = "approx",
                         gap_source: str = "derived") -> float:
    """``θσ(μ2) · (1 - ω_avg(μ1, μ2))`` with ``μ1 = μ - k·μ2``: the share of ``SEQ(E1, E2)``
    results that are on time and correct (``k`` = cost of an ``E2`` in ``E1`` units).
    Returns 0 where a stream would be unstable or ``td <= 1/μ2``."""
    mu1 = mu - k * mu2
    if mu1 <= lam1 or mu2 <= lam2 or td <= 1.0 / mu2:
        return 0.0
    theta = satisfaction(mu2, lam2, td, model)
    gap = gap_rate(mode, lam1, lam2, gap_source)
    return theta * (1.0 - avg_pair_disorder(lam1, mu1, lam2, mu2, gap, model))


@dataclass(frozen=True)
class StepSearch:
    """Result of :func:`step_search`: the best point, its value, the steps evaluated."""

    x: float
    value: float
    steps: int


def step_search(objective: Callable[[float], float], lo: float, hi: float,
                gamma: int = 20) -> StepSearch:
    """The paper's step search: walk ``x = lo, lo + (hi-lo)/Γ, ..`` upwards and stop at the
    first decrease (the turning point of a unimodal objective); at most ``Γ + 1`` steps."""
    if gamma < 1:
        raise ValueError("gamma must be >= 1")
    if not hi > lo:
        raise ValueError("need lo < hi")
    step = (hi - lo) / gamma
    best_x, best = lo, objective(lo)
    steps = 1
    for j in range(1, gamma + 1):
        x = lo + j * step
        value = objective(x)
        steps += 1
        if value < best:
            break
        best_x, best = x, value
    return StepSearch(best_x, best, steps)


@dataclass(frozen=True)
class TwoStreamOptimum:
    """Optimum of :func:`two_stream_objective` (rates in events/s)."""

    mu1: float
    mu2: float
    value: float
    step: StepSearch


def optimise_two_streams(mu: float, lam1: float, lam2: float, td: float,
                         mode: str = "first", k: float = 1.0, model: Model = "approx",
                         gap_source: str = "derived", gamma: int = 20) -> TwoStreamOptimum:
    """Maximise :func:`two_stream_objective` over ``λ2 < μ2`` with ``μ1 > λ1``: bounded
    scalar optimisation (Brent) started from the ``Γ``-step search's bracket."""
    mu = _positive("total capacity μ", mu)
    lo = max(lam2, 1.0 / td) * (1.0 + 1e-9)
    hi = (mu - lam1) / k * (1.0 - 1e-9)
    if not hi > lo:
        raise ValueError(f"capacity μ = {mu:g} cannot keep both streams stable")

    def f(m2: float) -> float:
        return two_stream_objective(m2, mu, lam1, lam2, td, mode, k, model, gap_source)

    coarse = step_search(f, lo, hi, gamma)
    width = (hi - lo) / gamma
    res = optimize.minimize_scalar(lambda m: -f(m), method="bounded",
                                   bounds=(max(lo, coarse.x - width), min(hi, coarse.x + width)),
                                   options={"xatol": 1e-6 * mu})
    m2 = float(res.x) if -float(res.fun) >= coarse.value else coarse.x
    return TwoStreamOptimum(mu - k * m2, m2, f(m2), coarse)


# --------------------------------------------------------------------------- n streams

@dataclass(frozen=True)
class Allocation:
    """Theorem 1 allocation: ``mus`` (events/s), the numeric disorder ``omega`` at it
    (formula 17) and Theorem 2's estimate ``omega_estimate`` at the same point."""

    mus: tuple[float, ...]
    omega: float
    omega_estimate: float
    success: bool
    evaluations: int


def theorem1_allocation(lams: Sequence[float], mu: float, mu_min: Sequence[float],
                        gaps: Sequence[float], model: Model = "approx",
                        objective: Literal["theorem1", "theorem2"] = "theorem1") -> Allocation:
    """Minimise the disorder of ``SEQ(E1, .., En)`` subject to ``Σ μ_i = μ``,
    ``μ_i >= mu_min[i]`` (Theorem 1): ``μ_n`` is pinned to ``mu_min[n-1]`` (lowering the
    terminator's capacity only lowers disorder) and the rest is solved with SLSQP.
    ``objective="theorem2"`` minimises Theorem 2's estimate instead."""
    n = len(lams)
    if n < 2 or len(mu_min) != n or len(gaps) != n - 1:
        raise ValueError("need n >= 2 arrival rates, n minimum rates and n-1 gap rates")
    mu = _positive("total capacity μ", mu)
    for lam, m in zip(lams, mu_min, strict=True):
        if m <= lam:
            raise ValueError(f"minimum rate {m:g} must exceed the arrival rate {lam:g}")
    free = mu - mu_min[-1]
    lows = np.array(mu_min[:-1], dtype=np.float64)
    if free <= lows.sum():
        raise ValueError("total capacity is below the sum of the minimum rates")
    grid = WaitGrid.build(list(zip(lams, mu_min, strict=True)), model)
    count = 0

    def omega(x: FloatArray) -> float:
        nonlocal count
        count += 1
        mus = [*np.maximum(x, lows), mu_min[-1]]
        if objective == "theorem2":
            return theorem2_disorder(lams, mus, gaps, model)
        return chain_disorder(lams, mus, gaps, model, grid)

    if n == 2:
        x = np.array([free])
        return Allocation((free, float(mu_min[-1])), omega(x),
                          theorem2_disorder(lams, [free, mu_min[-1]], gaps, model), True, 1)
    spare = free - lows.sum()
    x0 = lows + spare / (n - 1)
    scale = float(mu)
    res = optimize.minimize(lambda y: omega(y * scale), x0 / scale, method="SLSQP",
                            bounds=[(lo / scale, free / scale) for lo in lows],
                            constraints=[{"type": "eq",
                                          "fun": lambda y: float(y.sum() - free / scale)}],
                            options={"ftol": 1e-10, "maxiter": 200})
    x = np.maximum(np.asarray(res.x) * scale, lows)
    x *= free / x.sum()
    mus = (*(float(v) for v in x), float(mu_min[-1]))
    return Allocation(mus, chain_disorder(lams, mus, gaps, model, grid),
                      theorem2_disorder(lams, mus, gaps, model), bool(res.success), count)


@dataclass(frozen=True)
class NStreamPlan:
    """Result of :func:`allocate`: the chosen allocation and the objective
    ``θσ(μ_n)·(1 - ω)`` at each step of the ``Γ``-step search over ``μ_n``."""

    allocation: Allocation
    value: float
    trace: list[tuple[float, float]]


def allocate(lams: Sequence[float], mu: float, td: float, mu_min: Sequence[float],
             mode: str = "first", model: Model = "approx", gap_source: str = "derived",
             gamma: int = 20) -> NStreamPlan:
    """The paper's allocation loop (algorithm 1): step ``μ_n`` upwards from ``mu_min[-1]``
    in ``Γ`` steps; at each, give the rest to ``E1..E_{n-1}`` by Theorem 1 and evaluate
    ``θσ(μ_n)·(1 - ω)``; stop at the turning point."""
    gaps = chain_gap_rates(lams, mode, gap_source)
    lo = max(float(mu_min[-1]), (1.0 + 1e-6) / td)
    hi = mu - float(sum(mu_min[:-1])) * (1.0 + 1e-6)
    trace: list[tuple[float, float]] = []
    plans: dict[float, Allocation] = {}

    def f(mn: float) -> float:
        alloc = theorem1_allocation(lams, mu, [*mu_min[:-1], mn], gaps, model)
        plans[mn] = alloc
        value = satisfaction(mn, lams[-1], td, model) * (1.0 - alloc.omega)
        trace.append((mn, value))
        return value

    best = step_search(f, lo, hi, gamma)
    return NStreamPlan(plans[best.x], best.value, trace)


# Rates chosen for table 1 (the paper gives μ and μ_n only); see docs/allocation.md.
TABLE1_RATES: dict[int, tuple[float, ...]] = {3: (1000.0, 1000.0, 1000.0),
                                              4: (1000.0, 1000.0, 1000.0, 1000.0)}


def table1(mu: float = 6000.0, mu_n: float = 1200.0,
           rates: dict[int, tuple[float, ...]] | None = None, mode: str = "first",
           gap_source: str = "paper", model: Model = "approx",
           headroom: float = 1.02) -> list[dict[str, Any]]:
    """Rows shaped like the paper's table 1: for SEQ(E1..E3) and SEQ(E1..E4) with total
    capacity ``mu`` and the terminator pinned at ``mu_n``, the Theorem 1 allocation, its
    numeric disorder and Theorem 2's estimate (plus the allocation that minimises the
    estimate). ``mu_min`` of the non-terminators is ``headroom · λ_i``."""
    rows = []
    for n, lams in sorted((rates or TABLE1_RATES).items()):
        gaps = chain_gap_rates(lams, mode, gap_source)
        mins = [headroom * lam for lam in lams[:-1]] + [mu_n]
        t1 = theorem1_allocation(lams, mu, mins, gaps, model)
        t2 = theorem1_allocation(lams, mu, mins, gaps, model, objective="theorem2")
        rows.append({"n": n, "lambdas": list(lams), "mus": [round(m, 1) for m in t1.mus],
                     "omega_numeric": t1.omega, "omega_estimate": t1.omega_estimate,
                     "mus_theorem2": [round(m, 1) for m in t2.mus],
                     "omega_at_theorem2": t2.omega, "success": t1.success})
    return rows
