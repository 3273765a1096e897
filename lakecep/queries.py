"""Shipped query definitions (``queries/*.toml``): plain patterns and live-archive joins.

A ``pattern`` query is one MATCH_RECOGNIZE statement run over silver. A ``live_archive``
query joins a pattern on the newly arrived events (``[live]``) with a pattern over the
same key's history in the access range RA = [live start - ``before``, live start)
(``[archive]``), read from silver by Delta time travel at a pinned version.
See docs/queries.md.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

QUERIES_DIR = Path(__file__).resolve().parent.parent / "queries"
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(second|minute|hour|day)s?\s*$", re.IGNORECASE)


class QueryDefinitionError(ValueError):
    """A query file is invalid (message names the file and the key)."""


@dataclass(frozen=True)
class PatternQuery:
    id: str
    version: str
    description: str
    query: str


@dataclass(frozen=True)
class LiveArchiveQuery:
    id: str
    version: str
    description: str
    key: str
    live: str
    archive: str
    before: timedelta


QueryDefinition = PatternQuery | LiveArchiveQuery


def parse_duration(text: str, where: str) -> timedelta:
    match = _DURATION.match(text)
    if not match:
        raise QueryDefinitionError(f"{where}: {text!r} is not a duration like '24 hours'")
    unit = match.group(2).lower() + "s"
    return timedelta(**{unit: float(match.group(1))})


def _require(data: dict, key: str, where: Path) -> str:
    value = data.get(key)
    if not isinstance(value, str) or not value.strip():
        raise QueryDefinitionError(f"{where}: missing or empty string key {key!r}")
    return value


def load_query(path: Path) -> QueryDefinition:
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise QueryDefinitionError(f"{path}: not valid TOML: {exc}") from None
    kind = data.get("kind", "pattern")
    common = dict(
        id=_require(data, "id", path),
        version=str(data.get("version", "1")),
        description=str(data.get("description", "")),
    )
    if kind == "pattern":
        return PatternQuery(query=_require(data, "query", path), **common)
    if kind == "live_archive":
        live, archive = data.get("live", {}), data.get("archive", {})
        return LiveArchiveQuery(
            key=_require(data, "key", path),
            live=_require(live, "query", path),
            archive=_require(archive, "query", path),
            before=parse_duration(_require(archive, "before", path), f"{path}: archive.before"),
            **common,
        )
    raise QueryDefinitionError(f"{path}: kind must be 'pattern' or 'live_archive', got {kind!r}")


def load_queries(directory: Path = QUERIES_DIR) -> list[QueryDefinition]:
    """All query definitions in ``directory``, sorted by id; ids must be unique."""
    queries = [load_query(p) for p in sorted(directory.glob("*.toml"))]
    ids = [q.id for q in queries]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    if dupes:
        raise QueryDefinitionError(f"{directory}: duplicate query ids {dupes}")
    return sorted(queries, key=lambda q: q.id)
