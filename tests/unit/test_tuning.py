"""lakecep.tuning: statistics rows -> tuned configuration (seed 002 model), versioned files."""

from __future__ import annotations

import dataclasses
import json
import math
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from cep_core.tuning import allocation as A
from lakecep import tuning
from lakecep.config import load_settings
from lakecep.queries import load_queries

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def settings(tmp_path: Path):  # noqa: ANN201
    return load_settings({"LAKECEP_HOME": str(tmp_path)})


@pytest.fixture(scope="module")
def queries() -> list:
    return load_queries(str(REPO / "queries"))  # rfid_abc: SEQ(A, B, C); rfid_transit: D


def stats(rate_a: float = 0.03, run: str = "r1", per_file: float = 50.0) -> list[dict]:
    base = {"run_id": run, "silver_version": 3, "window_start": "s", "window_end": "e"}
    rows = []
    for var, lam, cost in (("A", rate_a, 2e-5), ("B", 0.025, 3e-5), ("C", 0.02, 2e-5)):
        rows.append({**base, "kind": "stream", "query_id": "rfid_abc", "side": "pattern",
                     "subject": var, "value": lam})
        rows.append({**base, "kind": "cost", "query_id": "rfid_abc", "side": "pattern",
                     "subject": var, "value": cost})
    rows += [
        {**base, "kind": "stream", "query_id": "rfid_transit", "side": "live", "subject": "D",
         "value": 0.02},
        {**base, "kind": "cost", "query_id": "rfid_transit", "side": "live", "subject": "D",
         "value": 5e-5},
        {**base, "kind": "selectivity", "query_id": "rfid_transit", "side": "archive",
         "subject": "*", "value": 0.2},
        {**base, "kind": "transition", "query_id": "rfid_abc", "side": "pattern",
         "subject": "2", "value": 0.7, "gap_seconds": 7200.0},
        {**base, "kind": "transition", "query_id": "rfid_abc", "side": "pattern",
         "subject": "1", "value": 0.8, "gap_seconds": 3600.0},
        {**base, "kind": "events_per_file", "subject": "silver.events", "value": per_file},
    ]
    return rows


def test_configuration_follows_the_model(settings, queries) -> None:  # noqa: ANN001
    tight = dataclasses.replace(settings, tuning_capacity=2.0, tuning_deadline_seconds=60.0)
    config, allocations = tuning.compute(stats(), queries, tight)
    model = config["model"]
    assert model["capacity_events_per_second"] == 2.0 and not model["overloaded"]
    abc = config["queries"]["rfid_abc"]
    assert [s["stream"] for s in abc["streams"]] == ["A", "B", "C"]
    assert sum(s["quota"] for s in abc["streams"]) == pytest.approx(1.0)
    # the terminator C gets its minimum capacity (Theorem 1), the satisfaction target holds
    c = abc["streams"][2]
    assert c["satisfaction"] >= settings.tuning_sigma - 1e-6
    assert c["satisfaction"] == pytest.approx(A.satisfaction(c["mu"], 0.02, 60.0, "exact"))
    assert 0 <= abc["disorder"] <= 1 and abc["simulated"]["fifo"] > 0.5
    # shares: each query's minimum for its deadline, the spare in proportion to load
    shares = {q: e["share"] for q, e in config["queries"].items()}
    assert sum(shares.values()) == pytest.approx(model["cores"])
    assert config["gold"]["pools"] == {"q_rfid_abc": 1000, "q_rfid_transit": round(
        1000 * shares["rfid_transit"] / shares["rfid_abc"])}
    assert config["gold"]["max_files_per_trigger"] == math.floor(2.0 * 60.0 / 50.0)
    assert abc["stpm"] == {"max_gap_seconds": [0.0, 3600.0, 7200.0],
                           "probability": [0.0, 0.8, 0.7]}
    transit = config["queries"]["rfid_transit"]
    assert transit["archive_selectivity"] == 0.2 and transit["streams"][0]["quota"] == 1.0
    assert {(a["query_id"], a["stream"]) for a in allocations} == {
        ("rfid_abc", "A"), ("rfid_abc", "B"), ("rfid_abc", "C"), ("rfid_transit", "D")}


def test_more_arrivals_change_the_allocation(settings, queries) -> None:  # noqa: ANN001
    tight = dataclasses.replace(settings, tuning_capacity=2.0)
    before, _ = tuning.compute(stats(rate_a=0.03), queries, tight)
    after, _ = tuning.compute(stats(rate_a=0.3), queries, tight)
    a0, a1 = (c["queries"]["rfid_abc"]["streams"][0] for c in (before, after))
    assert a1["arrival_rate"] == 0.3 and a1["mu"] > a1["arrival_rate"]
    assert a1["quota"] != pytest.approx(a0["quota"])
    assert (after["queries"]["rfid_abc"]["share"] > before["queries"]["rfid_abc"]["share"])


def test_overload_falls_back_to_load_proportional_shares(settings, queries) -> None:  # noqa: ANN001
    config, _ = tuning.compute(stats(), queries, dataclasses.replace(settings,
                                                                     tuning_capacity=0.05))
    assert config["model"]["overloaded"]
    abc = config["queries"]["rfid_abc"]
    assert abc["model"].startswith("proportional to load")
    loads = [s["arrival_rate"] * s["cost_seconds"] for s in abc["streams"]]
    assert [s["quota"] for s in abc["streams"]] == pytest.approx(
        [x / sum(loads) for x in loads])
    assert config["gold"]["max_files_per_trigger"] == 1


def test_bad_statistics_say_what_is_missing(settings, queries) -> None:  # noqa: ANN001
    with pytest.raises(tuning.TuningError, match="lakecep run statistics"):
        tuning.compute([], queries, settings)
    with pytest.raises(tuning.TuningError, match="several runs"):
        tuning.compute(stats(run="a") + stats(run="b"), queries, settings)
    no_streams = [r for r in stats() if r["kind"] != "stream"]
    with pytest.raises(tuning.TuningError, match="nothing to allocate"):
        tuning.compute(no_streams, queries, settings)


def test_versions_on_disk(settings, queries) -> None:  # noqa: ANN001
    assert tuning.load_latest(settings) is None
    config, _ = tuning.compute(stats(), queries, settings)
    assert tuning.write(settings, config)[0] == 1
    version, path = tuning.write(settings, config)
    assert version == 2 and path.name == "config-v2.json"
    latest = tuning.load_latest(settings)
    assert latest["version"] == 2
    pools = {p.get("name"): int(p.findtext("weight"))
             for p in ET.parse(latest["gold"]["scheduler_file"]).getroot()}
    assert pools == config["gold"]["pools"]
    assert tuning.load_latest(dataclasses.replace(settings, tuning_apply=False)) is None
    path.write_text("{not json")
    with pytest.raises(tuning.TuningError, match="cannot be read"):
        tuning.load_latest(settings)
    path.write_text(json.dumps({**latest, "version": 7}))
    with pytest.raises(tuning.TuningError, match="says version 7"):
        tuning.load_latest(settings)


def test_transitions_in_the_time_column_unit() -> None:
    config = {"queries": {"q": {"stpm": {"max_gap_seconds": [0.0, 2.0],
                                         "probability": [0.0, 0.5]}}}}
    assert tuning.transitions_for(config, "q")["max_gap"] == pytest.approx([0.0, 2e9])
    assert tuning.transitions_for(config, "q")["probability"] == [0.0, 0.5]
    assert tuning.transitions_for(config, "q", 1.0)["max_gap"] == [0.0, 2.0]
    assert tuning.transitions_for(config, "other") is None
    assert tuning.transitions_for(None, "q") is None
