"""The public API: compile once / run many, Match objects, output shape, hygiene."""

from __future__ import annotations

import ast as pyast
import dataclasses
import doctest
import sys
from pathlib import Path

import pandas as pd
import pytest
from mr_helpers import rows

import cep_core
import cep_core.api
import cep_core.incremental.matcher
import cep_core.incremental.store

QUERY = ("SELECT * FROM ev MATCH_RECOGNIZE (PARTITION BY k ORDER BY t "
         "MEASURES FIRST(A.t) AS s, LAST(B.t) AS e, COUNT(B.*) AS nb "
         "PATTERN (A B+) DEFINE A AS v = 'a', B AS v = 'b')")


def _frame() -> pd.DataFrame:
    # Deliberately shuffled, with a non-default index.
    df = pd.DataFrame({
        "k": ["y", "x", "x", "y", "x", "y", "x"],
        "t": [2, 3, 1, 1, 2, 3, 4],
        "v": ["b", "b", "a", "a", "b", "b", "a"],
    })
    df.index = [70, 60, 50, 40, 30, 20, 10]
    return df


def test_find_matches_rows_are_positions_into_the_given_frame() -> None:
    df = _frame()
    matches = cep_core.compile_query(QUERY).find_matches(df)
    assert [(m.partition, m.match_number) for m in matches] == [(("x",), 1), (("y",), 1)]
    # x: t=1 (a, position 2), t=2 (b, position 4), t=3 (b, position 1).
    assert matches[0].rows == (2, 4, 1)
    assert matches[0].labels == ("A", "B", "B")
    assert matches[0].measures == {"s": 1, "e": 3, "nb": 2}
    assert matches[1].rows == (3, 0, 5)
    assert list(df["t"].iloc[list(matches[1].rows)]) == [1, 2, 3]
    with pytest.raises(dataclasses.FrozenInstanceError):
        matches[0].match_number = 5  # type: ignore[misc]


def test_compiled_query_is_reusable_and_run_equals_match_recognize() -> None:
    compiled = cep_core.compile_query(QUERY)
    df = _frame()
    first = compiled.run(df)
    again = compiled.run(df.iloc[::-1])
    expected = cep_core.match_recognize(QUERY, {"ev": df})
    pd.testing.assert_frame_equal(first, expected)
    pd.testing.assert_frame_equal(again, expected)
    assert rows(first) == [("x", 1, 3, 2), ("y", 1, 3, 2)]
    # A frame with other columns binds separately.
    wider = df.assign(extra=1)
    pd.testing.assert_frame_equal(compiled.run(wider), expected)


def test_compiled_query_describes_itself() -> None:
    compiled = cep_core.compile_query(QUERY)
    assert compiled.partition_by == ["k"]
    assert compiled.order_by == [("t", False)]
    assert compiled.table == "ev"
    assert compiled.variables == ["A", "B"]
    assert compiled.measure_names == ["s", "e", "nb"]
    assert cep_core.parse(compiled.sql()) == compiled.tree


def test_select_list_with_qualifier_star_and_renames() -> None:
    df = _frame()
    star = cep_core.match_recognize(QUERY.replace("SELECT *", "SELECT m.*") + " AS m",
                                    {"ev": df})
    assert list(star.columns) == ["k", "s", "e", "nb"]
    picked = cep_core.match_recognize(QUERY.replace("SELECT *", "SELECT E AS finish, k"),
                                      {"ev": df})
    assert list(picked.columns) == ["finish", "k"]
    assert rows(picked) == [(3, "x"), (3, "y")]


def test_table_lookup_is_case_insensitive() -> None:
    out = cep_core.match_recognize(QUERY, {"EV": _frame()})
    assert len(out) == 2


@pytest.mark.parametrize("module", [cep_core.api, cep_core.incremental.matcher,
                                    cep_core.incremental.store])
def test_docstring_examples_run(module: object) -> None:
    result = doctest.testmod(module)  # type: ignore[arg-type]
    assert result.attempted >= 1
    assert result.failed == 0


