"""Seed 003's event model, statistics, cost model and latency model (pure).

Patterns are trees of :class:`Event` (a primitive event type), :class:`And`, :class:`Seq`
(both with a window ``w``), :class:`Or` and :class:`Not` (a negated primitive, only directly
inside ``And`` / ``Seq``). The exact semantics and the derivation of every formula are in
``docs/acquisition.md``; in short, for a node whose *positive* sub-events are ``S``:

* a plan is an ordered partition ``T_1, ..., T_m`` of ``S`` (the steps), followed by one
  forced step with the negated sub-events (if any);
* step 1 reads its sub-events over the whole horizon ``[0, H]``; a later step reads
  sub-event ``k`` only where a match is still possible: at times ``t`` such that every
  sub-event ``i`` of an earlier step has an occurrence in the window ``W_ik`` around ``t``
  (``[t - w, t + w]`` inside ``And``; inside ``Seq`` ``[t - w, t]`` when ``i`` comes before
  ``k`` and ``[t, t + w]`` when after), clipped to the horizon. That region is a union of
  merged intervals, so each row is read once;
* expected rows read by sub-event ``k`` at a step after the sub-events ``U`` =
  ``keys * u_k * M_k(U)`` where ``u_k`` is its rate (rows per unit time and key) and
  ``M_k(U) = integral over [0, H] of prod_{i in U} (1 - miss_i(|W_ik(t)|)) dt`` with
  ``miss_i(L)`` the probability of no occurrence of ``i`` in a window of length ``L``
  (``exp(-rate L)`` for Poisson);
* latency of a plan = sum over its steps of the step's delay (the largest delay of its
  members: a primitive's type delay, default ``step_delay``; a complex sub-event's own plan
  latency).

Cost and latency of a plan prefix followed by one more step are the prefix's plus a
non-negative increment that depends only on the *set* of sub-events acquired before it,
which is what the optimal-substructure lemma of Algorithm 1 needs.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
import numpy.typing as npt

Floats = npt.NDArray[np.float64]


class PlanningError(ValueError):
    """A pattern, statistics or plan that the acquisition planner cannot use."""


# ----------------------------------------------------------------------------- patterns


@dataclass(frozen=True)
class Event:
    """A primitive event type (the instants of a primitive event are points)."""

    type: str

    def __str__(self) -> str:
        return self.type


@dataclass(frozen=True)
class Not:
    """Negation of a primitive event type; only directly inside :class:`And` / :class:`Seq`."""

    event: Event

    def __str__(self) -> str:
        return f"!{self.event}"


@dataclass(frozen=True)
class And:
    """``and(e1, ..., en; w)``: one occurrence of each positive sub-event, any order, at most
    ``window`` between any two; no occurrence of a negated one inside the match's interval."""

    children: tuple[Pattern | Not, ...]
    window: float

    def __str__(self) -> str:
        return f"and({', '.join(map(str, self.children))}; {self.window:g})"


@dataclass(frozen=True)
class Seq:
    """``seq(e1, ..., en; w)``: the positive sub-events in this order within ``window``; a
    negated sub-event must not occur between its neighbours."""

    children: tuple[Pattern | Not, ...]
    window: float

    def __str__(self) -> str:
        return f"seq({', '.join(map(str, self.children))}; {self.window:g})"


@dataclass(frozen=True)
class Or:
    """``or(e1, ..., en)``: any one sub-event (no negation inside)."""

    children: tuple[Pattern, ...]

    def __str__(self) -> str:
        return f"or({', '.join(map(str, self.children))})"


Pattern = Event | And | Seq | Or


def and_(*children: Pattern | Not | str, window: float) -> And:
    return And(tuple(_child(c) for c in children), float(window))


def seq(*children: Pattern | Not | str, window: float) -> Seq:
    return Seq(tuple(_child(c) for c in children), float(window))


