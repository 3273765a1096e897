"""Bring your own events: sources declared in configuration, one TOML file per source.

A source file (``$LAKECEP_HOME/sources/<name>.toml``, or ``sources_dir``) says where a
source's files land, their format (``jsonl``, ``csv``, ``parquet``) -- or which Kafka topic
it reads (``kafka``: each message's value is one record, like a JSON line) --, the types of
its fields and how they map onto the event contract (``schemas/events.json``). See
docs/sources.md.

Pure parts live here (no Spark): cutting a landed file into records
(:func:`file_records`), the mapping of one record to a silver row (:class:`Mapping`,
:func:`map_frame`) and type inference (:func:`infer_type`). Bronze and silver call them
inside ``mapInPandas``; ``lakecep status`` counts landed records with the same function.

Mapping expressions are cep_core expressions (the language of DEFINE/MEASURES, without
navigation or aggregates), evaluated row by row by cep_core's own expression compiler over
the record's typed fields: a constant (``'card'``), a field (``card``), a concatenation
(``'c-' || card``), ``CASE WHEN amount > 500 THEN 'big' ELSE 'small' END``. The column
``_raw_hash`` holds the deterministic id of the raw record (sha256 of source name and raw
text, 32 hex digits); it is the ``event_id`` when the mapping gives none.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import re
import tomllib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from lakecep.config import Uri, is_uri, location

FORMATS = ("jsonl", "csv", "parquet", "kafka")
#: bronze ``source_file`` of a Kafka record: ``kafka://<source>/<topic>/<partition>``, with
#: the message's offset as ``line_no`` (the record's origin: a message read twice is
#: recognisable, and landed = distinct origins = messages read).
KAFKA_ORIGIN = "kafka://"
#: Kafka consumer settings Spark's Kafka source sets itself and refuses (``kafka.<key>``);
#: ``bootstrap.servers`` is the source file's ``bootstrap_servers``.
KAFKA_RESERVED = ("bootstrap.servers", "auto.offset.reset", "key.deserializer",
                  "value.deserializer", "enable.auto.commit", "interceptor.classes")
#: Field and attribute types (Spark SQL type names).
FIELD_TYPES = ("string", "bigint", "double", "boolean", "timestamp")
#: Contract fields a mapping may set (``event_id`` defaults to ``_raw_hash``).
MAPPED_FIELDS = ("event_id", "object_id", "event_type", "source_id", "event_time",
                 "time_lower", "time_upper")
REQUIRED = ("event_id", "object_id", "event_type", "source_id", "event_time")
TIME_FIELDS = ("event_time", "time_lower", "time_upper")
#: bronze ``parse_status`` codes added by non-JSON formats.
MALFORMED_CSV = "malformed_csv"
UNREADABLE_FILE = "unreadable_file"
RAW_HASH = "_raw_hash"
_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")
_MAX_STR = 256
_MAX_ATTRS = 64


class SourceError(ValueError):
    """A source file is invalid (the message names the file and the key).

    ``key``: the key path it is about (``("mapping", "event_type")``, ``("operators", 2,
    "where")``; empty if none), ``error``: the expression's ``QueryError`` (its line and
    column are within the expression), for ``lakecep validate``'s file:line:column."""

    def __init__(self, message: str, key: tuple[str | int, ...] = (),
                 error: Exception | None = None) -> None:
        super().__init__(message)
        self.key = key
        self.error = error


# ----------------------------------------------------------------------------- config


@dataclass(frozen=True)
class Operator:
    """One ``[[operators]]`` entry (docs/sources.md, "Preprocessing operators")."""

    op: str
    #: keep_fields, drop_fields, fill_forward: the declared fields it names
    fields: tuple[str, ...] = ()
    #: fill: the field filled; split: the message's key holding the array
    field: str = ""
    #: fill: the value expression; filter: the predicate
    expr: str = ""
    #: fill_forward, merge: the key expression ("": the mapping's object_id)
    key: str = ""
    #: merge: the tolerance in microseconds
    within: int = 0
    #: merge: (field, first | last | min | max | sum) for the fields not taken from the first
    combine: tuple[tuple[str, str], ...] = ()
    #: split: the declared field a scalar element goes to
    into: str = ""



@dataclass(frozen=True)
class Source:
    name: str
    format: str
    #: landing folder: absolute, or relative to ``$LAKECEP_HOME``
    path: str
    mapping: tuple[tuple[str, str], ...]
    fields: tuple[tuple[str, str], ...] = ()
    strict: bool = False
    time_format: str = "iso"
    timezone: str = "UTC"
    csv_header: bool = True
    csv_delimiter: str = ","
    csv_quote: str = '"'
    csv_columns: tuple[str, ...] = ()
    #: preprocessing operators, in order (see :func:`_operators`)
    operators: tuple[Operator, ...] = ()
    file: str = ""
    #: the silver job's quarantine gate for this source (None: the setting
    #: ``max_quarantine_ratio``)
    max_quarantine_ratio: float | None = None
    #: ``format = "kafka"``: the ``[kafka]`` table (docs/sources.md, "Kafka topics")
    kafka_servers: str = ""
    kafka_topic: str = ""
    kafka_starting_offsets: str = "earliest"
    kafka_max_offsets_per_trigger: int | None = None
    #: ``[kafka.options]``: Kafka consumer settings, handed to Spark as ``kafka.<key>``
    kafka_options: tuple[tuple[str, str], ...] = ()

    @property
    def sequential(self) -> bool:
        """Whether the source has an operator that sees records as a sequence
        (``fill_forward``, ``merge``, ``split``): then silver runs it through
        :func:`lakecep.operators.run_operators`, with state across micro-batches."""
        return any(o.op in SEQUENTIAL for o in self.operators)

    def landing(self, home: Path) -> Path | Uri:
        """The landing folder, or an object-store URI (``s3a://bucket/prefix``)."""
        where = location(self.path)
        return where if isinstance(where, Uri) else home / where

    def field_types(self) -> dict[str, str]:
        return dict(self.fields)

    def origin_prefix(self) -> str:
        """The start of a Kafka source's bronze ``source_file`` (``kafka://<name>/``)."""
        return f"{KAFKA_ORIGIN}{self.name}/"

    def kafka_reader_options(self) -> dict[str, str]:
        """The options of Spark's Kafka source (``spark.readStream.format("kafka")``)."""
        options = {"kafka.bootstrap.servers": self.kafka_servers,
                   "subscribe": self.kafka_topic,
                   "startingOffsets": self.kafka_starting_offsets,
                   # a topic deleted or aged out under a running stream fails the run
                   # loudly rather than skipping data silently (the Spark default, explicit)
                   "failOnDataLoss": "true"}
        if self.kafka_max_offsets_per_trigger is not None:
            options["maxOffsetsPerTrigger"] = str(self.kafka_max_offsets_per_trigger)
        options.update({f"kafka.{k}": v for k, v in self.kafka_options})
        return options

    def attribute_types(self) -> dict[str, str]:
        """The contract of this source's attributes: every declared field that is not
        mapped as a whole onto a contract field, with its type (undeclared fields that a
        non-strict source keeps are strings)."""
        direct = {expr.strip() for _, expr in self.mapping}
        return {n: t for n, t in self.fields if n not in direct}


