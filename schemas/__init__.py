"""One source of truth for the raw event contract and the lake's table schemas (installed
as ``lakecep.schemas``: ``from lakecep import schemas``).

``events.json`` is the landing contract (checked by :mod:`lakecep.events`);
``tables.json`` holds each Delta table's DDL (used by the jobs and the tests).
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any


@cache
def event_contract() -> dict[str, Any]:
    """The raw event contract: fields with type, required flag and doc."""
    return json.loads(resources.files(__name__).joinpath("events.json").read_text())


@cache
def tables() -> dict[str, dict[str, Any]]:
    """Every lake table: ``{"layer.table": {"doc": ..., "ddl": ..., ["cluster_by": [...]],
    ["properties": {...}]}}`` (``cluster_by``: Delta liquid clustering columns;
    ``properties``: Delta table properties set at creation and on existing tables by
    ``LakeTable.upgrade``, e.g. ``delta.enableDeletionVectors``)."""
    return json.loads(resources.files(__name__).joinpath("tables.json").read_text())


def ddl(table: str) -> str:
    """Spark DDL of a lake table such as ``silver.events``."""
    try:
        return tables()[table]["ddl"]
    except KeyError:
        raise KeyError(f"unknown table {table!r}; known: {', '.join(sorted(tables()))}") from None


def columns(table: str) -> list[str]:
    """Column names of a lake table, in order."""
    names = []
    depth = 0
    current = ""
    for ch in ddl(table) + ",":
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        if ch == "," and depth == 0:
            names.append(current.strip().split()[0])
            current = ""
        else:
            current += ch
    return names
