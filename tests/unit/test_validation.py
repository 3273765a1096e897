"""Early validation (lakecep.validation, `lakecep validate`): queries and source files
checked against the silver schema without Spark, every problem with file:line:column; the
TOML position mapping (lakecep.toml_positions) checked exactly and by property."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakecep.jobs.cli import main
from lakecep.queries import QUERIES_DIR, PatternQuery
from lakecep.toml_positions import locate
from lakecep.validation import ValidationError, check_queries, validate

REPO = Path(__file__).resolve().parents[2]
CARDS = QUERIES_DIR / "examples" / "cards"

CARD_QUERY = '''# the card example's query with problems
id = "card_fraud"
kind = "pattern"
query = """
SELECT * FROM events MATCH_RECOGNIZE (
  PARTITION BY object_id
  ORDER BY event_time
  MEASURES PROBE.event_id AS probe_txn, BIG.amout AS big_amount
  PATTERN (PROBE BIG) WITHIN INTERVAL '15' MINUTE
  DEFINE PROBE AS amount < 2, BIG AS amount > 500
)
"""
'''


def position(text: str, needle: str, nth: int = 1) -> tuple[int, int]:
    """1-based line and column of the ``nth`` occurrence of ``needle`` in ``text``."""
    at = -1
    for _ in range(nth):
        at = text.index(needle, at + 1)
    line = text.count("\n", 0, at) + 1
    return line, at - (text.rfind("\n", 0, at) + 1) + 1


def lake(tmp_path: Path, query: str, sources: bool = True) -> tuple[Path, Path | None]:
    queries = tmp_path / "queries"
    queries.mkdir(exist_ok=True)
    (queries / "card_fraud.toml").write_text(query)
    if not sources:
        return queries, None
    folder = tmp_path / "sources"
    if not folder.exists():
        shutil.copytree(CARDS / "sources", folder)
    return queries, folder


def only(report, code: str):  # noqa: ANN001, ANN201
    found = [p for p in report.problems if p.code == code]
    assert len(found) == 1, report.problems
    return found[0]


# ----------------------------------------------------------------------------- queries


def test_shipped_queries_and_examples_are_valid() -> None:
    assert validate(None, None).problems == []
    assert validate(QUERIES_DIR / "examples", None).problems == []
    assert validate(QUERIES_DIR / "examples" / "windows", None).problems == []
    report = validate(CARDS, CARDS / "sources")
    assert report.problems == []
    assert [q.id for q in report.queries] == ["card_fraud"]
    assert report.columns["amount"] == "double" and report.columns["merchant"] == "string"
    assert "card" not in report.columns  # mapped as a whole onto object_id


def test_window_query_key_and_attribute_are_checked(tmp_path: Path) -> None:
    shipped = (QUERIES_DIR / "examples" / "windows" / "stock_price_window.toml").read_text()
    folder = tmp_path / "queries"
    folder.mkdir()
    (folder / "w.toml").write_text(shipped.replace('key = "object_id"', 'key = "objet_id"'))
    problem = only(validate(folder, None), "unknown_column")
    assert problem.file == str(folder / "w.toml")
    assert problem.message == "key 'objet_id' is not a silver column; did you mean 'object_id'?"
    (folder / "w.toml").write_text(shipped.replace('price = "double"', 'price = "string"'))
    assert only(validate(folder, None), "definition_error").file == str(folder / "w.toml")


def test_unknown_column_has_file_line_column_and_did_you_mean(tmp_path: Path) -> None:
    queries, sources = lake(tmp_path, CARD_QUERY)
    problem = only(validate(queries, sources), "unknown_column")
    path = queries / "card_fraud.toml"
    assert (problem.file, problem.line, problem.column) == (str(path), 8, 41)
    assert (problem.line, problem.column) == position(CARD_QUERY, "BIG.amout")
    assert problem.message == "unknown column 'amout'; did you mean 'amount'?"
    assert str(problem) == (f"{path}:8:41: unknown_column: unknown column 'amout'; "
                            "did you mean 'amount'?")
    assert "amount (double)" in problem.hint


def test_a_source_field_mapped_onto_the_contract_names_the_contract_column(
        tmp_path: Path) -> None:
    text = CARD_QUERY.replace("BIG.amout", "BIG.amount").replace("PARTITION BY object_id",
                                                                 "PARTITION BY card")
    queries, sources = lake(tmp_path, text)
    problem = only(validate(queries, sources), "unknown_column")
    assert (problem.line, problem.column) == position(text, "card\n") == (6, 16)
    assert "maps the field card onto the contract column object_id" in problem.hint


def test_rfid_attributes_must_be_declared(tmp_path: Path) -> None:
    text = CARD_QUERY.replace("BIG.amout", "BIG.rssi").replace("amount", "rssi")
    queries, _ = lake(tmp_path, text, sources=False)
    report = validate(queries, None)
    assert [(p.code, p.line, p.column) for p in report.problems] == [
        ("unknown_column", *position(text, "BIG.rssi")),
        ("unknown_column", *position(text, "rssi < 2")),
        ("unknown_column", *position(text, "rssi > 500"))]
    assert 'declare it in the query\'s [attributes] (rssi = "double")' in \
        report.problems[0].hint
    (queries / "card_fraud.toml").write_text(text + '[attributes]\nrssi = "double"\n')
    assert validate(queries, None).problems == []


def test_type_mismatches_double_vs_string_and_arithmetic_on_a_string(tmp_path: Path) -> None:
    text = (CARD_QUERY.replace("BIG.amout", "BIG.amount")
            .replace("amount < 2", "amount < '2'")
            .replace("amount > 500", "amount > 500 AND merchant * 2 > 1"))
    queries, sources = lake(tmp_path, text)
    report = validate(queries, sources)
    assert [(p.code, p.line, p.column, p.message) for p in report.problems] == [
        ("type_mismatch", *position(text, "< '2'"),
         "amount (DOUBLE) compared with '2' (STRING)"),
        ("type_mismatch", *position(text, "* 2"), "* on merchant (STRING)")]
    assert report.problems[0].line == 10 and report.problems[0].column == 26
    assert "without quotes" in report.problems[0].hint


def test_more_type_mismatches_the_types_tell() -> None:
    def problems(define: str, attributes: tuple[tuple[str, str], ...] = ()) -> list[str]:
        query = PatternQuery("q", "1", "", (
            "SELECT * FROM events MATCH_RECOGNIZE (PARTITION BY object_id ORDER BY "
            f"event_time MEASURES A.event_id AS a PATTERN (A) DEFINE A AS {define})"),
            attributes)
        return [f"{p.code}:{p.message}" for p in check_queries([query], [])[1]]

    typed = (("price", "double"), ("flag", "boolean"), ("n", "bigint"))
    assert problems("event_time > '2024-01-01'") == [
        "type_mismatch:event_time (TIMESTAMP) compared with '2024-01-01' (STRING)"]
    assert problems("event_time > TIMESTAMP '2024-01-01 00:00:00'") == []
    assert problems("SUM(A.event_type) > 1") == [
        "type_mismatch:SUM(...) of A.event_type (STRING): SUM takes numbers"]
    assert problems("price BETWEEN 'a' AND 2", typed) == [
        "type_mismatch:price (DOUBLE) compared with 'a' (STRING)"]
    assert problems("n IN (1, 'x')", typed) == [
        "type_mismatch:n (BIGINT) compared with 'x' (STRING)"]
    assert problems("-event_type = 'x'") == ["type_mismatch:unary - on event_type (STRING)"]
    assert problems("flag", typed) == []
    assert problems("price", typed) == [
        "type_mismatch:the DEFINE condition of A must be boolean, but column price (type "
        "double) is not (SQL does not treat other values as true or false; compare them, "
        "e.g. x <> 0)"]
    # what the types allow: numbers with numbers, casts, concatenation, time arithmetic
    assert problems("price * n > 2.5 AND CAST(event_type AS DOUBLE) > price AND "
                    "event_id || n = 'x' AND event_time - PREV(event_time) < "
                    "INTERVAL '5' MINUTE AND ABS(n) + LENGTH(source_id) > 0 AND "
                    "COALESCE(price, 0) < 5", typed) == []


def test_partition_by_must_be_the_key(tmp_path: Path) -> None:
    text = CARD_QUERY.replace("BIG.amout", "BIG.amount").replace(
        "PARTITION BY object_id", "PARTITION BY object_id, merchant")
    queries, sources = lake(tmp_path, text)
    problem = only(validate(queries, sources), "partition_key")
    assert (problem.line, problem.column) == position(text, "merchant\n") == (6, 27)
    assert problem.message == "PARTITION BY merchant: not the key; gold partitions by object_id"
    none = text.replace("  PARTITION BY object_id, merchant\n", "")
    (queries / "card_fraud.toml").write_text(none)
    problem = only(validate(queries, sources), "partition_key")
    assert problem.message.startswith("no PARTITION BY") and problem.line == 5


def test_engine_errors_keep_their_position_in_the_file(tmp_path: Path) -> None:
    text = CARD_QUERY.replace("BIG.amout", "BIG.amount").replace("BIG AS amount",
                                                                  "BGI AS amount")
    queries, sources = lake(tmp_path, text)
    problem = only(validate(queries, sources), "query_error")
    assert (problem.line, problem.column) == position(text, "BGI AS") == (10, 31)
    assert "DEFINE names BGI" in problem.message


def test_a_query_given_as_an_object_is_named_by_id_with_positions_in_its_text() -> None:
    query = PatternQuery("typo", "1", "", "SELECT * FROM events MATCH_RECOGNIZE (\n"
                         "PARTITION BY object_id ORDER BY event_time\nMEASURES A.event_id AS a "
                         "PATTERN (A) DEFINE A AS sourec_id = 'A')")
    problems = check_queries([query], [])[1]
    assert [str(p) for p in problems] == [
        "query typo:3:50: unknown_column: unknown column 'sourec_id'; did you mean "
        "'source_id'?"]
    error = ValidationError(problems)
    assert "\n" not in str(error) and str(error) == str(problems[0])
    assert error.code == 2 and "lakecep validate" in (error.hint or "")


def test_bad_query_files_and_duplicate_ids(tmp_path: Path) -> None:
    queries = tmp_path / "queries"
    queries.mkdir()
    (queries / "a.toml").write_text('id = "a"\nquery = """\nSELECT\n')
    (queries / "b.toml").write_text('id = "b"\nkind = "weird"\nquery = "x"\n')
    report = validate(queries, None)
    assert [(Path(p.file).name, p.line, p.code) for p in report.problems] == [
        ("a.toml", 4, "toml_error"), ("b.toml", 0, "definition_error")]
    assert "kind must be" in report.problems[1].message