def _str(data: dict, key: str, where: str, default: str | None = None,
         table: str = "") -> str:
    value = data.get(key, default)
    if not isinstance(value, str) or (default is None and not value):
        shown = f"{table}.{key}" if table else key
        raise SourceError(f"{where}: {shown!r} must be a non-empty string",
                          (table, key) if table else (key,))
    return value


#: The keys a source file may have: at the top, in [time], [csv] and each [[operators]].
KNOWN_KEYS = ("name", "format", "path", "strict", "mapping", "fields", "time", "csv",
              "operators", "max_quarantine_ratio", "kafka")
TABLE_KEYS = {"time": ("format", "timezone"), "csv": ("header", "delimiter", "quote", "columns"),
              "operators": ("op", "fields", "field", "value", "where", "key", "within",
                            "combine", "into"),
              "kafka": ("bootstrap_servers", "topic", "starting_offsets",
                        "max_offsets_per_trigger", "options")}


def unknown_keys(data: dict) -> list[tuple[tuple[str | int, ...], tuple[str, ...]]]:
    """Every unknown key of a parsed source file: ``(key path, the keys known there)``."""
    out: list[tuple[tuple[str | int, ...], tuple[str, ...]]] = [
        ((key,), KNOWN_KEYS) for key in data if key not in KNOWN_KEYS]
    for table in ("time", "csv", "kafka"):
        if isinstance(data.get(table), dict):
            out += [((table, key), TABLE_KEYS[table]) for key in data[table]
                    if key not in TABLE_KEYS[table]]
    items = data.get("operators")
    for k, item in enumerate(items if isinstance(items, list) else [], 1):
        if isinstance(item, dict):
            out += [(("operators", k, key), TABLE_KEYS["operators"]) for key in item
                    if key not in TABLE_KEYS["operators"]]
    return out


def load_source(path: Path) -> Source:
    """Read and check one source file."""
    where = str(path)
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise SourceError(f"{where}: not valid TOML: {exc}") from None
    for key, known in unknown_keys(data):
        shown = ".".join(f"[{p}]" if isinstance(p, int) else p for p in key
                         ).replace(".[", "[")
        raise SourceError(f"{where}: unknown key {shown!r} (known there: "
                          f"{', '.join(sorted(known))})", key)
    name = _str(data, "name", where, path.stem)
    if not _NAME.match(name) or name == "events":
        raise SourceError(f"{where}: source name {name!r} must be an identifier other than "
                          "'events' (the built-in RFID source)", ("name",))
    fmt = _str(data, "format", where)
    if fmt not in FORMATS:
        raise SourceError(f"{where}: format {fmt!r}: use one of {', '.join(FORMATS)}",
                          ("format",))
    kafka = _kafka(data, fmt, where)
    fields = data.get("fields", {})
    if not isinstance(fields, dict):
        raise SourceError(f"{where}: [fields] must be a table of name = \"type\"", ("fields",))
    for fname, kind in fields.items():
        if kind not in FIELD_TYPES:
            raise SourceError(f"{where}: fields.{fname} has type {kind!r}; use one of "
                              f"{', '.join(FIELD_TYPES)}", ("fields", fname))
    mapping = data.get("mapping", {})
    if not isinstance(mapping, dict):
        raise SourceError(f"{where}: [mapping] must be a table of contract field = expression",
                          ("mapping",))
    for key, expr in mapping.items():
        if key not in MAPPED_FIELDS:
            raise SourceError(f"{where}: mapping.{key}: not a contract field; use "
                              f"{', '.join(MAPPED_FIELDS)}", ("mapping", key))
        if not isinstance(expr, str) or not expr.strip():
            raise SourceError(f"{where}: mapping.{key} must be a non-empty expression string",
                              ("mapping", key))
    missing = [f for f in REQUIRED if f != "event_id" and f not in mapping]
    if missing:
        raise SourceError(f"{where}: [mapping] lacks {', '.join(missing)} (event_id may be "
                          "left out: then it is the hash of the raw record)", ("mapping",))
    ratio = data.get("max_quarantine_ratio")
    if ratio is not None and (isinstance(ratio, bool) or not isinstance(ratio, int | float)
                              or not 0 <= ratio <= 1):
        raise SourceError(f"{where}: max_quarantine_ratio must be a number from 0 to 1 (the "
                          f"share of a batch's rows that may be quarantined), got {ratio!r}",
                          ("max_quarantine_ratio",))
    time = data.get("time", {})
    csv_opts = data.get("csv", {})
    timezone = _str(time, "timezone", where, "UTC", "time")
    try:
        ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError):
        raise SourceError(f"{where}: time.timezone {timezone!r} is not a known time zone",
                          ("time", "timezone")) from None
    source = Source(
        name=name, format=fmt, path=_str(data, "path", where, f"landing/{name}"),
        mapping=tuple(mapping.items()), fields=tuple(fields.items()),
        strict=bool(data.get("strict", False)),
        time_format=_str(time, "format", where, "iso", "time"), timezone=timezone,
        csv_header=bool(csv_opts.get("header", True)),
        csv_delimiter=_str(csv_opts, "delimiter", where, ",", "csv"),
        csv_quote=_str(csv_opts, "quote", where, '"', "csv"),
        csv_columns=tuple(csv_opts.get("columns", ())),
        operators=_operators(data.get("operators", []), tuple(fields), where), file=where,
        max_quarantine_ratio=None if ratio is None else float(ratio),
        **kafka,
    )
    if fmt == "csv" and not source.csv_header and not source.csv_columns:
        raise SourceError(f"{where}: csv.header = false needs csv.columns = [...]",
                          ("csv", "header"))
    if len(source.csv_delimiter) != 1 or len(source.csv_quote) != 1:
        raise SourceError(f"{where}: csv.delimiter and csv.quote must be one character",
                          ("csv", "delimiter" if len(source.csv_delimiter) != 1 else "quote"))
    Mapping.of(source)  # compile the expressions now: a bad one fails at start-up
    return source


