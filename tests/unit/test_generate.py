"""Unit tests of lakecep.generate: landing files, imperfections and the ground truth."""

from __future__ import annotations

import bisect
import hashlib
import json
import statistics
from collections import Counter, defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from lakecep.events import ParsedEvent, Rejection, parse_line
from lakecep.generate import DEFINITIONS, GenerationSummary, compute_truth, generate

LPF = 500


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> GenerationSummary:
    root = tmp_path_factory.mktemp("gen")
    return generate(
        root / "landing",
        root / "truth",
        events=20_000,
        seed=11,
        lines_per_file=LPF,
        # larger shares than the defaults so every imperfection shows up often
        malformed_share=0.01,
        missing_share=0.01,
        wrong_type_share=0.01,
        oversized_share=0.002,
        duplicate_share=0.04,
        late_share=0.03,
        out_of_order_share=0.05,
    )


@pytest.fixture(scope="module")
def parsed(data: GenerationSummary) -> list[tuple[int, int, str, ParsedEvent | Rejection]]:
    """Every line of every file, re-read from disk: (file, line_no, raw, result)."""
    out = []
    for f, path in enumerate(sorted(data.landing_dir.glob("events-*.jsonl"))):
        for n, raw in enumerate(path.read_text(encoding="utf-8").split("\n")[:-1]):
            out.append((f, n, raw, parse_line(raw)))
    return out


def _valid_unique(parsed: list) -> list[ParsedEvent]:
    seen: set[str] = set()
    kept = []
    for _, _, _, result in parsed:
        if isinstance(result, ParsedEvent) and result.event_id not in seen:
            seen.add(result.event_id)
            kept.append(result)
    return kept


# --- files ------------------------------------------------------------------------------


def test_files_are_complete_and_named_in_arrival_order(data: GenerationSummary) -> None:
    names = sorted(p.name for p in data.landing_dir.iterdir())
    assert names == [f"events-{i:05d}.jsonl" for i in range(data.counts["files"])]
    assert [p.name for p in data.files] == names
    sizes = [len(p.read_text().split("\n")) - 1 for p in data.files]
    assert all(s == LPF for s in sizes[:-1]) and 0 < sizes[-1] <= LPF
    assert sum(sizes) == data.counts["lines_written"]
    assert abs(data.counts["lines_written"] - 20_000) < 1000


def test_truth_file_matches_summary(data: GenerationSummary) -> None:
    on_disk = json.loads(data.truth_path.read_text())
    assert on_disk == data.truth
    assert on_disk["counts"] == data.counts
    assert on_disk["definitions"] == DEFINITIONS
    assert set(on_disk) >= {"params", "definitions", "counts", "rfid_abc", "rfid_transit"}


# --- counts and rejections --------------------------------------------------------------


def test_counts_identity(data: GenerationSummary) -> None:
    c = data.counts
    assert c["lines_written"] == (
        c["valid_events"] + c["duplicates"] + sum(c["rejected_by_reason_code"].values())
    )
    assert set(c["rejected_by_reason_code"]) == {
        "malformed_json",
        "missing_field",
        "wrong_type",
        "oversized",
    }
    assert c["duplicates"] > 0 and c["late_lines"] > 0 and c["out_of_order_lines"] > 0


def test_every_line_parses_or_is_rejected_as_planned(data: GenerationSummary, parsed) -> None:
    manifest = data.lines
    assert len(parsed) == len(manifest)
    codes: Counter[str] = Counter()
    for (f, n, _raw, result), row in zip(parsed, manifest.itertuples(index=False), strict=True):
        assert (f, n) == (row.file, row.line_no)
        if row.expected_code is None:
            assert isinstance(result, ParsedEvent), (row, result)
            assert result.event_id == row.event_id
        else:
            assert isinstance(result, Rejection), row
            assert result.code == row.expected_code, (row, result.reason)
            codes[result.code] += 1
    assert dict(codes) == data.counts["rejected_by_reason_code"]


