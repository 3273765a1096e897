"""Query definitions: plain patterns, live-archive joins and uncertain-time patterns (the
shipped ones: ``queries/*.toml``, installed as the package data ``lakecep.shipped_queries``).

A ``pattern`` query is one MATCH_RECOGNIZE statement run over silver. A ``live_archive``
query joins a pattern on the newly arrived events (``[live]``) with a pattern over the
same key's history in the access range RA = [live start - ``before``, live start)
(``[archive]``), read from silver by Delta time travel at a pinned version, with an
optional join ``condition`` over both sides' measures and a ``strategy`` (see
:mod:`cep_core.live_archive`). ``[attributes]`` exposes typed event attributes as columns
(``price = "double"``). An ``uncertain`` query is a pattern whose events have uncertain
timestamps (``UNCERTAIN TIME``, docs/uncertain.md). A ``pattern`` query with
``acquisition = "plan"`` (or ``"all"`` / ``"frequency"``) is a seed-003 pattern
(``seq(a, b, !x, c; 10 minutes)``, docs/acquisition.md) whose events are acquired from silver
by a multi-step plan. A ``window`` query keeps time or count windows (or a sampled
sliding window) of one numeric attribute per key, with incremental aggregates
(``cep_core.windows``, docs/windows.md); its rows go to ``gold.window_outputs``. See
docs/queries.md.
"""

from __future__ import annotations

import hashlib
import json
import re
import tomllib
from dataclasses import dataclass, field, replace
from datetime import timedelta
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from cep_core import CompiledQuery
    from cep_core.live_archive import LiveArchiveSpec

#: The shipped queries: the repository's ``queries/`` folder, installed as the package data
#: ``lakecep.shipped_queries`` (``examples/`` holds the stock and uncertain examples).
QUERIES_DIR = Path(str(resources.files("lakecep.shipped_queries")))
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(second|minute|hour|day)s?\s*$", re.IGNORECASE)


class QueryDefinitionError(ValueError):
    """A query file is invalid (message names the file and the key)."""


#: Types an ``[attributes]`` entry may have (Spark SQL type names).
ATTRIBUTE_TYPES = ("string", "double", "bigint", "boolean", "timestamp")
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@lru_cache(maxsize=64)
def compiled_query(text: str) -> CompiledQuery:
    """``cep_core.compile_query(text)``, compiled once per process: the Spark driver and every
    Python worker that runs a query keep their compiled queries here."""
    import cep_core

    return cep_core.compile_query(text)


class _Rule:
    """What every query kind shares: its ``rule_hash``, computed on creation (a chained rule
    loaded by :func:`load_queries` gets the one that covers its inputs' hashes too)."""

    rule_hash: str

    def __post_init__(self) -> None:
        if not self.rule_hash:
            object.__setattr__(self, "rule_hash", rule_hash(self))  # type: ignore[arg-type]


@dataclass(frozen=True)
class SnapshotSpec:
    """``[snapshot]`` of an alerting query (docs/alerts.md, "Firing snapshots"): the events
    of the match's key in ``[start_time - before, end_time + after]`` are kept once the
    stream's watermark passes ``end_time + after``; ``horizon`` is how long ``lakecep
    replay`` must work for its matches (a warning when silver's Delta retention is shorter).
    """

    before: timedelta
    after: timedelta = timedelta(0)
    horizon: timedelta = timedelta(days=7)


#: Keys of a ``[snapshot]`` table.
SNAPSHOT_KEYS = ("before", "after", "horizon")
#: ``reload`` of a query file: A clear, B side by side (time and sampled window rules
#: only), C warm (docs/rules.md, "Hot reload")
RELOAD_STRATEGIES = ("clear", "warm", "side_by_side")


