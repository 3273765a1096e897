"""Running a Structured Streaming query the way every lakecep job does.

``availableNow`` (process what is there, then stop) when run by a DAG, a processing-time
trigger when run continuously; one checkpoint per query; a progress line per micro-batch.
Inside :func:`concurrently` a job's :func:`run_stream` starts its query and returns at once,
so one application runs several jobs' queries side by side (``jobs/continuous.py``).
"""

from __future__ import annotations

import functools
import json
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from lakecep.config import Settings

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.streaming import DataStreamWriter, StreamingQuery

#: The Java exceptions by which a stopping query interrupts its running batch (Spark's
#: ``StreamExecution.IO_EXCEPTION_NAMES``).
INTERRUPTIONS = ("java.lang.InterruptedException", "java.io.InterruptedIOException",
                 "java.nio.channels.ClosedByInterruptException")


class BatchInterrupted(Exception):
    """A foreachBatch function interrupted because its query is being stopped."""


def batch_function(each: Callable[[DataFrame, int], None]) -> Callable[[DataFrame, int], None]:
    """Wrap a foreachBatch function so that a stop never kills the stream's thread.

    ``query.stop()`` interrupts a running batch: the batch's next call into the JVM fails
    with a Py4JJavaError holding ``InterruptedException`` and the JVM's whole stack.
    py4j hands the Python traceback (tens of KB) back to Spark, which tests it against a
    regular expression (``(.|\\n)*``, one stack frame per character) to tell a stop from a
    failure; on a long traceback that overflows the stack, and the stream's thread dies of
    ``StackOverflowError`` with thousands of lines in the log. The wrapper re-raises such an
    interruption as a one-line :class:`BatchInterrupted` in the form Spark recognises as a
    stop; every other error passes unchanged."""

    @functools.wraps(each)
    def run(batch: DataFrame, batch_id: int) -> None:
        try:
            each(batch, batch_id)
        except Exception as error:
            interruption = _interruption(error)
            if interruption is None:
                raise
            raise BatchInterrupted(
                "py4j.protocol.Py4JJavaError: An error occurred while calling the JVM: "
                f"{interruption} (batch {batch_id} interrupted: its query is stopping)"
            ) from None

    return run


