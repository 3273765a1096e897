"""Parse and validate raw landing lines against the event contract (``schemas/events.json``).

One landing line is one JSON object. :func:`parse_line` turns it into a :class:`ParsedEvent`
(exactly the typed columns of ``silver.events``) or a :class:`Rejection` whose ``reason``
starts with a stable code (``REASON_CODES``), e.g. ``missing_field: event_id``.

A landing FILE is cut into lines by :func:`landing_lines` (the one definition of a landed
line, used by bronze and by ``lakecep status``), and :func:`judge_line` gives a landed line's
bronze columns; ``parse_line`` accepts the line's bytes too.

Checks run in a fixed order and the FIRST problem is reported:

0. ``invalid_utf8``    -- (bytes only) the line is not valid UTF-8.
1. ``empty_line``      -- ``None``, ``""`` or only whitespace.
2. ``oversized``       -- more than ``max_line_bytes`` UTF-8 bytes.
3. ``malformed_json``  -- not valid JSON (also NaN/Infinity constants and duplicate keys).
4. ``not_an_object``   -- valid JSON, but not an object.
5. ``unknown_field``   -- a top-level key the contract does not know (first in sorted order).
6. ``missing_field``   -- a required field is absent or ``null`` (contract order).
7. per field, in contract order: ``wrong_type``, then ``invalid_value`` / ``too_long``.
8. cross-field: interval bounds given together, ``time_lower <= event_time <= time_upper``,
   ``pmf`` only with bounds, ``pmf`` non-empty, non-negative and summing to 1.

See ``docs/data.md`` for every reason and the exact accepted formats.
"""

from __future__ import annotations

import gc
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pandas as pd

from lakecep.schemas import event_contract

__all__ = [
    "MAX_TIME",
    "MIN_TIME",
    "PMF_TOLERANCE",
    "REASON_CODES",
    "LINE_CODES",
    "UTF8_BOM",
    "ParsedEvent",
    "Rejection",
    "count_landing_lines",
    "format_time",
    "judge_line",
    "landing_lines",
    "parse_frame",
    "parse_line",
    "parse_time",
    "reason_code",
]

#: Every reason code, in the order the checks run (``too_long`` shares step 7 with
#: ``invalid_value``).
REASON_CODES: tuple[str, ...] = (
    "invalid_utf8",
    "empty_line",
    "oversized",
    "malformed_json",
    "not_an_object",
    "unknown_field",
    "missing_field",
    "wrong_type",
    "invalid_value",
    "too_long",
)

#: The codes that judge the line itself, not the event: with ``ok`` they are bronze's
#: ``parse_status`` values (a line whose reason has another code is ``ok`` in bronze).
LINE_CODES: tuple[str, ...] = ("invalid_utf8", "empty_line", "oversized", "malformed_json")
#: A UTF-8 byte order mark; at the very start of a landing file it is not part of the first
#: line (:func:`landing_lines` strips it), anywhere else it is data.
UTF8_BOM = b"\xef\xbb\xbf"

#: |sum(pmf) - 1| must not exceed this.
PMF_TOLERANCE = 1e-6
#: Accepted timestamp range (fits pandas ``datetime64[ns]`` and Spark ``TIMESTAMP``).
MIN_TIME = datetime(1678, 1, 1, tzinfo=UTC)
MAX_TIME = datetime(2262, 1, 1, tzinfo=UTC)  # exclusive

_CONTRACT = event_contract()
_FIELDS: dict[str, dict[str, Any]] = _CONTRACT["fields"]
_FIELD_ORDER: tuple[str, ...] = tuple(_FIELDS)
_KNOWN = frozenset(_FIELDS)
_REQUIRED: tuple[str, ...] = tuple(n for n, f in _FIELDS.items() if f["required"])
_MAX_STR = int(_CONTRACT.get("max_string_length", 256))
_MAX_ATTRS = int(_CONTRACT.get("max_attributes", 64))
_STRING_FIELDS: tuple[str, ...] = tuple(n for n, f in _FIELDS.items() if f["type"] == "string")
_TIME_FIELDS: tuple[str, ...] = tuple(n for n, f in _FIELDS.items() if f["type"] == "timestamp")

