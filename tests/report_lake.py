"""A tiny lake for the ``lakecep report`` tests, written with delta-rs (no Spark): small
pandas frames with the real table schemas of ``schemas/tables.json``, a tuned
configuration and a Data Docs index. ``build_lake`` returns the frames it wrote, so a test
can compute the expected numbers from the input."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd

from lakecep import schemas


def _arrow_type(text: str):  # noqa: ANN202 - a pyarrow DataType
    import pyarrow as pa

    text = text.strip().upper()
    scalars = {"STRING": pa.string(), "BIGINT": pa.int64(), "INT": pa.int32(),
               "DOUBLE": pa.float64(), "BOOLEAN": pa.bool_(),
               "TIMESTAMP": pa.timestamp("us", tz="UTC")}
    if text in scalars:
        return scalars[text]
    if text.startswith("ARRAY<"):
        return pa.list_(_arrow_type(text[6:-1]))
    if text.startswith("MAP<"):
        key, value = text[4:-1].split(",", 1)
        return pa.map_(_arrow_type(key), _arrow_type(value))
    raise ValueError(f"no arrow type for {text!r}")


def arrow_schema(name: str):  # noqa: ANN201 - a pyarrow Schema
    """The pyarrow schema of a lake table, from its DDL (NOT NULL -> not nullable)."""
    import pyarrow as pa

    parts, depth, current = [], 0, ""
    for ch in schemas.ddl(name) + ",":
        depth += ch == "<"
        depth -= ch == ">"
        if ch == "," and depth == 0:
            parts.append(current.strip())
            current = ""
        else:
            current += ch
    fields = []
    for part in parts:
        column, rest = part.split(" ", 1)
        not_null = bool(re.search(r"\s+NOT NULL$", rest))
        fields.append(pa.field(column, _arrow_type(re.sub(r"\s+NOT NULL$", "", rest)),
                               nullable=not not_null))
    return pa.schema(fields)


def write_table(home: Path, name: str, frame: pd.DataFrame) -> None:
    """Append ``frame`` (every column of the table) to the Delta table ``name`` under
    ``home``'s lake, with the table's real schema."""
    import pyarrow as pa
    from deltalake import write_deltalake

    schema = arrow_schema(name)
    assert list(frame.columns) == schema.names, (name, list(frame.columns))
    layer, table = name.split(".")
    data = pa.Table.from_pandas(frame, schema=schema, preserve_index=False)
    write_deltalake(str(home / "lake" / layer / table), data, mode="append")


def _times(start: str, minutes: list[float]) -> pd.Series:
    return pd.Timestamp(start, tz="UTC") + pd.to_timedelta(minutes, unit="min")


def build_lake(home: Path, seed: int = 3) -> dict[str, pd.DataFrame]:
    """Write every table the report reads, a tuned configuration (v1 and v2) and a Data Docs
    index under ``home``; return the frames written, by table name."""
    rng = np.random.default_rng(seed)
    frames: dict[str, pd.DataFrame] = {}

    counts = {"rfid_abc": 23, "rfid_transit": 9}
    rows = []
    for query, n in counts.items():
        minutes = np.sort(rng.uniform(0, 600, n))
        latency = rng.integers(50, 20_000, n).astype(object)
        latency[0] = None  # a match without a latency: not in the percentiles
        for i in range(n):
            end = _times("2026-11-20T08:00:00", [minutes[i]])[0].floor("s")
            rows.append({
                "query_id": query, "query_version": "v1", "match_id": f"{query}-{i}",
                "partition_key": f"tag-{i % 5}", "match_number": i + 1,
                "start_time": end - pd.Timedelta(minutes=30),
                "end_time": None if (query == "rfid_transit" and i == 3) else end,
                "measures": [("a_time", str(end))], "live_event_ids": [f"e{i}"],
                "archive_event_ids": [] if query == "rfid_abc" else [f"h{i}"],
                "history_version": None if query == "rfid_abc" else 4,
                "strategy": None if query == "rfid_abc" else "LLAA", "probability": None,
                "detection_time": end + pd.Timedelta(minutes=5),
                "detection_latency_ms": latency[i], "batch_id": i // 4,
                # two matches a late event broke: not in the current answer
                "superseded_version": 7 if (query == "rfid_abc" and i in (5, 6)) else None,
                "rule_hash": f"{query[:4]}0123456789ab"})
    frames["gold.complex_events"] = pd.DataFrame(rows)

    reasons = (["malformed_json: Expecting value: line 1 column 1 (char 0)"] * 4
               + ["missing_field: event_time"] * 2
               + ["wrong_type: amount: 'abc' is not a number (double)"])
    frames["silver.quarantine"] = pd.DataFrame({
        "raw": [f"line {i}" for i in range(len(reasons))],
        "source_file": "landing/events/events-0001.jsonl",
        "line_no": np.arange(1, len(reasons) + 1), "ingest_time": _times(
            "2026-11-20T08:00:00", [0] * len(reasons)),
        "reason": reasons, "quarantine_time": _times("2026-11-20T08:01:00",
                                                     [0] * len(reasons))})

    quality = []
    for run, at, broken in (("run-1", "2026-11-20T09:00:00", False),
                            ("run-2", "2026-11-20T10:00:00", True)):
        for table, n in (("silver.events", 13), ("bronze.events", 10)):
            if table == "bronze.events" and run == "run-2":
                continue  # bronze's latest run is run-1
            for k in range(n):
                bad = broken and table == "silver.events" and k == 4
                quality.append({
                    "run_id": run, "table_name": table, "suite": table,
                    "expectation": f"expect_check_{k:02d}",
                    "column_name": "event_id" if k == 4 else None, "success": not bad,
                    "element_count": 100, "unexpected_count": 2 if bad else 0,
                    "observed": json.dumps({"partial_unexpected_list": ["e1", "e1"]} if bad
                                           else {}),
                    "validated_at": pd.Timestamp(at, tz="UTC")})
    frames["gold.quality_results"] = pd.DataFrame(quality)

    access = []
    for batch, strategy, rows_loaded, files_read in ((0, "ALAA", 400, 6), (1, "ALAA", 350, 6),
                                                     (2, "LLAA", 40, 1), (3, "OLLAA", 0, 0)):
        access.append({
            "query_id": "rfid_transit", "query_version": "v1", "batch_id": batch,
            "history_version": batch + 3, "strategy": strategy, "reason": "test",
            "live_matches": 3, "loads": 2, "buffer_loads": 1, "rows_loaded": rows_loaded,
            "rows_from_buffer": 5, "delta_files_read": files_read, "delta_files_total": 6,
            "delta_rows_scanned": rows_loaded * 2, "complex_events": 2, "partial_hits": 1,
            "partial_misses": 0, "partial_open_misses": 0, "partial_new_keys": 1,
            "partial_spilled": 0, "replayed_keys": 0, "seconds": 0.5 + batch,
            "detection_time": pd.Timestamp("2026-11-20T09:00:00", tz="UTC")})
    frames["gold.archive_access"] = pd.DataFrame(access)

    windows = []
    for w in range(3):
        for key in ("AAPL", "MSFT"):
            start = pd.Timestamp("2026-11-20T08:00:00", tz="UTC") + pd.Timedelta(hours=w)
            windows.append({
                "query_id": "price_hourly", "query_version": "v1", "key": key,
                "window_kind": "tumbling", "window_start": start,
                "window_end": start + pd.Timedelta(hours=1), "window_id": w,
                "aggregate": "avg_price", "value": 100.0 + w, "event_count": 10,
                "revision": 1 + (w == 2), "emitted_at": start + pd.Timedelta(hours=1),
                "batch_id": w, "detection_time": start + pd.Timedelta(hours=1),
                "rule_hash": "0123456789abcdef"})
    frames["gold.window_outputs"] = pd.DataFrame(windows)

    for name, frame in frames.items():
        write_table(home, name, frame)

    tuning = home / "tuning"
    tuning.mkdir(parents=True)
    for version, weights in ((1, {"q_rfid_abc": 1000, "q_rfid_transit": 1000}),
                             (2, {"q_rfid_abc": 1000, "q_rfid_transit": 613})):
        queries = {q.removeprefix("q_"): {
            "kind": "pattern", "pool": q, "weight": w, "share": w / 1000,
            "deadline_seconds": 60.0, "model": "single stream: the whole share",
            "streams": [{"stream": "A", "arrival_rate": 0.25, "cost_seconds": 1e-4,
                         "mu": 10.0 * w, "quota": 1.0, "satisfaction": 0.99}]}
            for q, w in weights.items()}
        config = {"version": version, "created_at": f"2026-11-20T1{version}:00:00+00:00",
                  "statistics_run": f"stats-{version}", "silver_version": 7,
                  "model": {"capacity_events_per_second": 1234.5, "overloaded": False,
                            "capacity_source": "measured"},
                  "gold": {"max_files_per_trigger": 3 + version, "pools": weights},
                  "queries": queries}
        (tuning / f"config-v{version}.json").write_text(json.dumps(config))

    docs = home / "reports" / "data_docs"
    (docs / "validations" / "silver").mkdir(parents=True)
    (docs / "index.html").write_text("<html><body>Data Docs</body></html>")
    (docs / "validations" / "silver" / "run-2.html").write_text("<html></html>")
    return frames
