"""Partial-match state of incremental matching: the rows a future match may still use.

A backtracking matcher resumes a partial match by re-reading rows, so the state of a
partition is the suffix of its rows from which a match may still start (plus the rows that
``PREV`` may look back at, and the last settled row, which marks where the next attempt
starts), and the number of matches already emitted. With WITH UNMATCHED ROWS it also
remembers how many rows from that start are covered by emitted matches (they are not
unmatched); with CONSUMPTION it holds the open instances of each stage (their rows as
global feed numbers, see :mod:`cep_core.consumption`). The store keeps the buffered rows of
all partitions in one DataFrame (sorted by partition and order keys, so each feed costs one
concatenation and one sort rather than work per key) and small per-key counters, and
serialises to bytes so that a streaming job can checkpoint it between micro-batches.

An :class:`~cep_core.streaming.IncrementalMatcher` with a ``capacity`` keeps only that many
partition keys here and spills the others to disk (TPM / STPM of seed 000), see
:mod:`cep_core.spilling` and ``docs/partial-matches.md``.
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd  # type: ignore[import-untyped, unused-ignore]

from ..runtime.time_axis import ROW_ID as ROW_ID  # the column of each row's feed number

FORMAT_VERSION = 5


@dataclass
class PartitionState:
    """Counters of one partition key: ``matches`` emitted so far (for MATCH_NUMBER) and
    ``trimmed`` rows dropped from its front (when non-zero, '^' can no longer match);
    ``covered``: how many rows from the next start row on belong to an emitted match (WITH
    UNMATCHED ROWS); ``stages``: the open consumption instances by stage, as (feed numbers,
    variable indices) pairs."""

    matches: int = 0
    trimmed: int = 0
    covered: int = 0
    stages: list[list[tuple[list[int], list[int]]]] = field(default_factory=list)


class PartialMatchStore:
    """Buffered rows of all partitions plus per-key counters.

    ``frame`` holds the input columns and :data:`ROW_ID`; ``settled[i]`` is True for the
    last settled row of its partition (the next match attempt starts after it).

    >>> store = PartialMatchStore()
    >>> store.frame = pd.DataFrame({"t": [1, 2], ROW_ID: [0, 1]})
    >>> store.settled = np.array([True, False])
    >>> store.partitions[()] = PartitionState(matches=1)
    >>> again = PartialMatchStore.from_bytes(store.to_bytes())
    >>> again.buffered_rows(), again.settled.tolist(), again.partitions[()].matches
    (2, [True, False], 1)
    """

    def __init__(self) -> None:
        self.frame: pd.DataFrame | None = None
        self.settled = np.zeros(0, dtype=bool)
        self.partitions: dict[tuple[Any, ...], PartitionState] = {}

    def buffered_rows(self) -> int:
        return 0 if self.frame is None else len(self.frame)

    def to_bytes(self, extra: dict[str, Any] | None = None) -> bytes:
        """Serialise (pickle: load only bytes this process or a trusted job wrote)."""
        payload = {"version": FORMAT_VERSION, "extra": extra or {}, "frame": self.frame,
                   "settled": self.settled,
                   "partitions": {k: (s.matches, s.trimmed, s.covered, s.stages)
                                  for k, s in self.partitions.items()}}
        return pickle.dumps(payload, protocol=pickle.HIGHEST_PROTOCOL)

    @classmethod
    def from_bytes(cls, data: bytes) -> PartialMatchStore:
        store, _ = cls.load(data)
        return store

    @classmethod
    def load(cls, data: bytes) -> tuple[PartialMatchStore, dict[str, Any]]:
        """The store and the ``extra`` dict saved with it."""
        payload = pickle.loads(data)
        if not isinstance(payload, dict) or payload.get("version") != FORMAT_VERSION:
            raise ValueError("not a lakecep partial-match state (or an incompatible version)")
        store = cls()
        store.frame = payload["frame"]
        store.settled = payload["settled"]
        for key, (matches, trimmed, covered, stages) in payload["partitions"].items():
            store.partitions[key] = PartitionState(matches, trimmed, covered, stages)
        extra: dict[str, Any] = payload["extra"]
        return store, extra
