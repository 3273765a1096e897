"""The one definition of a landed line (``landing_lines``) and of its status (``judge_line``,
``parse_line`` on bytes): pure Python, no Spark (tests/integration/test_bronze_lines_spark.py
checks that bronze, silver and ``lakecep status`` follow it)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from landing_files import BOM, EVENT, build, expected_bronze, landing_file

from lakecep.events import (
    LINE_CODES,
    REASON_CODES,
    ParsedEvent,
    Rejection,
    count_landing_lines,
    judge_line,
    landing_lines,
    parse_line,
)


@pytest.mark.parametrize(
    ("data", "lines"),
    [
        (b"", []),
        (BOM, []),
        (b"\n", [b""]),
        (BOM + b"\n", [b""]),
        (b"a", [b"a"]),
        (b"a\n", [b"a"]),
        (b"}\n\n", [b"}", b""]),  # issue 20: a file ending in a blank line
        (b"a\n\n\n", [b"a", b"", b""]),
        (b"\n\na", [b"", b"", b"a"]),
        (b"a\r\nb\r\n", [b"a\r", b"b\r"]),  # the \r of \r\n stays in the line (JSON whitespace)
        (b"a\rb\r", [b"a\rb\r"]),  # a lone \r ends no line
        (b"a\x00b\n\xff\n", [b"a\x00b", b"\xff"]),
        (BOM + b"a\n" + BOM + b"b", [b"a", BOM + b"b"]),  # only the file's first BOM goes
        (BOM + BOM + b"a", [BOM + b"a"]),
        (b"a\x0b\x0c\x1c\x1d\x1e\x85b", [b"a\x0b\x0c\x1c\x1d\x1e\x85b"]),  # no splitlines()
        ("a\u2028b\u2029c\x85".encode(), ["a\u2028b\u2029c\x85".encode()]),
    ],
)
def test_landing_lines_examples(data: bytes, lines: list[bytes]) -> None:
    assert landing_lines(data) == lines
    assert count_landing_lines(data) == len(lines)


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(landing_file(long_lines=False))
@example(build([EVENT, b""], bom=False, final_newline=True))  # issue 20: '...}\n\n'
@example(build([b""], bom=True, final_newline=False))
def test_landing_lines_are_the_constructed_lines(file) -> None:  # noqa: ANN001
    assert landing_lines(file.data) == file.lines
    assert count_landing_lines(file.data) == len(file.lines)
    assert all(b"\n" not in line for line in file.lines)


@given(st.binary(max_size=64))
def test_landing_lines_lose_nothing_but_the_bom_and_newlines(data: bytes) -> None:
    lines = landing_lines(data)
    body = data[len(BOM):] if data.startswith(BOM) else data
    assert b"".join(line + b"\n" for line in lines) in (body, body + b"\n")
    assert count_landing_lines(data) == len(lines)


# --- one status per line -----------------------------------------------------------------


@pytest.mark.parametrize(
    "raw",
    [b"\t", b"\r", b"\x0c", b"\x0b", " \u3000 ".encode(), b"\t\r", b"\x1c", "\xa0".encode(),
     b"", b"   "],
)
def test_whitespace_only_lines_are_empty_lines(raw: bytes) -> None:
    assert judge_line(raw, 100)[2:] == ("empty_line", None)
    assert parse_line(raw) == Rejection("empty_line") == parse_line(raw.decode())


@pytest.mark.parametrize(
    "raw",
    [EVENT + b" x", EVENT + b" // comment", EVENT + b" /* c */", EVENT + EVENT,
     EVENT + b"\r" + EVENT, EVENT + b",", b"{} {}", b'{"a":1,"a":2}', b"{'a': 1}", b"{a: 1}",
     EVENT[:-1] + b",}", b"NaN", b'"\x00"'],
)
def test_lenient_json_is_malformed_in_both_layers(raw: bytes) -> None:
    _, _, status, error = judge_line(raw, 65536)
    reason = parse_line(raw.decode())
    assert isinstance(reason, Rejection) and reason.code == "malformed_json"
    assert (status, error) == ("malformed_json", reason.reason.partition(": ")[2])


def test_crlf_and_surrounding_whitespace_do_not_change_the_event() -> None:
    assert isinstance(parse_line(EVENT + b"\r"), ParsedEvent)
    assert judge_line(EVENT + b"\r", 65536) == (EVENT.decode() + "\r", len(EVENT) + 1, "ok", None)


def test_bom_at_file_start_is_stripped_elsewhere_it_is_malformed() -> None:
    (first, second) = landing_lines(BOM + EVENT + b"\n" + BOM + EVENT + b"\n")
    assert judge_line(first, 65536)[2] == "ok"
    assert judge_line(second, 65536)[2:] == (
        "malformed_json", "starts with a BOM (U+FEFF; only a BOM that starts a file is dropped)"
    )


def test_invalid_utf8_is_flagged_never_silently_replaced() -> None:
    line = EVENT.replace(b"ev-1", b"ev-\xff1")
    raw, size, status, error = judge_line(line, 65536)
    assert (size, status) == (len(line), "invalid_utf8")
    offset = line.index(b"\xff")
    assert error == f"0xFF at byte offset {offset} is not UTF-8"
    assert raw == line.decode("utf-8", "replace") and "\ufffd" in raw
    assert parse_line(line) == Rejection(f"invalid_utf8: {error}")
    # The same text with a real U+FFFD is valid data, kept as it is.
    assert isinstance(parse_line(raw.encode()), ParsedEvent)
    assert judge_line(raw.encode(), 65536)[2] == "ok"
    # Encoded surrogates and truncated sequences are not UTF-8 either; invalid_utf8 is
    # reported even for an oversized line (so raw always says when it was altered).
    assert judge_line(b'{"a":"\xed\xa0\x80"}', 65536)[2:] == (
        "invalid_utf8", "0xED at byte offset 6 is not UTF-8")
    assert judge_line(b"x" * 100 + b"\xe2\x82", 10)[2:] == (
        "invalid_utf8", "0xE2 0x82 at byte offset 100 is not UTF-8")


def test_oversized_counts_landed_bytes() -> None:
    line = "€".encode() * 40  # 120 bytes, 40 characters
    assert judge_line(line, 119)[1:] == (120, "oversized", "120 bytes > limit 119")
    assert judge_line(line, 120)[2] == "malformed_json"
    assert judge_line(b" " * 1000, 10)[2] == "empty_line"  # whitespace first


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(landing_file())
def test_judge_line_is_parse_line_on_the_bytes(file) -> None:  # noqa: ANN001
    for line in file.lines:
        bronze = judge_line(line, 65536)
        assert bronze == expected_bronze(line, 65536)
        result = parse_line(line)
        if isinstance(result, Rejection):
            assert result.code in REASON_CODES
            assert (bronze[2] == "ok") == (result.code not in LINE_CODES)
        else:
            assert bronze[2] == "ok"
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError:
            assert bronze[2] == "invalid_utf8"
        else:
            assert bronze[0] == text and parse_line(text) == result
