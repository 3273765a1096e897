"""Seeded stock-tick generator: random-walk prices with sharp falls and check-marks.

The data behind seed 000's stock example (``queries/examples/stock_check.toml``): a falling
"\\" on the live ticks of a symbol triggers a search for a check-mark "√" in that symbol's
recent history.

Model, per symbol (all draws from one ``numpy`` generator seeded with ``seed``):

* **Tick times** are a Poisson process with ``ticks_per_minute`` ticks per minute: gaps are
  exponential, rounded to whole milliseconds and at least 1 ms, so a symbol's ticks have
  strictly increasing times (and ORDER BY event_time is unambiguous).
* **Prices** are a geometric random walk: ``log p[i+1] = log p[i] + r[i]`` with
  ``r[i] ~ Normal(0, volatility)`` per tick, from a start price drawn in [20, 200).
* **Shapes** are written over the walk's increments at random, non-overlapping places;
  their number is Poisson with ``falls_per_day`` and ``checkmarks_per_day`` per symbol:

  - a *sharp fall* "\\": 3-6 consecutive falling ticks losing 3.5-8 % in total;
  - a *check-mark* "√": 3-6 falling ticks losing 3-6 %, then 3-6 rising ticks ending
    1-3 % above the price before the fall.

  Each step of a shape moves the price by at least 0.5 %, so its ticks are strictly falling
  or rising even after rounding the price to 4 decimals. With the default volatility
  (0.05 % per tick) the walk alone practically never falls 2 % over consecutive ticks, so
  the patterns of the example query find the injected shapes, not noise.

Rows are ordered by time (ties by symbol); ``event_id`` numbers them in that order.
:func:`write_landing` writes the ticks as landing JSON lines in the event contract
(``schemas/events.json``), the price in ``attributes`` as ``{"price": <number>}``.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pandas as pd

from lakecep.generate import write_lines

__all__ = ["EXCHANGES", "ticks", "write_landing"]

EXCHANGES = ("X1", "X2")
_SHAPE_STEPS = (3, 6)  # ticks per leg of a shape (inclusive)


def _shape_returns(rng: np.random.Generator, kind: str) -> np.ndarray:
    """Log-returns of one injected shape: a fall, or a fall followed by a higher rise."""
    down = int(rng.integers(_SHAPE_STEPS[0], _SHAPE_STEPS[1] + 1))
    if kind == "fall":
        total = np.log1p(-rng.uniform(0.035, 0.08))
        return _split(rng, total, down)
    fall = np.log1p(-rng.uniform(0.03, 0.06))
    above = np.log1p(rng.uniform(0.01, 0.03))
    up = int(rng.integers(_SHAPE_STEPS[0], _SHAPE_STEPS[1] + 1))
    return np.concatenate([_split(rng, fall, down), _split(rng, above - fall, up)])


def _split(rng: np.random.Generator, total: float, steps: int) -> np.ndarray:
    """``total`` (a log-return) cut into ``steps`` same-signed parts of at least 0.5 % each
    (widened when ``total`` is too small for that)."""
    floor = min(np.log1p(0.005), abs(total) / steps)
    weights = rng.dirichlet(np.full(steps, 4.0))
    parts = floor + weights * (abs(total) - floor * steps)
    return np.sign(total) * parts


def _place(rng: np.random.Generator, returns: np.ndarray, shapes: list[np.ndarray]) -> None:
    """Write ``shapes`` over ``returns`` at random places that do not overlap (a shape that
    finds no free place after a few tries is dropped)."""
    n = len(returns)
    taken = np.zeros(n + 1, dtype=bool)
    for shape in shapes:
        width = len(shape) + 2  # a calm tick on either side keeps shapes apart
        if width >= n:
            continue
        for _ in range(20):
            at = int(rng.integers(1, n - width))
            if not taken[at - 1:at + width].any():
                returns[at + 1:at + 1 + len(shape)] = shape
                taken[at - 1:at + width] = True
                break


def ticks(
    symbols: int = 20,
    hours: float = 48.0,
    seed: int = 0,
    *,
    ticks_per_minute: float = 1.0,
    volatility: float = 0.0005,
    falls_per_day: float = 4.0,
    checkmarks_per_day: float = 4.0,
    start: datetime = datetime(2026, 1, 5, tzinfo=UTC),
) -> pd.DataFrame:
    """Ticks of ``symbols`` symbols over ``hours`` hours (model: module docstring).

    Columns: ``event_id`` (``tick-<seed>-<n>``), ``object_id`` (the symbol, ``SYM000``...),
    ``event_type`` (``'tick'``), ``source_id`` (the symbol's exchange, ``X1`` or ``X2``),
    ``event_time`` (``datetime64[ns]``, UTC, millisecond precision) and ``price`` (float).
    The same arguments always give the same frame.
    """
    if symbols < 1 or hours <= 0 or ticks_per_minute <= 0:
        raise ValueError("symbols, hours and ticks_per_minute must be > 0")
    if volatility < 0 or falls_per_day < 0 or checkmarks_per_day < 0:
        raise ValueError("volatility, falls_per_day and checkmarks_per_day must be >= 0")
    rng = np.random.default_rng(seed)
    horizon_ms = round(hours * 3_600_000)
    mean_gap_ms = 60_000.0 / ticks_per_minute
    days = hours / 24.0
    names, times, prices = [], [], []
    for s in range(symbols):
        expected = horizon_ms / mean_gap_ms
        gaps = rng.exponential(mean_gap_ms, int(expected + 6 * np.sqrt(expected) + 10))
        t_ms = np.cumsum(np.maximum(1, np.round(gaps))).astype(np.int64)
        t_ms = t_ms[t_ms < horizon_ms]
        returns = rng.normal(0.0, volatility, len(t_ms))
        shapes = ["fall"] * int(rng.poisson(falls_per_day * days)) + ["check"] * int(
            rng.poisson(checkmarks_per_day * days))
        rng.shuffle(shapes)
        _place(rng, returns, [_shape_returns(rng, kind) for kind in shapes])
        if len(returns):
            returns[0] = 0.0
        price = rng.uniform(20.0, 200.0) * np.exp(np.cumsum(returns))
        names.append(np.full(len(t_ms), s))
        times.append(t_ms)
        prices.append(np.round(price, 4))
    symbol = np.concatenate(names)
    t_ms = np.concatenate(times)
    price = np.concatenate(prices)
    order = np.lexsort((symbol, t_ms))
    symbol, t_ms, price = symbol[order], t_ms[order], price[order]
    base = pd.Timestamp(start).tz_convert(None) if pd.Timestamp(start).tzinfo else pd.Timestamp(
        start)
    symbol_names = np.array([f"SYM{i:03d}" for i in range(symbols)], dtype=object)
    return pd.DataFrame({
        "event_id": [f"tick-{seed}-{i}" for i in range(len(t_ms))],
        "object_id": symbol_names[symbol],
        "event_type": "tick",
        "source_id": np.array(EXCHANGES, dtype=object)[symbol % len(EXCHANGES)],
        "event_time": (base + pd.to_timedelta(t_ms, unit="ms")).astype("datetime64[ns]"),
        "price": price,
    })


def write_landing(
    frame: pd.DataFrame,
    landing_dir: Path,
    *,
    lines_per_file: int = 1000,
    overwrite: bool = False,
) -> list[Path]:
    """Write ``frame`` (the layout of :func:`ticks`) as landing files, one JSON line per
    tick in row order: ``events-00000.jsonl``, ... (as :mod:`lakecep.generate` names them,
    each written under a hidden temporary name and renamed). The price goes into
    ``attributes`` as ``{"price": <number>}``; times are ISO-8601 UTC with milliseconds.

    Raises ``FileExistsError`` if ``landing_dir`` already holds ``events-*.jsonl`` files,
    unless ``overwrite`` (then they are deleted first).
    """
    stamps = np.datetime_as_string(
        frame["event_time"].to_numpy("datetime64[ms]"), unit="ms")
    lines = [
        json.dumps({"event_id": e, "object_id": o, "event_type": k, "source_id": s,
                    "event_time": t + "Z", "attributes": {"price": p}},
                   separators=(",", ":"))
        for e, o, k, s, t, p in zip(
            frame["event_id"].tolist(), frame["object_id"].tolist(),
            frame["event_type"].tolist(), frame["source_id"].tolist(), stamps.tolist(),
            frame["price"].tolist(), strict=True)
    ]
    return write_lines(lines, landing_dir, lines_per_file=lines_per_file, overwrite=overwrite)