def _kafka(data: dict, fmt: str, where: str) -> dict[str, Any]:
    """The ``[kafka]`` table of a source file -> the Kafka fields of :class:`Source`."""
    table = data.get("kafka")
    if fmt != "kafka":
        if table is not None:
            raise SourceError(f"{where}: [kafka] is only for format = \"kafka\"", ("kafka",))
        return {}
    if not isinstance(table, dict):
        raise SourceError(f"{where}: format = \"kafka\" needs a [kafka] table with "
                          "bootstrap_servers and topic", ("format",))
    if "path" in data:
        raise SourceError(f"{where}: path: a kafka source has no landing folder (it reads "
                          "[kafka] topic)", ("path",))
    servers = _str(table, "bootstrap_servers", where, None, "kafka")
    topic = _str(table, "topic", where, None, "kafka")
    if not all(_KAFKA_TOPIC.match(t.strip()) for t in topic.split(",")):
        raise SourceError(f"{where}: kafka.topic {topic!r}: a topic name (letters, digits, "
                          "'.', '_', '-'), or several joined by ','", ("kafka", "topic"))
    starting = _str(table, "starting_offsets", where, "earliest", "kafka")
    if starting not in ("earliest", "latest"):
        try:
            parsed = json.loads(starting)
        except json.JSONDecodeError:
            parsed = None
        if not isinstance(parsed, dict):
            raise SourceError(f"{where}: kafka.starting_offsets {starting!r}: use \"earliest\", "
                              "\"latest\" or a JSON object of offsets per topic and partition "
                              "('{\"t\": {\"0\": 23, \"1\": -2}}')",
                              ("kafka", "starting_offsets"))
    most = table.get("max_offsets_per_trigger")
    if most is not None and (isinstance(most, bool) or not isinstance(most, int) or most < 1):
        raise SourceError(f"{where}: kafka.max_offsets_per_trigger must be a positive integer, "
                          f"got {most!r}", ("kafka", "max_offsets_per_trigger"))
    options = table.get("options", {})
    if not isinstance(options, dict):
        raise SourceError(f"{where}: kafka.options must be a table of Kafka consumer settings "
                          "([kafka.options])", ("kafka", "options"))
    passed = []
    for key, value in options.items():
        name = key.removeprefix("kafka.")
        if name in KAFKA_RESERVED:
            raise SourceError(
                f"{where}: kafka.options.{key}: lakecep and Spark's Kafka source set "
                f"{name} themselves" + (" (use kafka.bootstrap_servers)"
                                        if name == "bootstrap.servers" else ""),
                ("kafka", "options", key))
        if isinstance(value, dict | list) or value is None:
            raise SourceError(f"{where}: kafka.options.{key} must be a string, number or "
                              f"boolean, got {value!r}", ("kafka", "options", key))
        text = ("true" if value else "false") if isinstance(value, bool) else str(value)
        passed.append((name, text))
    return {"kafka_servers": servers, "kafka_topic": ",".join(t.strip() for t in topic.split(",")),
            "kafka_starting_offsets": starting, "kafka_max_offsets_per_trigger": most,
            "kafka_options": tuple(passed)}


_KAFKA_TOPIC = re.compile(r"^[A-Za-z0-9._-]{1,249}$")

OPERATORS = ("keep_fields", "drop_fields", "fill", "filter", "fill_forward", "merge", "split")
#: Operators that see a source's records as a sequence (state across micro-batches).
SEQUENTIAL = ("fill_forward", "merge", "split")
COMBINE = ("first", "last", "min", "max", "sum")
#: The index of a split part (0-based), a column of the records after a ``split``.
PART = "_part"


