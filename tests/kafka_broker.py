"""A real Apache Kafka broker for tests: KRaft, one node that is broker and controller,
listening on 127.0.0.1 only, started from the jars ``infra/bootstrap.sh`` fetched from Maven
Central (``infra/kafka-broker.pom.xml``) and stopped by its PID.

    reason = unavailable()          # None, or why no broker can be started here
    with kafka_broker(workdir) as servers:   # "127.0.0.1:<port>"
        ...
"""

from __future__ import annotations

import base64
import os
import shutil
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

BROKER_DIR = Path(os.environ.get("LAKECEP_KAFKA_BROKER_DIR",
                                 Path.home() / ".cache/lakecep/kafka-broker"))
#: The broker's main class and Kafka's storage tool (both in kafka_2.13 for Kafka 4.x).
MAIN = "kafka.Kafka"
STORAGE_TOOL = "kafka.tools.StorageTool"
JVM_OPTIONS = ["-Xms128m", "-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
               "-Djava.awt.headless=true"]
START_TIMEOUT = 180.0


def unavailable() -> str | None:
    """Why no broker can be started here (None: it can)."""
    if shutil.which("java") is None:
        return "no java on PATH (infra/bootstrap.sh installs openjdk-17-jre-headless)"
    if not (BROKER_DIR / ".complete").is_file() or not list(BROKER_DIR.glob("kafka_2.13-*.jar")):
        return (f"no Kafka broker jars in {BROKER_DIR}: run infra/bootstrap.sh (its step "
                "'Kafka broker jars' fetches org.apache.kafka:kafka_2.13 from Maven Central "
                "with mvn -f infra/kafka-broker.pom.xml)")
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _java(*args: str) -> list[str]:
    return ["java", *JVM_OPTIONS, "-cp", f"{BROKER_DIR}/*", *args]


@contextmanager
def kafka_broker(workdir: Path, partitions: int = 3) -> Iterator[str]:
    """Format a fresh KRaft log folder under ``workdir``, start the broker, wait until it
    answers, yield its ``host:port``; stop it (SIGTERM to its PID, SIGKILL after 30 s)."""
    reason = unavailable()
    if reason:
        raise RuntimeError(reason)
    workdir.mkdir(parents=True, exist_ok=True)
    port, controller = _free_port(), _free_port()
    config = workdir / "server.properties"
    config.write_text("\n".join([
        "process.roles=broker,controller",
        "node.id=1",
        f"controller.quorum.voters=1@127.0.0.1:{controller}",
        f"listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller}",
        f"advertised.listeners=PLAINTEXT://127.0.0.1:{port}",
        "controller.listener.names=CONTROLLER",
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "inter.broker.listener.name=PLAINTEXT",
        f"log.dirs={workdir / 'data'}",
        f"num.partitions={partitions}",
        "offsets.topic.replication.factor=1",
        "offsets.topic.num.partitions=1",
        "transaction.state.log.replication.factor=1",
        "transaction.state.log.min.isr=1",
        "share.coordinator.state.topic.replication.factor=1",
        "share.coordinator.state.topic.min.isr=1",
        "group.initial.rebalance.delay.ms=0",
        "auto.create.topics.enable=false",
        "",
    ]))
    log4j = workdir / "log4j2.properties"
    log = workdir / "broker.log"
    log4j.write_text("\n".join([
        "rootLogger.level=INFO", "rootLogger.appenderRef.file.ref=file",
        "appender.file.type=File", "appender.file.name=file", f"appender.file.fileName={log}",
        "appender.file.layout.type=PatternLayout",
        "appender.file.layout.pattern=[%d] %p %m (%c)%n", ""]))
    cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
    logging = f"-Dlog4j2.configurationFile=file:{log4j}"
    formatted = subprocess.run(
        _java(logging, STORAGE_TOOL, "format", "-t", cluster_id, "-c", str(config)),
        capture_output=True, text=True, timeout=300)
    if formatted.returncode != 0:
        raise RuntimeError(f"kafka storage format failed:\n{formatted.stdout[-2000:]}"
                           f"\n{formatted.stderr[-2000:]}")
    out = (workdir / "broker.out").open("w")
    process = subprocess.Popen(_java(logging, MAIN, str(config)), stdout=out,
                               stderr=subprocess.STDOUT, start_new_session=True)
    try:
        _wait_until_ready(process, port, log)
        yield f"127.0.0.1:{port}"
    finally:
        _stop(process)
        out.close()


def _wait_until_ready(process: subprocess.Popen, port: int, log: Path) -> None:
    """Until the broker's log says it started (and its port accepts connections)."""
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the Kafka broker exited with {process.returncode}:\n"
                               f"{_tail(log)}")
        started = log.is_file() and "Kafka Server started" in log.read_text(errors="replace")
        if started:
            with socket.socket() as s:
                s.settimeout(2)
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    return
        time.sleep(0.5)
    raise RuntimeError(f"the Kafka broker did not start within {START_TIMEOUT:.0f}s:\n"
                       f"{_tail(log)}")


def _stop(process: subprocess.Popen) -> None:
    if process.poll() is not None:
        return
    os.kill(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=30)


def _tail(log: Path, lines: int = 30) -> str:
    if not log.is_file():
        return "(no broker log)"
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
