"""Public entry points: :func:`match_recognize`, :func:`compile_query`, :class:`CompiledQuery`.

``compile_query`` parses and checks a query once; ``CompiledQuery`` binds it to an input
schema (resolving column names, compiling expressions) and runs it over a pandas DataFrame,
one partition at a time.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd  # type: ignore[import-untyped, unused-ignore]

from .compile import patterns as P
from .compile.booleans import check_boolean_conditions, frame_column_kind
from .compile.checks import check_extensions
from .compile.expressions import (
    AnyColumns,
    ExprCompiler,
    Scope,
    column_references,
    conjuncts,
    is_row_local,
    walk,
)
from .compile.fast_plan import plan_fast
from .compile.state import Fn, MatchState
from .compile.values import column_values, to_python
from .errors import QueryError, query_errors
from .language import ast
from .language.parser import parse
from .language.printer import to_sql
from .runtime.consumption import consume
from .runtime.fast import FastRunner, sort_order
from .runtime.matcher import (
    Conditions,
    Matcher,
    Partition,
    RawMatch,
    SkipPolicy,
    Window,
    position_only,
)
from .runtime.output import TIMED_OUT as TIMED_OUT
from .runtime.output import Match as Match
from .runtime.output import select
from .runtime.time_axis import order_numbers
from .runtime.values import LazyColumn
from .runtime.vectorized import evaluate_condition, evaluate_values

if TYPE_CHECKING:
    from .uncertain.plan import UncertainPlan

def compile_query(query: str, engine: str | None = None) -> CompiledQuery:
    """Parse and check ``query`` once; the result runs over any number of DataFrames.

    ``engine``: 'auto' (default: the fast path of :mod:`cep_core.fast` when the query is
    eligible, see ``CompiledQuery.engine``/``.plan``), 'fast' (raise ``ValueError`` if not
    eligible) or 'general'; the environment variable ``LAKECEP_CEP_ENGINE`` sets the
    default."""
    return CompiledQuery(query, engine=engine)


def match_recognize(query: str, tables: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """Run a ``SELECT ... FROM t MATCH_RECOGNIZE (...)`` query over ``tables[t]``.

    >>> df = pd.DataFrame({"t": [1, 2, 3], "v": [5, 3, 4]})
    >>> match_recognize(
    ...     "SELECT * FROM x MATCH_RECOGNIZE (ORDER BY t MEASURES FIRST(A.t) AS s, "
    ...     "LAST(B.t) AS e PATTERN (A B+) DEFINE B AS v < PREV(v))", {"x": df})
       s  e
    0  1  2
    """
    compiled = compile_query(query)
    return compiled.run(compiled.table_from(tables))


class CompiledQuery:
    """A parsed, checked MATCH_RECOGNIZE query (see :func:`compile_query`)."""

    def __init__(self, query: str, engine: str | None = None):
        self.text = query
        with query_errors(query):  # e.g. RecursionError on absurdly long expressions
            self.tree = parse(query)
        self.match = self.tree.match
        #: the checked plan of an UNCERTAIN TIME query (run by :mod:`cep_core.uncertain`)
        self.uncertain_plan: UncertainPlan | None = None
        self._bound: dict[tuple[str, ...], Bound] = {}
        if self.match.uncertain is not None:
            from .uncertain.plan import check_query

            keys = (*self.match.partition_by, *(s.column for s in self.match.order_by))
            computed = next((k for k in keys if k.computed is not None), None)
            if computed is not None:
                raise QueryError("PARTITION BY / ORDER BY expressions cannot be combined with "
                                 "UNCERTAIN TIME; use columns", *computed.pos, query=query)
            try:
                self.uncertain_plan = check_query(self.match)
            except QueryError as err:
                raise err.with_query(query) from None
            self._variables = list(self.uncertain_plan.variables)
            self._fast, self.plan = None, "uncertain: cep_core.uncertain.evaluate"
            self.engine = "uncertain"
            return
        with query_errors(query):
            self._check()
        fast_plan, self.plan = plan_fast(self, engine)
        self._fast = None if fast_plan is None else FastRunner(fast_plan)
        #: 'fast' or 'general': which matcher ``find_matches``/``run`` use.
        self.engine = "general" if self._fast is None else "fast"

    # ------------------------------------------------------------------ description
    @property
    def table(self) -> str:
        """The FROM table name."""
        return self.tree.table

    @property
    def partition_by(self) -> list[str]:
        """PARTITION BY column names as written in the query."""
        return [c.name for c in self.match.partition_by]

    @property
    def order_by(self) -> list[tuple[str, bool]]:
        """ORDER BY as (column name, descending) pairs."""
        return [(s.column.name, s.descending) for s in self.match.order_by]

    @property
    def measure_names(self) -> list[str]:
        return [m.name for m in self.match.measures]

    def columns_read(self) -> frozenset[str] | None:
        """The (lower-cased) names of the input columns that matching reads: PARTITION BY,
        ORDER BY (and the columns of computed keys), DEFINE and MEASURES. A caller that
        needs only the matches (their rows, partitions and measures) can drop every other
        column before the engine sees it. None: any column may be read (uncertain event
        times read their own columns). Names that are not input columns (e.g. a measure's)
        may be among them; SELECT's list is not (it reads the output)."""
        m = self.match
        if m.uncertain is not None:
            return None
        keys = [*m.partition_by, *(s.column for s in m.order_by)]
        exprs = [*(d.condition for d in m.defines), *(x.expr for x in m.measures),
                 *(k.computed for k in keys if k.computed is not None)]
        return frozenset([*(k.name.lower() for k in keys),
                          *(c.name.lower() for e in exprs for c in column_references(e))])

    @property
    def variables(self) -> list[str]:
        """Pattern variables in order of first appearance."""
        return list(self._variables)

    def output_columns(self, columns: Sequence[str]) -> list[str]:
        """The names of the result columns for an input with ``columns`` (in order), e.g.
        to declare the output schema of a Spark ``applyInPandas`` before any data."""
        empty = pd.DataFrame({c: pd.Series([], dtype=object) for c in columns})
        return [str(c) for c in self.run(empty).columns]

    def table_from(self, tables: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
        """Pick the FROM table out of ``tables`` (exact name, else case-insensitive)."""
        if self.table in tables:
            return tables[self.table]
        matches = [k for k in tables if k.lower() == self.table.lower()]
        if len(matches) == 1:
            return tables[matches[0]]
        raise QueryError(f"unknown table {self.table!r}; given: {', '.join(tables) or 'none'}",
                         *self.tree.table_pos, query=self.text)

    # ------------------------------------------------------------------ checks (no data)
    def _check(self) -> None:
        m = self.match
        self._variables = P.pattern_variables(m.pattern)
        var_index = {name: i for i, name in enumerate(self._variables)}
        sets: dict[str, frozenset[int]] = {name: frozenset([i]) for name, i in var_index.items()}
        for sub in m.subsets:
            if sub.name in sets:
                raise QueryError(f"SUBSET name {sub.name} is already a pattern variable or "
                                 "subset", *sub.pos)
            members: set[int] = set()
            for name in sub.vars:
                if name not in var_index:
                    raise QueryError(f"SUBSET {sub.name} names {name}, which is not a variable "
                                     "of the PATTERN", *sub.pos)
                members.add(var_index[name])
            sets[sub.name] = frozenset(members)
        self._sets = sets
        seen: set[str] = set()
        for d in m.defines:
            if d.var not in var_index:
                raise QueryError(f"DEFINE names {d.var}, which is not a variable of the "
                                 "PATTERN", *d.pos)
            if d.var in seen:
                raise QueryError(f"variable {d.var} is defined twice", *d.pos)
            seen.add(d.var)
        if m.skip.var is not None and m.skip.var not in sets:
            raise QueryError(f"AFTER MATCH SKIP names {m.skip.var}, which is not a pattern "
                             "variable or subset", *m.skip.pos)
        if m.within is not None and not m.order_by:
            raise QueryError("WITHIN needs an ORDER BY (the window is measured on the first "
                             "ORDER BY column)", *m.within.pos)
        if m.rows_per_match == "ALL UNMATCHED" and _has_exclusion(m.pattern):
            raise QueryError("pattern exclusion {- -} cannot be used with ALL ROWS PER MATCH "
                             "WITH UNMATCHED ROWS", 1, 1)
        check_extensions(m)
        names: set[str] = set()
        for me in m.measures:
            if me.name.lower() in names:
                raise QueryError(f"measure {me.name} is defined twice", *me.pos)
            names.add(me.name.lower())
        self._check_keys()
        self.program = P.compile_pattern(m.pattern, self._variables)
        # Compile every expression against a schema that accepts any column, so that
        # unknown variables, functions and misuse of FINAL are reported before any data.
        self._compile_expressions(AnyColumns())
        check_boolean_conditions(m)

    def _check_keys(self) -> None:
        """PARTITION BY / ORDER BY expressions (lakecep extension) read the input row only."""
        self._computed: dict[str, ast.Expr] = {}
        m = self.match
        for key in (*m.partition_by, *(s.column for s in m.order_by)):
            expr = key.computed
            if expr is None:
                continue
            clause = "PARTITION BY" if key in m.partition_by else "ORDER BY"
            for node in walk(expr):
                pos: ast.Pos = getattr(node, "pos", key.pos)
                if isinstance(node, ast.Column) and node.var is not None:
                    raise QueryError(f"{clause} expressions read the input row: {node.var}."
                                     f"{node.name} refers to a pattern variable", *pos)
                if isinstance(node, ast.Star) or isinstance(node, ast.Call) and (
                        node.name in ("PREV", "NEXT", "FIRST", "LAST", "CLASSIFIER",
                                      "MATCH_NUMBER", "COUNT", "SUM", "AVG", "MIN", "MAX")):
                    what = "*" if isinstance(node, ast.Star) else f"{node.name}(...)"
                    raise QueryError(f"{what} cannot be used in a {clause} expression (it "
                                     "reads the input row only)", *pos)
            ExprCompiler(Scope(AnyColumns(), {}, clause)).compile(expr)
            self._computed.setdefault(key.name, expr)

    def with_keys(self, df: pd.DataFrame) -> pd.DataFrame:
        """``df`` with a column for each PARTITION BY / ORDER BY expression, named by its
        printed text (an input column of exactly that name is taken as the key's value)."""
        if not getattr(self, "_computed", None):
            return df
        missing = [name for name in self._computed if name not in df.columns]
        if not missing:
            return df
        columns = tuple(str(c) for c in df.columns)
        out = df.copy(deep=False)
        for name in missing:
            clause = "PARTITION BY" if name in self.partition_by else "ORDER BY"
            values = evaluate_values(self._computed[name], df, Scope(columns, {}, clause))
            out[name] = values.set_axis(df.index)
        return out

    def _compile_expressions(self, columns: Sequence[str]) -> tuple[
            list[list[ast.Expr]], list[Fn | None], list[Fn]]:
        """Compile DEFINE (split into row-local conjuncts and a match-dependent closure)
        and MEASURES for ``columns``."""
        m = self.match
        local_parts: list[list[ast.Expr]] = [[] for _ in self._variables]
        dependent: list[Fn | None] = [None] * len(self._variables)
        index = {name: i for i, name in enumerate(self._variables)}
        for d in m.defines:
            scope = Scope(columns, self._sets, "DEFINE", d.var)
            compiler = ExprCompiler(scope)
            rest: list[ast.Expr] = []
            for part in conjuncts(d.condition):
                # Validate every part (also the local ones) against the schema.
                compiler.compile(part)
                if is_row_local(part, d.var):
                    local_parts[index[d.var]].append(part)
                else:
                    rest.append(part)
            if rest:
                cond = rest[0]
                for part in rest[1:]:
                    cond = ast.Binary("AND", cond, part, getattr(part, "pos", (1, 1)))
                dependent[index[d.var]] = compiler.compile(cond)
        scope = Scope(columns, self._sets, "MEASURES")
        compiler = ExprCompiler(scope)
        measures = [compiler.compile(me.expr) for me in m.measures]
        return local_parts, dependent, measures

    # ------------------------------------------------------------------ binding
    def _bind(self, df: pd.DataFrame) -> Bound:
        columns = tuple(str(c) for c in df.columns)
        bound = self._bound.get(columns)
        if bound is None:
            try:
                bound = Bound(self, columns)
            except QueryError as err:
                raise err.with_query(self.text) from None
            self._bound[columns] = bound
        if self.uncertain_plan is None:  # bare boolean columns must hold booleans
            try:
                check_boolean_conditions(self.match, frame_column_kind(
                    df, Scope(columns, self._sets, "DEFINE").column))
            except QueryError as err:
                raise err.with_query(self.text) from None
        return bound

    # ------------------------------------------------------------------ running
    def find_matches(self, df: pd.DataFrame) -> list[Match]:
        """All matches in ``df`` (partitioned and ordered as the query says), by partition
        key then match number. Empty matches are included, with ``rows == ()``."""
        if self.uncertain_plan is not None:
            raise QueryError("an UNCERTAIN TIME query has no certain matches; use run() or "
                             "cep_core.uncertain.evaluate()", *self.uncertain_plan.clause.pos,
                             query=self.text)
        with query_errors(self.text):
            df = self.with_keys(df)
            bound = self._bind(df)
            if self._fast is not None:
                found = self._fast.find_matches(bound, df)
                if found is not None:
                    return found
            return bound.find_matches(df)

    def run(self, df: pd.DataFrame) -> pd.DataFrame:
        """The query's result over ``df`` (as :func:`match_recognize` returns it)."""
        with query_errors(self.text):
            if self.uncertain_plan is not None:
                from .uncertain.evaluation import evaluate_compiled

                return evaluate_compiled(self, df).table
            df = self.with_keys(df)
            bound = self._bind(df)
            if self._fast is not None:
                table = self._fast.run(bound, df)
                if table is not None:
                    return table
            return bound.run(df)

    def sql(self) -> str:
        """The query printed back as SQL."""
        from .language.printer import to_sql

        return to_sql(self.tree)


def _has_exclusion(p: ast.Pattern) -> bool:
    return any(isinstance(node, ast.Exclusion) for node in ast.pattern_nodes(p))


class Bound:
    """A compiled query bound to one input schema (column names resolved)."""

    def __init__(self, q: CompiledQuery, columns: tuple[str, ...]):
        self.q = q
        self.columns = columns
        m = q.match
        scope = Scope(columns, q._sets, "MEASURES")
        self.partition_cols = [scope.column(c) for c in m.partition_by]
        self.order_cols = [scope.column(s.column) for s in m.order_by]
        self.local_parts, self.dependent, self.measures = q._compile_expressions(columns)
        self.used_columns = sorted({scope.column(n) for e in self._all_exprs()
                                    for n in column_references(e)})
        self.define_columns = {
            scope.column(n) for d in m.defines for part in conjuncts(d.condition)
            if not is_row_local(part, d.var) for n in column_references(part)}
        self.measure_names = [me.name for me in m.measures]
        skip = m.skip
        self.skip = SkipPolicy(skip.kind, q._sets.get(skip.var) if skip.var else None,
                               skip.var or "", skip.pos)

    def _all_exprs(self) -> list[ast.Expr]:
        m = self.q.match
        return [d.condition for d in m.defines] + [me.expr for me in m.measures]

    # ------------------------------------------------------------------ partitions
    def _prepare(self, df: pd.DataFrame) -> tuple[pd.DataFrame, np.ndarray, list[int]]:
        """Sort by partition and order keys; return the sorted frame, the original
        positions of its rows, and the partition boundaries."""
        m = self.q.match
        keys = self.partition_cols + self.order_cols
        ascending = [True] * len(self.partition_cols) + [not s.descending for s in m.order_by]
        work = df.reset_index(drop=True)
        found = sort_order(self, work)  # the same order with numpy, where the keys allow
        if found is not None:
            perm, found_bounds = found
            if not bool((perm == np.arange(len(perm))).all()):
                work = work.take(perm)  # a new frame: renumber it without another copy
                work.index = pd.RangeIndex(len(work))
            return work, perm, found_bounds
        if keys:
            na_last = all(s.nulls_first is not True for s in m.order_by)
            ordered = work.sort_values(keys, ascending=ascending, kind="mergesort",
                                       na_position="last" if na_last else "first")
            positions = ordered.index.to_numpy()
            work = ordered.reset_index(drop=True)
        else:
            positions = np.arange(len(work))
        n = len(work)
        bounds = [0]
        if self.partition_cols and n:
            change = np.zeros(n, dtype=bool)
            for col in self.partition_cols:
                codes, _ = pd.factorize(work[col], use_na_sentinel=False)
                change[1:] |= codes[1:] != codes[:-1]
            bounds += (np.flatnonzero(change)).tolist()
        bounds.append(n)
        if n == 0:
            bounds = [0]
        return work, positions, bounds

    def _matcher(self, work: pd.DataFrame) -> tuple[Matcher, MatchState]:
        q = self.q
        m = q.match
        local: list[np.ndarray | None] = []
        for i, parts in enumerate(self.local_parts):
            if not parts:
                local.append(None)
                continue
            scope = Scope(self.columns, q._sets, "DEFINE", q._variables[i])
            mask = np.ones(len(work), dtype=bool)
            for part in parts:
                mask &= evaluate_condition(part, work, scope)
            local.append(mask)
        window = None
        if m.within is not None:
            order, limit = order_numbers(work[self.order_cols[0]], m.within)
            window = Window(order, limit, m.order_by[0].descending)
        # Columns read while matching become Python lists once; columns only read by
        # MEASURES are read value by value, for the matched rows only.
        cols: dict[str, Any] = {
            c: column_values(work[c]) if c in self.define_columns else LazyColumn(work[c])
            for c in self.used_columns}
        st = MatchState(cols, q._variables)
        starts = None
        if not P.can_be_empty(m.pattern):
            index = {name: i for i, name in enumerate(q._variables)}
            masks = [local[index[v]] for v in P.first_variables(m.pattern)]
            if masks and all(mask is not None for mask in masks):
                starts = np.logical_or.reduce([mk for mk in masks if mk is not None])
        matcher = Matcher(q.program, Conditions(local, self.dependent), self.skip, window,
                          report_unmatched=m.rows_per_match == "ALL UNMATCHED", starts=starts,
                          selection=m.selection, memo=position_only(m.defines),
                          blame=_blame(m.pattern))
        matcher.emit_timeouts = m.emit_timeouts
        return matcher, st

    def _partitions(self, df: pd.DataFrame) -> tuple[
            pd.DataFrame, np.ndarray, MatchState, list[Partition]]:
        work, positions, bounds = self._prepare(df)
        matcher, st = self._matcher(work)
        pcols = [work[c] for c in self.partition_cols]
        result = []
        for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
            key = tuple(to_python(c.iat[lo]) for c in pcols)
            if self.q.match.consumption is not None:
                found = consume(matcher, st, lo, hi, self.q.match.consumption)
            else:
                found = matcher.partition(st, lo, hi)
            result.append(Partition(key, lo, hi, found))
        return work, positions, st, result

    def _measures_at(self, st: MatchState, match: RawMatch, upto: int) -> list[Any]:
        if st.rows is not match.rows or st.labels is not match.labels:
            st.rows = match.rows
            st.labels = match.labels
            st.epoch += 1
        st.upto = upto
        st.match_number = match.number
        return [fn(st) for fn in self.measures]

    # ------------------------------------------------------------------ outputs
    def find_matches(self, df: pd.DataFrame) -> list[Match]:
        work, positions, st, parts = self._partitions(df)
        return self._matches(parts, positions, st)

    def _matches(self, parts: Iterable[Partition], positions: np.ndarray,
                 st: MatchState) -> list[Match]:
        """The matches of ``parts`` (unmatched rows left out, excluded rows dropped) with
        their measures; the general path and the compiled kernel's output share it."""
        names = self.q._variables
        out: list[Match] = []
        for part in parts:
            st.lo, st.hi = part.lo, part.hi
            for mt in part.matches:
                if mt.unmatched:
                    continue
                values = self._measures_at(st, mt, len(mt.rows))
                kept = [(r, v) for r, v, x in zip(mt.rows, mt.labels, mt.excluded, strict=True)
                        if not x]
                out.append(Match(part.key, mt.number, tuple(int(positions[r]) for r, _ in kept),
                                 tuple(names[v] for _, v in kept),
                                 dict(zip(self.measure_names, values, strict=True)),
                                 mt.timed_out))
        return out

    def run(self, df: pd.DataFrame) -> pd.DataFrame:
        m = self.q.match
        work, positions, st, parts = self._partitions(df)
        if m.rows_per_match == "ONE":
            table = self._one_row(work, st, parts)
        else:
            table = self._all_rows(work, st, parts)
        return select(self.q.tree, table)

    def _one_row(self, work: pd.DataFrame, st: MatchState,
                 parts: list[Partition]) -> pd.DataFrame:
        records: list[list[Any]] = []
        for part in parts:
            st.lo, st.hi = part.lo, part.hi
            for mt in part.matches:
                records.append([*part.key, *self._measures_at(st, mt, len(mt.rows))])
                if self.q.match.emit_timeouts:
                    records[-1].append(mt.timed_out)
        names = [*self.partition_cols, *self.measure_names]
        if self.q.match.emit_timeouts:
            names.append(TIMED_OUT)
        if not records:
            empty = [work[c].iloc[:0].reset_index(drop=True) for c in self.partition_cols]
            empty += [pd.Series([], dtype=object) for _ in self.measure_names]
            if self.q.match.emit_timeouts:
                empty.append(pd.Series([], dtype=bool))
            return _frame(names, empty)
        if not names:
            return pd.DataFrame(index=range(len(records)))
        return pd.DataFrame.from_records(records, columns=names)

    def _all_rows(self, work: pd.DataFrame, st: MatchState,
                  parts: list[Partition]) -> pd.DataFrame:
        mode = self.q.match.rows_per_match
        take: list[int] = []
        measure_rows: list[list[Any]] = []
        timed_out: list[bool] = []
        nothing = [None] * len(self.measures)
        for part in parts:
            st.lo, st.hi = part.lo, part.hi
            for mt in part.matches:
                if mt.unmatched:
                    take.append(mt.start)
                    measure_rows.append(nothing)
                    timed_out.append(False)
                    continue
                if not mt.rows:
                    if mode == "ALL OMIT":
                        continue
                    # An empty match is shown as its start row with measures over no rows.
                    take.append(mt.start)
                    measure_rows.append(self._measures_at(st, mt, 0))
                    timed_out.append(False)
                    continue
                for i, (row, excluded) in enumerate(zip(mt.rows, mt.excluded, strict=True)):
                    if excluded:
                        continue
                    take.append(row)
                    measure_rows.append(self._measures_at(st, mt, i + 1))
                    timed_out.append(mt.timed_out)
        # Trino / SQL:2016: PARTITION BY columns, ORDER BY columns, measures, then the
        # remaining input columns. A measure named like an input column is a column of its
        # own next to it (built by position: neither replaces the other).
        lead = list(dict.fromkeys(self.partition_cols + self.order_cols))
        rest = [c for c in work.columns if c not in lead]
        base = work.iloc[take].reset_index(drop=True)
        names: list[str] = list(lead)
        series: list[pd.Series] = [base[c] for c in lead]
        for j, name in enumerate(self.measure_names):
            values = [r[j] for r in measure_rows]
            names.append(name)
            series.append(pd.Series(values, dtype=object if not values else None))
        if self.q.match.emit_timeouts:
            names.append(TIMED_OUT)
            series.append(pd.Series(timed_out, dtype=bool))
        names += rest
        series += [base[c] for c in rest]
        return _frame(names, series)


def _frame(names: list[str], columns: list[pd.Series]) -> pd.DataFrame:
    """A frame of ``columns`` named ``names`` (which may repeat), in that order."""
    if not columns:
        return pd.DataFrame()
    frame = pd.concat([c.reset_index(drop=True) for c in columns], axis=1, ignore_index=True)
    frame.columns = names
    return frame


def _blame(pattern: ast.Pattern) -> tuple[str, tuple[int, int]]:
    """The pattern part named when matching backtracks too much (see Matcher)."""
    part = P.backtracking_part(pattern)
    return to_sql(part), getattr(part, "pos", (1, 1))
