"""Acquisition planners (seed 003): Algorithm 1 (DP over subsets with k-limited pareto
tables), forward / backward stepwise heuristics and their merge, brute force (for tests),
hierarchical composition over nested patterns, and the baselines."""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from .model import (
    AcquisitionPlan,
    And,
    Distribution,
    Event,
    Item,
    LatencyModel,
    NodeModel,
    Not,
    Option,
    Or,
    Pattern,
    PlanningError,
    Poisson,
    Seq,
    Statistics,
    occurrence_rate,
    validate,
)
from .pareto import keep, pareto

METHODS = ("dp", "heuristic", "forward", "backward")

Choice = tuple[tuple[int, Option], ...]


def _pl(p: AcquisitionPlan) -> tuple[float, float]:
    return (p.cost, p.latency)


# ----------------------------------------------------------------------------- step options


def step_options(model: NodeModel, step: int, before: int, k: int | None = None,
                 strategy: str = "cost", rng: random.Random | None = None
                 ) -> list[tuple[float, float, Choice]]:
    """Pareto (cost, latency, choice) of acquiring the items of ``step`` after ``before``: one
    option per item, costs add up, the step's delay is the largest member delay."""
    rng = rng or random.Random(0)
    acc: list[tuple[float, float, Choice]] = [(0.0, 0.0, ())]
    keys = model.stats.keys
    for i in range(model.n):
        if not step >> i & 1:
            continue
        m = model.measure(i, before) * keys
        item = model.items[i]
        if len(item.options) == 1:
            o = item.options[0]
            acc = [(c + o.unit_cost * m, max(lat, o.latency), ch + ((i, o),))
                   for c, lat, ch in acc]
            continue
        acc = [(c + o.unit_cost * m, max(lat, o.latency), ch + ((i, o),))
               for c, lat, ch in acc for o in item.options]
        acc = keep(pareto(acc, lambda x: (x[0], x[1])), k, strategy,
                   lambda x: (x[0], x[1]), rng)
    return acc


# ----------------------------------------------------------------------------- DP


@dataclass(frozen=True)
class _Entry:
    cost: float
    latency: float
    prev: _Entry | None
    step: int
    choice: Choice


def _key(e: _Entry) -> tuple[float, float]:
    return (e.cost, e.latency)


def _unwind(e: _Entry) -> tuple[list[int], dict[int, Option]]:
    steps: list[int] = []
    choice: dict[int, Option] = {}
    cur: _Entry | None = e
    while cur is not None:
        steps.append(cur.step)
        choice.update(dict(cur.choice))
        cur = cur.prev
    return steps[::-1], choice


