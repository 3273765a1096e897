"""Gold for ``pattern`` queries: a MATCH_RECOGNIZE statement over the touched keys' history.

cep_core runs inside Spark, grouped by the query's PARTITION BY key, over the whole history
of the keys the batch touched (silver read by time travel at a pinned version). Late and
out-of-order events therefore produce the matches they complete; matches already in gold are
not written again (the driver merges on ``match_id``), and a touched key's matches that the
recomputation no longer finds (a late event broke them) are marked superseded
(``gold.complex_events.superseded_version``; see ``docs/data.md``).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

import pandas as pd

from lakecep.queries import PatternQuery, rule_id

from .gold_rows import (
    BUCKET,
    GOLD_DDL,
    Lineage,
    above,
    bucketed,
    empty_columns,
    gold_frame,
    history_of,
    key_text,
    match_id,
    measures,
    touched_keys,
)


def pattern_matcher(
    query: PatternQuery, version: int, batch_id: int, detected: datetime,
    ceiling: int | None = None,
) -> Callable[[pd.DataFrame], pd.DataFrame]:
    """applyInPandas function: one bucket of keys' history -> their gold rows.
    ``ceiling`` (µs; an old version run side by side, docs/rules.md "Hot reload" B): only
    matches whose first event is at or before it.

    The engine partitions by the query's PARTITION BY itself, so one call serves every key
    of the bucket (a call per key would pay pandas' per-call overhead hundreds of
    thousands of times).
    """
    detected_ts = pd.Timestamp(detected).tz_localize(None)
    rule = rule_id(query)

    def run(frame: pd.DataFrame) -> pd.DataFrame:
        frame = frame.drop(columns=[BUCKET]).reset_index(drop=True)
        lineage = Lineage(frame)
        out = empty_columns()
        for match in query.compiled().find_matches(frame):
            ids, start, end, ingest = lineage.gather(match.rows)
            if above(start, ceiling):
                continue
            out["match_id"].append(match_id(rule, ids))
            out["partition_key"].append(key_text(match.partition))
            out["match_number"].append(match.match_number)
            out["start_time"].append(start)
            out["end_time"].append(end)
            out["measures"].append(measures(match.measures))
            out["live_event_ids"].append(ids)
            out["archive_event_ids"].append([])
            out["history_version"].append(version)
            out["strategy"].append("batch")
            out["probability"].append(None)
            out["batch_id"].append(batch_id)
            out["_ingest"].append(ingest)
        return gold_frame(out, detected_ts, query)

    return run


def pattern_rows(query: PatternQuery, new_events, history, version: int, batch_id: int,  # noqa: ANN001, ANN201, PLR0913
                 detected: datetime, buckets: int, ceiling: int | None = None):
    """The query's gold rows for one batch (a lazy Spark DataFrame of ``GOLD_DDL``) and the
    partition keys whose whole answer they are (as ``partition_key`` text); ``ceiling``:
    :func:`pattern_matcher`'s."""
    keys = query.compiled().partition_by
    rows = (bucketed(history_of(history, new_events, keys), keys, buckets).groupBy(BUCKET)
            .applyInPandas(pattern_matcher(query, version, batch_id, detected, ceiling),
                           GOLD_DDL))
    return rows, touched_keys(new_events, keys)

