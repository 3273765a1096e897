"""``lakecep report``: the page's sections and numbers against the input frames, a home with
nothing in it, sections that cannot be read, and no external URL. The lake is written with
delta-rs (real Delta tables with the real schemas, no Spark)."""

from __future__ import annotations

import base64
import json
import re
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from report_lake import build_lake, write_table

from lakecep.config import load_settings
from lakecep.jobs.cli import main
from lakecep.report import REPORT_NAME, build, fmt

#: Anything that would make the browser fetch from the network.
EXTERNAL = re.compile(r"(?i)\b(https?|ftp|wss?):|(src|href)\s*=\s*[\"']?//|<script|<link|@import"
                      r"|url\(")


class _Page(HTMLParser):
    """Per section (its id): status, tables (rows of cell texts, header first), images
    (src, alt) and links (href)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.sections: dict[str, dict] = {}
        self._section: dict | None = None
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "section":
            self._section = {"status": a["data-status"], "tables": [], "images": [],
                             "links": [], "text": []}
            self.sections[str(a["id"])] = self._section
        elif self._section is None:
            return
        elif tag == "table":
            self._section["tables"].append([])
        elif tag == "tr":
            self._section["tables"][-1].append([])
        elif tag in ("td", "th"):
            self._cell = []
        elif tag == "img":
            self._section["images"].append((a.get("src"), a.get("alt")))
        elif tag == "a":
            self._section["links"].append(a.get("href"))

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None and self._section is not None:
            self._section["tables"][-1][-1].append("".join(self._cell).strip())
            self._cell = None
        elif tag == "section":
            self._section = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)
        if self._section is not None:
            self._section["text"].append(data)


def parse(path: Path) -> dict[str, dict]:
    page = _Page()
    page.feed(path.read_text(encoding="utf-8"))
    for section in page.sections.values():
        section["text"] = " ".join("".join(section["text"]).split())
    return page.sections


def records(table: list[list[str]]) -> dict[str, dict[str, str]]:
    """A parsed table as {first cell: {header: cell}}."""
    header, *rows = table
    return {row[0]: dict(zip(header, row, strict=True)) for row in rows}


@pytest.fixture()
def lake(tmp_path: Path) -> tuple[Path, dict[str, pd.DataFrame]]:
    home = tmp_path / "home"
    return home, build_lake(home)


def test_sections_show_the_numbers_of_the_input(
    lake: tuple[Path, dict[str, pd.DataFrame]]
) -> None:
    home, frames = lake
    report = build(load_settings({"LAKECEP_HOME": str(home)}))
    assert report.path == home / "reports" / REPORT_NAME
    sections = parse(report.path)
    assert list(sections) == ["tables", "complex-events", "latency", "quarantine", "quality",
                              "archive", "tuning", "windows", "data-docs"]
    assert {k: s["status"] for k, s in sections.items()} == dict.fromkeys(sections, "ok")

    overview = records(sections["tables"]["tables"][0])
    assert {name: row["rows"] for name, row in overview.items()} == {
        name: fmt(len(frame)) for name, frame in frames.items()}

    # complex events per query (the current answer), first and last by end time (else
    # detection time)
    events = frames["gold.complex_events"]
    assert events["superseded_version"].notna().sum() == 2
    notes = {s.id: s.note for s in report.sections}
    assert notes["complex-events"].endswith("; 2 superseded by late events (not shown)")
    current = events[events["superseded_version"].isna()]
    when = pd.to_datetime(current["end_time"], utc=True).fillna(current["detection_time"])
    shown = records(sections["complex-events"]["tables"][0])
    for query, group in current.assign(t=when).groupby("query_id"):
        assert shown[query]["complex events"] == str(len(group))
        assert shown[query]["first"] == fmt(group["t"].min())
        assert shown[query]["last"] == fmt(group["t"].max())
        assert shown[query]["timed by detection"] == str(int(group["end_time"].isna().sum()))
    assert set(shown) == {"rfid_abc", "rfid_transit"}
    assert shown["rfid_transit"]["timed by detection"] == "1"

    # latency percentiles (linear, as numpy's default) over the rows that have one
    shown = records(sections["latency"]["tables"][0])
    for query, group in events.groupby("query_id"):
        latencies = group["detection_latency_ms"].dropna().astype(float).to_numpy()
        assert shown[query]["with latency"] == str(len(latencies)) == str(len(group) - 1)
        for p in (50, 95, 99):
            assert shown[query][f"p{p} (ms)"] == fmt(np.percentile(latencies, p)), (query, p)
        assert shown[query]["max (ms)"] == fmt(int(latencies.max()))

    # quarantine reasons by code (the text before ':')
    quarantine = frames["silver.quarantine"]
    expected = quarantine["reason"].str.split(":").str[0].value_counts().to_dict()
    shown = records(sections["quarantine"]["tables"][0])
    assert {code: int(row["rows"]) for code, row in shown.items()} == expected == {
        "malformed_json": 4, "missing_field": 2, "wrong_type": 1}
    assert list(shown) == ["malformed_json", "missing_field", "wrong_type"]  # most first

    # quality: the latest run of each table, pass/fail, and what failed
    quality = sections["quality"]["tables"]
    latest = records(quality[0])
    assert {t: (r["run"], r["passed"], r["status"]) for t, r in latest.items()} == {
        "bronze.events": ("run-1", "10/10", "pass"), "silver.events": ("run-2", "12/13", "FAIL")}
    failed = quality[1][1:]
    assert failed == [["silver.events", "expect_check_04(event_id)", "2", "100",
                       '{"partial_unexpected_list": ["e1", "e1"]}']]

    # live-archive cost per strategy: sums over the batches
    access = frames["gold.archive_access"]
    shown = records(sections["archive"]["tables"][0])
    sums = access.groupby("strategy")[["rows_loaded", "delta_files_read", "delta_files_total",
                                       "loads"]].sum()
    assert list(shown) == sorted(sums.index)
    for strategy, row in sums.iterrows():
        assert shown[strategy]["rows loaded"] == fmt(int(row["rows_loaded"]))
        assert shown[strategy]["Delta files read"] == fmt(int(row["delta_files_read"]))
        assert shown[strategy]["Delta files total"] == fmt(int(row["delta_files_total"]))
        assert shown[strategy]["batches"] == str(int((access["strategy"] == strategy).sum()))
    assert shown["ALAA"]["rows loaded"] == "750"

    # the tuned allocation in force: the newest version (v2), its pools and weights
    tuning = sections["tuning"]["tables"]
    facts = {row[0]: row[1] for row in tuning[0][1:]}
    assert facts["version"] == "v2 (config-v2.json)"
    assert facts["max files per trigger (gold)"] == "5"
    assert facts["statistics run"] == "stats-2"
    pools = records(tuning[1])
    assert {p: (r["weight"], r["query"]) for p, r in pools.items()} == {
        "q_rfid_abc": ("1,000", "rfid_abc"), "q_rfid_transit": ("613", "rfid_transit")}

    # window outputs
    windows = frames["gold.window_outputs"]
    row = records(sections["windows"]["tables"][0])["price_hourly"]
    assert (row["keys"], row["windows"], row["rows"], row["max revision"]) == (
        str(windows["key"].nunique()), str(len(windows)), str(len(windows)),
        str(windows["revision"].max()))

    # Data Docs: a relative link that resolves to the index
    (href,) = sections["data-docs"]["links"]
    assert href == "data_docs/index.html"
    assert (report.path.parent / href).resolve() == home / "reports/data_docs/index.html"

    # plots: one inline PNG per plotting section, nothing else
    images = [(k, src) for k, s in sections.items() for src, _ in s["images"]]
    assert [k for k, _ in images] == ["complex-events", "latency", "quarantine", "archive",
                                      "tuning"]
    assert sum(s.plots for s in report.sections) == len(images)
    for _, src in images:
        assert src.startswith("data:image/png;base64,")
        assert base64.b64decode(src.split(",", 1)[1])[:8] == b"\x89PNG\r\n\x1a\n"
    assert EXTERNAL.search(report.path.read_text()) is None


def test_cli_writes_where_asked_and_links_data_docs_from_there(
    lake: tuple[Path, dict[str, pd.DataFrame]], tmp_path: Path,
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
) -> None:
    home, _ = lake
    monkeypatch.setenv("LAKECEP_HOME", str(home))
    out = tmp_path / "elsewhere" / "deep" / "lake.html"
    assert main(["report", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    # the console wraps a long path (pytest-xdist's tmp paths are longer): compare unwrapped
    assert f"wrote {out}" in printed.replace("\n", "")
    assert "Detection latency: p95: rfid_abc" in printed
    (href,) = parse(out)["data-docs"]["links"]
    assert href.startswith("../../") and (out.parent / href).resolve() == \
        home / "reports/data_docs/index.html"
    # a folder as --out: the default file name in it; --json for scripts
    assert main(["report", "--out", str(tmp_path), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["path"] == str(tmp_path / REPORT_NAME) and (tmp_path / REPORT_NAME).is_file()
    assert {s["id"]: s["plots"] for s in result["sections"] if s["plots"]} == {
        "complex-events": 1, "latency": 1, "quarantine": 1, "archive": 1, "tuning": 1}
    # a name without a suffix gets .html (a browser would show a suffix-less file as text)
    assert main(["report", "--out", str(tmp_path / "summary"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["path"] == str(tmp_path / "summary.html")
    assert (tmp_path / "summary.html").is_file() and not (tmp_path / "summary").exists()


def test_a_home_with_nothing_says_what_to_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LAKECEP_HOME", str(tmp_path / "fresh"))
    assert main(["report"]) == 0
    path = tmp_path / "fresh" / "reports" / REPORT_NAME
    assert f"wrote {path}" in capsys.readouterr().out.replace("\n", "")
    sections = parse(path)
    assert {k: s["status"] for k, s in sections.items()} == dict.fromkeys(sections, "missing")
    text = {k: s["text"] for k, s in sections.items()}
    assert "gold.complex_events not produced yet: run lakecep run gold." in text["latency"]
    assert "silver.quarantine not produced yet: run lakecep run silver." in text["quarantine"]
    assert "run lakecep run quality" in text["quality"] and "run lakecep run quality" in \
        text["data-docs"]
    assert "with a live-archive query" in text["archive"]
    assert "lakecep run statistics && lakecep run tune" in text["tuning"]
    assert "with a window query" in text["windows"]
    assert all(not s["images"] for s in sections.values())
    assert EXTERNAL.search(path.read_text()) is None


def test_unreadable_and_empty_parts_stay_in_their_sections(tmp_path: Path) -> None:
    home = tmp_path / "home"
    frames = build_lake(home)
    # an empty table, a table delta-rs cannot open, a newest tuned configuration that is
    # not JSON, and tuning switched off in a second settings object
    empty = frames["gold.complex_events"].iloc[0:0]
    write_table(home, "gold.window_outputs", frames["gold.window_outputs"])  # a 2nd version
    import shutil

    shutil.rmtree(home / "lake/gold/complex_events")
    write_table(home, "gold.complex_events", empty)
    broken = home / "lake/gold/archive_access/_delta_log"
    for log in broken.iterdir():
        log.write_text("not json")
    (home / "tuning" / "config-v3.json").write_text("{")
    report = build(load_settings({"LAKECEP_HOME": str(home)}))
    sections = parse(report.path)
    status = {k: s["status"] for k, s in sections.items()}
    assert status == {"tables": "ok", "complex-events": "empty", "latency": "empty",
                      "quarantine": "ok", "quality": "ok", "archive": "error",
                      "tuning": "error", "windows": "ok", "data-docs": "ok"}
    assert "gold.archive_access cannot be read" in sections["archive"]["text"]
    assert "TuningError" in sections["tuning"]["text"] and "config-v3.json" in \
        sections["tuning"]["text"]
    assert "gold.complex_events has no rows yet" in sections["latency"]["text"]
    overview = records(sections["tables"]["tables"][0])
    assert overview["gold.window_outputs"]["Delta version"] == "1"
    assert overview["gold.window_outputs"]["rows"] == str(2 * len(frames["gold.window_outputs"]))
    assert overview["gold.archive_access"]["rows"] == "cannot be read"

    off = build(load_settings({"LAKECEP_HOME": str(home), "LAKECEP_TUNING_APPLY": "false"}),
                tmp_path / "off.html")
    assert parse(off.path)["tuning"]["status"] == "off"


@settings(max_examples=8, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(latencies=st.lists(st.integers(0, 10**7), min_size=1, max_size=40),
       missing=st.integers(0, 3))
def test_latency_percentiles_equal_numpy(tmp_path: Path, latencies: list[int],
                                         missing: int) -> None:
    """Differential: the page's p50/p95/p99 are numpy's linear percentiles of the latencies
    that are not null, whatever the latencies are."""
    import uuid

    home = tmp_path / uuid.uuid4().hex
    values = [*latencies, *([None] * missing)]
    now = pd.Timestamp("2026-11-20T08:00:00", tz="UTC")
    frame = pd.DataFrame({
        "query_id": "q", "query_version": "v1", "match_id": [f"m{i}" for i in
                                                             range(len(values))],
        "partition_key": "k", "match_number": 1, "start_time": now, "end_time": now,
        "measures": [[]] * len(values), "live_event_ids": [[]] * len(values),
        "archive_event_ids": [[]] * len(values), "history_version": None, "strategy": None,
        "probability": None, "detection_time": now,
        "detection_latency_ms": pd.array(values, dtype="Int64"), "batch_id": 0,
        "superseded_version": pd.array([None] * len(values), dtype="Int64"),
        "rule_hash": "0123456789abcdef"})
    write_table(home, "gold.complex_events", frame)
    report = build(load_settings({"LAKECEP_HOME": str(home)}))
    row = records(parse(report.path)["latency"]["tables"][0])["q"]
    assert row["with latency"] == fmt(len(latencies))
    for p in (50, 95, 99):
        # DuckDB's quantile_cont and numpy may differ in the last bits (243.55 vs
        # 243.5499...), so the shown value is numpy's to within the page's rounding
        shown = float(row[f"p{p} (ms)"].replace(",", ""))
        expected = float(np.percentile(latencies, p))
        assert abs(shown - expected) <= 0.05 + 1e-9 * abs(expected), (p, shown, expected)
