"""Front end: tokenizer/parser/printer round trips and error positions."""

from __future__ import annotations

import pandas as pd
import pytest

import cep_core
from cep_core.language import ast
from cep_core.language.parser import parse, parse_expression
from cep_core.language.printer import to_sql

QUERIES = [
    "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id PATTERN (A))",
    """SELECT m.a, b AS bee FROM events MATCH_RECOGNIZE (
         PARTITION BY object_id, "Region" ORDER BY event_time DESC, seq NULLS FIRST
         MEASURES A.event_time AS start_time, FINAL LAST(B.x, 2) AS lb,
                  RUNNING COUNT(*) AS n, COUNT(B.*) AS nb, CLASSIFIER() AS c,
                  MATCH_NUMBER() AS mn, PREV(FIRST(A.x), 2) AS p
         ALL ROWS PER MATCH WITH UNMATCHED ROWS
         AFTER MATCH SKIP TO FIRST B
         PATTERN (^ A+? (B | C){2,5} {- D* -} PERMUTE(E, F?) G{,3}? H{4,} () $)
         WITHIN INTERVAL '10' HOUR
         SUBSET U = (A, B), V = (C)
         DEFINE A AS x > PREV(x) AND NOT (y IS NULL) OR z BETWEEN 1 AND 2,
                B AS B.x IN (1, 2.5, 'q') AND CASE WHEN x > 1 THEN TRUE ELSE FALSE END,
                C AS -x * (2 + 3) % 4 / 5 - -1 >= ABS(x) || 'a'
       ) AS m ORDER BY a DESC""",
    "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id ONE ROW PER MATCH AFTER MATCH SKIP "
    "TO NEXT ROW PATTERN (A B*) WITHIN 30 DEFINE B AS B.v <> A.v)",
    "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id PATTERN (A B) SKIP TILL ANY MATCH)",
    "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id PATTERN (A B) WITHIN INTERVAL '2' DAY "
    "SKIP TILL NEXT MATCH SUBSET U = (A, B))",
    "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id ALL ROWS PER MATCH OMIT EMPTY MATCHES "
    "AFTER MATCH SKIP PAST LAST ROW PATTERN (A | B C | (D E)+) "
    "DEFINE A AS CASE v WHEN 1 THEN 'x' END = 'x', \"b\" AS ts > TIMESTAMP '2024-01-01')",
    # lakecep extension: UNCERTAIN TIME (docs/uncertain.md)
    "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts PATTERN (A B) UNCERTAIN TIME BETWEEN lo AND hi)",
    """SELECT * FROM events MATCH_RECOGNIZE (PARTITION BY object_id ORDER BY event_time
         MEASURES A.event_id AS a_id, MATCH_PROBABILITY() AS p
         PATTERN (A PERMUTE(B, C | E) D) WITHIN INTERVAL '1' HOUR
         UNCERTAIN TIME BETWEEN "Lower" AND upper PMF pmf GRANULARITY 0.5
         EVENT CONSTRAINTS (PRIOR(D, A), EXCLUSIVE(B, X), REQUIRE(B, C))
         WITH PROBABILITY >= 0.2
         DEFINE A AS event_type = 'A', X AS event_type = 'X')""",
    "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts PATTERN (A) UNCERTAIN TIME BETWEEN lo AND "
    "hi GRANULARITY INTERVAL '2' MINUTE WITH PROBABILITY >= 1)",
]


@pytest.mark.parametrize("query", QUERIES)
def test_parse_print_parse_round_trip(query: str) -> None:
    tree = parse(query)
    printed = to_sql(tree)
    assert parse(printed) == tree
    assert to_sql(parse(printed)) == printed  # printing is stable


def test_parse_builds_the_expected_tree() -> None:
    tree = parse("select * from T match_recognize (order by id pattern (a b+? | c{2,}) "
                 "define a as v > 1)")
    pattern = tree.match.pattern
    assert pattern == ast.Alternation((
        ast.Concat((ast.Var("A"), ast.Quantified(ast.Var("B"), 1, None, False, "+"))),
        ast.Quantified(ast.Var("C"), 2, None, True, "{2,}"),
    ))
    assert tree.match.defines == (
        ast.Define("A", ast.Binary(">", ast.Column("v"), ast.Literal(1))),)
    assert tree.match.rows_per_match == "ONE"
    assert tree.match.skip.kind == "PAST LAST ROW"


def test_operator_precedence() -> None:
    e = parse_expression("a + b * c > 1 OR NOT d AND e")
    assert e == ast.Binary(
        "OR",
        ast.Binary(">", ast.Binary("+", ast.Column("a"),
                                   ast.Binary("*", ast.Column("b"), ast.Column("c"))),
                   ast.Literal(1)),
        ast.Binary("AND", ast.Unary("NOT", ast.Column("d")), ast.Column("e")))
    assert to_sql(parse_expression("(a - b) - (c - d)")) == "a - b - (c - d)"
    assert to_sql(parse_expression("a - (-1)")) == "a - (-1)"


def _error(query: str) -> cep_core.QueryError:
    with pytest.raises(cep_core.QueryError) as info:
        cep_core.compile_query(query)
    return info.value


def _at(query: str, fragment: str, occurrence: int = 0) -> tuple[int, int]:
    """1-based (line, column) of ``fragment`` in ``query``."""
    index = -1
    for _ in range(occurrence + 1):
        index = query.index(fragment, index + 1)
    before = query[:index]
    return before.count("\n") + 1, index - (before.rfind("\n") + 1) + 1


