"""Webhook delivery of alerts (seed 004's immediate outputs; docs/alerts.md). No Spark.

One HTTP POST per alert, JSON body, header ``Idempotency-Key: <alert_id>``: the gold job
retries an alert until the webhook answers 2xx, so after a crash between a request and its
record the same alert can arrive again with the same key (at least once, deduplicated by
the key on the receiving side). The first connection failure (refused, timeout) stops the
round: the other alerts stay pending for the next batch instead of waiting out a timeout
each.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any
from urllib.parse import urlsplit

#: The fields of a gold.alerts row that a webhook receives.
FIELDS = ("alert_id", "query_id", "query_version", "rule_hash", "partition_key", "start_time",
          "end_time", "measures", "batch_id")


@dataclass(frozen=True)
class Delivery:
    alert_id: str
    ok: bool
    error: str | None = None


def check_url(url: str) -> None:
    """``alert_webhook`` must be an http(s) URL with a host (ValueError naming it)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"alert_webhook = {url!r} is not an http(s) URL with a host "
                         "(e.g. http://127.0.0.1:9000/alerts); empty turns the webhook off")


def body(alert: Mapping[str, Any]) -> bytes:
    """The JSON document POSTed for one alert (times as ISO 8601 text)."""
    def plain(value: Any) -> Any:
        return value.isoformat() if isinstance(value, datetime | date) else value

    return json.dumps({name: plain(alert.get(name)) for name in FIELDS},
                      sort_keys=True).encode()


def post(url: str, alerts: Sequence[Mapping[str, Any]], timeout: float) -> list[Delivery]:
    """POST every alert in order; one :class:`Delivery` per alert attempted (alerts after a
    connection failure are not attempted and get none)."""
    out: list[Delivery] = []
    for alert in alerts:
        alert_id = str(alert["alert_id"])
        request = urllib.request.Request(
            url, data=body(alert), method="POST",
            headers={"Content-Type": "application/json", "Idempotency-Key": alert_id})
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310
                out.append(Delivery(alert_id, 200 <= response.status < 300))
        except urllib.error.HTTPError as exc:   # the webhook answered: try the next one
            out.append(Delivery(alert_id, False, f"HTTP {exc.code} {exc.reason}"))
        except (urllib.error.URLError, OSError) as exc:   # unreachable: stop this round
            reason = getattr(exc, "reason", exc)
            out.append(Delivery(alert_id, False, f"{type(exc).__name__}: {reason}"))
            break
    return out
