"""The tuning loop on real Spark + Delta: the statistics job measures what the test planted,
the tune job turns it into a versioned configuration, and a change in the statistics changes
the next configuration and what the gold job does with the same events."""

from __future__ import annotations

import dataclasses
import json
import math
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from pyspark.sql import functions as F

from lakecep import tuning
from lakecep.jobs import bronze, gold, silver, statistics, tune
from lakecep.jobs.tables import LakeTable
from lakecep.queries import load_queries

pytestmark = pytest.mark.spark

T0 = pd.Timestamp("2026-03-01")
PHASE2 = T0 + pd.Timedelta(days=3)  # beyond the 24 h window of phase 1's statistics
BIN = 300

PATTERN = '''
id = "abc"
version = "1"
kind = "pattern"
query = """SELECT * FROM events MATCH_RECOGNIZE (PARTITION BY object_id ORDER BY event_time
  MEASURES A.event_id AS a_id ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW
  PATTERN (A B C) WITHIN INTERVAL '10' HOUR
  DEFINE A AS source_id = 'A', B AS source_id = 'B', C AS source_id = 'C')"""
'''
LIVE_ARCHIVE = '''
id = "d_after_ab"
version = "1"
kind = "live_archive"
key = "object_id"
strategy = "auto"

[live]
query = """SELECT * FROM live MATCH_RECOGNIZE (PARTITION BY object_id ORDER BY event_time
  MEASURES D.event_id AS d_id PATTERN (D) DEFINE D AS source_id = 'D')"""

[archive]
before = "24 hours"
query = """SELECT * FROM archive MATCH_RECOGNIZE (PARTITION BY object_id ORDER BY event_time
  MEASURES A.event_id AS a_id, B.event_id AS b_id AFTER MATCH SKIP PAST LAST ROW
  PATTERN (A B) DEFINE A AS source_id = 'A', B AS source_id = 'B')"""
'''


