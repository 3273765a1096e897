"""Sources declared in configuration (lakecep.sources): config checks, record cutting per
format, the mapping onto the event contract and typed attributes. No Spark."""

from __future__ import annotations

import csv
import io
import json
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakecep.cards import fraud_pairs, transactions
from lakecep.queries import QUERIES_DIR, PatternQuery, load_queries
from lakecep.sources import (
    SourceError,
    attribute_types,
    count_records,
    file_records,
    infer_type,
    load_source,
    load_sources,
    map_frame,
    map_record,
    message_record,
    raw_hash,
    source_of_file,
    time_parser,
    with_source_attributes,
)

CARDS = QUERIES_DIR / "examples" / "cards"

BASE = """
format = "{fmt}"
{extra}
[fields]
txn_id = "string"
card = "string"
amount = "double"
n = "bigint"
ts = "string"
[mapping]
{mapping}
[time]
format = "{time_format}"
timezone = "{zone}"
"""
MAPPING = """event_id = "txn_id"
object_id = "'card-' || card"
event_type = "CASE WHEN amount > 500 THEN 'big' ELSE 'small' END"
source_id = "'pos'"
event_time = "ts"
"""


def source(tmp_path: Path, fmt: str = "jsonl", extra: str = "", mapping: str = MAPPING,
           time_format: str = "iso", zone: str = "UTC", name: str = "s"):  # noqa: ANN201, PLR0913
    path = tmp_path / f"{name}.toml"
    path.write_text(BASE.format(fmt=fmt, extra=extra, mapping=mapping,
                                time_format=time_format, zone=zone))
    return load_source(path)


def line(**fields) -> str:  # noqa: ANN003
    return json.dumps(fields)


# ------------------------------------------------------------------------- configuration


def test_the_shipped_card_sources_load_and_declare_typed_attributes() -> None:
    sources = load_sources(CARDS / "sources")
    assert [s.name for s in sources] == ["cards_csv", "cards_jsonl", "cards_parquet"]
    assert {s.format for s in sources} == {"csv", "jsonl", "parquet"}
    assert attribute_types(sources) == {"amount": "double", "merchant": "string"}


def test_no_source_folder_means_no_sources(tmp_path: Path) -> None:
    assert load_sources(tmp_path / "missing") == []


@pytest.mark.parametrize(("text", "message"), [
    ('format = "kafka"', 'format = "kafka" needs a [kafka] table'),
    ('format = "kafka"\n[kafka]\ntopic = "t"', "'kafka.bootstrap_servers' must be a non-empty"),
    ('format = "kafka"\n[kafka]\nbootstrap_servers = "h:1"\ntopic = "a b"',
     "kafka.topic 'a b': a topic name"),
    ('format = "kafka"\n[kafka]\nbootstrap_servers = "h:1"\ntopic = "t"\n'
     'starting_offsets = "first"', "kafka.starting_offsets 'first'"),
    ('format = "kafka"\n[kafka]\nbootstrap_servers = "h:1"\ntopic = "t"\n'
     "max_offsets_per_trigger = 0", "max_offsets_per_trigger must be a positive integer"),
    ('format = "kafka"\n[kafka]\nbootstrap_servers = "h:1"\ntopic = "t"\nbroker = "h:2"',
     "unknown key 'kafka.broker'"),
    ('format = "kafka"\n[kafka]\nbootstrap_servers = "h:1"\ntopic = "t"\n[kafka.options]\n'
     '"auto.offset.reset" = "earliest"', "kafka.options.auto.offset.reset: lakecep and Spark"),
    ('format = "kafka"\npath = "x"\n[kafka]\nbootstrap_servers = "h:1"\ntopic = "t"',
     "a kafka source has no landing folder"),
    ('format = "jsonl"\n[kafka]\ntopic = "t"', '[kafka] is only for format = "kafka"'),
    ('format = "jsonl"\nbogus = 1', "unknown key 'bogus'"),
    ('format = "jsonl"\n[mapping]\nobject_id = "a"', "lacks event_type, source_id, event_time"),
    ('format = "jsonl"\n[fields]\na = "float"', "fields.a has type 'float'"),
    ('format = "jsonl"\n[mapping]\nprice = "a"', "mapping.price: not a contract field"),
])
def test_a_bad_source_file_is_named_with_its_key(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(SourceError, match="bad.toml") as err:
        load_source(path)
    assert message in str(err.value)


def test_a_mapping_naming_an_unknown_field_fails_at_load(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match=r"mapping.object_id = 'crad'.*unknown column 'crad'"):
        source(tmp_path, mapping=MAPPING.replace("'card-' || card", "crad"))


def test_aggregates_and_navigation_are_not_mapping_expressions(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match=r"SUM\(\.\.\.\) is not allowed in a mapping"):
        source(tmp_path, mapping=MAPPING.replace("'pos'", "SUM(amount)"))


def test_an_unknown_time_zone_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match="Mars/Base"):
        source(tmp_path, zone="Mars/Base")


