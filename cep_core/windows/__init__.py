"""Windows, incremental aggregates and sampling outputs (seed 004; docs/windows.md)."""

from .aggregates import (
    AGGREGATES,
    FIFO_AGGREGATES,
    Aggregate,
    Avg,
    Count,
    Max,
    Min,
    MonotoneMax,
    MonotoneMin,
    Sum,
    Var,
    recompute,
)
from .events import Delete, Delta, Event, Insert, Key, Replace, WindowRow, WindowStateError
from .operator import CountWindows, TimeWindows, WindowOperator
from .sampler import Sampler

__all__ = [
    "AGGREGATES", "FIFO_AGGREGATES", "Aggregate", "Avg", "Count", "CountWindows", "Delete",
    "Delta", "Event", "Insert", "Key", "Max", "Min", "MonotoneMax", "MonotoneMin", "Replace",
    "Sampler", "Sum", "TimeWindows", "Var", "WindowOperator", "WindowRow", "WindowStateError",
    "recompute",
]
