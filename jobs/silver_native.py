"""Silver's event contract evaluated natively: Spark SQL expressions decide the usual rows,
``lakecep.events`` (Python) only the rows Spark's JSON parser cannot judge exactly.

:func:`parse` gives, for bronze rows, the same rows as ``jobs/silver.arrow_batches`` in
``mapInArrow`` (``jobs/silver.PARSED_DDL``: ``ok``, ``reason``, the typed
``silver.events`` columns, then ``raw, source_file, line_no, ingest_time``) -- row for row
the same values (``tests/integration/test_silver_native.py`` checks it on fuzzed lines).
Silver uses it with the setting ``silver_parse = "native"``.

It relies on bronze: a row whose ``parse_status`` is ``ok`` was judged by
``lakecep.events.judge_line``, so its ``raw`` is one strict JSON text (no NaN/Infinity,
no duplicate key at any level) within ``max_line_bytes``. Bronze's other rows keep
bronze's reason, as in the Python path.

One ``from_json`` into a fixed struct (the contract's fields; the scalar ones as STRING)
gives every field, and the line's ``:`` count whether it holds other keys (only then does
``json_object_keys`` list them: unknown, null-valued or mistyped fields); cheap
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
lines: its wrong_type ones), and every row of a declared source (``lakecep.sources``), goes
through ``jobs/silver.arrow_batches`` in the same pass: one ``mapInArrow`` over the native
rows hands the sure ones on as Arrow arrays and parses only the others.
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
    keys = "array_join(map_keys(_s.attributes), '')"
    values = "concat(chr(1), array_join(map_values(_s.attributes), chr(1)))"
    # In a line without backslashes no string holds '"', so '"attributes":{' is where the
    # object starts (the first such text: a field whose value is an object holding it is
    # not sure anyway); with no '}' in its keys and values and no nesting, the next '}'
    # ends it. Quotes aside, that text must equal Spark's rewrite of what it read
    # (numbers as Spark writes them: 1e5 -> 100000.0).
    start = "locate('\"attributes\":{', raw)"
    own_text = f"substring(raw, {start} + 13, locate('}}', raw, {start}) - {start} - 12)"
    return (
        f"size(_s.attributes) <= {_MAX_ATTRS}"
        " AND NOT array_contains(map_keys(_s.attributes), '')"
        f" AND length({keys}) <= {_MAX_STR}"
        f" AND length(array_join(map_values(_s.attributes), '')) <= {_MAX_STR}"
        f" AND NOT contains({values}, chr(1) || '{{')"
        f" AND NOT contains({values}, chr(1) || '[')"
        f" AND NOT contains({keys}, '}}') AND NOT contains({values}, '}}')"
        f" AND {start} > 0"
        f" AND replace({own_text}, '\"', '') = replace(to_json(_s.attributes), '\"', '')"
    )


def _range(column: str) -> str:
    low, high = (events.format_time(t).replace("T", " ").removesuffix("Z")
                 for t in (events.MIN_TIME, events.MAX_TIME))
    return (f"CASE WHEN {column} >= TIMESTAMP '{low}' AND {column} < TIMESTAMP '{high}'"
            f" THEN {column} END")


def _colons(text: str) -> str:
    return f"(length({text}) - length(replace({text}, ':', '')))"


def _colons_known() -> str:
    """SQL: the ':' a line (with no backslash) holds if its keys are exactly the fields
    from_json read as non-null (one ':' per key, attribute keys too) plus those inside
    their strings. The line holds at least as many; more means a key from_json did not
    give (an unknown one, a null-valued or mistyped field): then ``json_object_keys``
    lists them. Counting is a byte scan; listing is a second JSON parse of the line."""
    strings = ", ".join([f"_s.`{n}`" for n in _STRINGS + _TIMES]
                        + ["array_join(map_keys(_s.attributes), '')",
                           "array_join(map_values(_s.attributes), '')"])
    fields = " + ".join(f"CASE WHEN _s.`{n}` IS NULL THEN 0 ELSE 1 END" for n in _FIELDS)
    return (f"({fields} + CASE WHEN _s.attributes IS NULL THEN 0 ELSE size(_s.attributes) END"
            f" + {_colons(f'concat_ws(chr(1), {strings})')})")


def _present_keys() -> str:
    return ("array_compact(array(" + ", ".join(
        f"CASE WHEN _s.`{n}` IS NOT NULL THEN {_lit(n)} END" for n in _FIELDS) + "))")


def native_columns() -> list[tuple[str, str]]:
    """(name, SQL) pairs evaluated in order over a bronze row, each may use the earlier
    ones. ``_reason`` is the verdict: '' = surely ok, a text = surely this reason, NULL =
    not sure (then lakecep.events decides); the other columns hold the typed values."""
    known = "array(" + ", ".join(_lit(n) for n in _FIELDS) + ")"
    cols: list[tuple[str, str]] = [
        ("_s", "CASE WHEN parse_status = 'ok' AND NOT contains(raw, '\\\\') THEN "
               f"from_json(raw, '{_SCHEMA}', map('allowNonNumericNumbers', 'false')) END"),
        # (a valid JSON text led by '{' is an object; from_json reads others as all-NULL)
        ("_keys", "CASE WHEN _s IS NULL THEN NULL WHEN startswith(raw, '{') AND"
                  f" {_colons('raw')} = {_colons_known()} THEN {_present_keys()}"
                  " ELSE json_object_keys(raw) END"),
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


def parse(batch, max_line_bytes: int, sources=(), home=None):  # noqa: ANN001, ANN201
    """Bronze rows (at least :data:`jobs.silver.PARSE_INPUT`) -> silver's parsed rows
    (``jobs/silver.PARSED_DDL``), as ``jobs/silver.arrow_batches`` gives them: natively
    where sure, the other rows (and every row of a declared source) by
    ``arrow_batches`` itself, in ONE pass: the native rows go through one ``mapInArrow``
    that hands the sure rows on as they are (no pandas, no copy) and parses only the
    rest."""
    from .silver import PARSED_DDL, arrow_schema

    return native_frame(batch, keep_raw=bool(sources)).mapInArrow(
        finish(max_line_bytes, arrow_schema(), sources, home), PARSED_DDL)


def native_frame(batch, keep_raw: bool = False):  # noqa: ANN001, ANN201
    """:data:`jobs.silver.PARSED_DDL`'s columns computed in Spark SQL, plus ``_sure`` (the
    row is decided: bronze judged it, or ``_reason`` is sure) and ``_judged`` (bronze
    judged it: its ``parse_status`` is not ``ok``, so a row left to Python has
    ``parse_status`` ``ok``). ``raw`` is kept where a later step reads it (not surely
    ok), or everywhere with ``keep_raw``."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StructType

    from .silver import EVENT_COLUMNS, PARSE_INPUT, PARSED_DDL

    frame = batch.select(*PARSE_INPUT)
    for name, sql in native_columns():
        frame = frame.withColumn(name, F.expr(sql))
    judged = F.col("parse_status") != "ok"
    sure = judged | F.col("_reason").isNotNull()
    native_ok = ~judged & F.coalesce(F.col("_reason") == "", F.lit(False))
    bronze_reason = F.when(F.col("parse_error").isNull(), F.col("parse_status")).otherwise(
        F.concat_ws(": ", "parse_status", "parse_error"))
    native = {n: F.col(f"_s.`{n}`") for n in _STRINGS}
    native.update({n: F.col(f"_t_{n}") for n in _TIMES})
    native["pmf"] = F.col("_s.pmf")
    native["attributes"] = F.expr(  # Python leaves out null entries
        "CASE WHEN size(array_compact(map_values(_s.attributes))) = size(_s.attributes)"
        " THEN _s.attributes ELSE map_filter(_s.attributes, (k, v) -> v IS NOT NULL) END")
    kinds = {f.name: f.dataType for f in StructType.fromDDL(PARSED_DDL).fields}
    raw = F.col("raw") if keep_raw else F.when(~native_ok, F.col("raw"))
    return frame.select(
        F.coalesce(sure, F.lit(False)).alias("_sure"),
        F.coalesce(judged, F.lit(False)).alias("_judged"),
        native_ok.alias("ok"),
        F.when(judged, bronze_reason).when(~native_ok, F.col("_reason")).alias("reason"),
        *[F.when(native_ok, native[n]).cast(kinds[n]).alias(n) for n in EVENT_COLUMNS],
        raw.alias("raw"), "source_file", "line_no", "ingest_time",
    )