def test_counts_recomputed_from_the_files(data: GenerationSummary, parsed) -> None:
    seen: set[str] = set()
    duplicates = 0
    rejected: Counter[str] = Counter()
    for _, _, _, result in parsed:
        if isinstance(result, Rejection):
            rejected[result.code] += 1
        elif result.event_id in seen:
            duplicates += 1
        else:
            seen.add(result.event_id)
    assert len(seen) == data.counts["valid_events"]
    assert duplicates == data.counts["duplicates"]
    assert dict(rejected) == data.counts["rejected_by_reason_code"]


def test_duplicates_repeat_an_earlier_line_exactly(data: GenerationSummary, parsed) -> None:
    first_text: dict[str, str] = {}
    dups = 0
    for _, _, raw, result in parsed:
        if isinstance(result, ParsedEvent):
            if result.event_id in first_text:
                assert raw == first_text[result.event_id]
                dups += 1
            else:
                first_text[result.event_id] = raw
    assert dups == data.counts["duplicates"]


def test_corrupted_lines_replace_reads(data: GenerationSummary, parsed) -> None:
    valid_ids = {e.event_id for e in _valid_unique(parsed)}
    bad = data.lines[data.lines["expected_code"].notna()]
    assert not set(bad["event_id"]) & valid_ids
    assert len(valid_ids) + len(bad) == data.counts["physical_reads"]
    # event ids are unique per physical read
    numbers = sorted(int(i.rsplit("-", 1)[1]) for i in valid_ids | set(bad["event_id"]))
    assert numbers == list(range(data.counts["physical_reads"]))


# --- ground truth, recomputed independently ---------------------------------------------


def _brute_abc(events: list[ParsedEvent]) -> list[list[str]]:
    tags: dict[str, list[ParsedEvent]] = defaultdict(list)
    for e in events:
        tags[e.object_id].append(e)
    found = []
    for seq in tags.values():
        seq.sort(key=lambda e: (e.event_time, e.event_id))
        blocked_until = 0
        for i in range(len(seq) - 2):
            if i < blocked_until:
                continue
            window = seq[i : i + 3]
            if [e.source_id for e in window] != ["A", "B", "C"]:
                continue
            if window[2].event_time - window[0].event_time > timedelta(hours=10):
                continue
            found.append([e.event_id for e in window])
            blocked_until = i + 3
    return sorted(found)


def _brute_transit(events: list[ParsedEvent]) -> list[list[str]]:
    tags: dict[str, list[ParsedEvent]] = defaultdict(list)
    for e in events:
        tags[e.object_id].append(e)
    found = []
    for seq in tags.values():
        seq.sort(key=lambda e: (e.event_time, e.event_id))
        times = [e.event_time for e in seq]
        for d in seq:
            if d.source_id != "D":
                continue
            lo = bisect.bisect_left(times, d.event_time - timedelta(hours=24))
            hi = bisect.bisect_left(times, d.event_time)
            window = seq[lo:hi]
            blocked_until = 0
            for j in range(len(window) - 1):
                if j >= blocked_until and (window[j].source_id, window[j + 1].source_id) == (
                    "A",
                    "B",
                ):
                    found.append([d.event_id, window[j].event_id, window[j + 1].event_id])
                    blocked_until = j + 2
    return sorted(found)


def test_truth_matches_brute_force_over_the_files(data: GenerationSummary, parsed) -> None:
    events = _valid_unique(parsed)
    abc = _brute_abc(events)
    transit = _brute_transit(events)
    assert abc == data.truth["rfid_abc"]
    assert transit == data.truth["rfid_transit"]
    assert len(abc) > 1000 and len(transit) > 1000
    assert data.counts["rfid_abc_matches"] == len(abc)