def test_cep_core_never_imports_spark_or_reads_shared_files() -> None:
    package = Path(cep_core.__file__).parent
    allowed = {"numpy", "pandas", "scipy", "numba", "__future__"} | set(sys.stdlib_module_names)
    files = list(package.rglob("*.py"))
    assert len(files) >= 10
    for path in files:
        text = path.read_text()
        assert "pyspark" not in text, path
        assert "/work/shared" not in text, path
        for node in pyast.walk(pyast.parse(text)):
            if isinstance(node, pyast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, pyast.ImportFrom) and node.level == 0:
                names = [node.module or ""]
            else:
                continue
            for name in names:
                assert name.split(".")[0] in allowed, (path, name)


def test_output_columns_without_data() -> None:
    compiled = cep_core.compile_query(QUERY)
    assert compiled.output_columns(["k", "t", "v"]) == ["k", "s", "e", "nb"]
    all_rows = cep_core.compile_query(
        QUERY.replace("PATTERN", "ALL ROWS PER MATCH PATTERN").replace("SELECT *",
                                                                      "SELECT v, s AS start"))
    assert all_rows.output_columns(["v", "k", "t"]) == ["v", "start"]
    full = cep_core.compile_query(QUERY.replace("PATTERN", "ALL ROWS PER MATCH PATTERN"))
    assert full.output_columns(["v", "k", "t", "w"]) == ["k", "t", "s", "e", "nb", "v", "w"]
    assert list(full.run(_frame().assign(w=0)).columns) == full.output_columns(
        ["k", "t", "v", "w"])


COLUMNS_READ_QUERIES = [
    QUERY,
    # navigation, an aggregate with FILTER, CLASSIFIER's argument (a variable, not a column),
    # a computed PARTITION BY key, WITHIN
    "SELECT * FROM ev MATCH_RECOGNIZE (PARTITION BY lower(k) ORDER BY t "
    "MEASURES SUM(B.w) FILTER (WHERE B.w > 0) AS sw, LAST(CLASSIFIER()) AS c "
    "PATTERN (A B+ C?) WITHIN 5 "
    "DEFINE A AS v = 'a', B AS PREV(w) <= w OR CLASSIFIER() = 'B', C AS w > FIRST(A.w))",
    "SELECT * FROM ev MATCH_RECOGNIZE (PARTITION BY k ORDER BY t, w DESC "
    "MEASURES MATCH_NUMBER() AS n ALL ROWS PER MATCH AFTER MATCH SKIP TO NEXT ROW "
    "PATTERN (A+) DEFINE A AS v <> 'c')",
]


@pytest.mark.parametrize("text", COLUMNS_READ_QUERIES)
def test_columns_read_is_enough_to_find_the_same_matches(text: str) -> None:
    """Matching on only ``columns_read`` (what gold ships to the engine) finds exactly
    the matches of the whole frame: partitions, rows, measures."""
    import numpy as np

    rng = np.random.default_rng(7)
    n = 300
    df = pd.DataFrame({
        "k": rng.choice(["x", "X", "y"], n), "t": rng.integers(0, 60, n),
        "v": rng.choice(["a", "b", "c"], n), "w": rng.integers(-3, 4, n),
        "attributes": ['{"big": "json"}'] * n, "unused": rng.random(n),
    })
    q = cep_core.compile_query(text)
    read = q.columns_read()
    assert read is not None
    assert {"attributes", "unused"}.isdisjoint(read)
    kept = df[[c for c in df.columns if c.lower() in read]]

    def found(frame: pd.DataFrame) -> list[tuple]:
        return [(m.partition, m.match_number, tuple(m.rows), tuple(sorted(m.measures.items())))
                for m in q.find_matches(frame)]

    assert found(kept) == found(df)
    assert found(df)  # the inputs do match


def test_columns_read_names_what_each_clause_reads() -> None:
    q = cep_core.compile_query(COLUMNS_READ_QUERIES[1])
    assert {"k", "t", "v", "w"} <= q.columns_read()  # lower(k): the key's own column
    assert "b" not in q.columns_read() and "a" not in q.columns_read()  # variables
    uncertain = cep_core.compile_query(
        "SELECT * FROM ev MATCH_RECOGNIZE (PARTITION BY k ORDER BY t MEASURES A.t AS s "
        "PATTERN (A B) UNCERTAIN TIME BETWEEN lo AND hi "
        "DEFINE A AS v = 'a', B AS v = 'b')")
    assert uncertain.columns_read() is None  # the uncertain engine reads its own columns
