"""Hypothesis strategies for arbitrary landing files, with their lines known by construction.

A generated file is a list of lines (bytes without ``\\n``), an optional UTF-8 BOM and an
optional final newline; the expected lines follow from that construction alone (not from
``lakecep.events.landing_lines``), so tests can check the code against it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from hypothesis import strategies as st

from lakecep.events import LINE_CODES, Rejection, parse_line

BOM = b"\xef\xbb\xbf"
EVENT = json.dumps({
    "event_id": "ev-1", "object_id": "tag-1", "event_type": "read", "source_id": "A",
    "event_time": "2026-01-05T00:00:00Z",
}).encode()

#: Pieces lines are made of: line-ending look-alikes, whitespace of every kind, bytes that
#: are not UTF-8, JSON that Spark's lenient parser accepts but JSON does not, valid events.
TOKENS = [
    b"\r", b"\r\r", b"\x00", b"\xff", b"\xfe", b"\xc3", b"\xe2\x82", b"\xed\xa0\x80", b"\x80",
    BOM, b" ", b"\t", b"\x0b", b"\x0c", b"\x1c", b"\x85", "\u3000".encode(), "\u00a0".encode(),
    "\u2028".encode(), "é✓".encode(), "\ufffd".encode(), b"{}", b"[1]", b'"s"', b"1", b"null",
    b'{"a":1,"a":2}', b"NaN", b'{"a":"\xff"}', b"//c", b"/*c*/", b"#", b"x", b"{", b"}", b'"',
    b"\\", b",", EVENT, EVENT + b" x", EVENT + EVENT, EVENT + b" // note", EVENT + b"\r",
    EVENT[:-1] + b',"bad":1}', EVENT.replace(b"ev-1", b"ev-\xff"),
]
token = st.one_of(
    st.sampled_from(TOKENS),
    st.binary(max_size=6).map(lambda b: b.replace(b"\n", b"")),
    st.text(max_size=4).map(lambda s: s.replace("\n", "").encode("utf-8", "surrogatepass")),
)
line = st.lists(token, max_size=4).map(b"".join)
#: Long lines (around and far above the default max_line_bytes of 65536).
LONG_SIZES = [65535, 65536, 65537, 1 << 20]
long_line = st.builds(
    lambda fill, size: (fill * size)[:size],
    st.sampled_from([b"x", b" ", b"\xff", b"\t\r", b'{"p":"' + b"y" * 64, "€".encode()]),
    st.sampled_from(LONG_SIZES),
)


@dataclass(frozen=True)
class LandingFile:
    data: bytes
    lines: list[bytes]  # the expected lines, by construction


def build(lines: list[bytes], bom: bool, final_newline: bool) -> LandingFile:
    """The file made of ``lines`` and its expected lines."""
    if lines and lines[0].startswith(BOM) and not bom:
        # A first line starting with BOM bytes IS a file starting with a BOM.
        lines, bom = [lines[0][len(BOM):], *lines[1:]], True
    data = (BOM if bom else b"") + b"\n".join(lines) + (b"\n" if lines and final_newline else b"")
    expected = list(lines)
    if expected and not final_newline and expected[-1] == b"":
        expected.pop()  # "a\n" + "" is the file "a\n": one line, not two
    return LandingFile(data, expected)


@st.composite
def landing_file(draw: st.DrawFn, max_lines: int = 8, long_lines: bool = True) -> LandingFile:
    lines = draw(st.lists(line, max_size=max_lines))
    if long_lines and draw(st.integers(0, 9)) == 0:  # about one file in ten has a long line
        lines.insert(draw(st.integers(0, len(lines))), draw(long_line))
    return build(lines, bom=draw(st.booleans()), final_newline=draw(st.booleans()))


def expected_bronze(line: bytes, max_line_bytes: int) -> tuple[str, int, str, str | None]:
    """The bronze columns of one landed line, straight from ``parse_line`` on its bytes."""
    result = parse_line(line, max_line_bytes)
    raw = line.decode("utf-8", "replace")
    if isinstance(result, Rejection) and result.code in LINE_CODES:
        code, _, detail = result.reason.partition(": ")
        return raw, len(line), code, detail or None
    return raw, len(line), "ok", None
