"""``lakecep sql --engine duckdb``: plain SQL over Delta tables with delta-rs + DuckDB, no JVM.
The tables are real Delta tables written by delta-rs."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from lakecep.config import load_settings
from lakecep.jobs.cli import main
from lakecep.lake_sql import lake_tables, run_query


@pytest.fixture()
def lake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    from deltalake import write_deltalake

    monkeypatch.setenv("LAKECEP_HOME", str(tmp_path))
    events = pd.DataFrame({"event_id": ["e1", "e2", "e3"], "source_id": ["A", "B", "A"],
                           "event_time": pd.to_datetime(["2026-01-01T00:00:00Z"] * 3)})
    write_deltalake(str(tmp_path / "lake/silver/events"), events)
    write_deltalake(str(tmp_path / "lake/silver/events"), events.head(1), mode="append")
    matches = pd.DataFrame({"query_id": ["rfid_abc"], "partition_key": ["tag-1"]})
    write_deltalake(str(tmp_path / "lake/gold/complex_events"), matches)
    (tmp_path / "lake/gold/not_a_table").mkdir(parents=True)
    return tmp_path


def test_every_delta_table_is_a_view(lake: Path) -> None:
    settings = load_settings({"LAKECEP_HOME": str(lake)})
    assert list(lake_tables(settings)) == ["gold.complex_events", "silver.events"]
    got = run_query(settings, "SELECT source_id, count(*) AS n FROM silver.events "
                    "GROUP BY 1 ORDER BY 1", limit=10)
    assert got.to_dict("records") == [{"source_id": "A", "n": 3}, {"source_id": "B", "n": 1}]
    assert len(run_query(settings, "SELECT * FROM silver.events", limit=2)) == 2


def test_cli_engine_duckdb_formats_and_errors(
    lake: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["sql", "--engine", "duckdb", "--format", "json",
                 "SELECT query_id, partition_key FROM gold.complex_events"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [json.loads(line) for line in lines] == [{"query_id": "rfid_abc",
                                                     "partition_key": "tag-1"}]
    assert main(["sql", "--engine", "duckdb", "SELECT count(*) AS n FROM silver.events"]) == 0
    out = capsys.readouterr().out
    assert "┃ n ┃" in out and "│ 4 │" in out and "1 row(s)" in out
    assert main(["sql", "--engine", "duckdb", "SELECT * FROM gold.nope"]) == 1
    err = capsys.readouterr().err
    assert "lakecep sql: error: Catalog Error" in err
    assert "tables under" in err and "gold.complex_events, silver.events" in err
    assert main(["sql", "--engine", "duckdb", "SELEC 1"]) == 1
    err = capsys.readouterr().err
    assert err.count("syntax error") == 1 and "Traceback" not in err
    assert "--engine spark" in err  # the hint