def _operators(items: Any, fields: tuple[str, ...], where: str) -> tuple[Operator, ...]:  # noqa: C901, PLR0912
    """``[[operators]]`` entries -> :class:`Operator` (checked: docs/sources.md)."""
    if not isinstance(items, list):
        raise SourceError(f"{where}: operators must be an array of tables ([[operators]])",
                          ("operators",))
    out = []
    for k, item in enumerate(items, 1):
        at = f"{where}: operators[{k}]"
        op = item.get("op") if isinstance(item, dict) else None
        if op not in OPERATORS:
            raise SourceError(f"{at}: op {op!r}: use one of {', '.join(OPERATORS)}",
                              ("operators", k, "op") if isinstance(item, dict) and "op" in item
                              else ("operators", k))
        allowed = {"keep_fields": {"fields"}, "drop_fields": {"fields"},
                   "fill": {"field", "value"}, "filter": {"where"},
                   "fill_forward": {"fields", "key"}, "merge": {"key", "within", "combine"},
                   "split": {"field", "into"}}[op]
        for extra in sorted(set(item) - allowed - {"op"}):
            raise SourceError(f"{at}: {op} has no key {extra!r} (it takes "
                              f"{', '.join(sorted(allowed))})", ("operators", k, extra))
        key = item.get("key", "")
        if not isinstance(key, str):
            raise SourceError(f"{at}: key must be an expression string", ("operators", k, "key"))
        if op in ("keep_fields", "drop_fields", "fill_forward"):
            names = item.get("fields")
            if not isinstance(names, list) or not names or not all(n in fields for n in names):
                raise SourceError(f"{at}: {op} needs fields = [...] naming declared [fields]",
                                  ("operators", k, "fields"))
            out.append(Operator(op, fields=tuple(names), key=key))
        elif op == "fill":
            name, value = item.get("field"), item.get("value")
            if name not in fields or not isinstance(value, str) or not value.strip():
                raise SourceError(f"{at}: fill needs field = <a declared field> and value = "
                                  "<expression>", ("operators", k))
            out.append(Operator(op, field=name, expr=value))
        elif op == "filter":
            predicate = item.get("where")
            if not isinstance(predicate, str) or not predicate.strip():
                raise SourceError(f"{at}: filter needs where = <predicate>", ("operators", k))
            out.append(Operator(op, expr=predicate))
        elif op == "merge":
            within = item.get("within")
            if isinstance(within, bool) or not isinstance(within, int | float) or not (
                    0 < within < 10**9):
                raise SourceError(f"{at}: merge needs within = <seconds> (a number > 0), got "
                                  f"{within!r}", ("operators", k, "within")
                                  if "within" in item else ("operators", k))
            combine = item.get("combine", {})
            if not isinstance(combine, dict):
                raise SourceError(f"{at}: combine must be a table of field = "
                                  f"\"{'|'.join(COMBINE)}\"", ("operators", k, "combine"))
            for name, how in combine.items():
                if name not in fields or how not in COMBINE:
                    raise SourceError(f"{at}: combine.{name} = {how!r}: name a declared field "
                                      f"and one of {', '.join(COMBINE)}",
                                      ("operators", k, "combine", name))
            out.append(Operator(op, key=key, within=round(within * 1_000_000),
                                combine=tuple(combine.items())))
        else:  # split
            name, into = item.get("field"), item.get("into", "")
            if not isinstance(name, str) or not _NAME.match(name) or name in fields:
                raise SourceError(f"{at}: split needs field = <a key of the message holding a "
                                  "JSON array> (not a declared field: the array is not "
                                  "typed)", ("operators", k, "field") if "field" in item
                                  else ("operators", k))
            if into and into not in fields:
                raise SourceError(f"{at}: split into = {into!r} must name a declared field",
                                  ("operators", k, "into"))
            out.append(Operator(op, field=name, into=into))
    return tuple(out)


def sources_dir(settings: Any) -> Path:
    configured = getattr(settings, "sources_dir", "")
    return Path(configured) if configured else settings.home / "sources"


def load_sources(directory: Path) -> list[Source]:
    """Every ``*.toml`` source in ``directory`` (none if it does not exist), by name."""
    if not directory.is_dir():
        return []
    sources = [load_source(p) for p in sorted(directory.glob("*.toml"))]
    names = [s.name for s in sources]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise SourceError(f"{directory}: duplicate source names {dupes}")
    return sorted(sources, key=lambda s: s.name)


def attribute_types(sources: Sequence[Source]) -> dict[str, str]:
    """The typed attributes of all sources (one type per name across sources)."""
    out: dict[str, str] = {}
    for source in sources:
        for name, kind in source.attribute_types().items():
            if out.setdefault(name, kind) != kind:
                raise SourceError(f"attribute {name!r} is {out[name]} in one source and {kind} "
                                  f"in {source.file}: give it one type", ("fields", name))
    return out


# ----------------------------------------------------------------------------- records


def raw_hash(source: str, raw: str) -> str:
    """The deterministic id of a raw record."""
    return hashlib.sha256(f"{source}\n{raw}".encode("utf-8", "surrogatepass")).hexdigest()[:32]


def _json_default(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if hasattr(value, "isoformat"):
        return value.isoformat()
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def file_records(source: Source, data: bytes,
                 max_line_bytes: int) -> Iterator[tuple[str, int, str, str | None]]:
    """The records of one landed file: ``(raw, byte_length, parse_status, parse_error)``.

    - ``jsonl``: the lines of ``lakecep.events.landing_lines``, judged by ``judge_line``
      (the RFID source's definition; event-level problems are silver's);
    - ``csv``: the records of Python's csv reader with the source's dialect (quoted
      fields may hold delimiters and newlines); the header is not a record. ``raw`` is the
      record as a JSON object of strings; a record whose field count differs from the
      header is ``malformed_csv``, an empty one ``empty_line``;
    - ``parquet``: the rows, ``raw`` a JSON object (numbers stay numbers); a file that
      cannot be read is one ``unreadable_file`` record.
    """
    from lakecep.events import UTF8_BOM, judge_line, landing_lines

    if source.format == "jsonl":
        for line in landing_lines(data):
            raw, size, status, error = judge_line(line, max_line_bytes)
            yield raw, size, status, error
        return
    if source.format == "parquet":
        try:
            import pyarrow.parquet as pq

            rows = pq.read_table(io.BytesIO(data)).to_pylist()
        except Exception as exc:  # noqa: BLE001 - any reader failure is the file's problem
            yield "", len(data), UNREADABLE_FILE, f"not a readable parquet file: {exc}"[:500]
            return
        for row in rows:
            raw = json.dumps(row, default=_json_default, allow_nan=False
                             ) if _finite(row) else json.dumps(row, default=_json_default)
            size = len(raw.encode("utf-8", "surrogatepass"))
            status = "oversized" if size > max_line_bytes else "ok"
            yield raw, size, status, (f"{size} bytes > limit {max_line_bytes}"
                                      if status != "ok" else None)
        return
    if data.startswith(UTF8_BOM):
        data = data[len(UTF8_BOM):]
    text = data.decode("utf-8", "surrogateescape")
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=source.csv_delimiter,
                        quotechar=source.csv_quote, strict=False)
    header = list(source.csv_columns)
    if source.csv_header:
        first = next(reader, None)
        if first is None:
            return
        if not header:
            header = [h.strip() for h in first]
    for fields in reader:
        joined = source.csv_delimiter.join(fields)
        size = len(joined.encode("utf-8", "surrogateescape"))
        if any(_has_surrogate(f) for f in fields):
            yield (json.dumps(fields, ensure_ascii=False).encode("utf-8", "replace")
                   .decode("utf-8"), size, "invalid_utf8", "record is not UTF-8")
        elif not fields or fields == [""] * len(fields) and len(fields) <= 1:
            yield "", size, "empty_line", None
        elif size > max_line_bytes:
            yield "", size, "oversized", f"{size} bytes > limit {max_line_bytes}"
        elif len(fields) != len(header):
            yield (json.dumps(fields, ensure_ascii=False), size, MALFORMED_CSV,
                   f"{len(fields)} fields, the header has {len(header)}")
        else:
            yield json.dumps(dict(zip(header, fields, strict=True)), ensure_ascii=False), size, \
                "ok", None