def or_(*children: Pattern | str) -> Or:
    out = tuple(_child(c) for c in children)
    if any(isinstance(c, Not) for c in out):
        raise PlanningError("negation cannot be used inside or(...)")
    return Or(out)  # type: ignore[arg-type]


def not_(event: Event | str) -> Not:
    return Not(Event(event) if isinstance(event, str) else event)


def _child(c: Pattern | Not | str) -> Pattern | Not:
    if isinstance(c, str):
        return not_(c[1:]) if c.startswith("!") else Event(c)
    return c


def validate(p: Pattern) -> None:
    """Raise :class:`PlanningError` for a pattern the planner cannot use."""
    if isinstance(p, Event):
        if not p.type:
            raise PlanningError("an event type needs a name")
        return
    if isinstance(p, Or):
        if not p.children:
            raise PlanningError("or() needs at least one sub-event")
        for c in p.children:
            if isinstance(c, Not):
                raise PlanningError("negation cannot be used inside or(...)")
            validate(c)
        return
    if not p.window > 0 or not math.isfinite(p.window):
        raise PlanningError(f"{p}: the window must be a positive number")
    positive = [c for c in p.children if not isinstance(c, Not)]
    if not positive:
        raise PlanningError(f"{p}: needs at least one positive sub-event")
    labels = [str(c) for c in p.children]
    if len(set(labels)) != len(labels):
        raise PlanningError(f"{p}: a sub-event occurs twice; rename one of them")
    for c in positive:
        validate(c)


def primitive_types(p: Pattern | Not) -> list[str]:
    """Every primitive type of ``p`` (negated ones included), in order, without repeats."""
    if isinstance(p, Event):
        return [p.type]
    if isinstance(p, Not):
        return [p.event.type]
    out: list[str] = []
    for c in p.children:
        for t in primitive_types(c):
            if t not in out:
                out.append(t)
    return out


# ----------------------------------------------------------------------------- statistics


class Distribution(Protocol):
    """Occurrence statistics of one sub-event (per key): mean rate and P(no occurrence in a
    window of a given length)."""

    @property
    def rate(self) -> float: ...

    def miss(self, length: Floats) -> Floats: ...


@dataclass(frozen=True)
class Poisson:
    """A Poisson process with ``rate`` occurrences per unit of time (and key)."""

    rate: float

    def __post_init__(self) -> None:
        if not self.rate >= 0 or not math.isfinite(self.rate):
            raise PlanningError(f"a rate must be a finite number >= 0, not {self.rate}")

    def miss(self, length: Floats) -> Floats:
        return np.exp(-self.rate * np.asarray(length, dtype=np.float64))


@dataclass(frozen=True)
class Histogram:
    """Empirical distribution of the counts per interval of length ``interval`` (one count
    per observed interval, e.g. from the statistics table). Occurrences are taken as uniform
    inside an interval and intervals as independent, so a window of length ``L = q * interval
    + r`` (``0 <= r < interval``) is empty with probability ``G(0) ** q * G(1 - r / interval)``
    where ``G`` is the probability generating function of the counts."""

    counts: tuple[int, ...]
    interval: float

    def __post_init__(self) -> None:
        if not self.counts or any(c < 0 for c in self.counts):
            raise PlanningError("a histogram needs at least one count, all >= 0")
        if not self.interval > 0:
            raise PlanningError("a histogram's interval must be > 0")

    @property
    def rate(self) -> float:
        return float(np.mean(self.counts)) / self.interval

    def _pgf(self, z: Floats) -> Floats:
        values, freq = np.unique(np.asarray(self.counts), return_counts=True)
        probs = freq / freq.sum()
        out: Floats = (probs[None, :] * np.power(z[..., None], values[None, :])).sum(axis=-1)
        return out

    def miss(self, length: Floats) -> Floats:
        length = np.asarray(length, dtype=np.float64)
        q = np.floor(length / self.interval)
        r = length - q * self.interval
        g0 = float(self._pgf(np.zeros(1))[0])
        out: Floats = np.power(g0, q) * self._pgf(1.0 - r / self.interval)
        return out


