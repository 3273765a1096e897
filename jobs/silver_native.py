"""Silver's event contract evaluated natively: Spark SQL expressions decide the usual rows,
``lakecep.events`` (Python) only the rows Spark's JSON parser cannot judge exactly.

:func:`parse` gives, for bronze rows of the built-in RFID source, the same columns as
``jobs/silver.parse_batches`` (``ok``, ``reason``, the typed ``silver.events`` columns,
then ``raw, source_file, line_no, ingest_time``) -- row for row the same values
(``tests/integration/test_silver_native.py`` checks it on fuzzed lines).

It relies on bronze: a row whose ``parse_status`` is ``ok`` was judged by
``lakecep.events.judge_line``, so its ``raw`` is one strict JSON text (no NaN/Infinity,
no duplicate key at any level) within ``max_line_bytes``. Bronze's other rows keep
bronze's reason, as in the Python path.

One ``from_json`` into a fixed struct (the contract's fields; the scalar ones as STRING)
and ``json_object_keys`` (for unknown and absent keys) give every field; cheap
expressions then decide. A row is decided natively when the answer is sure:

* the line holds no backslash (no escapes: no lone surrogates, no quotes inside strings);
* a string field's value cannot be the text Spark makes of a non-string JSON value
  (``{``/``[``-led, ``true``/``false``, or a number's characters -- then the line itself
  must show ``"name":"value"``), is ASCII, not blank and at most the contract's length;
* timestamps have the shape ``YYYY-MM-DD[T ]hh:mm:ss[.f{1,9}][Z|+hh:mm|-hh:mm]``, which
  ``lakecep.events.parse_time`` and Spark's cast read alike, and lie in the range;
* ``pmf`` is an array of finite, non-negative numbers summing to 1 within the tolerance
  (with a margin for summation order), ``attributes`` an object of scalars whose text,
  quotes aside, is the line's own (Spark writes numbers its own way: ``1e5`` ->
  ``100000.0``; the check keeps the line's text exactly).

Natively rejected: ``unknown_field`` (a printable ASCII name), ``missing_field`` (an absent
key) and the cross-field interval reasons. Every other row (0.5 % of ``lakecep generate``'s
lines: its wrong_type ones) goes through ``jobs/silver.parse_batches``: the native frame is
persisted once, its sure rows are read from the cache and only the others reach Python.
"""

from __future__ import annotations

from typing import Any

from lakecep import events, schemas

_CONTRACT = schemas.event_contract()
_FIELDS: dict[str, dict[str, Any]] = _CONTRACT["fields"]
_MAX_STR = int(_CONTRACT.get("max_string_length", 256))
_MAX_ATTRS = int(_CONTRACT.get("max_attributes", 64))
_STRINGS = [n for n, f in _FIELDS.items() if f["type"] == "string"]
_TIMES = [n for n, f in _FIELDS.items() if f["type"] == "timestamp"]
_REQUIRED = [n for n, f in _FIELDS.items() if f["required"]]
#: from_json's schema: the scalar fields as STRING (a JSON string's text, any other value's
#: JSON text), pmf and attributes typed (a value of another kind leaves them NULL).
_SCHEMA = ", ".join(f"`{n}` {'STRING' if f['type'] in ('string', 'timestamp') else f['type']}"
                    for n, f in _FIELDS.items())
_TIME_SHAPE = ("^[0-9]{4}-[0-9]{2}-[0-9]{2}[T ][0-9]{2}:[0-9]{2}:[0-9]{2}([.][0-9]{1,9})?"
               "(Z|[+-][0-9]{2}:[0-9]{2})?$")
#: |sum - 1| below this is surely within PMF_TOLERANCE for Python's exact sum (math.fsum)
#: too: a naive sum of n terms in [0, 1] is off by at most n * 2**-53.
_PMF_SURE = events.PMF_TOLERANCE - 1e-9


