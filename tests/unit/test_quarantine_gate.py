"""The silver job's quarantine gate (jobs/silver.py): which sources of a batch breach it."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from lakecep.config import Settings
from lakecep.console import explain
from lakecep.jobs.silver import Breach, QuarantineGateError, quarantine_breaches
from lakecep.sources import SourceError, load_source

SOURCE = """name = "cards"
format = "jsonl"
path = "landing/cards"
{extra}
[fields]
card = "string"
merchant = "string"
ts = "string"

[mapping]
object_id = "card"
event_type = "'txn'"
source_id = "merchant"
event_time = "ts"
"""


def source(tmp_path: Path, extra: str = ""):  # noqa: ANN201
    path = tmp_path / "cards.toml"
    path.write_text(SOURCE.format(extra=extra))
    return load_source(path)


def test_each_source_is_judged_on_its_own_rows(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path)
    cards = source(tmp_path, "max_quarantine_ratio = 0.5")
    landing = tmp_path / "landing"
    per_file = {
        (f"file://{landing}/cards/a.jsonl", "ok"): 60,
        (f"file://{landing}/cards/a.jsonl", "quarantined"): 40,  # 40 % <= the source's 50 %
        (f"file://{landing}/events/e.jsonl", "ok"): 190,
        (f"file://{landing}/events/e.jsonl", "quarantined"): 11,  # 5.5 % > the setting's 5 %
    }
    assert quarantine_breaches(per_file, [cards], tmp_path, settings) == [
        Breach("events", 11, 201, 0.05, "")]
    per_file[(f"file://{landing}/cards/b.jsonl", "quarantined")] = 60  # 100 of 160: 62.5 %
    breaches = quarantine_breaches(per_file, [cards], tmp_path, settings)
    assert [b.source for b in breaches] == ["cards", "events"]
    assert breaches[0].describe() == ("source 'cards': 100 of 160 rows quarantined (62.5% > "
                                      f"max_quarantine_ratio 50.0% of {cards.file})")
    # exactly at the limit passes; fewer rows than quarantine_gate_min_rows are not judged
    exact = {("x", "ok"): 95, ("x", "quarantined"): 5}
    assert quarantine_breaches(exact, [], tmp_path, settings) == []
    # rows a filter operator dropped on purpose are not bad rows
    assert quarantine_breaches({**exact, ("x", "filtered"): 900}, [], tmp_path, settings) == []
    small = {("x", "quarantined"): 99}
    assert quarantine_breaches(small, [], tmp_path, settings) == []
    lower = dataclasses.replace(settings, quarantine_gate_min_rows=50)
    assert quarantine_breaches(small, [], tmp_path, lower) == [Breach("events", 99, 99, 0.05, "")]


def test_a_source_file_checks_its_ratio(tmp_path: Path) -> None:
    for bad in ("1.5", "-0.1", '"5%"', "true"):
        with pytest.raises(SourceError, match="max_quarantine_ratio must be a number from 0 to 1"):
            source(tmp_path, f"max_quarantine_ratio = {bad}")
    assert source(tmp_path, "max_quarantine_ratio = 0").max_quarantine_ratio == 0.0


def test_the_cli_shows_the_gate_as_one_line_and_a_hint() -> None:
    shown = explain(QuarantineGateError("silver quarantine gate: batch 3: ...\nnothing of this "
                                        "batch was written (bronze keeps its lines): fix it"))
    assert shown.message == "silver quarantine gate: batch 3: ..."
    assert shown.hint == "nothing of this batch was written (bronze keeps its lines): fix it"


def test_the_gate_exit_code_is_the_one_the_dag_does_not_retry() -> None:
    from lakecep.console import NO_RETRY, NO_RETRY_EXIT
    from lakecep.dags.lakecep_tasks import NO_RETRY_EXIT as DAG_NO_RETRY

    assert NO_RETRY_EXIT == DAG_NO_RETRY == 3
    assert QuarantineGateError.__name__ in NO_RETRY
