"""One gold class batch at a time, the highest class waiting first (docs/rules.md,
"Priorities").

The class streams of one application (``gold_high``, ``gold_normal``, ``gold_low``) are
separate micro-batch loops, each on its own driver thread. Run concurrently, they share the
driver's one Python interpreter and Delta commit path, which FAIR pools do not schedule,
and their MERGEs into the same gold tables conflict (measured: under a 2x overload the
high class fell behind as much as the low one, and 22 batches ran twice). So a class
stream's batch first takes its turn at a gate: one batch runs at a time; when it ends, the
highest class with a batch waiting goes next. A class that has been passed over
``starve_after`` times in a row goes next whatever waits above it, so a low class under a
steady high load still runs (at least one batch in ``starve_after + 1``).

A class that has just ended a batch keeps the turn for ``linger`` seconds against lower
classes: its stream plans its next micro-batch (offsets, the batch's first Spark job) in
about a second, and without the linger the lower batch already waiting took every other
turn (measured: under a 2x overload the high and low classes strictly alternated, so high
got half the app). A higher class, or a starved one, does not wait for the linger.

A high batch waits at most for the batch running when it arrived; pure Python, no Spark.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from lakecep.queries import PRIORITIES

#: Times a waiting class may be passed over by higher ones before it goes next.
STARVE_AFTER = 4
#: Seconds a class that just ended a batch keeps the turn against lower classes.
LINGER = 2.0


class ClassGate:
    """Turns for the class streams' batches (see the module docstring)."""

    def __init__(self, order: Sequence[str] = PRIORITIES,
                 starve_after: int = STARVE_AFTER, linger: float = LINGER) -> None:
        self.order = tuple(order)
        self.starve_after = starve_after
        self.linger = linger
        self._cond = threading.Condition()
        self._busy: str | None = None
        self._waiting: dict[str, int] = {}
        self._passed: dict[str, int] = {}
        self._ended: tuple[str, float] | None = None  # the last batch's class, its end

    def _next(self) -> tuple[str | None, float]:
        """The class whose batch goes next (None: nobody yet) and, when a lingering class
        holds the turn, the seconds until its linger ends."""
        waiting = [c for c in self.order if self._waiting.get(c)]
        starved = [c for c in waiting if self._passed.get(c, 0) >= self.starve_after]
        chosen = (starved or waiting or [None])[0]
        if chosen is None or starved or self._ended is None:
            return chosen, 0.0
        last, ended = self._ended
        left = ended + self.linger - time.monotonic()
        if left > 0 and self.order.index(chosen) > self.order.index(last):
            return None, left  # (the class that just ran keeps the turn a little longer)
        return chosen, 0.0

    @contextmanager
    def turn(self, priority: str) -> Iterator[float]:
        """Hold the gate for one batch of class ``priority``; yields the seconds waited."""
        if priority not in self.order:
            raise ValueError(f"priority {priority!r}: use one of {', '.join(self.order)}")
        started = time.monotonic()
        with self._cond:
            self._waiting[priority] = self._waiting.get(priority, 0) + 1
            while True:
                chosen, left = self._next()
                if self._busy is None and chosen == priority:
                    break
                self._cond.wait(timeout=left or None)
            self._waiting[priority] -= 1
            for other, count in self._waiting.items():
                if count and other != priority:
                    self._passed[other] = self._passed.get(other, 0) + 1
            self._passed[priority] = 0
            self._busy = priority
        ended = None
        try:
            yield time.monotonic() - started
            ended = (priority, time.monotonic())
        finally:  # (a failed batch does not linger: its stream stops)
            with self._cond:
                self._busy = None
                self._ended = ended
                self._cond.notify_all()


#: The gate of this process's class streams.
GATE = ClassGate()
