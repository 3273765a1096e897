"""Unit tests of lakecep.ticks: determinism, layout, injected shapes and landing files."""

from __future__ import annotations

import json
from datetime import UTC
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from cep_core import compile_query
from cep_core.live_archive import FrameArchive, LiveArchiveSpec, StrategySettings, detect
from lakecep.events import ParsedEvent, parse_line
from lakecep.queries import LiveArchiveQuery, load_query
from lakecep.ticks import EXCHANGES, ticks, write_landing

EXAMPLE = Path(__file__).resolve().parents[2] / "queries" / "examples" / "stock_check.toml"
COLUMNS = ["event_id", "object_id", "event_type", "source_id", "event_time", "price"]


@pytest.fixture(scope="module")
def frame() -> pd.DataFrame:
    return ticks(symbols=6, hours=48, seed=5)


@pytest.fixture(scope="module")
def query() -> LiveArchiveQuery:
    q = load_query(EXAMPLE)
    assert isinstance(q, LiveArchiveQuery)
    return q


def test_same_seed_same_ticks_other_seed_other_ticks(frame: pd.DataFrame) -> None:
    pd.testing.assert_frame_equal(frame, ticks(symbols=6, hours=48, seed=5))
    other = ticks(symbols=6, hours=48, seed=6)
    assert len(other) != len(frame) or not np.array_equal(other["price"], frame["price"])


def test_layout_and_dtypes(frame: pd.DataFrame) -> None:
    assert list(frame.columns) == COLUMNS
    assert frame["event_time"].dtype == np.dtype("datetime64[ns]")
    assert frame["price"].dtype == np.dtype("float64")
    for column in ("event_id", "object_id", "event_type", "source_id"):
        assert frame[column].map(type).eq(str).all(), column
    assert frame["event_id"].is_unique
    assert set(frame["event_type"]) == {"tick"}
    assert set(frame["source_id"]) <= set(EXCHANGES)
    assert frame["object_id"].nunique() == 6
    assert (frame.groupby("object_id")["source_id"].nunique() == 1).all()  # one exchange each
    assert frame["event_time"].is_monotonic_increasing
    assert (frame.groupby("object_id")["event_time"].diff().dropna() > pd.Timedelta(0)).all()
    assert (frame["event_time"] - frame["event_time"].dt.floor("ms")).eq(pd.Timedelta(0)).all()
    span = frame["event_time"].max() - frame["event_time"].min()
    assert pd.Timedelta(hours=47) < span < pd.Timedelta(hours=48)
    assert (frame["price"] > 0).all()
    # about one tick per minute per symbol (Poisson)
    assert 0.9 * 6 * 48 * 60 < len(frame) < 1.1 * 6 * 48 * 60


def test_rates_are_parameters() -> None:
    dense = ticks(symbols=2, hours=10, seed=1, ticks_per_minute=4.0)
    assert 0.9 * 2 * 10 * 240 < len(dense) < 1.1 * 2 * 10 * 240
    calm = ticks(symbols=2, hours=10, seed=1, volatility=0.0, falls_per_day=0,
                 checkmarks_per_day=0)
    assert calm.groupby("object_id")["price"].nunique().eq(1).all()
    with pytest.raises(ValueError):
        ticks(symbols=0)


def test_example_query_finds_falls_and_checkmarks(frame: pd.DataFrame,
                                                  query: LiveArchiveQuery) -> None:
    days, symbols = 2, 6
    falls = compile_query(query.live).run(frame)
    checks = compile_query(query.archive).run(frame)
    # every injected fall and the fall of every check-mark (4 + 4 per day and symbol)
    assert 0.6 * 8 * days * symbols < len(falls) < 1.4 * 8 * days * symbols
    assert (falls["falling_ticks"] >= 3).all()
    assert (falls["fall_end_price"] < 0.97 * falls["fall_start_price"]).all()
    assert 0.6 * 4 * days * symbols < len(checks) < 1.4 * 4 * days * symbols
    assert (checks["check_end_price"] > checks["check_start_price"]).all()
    assert (checks["check_low_price"] < 0.98 * checks["check_start_price"]).all()


def test_noise_alone_has_no_shapes(query: LiveArchiveQuery) -> None:
    calm = ticks(symbols=4, hours=24, seed=2, falls_per_day=0, checkmarks_per_day=0)
    assert len(compile_query(query.live).run(calm)) == 0
    assert len(compile_query(query.archive).run(calm)) == 0


def test_live_falls_join_archived_checkmarks(frame: pd.DataFrame,
                                             query: LiveArchiveQuery) -> None:
    spec = LiveArchiveSpec.of(query.live, query.archive, query.key, pd.Timedelta(query.before))
    live = frame[frame["event_time"] >= frame["event_time"].max() - pd.Timedelta(hours=12)]
    live = live.reset_index(drop=True)
    store = FrameArchive(frame, query.key, "event_time")
    lazy = detect(spec, live, store, "llaa")
    assert lazy.live_count > 0 and len(lazy.joined) > 0
    for joined in lazy.joined:
        m = joined.measures
        assert m["fall_start_time"] - pd.Timedelta(hours=24) <= m["check_start_time"]
        assert m["check_end_time"] < m["fall_start_time"]
    active = detect(spec, live, store, "alaa")
    batched = detect(spec, live, store, "sllaa",
                     StrategySettings(tolerated_latency=pd.Timedelta(hours=1)))
    assert lazy.keys() == active.keys() == batched.keys()


def test_landing_files_pass_the_event_contract(frame: pd.DataFrame, tmp_path: Path) -> None:
    part = frame.iloc[:2500]
    files = write_landing(part, tmp_path, lines_per_file=1000)
    assert [f.name for f in files] == [f"events-0000{i}.jsonl" for i in range(3)]
    lines = [line for f in files for line in f.read_text().splitlines()]
    assert len(lines) == len(part)
    for line, row in zip(lines, part.itertuples(index=False), strict=True):
        event = parse_line(line)
        assert isinstance(event, ParsedEvent), event
        assert (event.event_id, event.object_id, event.event_type, event.source_id) == (
            row.event_id, row.object_id, row.event_type, row.source_id)
        assert event.event_time == row.event_time.tz_localize(UTC).to_pydatetime()
        assert event.attributes is not None
        assert float(event.attributes["price"]) == row.price
        assert isinstance(json.loads(line)["attributes"]["price"], float)  # a JSON number


def test_landing_refuses_to_mix_with_existing_files(frame: pd.DataFrame,
                                                    tmp_path: Path) -> None:
    write_landing(frame.iloc[:10], tmp_path)
    with pytest.raises(FileExistsError):
        write_landing(frame.iloc[:10], tmp_path)
    files = write_landing(frame.iloc[:5], tmp_path, overwrite=True)
    assert len(files) == 1 and len(files[0].read_text().splitlines()) == 5
    assert not list(tmp_path.glob(".*.tmp"))
