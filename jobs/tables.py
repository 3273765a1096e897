"""Handles on the lake's Delta tables, one obvious place for paths, schemas and versions.

>>> events = LakeTable(spark, settings, "silver.events").ensure()   # doctest: +SKIP
>>> events.version(), events.as_of(3).count()                        # doctest: +SKIP
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from lakecep import schemas
from lakecep.config import Settings
from lakecep.queries import QueryDefinition, UncertainQuery

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.types import StructType

#: Delta's defaults when a table sets no retention properties: how long its log entries
#: (time travel) and its removed data files (until VACUUM deletes them) are kept.
#: ``lakecep run maintain`` sets both on every table from the settings ``log_retention`` /
#: ``vacuum_retention``, checked against the queries' horizons (:mod:`lakecep.maintenance`).
DEFAULT_RETENTION = {"delta.logRetentionDuration": "interval 30 days",
                     "delta.deletedFileRetentionDuration": "interval 1 week"}
_INTERVAL = re.compile(r"^\s*interval\s+(\d+(?:\.\d+)?)\s+(\w+?)s?\s*$", re.IGNORECASE)
_UNITS = {"nanosecond": 1e-9, "microsecond": 1e-6, "millisecond": 1e-3, "second": 1.0,
          "minute": 60.0, "hour": 3600.0, "day": 86400.0, "week": 604800.0}


def retention_seconds(value: str) -> float:
    """``interval 7 days`` (Delta's table-property form) in seconds."""
    match = _INTERVAL.match(value)
    if not match or match.group(2).lower() not in _UNITS:
        raise ValueError(f"cannot read the Delta retention {value!r} (expected e.g. "
                         "'interval 7 days')")
    return float(match.group(1)) * _UNITS[match.group(2).lower()]


#: Silver columns handed to the engine (queries may refer to any of them).
ENGINE_COLUMNS = [
    "event_id", "object_id", "event_type", "source_id", "event_time",
    "time_lower", "time_upper", "ingest_time",
]


def engine_columns(queries: Sequence[QueryDefinition]) -> list[Column]:
    """Silver columns for the engine plus every query's typed ``[attributes]`` (and the
    ``pmf`` column when an uncertain query runs)."""
    from pyspark.sql import functions as F

    attributes = dict(a for q in queries for a in q.attributes)
    pmf = [F.col("pmf")] if any(isinstance(q, UncertainQuery) for q in queries) else []
    return [F.col(c) for c in ENGINE_COLUMNS] + pmf + [
        F.col("attributes").getItem(name).cast(kind).alias(name)
        for name, kind in sorted(attributes.items())]


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

        if type(self.spark).__module__.startswith("pyspark.sql.connect"):
            # a Spark Connect session (`lakecep serve`): delta-spark's DeltaTable needs a
            # server plugin there, SQL does not
            from pyspark.errors import AnalysisException

            try:
                detail = self.spark.sql(f"DESCRIBE DETAIL delta.`{self.path}`").first()
            except AnalysisException:
                return False
            return detail is not None and detail["format"] == "delta"
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
            for key, value in self.declared_properties.items():
                builder = builder.property(key, value)
            builder.execute()
        return self

    @property
    def declared_properties(self) -> dict[str, str]:
        """The Delta table properties ``schemas/tables.json`` declares for the table (its
        optional ``properties``, e.g. ``delta.enableDeletionVectors``)."""
        return dict(schemas.tables()[self.name].get("properties", {}))

    def upgrade(self) -> list[str]:
        """Bring an existing table (a lake written by an older release) to its declaration:
        add the declared columns it lacks (they read NULL in older rows) and set the
        declared properties it lacks. Returns the column names and ``key=value`` of the
        properties added."""
        have = {f.name for f in self.read().schema.fields}
        missing = [f for f in self.schema.fields if f.name not in have]
        if missing:
            columns = ", ".join(f"`{f.name}` {f.dataType.simpleString()}" for f in missing)
            self.spark.sql(f"ALTER TABLE delta.`{self.path}` ADD COLUMNS ({columns})")
        changed = self.set_properties(self.declared_properties)
        return [f.name for f in missing] + [f"{k}={v}" for k, v in changed.items()]

    def properties(self) -> dict[str, str]:
        """The table's Delta table properties (``DESCRIBE DETAIL``)."""
        detail = self.spark.sql(f"DESCRIBE DETAIL delta.`{self.path}`").first()
        return dict(detail["properties"] or {})

    def set_properties(self, properties: dict[str, str]) -> dict[str, str]:
        """Set the table properties whose value differs (one ``ALTER TABLE ... SET
        TBLPROPERTIES`` commit, none when all match; turning on a feature such as deletion
        vectors upgrades the table's protocol). Returns the properties changed."""
        have = self.properties()
        change = {k: v for k, v in properties.items() if have.get(k) != v}
        if change:
            pairs = ", ".join(f"'{k}' = '{v}'" for k, v in sorted(change.items()))
            self.spark.sql(f"ALTER TABLE delta.`{self.path}` SET TBLPROPERTIES ({pairs})")
        return change

    def read(self) -> DataFrame:
        return self.spark.read.format("delta").load(self.path)

    def as_of(self, version: int) -> DataFrame:
        """The table as it was at ``version`` (Delta time travel)."""
        return self.spark.read.format("delta").option("versionAsOf", version).load(self.path)

    def retention(self) -> dict[str, str]:
        """The table's log and deleted-file retention (:data:`DEFAULT_RETENTION` keys; Delta's
        defaults where the table sets none)."""
        properties = self.properties()
        return {name: properties.get(name, default)
                for name, default in DEFAULT_RETENTION.items()}

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

    def append(self, df: DataFrame, txn_app_id: str, txn_version: int, *,
               merge_schema: bool = False) -> None:
        """Idempotent append: Delta skips it if (app id, version) was already committed.
        ``merge_schema``: a table from an older release gets the columns added since."""
        (
            df.select(*self.schema.fieldNames())
            .write.format("delta")
            .mode("append")
            .option("txnAppId", txn_app_id)
            .option("txnVersion", txn_version)
            .option("mergeSchema", str(merge_schema).lower())
            .save(self.path)
        )

    def hand_over(self, query_id: str, fingerprint: str, to_id: str,
                  to_fingerprint: str) -> None:
        """Give the state rows of ``(query_id, fingerprint)`` to ``(to_id, to_fingerprint)``
        (hot reload, side by side: the old version's state goes to its ``@`` query)."""
        from delta.tables import DeltaTable
        from pyspark.sql import functions as F

        DeltaTable.forPath(self.spark, self.path).update(
            (F.col("query_id") == query_id) & (F.col("fingerprint") == fingerprint),
            {"query_id": F.lit(to_id), "fingerprint": F.lit(to_fingerprint)})

    def drop_other_fingerprints(self, fingerprints: dict[str, str],
                                only: Sequence[str] | None = None,
                                keep: Sequence[str] = ()) -> int:
        """Delete the state rows whose (query_id, fingerprint) is not in ``fingerprints``
        (query id -> its current fingerprint): a changed or removed query's stored state.
        With ``only``, rows of other query ids are kept (they belong to other runs); rows
        of the query ids ``keep`` are kept too.
        Returns how many query ids had such rows (0 without a table)."""
        from delta.tables import DeltaTable
        from pyspark.sql import functions as F

        if not self.exists():  # a new lake: nothing is stored, nothing can be stale
            return 0
        valid = F.lit(False)
        for query_id, fingerprint in fingerprints.items():
            valid = valid | ((F.col("query_id") == query_id)
                             & (F.col("fingerprint") == fingerprint))
        drop = ~valid if only is None else (~valid & F.col("query_id").isin(*only))
        if keep:
            drop = drop & ~F.col("query_id").isin(*keep)
        stale = self.read().where(drop).select("query_id").distinct().count()
        if stale:
            DeltaTable.forPath(self.spark, self.path).delete(drop)
        return stale