KAFKA = """[kafka]
bootstrap_servers = "10.0.0.1:9092,10.0.0.2:9092"
topic = "cards, refunds"
starting_offsets = '{"cards": {"0": 5}}'
max_offsets_per_trigger = 500
[kafka.options]
"security.protocol" = "SASL_SSL"
"kafka.request.timeout.ms" = 30000
"check.crcs" = true
"""


def test_a_kafka_source_becomes_the_options_of_sparks_kafka_source(tmp_path: Path) -> None:
    s = source(tmp_path, fmt="kafka", extra=KAFKA, name="pos")
    assert s.kafka_reader_options() == {
        "kafka.bootstrap.servers": "10.0.0.1:9092,10.0.0.2:9092",
        "subscribe": "cards,refunds", "startingOffsets": '{"cards": {"0": 5}}',
        "failOnDataLoss": "true", "maxOffsetsPerTrigger": "500",
        "kafka.security.protocol": "SASL_SSL", "kafka.request.timeout.ms": "30000",
        "kafka.check.crcs": "true"}
    plain = source(tmp_path, fmt="kafka", name="plain",
                   extra='[kafka]\nbootstrap_servers = "h:1"\ntopic = "t"')
    assert plain.kafka_reader_options()["startingOffsets"] == "earliest"
    assert "maxOffsetsPerTrigger" not in plain.kafka_reader_options()


def test_the_shipped_kafka_example_loads() -> None:
    (s,) = load_sources(CARDS / "kafka")
    assert (s.name, s.format, s.kafka_topic) == ("cards_kafka", "kafka", "cards")
    assert attribute_types([s]) == {"amount": "double", "merchant": "string"}


def test_a_kafka_message_is_judged_like_a_json_line_and_its_origin_names_the_source(
        tmp_path: Path) -> None:
    s = source(tmp_path, fmt="kafka", name="pos",
               extra='[kafka]\nbootstrap_servers = "h:1"\ntopic = "t"')
    other = source(tmp_path, fmt="kafka", name="pos2",
                   extra='[kafka]\nbootstrap_servers = "h:1"\ntopic = "t"')
    value = line(txn_id="T1", card="c", amount=612.5, ts="2026-01-12T10:00:00Z").encode()
    assert message_record(value, 1000) == (value.decode(), len(value), "ok", None)
    assert message_record(None, 1000)[2] == "empty_line"  # a tombstone
    assert message_record(b"{not json", 1000)[2] == "malformed_json"
    assert message_record(b"\xff{}", 1000)[2] == "invalid_utf8"
    assert message_record(value, 10)[2] == "oversized"
    assert source_of_file([s, other], tmp_path, "kafka://pos/t/2") == s
    assert source_of_file([s, other], tmp_path, "kafka://pos2/t/0") == other
    assert source_of_file([s], tmp_path, "kafka://gone/t/0") is None
    assert map_record(s, value.decode())[0] == "T1"