def test_scenario_has_slow_and_fast_tags(parsed) -> None:
    first: dict[tuple[str, str], datetime] = {}
    for e in _valid_unique(parsed):
        key = (e.object_id, e.source_id)
        if key not in first or e.event_time < first[key]:
            first[key] = e.event_time
    spans = [
        first[(tag, "C")] - first[(tag, "A")]
        for tag, source in first
        if source == "A" and (tag, "C") in first
    ]
    over = sum(s > timedelta(hours=10) for s in spans)
    assert 0.01 * len(spans) < over < 0.5 * len(spans)
    readers = Counter(src for _, src in first)
    assert readers["A"] > readers["B"] > readers["C"] > readers["D"]  # some tags get lost


def test_compute_truth_semantics_on_a_hand_made_case() -> None:
    h = 3_600_000
    events = [
        # tag 1: A B C within 10 h, then A B C in 11 h (too slow), then A A B C -> one match
        ("e01", "t1", "A", 0),
        ("e02", "t1", "B", 1 * h),
        ("e03", "t1", "C", 10 * h),
        ("e04", "t1", "A", 20 * h),
        ("e05", "t1", "B", 21 * h),
        ("e06", "t1", "C", 31 * h + 1),
        ("e07", "t1", "A", 40 * h),
        ("e08", "t1", "A", 41 * h),
        ("e09", "t1", "B", 42 * h),
        ("e10", "t1", "C", 43 * h),
        ("e11", "t1", "D", 44 * h),
        # tag 2: equal times are ordered by event id; the window [t(D) - 24 h, t(D)) keeps
        # x3/x4 (x3 is exactly 24 h before D) but not x1/x2 (before) nor x6/x7 (at t(D))
        ("x2", "t2", "B", 5),
        ("x1", "t2", "A", 5),
        ("x3", "t2", "A", 10),
        ("x4", "t2", "B", 11),
        ("x5", "t2", "D", 10 + 24 * h),
        ("x7", "t2", "B", 10 + 24 * h),
        ("x6", "t2", "A", 10 + 24 * h),
    ]
    truth = compute_truth(events)
    assert truth["rfid_abc"] == [["e01", "e02", "e03"], ["e08", "e09", "e10"]]
    assert truth["rfid_transit"] == [
        ["e11", "e04", "e05"],
        ["e11", "e08", "e09"],
        ["x5", "x3", "x4"],
    ]


# --- arrival-order imperfections --------------------------------------------------------


def test_late_lines_arrive_files_after_their_neighbours(data: GenerationSummary) -> None:
    m = data.lines
    anchor = m[~m["copy"] & ~m["late"] & ~m["out_of_order"]]
    anchor = anchor.sort_values("event_time_ms", kind="stable")
    times = anchor["event_time_ms"].to_numpy()
    files = anchor["file"].to_numpy()
    late = m[m["late"]]
    assert len(late) > 50
    checked = 0
    for t, f in zip(late["event_time_ms"], late["file"], strict=True):
        k = int(np.searchsorted(times, t))
        neighbours = files[max(0, k - 5) : k + 5]
        home = int(np.median(neighbours))
        assert f >= home
        if home < data.counts["files"] - 6:
            assert f > home, (t, f, home)
            checked += 1
    assert checked > 30


def test_in_order_lines_are_in_event_time_order(data: GenerationSummary) -> None:
    m = data.lines
    steady = m[~m["copy"] & ~m["late"] & ~m["out_of_order"]]
    assert steady["event_time_ms"].is_monotonic_increasing
    shuffled = m[m["out_of_order"]]
    assert len(shuffled) > 100
    # out-of-order lines really break the order of their file
    inversions = 0
    for _, group in m.groupby("file"):
        t = group["event_time_ms"].to_numpy()
        inversions += int((np.diff(t) < 0).sum())
    assert inversions > len(shuffled) // 4