def message_record(value: bytes | None, max_line_bytes: int) -> tuple[str, int, str, str | None]:
    """The record of one Kafka message: its value, judged exactly like a JSON line
    (``lakecep.events.judge_line``); a message without a value (a tombstone) is an
    ``empty_line``. ``(raw, byte_length, parse_status, parse_error)``."""
    from lakecep.events import judge_line

    return judge_line(bytes(value) if value is not None else b"", max_line_bytes)


def _finite(row: dict) -> bool:
    return all(not (isinstance(v, float) and not math.isfinite(v)) for v in row.values())


def _has_surrogate(text: str) -> bool:
    return any("\udc80" <= ch <= "\udcff" for ch in text)


def count_records(source: Source, data: bytes, max_line_bytes: int = 65536) -> int:
    """How many bronze rows one landed file becomes (``lakecep status``'s landed count)."""
    return sum(1 for _ in file_records(source, data, max_line_bytes))


# ----------------------------------------------------------------------------- types


def infer_type(values: Sequence[Any]) -> str:
    """The narrowest field type that holds every non-null value: ``boolean``, ``bigint``,
    ``double``, ``timestamp`` (ISO-8601 text) or ``string`` (strings of numbers count as
    numbers, as CSV gives them)."""
    present = [v for v in values if v is not None and v != ""]
    if not present:
        return "string"
    for kind in ("boolean", "bigint", "double", "timestamp"):
        if all(not isinstance(_coerce(v, kind, None), _Bad) for v in present):
            return kind
    return "string"


class _Bad(str):
    """A coercion failure (its text is the reason detail)."""

    __slots__ = ()


_BOOL_TEXT = {"true": True, "false": False}


def _coerce(value: Any, kind: str, time: Callable[[str], datetime | None] | None) -> Any:
    """``value`` as ``kind`` (None stays None), or a :class:`_Bad`."""
    if value is None:
        return None
    if kind == "string":
        if isinstance(value, (dict, list)):
            return _Bad(f"expected a scalar, got {type(value).__name__}")
        if isinstance(value, bool):
            return "true" if value else "false"
        return str(value)
    if kind == "boolean":
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in _BOOL_TEXT:
            return _BOOL_TEXT[value.strip().lower()]
        return _Bad(f"{_show(value)} is not a boolean")
    if kind == "bigint":
        if isinstance(value, bool):
            return _Bad(f"{_show(value)} is not an integer")
        if isinstance(value, int):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, str) and re.fullmatch(r"\s*[+-]?\d+\s*", value):
            return int(value)
        return _Bad(f"{_show(value)} is not an integer")
    if kind == "double":
        if isinstance(value, bool):
            return _Bad(f"{_show(value)} is not a number")
        if isinstance(value, (int, float)):
            number = float(value)
        elif isinstance(value, str):
            try:
                number = float(value)
            except ValueError:
                return _Bad(f"{_show(value)} is not a number")
        else:
            return _Bad(f"{_show(value)} is not a number")
        return number if math.isfinite(number) else _Bad(f"{_show(value)} is not finite")
    if kind == "timestamp":
        if isinstance(value, datetime):
            return value if value.tzinfo else value.replace(tzinfo=UTC)
        if isinstance(value, str):
            parsed = (time or _iso)(value)
            if parsed is not None:
                return parsed
        return _Bad(f"{_show(value)} is not a timestamp")
    raise AssertionError(kind)  # pragma: no cover


def _iso(text: str) -> datetime | None:
    from lakecep.events import parse_time

    return parse_time(text)


def _show(value: Any) -> str:
    text = str(value)
    return repr(text if len(text) <= 60 else text[:60] + "...")


_FIXED = {"Y": "([0-9]{4})", "m": "([0-9]{2})", "d": "([0-9]{2})", "H": "([0-9]{2})",
          "M": "([0-9]{2})", "S": "([0-9]{2})"}


