"""``lakecep run all --continuous``: bronze, silver and gold as concurrent streaming queries
in one long-lived Spark application.

Each job's ``run`` is called inside :func:`lakecep.jobs.streaming.concurrently`, so it
starts its query (processing-time trigger ``trigger_interval``, its own checkpoint) and
returns; silver reads bronze and gold reads silver as Delta streaming sources, so each
layer's micro-batch follows the one above it by at most one trigger interval. Gold runs every
query in one stream, each query's work in its FAIR pool (the session starts in FAIR mode;
the newest tuned configuration's pool weights are applied between micro-batches) -- or, when
the rules use several priority classes, one stream per class (``gold_high``,
``gold_normal``, ``gold_low``), each in its class's pool (docs/rules.md, "Priorities"); the
heartbeat has each query's last batch time and backlog, so a class falling behind shows.

The main thread then watches: every few seconds it rewrites the heartbeat
(``lakecep.continuous``: ``$LAKECEP_HOME/run/continuous.json``, with a
``StreamingQueryListener`` adding each query's progress), and it stops everything when a
query fails (exit 1, the error in the heartbeat: the supervisor restarts the app) or on
SIGTERM / SIGINT (each query is stopped once its running micro-batch is done, so the
checkpoints and the Delta tables agree; exit 0). A batch interrupted anyway (a kill) is
run again on restart: every write is idempotent (Delta ``txnAppId``/``txnVersion``).

Quality (Great Expectations) is not part of the app: it validates whole tables and would
take the cores the streams need; ``lakecep run quality`` runs beside it (it only reads the
tables), e.g. from the hourly tuning or the daily maintenance schedule.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from datetime import UTC, datetime
from typing import Any

from lakecep import continuous as files
from lakecep.config import Settings

from .streaming import app_status, concurrently, log

#: The jobs of the app, in start order (each reads the one before it).
STAGES = ("bronze", "silver", "gold")
#: Seconds between two looks of the main loop at the queries (and heartbeats).
TICK = 5.0
#: Seconds a stop waits for a query's running micro-batch before stopping it anyway.
STOP_GRACE = 120.0


class Heartbeat:
    """The heartbeat document, updated from the main loop and the listener's thread."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.lock = threading.Lock()
        self.doc: dict[str, Any] = {
            "pid": os.getpid(), "started_at": files.now_iso(), "alive_at": files.now_iso(),
            "phase": "starting", "trigger_interval": settings.trigger_interval,
            "queries": {}, "error": None, "tuned_version": None, "home": str(settings.home)}
        self.write()

    def write(self, **changes: Any) -> None:
        with self.lock:
            self.doc.update(changes)
            self.doc["tuned_version"] = app_status.get("tuned_version")
            files.write_atomic(files.heartbeat_path(self.settings), self.doc)

    def progress(self, name: str, batch_id: int, rows: int, when: str,
                 **lag: Any) -> None:
        """``lag``: the batch's ``last_batch_ms`` and the source's backlog
        (``backlog_files`` / ``backlog_bytes``: silver not yet read by this query), what
        shows a priority class falling behind (docs/rules.md, "Priorities")."""
        with self.lock:
            entry = self.doc["queries"].setdefault(name, {"batches": 0, "rows": 0})
            entry.update(last_batch_id=batch_id, last_progress_at=when, last_rows=rows,
                         **{k: v for k, v in lag.items() if v is not None})
            if rows:
                entry["batches"] += 1
                entry["rows"] += rows
        self.write()

    def idle(self, name: str, when: str) -> None:
        with self.lock:
            self.doc["queries"].setdefault(name, {"batches": 0, "rows": 0})["idle_at"] = when
        self.write()