@dataclass(frozen=True)
class PatternQuery(_Rule):
    id: str
    version: str
    description: str
    query: str
    attributes: tuple[tuple[str, str], ...] = ()
    #: new complex events go to gold.alerts and the webhook (docs/alerts.md)
    alert: bool = False
    #: the events around each alert are kept in gold.alert_snapshots (docs/alerts.md)
    snapshot: SnapshotSpec | None = None
    #: a chained rule: the ids of the rules whose complex events it reads instead of silver
    #: (docs/rules.md)
    inputs: tuple[str, ...] = ()
    #: priority class (docs/rules.md, "Priorities"): which gold stream and pool run it
    priority: str = "normal"
    #: the rule's identity (:func:`rule_hash`): what gold rows record, and what a state
    #: fingerprint is valid for
    rule_hash: str = field(default="", compare=False)
    #: how a changed version is deployed while gold runs (docs/rules.md, "Hot reload");
    #: not part of ``rule_hash``
    reload: str = field(default="warm", compare=False)

    def compiled(self) -> CompiledQuery:
        """The compiled MATCH_RECOGNIZE statement (cached per process)."""
        return compiled_query(self.query)


@dataclass(frozen=True)
class LiveArchiveQuery(_Rule):
    id: str
    version: str
    description: str
    key: str
    live: str
    archive: str
    before: timedelta
    condition: str | None = None
    strategy: str = "auto"
    tolerated_latency: timedelta | None = None
    subwindow: int | None = None
    attributes: tuple[tuple[str, str], ...] = ()
    alert: bool = False
    snapshot: SnapshotSpec | None = None
    #: priority class (docs/rules.md, "Priorities"): which gold stream and pool run it
    priority: str = "normal"
    #: the rule's identity (:func:`rule_hash`): what gold rows record, and what a state
    #: fingerprint is valid for
    rule_hash: str = field(default="", compare=False)
    #: how a changed version is deployed while gold runs (docs/rules.md, "Hot reload");
    #: not part of ``rule_hash``
    reload: str = field(default="warm", compare=False)

    def spec(self) -> LiveArchiveSpec:
        """The engine's view of this query (both patterns compiled; cached per process)."""
        return _live_archive_spec(self)

    def settings(self, archive_selectivity: float | None = None):  # noqa: ANN201
        """Strategy settings (cep_core.live_archive.StrategySettings) of this query."""
        import pandas as pd

        from cep_core.live_archive import StrategySettings

        tl = None if self.tolerated_latency is None else pd.Timedelta(self.tolerated_latency)
        return StrategySettings(tolerated_latency=tl, subwindow=self.subwindow,
                                archive_selectivity=archive_selectivity)


ACQUISITIONS = ("plan", "all", "frequency")


@dataclass(frozen=True)
class AcquisitionQuery(_Rule):
    """A seed-003 pattern over silver, acquired by a plan (docs/acquisition.md): ``plan``
    (the cheapest plan from the newest statistics within ``latency_bound``), ``all`` (one
    step reading every type: the baseline) or ``frequency`` (one type per step, rarest
    first: lazy evaluation). ``step_delay``: the latency of one acquisition step."""

    id: str
    version: str
    description: str
    key: str
    pattern: str
    acquisition: str = "plan"
    latency_bound: timedelta | None = None
    step_delay: timedelta = timedelta(seconds=5)
    type_column: str = "event_type"
    attributes: tuple[tuple[str, str], ...] = ()
    alert: bool = False
    snapshot: SnapshotSpec | None = None
    #: priority class (docs/rules.md, "Priorities"): which gold stream and pool run it
    priority: str = "normal"
    #: the rule's identity (:func:`rule_hash`): what gold rows record, and what a state
    #: fingerprint is valid for
    rule_hash: str = field(default="", compare=False)
    #: how a changed version is deployed while gold runs (docs/rules.md, "Hot reload");
    #: not part of ``rule_hash``
    reload: str = field(default="warm", compare=False)

    def parsed(self):  # noqa: ANN201 - cep_core.planning.And | Seq
        """The pattern with its window in seconds."""
        return _acquisition_pattern(self.pattern, self.id)

    @property
    def window_seconds(self) -> float:
        return float(self.parsed().window)


