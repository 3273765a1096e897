"""Rows of the gold tables: what every query kind of the gold job shares.

Stable ids (:func:`match_id`), measures as text, the lineage of a match's sub-events, and
the conversion of column lists into the ``gold.complex_events`` frame an ``applyInPandas``
function returns. Also the key bucketing that makes one engine call per bucket of keys.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

import pandas as pd

from lakecep import schemas
from lakecep.queries import rule_id

GOLD = "gold.complex_events"
GOLD_DDL = schemas.ddl(GOLD).replace(" NOT NULL", "")
#: Column of the key bucket that groups keys into one engine call.
BUCKET = "_bucket"


def match_id(query_id: str, *id_groups: Sequence[str]) -> str:
    """Stable id of a match: a hash of the query and the ids of its sub-events (the rule
    id, :func:`~lakecep.queries.rule_id`, also for an old version run side by side)."""
    text = query_id + "".join("|" + ",".join(ids) for ids in id_groups)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def key_text(values: Sequence[Any]) -> str:
    """A partition key as the ``partition_key`` text of the gold tables (values joined by
    ``|``). The driver's lists of recomputed keys use it too, so they compare equal."""
    return "|".join(str(v) for v in values)


def as_text(value: Any) -> str | None:
    if value is None or (not isinstance(value, str) and pd.isna(value)):
        return None
    if isinstance(value, pd.Timestamp | datetime):
        return pd.Timestamp(value).isoformat()
    return str(value)


def measures(values: dict[str, Any]) -> dict[str, str | None]:
    """A match's measures as the ``map<string, string>`` of the gold tables."""
    return {name.lower(): as_text(value) for name, value in values.items()}


def time_ns(series: pd.Series) -> list[int]:
    """Event times as int nanoseconds (the engine's time axis)."""
    from cep_core.runtime.time_axis import time_values

    return time_values(series).tolist()


def above(start: int | None, ceiling: int | None) -> bool:
    """Whether a match whose first event is at ``start`` (ns; None: an empty match) is
    beyond an old version's ``ceiling`` (µs; None: no ceiling), which keeps only matches
    starting at or before it (docs/rules.md, "Hot reload", B)."""
    return ceiling is not None and (start is None or start > ceiling * 1000)


#: The columns of an event that gold's rows read besides what the query reads (lineage:
#: ids, times, the newest ingest time for the detection latency).
LINEAGE = ("event_id", "event_time", "ingest_time")


def read_only(frames: Sequence[Any], query: Any, *keep: str) -> list[Any]:
    """``frames`` (Spark DataFrames of one schema) with only the columns the compiled
    ``query`` reads (``CompiledQuery.columns_read``), the lineage columns and ``keep``:
    what the incremental step ships to Python, holds in memory and pickles into its state
    (silver's other columns, e.g. the attributes' JSON, were most of it)."""
    read = query.columns_read()
    if read is None:
        return list(frames)
    wanted = read | {c.lower() for c in (*LINEAGE, *keep)}
    columns = [c for c in frames[0].columns if c.lower() in wanted]
    return [f.select(*columns) for f in frames]


def row_positions(row_ids: pd.Series) -> Callable[[Sequence[Any]], list[int]]:
    """A function from a match's row ids (``ROW_ID`` values) to their positions in the
    frame whose ``ROW_ID`` column is ``row_ids``: a dict built once (a pandas
    ``Index.get_indexer`` per match cost ~200 µs, 2.6 s for 13,000 matches)."""
    where = {r: i for i, r in enumerate(row_ids.tolist())}

    def positions(rows: Sequence[Any]) -> list[int]:
        return [where[r] for r in rows]

    return positions


class Lineage:
    """Per-row lineage columns of one frame as plain lists, so that gathering a match's
    sub-events costs list indexing, not a pandas ``iloc`` per match."""

    def __init__(self, frame: pd.DataFrame) -> None:
        ids, times, ingest = LINEAGE
        self.ids: list[str] = frame[ids].tolist()
        self.times = time_ns(frame[times])
        self.ingest = time_ns(frame[ingest])

    def gather(self, rows: Sequence[int]) -> tuple[list[str], int | None, int | None, int | None]:
        """Event ids, first and last event time, newest ingest time (ns) of ``rows``."""
        if not rows:
            return [], None, None, None
        times = [self.times[i] for i in rows]
        return ([self.ids[i] for i in rows], min(times), max(times),
                max(self.ingest[i] for i in rows))


#: Columns :func:`gold_frame` fills: the query's identity and what the detection time gives.
_DERIVED = ("query_id", "query_version", "rule_hash", "detection_time", "detection_latency_ms",
            "superseded_version")


def empty_columns() -> dict[str, list[Any]]:
    """Empty column lists of ``gold.complex_events`` (plus ``_ingest``, the newest ingest time
    in ns, from which :func:`gold_frame` computes the detection latency) for one query's
    rows."""
    names = [*schemas.columns(GOLD), "_ingest"]
    return {n: [] for n in names if n not in _DERIVED}


def gold_frame(columns: dict[str, list[Any]], detected: pd.Timestamp,
               query: Any) -> pd.DataFrame:
    """``query``'s gold rows from column lists; time columns given as int ns (None for
    missing). Rows are written current (``superseded_version`` NULL)."""
    for name in ("start_time", "end_time"):
        columns[name] = pd.to_datetime(pd.array(columns[name], dtype="Int64"), unit="ns")
    latency = pd.array(columns.pop("_ingest"), dtype="Int64")
    columns["query_id"] = [rule_id(query)] * len(latency)  # (an old version's too)
    columns["query_version"] = [query.version] * len(latency)
    columns["rule_hash"] = [query.rule_hash] * len(latency)
    columns["detection_latency_ms"] = (detected.value - latency) // 1_000_000
    columns["detection_time"] = pd.to_datetime([detected] * len(latency))
    columns["superseded_version"] = pd.array([None] * len(latency), dtype="Int64")
    return data_frame(columns)[schemas.columns(GOLD)]


def data_frame(columns: dict[str, Any]) -> pd.DataFrame:
    """Like ``pd.DataFrame(columns)``, but empty list columns stay ``object`` (pandas would
    make them float64, which Arrow cannot turn into Spark's map and array types)."""
    return pd.DataFrame({
        name: pd.Series(values, dtype=object) if isinstance(values, list) and not values
        else values
        for name, values in columns.items()
    })


def bucketed(frame, keys: Sequence[str], buckets: int):  # noqa: ANN001, ANN201
    """``frame`` with the :data:`BUCKET` column: a hash of ``keys`` modulo ``buckets``."""
    from pyspark.sql import functions as F

    bucket = F.pmod(F.hash(*keys), F.lit(buckets)) if keys else F.lit(0)
    return frame.withColumn(BUCKET, bucket)


def history_of(history, new_events, keys: Sequence[str]):  # noqa: ANN001, ANN201
    """The ``history`` rows of the keys ``new_events`` touched (all of it without keys)."""
    if not keys:
        return history
    return history.join(new_events.select(*keys).distinct(), list(keys), "left_semi")


def touched_keys(new_events, keys: Sequence[str]) -> list[str]:  # noqa: ANN001
    """The partition keys (as ``partition_key`` text) of ``new_events``; ``[""]`` when the
    query has no PARTITION BY (one partition: the whole stream)."""
    if not keys:
        return [""]
    return sorted({key_text(r) for r in new_events.select(*keys).distinct().collect()})
