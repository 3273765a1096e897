"""The rule DAG of chained rules (docs/rules.md, section 1). No Spark.

A pattern rule with ``input = ["a", ...]`` reads the complex events of rules ``a, ...``
instead of silver. The rules and their input edges must form a DAG: :func:`rule_levels`
orders it (level 0 reads silver, a chained rule is one above its highest input) and rejects
an unknown input, an input whose rows are not complex events, and a cycle, naming every
rule on it. :func:`derived_schema` is the event schema a chained rule's MATCH_RECOGNIZE
sees; :func:`tainted_keys` turns an input table's changes into the keys to recompute.

>>> from lakecep.queries import PatternQuery
>>> a = PatternQuery("a", "1", "", "q")
>>> b = PatternQuery("b", "1", "", "q", inputs=("a",))
>>> rule_levels([b, a])
{'a': 0, 'b': 1}
>>> rule_levels([PatternQuery("a", "1", "", "q", inputs=("b",)), b])
Traceback (most recent call last):
...
lakecep.rules.RuleGraphError: rules read each other's outputs in a cycle: a -> b -> a
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from difflib import get_close_matches
from typing import Any

from .queries import (
    PRIORITIES,
    AcquisitionQuery,
    LiveArchiveQuery,
    PatternQuery,
    QueryDefinitionError,
    UncertainQuery,
    WindowQuery,
)
from .tuning import pool_name

#: The kinds of rules whose rows (in gold.complex_events) a chained rule may read.
INPUT_KINDS = (PatternQuery, LiveArchiveQuery, AcquisitionQuery)
#: Columns of a derived event besides the rule's ``[attributes]`` (the measures it reads):
#: the event contract, and the complex event's start (docs/rules.md, "Input").
DERIVED_COLUMNS = {"event_id": "string", "object_id": "string", "event_type": "string",
                   "source_id": "string", "event_time": "timestamp",
                   "time_lower": "timestamp", "time_upper": "timestamp",
                   "ingest_time": "timestamp", "start_time": "timestamp"}


class RuleGraphError(QueryDefinitionError):
    """The rules' ``input`` edges are not a DAG of complex-event rules. ``rules``: the ids
    the message is about (the cycle, or the rule with the bad input)."""

    def __init__(self, message: str, rules: Sequence[str], code: str = "rule_input") -> None:
        super().__init__(message)
        self.rules = tuple(rules)
        self.code = code


def inputs_of(query: Any) -> tuple[str, ...]:
    """The ids a rule reads (empty: it reads silver)."""
    return tuple(getattr(query, "inputs", ()))


def rule_levels(queries: Iterable[Any]) -> dict[str, int]:
    """Each rule's level: 0 for a rule over silver, 1 + its highest input's level for a
    chained rule. Raises :class:`RuleGraphError` for an unknown input, an input that is
    not a complex-event rule, or a cycle."""
    by_id = {q.id: q for q in queries}
    for query in by_id.values():
        for name in inputs_of(query):
            if name not in by_id:
                close = get_close_matches(name, list(by_id), n=1)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                raise RuleGraphError(f"rule {query.id!r}: input {name!r} is not a rule"
                                     f"{hint}", [query.id])
            if not isinstance(by_id[name], INPUT_KINDS):
                raise RuleGraphError(
                    f"rule {query.id!r}: input {name!r} is a {_kind(by_id[name])} rule; a "
                    "chained rule reads complex events (pattern, live_archive or acquisition "
                    "rules)", [query.id])
    levels: dict[str, int] = {}
    state: dict[str, str] = {}   # "open" while on the path, "done" after

    def visit(name: str, path: list[str]) -> int:
        if state.get(name) == "done":
            return levels[name]
        if state.get(name) == "open":
            cycle = path[path.index(name):] + [name]
            raise RuleGraphError("rules read each other's outputs in a cycle: "
                                 + " -> ".join(cycle), cycle[:-1], "rule_cycle")
        state[name] = "open"
        ups = inputs_of(by_id[name])
        level = 1 + max(visit(u, [*path, name]) for u in ups) if ups else 0
        state[name] = "done"
        levels[name] = level
        return level

    for name in sorted(by_id):
        visit(name, [])
    return dict(sorted(levels.items(), key=lambda item: (item[1], item[0])))


def _kind(query: Any) -> str:
    if isinstance(query, WindowQuery):
        return "window"
    return "uncertain" if isinstance(query, UncertainQuery) else type(query).__name__


def derived_schema(query: Any) -> dict[str, str]:
    """The columns (name -> Spark type) a chained rule's statement sees."""
    return {**DERIVED_COLUMNS, **dict(query.attributes)}


