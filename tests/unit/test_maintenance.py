"""Time-travel horizons of the configured queries and the retention check
(lakecep.maintenance; docs/architecture.md, "Housekeeping"). Plain data, no Spark."""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from pathlib import Path

import pytest

from lakecep import maintenance
from lakecep.config import ConfigError, Settings, load_settings
from lakecep.queries import (
    AcquisitionQuery,
    PatternQuery,
    SnapshotSpec,
    WindowQuery,
    load_queries,
)

REPO = Path(__file__).resolve().parents[2]
DAY = 86400.0


def _settings(**changes: object) -> Settings:
    return dataclasses.replace(Settings(), **changes)


def test_shipped_queries_need_the_default_replay_horizon_on_silver() -> None:
    found = maintenance.needs(load_queries(), _settings())
    by_who = {n.who: n for n in found}
    assert set(by_who) == {"rfid_abc", "rfid_transit", maintenance.PIPELINE}
    assert by_who["rfid_abc"] == maintenance.Need(
        "silver.events", "rfid_abc", 7 * DAY, "`lakecep replay` horizon 7 days (default)")
    assert by_who["rfid_transit"].seconds == 7 * DAY  # RA (24 h) lies inside the version
    assert "RA (1 day before)" in by_who["rfid_transit"].why
    assert by_who[maintenance.PIPELINE].seconds == DAY  # max_stream_lag
    assert maintenance.longest(found, "silver.events").who in ("rfid_abc", "rfid_transit")
    assert maintenance.longest(found, "bronze.events").who == maintenance.PIPELINE
    assert maintenance.check(_settings(), found) == {"vacuum_retention": 7 * DAY,
                                                     "log_retention": 30 * DAY}


def test_snapshot_horizon_chained_rules_and_acquisition_plans() -> None:
    base = PatternQuery("p", "1", "", "SELECT 1")
    alerting = dataclasses.replace(base, id="alerting", alert=True, snapshot=SnapshotSpec(
        timedelta(hours=1), horizon=timedelta(days=30)))
    chained = dataclasses.replace(base, id="chained", inputs=("p",))
    plan = AcquisitionQuery("acq", "1", "", key="object_id",
                            pattern="seq(a, b, c; 2 hours)", latency_bound=timedelta(minutes=5))
    unbounded = dataclasses.replace(plan, id="acq2", latency_bound=None,
                                    step_delay=timedelta(seconds=10))
    window = WindowQuery("w", "1", "", attribute="price", aggregates=("avg",),
                         window=timedelta(days=90))
    found = {n.who: n for n in maintenance.needs(
        [alerting, chained, plan, unbounded, window], _settings(max_stream_lag="6 hours"))}
    assert (found["alerting"].table, found["alerting"].seconds) == ("silver.events", 30 * DAY)
    assert (found["chained"].table, found["chained"].seconds) == ("gold.complex_events",
                                                                  7 * DAY)
    assert found["acq"].seconds == 2 * 3600 + 300
    assert found["acq2"].seconds == 2 * 3600 + 3 * 10  # three steps of step_delay
    assert "w" not in found  # windows keep state in gold.window_state: newest version only
    assert found[maintenance.PIPELINE].seconds == 6 * 3600


def test_a_retention_shorter_than_a_horizon_is_refused_in_one_line() -> None:
    alerting = PatternQuery("fraud", "1", "", "SELECT 1", alert=True,
                            snapshot=SnapshotSpec(timedelta(0), horizon=timedelta(days=14)))
    found = maintenance.needs([alerting], _settings())
    with pytest.raises(maintenance.RetentionError) as raised:
        maintenance.check(_settings(), found)  # 7 days < 14 days
    message = str(raised.value)
    assert "\n" not in message and isinstance(raised.value, ConfigError)
    assert message.startswith("vacuum_retention = '7 days' is shorter than the time travel "
                              "fraud needs on silver.events: 14 days")
    assert "set vacuum_retention to at least '14 days'" in message
    assert "[snapshot] horizon" in message
    ok = _settings(vacuum_retention="14 days")
    assert maintenance.check(ok, found)["vacuum_retention"] == 14 * DAY
    with pytest.raises(maintenance.RetentionError, match="log_retention = '10 days'"):
        maintenance.check(_settings(vacuum_retention="14 days", log_retention="10 days"),
                          found)
    with pytest.raises(maintenance.RetentionError, match="lower max_stream_lag"):
        lagging = _settings(max_stream_lag="8 days")
        maintenance.check(lagging, maintenance.needs([], lagging))
    with pytest.raises(maintenance.RetentionError, match="at least vacuum_retention"):
        maintenance.check(_settings(vacuum_retention="2 days", log_retention="1 day"), [])


def test_retention_settings_are_validated_durations(tmp_path: Path) -> None:
    got = load_settings({"LAKECEP_HOME": str(tmp_path), "LAKECEP_VACUUM_RETENTION": "2 weeks",
                         "LAKECEP_COMPACT_MIN_FILES": "4"})
    assert (got.vacuum_retention, got.compact_min_files) == ("2 weeks", 4)
    assert maintenance.table_properties({"vacuum_retention": 14 * DAY,
                                         "log_retention": 90 * 60}) == {
        "delta.deletedFileRetentionDuration": "interval 14 days",
        "delta.logRetentionDuration": "interval 90 minutes"}
    with pytest.raises(ConfigError, match="vacuum_retention"):
        load_settings({"LAKECEP_HOME": str(tmp_path), "LAKECEP_VACUUM_RETENTION": "a week"})


def test_run_maintain_refuses_a_short_retention_before_spark_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from lakecep.jobs.cli import main

    monkeypatch.setenv("LAKECEP_HOME", str(tmp_path))
    assert main(["--set", "vacuum_retention=2 days", "run", "maintain"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert ("vacuum_retention = '2 days' is shorter than the time travel rfid_abc needs on "
            "silver.events: 7 days") in err
    assert "set vacuum_retention to at least '7 days'" in err and "Traceback" not in err
    assert not (tmp_path / "lake").exists()  # refused before anything ran