def _interruption(error: BaseException) -> str | None:
    """The interrupting Java exception's name, if ``error`` or one it was raised from is a
    Py4JJavaError that carries one."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if type(current).__name__ == "Py4JJavaError":
            text = str(current)
            found = [name for name in INTERRUPTIONS if name in text]
            if found:
                return min(found, key=text.index)
        current = current.__cause__ or current.__context__
    return None


#: A Delta source offset's index at the start of a table version, before all its files:
#: ``-1`` in the offset log (``BASE_INDEX_V1``), ``-100`` in memory (``BASE_INDEX``, Delta's
#: ``DeltaSourceOffset``; accepted in case a future release writes it).
BASE_INDEXES = (-1, -100)


def ends_inside_commit(checkpoint: Path | str, batch_id: int) -> bool:
    """Whether micro-batch ``batch_id`` of the stream with ``checkpoint`` (reading one Delta
    table) ends inside a commit of that table: its end offset (the last line of
    ``offsets/<batch_id>``, written before the batch runs) points into a table version --
    ``maxFilesPerTrigger`` split the commit, the next batch reads the rest of its files --
    rather than at the start of the next one (``index`` -1, ``isStartingVersion`` false).
    An offset into the initial snapshot (``isStartingVersion`` true: the table's files when
    the stream started, read before its later commits) ends inside it too: the snapshot is
    read as one unit, as a stream without a file limit reads it in one batch. Measured on
    Delta 4 (tests/unit/test_stream_offsets.py): a commit of three files read one file per
    batch ends its batches at ``(v, 0)``, ``(v, 1)``, then ``(v + 1, -1)``."""
    lines = (Path(checkpoint) / "offsets" / str(batch_id)).read_text().splitlines()
    offset = json.loads(lines[-1])  # v1, the batch's metadata, then one line per source
    return bool(offset["isStartingVersion"]) or int(offset["index"]) not in BASE_INDEXES


@dataclass
class StreamRun:
    name: str
    batches: int
    input_rows: int
    seconds: float
    #: What one input row is: ``rows``, or ``files`` for bronze (it reads whole files).
    input_unit: str = "rows"

    def __str__(self) -> str:
        return (
            f"{self.name}: {self.input_rows} input {self.input_unit} in "
            f"{self.batches} micro-batches, {self.seconds:.1f}s"
        )


#: Where progress goes while :func:`reporting` is active (the CLI's progress display);
#: otherwise log lines are printed to stderr.
_log_sink: Callable[[str], None] | None = None
_batch_sink: Callable[[str, int, int], None] | None = None
#: What the jobs report about themselves while they run (e.g. gold's ``tuned_version``),
#: read by the continuous app's heartbeat (``jobs/continuous.py``).
app_status: dict[str, object] = {}
#: The queries started inside :func:`concurrently` (None outside it).
_started: list[StreamingQuery] | None = None


@contextmanager
def concurrently() -> Iterator[list[StreamingQuery]]:
    """While the block runs, :func:`run_stream` starts its query and returns without
    waiting (its :class:`StreamRun` counts nothing); the started queries are appended to
    the list this yields, for the caller to watch and stop."""
    global _started
    saved, _started = _started, []
    try:
        yield _started
    finally:
        _started = saved


@contextmanager
def reporting(log: Callable[[str], None] | None = None,
              batch: Callable[[str, int, int], None] | None = None) -> Iterator[None]:
    """Send log lines to ``log`` and each micro-batch's ``(query, input rows so far,
    batches so far)`` to ``batch`` while the block runs."""
    global _log_sink, _batch_sink
    saved = _log_sink, _batch_sink
    _log_sink, _batch_sink = log, batch
    try:
        yield
    finally:
        _log_sink, _batch_sink = saved


def log(message: str) -> None:
    if _log_sink is not None:
        _log_sink(message)
    else:
        print(f"[lakecep] {message}", file=sys.stderr, flush=True)


def writer_id(settings: Settings, query: str) -> str:
    """Stable id of a query's writer, kept beside its checkpoint.

    Used as Delta ``txnAppId`` for idempotent foreachBatch writes. Deleting the checkpoint
    starts a new id, so a fresh stream (whose batch ids restart at 0) is not mistaken for
    a replay.
    """
    path = settings.checkpoint(query) / "lakecep_writer_id"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"{query}-{uuid.uuid4()}")
    return path.read_text().strip()


def run_stream(
    writer: DataStreamWriter, settings: Settings, query: str, *, continuous: bool = False,
    input_unit: str = "rows",
) -> StreamRun:
    """Start ``writer`` with the query's checkpoint, report progress, wait for the end.
    ``input_unit`` names what the source's input rows are (``files`` for bronze)."""
    checkpoint = settings.checkpoint(query)
    Path(checkpoint).mkdir(parents=True, exist_ok=True)
    writer = writer.queryName(query).option("checkpointLocation", str(checkpoint))
    if continuous:
        writer = writer.trigger(processingTime=settings.trigger_interval)
    else:
        writer = writer.trigger(availableNow=True)
    started = time.monotonic()
    handle = writer.start()
    if _started is not None:  # concurrently(): the caller watches it
        _started.append(handle)
        log(f"{query}: started (trigger every {settings.trigger_interval})")
        return StreamRun(query, 0, 0, 0.0, input_unit)
    seen: set[str] = set()
    rows = 0
    batches = 0

    def drain() -> None:
        nonlocal rows, batches
        for progress in handle.recentProgress:
            key = f"{progress['id']}:{progress['batchId']}"
            if key in seen:
                continue
            seen.add(key)
            n = int(progress.get("numInputRows", 0))
            if n == 0:
                continue
            rows += n
            batches += 1
            written = (progress.get("sink") or {}).get("numOutputRows", -1)
            out = f", {written} rows written" if written is not None and written >= 0 else ""
            log(f"{query}: batch {progress['batchId']}: {n} input {input_unit}{out}, "
                f"{progress['batchDuration']} ms")
            if _batch_sink is not None:
                _batch_sink(query, rows, batches)

    while handle.isActive:
        handle.awaitTermination(2)
        drain()
    drain()
    error = handle.exception()
    if error is not None:
        raise RuntimeError(f"streaming query {query!r} failed: {error}") from None
    return StreamRun(query, batches, rows, time.monotonic() - started, input_unit)
