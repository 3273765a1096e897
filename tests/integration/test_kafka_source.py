"""Bring your own events from a Kafka topic, against a real broker: Apache Kafka 4.1 in KRaft
single-node mode on 127.0.0.1 (tests/kafka_broker.py; its jars come from Maven Central
through infra/bootstrap.sh), started and stopped by this test.

The card example's 1,000 transactions are produced to a 3-partition topic by a Python
producer (kafka-python), keyed by card, with a malformed message and a tombstone; the
shipped ``cards_kafka`` source reads them with Spark's Kafka source (availableNow). Gold
must be exactly the planted frauds; bronze keeps each message's origin (topic, partition,
offset); a second run reads only what was produced since (the checkpoint's offsets), and a
re-sent transaction is a silver duplicate; ``lakecep status`` reconciles exactly (landed =
messages read)."""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from pathlib import Path

import pytest
from kafka_broker import kafka_broker, unavailable

from lakecep.cards import transactions
from lakecep.jobs import bronze, gold, silver
from lakecep.jobs.status import lake_status
from lakecep.jobs.tables import LakeTable
from lakecep.queries import QUERIES_DIR

pytestmark = pytest.mark.spark

CARDS = QUERIES_DIR / "examples" / "cards"
TOPIC = "cards"
PARTITIONS = 3


def produce(servers: str, messages: list[tuple[bytes, bytes | None]]) -> Counter[int]:
    """Send ``(key, value)`` messages and wait for every acknowledgement; the number of
    messages per partition."""
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=servers, acks="all", linger_ms=5,
                             client_id="lakecep-test")
    try:
        sent = [producer.send(TOPIC, key=key, value=value) for key, value in messages]
        producer.flush(timeout=60)
        return Counter(future.get(timeout=60).partition for future in sent)
    finally:
        producer.close(timeout=10)


def test_card_fraud_from_a_kafka_topic(spark, settings, tmp_path: Path) -> None:  # noqa: ANN001
    reason = unavailable()
    if reason is not None:
        pytest.skip(reason)
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic

    frame, planted = transactions(n=1000, seed=14)
    records = frame.to_dict(orient="records")
    sources = tmp_path / "sources"
    sources.mkdir()
    with kafka_broker(tmp_path / "kafka", partitions=PARTITIONS) as servers:
        shipped = (CARDS / "kafka" / "cards_kafka.toml").read_text()
        assert "127.0.0.1:9092" in shipped
        (sources / "cards_kafka.toml").write_text(shipped.replace("127.0.0.1:9092", servers))
        local = dataclasses.replace(settings, home=tmp_path / "lake", queries_dir=str(CARDS),
                                    sources_dir=str(sources))
        admin = KafkaAdminClient(bootstrap_servers=servers, client_id="lakecep-test")
        try:
            admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)], timeout_ms=60_000)
        finally:
            admin.close()
        messages = [(r["card"].encode(), json.dumps(r).encode()) for r in records]
        messages += [(b"bad", b"{not json"), (b"bad", None)]  # malformed; a tombstone
        per_partition = produce(servers, messages)
        assert sum(per_partition.values()) == 1002 and len(per_partition) == PARTITIONS

        first = bronze.run(spark, local)
        assert (first.input_rows, first.input_unit) == (1002, "messages")
        # Produced later: the first transaction again (a producer's retry sends a copy).
        again = records[0]
        per_partition += produce(servers, [(again["card"].encode(), json.dumps(again).encode())])
        second = bronze.run(spark, local)
        assert second.input_rows == 1  # the checkpoint's offsets: only the new message
    # The broker is gone: silver and gold read the lake only.
    silver.run(spark, local)
    gold.run(spark, local)

    origins = LakeTable(spark, local, "bronze.events").read().select(
        "source_file", "line_no", "raw", "parse_status").collect()
    assert len(origins) == 1003
    offsets: dict[str, list[int]] = {}
    for row in origins:
        offsets.setdefault(row.source_file, []).append(row.line_no)
    # Every message once, at its (topic, partition, offset): contiguous offsets per partition.
    assert {f: sorted(o) for f, o in offsets.items()} == {
        f"kafka://cards_kafka/{TOPIC}/{p}": list(range(n)) for p, n in per_partition.items()}
    assert Counter(r.parse_status for r in origins) == {"ok": 1001, "malformed_json": 1,
                                                        "empty_line": 1}

    events = LakeTable(spark, local, "silver.events").read()
    assert events.count() == 1000
    first_event = events.where(f"event_id = '{again['txn_id']}'").first()
    assert first_event.object_id == again["card"] and first_event.source_id == "card-kafka"
    assert float(first_event.attributes["amount"]) == again["amount"]
    dupes = LakeTable(spark, local, "silver.duplicates").read().collect()
    assert [d.event_id for d in dupes] == [again["txn_id"]]
    reasons = sorted(r.reason.split(":")[0] for r in
                     LakeTable(spark, local, "silver.quarantine").read().collect())
    assert reasons == ["empty_line", "malformed_json"]

    rows = LakeTable(spark, local, "gold.complex_events").read().collect()
    assert sorted((r.measures["probe_txn"], r.measures["big_txn"]) for r in rows) == planted
    assert len(planted) == 12

    status = lake_status(spark, local)
    assert status.counts["landing (lines)"] == 1003  # messages read
    assert status.ok, str(status)