def finish(max_line_bytes: int, schema, sources=(), home=None):  # noqa: ANN001, ANN201
    """mapInArrow function over :func:`parse`'s native rows: the sure ones on as they are,
    the others (``_sure`` false, or a declared source's file) through
    ``jobs/silver.arrow_batches``."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from .silver import PARSE_INPUT, arrow_batches

    python = arrow_batches(max_line_bytes, schema, sources, home)
    declared: dict[str, bool] = {}  # source_file -> a declared source's

    def run(batches):  # noqa: ANN001, ANN202
        for batch in batches:
            to_python = pc.invert(batch.column("_sure"))
            if sources:
                from lakecep.sources import source_of_file

                files = batch.column("source_file")
                for file in pc.unique(files).to_pylist():
                    if file not in declared:
                        declared[file] = source_of_file(sources, home, file) is not None
                theirs = [f for f, mine in declared.items() if mine]
                if theirs:  # bronze's judgement stands for every source
                    to_python = pc.or_(to_python, pc.and_(
                        pc.is_in(files, pa.array(theirs)), pc.invert(batch.column("_judged"))))
            if pc.any(to_python).as_py():
                rest = batch.filter(to_python)
                n = rest.num_rows
                given = {"parse_status": pa.array(["ok"] * n, pa.string()),
                         "parse_error": pa.nulls(n, pa.string())}
                yield from python(iter([pa.RecordBatch.from_arrays(
                    [given[c] if c in given else rest.column(c) for c in PARSE_INPUT],
                    names=list(PARSE_INPUT))]))
                batch = batch.filter(pc.invert(to_python))
            if batch.num_rows:
                columns = [batch.column(f.name) for f in schema]
                if sources:  # raw was kept for the Python step: off the ok rows again
                    at = schema.get_field_index("raw")
                    columns[at] = pc.if_else(batch.column("ok"), pa.scalar(None, pa.string()),
                                             columns[at])
                yield pa.RecordBatch.from_arrays(columns, schema=schema)

    return run
