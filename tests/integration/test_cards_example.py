"""Bring your own events, end to end: 1,000 card transactions of the user's own shape land
split across JSON lines, CSV and Parquet (three declared sources, one lake), plus bad rows
and a cross-format duplicate; bronze -> silver -> gold with the shipped card_fraud query
over the user's columns. Gold must be exactly the planted frauds, ``amount`` a number all the
way, every bad row quarantined naming each failing field, and ``lakecep status``'s
reconciliation exact. One pipeline run pays for all formats."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from lakecep.cards import transactions, write_landing
from lakecep.jobs import bronze, gold, silver
from lakecep.jobs.catalog import register_tables
from lakecep.jobs.status import lake_status
from lakecep.jobs.tables import LakeTable
from lakecep.lake_sql import run_query
from lakecep.queries import QUERIES_DIR
from lakecep.validation import ValidationError

pytestmark = pytest.mark.spark

CARDS = QUERIES_DIR / "examples" / "cards"


def test_card_fraud_from_jsonl_csv_and_parquet(spark, settings, tmp_path: Path) -> None:  # noqa: ANN001
    local = dataclasses.replace(settings, home=tmp_path, queries_dir=str(CARDS),
                                sources_dir=str(CARDS / "sources"), max_files_per_trigger=10)
    frame, planted = transactions(n=1000, seed=14)
    landed = write_landing(frame, tmp_path)
    assert sum(landed.values()) == 1000 and len(planted) == 12
    # Bad rows, and one transaction landed again in another format (a duplicate).
    again = frame[frame.index % 3 == 1].iloc[0].to_dict()  # a CSV row, again as JSON
    (tmp_path / "landing" / "cards_jsonl" / "extra.jsonl").write_text(
        json.dumps(again) + "\n"
        + '{"txn_id": "B1", "card": null, "merchant": "x", "amount": "lots", "ts": "soon"}\n'
        + "{not json\n")
    (tmp_path / "landing" / "cards_csv" / "extra.csv").write_text(
        "txn_id,card,merchant,amount,ts\n"
        "B2,4000-9999,Shop,abc,2026-01-12 10:00:00\n"
        "B3,4000-9999,only four fields,1.00\n")

    for job in (bronze, silver):
        job.run(spark, local)
    # A query with a typo: gold refuses it in one line (file:line:column, did you mean)
    # before it touches a table or starts a stream (no Spark trace).
    typo = tmp_path / "typo"
    typo.mkdir()
    text = (CARDS / "card_fraud.toml").read_text().replace("BIG.amount AS", "BIG.amout AS")
    (typo / "card_fraud.toml").write_text(text)
    at = text.index("BIG.amout")
    line, column = text.count("\n", 0, at) + 1, at - text.rfind("\n", 0, at)
    with pytest.raises(ValidationError) as refused:
        gold.run(spark, dataclasses.replace(local, queries_dir=str(typo)))
    assert str(refused.value) == (f"{typo / 'card_fraud.toml'}:{line}:{column}: unknown_column: "
                                  "unknown column 'amout'; did you mean 'amount'?")
    assert not LakeTable(spark, local, "gold.complex_events").exists()
    gold.run(spark, local)

    events = LakeTable(spark, local, "silver.events").read()
    assert events.count() == 1000
    first = events.where("event_id = 'T000001'").first()
    row = frame.iloc[0]
    assert first.object_id == row.card and first.source_id.startswith("card-")
    assert first.attributes["merchant"] == row.merchant
    assert float(first.attributes["amount"]) == row.amount
    # ts is New York local time: UTC-5 in January.
    local_time = datetime.fromisoformat(row.ts).replace(tzinfo=ZoneInfo("America/New_York"))
    assert first.event_time.replace(tzinfo=UTC) == local_time.astimezone(UTC)
    assert {r.event_type for r in events.select("event_type").distinct().collect()} == {
        "normal", "probe", "big"}

    quarantine = {r.raw: r.reason for r in
                  LakeTable(spark, local, "silver.quarantine").read().collect()}
    assert len(quarantine) == 4
    b1 = next(reason for raw, reason in quarantine.items() if '"B1"' in raw)
    assert "missing_field: object_id" in b1 and "wrong_type: amount" in b1
    assert "invalid_value: event_time" in b1
    b2 = next(reason for raw, reason in quarantine.items() if '"B2"' in raw)
    assert b2.startswith("wrong_type: amount: 'abc'")
    assert any(r.startswith("malformed_csv") for r in quarantine.values())
    assert any(r.startswith("malformed_json") for r in quarantine.values())
    dupes = LakeTable(spark, local, "silver.duplicates").read().collect()
    assert [d.event_id for d in dupes] == [again["txn_id"]]

    rows = LakeTable(spark, local, "gold.complex_events").read().collect()
    found = sorted((r.measures["probe_txn"], r.measures["big_txn"]) for r in rows)
    assert found == planted
    assert {r.query_id for r in rows} == {"card_fraud"}
    for r in rows:  # measures computed over numbers, not text
        assert float(r.measures["big_amount"]) > 500 > 2 > float(r.measures["probe_amount"])

    # Typed reading (lakecep.typed_views): the text-valued maps come back as numbers, the
    # same in Spark and in DuckDB over delta-rs.
    registered = register_tables(spark, local)
    assert {"silver.events_typed", "matches.card_fraud"} <= set(registered)
    view = spark.table("matches.card_fraud")
    types = dict(view.dtypes)
    assert (types["big_amount"], types["probe_amount"], types["big_txn"]) == (
        "double", "double", "string")
    typed = view.collect()
    assert sorted((r.probe_txn, r.big_txn) for r in typed) == planted
    assert all(r.big_amount == float(r.measures["big_amount"]) > 500 for r in typed)
    first_typed = spark.sql("SELECT amount, merchant FROM silver.events_typed "
                            "WHERE event_id = 'T000001'").first()
    assert (first_typed.amount, first_typed.merchant) == (row.amount, row.merchant)
    duck = run_query(local, "SELECT probe_txn, big_txn, big_amount FROM matches.card_fraud", 100)
    assert str(duck.big_amount.dtype) == "float64"
    assert sorted(zip(duck.probe_txn, duck.big_txn, strict=True)) == planted
    assert sorted(duck.big_amount) == sorted(r.big_amount for r in typed)
    duck_first = run_query(local, "SELECT amount FROM silver.events_typed "
                           "WHERE event_id = 'T000001'", 1)
    assert duck_first.amount.tolist() == [row.amount]

    status = lake_status(spark, local)
    assert status.counts["landing (lines)"] == 1000 + 3 + 2
    assert status.ok, str(status)