def dp(model: NodeModel, k: int | None = None, strategy: str = "cost", seed: int = 0,
       bound: float | None = None) -> list[AcquisitionPlan]:
    """Algorithm 1: ``poplans[U]`` holds the (k-limited) pareto plans acquiring the items in
    ``U``; each is a pareto plan of some ``U \\ s`` followed by one step ``s``. With ``k=None``
    the result is the exact pareto set of all plans (optimal substructure); plans whose
    latency already exceeds ``bound`` are dropped early (latency only grows)."""
    n = model.n
    if n == 0:
        raise PlanningError(f"{model.label}: nothing to plan")
    rng = random.Random(seed)
    full = (1 << n) - 1
    extra = model.negation_latency() if model.negated else 0.0
    limit = math.inf if bound is None else bound - extra + 1e-12
    simple = all(len(i.options) == 1 for i in model.items)
    # "push" order: when ``before`` is reached all its sub-plans are final; every step ``s``
    # of the remaining items extends each of them into the candidates of ``before | s``.
    cands: list[list[_Entry]] = [[] for _ in range(1 << n)]
    table: list[list[_Entry]] = [[] for _ in range(1 << n)]
    for before in sorted(range(full + 1), key=lambda m: bin(m).count("1")):
        if before:
            table[before] = keep(pareto(cands[before], _key), k, strategy, _key, rng)
            cands[before] = []
            if not table[before]:
                continue
        rest = full ^ before
        if rest == 0:
            break
        prefixes = table[before] if before else [_Entry(0.0, 0.0, None, 0, ())]
        if simple:
            costs = [model.items[i].options[0].unit_cost * model.measure(i, before)
                     * model.stats.keys if rest >> i & 1 else 0.0 for i in range(n)]
            delays = [model.items[i].options[0].latency for i in range(n)]
            sub_cost: dict[int, float] = {0: 0.0}
            sub_lat: dict[int, float] = {0: 0.0}
            s = 0
            while True:  # subsets of ``rest`` in increasing order, each from a smaller one
                s = (s - rest) & rest
                if s == 0:
                    break
                low = (s & -s).bit_length() - 1
                prev = s & (s - 1)
                c = sub_cost[prev] + costs[low]
                lat = max(sub_lat[prev], delays[low])
                sub_cost[s], sub_lat[s] = c, lat
                target = cands[before | s]
                for e in prefixes:
                    if e.latency + lat <= limit:
                        target.append(_Entry(e.cost + c, e.latency + lat,
                                             e if before else None, s, ()))
        else:
            s = rest
            while s:
                for c, lat, ch in step_options(model, s, before, k, strategy, rng):
                    for e in prefixes:
                        if e.latency + lat <= limit:
                            cands[before | s].append(_Entry(e.cost + c, e.latency + lat,
                                                            e if before else None, s, ch))
                s = (s - 1) & rest
    plans = []
    for e in table[full]:
        steps, choice = _unwind(e)
        plans.append(model.make_plan(steps, choice if not simple else None))
    return pareto(plans, _pl)


def ordered_partitions(n: int) -> Iterator[list[int]]:
    """Every ordered set partition of ``{0..n-1}`` as a list of bit masks."""
    def rec(rest: int) -> Iterator[list[int]]:
        if rest == 0:
            yield []
            return
        s = rest
        while s:
            for tail in rec(rest ^ s):
                yield [s, *tail]
            s = (s - 1) & rest
    return rec((1 << n) - 1)


def brute_force(model: NodeModel) -> list[AcquisitionPlan]:
    """The pareto set over all ordered set partitions (single-option items only)."""
    if any(len(i.options) != 1 for i in model.items):
        raise PlanningError("brute force is for items with one option each")
    scored = [(*model.evaluate(steps), steps) for steps in ordered_partitions(model.n)]
    best = pareto(scored, lambda x: (x[0], x[1]))
    return [model.make_plan(steps) for _, _, steps in best]


# ----------------------------------------------------------------------------- heuristics


_State = tuple[tuple[int, ...], tuple[int, ...]]  # (step masks, option index per item)


def _evaluate(model: NodeModel, state: _State) -> tuple[float, float]:
    steps, opt = state
    if not any(opt):
        return model.evaluate(steps)
    return model.evaluate(steps, {i: model.items[i].options[opt[i]] for i in range(model.n)})


def _plan_of(model: NodeModel, state: _State) -> AcquisitionPlan:
    steps, opt = state
    return model.make_plan(steps, {i: model.items[i].options[opt[i]] for i in range(model.n)})


def _moves_later(state: _State) -> Iterator[_State]:
    steps, opt = state
    m = len(steps)
    for j, s in enumerate(steps):
        bits = [b for b in range(s.bit_length()) if s >> b & 1]
        for b in bits:
            rest = s & ~(1 << b)
            for j2 in range(j + 1, m):  # into a later existing step
                new = list(steps)
                new[j] = rest
                new[j2] = steps[j2] | (1 << b)
                yield tuple(x for x in new if x), opt
            if rest:  # into a new step at any later position
                for pos in range(j + 1, m + 1):
                    new = list(steps)
                    new[j] = rest
                    new.insert(pos, 1 << b)
                    yield tuple(new), opt