def test_poisson_entry_at_reader_a(tmp_path: Path) -> None:
    summary = generate(
        tmp_path / "l",
        tmp_path / "t",
        events=20_000,
        seed=3,
        rate_per_hour=50.0,
        lost_share=0.0,
        reread_share=0.0,
        duplicate_share=0.0,
        malformed_share=0.0,
        missing_share=0.0,
        wrong_type_share=0.0,
        oversized_share=0.0,
    )
    entries = sorted(
        e.event_time
        for p in summary.files
        for raw in p.read_text().splitlines()
        if isinstance(e := parse_line(raw), ParsedEvent) and e.source_id == "A"
    )
    assert len(entries) == summary.counts["tags"] >= 4500
    gaps = [(b - a).total_seconds() / 3600 for a, b in zip(entries, entries[1:], strict=False)]
    mean = statistics.fmean(gaps)
    cv = statistics.pstdev(gaps) / mean
    assert abs(mean - 1 / 50.0) < 0.1 / 50.0
    assert abs(cv - 1.0) < 0.06


# --- determinism, options ---------------------------------------------------------------


def _digest(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}


def test_same_seed_same_bytes_other_seed_other_bytes(tmp_path: Path) -> None:
    kwargs = {"events": 3000, "lines_per_file": 400, "uncertain_share": 0.1}
    a = generate(tmp_path / "a", tmp_path / "ta", seed=5, **kwargs)
    b = generate(tmp_path / "b", tmp_path / "tb", seed=5, **kwargs)
    c = generate(tmp_path / "c", tmp_path / "tc", seed=6, **kwargs)
    assert _digest(a.landing_dir) == _digest(b.landing_dir)
    assert a.truth_path.read_bytes() == b.truth_path.read_bytes()
    assert _digest(a.landing_dir) != _digest(c.landing_dir)


def test_progress_and_overwrite(tmp_path: Path) -> None:
    calls: list[tuple[int, int]] = []
    s = generate(
        tmp_path / "l",
        tmp_path / "t",
        events=1000,
        lines_per_file=300,
        progress=lambda done, total: calls.append((done, total)),
    )
    n = s.counts["files"]
    assert calls == [(i, n) for i in range(1, n + 1)]
    with pytest.raises(FileExistsError):
        generate(tmp_path / "l", tmp_path / "t", events=1000)
    again = generate(tmp_path / "l", tmp_path / "t", events=500, overwrite=True)
    assert len(list((tmp_path / "l").iterdir())) == again.counts["files"]
    assert not list((tmp_path / "l").glob(".*"))  # no temporary files left behind


def test_uncertain_events_are_valid(tmp_path: Path) -> None:
    s = generate(tmp_path / "l", tmp_path / "t", events=2000, uncertain_share=0.5, seed=2)
    uncertain = [
        e
        for p in s.files
        for raw in p.read_text().splitlines()
        if isinstance(e := parse_line(raw), ParsedEvent) and e.time_lower is not None
    ]
    assert len(uncertain) > 500
    assert any(e.pmf for e in uncertain)
    assert all(e.time_lower <= e.event_time <= e.time_upper for e in uncertain)


def test_bad_arguments(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        generate(tmp_path / "l", tmp_path / "t", duplicate_share=1.5)
    with pytest.raises(ValueError):
        generate(tmp_path / "l", tmp_path / "t", transit_distribution="gamma")


def test_start_is_respected(tmp_path: Path) -> None:
    start = datetime(2030, 6, 1, 12, tzinfo=UTC)
    s = generate(tmp_path / "l", tmp_path / "t", events=500, start=start)
    first = parse_line(s.files[0].read_text().splitlines()[0])
    assert isinstance(first, ParsedEvent)
    assert start <= first.event_time < start + timedelta(hours=2)


def test_parse_frame_over_the_files_gives_the_truth_counts(data: GenerationSummary) -> None:
    import pandas as pd

    from lakecep.events import parse_frame

    raw = pd.Series([line for p in data.files for line in p.read_text().split("\n")[:-1]])
    frame = parse_frame(raw, 65536)
    ok = frame[frame["ok"]]
    assert ok["event_id"].nunique() == data.counts["valid_events"]
    assert len(ok) - ok["event_id"].nunique() == data.counts["duplicates"]
    codes = frame.loc[~frame["ok"], "reason"].str.split(":").str[0].value_counts().to_dict()
    assert codes == data.counts["rejected_by_reason_code"]
    assert str(ok["event_time"].dtype) == "datetime64[ns, UTC]"
