"""Early validation: every query and source file checked against the silver schema the
gold job will hand each query, in pure Python (no Spark, no JVM): ``lakecep validate`` and
the start of the gold job. See docs/queries.md ("Validation").

The schema a query sees is what gold selects from silver (``jobs.tables.engine_columns``):
the event contract's columns (``event_id``, ``object_id``, ``event_type``, ``source_id``,
``event_time``, ``time_lower``, ``time_upper``, ``ingest_time``; ``pmf`` when an uncertain
query runs) plus the typed attributes of every query's ``[attributes]`` and of every
configured source (``lakecep.sources.with_source_attributes``). Reported, each with the
file, line and column (a position inside a TOML string is mapped back to the file by
:mod:`lakecep.toml_positions`):

- ``unknown_column``: a column the schema does not have, with "did you mean" (difflib)
  and, when the name is a source field mapped onto a contract field, that field;
- ``type_mismatch``: what the types tell without data: a comparison of a number with a
  string (``amount > '500'``), arithmetic on a string or boolean, a numeric function or
  SUM/AVG over a string, a condition that is a non-boolean column;
- ``partition_key``: a PARTITION BY other than the key gold matches by (``object_id``;
  a live-archive query's ``key``);
- ``query_error``: the engine's own error (syntax, undefined variable, ...);
- ``definition_error`` / ``toml_error`` / ``source_error``: a query or source file that
  does not load (bad TOML, an unknown key, a bad mapping expression, ...);
- ``rule_cycle`` / ``rule_input``: chained rules (``input``, docs/rules.md) that read each
  other in a cycle, or an input that is no rule or no complex-event rule;
  ``rule_priority``: a chained rule reading a rule of a lower priority class. A chained rule's
  statement is checked against the derived events' columns (``lakecep.rules``).
"""

from __future__ import annotations

import difflib
import re
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lakecep.console import Failure
from lakecep.queries import (
    PRIORITIES,
    QUERIES_DIR,
    AcquisitionQuery,
    LiveArchiveQuery,
    PatternQuery,
    QueryDefinition,
    QueryDefinitionError,
    UncertainQuery,
    WindowQuery,
    compiled_query,
    load_query,
    with_rule_hashes,
)
from lakecep.rules import RuleGraphError, derived_schema, inputs_of, rule_levels
from lakecep.sources import (
    PART,
    RAW_HASH,
    Source,
    SourceError,
    load_source,
    unknown_keys,
    with_source_attributes,
)
from lakecep.toml_positions import Located, Path_, locate

#: The silver columns gold hands every query (``jobs.tables.ENGINE_COLUMNS``) and types.
CONTRACT_TYPES = {
    "event_id": "string", "object_id": "string", "event_type": "string",
    "source_id": "string", "event_time": "timestamp", "time_lower": "timestamp",
    "time_upper": "timestamp", "ingest_time": "timestamp",
}
PMF_TYPE = "array<double>"
#: The key of an event: gold matches pattern and uncertain queries per object_id.
KEY = "object_id"
#: Attributes of the built-in RFID events (``lakecep generate``): a query names them after
#: declaring them in ``[attributes]``.
RFID_ATTRIBUTES = {"rssi": "double", "antenna": "bigint"}
_KINDS = {"string": "string", "bigint": "number", "double": "number", "boolean": "boolean",
          "timestamp": "timestamp"}


@dataclass(frozen=True)
class Problem:
    """One finding: where (``line`` 0: the file as a whole), a code and a message."""

    file: str
    line: int
    column: int
    code: str
    message: str
    hint: str = ""

    @property
    def location(self) -> str:
        return f"{self.file}:{self.line}:{self.column}" if self.line else self.file

    def __str__(self) -> str:
        return f"{self.location}: {self.code}: {self.message}"

    def as_dict(self) -> dict[str, Any]:
        return {"file": self.file, "line": self.line, "column": self.column,
                "code": self.code, "message": self.message, "hint": self.hint}