def _moves_split(model: NodeModel, state: _State) -> Iterator[_State]:
    """Split a step in two: one sub-event alone first and the rest after it, or the rarest
    sub-events first and the more frequent rest after them (moving several sub-events later
    at once, which single moves cannot do within a tight latency bound)."""
    steps, opt = state
    for j, s in enumerate(steps):
        bits = [b for b in range(s.bit_length()) if s >> b & 1]
        if len(bits) < 2:
            continue
        for b in bits:
            yield (*steps[:j], 1 << b, s & ~(1 << b), *steps[j + 1:]), opt
        ordered = sorted(bits, key=lambda b: (model.items[b].dist.rate, b))
        first = 0
        for b in ordered[:-1]:
            first |= 1 << b
            yield (*steps[:j], first, s & ~first, *steps[j + 1:]), opt


def _moves_earlier(state: _State) -> Iterator[_State]:
    steps, opt = state
    for j in range(1, len(steps)):
        s = steps[j]
        merged = list(steps)  # the whole step into the previous one
        merged[j - 1] |= s
        del merged[j]
        yield tuple(merged), opt
        for b in [b for b in range(s.bit_length()) if s >> b & 1]:
            for j2 in range(j):
                new = list(steps)
                new[j] = s & ~(1 << b)
                new[j2] = steps[j2] | (1 << b)
                yield tuple(x for x in new if x), opt


def _option_moves(model: NodeModel, state: _State, cheaper: bool) -> Iterator[_State]:
    steps, opt = state
    for i, item in enumerate(model.items):
        cur = item.options[opt[i]]
        for o_idx, o in enumerate(item.options):
            better = (o.unit_cost < cur.unit_cost) if cheaper else (o.latency < cur.latency)
            if better:
                new = list(opt)
                new[i] = o_idx
                yield steps, tuple(new)


def _best_option(item: Item, by_latency: bool) -> int:
    def rank(o: int) -> tuple[float, float]:
        opt = item.options[o]
        return (opt.latency, opt.unit_cost) if by_latency else (opt.unit_cost, opt.latency)
    return min(range(len(item.options)), key=rank)


def forward(model: NodeModel, bound: float | None = None) -> list[AcquisitionPlan]:
    """Forward stepwise: from the one-step plan with every sub-event's fastest option, move a
    sub-event to a later step (or a new one), split a step (one sub-event or the rarest ones
    first, the rest in a new step after them) or pick a cheaper option of a complex
    sub-event, always the move with the best cost saving per added latency, while the
    latency bound holds; returns every plan visited."""
    fastest = tuple(_best_option(i, by_latency=True) for i in model.items)
    state: _State = (((1 << model.n) - 1,), fastest)
    cost, lat = _evaluate(model, state)
    seen = {state}
    visited = [state]
    while True:
        best: tuple[float, float, _State, float, float] | None = None
        for cand in itertools.chain(_moves_later(state), _moves_split(model, state),
                                    _option_moves(model, state, True)):
            if cand in seen:
                continue
            c, la = _evaluate(model, cand)
            if c >= cost - 1e-12 or (bound is not None and la > bound + 1e-12):
                continue
            gain = (cost - c) / max(la - lat, 1e-9)
            if best is None or gain > best[0] or (gain == best[0] and c < best[3]):
                best = (gain, 0.0, cand, c, la)
        if best is None:
            break
        state, cost, lat = best[2], best[3], best[4]
        seen.add(state)
        visited.append(state)
    return [_plan_of(model, s) for s in visited]


def _greedy_order(model: NodeModel, opt: tuple[int, ...]) -> tuple[int, ...]:
    order: list[int] = []
    before = 0
    left = set(range(model.n))
    while left:
        nxt = min(left, key=lambda i: (model.items[i].options[opt[i]].unit_cost
                                       * model.measure(i, before), i))
        order.append(1 << nxt)
        before |= 1 << nxt
        left.remove(nxt)
    return tuple(order)


