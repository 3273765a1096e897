"""Unit tests of lakecep.events: the landing-line contract."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from typing import Any

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lakecep.events import (
    REASON_CODES,
    ParsedEvent,
    Rejection,
    format_time,
    parse_frame,
    parse_line,
    parse_time,
    reason_code,
)
from lakecep.schemas import event_contract

BASE: dict[str, Any] = {
    "event_id": "ev-1",
    "object_id": "tag-000001",
    "event_type": "read",
    "source_id": "A",
    "event_time": "2026-01-05T03:12:45.123Z",
}


def line(**changes: Any) -> str:
    obj = {**BASE, **changes}
    return json.dumps({k: v for k, v in obj.items() if v is not DROP}, ensure_ascii=False)


DROP = object()


def reject(raw: str | None, limit: int = 65536) -> str:
    result = parse_line(raw, limit)
    assert isinstance(result, Rejection), result
    assert result.code in REASON_CODES
    return result.reason


# --- valid lines -------------------------------------------------------------------------


def test_minimal_valid_line() -> None:
    event = parse_line(line())
    assert event == ParsedEvent(
        event_id="ev-1",
        object_id="tag-000001",
        event_type="read",
        source_id="A",
        event_time=datetime(2026, 1, 5, 3, 12, 45, 123000, tzinfo=UTC),
    )
    assert event.event_time.tzinfo is UTC
    assert event.attributes is None and event.pmf is None


def test_parsed_event_has_exactly_the_silver_columns() -> None:
    from dataclasses import fields

    names = [f.name for f in fields(ParsedEvent)]
    assert names == list(event_contract()["fields"])


def test_attributes_scalars_become_text() -> None:
    event = parse_line(
        line(
            attributes={
                "rssi": -51.2,
                "antenna": 2,
                "ok": True,
                "bad": False,
                "gone": None,
                "s": "x:y",
                "big": 12345678901234567890,
            }
        )
    )
    assert isinstance(event, ParsedEvent)
    assert event.attributes == {
        "rssi": "-51.2",
        "antenna": "2",
        "ok": "true",
        "bad": "false",
        "s": "x:y",
        "big": "12345678901234567890",
    }


def test_attribute_numbers_keep_their_json_text() -> None:
    raw = line().replace("}", ', "attributes": {"x": 1e5, "y": 1.50}}')
    event = parse_line(raw)
    assert isinstance(event, ParsedEvent)
    assert event.attributes == {"x": "1e5", "y": "1.50"}


def test_empty_attributes_object_is_kept_empty() -> None:
    event = parse_line(line(attributes={}))
    assert isinstance(event, ParsedEvent) and event.attributes == {}


def test_null_optional_fields_are_absent() -> None:
    event = parse_line(line(attributes=None, pmf=None, time_lower=None, time_upper=None))
    assert isinstance(event, ParsedEvent)
    assert event.attributes is None and event.pmf is None and event.time_lower is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-01-05T03:12:45+02:00", datetime(2026, 1, 5, 1, 12, 45, tzinfo=UTC)),
        ("2026-01-05T03:12:45-0130", datetime(2026, 1, 5, 4, 42, 45, tzinfo=UTC)),
        ("2026-01-05T01:00:00+02", datetime(2026, 1, 4, 23, 0, tzinfo=UTC)),
        ("2026-01-05T03:12:45", datetime(2026, 1, 5, 3, 12, 45, tzinfo=UTC)),
        ("2026-01-05 03:12", datetime(2026, 1, 5, 3, 12, tzinfo=UTC)),
        ("2026-01-05T03:12:45.123456789Z", datetime(2026, 1, 5, 3, 12, 45, 123456, tzinfo=UTC)),
        ("2026-01-05T03:12:45.5-00:00", datetime(2026, 1, 5, 3, 12, 45, 500000, tzinfo=UTC)),
    ],
)
def test_timestamps_are_converted_to_utc(text: str, expected: datetime) -> None:
    event = parse_line(line(event_time=text))
    assert isinstance(event, ParsedEvent)
    assert event.event_time == expected and event.event_time.tzinfo is UTC
    assert parse_time(text) == expected


def test_format_time_round_trips() -> None:
    value = datetime(2026, 1, 5, 3, 12, 45, 123000, tzinfo=UTC)
    assert format_time(value) == "2026-01-05T03:12:45.123Z"
    assert parse_time(format_time(value)) == value


def test_uncertain_interval_with_pmf() -> None:
    event = parse_line(
        line(
            time_lower="2026-01-05T03:12:00Z",
            time_upper="2026-01-05T03:13:00Z",
            pmf=[0.25, 0.5, 0.25],
        )
    )
    assert isinstance(event, ParsedEvent)
    assert event.time_lower == datetime(2026, 1, 5, 3, 12, tzinfo=UTC)
    assert event.time_upper == datetime(2026, 1, 5, 3, 13, tzinfo=UTC)
    assert event.pmf == [0.25, 0.5, 0.25]


def test_surrounding_whitespace_and_unicode_are_fine() -> None:
    event = parse_line("  " + line(object_id="étiquette-✓") + " \r")
    assert isinstance(event, ParsedEvent) and event.object_id == "étiquette-✓"


# --- every rejection ---------------------------------------------------------------------

LONG = "x" * 300


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (None, "empty_line"),
        ("", "empty_line"),
        ("   \t", "empty_line"),
        (
            "{",
            "malformed_json: Expecting property name enclosed in double quotes: "
            "line 1 column 2 (char 1)",
        ),
        ('{"a": 1} x', "malformed_json: Extra data: line 1 column 10 (char 9)"),
        ('{"a": NaN}', "malformed_json: NaN is not valid JSON"),
        ('{"event_id": "a", "event_id": "b"}', "malformed_json: duplicate key 'event_id'"),
        ("[1, 2]", "not_an_object: got array"),
        ('"text"', "not_an_object: got string"),
        ("42", "not_an_object: got number"),
        ("null", "not_an_object: got null"),
        (line(foo=1), "unknown_field: foo"),
        (line(zeta=1, alpha=2), "unknown_field: alpha"),
        (line(event_id=DROP), "missing_field: event_id"),
        (line(event_time=DROP), "missing_field: event_time"),
        (line(source_id=None), "missing_field: source_id is null"),
        (line(object_id=123), "wrong_type: object_id: expected string, got number"),
        (line(event_type=True), "wrong_type: event_type: expected string, got boolean"),
        (
            line(event_time=1736046765),
            "wrong_type: event_time: expected ISO-8601 timestamp string, got number",
        ),
        (
            line(time_lower=[1], time_upper="2026-01-05T04:00:00Z"),
            "wrong_type: time_lower: expected ISO-8601 timestamp string, got array",
        ),
        (line(attributes=[1]), "wrong_type: attributes: expected object, got array"),
        (
            line(attributes={"a": {"b": 1}}),
            "wrong_type: attributes.a: expected string, number, boolean or null, got object",
        ),
        (line(pmf="0.5"), "wrong_type: pmf: expected array of numbers, got string"),
        (line(pmf=[0.5, "0.5"]), "wrong_type: pmf: expected array of numbers, got string item"),
        (
            line(event_time="yesterday"),
            "invalid_value: event_time: 'yesterday' is not an ISO-8601 timestamp",
        ),
        (
            line(event_time="2026-01-05"),
            "invalid_value: event_time: '2026-01-05' is not an ISO-8601 timestamp",
        ),
        (
            line(event_time="2026-02-30T00:00:00Z"),
            "invalid_value: event_time: '2026-02-30T00:00:00Z' is not an ISO-8601 timestamp",
        ),
        (
            line(event_time="3000-01-01T00:00:00Z"),
            "invalid_value: event_time: '3000-01-01T00:00:00Z' is out of range "
            "[1678-01-01, 2262-01-01)",
        ),
        (line(object_id=""), "invalid_value: object_id is empty"),
        (line(event_id="  "), "invalid_value: event_id is empty"),
        (
            line(time_lower="2026-01-05T04:00:00Z", time_upper="2026-01-05T03:00:00Z"),
            "invalid_value: time_lower after time_upper",
        ),
        (
            line(time_lower="2026-01-05T03:00:00Z"),
            "invalid_value: time_lower and time_upper must be given together",
        ),
        (
            line(time_lower="2026-01-05T03:13:00Z", time_upper="2026-01-05T03:14:00Z"),
            "invalid_value: event_time outside [time_lower, time_upper]",
        ),
        (line(pmf=[1.0]), "invalid_value: pmf requires time_lower and time_upper"),
        (
            line(time_lower="2026-01-05T03:00:00Z", time_upper="2026-01-05T04:00:00Z", pmf=[]),
            "invalid_value: pmf is empty",
        ),
        (
            line(
                time_lower="2026-01-05T03:00:00Z", time_upper="2026-01-05T04:00:00Z", pmf=[0.5, 0.2]
            ),
            "invalid_value: pmf must sum to 1 (got 0.7)",
        ),
        (
            line(
                time_lower="2026-01-05T03:00:00Z",
                time_upper="2026-01-05T04:00:00Z",
                pmf=[1.5, -0.5],
            ),
            "invalid_value: pmf has a negative probability (-0.5)",
        ),
        (line(attributes={"": 1}), "invalid_value: attributes has an empty key"),
        (
            line().replace('"ev-1"', '"ev-\\ud800"'),
            "invalid_value: event_id is not valid Unicode (lone surrogate)",
        ),
        (line(object_id=LONG), "too_long: object_id has 300 chars > 256"),
        (line(attributes={"k": LONG}), "too_long: attributes.k has 300 chars > 256"),
        (
            line(attributes={f"k{i}": i for i in range(65)}),
            "too_long: attributes has 65 entries > 64",
        ),
    ],
)
def test_rejections(raw: str | None, reason: str) -> None:
    assert reject(raw) == reason


def test_oversized() -> None:
    raw = line(attributes={"pad": "x" * 200})
    size = len(raw.encode())
    assert reject(raw, limit=size - 1) == f"oversized: {size} bytes > limit {size - 1}"
    assert isinstance(parse_line(raw, size), ParsedEvent)
    # bytes, not characters
    wide = line(object_id="é" * 100)
    assert len(wide) < 300 < len(wide.encode())
    assert reject(wide, limit=300).startswith("oversized: ")
    huge = "x" * 70123
    assert reject(huge) == "oversized: 70123 bytes > limit 65536"


def test_check_order_reports_first_problem() -> None:
    # malformed beats everything; unknown beats missing; missing beats wrong type;
    # fields in contract order; per-field before cross-field.
    assert reject('{"foo": 1, "event_id": 1, "foo": 2}').startswith("malformed_json: duplicate")
    assert reject(line(foo=1, event_id=DROP)) == "unknown_field: foo"
    assert reject(line(event_time=DROP, event_id=1)) == "missing_field: event_time"
    assert reject(line(event_id=1, object_id=2)).startswith("wrong_type: event_id")
    assert reject(line(source_id="", event_time="x")) == "invalid_value: source_id is empty"
    assert reject(
        line(event_time="x", time_lower="2026-01-05T04:00:00Z", time_upper="2026-01-05T03:00Z")
    ).startswith("invalid_value: event_time: 'x'")


def test_duplicate_keys_found_with_whitespace_and_escapes() -> None:
    assert reject(line().replace('{"event_id"', '{"event_id" : "z", "event_id"')).startswith(
        "malformed_json: duplicate key"
    )
    escaped = line(attributes={"a": "\u003a"}).replace("}}", ', "a": "b"}}')
    assert reject(escaped) == "malformed_json: duplicate key 'a'"
    nested = line(attributes={"a": 1}).replace('{"a": 1}', '{"a": 1, "a": 2}')
    assert reject(nested) == "malformed_json: duplicate key 'a'"


def test_deep_nesting_is_malformed_not_a_crash() -> None:
    assert reject("[" * 50000 + "]" * 50000, limit=10**6) == "malformed_json: nested too deeply"


def test_long_names_are_shortened_in_reasons() -> None:
    reason = reject(line(**{"y" * 1000: 1}))
    assert reason.startswith("unknown_field: 'yyy") and len(reason) < 100
    reason = reject(line(event_time="9" * 1000))
    assert len(reason) < 150


def test_reason_code_helper() -> None:
    assert reason_code("missing_field: event_id") == "missing_field"
    assert reason_code("empty_line") == "empty_line"
    assert Rejection("too_long: x").code == "too_long"


def test_non_string_input_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="str, bytes or None"):
        parse_line(42)  # type: ignore[arg-type]


# --- parse_frame -------------------------------------------------------------------------


def _same(frame_row: dict[str, Any], result: ParsedEvent | Rejection) -> None:
    if isinstance(result, Rejection):
        assert not frame_row["ok"]
        assert frame_row["reason"] == result.reason
        assert frame_row["event_id"] is None and pd.isna(frame_row["event_time"])
        return
    assert frame_row["ok"] and frame_row["reason"] is None
    for name in ("event_id", "object_id", "event_type", "source_id", "pmf", "attributes"):
        assert frame_row[name] == getattr(result, name), name
    for name in ("event_time", "time_lower", "time_upper"):
        expected = getattr(result, name)
        if expected is None:
            assert pd.isna(frame_row[name])
        else:
            assert frame_row[name].to_pydatetime() == expected


def test_parse_frame_columns_and_dtypes() -> None:
    raw = pd.Series(
        [
            line(attributes={"rssi": -50}),
            "",
            None,
            line(time_lower="2026-01-05T03:00:00Z", time_upper="2026-01-05T04:00:00Z", pmf=[1.0]),
            "oops",
        ],
        index=[10, 11, 12, 13, 14],
    )
    frame = parse_frame(raw, 65536)
    assert list(frame.columns) == ["ok", "reason", *event_contract()["fields"]]
    assert list(frame.index) == [10, 11, 12, 13, 14]
    assert frame["ok"].tolist() == [True, False, False, True, False]
    assert str(frame["event_time"].dtype) == "datetime64[ns, UTC]"
    assert str(frame["time_lower"].dtype) == "datetime64[ns, UTC]"
    assert frame["ok"].dtype == bool
    for row, value in zip(frame.to_dict("records"), raw, strict=True):
        _same(row, parse_line(value, 65536))


def test_parse_frame_empty_and_all_rejected() -> None:
    assert len(parse_frame(pd.Series([], dtype=object), 100)) == 0
    frame = parse_frame(pd.Series(["x", "[]"]), 100)
    assert frame["reason"].tolist() == [
        "malformed_json: Expecting value: line 1 column 1 (char 0)",
        "not_an_object: got array",
    ]
    assert frame["event_time"].isna().all()


_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**6), 10**6),
    st.floats(allow_nan=False, allow_infinity=False, width=32),
    st.text(max_size=5),
)
_times = st.sampled_from(
    ["2026-01-05T03:12:45Z", "2026-01-05T03:12:45+02:00", "2026-01-05 04:00", "bad", "", 5]
)
_values = st.one_of(_scalars, _times, st.lists(_scalars, max_size=3))
_field_names = st.sampled_from([*event_contract()["fields"], "extra"])


@st.composite
def _event_like(draw: st.DrawFn) -> str:
    obj: dict[str, Any] = {}
    for name in BASE:
        if draw(st.integers(0, 9)) > 0:
            obj[name] = BASE[name] if draw(st.booleans()) else draw(_values)
    for _ in range(draw(st.integers(0, 3))):
        name = draw(_field_names)
        if name == "attributes":
            obj[name] = draw(
                st.one_of(
                    st.dictionaries(st.text(max_size=4), _scalars, max_size=4),
                    _values,
                    st.dictionaries(st.text(max_size=2), st.lists(_scalars), max_size=2),
                )
            )
        elif name == "pmf":
            obj[name] = draw(
                st.one_of(st.lists(st.floats(0, 1), max_size=3), st.just([0.5, 0.5]), _values)
            )
        else:
            obj[name] = draw(st.one_of(_times, _values))
    text = json.dumps(obj)
    mangle = draw(st.integers(0, 20))
    if mangle == 0:
        text = text[: draw(st.integers(0, len(text)))]
    elif mangle == 1:
        text = "[" + text + "]"
    return text


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_event_like(), min_size=1, max_size=8))
def test_parse_frame_agrees_with_parse_line(lines: list[str]) -> None:
    frame = parse_frame(pd.Series(lines, dtype=object), 400)
    assert len(frame) == len(lines)
    for row, value in zip(frame.to_dict("records"), lines, strict=True):
        _same(row, parse_line(value, 400))


@settings(max_examples=120, deadline=None)
@given(_event_like())
def test_reasons_are_stable_and_coded(raw: str) -> None:
    first = parse_line(raw)
    second = parse_line(raw)
    assert first == second
    if isinstance(first, Rejection):
        assert first.code in REASON_CODES
        assert first.reason == first.code or first.reason.startswith(first.code + ": ")
    else:
        assert first.event_time.tzinfo is UTC
        if first.pmf is not None:
            assert math.isclose(sum(first.pmf), 1.0, abs_tol=1e-6)


def test_more_edge_cases() -> None:
    bounds = {"time_lower": "2026-01-05T03:00:00Z", "time_upper": "2026-01-05T04:00:00Z"}
    assert reject(line().replace("}", ', "pmf": null, "pmf": null}')) == (
        "malformed_json: duplicate key 'pmf'"
    )
    assert reject(line(**bounds).replace("}", ', "pmf": [1e999]}')) == (
        "invalid_value: pmf has a non-finite probability (1e999)"
    )
    assert reject(line(attributes={"k" * 300: 1})) == "too_long: attributes key has 300 chars > 256"
    assert reject(line(event_time="2026-01-05T03:12:45.123ZZ")).startswith("invalid_value: ")
    assert reject(line(event_time="٢٠٢٦-01-05T03:12:45Z")).startswith("invalid_value: ")
    assert isinstance(parse_line(line() + "\r\n"), ParsedEvent)  # CRLF files
    assert isinstance(parse_line(line(event_time="2026-01-05T03:12:45Z")), ParsedEvent)
    # a subclass of str (numpy.str_, as in object arrays) is fine
    import numpy as np

    assert isinstance(parse_line(np.str_(line())), ParsedEvent)  # type: ignore[arg-type]
    frame = parse_frame(pd.Series([line(), float("nan"), pd.NA], dtype=object), 65536)
    assert frame["reason"].tolist() == [None, "empty_line", "empty_line"]


def test_attribute_problems_reported_in_entry_order() -> None:
    nested_first = line().replace("}", ', "attributes": {"a": {"x": 1}, "": 1}}')
    assert reject(nested_first).startswith("wrong_type: attributes.a: ")
    empty_first = line().replace("}", ', "attributes": {"": 1, "a": {"x": 1}}}')
    assert reject(empty_first) == "invalid_value: attributes has an empty key"
    long_value_first = line(attributes={"a": "v" * 300, "b" * 300: 1})
    assert reject(long_value_first) == "too_long: attributes.a has 300 chars > 256"
    ok = parse_line(line(attributes={"é": "ü", "n": None}))
    assert isinstance(ok, ParsedEvent) and ok.attributes == {"é": "ü"}
