"""Events, delta events and output rows of the window operators (docs/windows.md)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .aggregates import clean

Key = str | int


class WindowStateError(ValueError):
    """A delta event contradicts the operator's state (duplicate insert, unknown delete)."""


@dataclass(frozen=True, slots=True)
class Event:
    """One event: ``time`` in integer UTC nanoseconds, ``seq`` its identity and tie-break.

    >>> Event("s1", 10, 1, float("nan")).value is None
    True
    """

    key: Key
    time: int
    seq: int
    value: float | None

    def __post_init__(self) -> None:
        if not isinstance(self.time, int) or isinstance(self.time, bool):
            raise TypeError(f"event time must be integer nanoseconds, got {self.time!r}")
        if not isinstance(self.seq, int) or isinstance(self.seq, bool):
            raise TypeError(f"event seq must be an integer, got {self.seq!r}")
        object.__setattr__(self, "value", clean(self.value))

    def to_list(self) -> list[Any]:
        return [self.key, self.time, self.seq, self.value]

    @classmethod
    def from_list(cls, row: list[Any]) -> Event:
        return cls(row[0], row[1], row[2], row[3])


@dataclass(frozen=True, slots=True)
class Insert:
    """``(+, event)``."""

    event: Event


@dataclass(frozen=True, slots=True)
class Delete:
    """``(-, event)``: removes the held event with the same key and seq (and time)."""

    event: Event


@dataclass(frozen=True, slots=True)
class Replace:
    """``(^, old, new)``: atomic delete of ``old`` and insert of ``new`` (same key)."""

    old: Event
    new: Event

    def __post_init__(self) -> None:
        if self.old.key != self.new.key:
            raise ValueError("a replace keeps the key; use Delete + Insert to move an event "
                             f"from key {self.old.key!r} to {self.new.key!r}")


Delta = Insert | Delete | Replace


def delta_key(delta: Delta) -> Key:
    return delta.old.key if isinstance(delta, Replace) else delta.event.key


def delta_times(delta: Delta) -> tuple[int, ...]:
    if isinstance(delta, Replace):
        return (delta.old.time, delta.new.time)
    return (delta.event.time,)


@dataclass(frozen=True, slots=True)
class WindowRow:
    """One output row: one aggregate of one window of one key."""

    key: Key
    window_start: int
    window_end: int
    window_id: int
    aggregate: str
    value: float | None
    count: int
    emitted_at: int
    revision: int


def held_event(values: dict[int, tuple[int, float | None]], e: Event) -> Event:
    """The event a delete of ``e`` removes from a key's held ``values`` (seq -> (time,
    value)): its seq must be held, at ``e.time``; else :class:`WindowStateError`."""
    held = values.get(e.seq)
    if held is None:
        raise WindowStateError(f"delete of key {e.key!r} seq {e.seq}: no such event held")
    if held[0] != e.time:
        raise WindowStateError(f"delete of key {e.key!r} seq {e.seq} at time {e.time}: "
                               f"the held event is at time {held[0]}")
    return Event(e.key, held[0], e.seq, held[1])