@dataclass(frozen=True)
class Statistics:
    """Per-type occurrence statistics over a horizon ``[0, horizon]`` for ``keys`` keys (the
    rates are per key; events of different keys never combine)."""

    types: Mapping[str, Distribution]
    horizon: float
    keys: int = 1

    def __post_init__(self) -> None:
        if not self.horizon > 0 or not math.isfinite(self.horizon):
            raise PlanningError("the horizon must be a positive number")
        if self.keys < 1:
            raise PlanningError("keys must be >= 1")

    @classmethod
    def poisson(cls, rates: Mapping[str, float], horizon: float, keys: int = 1) -> Statistics:
        return cls({t: Poisson(float(r)) for t, r in rates.items()}, float(horizon), keys)

    def of(self, event_type: str) -> Distribution:
        try:
            return self.types[event_type]
        except KeyError:
            raise PlanningError(f"no statistics for event type {event_type!r}") from None


@dataclass(frozen=True)
class LatencyModel:
    """A step's delay is the largest delay of its primitive members (``type_delay``, default
    ``step_delay``) and of its complex members' plans; a plan's latency is the sum of its
    steps' delays (so with no type delays: steps x step delay)."""

    step_delay: float = 1.0
    type_delay: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.step_delay >= 0 or any(not d >= 0 for d in self.type_delay.values()):
            raise PlanningError("delays must be >= 0")

    def of(self, event_type: str) -> float:
        return float(self.type_delay.get(event_type, self.step_delay))


# ----------------------------------------------------------------------------- measure

_GL_X, _GL_W = np.polynomial.legendre.leggauss(16)


@dataclass(frozen=True)
class Requirement:
    """Occurrences of one sub-event needed in each of ``windows`` (offsets ``(lo, hi)``
    relative to ``t``, ``lo <= 0 <= hi``) for ``t`` to be in a region."""

    dist: Distribution
    windows: tuple[tuple[float, float], ...]


def _hit_all(req: Requirement, t: Floats, horizon: float) -> Floats:
    """P(every window of ``req`` around ``t`` (clipped to [0, H]) holds an occurrence).

    All windows contain ``t``, so the union of any subset is the interval from the smallest
    ``lo`` to the largest ``hi``; inclusion-exclusion over the windows."""
    ws = req.windows
    total = np.zeros_like(t)
    for mask in range(1 << len(ws)):
        chosen = [ws[i] for i in range(len(ws)) if mask >> i & 1]
        sign = -1.0 if len(chosen) % 2 else 1.0
        if not chosen:
            total += 1.0
            continue
        lo = min(c[0] for c in chosen)
        hi = max(c[1] for c in chosen)
        length = np.minimum(t + hi, horizon) - np.maximum(t + lo, 0.0)
        total += sign * req.dist.miss(np.maximum(length, 0.0))
    return total


def expected_measure(requirements: Sequence[Requirement], horizon: float) -> float:
    """``E |{t in [0, H] : every requirement holds at t}|`` for independent sub-events.

    The integrand is smooth between the points where a window meets an end of the horizon,
    so the integral is a 16-point Gauss-Legendre rule on each of those pieces."""
    if not requirements:
        return float(horizon)
    cuts = {0.0, float(horizon)}
    for r in requirements:
        for lo, hi in r.windows:
            for cut in (-lo, horizon - hi):
                if 0.0 < cut < horizon:
                    cuts.add(float(cut))
    edges = np.array(sorted(cuts))
    a, b = edges[:-1], edges[1:]
    t = ((b - a)[:, None] * (_GL_X[None, :] + 1.0) / 2.0 + a[:, None])
    values = np.ones_like(t)
    for r in requirements:
        values *= _hit_all(r, t, horizon)
    return float((values * _GL_W[None, :] * ((b - a)[:, None] / 2.0)).sum())