@pytest.mark.parametrize(("query", "fragment", "message"), [
    ("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id PATERN (A))", "PATERN", "unknown clause"),
    ("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id PATTERN (A{3,1}))", "{3,1}",
     "upper bound is below"),
    ("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id PATTERN (A{x}))", "x}", "bad quantifier"),
    ("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id PATTERN (A{2))", "))", "bad quantifier"),
    ("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id PATTERN ((A B))", "\n", "expected ')'"),
    ("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id PATTERN (A B)))", ")", "after the end"),
    ("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES Z.v AS z PATTERN (A))", "Z.v",
     "undefined pattern variable 'Z' in MEASURES"),
    ("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id PATTERN (A) DEFINE A AS PREV(Q.v) > 1)",
     "PREV", "undefined pattern variable 'Q' in DEFINE"),
    ("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id PATTERN (A) DEFINE B AS v > 1)", "B AS",
     "not a variable of the PATTERN"),
    ("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id PATTERN (A) DEFINE A AS FINAL LAST(v) > 1)",
     "FINAL", "FINAL is not allowed in DEFINE"),
    ("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES FOO(A.v) AS f PATTERN (A))",
     "FOO", "unknown function FOO"),
    ("SELECT * FROM t MATCH_RECOGNIZE (PATTERN (A) WITHIN INTERVAL '1' HOUR)", "INTERVAL",
     "WITHIN needs an ORDER BY"),
    ("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id PATTERN (A) WITHIN INTERVAL '1' WEEK)",
     "WEEK", "unknown interval unit"),
    ("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id PATTERN (A) DEFINE A AS v = 'x)", "'x",
     "unterminated string"),
    ("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id PATTERN (A) DEFINE A AS v = #)", "#",
     "unexpected character"),
    ("SELECT * FROM t MATCH_RECOGNIZE (PATTERN (A) ORDER BY id)", "ORDER",
     "out of order"),
    ("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id AFTER MATCH SKIP TO X PATTERN (A))", "X",
     "AFTER MATCH SKIP names X"),
    ("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES PREV(A.v, -1) AS p PATTERN (A))",
     "-1", "non-negative"),
    ("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES LAST(A.v + B.v) AS p "
     "PATTERN (A B))", "LAST", "same pattern variable"),
    ("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id PATTERN (A) SUBSET U = (A, Q))", "U =",
     "not a variable of the PATTERN"),
    ("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id PATTERN (A) SKIP TILL SOME MATCH)", "SOME",
     "expected NEXT or ANY"),
    ("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id PATTERN (A*+))", "+))",
     "quantifier cannot follow another"),
    ("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id PATTERN (A | ))", "))",
     "expected a pattern term"),
    ("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id PATTERN (A)\n  DEFINE A AS v >)", ")",
     "expected an expression"),
    ("SELECT *\nFROM t MATCH_RECOGNIZE (\n  ORDER BY id\n  MEASURES A.v AS x,\n"
     "           LAST(Y.v) AS y\n  PATTERN (A))", "LAST", "undefined pattern variable"),
])
def test_query_errors_have_positions(query: str, fragment: str, message: str) -> None:
    err = _error(query)
    assert message in err.message
    if fragment == "\n":  # at the end of the query
        assert (err.line, err.column) == (1, len(query) + 1)
        return
    # The error points at the last occurrence of the fragment.
    assert (err.line, err.column) == _at(query, fragment, query.count(fragment) - 1)


def test_error_text_shows_the_line_and_a_caret() -> None:
    query = "SELECT *\nFROM t MATCH_RECOGNIZE (\n  ORDER BY id\n  PATTERN (A{5,2}))"
    err = _error(query)
    text = str(err)
    assert "(line 4, column 13)" in text
    assert text.splitlines()[-2:] == ["    PATTERN (A{5,2}))", "  " + " " * 12 + "^"]
    assert isinstance(err, ValueError)


def test_unknown_column_is_reported_at_run_time_with_position() -> None:
    query = "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id PATTERN (A) DEFINE A AS pric > 1)"
    compiled = cep_core.compile_query(query)  # no data yet: fine
    with pytest.raises(cep_core.QueryError, match="unknown column 'pric'") as info:
        compiled.run(pd.DataFrame({"id": [1], "price": [2]}))
    assert (info.value.line, info.value.column) == _at(query, "pric")
    assert "^" in str(info.value)


def test_unknown_partition_column_and_unknown_table() -> None:
    query = "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY nope ORDER BY id PATTERN (A))"
    with pytest.raises(cep_core.QueryError, match="unknown column 'nope'") as info:
        cep_core.match_recognize(query, {"t": pd.DataFrame({"id": [1]})})
    assert info.value.column == _at(query, "nope")[1]
    with pytest.raises(cep_core.QueryError, match="unknown table 't'"):
        cep_core.match_recognize(query, {"other": pd.DataFrame({"id": [1]})})


def test_unknown_output_column_in_select() -> None:
    query = "SELECT nope FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES A.id AS a PATTERN (A))"
    with pytest.raises(cep_core.QueryError, match="unknown output column 'nope'") as info:
        cep_core.match_recognize(query, {"t": pd.DataFrame({"id": [1]})})
    assert info.value.column == _at(query, "nope")[1]


def test_type_errors_in_expressions_are_query_errors() -> None:
    query = "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id PATTERN (A) DEFINE A AS s + 1 > 2)"
    with pytest.raises(cep_core.QueryError, match="cannot apply \\+") as info:
        cep_core.match_recognize(query, {"t": pd.DataFrame({"id": [1], "s": ["x"]})})
    assert info.value.column == _at(query, "+ 1")[1]
