"""Register the lake's Delta tables by name (``silver.events`` ...) in a Spark session."""

from __future__ import annotations

from lakecep import schemas, typed_views
from lakecep.config import Settings

from .tables import LakeTable


def register_tables(spark, settings: Settings) -> list[str]:  # noqa: ANN001
    """Create ``layer.table`` catalog entries for every existing lake table, and the typed
    views over them (:mod:`lakecep.typed_views`); return their names."""
    registered = []
    for name in schemas.tables():
        table = LakeTable(spark, settings, name)
        if not table.exists():
            continue
        layer = name.split(".")[0]
        spark.sql(f"CREATE SCHEMA IF NOT EXISTS {layer}")
        # External tables: dropping the catalog entry never touches the data, and
        # re-creating it makes the name point at this LAKECEP_HOME's table.
        spark.sql(f"DROP TABLE IF EXISTS {name}")
        spark.sql(f"CREATE TABLE {name} USING delta LOCATION '{table.path}'")
        registered.append(name)
    return [*registered,
            *typed_views.make(typed_views.lake_views(settings, registered), spark.sql)]
