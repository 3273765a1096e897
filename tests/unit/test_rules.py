"""The rule DAG of chained rules (lakecep.rules, docs/rules.md): levels, cycles and bad
inputs rejected with the rules named, the ``input`` key, and `lakecep validate` on them."""

from __future__ import annotations

import doctest
from datetime import timedelta
from pathlib import Path

import pytest

import lakecep.rules
from lakecep.queries import (
    PatternQuery,
    QueryDefinitionError,
    WindowQuery,
    load_queries,
    load_query,
    rule_hash,
)
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


# ---------------------------------------------------------------- rule_hash (docs/rules.md 2)


def _write(folder: Path, name: str, text: str) -> None:
    (folder / f"{name}.toml").write_text(text)


def _hashes(folder: Path) -> dict[str, str]:
    return {q.id: q.rule_hash for q in load_queries(folder)}


def test_rule_hash_follows_the_definition_not_its_spelling_or_labels(tmp_path: Path) -> None:
    base = Q.format("read")
    first = _rule("a")
    assert len(first.rule_hash) == 16 and first.rule_hash == rule_hash(first)
    # spelling: whitespace, comments and keyword case print to the same tree
    spelled = base.replace(" MEASURES", "\n  -- the ids\n  measures").replace("PATTERN", "pattern")
    assert PatternQuery("a", "1", "", spelled).rule_hash == first.rule_hash
    # labels and delivery: version, description, alert, reload do not change results
    assert PatternQuery("a", "7", "new words", base, alert=True,
                        reload="clear").rule_hash == first.rule_hash
    # every change of results does
    changed = {
        "define": PatternQuery("a", "1", "", Q.format("write")),
        "id": PatternQuery("b", "1", "", base),
        "attributes": PatternQuery("a", "1", "", base, attributes=(("price", "double"),)),
        "inputs": PatternQuery("a", "1", "", base, inputs=("x",)),
    }
    hashes = {name: q.rule_hash for name, q in changed.items()}
    assert first.rule_hash not in hashes.values() and len(set(hashes.values())) == 4
    # a text that does not parse still hashes (validate reports it), by its words
    assert (PatternQuery("a", "1", "", "SELECT nonsense (").rule_hash
            == PatternQuery("a", "1", "", "SELECT   nonsense\n(").rule_hash)


def test_reload_strategy_of_a_query_file(tmp_path: Path) -> None:
    path = tmp_path / "a.toml"
    text = f'id = "a"\nquery = """{Q.format("read")}"""\n'
    path.write_text(text)
    assert load_query(path).reload == "warm"  # the default
    path.write_text('reload = "clear"\n' + text)
    clear = load_query(path)
    assert clear.reload == "clear" and clear.rule_hash == _rule("a").rule_hash
    path.write_text('reload = "hot"\n' + text)
    with pytest.raises(QueryDefinitionError, match="reload 'hot': use one of 'clear'"):
        load_query(path)


def test_side_by_side_is_for_time_windows_and_patterns_with_within(tmp_path: Path) -> None:
    path = tmp_path / "w.toml"
    window = ('id = "w"\nkind = "window"\nreload = "side_by_side"\nattribute = "t"\n'
              'aggregates = ["avg"]\n')
    for size in ('window = "5 minutes"', 'window = "5 minutes"\nevery = "1 minute"'):
        path.write_text(window + size)
        assert load_query(path).reload == "side_by_side"
    path.write_text(window + "rows = 10")
    with pytest.raises(QueryDefinitionError, match="count window .* never retire"):
        load_query(path)
    within = Q.format("read").replace("PATTERN (A)", "PATTERN (A) WITHIN INTERVAL '1' HOUR")
    path.write_text(f'id = "a"\nreload = "side_by_side"\nquery = """{within}"""\n')
    assert load_query(path).reload == "side_by_side"
    path.write_text(f'id = "a"\nreload = "side_by_side"\nquery = """{Q.format("read")}"""\n')
    with pytest.raises(QueryDefinitionError, match="no WITHIN, so the old version would never"):
        load_query(path)
    path.write_text(f'id = "a"\nreload = "side_by_side"\ninput = "b"\nquery = """{within}"""\n')
    with pytest.raises(QueryDefinitionError, match="not chained rules"):
        load_query(path)
    path.write_text('id = "u"\nkind = "uncertain"\nreload = "side_by_side"\n'
                    f'query = """{within}"""\n')
    with pytest.raises(QueryDefinitionError, match="not kind 'uncertain'"):
        load_query(path)