def test_gold_refuses_a_bad_query_before_it_uses_spark(tmp_path: Path) -> None:
    """gold.run validates first: with no Spark session at all (None) it still refuses."""
    import dataclasses

    from lakecep.config import load
    from lakecep.jobs import gold

    queries, sources = lake(tmp_path, CARD_QUERY)
    local = dataclasses.replace(load(overrides={"home": str(tmp_path / "home")}).settings,
                                queries_dir=str(queries), sources_dir=str(sources))
    with pytest.raises(ValidationError) as refused:
        gold.run(None, local)
    assert str(refused.value) == (f"{queries / 'card_fraud.toml'}:8:41: unknown_column: "
                                  "unknown column 'amout'; did you mean 'amount'?")
    bad = PatternQuery("q", "1", "", CARD_QUERY.split('"""')[1].replace(
        "PARTITION BY object_id", "PARTITION BY merchant").replace("BIG.amout", "BIG.amount"))
    with pytest.raises(ValidationError, match=r"^query q:3:16: partition_key: PARTITION BY "
                       "merchant: not the key"):
        gold.run(None, local, queries=[bad])
    assert not (tmp_path / "home").exists()


# ----------------------------------------------------------------------------- sources


def test_source_files_bad_toml_unknown_keys_and_mapping_expressions(tmp_path: Path) -> None:
    queries, sources = lake(tmp_path, CARD_QUERY.replace("BIG.amout", "BIG.amount"))
    assert sources is not None
    csv_file = sources / "cards_csv.toml"
    text = csv_file.read_text()
    csv_file.write_text(text.replace("format = \"csv\"", "format = \"csv\"\nstrickt = true")
                        .replace("[time]", "[time]\nzone = \"UTC\""))
    jsonl = sources / "cards_jsonl.toml"
    jtext = jsonl.read_text().replace('object_id = "card"', 'object_id = "\'c-\' || crad"')
    jsonl.write_text(jtext)
    parquet = sources / "cards_parquet.toml"
    parquet.write_text(parquet.read_text().replace("[fields]", "[fields\n"))
    report = validate(queries, sources)
    shown = [(Path(p.file).name, p.line, p.column, p.message) for p in report.problems]
    new_csv = csv_file.read_text()
    assert shown == [
        ("cards_csv.toml", *position(new_csv, "strickt"),
         "unknown key 'strickt'; did you mean 'strict'?"),
        ("cards_csv.toml", *position(new_csv, "zone ="),
         "unknown key 'time.zone'; did you mean 'timezone'?"),
        ("cards_jsonl.toml", *position(jtext, "crad"),
         "mapping.object_id: unknown field 'crad'; did you mean 'card'?"),
        ("cards_parquet.toml", position(parquet.read_text(), "[fields\n")[0], 8,
         "not valid TOML: Expected ']' at the end of a table declaration")]
    assert report.queries == []  # checked once the sources load (their attributes)
    assert report.problems[1].hint.startswith("known there: format, timezone")


