"""Gold for ``uncertain`` queries: probabilistic complex events (``cep_core.uncertain``).

For every key the batch touched, the query is evaluated again over the key's whole history;
the key's rows of ``gold.probabilistic_events`` are then replaced: probabilities updated,
new sequences inserted, sequences that no longer match (or fell below the threshold)
deleted.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

import pandas as pd

from lakecep import schemas
from lakecep.config import Settings
from lakecep.queries import UncertainQuery

from .gold_rows import (
    BUCKET,
    bucketed,
    data_frame,
    history_of,
    key_text,
    match_id,
    measures,
    time_ns,
    touched_keys,
)
from .tables import LakeTable

PROBABILISTIC = "gold.probabilistic_events"
PROBABILISTIC_DDL = schemas.ddl(PROBABILISTIC).replace(" NOT NULL", "")


def uncertain_matcher(
    query: UncertainQuery, version: int, batch_id: int, detected: datetime
) -> Callable[[pd.DataFrame], pd.DataFrame]:
    """applyInPandas function: one bucket of keys' history -> their probabilistic events
    (``cep_core.uncertain``). A partition whose events cannot be evaluated (cep_core raises
    ``ValueError`` naming the row, e.g. a pmf that does not fit the granularity) gives one
    row with the error instead of failing the batch."""
    detected_ts = pd.Timestamp(detected).tz_localize(None)
    names = schemas.columns(PROBABILISTIC)

    def run(frame: pd.DataFrame) -> pd.DataFrame:
        from cep_core.uncertain import evaluate

        compiled = query.compiled()
        frame = frame.drop(columns=[BUCKET]).reset_index(drop=True)
        keys = compiled.partition_by
        out: dict[str, list[Any]] = {n: [] for n in names}

        def add(key: tuple[Any, ...], **values: Any) -> None:
            row = {"query_id": query.id, "query_version": query.version,
                   "rule_hash": query.rule_hash, "partition_key": key_text(key),
                   "method": query.method,
                   "history_version": version, "batch_id": batch_id,
                   "detection_time": detected_ts, **values}
            for name, column in out.items():
                column.append(row.get(name))

        def emit(part: pd.DataFrame) -> None:
            """Evaluate ``part`` (one call for all its partitions) and add its rows."""
            result = evaluate(compiled, part, method=query.method, id_column="event_id")
            ids = part["event_id"].tolist()
            lower = time_ns(part["time_lower"].fillna(part["event_time"]))
            upper = time_ns(part["time_upper"].fillna(part["event_time"]))
            values = result.table.drop(columns=[*keys, "probability"], errors="ignore")
            for n, (key, sigma, p) in enumerate(result.groups):
                rows = [r for _, r in sigma]
                event_ids = [str(ids[r]) for r in rows]
                add(key, match_id=match_id(query.id, event_ids), variables=[v for v, _ in sigma],
                    event_ids=event_ids, probability=float(p),
                    earliest_start=min(lower[r] for r in rows),
                    latest_end=max(upper[r] for r in rows),
                    measures=measures(values.iloc[n].to_dict()))

        try:
            emit(frame)
        except ValueError:  # some partition cannot be evaluated: isolate it, keep the rest
            parts = ([((), frame)] if not keys else
                     [((k,) if len(keys) == 1 else k, g.reset_index(drop=True))
                      for k, g in frame.groupby(keys if len(keys) > 1 else keys[0],
                                                sort=True)])
            for key, part in parts:
                try:
                    emit(part)
                except ValueError as err:
                    add(key, match_id=match_id(query.id, ["error"], [str(v) for v in key]),
                        variables=[], event_ids=[], error=str(err))
        for name in ("earliest_start", "latest_end"):
            out[name] = pd.to_datetime(pd.array(out[name], dtype="Int64"), unit="ns")
        return data_frame(out)[names]

    return run


def uncertain_rows(query: UncertainQuery, new_events, history, version: int,  # noqa: ANN001, ANN201, PLR0913
                   batch_id: int, detected: datetime, buckets: int):
    """The query's probabilistic-event rows for one batch (a lazy Spark DataFrame) and the
    partition keys they recompute (as ``partition_key`` text)."""
    keys = query.compiled().partition_by
    touched = touched_keys(new_events, keys)
    rows = (bucketed(history_of(history, new_events, keys), keys, buckets).groupBy(BUCKET)
            .applyInPandas(uncertain_matcher(query, version, batch_id, detected),
                           PROBABILISTIC_DDL))
    return rows, touched


def merge_probabilistic(spark, settings: Settings, query: UncertainQuery, rows,  # noqa: ANN001
                        touched: list[str]) -> None:
    """Replace the query's rows of the recomputed partition keys: update probabilities,
    insert new sequences, delete sequences that no longer match (or fell below the
    threshold)."""
    from delta.tables import DeltaTable
    from pyspark.sql import functions as F

    table = LakeTable(spark, settings, PROBABILISTIC).ensure()
    mine = (F.col("t.query_id") == query.id) & F.col("t.partition_key").isin(touched)
    (
        DeltaTable.forPath(spark, table.path).alias("t")
        .merge(rows.alias("s"), "t.query_id = s.query_id AND t.match_id = s.match_id")
        .whenMatchedUpdateAll()
        .whenNotMatchedInsertAll()
        .whenNotMatchedBySourceDelete(mine)
        .execute()
    )