class ValidationError(Failure):
    """Queries or sources that cannot run (one line: the first problem; the hint lists
    the others). Raised by the gold job before any data moves."""

    def __init__(self, problems: Sequence[Problem]) -> None:
        self.problems = list(problems)
        first = self.problems[0]
        more = self.problems[1:]
        hint = "; ".join(str(p) for p in more[:5]) + ("; ..." if len(more) > 5 else "")
        hint = (f"{len(more)} more: {hint}. " if more else (first.hint + ". " if first.hint
                                                              else ""))
        super().__init__(f"{first}", hint + "`lakecep validate` lists every problem "
                         "(docs/queries.md, Validation)", code=2)


@dataclass
class Report:
    """What :func:`validate` checked and found."""

    queries: list[QueryDefinition] = field(default_factory=list)
    sources: list[Source] = field(default_factory=list)
    query_files: list[str] = field(default_factory=list)
    source_files: list[str] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    #: the typed columns each query sees
    columns: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.problems

    def raise_for_problems(self) -> None:
        if self.problems:
            raise ValidationError(self.problems)


# ----------------------------------------------------------------------------- where


@dataclass(frozen=True)
class Where:
    """Maps a position inside a query text (or a key) to the file's line and column."""

    file: str
    located: Located | None = None
    path: Path_ = ()

    def at(self, line: int, column: int) -> tuple[int, int]:
        if self.located is None:  # a query given as an object: positions in its text
            return line, column
        found = self.located.in_value(self.path, line, column) or self.located.key(self.path)
        return found or (0, 0)

    def key(self, path: Path_, in_value: bool = True) -> tuple[int, int]:
        if self.located is None:
            return 0, 0
        found = (self.located.in_value(path, 1, 1) if in_value else None
                 ) or self.located.key(path)
        return found or (0, 0)

    def sub(self, path: Path_) -> Where:
        return Where(self.file, self.located, path)


def _problem(where: Where, pos: tuple[int, int], code: str, message: str,
             hint: str = "") -> Problem:
    line, column = where.at(*pos) if pos != (0, 0) else where.key(where.path, False)
    return Problem(where.file, line, column, code, message, hint)


# ----------------------------------------------------------------------------- entry points


def validate(queries_dir: Path | str | None, sources_dir: Path | None) -> Report:
    """Check the query folder (default: the shipped queries) and the source folder the way
    the gold job loads them, without Spark."""
    report = Report()
    folder = Path(queries_dir) if queries_dir else QUERIES_DIR
    where_of: dict[str, Where] = {}
    if sources_dir is not None and sources_dir.is_dir():
        names: dict[str, str] = {}
        for path in sorted(sources_dir.glob("*.toml")):
            report.source_files.append(str(path))
            source, problems = check_source_file(path)
            report.problems += problems
            if source is not None:
                if source.name in names:
                    report.problems.append(Problem(str(path), 0, 0, "source_error",
                                                   f"source name {source.name!r} is also "
                                                   f"the name of {names[source.name]}"))
                    continue
                names[source.name] = str(path)
                report.sources.append(source)
    if report.problems:  # the attributes of a source that does not load are unknown:
        return report  # queries are checked once the source files load
    if not folder.is_dir():
        report.problems.append(Problem(str(folder), 0, 0, "definition_error",
                                       f"query folder {folder} does not exist",
                                       "set queries_dir (docs/configuration.md)"))
        return report
    ids: dict[str, str] = {}
    for path in sorted(folder.glob("*.toml")):
        report.query_files.append(str(path))
        query, where, problems = _load_query_file(path)
        report.problems += problems
        if query is None:
            continue
        if query.id in ids:
            report.problems.append(Problem(where.file, *where.key(("id",)), "definition_error",
                                           f"query id {query.id!r} is also the id of "
                                           f"{ids[query.id]}"))
            continue
        ids[query.id] = str(path)
        where_of[query.id] = where
        report.queries.append(query)
    report.queries = with_rule_hashes(sorted(report.queries, key=lambda q: q.id))
    columns, problems = check_queries(report.queries, report.sources, where_of)
    report.columns = columns
    report.problems += problems
    report.problems.sort(key=lambda p: (p.file, p.line, p.column))
    return report


