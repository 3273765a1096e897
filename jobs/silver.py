"""bronze -> silver: typed, de-duplicated events; quarantine with reasons; counts reconcile.

Every bronze row ends in exactly one place:
- ``silver.events`` when it passes the event contract (``lakecep.events``) and its
  ``event_id`` is new; the first copy in arrival order (ingest time, file, line) is kept;
- ``silver.duplicates`` when it is valid but its ``event_id`` is already kept;
- ``silver.quarantine`` with the reason when it fails parsing or checks (a row whose bronze
  ``parse_status`` is not ``ok`` is quarantined with exactly that status as its reason code
  and ``parse_error`` as the detail: both layers use ``lakecep.events`` to judge a line).

So ``|bronze| = |silver| + |duplicates| + |quarantine|`` (``lakecep status`` checks it).
Rows of a declared source (``lakecep.sources``; known by the landing folder of their
``source_file``) are mapped onto the contract by the source's mapping
(``lakecep.sources.map_record``); a rejected one names every failing field.
Every write is idempotent per micro-batch (Delta ``txnAppId``/``txnVersion``), and a row
already in silver from an earlier attempt of the same batch is recognised by its
``(source_file, line_no)``, so a replay after a crash neither loses nor duplicates rows.
"""

from __future__ import annotations

from collections.abc import Iterator

import pandas as pd

from lakecep import schemas
from lakecep.config import Settings

from .streaming import StreamRun, log, run_stream, writer_id
from .tables import LakeTable

QUERY = "silver_events"
EVENT_COLUMNS = [
    "event_id", "object_id", "event_type", "source_id", "event_time",
    "time_lower", "time_upper", "pmf", "attributes",
]
PARSED_DDL = (
    "ok BOOLEAN, reason STRING, "
    + schemas.ddl("silver.events").split(", source_file")[0].replace(" NOT NULL", "")
    + ", raw STRING, source_file STRING, line_no BIGINT, ingest_time TIMESTAMP"
)


