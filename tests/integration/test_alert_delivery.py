"""Alerts end to end (docs/alerts.md): bronze -> silver -> gold with ``rfid_abc`` marked
``alert = true`` (with a firing snapshot) and a real webhook on 127.0.0.1 that refuses its
first request.

gold.alerts must hold exactly the alerting query's complex events (rfid_transit's are not
alerts), each POSTed with its match id as Idempotency-Key; the refused one is retried by the
next delivery round; recording and delivering the same batch again (a replay) adds no alert
and makes no request. Snapshots wait until the watermark passes ``end + after``, then hold
the key's events of the window (a late one included, one outside it not); ``lakecep replay``
reproduces every match of the lake and re-reads each snapshot."""

from __future__ import annotations

import dataclasses
import json
import shutil
import time
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from lakecep_testing import cli_in_session
from webhook import Webhook

from lakecep.jobs import alerts, bronze, cli, gold, replay, silver, snapshots
from lakecep.jobs.tables import LakeTable
from lakecep.queries import QUERIES_DIR

pytestmark = pytest.mark.spark
T0 = datetime(2026, 1, 1)


def _read(n: int, tag: str, reader: str, hours: float) -> str:
    when = T0 + timedelta(hours=hours)
    return json.dumps({"event_id": f"e{n}", "object_id": tag, "event_type": "read",
                       "source_id": reader, "event_time": when.isoformat() + "Z"})


def test_alerts_are_recorded_once_and_delivered_with_retry(  # noqa: PLR0915
        spark, settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,  # noqa: ANN001
        capsys: pytest.CaptureFixture[str]) -> None:
    queries = tmp_path / "queries"
    queries.mkdir()
    shutil.copy(QUERIES_DIR / "rfid_transit.toml", queries)
    (queries / "rfid_abc.toml").write_text((QUERIES_DIR / "rfid_abc.toml").read_text()
                                           + 'alert = true\n[snapshot]\nbefore = "1 hour"\n'
                                           + 'after = "2 hours"\n')
    hook = Webhook()
    hook.answers = [503]
    local = dataclasses.replace(settings, home=tmp_path / "home", queries_dir=str(queries),
                                alert_webhook=hook.url)
    local.landing.mkdir(parents=True)

    try:
        reads = [_read(1, "t1", "A", 0), _read(2, "t1", "B", 1), _read(3, "t1", "C", 2),
                 _read(4, "t2", "A", 0), _read(5, "t2", "B", 1), _read(6, "t2", "C", 2),
                 _read(7, "t1", "D", 3)]
        (local.landing / "f1.jsonl").write_text("\n".join(reads) + "\n")
        for job in (bronze, silver, gold):
            job.run(spark, local)
        table = LakeTable(spark, local, "gold.alerts")
        first = {r.alert_id: r for r in table.read().collect()}
        # the newest event (3 h) has not passed end (2 h) + after (2 h): snapshots wait
        snapshot_table = LakeTable(spark, local, "gold.alert_snapshots")
        assert snapshot_table.exists() and snapshot_table.read().count() == 0
        events = LakeTable(spark, local, "gold.complex_events").read()
        abc = {r.match_id: r for r in events.where("query_id = 'rfid_abc'").collect()}
        assert len(abc) == 2 and set(first) == set(abc)      # no rfid_transit alert
        assert events.where("query_id = 'rfid_transit'").count() == 1
        assert [key for key, _ in hook.requests] == sorted(first)   # one POST per alert
        refused, accepted = hook.requests[0][0], hook.requests[1][0]
        assert {refused, accepted} == set(first)
        assert first[refused].delivered_time is None and first[refused].attempts == 1
        assert first[refused].last_error == "HTTP 503 Service Unavailable"
        assert first[accepted].delivered_time is not None and first[accepted].attempts == 1
        body = dict(hook.requests[1][1])
        assert body["measures"]["a_id"] == abc[accepted].measures["a_id"]
        assert body["partition_key"] == abc[accepted].partition_key

        # the next batch's delivery round retries the refused one (called directly: a
        # second pipeline run would only add a new alert, which the first round covers)
        now = datetime.now()
        assert alerts.deliver(spark, local, now) == (1, 0, 0)
        second = {r.alert_id: r for r in table.read().collect()}
        assert all(r.delivered_time is not None for r in second.values())
        assert second[refused].attempts == 2 and second[refused].last_error is None
        assert second[accepted].attempts == 1 and [k for k, _ in hook.requests[2:]] == [refused]

        # a replay of the batch: the same rows recorded again, nothing pending: no request
        rows = LakeTable(spark, local, "gold.complex_events").read()
        assert alerts.record(spark, local, rows, ["rfid_abc"], 0, now) == 0
        assert alerts.deliver(spark, local, now) == (0, 0, 0)
        assert len(hook.requests) == 3 and table.read().count() == 2

        # a second batch: a late t1 read inside t1's window (2.5 h), one outside it (4.5 h),
        # and a t3 read at 5 h that moves the watermark past both alerts' end + after
        (local.landing / "f2.jsonl").write_text("\n".join(
            [_read(8, "t1", "X", 2.5), _read(9, "t1", "X", 4.5), _read(10, "t3", "A", 5)])
            + "\n")
        for job in (bronze, silver, gold):
            job.run(spark, local)
        _check_snapshots(spark, local, abc)
        _check_replay(spark, local, monkeypatch, capsys)
    finally:
        hook.close()