def backward(model: NodeModel, bound: float | None = None) -> list[AcquisitionPlan]:
    """Backward stepwise: from the n-step plan (greedy: next the sub-event cheapest to acquire
    after those before it, with every sub-event's cheapest option), move a sub-event or a
    whole step earlier or pick a faster option, always the move with the best latency saving
    per added cost, until no move lowers the latency; returns every plan visited."""
    cheapest = tuple(_best_option(i, by_latency=False) for i in model.items)
    state: _State = (_greedy_order(model, cheapest), cheapest)
    cost, lat = _evaluate(model, state)
    seen = {state}
    visited = [state]
    while True:
        best: tuple[float, _State, float, float] | None = None
        for cand in itertools.chain(_moves_earlier(state), _option_moves(model, state, False)):
            if cand in seen:
                continue
            c, la = _evaluate(model, cand)
            if la >= lat - 1e-12:
                continue
            gain = (lat - la) / max(c - cost, 1e-9)
            if best is None or gain > best[0] or (gain == best[0] and c < best[2]):
                best = (gain, cand, c, la)
        if best is None:
            break
        state, cost, lat = best[1], best[2], best[3]
        seen.add(state)
        visited.append(state)
    return [_plan_of(model, s) for s in visited]


def heuristic(model: NodeModel, bound: float | None = None, k: int | None = None,
              strategy: str = "cost", seed: int = 0) -> list[AcquisitionPlan]:
    """Merge of forward and backward: the pareto plans among all plans either visited that
    meet the latency bound (k-limited)."""
    plans = forward(model, bound) + backward(model, bound)
    if bound is not None:
        plans = [p for p in plans if p.latency <= bound + 1e-12]
    return keep(pareto(plans, _pl), k, strategy, _pl, random.Random(seed))


# ----------------------------------------------------------------------------- baselines


def pull_everything(model: NodeModel) -> AcquisitionPlan:
    """One step with every sub-event (what reading all types does)."""
    return model.make_plan([(1 << model.n) - 1])


def frequency_order(model: NodeModel) -> AcquisitionPlan:
    """One sub-event per step, rarest first (lazy evaluation's order)."""
    order = sorted(range(model.n), key=lambda i: (model.items[i].dist.rate, i))
    return model.make_plan([1 << i for i in order])


# ----------------------------------------------------------------------------- hierarchy


def choose(plans: Sequence[AcquisitionPlan], bound: float | None = None) -> AcquisitionPlan:
    """The cheapest plan whose latency is within ``bound`` (the root's choice)."""
    ok = [p for p in plans if bound is None or p.latency <= bound + 1e-12]
    if not ok:
        fastest = min((p.latency for p in plans), default=math.inf)
        raise PlanningError(f"no plan meets the latency bound {bound}; the fastest plan "
                            f"takes {fastest}")
    return min(ok, key=lambda p: (p.cost, p.latency))


