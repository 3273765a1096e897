"""What a match looks like from outside: :class:`Match` (one match of the pattern in one
partition) and the outer ``SELECT`` list and ``ORDER BY`` applied to the
MATCH_RECOGNIZE output table (:func:`select`), shared by every runtime (general, fast,
incremental, uncertain)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import pandas as pd  # type: ignore[import-untyped, unused-ignore]

from ..errors import QueryError
from ..language import ast

TIMED_OUT = "timed_out"  # the marker column of EMIT TIMEOUTS


@dataclass(frozen=True)
class Match:
    """One match of the pattern in one partition.

    ``rows`` are positional indices into the DataFrame given to ``find_matches`` of the rows
    mapped to pattern variables, in match order, without rows inside ``{- -}`` exclusions;
    ``labels`` holds the variable of each of those rows. ``measures`` are the MEASURES values
    as ONE ROW PER MATCH computes them.
    """

    partition: tuple[Any, ...]
    match_number: int
    rows: tuple[int, ...]
    labels: tuple[str, ...]
    measures: dict[str, Any]
    timed_out: bool = False  # EMIT TIMEOUTS: a partial match cut off by the window


def matches(partition: Iterable[tuple[Any, ...]], match_number: Iterable[int],
            rows: Iterable[tuple[int, ...]], labels: Iterable[tuple[str, ...]],
            measures: Iterable[dict[str, Any]], timed_out: Iterable[bool]) -> list[Match]:
    """``list(map(Match, partition, ...))``: the same objects, made in about half the time
    (the frozen ``__init__`` sets each field with its own ``object.__setattr__`` call; this
    sets the instance dict at once). The incremental matcher makes one Match per match."""
    new, set_ = object.__new__, object.__setattr__
    out = []
    for p, n, r, lab, m, t in zip(partition, match_number, rows, labels, measures, timed_out,
                                  strict=True):
        match = new(Match)
        set_(match, "__dict__", {"partition": p, "match_number": n, "rows": r, "labels": lab,
                                 "measures": m, "timed_out": t})
        out.append(match)
    return out


def select(tree: ast.Query, table: pd.DataFrame) -> pd.DataFrame:
    """Apply the outer SELECT list and ORDER BY.

    Output columns may share a name (a measure named like an input column under ALL ROWS
    PER MATCH, as in Trino); ``SELECT *`` keeps both, naming such a column in the outer
    query is ambiguous (a QueryError, as Trino's "Column 'x' is ambiguous")."""
    available = [str(c) for c in table.columns]
    exact: dict[str, list[int]] = {}
    lower: dict[str, list[int]] = {}
    for i, c in enumerate(available):
        exact.setdefault(c, []).append(i)
        lower.setdefault(c.lower(), []).append(i)

    def resolve(name: str, quoted: bool, pos: ast.Pos) -> int:
        found = exact.get(name, [])
        if not found and not quoted:
            found = lower.get(name.lower(), [])
        if len(found) == 1:
            return found[0]
        if len(found) > 1:
            raise QueryError(f"output column name {name!r} is ambiguous: the MATCH_RECOGNIZE "
                             f"output has {len(found)} columns named so (e.g. a measure "
                             "named like an input column under ALL ROWS PER MATCH); rename "
                             "the measure", *pos)
        raise QueryError(f"unknown output column {name!r}; the MATCH_RECOGNIZE output has: "
                         f"{', '.join(available)}", *pos)

    if tree.order_by:
        keys = [resolve(s.column.name, s.column.quoted, s.column.pos) for s in tree.order_by]
        if len(set(available)) == len(available):
            table = table.sort_values([available[k] for k in keys],
                                      ascending=[not s.descending for s in tree.order_by],
                                      kind="mergesort").reset_index(drop=True)
        else:
            keyed = table.set_axis(range(len(available)), axis=1)
            order = keyed.sort_values(keys, ascending=[not s.descending for s in tree.order_by],
                                      kind="mergesort").index
            table = table.iloc[order].reset_index(drop=True)
    positions: list[int] = []
    names: list[str] = []
    for item in tree.select:
        if item.qualifier is not None and tree.alias is not None and (
                item.qualifier.lower() != tree.alias.lower()):
            raise QueryError(f"unknown table alias {item.qualifier!r}", *item.pos)
        if item.name is None:
            positions.extend(range(len(available)))
            names.extend(available)
            continue
        col = resolve(item.name, item.quoted, item.pos)
        positions.append(col)
        names.append(item.alias if item.alias is not None else available[col])
    out = table.iloc[:, positions]
    out.columns = names
    return out.reset_index(drop=True)


__all__ = ["TIMED_OUT", "Match", "select"]