def check_queries(queries: Sequence[QueryDefinition], sources: Sequence[Source],
                  where_of: Mapping[str, Where] | None = None
                  ) -> tuple[dict[str, str], list[Problem]]:
    """The typed columns the gold job hands ``queries`` (with ``sources``' attributes)
    and every problem of every query. ``where_of``: each query's file (by id); a query
    without one is named ``query <id>`` with positions in its own text."""
    where_of = where_of or {}
    try:
        typed = with_source_attributes(queries, sources)
    except SourceError as exc:
        return {}, [Problem(str(exc).split(":")[0], 0, 0, "source_error", str(exc))]
    problems = _graph_problems(queries, where_of)
    originals = {q.id: q for q in queries}
    columns = schema_of(q for q in typed if not inputs_of(q))
    for query in typed:
        where = where_of.get(query.id) or Where(f"query {query.id}")
        if inputs_of(query):  # a chained rule sees derived events (docs/rules.md)
            own = originals[query.id]
            problems += check_query(own, derived_schema(own), (), where)
        else:
            problems += check_query(query, columns, sources, where)
    return columns, problems


def _graph_problems(queries: Sequence[QueryDefinition], where_of: Mapping[str, Where]
                    ) -> list[Problem]:
    """The rule DAG's problem (docs/rules.md): a cycle (one problem per rule on it, each
    at its ``input``) or a bad input."""
    try:
        rule_levels(queries)
    except RuleGraphError as exc:
        by_id = {q.id: q for q in queries}
        hint = "; ".join(f"{r}: input = {list(inputs_of(by_id[r]))}" for r in exc.rules)
        if exc.code == "rule_cycle":
            hint += "; a rule may not read its own output, directly or through other rules"
        out = []
        for rule in exc.rules:
            where = where_of.get(rule) or Where(f"query {rule}")
            out.append(Problem(where.file, *where.key(("input",), False), exc.code, str(exc),
                               hint))
        return out
    return _priority_problems(queries, where_of)


def _priority_problems(queries: Sequence[QueryDefinition], where_of: Mapping[str, Where]
                       ) -> list[Problem]:
    """A chained rule reading a rule of a lower priority class (docs/rules.md,
    "Priorities"): its input would lag behind it, a priority inversion."""
    by_id = {q.id: q for q in queries}
    out = []
    for query in queries:
        for name in inputs_of(query):
            upstream = by_id[name]
            if PRIORITIES.index(upstream.priority) <= PRIORITIES.index(query.priority):
                continue
            where = where_of.get(query.id) or Where(f"query {query.id}")
            other = where_of.get(name)
            pos = where.key(("priority",), False)
            out.append(Problem(
                where.file, *(pos if pos != (0, 0) else where.key(("input",), False)),
                "rule_priority",
                f"rule {query.id!r} (priority {query.priority}) reads rule {name!r} "
                f"({other.file if other else 'query ' + name}, priority "
                f"{upstream.priority}): a lower class lags behind a higher one",
                f"give {name!r} priority {query.priority!r} or higher, or {query.id!r} "
                f"priority {upstream.priority!r} or lower"))
    return out


def schema_of(queries: Iterable[QueryDefinition]) -> dict[str, str]:
    """The columns (name -> Spark type) gold selects from silver for ``queries``."""
    queries = list(queries)
    out = dict(CONTRACT_TYPES)
    if any(isinstance(q, UncertainQuery) for q in queries):
        out["pmf"] = PMF_TYPE
    for query in queries:
        for name, kind in query.attributes:
            out.setdefault(name, kind)
    return out


# ----------------------------------------------------------------------------- files


_TOML_AT = re.compile(r"\(at line (\d+), column (\d+)\)")


def _toml(path: Path) -> tuple[str, dict[str, Any] | None, Problem | None]:
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        return "", None, Problem(str(path), 0, 0, "toml_error", f"cannot read the file: {exc}")
    try:
        return text, tomllib.loads(text), None
    except tomllib.TOMLDecodeError as exc:
        found = _TOML_AT.search(str(exc))
        line, column = (int(found.group(1)), int(found.group(2))) if found else (
            Located(text).line_col(len(text)) if "end of document" in str(exc) else (0, 0))
        message = _TOML_AT.sub("", str(exc)).replace("(at end of document)", "").strip()
        return text, None, Problem(str(path), line, column, "toml_error",
                                   f"not valid TOML: {message}",
                                   "TOML syntax: https://toml.io/en/v1.0.0")


