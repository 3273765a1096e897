"""Handles on the lake's Delta tables, one obvious place for paths, schemas and versions.

>>> events = LakeTable(spark, settings, "silver.events").ensure()   # doctest: +SKIP
>>> events.version(), events.as_of(3).count()                        # doctest: +SKIP
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import schemas
from lakecep.config import Settings

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType


@dataclass(frozen=True)
class LakeTable:
    spark: SparkSession
    settings: Settings
    name: str

    @property
    def path(self) -> str:
        return str(self.settings.table_path(self.name))

    @property
    def schema(self) -> StructType:
        from pyspark.sql.types import StructType

        return StructType.fromDDL(schemas.ddl(self.name))

    def exists(self) -> bool:
        from delta.tables import DeltaTable

        return DeltaTable.isDeltaTable(self.spark, self.path)

    def ensure(self) -> LakeTable:
        """Create the empty Delta table with its declared schema unless it exists."""
        from delta.tables import DeltaTable

        if not self.exists():
            builder = (
                DeltaTable.createIfNotExists(self.spark)
                .location(self.path)
                .addColumns(self.schema)
                .comment(schemas.tables()[self.name]["doc"])
            )
            cluster_by = schemas.tables()[self.name].get("cluster_by")
            if cluster_by:  # liquid clustering: data skipping on high-cardinality keys
                builder = builder.clusterBy(*cluster_by)
            builder.execute()
        return self

    def read(self) -> DataFrame:
        return self.spark.read.format("delta").load(self.path)

    def as_of(self, version: int) -> DataFrame:
        """The table as it was at ``version`` (Delta time travel)."""
        return self.spark.read.format("delta").option("versionAsOf", version).load(self.path)

    def version(self) -> int:
        """Latest committed version."""
        from delta.tables import DeltaTable

        row = DeltaTable.forPath(self.spark, self.path).history(1).select("version").first()
        return int(row[0])

    def stream(self, max_files: int | None = None) -> DataFrame:
        reader = self.spark.readStream.format("delta")
        if max_files:
            reader = reader.option("maxFilesPerTrigger", max_files)
        return reader.load(self.path)

    def append(self, df: DataFrame, txn_app_id: str, txn_version: int) -> None:
        """Idempotent append: Delta skips it if (app id, version) was already committed."""
        (
            df.select(*self.schema.fieldNames())
            .write.format("delta")
            .mode("append")
            .option("txnAppId", txn_app_id)
            .option("txnVersion", txn_version)
            .save(self.path)
        )