@lru_cache(maxsize=64)
def _acquisition_pattern(text: str, query_id: str):  # noqa: ANN202
    from cep_core.planning import And, Event, Not, PlanningError, Seq, parse_pattern

    try:
        out = parse_pattern(text, lambda w: parse_duration(w, "window").total_seconds())
    except (PlanningError, QueryDefinitionError) as exc:
        raise QueryDefinitionError(f"query {query_id!r}: {exc}") from None
    if not isinstance(out, And | Seq) or any(not isinstance(c, Event | Not)
                                             for c in out.children):
        raise QueryDefinitionError(f"query {query_id!r}: acquisition runs flat and(...) / "
                                   f"seq(...) patterns of event types, not {text!r}")
    return out


@dataclass(frozen=True)
class UncertainQuery(_Rule):
    """A MATCH_RECOGNIZE statement with ``UNCERTAIN TIME`` (seed 001): its probabilistic
    complex events go to ``gold.probabilistic_events``. ``method``: how cep_core evaluates
    it (``auto``, ``dp``, ``event``, ``point`` or ``possible_worlds``)."""

    id: str
    version: str
    description: str
    query: str
    method: str = "auto"
    attributes: tuple[tuple[str, str], ...] = ()
    #: priority class (docs/rules.md, "Priorities"): which gold stream and pool run it
    priority: str = "normal"
    #: the rule's identity (:func:`rule_hash`): what gold rows record, and what a state
    #: fingerprint is valid for
    rule_hash: str = field(default="", compare=False)
    #: how a changed version is deployed while gold runs (docs/rules.md, "Hot reload");
    #: not part of ``rule_hash``
    reload: str = field(default="warm", compare=False)

    def compiled(self) -> CompiledQuery:
        """The compiled MATCH_RECOGNIZE statement (cached per process)."""
        return compiled_query(self.query)


@lru_cache(maxsize=64)
def _live_archive_spec(query: LiveArchiveQuery) -> LiveArchiveSpec:
    import pandas as pd

    from cep_core.live_archive import LiveArchiveSpec

    return LiveArchiveSpec.of(query.live, query.archive, query.key, pd.Timedelta(query.before),
                              query.condition)


UNCERTAIN_METHODS = ("auto", "dp", "event", "point", "possible_worlds")
#: Aggregates a window query may compute (``cep_core.windows.AGGREGATES``).
WINDOW_AGGREGATES = ("count", "sum", "avg", "var", "min", "max")
#: Keys a ``kind = "window"`` file may have (a misspelt key is an error, not ignored).
WINDOW_KEYS = frozenset({"id", "version", "kind", "description", "attributes", "attribute",
                         "aggregates", "window", "rows", "slide", "every", "key",
                         "event_types", "watermark_delay", "allowed_lateness",
                         "priority"})
_MICROSECOND = timedelta(microseconds=1)


@dataclass(frozen=True)
class WindowQuery(_Rule):
    """Windows of one numeric attribute per key with incremental aggregates (seed 004,
    docs/windows.md), written to ``gold.window_outputs``. Exactly one of ``window`` (a time
    window of that length) and ``rows`` (a count window of that many events); ``slide``
    (a duration for time windows, a number of events for count windows; default: tumbling)
    or ``every`` (time windows only: a sampled sliding window reported every period).
    The gold job runs the operators in integer microseconds of event time."""

    id: str
    version: str
    description: str
    attribute: str
    aggregates: tuple[str, ...]
    window: timedelta | None = None
    rows: int | None = None
    slide: timedelta | int | None = None
    every: timedelta | None = None
    key: str = "object_id"
    event_types: tuple[str, ...] = ()
    watermark_delay: timedelta = timedelta(0)
    allowed_lateness: timedelta = timedelta(0)
    attributes: tuple[tuple[str, str], ...] = ()
    #: priority class (docs/rules.md, "Priorities"): which gold stream and pool run it
    priority: str = "normal"
    #: the rule's identity (:func:`rule_hash`): what gold rows record, and what a state
    #: fingerprint is valid for
    rule_hash: str = field(default="", compare=False)
    #: how a changed version is deployed while gold runs (docs/rules.md, "Hot reload");
    #: not part of ``rule_hash``
    reload: str = field(default="warm", compare=False)

    @property
    def mode(self) -> str:
        """``sample`` (``every``), ``time`` (time windows) or ``count`` (count windows)."""
        if self.rows is not None:
            return "count"
        return "sample" if self.every is not None else "time"

    def operator(self):  # noqa: ANN201 - cep_core.windows.Sampler | WindowOperator
        """A new, empty operator of this query (times in microseconds)."""
        from cep_core.windows import CountWindows, Sampler, TimeWindows, WindowOperator

        lateness = micros(self.allowed_lateness)
        if self.rows is not None:
            slide = self.slide if isinstance(self.slide, int) else self.rows
            return WindowOperator(CountWindows(self.rows, slide), self.aggregates, lateness)
        assert self.window is not None
        size = micros(self.window)
        if self.every is not None:
            return Sampler(size, micros(self.every), self.aggregates,
                           allowed_lateness=lateness)
        slide_us = micros(self.slide) if isinstance(self.slide, timedelta) else size
        return WindowOperator(TimeWindows(size, slide_us), self.aggregates, lateness)


