"""Silver for sources with sequential operators (``fill_forward``, ``merge``, ``split``).

The silver job's ``mapInPandas`` step maps the records of the other sources one by one; it
leaves a sequential source's ``ok`` bronze rows unparsed (``ok`` NULL, ``reason`` = the
source's name). Here they are mapped per source in arrival order by
``lakecep.operators.run_operators`` -- one pandas call per source and micro-batch
(``groupBy(source).cogroup(state)``) -- from the state the earlier micro-batches left in
``silver.operator_state`` (one row per source: the JSON state after ``batch_id`` and the
state that batch started from, ``previous``). The outcomes join the other rows of the batch
(silver, duplicates, quarantine as usual); :meth:`Sequential.commit` saves the new state
after silver is written. Semantics: docs/sources.md ("Preprocessing operators").

Exactly once, as gold's window state: a replay of batch ``b`` (a crash after the state was
saved, before the stream committed ``b``) starts from ``previous``, a replay after a crash
before the save from ``state``; either way the same records and the same state in, so the
same rows (their appends are skipped by Delta) and the same state out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

from lakecep.config import Settings

from .tables import LakeTable

STATE = "silver.operator_state"
#: The parsed row (jobs/silver.py ``PARSED_DDL``), then ``kind`` (``row`` | ``state``), the
#: source, and for the state row the new state and the one the batch started from.
EXTRA_DDL = ", kind STRING, source STRING, state STRING, previous STRING"


def source_step(sources: dict[str, Any], prints: dict[str, str], names: list[str]):  # noqa: ANN201
    """cogroup function: one source's deferred records x its stored state -> the outcome
    rows and one state row."""
    from lakecep.operators import run_operators

    def run(records: pd.DataFrame, stored: pd.DataFrame) -> pd.DataFrame:
        columns = [*names, "kind", "source", "state", "previous"]
        if not len(records):  # a source with state but nothing new: nothing to do
            return pd.DataFrame({c: pd.Series([], dtype=object) for c in columns})
        name = str(records["source"].iloc[0])
        before = stored["state"].iloc[0] if len(stored) else None
        if before is not None and pd.isna(before):
            before = None
        records = records.sort_values(["ingest_time", "source_file", "line_no"],
                                      kind="stable")
        outcomes, after = run_operators(
            sources[name], zip(records["raw"], records["source_file"],
                               records["line_no"].astype("int64").tolist(),
                               records["ingest_time"], strict=True), before, prints[name])
        rows = [(*o, "row", name, None, None) for o in outcomes]
        rows.append((*([None] * len(names)), "state", name, after, before))
        frame = pd.DataFrame.from_records(rows, columns=columns).astype(object)
        for column in ("event_time", "time_lower", "time_upper"):
            frame[column] = [None if v is None else pd.Timestamp(v) for v in frame[column]]
        return frame

    return run


@dataclass
class Sequential:
    """One micro-batch's step of the sequential sources: the outcome and state rows (a
    checkpointed DataFrame), saved by :meth:`commit`."""

    out: Any

    def commit(self, spark, settings: Settings, batch_id: int) -> None:  # noqa: ANN001
        """Save the new state of every source the batch touched (one MERGE)."""
        from delta.tables import DeltaTable
        from pyspark.sql import functions as F

        table = LakeTable(spark, settings, STATE).ensure()
        new = self.out.where(F.col("kind") == "state").select(
            "source", F.lit(batch_id).cast("bigint").alias("batch_id"), "state", "previous",
            F.current_timestamp().alias("updated"))
        (DeltaTable.forPath(spark, table.path).alias("t").merge(new.alias("s"),
                                                                 "t.source = s.source")
         .whenMatchedUpdateAll().whenNotMatchedInsertAll().execute())


def stored_state(spark, settings: Settings, names: list[str], batch_id: int):  # noqa: ANN001, ANN201
    """The state each source starts batch ``batch_id`` from (source, state; lazy): a row
    that batch ``batch_id`` itself saved (a replay) gives the state it started from."""
    from pyspark.sql import functions as F

    rows = LakeTable(spark, settings, STATE).ensure().read().where(F.col("source").isin(*names))
    for r in rows.where(F.col("batch_id") > batch_id).select("source", "batch_id").collect():
        raise RuntimeError(
            f"source {r.source!r}: silver.operator_state holds batch {r.batch_id}, the silver "
            f"stream is at batch {batch_id}: the operator state is ahead of the stream's "
            "checkpoint (restore the checkpoint, or delete the source's row of "
            "silver.operator_state: its pending merge groups are then lost)")
    return rows.select("source", F.when(F.col("batch_id") == batch_id, F.col("previous"))
                       .otherwise(F.col("state")).alias("state")).where(
        F.col("state").isNotNull())


def run_sequential(spark, settings: Settings, parsed, sources, batch_id: int,  # noqa: ANN001, ANN201
                   app_id: str, parsed_ddl: str):
    """``parsed`` with the deferred rows of the sequential ``sources`` replaced by their
    outcomes, and the :class:`Sequential` step whose state :meth:`Sequential.commit`
    saves."""
    from pyspark.sql import functions as F

    from lakecep.operators import fingerprint

    names = [c.split()[0] for c in parsed_ddl.split(", ")]
    by_name = {s.name: s for s in sources}
    prints = {s.name: fingerprint(s, app_id) for s in sources}
    deferred = parsed.where(F.col("ok").isNull()).select(
        F.col("reason").alias("source"), "raw", "source_file", "line_no", "ingest_time")
    state = stored_state(spark, settings, list(by_name), batch_id)
    out = deferred.groupBy("source").cogroup(state.groupBy("source")).applyInPandas(
        source_step(by_name, prints, names), parsed_ddl + EXTRA_DDL).localCheckpoint(eager=True)
    rows = out.where(F.col("kind") == "row").select(*names)
    return parsed.where(F.col("ok").isNotNull()).unionByName(rows), Sequential(out)
