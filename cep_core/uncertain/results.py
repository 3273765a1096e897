"""What an evaluation returns: :class:`UncertainResult` (table and sequences) and its
:class:`Diagnostics`, with the float tolerance for probabilities."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pandas as pd  # type: ignore[import-untyped, unused-ignore]

from .plan import Sigma

# A probability this close below the threshold still passes.
XI_EPS = 1e-12


@dataclass
class Diagnostics:
    """What an evaluation did (summed over partitions)."""

    method: str = ""
    # possible worlds enumerated (possible_worlds), or joint assignments of the events with
    # PRIOR children in a PRIOR component (the other methods; leaves are not enumerated)
    worlds: int = 0
    points: int = 0  # probabilistic points expanded (event, time) over all sequences
    combinations: int = 0  # point combinations checked against the pattern
    candidates: int = 0  # valid characteristic sequences considered
    dp: int = 0  # sequences whose probability the dynamic programme computed
    # per partition key with PRIOR constraints: the probability mass lost because a
    # PRIOR constraint could not be met (1 - the sum over all worlds)
    lost_prior_mass: dict[tuple[Any, ...], float] = field(default_factory=dict)


@dataclass
class UncertainResult:
    """``table``: partition columns, MEASURES and ``probability``, one row per sequence;
    ``groups``: (partition key, sequence, probability) in the same order."""

    table: pd.DataFrame
    groups: list[tuple[tuple[Any, ...], Sigma, float]]
    diagnostics: Diagnostics


def lost_mass(total: float) -> float:
    """1 - total, with float noise (below 1e-12) reported as 0."""
    lost = 1.0 - total
    return lost if lost > XI_EPS else 0.0
