"""The rule DAG of chained rules (lakecep.rules, docs/rules.md): levels, cycles and bad
inputs rejected with the rules named, the ``input`` key, and `lakecep validate` on them."""

from __future__ import annotations

import doctest
from pathlib import Path

import pytest

import lakecep.rules
from lakecep.queries import PatternQuery, QueryDefinitionError, WindowQuery, load_query
from lakecep.rules import RuleGraphError, chained, derived_schema, rule_levels, tainted_keys
from lakecep.validation import validate

Q = "SELECT * FROM events MATCH_RECOGNIZE (PARTITION BY object_id ORDER BY event_time " \
    "MEASURES A.event_id AS a_id PATTERN (A) DEFINE A AS event_type = '{}')"


def _rule(name: str, *inputs: str) -> PatternQuery:
    return PatternQuery(name, "1", "", Q.format(inputs[0] if inputs else "read"),
                        inputs=inputs)


def test_doctests() -> None:
    assert doctest.testmod(lakecep.rules).failed == 0


def test_levels_follow_the_longest_input_path() -> None:
    rules = [_rule("d", "b", "c"), _rule("c", "a"), _rule("b", "a"), _rule("a"),
             _rule("e", "d", "a")]
    assert rule_levels(rules) == {"a": 0, "b": 1, "c": 1, "d": 2, "e": 3}
    assert [q.id for q in chained(rules)] == ["b", "c", "d", "e"]


def test_cycles_name_every_rule_on_them() -> None:
    for rules, cycle in (
            ([_rule("a", "a")], ["a"]),
            ([_rule("a", "c"), _rule("b", "a"), _rule("c", "b"), _rule("z")], ["a", "c", "b"]),
            ([_rule("x"), _rule("a", "x", "b"), _rule("b", "a")], ["a", "b"])):
        with pytest.raises(RuleGraphError) as err:
            rule_levels(rules)
        assert err.value.code == "rule_cycle"
        assert sorted(err.value.rules) == sorted(cycle)
        assert str(err.value).endswith(" -> ".join([*err.value.rules, err.value.rules[0]]))


def test_bad_inputs_are_rejected() -> None:
    with pytest.raises(RuleGraphError, match="input 'rfid_ab' is not a rule; did you mean "
                                             "'rfid_abc'"):
        rule_levels([_rule("rfid_abc"), _rule("b", "rfid_ab")])
    window = WindowQuery("w", "1", "", "price", ("avg",))
    with pytest.raises(RuleGraphError, match="input 'w' is a window rule"):
        rule_levels([window, _rule("b", "w")])


def test_taint_is_the_keys_of_the_inputs_changes() -> None:
    changes = [("a", "t1"), ("a", "t2"), ("other", "t3"), ("b", "t2"), ("a", "t1")]
    assert tainted_keys(changes, ["a", "b"]) == {"t1", "t2"}
    assert tainted_keys(changes, ["c"]) == set()
    assert derived_schema(PatternQuery("x", "1", "", "q", (("a_id", "string"),)))[
        "a_id"] == "string"
    assert derived_schema(_rule("x"))["start_time"] == "timestamp"


def test_input_key_of_query_files(tmp_path: Path) -> None:
    path = tmp_path / "q.toml"
    base = f'id = "q"\nquery = """{Q.format("a")}"""\n'
    path.write_text(base + 'input = "a"\n')
    assert load_query(path).inputs == ("a",)
    path.write_text(base + 'input = ["a", "b"]\n')
    assert load_query(path).inputs == ("a", "b")
    for text, message in (('input = []\n', "non-empty list of rule ids"),
                          ('input = ["a", "a"]\n', "lists a rule twice"),
                          ('input = "a"\nalert = true\n', "alert = true on a chained rule"),
                          ('input = "a"\nkind = "uncertain"\n', "is for kind 'pattern'")):
        path.write_text(base + text)
        with pytest.raises(QueryDefinitionError, match=message):
            load_query(path)


def test_validate_reports_a_cycle_at_each_input_and_checks_derived_columns(
        tmp_path: Path) -> None:
    (tmp_path / "a.toml").write_text(f'id = "a"\ninput = "b"\nquery = """{Q.format("b")}"""\n')
    (tmp_path / "b.toml").write_text(f'id = "b"\ninput = ["a"]\nquery = """{Q.format("a")}"""\n')
    report = validate(tmp_path, None)
    assert [(Path(p.file).name, p.line, p.code) for p in report.problems] == [
        ("a.toml", 2, "rule_cycle"), ("b.toml", 2, "rule_cycle")]
    assert "a -> b -> a" in report.problems[0].message
    assert "a: input = ['b']; b: input = ['a']" in report.problems[0].hint
    # no cycle: the chained rule is checked against the derived events' columns
    (tmp_path / "a.toml").write_text(f'id = "a"\nquery = """{Q.format("x")}"""\n')
    text = Q.format("a").replace("A.event_id AS a_id", "A.start_time AS s, A.rssi AS r")
    (tmp_path / "b.toml").write_text(f'id = "b"\ninput = ["a"]\nquery = """{text}"""\n')
    report = validate(tmp_path, None)
    assert [p.code for p in report.problems] == ["unknown_column"]
    assert "'rssi'" in report.problems[0].message