# The module is written for this contract; fail loudly at import if the contract drifts.
_EXPECTED = {
    "event_id": "string",
    "object_id": "string",
    "event_type": "string",
    "source_id": "string",
    "event_time": "timestamp",
    "time_lower": "timestamp",
    "time_upper": "timestamp",
    "pmf": "array<double>",
    "attributes": "map<string,string>",
}
if {n: f["type"] for n, f in _FIELDS.items()} != _EXPECTED:  # pragma: no cover
    raise RuntimeError("schemas/events.json changed; update lakecep/events.py")

_MIN_YEAR = MIN_TIME.year
_MAX_YEAR = MAX_TIME.year
_SHOW = 60  # longest value/name quoted in a reason
#: Reason texts that jobs/silver_native.py also builds in Spark SQL (one definition).
UNKNOWN_FIELD = "unknown_field: "  # + the name
MISSING_FIELD = "missing_field: "  # + the name (+ " is null" when the key is there)
SHOW_CHARS = _SHOW  # a name longer than this (or not printable) is quoted by repr
CROSS_FIELD_REASONS = {
    "together": "invalid_value: time_lower and time_upper must be given together",
    "order": "invalid_value: time_lower after time_upper",
    "outside": "invalid_value: event_time outside [time_lower, time_upper]",
    "pmf_bounds": "invalid_value: pmf requires time_lower and time_upper",
}


class _Number(str):
    """A JSON number, kept as its exact JSON text (so attributes keep '1e5', not '100000.0')."""

    __slots__ = ()


class _DuplicateKey(ValueError):
    pass


class _BadConstant(ValueError):
    pass


def _bad_constant(name: str) -> Any:
    raise _BadConstant(name)


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _DuplicateKey(key)
            seen.add(key)
    return obj


# Fast decoder (numbers kept as text) and a strict one that also reports duplicate keys.
_decoder = json.JSONDecoder(parse_float=_Number, parse_int=_Number, parse_constant=_bad_constant)
_scan = _decoder.scan_once  # type: ignore[attr-defined]
_decode = _decoder.decode
_decode_strict = json.JSONDecoder(
    parse_float=_Number,
    parse_int=_Number,
    parse_constant=_bad_constant,
    object_pairs_hook=_pairs,
).decode


def _duplicate_key(raw: str) -> str | None:
    """The malformed_json reason if the (already decodable) text repeats a key in an object."""
    try:
        _decode_strict(raw)
    except _DuplicateKey as exc:
        return f"malformed_json: duplicate key {_show(str(exc))}"
    return None


@dataclass(frozen=True, slots=True)
class ParsedEvent:
    """A valid event: exactly the typed columns of ``silver.events`` (times are aware UTC)."""

    event_id: str
    object_id: str
    event_type: str
    source_id: str
    event_time: datetime
    time_lower: datetime | None = None
    time_upper: datetime | None = None
    pmf: list[float] | None = None
    attributes: dict[str, str] | None = None


@dataclass(frozen=True, slots=True)
class Rejection:
    """An invalid line; ``reason`` is ``"<code>: <detail>"`` or just ``"<code>"``."""

    reason: str

    @property
    def code(self) -> str:
        return reason_code(self.reason)


def reason_code(reason: str) -> str:
    """The code of a reason string: ``"missing_field: event_id"`` -> ``"missing_field"``."""
    return reason.split(":", 1)[0]


def _show(value: str) -> str:
    text = value if len(value) <= _SHOW else value[:_SHOW] + "..."
    return repr(text)


def _name(value: str) -> str:
    return value if len(value) <= _SHOW and value.isprintable() else _show(value)


def _json_kind(value: Any) -> str:
    if value is None:
        return "null"
    if value is True or value is False:
        return "boolean"
    t = type(value)
    if t is _Number:
        return "number"
    if t is str:
        return "string"
    if t is list:
        return "array"
    return "object"


