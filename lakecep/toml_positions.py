"""Where a TOML file's keys and string values are: file line and column of any character
of a string value (for errors inside a query or mapping expression written in a TOML file).

``tomllib`` gives values without positions. :func:`locate` scans the file once and records,
for each key path (``("query",)``, ``("live", "query")``, ``("mapping", "event_type")``,
``("operators", 2, "where")`` for the second ``[[operators]]`` table), where the key is
and, for a string value, the file offset of every character of the decoded value (escapes,
line-ending backslashes and the newline trimmed after an opening ``\"\"\"`` included). A
value whose decoding differs from ``tomllib``'s is not used (the caller falls back to the
key's line). Pure Python, no dependencies.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

Path_ = tuple[str | int, ...]
_ESCAPES = {"b": "\b", "t": "\t", "n": "\n", "f": "\f", "r": "\r", '"': '"', "\\": "\\",
            "e": "\x1b"}
_BARE = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")


@dataclass(frozen=True)
class TomlString:
    """A decoded string value and the file offset of each of its characters (one more
    entry at the end: the offset just after the value)."""

    value: str
    offsets: tuple[int, ...]


@dataclass
class Located:
    """Positions of one TOML file's keys and string values (see :func:`locate`)."""

    text: str
    keys: dict[Path_, int] = field(default_factory=dict)
    strings: dict[Path_, TomlString] = field(default_factory=dict)

    def line_col(self, offset: int) -> tuple[int, int]:
        """1-based file line and column (in characters) of a file offset."""
        offset = max(0, min(offset, len(self.text)))
        line = self.text.count("\n", 0, offset) + 1
        return line, offset - (self.text.rfind("\n", 0, offset) + 1) + 1

    def key(self, path: Path_) -> tuple[int, int] | None:
        """Line and column of a key (or a table header), None if not found."""
        offset = self.keys.get(path)
        return None if offset is None else self.line_col(offset)

    def in_value(self, path: Path_, line: int, column: int) -> tuple[int, int] | None:
        """File line and column of the character at ``line``/``column`` (1-based, as
        cep_core's QueryError counts them) of the string value at ``path``; None if the
        value was not located."""
        found = self.strings.get(path)
        if found is None:
            return None
        lines = found.value.split("\n")
        line = max(1, min(line, len(lines)))
        index = sum(len(text) + 1 for text in lines[:line - 1]) + max(column, 1) - 1
        index = min(index, len(found.value))
        return self.line_col(found.offsets[index])


def locate(text: str, parsed: Mapping[str, Any] | None = None) -> Located:
    """Scan ``text`` (a TOML document); with ``parsed`` (tomllib's result) a string whose
    decoding disagrees with it is dropped. Never raises: what it cannot read, it skips."""
    out = Located(text)
    try:
        _Scanner(text, out).run()
    except (IndexError, ValueError):
        pass  # a malformed file: keep what was found (tomllib reports the error)
    if parsed is not None:
        for path in list(out.strings):
            if _get(parsed, path) != out.strings[path].value:
                del out.strings[path]
    return out


def _get(data: Any, path: Path_) -> Any:
    for part in path:
        if isinstance(part, int):
            if not isinstance(data, list) or not 1 <= part <= len(data):
                return None
            data = data[part - 1]
        elif isinstance(data, dict):
            data = data.get(part)
        else:
            return None
    return data


