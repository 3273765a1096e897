"""lakecep's pattern engine: SQL:2016 MATCH_RECOGNIZE over pandas DataFrames.

Pure Python (numpy/pandas); never imports Spark. Entry points:

* :func:`match_recognize` -- run a ``SELECT ... FROM t MATCH_RECOGNIZE (...)`` query.
* :func:`compile_query` -- parse once, then ``find_matches(df)`` / ``run(df)`` per batch.
* :class:`IncrementalMatcher` -- feed batches of a stream, get matches once final.
* :class:`QueryError` -- bad query (with line, column and a caret under the text).
* :func:`cep_core.uncertain.evaluate` -- queries with ``UNCERTAIN TIME`` (uncertain event
  times, event constraints, match probabilities; docs/uncertain.md).

The language is described in ``docs/query-language.md``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from . import uncertain
    from .api import CompiledQuery, Match, compile_query, match_recognize
    from .compile import patterns
    from .errors import QueryError
    from .incremental.matcher import IncrementalMatcher
    from .language.parser import parse
    from .language.printer import to_sql

#: Where each public name lives. Imported on first use (PEP 562), so that a caller that needs
#: only the parser (``lakecep validate``, rule hashes, ``lakecep sql``) does not pay for
#: pandas, numpy and the engines at start-up.
_EXPORTS = {
    "CompiledQuery": ".api", "Match": ".api", "compile_query": ".api",
    "match_recognize": ".api", "QueryError": ".errors",
    "IncrementalMatcher": ".incremental.matcher", "parse": ".language.parser",
    "to_sql": ".language.printer", "patterns": ".compile.patterns", "uncertain": ".uncertain",
}

__all__ = ["CompiledQuery", "IncrementalMatcher", "Match", "QueryError", "compile_query",
           "match_recognize", "parse", "patterns", "to_sql", "uncertain"]


def __getattr__(name: str) -> Any:
    where = _EXPORTS.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module = importlib.import_module(where, __name__)
    value = module if where.endswith(f".{name}") else getattr(module, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