def parse_batches(max_line_bytes: int, sources=(), home=None):  # noqa: ANN001, ANN201
    """mapInPandas function: bronze rows -> parsed rows (``ok``/``reason`` + typed columns).

    ``sources``: the declared sources; their rows are mapped by ``lakecep.sources``, the
    others parsed against the RFID contract by ``lakecep.events.parse_frame``."""
    from lakecep.events import parse_frame

    def parse_any(raw: pd.Series, files: pd.Series) -> pd.DataFrame:
        if not sources:
            return parse_frame(raw, max_line_bytes)
        from lakecep.sources import map_record, source_of_file

        owner = {f: source_of_file(sources, home, f) for f in files.unique()}
        by_row = files.map(owner)
        rfid = by_row.isna().to_numpy()
        out = parse_frame(raw.where(rfid, None), max_line_bytes)
        if rfid.all():
            return out
        out = out.astype({c: object for c in EVENT_COLUMNS if c not in
                          ("event_time", "time_lower", "time_upper")})
        for i in (~rfid).nonzero()[0]:
            line = raw.iloc[i]
            result = map_record(by_row.iloc[i], line) if line else "empty_line"
            label = out.index[i]
            if isinstance(result, str):
                out.at[label, "ok"], out.at[label, "reason"] = False, result
                continue
            out.at[label, "ok"], out.at[label, "reason"] = True, None
            for column, value in zip(EVENT_COLUMNS, result, strict=True):
                out.at[label, column] = (pd.Timestamp(value) if column in
                                         ("event_time", "time_lower", "time_upper") and
                                         value is not None else value)
        return out

    def parse(frames: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        for frame in frames:
            # bronze already judged the line with the same definition (parse_line's line
            # codes): a row it did not pass keeps bronze's reason and is not parsed again
            # (for invalid_utf8 rows, raw is not the landed bytes and must not be parsed).
            judged = (frame["parse_status"] != "ok").to_numpy()
            raw = frame["raw"].where(~judged, None) if judged.any() else frame["raw"]
            parsed = parse_any(raw, frame["source_file"])
            out = parsed[["ok", "reason", *EVENT_COLUMNS]].reset_index(drop=True)
            if judged.any():
                status = frame["parse_status"].to_numpy(dtype=object)
                error = frame["parse_error"].to_numpy(dtype=object)
                reason = out["reason"].to_numpy(dtype=object, copy=True)
                for i in judged.nonzero()[0]:
                    reason[i] = status[i] if pd.isna(error[i]) else f"{status[i]}: {error[i]}"
                out["reason"] = reason
            for column in ("raw", "source_file", "line_no", "ingest_time"):
                out[column] = frame[column].reset_index(drop=True)
            yield out

    return parse


def process_batch(spark, settings: Settings, batch, batch_id: int, app_id: str) -> dict[str, int]:  # noqa: ANN001
    """Split one bronze micro-batch into silver / duplicates / quarantine."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    silver = LakeTable(spark, settings, "silver.events").ensure()
    quarantine = LakeTable(spark, settings, "silver.quarantine").ensure()
    duplicates = LakeTable(spark, settings, "silver.duplicates").ensure()

    from lakecep.sources import load_sources, sources_dir

    sources = load_sources(sources_dir(settings))
    parsed = batch.mapInPandas(parse_batches(settings.max_line_bytes, sources, settings.home),
                               PARSED_DDL).persist()
    try:
        # counted first: the batch is read once (the stream's input-row count stays true)
        split = dict(parsed.groupBy("ok").count().collect())
        counts = {"valid": split.get(True, 0), "quarantined": split.get(False, 0)}
        counts["rows"] = counts["valid"] + counts["quarantined"]
        if not counts["rows"]:  # e.g. a stream's first batch over a new, empty bronze table
            return counts
        bad = parsed.where(~F.col("ok")).select(
            "raw", "source_file", "line_no", "ingest_time", "reason",
            F.current_timestamp().alias("quarantine_time"),
        )
        arrival = Window.partitionBy("event_id").orderBy("ingest_time", "source_file", "line_no")
        good = parsed.where(F.col("ok")).drop("raw").withColumn(
            "_rank", F.row_number().over(arrival)
        )
        existing = silver.read().select(
            "event_id",
            F.col("source_file").alias("_kept_file"),
            F.col("line_no").alias("_kept_line"),
        )
        firsts = good.where("_rank = 1").join(existing, "event_id", "left")
        same_row = (F.col("_kept_file") == F.col("source_file")) & (
            F.col("_kept_line") == F.col("line_no")
        )
        new_rows = firsts.where(F.col("_kept_file").isNull())
        dup_rows = good.where("_rank > 1").unionByName(
            firsts.where(F.col("_kept_file").isNotNull() & ~same_row).drop(
                "_kept_file", "_kept_line"
            )
        )
        if counts["quarantined"]:  # an empty append still costs a Delta commit
            quarantine.append(bad, app_id, batch_id)
        duplicates.append(
            dup_rows.withColumn("duplicate_time", F.current_timestamp()), app_id, batch_id
        )
        silver.append(new_rows.withColumn("silver_time", F.current_timestamp()), app_id, batch_id)
        log(f"{QUERY}: batch {batch_id}: {counts['rows']} bronze rows, "
            f"{counts['quarantined']} quarantined")
        return counts
    finally:
        parsed.unpersist()


def run(spark, settings: Settings, *, run_id: str | None = None,  # noqa: ANN001
        continuous: bool = False) -> StreamRun:
    del run_id  # a stream: its checkpoint, not a run id, says what was processed
    bronze = LakeTable(spark, settings, "bronze.events").ensure()
    app_id = writer_id(settings, QUERY)

    def each_batch(batch, batch_id: int) -> None:  # noqa: ANN001
        process_batch(spark, settings, batch, batch_id, app_id)

    writer = bronze.stream(settings.max_files_per_trigger).writeStream.foreachBatch(each_batch)
    return run_stream(writer, settings, QUERY, continuous=continuous)
