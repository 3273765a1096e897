"""Why silver's attributes stay MAP<STRING,STRING> (docs/sources.md, "Typed attributes"):
a VARIANT column written by Spark 4.1 + Delta 4.3 on real Delta, read back the ways lakecep
reads the lake. Spark reads typed values; delta-rs (``lakecep sql --engine duckdb``,
``lakecep report``) hands DuckDB the undecoded binary encoding; DuckDB decodes only the
Parquet files themselves. When this test fails, a reader learned VARIANT: revisit the
decision."""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.spark


def test_a_variant_attribute_column_is_typed_in_spark_but_opaque_through_delta_rs(
        spark, tmp_path: Path) -> None:  # noqa: ANN001
    import duckdb
    from deltalake import DeltaTable

    from lakecep.lake_sql import read_delta

    path = str(tmp_path / "t")
    spark.sql(f"CREATE TABLE delta.`{path}` (id STRING, attributes VARIANT) USING delta")
    spark.sql(f"INSERT INTO delta.`{path}` SELECT 'e1', to_variant_object(named_struct("
              "'amount', CAST(612.5 AS DOUBLE), 'n', CAST(3 AS BIGINT), 'merchant', 'Shop'))")
    row = spark.sql(f"SELECT attributes:amount::double AS a, typeof(attributes:amount) AS ta "
                    f"FROM delta.`{path}`").first()
    assert (row.a, row.ta) == (612.5, "variant")
    detail = spark.sql(f"DESCRIBE DETAIL delta.`{path}`").first()
    assert detail.minReaderVersion == 3 and "variantType" in detail.tableFeatures

    arrow = read_delta(path)  # what lakecep's duckdb gets
    kind = arrow.schema.field("attributes").type
    assert str(kind) == "struct<metadata: binary not null, value: binary not null>"
    seen = duckdb.connect().execute("SELECT attributes FROM arrow").fetchone()[0]
    assert isinstance(seen, dict) and isinstance(seen["value"], bytes)  # not the values

    files = DeltaTable(path).file_uris()
    decoded = duckdb.connect().execute(
        f"SELECT attributes FROM read_parquet({files!r})").fetchone()[0]
    assert decoded == {"amount": 612.5, "n": 3, "merchant": "Shop"}
