"""Plain SQL over the lake's Delta tables without a JVM: delta-rs reads, DuckDB queries.

``lakecep sql --engine duckdb`` runs here (the optional extra ``lakecep[duckdb]``). Every
Delta table under ``$LAKECEP_HOME/lake/<layer>/<table>`` is a view ``<layer>.<table>`` at its
newest version (``silver.events``, ``gold.complex_events``, ...), beside the typed views
(``silver.events_typed``, ``matches.<query id>``; :mod:`lakecep.typed_views`). The dialect
is DuckDB's: ``measures['a_time']`` works on map columns; Delta time travel (``VERSION AS OF``) and
MATCH_RECOGNIZE are not part of it (use the Spark engine for those).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from lakecep import typed_views
from lakecep.config import Settings, local_only

if TYPE_CHECKING:
    import duckdb
    import pandas as pd


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


def connect(settings: Settings) -> tuple[duckdb.DuckDBPyConnection, list[str]]:
    """An in-memory DuckDB with one view per lake table; also the tables' names."""
    try:
        import duckdb
        from deltalake import DeltaTable
    except ImportError as exc:
        raise ImportError(f"--engine duckdb needs the packages duckdb and deltalake ({exc}); "
                          "install them with: pip install 'lakecep[duckdb]'") from None
    con = duckdb.connect(":memory:")
    con.execute("SET TimeZone = 'UTC'")
    tables = lake_tables(settings)
    for name, folder in tables.items():
        register(con, name, DeltaTable(str(folder)))
    made = typed_views.make(typed_views.lake_views(settings, list(tables)), con.execute,
                            typed_views.duckdb_quote)
    return con, [*tables, *made]


def register(con: duckdb.DuckDBPyConnection, name: str, table: Any) -> None:
    """Make the Delta table ``table`` (a ``deltalake.DeltaTable``) the view ``name``
    (``layer.table``) of ``con``."""
    layer, table_name = name.split(".")
    con.execute(f'CREATE SCHEMA IF NOT EXISTS "{layer}"')
    con.register(f"_delta_{layer}_{table_name}", table.to_pyarrow_dataset())
    con.execute(f'CREATE VIEW "{layer}"."{table_name}" AS '
                f'SELECT * FROM "_delta_{layer}_{table_name}"')


def run_query(settings: Settings, query: str, limit: int) -> pd.DataFrame:
    """The first ``limit`` rows of ``query`` over the lake, as a pandas frame.

    A table that does not exist raises ``LookupError`` listing the tables there are."""
    import duckdb

    con, tables = connect(settings)
    try:
        try:
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
