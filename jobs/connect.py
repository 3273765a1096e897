"""``lakecep serve``: one long-lived Spark Connect server per lake, which ``lakecep sql`` reuses.

Every ``lakecep`` command starts its own driver JVM (tens of seconds). ``lakecep serve``
starts one in the background instead: a Python process (``python -m lakecep.jobs.connect``)
builds the usual lakecep session (:func:`lakecep.jobs.spark.get_spark`: the same Delta jars,
extensions, catalog, log4j and lake settings) with Spark's Connect plugin
(``spark.plugins=org.apache.spark.sql.connect.SparkConnectPlugin``) listening on
127.0.0.1 only, and then waits. Its process group holds the driver JVM and its Python
workers, so stopping the group stops them all.

The state file ``$LAKECEP_HOME/connect/server.json`` names the server (pid, port, start
time, the resolved LAKECEP_HOME, its log ``$LAKECEP_HOME/connect/server.log``) and the lake
tables registered in its catalog. ``lakecep sql`` connects to it when it is alive and
serves this home (:func:`running`); a state file whose process is gone is removed.

Tables: the server's catalog (in memory, shared by all Connect sessions) holds the
``layer.table`` entries. A call registers only what changed on disk since the last call
(:func:`register`), so an unchanged lake costs no round trip at all; Delta reads each
table's newest version at every query, so writes of ``lakecep run`` are seen at once.

JDBC (``lakecep serve --jdbc-port N``): the same driver also runs Spark's Thrift server
(HiveServer2 protocol, ``jdbc:hive2://127.0.0.1:N/default``) for BI tools and ``beeline``.
Its sessions share the catalog above, so they see the same tables and typed views.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lakecep.config import Settings, local_only
from lakecep.continuous import pid_alive

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

HOST = "127.0.0.1"
DEFAULT_PORT = 15002
#: Spark's documented way to run the Connect service inside a driver (bin/spark-connect-shell).
PLUGIN = "org.apache.spark.sql.connect.SparkConnectPlugin"
#: Seconds ``serve`` waits for the server's first answer (JVM start, Delta, plugin).
START_TIMEOUT = 240.0
STOP_TIMEOUT = 30.0


class ServerError(Exception):
    """The server could not be started, reached or stopped (one line; hint separate)."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.hint = hint


@dataclasses.dataclass(frozen=True)
class Server:
    """What the state file says about a server."""

    pid: int
    port: int
    started_at: str
    home: str
    log: str
    #: Lake tables registered in the server's catalog (``layer.table``).
    registered: tuple[str, ...] = ()
    #: Typed views registered (:mod:`lakecep.typed_views`) and what they were made from
    #: (the query and source files, the tables).
    views: tuple[str, ...] = ()
    views_made_from: str = ""
    #: Port of the Thrift (JDBC) server in the same driver; None: not started.
    jdbc_port: int | None = None

    @property
    def endpoint(self) -> str:
        return f"sc://{HOST}:{self.port}"

    @property
    def jdbc_url(self) -> str | None:
        return None if self.jdbc_port is None else f"jdbc:hive2://{HOST}:{self.jdbc_port}/default"

    def as_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "registered": list(self.registered),
                "views": list(self.views), "endpoint": self.endpoint,
                "jdbc_url": self.jdbc_url}


def state_file(settings: Settings) -> Path:
    return settings.home / "connect" / "server.json"


def log_file(settings: Settings) -> Path:
    return settings.home / "connect" / "server.log"


def ready_file(settings: Settings) -> Path:
    """Written by the server process (its pid) once its session exists: the gRPC port
    opens earlier, with the SparkContext, when requests still fail."""
    return settings.home / "connect" / "server.ready"


def ready(settings: Settings, server: Server) -> bool:
    try:
        return int(ready_file(settings).read_text()) == server.pid
    except (OSError, ValueError):
        return False


def _home(settings: Settings) -> str:
    return str(settings.home.expanduser().resolve())


