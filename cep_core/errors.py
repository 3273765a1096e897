"""Errors raised for bad queries, with the position of the offending text."""

from __future__ import annotations


class QueryError(ValueError):
    """A query could not be parsed, compiled or evaluated.

    ``line`` and ``column`` are 1-based and point at the offending text. When the query text
    is known, ``str(error)`` quotes the line and puts a caret under the column.
    """

    def __init__(self, message: str, line: int = 1, column: int = 1, query: str | None = None):
        self.message = message
        self.line = line
        self.column = column
        self.query = query
        super().__init__(self._render())

    def _render(self) -> str:
        text = f"{self.message} (line {self.line}, column {self.column})"
        if self.query is not None:
            lines = self.query.splitlines() or [""]
            if 1 <= self.line <= len(lines):
                src = lines[self.line - 1]
                text += f"\n  {src}\n  {' ' * (self.column - 1)}^"
        return text

    def with_query(self, query: str) -> QueryError:
        """Return the same error, rendered against ``query``."""
        if self.query is not None:
            return self
        return QueryError(self.message, self.line, self.column, query)

    def __str__(self) -> str:
        return self._render()