def test_bronze_rows_of_kafka_messages_keep_topic_partition_and_offset(tmp_path: Path) -> None:
    from lakecep.jobs.bronze import LINES_DDL, split_kafka_messages

    s = source(tmp_path, fmt="kafka", name="pos",
               extra='[kafka]\nbootstrap_servers = "h:1"\ntopic = "t"')
    messages = pd.DataFrame({"value": [b'{"a": 1}', None, b"{x"], "topic": ["t", "t", "u"],
                             "partition": [0, 2, 0], "offset": [7, 0, 12]})
    split = split_kafka_messages(s, 1000)
    (out,) = list(split(iter([messages.iloc[:0], messages])))  # an empty batch gives nothing
    assert list(out.columns) == [c.split()[0] for c in LINES_DDL.split(", ")]
    assert out["source_file"].tolist() == ["kafka://pos/t/0", "kafka://pos/t/2", "kafka://pos/u/0"]
    assert out["line_no"].tolist() == [7, 0, 12]
    assert out["parse_status"].tolist() == ["ok", "empty_line", "malformed_json"]
    assert out["raw"].tolist()[0] == '{"a": 1}' and out["byte_length"].tolist() == [8, 0, 2]


def test_the_source_of_a_landed_file_is_found_by_its_folder(tmp_path: Path) -> None:
    s = source(tmp_path)
    landing = s.landing(tmp_path)
    assert source_of_file([s], tmp_path, f"file://{landing}/part-0.jsonl") == s
    assert source_of_file([s], tmp_path, str(landing / "x.jsonl")) == s
    assert source_of_file([s], tmp_path, f"file://{tmp_path}/landing/events/a.jsonl") is None


def test_a_source_may_land_on_an_object_store(tmp_path: Path) -> None:
    """An ``s3a://`` path is kept as a URI (docs/object-stores.md); files under it (as
    Spark names them) belong to the source, files under a longer name do not."""
    import dataclasses

    from lakecep.config import Uri

    s = dataclasses.replace(source(tmp_path), path="s3a://bucket/in/cards/")
    local = source(tmp_path, name="t")
    assert s.landing(tmp_path) == "s3a://bucket/in/cards"
    assert isinstance(s.landing(tmp_path), Uri)
    assert source_of_file([local, s], tmp_path, "s3a://bucket/in/cards/part-0.jsonl") == s
    assert source_of_file([local, s], tmp_path, "s3a://bucket/in/cards2/x.jsonl") is None
    assert source_of_file([s], tmp_path, f"file://{local.landing(tmp_path)}/x.jsonl") is None


# ------------------------------------------------------------------------- records


def test_csv_records_honour_header_delimiter_and_quoting(tmp_path: Path) -> None:
    s = source(tmp_path, "csv", extra='[csv]\ndelimiter = ";"\nquote = "\'"')
    data = ("\ufefftxn_id;card;amount;n;ts\n"
            "t1;'a;b';1.5;2;2026-01-01T00:00:00\n"
            "t2;'line\nbreak';3;4;2026-01-01T00:00:01\n"
            "\n"
            "t3;only;three\n").encode()
    records = list(file_records(s, data, 1000))
    assert [r[2] for r in records] == ["ok", "ok", "empty_line", "malformed_csv"]
    assert json.loads(records[0][0])["card"] == "a;b"
    assert json.loads(records[1][0])["card"] == "line\nbreak"
    assert records[3][3] == "3 fields, the header has 5"
    assert count_records(s, data) == 4


def test_a_csv_without_header_uses_the_declared_columns(tmp_path: Path) -> None:
    s = source(tmp_path, "csv", extra='[csv]\nheader = false\ncolumns = ["txn_id", "card"]')
    (raw, _, status, _), = file_records(s, b"t1,c1\n", 1000)
    assert status == "ok" and json.loads(raw) == {"txn_id": "t1", "card": "c1"}


