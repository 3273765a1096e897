"""The mapping's fast path for time formats gives exactly what strptime gives
(differential test): ``lakecep.sources.fixed_width`` and the time parser of a source's
``[time]`` format that uses it, against ``datetime.strptime``."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from hypothesis import example, given, settings
from hypothesis import strategies as st

from lakecep.sources import fixed_width, time_parser

ZONE = ZoneInfo("America/New_York")
FORMATS = ["%Y-%m-%d %H:%M:%S", "%d/%m/%Y %H:%M", "%Y-%m-%dT%H:%M:%S", "%m.%d.%Y",
           "%Y-%m-%d", "%H:%M:%S %d-%m-%Y"]


def _strptime(text: str, fmt: str) -> datetime | None:
    try:
        return datetime.strptime(text, fmt)  # noqa: DTZ007 - naive on both sides
    except ValueError:
        return None


def _digits(width: int) -> st.SearchStrategy[str]:
    return st.integers(0, 10 ** width - 1).map(lambda n: f"{n:0{width}d}")


@st.composite
def near(draw: st.DrawFn, fmt: str) -> str:
    """Text shaped like ``fmt`` (often valid), with odd widths, separators and spaces."""
    out = []
    i = 0
    while i < len(fmt):
        if fmt[i] == "%":
            width = 4 if fmt[i + 1] == "Y" else 2
            choice = draw(st.integers(0, 9))
            if choice == 0:
                out.append(draw(_digits(1)))
            elif choice == 1:
                out.append(" " + draw(_digits(1)))
            elif choice == 2:
                out.append(draw(_digits(width + 1)))
            else:
                out.append(draw(_digits(width)))
            i += 2
        else:
            out.append(draw(st.sampled_from([fmt[i]] * 8 + ["", " ", "x", fmt[i] * 2])))
            i += 1
    return draw(st.sampled_from(["", " ", "t", "0"])) + "".join(out) + draw(
        st.sampled_from(["", "", "", " ", "Z", "0"]))


@settings(max_examples=400, deadline=None)
@given(data=st.data(), fmt=st.sampled_from(FORMATS))
@example(data=None, fmt="%Y-%m-%d %H:%M:%S")
def test_fixed_width_equals_strptime(data: st.DataObject | None, fmt: str) -> None:
    fast = fixed_width(fmt)
    assert fast is not None
    texts = ["2024-02-30 10:00:00", "2024-13-01 00:00:00", "2024-01-01 24:00:00",
             "2024-01-01 00:00:60", "0000-01-01 00:00:00", "2024-01-01  10:00:00",
             "2024-1-01 10:00:00"] if data is None else [data.draw(near(fmt))]
    for text in texts:
        expected = _strptime(text, fmt)
        try:
            got = fast(text)
        except ValueError:
            got = None
            assert expected is None, (text, fmt)
        if got is not None:  # the fast path read it: exactly strptime's value
            assert got == expected, (text, fmt)
        # the parser of a source (fast path, else strptime) == strptime, zone applied
        parse = time_parser(fmt, "America/New_York")
        stripped = _strptime(text.strip(), fmt)  # a source's parser strips the text
        slow = None if stripped is None else stripped.replace(tzinfo=ZONE).astimezone(UTC)
        assert parse(text) == slow, (text, fmt)


def test_formats_without_a_fast_path() -> None:
    for fmt in ("%Y%m%d", "%Y-%m-%d %H:%M:%S%z", "%d %b %Y", "%Y-%m-%d %H:%M:%S.%f",
                "%H:%M", "%Y-%m-%d %Y", "1%Y-%m-%d"):
        assert fixed_width(fmt) is None, fmt
    assert fixed_width("%d/%m/%Y")("05/01/2024") == datetime(2024, 1, 5)  # noqa: DTZ001


# ----------------------------------------------------------------------------- whole records

CARD_SOURCE = """
format = "jsonl"
[fields]
txn_id = "string"
card = "string"
merchant = "string"
amount = "double"
ts = "string"
[mapping]
{event_id}
object_id = "card"
event_type = "CASE WHEN amount > 500 THEN 'big' WHEN amount < 2 THEN 'probe' ELSE 'normal' END"
source_id = "'card-jsonl'"
event_time = "ts"
[time]
format = "%Y-%m-%d %H:%M:%S"
timezone = "America/New_York"
[[operators]]
op = "fill"
field = "merchant"
value = "COALESCE(merchant, 'unknown')"
"""

_VALUES = st.one_of(st.none(), st.text(max_size=6), st.integers(-5, 2000),
                    st.floats(allow_nan=False, allow_infinity=False, width=32))
_TIMES = st.one_of(
    st.datetimes(min_value=datetime(1990, 1, 1), max_value=datetime(2100, 1, 1)).map(  # noqa: DTZ001
        lambda t: t.strftime("%Y-%m-%d %H:%M:%S")),
    st.sampled_from(["2024-02-30 10:00:00", "2024-1-5 3:04:05", " 2024-01-05 10:00:00 ",
                     "2024-03-10 02:30:00", "2024-11-03 01:30:00", "soon", ""]),
    _VALUES)


@settings(max_examples=300, deadline=None)
@given(records=st.lists(st.fixed_dictionaries(
    {"txn_id": st.text(min_size=1, max_size=5), "card": _VALUES, "merchant": _VALUES,
     "amount": _VALUES, "ts": _TIMES}, optional={"extra": _VALUES}), min_size=1, max_size=8),
    hashed_id=st.booleans())
def test_mapping_with_fast_paths_equals_without(tmp_path_factory, records: list[dict],  # noqa: ANN001
                                                hashed_id: bool) -> None:
    """map_record with the fast paths (fixed-width times, no _raw_hash when nothing reads
    it, strings as attribute text) == with them off, record by record."""
    import dataclasses
    import json

    from lakecep.sources import _MAPPINGS, load_source, map_record, mapping_of

    folder = tmp_path_factory.mktemp("src")
    path = folder / "cards.toml"
    path.write_text(CARD_SOURCE.format(event_id="" if hashed_id else 'event_id = "txn_id"'))
    fast = load_source(path)
    slow = dataclasses.replace(fast)
    mapping = mapping_of(fast)
    assert mapping.hashed is hashed_id
    _MAPPINGS[id(slow)] = (slow, dataclasses.replace(
        mapping, hashed=True, time=time_parser(fast.time_format, fast.timezone, fast=False)))
    for record in records:
        raw = json.dumps(record)
        assert map_record(fast, raw) == map_record(slow, raw), raw
