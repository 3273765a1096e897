"""Webhook delivery (lakecep.alerts) against a real HTTP server on 127.0.0.1, and the
``alert`` key of query files."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest
from webhook import Webhook

from lakecep.alerts import Delivery, body, check_url, post
from lakecep.queries import QueryDefinitionError, load_query


@pytest.fixture()
def webhook() -> Iterator[Webhook]:
    hook = Webhook()
    yield hook
    hook.close()


def _alert(n: int) -> dict:
    return {"alert_id": f"m{n}", "query_id": "q", "query_version": "1",
            "rule_hash": "0123456789abcdef", "partition_key": "t1",
            "start_time": datetime(2026, 1, 1, n), "end_time": None,
            "measures": {"a_id": f"e{n}"}, "batch_id": 3, "attempts": 0}


def test_each_alert_is_one_post_with_its_idempotency_key(webhook: Webhook) -> None:
    webhook.answers = [200, 503]
    results = post(webhook.url, [_alert(1), _alert(2), _alert(3)], timeout=5)
    assert results == [Delivery("m1", True), Delivery("m2", False, "HTTP 503 Service Unavailable"),
                       Delivery("m3", True)]
    assert [key for key, _ in webhook.requests] == ["m1", "m2", "m3"]
    assert webhook.requests[0][1] == {
        "alert_id": "m1", "query_id": "q", "query_version": "1",
        "rule_hash": "0123456789abcdef", "partition_key": "t1",
        "start_time": "2026-01-01T01:00:00", "end_time": None, "measures": {"a_id": "e1"},
        "batch_id": 3}                      # gold.alerts bookkeeping (attempts) is not sent
    assert body(_alert(1)) == body(dict(reversed(list(_alert(1).items()))))  # stable bytes


def test_an_unreachable_webhook_stops_the_round() -> None:
    with socket.socket() as probe:              # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    results = post(f"http://127.0.0.1:{port}/x", [_alert(1), _alert(2)], timeout=2)
    assert len(results) == 1 and not results[0].ok     # m2 is left for the next batch
    assert results[0].error is not None and "refused" in results[0].error.lower()


@pytest.mark.parametrize("url", ["127.0.0.1:9000", "ftp://host/x", "http://", "hooks"])
def test_webhook_must_be_an_http_url(url: str) -> None:
    with pytest.raises(ValueError, match="is not an http\\(s\\) URL"):
        check_url(url)
    check_url("https://alerts.example.com/hook")


def test_alert_key_of_query_files(tmp_path: Path) -> None:
    path = tmp_path / "q.toml"
    query = ('id = "q"\nquery = "SELECT * FROM events MATCH_RECOGNIZE (PARTITION BY object_id '
             'ORDER BY event_time MEASURES A.event_id AS a PATTERN (A) DEFINE A AS true)"\n')
    path.write_text(query)
    assert load_query(path).alert is False
    path.write_text(query + "alert = true\n")
    assert load_query(path).alert is True
    path.write_text(query + 'alert = "yes"\n')
    with pytest.raises(QueryDefinitionError, match="alert must be true or false"):
        load_query(path)
    path.write_text('id = "w"\nkind = "window"\nattribute = "x"\naggregates = ["avg"]\n'
                    'window = "1 hour"\nalert = true\n')
    with pytest.raises(QueryDefinitionError, match="not kind 'window'"):
        load_query(path)
