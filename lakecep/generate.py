"""Seeded RFID supply-chain data generator: landing files plus their exact ground truth.

Scenario: tags enter reader ``A`` as a Poisson process and move ``A -> B -> C -> D``;
transit times between consecutive readers are i.i.d. (lognormal or exponential); a share of
tags is lost after ``A``, ``B`` or ``C``; a share of reads is repeated by the reader a little
later (a second physical read, new event id). Each physical read is one JSON line.

Imperfections, each a share of the lines:

* duplicates -- extra lines that repeat an already-emitted clean line byte for byte;
* malformed / missing / wrong_type / oversized -- the line of a read is REPLACED by a broken
  one, which :func:`lakecep.events.parse_line` rejects with ``malformed_json`` /
  ``missing_field`` / ``wrong_type`` / ``oversized`` (checked while generating);
* late -- the line arrives 2-5 files after its event-time position;
* out of order -- lines shuffled among themselves within their file.

Files ``events-00000.jsonl``, ... are written in arrival order, each first under a hidden
temporary name (``.events-00000.jsonl.tmp``, ignored by Spark's file source) and then
renamed, so a streaming reader never sees half a file. The ground truth
(``truth_dir/truth.json``) is computed with plain Python loops over the valid, de-duplicated
events -- independently of any CEP engine. See ``docs/data.md`` for the exact definitions.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from lakecep.events import parse_line, reason_code

__all__ = [
    "DEFINITIONS",
    "KIND_CODES",
    "READERS",
    "GenerationSummary",
    "compute_truth",
    "generate",
]

READERS = ("A", "B", "C", "D")
ABC_WITHIN_MS = 10 * 3600 * 1000  # rfid_abc: t(C) - t(A) <= 10 h
TRANSIT_BEFORE_MS = 24 * 3600 * 1000  # rfid_transit: [t(D) - 24 h, t(D))
GENERATOR_VERSION = 1

#: Line kind -> the reason code parse_line must give (None: the line is valid).
KIND_CODES: dict[str, str | None] = {
    "clean": None,
    "duplicate": None,
    "malformed": "malformed_json",
    "missing": "missing_field",
    "wrong_type": "wrong_type",
    "oversized": "oversized",
}
_CORRUPT_KINDS = ("malformed", "missing", "wrong_type", "oversized")

DEFINITIONS: dict[str, str] = {
    "valid_events": (
        "Lines that lakecep.events.parse_line accepts, de-duplicated by event_id: the first "
        "valid line of an event_id in arrival order (file order, then line order) is kept."
    ),
    "duplicates": (
        "Valid lines whose event_id already appeared on an earlier valid line in arrival order."
    ),
    "rejected_by_reason_code": (
        "Rejected lines per reason code (the text before ':' of parse_line's reason). "
        "Identity: lines_written == valid_events + duplicates + sum(rejected_by_reason_code)."
    ),
    "order": (
        "Per tag (object_id), valid events are sorted by event_time (millisecond precision), "
        "ties broken by event_id (string order)."
    ),
    "rfid_abc": (
        "For each tag, scan its sorted valid events from i = 0: if events i, i+1, i+2 have "
        "source_id A, B, C and t(i+2) - t(i) <= 10 h, record [a_id, b_id, c_id] and continue "
        "at i + 3 (AFTER MATCH SKIP PAST LAST ROW); otherwise continue at i + 1. The list of "
        "all matches is sorted."
    ),
    "rfid_transit": (
        "For each valid event d with source_id D: take the same tag's valid events with "
        "t(d) - 24 h <= event_time < t(d), sorted; scan from i = 0: if events i, i+1 have "
        "source_id A, B, record [d_id, a_id, b_id] and continue at i + 2, otherwise at i + 1. "
        "The list of all records is sorted."
    ),
}


@dataclass(frozen=True)
class GenerationSummary:
    """What :func:`generate` wrote: paths, counts and the ground truth (``truth.json``)."""

    landing_dir: Path
    truth_path: Path
    files: list[Path]
    counts: dict[str, Any]
    truth: dict[str, Any]
    seconds: float
    #: One row per line in arrival order: file, line_no, event_id, kind (clean, duplicate or
    #: the corruption), expected_code (parse_line's reason code, None if valid),
    #: event_time_ms, copy (an extra line made by duplication; the copy may arrive before
    #: its original, then the original is the "duplicate"), late, out_of_order.
    #: Kept in memory only, not written to disk.
    lines: pd.DataFrame = field(repr=False)


# --------------------------------------------------------------------------------------
# Ground truth
# --------------------------------------------------------------------------------------


def compute_truth(
    events: Sequence[tuple[str, str, str, int]],
) -> dict[str, list[list[str]]]:
    """``rfid_abc`` and ``rfid_transit`` from valid, de-duplicated events.

    ``events``: ``(event_id, object_id, source_id, event_time_ms)`` tuples, any order.
    """
    by_tag: dict[str, list[tuple[int, str, str]]] = {}
    for event_id, object_id, source_id, t_ms in events:
        by_tag.setdefault(object_id, []).append((t_ms, event_id, source_id))
    abc: list[list[str]] = []
    transit: list[list[str]] = []
    for rows in by_tag.values():
        rows.sort()
        n = len(rows)
        # rfid_abc: A B C consecutive, within 10 h, skip past last row.
        i = 0
        while i + 2 < n:
            a, b, c = rows[i], rows[i + 1], rows[i + 2]
            if a[2] == "A" and b[2] == "B" and c[2] == "C" and c[0] - a[0] <= ABC_WITHIN_MS:
                abc.append([a[1], b[1], c[1]])
                i += 3
            else:
                i += 1
        # rfid_transit: each D, then A B pairs in [t(D) - 24 h, t(D)).
        for d_time, d_id, d_source in rows:
            if d_source != "D":
                continue
            window = [r for r in rows if d_time - TRANSIT_BEFORE_MS <= r[0] < d_time]
            j = 0
            while j + 1 < len(window):
                if window[j][2] == "A" and window[j + 1][2] == "B":
                    transit.append([d_id, window[j][1], window[j + 1][1]])
                    j += 2
                else:
                    j += 1
    abc.sort()
    transit.sort()
    return {"rfid_abc": abc, "rfid_transit": transit}


# --------------------------------------------------------------------------------------
# Generator
# --------------------------------------------------------------------------------------


def _transits(
    rng: np.random.Generator, shape: tuple[int, ...], mean: float, dist: str, sigma: float
) -> np.ndarray:
    if dist == "exponential":
        return rng.exponential(mean, shape)
    if dist == "lognormal":
        mu = math.log(mean) - sigma * sigma / 2.0  # so that E[X] = mean
        return rng.lognormal(mu, sigma, shape)
    raise ValueError(f"transit_distribution must be 'lognormal' or 'exponential', got {dist!r}")


def _check_share(name: str, value: float) -> None:
    if not (0.0 <= value <= 1.0) or math.isnan(value):
        raise ValueError(f"{name} must be within [0, 1], got {value!r}")


def _clean_line(
    event_id: str, object_id: str, source: str, time_text: str, rssi: str, antenna: int
) -> str:
    return (
        f'{{"event_id":"{event_id}","object_id":"{object_id}","event_type":"read",'
        f'"source_id":"{source}","event_time":"{time_text}",'
        f'"attributes":{{"rssi":{rssi},"antenna":{antenna}}}}}'
    )


def _corrupt(
    kind: str, obj: dict[str, Any], t_ms: int, rng: np.random.Generator, max_line_bytes: int
) -> str:
    if kind == "malformed":
        text = json.dumps(obj, separators=(",", ":"))
        variant = int(rng.integers(0, 3))
        if variant == 0:  # torn write: a proper prefix of an object is never valid JSON
            return text[: int(rng.integers(1, len(text)))]
        if variant == 1:  # a lost closing quote
            return text.replace('","object_id"', ',"object_id"', 1)
        return text.replace(":", "=", 1)
    if kind == "missing":
        name = ("event_id", "object_id", "event_type", "source_id", "event_time")[
            int(rng.integers(0, 5))
        ]
        del obj[name]
        return json.dumps(obj, separators=(",", ":"))
    if kind == "wrong_type":
        variant = int(rng.integers(0, 3))
        if variant == 0:  # tag id as a bare number
            obj["object_id"] = int(obj["object_id"].rsplit("-", 1)[1])
        elif variant == 1:  # epoch milliseconds instead of ISO text
            obj["event_time"] = t_ms
        else:  # attributes as a string
            obj["attributes"] = json.dumps(obj["attributes"])
        return json.dumps(obj, separators=(",", ":"))
    if kind == "oversized":
        base = len(json.dumps(obj, separators=(",", ":")))
        pad = max_line_bytes - base + int(rng.integers(1, 4096))
        obj["attributes"]["payload"] = "x" * max(pad, 1)
        return json.dumps(obj, separators=(",", ":"))
    raise AssertionError(kind)  # pragma: no cover


def write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name("." + path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8", newline="\n") as fh:
        fh.write(text)
    os.replace(tmp, path)


def write_lines(lines: list[str], landing_dir: Path, *, lines_per_file: int = 1000,
                overwrite: bool = False) -> list[Path]:
    """Write JSON ``lines`` in order as ``events-00000.jsonl``, ... (each under a hidden
    temporary name, then renamed; equal name widths keep name order = arrival order).

    Raises ``FileExistsError`` if ``landing_dir`` already holds ``events-*.jsonl`` files,
    unless ``overwrite`` (then they are deleted first)."""
    if lines_per_file < 1:
        raise ValueError("lines_per_file must be > 0")
    landing_dir = Path(landing_dir)
    landing_dir.mkdir(parents=True, exist_ok=True)
    existing = sorted(landing_dir.glob("events-*.jsonl"))
    if existing and not overwrite:
        raise FileExistsError(f"{landing_dir} already holds {len(existing)} events-*.jsonl "
                              "files (pass overwrite=True to replace them)")
    for old in existing:
        old.unlink()
    n_files = max(1, -(-len(lines) // lines_per_file))
    width = max(5, len(str(n_files - 1)))
    files = []
    for f in range(n_files):
        path = landing_dir / f"events-{f:0{width}d}.jsonl"
        chunk = lines[f * lines_per_file:(f + 1) * lines_per_file]
        write_atomic(path, "".join(line + "\n" for line in chunk))
        files.append(path)
    return files


@dataclass(frozen=True)
class _Params:
    """The validated arguments of :func:`generate` (``start`` is timezone-aware)."""

    events: int
    seed: int
    rate_per_hour: float
    mean_transit_hours: float
    transit_distribution: str
    transit_sigma: float
    lost_share: float
    reread_share: float
    duplicate_share: float
    malformed_share: float
    missing_share: float
    wrong_type_share: float
    oversized_share: float
    late_share: float
    out_of_order_share: float
    lines_per_file: int
    start: datetime
    uncertain_share: float
    max_line_bytes: int

    def validate(self) -> None:
        for name, share in [
            ("lost_share", self.lost_share),
            ("reread_share", self.reread_share),
            ("duplicate_share", self.duplicate_share),
            ("late_share", self.late_share),
            ("out_of_order_share", self.out_of_order_share),
            ("uncertain_share", self.uncertain_share),
            ("malformed_share", self.malformed_share),
            ("missing_share", self.missing_share),
            ("wrong_type_share", self.wrong_type_share),
            ("oversized_share", self.oversized_share),
        ]:
            _check_share(name, share)
        if self.transit_distribution not in ("lognormal", "exponential"):
            raise ValueError(
                "transit_distribution must be 'lognormal' or 'exponential', "
                f"got {self.transit_distribution!r}"
            )
        corrupt_total = (
            self.malformed_share + self.missing_share + self.wrong_type_share
            + self.oversized_share
        )
        if corrupt_total > 1.0:
            raise ValueError("malformed + missing + wrong_type + oversized shares exceed 1")
        if (self.events < 1 or self.lines_per_file < 1 or self.rate_per_hour <= 0
                or self.mean_transit_hours <= 0):
            raise ValueError(
                "events, lines_per_file, rate_per_hour, mean_transit_hours must be > 0"
            )

    def as_truth(self) -> dict[str, Any]:
        """The ``params`` object of ``truth.json`` (key order is part of the file)."""
        return {
            "events": self.events,
            "seed": self.seed,
            "rate_per_hour": self.rate_per_hour,
            "mean_transit_hours": self.mean_transit_hours,
            "transit_distribution": self.transit_distribution,
            "transit_sigma": self.transit_sigma,
            "lost_share": self.lost_share,
            "reread_share": self.reread_share,
            "duplicate_share": self.duplicate_share,
            "malformed_share": self.malformed_share,
            "missing_share": self.missing_share,
            "wrong_type_share": self.wrong_type_share,
            "oversized_share": self.oversized_share,
            "late_share": self.late_share,
            "out_of_order_share": self.out_of_order_share,
            "lines_per_file": self.lines_per_file,
            "start": self.start.astimezone(UTC).isoformat().replace("+00:00", "Z"),
            "uncertain_share": self.uncertain_share,
            "max_line_bytes": self.max_line_bytes,
        }


@dataclass(frozen=True)
class _Reads:
    """The physical reads in event-time order (one entry per read)."""

    tag: np.ndarray
    reader: np.ndarray
    t_ms: np.ndarray
    rssi: np.ndarray
    antenna: np.ndarray
    n_tags: int
    lost_tags: int
    rereads: int


@dataclass(frozen=True)
class _Kinds:
    """Per read: clean (0) or a corruption (index into ``_CORRUPT_KINDS`` + 1), and the
    uncertainty interval of the clean reads marked uncertain."""

    kind: np.ndarray
    uncertain: np.ndarray
    unc_before: np.ndarray
    unc_after: np.ndarray


@dataclass(frozen=True)
class _Lines:
    """The lines in arrival order: the read each line renders and its flags."""

    line_read: np.ndarray
    is_dup: np.ndarray
    line_late: np.ndarray
    line_ooo: np.ndarray
    n_files: int


def _prepare_dirs(landing_dir: Path, truth_dir: Path, overwrite: bool) -> None:
    landing_dir.mkdir(parents=True, exist_ok=True)
    truth_dir.mkdir(parents=True, exist_ok=True)
    existing = sorted(landing_dir.glob("events-*.jsonl"))
    if existing:
        if not overwrite:
            raise FileExistsError(
                f"{landing_dir} already holds {len(existing)} events-*.jsonl files "
                "(pass overwrite=True to replace them)"
            )
        for old in existing:
            old.unlink()


def _physical_reads(p: _Params, rng: np.random.Generator) -> _Reads:
    reads_per_tag = (4.0 * (1.0 - p.lost_share) + 2.0 * p.lost_share) * (1.0 + p.reread_share)
    n_tags = max(1, round(p.events / (reads_per_tag * (1.0 + p.duplicate_share))))
    entry_h = np.cumsum(rng.exponential(1.0 / p.rate_per_hour, n_tags))
    path_len = np.full(n_tags, 4, dtype=np.int64)
    lost = rng.random(n_tags) < p.lost_share
    path_len[lost] = rng.integers(1, 4, int(lost.sum()))  # lost after A, B or C
    legs = _transits(
        rng, (n_tags, 3), p.mean_transit_hours, p.transit_distribution, p.transit_sigma
    )
    at_h = np.concatenate([entry_h[:, None], entry_h[:, None] + np.cumsum(legs, axis=1)], axis=1)
    tag_grid = np.broadcast_to(np.arange(n_tags)[:, None], (n_tags, 4))
    reader_grid = np.broadcast_to(np.arange(4)[None, :], (n_tags, 4))
    on_path = reader_grid < path_len[:, None]
    tag = tag_grid[on_path]
    reader = reader_grid[on_path]
    hours = at_h[on_path]
    reread = rng.random(len(tag)) < p.reread_share  # a second read a few seconds later
    tag = np.concatenate([tag, tag[reread]])
    reader = np.concatenate([reader, reader[reread]])
    hours = np.concatenate(
        [hours, hours[reread] + rng.uniform(1.0, 120.0, int(reread.sum())) / 3600]
    )
    start_ms = round(p.start.timestamp() * 1000)
    t_ms = start_ms + np.round(hours * 3_600_000.0).astype(np.int64)
    order = np.lexsort((reader, tag, t_ms))  # event-time order
    tag, reader, t_ms = tag[order], reader[order], t_ms[order]
    n_reads = len(t_ms)
    rssi = np.round(rng.normal(-55.0, 6.0, n_reads), 1)
    antenna = rng.integers(1, 5, n_reads)
    return _Reads(tag, reader, t_ms, rssi, antenna, n_tags, int(lost.sum()), int(reread.sum()))


def _read_kinds(p: _Params, rng: np.random.Generator, n_reads: int) -> _Kinds:
    u = rng.random(n_reads)
    kind = np.zeros(n_reads, dtype=np.int8)  # 0 clean, 1.. index into _CORRUPT_KINDS + 1
    edge = 0.0
    for k, share in enumerate(
        (p.malformed_share, p.missing_share, p.wrong_type_share, p.oversized_share), start=1
    ):
        kind[(u >= edge) & (u < edge + share)] = k
        edge += share
    uncertain = (rng.random(n_reads) < p.uncertain_share) & (kind == 0)
    unc_before = rng.integers(0, 60_000, n_reads)  # ms
    unc_after = rng.integers(1, 60_000, n_reads)
    return _Kinds(kind, uncertain, unc_before, unc_after)


def _arrival_order(p: _Params, rng: np.random.Generator, kind: np.ndarray) -> _Lines:
    """One line per read plus exact duplicates of clean reads, in arrival order."""
    n_reads = len(kind)
    clean_idx = np.flatnonzero(kind == 0)
    n_dup = round(p.duplicate_share * n_reads) if len(clean_idx) else 0
    dup_of = np.sort(rng.choice(clean_idx, n_dup, replace=True)) if n_dup else clean_idx[:0]
    line_read = np.concatenate([np.arange(n_reads), dup_of])
    is_dup = np.concatenate([np.zeros(n_reads, bool), np.ones(n_dup, bool)])
    lpf = p.lines_per_file
    key = np.arange(n_reads, dtype=np.float64)
    late = rng.random(n_reads) < p.late_share
    key[late] += lpf * rng.uniform(2.0, 5.0, int(late.sum()))
    dup_key = key[dup_of] + rng.uniform(0.0, 2.0 * lpf, n_dup)
    line_key = np.concatenate([key, dup_key])
    line_late = np.concatenate([late, np.zeros(n_dup, bool)])
    arrival = np.argsort(line_key, kind="stable")
    line_read, is_dup, line_late = line_read[arrival], is_dup[arrival], line_late[arrival]
    n_lines = len(line_read)
    n_files = (n_lines + lpf - 1) // lpf
    # out of order: a share of each file's lines permuted among themselves
    picked = rng.random(n_lines) < p.out_of_order_share
    shuffled = np.zeros(n_lines, bool)
    perm = np.arange(n_lines)
    for f in range(n_files):
        pos = np.flatnonzero(picked[f * lpf : (f + 1) * lpf]) + f * lpf
        if len(pos) > 1:
            new = rng.permutation(pos)
            perm[pos] = new
            shuffled[pos] = new != pos
    line_read, is_dup, line_late = line_read[perm], is_dup[perm], line_late[perm]
    # a line marked out of order is one whose slot received another line
    return _Lines(line_read, is_dup, line_late, shuffled, n_files)


def _render(
    p: _Params, rng: np.random.Generator, reads: _Reads, kinds: _Kinds,
    ids: list[str], tags: list[str],
) -> list[str]:
    """The text of each read: a clean line, with uncertainty fields, or corrupted."""
    n_reads = len(ids)
    t_ms = reads.t_ms
    times = np.datetime_as_string(t_ms.astype("datetime64[ms]"), unit="ms")
    time_text = [s + "Z" for s in times.tolist()]
    rssi_text = [repr(x) for x in reads.rssi.tolist()]
    read_text: list[str] = [""] * n_reads
    tag_l, reader_l, antenna_l = reads.tag.tolist(), reads.reader.tolist(), reads.antenna.tolist()
    kind_l = kinds.kind
    for i in range(n_reads):
        read_text[i] = _clean_line(
            ids[i], tags[tag_l[i]], READERS[reader_l[i]], time_text[i], rssi_text[i], antenna_l[i]
        )
    for i in np.flatnonzero(kinds.uncertain).tolist():
        lo = int(t_ms[i] - kinds.unc_before[i])
        hi = int(t_ms[i] + kinds.unc_after[i])
        lo_text = np.datetime_as_string(np.datetime64(lo, "ms"), unit="ms") + "Z"
        hi_text = np.datetime_as_string(np.datetime64(hi, "ms"), unit="ms") + "Z"
        obj = json.loads(read_text[i])
        obj["time_lower"] = lo_text
        obj["time_upper"] = hi_text
        if rng.random() < 0.5:
            w = rng.random(4) + 0.05
            w = w / w.sum()
            obj["pmf"] = [round(float(x), 6) for x in w[:-1]]
            obj["pmf"].append(round(1.0 - sum(obj["pmf"]), 6))
        read_text[i] = json.dumps(obj, separators=(",", ":"))
    for i in np.flatnonzero(kind_l).tolist():
        kind_name = _CORRUPT_KINDS[kind_l[i] - 1]
        obj = json.loads(read_text[i])
        text = _corrupt(kind_name, obj, int(t_ms[i]), rng, p.max_line_bytes)
        code = KIND_CODES[kind_name]
        got = parse_line(text, p.max_line_bytes)
        # The promise: a corrupted line is always rejected, with the matching code.
        if not hasattr(got, "reason") or reason_code(got.reason) != code:  # pragma: no cover
            raise AssertionError(f"corrupted line not rejected as {code}: {text[:200]!r}")
        read_text[i] = text
    return read_text


def _write_files(
    landing_dir: Path, read_text: list[str], line_read_l: list[int], lpf: int, n_files: int,
    progress: Callable[[int, int], None] | None,
) -> list[Path]:
    """Write the lines in arrival order, ``lpf`` lines per file."""
    files: list[Path] = []
    width = max(5, len(str(n_files - 1)))  # equal widths keep name order == arrival order
    for f in range(n_files):
        chunk = line_read_l[f * lpf : (f + 1) * lpf]
        path = landing_dir / f"events-{f:0{width}d}.jsonl"
        write_atomic(path, "\n".join([read_text[i] for i in chunk]) + "\n")
        files.append(path)
        if progress is not None:
            progress(f + 1, n_files)
    return files


def _classify_lines(
    line_read_l: list[int], reads: _Reads, kinds: _Kinds, ids: list[str], tags: list[str]
) -> tuple[list[tuple[str, str, str, int]], list[str], dict[str, int], int]:
    """Plain loop over the lines in arrival order: the first valid line of a read is kept,
    later copies are duplicates (a copy may overtake its original within a file).

    Returns the valid events, each line's kind, rejected lines per code, duplicates."""
    rejected: dict[str, int] = {}
    seen: set[int] = set()
    duplicates = 0
    valid: list[tuple[str, str, str, int]] = []
    line_kind: list[str] = []
    t_list = reads.t_ms.tolist()
    tag_l, reader_l = reads.tag.tolist(), reads.reader.tolist()
    kind_of_read = kinds.kind.tolist()
    for r in line_read_l:
        k = kind_of_read[r]
        if k:
            kname = _CORRUPT_KINDS[k - 1]
            code = KIND_CODES[kname]
            assert code is not None
            rejected[code] = rejected.get(code, 0) + 1
        elif r in seen:
            kname = "duplicate"
            duplicates += 1
        else:
            kname = "clean"
            seen.add(r)
            valid.append((ids[r], tags[tag_l[r]], READERS[reader_l[r]], t_list[r]))
        line_kind.append(kname)
    return valid, line_kind, rejected, duplicates