def test_side_by_side_keeps_window_definitions_across_restarts(settings, tmp_path: Path  # noqa: ANN001
                                                               ) -> None:
    import dataclasses

    from lakecep.jobs.reload import SideBySide

    local = dataclasses.replace(settings, home=tmp_path)
    path = tmp_path / "w.toml"
    path.write_text('id = "w"\nkind = "window"\nattribute = "t"\naggregates = ["max", "avg"]\n'
                    'window = "5 minutes"\nslide = "1 minute"\nevent_types = ["a", "b"]\n'
                    'allowed_lateness = "30 seconds"\n[attributes]\nt = "double"\n')
    query = load_query(path)
    assert isinstance(query, WindowQuery)
    store = SideBySide(local, "gold_x")
    store.retiring["w"] = (query, 123)
    store.save([query, _rule("a")])
    again = SideBySide(local, "gold_x")
    assert again.old("w", query.rule_hash) == query
    assert again.old("w", query.rule_hash).rule_hash == query.rule_hash  # type: ignore[union-attr]
    assert again.old("w", "other") is None and again.old("a", query.rule_hash) is None
    assert again.retiring == {"w": (query, 123)}
    again.save([_rule("a")])  # a new version in force: the old one is still running
    assert SideBySide(local, "gold_x").old("w", query.rule_hash) == query
    # pattern rules' definitions too (B for patterns with WITHIN), snapshot included
    from lakecep.queries import SnapshotSpec

    pattern = dataclasses.replace(_rule("p"), alert=True, rule_hash="abc",
                                  attributes=(("t", "double"),),
                                  snapshot=SnapshotSpec(timedelta(minutes=5)))
    again.retiring["p"] = (pattern, 7)
    again.save([pattern, _rule("c", "p")])
    last = SideBySide(local, "gold_x")
    assert last.old("p", "abc") == pattern and last.old("p", "abc").rule_hash == "abc"  # type: ignore[union-attr]
    assert last.retiring["p"] == (pattern, 7) and last.retiring["w"] == (query, 123)
    assert "c" not in last.definitions  # (a chained rule is deployed by a restart)


def test_window_rule_hash_ignores_the_order_of_aggregates() -> None:
    def window(*aggregates: str, size: int = 5) -> WindowQuery:
        return WindowQuery("w", "1", "", "temperature", aggregates,
                           window=timedelta(minutes=size))

    assert window("avg", "max").rule_hash == window("max", "avg").rule_hash
    assert window("avg", "max").rule_hash != window("avg", "max", size=6).rule_hash
    assert window("avg").rule_hash != window("avg", "max").rule_hash


def test_a_change_upstream_is_a_new_version_downstream(tmp_path: Path) -> None:
    _write(tmp_path, "a", f'id = "a"\nquery = """{Q.format("read")}"""\n')
    _write(tmp_path, "b", f'id = "b"\ninput = "a"\nquery = """{Q.format("a")}"""\n')
    _write(tmp_path, "c", f'id = "c"\nquery = """{Q.format("other")}"""\n')
    before = _hashes(tmp_path)
    assert before["b"] != PatternQuery("b", "1", "", Q.format("a"), inputs=("a",)).rule_hash
    _write(tmp_path, "a", f'id = "a"\nversion = "9"\ndescription = "only words"\n'
                          f'query = """{Q.format("read")}"""\n')
    assert _hashes(tmp_path) == before              # labels change nothing, downstream too
    _write(tmp_path, "a", f'id = "a"\nquery = """{Q.format("READ")}"""\n')
    after = _hashes(tmp_path)
    assert after["a"] != before["a"] and after["b"] != before["b"]
    assert after["c"] == before["c"]                # not reachable from a
    report = validate(tmp_path, None)
    assert report.ok and {q.id: q.rule_hash for q in report.queries} == after


# ---------------------------------------------------------------- priorities (docs/rules.md 4)


def test_priority_key_defaults_to_normal_and_is_checked(tmp_path: Path) -> None:
    path = tmp_path / "q.toml"
    base = f'id = "q"\nquery = """{Q.format("a")}"""\n'
    path.write_text(base)
    normal = load_query(path)
    assert normal.priority == "normal"
    path.write_text(base + 'priority = "high"\n')
    high = load_query(path)
    assert high.priority == "high"
    assert high.rule_hash == normal.rule_hash   # how results are scheduled, not which
    path.write_text(base + 'priority = "urgent"\n')
    with pytest.raises(QueryDefinitionError, match=r"q.toml: priority must be one of 'high', "
                                                   r"'normal', 'low' \(default 'normal'\), "
                                                   "got 'urgent'"):
        load_query(path)
    window = tmp_path / "w.toml"
    window.write_text('id = "w"\nkind = "window"\nattribute = "x"\naggregates = ["avg"]\n'
                      'window = "1 minute"\npriority = "low"\n')
    assert load_query(window).priority == "low"


def test_validate_rejects_a_chained_rule_over_a_lower_class(tmp_path: Path) -> None:
    (tmp_path / "a.toml").write_text(f'id = "a"\npriority = "low"\n'
                                     f'query = """{Q.format("x")}"""\n')
    (tmp_path / "b.toml").write_text(f'id = "b"\ninput = "a"\npriority = "high"\n'
                                     f'query = """{Q.format("a")}"""\n')
    report = validate(tmp_path, None)
    assert [(Path(p.file).name, p.line, p.code) for p in report.problems] == [
        ("b.toml", 3, "rule_priority")]
    message = report.problems[0].message
    assert "rule 'b' (priority high) reads rule 'a'" in message
    assert str(tmp_path / "a.toml") in message and "priority low" in message
    # the same class, or a higher one upstream, is fine
    for upstream in ("high", "normal"):
        (tmp_path / "a.toml").write_text(f'id = "a"\npriority = "{upstream}"\n'
                                         f'query = """{Q.format("x")}"""\n')
        (tmp_path / "b.toml").write_text(f'id = "b"\ninput = "a"\npriority = "normal"\n'
                                         f'query = """{Q.format("a")}"""\n')
        assert validate(tmp_path, None).ok, upstream
