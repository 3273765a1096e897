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

>>> frame = pd.DataFrame({"t": [0.0, 1.0, 2.0, 3.0], "kind": ["a", "a", "b", "a"]})
>>> [(r.subject, r.count, round(r.rate, 3)) for r in arrival_rates(frame, "t", "kind")]
[('a', 3, 1.0), ('b', 1, 0.333)]
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import pandas as pd  # type: ignore[import-untyped, unused-ignore]
from scipy import stats  # type: ignore[import-untyped, unused-ignore]

from . import ast
from .api import CompiledQuery, compile_query
from .live_archive import time_values
from .printer import to_sql


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
    values = time_values(frame[time]).astype(float)
    if pd.api.types.is_datetime64_any_dtype(frame[time].dtype):
        values = values / 1e9
    lo, hi = float(values.min()), float(values.max())
    bins = max(1, int(np.ceil((hi - lo) / bin_seconds)))
    span = max(hi - lo, bin_seconds) if bins == 1 else bins * bin_seconds
    edges = lo + bin_seconds * np.arange(bins + 1)
    edges[-1] = max(edges[-1], hi) + 1e-9  # the last event falls in the last bin
    out = []
    for subject, times in pd.Series(values).groupby(frame[by].astype(str).to_numpy(),
                                                    sort=True):
        counts = np.histogram(times.to_numpy(), bins=edges)[0]
        mean = counts.mean()
        dispersion = p_value = None
        if bins >= 2 and mean > 0:
            statistic = float(((counts - mean) ** 2).sum() / mean)
            dispersion = statistic / (bins - 1)
            upper = float(stats.chi2.sf(statistic, bins - 1))
            p_value = min(1.0, 2 * min(upper, 1 - upper))
        out.append(ArrivalRate(str(subject), int(len(times)), span, len(times) / span, bins,
                               dispersion, p_value))
    return out


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
