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

from . import uncertain
from .api import CompiledQuery, Match, compile_query, match_recognize
from .compile import patterns
from .errors import QueryError
from .incremental.matcher import IncrementalMatcher
from .language.parser import parse
from .language.printer import to_sql

__all__ = ["CompiledQuery", "IncrementalMatcher", "Match", "QueryError", "compile_query",
           "match_recognize", "parse", "patterns", "to_sql", "uncertain"]
