"""``lakecep sql``'s MATCH_RECOGNIZE rewrite (lakecep.spark.rewrite): finding each clause,
its FROM item and its body without being fooled by strings, comments or parentheses. Pure
text, no Spark."""

from __future__ import annotations

import pytest

from cep_core import QueryError
from lakecep.spark import _Located, rewrite

BODY = "ORDER BY t MEASURES A.v AS a PATTERN (A B) DEFINE B AS v > PREV(v)"


def test_statement_without_the_clause_is_unchanged() -> None:
    text = "SELECT 'MATCH_RECOGNIZE (' AS s, `match_recognize` FROM t -- MATCH_RECOGNIZE (\n"
    assert rewrite(text) == (text, [])


def test_table_with_time_travel_alias_and_outer_clauses() -> None:
    text = (f"SELECT m.a, count(*) FROM silver.events VERSION AS OF 3 MATCH_RECOGNIZE ({BODY}) "
            "AS m JOIN o ON m.a = o.a WHERE m.a > 1 GROUP BY m.a ORDER BY 1")
    out, [clause] = rewrite(text, "v")
    assert out == ("SELECT m.a, count(*) FROM v_0  AS m JOIN o ON m.a = o.a WHERE m.a > 1 "
                   "GROUP BY m.a ORDER BY 1")
    assert clause.relation == "silver.events VERSION AS OF 3"
    assert clause.query == f"SELECT * FROM t MATCH_RECOGNIZE ({BODY}\n)"


def test_strings_comments_and_parentheses_do_not_fool_it() -> None:
    body = ("PARTITION BY k ORDER BY t /* ) */ MEASURES A.v AS a -- )\n"
            "PATTERN ((A) B+) DEFINE B AS s = ')' AND s <> 'it''s (' ")
    text = ("SELECT * /* MATCH_RECOGNIZE ( /* nested */ */ FROM (SELECT * FROM `we)ird` "
            f"WHERE x = 'a\\' MATCH_RECOGNIZE (') MATCH_RECOGNIZE ({body}) m, other")
    out, [clause] = rewrite(text, "v")
    assert out == "SELECT * /* MATCH_RECOGNIZE ( /* nested */ */ FROM v_0  m, other"
    assert clause.relation == "(SELECT * FROM `we)ird` WHERE x = 'a\\' MATCH_RECOGNIZE (')"
    assert clause.query == f"SELECT * FROM t MATCH_RECOGNIZE ({body}\n)"


def test_nested_and_joined_clauses_innermost_first() -> None:
    inner = f"(SELECT * FROM a MATCH_RECOGNIZE ({BODY}))"
    text = (f"SELECT * FROM {inner} MATCH_RECOGNIZE ({BODY}) x "
            f"LEFT JOIN b MATCH_RECOGNIZE ({BODY}) y ON x.a = y.a")
    out, clauses = rewrite(text, "v")
    assert [c.relation for c in clauses] == ["a", "(SELECT * FROM v_0 )", "b"]
    assert out == "SELECT * FROM v_1  x LEFT JOIN v_2  y ON x.a = y.a"


@pytest.mark.parametrize(("text", "message"), [
    (f"SELECT 1 MATCH_RECOGNIZE ({BODY})", "must follow a table"),
    (f"SELECT * FROM MATCH_RECOGNIZE ({BODY})", "must follow a table"),
    (f"SELECT * FROM t MATCH_RECOGNIZE ({BODY}", "never closed"),
    ("SELECT * FROM t MATCH_RECOGNIZE (DEFINE B AS s = ')", "unterminated string"),
    (f"SELECT * FROM t MATCH_RECOGNIZE ({BODY}) MATCH_RECOGNIZE ({BODY})", "directly after"),
])
def test_malformed_statements_are_query_errors(text: str, message: str) -> None:
    with pytest.raises(QueryError, match=message):
        rewrite(text)


def test_errors_in_a_clause_point_into_the_statement() -> None:
    text = f"SELECT *\nFROM t\nMATCH_RECOGNIZE (\n  {BODY.replace('B AS', 'B AS AS')}\n) m"
    _, [clause] = rewrite(text, "v")
    with pytest.raises(QueryError) as caught:
        _Located.compile(text, clause.query, clause.where)
    err = caught.value
    assert (err.line, err.query) == (4, text)
    assert text.splitlines()[3][err.column - 1:].startswith("AS v >")


def test_bare_clause_errors_point_into_the_callers_text() -> None:
    text = "  MATCH_RECOGNIZE (ORDER BY t PATTERN (A DEFINE A AS v > 1)"
    with pytest.raises(QueryError) as caught:
        _Located.of(text)
    # DEFINE is non-reserved (Trino), so the unclosed PATTERN reads it as a variable and
    # fails at AS: the column counts in the caller's text, leading spaces included.
    assert (caught.value.line, caught.value.column) == (1, text.index(" AS v") + 2)