@dataclass
class Planner:
    """Hierarchical planning of a pattern tree: each node is planned bottom-up and hands a
    (k-limited) pareto set of plans to its parent, which uses them as the options of that
    sub-event; the root's set is returned (pick one with :func:`choose`). ``pinned`` fixes
    the plan of complex sub-patterns by label (shared sub-expressions use one plan)."""

    stats: Statistics
    latency: LatencyModel = LatencyModel()
    method: str = "dp"
    k: int | None = None
    strategy: str = "cost"
    bound: float | None = None
    seed: int = 0
    pinned: Mapping[str, AcquisitionPlan] = field(default_factory=dict)
    _memo: dict[str, list[AcquisitionPlan]] = field(default_factory=dict, init=False,
                                                     repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise PlanningError(f"unknown method {self.method!r}; use one of {METHODS}")

    def plans(self, pattern: Pattern) -> list[AcquisitionPlan]:
        validate(pattern)
        return self._plans(pattern)

    def best(self, pattern: Pattern) -> AcquisitionPlan:
        return choose(self.plans(pattern), self.bound)

    # -- internals
    def rate(self, p: Pattern) -> Distribution:
        """Occurrence statistics of a (sub-)pattern as seen by its parent."""
        if isinstance(p, Event):
            return self.stats.of(p.type)
        if isinstance(p, Or):
            return Poisson(sum(self.rate(c).rate for c in p.children))
        pos = [self.rate(c) for c in p.children if not isinstance(c, Not)]
        neg = [self.stats.of(c.event.type) for c in p.children if isinstance(c, Not)]
        return Poisson(occurrence_rate("and" if isinstance(p, And) else "seq", p.window,
                                       pos, neg))

    def _item(self, p: Pattern | Not, position: int) -> Item:
        if isinstance(p, Not):
            d = self.stats.of(p.event.type)
            return Item(p.event.type, position, d, (Option(d.rate, self.latency.of(p.event.type)),))
        if isinstance(p, Event):
            d = self.stats.of(p.type)
            return Item(p.type, position, d, (Option(d.rate, self.latency.of(p.type)),))
        scale = self.stats.horizon * self.stats.keys
        found = [self.pinned[str(p)]] if str(p) in self.pinned else self._plans(p)
        opts = tuple(Option(q.cost / scale, q.latency, q) for q in found)
        return Item(str(p), position, self.rate(p), opts)

    def node_model(self, p: And | Seq) -> NodeModel:
        items = [self._item(c, i) for i, c in enumerate(p.children) if not isinstance(c, Not)]
        negated = [self._item(c, i) for i, c in enumerate(p.children) if isinstance(c, Not)]
        return NodeModel("and" if isinstance(p, And) else "seq", p.window, items, negated,
                         self.stats, str(p))

    def _plans(self, p: Pattern) -> list[AcquisitionPlan]:
        key = str(p)
        if key not in self._memo:
            self._memo[key] = self._plan_node(p)
        return self._memo[key]

    def _plan_node(self, p: Pattern) -> list[AcquisitionPlan]:
        rng = random.Random(self.seed)
        if isinstance(p, Event):
            d = self.stats.of(p.type)
            return [AcquisitionPlan(p.type, ((p.type,),),
                                    d.rate * self.stats.horizon * self.stats.keys,
                                    self.latency.of(p.type))]
        if isinstance(p, Or):
            acc: list[tuple[float, float, tuple[AcquisitionPlan, ...]]] = [(0.0, 0.0, ())]
            for c in p.children:
                acc = [(cost + q.cost, max(lat, q.latency), chosen + (q,))
                       for cost, lat, chosen in acc for q in self._plans(c)]
                acc = keep(pareto(acc, lambda x: (x[0], x[1])), self.k, self.strategy,
                           lambda x: (x[0], x[1]), rng)
            return [AcquisitionPlan(str(p), (tuple(str(c) for c in p.children),), cost, lat,
                                    tuple((str(c), q) for c, q in zip(p.children, chosen,
                                                                      strict=True)
                                          if not isinstance(c, Event)))
                    for cost, lat, chosen in acc]
        model = self.node_model(p)
        if self.method == "dp":
            return dp(model, self.k, self.strategy, self.seed, self.bound)
        if self.method == "forward":
            found = forward(model, self.bound)
        elif self.method == "backward":
            found = backward(model, self.bound)
        else:
            found = heuristic(model, self.bound)
        if self.bound is not None:
            found = [q for q in found if q.latency <= self.bound + 1e-12] or found
        return keep(pareto(found, _pl), self.k, self.strategy, _pl, rng)


def plan(pattern: Pattern, stats: Statistics, latency: LatencyModel | None = None,
         method: str = "dp", k: int | None = None, strategy: str = "cost",
         bound: float | None = None, seed: int = 0) -> list[AcquisitionPlan]:
    """Pareto plans for ``pattern`` (hierarchically for nested patterns)."""
    return Planner(stats, latency or LatencyModel(), method, k, strategy, bound,
                   seed).plans(pattern)