def _load_query_file(path: Path) -> tuple[QueryDefinition | None, Where, list[Problem]]:
    text, data, bad = _toml(path)
    where = Where(str(path))
    if bad is not None:
        return None, where, [bad]
    assert data is not None
    where = Where(str(path), locate(text, data))
    try:
        return load_query(path), where, []
    except QueryDefinitionError as exc:
        message = str(exc).removeprefix(f"{path}: ")
        named = re.search(r"'(\w+)'", message)
        line, column = where.key((named.group(1),), False) if named else (0, 0)
        return None, where, [Problem(str(path), line, column, "definition_error", message,
                                     "query files: docs/queries.md")]


def check_source_file(path: Path) -> tuple[Source | None, list[Problem]]:
    """Load one source file; its problems with file:line:column where the file shows
    them (bad TOML, every unknown key, a bad value, a bad mapping expression)."""
    text, data, bad = _toml(path)
    if bad is not None:
        return None, [bad]
    assert data is not None
    where = Where(str(path), locate(text, data))
    problems = []
    for key, known in unknown_keys(data):
        name = str(key[-1])
        shown = ".".join(str(p) for p in key if not isinstance(p, int))
        problems.append(Problem(where.file, *where.key(key, False), "source_error",
                                f"unknown key {shown!r}{_did_you_mean(name, known)}",
                                f"known there: {', '.join(known)} (docs/sources.md)"))
    if problems:
        return None, problems
    try:
        source = load_source(path)
    except SourceError as exc:
        return None, [_source_problem(exc, where)]
    fields = {**dict(source.fields), RAW_HASH: "string"}
    if any(o.op == "split" for o in source.operators):
        fields[PART] = "bigint"
    for k, op in enumerate(source.operators, 1):
        if op.op in ("fill", "filter"):
            key = ("operators", k, "value" if op.op == "fill" else "where")
            problems += _expression_types(op.expr, fields, where.sub(key))
        elif op.key:
            problems += _expression_types(op.key, fields, where.sub(("operators", k, "key")))
    for target, expr in source.mapping:
        problems += _expression_types(expr, fields, where.sub(("mapping", target)))
    return (None if problems else source), problems


def _source_problem(exc: SourceError, where: Where) -> Problem:
    message = str(exc).removeprefix(f"{where.file}: ")
    error = exc.error
    hint = "source files: docs/sources.md"
    if error is not None and exc.key:
        from cep_core.errors import QueryError

        assert isinstance(error, QueryError)
        line, column = where.sub(exc.key).at(error.line, error.column)
        message = f"{'.'.join(str(p) for p in exc.key)}: {error.message}"
        unknown = re.match(r"unknown column '(\w+)'; the input has: (.*)$", error.message)
        if unknown:
            fields = unknown.group(2).split(", ")
            message = (f"{'.'.join(str(p) for p in exc.key)}: unknown field "
                       f"{unknown.group(1)!r}{_did_you_mean(unknown.group(1), fields)}")
            hint = f"the declared [fields] and {RAW_HASH}: {unknown.group(2)}"
        return Problem(where.file, line, column, "source_error", message, hint)
    line, column = where.key(exc.key, False) if exc.key else (0, 0)
    return Problem(where.file, line, column, "source_error", message, hint)


def _expression_types(text: str, fields: Mapping[str, str], where: Where) -> list[Problem]:
    from cep_core.errors import QueryError
    from cep_core.language.parser import parse_expression

    try:
        tree = parse_expression(text)
    except QueryError:  # already reported by load_source
        return []
    typer = _Typer({n.lower(): t for n, t in fields.items()}, where)
    typer.kind(tree)
    return typer.problems


# ----------------------------------------------------------------------------- queries


def check_query(query: QueryDefinition, columns: Mapping[str, str],
                sources: Sequence[Source] = (), where: Where | None = None) -> list[Problem]:
    """Every problem of one query over silver ``columns`` (name -> Spark type)."""
    where = where or Where(f"query {query.id}")
    if isinstance(query, AcquisitionQuery):
        return [p for key, name in (("key", query.key), ("type_column", query.type_column))
                if (p := _missing_column(key, name, columns, sources, where)) is not None]
    if isinstance(query, LiveArchiveQuery):
        out = []
        for side, text in (("live", query.live), ("archive", query.archive)):
            out += check_match_recognize(text, columns, query.key, where.sub((side, "query")),
                                         sources)
        if out:
            return out
        return _live_archive_checks(query, columns, where)
    if isinstance(query, WindowQuery):
        return _window_checks(query, columns, sources, where)
    assert isinstance(query, PatternQuery | UncertainQuery)
    return check_match_recognize(query.query, columns, KEY, where.sub(("query",)), sources,
                                 uncertain=isinstance(query, UncertainQuery))


