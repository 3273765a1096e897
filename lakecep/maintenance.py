"""How far back the lake's Delta tables must keep versions: the time-travel horizon each
configured query needs, and the check of the configured retention against it. No Spark.

The maintain job (``lakecep run maintain``, :mod:`lakecep.jobs.maintain`) sets every table's
``delta.deletedFileRetentionDuration`` / ``delta.logRetentionDuration`` from the settings
``vacuum_retention`` / ``log_retention`` and VACUUMs with that retention; a version older
than either cannot be read any more. :func:`needs` lists who reads old versions and for how
long (wall-clock age of the version, not event time):

- ``pattern`` and ``live_archive`` queries: ``lakecep replay`` re-runs a match on silver as
  of its ``history_version`` for the query's replay horizon (``[snapshot] horizon``, else
  7 days). A live-archive match's access range RA (``[archive] before``) is event time
  inside that same version (silver is append-only), so it does not lengthen the horizon;
- chained rules (``inputs``): the same horizon, on ``gold.complex_events`` (their
  ``history_version`` is gold's);
- ``acquisition`` queries: a plan reads silver at a pinned version for up to its window
  plus the plan latency (``latency_bound``, else one ``step_delay`` per step);
- ``window`` and ``uncertain`` queries read only the newest version (windows carry their
  state in ``gold.window_state``): no horizon of their own;
- the pipeline: a stream reads the versions after its checkpoint, and a batch reads the
  version it pinned; ``max_stream_lag`` bounds how far behind they may be, on every table.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from lakecep.config import ConfigError, Settings, duration_seconds
from lakecep.queries import AcquisitionQuery, LiveArchiveQuery, PatternQuery, SnapshotSpec

#: The replay horizon of a query without ``[snapshot]`` (``SnapshotSpec``'s default).
DEFAULT_REPLAY_HORIZON = SnapshotSpec(timedelta(0)).horizon
#: Who a lake-wide need belongs to.
PIPELINE = "(pipeline)"


class RetentionError(ConfigError):
    """A configured retention is shorter than a time-travel horizon (one line: what, who
    needs how long, how to fix)."""


@dataclass(frozen=True)
class Need:
    """``who`` reads versions of ``table`` up to ``seconds`` old, because ``why``."""

    table: str
    who: str
    seconds: float
    why: str


def duration_text(seconds: float) -> str:
    """``604800`` -> ``7 days`` (the largest unit that divides it; seconds otherwise)."""
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds >= size and seconds % size == 0:
            n = int(seconds // size)
            return f"{n} {unit}{'s' if n != 1 else ''}"
    return f"{seconds:g} seconds"


def replay_horizon(query: Any) -> timedelta:
    """How long ``lakecep replay`` must work for ``query``'s matches (its ``[snapshot]
    horizon``, else the default)."""
    snapshot = getattr(query, "snapshot", None)
    return snapshot.horizon if snapshot is not None else DEFAULT_REPLAY_HORIZON


def query_needs(query: Any) -> list[Need]:
    """The time travel one query needs (empty: it reads only the newest version)."""
    if isinstance(query, AcquisitionQuery):
        window = query.window_seconds
        if query.latency_bound is not None:
            latency, how = query.latency_bound.total_seconds(), "latency_bound"
        else:
            steps = len(query.parsed().children)
            latency = steps * query.step_delay.total_seconds()
            how = f"{steps} steps x step_delay"
        return [Need("silver.events", query.id, window + latency,
                     f"acquisition plan reads a pinned version for window "
                     f"{duration_text(window)} + plan latency {duration_text(latency)} "
                     f"({how})")]
    if isinstance(query, PatternQuery | LiveArchiveQuery):
        horizon = replay_horizon(query).total_seconds()
        source = "snapshot horizon" if getattr(query, "snapshot", None) else "default"
        why = f"`lakecep replay` horizon {duration_text(horizon)} ({source})"
        if isinstance(query, LiveArchiveQuery):
            why += (f"; its RA ({duration_text(query.before.total_seconds())} before) is "
                    "read inside the replayed version")
        inputs = getattr(query, "inputs", ())
        table = "gold.complex_events" if inputs else "silver.events"
        return [Need(table, query.id, horizon, why)]
    return []  # window, uncertain: the newest version only


def needs(queries: Iterable[Any], settings: Settings) -> list[Need]:
    """Every query's needs plus the pipeline's ``max_stream_lag`` (on every table)."""
    lag = duration_seconds(settings.max_stream_lag)
    out = [Need("*", PIPELINE, lag, f"max_stream_lag = {settings.max_stream_lag!r}: "
                "streams and running batches read versions up to that old")]
    for query in queries:
        out.extend(query_needs(query))
    return out


def longest(found: Sequence[Need], table: str) -> Need | None:
    """The longest need on ``table`` (a ``"*"`` need applies to every table)."""
    mine = [n for n in found if n.table in (table, "*")]
    return max(mine, key=lambda n: n.seconds) if mine else None


def check(settings: Settings, found: Sequence[Need]) -> dict[str, float]:
    """The configured retentions in seconds (``vacuum_retention``, ``log_retention``), or a
    :class:`RetentionError` when one is shorter than the longest need, or the log retention
    is shorter than the file retention."""
    configured = {"vacuum_retention": settings.vacuum_retention,
                  "log_retention": settings.log_retention}
    seconds = {k: duration_seconds(v) for k, v in configured.items()}
    top = max(found, key=lambda n: n.seconds, default=None)
    for key, have in seconds.items():
        if top is not None and have < top.seconds:
            where = "every table" if top.table == "*" else top.table
            fix = ("or shorten the query's [snapshot] horizon / window"
                   if top.who != PIPELINE else "or lower max_stream_lag")
            raise RetentionError(
                f"{key} = {configured[key]!r} is shorter than the time travel "
                f"{top.who} needs on {where}: {duration_text(top.seconds)} ({top.why}); "
                f"set {key} to at least '{duration_text(top.seconds)}' "
                f"(lakecep.toml, LAKECEP_{key.upper()} or --set {key}=...) {fix}")
    if seconds["log_retention"] < seconds["vacuum_retention"]:
        raise RetentionError(
            f"log_retention = {settings.log_retention!r} is shorter than vacuum_retention = "
            f"{settings.vacuum_retention!r}: versions would vanish from the log while their "
            "files are kept; set log_retention to at least vacuum_retention")
    return seconds


def table_properties(retention: Mapping[str, float]) -> dict[str, str]:
    """The Delta table properties of the configured retentions."""
    return {"delta.deletedFileRetentionDuration":
            f"interval {duration_text(int(retention['vacuum_retention']))}",
            "delta.logRetentionDuration":
            f"interval {duration_text(int(retention['log_retention']))}"}
