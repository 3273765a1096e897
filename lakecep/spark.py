"""MATCH_RECOGNIZE for Spark: :func:`match_recognize` on a DataFrame, :func:`sql` for SQL.

Open-source Spark has no MATCH_RECOGNIZE; this module runs cep_core inside Spark:

* ``match_recognize(df, query)`` -> a lazy Spark DataFrame of the query's matches. Rows are
  distributed by the query's PARTITION BY: the keys are hashed into buckets (as the gold
  job does) and every bucket is one ``applyInPandas`` call of the engine, so nothing is
  collected to the driver. The output schema is derived from the query before any job
  runs (ONE ROW PER MATCH: partition columns + measures; ALL ROWS PER MATCH: input
  columns + measures), with the measures' Spark types inferred from their expressions.
* ``sql(spark, statement)`` runs a Spark SQL statement in which any table or (subquery) in
  a FROM clause may be followed by ``MATCH_RECOGNIZE (...)``: each such clause is run by
  :func:`match_recognize` and registered as a temporary view, and Spark runs the rest of
  the statement (WHERE, JOIN, GROUP BY, ORDER BY ...) over the matches.

Invalid queries and unknown columns raise :class:`cep_core.QueryError` on the driver, with
the line and column in the text the caller wrote. This module is a Spark adapter (floor 3,
beside ``lakecep.jobs``; docs/architecture.md); docs/spark.md describes it for users.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import pandas as pd

from cep_core import CompiledQuery, QueryError, compile_query, to_sql
from cep_core.language import ast
from cep_core.runtime.output import TIMED_OUT, select

__all__ = ["match_recognize", "rewrite", "sql"]

#: Column of the key bucket that groups keys into one engine call.
BUCKET = "_lakecep_bucket"


# ----------------------------------------------------------------------------- DataFrame API


def match_recognize(df, query: str | CompiledQuery, *, buckets: int | None = None,  # noqa: ANN001, ANN201
                    types: Mapping[str, Any] | None = None):
    """The matches of ``query`` in the Spark DataFrame ``df`` (a lazy Spark DataFrame).

    ``query`` is a cep_core query, ``SELECT ... FROM t MATCH_RECOGNIZE (...)`` (the table
    name is not looked up: ``df`` is the table) or just ``MATCH_RECOGNIZE (...)`` (all
    columns). ``buckets``: how many groups the PARTITION BY keys are hashed into (default
    ``spark.sql.shuffle.partitions``); without PARTITION BY the whole input is one
    sequence, run by one task. ``types``: Spark types (``DataType`` or DDL text such as
    ``"double"``) for measures whose inferred type you want to override.

    Raises :class:`cep_core.QueryError` for an invalid query, an unknown column or an
    unsupported feature, before any Spark job runs.
    """
    located = _Located.of(query)
    return located.run(df, buckets, types)


@dataclass
class _Located:
    """A compiled query and how to report its errors against the caller's text."""

    compiled: CompiledQuery
    text: str  # the caller's text, errors are rendered against it
    where: Callable[[int, int], tuple[int, int]]  # compiled text (line, col) -> caller's

    @staticmethod
    def of(query: str | CompiledQuery) -> _Located:
        if isinstance(query, CompiledQuery):
            return _Located(query, query.text, lambda line, col: (line, col))
        stripped = query.lstrip()
        if stripped[:15].upper() == "MATCH_RECOGNIZE":
            prefix = "SELECT * FROM t "
            skipped = len(query) - len(stripped)
            cep_text = prefix + stripped
            return _Located.compile(query, cep_text,
                                    _shift(query, cep_text, skipped - len(prefix)))
        return _Located.compile(query, query, lambda line, col: (line, col))

    @staticmethod
    def compile(text: str, cep_text: str,
                where: Callable[[int, int], tuple[int, int]]) -> _Located:
        try:
            compiled = compile_query(cep_text)
        except QueryError as err:
            raise _relocated(err, text, where) from None
        return _Located(compiled, text, where)

    def error(self, err: QueryError) -> QueryError:
        return _relocated(err, self.text, self.where)

    def run(self, df, buckets: int | None, types: Mapping[str, Any] | None):  # noqa: ANN001, ANN201
        try:
            plan = _plan(self.compiled, df.schema, types or {})
        except QueryError as err:
            raise self.error(err) from None
        if buckets is None:
            buckets = int(df.sparkSession.conf.get("spark.sql.shuffle.partitions") or 200)
        return plan.apply(df, max(1, buckets))


