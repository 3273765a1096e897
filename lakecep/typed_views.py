"""Typed views over the lake's text-valued maps (docs/sources.md, "Typed attributes").

``silver.events.attributes`` and the gold tables' ``measures`` are ``MAP<STRING,STRING>`` of
canonical, lossless text. The source files declare each attribute's type and each query's
statement fixes its measures' types, so every reader can have them back typed: the views
below are registered next to the tables by ``lakecep sql`` (a Spark session of its own, the
``lakecep serve`` server, and ``--engine duckdb`` alike).

* ``silver.events_typed``: ``silver.events`` plus one column per source attribute, of the
  type its source declares (``amount`` a DOUBLE, not the text ``'612.5'``; the generated
  RFID events' ``rssi`` and ``antenna`` too).
* ``matches.<query id>``: the current answer of one query (``gold.complex_events`` rows not
  superseded; ``gold.probabilistic_events`` for uncertain queries) plus one column per
  measure, typed by :func:`lakecep.validation.measure_types`.

Window rules have no view: ``gold.window_outputs`` is typed already. The SQL is the common
subset of Spark SQL and DuckDB (``CAST``, map subscripts); only identifier quoting differs.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lakecep import schemas
from lakecep.config import Settings

#: The schema of the per-query views.
MATCHES = "matches"
EVENTS_VIEW = "silver.events_typed"
#: The tables' own columns, which an attribute or measure of the same name does not shadow.
_SILVER_COLUMNS = frozenset(schemas.columns("silver.events"))
_GOLD_COLUMNS = frozenset(schemas.columns("gold.complex_events")
                          + schemas.columns("gold.probabilistic_events"))
_SQL_TYPES = {"string": "STRING", "double": "DOUBLE", "bigint": "BIGINT",
              "boolean": "BOOLEAN", "timestamp": "TIMESTAMP"}


def spark_quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def duckdb_quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


@dataclass(frozen=True)
class View:
    """One typed view: ``name`` (``layer.view``) over the lake table ``table``, with
    ``columns`` (name, Spark type) read from the map column ``source`` and rows limited by
    ``query_id`` (None: all rows)."""

    name: str
    table: str
    source: str
    columns: tuple[tuple[str, str], ...]
    query_id: str | None = None
    current_only: bool = False

    def sql(self, quote: Callable[[str], str] = spark_quote) -> str:
        """``SELECT`` of the view; ``quote``: the dialect's identifier quoting."""
        layer, table = self.table.split(".")
        typed = [f"CAST({self.source}['{name.lower().replace(chr(39), chr(39) * 2)}'] AS "
                 f"{_SQL_TYPES.get(kind, 'STRING')}) AS {quote(name)}"
                 for name, kind in self.columns]
        text = f"SELECT *{''.join(', ' + t for t in typed)} FROM {quote(layer)}.{quote(table)}"
        where = []
        if self.query_id is not None:
            where.append(f"query_id = '{self.query_id}'")
        if self.current_only:
            where.append("superseded_version IS NULL")
        return text + (" WHERE " + " AND ".join(where) if where else "")

    def create(self, quote: Callable[[str], str] = spark_quote) -> str:
        layer, name = self.name.split(".")
        return f"CREATE OR REPLACE VIEW {quote(layer)}.{quote(name)} AS {self.sql(quote)}"


def make(views: Sequence[View], run: Callable[[str], Any],
         quote: Callable[[str], str] = spark_quote) -> list[str]:
    """Create ``views`` (and their schemas) with ``run`` (one SQL statement: ``spark.sql``,
    DuckDB's ``execute``); return the names made. A view whose table has another shape
    (e.g. one written by hand) is skipped with one line on stderr; the tables are
    unaffected."""
    import sys

    made = []
    for view in views:
        run(f"CREATE SCHEMA IF NOT EXISTS {quote(view.name.split('.')[0])}")
        try:
            run(view.create(quote))
        except Exception as exc:  # noqa: BLE001 - Spark's and DuckDB's analysis errors
            reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            print(f"lakecep: typed view {view.name} not made: {reason[:200]}", file=sys.stderr)
            continue
        made.append(view.name)
    return made


def views(queries: Sequence[Any], sources: Sequence[Any]) -> list[View]:
    """The typed views of a lake with ``queries`` and ``sources`` (as loaded by
    :func:`lakecep.validation.validate`)."""
    from lakecep.queries import (
        AcquisitionQuery,
        LiveArchiveQuery,
        UncertainQuery,
        WindowQuery,
    )
    from lakecep.rules import derived_schema, inputs_of
    from lakecep.sources import attribute_types, with_source_attributes
    from lakecep.validation import RFID_ATTRIBUTES, measure_types, schema_of

    attributes = {**RFID_ATTRIBUTES, **attribute_types(sources)}
    out = [View(EVENTS_VIEW, "silver.events", "attributes",
                tuple((n, t) for n, t in sorted(attributes.items())
                      if n.lower() not in _SILVER_COLUMNS))]
    typed = {q.id: q for q in with_source_attributes(queries, sources)}
    columns = schema_of(q for q in typed.values() if not inputs_of(q))
    for query in queries:
        if isinstance(query, WindowQuery):
            continue
        seen = derived_schema(query) if inputs_of(query) else {
            **columns, **dict(typed[query.id].attributes)}
        if isinstance(query, LiveArchiveQuery):  # the archive side's measures win
            merged = dict(measure_types(query.live, seen))
            merged.update(measure_types(query.archive, seen))
            measures = list(merged.items())
        elif isinstance(query, AcquisitionQuery):
            measures = [("pattern", "string")]
        else:
            measures = measure_types(query.query, seen)
        measures = [(n, t) for n, t in measures if n.lower() not in _GOLD_COLUMNS]
        uncertain = isinstance(query, UncertainQuery)
        out.append(View(f"{MATCHES}.{query.id}",
                        "gold.probabilistic_events" if uncertain else "gold.complex_events",
                        "measures", tuple(measures), query.id, current_only=not uncertain))
    return out


def definition_files(settings: Settings) -> list[Path]:
    """The files the views are derived from: the query and source files."""
    from lakecep.queries import QUERIES_DIR
    from lakecep.sources import sources_dir

    folders = [Path(settings.queries_dir) if settings.queries_dir else QUERIES_DIR,
               sources_dir(settings)]
    return [p for folder in folders if folder.is_dir() for p in sorted(folder.glob("*.toml"))]


def fingerprint(settings: Settings) -> str:
    """Changes when a query or source file does (the views may then differ)."""
    digest = hashlib.sha256()
    for path in definition_files(settings):
        digest.update(str(path).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def lake_views(settings: Settings, tables: Sequence[str]) -> list[View]:
    """The typed views of this lake whose table exists among ``tables``; none while a query
    or source file does not load (``lakecep validate`` says why)."""
    from lakecep.queries import load_queries
    from lakecep.sources import SourceError, load_sources, sources_dir

    try:
        found = views(load_queries(settings.queries_dir), load_sources(sources_dir(settings)))
    except (ValueError, SourceError):  # QueryDefinitionError, QueryError, ...: not ours
        return []
    return [v for v in found if v.table in tables]