def test_a_kafka_source_file_validates_and_bad_kafka_keys_are_placed(tmp_path: Path) -> None:
    queries, sources = lake(tmp_path, CARD_QUERY.replace("BIG.amout", "BIG.amount"))
    assert sources is not None
    shutil.copy(CARDS / "kafka" / "cards_kafka.toml", sources)
    report = validate(queries, sources)
    assert report.problems == [] and len(report.source_files) == 4
    path = sources / "cards_kafka.toml"
    text = path.read_text().replace('topic = "cards"', 'topik = "cards"')
    path.write_text(text)
    problem = only(validate(queries, sources), "source_error")
    assert (problem.line, problem.column, problem.message) == (
        *position(text, "topik"), "unknown key 'kafka.topik'; did you mean 'topic'?")
    text = text.replace('topik = "cards"', 'topic = "cards"').replace(
        '"request.timeout.ms"', '"value.deserializer" = "x"\n"request.timeout.ms"')
    path.write_text(text)
    problem = only(validate(queries, sources), "source_error")
    assert (problem.line, problem.column) == position(text, '"value.deserializer"')
    assert "value.deserializer themselves" in problem.message


def test_mapping_expression_types_are_checked(tmp_path: Path) -> None:
    queries, sources = lake(tmp_path, CARD_QUERY.replace("BIG.amout", "BIG.amount"))
    assert sources is not None
    path = sources / "cards_jsonl.toml"
    text = path.read_text().replace("amount > 500", "amount > '500'")
    path.write_text(text)
    problem = only(validate(queries, sources), "type_mismatch")
    assert (Path(problem.file).name, problem.line, problem.column) == (
        "cards_jsonl.toml", *position(text, "> '500'"))


