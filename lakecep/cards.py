"""Seeded card transactions with planted frauds: the "bring your own events" example.

The user's own shape: ``txn_id, card, merchant, amount, ts`` (``ts`` is local New York time
``YYYY-MM-DD HH:MM:SS``, without an offset). A *fraud* is a probe (amount under $2) followed
on the same card by the card's next transaction over $500 within 15 minutes
(``queries/examples/cards/card_fraud.toml``).

Model (one ``numpy`` generator seeded with ``seed``): each card's transactions are at least
40 minutes apart; amounts are $2.50-$480. Then some gaps get a planted fraud (a probe 2 min
after the earlier transaction, the big one 1-14 min later), some a near miss (the big one
16-30 min after the probe: outside the window), and some cards a legitimate big purchase or
a lone probe. :func:`fraud_pairs` finds the frauds by the definition, brute force; the
planted pairs are exactly those (a unit test checks it).

:func:`write_landing` lands the transactions split across formats, row ``i`` going to format
``i % len(formats)``: JSON lines, CSV (with a header, quoted merchant names holding commas)
and Parquet (``amount`` as a real double there), one landing folder per source.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import pandas as pd

__all__ = ["COLUMNS", "fraud_pairs", "transactions", "write_landing"]

COLUMNS = ("txn_id", "card", "merchant", "amount", "ts")
MERCHANTS = ("Acme, Inc.", "Corner Store", "Fuel & Go", "Books \"R\" Us", "Cafe 7",
             "Grocer", "Online Mart", "Pharmacy")
_START = datetime(2026, 1, 12, 8, 0, 0)  # local time, far from a DST change
_WINDOW = timedelta(minutes=15)


def transactions(n: int = 1000, cards: int = 40, frauds: int = 12, near_misses: int = 8,
                 seed: int = 14) -> tuple[pd.DataFrame, list[tuple[str, str]]]:
    """``n`` transactions (``COLUMNS``, ordered by time) and the planted frauds as
    ``(probe txn_id, big txn_id)`` pairs."""
    rng = np.random.default_rng(seed)
    special = 2 * (frauds + near_misses) + 2 * 4  # planted rows (pairs + lone bigs/probes)
    base = n - special
    if base < cards:
        raise ValueError("too few transactions for the planted ones")
    card_of = rng.integers(0, cards, size=base)
    rows: list[dict] = []
    times: dict[int, list[datetime]] = {}
    for card in range(cards):
        count = int((card_of == card).sum())
        gaps = 40 + rng.exponential(120, size=count)
        t = _START + timedelta(minutes=float(rng.uniform(0, 60)))
        stamps = []
        for gap in gaps:
            t = t + timedelta(minutes=float(gap))
            stamps.append(t.replace(microsecond=0))
        times[card] = stamps
        for stamp in stamps:
            rows.append({"card": card, "time": stamp,
                         "amount": round(float(rng.uniform(2.5, 480)), 2)})
    slots = [(c, i) for c in range(cards) for i in range(len(times[c]))]
    chosen = rng.choice(len(slots), size=frauds + near_misses + 8, replace=False)
    planted: list[tuple[int, int]] = []  # row indexes of (probe, big)
    for k, slot in enumerate(chosen):
        card, i = slots[slot]
        probe_time = times[card][i] + timedelta(minutes=2)
        probe = {"card": card, "time": probe_time,
                 "amount": round(float(rng.uniform(0.5, 1.99)), 2)}
        big = {"card": card, "amount": round(float(rng.uniform(520, 1500)), 2)}
        if k < frauds:
            big["time"] = probe_time + timedelta(minutes=float(rng.integers(1, 15)))
            rows += [probe, big]
            planted.append((len(rows) - 2, len(rows) - 1))
        elif k < frauds + near_misses:
            big["time"] = probe_time + timedelta(minutes=float(rng.integers(16, 31)))
            rows += [probe, big]
        elif k < frauds + near_misses + 4:
            big["time"] = probe_time  # a legitimate big purchase, no probe before it
            rows.append(big)
        else:
            rows.append(probe)  # a lone probe
    frame = pd.DataFrame(rows)
    frame["merchant"] = [MERCHANTS[i] for i in rng.integers(0, len(MERCHANTS), len(frame))]
    order = np.lexsort((frame["card"].to_numpy(), frame["time"].to_numpy()))
    position = np.empty(len(frame), dtype=np.int64)
    position[order] = np.arange(len(frame))
    frame = frame.iloc[order].reset_index(drop=True)
    frame["txn_id"] = [f"T{i + 1:06d}" for i in range(len(frame))]
    frame["card"] = [f"4000-{c:04d}" for c in frame["card"]]
    frame["ts"] = [t.strftime("%Y-%m-%d %H:%M:%S") for t in frame["time"]]
    ids = frame["txn_id"].tolist()
    pairs = sorted((ids[position[p]], ids[position[b]]) for p, b in planted)
    return frame[list(COLUMNS)], pairs


def fraud_pairs(frame: pd.DataFrame) -> list[tuple[str, str]]:
    """The frauds by definition (brute force): per card in time order, a transaction under
    $2 whose next transaction is over $500 within 15 minutes."""
    out = []
    for _, group in frame.sort_values(["card", "ts"]).groupby("card"):
        rows = list(group.itertuples(index=False))
        for a, b in zip(rows, rows[1:], strict=False):
            gap = datetime.fromisoformat(b.ts) - datetime.fromisoformat(a.ts)
            if float(a.amount) < 2 and float(b.amount) > 500 and gap <= _WINDOW:
                out.append((a.txn_id, b.txn_id))
    return sorted(out)


def write_landing(frame: pd.DataFrame, home: Path, formats: tuple[str, ...] = (
        "jsonl", "csv", "parquet"), files_per_format: int = 2) -> dict[str, int]:
    """Land row ``i`` in ``home/landing/cards_<format>/`` for format ``i % len(formats)``;
    the number of rows landed per format."""
    counts = {}
    for k, fmt in enumerate(formats):
        part = frame.iloc[k::len(formats)].reset_index(drop=True)
        folder = home / "landing" / f"cards_{fmt}"
        folder.mkdir(parents=True, exist_ok=True)
        for f in range(files_per_format):
            chunk = part.iloc[f::files_per_format]
            path = folder / f"part-{f}.{fmt}"
            if fmt == "jsonl":
                path.write_text("".join(json.dumps(r) + "\n"
                                        for r in chunk.to_dict(orient="records")))
            elif fmt == "csv":
                text = chunk.assign(amount=chunk["amount"].map(lambda a: f"{a:.2f}"))
                text.to_csv(path, index=False)
            else:
                chunk.to_parquet(path, index=False)
        counts[fmt] = len(part)
    return counts
