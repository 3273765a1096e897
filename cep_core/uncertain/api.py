"""The wing's entry point: :func:`evaluate` an ``UNCERTAIN TIME`` query given as text or
compiled (the evaluation itself is :mod:`.evaluation`; it never compiles a query, so the
engine's facade :mod:`cep_core.api` can call it without a circle)."""

from __future__ import annotations

import pandas as pd  # type: ignore[import-untyped, unused-ignore]

from ..api import CompiledQuery
from .evaluation import evaluate_compiled
from .results import UncertainResult


def evaluate(query: str | CompiledQuery, table: pd.DataFrame, method: str = "auto",
             max_worlds: int = 1_000_000, id_column: str | None = None, *,
             max_points: int = 100_000) -> UncertainResult:
    """Evaluate an ``UNCERTAIN TIME`` query over ``table`` (see docs/uncertain.md).

    ``method``: 'auto' (= 'dp'), 'dp', 'event', 'point' or 'possible_worlds'; all return
    the same sequences and probabilities (to rounding). ``max_worlds`` bounds the worlds of
    a partition (possible_worlds) and the joint assignments of a PRIOR-linked component
    (the others); ``max_points`` the possible times of one event. ``id_column`` names the
    column used to order sequences with the same start and to name rows in errors
    (default: the row position)."""
    q = query if isinstance(query, CompiledQuery) else CompiledQuery(query)
    return evaluate_compiled(q, table, method, max_worlds, id_column, max_points=max_points)


__all__ = ["evaluate"]
