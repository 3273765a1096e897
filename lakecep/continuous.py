"""The continuous app's files and its supervision, without Spark.

``lakecep run all --continuous`` is one long-lived Spark application (``jobs/continuous.py``).
It keeps three files under ``$LAKECEP_HOME/run/``:

* ``continuous.pid``: its process id (written at start, removed on a clean stop);
* ``continuous.json``: the heartbeat, rewritten atomically (temporary file + rename) every
  few seconds by the app's main loop and on every micro-batch by its
  ``StreamingQueryListener``: pid, start time, phase (``starting``, ``running``,
  ``stopping``, ``stopped``, ``failed``), ``alive_at`` (the main loop's last look at the
  streams), the tuned configuration version in force and, per query, the last batch id,
  the time of its last progress and the rows read;
* ``continuous.log``: the app's output when a supervisor started it;
* ``continuous.stop``: present after a stop on request (the supervisor leaves it stopped);
* ``restarts.json``: the supervisor's count of failures in a row (its back-off).

A supervisor (the ``lakecep_continuous`` DAG, ``lakecep supervise``, ``lakecep stop``,
``lakecep status``) reads them with plain Python: :func:`state`, :func:`supervise`,
:func:`stop`. docs/architecture.md, "Continuous mode".
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from lakecep.config import Settings

#: Default seconds without a heartbeat after which the app counts as hung (restarted).
STALE_AFTER = 300.0
#: Seconds ``stop`` waits for a clean stop (queries finish their batch) before SIGKILL.
STOP_TIMEOUT = 180.0
#: Back-off of a crash loop: after the second failure in a row the supervisor waits this
#: long after its last restart before the next one, doubling with every further failure,
#: at most :data:`BACKOFF_CAP`; a run that stayed up :data:`HEALTHY_AFTER` seconds ends
#: the series (the next failure restarts at once again).
BACKOFF = 300.0
BACKOFF_CAP = 3600.0
HEALTHY_AFTER = 600.0


def run_dir(settings: Settings) -> Path:
    return Path(settings.home) / "run"


def heartbeat_path(settings: Settings) -> Path:
    return run_dir(settings) / "continuous.json"


def pid_path(settings: Settings) -> Path:
    return run_dir(settings) / "continuous.pid"


def log_path(settings: Settings) -> Path:
    return run_dir(settings) / "continuous.log"


def restarts_path(settings: Settings) -> Path:
    return run_dir(settings) / "restarts.json"


def stop_request_path(settings: Settings) -> Path:
    """Present while the app is stopped on request (:func:`stop`); holds when."""
    return run_dir(settings) / "continuous.stop"


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def write_atomic(path: Path, document: dict[str, Any]) -> None:
    """Write ``document`` as JSON so that a reader sees the old file or the new one whole."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(document, indent=2, sort_keys=True, default=str) + "\n")
    os.replace(tmp, path)


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        found = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return found if isinstance(found, dict) else None


def read_heartbeat(settings: Settings) -> dict[str, Any] | None:
    return _read_json(heartbeat_path(settings))


def read_pid(settings: Settings) -> int | None:
    try:
        return int(pid_path(settings).read_text().strip())
    except (OSError, ValueError):
        return None