def _relocated(err: QueryError, text: str, where: Callable[[int, int], tuple[int, int]]
               ) -> QueryError:
    line, column = where(err.line, err.column)
    return QueryError(err.message, line, column, query=text)


def _shift(text: str, compiled: str, delta: int) -> Callable[[int, int], tuple[int, int]]:
    """Positions in ``compiled`` -> positions in ``text``, where the character at offset
    ``o`` of ``compiled`` is the one at ``o + delta`` of ``text``."""
    def where(line: int, column: int) -> tuple[int, int]:
        return _line_col(text, max(0, _offset_of(compiled, line, column) + delta))
    return where


def _offset_of(text: str, line: int, column: int) -> int:
    """Offset of a 1-based (line, column) of ``text``."""
    lines = text.split("\n")
    return sum(len(s) + 1 for s in lines[: max(0, line - 1)]) + column - 1


def _line_col(text: str, offset: int) -> tuple[int, int]:
    offset = min(offset, len(text))
    line = text.count("\n", 0, offset) + 1
    return line, offset - (text.rfind("\n", 0, offset) + 1) + 1


# ----------------------------------------------------------------------------- the plan


@dataclass
class _Plan:
    """What runs: the query without its outer SELECT (``star``) on the executors, and the
    outer SELECT and ORDER BY applied by Spark."""

    star: str  # query text the executors compile
    fields: list[Any]  # StructFields of the star output, under internal names _c0, _c1 ...
    names: list[str]  # star output column names
    selected: list[tuple[int, str]]  # (star column, output name) of the outer SELECT
    order: list[tuple[int, bool]]  # (star column, descending) of the outer ORDER BY
    partition_by: list[str]  # input columns of PARTITION BY

    def apply(self, df, buckets: int):  # noqa: ANN001, ANN201
        from pyspark.sql import functions as F
        from pyspark.sql.types import StructType

        keys = [F.col(_quote(c)) for c in self.partition_by]
        bucket = F.pmod(F.hash(*keys), F.lit(buckets)) if keys else F.lit(0)
        schema = StructType(self.fields)
        found = (df.withColumn(BUCKET, bucket).groupBy(BUCKET)
                 .applyInPandas(_bucket_runner(self.star, schema.json()), schema))
        if self.order:
            found = found.orderBy(*[F.col(f"_c{i}").desc() if desc else F.col(f"_c{i}").asc()
                                    for i, desc in self.order])
        return found.select(*[F.col(f"_c{i}").alias(name) for i, name in self.selected])


def _plan(compiled: CompiledQuery, schema, types: Mapping[str, Any]) -> _Plan:  # noqa: ANN001
    if compiled.uncertain_plan is not None:
        raise QueryError("UNCERTAIN TIME queries are not supported by lakecep.spark (they "
                         "run in the gold job; docs/uncertain.md)", *compiled.match.uncertain.pos)
    input_types = {f.name: f.dataType for f in schema.fields}
    if BUCKET in input_types:
        raise QueryError(f"the input has a column named {BUCKET}, which lakecep.spark uses")
    empty = _empty_frame(schema)
    compiled.run(empty)  # resolves every column (QueryError for unknown ones), no data
    tree = compiled.tree
    star_tree = replace(tree, select=(ast.SelectItem(None),), order_by=())
    star_text = to_sql(star_tree)
    star = compile_query(star_text)
    names = [str(c) for c in star.run(empty).columns]
    fields = _star_fields(compiled, names, input_types, types)
    # The outer SELECT and ORDER BY: cep_core's own resolution, applied to a one-row table
    # whose cells hold their column's position.
    probe = pd.DataFrame([list(range(len(names)))], columns=names)
    chosen = select(replace(tree, order_by=()), probe)
    selected = [(int(chosen.iat[0, j]), str(chosen.columns[j])) for j in range(chosen.shape[1])]
    seen: dict[str, str] = {}
    for _, name in selected:  # Spark resolves names case-insensitively
        if name.lower() in seen:
            raise QueryError(f"the output has two columns named {name!r} (e.g. a measure "
                             "named like an input column under ALL ROWS PER MATCH); a Spark "
                             "DataFrame needs distinct names: rename the measure or select "
                             "the columns you need with aliases")
        seen[name.lower()] = name
    order = []
    for item in tree.order_by:
        only = replace(tree, select=(ast.SelectItem(item.column.name, quoted=item.column.quoted,
                                                    pos=item.column.pos),), order_by=())
        order.append((int(select(only, probe).iat[0, 0]), item.descending))
    partition_by = [_resolve(c, list(input_types)) for c in compiled.match.partition_by]
    return _Plan(star_text, fields, names, selected, order, partition_by)


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _resolve(column: ast.Column, names: Sequence[str]) -> str:
    """An input column as cep_core resolves it: exact, else the one case-insensitive match."""
    if column.name in names:
        return column.name
    found = [] if column.quoted else [n for n in names if n.lower() == column.name.lower()]
    if len(found) == 1:
        return found[0]
    raise QueryError(f"unknown column {column.name!r}; the input has: {', '.join(names)}",
                     *column.pos)


