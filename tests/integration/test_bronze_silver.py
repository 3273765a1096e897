"""bronze and silver on real Spark + Delta: nothing dropped, duplicates and bad rows
accounted for, counts reconcile, micro-batch replays are idempotent."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from lakecep.jobs import bronze, silver
from lakecep.jobs.status import count_landed_lines, lake_status
from lakecep.jobs.tables import LakeTable

pytestmark = pytest.mark.spark


def event(n: int, reader: str = "A", **overrides: object) -> str:
    record = {
        "event_id": f"ev-{n}",
        "object_id": f"tag-{n % 3}",
        "event_type": "read",
        "source_id": reader,
        "event_time": f"2026-01-01T0{n % 10}:00:00Z",
        "attributes": {"rssi": -50.5, "antenna": 2},
    }
    record.update(overrides)
    return json.dumps(record)


@pytest.fixture()
def local(settings, tmp_path: Path):  # noqa: ANN001, ANN201
    """Settings with a private LAKECEP_HOME for one test."""
    return dataclasses.replace(settings, home=tmp_path)


def land(local, name: str, lines: list[str], trailing_newline: bool = True) -> None:  # noqa: ANN001
    local.landing.mkdir(parents=True, exist_ok=True)
    text = "\n".join(lines) + ("\n" if trailing_newline else "")
    (local.landing / name).write_text(text)


def table_rows(spark, local, name: str) -> list:  # noqa: ANN001
    return LakeTable(spark, local, name).read().collect()


def test_bronze_keeps_every_line_with_status(spark, local) -> None:  # noqa: ANN001
    land(local, "a.jsonl", [event(1), "", "{not json", "x" * 300], trailing_newline=False)
    land(local, "b.jsonl", [event(2)])
    (local.landing / "empty.jsonl").write_text("")
    local = dataclasses.replace(local, max_line_bytes=200)

    bronze.run(spark, local)

    rows = {(Path(r.source_file).name, r.line_no): r
            for r in table_rows(spark, local, "bronze.events")}
    assert len(rows) == count_landed_lines(local.landing) == 5
    assert rows[("a.jsonl", 1)].parse_status == "ok"
    assert rows[("a.jsonl", 2)].parse_status == "empty_line"
    assert rows[("a.jsonl", 3)].parse_status == "malformed_json"
    assert rows[("a.jsonl", 4)].parse_status == "oversized"
    assert rows[("a.jsonl", 4)].byte_length == 300
    assert rows[("b.jsonl", 1)].raw == event(2)
    # A second run finds nothing new and writes nothing.
    bronze.run(spark, local)
    assert len(table_rows(spark, local, "bronze.events")) == 5


def added_files(local, name: str) -> list[int]:  # noqa: ANN001
    """How many data files each commit of a lake table added, oldest first."""
    log = Path(local.table_path(name)) / "_delta_log"
    return [sum('"add"' in line for line in f.read_text().splitlines())
            for f in sorted(log.glob("*.json"))]


# large: the path of a batch with more than BROADCAST_IDS valid rows (not held, each table
# computed once), which must write the same rows
@pytest.mark.parametrize("large", [False, True], ids=["small", "large"])
def test_silver_splits_dedupes_quarantines_and_reconciles(spark, local, large, monkeypatch) -> None:  # noqa: ANN001, E501
    if large:
        monkeypatch.setattr(silver, "BROADCAST_IDS", 0)
    land(local, "f1.jsonl", [
        event(1), event(2, "B"), event(1),                 # in-batch duplicate of ev-1
        event(3, event_time="yesterday"),                  # invalid value
        json.dumps({"event_id": "ev-4", "object_id": "t"}),  # missing fields
        "[1, 2]",                                          # not an object
        "{broken",                                         # malformed
    ])
    bronze.run(spark, local)
    silver.run(spark, local)
    land(local, "f2.jsonl", [event(2, "B"), event(5, "C")])  # cross-batch duplicate + new
    bronze.run(spark, local)
    silver.run(spark, local)

    kept = {r.event_id: r for r in table_rows(spark, local, "silver.events")}
    assert sorted(kept) == ["ev-1", "ev-2", "ev-5"]
    assert (Path(kept["ev-1"].source_file).name, kept["ev-1"].line_no) == ("f1.jsonl", 1)
    assert kept["ev-2"].attributes == {"rssi": "-50.5", "antenna": "2"}
    assert kept["ev-5"].source_id == "C"

    dups = sorted((Path(r.source_file).name, r.line_no, r.event_id)
                  for r in table_rows(spark, local, "silver.duplicates"))
    assert dups == [("f1.jsonl", 3, "ev-1"), ("f2.jsonl", 1, "ev-2")]

    reasons = {r.line_no: r.reason.split(":")[0]
               for r in table_rows(spark, local, "silver.quarantine")}
    assert reasons == {4: "invalid_value", 5: "missing_field", 6: "not_an_object",
                       7: "malformed_json"}

    status = lake_status(spark, local)
    assert status.counts["bronze.events"] == 9
    assert status.ok, str(status)
    if not large:  # a held batch is written in one file, not one per shuffle partition
        assert added_files(local, "silver.events")[1:] == [1, 1]


def test_silver_batch_replay_is_idempotent(spark, local, monkeypatch) -> None:  # noqa: ANN001
    land(local, "f1.jsonl", [event(1), event(1), "{bad", event(2)])
    bronze.run(spark, local)
    batch = LakeTable(spark, local, "bronze.events").read()

    def counts() -> tuple[int, int, int]:
        return tuple(len(table_rows(spark, local, t))  # type: ignore[return-value]
                     for t in ("silver.events", "silver.duplicates", "silver.quarantine"))

    silver.process_batch(spark, local, batch, 0, "test-writer")
    first = counts()
    silver.process_batch(spark, local, batch, 0, "test-writer")   # replay of batch 0
    assert counts() == first == (2, 1, 1)
    # Same rows under a new batch id (e.g. all silver writes lost but silver kept):
    # rows already kept are recognised by (source_file, line_no), not counted again.
    silver.process_batch(spark, local, batch, 1, "test-writer")
    assert counts()[0] == 2
    # The same with silver's rows looked up inside the held plan (a batch of more than
    # BROADCAST_KEPT valid rows) instead of fetched first: nothing new is kept.
    monkeypatch.setattr(silver, "BROADCAST_KEPT", 0)
    silver.process_batch(spark, local, batch, 2, "test-writer")
    assert counts()[0] == 2


def test_quarantine_gate_fails_the_batch_before_writing(spark, local) -> None:  # noqa: ANN001
    # A user's own events without a source file: every line breaks the RFID contract.
    rows = [json.dumps({"txn_id": f"t{n}", "card": "4000", "amount": n}) for n in range(120)]
    land(local, "theirs.jsonl", [*rows, event(1)])
    bronze.run(spark, local)
    with pytest.raises(silver.QuarantineGateError) as stopped:
        silver.run(spark, local)
    first, _, rest = str(stopped.value).partition("\n")
    assert first.startswith("silver quarantine gate: batch 0: source 'events': 120 of 121 "
                            "rows quarantined (99.2% > max_quarantine_ratio 5.0% (setting))")
    assert "commonest reasons: unknown_field (120)" in first
    assert "nothing of this batch was written" in rest
    # Nothing written, nothing lost: bronze keeps the lines, the batch runs again later.
    for name in ("silver.events", "silver.quarantine", "silver.duplicates"):
        table = LakeTable(spark, local, name)
        assert not table.exists() or not table.read().count(), name
    # `warn` writes the batch (and logs the breach).
    silver.run(spark, dataclasses.replace(local, quarantine_gate="warn"))
    assert len(table_rows(spark, local, "silver.quarantine")) == 120
    assert len(table_rows(spark, local, "silver.events")) == 1
    status = lake_status(spark, local)
    assert status.counts["bronze.events"] == 121 and status.ok, str(status)


def test_silver_batch_without_valid_rows_only_quarantines(spark, local) -> None:  # noqa: ANN001
    # fewer rows than quarantine_gate_min_rows: the gate does not judge the batch
    land(local, "bad.jsonl", ["{broken", "[1, 2]"])
    bronze.run(spark, local)
    silver.run(spark, local)
    reasons = sorted(r.reason.split(":")[0] for r in table_rows(spark, local, "silver.quarantine"))
    assert reasons == ["malformed_json", "not_an_object"]
    assert not table_rows(spark, local, "silver.events")
    assert not table_rows(spark, local, "silver.duplicates")
    status = lake_status(spark, local)
    assert status.counts["bronze.events"] == 2 and status.ok, str(status)