def fixed_width(fmt: str) -> Callable[[str], datetime | None] | None:
    """A fast parser for a strptime format made of ``%Y %m %d %H %M %S`` (each at most
    once, ``%Y %m %d`` present), each followed by a literal character that is not a digit
    (or the end), e.g. ``%Y-%m-%d %H:%M:%S``; None for other formats.

    It reads text whose fields have their full width (4 digits for the year, 2 for the
    others) and separators exactly as written -- the text strptime reads the same way
    (the separators make the split unique); for any other text it returns None and the
    caller asks strptime. ``datetime.strptime`` costs ~10 us a call, this ~1 us."""
    parts, order, i = ["^"], [], 0
    while i < len(fmt):
        if fmt[i] == "%":
            directive = fmt[i + 1:i + 2]
            if directive not in _FIXED or directive in order:
                return None
            if i + 2 < len(fmt) and (fmt[i + 2] == "%" or fmt[i + 2].isdigit()):
                return None  # two fields in a row: strptime may split the digits otherwise
            parts.append(_FIXED[directive])
            order.append(directive)
            i += 2
        else:
            if fmt[i].isdigit():
                return None
            parts.append(re.escape(fmt[i]))
            i += 1
    if not {"Y", "m", "d"} <= set(order):
        return None
    pattern = re.compile("".join(parts) + "$")
    index = [order.index(d) + 1 if d in order else 0 for d in "YmdHMS"]

    def parse(text: str) -> datetime | None:
        found = pattern.match(text)
        if found is None:
            return None
        fields = [int(found.group(k)) if k else 0 for k in index]
        return datetime(*fields)  # noqa: DTZ001 - naive, as strptime's; zone applied after

    return parse


def time_parser(fmt: str, timezone: str, fast: bool = True) -> Callable[[Any], datetime | None]:
    """Text or number -> aware UTC datetime (None if it does not parse).

    ``fmt``: ``iso`` (ISO-8601; no offset means ``timezone``), ``epoch_seconds``,
    ``epoch_millis``, or a ``strptime`` format (``%z`` in it wins over ``timezone``);
    ``fast``: read what :func:`fixed_width` can read without strptime (same result)."""
    zone = ZoneInfo(timezone)

    def local(value: datetime) -> datetime:
        if value.tzinfo is None:
            value = value.replace(tzinfo=zone)
        return value.astimezone(UTC)

    def parse(value: Any) -> datetime | None:
        try:
            if fmt in ("epoch_seconds", "epoch_millis"):
                number = float(value)
                if not math.isfinite(number):
                    return None
                scale = 1000.0 if fmt == "epoch_millis" else 1.0
                return datetime.fromtimestamp(number / scale, tz=UTC)
            if isinstance(value, datetime):
                return local(value)
            text = str(value).strip()
            if fmt == "iso":
                parsed = datetime.fromisoformat(text)
                if not (1678 <= parsed.year < 2262):
                    return None
                return local(parsed)
            if fixed is not None:
                parsed = fixed(text)
                if parsed is not None:
                    return local(parsed)
            return local(datetime.strptime(text, fmt))  # noqa: DTZ007 - zone applied above
        except (ValueError, OverflowError, OSError, TypeError):
            return None

    fixed = None if not fast or fmt in ("iso", "epoch_seconds", "epoch_millis") else (
        fixed_width(fmt))
    return parse


# ----------------------------------------------------------------------------- mapping


_FORBIDDEN_CALLS = {"PREV", "NEXT", "FIRST", "LAST", "COUNT", "SUM", "AVG", "MIN", "MAX",
                    "CLASSIFIER", "MATCH_NUMBER"}


@dataclass(frozen=True)
class Step:
    """One compiled operator: ``arg`` is op-specific (keep/drop: the names as a frozenset;
    fill: the field; fill_forward: the fields; split: (field, into); merge: the combine
    table as a dict), ``fn`` the compiled expression (fill: value, filter: predicate,
    fill_forward and merge: key)."""

    op: str
    text: str
    arg: Any
    fn: Any
    within: int = 0


@dataclass
class Mapping:
    """One source's compiled mapping (compiled once per process and source)."""

    source: Source
    #: contract field -> (expression text, compiled row function, plain column name or None)
    exprs: dict[str, tuple[str, Any, str | None]] = field(default_factory=dict)
    columns: tuple[str, ...] = ()
    #: compiled operators, in order
    steps: tuple[Step, ...] = ()
    #: per-source constants, computed once: field types, kept attribute types, time parser
    types: dict[str, str] = field(default_factory=dict)
    kept: dict[str, str] = field(default_factory=dict)
    time: Any = None
    #: whether an expression reads _raw_hash (else map_record does not compute it)
    hashed: bool = True

    @classmethod
    def of(cls, source: Source) -> Mapping:  # noqa: C901
        from cep_core.compile.expressions import ExprCompiler, Scope, walk
        from cep_core.errors import QueryError
        from cep_core.language import ast
        from cep_core.language.parser import parse_expression

        split = any(o.op == "split" for o in source.operators)
        columns = (*(n for n, _ in source.fields), RAW_HASH, *((PART,) if split else ()))
        scope = Scope(columns, {}, "MEASURES")
        exprs = {}
        steps = []
        read: set[str] = set()  # the columns the expressions read (lower case)
        mapped = dict(source.mapping)

        def compile_expr(text: str, what: str) -> Any:
            tree = parse_expression(text)
            for node in walk(tree):
                if isinstance(node, ast.Call) and node.name in _FORBIDDEN_CALLS:
                    raise QueryError(f"{node.name}(...) is not allowed {what} (one record at "
                                     "a time)", *node.pos)
                if isinstance(node, ast.Column) and node.var is not None:
                    raise QueryError(f"{node.var}.{node.name}: no pattern variables {what}",
                                     *node.pos)
            read.update(n.name.lower() for n in walk(tree) if isinstance(n, ast.Column))
            return tree, ExprCompiler(scope).compile(tree)

        for k, op in enumerate(source.operators, 1):
            if op.op in ("keep_fields", "drop_fields"):
                steps.append(Step(op.op, ",".join(op.fields), frozenset(op.fields), None))
                continue
            if op.op == "split":
                steps.append(Step(op.op, op.field, (op.field, op.into), None))
                continue
            if op.op in ("fill_forward", "merge"):
                text, name = op.key or mapped["object_id"], "key"
            else:
                text, name = op.expr, "value" if op.op == "fill" else "where"
            try:
                fn = compile_expr(text, "in an operator")[1]
            except QueryError as exc:
                raise SourceError(f"{source.file}: operators[{k}] ({op.op}) {text!r}: {exc}",
                                  ("operators", k, name), exc) from None
            arg = {"fill": op.field, "fill_forward": op.fields,
                   "merge": dict(op.combine)}.get(op.op)
            steps.append(Step(op.op, text, arg, fn, op.within))
        for target, text in source.mapping:
            try:
                tree, fn = compile_expr(text, "in a mapping")
            except QueryError as exc:
                raise SourceError(f"{source.file}: mapping.{target} = {text!r}: {exc} "
                                  "(expressions may use the declared [fields] and "
                                  f"{RAW_HASH}{', ' + PART if split else ''})",
                                  ("mapping", target), exc) from None
            plain = tree.name if isinstance(tree, ast.Column) else None
            exprs[target] = (text, fn, plain)
        if "event_id" not in exprs:
            exprs["event_id"] = (RAW_HASH, ExprCompiler(scope).compile(
                parse_expression(RAW_HASH)), RAW_HASH)
        hashed = source.sequential or "event_id" not in mapped or RAW_HASH in read or any(
            n.lower() == RAW_HASH for n, _ in source.fields)
        return cls(source, exprs, columns, tuple(steps), source.field_types(),
                   source.attribute_types(), time_parser(source.time_format, source.timezone),
                   hashed)