# ----------------------------------------------------------------------------- positions


def test_positions_in_escaped_and_continued_strings() -> None:
    text = ('a = "x\\ty\\u00e9z"\n[t]\nq = """\nab\\\n   cd"""\n[[ops]]\nw = \'lit\'\n'
            "[[ops]]\nw = '''\nx\ny'''\n")
    loc = locate(text, tomllib.loads(text))
    assert loc.in_value(("a",), 1, 2) == (1, 7)  # the \t escape
    assert loc.in_value(("a",), 1, 3) == (1, 9)  # y
    assert loc.in_value(("a",), 1, 4) == (1, 10)  # the \u00e9 escape
    assert loc.in_value(("a",), 1, 5) == (1, 16)  # z
    assert loc.in_value(("t", "q"), 1, 3) == (5, 4)  # after the line-ending backslash
    assert loc.in_value(("ops", 2, "w"), 2, 1) == (11, 1)
    assert loc.key(("ops", 2)) == (8, 1) and loc.key(("ops", 1, "w")) == (7, 1)


_CHARS = st.text(st.sampled_from(list("ab \t\n'\"\\é{}[]#=.")), max_size=40)


def _encode(value: str, style: str) -> str | None:
    if style == "basic":
        out = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace(
            "\t", "\\t")
        return f'"{out}"'
    if style == "multi":
        out = value.replace("\\", "\\\\").replace('"', '\\"')
        return f'"""\n{out}"""'
    if style == "literal":
        return None if "'" in value or "\n" in value else f"'{value}'"
    return None if "'''" in value or value.endswith("'") else f"'''\n{value}'''"


@settings(max_examples=300, deadline=None)
@given(value=_CHARS, style=st.sampled_from(["basic", "multi", "literal", "multi_literal"]),
       lead=st.sampled_from(["", "[t]\n", "x = [1, 'a]', \"\"\"b\"\"\"] # [c]\n[[t]]\n"]))