def test_parquet_rows_keep_their_types_and_a_broken_file_is_one_record(tmp_path: Path) -> None:
    s = source(tmp_path, "parquet")
    buffer = io.BytesIO()
    pd.DataFrame({"txn_id": ["t1", "t2"], "amount": [1.5, 600.0], "n": [1, 2]}).to_parquet(
        buffer, index=False)
    records = list(file_records(s, buffer.getvalue(), 1000))
    assert [json.loads(r[0]) for r in records] == [
        {"txn_id": "t1", "amount": 1.5, "n": 1}, {"txn_id": "t2", "amount": 600.0, "n": 2}]
    (_, _, status, error), = file_records(s, b"not parquet", 1000)
    assert status == "unreadable_file" and "parquet" in error


def test_jsonl_lines_are_judged_like_the_rfid_landing(tmp_path: Path) -> None:
    s = source(tmp_path)
    statuses = [r[2] for r in file_records(s, b'{"a": 1}\n{bad\n\n\xff\n', 1000)]
    assert statuses == ["ok", "malformed_json", "empty_line", "invalid_utf8"]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.text(alphabet=st.characters(blacklist_categories=("Cs",)),
                                 max_size=8), min_size=3, max_size=3), max_size=8),
       st.sampled_from([",", ";", "\t", "|"]))
def test_csv_written_by_any_writer_reads_back_field_for_field(rows, delimiter) -> None:  # noqa: ANN001
    s = load_source_text(f'format = "csv"\n[csv]\ndelimiter = "{delimiter}"\n'
                         '[fields]\na = "string"\n[mapping]\nobject_id = "a"\n'
                         'event_type = "a"\nsource_id = "a"\nevent_time = "a"\n')
    buffer = io.StringIO(newline="")
    writer = csv.writer(buffer, delimiter=delimiter, quoting=csv.QUOTE_NONNUMERIC)
    writer.writerow(["a", "b", "c"])
    writer.writerows(rows)
    records = list(file_records(s, buffer.getvalue().encode(), 10**6))
    assert [json.loads(r[0]) for r in records] == [dict(zip("abc", r, strict=True))
                                                  for r in rows]


def load_source_text(text: str):  # noqa: ANN201
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "h.toml"
        path.write_text(text)
        return load_source(path)


# ------------------------------------------------------------------------- mapping


def test_a_record_maps_onto_the_contract_with_typed_attributes(tmp_path: Path) -> None:
    s = source(tmp_path, "csv", time_format="%Y-%m-%d %H:%M", zone="Europe/Paris")
    raw = json.dumps({"txn_id": "t1", "card": "42", "amount": "612.50", "n": "7",
                      "ts": "2026-07-01 12:00", "note": "hi"})
    event = map_record(s, raw)
    assert event[:5] == ("t1", "card-42", "big", "pos",
                         datetime(2026, 7, 1, 10, 0, tzinfo=UTC))
    # Fields mapped as a whole (txn_id, ts) are not kept; the others are, typed.
    assert event[8] == {"card": "42", "amount": "612.5", "n": "7", "note": "hi"}
    assert s.attribute_types() == {"card": "string", "amount": "double", "n": "bigint"}


def test_a_rejected_record_names_every_failing_field(tmp_path: Path) -> None:
    s = source(tmp_path)
    reason = map_record(s, line(txn_id="t1", card=None, amount="lots", n=1.5, ts="soon"))
    assert isinstance(reason, str)
    parts = reason.split("; ")
    assert parts[0].startswith("wrong_type: amount: 'lots' is not a number")
    assert any(p.startswith("wrong_type: n: '1.5' is not an integer") for p in parts)
    assert "missing_field: object_id: 'card-' || card is null" in parts
    assert any(p.startswith("invalid_value: event_time: 'soon'") for p in parts)


def test_strict_sources_reject_unknown_fields_and_others_keep_them(tmp_path: Path) -> None:
    raw = line(txn_id="t1", card="c", amount=1, n=1, ts="2026-01-01T00:00:00", x=1, y="b")
    loose = map_record(source(tmp_path), raw)
    assert loose[8]["x"] == "1" and loose[8]["y"] == "b"
    strict = map_record(source(tmp_path, extra="strict = true", name="t"), raw)
    assert strict == "unknown_field: x; unknown_field: y"