_MAPPINGS: dict[int, tuple[Source, Mapping]] = {}


def mapping_of(source: Source) -> Mapping:
    """The compiled mapping of ``source`` (cached per source object)."""
    found = _MAPPINGS.get(id(source))
    if found is None or found[0] is not source:
        found = _MAPPINGS[id(source)] = (source, Mapping.of(source))
    return found[1]


def _attr_text(value: Any) -> str:
    """Canonical text of a typed attribute value (silver stores the map as text; the
    source's field types say how to read it back, losslessly)."""
    if type(value) is str:  # the common case, first
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, datetime):
        from lakecep.events import format_time

        return format_time(value)
    return str(value)


def parse_record(source: Source, raw: str) -> tuple[dict[str, Any], dict[str, Any],
                                                     list[str]] | str:
    """Step 1 of the mapping: one bronze ``raw`` record -> ``(typed, unknown, problems)``:
    the declared fields converted to their types (plus ``_raw_hash`` when an expression may
    read it), the undeclared fields with their JSON values (sorted by name), and every
    problem; or the reason when ``raw`` is not a JSON object."""
    mapping = mapping_of(source)
    try:
        record = json.loads(raw)
    except (json.JSONDecodeError, RecursionError) as exc:
        return f"malformed_json: {exc}"
    if not isinstance(record, dict):
        return f"not_an_object: got {type(record).__name__}"
    problems: list[str] = []
    types, time = mapping.types, mapping.time
    typed: dict[str, Any] = {}
    for name, kind in source.fields:
        value = record.get(name)
        if value == "" and kind != "string":
            value = None
        converted = _coerce(value, kind, time)
        if isinstance(converted, _Bad):
            problems.append(f"wrong_type: {name}: {converted} ({kind})")
            converted = None
        typed[name] = converted
    unknown = {k: record[k] for k in sorted(record) if k not in types}
    if source.strict and unknown:
        problems += [f"unknown_field: {k}" for k in unknown]
    if mapping.hashed:  # else no expression reads it (and it is no attribute)
        typed[RAW_HASH] = raw_hash(source.name, raw)
    return typed, unknown, problems


def row_state(typed: dict[str, Any]) -> Any:
    """The one-row evaluation state of cep_core's compiled expressions over ``typed``
    (its columns are lists of one value: write ``state.cols[name][0]`` to change one)."""
    from cep_core.compile.state import MatchState

    state = MatchState({k: [v] for k, v in typed.items()}, ())
    state.hi, state.rows, state.upto = 1, [0], 1
    return state


def map_record(source: Source, raw: str) -> tuple[Any, ...] | str:
    """One bronze ``raw`` record -> the nine silver event columns, or a quarantine reason
    naming EVERY failing field (``"<code>: <field>: <detail>; <code>: ..."``). For a source
    without sequential operators (``fill_forward``, ``merge``, ``split``: those run over a
    sequence, :func:`lakecep.operators.run_operators`)."""
    mapping = mapping_of(source)
    if source.sequential:
        raise ValueError(f"source {source.name!r} has sequential operators: its records are "
                         "mapped by lakecep.operators.run_operators")
    parsed = parse_record(source, raw)
    if isinstance(parsed, str):
        return parsed
    typed, unknown, problems = parsed
    state = row_state(typed)
    dropped: set[str] = set()
    if mapping.steps and not problems:
        outcome = apply_step_row(mapping.steps, state, typed, unknown, dropped)
        if outcome is not None:
            return outcome
    return map_typed(source, state, typed, unknown, dropped, problems)