def generate(
    landing_dir: Path,
    truth_dir: Path,
    *,
    events: int = 20_000,
    seed: int = 7,
    rate_per_hour: float = 100.0,
    mean_transit_hours: float = 3.0,
    transit_distribution: str = "lognormal",
    transit_sigma: float = 0.6,
    lost_share: float = 0.10,
    reread_share: float = 0.01,
    duplicate_share: float = 0.02,
    malformed_share: float = 0.005,
    missing_share: float = 0.005,
    wrong_type_share: float = 0.005,
    oversized_share: float = 0.0005,
    late_share: float = 0.02,
    out_of_order_share: float = 0.03,
    lines_per_file: int = 1000,
    start: datetime = datetime(2026, 1, 5, tzinfo=UTC),
    uncertain_share: float = 0.0,
    max_line_bytes: int = 65536,
    overwrite: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> GenerationSummary:
    """Write seeded RFID landing files to ``landing_dir`` and ``truth.json`` to ``truth_dir``.

    ``events`` is the approximate number of lines written. The same arguments always give
    byte-identical files. Raises ``FileExistsError`` if ``landing_dir`` already holds
    ``events-*.jsonl`` files, unless ``overwrite`` (then those files are deleted first).
    """
    began = time.perf_counter()
    p = _Params(
        events=events, seed=seed, rate_per_hour=rate_per_hour,
        mean_transit_hours=mean_transit_hours, transit_distribution=transit_distribution,
        transit_sigma=transit_sigma, lost_share=lost_share, reread_share=reread_share,
        duplicate_share=duplicate_share, malformed_share=malformed_share,
        missing_share=missing_share, wrong_type_share=wrong_type_share,
        oversized_share=oversized_share, late_share=late_share,
        out_of_order_share=out_of_order_share, lines_per_file=lines_per_file,
        start=start if start.tzinfo is not None else start.replace(tzinfo=UTC),
        uncertain_share=uncertain_share, max_line_bytes=max_line_bytes,
    )
    p.validate()
    landing_dir = Path(landing_dir)
    truth_dir = Path(truth_dir)
    _prepare_dirs(landing_dir, truth_dir, overwrite)

    # The steps draw from one generator in a fixed order: reordering them changes the data.
    rng = np.random.default_rng(seed)
    reads = _physical_reads(p, rng)
    n_reads = len(reads.t_ms)
    kinds = _read_kinds(p, rng, n_reads)
    lines_ = _arrival_order(p, rng, kinds.kind)
    ids = [f"ev-{seed}-{i}" for i in range(n_reads)]
    tags = [f"tag-{i:06d}" for i in range(reads.n_tags)]
    read_text = _render(p, rng, reads, kinds, ids, tags)

    lpf = lines_per_file
    n_files = lines_.n_files
    n_lines = len(lines_.line_read)
    line_read_l = lines_.line_read.tolist()
    files = _write_files(landing_dir, read_text, line_read_l, lpf, n_files, progress)

    # --- ground truth --------------------------------------------------------------------
    valid, line_kind, rejected, duplicates = _classify_lines(
        line_read_l, reads, kinds, ids, tags
    )
    counts: dict[str, Any] = {
        "lines_written": n_lines,
        "files": n_files,
        "valid_events": len(valid),
        "duplicates": duplicates,
        "rejected_by_reason_code": dict(sorted(rejected.items())),
        "tags": reads.n_tags,
        "lost_tags": reads.lost_tags,
        "physical_reads": n_reads,
        "rereads": reads.rereads,
        "late_lines": int(lines_.line_late.sum()),
        "out_of_order_lines": int(lines_.line_ooo.sum()),
        "uncertain_events": int(kinds.uncertain.sum()),
    }
    assert n_lines == len(valid) + duplicates + sum(rejected.values()), counts
    results = compute_truth(valid)
    counts["rfid_abc_matches"] = len(results["rfid_abc"])
    counts["rfid_transit_matches"] = len(results["rfid_transit"])
    truth: dict[str, Any] = {
        "generator": {"name": "lakecep.generate", "version": GENERATOR_VERSION},
        "params": p.as_truth(),
        "definitions": DEFINITIONS,
        "counts": counts,
        "rfid_abc": results["rfid_abc"],
        "rfid_transit": results["rfid_transit"],
    }
    truth_path = truth_dir / "truth.json"
    write_atomic(truth_path, json.dumps(truth, separators=(",", ":")) + "\n")

    file_no = np.repeat(np.arange(n_files), lpf)[:n_lines]
    lines = pd.DataFrame(
        {
            "file": file_no,
            "line_no": np.arange(n_lines) - file_no * lpf,
            "event_id": [ids[r] for r in line_read_l],
            "kind": line_kind,
            "expected_code": [KIND_CODES[k] for k in line_kind],
            "event_time_ms": reads.t_ms[lines_.line_read],
            "copy": lines_.is_dup,
            "late": lines_.line_late,
            "out_of_order": lines_.line_ooo,
        }
    )
    return GenerationSummary(
        landing_dir=landing_dir,
        truth_path=truth_path,
        files=files,
        counts=counts,
        truth=truth,
        seconds=time.perf_counter() - began,
        lines=lines,
    )