def test_without_an_event_id_mapping_the_id_is_the_hash_of_the_raw_record(tmp_path: Path) -> None:
    s = source(tmp_path, mapping=MAPPING.replace('event_id = "txn_id"\n', ""))
    raw = line(card="c", amount=1, ts="2026-01-01T00:00:00")
    first, again = map_record(s, raw), map_record(s, raw)
    assert first[0] == again[0] == raw_hash("s", raw)
    assert map_record(s, raw.replace("c", "d"))[0] != first[0]


@settings(max_examples=200, deadline=None)
@given(st.one_of(st.floats(allow_nan=False, allow_infinity=False), st.integers(-10**6, 10**6)))
def test_case_mapping_and_typed_amount_agree_with_python(tmp_path_factory, amount) -> None:  # noqa: ANN001
    s = _plain_source(tmp_path_factory)
    event = map_record(s, line(txn_id="t", card="c", amount=amount, n=1,
                               ts="2026-01-01T00:00:00"))
    assert event[2] == ("big" if amount > 500 else "small")
    assert float(event[8]["amount"]) == float(amount)  # the stored text is lossless


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(-10**12, 10**12), min_size=1, max_size=5),
       st.lists(st.floats(allow_nan=False, allow_infinity=False), min_size=1, max_size=5))
def test_type_inference_finds_the_narrowest_type(ints, floats) -> None:  # noqa: ANN001
    assert infer_type(ints) == "bigint"
    assert infer_type([str(i) for i in ints]) == "bigint"  # as CSV gives them
    mixed = [*floats, 0.5]
    assert infer_type(mixed) == "double"
    assert infer_type([*mixed, "x"]) == "string"
    assert infer_type([True, "false", None]) == "boolean"
    assert infer_type(["2026-01-01T00:00:00Z", ""]) == "timestamp"


@pytest.mark.parametrize(("fmt", "value", "expected"), [
    ("epoch_seconds", 1767225600, datetime(2026, 1, 1, tzinfo=UTC)),
    ("epoch_millis", "1767225600500", datetime(2026, 1, 1, 0, 0, 0, 500000, tzinfo=UTC)),
    ("iso", "2026-01-01T01:00:00+01:00", datetime(2026, 1, 1, tzinfo=UTC)),
    ("iso", "2026-01-01T00:00:00", datetime(2026, 1, 1, 5, tzinfo=UTC)),  # zone: New York
    ("%d/%m/%Y %H:%M", "01/07/2026 08:00", datetime(2026, 7, 1, 12, tzinfo=UTC)),
    ("%d/%m/%Y", "not a date", None),
])
def test_time_formats_and_zones(fmt: str, value: object, expected: datetime | None) -> None:
    assert time_parser(fmt, "America/New_York")(value) == expected


def test_queries_see_source_attributes_with_their_types() -> None:
    sources = load_sources(CARDS / "sources")
    (query,) = with_source_attributes(load_queries(CARDS), sources)
    assert isinstance(query, PatternQuery)
    assert dict(query.attributes) == {"amount": "double", "merchant": "string"}


# ------------------------------------------------------------------------- the example


@settings(max_examples=5, deadline=None)
@given(st.integers(0, 10**6))
def test_the_planted_frauds_are_exactly_the_frauds_by_definition(seed: int) -> None:
    frame, planted = transactions(n=1000, seed=seed)
    assert len(frame) == 1000 and frame["txn_id"].is_unique
    assert len(planted) == 12
    assert fraud_pairs(frame) == planted
    assert frame["amount"].notna().all()


# ------------------------------------------------------------------------- operators

OPERATORS = """
[[operators]]
op = "fill"
field = "n"
value = "CAST(amount * 2 AS BIGINT)"
[[operators]]
op = "filter"
where = "amount >= 0 AND amount < 10000"
[[operators]]
op = "drop_fields"
fields = ["n"]
"""


