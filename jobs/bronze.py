"""landing -> bronze: every landed line becomes one append-only bronze row.

Each landing file is read whole and split into lines, so a row is identified by
``(source_file, line_no)`` and nothing is dropped: blank, oversized and unparseable lines
are kept with their ``parse_status``. The Delta sink is exactly-once across restarts
(checkpoint + transaction ids).
Limits: one landing file must be smaller than 1 GiB (it is read as one value).
"""

from __future__ import annotations

from lakecep.config import Settings

from .streaming import StreamRun, run_stream
from .tables import LakeTable

QUERY = "bronze_events"
#: parse_status values (expectations/bronze.events.json checks this set).
PARSE_STATUSES = ("ok", "malformed_json", "empty_line", "oversized")


def bronze_frame(raw_files, max_line_bytes: int):  # noqa: ANN001, ANN201 - DataFrames
    """Turn a DataFrame of whole files (``value``, ``file_path``) into bronze rows."""
    from pyspark.sql import functions as F

    # One trailing newline ends the last line; it does not start a new (empty) one.
    body = F.regexp_replace("value", r"\n$", "")
    lines = raw_files.where(F.col("value") != "").select(
        F.col("file_path").alias("source_file"),
        F.posexplode(F.split(body, "\n", -1)).alias("pos", "raw"),
    )
    size = F.octet_length("raw")
    status = (
        F.when(F.trim("raw") == "", F.lit("empty_line"))
        .when(size > max_line_bytes, F.lit("oversized"))
        .when(F.try_parse_json("raw").isNull(), F.lit("malformed_json"))
        .otherwise(F.lit("ok"))
    )
    error = (
        F.when(size > max_line_bytes, F.format_string(f"%d bytes > limit {max_line_bytes}", size))
        .when(status == "malformed_json", F.lit("not valid JSON"))
    )
    return lines.select(
        "raw",
        "source_file",
        (F.col("pos") + 1).cast("bigint").alias("line_no"),
        size.cast("int").alias("byte_length"),
        F.current_timestamp().alias("ingest_time"),
        status.alias("parse_status"),
        error.alias("parse_error"),
    )


def run(spark, settings: Settings, *, run_id: str | None = None,  # noqa: ANN001
        continuous: bool = False) -> StreamRun:
    del run_id  # a stream: its checkpoint, not a run id, says what was processed
    bronze = LakeTable(spark, settings, "bronze.events").ensure()
    settings.landing.mkdir(parents=True, exist_ok=True)
    files = (
        spark.readStream.format("text")
        .option("wholetext", "true")
        .option("maxFilesPerTrigger", settings.max_files_per_trigger)
        .load(str(settings.landing))
        .selectExpr("value", "_metadata.file_path AS file_path")
    )
    frame = bronze_frame(files, settings.max_line_bytes)
    writer = frame.writeStream.format("delta").outputMode("append").option("path", bronze.path)
    return run_stream(writer, settings, QUERY, continuous=continuous)