class _Scanner:
    def __init__(self, text: str, out: Located) -> None:
        self.t = text
        self.i = 0
        self.out = out
        self.table: Path_ = ()
        self.arrays: dict[Path_, int] = {}

    def run(self) -> None:
        t = self.t
        while True:
            self._skip_blank(newlines=True)
            if self.i >= len(t):
                return
            if t[self.i] == "[":
                self._header()
            else:
                start = self.i
                parts = self._key()
                path = (*self.table, *parts)
                self.out.keys[path] = start
                self._skip_blank(newlines=False)
                if t[self.i] != "=":
                    raise ValueError("expected =")
                self.i += 1
                self._skip_blank(newlines=False)
                self._value(path)

    def _skip_blank(self, newlines: bool) -> None:
        t = self.t
        while self.i < len(t):
            ch = t[self.i]
            if ch in " \t" or (newlines and ch in "\r\n"):
                self.i += 1
            elif ch == "#" and newlines:
                end = t.find("\n", self.i)
                self.i = len(t) if end < 0 else end + 1
            else:
                return

    def _header(self) -> None:
        start = self.i
        double = self.t.startswith("[[", self.i)
        self.i += 2 if double else 1
        self._skip_blank(newlines=False)
        parts = self._key()
        self._skip_blank(newlines=False)
        self.i += 2 if double else 1  # ] or ]]
        if double:
            key = tuple(parts)
            self.arrays[key] = self.arrays.get(key, 0) + 1
            self.table = (*key, self.arrays[key])
        else:
            self.table = tuple(parts)
        self.out.keys[self.table] = start

    def _key(self) -> list[str]:
        parts: list[str] = []
        t = self.t
        while True:
            self._skip_blank(newlines=False)
            if t[self.i] in "\"'":
                parts.append(self._string().value)
            else:
                j = self.i
                while j < len(t) and t[j] in _BARE:
                    j += 1
                if j == self.i:
                    raise ValueError("expected a key")
                parts.append(t[self.i:j])
                self.i = j
            self._skip_blank(newlines=False)
            if self.i < len(t) and t[self.i] == ".":
                self.i += 1
                continue
            return parts

    def _value(self, path: Path_) -> None:
        t = self.t
        ch = t[self.i]
        if ch in "\"'":
            self.out.strings[path] = self._string()
        elif ch in "[{":
            self._skip_nested()
        else:
            while self.i < len(t) and t[self.i] not in "\r\n#":
                self.i += 1

    def _skip_nested(self) -> None:
        t = self.t
        depth = 0
        while self.i < len(t):
            ch = t[self.i]
            if ch in "\"'":
                self._string()
                continue
            if ch == "#":
                end = t.find("\n", self.i)
                self.i = len(t) if end < 0 else end
                continue
            if ch in "[{":
                depth += 1
            elif ch in "]}":
                depth -= 1
                if depth == 0:
                    self.i += 1
                    return
            self.i += 1

    def _string(self) -> TomlString:
        t = self.t
        quote = t[self.i]
        multi = t.startswith(quote * 3, self.i)
        self.i += 3 if multi else 1
        if multi:  # a newline right after the opening delimiter is trimmed
            if t.startswith("\r\n", self.i):
                self.i += 2
            elif t.startswith("\n", self.i):
                self.i += 1
        chars: list[str] = []
        offsets: list[int] = []
        literal = quote == "'"
        while True:
            if self.i >= len(t):
                raise ValueError("unterminated string")
            ch = t[self.i]
            if multi and t.startswith(quote * 3, self.i):
                extra = 0  # up to two quotes right before the closing delimiter are content
                while extra < 2 and t.startswith(quote * 4, self.i + extra):
                    extra += 1
                for k in range(extra):
                    chars.append(quote)
                    offsets.append(self.i + k)
                self.i += extra + 3
                break
            if not multi and ch == quote:
                self.i += 1
                break
            if not multi and ch in "\r\n":
                raise ValueError("newline in a single-line string")
            if ch == "\\" and not literal:
                self._escape(chars, offsets, multi)
                continue
            if ch == "\r" and t.startswith("\r\n", self.i):
                self.i += 1  # tomllib reads CRLF inside a multi-line string as LF
                continue
            chars.append(ch)
            offsets.append(self.i)
            self.i += 1
        offsets.append(self.i)
        return TomlString("".join(chars), tuple(offsets))

    def _escape(self, chars: list[str], offsets: list[int], multi: bool) -> None:
        t = self.t
        start = self.i
        nxt = t[self.i + 1]
        if nxt in _ESCAPES:
            chars.append(_ESCAPES[nxt])
            offsets.append(start)
            self.i += 2
        elif nxt in "uU":
            width = 4 if nxt == "u" else 8
            chars.append(chr(int(t[self.i + 2:self.i + 2 + width], 16)))
            offsets.append(start)
            self.i += 2 + width
        elif multi:  # a line-ending backslash: trim whitespace and newlines after it
            j = self.i + 1
            while j < len(t) and t[j] in " \t":
                j += 1
            if j >= len(t) or t[j] not in "\r\n":
                raise ValueError("bad escape")
            while j < len(t) and t[j] in " \t\r\n":
                j += 1
            self.i = j
        else:
            raise ValueError("bad escape")
