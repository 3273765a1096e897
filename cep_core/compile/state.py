"""The state a compiled DEFINE/MEASURES expression reads: :class:`MatchState`, the
partition's columns and the current (partial) match (created by the runtime, read by
the compiled closures), and the closure types ``Fn`` / ``RowFn``."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

Fn = Callable[["MatchState"], Any]
RowFn = Callable[["MatchState", int], Any]

_STATE_SERIAL = itertools.count(1)


class MatchState:
    """The partition and the (partial) match an expression is evaluated against."""

    __slots__ = ("cols", "lo", "hi", "rows", "labels", "upto", "match_number", "names", "open",
                 "touched_end", "epoch")

    def __init__(self, cols: Mapping[str, Sequence[Any]], names: Sequence[str]):
        self.cols = cols
        self.lo = 0  # the partition is rows lo..hi-1 of the (sorted) columns
        self.hi = 0
        self.rows: list[int] = []
        self.labels: list[int] = []
        self.upto = 0
        self.match_number = 0
        self.names = names  # variable name by index, for CLASSIFIER()
        # Incremental matching: more rows may still arrive after ``hi`` (``open``); reading
        # past ``hi`` then sets ``touched_end`` (the value is not known yet).
        self.open = False
        self.touched_end = False
        # Bumped whenever rows/labels are replaced or shortened: aggregates cache their
        # running state per epoch, since within one epoch the match only grows. Compiled
        # expressions outlive a state (an incremental matcher makes one per feed), so each
        # state starts its epochs in a range of its own: a cache never takes a new state's
        # epoch for an old one.
        self.epoch = next(_STATE_SERIAL) << 48
