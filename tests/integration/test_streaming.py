"""Stopping a stream whose foreachBatch is running (``lakecep.jobs.streaming.batch_function``).

``query.stop()`` interrupts the batch; unwrapped, the interruption's traceback (tens of KB)
overflowed Spark's stop-detecting regular expression and the stream's thread died of
``StackOverflowError`` (seen when the continuous app and the priorities benchmark stopped)."""

from __future__ import annotations

import re
import threading
import time
import traceback

import pytest

from lakecep.jobs.streaming import INTERRUPTIONS, BatchInterrupted, batch_function

pytestmark = pytest.mark.spark

#: Spark's ``StreamExecution.PROXY_ERROR`` (4.1): how it tells a stop from a failure.
SPARK_STOP = re.compile(r"py4j.protocol.Py4JJavaError: An error occurred while calling"
                        r"((.|\r\n|\r|\n)*)(" + "|".join(INTERRUPTIONS) + ")")


def test_a_batch_interrupted_by_stop_fails_short_and_as_a_stop(spark) -> None:  # noqa: ANN001
    started, raised, batches = threading.Event(), [], []

    def each(frame, batch_id: int) -> None:  # noqa: ANN001
        batches.append(batch_id)
        started.set()
        time.sleep(3)  # query.stop() arrives here ...
        frame.groupBy().count().collect()  # ... and this call into the JVM is interrupted

    wrapped = batch_function(each)

    def watched(frame, batch_id: int) -> None:  # noqa: ANN001
        try:
            wrapped(frame, batch_id)
        except BaseException as error:
            raised.append(error)
            raise

    query = (spark.readStream.format("rate").option("rowsPerSecond", 5).load()
             .writeStream.foreachBatch(watched).trigger(processingTime="1 second").start())
    try:
        assert started.wait(120), "no micro-batch started"
        time.sleep(0.5)
    finally:
        query.stop()
    assert query.exception() is None
    (error,) = raised
    assert isinstance(error, BatchInterrupted), repr(error)
    text = "".join(traceback.format_exception(error))
    assert len(text) < 2_000, text  # what py4j hands to Spark (was tens of KB)
    assert SPARK_STOP.search(text), text
    assert f"batch {batches[-1]} interrupted" in text


def test_other_errors_pass_unchanged() -> None:
    def each(frame, batch_id: int) -> None:  # noqa: ANN001
        raise ValueError(f"bad batch {batch_id}")

    with pytest.raises(ValueError, match="bad batch 7"):
        batch_function(each)(None, 7)
