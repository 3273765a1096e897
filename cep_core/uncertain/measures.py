"""MEASURES of a characteristic sequence, and the hidden column MATCH_PROBABILITY()
reads."""

from __future__ import annotations

from typing import Any

import pandas as pd  # type: ignore[import-untyped, unused-ignore]

from ..compile.expressions import ExprCompiler, Scope, walk
from ..compile.state import MatchState
from ..compile.values import column_values, to_python
from ..language import ast
from .plan import PROB_COL, PROB_VAR, Sigma, UncertainPlan


class _ProbabilityColumn:
    """The hidden column MATCH_PROBABILITY() reads: the probability being output."""

    value: float = 0.0

    def __getitem__(self, row: int) -> float:
        return self.value


class Measures:
    """MEASURES of a characteristic sequence, with the ordinary expression compiler: the
    sequence is a match whose rows are its events (each variable fills at most one), plus
    one row of a hidden variable whose column is MATCH_PROBABILITY()."""

    def __init__(self, plan: UncertainPlan, df: pd.DataFrame, columns: tuple[str, ...]):
        names = [*plan.variables, PROB_VAR]
        self.index = {name: i for i, name in enumerate(names)}
        sets = {name: frozenset([i]) for i, name in enumerate(names)}
        scope = Scope((*columns, PROB_COL), sets, "MEASURES")
        compiler = ExprCompiler(scope)
        self.names = [name for name, _ in plan.measures]
        self.fns = [compiler.compile(expr) for _, expr in plan.measures]
        used = {scope.column(n) for _, expr in plan.measures for n in walk(expr)
                if isinstance(n, ast.Column) and n.name != PROB_COL}
        self.prob = _ProbabilityColumn()
        cols: dict[str, Any] = {c: column_values(df[c]) for c in used}
        cols[PROB_COL] = self.prob
        self.state = MatchState(cols, names)
        self.state.lo, self.state.hi = 0, max(len(df), 1)

    def values(self, sigma: Sigma, probability: float) -> list[Any]:
        st = self.state
        st.rows = [row for _, row in sigma] + [0]
        st.labels = [self.index[v] for v, _ in sigma] + [self.index[PROB_VAR]]
        st.upto = len(st.rows)
        st.epoch += 1
        self.prob.value = probability
        return [to_python(fn(st)) for fn in self.fns]
