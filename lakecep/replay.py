"""What ``lakecep replay`` compares (docs/alerts.md, "lakecep replay"). No Spark.

A gold row and the row the replay produced are plain mappings with the same keys:
``partition_key``, ``start_us`` / ``end_us`` (event time in integer microseconds since the
epoch: the resolution of Delta timestamps), ``measures``, ``live_event_ids``,
``archive_event_ids``, ``match_number``. :func:`differences` lists every field that is not
equal, in words.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

#: The fields a replay must reproduce (``match_number`` not for acquisition queries, whose
#: numbers count within one batch).
FIELDS = ("partition_key", "start_us", "end_us", "measures", "live_event_ids",
          "archive_event_ids", "match_number")


def plain(value: Any) -> Any:
    """``value`` in a form that compares by content: NULLs (None, NaN, NaT) as None,
    sequences as lists of text, mappings as dicts of text, integral numbers as int."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    if type(value).__name__ in ("NaTType", "NAType"):
        return None
    if isinstance(value, Mapping):
        return {str(k): None if plain(v) is None else str(v) for k, v in value.items()}
    if isinstance(value, str):
        return value
    if isinstance(value, Sequence) or hasattr(value, "tolist"):
        items = value.tolist() if hasattr(value, "tolist") else list(value)
        return [str(v) for v in items] if isinstance(items, list) else int(items)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def differences(stored: Mapping[str, Any], replayed: Mapping[str, Any] | None,
                fields: Sequence[str] = FIELDS) -> list[str]:
    """Each field of ``fields`` whose stored and replayed values differ, as ``field: stored
    X, replayed Y``; one line when the replay did not find the match at all."""
    if replayed is None:
        return ["match_id: the replay does not find this match"]
    out = []
    for name in fields:
        a, b = plain(stored.get(name)), plain(replayed.get(name))
        if a != b:
            out.append(f"{name}: stored {a!r}, replayed {b!r}")
    return out