# ----------------------------------------------------------------------------- node view


@dataclass(frozen=True)
class Option:
    """One way of acquiring a sub-event: ``unit_cost`` rows per unit of time (and key) of the
    region it is acquired over, the delay of the step that acquires it, and (for a complex
    sub-event) the plan it stands for."""

    unit_cost: float
    latency: float
    plan: AcquisitionPlan | None = None


@dataclass(frozen=True)
class Item:
    """A sub-event of a node: label, position among the node's children, occurrence
    statistics (for the regions of later steps) and the ways to acquire it."""

    label: str
    position: int
    dist: Distribution
    options: tuple[Option, ...]


@dataclass(frozen=True)
class AcquisitionPlan:
    """A plan for one pattern node: ``steps`` are labels of sub-events (the negated ones form
    the last step, labelled ``!T``); ``children`` the plan chosen for each complex sub-event;
    ``cost`` expected rows read over the horizon for all keys; ``latency`` its delay."""

    pattern: str
    steps: tuple[tuple[str, ...], ...]
    cost: float
    latency: float
    children: tuple[tuple[str, AcquisitionPlan], ...] = ()

    def __str__(self) -> str:
        body = " -> ".join("{" + ", ".join(s) + "}" for s in self.steps)
        return f"{body}  (cost {self.cost:.4g}, latency {self.latency:.4g})"