def test_every_character_of_a_string_maps_to_its_place_in_the_file(
        value: str, style: str, lead: str) -> None:
    encoded = _encode(value, style)
    if encoded is None:
        return
    text = f"{lead}q = {encoded}\n"
    parsed = tomllib.loads(text)
    loc = locate(text, parsed)
    table = () if not lead else ("t",) if lead == "[t]\n" else ("t", 1)
    found = loc.strings[(*table, "q")]
    assert found.value == value
    for i, ch in enumerate(value):
        at = text[found.offsets[i]]
        assert at == ch or at == "\\", (i, ch, at)
    # line/column in the value -> the file: the same character (or its escape)
    lines = value.split("\n")
    for n, line in enumerate(lines, 1):
        for c in range(1, len(line) + 1):
            fl, fc = loc.in_value((*table, "q"), n, c)
            row = text.split("\n")[fl - 1]
            assert row[fc - 1] in (line[c - 1], "\\")


# ----------------------------------------------------------------------------- CLI


def test_cli_validate_exit_codes_and_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    queries, sources = lake(tmp_path, CARD_QUERY)
    monkeypatch.setenv("LAKECEP_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("LAKECEP_QUERIES_DIR", str(queries))
    monkeypatch.setenv("LAKECEP_SOURCES_DIR", str(sources))
    assert main(["validate", "--json"]) == 1
    document = json.loads(capsys.readouterr().out)
    assert document["ok"] is False and document["sources"] == ["cards_csv", "cards_jsonl",
                                                               "cards_parquet"]
    assert [(p["code"], p["line"], p["column"]) for p in document["problems"]] == [
        ("unknown_column", 8, 41)]
    assert main(["validate"]) == 1
    out = capsys.readouterr().out
    assert out.startswith(f"{queries / 'card_fraud.toml'}:8:41: unknown_column: unknown "
                          "column 'amout'; did you mean 'amount'?\n  hint: the columns: ")
    assert "1 problem(s) in 1 query files and 3 source files" in out
    (queries / "card_fraud.toml").write_text(CARD_QUERY.replace("BIG.amout", "BIG.amount"))
    assert main(["validate"]) == 0
    assert capsys.readouterr().out.startswith("ok: 1 query files and 3 source files valid")
    assert main(["--set", "no_such_key=1", "validate"]) == 2


def test_cli_validate_through_the_entry_point_without_a_jvm(tmp_path: Path) -> None:
    """The real `lakecep` console script on a lake whose lakecep.toml names the query and
    source folders; the query has a typo. Pure Python: pyspark is never imported."""
    queries, sources = lake(tmp_path, CARD_QUERY)
    home = tmp_path / "home"
    home.mkdir()
    (home / "lakecep.toml").write_text(f'queries_dir = "{queries}"\n'
                                       f'sources_dir = "{sources}"\n')
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAKECEP_")}
    script = Path(sys.executable).parent / "lakecep"
    done = subprocess.run([str(script), "--home", str(home), "validate"], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stderr
    assert f"{queries / 'card_fraud.toml'}:8:41: unknown_column: unknown column 'amout'; " \
           "did you mean 'amount'?" in done.stdout
    probe = subprocess.run(
        [sys.executable, "-c", "import sys; from lakecep.jobs.cli import main; "
         f"code = main(['--home', {str(home)!r}, 'validate', '--json']); "
         "print('pyspark' in sys.modules, code, file=sys.stderr)"],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert probe.stderr.strip().splitlines()[-1] == "False 1", probe.stderr


def test_lakecep_run_all_stops_on_a_bad_query_before_spark_starts(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    queries, sources = lake(tmp_path, CARD_QUERY)
    monkeypatch.setenv("LAKECEP_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("LAKECEP_QUERIES_DIR", str(queries))
    monkeypatch.setenv("LAKECEP_SOURCES_DIR", str(sources))
    assert main(["run", "all"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"lakecep run: error: {queries / 'card_fraud.toml'}:8:41: "
                          "unknown_column: unknown column 'amout'; did you mean 'amount'?")
    assert "lakecep validate" in err and "Traceback" not in err
    assert not (tmp_path / "home").exists()  # no Spark, no table, no checkpoint