def _missing_column(setting: str, name: str, columns: Mapping[str, str],
                    sources: Sequence[Source], where: Where) -> Problem | None:
    """The problem of a query setting that names a column silver lacks (else None)."""
    if _resolve(name, columns, False) is not None:
        return None
    return Problem(where.file, *where.key((setting,)), "unknown_column",
                   f"{setting} {name!r} is not a silver column{_did_you_mean(name, columns)}",
                   _columns_hint(columns, name, sources))


def _window_checks(query: WindowQuery, columns: Mapping[str, str], sources: Sequence[Source],
                   where: Where) -> list[Problem]:
    """A window query's key and numeric attribute are silver columns."""
    out = [p for setting, name in (("key", query.key), ("attribute", query.attribute))
           if (p := _missing_column(setting, name, columns, sources, where)) is not None]
    found = _resolve(query.attribute, columns, False)
    if found is not None and columns[found] not in ("double", "bigint"):
        out.append(Problem(where.file, *where.key(("attribute",)), "type_mismatch",
                           f"attribute {query.attribute!r} is {columns[found].upper()}; "
                           "window aggregates need a number (declare it double or bigint)"))
    return out


def _live_archive_checks(query: LiveArchiveQuery, columns: Mapping[str, str],
                         where: Where) -> list[Problem]:
    from cep_core.errors import QueryError
    from cep_core.live_archive.spec import StrategyError

    try:
        spec = query.spec()
    except (QueryError, StrategyError, ValueError) as exc:
        return [Problem(where.file, *where.key(("key",)), "query_error", str(exc))]
    out = []
    if (columns.get(_resolve(query.key, columns, False) or "") or "") != "string":
        out.append(Problem(where.file, *where.key(("key",)), "type_mismatch",
                           f"join key {query.key!r} must be a string column"))
    time = _resolve(spec.time, columns, False)
    if time is not None and columns[time] != "timestamp":
        out.append(Problem(where.file, *where.key(("live", "query"), False), "type_mismatch",
                           f"ORDER BY {spec.time!r} is {columns[time]}; live-archive queries "
                           "order by a timestamp column (event_time)"))
    return out


def check_match_recognize(text: str, columns: Mapping[str, str], key: str,  # noqa: PLR0913
                          where: Where, sources: Sequence[Source] = (),
                          uncertain: bool | None = None) -> list[Problem]:
    """The problems of one MATCH_RECOGNIZE statement over ``columns``; ``key``: the
    column gold partitions it by."""
    from cep_core.errors import QueryError
    from cep_core.language import ast

    try:
        compiled = compiled_query(text)
    except QueryError as exc:
        return [_problem(where, (exc.line, exc.column), "query_error", exc.message)]
    if uncertain is not None and (compiled.engine == "uncertain") != uncertain:
        return [_problem(where, (1, 1), "query_error",
                         "kind = 'uncertain' is for queries with UNCERTAIN TIME (and those "
                         "need kind = 'uncertain')")]
    match = compiled.match
    problems: list[Problem] = []
    seen: set[tuple[str, tuple[int, int]]] = set()
    for col in _columns_of(match):
        if _resolve(col.name, columns, col.quoted) is None and (col.name, col.pos) not in seen:
            seen.add((col.name, col.pos))
            problems.append(_problem(
                where, col.pos, "unknown_column",
                f"unknown column {col.name!r}{_did_you_mean(col.name, columns)}",
                _columns_hint(columns, col.name, sources)))
    problems += _partition_problems(compiled, columns, key, where)
    typer = _Typer({n.lower(): t for n, t in columns.items()}, where)
    for d in match.defines:
        typer.kind(d.condition)
    for me in match.measures:
        typer.kind(me.expr)
    problems += typer.problems
    if problems:
        return sorted(problems, key=lambda p: (p.line, p.column))
    from cep_core.compile.booleans import check_boolean_conditions

    def column_kind(col: ast.Column) -> str | None:
        name = _resolve(col.name, columns, col.quoted)
        kind = None if name is None else columns[name]
        return kind if kind in (None, "boolean") else f"type {kind}"

    try:
        check_boolean_conditions(match, column_kind)
        if compiled.engine != "uncertain":  # binding to the schema: anything else
            import pandas as pd

            compiled.run(pd.DataFrame({c: pd.Series([], dtype=object) for c in columns}))
    except QueryError as exc:
        code = "type_mismatch" if "must be boolean" in exc.message else "query_error"
        return [_problem(where, (exc.line, exc.column), code, exc.message)]
    return []