def _star_fields(compiled: CompiledQuery, names: list[str], input_types: dict[str, Any],
                 types: Mapping[str, Any]) -> list[Any]:
    from pyspark.sql.types import BooleanType, StructField

    match = compiled.match
    measures = {m.name: m for m in match.measures}
    columns = list(input_types)
    fields = []
    for i, name in enumerate(names):
        if match.rows_per_match == "ONE" and i < len(match.partition_by):
            kind = input_types[_resolve(match.partition_by[i], columns)]
        elif name in measures:
            measure = measures[name]
            given = _given_type(types, name)
            kind = given if given is not None else _infer(measure.expr, input_types)
        elif name == TIMED_OUT and match.emit_timeouts:
            kind = BooleanType()
        else:
            kind = input_types[name]
        fields.append(StructField(f"_c{i}", kind, True))
    unknown = sorted(set(types) - set(measures))
    if unknown:
        raise QueryError(f"types= names {', '.join(unknown)}, which are not measures of the "
                         f"query (measures: {', '.join(measures) or 'none'})")
    return fields


def _given_type(types: Mapping[str, Any], name: str) -> Any:
    from pyspark.sql.types import DataType, _parse_datatype_string

    given = types.get(name)
    if given is None or isinstance(given, DataType):
        return given
    return _parse_datatype_string(str(given))


# ----------------------------------------------------------------------------- types


def _empty_frame(schema) -> pd.DataFrame:  # noqa: ANN001
    """An empty pandas frame with the dtypes Spark's Arrow conversion would give."""
    return pd.DataFrame({f.name: pd.Series([], dtype=_pandas_dtype(f.dataType))
                         for f in schema.fields})


def _pandas_dtype(kind) -> str:  # noqa: ANN001
    from pyspark.sql import types as T

    if isinstance(kind, T.BooleanType):
        return "bool"
    if isinstance(kind, T.ByteType | T.ShortType | T.IntegerType | T.LongType):
        return "int64"
    if isinstance(kind, T.FloatType | T.DoubleType):
        return "float64"
    if isinstance(kind, T.TimestampType | T.TimestampNTZType):
        return "datetime64[ns]"
    if isinstance(kind, T.DayTimeIntervalType):
        return "timedelta64[ns]"
    return "object"


def _infer(expr: ast.Expr, columns: dict[str, Any]) -> Any:
    """The Spark type of a MEASURES expression; StringType when it cannot be known (a bare
    NULL, a mix of unrelated types)."""
    from pyspark.sql.types import StringType

    found = _type_of(expr, columns)
    return StringType() if found is None else found


def _type_of(e: ast.Expr, columns: dict[str, Any]) -> Any:  # noqa: C901, PLR0911, PLR0912
    from pyspark.sql import types as T

    if isinstance(e, ast.Column):
        return columns[_resolve(e, list(columns))]
    if isinstance(e, ast.Literal):
        value = e.value
        if value is None:
            return None
        if isinstance(value, bool):
            return T.BooleanType()
        if isinstance(value, int):
            return T.LongType()
        if isinstance(value, float):
            return T.DoubleType()
        return T.StringType()
    if isinstance(e, ast.TimestampLiteral):
        return T.TimestampType()
    if isinstance(e, ast.IntervalLiteral):
        return T.DayTimeIntervalType()
    if isinstance(e, ast.Unary):
        return T.BooleanType() if e.op == "NOT" else _type_of(e.operand, columns)
    if isinstance(e, ast.IsNull | ast.Between | ast.InList | ast.Like):
        return T.BooleanType()
    if isinstance(e, ast.Binary):
        if e.op in ("AND", "OR", "=", "<>", "!=", "<", "<=", ">", ">="):
            return T.BooleanType()
        if e.op == "||":
            return T.StringType()
        return _arithmetic(e.op, _type_of(e.left, columns), _type_of(e.right, columns))
    if isinstance(e, ast.Case):
        return _common([_type_of(v, columns) for _, v in e.whens]
                       + ([_type_of(e.default, columns)] if e.default is not None else []))
    if isinstance(e, ast.Cast):
        return _cast_type(e.type_name)
    if isinstance(e, ast.Call):
        return _call_type(e, columns)
    return None