def _lit(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _sure_string(name: str) -> str:
    """SQL: the string field ``name`` (non-null) is surely a JSON string within the
    contract's rules (else the row is not sure)."""
    v = f"_s.`{name}`"
    return (
        f"length({v}) BETWEEN 1 AND {_MAX_STR} AND octet_length({v}) = length({v})"
        f" AND trim({v}) <> ''"
        f" AND NOT (startswith({v}, '{{') OR startswith({v}, '[') OR {v} IN ('true', 'false'))"
        # a number's text (Spark writes 12, -1.5, 1.0E-5): the line must show the string
        f" AND (translate({v}, '0123456789.-E', '') <> ''"
        f" OR contains(raw, concat('\"{name}\":\"', {v}, '\"'))"
        f" AND NOT coalesce(map_contains_key(_s.attributes, {_lit(name)}), false))"
    )


def _attributes_sure() -> str:
    """SQL: ``attributes`` (non-null) is an object of scalars within the contract's limits
    whose entries Spark read exactly as Python does."""
    values = "concat(chr(1), array_join(map_values(_s.attributes), chr(1)))"
    # Without braces in strings or nesting ('{' and '}' twice in the line), the line's own
    # text of the object is between '"attributes":{' and the next '}'; quotes aside it must
    # equal Spark's rewrite of what it read (numbers as Spark writes them).
    own_text = ("concat('{', substring_index(substring_index(raw, '\"attributes\":{', -1), "
                "'}', 1), '}')")
    return (
        f"size(_s.attributes) <= {_MAX_ATTRS}"
        " AND NOT array_contains(map_keys(_s.attributes), '')"
        f" AND length(array_join(map_keys(_s.attributes), '')) <= {_MAX_STR}"
        f" AND length(array_join(map_values(_s.attributes), '')) <= {_MAX_STR}"
        f" AND NOT contains({values}, chr(1) || '{{')"
        f" AND NOT contains({values}, chr(1) || '[')"
        " AND length(raw) - length(replace(raw, '{', '')) = 2"
        " AND length(raw) - length(replace(raw, '}', '')) = 2"
        " AND contains(raw, '\"attributes\":{')"
        f" AND replace({own_text}, '\"', '') = replace(to_json(_s.attributes), '\"', '')"
    )


def _range(column: str) -> str:
    low, high = (events.format_time(t).replace("T", " ").removesuffix("Z")
                 for t in (events.MIN_TIME, events.MAX_TIME))
    return (f"CASE WHEN {column} >= TIMESTAMP '{low}' AND {column} < TIMESTAMP '{high}'"
            f" THEN {column} END")


def native_columns() -> list[tuple[str, str]]:
    """(name, SQL) pairs evaluated in order over a bronze row, each may use the earlier
    ones. ``_reason`` is the verdict: '' = surely ok, a text = surely this reason, NULL =
    not sure (then lakecep.events decides); the other columns hold the typed values."""
    known = "array(" + ", ".join(_lit(n) for n in _FIELDS) + ")"
    cols: list[tuple[str, str]] = [
        ("_s", "CASE WHEN parse_status = 'ok' AND NOT contains(raw, '\\\\') THEN "
               f"from_json(raw, '{_SCHEMA}', map('allowNonNumericNumbers', 'false')) END"),
        ("_keys", "CASE WHEN _s IS NOT NULL THEN json_object_keys(raw) END"),
        ("_unknown", f"array_min(array_except(_keys, {known}))"),
        ("_missing", "CASE " + " ".join(f"WHEN _s.`{n}` IS NULL THEN {_lit(n)}"
                                        for n in _REQUIRED) + " END"),
    ]
    for name in _TIMES:
        v = f"_s.`{name}`"
        has_offset = f"(endswith({v}, 'Z') OR substr({v}, -6, 1) IN ('+', '-'))"
        cols.append((f"_c_{name}", f"CASE WHEN {v} RLIKE '{_TIME_SHAPE}' THEN try_cast("
                                   f"CASE WHEN {has_offset} THEN {v} ELSE {v} || 'Z' END"
                                   " AS TIMESTAMP) END"))
        cols.append((f"_t_{name}", _range(f"_c_{name}")))
    event_time, lower, upper = (f"_t_{n}" for n in _TIMES)
    present = {n: f"array_contains(_keys, {_lit(n)})" for n in _FIELDS}
    fields_ok = " AND ".join(
        [f"({_sure_string(n)})" for n in _STRINGS]
        + [f"{event_time} IS NOT NULL"]
        + [f"(_s.`{n}` IS NULL AND NOT {present[n]} OR _t_{n} IS NOT NULL)" for n in _TIMES[1:]]
        + [f"(NOT {present['pmf']} OR _s.pmf IS NOT NULL AND size(_s.pmf) > 0"
           " AND size(array_compact(_s.pmf)) = size(_s.pmf)"
           " AND array_min(_s.pmf) >= 0 AND array_max(_s.pmf) < double('Infinity'))",
           f"(NOT {present['attributes']} OR _s.attributes IS NOT NULL AND "
           f"{_attributes_sure()})"])
    cols.append(("_fields_ok", f"coalesce({fields_ok}, false)"))
    cross = events.CROSS_FIELD_REASONS
    pmf_sum_ok = (f"(_s.pmf IS NULL OR abs(aggregate(_s.pmf, 0D, (a, x) -> a + x) - 1) "
                  f"<= {_PMF_SURE!r})")
    name_ok = f"_unknown RLIKE '^[ -~]{{0,{events.SHOW_CHARS}}}$'"
    cols.append(("_reason", (
        "CASE WHEN _s IS NULL THEN NULL"
        f" WHEN _unknown IS NOT NULL THEN CASE WHEN {name_ok} THEN"
        f" {_lit(events.UNKNOWN_FIELD)} || _unknown END"
        " WHEN _missing IS NOT NULL THEN CASE WHEN NOT array_contains(_keys, _missing) THEN"
        f" {_lit(events.MISSING_FIELD)} || _missing END"
        " WHEN NOT _fields_ok THEN NULL"
        f" WHEN ({lower} IS NULL) <> ({upper} IS NULL) THEN {_lit(cross['together'])}"
        f" WHEN {lower} > {upper} THEN {_lit(cross['order'])}"
        f" WHEN NOT ({event_time} BETWEEN {lower} AND {upper}) THEN {_lit(cross['outside'])}"
        f" WHEN _s.pmf IS NOT NULL AND {lower} IS NULL THEN {_lit(cross['pmf_bounds'])}"
        f" WHEN {pmf_sum_ok} THEN '' END")))
    return cols


def _columns(ddl: str) -> list[tuple[str, str]]:
    """(name, type) of a DDL column list."""
    depth, start, out = 0, 0, []
    for i, ch in enumerate(ddl + ","):
        depth += ch == "<"
        depth -= ch == ">"
        if ch == "," and depth == 0:
            name, kind = ddl[start:i].strip().split(" ", 1)
            out.append((name, kind))
            start = i + 1
    return out


def parse(batch, max_line_bytes: int):  # noqa: ANN001, ANN201
    """Bronze rows (``raw, parse_status, parse_error, source_file, line_no, ingest_time``)
    -> ``(parsed, cached)``: ``parsed`` has silver's parsed rows (``jobs/silver.PARSED_DDL``),
    native where sure, the other bronze-``ok`` rows by ``jobs/silver.parse_batches``
    (``lakecep.events``); ``cached`` is the persisted native frame ``parsed`` reads (the
    caller unpersists it), so the native columns are computed once however often
    ``parsed`` is read, and Python sees only the rows it must judge."""
    from pyspark.sql import functions as F

    from .silver import EVENT_COLUMNS, PARSED_DDL, parse_batches

    frame = batch
    for name, sql in native_columns():
        frame = frame.withColumn(name, F.expr(sql))
    judged = F.col("parse_status") != "ok"
    sure = judged | F.col("_reason").isNotNull()
    native_ok = ~judged & (F.col("_reason") == "")
    bronze_reason = F.when(F.col("parse_error").isNull(), F.col("parse_status")).otherwise(
        F.concat_ws(": ", "parse_status", "parse_error"))
    native = {n: F.col(f"_s.`{n}`") for n in _STRINGS}
    native.update({n: F.col(f"_t_{n}") for n in _TIMES})
    native["pmf"] = F.col("_s.pmf")
    native["attributes"] = F.expr(  # Python leaves out null entries
        "CASE WHEN size(array_compact(map_values(_s.attributes))) = size(_s.attributes)"
        " THEN _s.attributes ELSE map_filter(_s.attributes, (k, v) -> v IS NOT NULL) END")
    kinds = dict(_columns(PARSED_DDL))
    cached = frame.select(
        sure.alias("_sure"),
        native_ok.alias("ok"),
        F.when(judged, bronze_reason).when(~native_ok, F.col("_reason")).alias("reason"),
        *[F.when(native_ok, native[n]).cast(kinds[n]).alias(n) for n in EVENT_COLUMNS],
        "raw", "source_file", "line_no", "ingest_time", "parse_status", "parse_error",
    ).persist()
    columns = [n for n, _ in _columns(PARSED_DDL)]
    rest = cached.where(~F.col("_sure")).drop("_sure").mapInPandas(
        parse_batches(max_line_bytes), PARSED_DDL)
    return cached.where("_sure").select(*columns).unionByName(rest), cached