def measure_types(text: str, columns: Mapping[str, str]) -> list[tuple[str, str]]:
    """The MEASURES of a MATCH_RECOGNIZE statement over ``columns`` (name -> Spark type),
    each with the type its stored text is read back as (``lakecep.typed_views``): a column
    of the statement, or PREV/NEXT/FIRST/LAST/MIN/MAX of one, keeps the column's type; COUNT,
    MATCH_NUMBER and LENGTH are ``bigint``; other numbers ``double``; text, booleans and
    timestamps their own; anything the checker cannot type stays ``string``."""
    from cep_core import parse
    from cep_core.language import ast

    types = {n.lower(): t for n, t in columns.items()}
    typer = _Typer(types, Where("measures"))
    out = []
    for measure in parse(text).match.measures:
        expr = measure.expr
        while (isinstance(expr, ast.Call) and expr.args and expr.name in _KEEPS_TYPE
               and not isinstance(expr.args[0], ast.Star)):
            expr = expr.args[0]
        if isinstance(expr, ast.Column) and types.get(expr.name.lower()) in _KINDS:
            out.append((measure.name, types[expr.name.lower()]))
            continue
        if isinstance(measure.expr, ast.Call) and measure.expr.name in _COUNTS:
            out.append((measure.name, "bigint"))
            continue
        kind = typer.kind(measure.expr)
        out.append((measure.name, _MEASURE_TYPES.get(kind or "", "string")))
    return out


#: Functions whose value is one of their first argument's values.
_KEEPS_TYPE = frozenset({"PREV", "NEXT", "FIRST", "LAST", "MIN", "MAX"})
_COUNTS = frozenset({"COUNT", "MATCH_NUMBER", "LENGTH"})
_MEASURE_TYPES = {"number": "double", "string": "string", "boolean": "boolean",
                  "timestamp": "timestamp"}


def _columns_of(match: Any) -> list[Any]:
    from cep_core.compile.expressions import column_references

    out = list(match.partition_by) + [s.column for s in match.order_by]
    for expr in [d.condition for d in match.defines] + [m.expr for m in match.measures]:
        out += column_references(expr)
    if match.uncertain is not None:
        out += [c for c in (match.uncertain.lower, match.uncertain.upper, match.uncertain.pmf)
                if c is not None]
    return out


def _partition_problems(compiled: Any, columns: Mapping[str, str], key: str,
                        where: Where) -> list[Problem]:
    match = compiled.match
    cols = list(match.partition_by)
    hint = (f"gold replays the history of each key a batch touches; an event's key is {KEY} "
            "(a source maps one of your fields onto it), a live-archive query's is its `key`")
    if not cols:
        return [_problem(where, compiled.tree.table_pos, "partition_key",
                         f"no PARTITION BY: gold runs each query per key; add "
                         f"PARTITION BY {key}", hint)]
    out = []
    for col in cols:
        name = _resolve(col.name, columns, col.quoted)
        if name is None:  # reported as an unknown column
            return []
        if name.lower() == key.lower():
            continue
        out.append(_problem(where, col.pos, "partition_key",
                            f"PARTITION BY {col.name}: not the key; gold partitions by "
                            f"{key}", hint))
    if not out and key.lower() not in {c.name.lower() for c in cols}:
        out.append(_problem(where, cols[0].pos, "partition_key",
                            f"PARTITION BY lacks the key {key}", hint))
    return out


def _resolve(name: str, columns: Mapping[str, str], quoted: bool) -> str | None:
    """The schema's name for a reference (exact if quoted, else case-insensitive)."""
    if name in columns:
        return name
    if quoted:
        return None
    found = [c for c in columns if c.lower() == name.lower()]
    return found[0] if len(found) == 1 else None


