"""Errors raised for bad queries, with the position of the offending text."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

# Exceptions that evaluation of a query over odd data may raise from Python, numpy or
# pandas (a string compared with a number, an overflowing timestamp, a deep recursion ...):
# the public entry points turn them into QueryError (see :func:`query_errors`).
EVALUATION_ERRORS: tuple[type[BaseException], ...] = (
    TypeError, ValueError, ArithmeticError, LookupError, AttributeError, RecursionError)


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


@contextmanager
def query_errors(query: str | None) -> Iterator[None]:
    """Run a public entry point: a QueryError gets the query text; any other evaluation
    error (:data:`EVALUATION_ERRORS`) becomes a QueryError naming the original exception,
    so callers only ever see QueryError for a bad query or data it cannot evaluate."""
    try:
        yield
    except QueryError as err:
        raise (err if query is None else err.with_query(query)) from None
    except EVALUATION_ERRORS as err:
        detail = str(err).splitlines()[0] if str(err) else ""
        raise QueryError(f"the query could not be evaluated: {type(err).__name__}"
                         + (f": {detail}" if detail else ""), query=query) from err