def _call_type(e: ast.Call, columns: dict[str, Any]) -> Any:  # noqa: PLR0911
    from pyspark.sql import types as T

    name = e.name
    args = [_type_of(a, columns) if not isinstance(a, ast.Star) else None for a in e.args]
    first = args[0] if args else None
    if name in ("COUNT", "MATCH_NUMBER", "LENGTH"):
        return T.LongType()
    if name == "CLASSIFIER" or name in ("LOWER", "UPPER", "CONCAT", "SUBSTR", "SUBSTRING",
                                        "TRIM", "LTRIM", "RTRIM", "REPLACE"):
        return T.StringType()
    if name in ("FIRST", "LAST", "PREV", "NEXT", "MIN", "MAX", "ABS"):
        return first
    if name == "SUM":
        return _arithmetic("+", first, first)
    if name == "AVG" or name in ("SQRT", "POWER"):
        return T.DoubleType()
    if name in ("FLOOR", "CEIL", "CEILING"):
        return T.LongType() if _numeric(first) else first
    if name == "ROUND":
        integral = _integral(first) and (len(e.args) < 2 or (
            isinstance(e.args[1], ast.Literal) and isinstance(e.args[1].value, int)
            and e.args[1].value <= 0))
        return T.LongType() if integral else (T.DoubleType() if _numeric(first) else first)
    if name == "MOD":
        return _arithmetic("%", first, args[1] if len(args) > 1 else None)
    if name in ("COALESCE", "GREATEST", "LEAST"):
        return _common(args)
    return None


def _integral(kind: Any) -> bool:
    from pyspark.sql import types as T

    return isinstance(kind, T.ByteType | T.ShortType | T.IntegerType | T.LongType)


def _numeric(kind: Any) -> bool:
    from pyspark.sql import types as T

    return _integral(kind) or isinstance(kind, T.FloatType | T.DoubleType | T.DecimalType)


def _arithmetic(op: str, left: Any, right: Any) -> Any:  # noqa: PLR0911
    from pyspark.sql import types as T

    if left is None or right is None:
        return left if right is None else right
    if _integral(left) and _integral(right):
        return T.LongType()
    if _numeric(left) and _numeric(right):
        if isinstance(left, T.DecimalType) and isinstance(right, T.DecimalType | T.ByteType |
                                                          T.ShortType | T.IntegerType |
                                                          T.LongType):
            return T.DecimalType(38, left.scale)
        if isinstance(right, T.DecimalType) and _integral(left):
            return T.DecimalType(38, right.scale)
        return T.DoubleType()
    timestamps = (T.TimestampType, T.TimestampNTZType)
    if isinstance(left, timestamps) and isinstance(right, T.DayTimeIntervalType):
        return left
    if isinstance(left, timestamps) and isinstance(right, timestamps) and op == "-":
        return T.DayTimeIntervalType()
    if isinstance(left, T.DayTimeIntervalType) and isinstance(right, timestamps):
        return right
    return left


def _common(kinds: list[Any]) -> Any:
    from pyspark.sql import types as T

    known = [k for k in kinds if k is not None]
    if not known:
        return None
    if all(k == known[0] for k in known):
        return known[0]
    if all(_numeric(k) for k in known):
        if all(_integral(k) for k in known):
            return T.LongType()
        return T.DoubleType()
    return T.StringType()