class NodeModel:
    """Cost model of one ``And`` / ``Seq`` node over its items (its positive sub-events, in
    child order) and its negated items.

    Every window of a node is ``(-w, w)``, ``(-w, 0)`` or ``(0, w)``, so the integrand of
    ``M_k(U)`` is smooth between the fixed points ``0, w, H - w, H``: the node evaluates each
    item's hit probabilities once on a fixed Gauss-Legendre grid and ``M_k(U)`` is a weighted
    sum of their products (cached per set of earlier items)."""

    def __init__(self, kind: str, window: float, items: Sequence[Item],
                 negated: Sequence[Item], stats: Statistics, label: str):
        if kind not in ("and", "seq"):
            raise PlanningError(f"unknown node kind {kind!r}")
        self.kind = kind
        self.window = float(window)
        self.items = list(items)
        self.negated = list(negated)
        self.stats = stats
        self.label = label
        self.n = len(self.items)
        h, w = stats.horizon, self.window
        cuts = sorted({0.0, h} | {b for b in (w, h - w) if 0.0 < b < h})
        edges = np.array(cuts)
        a, b = edges[:-1], edges[1:]
        self._t = ((b - a)[:, None] * (_GL_X[None, :] + 1.0) / 2.0 + a[:, None]).ravel()
        self._w = (_GL_W[None, :] * ((b - a)[:, None] / 2.0)).ravel()
        wins = {"sym": (-w, w), "minus": (-w, 0.0), "plus": (0.0, w)}
        self._f = {name: [_hit_all(Requirement(i.dist, (win,)), self._t, h) for i in self.items]
                   for name, win in wins.items()}
        self._prod: dict[tuple[str, int], Floats] = {}
        self._cache: dict[tuple[int, int], float] = {}
        self._neg_cache: float | None = None
        self._step_cache: dict[tuple[int, int], float] = {}
        self._lat_cache: dict[int, float] = {}

    def _product(self, name: str, mask: int) -> Floats:
        key = (name, mask)
        hit = self._prod.get(key)
        if hit is None:
            if mask == 0:
                hit = np.ones_like(self._t)
            else:
                low = (mask & -mask).bit_length() - 1
                hit = self._product(name, mask & (mask - 1)) * self._f[name][low]
            self._prod[key] = hit
        return hit

    def _before(self, position: int) -> int:
        return sum(1 << i for i, it in enumerate(self.items) if it.position < position)

    def measure_at(self, position: int, mask: int) -> float:
        """``M`` of a sub-event at child ``position`` after the items in bit mask ``mask``."""
        if self.kind == "and":
            vec = self._product("sym", mask)
        else:
            before = self._before(position)
            vec = self._product("minus", mask & before) * self._product("plus", mask & ~before)
        return float(vec @ self._w)

    def region(self, target: Item, earlier: Sequence[Item]) -> float:
        """``M_target(earlier)`` straight from :func:`expected_measure` (the reference the
        fast path is tested against)."""
        def window(i: Item) -> tuple[float, float]:
            w = self.window
            if self.kind == "and":
                return (-w, w)
            return (-w, 0.0) if i.position < target.position else (0.0, w)
        return expected_measure([Requirement(i.dist, (window(i),)) for i in earlier],
                                self.stats.horizon)

    def measure(self, k: int, mask: int) -> float:
        """``M_k(U)`` for item index ``k`` and the earlier items in bit mask ``mask``."""
        key = (k if self.kind == "seq" else -1, mask)
        hit = self._cache.get(key)
        if hit is None:
            hit = self.measure_at(self.items[k].position, mask)
            self._cache[key] = hit
        return hit

    def negation_cost(self) -> float:
        """Rows read by the negated sub-events (the forced last step) for all keys."""
        if self._neg_cache is None:
            total = 0.0
            for x in self.negated:
                total += x.options[0].unit_cost * self.measure_at(x.position,
                                                                  (1 << self.n) - 1)
            self._neg_cache = total * self.stats.keys
        return self._neg_cache

    def negation_latency(self) -> float:
        return max((x.options[0].latency for x in self.negated), default=0.0)

    def step_cost(self, step: int, before: int, choice: Mapping[int, Option] | None = None
                  ) -> float:
        """Rows read (all keys) by step ``step`` (a bit mask) after the items in ``before``."""
        if choice is None:
            hit = self._step_cache.get((step, before))
            if hit is None:
                hit = self._step_cost(step, before, None)
                self._step_cache[(step, before)] = hit
            return hit
        return self._step_cost(step, before, choice)

    def _step_cost(self, step: int, before: int, choice: Mapping[int, Option] | None) -> float:
        total = 0.0
        for k in range(self.n):
            if step >> k & 1:
                opt = choice[k] if choice is not None else self.items[k].options[0]
                total += opt.unit_cost * self.measure(k, before)
        return total * self.stats.keys

    def step_latency(self, step: int, choice: Mapping[int, Option] | None = None) -> float:
        if choice is None:
            hit = self._lat_cache.get(step)
            if hit is None:
                hit = self._step_latency(step, None)
                self._lat_cache[step] = hit
            return hit
        return self._step_latency(step, choice)

    def _step_latency(self, step: int, choice: Mapping[int, Option] | None) -> float:
        return max((choice[k] if choice is not None else self.items[k].options[0]).latency
                   for k in range(self.n) if step >> k & 1)

    def evaluate(self, steps: Sequence[int], choice: Mapping[int, Option] | None = None
                 ) -> tuple[float, float]:
        """(cost, latency) of the ordered steps (bit masks), negation step included."""
        cost = latency = 0.0
        before = 0
        for s in steps:
            cost += self.step_cost(s, before, choice)
            latency += self.step_latency(s, choice)
            before |= s
        if self.negated:
            cost += self.negation_cost()
            latency += self.negation_latency()
        return cost, latency

    def make_plan(self, steps: Sequence[int], choice: Mapping[int, Option] | None = None
                  ) -> AcquisitionPlan:
        cost, latency = self.evaluate(steps, choice)
        labels = [tuple(self.items[k].label for k in range(self.n) if s >> k & 1)
                  for s in steps]
        if self.negated:
            labels.append(tuple(f"!{x.label}" for x in self.negated))
        children = []
        for k in range(self.n):
            opt = choice[k] if choice is not None else self.items[k].options[0]
            if opt.plan is not None:
                children.append((self.items[k].label, opt.plan))
        return AcquisitionPlan(self.label, tuple(labels), cost, latency, tuple(children))