def read_state(settings: Settings) -> Server | None:
    """The state file's server (alive or not); None without a readable state file."""
    try:
        data = json.loads(state_file(settings).read_text())
        return Server(pid=int(data["pid"]), port=int(data["port"]),
                      started_at=str(data["started_at"]), home=str(data["home"]),
                      log=str(data["log"]), registered=tuple(data.get("registered", ())),
                      views=tuple(data.get("views", ())),
                      views_made_from=str(data.get("views_made_from", "")),
                      jdbc_port=None if data.get("jdbc_port") is None
                      else int(data["jdbc_port"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _write_state(settings: Settings, server: Server) -> None:
    path = state_file(settings)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(f".{os.getpid()}.tmp")
    data = {k: v for k, v in server.as_dict().items() if k not in ("endpoint", "jdbc_url")}
    partial.write_text(json.dumps(data, indent=2) + "\n")
    partial.replace(path)  # atomic: a reader sees the old or the new file


def _remove_state(settings: Settings, server: Server | None = None) -> None:
    """Remove the state file (only if it still names ``server``, when given)."""
    current = read_state(settings)
    if server is None or current is None or current.pid == server.pid:
        state_file(settings).unlink(missing_ok=True)
        ready_file(settings).unlink(missing_ok=True)


def alive(pid: int) -> bool:
    """Whether process ``pid`` exists and is not a zombie, and (on Linux) is a lakecep
    Connect server, not another program that got the number after a reboot."""
    return pid_alive(pid, b"lakecep.jobs.connect")


def running(settings: Settings) -> Server | None:
    """The live server of this LAKECEP_HOME, if any; a stale state file (its process is
    gone, or it names another home, e.g. a copied lake) is removed."""
    server = read_state(settings)
    if server is None:
        return None
    if server.home != _home(settings) or not alive(server.pid):
        _remove_state(settings, server)
        return None
    return server


def answers(port: int, timeout: float = 0.5) -> bool:
    """Whether something accepts connections on ``HOST:port``."""
    try:
        with socket.create_connection((HOST, port), timeout=timeout):
            return True
    except OSError:
        return False


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((HOST, port))
        except OSError:
            return False
    return True


def start(settings: Settings, port: int = DEFAULT_PORT, *, jdbc_port: int | None = None,
          timeout: float = START_TIMEOUT, on_wait: Callable[[str], None] | None = None
          ) -> tuple[Server, bool]:
    """Start the server of this home in the background; wait until it answers a query.

    ``jdbc_port``: also run the Thrift (JDBC) server on that port. Returns the server and
    whether it was started now (False: one was already running, nothing started). Raises
    :class:`ServerError` if a port is taken or the server dies or does not answer within
    ``timeout`` seconds (it is stopped then).
    """
    current = running(settings)
    if current is not None:
        return current, False
    for taken, option in ((port, "--port"), (jdbc_port, "--jdbc-port")):
        if taken is not None and not _port_free(taken):
            raise ServerError(f"port {taken} on {HOST} is in use",
                              f"choose another with `lakecep serve {option} N`")
    if jdbc_port is not None and jdbc_port == port:
        raise ServerError(f"--port and --jdbc-port are both {port}", "give two ports")
    if jdbc_port is not None:
        _thrift_conf(settings, jdbc_port)  # its ServerError here, not in the server's log
    log = log_file(settings)
    log.parent.mkdir(parents=True, exist_ok=True)
    values = {k: str(v) if isinstance(v, Path) else v
              for k, v in dataclasses.asdict(settings).items()}
    values["home"] = _home(settings)
    command = [sys.executable, "-m", "lakecep.jobs.connect", json.dumps(values), str(port),
               str(jdbc_port or 0)]
    env = {**os.environ, "LAKECEP_HOME": values["home"]}
    with log.open("ab") as output:
        process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=output,
                                   stderr=subprocess.STDOUT, env=env, start_new_session=True,
                                   close_fds=True)
    server = Server(pid=process.pid, port=port,
                    started_at=datetime.now(UTC).isoformat(timespec="seconds"),
                    home=values["home"], log=str(log), jdbc_port=jdbc_port)
    ready_file(settings).unlink(missing_ok=True)
    _write_state(settings, server)
    try:
        _wait_until_answering(settings, server, process, timeout, on_wait)
        server = register(settings, server)
    except BaseException:
        _stop_group(server.pid, process)
        _remove_state(settings, server)
        raise
    return server, True


def _wait_until_answering(settings: Settings, server: Server,
                          process: subprocess.Popen[bytes], timeout: float,
                          on_wait: Callable[[str], None] | None) -> None:
    deadline = time.monotonic() + timeout
    while not (ready(settings, server) and answers(server.port)
               and (server.jdbc_port is None or answers(server.jdbc_port))):
        if process.poll() is not None:
            raise ServerError(f"the Connect server exited with code {process.returncode} "
                              f"while starting: {_last_line(Path(server.log))}",
                              f"its log: {server.log}")
        if time.monotonic() > deadline:
            raise ServerError(f"the Connect server did not answer within {timeout:.0f}s",
                              f"its log: {server.log}")
        if on_wait:
            on_wait("starting the Spark Connect server")
        time.sleep(0.5)
    spark = session(server)
    try:
        spark.sql("SELECT 1").collect()  # the first real answer
    finally:
        spark.stop()


def _last_line(log: Path) -> str:
    try:
        lines = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return "no log"
    errors = [line for line in lines if "Error" in line or "Exception" in line]
    return (errors or lines or ["no output"])[-1].strip()[:300]


def session(server: Server) -> SparkSession:
    """A Spark Connect session on ``server`` (its own session; :func:`register` adds the
    lake tables)."""
    from pyspark.sql import SparkSession

    return SparkSession.builder.remote(server.endpoint).getOrCreate()


def lake_tables(settings: Settings) -> dict[str, Path]:
    """``layer.table`` -> folder of every lake table that exists (has Delta commits).

    Read from the file system, so checking costs no round trip to the server."""
    from lakecep import schemas

    found = {}
    for name in schemas.tables():
        folder = local_only(settings.table_path(name),
                            "`lakecep server` (it finds the lake's tables on the local disk)")
        log = folder / "_delta_log"
        if log.is_dir() and any(p.suffix in (".json", ".parquet") for p in log.iterdir()):
            found[name] = folder
    return found


def register(settings: Settings, server: Server, spark: SparkSession | None = None
             ) -> Server:
    """Bring the server's catalog in line with the lake: drop entries of tables that are
    gone, create those of new tables, re-create the typed views when a table, query or
    source file changed; nothing (no round trip) when nothing changed. Returns the server
    with its registered tables and views (also written to the state file)."""
    from lakecep import typed_views

    wanted = lake_tables(settings)
    made_from = f"{typed_views.fingerprint(settings)}:{','.join(sorted(wanted))}"
    if set(wanted) == set(server.registered) and made_from == server.views_made_from:
        return server
    views = typed_views.lake_views(settings, list(wanted))
    own = spark is None
    spark = spark or session(server)
    try:
        for name in server.views:  # they may read a table that goes
            spark.sql(f"DROP VIEW IF EXISTS {name}")
        for name in sorted(set(server.registered) - set(wanted)):
            spark.sql(f"DROP TABLE IF EXISTS {name}")  # external: the data is not touched
        for name in sorted(set(wanted) - set(server.registered)):
            spark.sql(f"CREATE SCHEMA IF NOT EXISTS {name.split('.')[0]}")
            # DROP first: an entry made by an earlier call that died before recording it
            spark.sql(f"DROP TABLE IF EXISTS {name}")
            spark.sql(f"CREATE TABLE {name} USING delta LOCATION '{wanted[name]}'")
        made = typed_views.make(views, spark.sql)
    finally:
        if own:
            spark.stop()
    server = dataclasses.replace(server, registered=tuple(sorted(wanted)),
                                 views=tuple(made), views_made_from=made_from)
    if read_state(settings) is not None:
        _write_state(settings, server)
    return server


def forget_tables(settings: Settings, server: Server) -> Server:
    """Record that no table is registered (the next :func:`register` re-creates them all,
    e.g. after a query did not find a table the state file lists)."""
    server = dataclasses.replace(server, registered=(), views=(), views_made_from="")
    _write_state(settings, server)
    return server


def stop(settings: Settings) -> Server | None:
    """Stop this home's server (its whole process group) and remove the state file.

    Returns the server that was stopped, None if none was running."""
    server = read_state(settings)
    if server is None:
        return None
    was_alive = alive(server.pid) and server.home == _home(settings)
    if was_alive:
        _stop_group(server.pid)
    _remove_state(settings, server)
    return server if was_alive else None


def _stop_group(pid: int, process: subprocess.Popen[bytes] | None = None) -> None:
    """SIGTERM the process group led by ``pid`` (server, JVM, Python workers); SIGKILL
    whatever is left after :data:`STOP_TIMEOUT` seconds."""
    for sig, wait in ((signal.SIGTERM, STOP_TIMEOUT), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if process is not None:
                process.poll()  # reap our own child (else it stays a zombie)
            if not _group_alive(pid):
                return
            time.sleep(0.2)


def _group_alive(pgid: int) -> bool:
    """Whether a live (not zombie) process of group ``pgid`` remains."""
    proc = Path("/proc")
    if not proc.is_dir():
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return False
        return True
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            return True
    return False


def _thrift_conf(settings: Settings, jdbc_port: int) -> dict[str, str]:
    """Spark settings for the Thrift server in the Connect driver (:func:`_serve`)."""
    from .spark import cached_jars, delta_jars

    delta = delta_jars(cached_jars(settings))
    if not delta:
        raise ServerError("--jdbc-port needs the Delta jars cached on this machine",
                          "run `python -m lakecep.jobs.spark fetch-jars` once")
    return {
        "spark.hadoop.hive.server2.thrift.bind.host": HOST,
        "spark.hadoop.hive.server2.thrift.port": str(jdbc_port),
        # The Thrift server opens its sessions in its own threads, whose class loader does
        # not see the jars Spark adds at start (spark.jars): without Delta on the JVM's own
        # class path, opening a session fails on ClassNotFoundException: DeltaCatalog.
        "spark.driver.extraClassPath": os.pathsep.join(delta),
        # Hive's execution metastore (used for nothing here) in memory: its default URL
        # (a Derby database under derby.system.home) fails when a JDBC session closes.
        "spark.hadoop.javax.jdo.option.ConnectionURL":
            "jdbc:derby:memory:lakecep_thrift;create=true",
    }


def _serve(values: dict[str, Any], port: int, jdbc_port: int | None = None) -> None:
    """The server process: lakecep's session with the Connect plugin (and the Thrift
    server when ``jdbc_port`` is given), until stopped."""
    from lakecep.config import load_settings

    from .spark import get_spark

    # A long-lived driver: the full JIT pays for its compile time (as `run --continuous`).
    settings = dataclasses.replace(load_settings(overrides=values), spark_quick_start=False)
    ready_file(settings).unlink(missing_ok=True)
    spark = get_spark("lakecep-connect", settings, extra_conf={
        "spark.plugins": PLUGIN,
        "spark.connect.grpc.binding.address": HOST,
        "spark.connect.grpc.binding.port": str(port),
        **(_thrift_conf(settings, jdbc_port) if jdbc_port else {}),
    })
    print(f"lakecep Connect server on sc://{HOST}:{port} (pid {os.getpid()}, "
          f"LAKECEP_HOME {settings.home})", flush=True)
    if jdbc_port:
        jvm = spark._jvm
        assert jvm is not None
        jvm.org.apache.spark.sql.hive.thriftserver.HiveThriftServer2.startWithContext(
            spark._jsparkSession.sqlContext())
        print(f"lakecep JDBC (Thrift) server on jdbc:hive2://{HOST}:{jdbc_port}/default",
              flush=True)
    partial = ready_file(settings).with_suffix(".tmp")
    partial.write_text(str(os.getpid()))
    partial.replace(ready_file(settings))
    while True:
        signal.pause()  # SIGTERM (lakecep serve --stop) ends the process group


if __name__ == "__main__":
    if len(sys.argv) not in (3, 4):
        sys.exit("usage: python -m lakecep.jobs.connect SETTINGS_JSON PORT [JDBC_PORT] "
                 "(started by `lakecep serve`)")
    _serve(json.loads(sys.argv[1]), int(sys.argv[2]),
           int(sys.argv[3]) if len(sys.argv) == 4 and int(sys.argv[3]) else None)
