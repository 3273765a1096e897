"""Small shared helpers for the cep_core tests."""

from __future__ import annotations

from typing import Any

import pandas as pd

import cep_core


def run(body: str, df: pd.DataFrame, select: str = "*", tail: str = "") -> pd.DataFrame:
    """Run ``SELECT <select> FROM t MATCH_RECOGNIZE (<body>) <tail>`` over ``df``."""
    return cep_core.match_recognize(f"SELECT {select} FROM t MATCH_RECOGNIZE ({body}) {tail}",
                                    {"t": df})


def rows(df: pd.DataFrame) -> list[tuple[Any, ...]]:
    """The frame's rows as tuples of Python values (NaN/NaT/None -> None)."""
    out = []
    for rec in df.itertuples(index=False):
        out.append(tuple(None if _missing(v) else _py(v) for v in rec))
    return out


def _missing(v: Any) -> bool:
    try:
        return bool(pd.isna(v))
    except (TypeError, ValueError):
        return False


def _py(v: Any) -> Any:
    return v.item() if hasattr(v, "item") and not isinstance(v, pd.Timestamp) else v


def seq(values: list[Any], column: str = "v") -> pd.DataFrame:
    """A one-partition table: id 1..n and one value column."""
    return pd.DataFrame({"id": list(range(1, len(values) + 1)), column: values})