def _did_you_mean(name: str, known: Iterable[str]) -> str:
    known = list(known)
    by_lower = {k.lower(): k for k in known}
    close = difflib.get_close_matches(name.lower(), list(by_lower), n=1, cutoff=0.6)
    if not close:
        return ""
    shown = " or ".join(repr(by_lower[c]) for c in close)
    return f"; did you mean {shown}?"


def _columns_hint(columns: Mapping[str, str], name: str, sources: Sequence[Source]) -> str:
    lower = name.lower()
    for source in sources:
        for target, expr in source.mapping:
            if expr.strip().lower() == lower:
                return (f"source {source.name} ({source.file}) maps the field {name} onto "
                        f"the contract column {target}: name it {target}")
    if not sources and lower in RFID_ATTRIBUTES:
        return (f"{name} is an attribute of the RFID events: declare it in the query's "
                f"[attributes] ({name} = \"{RFID_ATTRIBUTES[lower]}\")")
    shown = ", ".join(f"{c} ({t})" for c, t in columns.items())
    return (f"the columns: {shown}; an attribute of your events is a column once a source "
            "file declares it in [fields] (or the query in [attributes])")


# ----------------------------------------------------------------------------- types


_NUMERIC_FUNCTIONS = {"ABS", "ROUND", "FLOOR", "CEIL", "CEILING", "SQRT", "POWER", "MOD"}
_STRING_FUNCTIONS = {"LOWER", "UPPER", "CONCAT", "SUBSTR", "SUBSTRING", "TRIM", "LTRIM",
                     "RTRIM", "REPLACE", "CLASSIFIER"}
_COMPARISONS = {"=", "<>", "!=", "<", "<=", ">", ">="}
_CASTS = {"VARCHAR": "string", "CHAR": "string", "STRING": "string", "BOOLEAN": "boolean",
          "TIMESTAMP": "timestamp", "DATE": "timestamp"}


