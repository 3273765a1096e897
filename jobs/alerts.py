"""Alerts in the gold job (docs/alerts.md): ``gold.alerts`` and the webhook.

Per micro-batch:

1. :func:`record`, *before* the batch's complex events are merged into gold: its complex
   events of queries with ``alert = true`` are MERGEd into ``gold.alerts`` on ``alert_id``
   (= ``match_id``): a replayed batch, or a match found again when its key is recomputed,
   adds nothing; and no gold row of an alerting query exists without its alert, whatever
   the crash point (a re-run batch may pin a newer silver version and no longer find a
   match the first attempt wrote).
2. :func:`deliver` (only with ``alert_webhook``), after gold is written: every alert not
   yet delivered -- this batch's and earlier failures -- is POSTed (:mod:`lakecep.alerts`),
   then one MERGE records ``delivered_time`` / ``attempts`` / ``last_error``. A webhook
   that fails never fails the batch; its alerts are retried with the next batch. A crash
   between a 2xx and that MERGE sends the alert again with the same ``Idempotency-Key``.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import pandas as pd

from lakecep.alerts import post
from lakecep.config import Settings

from .tables import LakeTable

TABLE = "gold.alerts"


def alerting(queries: Sequence[Any]) -> list[str]:
    """Ids of the queries with ``alert = true``."""
    return [q.id for q in queries if getattr(q, "alert", False)]


def record(spark, settings: Settings, rows, query_ids: Sequence[str], batch_id: int,  # noqa: ANN001
           detected: datetime) -> int:
    """MERGE the alerting queries' rows of this batch (``rows``: the batch's complex events)
    into gold.alerts; returns how many alerts are new."""
    from delta.tables import DeltaTable
    from pyspark.sql import functions as F

    if not query_ids:
        return 0
    table = LakeTable(spark, settings, TABLE).ensure()
    now = F.lit(pd.Timestamp(detected).tz_localize(None)).cast("timestamp")
    new = rows.where(F.col("query_id").isin(*query_ids)).select(
        F.col("match_id").alias("alert_id"), "query_id", "query_version", "partition_key",
        "start_time", "end_time", "measures", F.lit(batch_id).cast("bigint").alias("batch_id"),
        now.alias("created_time"), F.lit(None).cast("timestamp").alias("delivered_time"),
        F.lit(0).cast("int").alias("attempts"), F.lit(None).cast("string").alias("last_error"),
        "rule_hash")
    before = table.version()
    (DeltaTable.forPath(spark, table.path).alias("t")
     .merge(new.alias("s"), "t.alert_id = s.alert_id").whenNotMatchedInsertAll().execute())
    if table.version() == before:
        return 0
    metrics = (DeltaTable.forPath(spark, table.path).history(1)
               .select("operationMetrics").first()[0])
    return int(metrics.get("numTargetRowsInserted", 0))


def deliver(spark, settings: Settings, detected: datetime) -> tuple[int, int, int]:  # noqa: ANN001
    """POST the pending alerts to ``alert_webhook``; returns (delivered, failed, left
    pending without a request after a connection failure)."""
    from delta.tables import DeltaTable
    from pyspark.sql import functions as F

    table = LakeTable(spark, settings, TABLE)
    if not settings.alert_webhook or not table.exists():
        return 0, 0, 0
    pending = [r.asDict() for r in table.read().where(F.col("delivered_time").isNull())
               .orderBy("created_time", "alert_id").collect()]
    if not pending:
        return 0, 0, 0
    results = post(settings.alert_webhook, pending, settings.alert_timeout_seconds)
    when = pd.Timestamp(detected).tz_localize(None).to_pydatetime()
    updates = spark.createDataFrame(
        [(d.alert_id, when if d.ok else None, d.error) for d in results],
        "alert_id STRING, delivered_time TIMESTAMP, last_error STRING")
    (DeltaTable.forPath(spark, table.path).alias("t")
     .merge(updates.alias("s"), "t.alert_id = s.alert_id")
     .whenMatchedUpdate(set={"delivered_time": "s.delivered_time",
                             "attempts": "t.attempts + 1", "last_error": "s.last_error"})
     .execute())
    delivered = sum(d.ok for d in results)
    return delivered, len(results) - delivered, len(pending) - len(results)
