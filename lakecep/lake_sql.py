"""Plain SQL over the lake's Delta tables without a JVM: delta-rs reads, DuckDB queries.

``lakecep sql --engine duckdb`` runs here (the optional extra ``lakecep[duckdb]``). Every
Delta table under ``$LAKECEP_HOME/lake/<layer>/<table>`` is a view ``<layer>.<table>`` at its
newest version (``silver.events``, ``gold.complex_events``, ...), beside the typed views
(``silver.events_typed``, ``matches.<query id>``; :mod:`lakecep.typed_views`). The dialect
is DuckDB's: ``measures['a_time']`` works on map columns; Delta time travel (``VERSION AS OF``) and
MATCH_RECOGNIZE are not part of it (use the Spark engine for those).

Every Python reader of the lake goes through :func:`read_delta`: delta-rs' DataFusion scan,
which applies deletion vectors (``gold.complex_events`` has them, docs/architecture.md,
"Deletion vectors"); ``DeltaTable.to_pyarrow_table`` / ``to_pyarrow_dataset`` refuse such
tables. A query reads the tables it names (and those under the typed views it names) whole
into memory: DuckDB's projection and filter pushdown into the Parquet files, which the
lazy ``to_pyarrow_dataset`` had, is lost.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from lakecep import typed_views
from lakecep.config import Settings, local_only

if TYPE_CHECKING:
    import duckdb
    import pandas as pd
    import pyarrow as pa
    from deltalake import DeltaTable


def read_delta(table: str | Path | DeltaTable, columns: Sequence[str] | None = None,
               predicate: str | None = None) -> pa.Table:
    """The rows of the Delta table at ``table`` (a folder, or an open ``DeltaTable``: its
    version) as a pyarrow table, with its deletion vectors applied; only ``columns`` (all
    when None) and the rows where ``predicate`` holds (a SQL condition in DataFusion's
    dialect, e.g. ``"superseded_version IS NULL"``; files its statistics rule out are not
    read). Plain arrow types (``string``, ``binary``), not DataFusion's views."""
    import pyarrow as pa
    from deltalake import DeltaTable, QueryBuilder

    delta = table if isinstance(table, DeltaTable) else DeltaTable(str(table))
    select = ", ".join(f'"{c}"' for c in columns) if columns else "*"
    where = f" WHERE {predicate}" if predicate else ""
    rows = pa.table(QueryBuilder().register("t", delta).execute(f"SELECT {select} FROM t{where}"))
    return rows.cast(pa.schema([f.with_type(_plain(f.type)) for f in rows.schema]))


def _plain(kind: pa.DataType) -> pa.DataType:
    """``kind`` with string / binary views (DataFusion's) as plain strings / binaries."""
    import pyarrow as pa

    if kind == pa.string_view():
        return pa.string()
    if kind == pa.binary_view():
        return pa.binary()
    if pa.types.is_map(kind):
        return pa.map_(_plain(kind.key_type), kind.item_field.with_type(_plain(kind.item_type)))
    if pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_list_view(kind):
        return pa.list_(kind.value_field.with_type(_plain(kind.value_type)))
    if pa.types.is_struct(kind):
        return pa.struct([f.with_type(_plain(f.type)) for f in kind])
    return kind


def lake_tables(settings: Settings, feature: str = "`lakecep sql --engine duckdb`"
                ) -> dict[str, Path]:
    """``layer.table`` -> folder of every Delta table in the lake, sorted by name.
    ``feature``: who asks (named in the error for a lake on an object store)."""
    found = {}
    lake = local_only(settings.lake, f"{feature} (it finds the lake's tables on the local "
                      "disk)")
    if lake.is_dir():
        for log in sorted(lake.glob("*/*/_delta_log")):
            folder = log.parent
            found[f"{folder.parent.name}.{folder.name}"] = folder
    return found


def connect(settings: Settings, query: str | None = None
            ) -> tuple[duckdb.DuckDBPyConnection, list[str]]:
    """An in-memory DuckDB with one view per lake table (with ``query``: only the tables it
    names, directly or through a typed view); also the names of all tables and views."""
    try:
        import deltalake  # noqa: F401 - read_delta's
        import duckdb
    except ImportError as exc:
        raise ImportError(f"--engine duckdb needs the packages duckdb and deltalake ({exc}); "
                          "install them with: pip install 'lakecep[duckdb]'") from None
    con = duckdb.connect(":memory:")
    con.execute("SET TimeZone = 'UTC'")
    tables = lake_tables(settings)
    views = typed_views.lake_views(settings, list(tables))
    wanted = set(tables) if query is None else named(query, list(tables), views)
    for name, folder in tables.items():
        if name in wanted:
            register(con, name, folder)
    made = typed_views.make([v for v in views if v.table in wanted], con.execute,
                            typed_views.duckdb_quote)
    return con, [*tables, *made, *(v.name for v in views if v.table not in wanted)]


def named(query: str, tables: Sequence[str], views: Sequence[typed_views.View]) -> set[str]:
    """The lake tables ``query`` names (``layer.table``, quoted or not), directly or through
    one of the typed ``views``."""
    text = re.sub(r"\s*\.\s*", ".", query.lower().replace('"', "").replace("`", ""))
    return ({t for t in tables if t.lower() in text}
            | {v.table for v in views if v.name.lower() in text})


def register(con: duckdb.DuckDBPyConnection, name: str, table: str | Path | DeltaTable
             ) -> None:
    """Make the Delta table ``table`` (a folder or a ``deltalake.DeltaTable``), read with
    :func:`read_delta`, the view ``name`` (``layer.table``) of ``con``."""
    layer, table_name = name.split(".")
    con.execute(f'CREATE SCHEMA IF NOT EXISTS "{layer}"')
    con.register(f"_delta_{layer}_{table_name}", read_delta(table))
    con.execute(f'CREATE VIEW "{layer}"."{table_name}" AS '
                f'SELECT * FROM "_delta_{layer}_{table_name}"')


def run_query(settings: Settings, query: str, limit: int) -> pd.DataFrame:
    """The first ``limit`` rows of ``query`` over the lake, as a pandas frame.

    A table that does not exist raises ``LookupError`` listing the tables there are."""
    import duckdb

    con, tables = connect(settings, query)
    try:
        try:
            try:
                relation = con.sql(query)
            except duckdb.CatalogException:  # a table named in a way named() misses
                con.close()
                con, tables = connect(settings)
                relation = con.sql(query)
        except duckdb.CatalogException as exc:
            known = ", ".join(tables) or "none yet (run `lakecep run all` first)"
            raise LookupError(f"{str(exc).splitlines()[0]}\ntables under {settings.lake}: "
                              f"{known}") from None
        if relation is None:  # a statement without a result (e.g. SET)
            import pandas as pd

            return pd.DataFrame()
        return relation.limit(limit).df()
    finally:
        con.close()