class _Typer:
    """Static kinds of expressions (``string``, ``number``, ``boolean``, ``timestamp``,
    ``interval``; None: unknown) over typed columns, recording the mismatches the engine
    would fail on (or silently get wrong) with data."""

    def __init__(self, types: Mapping[str, str], where: Where) -> None:
        self.types = types
        self.where = where
        self.problems: list[Problem] = []

    def _bad(self, e: Any, message: str, hint: str = "") -> None:
        self.problems.append(_problem(self.where, getattr(e, "pos", (1, 1)), "type_mismatch",
                                      message, hint))

    def kind(self, e: Any) -> str | None:  # noqa: C901, PLR0911, PLR0912 - one case per node
        from cep_core.language import ast

        if isinstance(e, ast.Literal):
            v = e.value
            if v is None:
                return None
            if isinstance(v, bool):
                return "boolean"
            return "string" if isinstance(v, str) else "number"
        if isinstance(e, ast.IntervalLiteral):
            return "interval"
        if isinstance(e, ast.TimestampLiteral):
            return "timestamp"
        if isinstance(e, ast.Column):
            kind = self.types.get(e.name.lower())
            return _KINDS.get(kind or "")
        if isinstance(e, ast.Unary):
            inner = self.kind(e.operand)
            if e.op == "NOT":
                return "boolean"
            if inner in ("string", "boolean", "timestamp"):
                self._bad(e, f"unary {e.op} on {self._show(e.operand, inner)}")
                return None
            return inner
        if isinstance(e, ast.Binary):
            left, right = self.kind(e.left), self.kind(e.right)
            if e.op in ("AND", "OR"):
                return "boolean"
            if e.op == "||":
                return "string"
            if e.op in _COMPARISONS:
                self._compare(e, e.left, left, e.right, right)
                return "boolean"
            return self._arithmetic(e, left, right)
        if isinstance(e, ast.Between):
            kinds = [self.kind(x) for x in (e.operand, e.low, e.high)]
            for other, kind in zip((e.low, e.high), kinds[1:], strict=True):
                self._compare(e, e.operand, kinds[0], other, kind)
            return "boolean"
        if isinstance(e, ast.InList):
            subject = self.kind(e.operand)
            for item in e.items:
                self._compare(e, e.operand, subject, item, self.kind(item))
            return "boolean"
        if isinstance(e, ast.IsNull):
            self.kind(e.operand)
            return "boolean"
        if isinstance(e, ast.Like):
            for part in (e.operand, e.pattern, e.escape):
                if part is not None:
                    self.kind(part)
            return "boolean"
        if isinstance(e, ast.Cast):
            self.kind(e.operand)
            base = e.type_name.split("(")[0]
            return _CASTS.get(base, "number")
        if isinstance(e, ast.Case):
            subject = None if e.operand is None else self.kind(e.operand)
            results = []
            for cond, value in e.whens:
                ck = self.kind(cond)
                if e.operand is not None:
                    self._compare(cond, e.operand, subject, cond, ck)
                results.append(self.kind(value))
            if e.default is not None:
                results.append(self.kind(e.default))
            return next((k for k in results if k is not None), None)
        if isinstance(e, ast.Call):
            return self._call(e)
        return None

    def _call(self, e: Any) -> str | None:
        from cep_core.language import ast

        args = [None if isinstance(a, ast.Star) else self.kind(a) for a in e.args]
        name = e.name
        if name in ("PREV", "NEXT", "FIRST", "LAST", "MIN", "MAX"):
            return args[0] if args else None
        if name in ("COUNT", "MATCH_NUMBER", "LENGTH"):
            return "number"
        if name in ("SUM", "AVG") or name in _NUMERIC_FUNCTIONS:
            for arg, kind in zip(e.args, args, strict=True):
                if kind in ("string", "boolean") or (kind == "timestamp"
                                                     and name not in ("SUM",)):
                    self._bad(arg, f"{name}(...) of {self._show(arg, kind)}: {name} takes "
                              "numbers", "CAST(x AS DOUBLE) if the text holds numbers")
                    return None
            return "number"
        if name in _STRING_FUNCTIONS:
            return "string"
        if name in ("GREATEST", "LEAST"):
            known = [(a, k) for a, k in zip(e.args, args, strict=True) if k is not None]
            for (a, k) in known[1:]:
                if not _comparable(known[0][1], k):
                    self._bad(a, f"{name} of {self._show(known[0][0], known[0][1])} and "
                              f"{self._show(a, k)}")
                    return None
            return known[0][1] if known else None
        if name == "COALESCE":
            return next((k for k in args if k is not None), None)
        return None

    def _show(self, e: Any, kind: str | None) -> str:
        from cep_core.language import ast
        from cep_core.language.printer import to_sql

        if isinstance(e, ast.Column):
            full = self.types.get(e.name.lower(), kind or "?")
            return f"{to_sql(e)} ({full.upper()})"
        return f"{to_sql(e)} ({(kind or '?').upper()})"

    def _compare(self, node: Any, a: Any, ka: str | None, b: Any, kb: str | None) -> None:
        if ka is None or kb is None or _comparable(ka, kb):
            return
        hint = ""
        if "timestamp" in (ka, kb) and "string" in (ka, kb):
            hint = "write a timestamp as TIMESTAMP '2024-01-01 00:00:00'"
        elif "number" in (ka, kb) and "string" in (ka, kb):
            hint = ("a number is written without quotes (amount > 500); a string attribute "
                    "is a number once its source declares it (amount = \"double\")")
        self._bad(node, f"{self._show(a, ka)} compared with "
                  f"{self._show(b, kb)}", hint)

    def _arithmetic(self, e: Any, left: str | None, right: str | None) -> str | None:
        for side, kind in ((e.left, left), (e.right, right)):
            if kind in ("string", "boolean"):
                self._bad(e, f"{e.op} on {self._show(side, kind)}",
                          "|| concatenates strings; CAST(x AS DOUBLE) makes a number")
                return None
        if left is None or right is None:
            return None
        if left == right == "number":
            return "number"
        if e.op == "-" and left == right == "timestamp":
            return "interval"
        if e.op in ("+", "-") and {left, right} == {"timestamp", "interval"}:
            return "timestamp"
        if left == right == "interval" and e.op in ("+", "-"):
            return "interval"
        if {left, right} == {"interval", "number"} and e.op in ("*", "/"):
            return "interval"
        self._bad(e, f"{self._show(e.left, left)} {e.op} "
                  f"{self._show(e.right, right)}")
        return None


def _comparable(a: str, b: str) -> bool:
    return a == b