def _bad_unicode(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _to_utc(text: str) -> datetime | None | bool:
    """Parsed aware UTC datetime; ``None`` if not an accepted timestamp; ``False`` if out of
    range."""
    # Cheap shape check first: fromisoformat also takes dates, week dates, basic format.
    if len(text) < 16 or text[4] != "-" or text[7] != "-" or text[10] not in "T ":
        return None
    if not text.isascii():
        return None
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        return None
    tz = value.tzinfo
    if tz is None:
        value = value.replace(tzinfo=UTC)
    elif tz is not UTC:
        try:
            value = value.astimezone(UTC)
        except OverflowError:
            return False
    if not (_MIN_YEAR <= value.year < _MAX_YEAR):
        return False
    return value


def parse_time(text: str) -> datetime | None:
    """An accepted ISO-8601 timestamp string as an aware UTC datetime, else ``None``.

    Accepted: ``YYYY-MM-DDThh:mm[:ss[.fraction]]`` (``T`` or a space) with an optional
    offset ``Z``, ``±hh``, ``±hhmm`` or ``±hh:mm``. No offset means UTC; fraction digits
    beyond microseconds are truncated; the UTC result must lie in ``[MIN_TIME, MAX_TIME)``.
    """
    value = _to_utc(text)
    return value if isinstance(value, datetime) else None


def format_time(value: datetime) -> str:
    """ISO-8601 UTC text with milliseconds and ``Z``, as the generator writes it."""
    value = value.astimezone(UTC)
    return value.strftime("%Y-%m-%dT%H:%M:%S.") + f"{value.microsecond // 1000:03d}Z"


def _time_field(name: str, value: Any) -> datetime | str:
    """The parsed time, or a reason string."""
    if type(value) is not str:
        return f"wrong_type: {name}: expected ISO-8601 timestamp string, got {_json_kind(value)}"
    parsed = _to_utc(value)
    if parsed is None:
        return f"invalid_value: {name}: {_show(value)} is not an ISO-8601 timestamp"
    if parsed is False:
        return (
            f"invalid_value: {name}: {_show(value)} is out of range "
            f"[{MIN_TIME:%Y-%m-%d}, {MAX_TIME:%Y-%m-%d})"
        )
    return parsed  # type: ignore[return-value]


# A parse result: a reason string, or the tuple of the nine silver columns.
_Result = str | tuple[Any, ...]


def landing_lines(data: bytes) -> list[bytes]:
    r"""The lines of one landing file -- THE definition of a landed line.

    A UTF-8 BOM at the very start of the file is dropped; then every ``\n`` (byte 0x0A) ends
    a line, and bytes after the last ``\n`` form one more line. So an empty file has no
    lines, ``b"\n"`` is one empty line, ``b"a\n\n"`` is ``a`` and one empty line, and
    ``b"a"`` (no final newline) is one line. Nothing else is removed: a ``\r`` (of
    ``\r\n`` or alone), NUL and any other byte stay in the line.
    """
    if data.startswith(UTF8_BOM):
        data = data[len(UTF8_BOM):]
    if not data:
        return []
    lines = data.split(b"\n")
    if not lines[-1]:  # the final newline ends the last line; it starts no new one
        lines.pop()
    return lines


def count_landing_lines(data: bytes) -> int:
    """``len(landing_lines(data))`` without building the lines."""
    start = len(UTF8_BOM) if data.startswith(UTF8_BOM) else 0
    if len(data) == start:
        return 0
    return data.count(b"\n", start) + (0 if data.endswith(b"\n") else 1)


def _utf8(line: bytes) -> str:
    """The text of a landed line, or the ``invalid_utf8`` reason (a :class:`_Invalid`)."""
    try:
        return line.decode("utf-8")
    except UnicodeDecodeError as exc:
        bad = " ".join(f"0x{b:02X}" for b in line[exc.start:exc.end])
        return _Invalid(f"invalid_utf8: {bad} at byte offset {exc.start} is not UTF-8")


class _Invalid(str):
    """An ``invalid_utf8`` reason returned by :func:`_utf8` in place of the text."""

    __slots__ = ()


def judge_line(line: bytes, max_line_bytes: int) -> tuple[str, int, str, str | None]:
    """Bronze's columns of one landed line: ``(raw, byte_length, parse_status, parse_error)``.

    ``parse_status`` is the code of ``parse_line(line)`` when it is one of ``LINE_CODES``,
    else ``ok``; ``parse_error`` is the detail after ``"<code>: "`` (None when there is
    none). ``byte_length`` counts the line's bytes as landed. ``raw`` is the line's text; a
    line that is not valid UTF-8 (status ``invalid_utf8``) has U+FFFD in place of each
    invalid byte sequence -- the only case in which ``raw`` differs from the landed bytes.
    """
    text = _utf8(line)
    if type(text) is _Invalid:
        raw, reason = line.decode("utf-8", "replace"), str(text)
    else:
        raw = text
        result = _parse(text, max_line_bytes)
        reason = result if type(result) is str else "ok"
    code, _, detail = reason.partition(": ")
    if code not in LINE_CODES:
        return raw, len(line), "ok", None
    return raw, len(line), code, detail or None


def _parse(raw: Any, max_line_bytes: int) -> _Result:
    # 0. invalid_utf8 (a landed line given as bytes) ----------------------------------
    # 1. empty_line ---------------------------------------------------------------------
    if type(raw) is not str:
        if raw is None or raw is pd.NA or (isinstance(raw, float) and math.isnan(raw)):
            return "empty_line"
        if isinstance(raw, (bytes, bytearray, memoryview)):
            raw = _utf8(bytes(raw))
            if type(raw) is _Invalid:
                return str(raw)
            return _parse(raw, max_line_bytes)
        if not isinstance(raw, str):
            raise TypeError(f"a landing line must be str, bytes or None, got {type(raw).__name__}")
        raw = str(raw)
    if not raw or raw.isspace():
        return "empty_line"
    # 2. oversized ----------------------------------------------------------------------
    size = len(raw) if raw.isascii() else len(raw.encode("utf-8", "surrogatepass"))
    if size > max_line_bytes:
        return f"oversized: {size} bytes > limit {max_line_bytes}"
    # 3. malformed_json -----------------------------------------------------------------
    try:
        try:
            obj, end = _scan(raw, 0)  # the C scanner, without decode()'s Python wrapper
        except StopIteration:  # e.g. leading whitespace; decode() gives the proper message
            obj, end = _decode(raw), len(raw)
        if end != len(raw):  # trailing whitespace (fine) or extra data (an error)
            obj = _decode(raw)
    except json.JSONDecodeError as exc:
        if raw.startswith("\ufeff"):
            return (
                "malformed_json: starts with a BOM (U+FEFF; only a BOM that starts a file "
                "is dropped)"
            )
        return f"malformed_json: {exc}"
    except _BadConstant as exc:
        return f"malformed_json: {exc} is not valid JSON"
    except RecursionError:
        return "malformed_json: nested too deeply"
    except ValueError as exc:  # pragma: no cover - defensive
        return f"malformed_json: {exc}"
    result = _check(obj)
    if isinstance(result, str):
        # Duplicate keys (a malformed_json problem) come first in the check order.
        return _duplicate_key(raw) or result
    values, colons = result
    # Duplicate keys vanish when decoding into a dict. Without escapes the text holds exactly
    # one ':' per key plus those inside strings, so a mismatch means a key was dropped.
    if "\\" in raw or raw.count(":") != colons:
        duplicate = _duplicate_key(raw)
        if duplicate is not None:
            return duplicate
    return values


def _check(obj: Any) -> str | tuple[tuple[Any, ...], int]:
    """Steps 4-8 on a decoded line: a reason, or (silver values, ':' count of its strings)."""
    # 4. not_an_object ------------------------------------------------------------------
    if type(obj) is not dict:
        return f"not_an_object: got {_json_kind(obj)}"
    # 5. unknown_field ------------------------------------------------------------------
    if not _KNOWN.issuperset(obj):
        unknown = sorted(k for k in obj if k not in _KNOWN)
        return UNKNOWN_FIELD + _name(unknown[0])
    # 6. missing_field ------------------------------------------------------------------
    get = obj.get
    event_id = get("event_id")
    object_id = get("object_id")
    event_type = get("event_type")
    source_id = get("source_id")
    raw_time = get("event_time")
    if event_id is None or object_id is None or event_type is None or source_id is None:
        return _missing(obj)
    if raw_time is None:
        return _missing(obj)
    # 7. per field, in contract order ---------------------------------------------------
    # Fast path for the usual case; on any doubt, _string_problem finds the first problem.
    if not (
        type(event_id) is str
        and type(object_id) is str
        and type(event_type) is str
        and type(source_id) is str
        and 0 < len(event_id) <= _MAX_STR
        and 0 < len(object_id) <= _MAX_STR
        and 0 < len(event_type) <= _MAX_STR
        and 0 < len(source_id) <= _MAX_STR
    ):
        problem = _string_problem(obj)
        assert problem is not None
        return problem
    joined = event_id + object_id + event_type + source_id
    if not joined.isascii() or (
        event_id.isspace() or object_id.isspace() or event_type.isspace() or source_id.isspace()
    ):
        problem = _string_problem(obj)
        if problem is not None:
            return problem
    colons = len(obj) + joined.count(":")  # one ':' per key (known keys hold none)
    if type(raw_time) is str:
        event_time = _to_utc(raw_time)
        if type(event_time) is not datetime:
            return _time_field("event_time", raw_time)  # type: ignore[return-value]
        colons += raw_time.count(":")
    else:
        return _time_field("event_time", raw_time)  # type: ignore[return-value]
    if len(obj) == 5:  # only the required fields (unknown keys were rejected above)
        return (
            event_id,
            object_id,
            event_type,
            source_id,
            event_time,
            None,
            None,
            None,
            None,
        ), colons
    return _check_optional(obj, event_id, object_id, event_type, source_id, event_time, colons)


def _check_optional(
    obj: dict[str, Any],
    event_id: str,
    object_id: str,
    event_type: str,
    source_id: str,
    event_time: datetime,
    colons: int,
) -> str | tuple[tuple[Any, ...], int]:
    """Steps 7 (optional fields, in contract order) and 8 for a line whose required fields
    passed: a reason, or (silver values, ':' count of its strings)."""
    get = obj.get
    lower = upper = None
    pmf: list[float] | None = None
    attributes: dict[str, str] | None = None
    raw_lower = get("time_lower")
    raw_upper = get("time_upper")
    if raw_lower is not None:
        lower = _time_field("time_lower", raw_lower)
        if type(lower) is str:
            return lower
        colons += raw_lower.count(":")
    if raw_upper is not None:
        upper = _time_field("time_upper", raw_upper)
        if type(upper) is str:
            return upper
        colons += raw_upper.count(":")
    raw_pmf = get("pmf")
    if raw_pmf is not None:
        pmf_or_reason = _pmf_values(raw_pmf)
        if isinstance(pmf_or_reason, str):
            return pmf_or_reason
        pmf = pmf_or_reason
    raw_attrs = get("attributes")
    if raw_attrs is not None:
        attrs_or_reason = _attribute_values(raw_attrs)
        if isinstance(attrs_or_reason, str):
            return attrs_or_reason
        attributes, attr_colons = attrs_or_reason
        colons += attr_colons
    # 8. cross-field --------------------------------------------------------------------
    problem = _cross_field_problem(event_time, lower, upper, pmf)
    if problem is not None:
        return problem
    return (
        event_id,
        object_id,
        event_type,
        source_id,
        event_time,
        lower,
        upper,
        pmf,
        attributes,
    ), colons


def _pmf_values(raw_pmf: Any) -> list[float] | str:
    """Step 7 for ``pmf``: its probabilities, or a reason."""
    if type(raw_pmf) is not list:
        return f"wrong_type: pmf: expected array of numbers, got {_json_kind(raw_pmf)}"
    pmf = []
    for item in raw_pmf:
        if type(item) is not _Number:
            return f"wrong_type: pmf: expected array of numbers, got {_json_kind(item)} item"
        number = float(item)
        if not math.isfinite(number):
            return f"invalid_value: pmf has a non-finite probability ({_name(str(item))})"
        if number < 0:
            return f"invalid_value: pmf has a negative probability ({number:.10g})"
        pmf.append(number)
    return pmf


def _attribute_values(raw_attrs: Any) -> tuple[dict[str, str], int] | str:
    """Step 7 for ``attributes``: (the entries as text, ':' count of keys and string
    values plus one per key), or a reason."""
    if type(raw_attrs) is not dict:
        return f"wrong_type: attributes: expected object, got {_json_kind(raw_attrs)}"
    if len(raw_attrs) > _MAX_ATTRS:
        return f"too_long: attributes has {len(raw_attrs)} entries > {_MAX_ATTRS}"
    # Fast pass; on any doubt _attributes_problem walks the entries in order.
    colons = 0
    attributes = {}
    doubt = False
    for key, value in raw_attrs.items():
        t = type(value)
        if t is _Number:
            attributes[key] = str(value)
            doubt = doubt or len(value) > _MAX_STR
        elif t is str:
            attributes[key] = value
            colons += value.count(":")
            doubt = doubt or len(value) > _MAX_STR or not value.isascii()
        elif value is True:
            attributes[key] = "true"
        elif value is False:
            attributes[key] = "false"
        elif value is not None:
            doubt = True
    if raw_attrs:
        keys = "".join(raw_attrs)
        colons += len(raw_attrs) + keys.count(":")
        if (
            doubt
            or "" in raw_attrs
            or not keys.isascii()
            or max(map(len, raw_attrs)) > _MAX_STR
        ):
            problem = _attributes_problem(raw_attrs)
            if problem is not None:
                return problem
    return attributes, colons


def _cross_field_problem(
    event_time: datetime, lower: Any, upper: Any, pmf: list[float] | None
) -> str | None:
    """Step 8: the first problem between fields that are each fine on their own."""
    if (lower is None) != (upper is None):
        return CROSS_FIELD_REASONS["together"]
    if lower is not None:
        if lower > upper:
            return CROSS_FIELD_REASONS["order"]
        if not (lower <= event_time <= upper):
            return CROSS_FIELD_REASONS["outside"]
    if pmf is not None:
        if lower is None:
            return CROSS_FIELD_REASONS["pmf_bounds"]
        if not pmf:
            return "invalid_value: pmf is empty"
        total = math.fsum(pmf)
        if abs(total - 1.0) > PMF_TOLERANCE:
            return f"invalid_value: pmf must sum to 1 (got {total:.10g})"
    return None


def _missing(obj: dict[str, Any]) -> str:
    for name in _REQUIRED:
        if obj.get(name) is None:
            return MISSING_FIELD + name + (" is null" if name in obj else "")
    raise AssertionError("no required field is missing")  # pragma: no cover


def _attributes_problem(attrs: dict[str, Any]) -> str | None:
    """The first problem among the attribute entries, in their order."""
    for key, value in attrs.items():
        if not key:
            return "invalid_value: attributes has an empty key"
        if len(key) > _MAX_STR:
            return f"too_long: attributes key has {len(key)} chars > {_MAX_STR}"
        if not key.isascii() and _bad_unicode(key):
            return "invalid_value: attributes key is not valid Unicode (lone surrogate)"
        t = type(value)
        if t is str or t is _Number:
            if len(value) > _MAX_STR:
                return f"too_long: attributes.{_name(key)} has {len(value)} chars > {_MAX_STR}"
            if t is str and not value.isascii() and _bad_unicode(value):
                return (
                    f"invalid_value: attributes.{_name(key)} is not valid Unicode (lone surrogate)"
                )
        elif not (value is None or value is True or value is False):
            return (
                f"wrong_type: attributes.{_name(key)}: expected string, number, boolean "
                f"or null, got {_json_kind(value)}"
            )
    return None


def _string_problem(obj: dict[str, Any]) -> str | None:
    """The first problem among the string fields, in contract order."""
    for name in _STRING_FIELDS:
        value = obj[name]
        if type(value) is not str:
            return f"wrong_type: {name}: expected string, got {_json_kind(value)}"
        if not value or value.isspace():
            return f"invalid_value: {name} is empty"
        if len(value) > _MAX_STR:
            return f"too_long: {name} has {len(value)} chars > {_MAX_STR}"
        if not value.isascii() and _bad_unicode(value):
            return f"invalid_value: {name} is not valid Unicode (lone surrogate)"
    return None


def parse_line(raw: str | bytes | None, max_line_bytes: int = 65536) -> ParsedEvent | Rejection:
    """Validate one landing line; return the typed event or the first problem found.

    ``raw`` is the line's text, or its bytes as landed (then a line that is not valid UTF-8
    is rejected with ``invalid_utf8``)."""
    result = _parse(raw, max_line_bytes)
    if isinstance(result, str):
        return Rejection(result)
    return ParsedEvent(*result)


_FRAME_COLUMNS = (
    "event_id",
    "object_id",
    "event_type",
    "source_id",
    "event_time",
    "time_lower",
    "time_upper",
    "pmf",
    "attributes",
)


def parse_frame(raw: pd.Series, max_line_bytes: int = 65536) -> pd.DataFrame:
    """Parse a Series of landing lines (e.g. inside Spark's ``mapInPandas``).

    One output row per input row (same index): ``ok`` (bool), ``reason`` (str or None) and
    the :class:`ParsedEvent` columns (``None``/``NaT`` where the line was rejected). Time
    columns are ``datetime64[ns, UTC]``; ``pmf`` holds lists or None, ``attributes`` dicts or
    None. Row by row it agrees with :func:`parse_line`.
    """
    n = len(raw)
    reason: list[str | None] = [None] * n
    good_rows: list[int] = []
    good: list[tuple[Any, ...]] = []
    parse = _parse
    add_row = good_rows.append
    add = good.append
    # Millions of fresh containers would trigger many useless cyclic-GC passes (no cycles
    # are created here): pause the collector while building.
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        for i, line in enumerate(raw.tolist()):
            result = parse(line, max_line_bytes)
            if isinstance(result, str):
                reason[i] = result
            else:
                add_row(i)
                add(result)
        all_ok = len(good) == n
        ok = np.zeros(n, dtype=bool)
        ok[good_rows] = True
        data: dict[str, Any] = {"ok": ok, "reason": _objects(reason)}
        columns = list(zip(*good, strict=True)) if good else [() for _ in _FRAME_COLUMNS]
        for name, values in zip(_FRAME_COLUMNS, columns, strict=True):
            if name in _TIME_FIELDS:
                data[name] = _time_column(values, good_rows, n)
                continue
            if all_ok:
                col = _objects(values)
            else:
                col = np.full(n, None, dtype=object)
                if good:
                    col[good_rows] = _objects(values)
            data[name] = col
        del columns, good
    finally:
        if gc_was_enabled:
            gc.enable()
    return pd.DataFrame(data, index=raw.index, copy=False)


_NAT = np.iinfo(np.int64).min  # NaT as int64 nanoseconds


def _time_column(values: Sequence[datetime | None], rows: list[int], n: int) -> Any:
    """Aware UTC datetimes (or None) of the rows ``rows`` -> ``datetime64[ns, UTC]`` of length
    ``n`` with NaT elsewhere."""
    out = np.full(n, _NAT, dtype=np.int64)
    if any(v is not None for v in values):
        if None in values:
            stamps = pd.to_datetime(list(values), utc=True)
        else:
            stamps = pd.DatetimeIndex(values)
        out[rows] = stamps.as_unit("ns").asi8
    return pd.DatetimeIndex(out.view("datetime64[ns]")).tz_localize("UTC").array


def _objects(values: Any) -> np.ndarray:
    """A 1-D object array (no attempt to broadcast lists or dicts into more dimensions)."""
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out