def listener(heartbeat: Heartbeat, names: dict[str, str]):  # noqa: ANN201 - a StreamingQueryListener
    """A ``StreamingQueryListener`` that puts each query's progress into the heartbeat
    (``names``: query id -> name, for the idle events, which carry no name)."""
    from pyspark.sql.streaming import StreamingQueryListener

    class Listener(StreamingQueryListener):
        def onQueryStarted(self, event: Any) -> None:  # noqa: N802 - Spark's names
            names[str(event.id)] = event.name or str(event.id)

        def onQueryProgress(self, event: Any) -> None:  # noqa: N802
            progress = event.progress
            name = progress.name or str(progress.id)
            metrics = progress.sources[0].metrics if progress.sources else {}

            def number(key: str) -> int | None:
                value = (metrics or {}).get(key)
                return int(value) if value is not None else None

            heartbeat.progress(name, int(progress.batchId), int(progress.numInputRows),
                               progress.timestamp, last_batch_ms=int(progress.batchDuration),
                               backlog_files=number("numFilesOutstanding"),
                               backlog_bytes=number("numBytesOutstanding"))
            if progress.numInputRows:
                log(f"{name}: batch {progress.batchId}: {progress.numInputRows} input rows, "
                    f"{progress.batchDuration} ms")

        def onQueryIdle(self, event: Any) -> None:  # noqa: N802
            heartbeat.idle(names.get(str(event.id), str(event.id)), event.timestamp)

        def onQueryTerminated(self, event: Any) -> None:  # noqa: N802
            return None

    return Listener()


def _stop_query(handle: Any, grace: float) -> None:
    """Stop ``handle`` once its running micro-batch is done (at most ``grace`` seconds)."""
    deadline = time.monotonic() + grace
    while handle.isActive and handle.status.get("isTriggerActive") and \
            time.monotonic() < deadline:
        time.sleep(0.5)
    handle.stop()


def run_app(spark, settings: Settings, runners: dict[str, Any], run_id: str) -> int:  # noqa: ANN001
    """Start the stages' queries, watch them until a signal or a failure, stop them all.
    Returns the exit code (0: stopped on request; 1: a query failed)."""
    other = files.already_running(settings)
    if other is not None and other != os.getpid():
        raise RuntimeError(f"a continuous app already runs for {settings.home} (pid {other}); "
                           "stop it first with `lakecep stop`")
    files.pid_path(settings).parent.mkdir(parents=True, exist_ok=True)
    files.pid_path(settings).write_text(f"{os.getpid()}\n")
    heartbeat = Heartbeat(settings)
    stop = threading.Event()
    reason: list[str] = []

    def on_signal(signum: int, _frame: object) -> None:
        reason.append(signal.Signals(signum).name)
        stop.set()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    names: dict[str, str] = {}
    spark.streams.addListener(listener(heartbeat, names))
    error: str | None = None
    handles: list[Any] = []
    try:
        with concurrently() as started:
            for stage in STAGES:
                if stop.is_set():
                    break
                runners[stage](spark, settings, run_id=run_id, continuous=True)
            handles = list(started)
        log(f"continuous: {len(handles)} queries running ({', '.join(h.name for h in handles)}"
            f"), trigger every {settings.trigger_interval}; heartbeat "
            f"{files.heartbeat_path(settings)}")
        heartbeat.write(phase="running", alive_at=files.now_iso(),
                        query_names=[h.name for h in handles])
        while not stop.is_set():
            stop.wait(TICK)
            failed = [h for h in handles if not h.isActive]
            if failed:
                h = failed[0]
                problem = h.exception()
                error = f"query {h.name!r} stopped: {problem or 'no error given'}"
                break
            heartbeat.write(alive_at=files.now_iso())
    except Exception as exc:  # noqa: BLE001 - the heartbeat says why, then it is raised
        error = f"{type(exc).__name__}: {exc}"
        heartbeat.write(phase="failed", error=error, alive_at=files.now_iso())
        for handle in handles:
            handle.stop()
        raise
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    heartbeat.write(phase="stopping", alive_at=files.now_iso(),
                    stop_reason=reason[0] if reason else error)
    log(f"continuous: stopping {len(handles)} queries "
        f"({reason[0] if reason else 'a query failed'})")
    for handle in handles:
        if handle.isActive:
            _stop_query(handle, STOP_GRACE)
    stopped_at = datetime.now(UTC).isoformat(timespec="milliseconds")
    if error is not None:
        heartbeat.write(phase="failed", error=error, stopped_at=stopped_at)
        log(f"continuous: {error}")
        return 1
    heartbeat.write(phase="stopped", stopped_at=stopped_at)
    files.pid_path(settings).unlink(missing_ok=True)
    return 0