def _check_snapshots(spark, local, abc: dict) -> None:  # noqa: ANN001
    """Both alerts' snapshots: the window [start - 1 h, end + 2 h] of their key, read at the
    second batch's silver version."""
    rows = LakeTable(spark, local, "gold.alert_snapshots").read().collect()
    by_tag = {abc[r.alert_id].partition_key: r.alert_id for r in rows}
    got = {tag: sorted((r.event_id, r.role) for r in rows if r.alert_id == alert)
           for tag, alert in by_tag.items()}
    assert got == {
        "t1": [("e1", "match"), ("e2", "match"), ("e3", "match"), ("e7", "after"),
               ("e8", "after")],                      # e9 (4.5 h) is past end + 2 h
        "t2": [("e4", "match"), ("e5", "match"), ("e6", "match")]}
    assert {r.snapshot_version for r in rows} == {LakeTable(spark, local, "silver.events")
                                                  .version()}
    assert len(rows) == len({(r.alert_id, r.event_id) for r in rows})


def _check_replay(spark, local, monkeypatch, capsys) -> None:  # noqa: ANN001
    """Every match of the lake replays to the same row; the alert's snapshot is read again
    at its version; the CLI prints the same as JSON (exit 0) or a table."""
    events = LakeTable(spark, local, "gold.complex_events").read().collect()
    results = replay.replay(spark, local, [r.match_id for r in events])
    assert len(results) == len(events) == 3   # rfid_abc on t1 and t2, rfid_transit on t1
    assert all(r.reproduced for r in results), [(r.match_id, r.differences, r.error)
                                                for r in results]
    t1 = next(r for r in results if r.query_id == "rfid_abc"
              and r.stored["partition_key"] == "t1")
    # context at the version that found it: e8 had not landed yet; the snapshot (read later
    # at its own version) has it, and reading that window again gives the same events
    assert [(e["event_id"], e["role"]) for e in t1.context] == [
        ("e1", "match"), ("e2", "match"), ("e3", "match"), ("e7", "after")]
    assert t1.snapshot is not None and t1.snapshot["reproduced"] is True
    assert [e["event_id"] for e in t1.snapshot["events"]] == ["e1", "e2", "e3", "e8", "e7"]
    transit = next(r for r in results if r.query_id == "rfid_transit")
    assert transit.snapshot is None and transit.stored["archive_event_ids"]

    cli_in_session(spark, monkeypatch)
    monkeypatch.setenv("LAKECEP_HOME", str(local.home))
    monkeypatch.setenv("LAKECEP_QUERIES_DIR", str(local.queries_dir))
    capsys.readouterr()
    assert cli.main(["replay", t1.match_id[:8], "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["reproduced"] is True and document["match_id"] == t1.match_id
    assert document["replayed"]["measures"] == document["stored"]["measures"]
    assert cli.main(["replay", t1.match_id, "--before", "0 seconds"]) == 0
    shown = capsys.readouterr().out
    assert "reproduced" in shown and "e8" in shown and "firing snapshot" in shown
    assert cli.main(["replay", "ffffffffffff"]) == 1
    assert "no complex event with match_id" in capsys.readouterr().err


def test_retention_shorter_than_the_replay_horizon_warns(spark, settings,  # noqa: ANN001
                                                         tmp_path: Path) -> None:
    """Silver's Delta retention against the replay horizon (gold's start and `lakecep
    replay`), and a replayed version older than a retention (docs/alerts.md, Retention)."""
    local = dataclasses.replace(settings, home=tmp_path)
    silver = LakeTable(spark, local, "silver.events").ensure()
    assert snapshots.retention_warnings(silver, {"q": timedelta(days=7)}) == []  # defaults
    spark.sql(f"ALTER TABLE delta.`{silver.path}` SET TBLPROPERTIES "
              "('delta.deletedFileRetentionDuration' = 'interval 1 seconds')")
    (line,) = snapshots.retention_warnings(silver, {"q": timedelta(days=7), "p": timedelta(1)})
    assert line.startswith("silver.events delta.deletedFileRetentionDuration = 'interval 1 "
                           "seconds' is shorter than the replay horizon 7 days of q:")
    assert snapshots.retention_warnings(silver, {"q": timedelta(seconds=1)}) == []
    one = replay.Replay("m", "q", {})
    time.sleep(2)   # version 0 is now older than the 1 s deleted-file retention
    replay._retention(spark, silver, {"q": timedelta(seconds=1)}, {("q", 0): [one]})  # noqa: SLF001
    assert len(one.warnings) == 1 and one.warnings[0].startswith(
        "silver.events version 0 was committed ")
    assert "longer than delta.deletedFileRetentionDuration = 'interval 1 seconds'" in \
        one.warnings[0]
