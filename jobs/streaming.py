"""Running a Structured Streaming query the way every lakecep job does.

``availableNow`` (process what is there, then stop) when run by a DAG, a processing-time
trigger when run continuously; one checkpoint per query; a progress line per micro-batch.
"""

from __future__ import annotations

import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from lakecep.config import Settings

if TYPE_CHECKING:
    from pyspark.sql.streaming import DataStreamWriter


@dataclass
class StreamRun:
    name: str
    batches: int
    input_rows: int
    seconds: float

    def __str__(self) -> str:
        return (
            f"{self.name}: {self.input_rows} input rows (files for the landing reader) in "
            f"{self.batches} micro-batches, {self.seconds:.1f}s"
        )


def log(message: str) -> None:
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
    writer: DataStreamWriter, settings: Settings, query: str, *, continuous: bool = False
) -> StreamRun:
    """Start ``writer`` with the query's checkpoint, report progress, wait for the end."""
    checkpoint = settings.checkpoint(query)
    Path(checkpoint).mkdir(parents=True, exist_ok=True)
    writer = writer.queryName(query).option("checkpointLocation", str(checkpoint))
    if continuous:
        writer = writer.trigger(processingTime=settings.trigger_interval)
    else:
        writer = writer.trigger(availableNow=True)
    started = time.monotonic()
    handle = writer.start()
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
            log(f"{query}: batch {progress['batchId']}: {n} input rows{out}, "
                f"{progress['batchDuration']} ms")

    while handle.isActive:
        handle.awaitTermination(2)
        drain()
    drain()
    error = handle.exception()
    if error is not None:
        raise RuntimeError(f"streaming query {query!r} failed: {error}") from None
    return StreamRun(query, batches, rows, time.monotonic() - started)
