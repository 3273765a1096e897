"""Queries with ``UNCERTAIN TIME`` (seed 001): uncertain event times, event constraints
and match probabilities (docs/uncertain.md). :func:`evaluate` is the entry point."""

from . import dp
from .api import evaluate
from .evaluation import evaluate_compiled
from .plan import (
    METHODS,
    PROBABILITY,
    Filling,
    Sigma,
    Tree,
    UncertainPlan,
    check_query,
    tree_variables,
)
from .results import Diagnostics, UncertainResult

__all__ = ["METHODS", "PROBABILITY", "Diagnostics", "Filling", "Sigma", "Tree",
           "UncertainPlan", "UncertainResult", "check_query", "dp", "evaluate",
           "evaluate_compiled", "tree_variables"]
