"""Stream and query statistics for the tuning loop (seed 002; also what OLLAA and STPM use).

Pure functions over pandas frames; the Spark statistics job applies them per time window.

* :func:`arrival_rates` -- events per second per group (event type, source, ...) with a
  test of the Poisson assumption the allocation model (:mod:`cep_core.allocation`) rests on:
  under a Poisson process the counts in equal bins are i.i.d. Poisson, so the index of
  dispersion ``D = Σ (x_i - x̄)² / x̄`` is χ² with ``bins - 1`` degrees of freedom; the
  two-sided p-value rejects both clumping (D large) and over-regular arrivals (D small).
* :func:`selectivities` -- matches per input event of a pattern and of each prefix of it
  (``A``, ``A B``, ``A B C`` for ``PATTERN (A B C D)``): the selectivities of the
  sub-patterns that OLLAA and the cost model compare.
* :func:`stream_labels` -- which pattern variable (the paper's stream ``E_i``) each input
  event feeds, and :func:`processing_costs` -- measured seconds of engine work per event of
  each stream (non-negative least squares over timed runs on random sub-samples).

>>> frame = pd.DataFrame({"t": [0.0, 1.0, 2.0, 3.0], "kind": ["a", "a", "b", "a"]})
>>> [(r.subject, r.count, round(r.rate, 3)) for r in arrival_rates(frame, "t", "kind")]
[('a', 3, 1.0), ('b', 1, 0.333)]
"""

from __future__ import annotations

import dataclasses
import time as _time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd  # type: ignore[import-untyped, unused-ignore]
from scipy import optimize, stats  # type: ignore[import-untyped, unused-ignore]

from ..api import CompiledQuery, compile_query
from ..language import ast
from ..language.printer import to_sql
from ..runtime.time_axis import seconds_per_unit, time_values


@dataclass(frozen=True)
class ArrivalRate:
    """Arrivals of one group over the observed span: ``rate`` in events per second,
    ``dispersion`` the index of dispersion of per-bin counts (1 for Poisson) and
    ``p_value`` its two-sided χ² test (None with fewer than 2 bins or no events)."""

    subject: str
    count: int
    seconds: float
    rate: float
    bins: int
    dispersion: float | None
    p_value: float | None

    def poisson(self, alpha: float = 0.05) -> bool | None:
        """Whether the Poisson assumption survives the test at level ``alpha``."""
        return None if self.p_value is None else self.p_value >= alpha


def arrival_rates(frame: pd.DataFrame, time: str, by: str,
                  bin_seconds: float = 1.0) -> list[ArrivalRate]:
    """Per value of ``by``: arrivals per second over the span of ``time`` (all groups share
    the span, so a rare group gets its true low rate), with the dispersion test over bins of
    ``bin_seconds`` (times in seconds for numbers, timestamps converted)."""
    if bin_seconds <= 0:
        raise ValueError(f"bin_seconds must be positive, got {bin_seconds}")
    if len(frame) == 0:
        return []
    values = time_values(frame[time]).astype(float) * seconds_per_unit(frame[time].dtype)
    lo, hi = float(values.min()), float(values.max())
    bins = max(1, int(np.ceil((hi - lo) / bin_seconds)))
    span = max(hi - lo, bin_seconds) if bins == 1 else bins * bin_seconds
    edges = lo + bin_seconds * np.arange(bins + 1)
    edges[-1] = max(edges[-1], hi) + 1e-9  # the last event falls in the last bin
    counts = {str(subject): np.histogram(times.to_numpy(), bins=edges)[0]
              for subject, times in pd.Series(values).groupby(
                  frame[by].astype(str).to_numpy(), sort=True)}
    return [_rate(subject, c, span, bins) for subject, c in counts.items()]


def rates_from_counts(counts: Mapping[str, Sequence[int]], bin_seconds: float,
                      seconds: float | None = None) -> list[ArrivalRate]:
    """:func:`arrival_rates` from per-bin counts already aggregated elsewhere (the Spark
    statistics job counts per group and bin): every group's list covers the same bins,
    zeros included; ``seconds`` is the observed span (default: bins x ``bin_seconds``)."""
    if bin_seconds <= 0:
        raise ValueError(f"bin_seconds must be positive, got {bin_seconds}")
    lengths = {len(c) for c in counts.values()}
    if len(lengths) > 1:
        raise ValueError(f"every group needs the same number of bins, got {sorted(lengths)}")
    out = []
    for subject in sorted(counts):
        c = np.asarray(counts[subject], dtype=float)
        if (c < 0).any():
            raise ValueError(f"negative count for {subject!r}")
        span = seconds if seconds is not None else len(c) * bin_seconds
        out.append(_rate(subject, c, span, len(c)))
    return out


def _rate(subject: str, counts: np.ndarray[Any, Any], span: float, bins: int) -> ArrivalRate:
    mean = counts.mean() if len(counts) else 0.0
    dispersion = p_value = None
    if bins >= 2 and mean > 0:
        statistic = float(((counts - mean) ** 2).sum() / mean)
        dispersion = statistic / (bins - 1)
        upper = float(stats.chi2.sf(statistic, bins - 1))
        p_value = min(1.0, 2 * min(upper, 1 - upper))
    total = int(counts.sum())
    return ArrivalRate(subject, total, span, total / span, bins, dispersion, p_value)