def tainted_keys(changes: Iterable[tuple[str, str]], inputs: Sequence[str]) -> set[str]:
    """The keys of a chained rule to recompute: every ``partition_key`` with a change
    (``(query_id, partition_key)`` of an inserted, superseded or restored row) of one of
    its ``inputs`` (docs/rules.md, "What a batch recomputes: taint")."""
    wanted = set(inputs)
    return {key for query_id, key in changes if query_id in wanted}


def chained(queries: Iterable[Any]) -> list[Any]:
    """The chained rules of ``queries`` in level order (inputs before the rules reading
    them)."""
    queries = list(queries)
    levels = rule_levels(queries)
    return sorted((q for q in queries if inputs_of(q)), key=lambda q: (levels[q.id], q.id))


# ------------------------------------------------------------- priorities (docs/rules.md 4)

#: A class pool's FAIR weight per unit of its rules' tuned quota: high far above low
#: (1000 : 1 approximates "drain high first" without starving low).
CLASS_FACTOR = {"high": 1000, "normal": 30, "low": 1}
#: A class pool's FAIR ``minShare`` (cores it gets before the weights are looked at).
CLASS_MIN_SHARE = {"high": 1, "normal": 0, "low": 0}


def priority_classes(queries: Iterable[Any]) -> dict[str, list[Any]]:
    """The priority classes ``queries`` use, highest first, each with its rules.

    >>> from lakecep.queries import PatternQuery
    >>> found = priority_classes([PatternQuery("a", "1", "", "q", priority="low"),
    ...                           PatternQuery("b", "1", "", "q", priority="high"),
    ...                           PatternQuery("c", "1", "", "q")])
    >>> {c: [q.id for q in rules] for c, rules in found.items()}
    {'high': ['b'], 'normal': ['c'], 'low': ['a']}
    """
    queries = list(queries)
    return {c: found for c in PRIORITIES
            if (found := [q for q in queries if q.priority == c])}


def class_stream(priority: str) -> str:
    """The gold stream (and checkpoint) of a class when the rules use several classes."""
    return f"gold_{priority}"


def class_pool(priority: str) -> str:
    """The FAIR scheduler pool of a class's gold stream."""
    return f"class_{priority}"


def class_weight(priority: str, rule_ids: Sequence[str], tuned: dict[str, Any] | None
                 ) -> int:
    """A class pool's weight: :data:`CLASS_FACTOR` times the sum of its rules' quotas,
    a rule's quota being its tuned pool weight / 1000 (``lakecep.tuning``: 1000 x share /
    the largest share), 1 for a rule without one (no tuned configuration, or a kind the
    tuning does not allocate).

    >>> class_weight("high", ["a"], None), class_weight("low", ["a", "b"], None)
    (1000, 2)
    >>> class_weight("high", ["a"], {"gold": {"pools": {"q_a": 250}}})
    250
    """
    pools = (tuned or {}).get("gold", {}).get("pools", {})
    quota = sum(pools.get(pool_name(q), 1000) / 1000 for q in rule_ids)
    return max(1, round(CLASS_FACTOR[priority] * quota))
