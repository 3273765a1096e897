"""SQL values in Python: the NULL test (None, NaN, NaT, pd.NA) and the conversion of
pandas/numpy values and columns to Python scalars with missing values as None."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd  # type: ignore[import-untyped, unused-ignore]


def is_null(v: Any) -> bool:
    if v is None:
        return True
    kind = type(v)
    if kind is int or kind is str or kind is bool:
        return False
    if kind is float:
        return bool(v != v)  # NaN
    return v is pd.NaT or v is pd.NA or (isinstance(v, float) and math.isnan(v))


def normalise(value: Any) -> Any:
    """Turn pandas/numpy missing values into None (SQL NULL)."""
    return None if is_null(value) else value


def to_python(value: Any) -> Any:
    """A numpy scalar as the Python scalar, missing values as None."""
    if isinstance(value, np.generic) and not isinstance(value, np.datetime64 | np.timedelta64):
        value = value.item()
    return normalise(value)


def column_values(series: pd.Series) -> list[Any]:
    """A column as Python values, with missing values as None."""
    values: list[Any] = series.tolist()
    if series.isna().any():
        return [normalise(v) for v in values]
    return values
