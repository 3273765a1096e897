"""Incremental matching over a stream: the incremental matcher, its partial-match store,
spilling cold partitions (TPM/STPM) and partial matches stored by the caller between
batches."""

from .matcher import Emitted, IncrementalMatcher
from .spilling import SpillManager, SpillStats, TransitionStats, estimate_transitions
from .store import ROW_ID, PartialMatchStore, PartitionState
from .stored_state import Advanced, advance

__all__ = ["ROW_ID", "Advanced", "Emitted", "IncrementalMatcher", "PartialMatchStore",
           "PartitionState", "SpillManager", "SpillStats", "TransitionStats", "advance",
           "estimate_transitions"]
