"""The engine's one time axis: elapsed time as UTC nanoseconds (int64).

Every path that reads a time column goes through this module: ordering and WITHIN in batch
and incremental matching, live-archive ranges and stores, spilling, uncertain time and
statistics. A timestamp column -- naive or tz-aware in any zone, in any unit (s/ms/us/ns),
numpy- or Arrow-backed -- becomes int64 nanoseconds since the epoch *in UTC*: a naive column
is taken as UTC, a tz-aware one is converted to UTC first. The distance between two rows is
therefore the time that elapsed between them, not the difference of two wall clocks (which
steps back an hour when daylight saving time ends). Intervals become nanoseconds; numeric
columns stay the numbers they hold.

Values going back out (rows an archive store returns) keep the caller's dtype and zone:
:func:`from_ns`.

>>> import pandas as pd
>>> berlin = pd.Series(pd.to_datetime(["2024-10-27 02:30+02:00", "2024-10-27 02:10+01:00"],
...                                   utc=True)).dt.tz_convert("Europe/Berlin")
>>> [int(v) for v in time_values(berlin)]  # 40 minutes apart, though the clock went back
[1729989000000000000, 1729991400000000000]
>>> from_ns(time_values(berlin), berlin.dtype).equals(berlin)
True
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd  # type: ignore[import-untyped, unused-ignore]

from ..compile.expressions import interval_value
from ..compile.values import column_values
from ..errors import QueryError
from ..language import ast

ROW_ID = "__lakecep_row__"  # column holding each buffered row's global feed number (a
# stream's order when it has no usable ORDER BY column)


def is_timestamp(dtype: Any) -> bool:
    """True for datetime columns (naive or tz-aware, numpy- or Arrow-backed)."""
    return bool(pd.api.types.is_datetime64_any_dtype(dtype))


def is_duration(dtype: Any) -> bool:
    return bool(pd.api.types.is_timedelta64_dtype(dtype))


def is_number(dtype: Any) -> bool:
    return bool(pd.api.types.is_numeric_dtype(dtype) and not pd.api.types.is_bool_dtype(dtype))


def _utc_naive(series: pd.Series) -> pd.Series:
    if isinstance(series.dtype, np.dtype) and series.dtype.kind == "M":
        return series  # numpy datetime64 is naive (and makes no .dt accessor, 0.2 ms)
    if getattr(series.dt, "tz", None) is not None:
        return series.dt.tz_convert("UTC").dt.tz_localize(None)
    return series


def ns_and_missing(series: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """A timestamp or interval column as int64 nanoseconds (UTC for timestamps) and a
    boolean mask of its missing values (whose slots hold an arbitrary number)."""
    s = series.astype("timedelta64[ns]") if is_duration(series.dtype) else _utc_naive(
        series).astype("datetime64[ns]")
    missing = np.asarray(s.isna().to_numpy(), dtype=bool)
    return np.asarray(s.to_numpy().view("int64")), missing


def datetime_ns(series: pd.Series) -> list[int | None]:
    """A timestamp (or interval) column as int nanoseconds, missing values as None."""
    ints, missing = ns_and_missing(series)
    return [None if m else v for v, m in zip(ints.tolist(), missing.tolist(), strict=True)]


def scalar_ns(value: Any) -> Any:
    """One time value on the axis: int ns (UTC) for a timestamp, the number otherwise."""
    if isinstance(value, pd.Timestamp):
        stamp = value.tz_convert("UTC").tz_localize(None) if value.tzinfo else value
        return int(stamp.as_unit("ns").value)
    if isinstance(value, pd.Timedelta):
        return int(value.as_unit("ns").value)
    if isinstance(value, np.generic):
        return value.item()
    return value


def time_values(series: pd.Series) -> np.ndarray:
    """A time column as an array: int64 UTC nanoseconds for timestamps and intervals,
    float64 otherwise (the live-archive index and ranges)."""
    if is_timestamp(series.dtype) or is_duration(series.dtype):
        return ns_and_missing(series)[0]
    return np.asarray(series.to_numpy(dtype="float64"))


def from_ns(values: Any, dtype: Any, index: Any = None) -> pd.Series:
    """Nanoseconds on the axis back as a column of ``dtype`` (a timestamp dtype, naive =
    UTC, or tz-aware in its zone; any unit), on ``index`` (default: 0..n-1)."""
    stamps = pd.Series(pd.to_datetime(np.asarray(values, dtype="int64"), unit="ns", utc=True),
                       index=index)
    tz = getattr(dtype, "tz", None) or getattr(getattr(dtype, "pyarrow_dtype", None), "tz",
                                                None)
    stamps = stamps.dt.tz_convert(tz) if tz is not None else stamps.dt.tz_localize(None)
    return stamps.astype(dtype)


def seconds_per_unit(dtype: Any) -> float:
    """Seconds per unit of a time column (timestamps and intervals: nanoseconds)."""
    return 1e-9 if is_timestamp(dtype) or is_duration(dtype) else 1.0


def within_seconds(within: ast.IntervalLiteral | ast.Literal) -> float:
    """The WITHIN limit as given: an interval in seconds, a bare number as is."""
    if isinstance(within, ast.IntervalLiteral):
        return float(interval_value(within).total_seconds())
    return float(within.value)  # type: ignore[arg-type]  # the parser made it a number


def order_numbers(series: pd.Series,
                  within: ast.IntervalLiteral | ast.Literal) -> tuple[list[Any], float]:
    """The WITHIN column as numbers (nanoseconds for timestamps and intervals; None when
    missing) and the limit likewise."""
    seconds = within_seconds(within)
    if len(series) == 0:
        return [], seconds
    if is_timestamp(series.dtype) or is_duration(series.dtype):
        return list(datetime_ns(series)), seconds * 1e9
    if is_number(series.dtype):
        return column_values(series), seconds
    raise QueryError(f"WITHIN needs a timestamp or numeric first ORDER BY column; "
                     f"{series.name!r} has type {series.dtype}", *within.pos)


def time_numbers(work: pd.DataFrame, order_cols: Sequence[str]) -> np.ndarray:
    """Each row's time as a float: the first ORDER BY column (``order_cols[0]``;
    nanoseconds for timestamps and intervals, the value for numbers); the feed number
    (:data:`ROW_ID`, else the position) when there is no usable ORDER BY column. Missing
    values count as the smallest time seen (cold)."""
    series = work[order_cols[0]] if order_cols else None
    values: np.ndarray | None = None
    if series is not None:
        if is_timestamp(series.dtype) or is_duration(series.dtype):
            ints, missing = ns_and_missing(series)
            values = ints.astype(float)
            values[missing] = np.nan
        elif is_number(series.dtype):
            values = series.to_numpy(dtype=float, na_value=np.nan)
    if values is None:
        return work[ROW_ID].to_numpy().astype(float) if ROW_ID in work else np.arange(
            len(work), dtype=float)
    if np.isnan(values).any():
        values = np.where(np.isnan(values), np.nanmin(values) if (~np.isnan(values)).any()
                          else 0.0, values)
    return values


__all__ = ["ROW_ID", "datetime_ns", "from_ns", "is_duration", "is_number", "is_timestamp",
           "ns_and_missing", "order_numbers", "scalar_ns", "seconds_per_unit", "time_numbers",
           "time_values", "within_seconds"]
