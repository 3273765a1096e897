"""Reading input values as Python scalars: :class:`LazyColumn`, a column read value by
value that converts itself once when read often (the general runtime's and the fast
path's view of the columns measures read)."""

from __future__ import annotations

from typing import Any

import pandas as pd  # type: ignore[import-untyped, unused-ignore]

from ..compile.values import column_values, to_python


class LazyColumn:
    """A column read value by value (as Python scalars, missing values as None); after
    many reads it converts the whole column once."""

    __slots__ = ("series", "values", "reads", "converted")

    def __init__(self, series: pd.Series):
        self.series = series
        self.values = series.array
        self.reads = 0
        self.converted: list[Any] | None = None

    def __getitem__(self, i: int) -> Any:
        if self.converted is not None:
            return self.converted[i]
        self.reads += 1
        if self.reads > 64 and self.reads * 8 > len(self.values):
            self.converted = column_values(self.series)
            return self.converted[i]
        return to_python(self.values[i])


__all__ = ["LazyColumn"]