def prefix_queries(query: str | CompiledQuery) -> list[str]:
    """The query cut to each proper prefix of its pattern, when the pattern is a
    concatenation of single variables (``A B C`` -> ``A``, ``A B``); else none. MEASURES,
    SUBSET and the DEFINEs of dropped variables are removed."""
    compiled = query if isinstance(query, CompiledQuery) else compile_query(query)
    tree = compiled.tree
    pattern = tree.match.pattern
    if not (isinstance(pattern, ast.Concat)
            and all(isinstance(p, ast.Var) for p in pattern.items)):
        return []
    out = []
    for k in range(1, len(pattern.items)):
        items = pattern.items[:k]
        kept = {p.name for p in items}  # type: ignore[attr-defined]
        match = dataclasses.replace(
            tree.match, pattern=ast.Concat(items) if k > 1 else items[0], measures=(),
            subsets=(), defines=tuple(d for d in tree.match.defines if d.var in kept))
        out.append(to_sql(dataclasses.replace(tree, match=match, select=(ast.SelectItem(None),),
                                              order_by=())))
    return out


def selectivities(query: str | CompiledQuery, sample: pd.DataFrame) -> dict[str, float]:
    """Matches per input row of ``sample`` for each prefix of the pattern (keyed by its
    variables, e.g. ``"A B"``) and for the whole pattern (key ``"*"``)."""
    compiled = query if isinstance(query, CompiledQuery) else compile_query(query)
    n = max(len(sample), 1)
    out = {}
    for text in prefix_queries(compiled):
        prefix = compile_query(text)
        out[to_sql(prefix.tree.match.pattern)] = len(prefix.find_matches(sample)) / n
    out["*"] = len(compiled.find_matches(sample)) / n
    return out


def pattern_variables(query: str | CompiledQuery) -> list[str]:
    """The variables of a pattern that is one variable or a concatenation of single
    variables (the paper's ``SEQ(E1, .., En)``), in order; else ``[]``."""
    compiled = query if isinstance(query, CompiledQuery) else compile_query(query)
    pattern = compiled.tree.match.pattern
    if isinstance(pattern, ast.Var):
        return [pattern.name]
    if isinstance(pattern, ast.Concat) and all(isinstance(p, ast.Var) for p in pattern.items):
        return [p.name for p in pattern.items]  # type: ignore[attr-defined]
    return []


def stream_labels(query: str | CompiledQuery, sample: pd.DataFrame) -> pd.Series:
    """Per row of ``sample``: the first variable of the pattern (a concatenation of single
    variables: the paper's ``SEQ(E1, .., En)``) whose DEFINE accepts the row on its own,
    else ``""``. A DEFINE that refers to other variables cannot be judged alone (compiling
    it raises ``QueryError``); a pattern of another shape labels nothing."""
    compiled = query if isinstance(query, CompiledQuery) else compile_query(query)
    labels = pd.Series("", index=sample.index, dtype=object)
    tree = compiled.tree
    for var in pattern_variables(compiled):
        match = dataclasses.replace(
            tree.match, pattern=ast.Var(var), measures=(), subsets=(), within=None,
            defines=tuple(d for d in tree.match.defines if d.var == var))
        single = compile_query(to_sql(dataclasses.replace(
            tree, match=match, select=(ast.SelectItem(None),), order_by=())))
        position = sample.reset_index(drop=True)
        accepted = [r for m in single.find_matches(position) for r in m.rows]
        hit = pd.Series(False, index=sample.index)
        hit.iloc[accepted] = True
        labels[hit & (labels == "")] = var
    return labels


@dataclass(frozen=True)
class Costs:
    """Measured engine work: ``per_event[subject]`` seconds per event, ``overhead``
    seconds per call, from ``runs`` timed calls (``residual``: RMS misfit in seconds)."""

    per_event: dict[str, float]
    overhead: float
    runs: int
    residual: float


def processing_costs(run: Callable[[pd.DataFrame], Any], frame: pd.DataFrame, by: str,
                     runs: int = 12, seed: int = 0,
                     clock: Callable[[], float] = _time.process_time) -> Costs:
    """Seconds of work per event of each group of ``by``, measured: ``run`` is timed on
    ``frame`` and on ``runs - 1`` random sub-samples that keep a different share (20-100 %)
    of each group's rows; the per-group costs and a per-call overhead are the non-negative
    least-squares fit of time = overhead + Σ count_g · cost_g (groups that interact, e.g.
    a partial match opened by one and closed by another, share their cost by this fit)."""
    if runs < 2:
        raise ValueError(f"runs must be at least 2, got {runs}")
    groups = sorted(frame[by].astype(str).unique())
    if not groups:
        return Costs({}, 0.0, 0, 0.0)
    labels = frame[by].astype(str).to_numpy()
    rng = np.random.default_rng(seed)
    rows, seconds = [], []
    for r in range(runs):
        keep = dict.fromkeys(groups, 1.0) if r == 0 else {
            g: float(rng.uniform(0.2, 1.0)) for g in groups}
        mask = rng.random(len(frame)) < np.array([keep[g] for g in labels])
        part = frame[mask]
        started = clock()
        run(part)
        seconds.append(clock() - started)
        counts = pd.Series(labels[mask]).value_counts()
        rows.append([float(counts.get(g, 0)) for g in groups] + [1.0])
    a, b = np.array(rows), np.array(seconds)
    solution, norm = optimize.nnls(a, b)
    return Costs({g: float(c) for g, c in zip(groups, solution[:-1], strict=True)},
                 float(solution[-1]), runs, float(norm / np.sqrt(runs)))
