"""landing -> bronze: every landed line becomes one append-only bronze row.

Each landing file is read whole and split into lines by ``lakecep.events.landing_lines``
(the one definition of a landed line, also used by ``lakecep status``), so a row is
identified by ``(source_file, line_no)`` and nothing is dropped: blank, oversized, non-UTF-8
and unparseable lines are kept with their ``parse_status``, which is the line-level code of
``lakecep.events.parse_line`` (silver quarantines exactly these rows with the same reason).
The Delta sink is exactly-once across restarts (checkpoint + transaction ids).
Limits: one landing file must be smaller than 1 GiB (it is read as one value).

Sources declared in configuration (``lakecep.sources``, docs/sources.md) each get their own
stream (checkpoint ``bronze_<name>``) over their landing folder; their files are cut into
records by ``lakecep.sources.file_records`` (JSON lines, CSV records, Parquet rows). A Kafka
source (``format = "kafka"``) is read by Spark's Kafka source instead: each message is one
bronze row, its value judged like a JSON line (``lakecep.sources.message_record``), its origin
kept as ``source_file = kafka://<source>/<topic>/<partition>`` and ``line_no = offset``; the
checkpoint holds the offsets read, so the Delta sink is exactly-once there too. Without
source files the built-in RFID source reads ``landing/events`` exactly as before.
"""

from __future__ import annotations

from lakecep.config import Settings

from .streaming import StreamRun, run_stream
from .tables import LakeTable

QUERY = "bronze_events"
#: parse_status values (expectations/bronze.events.json checks this set): ``ok`` or the
#: line-level reason code of ``lakecep.events.parse_line`` (``LINE_CODES``).
PARSE_STATUSES = ("ok", "invalid_utf8", "empty_line", "oversized", "malformed_json",
                  "malformed_csv", "unreadable_file")
#: bronze columns computed from the file bytes (``ingest_time`` is added by Spark).
LINES_DDL = (
    "raw STRING, source_file STRING, line_no BIGINT, byte_length INT, "
    "parse_status STRING, parse_error STRING"
)
#: Most lines handed back to Spark in one Arrow batch (one file can span several batches).
LINES_PER_BATCH = 10_000


def split_files(max_line_bytes: int):  # noqa: ANN201
    """mapInPandas function: whole files (``content`` bytes, ``file_path``) -> bronze lines.

    The lines are cut by ``lakecep.events.landing_lines`` and judged by
    ``lakecep.events.judge_line`` -- the same definitions that ``lakecep status`` counts
    with and silver parses with, so the layers cannot disagree about a line.
    """
    from lakecep.events import judge_line, landing_lines

    return _splitter(lambda content: [judge_line(line, max_line_bytes)
                                      for line in landing_lines(content)])


def split_source_files(source, max_line_bytes: int):  # noqa: ANN001, ANN201
    """mapInPandas function: whole files of a declared source -> bronze rows (the records
    of ``lakecep.sources.file_records``)."""
    from lakecep.sources import file_records

    return _splitter(lambda content: list(file_records(source, content, max_line_bytes)))


