"""benchmarks/engine_suite.py's comparators on small inputs: for every shape, the
hand-vectorised pandas version finds the same matches as cep_core, the default engine
equals the general matcher and the incremental matcher equals the batch one (the same
check the suite runs before it measures)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from engine_suite import flights_total_order, ticks_with_chg, verify  # noqa: E402
from engine_throughput import stock_ticks  # noqa: E402
from suite_shapes import SHAPES  # noqa: E402


def flights_like(rows: int, seed: int = 3) -> pd.DataFrame:
    """Flight-like rows: 5 origins, scheduled minutes with many ties, delays that cross
    the shape's thresholds."""
    rng = np.random.default_rng(seed)
    minutes = np.sort(rng.integers(0, rows // 3, rows))
    return flights_total_order(pd.DataFrame({
        "date": np.datetime64("2001-01-01T00:00") + minutes.astype("timedelta64[m]"),
        "delay": rng.choice([-5, 10, 25, 70], rows, p=[0.2, 0.2, 0.35, 0.25]),
        "origin": np.array(["ATL", "ORD", "LAX", "DFW", "SEA"], dtype=object)[
            rng.integers(0, 5, rows)]}))


@pytest.mark.slow
@pytest.mark.parametrize("name", list(SHAPES))
def test_pandas_version_and_engines_agree(name: str) -> None:
    shape = SHAPES[name]
    df = (ticks_with_chg(stock_ticks(3_000, symbols=7)) if shape.data == "ticks"
          else flights_like(3_000))
    result = verify(shape, df, batch_rows=700)
    assert result["matches"] >= 20, result  # the shape occurs in the data
    assert result["batch_equals_general"] is True, result
    assert result["incremental_equals_batch"] is True, result
    assert result["incremental_table_equals_batch"] is True, result
    assert result["pandas_equal"] is True, result


def test_flights_total_order_breaks_ties_within_an_origin_only() -> None:
    raw = pd.DataFrame({"date": pd.to_datetime(["2001-01-01 00:01"] * 3 + ["2001-01-01 00:00"]),
                        "delay": [1, 2, 3, 4], "origin": ["A", "B", "A", "A"]})
    out = flights_total_order(raw)
    assert out["delay"].tolist() == [4, 1, 2, 3]
    assert (out["ts"] - pd.Timestamp("2001-01-01 00:01")).dt.total_seconds().tolist() == \
        [-60.0, 0.0, 0.0, 0.001]