def _cast_type(type_name: str) -> Any:
    from pyspark.sql import types as T

    base = type_name.split("(")[0]
    return {"BIGINT": T.LongType(), "INTEGER": T.LongType(), "INT": T.LongType(),
            "DOUBLE": T.DoubleType(), "REAL": T.DoubleType(), "DECIMAL": T.DoubleType(),
            "VARCHAR": T.StringType(), "STRING": T.StringType(), "BOOLEAN": T.BooleanType(),
            "TIMESTAMP": T.TimestampType(), "DATE": T.DateType()}.get(base)


# ----------------------------------------------------------------------------- executors

_COMPILED: dict[str, CompiledQuery] = {}


def _bucket_runner(star: str, schema_json: str) -> Callable[[pd.DataFrame], pd.DataFrame]:
    """applyInPandas function: one bucket of keys -> the query's rows (internal names)."""

    def run(frame: pd.DataFrame) -> pd.DataFrame:
        return run_bucket(star, schema_json, frame)

    return run


def run_bucket(star: str, schema_json: str, frame: pd.DataFrame) -> pd.DataFrame:
    """Run ``star`` over one bucket's rows; columns converted to the declared types."""
    from pyspark.sql.types import StructType

    compiled = _COMPILED.get(star)
    if compiled is None:
        compiled = _COMPILED.setdefault(star, compile_query(star))
    schema = StructType.fromJson(json.loads(schema_json))
    out = compiled.run(frame.drop(columns=[BUCKET]).reset_index(drop=True))
    columns = {}
    for j, field in enumerate(schema.fields):
        columns[field.name] = _as_type(out.iloc[:, j], field.dataType)
    return pd.DataFrame(columns, index=range(len(out)))


def _as_type(series: pd.Series, kind: Any) -> pd.Series:  # noqa: PLR0911
    """``series`` (engine values) as Arrow turns into ``kind`` without surprises."""
    import datetime as dt
    import decimal

    from pyspark.sql import types as T

    values = series.reset_index(drop=True)
    kinds = pd.api.types
    if (_integral(kind) and kinds.is_integer_dtype(values)) or (
            isinstance(kind, T.FloatType | T.DoubleType) and kinds.is_float_dtype(values)) or (
            isinstance(kind, T.BooleanType) and kinds.is_bool_dtype(values)) or (
            isinstance(kind, T.TimestampType | T.TimestampNTZType)
            and kinds.is_datetime64_dtype(values)):
        return values  # already what Arrow turns into ``kind`` (input columns, mostly)
    missing = values.isna()
    if isinstance(kind, T.BooleanType):
        return pd.Series([None if m else bool(v) for v, m in zip(values, missing, strict=True)],
                         dtype=object)
    if _integral(kind):
        return pd.Series([None if m else int(v) for v, m in zip(values, missing, strict=True)],
                         dtype=object).astype("Int64")
    if isinstance(kind, T.FloatType | T.DoubleType):
        return pd.Series([None if m else float(v) for v, m in zip(values, missing, strict=True)],
                         dtype="float64")
    if isinstance(kind, T.StringType):
        return pd.Series([None if m else (v if isinstance(v, str) else _text(v))
                          for v, m in zip(values, missing, strict=True)], dtype=object)
    if isinstance(kind, T.DecimalType):
        step = decimal.Decimal(1).scaleb(-kind.scale)
        return pd.Series([None if m else decimal.Decimal(str(v)).quantize(step)
                          for v, m in zip(values, missing, strict=True)], dtype=object)
    if isinstance(kind, T.TimestampType | T.TimestampNTZType):
        return pd.to_datetime(values.where(~missing, None)).astype("datetime64[ns]")
    if isinstance(kind, T.DateType):
        return pd.Series([None if m else (v.date() if isinstance(v, dt.datetime) else v)
                          for v, m in zip(values, missing, strict=True)], dtype=object)
    if isinstance(kind, T.DayTimeIntervalType):
        return pd.to_timedelta(values.where(~missing, None)).astype("timedelta64[ns]")
    return values


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, pd.Timestamp):
        return value.isoformat()
    return str(value)


# ----------------------------------------------------------------------------- SQL


