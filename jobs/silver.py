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
(``lakecep.sources.map_record``); a rejected one names every failing field. A source with
sequential operators (``merge``, ``split``, ``fill_forward``) is mapped in sequence with
state across micro-batches (``jobs/silver_state.py``): a split message has an outcome per
part and an open merge group's records are pending, so the identity gains those terms
(docs/sources.md, "Reconciliation").
Every write is idempotent per micro-batch (Delta ``txnAppId``/``txnVersion``), and a row
already in silver from an earlier attempt of the same batch is recognised by its
``(source_file, line_no)``, so a replay after a crash neither loses nor duplicates rows.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pandas as pd

from lakecep import schemas
from lakecep.config import Settings

from .streaming import StreamRun, batch_function, log, run_stream, writer_id
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
PARSED_DDL_COLUMNS = [part.split()[0] for part in PARSED_DDL.split(", ")]


def parse_batches(max_line_bytes: int, sources=(), home=None):  # noqa: ANN001, ANN201
    """mapInPandas function: bronze rows -> parsed rows (``ok``/``reason`` + typed columns).

    ``sources``: the declared sources; their rows are mapped by ``lakecep.sources``, the
    others parsed against the RFID contract by ``lakecep.events.parse_frame``. The ``ok``
    rows of a source with sequential operators are left for ``jobs/silver_state.py``:
    ``ok`` NULL and ``reason`` the source's name."""
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
        out["ok"] = out["ok"].astype(object)
        for i in (~rfid).nonzero()[0]:
            line = raw.iloc[i]
            source = by_row.iloc[i]
            label = out.index[i]
            if line and source.sequential:  # mapped in sequence by jobs/silver_state.py
                out.at[label, "ok"], out.at[label, "reason"] = None, source.name
                continue
            result = map_record(source, line) if line else "empty_line"
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
            # raw goes on only where a later step reads it: quarantined rows, and the rows
            # a sequential source maps later (ok NULL); silver.events does not keep it
            out["raw"] = out["raw"].where(out["ok"].ne(True), None)
            yield out

    return parse


#: Up to this many valid rows in a batch, the de-duplication first picks the silver rows
#: that share an event id with the batch (a broadcast semi-join: the history's ids are
#: scanned and probed, not shuffled), then joins the batch with those few.
BROADCAST_IDS = 2_000_000
#: Up to this many valid rows, the silver rows found for the batch's ids (at most one per
#: id) are fetched to the driver first and broadcast to the join as a local frame: the
#: ranked batch, already partitioned by event id, is not shuffled again, and the held
#: classified batch does not read silver, so appending to silver does not re-plan it (Spark
#: re-plans every held frame that reads a table it writes: a Delta snapshot and file
#: listing of silver, 4 Spark jobs per batch).
BROADCAST_KEPT = 100_000
#: A held (small) batch keeps its shuffle's partitions, one file each, where an unheld write
#: has adaptive execution coalesce them: it is written in one file per this many rows
#: (four files of ~200 rows per commit instead of one; gold's stream, reading
#: ``max_files_per_trigger`` files at a time, then saw each batch's whole time range at
#: once and its window watermark dropped the batch's older ticks as too late).
ROWS_PER_FILE = 1_000_000
#: The bronze columns silver's parse reads (the others are not sent to Python).
PARSE_INPUT = ("raw", "source_file", "line_no", "ingest_time", "parse_status", "parse_error")
TIME_COLUMNS = ("event_time", "time_lower", "time_upper", "ingest_time")


def arrow_batches(max_line_bytes: int, schema, sources=(), home=None):  # noqa: ANN001, ANN201
    """mapInArrow function: :func:`parse_batches` with Arrow record batches in and out.

    The parse is the same pandas code; only the conversion differs. PySpark's own
    pandas -> Arrow conversion of ``mapInPandas`` (per value for maps, strings and
    timestamps) took longer than the parse itself; here each column is converted by
    ``pyarrow`` at once. ``schema``: the Arrow schema of :data:`PARSED_DDL` (made on the
    driver, :func:`arrow_schema`). Timestamps are UTC (the session time zone) and, as
    PySpark's conversion does by default, truncated to microseconds without error."""
    import pyarrow as pa

    parse = parse_batches(max_line_bytes, sources, home)

    def column(values: pd.Series, field: pa.Field) -> pa.Array:
        if field.name in TIME_COLUMNS:
            values = pd.to_datetime(values, utc=True)
        elif field.name == "attributes":
            values = pd.Series([list(m.items()) if isinstance(m, dict) else None
                                for m in values], dtype=object)
        return pa.Array.from_pandas(values, type=field.type, safe=False)

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for out in parse(iter([batch.to_pandas()])):
                yield pa.RecordBatch.from_arrays(
                    [column(out[f.name], f) for f in schema], schema=schema)

    return run


