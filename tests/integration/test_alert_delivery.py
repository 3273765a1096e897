"""Alerts end to end (docs/alerts.md): bronze -> silver -> gold with ``rfid_abc`` marked
``alert = true`` and a real webhook on 127.0.0.1 that refuses its first request.

gold.alerts must hold exactly the alerting query's complex events (rfid_transit's are not
alerts), each POSTed with its match id as Idempotency-Key; the refused one is retried by the
next delivery round; recording and delivering the same batch again (a replay) adds no alert
and makes no request."""

from __future__ import annotations

import dataclasses
import json
import shutil
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from webhook import Webhook

from lakecep.jobs import alerts, bronze, gold, silver
from lakecep.jobs.tables import LakeTable
from lakecep.queries import QUERIES_DIR

pytestmark = pytest.mark.spark
T0 = datetime(2026, 1, 1)


def _read(n: int, tag: str, reader: str, hours: float) -> str:
    when = T0 + timedelta(hours=hours)
    return json.dumps({"event_id": f"e{n}", "object_id": tag, "event_type": "read",
                       "source_id": reader, "event_time": when.isoformat() + "Z"})


def test_alerts_are_recorded_once_and_delivered_with_retry(spark, settings,  # noqa: ANN001
                                                          tmp_path: Path) -> None:
    queries = tmp_path / "queries"
    queries.mkdir()
    shutil.copy(QUERIES_DIR / "rfid_transit.toml", queries)
    (queries / "rfid_abc.toml").write_text((QUERIES_DIR / "rfid_abc.toml").read_text()
                                           + "alert = true\n")
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
    finally:
        hook.close()