def _splitter(records_of):  # noqa: ANN001, ANN202
    """mapInPandas function over whole files: ``records_of(bytes)`` gives each record's
    (raw, byte_length, parse_status, parse_error), numbered from 1 in file order."""
    from collections.abc import Iterator

    import numpy as np
    import pandas as pd

    def split(frames: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        for frame in frames:
            for content, path in zip(frame["content"], frame["file_path"], strict=True):
                records = records_of(bytes(content))
                for start in range(0, len(records), LINES_PER_BATCH):
                    chunk = records[start:start + LINES_PER_BATCH]
                    raw, size, status, error = zip(*chunk, strict=True)
                    yield pd.DataFrame({
                        "raw": pd.Series(raw, dtype=object),
                        "source_file": path,
                        "line_no": np.arange(start + 1, start + len(chunk) + 1, dtype=np.int64),
                        "byte_length": np.asarray(size, dtype=np.int32),
                        "parse_status": pd.Series(status, dtype=object),
                        "parse_error": pd.Series(error, dtype=object),
                    })

    return split


def split_kafka_messages(source, max_line_bytes: int):  # noqa: ANN001, ANN201
    """mapInPandas function: Kafka messages (``value``, ``topic``, ``partition``,
    ``offset``) of a declared source -> bronze rows (origin = topic, partition, offset)."""
    from collections.abc import Iterator

    import numpy as np
    import pandas as pd

    from lakecep.sources import message_record

    prefix = source.origin_prefix()

    def split(frames: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        for frame in frames:
            if frame.empty:
                continue
            records = [message_record(v, max_line_bytes) for v in frame["value"]]
            raw, size, status, error = zip(*records, strict=True)
            yield pd.DataFrame({
                "raw": pd.Series(raw, dtype=object),
                "source_file": [f"{prefix}{t}/{p}" for t, p in
                                zip(frame["topic"], frame["partition"], strict=True)],
                "line_no": frame["offset"].to_numpy(dtype=np.int64),
                "byte_length": np.asarray(size, dtype=np.int32),
                "parse_status": pd.Series(status, dtype=object),
                "parse_error": pd.Series(error, dtype=object),
            })

    return split


def kafka_bronze_frame(messages, source, max_line_bytes: int):  # noqa: ANN001, ANN201
    """Turn a DataFrame of Spark's Kafka source into bronze rows."""
    from pyspark.sql import functions as F

    lines = messages.select("value", "topic", "partition", "offset").mapInPandas(
        split_kafka_messages(source, max_line_bytes), LINES_DDL)
    return lines.select("raw", "source_file", "line_no", "byte_length",
                        F.current_timestamp().alias("ingest_time"), "parse_status",
                        "parse_error")


def bronze_frame(raw_files, max_line_bytes: int, source=None):  # noqa: ANN001, ANN201
    """Turn a DataFrame of whole files (``value``, ``file_path``) into bronze rows.

    ``value`` comes from Spark's ``text`` source with ``wholetext``: it holds the file's
    bytes unchanged (no decoding happens before the cast to binary), so invalid UTF-8, NUL,
    CR and a BOM reach ``lakecep.events`` exactly as landed.
    """
    from pyspark.sql import functions as F

    split = (split_files(max_line_bytes) if source is None
             else split_source_files(source, max_line_bytes))
    lines = raw_files.select(
        F.col("value").cast("binary").alias("content"), "file_path"
    ).mapInPandas(split, LINES_DDL)
    return lines.select(
        "raw",
        "source_file",
        "line_no",
        "byte_length",
        F.current_timestamp().alias("ingest_time"),
        "parse_status",
        "parse_error",
    )


def run(spark, settings: Settings, *, run_id: str | None = None,  # noqa: ANN001
        continuous: bool = False) -> StreamRun:
    del run_id  # a stream: its checkpoint, not a run id, says what was processed
    from lakecep.sources import load_sources, sources_dir

    bronze = LakeTable(spark, settings, "bronze.events").ensure()
    sources = load_sources(sources_dir(settings))
    if not sources:
        return _run_one(spark, settings, bronze, settings.landing, None, QUERY, continuous)
    if continuous and len(sources) > 1:
        raise ValueError(f"lakecep run --continuous runs one bronze stream per process; "
                         f"{len(sources)} sources are declared in {sources_dir(settings)} "
                         "(run them with availableNow, e.g. from the DAG)")
    runs = [_run_one(spark, settings, bronze, s.landing(settings.home), s, f"bronze_{s.name}",
                     continuous) for s in sources]
    return runs[-1] if len(runs) == 1 else _combined(runs)


def make_folder(spark, where) -> None:  # noqa: ANN001
    """Create the folder ``where`` (a local path, or an object-store URI through Hadoop's
    file system: S3A writes a directory marker), so that a stream over a landing nobody
    wrote to yet starts empty instead of failing. Under Spark Connect (no JVM handle) an
    object-store folder must exist already."""
    from lakecep.config import Uri

    if not isinstance(where, Uri):
        where.mkdir(parents=True, exist_ok=True)
        return
    jvm = getattr(spark, "_jvm", None)
    if jvm is None:
        return
    path = jvm.org.apache.hadoop.fs.Path(str(where))
    path.getFileSystem(spark._jsparkSession.sessionState().newHadoopConf()).mkdirs(path)


def _combined(runs: list[StreamRun]) -> StreamRun:
    import dataclasses

    total = runs[-1]
    sums = {f.name: sum(getattr(r, f.name) for r in runs) for f in dataclasses.fields(total)
            if f.type in ("int", "float", int, float)}
    return dataclasses.replace(total, name="+".join(r.name for r in runs), **sums)


def _run_one(spark, settings: Settings, bronze: LakeTable, landing, source,  # noqa: ANN001, PLR0913
             query: str, continuous: bool) -> StreamRun:
    if source is not None and source.format == "kafka":
        try:
            messages = spark.readStream.format("kafka").options(
                **source.kafka_reader_options()).load()
        except Exception as exc:
            if "DATA_SOURCE_NOT_FOUND" not in str(exc):
                raise
            raise RuntimeError(
                f"source {source.name!r} ({source.file}): Spark's Kafka source is not on the "
                "class path; fetch it with `python -m lakecep.jobs.spark fetch-jars` (or "
                "infra/bootstrap.sh), or add spark-sql-kafka-0-10_2.13 to spark_jars"
            ) from None
        frame = kafka_bronze_frame(messages, source, settings.max_line_bytes)
        writer = frame.writeStream.format("delta").outputMode("append").option(
            "path", bronze.path)
        return run_stream(writer, settings, query, continuous=continuous,
                          input_unit="messages")
    make_folder(spark, landing)
    files = (
        spark.readStream.format("text")
        .option("wholetext", "true")
        .option("maxFilesPerTrigger", settings.max_files_per_trigger)
        .load(str(landing))
        .selectExpr("value", "_metadata.file_path AS file_path")
    )
    frame = bronze_frame(files, settings.max_line_bytes, source)
    writer = frame.writeStream.format("delta").outputMode("append").option("path", bronze.path)
    return run_stream(writer, settings, query, continuous=continuous, input_unit="files")