def micros(value: timedelta) -> int:
    """A duration in integer microseconds (the gold job's time unit for windows)."""
    return value // _MICROSECOND


QueryDefinition = (PatternQuery | LiveArchiveQuery | UncertainQuery | AcquisitionQuery
                   | WindowQuery)


def _statement(text: str) -> str:
    """A MATCH_RECOGNIZE statement as printed from its syntax tree (whitespace, comments and
    keyword case do not count); the text with its whitespace collapsed if it does not
    parse (``lakecep validate`` reports that)."""
    from cep_core import QueryError, parse, to_sql

    try:
        return to_sql(parse(text))
    except QueryError:
        return " ".join(text.split())


def _us(value: timedelta | None) -> int | None:
    return None if value is None else micros(value)


def canonical_definition(query: QueryDefinition,
                         upstream: dict[str, str] | None = None) -> dict[str, object]:
    """Every field of ``query`` that changes its output, in a canonical form (docs/rules.md,
    "The rule version in every gold row"); not ``description``, ``version``, ``alert``,
    ``priority``, ``[snapshot]``, a live-archive ``strategy`` or acquisition latencies,
    which change how or when results are delivered, not which. ``upstream``: a chained
    rule's inputs' ``rule_hash`` by id (a change upstream is a new version downstream)."""
    doc: dict[str, object] = {"id": query.id, "attributes": sorted(query.attributes)}
    if isinstance(query, PatternQuery):
        doc |= {"kind": "pattern", "query": _statement(query.query),
                "inputs": {i: (upstream or {}).get(i, "") for i in sorted(query.inputs)}}
    elif isinstance(query, LiveArchiveQuery):
        doc |= {"kind": "live_archive", "key": query.key, "live": _statement(query.live),
                "archive": _statement(query.archive), "before": _us(query.before),
                "condition": None if query.condition is None
                else " ".join(query.condition.split())}
    elif isinstance(query, AcquisitionQuery):
        doc |= {"kind": "acquisition", "key": query.key, "acquisition": query.acquisition,
                "pattern": " ".join(query.pattern.split()), "type_column": query.type_column}
    elif isinstance(query, UncertainQuery):
        doc |= {"kind": "uncertain", "query": _statement(query.query), "method": query.method}
    else:
        slide = query.slide
        doc |= {"kind": "window", "attribute": query.attribute,
                "aggregates": sorted(query.aggregates), "window": _us(query.window),
                "rows": query.rows,
                "slide": _us(slide) if isinstance(slide, timedelta) else slide,
                "every": _us(query.every), "key": query.key,
                "event_types": sorted(query.event_types),
                "watermark_delay": _us(query.watermark_delay),
                "allowed_lateness": _us(query.allowed_lateness)}
    return doc