def sql(spark, statement: str):  # noqa: ANN001, ANN201
    """``spark.sql(statement)``, where any table or (subquery) in FROM may be followed by
    ``MATCH_RECOGNIZE (...)`` (see :func:`rewrite`). Each clause becomes a temporary view
    computed by :func:`match_recognize`; Spark runs the rest of the statement."""
    rewritten, clauses = rewrite(statement)
    # Every clause is parsed and checked before Spark reads anything.
    compiled = [_Located.compile(statement, c.query, c.where) for c in clauses]
    keep = False
    try:
        for clause, located in zip(clauses, compiled, strict=True):
            source = spark.sql(f"SELECT * FROM {clause.relation}")
            located.run(source, None, None).createOrReplaceTempView(clause.view)
        result = spark.sql(rewritten)
        # Classic Spark analyses the statement at once: the result keeps the views' plans,
        # so the views can go. Spark Connect analyses it again at every action: the views
        # stay as long as the session (temporary views are the session's own).
        keep = type(spark).__module__.startswith("pyspark.sql.connect")
        return result
    finally:
        if not keep:
            for clause in clauses:
                spark.catalog.dropTempView(clause.view)


@dataclass(frozen=True)
class Clause:
    """One ``<relation> MATCH_RECOGNIZE (...)`` of a statement."""

    view: str  # the temporary view that replaces it
    relation: str  # Spark SQL text of the FROM item (earlier clauses replaced by their views)
    query: str  # the cep_core query: SELECT * FROM t MATCH_RECOGNIZE (<the clause's body>)
    where: Callable[[int, int], tuple[int, int]]  # position in ``query`` -> in the statement


@dataclass(frozen=True)
class _Tok:
    kind: str  # 'word', 'sym', 'other' (strings, quoted names, numbers), 'mr' (a whole clause)
    text: str
    start: int
    end: int
    depth: int


@dataclass(frozen=True)
class _Found:
    keyword: int  # offset of MATCH_RECOGNIZE
    body: tuple[int, int]  # offsets of the text between the clause's parentheses
    end: int  # offset after the closing parenthesis
    rel_start: int  # offset where the FROM item starts


def rewrite(statement: str, prefix: str | None = None) -> tuple[str, list[Clause]]:
    """Find every ``<table | (subquery)> [VERSION AS OF n | TIMESTAMP AS OF t]
    MATCH_RECOGNIZE (...)`` of a Spark SQL statement; return the statement with each
    replaced by a view name, and the clauses, innermost first.

    The statement is read with Spark's lexical rules (quotes with backslash escapes,
    backquoted names, nested ``/* */`` and ``--`` comments); a clause's body with
    cep_core's; parentheses are matched, so strings, comments and subqueries never fool it.
    A FROM item is what follows the nearest FROM, JOIN or comma at the clause's own depth.
    """
    prefix = prefix or f"_lakecep_mr_{uuid.uuid4().hex[:8]}"
    tokens, found = _scan(statement)
    if not found:
        return statement, []
    ordered = sorted(found, key=lambda f: f.end)  # inner clauses end first
    views = {f.keyword: f"{prefix}_{i}" for i, f in enumerate(ordered)}

    def render(lo: int, hi: int) -> str:
        out, at = [], lo
        for f in sorted(found, key=lambda f: f.rel_start):
            if f.rel_start >= at and f.end <= hi:
                out += [statement[at:f.rel_start], " ", views[f.keyword], " "]
                at = f.end
        return "".join(out) + statement[at:hi]

    clauses = []
    for f in ordered:
        lo, hi = f.body
        head = "SELECT * FROM t MATCH_RECOGNIZE ("
        query = head + statement[lo:hi] + "\n)"
        clauses.append(Clause(views[f.keyword], render(f.rel_start, f.keyword).strip(), query,
                              _body_where(statement, query, len(head), lo, f.keyword)))
    return render(0, len(statement)), clauses


def _body_where(statement: str, query: str, head: int, body_start: int, keyword: int
                ) -> Callable[[int, int], tuple[int, int]]:
    def where(line: int, column: int) -> tuple[int, int]:
        offset = _offset_of(query, line, column)
        if offset < head:
            return _line_col(statement, keyword)
        return _line_col(statement, body_start + offset - head)
    return where


