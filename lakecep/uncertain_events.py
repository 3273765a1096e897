"""Seeded generator of events with uncertain timestamps (seed 001) and their exact truth.

The scenario behind ``queries/examples/uncertain_inspection.toml``: tagged parcels in a
warehouse. Per parcel (``object_id``) the true story is: registered at the gate (``R``),
received (``A``) 1-4 minutes later, inspected twice (``B`` and ``C``, any order, each 1-5
minutes after receiving), shipped (``D``) 1-4 minutes after the later inspection. Readers
log time coarsely: each event reports an interval ``[time_lower, time_upper]`` of whole
minutes holding its true minute (up to ``max_width`` minutes on each side) and, for
``pmf_share`` of the events, a pmf over those minutes (random weights), else none (uniform).
Some parcels break the story so that not every parcel matches: a slow parcel (``D`` more
than 30 minutes after ``A``), one with a single inspection, and one read twice at ``C`` (two
characteristic sequences). The data abide by the constraint ``PRIOR(R, A)`` (true ``A``
times are after ``R``).

:func:`truth` computes the exact probability of every characteristic sequence of the
example query -- ``A PERMUTE(B, C) D`` WITHIN 30 minutes with ``PRIOR(R, A)`` -- by its own
enumeration of possible worlds (written for this query only, independent of
``cep_core.uncertain``): every event's points, the ``A`` events conditioned on the ``R``
events as the paper defines it (p_a(t)·[t >= max R time] / normaliser), and every
assignment of distinct events to ``A, B, C, D``.
"""

from __future__ import annotations

import itertools
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from lakecep.generate import write_atomic, write_lines

__all__ = ["WINDOW_MINUTES", "parcels", "truth", "write_landing"]

WINDOW_MINUTES = 30
_START = datetime(2026, 5, 4, 8, 0, tzinfo=UTC)


def parcels(count: int = 40, *, seed: int = 11, max_width: int = 1, pmf_share: float = 0.5,
            start: datetime = _START) -> pd.DataFrame:
    """One row per reported event: ``event_id, object_id, event_type, source_id,
    event_time`` (= ``time_lower``), ``time_lower``, ``time_upper``, ``pmf`` (list or None),
    ``true_time``. Minutes are whole; intervals hold at most ``2 * max_width + 1`` points."""
    if count < 1 or max_width < 0 or not 0.0 <= pmf_share <= 1.0:
        raise ValueError("count >= 1, max_width >= 0 and 0 <= pmf_share <= 1 are required")
    rng = np.random.default_rng(seed)
    base = pd.Timestamp(start).tz_convert(None)
    rows: list[dict[str, Any]] = []
    for p in range(count):
        story = p % 10  # 0: slow, 1: one inspection, 2: read twice at C, else normal
        t0 = int(rng.integers(0, 600))
        r = t0
        a = r + int(rng.integers(1, 5))
        b, c = a + int(rng.integers(1, 6)), a + int(rng.integers(1, 6))
        d = max(b, c) + int(rng.integers(1, 5)) + (WINDOW_MINUTES if story == 0 else 0)
        events = [("R", r), ("A", a), ("B", b), ("C", c), ("D", d)]
        if story == 1:
            events.remove(("C", c))
        if story == 2:
            events.append(("C", c + int(rng.integers(0, 3))))
        for n, (kind, minute) in enumerate(events):
            lo = minute - int(rng.integers(0, max_width + 1))
            hi = minute + int(rng.integers(0, max_width + 1))
            pmf = None
            if rng.random() < pmf_share and hi > lo:
                weights = rng.integers(1, 5, size=hi - lo + 1).astype(float)
                pmf = (weights / weights.sum()).tolist()
            rows.append({
                "event_id": f"u{seed}-{p}-{n}", "object_id": f"parcel-{p:04d}",
                "event_type": kind, "source_id": f"reader-{kind}",
                "time_lower": base + pd.Timedelta(minutes=lo),
                "time_upper": base + pd.Timedelta(minutes=hi), "pmf": pmf,
                "true_time": base + pd.Timedelta(minutes=minute),
            })
    frame = pd.DataFrame(rows)
    frame.insert(4, "event_time", frame["time_lower"])
    return frame


def _points(row: pd.Series) -> list[tuple[int, float]]:
    lo = int(row["time_lower"].value // 60_000_000_000)
    hi = int(row["time_upper"].value // 60_000_000_000)
    n = hi - lo + 1
    pmf = row["pmf"] if row["pmf"] is not None else [1.0 / n] * n
    return list(zip(range(lo, hi + 1), pmf, strict=True))


def truth(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """Every characteristic sequence of the example query with probability > 0:
    ``{"object_id", "A", "B", "C", "D" (event ids), "probability"}``."""
    out = []
    for obj, events in frame.groupby("object_id", sort=True):
        events = events.reset_index(drop=True)
        kinds = events["event_type"].tolist()
        ids = events["event_id"].tolist()
        points = [_points(row) for _, row in events.iterrows()]
        registered = [i for i, k in enumerate(kinds) if k == "R"]
        by_kind = {k: [i for i, kk in enumerate(kinds) if kk == k] for k in "ABCD"}
        probability: dict[tuple[int, ...], float] = {}
        for world in itertools.product(*points):
            times = [t for t, _ in world]
            weight = 1.0
            for i, (t, p) in enumerate(world):
                if kinds[i] == "A" and registered:  # PRIOR(R, A): A conditioned on R
                    floor = max(times[j] for j in registered)
                    norm = sum(q for s, q in points[i] if s >= floor)
                    weight *= p / norm if t >= floor and norm > 0 else 0.0
                else:
                    weight *= p
            if weight == 0.0:
                continue
            for a, b, c, d in itertools.product(*(by_kind[k] for k in "ABCD")):
                if len({a, b, c, d}) < 4:
                    continue
                if (times[a] < min(times[b], times[c]) and max(times[b], times[c]) < times[d]
                        and times[d] - times[a] <= WINDOW_MINUTES):
                    key = (a, b, c, d)
                    probability[key] = probability.get(key, 0.0) + weight
        for (a, b, c, d), p in sorted(probability.items()):
            out.append({"object_id": obj, "A": ids[a], "B": ids[b], "C": ids[c], "D": ids[d],
                        "probability": p})
    return out


def write_landing(frame: pd.DataFrame, landing_dir: Path, truth_dir: Path, *,
                  lines_per_file: int = 1000, overwrite: bool = False) -> list[Path]:
    """Landing JSON lines in the event contract (with ``time_lower``, ``time_upper`` and
    ``pmf`` when given) and ``uncertain_truth.json`` in ``truth_dir``. Refuses to mix
    with existing ``events-*.jsonl`` files unless ``overwrite``."""
    def stamp(value: pd.Timestamp) -> str:
        return value.strftime("%Y-%m-%dT%H:%M:%S.000Z")

    lines = []
    for row in frame.itertuples(index=False):
        event = {"event_id": row.event_id, "object_id": row.object_id,
                 "event_type": row.event_type, "source_id": row.source_id,
                 "event_time": stamp(row.event_time), "time_lower": stamp(row.time_lower),
                 "time_upper": stamp(row.time_upper)}
        if row.pmf is not None:
            event["pmf"] = row.pmf
        lines.append(json.dumps(event, separators=(",", ":")))
    files = write_lines(lines, landing_dir, lines_per_file=lines_per_file, overwrite=overwrite)
    truth_dir = Path(truth_dir)
    truth_dir.mkdir(parents=True, exist_ok=True)
    write_atomic(truth_dir / "uncertain_truth.json", json.dumps(truth(frame), indent=1))
    return files