def _events(start: pd.Timestamp, tags: range, gap: float, via_b: float, seed: int,
            clock: bool) -> pd.DataFrame:
    """Tags entering at A as a Poisson stream (mean gap ``gap`` s), then B (share
    ``via_b`` of them), C and D after exponential delays (mean 10 min); with ``clock``, a
    source X reading exactly every 5 minutes (over-regular: not Poisson) and a Poisson source
    P, both over the whole span (A stops early: not a stationary stream over the window)."""
    rng = np.random.default_rng(seed)
    rows = []
    entry = start + pd.to_timedelta(np.cumsum(rng.exponential(gap, len(tags))).round(3), "s")
    for tag, t in zip(tags, entry, strict=True):
        readers = ["A", "B", "C", "D"] if rng.random() < via_b else ["A", "C", "D"]
        for reader in readers:
            rows.append((f"e{tag}{reader}", f"t{tag}", reader, t))
            t = t + pd.Timedelta(seconds=round(float(rng.exponential(600)), 3))
    if clock:  # over the whole span: X every 5 minutes, P Poisson (mean gap 2 minutes)
        span = (max(r[3] for r in rows) - start).total_seconds()
        for k in range(int(span // 300)):
            rows.append((f"x{seed}-{k}", "clock", "X", start + pd.Timedelta(minutes=5 * k)))
        noise = np.cumsum(rng.exponential(120.0, int(span // 10))).round(3)
        for k, t in enumerate(noise[noise < span]):
            rows.append((f"p{seed}-{k}", "noise", "P", start + pd.Timedelta(seconds=t)))
    return pd.DataFrame(rows, columns=["event_id", "object_id", "source_id", "event_time"])


def _land(settings, frame: pd.DataFrame, name: str, files: int) -> None:  # noqa: ANN001
    settings.landing.mkdir(parents=True, exist_ok=True)
    for n, part in enumerate(np.array_split(frame.sample(frac=1, random_state=1), files)):
        lines = [json.dumps({"event_id": r.event_id, "object_id": r.object_id,
                             "event_type": "read", "source_id": r.source_id,
                             "event_time": r.event_time.isoformat() + "Z"})
                 for r in part.itertuples()]
        (settings.landing / f"{name}-{n}.jsonl").write_text("\n".join(lines) + "\n")


def _stats(spark, settings, run_id: str) -> pd.DataFrame:  # noqa: ANN001
    rows = LakeTable(spark, settings, "gold.statistics").read()
    return rows.where(F.col("run_id") == run_id).toPandas()


def _one(stats: pd.DataFrame, **where: str) -> pd.Series:
    found = stats
    for column, value in where.items():
        found = found[found[column] == value]
    assert len(found) == 1, f"{where}: {len(found)} rows"
    return found.iloc[0]


def _expected_files(stats: pd.DataFrame, config: dict, settings) -> int:  # noqa: ANN001
    per_file = _one(stats, kind="events_per_file")["value"]
    budget = config["model"]["capacity_events_per_second"] * settings.tuning_deadline_seconds
    return max(1, min(settings.max_files_per_trigger, math.floor(budget / per_file)))


@pytest.fixture(scope="module")
def loop(spark, settings, tmp_path_factory: pytest.TempPathFactory) -> dict:  # noqa: ANN001
    home = tmp_path_factory.mktemp("tuning_home")
    queries_dir = home / "queries"
    queries_dir.mkdir()
    (queries_dir / "abc.toml").write_text(PATTERN)
    (queries_dir / "d_after_ab.toml").write_text(LIVE_ARCHIVE)
    local = dataclasses.replace(settings, home=home, queries_dir=str(queries_dir),
                                statistics_bin_seconds=BIN, statistics_sample_keys=5000,
                                tuning_capacity=0.0, rbuffer_rows=1)
    phase1 = _events(T0, range(200), 60.0, via_b=1.0, seed=1, clock=True)
    _land(local, phase1, "p1", 3)
    for job in (bronze, silver, gold):
        job.run(spark, local)
    run1 = statistics.run(spark, local, run_id="run-1")
    v1 = tune.run(spark, local)
    config1 = json.loads(v1.path.read_text())

    phase2 = _events(PHASE2, range(1000, 1600), 20.0, via_b=0.05, seed=2, clock=False)
    _land(local, phase2, "p2", 3)
    for job in (bronze, silver):
        job.run(spark, local)
    run2 = statistics.run(spark, local, run_id="run-2")
    v2 = tune.run(spark, local)
    config2 = json.loads(v2.path.read_text())
    return {"settings": local, "phase1": phase1, "phase2": phase2, "run1": run1,
            "run2": run2, "v1": v1, "v2": v2, "config1": config1, "config2": config2,
            "stats1": _stats(spark, local, "run-1"), "stats2": _stats(spark, local, "run-2")}


def test_arrival_rates_and_poisson_test(loop: dict) -> None:
    stats, events = loop["stats1"], loop["phase1"]
    seconds = math.ceil((events.event_time.max() - events.event_time.min()).total_seconds()
                        / BIN) * BIN
    for reader in "ABCDXP":
        row = _one(stats, kind="arrival_rate", side="source_id", subject=reader)
        count = int((events.source_id == reader).sum())
        assert row["events"] == count
        assert row["value"] == pytest.approx(count / seconds, rel=1e-9)
    assert _one(stats, kind="arrival_rate", side="event_type", subject="read")["events"] == len(
        events)
    # P is Poisson over the window; the clock reader X is far too regular for Poisson
    assert _one(stats, kind="arrival_rate", side="source_id", subject="P")["p_value"] > 0.01
    clock = _one(stats, kind="arrival_rate", side="source_id", subject="X")
    assert clock["p_value"] < 1e-6 and clock["dispersion"] < 0.2


def test_selectivities_transitions_streams_and_match_ratio(loop: dict) -> None:
    stats, events = loop["stats1"], loop["phase1"]
    n, tags = len(events), events.object_id.str.startswith("t").sum() // 4
    assert _one(stats, kind="selectivity", query_id="abc", subject="*")["value"] == (
        pytest.approx(tags / n))
    assert _one(stats, kind="selectivity", query_id="abc", subject="A")["value"] == (
        pytest.approx(tags / n))
    assert _one(stats, kind="selectivity", query_id="d_after_ab", side="archive",
                subject="*")["value"] == pytest.approx(tags / n)
    tagged = events[events.object_id.str.startswith("t")]
    times = tagged.pivot(index="object_id", columns="source_id", values="event_time")
    for state, (first, second) in ((1, "AB"), (2, "BC")):
        row = _one(stats, kind="transition", query_id="abc", subject=str(state))
        assert row["value"] == 1.0  # every tag goes on to the next reader
        gap = (times[second] - times[first]).dropna().max().total_seconds()
        assert row["gap_seconds"] == pytest.approx(gap, abs=1e-3)
    for reader in "ABC":
        stream = _one(stats, kind="stream", query_id="abc", subject=reader)["value"]
        rate = _one(stats, kind="arrival_rate", side="source_id", subject=reader)["value"]
        assert stream == pytest.approx(rate)
    costs = stats[(stats.kind == "cost") & (stats.query_id == "abc")]
    assert set(costs.subject) == {"A", "B", "C", ""} and (costs.value >= 0).all()
    assert costs.value.sum() > 0
    # every live D finds exactly its tag's A -> B in the 24 h before it
    assert _one(stats, kind="match_ratio", query_id="d_after_ab")["value"] == 1.0


def test_tuned_configuration_from_the_statistics(loop: dict, spark) -> None:  # noqa: ANN001
    config, stats, settings = loop["config1"], loop["stats1"], loop["settings"]
    assert config["version"] == 1 and config["statistics_run"] == "run-1"
    abc = config["queries"]["abc"]
    assert [s["stream"] for s in abc["streams"]] == ["A", "B", "C"]
    assert sum(s["quota"] for s in abc["streams"]) == pytest.approx(1.0)
    for s in abc["streams"]:
        assert s["arrival_rate"] == pytest.approx(
            _one(stats, kind="stream", query_id="abc", subject=s["stream"])["value"])
        assert s["mu"] > s["arrival_rate"] and 0.95 <= s["satisfaction"] <= 1.0
    assert abc["stpm"]["probability"] == [0.0, 1.0, 1.0]
    assert config["gold"]["max_files_per_trigger"] == _expected_files(stats, config, settings)
    assert max(config["gold"]["pools"].values()) == 1000
    assert config["queries"]["d_after_ab"]["archive_selectivity"] == pytest.approx(
        _one(stats, kind="selectivity", query_id="d_after_ab", side="archive",
             subject="*")["value"])
    xml = Path(config["gold"]["scheduler_file"]).read_text()
    assert '<pool name="q_abc">' in xml
    rows = LakeTable(spark, settings, "gold.allocations").read().toPandas()
    assert sorted(rows.config_version.unique()) == [1, 2]
    first = rows[rows.config_version == 1].set_index("stream")
    assert first.loc["A", "quota"] == pytest.approx(abc["streams"][0]["quota"])
    assert first.loc["D", "query_id"] == "d_after_ab"


def test_changed_statistics_change_the_next_configuration(loop: dict) -> None:
    one, two = loop["config1"], loop["config2"]
    stats2, settings = loop["stats2"], loop["settings"]
    assert two["version"] == 2 and two["statistics_run"] == "run-2"
    rate = {c["version"]: {s["stream"]: s for s in c["queries"]["abc"]["streams"]}
            for c in (one, two)}
    for version, stats, tags in ((1, loop["stats1"], 200), (2, stats2, 600)):
        seconds = _one(stats, kind="arrival_rate", side="source_id", subject="A")["seconds"]
        assert rate[version]["A"]["arrival_rate"] == pytest.approx(tags / seconds)
    # every tag passes B in phase 1, one in twenty in phase 2
    assert rate[1]["B"]["arrival_rate"] == pytest.approx(rate[1]["A"]["arrival_rate"])
    assert rate[2]["B"]["arrival_rate"] < 0.2 * rate[2]["A"]["arrival_rate"]
    assert rate[2]["A"]["mu"] != rate[1]["A"]["mu"]
    sel = {c["version"]: c["queries"]["d_after_ab"]["archive_selectivity"] for c in (one, two)}
    assert sel[2] < sel[1] / 4
    assert two["gold"]["max_files_per_trigger"] == _expected_files(stats2, two, settings)
    assert tuning.load_latest(settings)["version"] == 2


def test_changed_configuration_changes_what_gold_does(loop: dict, spark, capsys) -> None:  # noqa: ANN001
    """The phase-2 events as one gold batch: under v1 (A -> B common) auto picks LLAA, under
    v2 (A -> B rare) the archive side drives (OLLAA); then the real gold run uses v2."""
    settings = loop["settings"]
    queries = load_queries(settings.queries_dir)
    silver_table = LakeTable(spark, settings, "silver.events")
    version = silver_table.version()
    history = silver_table.as_of(version)
    batch = history.where(F.col("event_time") >= F.lit(PHASE2.to_pydatetime()))
    chosen = {}
    for config in (loop["config1"], loop["config2"]):
        found = gold.detect(spark, queries, batch, history, version, 99, datetime.now(UTC),
                            settings, tuned=config)
        (record,) = found.access
        chosen[config["version"]] = (record["strategy"], record["reason"])
    assert chosen[1][0] == "llaa" and chosen[2][0] == "ollaa", chosen
    assert "(statistics)" in chosen[1][1] and "(statistics)" in chosen[2][1]

    capsys.readouterr()
    gold.run(spark, settings)
    assert "tuned configuration v2 (statistics run run-2)" in capsys.readouterr().err
    access = LakeTable(spark, settings, "gold.archive_access").read()
    newest = access.orderBy(F.col("batch_id").desc()).first()
    assert newest.strategy == "ollaa" and "(statistics)" in newest.reason