def occurrence_rate(kind: str, window: float, dists: Sequence[Distribution],
                    negated: Sequence[Distribution] = ()) -> float:
    """Approximate rate of a node's matches, used when the node is a sub-event of a parent
    (``docs/acquisition.md``): and = sum_k r_k prod_{i != k} (1 - miss_i(w)); seq = r_n
    prod_{i < n} (1 - miss_i(w)); each negated sub-event multiplies by miss_x(w)."""
    w = np.array([window])
    hits = [1.0 - float(d.miss(w)[0]) for d in dists]
    if kind == "and":
        rate = sum(d.rate * math.prod(h for j, h in enumerate(hits) if j != i)
                   for i, d in enumerate(dists))
    elif kind == "seq":
        rate = dists[-1].rate * math.prod(hits[:-1])
    else:
        rate = sum(d.rate for d in dists)
    for x in negated:
        rate *= float(x.miss(w)[0])
    return rate


# ----------------------------------------------------------------------------- text form


def parse_pattern(text: str, window: Callable[[str], float] = float) -> Pattern:
    """A pattern from its text form, e.g. ``seq(door, badge, !alarm, motion; 30)`` or
    ``and(seq(a, b; 5), or(c, d); 20)``: operators ``and`` / ``seq`` (sub-events, ``;`` and a
    window), ``or`` (sub-events), ``!type`` for negation, event types as names. ``window``
    turns the window text into a number (default ``float``; the gold job passes durations
    such as ``10 minutes`` in seconds)."""
    pos = 0

    def fail(why: str) -> PlanningError:
        return PlanningError(f"pattern {text!r} at character {pos}: {why}")

    def skip() -> None:
        nonlocal pos
        while pos < len(text) and text[pos].isspace():
            pos += 1

    def name() -> str:
        nonlocal pos
        skip()
        start = pos
        while pos < len(text) and (text[pos].isalnum() or text[pos] in "_.-:"):
            pos += 1
        if start == pos:
            raise fail("expected an event type or an operator")
        return text[start:pos]

    def node() -> Pattern | Not:
        nonlocal pos
        skip()
        if text.startswith("!", pos):
            pos += 1
            return not_(name())
        word = name()
        skip()
        if not text.startswith("(", pos):
            return Event(word)
        op = word.lower()
        if op not in ("and", "seq", "or"):
            raise fail(f"unknown operator {word!r} (use and, seq, or)")
        pos += 1
        children: list[Pattern | Not] = []
        win: float | None = None
        while True:
            children.append(node())
            skip()
            if text.startswith(",", pos):
                pos += 1
                continue
            if text.startswith(";", pos):
                end = text.find(")", pos)
                if end < 0:
                    raise fail("missing ')'")
                try:
                    win = float(window(text[pos + 1:end].strip()))
                except (TypeError, ValueError) as exc:
                    raise fail(f"bad window {text[pos + 1:end].strip()!r}: {exc}") from None
                pos = end
            skip()
            if not text.startswith(")", pos):
                raise fail("expected ',', ';' or ')'")
            pos += 1
            break
        if op == "or":
            if win is not None:
                raise fail("or(...) takes no window")
            return or_(*children)  # type: ignore[arg-type]
        if win is None:
            raise fail(f"{op}(...) needs a window: {op}(a, b; 10)")
        return (and_ if op == "and" else seq)(*children, window=win)

    out = node()
    skip()
    if pos != len(text):
        raise fail("unexpected text after the pattern")
    if isinstance(out, Not):
        raise PlanningError(f"pattern {text!r}: a negation alone is not a pattern")
    validate(out)
    return out
