"""Tokenizer: query text -> tokens that carry their line and column."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from ..errors import QueryError

# Trino's reserved keywords (docs "Reserved keywords"; SqlBase.g4: every keyword outside
# the nonReserved rule). Only these cannot be used as plain names; every other word of the
# MATCH_RECOGNIZE syntax (MATCH, PARTITION, ONE, ROWS, PER, MEASURES, PATTERN, DEFINE,
# RUNNING, FINAL, PERMUTE, INTERVAL, ...) is non-reserved and works as a column name,
# alias, measure name or pattern variable; the parser tells them apart by context.
RESERVED = {
    "ALTER", "AND", "AS", "BETWEEN", "BY", "CASE", "CAST", "CONSTRAINT", "CREATE", "CROSS",
    "CUBE", "CURRENT_CATALOG", "CURRENT_DATE", "CURRENT_PATH", "CURRENT_ROLE",
    "CURRENT_SCHEMA", "CURRENT_TIME", "CURRENT_TIMESTAMP", "CURRENT_USER", "DEALLOCATE",
    "DELETE", "DESCRIBE", "DISTINCT", "DROP", "ELSE", "END", "ESCAPE", "EXCEPT", "EXECUTE",
    "EXISTS", "EXTRACT", "FALSE", "FOR", "FROM", "FULL", "GROUP", "GROUPING", "HAVING", "IN",
    "INNER", "INSERT", "INTERSECT", "INTO", "IS", "JOIN", "JSON_ARRAY", "JSON_EXISTS",
    "JSON_OBJECT", "JSON_QUERY", "JSON_TABLE", "JSON_VALUE", "LEFT", "LIKE", "LISTAGG",
    "LOCALTIME", "LOCALTIMESTAMP", "NATURAL", "NORMALIZE", "NOT", "NULL", "ON", "OR", "ORDER",
    "OUTER", "PREPARE", "RECURSIVE", "RIGHT", "ROLLUP", "SELECT", "SKIP", "TABLE", "THEN",
    "TRIM", "TRUE", "UESCAPE", "UNION", "UNNEST", "USING", "VALUES", "WHEN", "WHERE", "WITH",
}
# Words with a meaning somewhere in the syntax; the printer quotes names spelled like these
# (always safe) so that its output parses back to the same tree.
KEYWORDS = RESERVED | {
    "MATCH_RECOGNIZE", "PARTITION", "MEASURES", "ONE", "ALL", "ROWS", "ROW", "PER", "MATCH",
    "AFTER", "PATTERN", "SUBSET", "DEFINE", "WITHIN", "INTERVAL", "ASC", "DESC", "PERMUTE",
    "RUNNING", "FINAL", "NULLS", "TIMESTAMP", "FIRST", "LAST", "NEXT", "PAST", "TO",
}


class Kind(Enum):
    IDENT = "identifier"
    QUOTED = "quoted identifier"
    NUMBER = "number"
    STRING = "string"
    SYMBOL = "symbol"
    EOF = "end of query"


@dataclass(frozen=True)
class Token:
    kind: Kind
    text: str  # identifiers: as written; strings: the unescaped value
    line: int
    column: int

    @property
    def upper(self) -> str:
        return self.text.upper() if self.kind is Kind.IDENT else ""

    def describe(self) -> str:
        if self.kind is Kind.EOF:
            return "end of query"
        if self.kind is Kind.STRING:
            return f"string '{self.text}'"
        if self.kind is Kind.QUOTED:
            return f'"{self.text}"'
        return f"'{self.text}'"


_DIGITS = frozenset("0123456789")  # str.isdigit() also takes '²', '٣' ...

# Longest symbols first.
_SYMBOLS = ("{-", "-}", "<>", "!=", "<=", ">=", "||", "=", "<", ">", "+", "-", "*", "/", "%",
            "(", ")", ",", ".", "{", "}", "?", "|", "^", "$", ";")


def tokenize(text: str) -> list[Token]:
    """Split ``text`` into tokens; raise QueryError on characters that fit no token."""
    tokens: list[Token] = []
    i, line, col = 0, 1, 1
    n = len(text)

    def advance(count: int) -> None:
        nonlocal i, line, col
        for _ in range(count):
            if text[i] == "\n":
                line += 1
                col = 1
            else:
                col += 1
            i += 1

    while i < n:
        ch = text[i]
        if ch.isspace():
            advance(1)
            continue
        if text.startswith("--", i) and not text.startswith("-}", i + 1):
            while i < n and text[i] != "\n":
                advance(1)
            continue
        if text.startswith("/*", i):
            end = text.find("*/", i + 2)
            if end < 0:
                raise QueryError("unterminated comment", line, col)
            advance(end + 2 - i)
            continue
        start_line, start_col = line, col
        if ch.isalpha() or ch == "_":
            j = i
            while j < n and (text[j].isalnum() or text[j] == "_"):
                j += 1
            tokens.append(Token(Kind.IDENT, text[i:j], start_line, start_col))
            advance(j - i)
            continue
        if ch in _DIGITS or (ch == "." and i + 1 < n and text[i + 1] in _DIGITS):
            j = i
            while j < n and text[j] in _DIGITS:
                j += 1
            if j < n and text[j] == "." and j + 1 < n and text[j + 1] in _DIGITS:
                j += 1
                while j < n and text[j] in _DIGITS:
                    j += 1
            if j < n and text[j] in "eE":
                k = j + 1
                if k < n and text[k] in "+-":
                    k += 1
                if k < n and text[k] in _DIGITS:
                    j = k
                    while j < n and text[j] in _DIGITS:
                        j += 1
            tokens.append(Token(Kind.NUMBER, text[i:j], start_line, start_col))
            advance(j - i)
            continue
        if ch in "'\"":
            quote = ch
            j = i + 1
            parts: list[str] = []
            while True:
                if j >= n:
                    what = "string" if quote == "'" else "quoted identifier"
                    raise QueryError(f"unterminated {what}", start_line, start_col)
                if text[j] == quote:
                    if j + 1 < n and text[j + 1] == quote:
                        parts.append(quote)
                        j += 2
                        continue
                    break
                parts.append(text[j])
                j += 1
            kind = Kind.STRING if quote == "'" else Kind.QUOTED
            if kind is Kind.QUOTED and not parts:
                raise QueryError("empty quoted identifier", start_line, start_col)
            tokens.append(Token(kind, "".join(parts), start_line, start_col))
            advance(j + 1 - i)
            continue
        for sym in _SYMBOLS:
            if text.startswith(sym, i):
                tokens.append(Token(Kind.SYMBOL, sym, start_line, start_col))
                advance(len(sym))
                break
        else:
            raise QueryError(f"unexpected character {ch!r}", line, col)
    tokens.append(Token(Kind.EOF, "", line, col))
    return tokens