def arrow_schema():  # noqa: ANN201 - a pyarrow schema
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.types import StructType

    return to_arrow_schema(StructType.fromDDL(PARSED_DDL))


class QuarantineGateError(RuntimeError):
    """A micro-batch quarantined more of a source's rows than its gate allows."""


@dataclass(frozen=True)
class Breach:
    source: str  # a source's name, or "events" (the built-in RFID contract)
    quarantined: int
    rows: int
    limit: float
    file: str  # the source file that sets the limit ("" for the setting)

    def describe(self) -> str:
        where = f"max_quarantine_ratio {self.limit:.1%}" + (f" of {self.file}" if self.file
                                                             else " (setting)")
        return (f"source {self.source!r}: {self.quarantined:,} of {self.rows:,} rows "
                f"quarantined ({self.quarantined / self.rows:.1%} > {where})")


def quarantine_breaches(per_file: dict[tuple[str, str], int], sources, home,  # noqa: ANN001
                        settings: Settings) -> list[Breach]:
    """The sources of a batch whose quarantined share is above their gate. ``per_file``:
    rows per (bronze ``source_file``, outcome ``ok`` | ``filtered`` | ``quarantined``);
    rows an operator dropped on purpose (``filtered``, ``merged``) count in the batch's
    rows, not as bad.
    Sources with fewer than ``quarantine_gate_min_rows`` rows in the batch are not
    judged."""
    from lakecep.sources import Source, source_of_file

    totals: dict[str, list[int]] = {}
    owner: dict[str, Source | None] = {}
    for (file, outcome), n in per_file.items():
        source = source_of_file(sources, home, file) if sources else None
        name = source.name if source is not None else "events"
        owner[name] = source
        totals.setdefault(name, [0, 0])[1 if outcome == "quarantined" else 0] += n
    out = []
    for name, (good, bad) in sorted(totals.items()):
        source = owner[name]
        own = source.max_quarantine_ratio if source is not None else None
        limit = settings.max_quarantine_ratio if own is None else own
        if good + bad >= settings.quarantine_gate_min_rows and bad > limit * (good + bad):
            out.append(Breach(name, bad, good + bad, limit,
                              source.file if source is not None and own is not None else ""))
    return out