def pid_alive(pid: int, marker: bytes = b"lakecep") -> bool:
    """Whether ``pid`` is a live (not zombie) process whose command line holds ``marker``
    (a lakecep process; ``lakecep.jobs.connect`` for the Connect server), so that a pid
    reused by another program after a crash is not taken for ours."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process: exists, cannot be told apart
    proc = Path(f"/proc/{pid}")
    if not proc.is_dir():
        return True  # no /proc (macOS): the signal test is all there is
    try:
        stat = (proc / "stat").read_text()
        if stat.rsplit(")", 1)[1].split()[0] in ("Z", "X"):
            return False
        return marker in (proc / "cmdline").read_bytes()
    except (OSError, IndexError):
        return False


def _age(stamp: object) -> float | None:
    if not isinstance(stamp, str):
        return None
    try:
        when = datetime.fromisoformat(stamp)
    except ValueError:
        return None
    return max(0.0, (datetime.now(UTC) - when).total_seconds())


@dataclass
class AppState:
    """What a supervisor knows about the continuous app of a home."""

    pid: int | None
    running: bool
    heartbeat: dict[str, Any] | None
    #: seconds since the heartbeat's ``alive_at`` (None: no heartbeat)
    age: float | None
    stale_after: float

    @property
    def stale(self) -> bool:
        return self.running and (self.age is None or self.age > self.stale_after)

    @property
    def healthy(self) -> bool:
        return self.running and not self.stale

    def as_dict(self) -> dict[str, Any]:
        return {"pid": self.pid, "running": self.running, "stale": self.stale,
                "healthy": self.healthy, "heartbeat_age_s": None if self.age is None
                else round(self.age, 1), "stale_after_s": self.stale_after,
                "heartbeat": self.heartbeat}


def state(settings: Settings, stale_after: float = STALE_AFTER) -> AppState:
    heartbeat = read_heartbeat(settings)
    pid = read_pid(settings)
    if pid is None and heartbeat is not None and heartbeat.get("phase") not in (
            "stopped", "failed"):
        pid = heartbeat.get("pid")
    running = pid is not None and pid_alive(pid)
    age = _age((heartbeat or {}).get("alive_at")) if running else None
    if running and heartbeat is not None and heartbeat.get("pid") != pid:
        # the heartbeat of an earlier run (the new one has not written yet): its age is
        # the time since the supervisor launched this pid
        age = _age(heartbeat.get("launched_at")) if heartbeat.get("launched_pid") == pid \
            else None
    return AppState(pid, running, heartbeat, age, stale_after)


def already_running(settings: Settings) -> int | None:
    """The pid of a live continuous app of this home, or None."""
    found = state(settings)
    return found.pid if found.running else None


def start(settings: Settings, python: str, env: dict[str, str] | None = None) -> int:
    """Start ``python -m lakecep.jobs.cli run all --continuous`` detached: its own session
    (not killed with the caller's process group, e.g. an Airflow task), output appended to
    ``continuous.log``, working directory the home. Returns its pid (also in the pid file)."""
    home = Path(settings.home).resolve()
    log = log_path(settings)
    log.parent.mkdir(parents=True, exist_ok=True)
    environment = {**(os.environ if env is None else env), "LAKECEP_HOME": str(home),
                   "PYTHONUNBUFFERED": "1"}
    with log.open("ab") as out:
        out.write(f"\n==> {now_iso()} started by pid {os.getpid()}\n".encode())
        out.flush()
        proc = subprocess.Popen(
            [python, "-m", "lakecep.jobs.cli", "run", "all", "--continuous"],
            cwd=home, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
            env=environment, start_new_session=True, close_fds=True)
    pid_path(settings).write_text(f"{proc.pid}\n")
    beat = read_heartbeat(settings) or {}
    write_atomic(heartbeat_path(settings), {**beat, "launched_pid": proc.pid,
                                            "launched_at": now_iso()})
    return proc.pid


def _wait_gone(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(pid, os.WNOHANG)  # reap it when we are its parent
        if not pid_alive(pid):
            return True
        time.sleep(0.5)
    return not pid_alive(pid)


def kill(pid: int) -> None:
    """SIGKILL the app and its process group (the Spark JVM is in it)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(os.getpgid(pid), signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, signal.SIGKILL)
    _wait_gone(pid, 30)


def stop(settings: Settings, timeout: float = STOP_TIMEOUT) -> dict[str, Any]:
    """Stop the app: SIGTERM (it stops every query after its current micro-batch and exits),
    SIGKILL of its process group after ``timeout`` seconds. Returns what was done. Records
    the request (``continuous.stop``), so :func:`supervise` does not start it again until
    asked to (``start_stopped=True``)."""
    found = state(settings)
    stop_request_path(settings).parent.mkdir(parents=True, exist_ok=True)
    stop_request_path(settings).write_text(f"{now_iso()}\n")
    if not found.running or found.pid is None:
        return {"action": "none", "reason": "not running", "pid": found.pid}
    pid = found.pid
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    if _wait_gone(pid, timeout):
        return {"action": "stopped", "pid": pid}
    kill(pid)
    return {"action": "killed", "pid": pid, "reason": f"no clean stop within {timeout:.0f}s"}


def backoff_wait(failures: int, backoff: float = BACKOFF) -> float:
    """Seconds between the last restart and the next after ``failures`` in a row: none
    after the first, then ``backoff``, doubling, at most :data:`BACKOFF_CAP`."""
    return 0.0 if failures < 2 else min(backoff * 2 ** (failures - 2), BACKOFF_CAP)


def _lived(beat: dict[str, Any], pid: int | None) -> float | None:
    """Seconds the run of ``pid`` was up by its own heartbeat (None: it never wrote one)."""
    if pid is None or beat.get("pid") != pid:
        return None
    started, alive = _age(beat.get("started_at")), _age(beat.get("alive_at"))
    return None if started is None or alive is None else started - alive


def supervise(settings: Settings, python: str, stale_after: float = STALE_AFTER,
              env: dict[str, str] | None = None, *, start_stopped: bool = False,
              backoff: float = BACKOFF) -> dict[str, Any]:
    """Start the app if it does not run, restart it if its heartbeat is older than
    ``stale_after`` seconds (hung) or it died. An app stopped on request (:func:`stop`)
    stays stopped unless ``start_stopped``. A crash loop backs off (:func:`backoff_wait`;
    ``start_stopped`` restarts at once all the same). Returns what was done and why."""
    found = state(settings, stale_after)
    beat = found.heartbeat or {}
    requested = stop_request_path(settings)
    if not found.running and requested.exists() and not start_stopped:
        return {"action": "none", "reason": f"stopped on request at "
                f"{requested.read_text().strip()} (start it with `lakecep supervise --start`)",
                "pid": None}
    record = _read_json(restarts_path(settings)) or {}
    if found.healthy:
        if record and (_lived(beat, found.pid) or 0.0) >= HEALTHY_AFTER:
            restarts_path(settings).unlink(missing_ok=True)  # the crash loop is over
        return {"action": "none", "reason": "running", "pid": found.pid,
                "heartbeat_age_s": round(found.age or 0.0, 1)}
    error = beat.get("error") if beat.get("phase") == "failed" else None
    if found.running and found.pid is not None:
        reason = (f"heartbeat stale ({found.age:.0f}s > {stale_after:.0f}s)"
                  if found.age is not None else "no heartbeat")
        action = "restarted"
    elif found.pid is not None or beat.get("phase") in ("starting", "running", "failed"):
        phase = beat.get("phase")
        reason = (f"it failed: {beat.get('error')}" if phase == "failed"
                  else f"process {found.pid or beat.get('pid')} died")
        action = "restarted"
    else:
        reason = "not running" if beat.get("phase") != "stopped" else "stopped"
        action = "started"
    if action == "restarted":
        gone = found.pid or beat.get("pid")
        if record.get("counted_pid") != gone:  # each failure counted once
            lived = _lived(beat, gone)
            quick = lived is None or lived < HEALTHY_AFTER
            record = {**record, "failures": record.get("failures", 0) + 1 if quick else 1,
                      "counted_pid": gone, "last_reason": reason}
            write_atomic(restarts_path(settings), record)
        wait = backoff_wait(record["failures"], backoff)
        since = _age(record.get("restarted_at"))
        if wait and since is not None and since < wait and not start_stopped:
            return {"action": "none", "pid": None, "previous_error": error,
                    "failures_in_a_row": record["failures"], "backing_off": True,
                    "reason": f"backing off: {record['failures']} failures in a row (last: "
                              f"{reason}); next restart in {wait - since:.0f}s (`lakecep "
                              "supervise --start` restarts it now)"}
        if found.running and found.pid is not None:
            kill(found.pid)
    requested.unlink(missing_ok=True)
    pid = start(settings, python, env)
    if action == "restarted":
        write_atomic(restarts_path(settings), {**record, "restarted_at": now_iso()})
    return {"action": action, "reason": reason, "pid": pid, "previous_error": error,
            "failures_in_a_row": record.get("failures", 0)}
