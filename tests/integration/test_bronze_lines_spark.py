"""Every landed line is exactly one bronze row, judged the way ``lakecep.events`` judges it
(issue 20): real Spark for bronze, real bronze + silver streams for the reconciliation."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from landing_files import BOM, EVENT, build, expected_bronze, landing_file

from lakecep.events import parse_line
from lakecep.jobs import bronze, silver
from lakecep.jobs.status import count_landed_lines, lake_status
from lakecep.jobs.tables import LakeTable

pytestmark = pytest.mark.spark

MAX_LINE_BYTES = 65536


def read_landing(spark, landing: Path):  # noqa: ANN001, ANN201
    """The landing folder as the bronze stream sees it, read as a batch."""
    return (spark.read.format("text").option("wholetext", "true").load(str(landing))
            .selectExpr("value", "_metadata.file_path AS file_path"))


@settings(max_examples=6, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.lists(landing_file(max_lines=12), min_size=1, max_size=12))
@example([  # every kind named in issue 20, whatever hypothesis draws
    build([EVENT, b""], bom=False, final_newline=True),  # '...}\n\n' (the lost line)
    build([b"", b"\t", EVENT + b"\r", b"\r", b"a\rb", b""], bom=True, final_newline=False),
    build([b"\xff" * (1 << 20), EVENT + b" x", b"\x00"], bom=False, final_newline=False),
    build([b" " * (1 << 20), EVENT + EVENT, "\u3000".encode()], bom=True, final_newline=True),
    build([], bom=False, final_newline=False),
    build([], bom=True, final_newline=False),
])
def test_bronze_rows_are_the_landed_lines_with_their_status(
    spark, tmp_path_factory: pytest.TempPathFactory, files: list  # noqa: ANN001
) -> None:
    """Differential, class-wide: arbitrary byte files (blank lines anywhere, \\r\\n, lone \\r,
    no final newline, NUL, invalid UTF-8, BOM, lines up to 1 MB) -> one Spark job for the
    whole batch -> bronze rows = the lines by construction, each with the status that
    ``parse_line`` gives its bytes; silver's parse step quarantines exactly the rows bronze
    did not pass, with the same reason."""
    landing = tmp_path_factory.mktemp("landing")
    for n, file in enumerate(files):
        (landing / f"f{n:02d}.jsonl").write_bytes(file.data)

    rows = bronze.bronze_frame(read_landing(spark, landing), MAX_LINE_BYTES).toPandas()

    expected = sum(len(f.lines) for f in files)
    assert len(rows) == expected == count_landed_lines(landing)
    rows["name"] = [Path(p).name for p in rows["source_file"]]
    for n, file in enumerate(files):
        got = rows[rows["name"] == f"f{n:02d}.jsonl"].sort_values("line_no")
        assert got["line_no"].tolist() == list(range(1, len(file.lines) + 1))
        for line, row in zip(file.lines, got.itertuples(), strict=True):
            want = expected_bronze(line, MAX_LINE_BYTES)
            assert (row.raw, row.byte_length, row.parse_status, row.parse_error) == want, (
                n, row.line_no, line[:200])

    # silver's mapInPandas function, on exactly these bronze rows (no Spark needed).
    frame = rows.drop(columns="name").reset_index(drop=True)
    (parsed,) = silver.parse_batches(MAX_LINE_BYTES)(iter([frame]))
    lines = [line for f in files for line in f.lines]
    order = {(Path(p).name, k): i for i, (p, k) in enumerate(
        (f"f{n:02d}.jsonl", k + 1) for n, f in enumerate(files) for k in range(len(f.lines)))}
    for row in parsed.itertuples():
        result = parse_line(lines[order[(Path(row.source_file).name, row.line_no)]],
                            MAX_LINE_BYTES)
        assert row.reason == getattr(result, "reason", None)
        assert row.ok == (row.reason is None)


def event(n: int, **overrides: object) -> str:
    record = {"event_id": f"ev-{n}", "object_id": f"tag-{n % 3}", "event_type": "read",
              "source_id": "A", "event_time": f"2026-01-01T0{n % 10}:00:00Z", **overrides}
    return json.dumps(record)


def test_status_strict_passes_on_blank_whitespace_and_garbage_lines(
    spark, settings, tmp_path: Path  # noqa: ANN001
) -> None:
    """The real bronze and silver streams over a landing with the lines of issue 20:
    ``lakecep status --strict`` (``lake_status(...).ok``) passes, reason by reason."""
    local = dataclasses.replace(settings, home=tmp_path)
    local.landing.mkdir(parents=True)
    files = {
        # regression (issue 20): a file ending in a blank line lost its last line
        "a-blank-end.jsonl": (event(1) + "\n\n").encode(),
        "b-whitespace.jsonl": "\n".join(
            ["\t", "\r", "\x0c", "\u3000", " ", event(2), ""]).encode(),
        "c-garbage.jsonl": "\n".join(
            [event(3) + " x", event(4) + " // note", event(5) + event(6), event(7) + ",",
             '{"a":1,"a":2}', event(8)]).encode(),
        "d-crlf-bom.jsonl": BOM + (event(9) + "\r\n" + event(1) + "\r\n\r\n").encode(),
        "e-bytes.jsonl": event(10).encode().replace(b"ev-10", b"ev-\xff") + b"\n"
        + EVENT.replace(b"tag-1", b"tag\x001") + b"\n\xe2\x82",
        "f-empty.jsonl": b"",
    }
    for name, data in files.items():
        (local.landing / name).write_bytes(data)

    bronze.run(spark, local)
    silver.run(spark, local)

    def table(name: str) -> pd.DataFrame:
        frame = LakeTable(spark, local, name).read().toPandas()
        frame["name"] = [Path(p).name for p in frame["source_file"]]
        return frame

    rows = table("bronze.events")
    got = {(r.name, r.line_no): r.parse_status for r in rows.itertuples()}
    assert got[("a-blank-end.jsonl", 2)] == "empty_line"
    assert {k: v for k, v in got.items() if k[0] == "a-blank-end.jsonl"} == {
        ("a-blank-end.jsonl", 1): "ok", ("a-blank-end.jsonl", 2): "empty_line"}
    assert [got[("b-whitespace.jsonl", k)] for k in range(1, 7)] == ["empty_line"] * 5 + ["ok"]
    assert [got[("c-garbage.jsonl", k)] for k in range(1, 7)] == ["malformed_json"] * 5 + ["ok"]
    assert [got[("d-crlf-bom.jsonl", k)] for k in range(1, 4)] == ["ok", "ok", "empty_line"]
    assert [got[("e-bytes.jsonl", k)] for k in range(1, 4)] == [
        "invalid_utf8", "malformed_json", "invalid_utf8"]
    assert len(rows) == sum(len(data.split(b"\n")) - data.endswith(b"\n")
                            for data in files.values() if data) == 20

    quarantine = table("silver.quarantine")
    reasons = {(r.name, r.line_no): r.reason for r in quarantine.itertuples()}
    offset = files["e-bytes.jsonl"].index(b"\xff")
    assert reasons[("e-bytes.jsonl", 1)] == (
        f"invalid_utf8: 0xFF at byte offset {offset} is not UTF-8")
    assert reasons[("c-garbage.jsonl", 5)] == "malformed_json: duplicate key 'a'"
    assert {r.name for r in table("silver.duplicates").itertuples()} == {"d-crlf-bom.jsonl"}

    status = lake_status(spark, local)
    assert status.ok, str(status)
    assert status.counts["landing (lines)"] == 20
    (check,) = [c for c in status.checks if c.name.startswith("bronze status")]
    assert "empty_line 7 = 7" in check.detail and "invalid_utf8 2 = 2" in check.detail


def test_silver_parse_through_arrow_equals_the_pandas_path(spark, tmp_path: Path) -> None:  # noqa: ANN001
    """Differential: silver's ``mapInArrow`` parse (``silver.arrow_batches``, what
    ``process_batch`` runs) gives exactly the rows of the ``mapInPandas`` path it replaced
    (``parse_batches`` with PySpark's conversion) on the same bronze rows -- generated
    events with every defect the generator makes, plus times with nanoseconds, time
    zones, uncertain times with a pmf, attributes with unicode and huge numbers. Only
    ``raw`` differs by design: NULL for rows that passed (silver.events does not keep it)."""
    from lakecep.generate import generate

    landing = tmp_path / "landing"
    generate(landing, tmp_path / "truth", events=3000, seed=11)
    base = {"object_id": "tag-1", "event_type": "read", "source_id": "A"}
    extra = [
        {**base, "event_id": "x1", "event_time": "2026-01-01T00:00:00.123456789Z"},
        {**base, "event_id": "x2", "event_time": "2026-01-01T01:00:00+05:30",
         "attributes": {"zone": "Zürich ✓", "big": 10**30, "f": 1.5e308}},
        {**base, "event_id": "x3", "event_time": "2026-01-01T00:00:01Z",
         "time_lower": "2026-01-01T00:00:00Z",
         "time_upper": "2026-01-01T00:00:02Z", "pmf": [0.25, 0.5, 0.25]},
        {**base, "event_id": "x4", "event_time": "2026-01-01T00:00:00Z", "attributes": {}},
    ]
    (landing / "zz-extra.jsonl").write_text(
        "\n".join([*map(json.dumps, extra), '{"event_id": NaN}', "[1, 2]"]) + "\n")
    rows = bronze.bronze_frame(read_landing(spark, landing), MAX_LINE_BYTES).persist()
    try:
        old = rows.mapInPandas(silver.parse_batches(MAX_LINE_BYTES), silver.PARSED_DDL)
        new = rows.select(*silver.PARSE_INPUT).mapInArrow(
            silver.arrow_batches(MAX_LINE_BYTES, silver.arrow_schema()),
            silver.PARSED_DDL)
        key = ["source_file", "line_no"]
        old_rows = old.toPandas().sort_values(key).reset_index(drop=True)
        new_rows = new.toPandas().sort_values(key).reset_index(drop=True)
    finally:
        rows.unpersist()
    assert len(new_rows) == len(old_rows) > 3000
    ok = old_rows["ok"].astype(bool)
    assert ok.sum() > 2500 and (~ok).sum() > 20  # both kinds are really compared
    assert new_rows.loc[ok, "raw"].isna().all()
    assert new_rows.loc[~ok, "raw"].tolist() == old_rows.loc[~ok, "raw"].tolist()

    def values(frame: pd.DataFrame, name: str) -> list:
        return [v.tolist() if hasattr(v, "tolist") else v for v in frame[name]]

    for name in silver.PARSED_DDL_COLUMNS:
        if name != "raw":
            assert values(new_rows, name) == values(old_rows, name), name
    by_id = new_rows.set_index("event_id")
    assert by_id.loc["x1", "event_time"] == pd.Timestamp("2026-01-01T00:00:00.123456")
    assert by_id.loc["x3", "pmf"].tolist() == [0.25, 0.5, 0.25]
    assert dict(by_id.loc["x2", "attributes"])["zone"] == "Zürich ✓"