def process_batch(spark, settings: Settings, batch, batch_id: int, app_id: str) -> dict[str, int]:  # noqa: ANN001
    """Split one bronze micro-batch into silver / duplicates / quarantine. The quarantine
    gate (``quarantine_gate``) is checked before anything is written."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    silver = LakeTable(spark, settings, "silver.events").ensure()
    quarantine = LakeTable(spark, settings, "silver.quarantine").ensure()
    duplicates = LakeTable(spark, settings, "silver.duplicates").ensure()

    from lakecep.operators import ON_PURPOSE
    from lakecep.sources import load_sources, sources_dir

    sources = load_sources(sources_dir(settings))
    if settings.silver_parse == "native":  # the same rows, Spark SQL where it can
        from .silver_native import parse

        parsed = parse(batch, settings.max_line_bytes, sources, settings.home)
    else:
        parsed = batch.select(*PARSE_INPUT).mapInArrow(
            arrow_batches(settings.max_line_bytes, arrow_schema(), sources, settings.home),
            PARSED_DDL)
    sequential = None
    if any(s.sequential for s in sources):  # fill_forward, merge, split: state across batches
        from .silver_state import run_sequential

        parsed, sequential = run_sequential(spark, settings, parsed, [
            s for s in sources if s.sequential], batch_id, app_id, PARSED_DDL)
    parsed = parsed.persist()
    try:
        # counted first: the batch is read once (the stream's input-row count stays true)
        outcome = (F.when(F.col("ok"), "ok")
                   .when(F.split("reason", ":").getItem(0).isin(*ON_PURPOSE), "filtered")
                   .otherwise("quarantined"))
        per_file = {(r.source_file, r.outcome): r[2] for r in
                    parsed.groupBy("source_file", outcome.alias("outcome")).count().collect()}
        counts = {"valid": sum(n for (_, o), n in per_file.items() if o == "ok")}
        counts["quarantined"] = sum(per_file.values()) - counts["valid"]  # with filtered
        counts["rows"] = counts["valid"] + counts["quarantined"]
        if not counts["rows"]:  # e.g. a stream's first batch over a new, empty bronze table
            if sequential is not None:  # or every record is pending in a merge group
                sequential.commit(spark, settings, batch_id)
            return counts
        if settings.quarantine_gate != "off":
            gate(parsed, quarantine_breaches(per_file, sources, settings.home, settings),
                 settings, batch_id)
        bad = parsed.where(~F.col("ok")).select(
            "raw", "source_file", "line_no", "ingest_time", "reason",
            F.current_timestamp().alias("quarantine_time"),
        )
        # each valid row is new (the first copy of an event id not in silver yet), a
        # duplicate, or already in silver as this very row (an earlier attempt of the batch)
        arrival = Window.partitionBy("event_id").orderBy("ingest_time", "source_file", "line_no")
        ranked = parsed.where(F.col("ok")).drop("raw").withColumn(
            "_rank", F.row_number().over(arrival))
        existing = silver.read().select(
            "event_id",
            F.col("source_file").alias("_kept_file"),
            F.col("line_no").alias("_kept_line"),
        )
        small = counts["valid"] <= BROADCAST_IDS
        if small:  # history is probed, not shuffled; the batch's ids (each id's first copy
            # has rank 1), straight from the held batch: no wait for the ranking's shuffle
            ids = parsed.where(F.col("ok")).select("event_id")
            existing = existing.join(F.broadcast(ids), "event_id", "left_semi")
        if small and 0 < counts["valid"] <= BROADCAST_KEPT:
            existing = F.broadcast(spark.createDataFrame(existing.toArrow(), existing.schema))
        kept = F.col("_kept_file").isNotNull()
        same_row = (F.col("_kept_file") == F.col("source_file")) & (
            F.col("_kept_line") == F.col("line_no"))
        classified = ranked.join(existing, "event_id", "left").withColumn(
            "_class", F.when(F.col("_rank") > 1, "duplicate").when(~kept, "new")
            .when(same_row, "written").otherwise("duplicate"))
        # a small batch is kept and counted (no empty appends); a large one is computed
        # once per table instead of held (a 5M-row first load ran out of a 2 GiB heap)
        classified = classified.persist() if small else classified
        try:
            # no valid row (all quarantined): nothing to look up in silver or count
            outcomes = ({} if not counts["valid"] else
                        dict(classified.groupBy("_class").count().collect()) if small
                        else {"duplicate": 1, "new": 1})
            if counts["quarantined"]:  # an empty append still costs a Delta commit
                quarantine.append(bad, app_id, batch_id)
            for table, name, stamp in ((duplicates, "duplicate", "duplicate_time"),
                                       (silver, "new", "silver_time")):
                if outcomes.get(name):
                    rows = classified.where(F.col("_class") == name).drop("_class")
                    if small:
                        rows = rows.coalesce(-(-outcomes[name] // ROWS_PER_FILE))
                    table.append(rows.withColumn(stamp, F.current_timestamp()), app_id, batch_id)
        finally:
            if small:
                classified.unpersist()
        if sequential is not None:  # after the rows: a crash before it replays the batch
            sequential.commit(spark, settings, batch_id)
        log(f"{QUERY}: batch {batch_id}: {counts['rows']} bronze rows, "
            f"{counts['quarantined']} quarantined")
        return counts
    finally:
        parsed.unpersist()


def gate(parsed, breaches: list[Breach], settings: Settings, batch_id: int) -> None:  # noqa: ANN001
    """Log (``warn``) or raise (``fail``) for the batch's breaches, naming the commonest
    reasons so the fix is obvious."""
    if not breaches:
        return
    from pyspark.sql import functions as F

    from lakecep.operators import ON_PURPOSE

    reason_code = F.split("reason", ":").getItem(0)
    reasons = ", ".join(f"{code} ({n:,})" for code, n in
                        parsed.where(~F.col("ok") & ~reason_code.isin(*ON_PURPOSE))
                        .select(reason_code.alias("code"))
                        .groupBy("code").count().orderBy(F.desc("count")).limit(3).collect())
    text = (f"silver quarantine gate: batch {batch_id}: "
            + "; ".join(b.describe() for b in breaches) + f"; commonest reasons: {reasons}")
    if settings.quarantine_gate == "warn":
        log(f"{QUERY}: warning: {text}")
        return
    raise QuarantineGateError(
        text + "\nnothing of this batch was written (bronze keeps its lines): fix the source "
        "(mapping, fields, format: `lakecep validate`; the reasons are in docs/sources.md) "
        "and run again, or raise max_quarantine_ratio (in the source file or the settings) "
        "or set quarantine_gate = \"warn\"")


def run(spark, settings: Settings, *, run_id: str | None = None,  # noqa: ANN001
        continuous: bool = False) -> StreamRun:
    del run_id  # a stream: its checkpoint, not a run id, says what was processed
    bronze = LakeTable(spark, settings, "bronze.events").ensure()
    app_id = writer_id(settings, QUERY)

    stopped: list[QuarantineGateError] = []

    def each_batch(batch, batch_id: int) -> None:  # noqa: ANN001
        try:
            process_batch(spark, settings, batch, batch_id, app_id)
        except QuarantineGateError as exc:
            stopped.append(exc)
            raise

    writer = bronze.stream(settings.max_files_per_trigger).writeStream.foreachBatch(
        batch_function(each_batch))
    try:
        return run_stream(writer, settings, QUERY, continuous=continuous)
    except Exception:  # the StreamingQueryException, or run_stream's RuntimeError
        if stopped:  # the gate's own message, not the streaming query's trace
            raise stopped[-1] from None
        raise