def _scan(text: str) -> tuple[list[_Tok], list[_Found]]:  # noqa: C901, PLR0912, PLR0915
    tokens: list[_Tok] = []
    found: list[_Found] = []
    i, n, depth = 0, len(text), 0

    def fail(message: str, at: int) -> QueryError:
        return QueryError(message, *_line_col(text, at), query=text)

    while i < n:
        ch = text[i]
        if ch.isspace():
            i += 1
            continue
        if text.startswith("--", i):
            end = text.find("\n", i)
            i = n if end < 0 else end + 1
            continue
        if text.startswith("/*", i):  # Spark's bracketed comments nest
            level, j = 1, i + 2
            while level and j < n:
                if text.startswith("/*", j):
                    level, j = level + 1, j + 2
                elif text.startswith("*/", j):
                    level, j = level - 1, j + 2
                else:
                    j += 1
            if level:
                raise fail("unterminated comment", i)
            i = j
            continue
        if ch in "'\"`":
            j = i + 1
            while True:
                if j >= n:
                    raise fail("unterminated " + ("quoted name" if ch == "`" else "string"), i)
                if ch != "`" and text[j] == "\\":
                    j += 2
                    continue
                if text[j] == ch:
                    if ch == "`" and j + 1 < n and text[j + 1] == "`":
                        j += 2
                        continue
                    break
                j += 1
            tokens.append(_Tok("other", text[i:j + 1], i, j + 1, depth))
            i = j + 1
            continue
        if ch.isalnum() or ch == "_":
            j = i
            while j < n and (text[j].isalnum() or text[j] == "_"):
                j += 1
            word = text[i:j]
            if word.upper() == "MATCH_RECOGNIZE":
                k = _skip_blank(text, j)
                if k < n and text[k] == "(":
                    close = _cep_close(text, k, fail)
                    start = _relation_start(tokens, depth, text, i, fail)
                    found.append(_Found(i, (k + 1, close), close + 1, start))
                    tokens.append(_Tok("mr", text[i:close + 1], i, close + 1, depth))
                    i = close + 1
                    continue
            tokens.append(_Tok("word", word, i, j, depth))
            i = j
            continue
        if ch == "(":
            tokens.append(_Tok("sym", ch, i, i + 1, depth))
            depth += 1
        elif ch == ")":
            depth -= 1
            tokens.append(_Tok("sym", ch, i, i + 1, depth))
        else:
            tokens.append(_Tok("sym", ch, i, i + 1, depth))
        i += 1
    return tokens, found


def _skip_blank(text: str, i: int) -> int:
    """The offset of the next character that is not blank or inside a comment."""
    n = len(text)
    while i < n:
        if text[i].isspace():
            i += 1
        elif text.startswith("--", i):
            end = text.find("\n", i)
            i = n if end < 0 else end + 1
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            i = n if end < 0 else end + 2
        else:
            break
    return i


def _cep_close(text: str, open_at: int, fail: Callable[[str, int], QueryError]) -> int:
    """The offset of the parenthesis closing the one at ``open_at``, reading the body with
    cep_core's lexical rules ('' and "" escapes, ``--`` and flat ``/* */`` comments)."""
    depth, i, n = 0, open_at, len(text)
    while i < n:
        ch = text[i]
        if text.startswith("--", i) and not text.startswith("-}", i + 1):
            end = text.find("\n", i)
            i = n if end < 0 else end + 1
            continue
        if text.startswith("/*", i):
            end = text.find("*/", i + 2)
            if end < 0:
                raise fail("unterminated comment", i)
            i = end + 2
            continue
        if ch in "'\"":
            j = i + 1
            while True:
                if j >= n:
                    raise fail("unterminated " + ("string" if ch == "'" else "quoted name"), i)
                if text[j] == ch:
                    if j + 1 < n and text[j + 1] == ch:
                        j += 2
                        continue
                    break
                j += 1
            i = j + 1
            continue
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    raise fail("MATCH_RECOGNIZE ( is never closed", open_at)


_BOUNDARIES = {"FROM", "JOIN"}


def _relation_start(tokens: list[_Tok], depth: int, text: str, keyword: int,
                    fail: Callable[[str, int], QueryError]) -> int:
    """Where the FROM item before the MATCH_RECOGNIZE at ``keyword`` starts."""
    for tok in reversed(tokens):
        if tok.depth < depth:
            break
        if tok.depth > depth or tok.kind == "other" or tok.text in "()":
            continue
        if tok.kind == "mr":
            raise fail("MATCH_RECOGNIZE directly after another MATCH_RECOGNIZE: put the "
                       "first one in a (subquery)", keyword)
        if (tok.kind == "word" and tok.text.upper() in _BOUNDARIES) or tok.text == ",":
            if not text[tok.end:keyword].strip():
                break
            return tok.end
    raise fail("MATCH_RECOGNIZE must follow a table or a (subquery) in a FROM clause", keyword)