def rule_hash(query: QueryDefinition, upstream: dict[str, str] | None = None) -> str:
    """The first 16 hex digits of the SHA-256 of :func:`canonical_definition`."""
    text = json.dumps(canonical_definition(query, upstream), sort_keys=True,
                      separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def with_rule_hashes(queries: list[QueryDefinition]) -> list[QueryDefinition]:
    """``queries`` with their ``rule_hash`` set, inputs before the chained rules reading
    them (an unknown input or a cycle hashes as an empty input: the rule graph check
    reports it)."""
    by_id = {q.id: q for q in queries}
    done: dict[str, str] = {}

    def visit(name: str, path: frozenset[str]) -> str:
        if name in done:
            return done[name]
        if name not in by_id or name in path:
            return ""
        query = by_id[name]
        inputs = getattr(query, "inputs", ())
        done[name] = rule_hash(query, {i: visit(i, path | {name}) for i in inputs})
        return done[name]

    return [replace(q, rule_hash=visit(q.id, frozenset())) for q in queries]


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


def _attributes(data: dict, where: Path) -> tuple[tuple[str, str], ...]:
    table = data.get("attributes", {})
    if not isinstance(table, dict):
        raise QueryDefinitionError(f"{where}: [attributes] must be a table of name = \"type\"")
    out = []
    for name, kind in table.items():
        if not _NAME.match(name):
            raise QueryDefinitionError(f"{where}: attribute name {name!r} is not a plain "
                                       "identifier")
        if kind not in ATTRIBUTE_TYPES:
            raise QueryDefinitionError(f"{where}: attribute {name!r} has type {kind!r}; "
                                       f"use one of {', '.join(ATTRIBUTE_TYPES)}")
        out.append((name, kind))
    return tuple(out)


def load_query(path: Path) -> QueryDefinition:
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise QueryDefinitionError(f"{path}: not valid TOML: {exc}") from None
    kind = data.get("kind", "pattern")
    alert = data.get("alert", False)
    if not isinstance(alert, bool):
        raise QueryDefinitionError(f"{path}: alert must be true or false, got {alert!r}")
    if alert and kind not in ("pattern", "live_archive"):
        raise QueryDefinitionError(f"{path}: alert = true is for queries whose complex events "
                                   f"go to gold.complex_events (kind 'pattern' or "
                                   f"'live_archive'), not kind {kind!r}")
    snapshot = _snapshot(data.get("snapshot"), alert, path)
    inputs = _inputs(data.get("input"), kind, alert, path)
    if inputs and "acquisition" in data:
        raise QueryDefinitionError(f"{path}: input (a chained rule) is for MATCH_RECOGNIZE "
                                   "pattern queries, not acquisition ones")
    reload = data.get("reload", "warm")
    if reload not in RELOAD_STRATEGIES:
        raise QueryDefinitionError(f"{path}: reload {reload!r}: use one of "
                                   f"{', '.join(map(repr, RELOAD_STRATEGIES))} (how a "
                                   "changed version is deployed while gold runs; "
                                   "docs/rules.md, 'Hot reload')")
    if reload == "side_by_side" and (kind not in ("window", "pattern") or "rows" in data
                                     or inputs or "acquisition" in data):
        why = ("a count window (rows) has no span in event time, so the old version would "
               "never retire" if kind == "window" else
               "side by side is built for window rules and pattern rules with WITHIN, not "
               + ("chained rules" if inputs else "acquisition rules" if kind == "pattern"
                  else f"kind {kind!r}"))
        _no_side_by_side(path, why)
    data = {k: v for k, v in data.items() if k not in ("alert", "snapshot", "input", "reload")}
    common = dict(
        id=_require(data, "id", path),
        reload=str(reload),
        version=str(data.get("version", "1")),
        description=str(data.get("description", "")),
        attributes=_attributes(data, path),
        priority=_priority(data, path),
    )
    if kind == "pattern" and "acquisition" in data:
        return _acquisition_query(data, path, {**common, "alert": alert,
                                                "snapshot": snapshot})
    if kind == "pattern":
        pattern = PatternQuery(query=_require(data, "query", path), alert=alert,
                               snapshot=snapshot, inputs=inputs, **common)
        if reload == "side_by_side" and _without_within(pattern):
            _no_side_by_side(path, "the pattern has no WITHIN, so the old version would "
                             "never retire (every later event could still extend its matches)")
        return pattern
    if kind == "live_archive":
        live, archive = data.get("live", {}), data.get("archive", {})
        strategy = str(data.get("strategy", "auto"))
        if strategy not in ("alaa", "llaa", "ollaa", "sllaa", "auto"):
            raise QueryDefinitionError(f"{path}: strategy {strategy!r}: use alaa, llaa, ollaa, "
                                       "sllaa or auto")
        tl = data.get("tolerated_latency")
        subwindow = data.get("subwindow")
        if subwindow is not None and (not isinstance(subwindow, int) or subwindow < 1):
            raise QueryDefinitionError(f"{path}: subwindow must be a positive integer")
        if strategy == "sllaa" and tl is None and subwindow is None:
            raise QueryDefinitionError(f"{path}: strategy 'sllaa' needs tolerated_latency "
                                       "(e.g. '10 minutes') or subwindow (live matches)")
        return LiveArchiveQuery(
            key=_require(data, "key", path),
            live=_require(live, "query", path),
            archive=_require(archive, "query", path),
            before=parse_duration(_require(archive, "before", path), f"{path}: archive.before"),
            condition=data.get("condition") or None,
            strategy=strategy,
            tolerated_latency=None if tl is None else parse_duration(
                str(tl), f"{path}: tolerated_latency"),
            subwindow=subwindow,
            alert=alert,
            snapshot=snapshot,
            **common,
        )
    if kind == "uncertain":
        method = str(data.get("method", "auto"))
        if method not in UNCERTAIN_METHODS:
            raise QueryDefinitionError(f"{path}: method {method!r}: use one of "
                                       f"{', '.join(UNCERTAIN_METHODS)}")
        return UncertainQuery(query=_require(data, "query", path), method=method, **common)
    if kind == "window":
        return _window_query(data, path, common)
    raise QueryDefinitionError(f"{path}: kind must be 'pattern', 'live_archive', "
                               f"'uncertain' or 'window', got {kind!r}")


def _no_side_by_side(path: Path, why: str) -> None:
    raise QueryDefinitionError(f"{path}: reload = \"side_by_side\": {why}; use "
                               "\"clear\" or \"warm\" (docs/rules.md, 'Hot reload')")


def _without_within(query: PatternQuery) -> bool:
    """Whether the pattern has no ``WITHIN`` (False when it does not compile: the query
    check reports that, with its position)."""
    try:
        return query.compiled().match.within is None
    except Exception:  # noqa: BLE001 - a syntax error, reported by validation
        return False


#: What joins a rule's id and an old version's ``rule_hash`` in the id of that version
#: run side by side with the new one (docs/rules.md, "Hot reload", B).
OLD = "@"

_Q = TypeVar("_Q", bound="QueryDefinition")


def old_version(query: _Q) -> _Q:
    """The old version of a rule deployed side by side, run as query ``<id>@<rule_hash>``
    (its own state rows and watermark) until it retires; its rows keep the rule's id
    (:func:`rule_id`)."""
    return replace(query, id=f"{query.id}{OLD}{query.rule_hash}")


def rule_id(query: QueryDefinition) -> str:
    """The rule's id in gold rows: ``query.id``, also for an :func:`old_version`."""
    return query.id.removesuffix(f"{OLD}{query.rule_hash}")


#: The priority classes, highest first (docs/rules.md, "Priorities").
PRIORITIES = ("high", "normal", "low")


def _priority(data: dict, path: Path) -> str:
    value = data.get("priority", "normal")
    if value not in PRIORITIES:
        raise QueryDefinitionError(f"{path}: priority must be one of "
                                   f"{', '.join(repr(p) for p in PRIORITIES)} (default "
                                   f"'normal'), got {value!r}")
    return str(value)


def _inputs(value: object, kind: str, alert: bool, path: Path) -> tuple[str, ...]:
    """``input``: the rules a chained rule reads (docs/rules.md); a list of ids (or one)."""
    if value is None:
        return ()
    names = [value] if isinstance(value, str) else value
    if (not isinstance(names, list) or not names
            or not all(isinstance(n, str) and n.strip() for n in names)):
        raise QueryDefinitionError(f"{path}: input must be a rule id or a non-empty list of "
                                   f"rule ids, got {value!r}")
    if kind != "pattern":
        raise QueryDefinitionError(f"{path}: input (a chained rule) is for kind 'pattern'; "
                                   f"chained {kind!r} rules are not built yet (docs/rules.md)")
    if alert:
        raise QueryDefinitionError(f"{path}: alert = true on a chained rule (input) is not "
                                   "built yet (docs/rules.md)")
    if len(set(names)) != len(names):
        raise QueryDefinitionError(f"{path}: input lists a rule twice: {names}")
    return tuple(names)


def _snapshot(table: object, alert: bool, path: Path) -> SnapshotSpec | None:
    """The ``[snapshot]`` table (None without one): durations >= 0, ``before`` required,
    and only on an alerting query (snapshots are kept per alert)."""
    if table is None:
        return None
    if not isinstance(table, dict):
        raise QueryDefinitionError(f"{path}: snapshot must be a table ([snapshot] with "
                                   "before = '1 hour', after = ..., horizon = ...)")
    if not alert:
        raise QueryDefinitionError(f"{path}: [snapshot] keeps the events around each alert; "
                                   "it needs alert = true")
    unknown = sorted(set(table) - set(SNAPSHOT_KEYS))
    if unknown:
        raise QueryDefinitionError(f"{path}: unknown key(s) {unknown} in [snapshot]; known: "
                                   f"{', '.join(SNAPSHOT_KEYS)}")
    if "before" not in table:
        raise QueryDefinitionError(f"{path}: [snapshot] needs before (e.g. '1 hour': the "
                                   "events kept before the match's start)")
    values = {}
    for name in SNAPSHOT_KEYS:
        if name in table:
            if not isinstance(table[name], str):
                raise QueryDefinitionError(f"{path}: snapshot.{name} must be a duration "
                                           f"string like '30 minutes', got {table[name]!r}")
            values[name] = parse_duration(table[name], f"{path}: snapshot.{name}")
    return SnapshotSpec(**values)


def _positive_duration(data: dict, name: str, path: Path) -> timedelta:
    value = data[name]
    if not isinstance(value, str):
        raise QueryDefinitionError(f"{path}: {name} must be a duration string like "
                                   f"'5 minutes', got {value!r}")
    out = parse_duration(value, f"{path}: {name}")
    if micros(out) <= 0:
        raise QueryDefinitionError(f"{path}: {name} must be longer than 0 "
                                   f"(at least 1 microsecond), got {value!r}")
    return out


def _count(data: dict, name: str, path: Path) -> int:
    value = data[name]
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise QueryDefinitionError(f"{path}: {name} must be a positive integer (a number of "
                                   f"events), got {value!r}")
    return value


def _window_query(data: dict, path: Path, common: dict) -> WindowQuery:
    unknown = sorted(set(data) - WINDOW_KEYS)
    if unknown:
        raise QueryDefinitionError(f"{path}: unknown key(s) {unknown} for kind = 'window'; "
                                   f"known: {', '.join(sorted(WINDOW_KEYS))}")
    attribute = _require(data, "attribute", path)
    if not _NAME.match(attribute):
        raise QueryDefinitionError(f"{path}: attribute {attribute!r} is not a plain "
                                   "identifier")
    declared = dict(common["attributes"])
    if attribute not in declared:   # a window aggregates a number: double unless declared
        common = {**common, "attributes": (*common["attributes"], (attribute, "double"))}
    elif declared[attribute] not in ("double", "bigint"):
        raise QueryDefinitionError(f"{path}: attribute {attribute!r} is declared "
                                   f"{declared[attribute]!r} in [attributes]; a window "
                                   "aggregates a 'double' or 'bigint' attribute")
    aggregates = data.get("aggregates")
    if (not isinstance(aggregates, list) or not aggregates
            or not all(isinstance(a, str) for a in aggregates)):
        raise QueryDefinitionError(f"{path}: aggregates must be a non-empty list of names "
                                   f"from {', '.join(WINDOW_AGGREGATES)}, got {aggregates!r}")
    for name in aggregates:
        if name not in WINDOW_AGGREGATES:
            raise QueryDefinitionError(f"{path}: aggregates: unknown aggregate {name!r}; use "
                                       f"{', '.join(WINDOW_AGGREGATES)}")
    if len(set(aggregates)) != len(aggregates):
        raise QueryDefinitionError(f"{path}: aggregates: {aggregates} lists an aggregate "
                                   "twice")
    if ("window" in data) == ("rows" in data):
        raise QueryDefinitionError(f"{path}: a window query needs exactly one of window "
                                   "(a duration: time windows) and rows (a number of events: "
                                   "count windows)")
    window = _positive_duration(data, "window", path) if "window" in data else None
    rows = _count(data, "rows", path) if "rows" in data else None
    if "slide" in data and "every" in data:
        raise QueryDefinitionError(f"{path}: slide and every exclude each other: slide "
                                   "makes sliding windows (each emitted when it closes), "
                                   "every samples one sliding window per period")
    slide: timedelta | int | None = None
    every = None
    if rows is not None:
        if "every" in data:
            raise QueryDefinitionError(f"{path}: every (sampling) needs a time window; "
                                       "count windows (rows) take slide = <events>")
        if "slide" in data:
            slide = _count(data, "slide", path)
            if slide > rows:
                raise QueryDefinitionError(f"{path}: slide ({slide}) must be at most rows "
                                           f"({rows}) for count windows")
    else:
        if "slide" in data:
            slide = _positive_duration(data, "slide", path)
        if "every" in data:
            every = _positive_duration(data, "every", path)
    key = str(data.get("key", "object_id"))
    if not _NAME.match(key):
        raise QueryDefinitionError(f"{path}: key {key!r} is not a plain identifier (a "
                                   "silver column or an [attributes] name)")
    types = data.get("event_types", [])
    if not isinstance(types, list) or not all(isinstance(t, str) and t for t in types):
        raise QueryDefinitionError(f"{path}: event_types must be a list of event type "
                                   f"strings, got {types!r}")
    delays = {}
    for name in ("watermark_delay", "allowed_lateness"):
        text = data.get(name, "0 seconds")
        if not isinstance(text, str):
            raise QueryDefinitionError(f"{path}: {name} must be a duration string like "
                                       f"'1 minute', got {text!r}")
        delays[name] = parse_duration(text, f"{path}: {name}")
    return WindowQuery(attribute=attribute, aggregates=tuple(aggregates), window=window,
                       rows=rows, slide=slide, every=every, key=key,
                       event_types=tuple(types), **delays, **common)


def _acquisition_query(data: dict, path: Path, common: dict) -> AcquisitionQuery:
    acquisition = str(data["acquisition"])
    if acquisition not in ACQUISITIONS:
        raise QueryDefinitionError(f"{path}: acquisition {acquisition!r}: use one of "
                                   f"{', '.join(ACQUISITIONS)}")
    if "query" in data:
        raise QueryDefinitionError(f"{path}: an acquisition query has a seed-003 'pattern' "
                                   "(e.g. 'seq(a, b, !x, c; 10 minutes)'), not a "
                                   "MATCH_RECOGNIZE 'query'")
    bound = data.get("latency_bound")
    query = AcquisitionQuery(
        key=_require(data, "key", path), pattern=_require(data, "pattern", path),
        acquisition=acquisition,
        latency_bound=None if bound is None else parse_duration(
            str(bound), f"{path}: latency_bound"),
        step_delay=parse_duration(str(data.get("step_delay", "5 seconds")),
                                  f"{path}: step_delay"),
        type_column=str(data.get("type_column", "event_type")), **common)
    try:
        query.parsed()
    except QueryDefinitionError as exc:
        raise QueryDefinitionError(f"{path}: {exc}") from None
    return query


def load_queries(directory: Path | str | None = None) -> list[QueryDefinition]:
    """All query definitions in ``directory`` (default: the shipped ``queries/``), sorted
    by id; ids must be unique."""
    directory = Path(directory) if directory else QUERIES_DIR
    if not directory.is_dir():
        raise QueryDefinitionError(f"query folder {directory} does not exist")
    queries = [load_query(p) for p in sorted(directory.glob("*.toml"))]
    ids = [q.id for q in queries]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    if dupes:
        raise QueryDefinitionError(f"{directory}: duplicate query ids {dupes}")
    return with_rule_hashes(sorted(queries, key=lambda q: q.id))