def map_typed(source: Source, state: Any, typed: dict[str, Any],  # noqa: C901, PLR0912, PLR0913
              unknown: dict[str, Any], dropped: set[str],
              problems: list[str]) -> tuple[Any, ...] | str:
    """Steps 2-4 of the mapping over a typed record (after the operators): the contract
    fields by the mapping expressions, the checks and the attributes; the nine silver event
    columns, or the reason naming every problem (``problems`` holds those found before)."""
    mapping = mapping_of(source)
    time = mapping.time
    out: dict[str, Any] = {}
    for target in MAPPED_FIELDS:
        if target not in mapping.exprs:
            out[target] = None
            continue
        text, fn, _ = mapping.exprs[target]
        try:
            value = fn(state)
        except Exception as exc:  # noqa: BLE001 - a failing expression is the row's problem
            problems.append(f"invalid_value: {target}: {text} failed: {exc}")
            continue
        if value is None or (isinstance(value, float) and math.isnan(value)):
            if target in REQUIRED:
                problems.append(f"missing_field: {target}: {text} is null")
            out[target] = None
            continue
        if target in TIME_FIELDS:
            parsed = value if isinstance(value, datetime) else time(value)
            if parsed is None or not (1678 <= parsed.year < 2262):
                problems.append(f"invalid_value: {target}: {_show(value)} does not match "
                                f"time format {source.time_format!r}")
                continue
            out[target] = parsed.astimezone(UTC) if parsed.tzinfo else parsed.replace(tzinfo=UTC)
            continue
        text_value = _attr_text(value)
        if not text_value.strip():
            problems.append(f"invalid_value: {target} is empty")
        elif len(text_value) > _MAX_STR:
            problems.append(f"too_long: {target} has {len(text_value)} chars > {_MAX_STR}")
        out[target] = text_value
    lower, upper, at = out.get("time_lower"), out.get("time_upper"), out.get("event_time")
    if (lower is None) != (upper is None):
        problems.append("invalid_value: time_lower and time_upper must be given together")
    elif lower is not None and at is not None and not lower <= at <= upper:
        problems.append("invalid_value: event_time outside [time_lower, time_upper]")
    attributes = {}
    for name in mapping.kept:
        if typed.get(name) is not None and name not in dropped:
            attributes[name] = _attr_text(typed[name])
    if not source.strict:
        for name, value in unknown.items():
            if name in dropped or value is None:
                continue
            if isinstance(value, (dict, list)):
                problems.append(f"wrong_type: {name}: an unknown field must be a scalar, got "
                                f"{type(value).__name__}")
                continue
            attributes[name] = _attr_text(value)
    if len(attributes) > _MAX_ATTRS:
        problems.append(f"too_long: attributes has {len(attributes)} entries > {_MAX_ATTRS}")
    if problems:
        return "; ".join(problems)
    return (out["event_id"], out["object_id"], out["event_type"], out["source_id"],
            out["event_time"], out["time_lower"], out["time_upper"], None, attributes or None)


FILTERED = "filtered"


def apply_step_row(steps: Sequence[Step], state: Any, typed: dict[str, Any],
                   unknown: dict[str, Any], dropped: set[str]) -> str | None:
    """Run the record-at-a-time operators in order on one typed record (in place; the
    sequential ones are :mod:`lakecep.operators`'):

    - ``keep_fields``: every declared or unknown field not listed becomes NULL and is not
      kept as an attribute; ``drop_fields``: the listed ones do;
    - ``fill``: a NULL field takes the expression's value (a default or derived from other
      fields), converted to the field's type by the expression's own result;
    - ``filter``: a record whose predicate is not TRUE is dropped: the result is the reason
      ``filtered: <predicate>`` (silver keeps it in quarantine, counted as filtered).

    Returns None, or the ``filtered`` (or failed expression) reason."""
    for step in steps:
        outcome = apply_step(step, state, typed, unknown, dropped)
        if outcome is not None:
            return outcome
    return None


def apply_step(step: Step, state: Any, typed: dict[str, Any], unknown: dict[str, Any],
               dropped: set[str]) -> str | None:
    """One record-at-a-time operator (see :func:`apply_step_row`)."""
    op, cols = step.op, state.cols
    if op in ("keep_fields", "drop_fields"):
        for name in [n for n in (*typed, *unknown) if n not in (RAW_HASH, PART)]:
            if (name in step.arg) == (op == "drop_fields"):
                dropped.add(name)
                if name in cols:
                    cols[name][0] = None
                    typed[name] = None
    elif op == "fill":
        if cols[step.arg][0] is None:
            try:
                value = step.fn(state)
            except Exception as exc:  # noqa: BLE001
                return f"invalid_value: {step.arg}: fill {step.text} failed: {exc}"
            cols[step.arg][0] = typed[step.arg] = value
            dropped.discard(step.arg)
    elif op == "filter":
        try:
            keep = step.fn(state)
        except Exception as exc:  # noqa: BLE001
            return f"invalid_value: filter {step.text} failed: {exc}"
        if keep is not True:
            return f"{FILTERED}: {step.text}"
    else:  # pragma: no cover - sequential operators are lakecep.operators'
        raise AssertionError(op)
    return None


def map_frame(source: Source, raw: Sequence[str | None]) -> list[tuple[Any, ...] | str]:
    """:func:`map_record` over a batch (None -> ``empty_line``)."""
    return [map_record(source, r) if r else "empty_line" for r in raw]


def source_of_file(sources: Sequence[Source], home: Path, file_path: str) -> Source | None:
    """The source whose landing folder holds ``file_path`` (a Spark ``file:`` URI or a
    path; a Kafka source's origin ``kafka://<source>/...``), or None (the built-in RFID
    landing)."""
    from urllib.parse import unquote, urlparse

    if file_path.startswith(KAFKA_ORIGIN):
        return next((s for s in sources if s.format == "kafka"
                     and file_path.startswith(s.origin_prefix())), None)
    if is_uri(file_path):  # an object store: the source whose landing URI is a prefix
        for source in sources:
            if source.format == "kafka":
                continue  # no landing folder
            landing = source.landing(home)
            if isinstance(landing, Uri) and file_path.startswith(f"{landing}/"):
                return source
        return None
    parsed = urlparse(file_path)
    path = Path(unquote(parsed.path) if parsed.scheme else file_path)
    paths = {path, path.resolve()}
    for source in sources:
        if source.format == "kafka":
            continue  # no landing folder
        landing = source.landing(home)
        if isinstance(landing, Uri):
            continue
        for folder in {landing, landing.resolve()}:
            if any(p.parent == folder or folder in p.parents for p in paths):
                return source
    return None


def with_source_attributes(queries: Sequence[Any], sources: Sequence[Source]) -> list[Any]:
    """``queries`` with every source's typed attributes added to their ``[attributes]`` (a
    query's own declaration wins): queries name the user's fields as typed columns."""
    import dataclasses

    types = attribute_types(sources)
    if not types:
        return list(queries)
    out = []
    for query in queries:
        own = dict(query.attributes)
        merged = {**types, **own}
        out.append(dataclasses.replace(query, attributes=tuple(sorted(merged.items()))))
    return out