def test_operators_fill_filter_and_drop_in_order(tmp_path: Path) -> None:
    s = source(tmp_path, extra=OPERATORS.replace("[[", "\n[[", 1))
    ok = map_record(s, line(txn_id="t", card="c", amount=3, ts="2026-01-01T00:00:00"))
    assert ok[8] == {"card": "c", "amount": "3.0"}  # n was filled, then dropped
    filtered = map_record(s, line(txn_id="t", card="c", amount=-1, ts="2026-01-01T00:00:00"))
    assert filtered == "filtered: amount >= 0 AND amount < 10000"
    null_amount = map_record(s, line(txn_id="t", card="c", ts="2026-01-01T00:00:00"))
    assert null_amount.startswith("filtered:")  # NULL >= 0 is not TRUE: filtered


def test_a_fill_derives_a_value_that_mapping_then_sees(tmp_path: Path) -> None:
    extra = '[[operators]]\nop = "fill"\nfield = "card"\nvalue = "\'unknown-\' || txn_id"\n'
    s = source(tmp_path, extra=extra)
    event = map_record(s, line(txn_id="t9", amount=1, ts="2026-01-01T00:00:00"))
    assert event[1] == "card-unknown-t9"


def test_keep_fields_drops_every_other_field_from_the_attributes(tmp_path: Path) -> None:
    s = source(tmp_path, extra='[[operators]]\nop = "keep_fields"\nfields = ["txn_id", '
                               '"card", "ts", "amount"]\n')
    event = map_record(s, line(txn_id="t", card="c", amount=1, n=2, ts="2026-01-01T00:00:00",
                               other="x"))
    assert event[8] == {"card": "c", "amount": "1.0"}


@pytest.mark.parametrize(("text", "message"), [
    ('[[operators]]\nop = "explode"', "op 'explode'"),
    ('[[operators]]\nop = "drop_fields"\nfields = ["nope"]', "naming declared [fields]"),
    ('[[operators]]\nop = "filter"\nwhere = "SUM(amount) > 1"', "not allowed"),
    ('[[operators]]\nop = "fill"\nfield = "n"', "fill needs field"),
])
def test_bad_operators_are_named(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(SourceError, match=r"operators\[1\]") as err:
        source(tmp_path, extra=text)
    assert message in str(err.value)


_RECORDS = st.lists(st.fixed_dictionaries({
    "txn_id": st.text("abc", min_size=1, max_size=3),
    "card": st.one_of(st.none(), st.sampled_from(["c1", "c2"])),
    "amount": st.one_of(st.none(), st.floats(-100, 20000, allow_nan=False),
                        st.sampled_from(["x", "12.5"])),
    "ts": st.sampled_from(["2026-01-01T00:00:00", "bad"]),
}), max_size=12)


@settings(max_examples=60, deadline=None)
@given(_RECORDS, st.lists(st.integers(0, 12), max_size=4))
def test_batch_and_streaming_give_identical_output(tmp_path_factory, records, cuts) -> None:  # noqa: ANN001
    """The operators and the mapping see one record at a time: the whole batch and any
    split of it into micro-batches give the same rows and reasons, in order."""
    s = _operator_source(tmp_path_factory)
    raws = [json.dumps(r) for r in records]
    batch = map_frame(s, raws)
    bounds = sorted({0, len(raws), *(c for c in cuts if c <= len(raws))})
    streamed = [out for a, b in zip(bounds, bounds[1:], strict=False)
                for out in map_frame(s, raws[a:b])]
    assert streamed == batch
    assert len(batch) == len(raws)  # every record has an outcome: none lost


_OPERATOR_SOURCE: list = []
_PLAIN_SOURCE: list = []


def _plain_source(factory):  # noqa: ANN001, ANN202
    if not _PLAIN_SOURCE:
        _PLAIN_SOURCE.append(source(factory.mktemp("plain")))
    return _PLAIN_SOURCE[0]


def _operator_source(factory):  # noqa: ANN001, ANN202
    if not _OPERATOR_SOURCE:
        _OPERATOR_SOURCE.append(source(factory.mktemp("ops"), extra=OPERATORS))
    return _OPERATOR_SOURCE[0]
