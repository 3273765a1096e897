"""``lakecep replay``'s pure parts (lakecep.replay, the rich view) and the ``[snapshot]`` key
of query files. Spark parts: tests/integration/test_alert_delivery.py and the end-to-end
pipeline test."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from rich.console import Console

from lakecep.console import replay_tables
from lakecep.jobs.snapshots import duration_text
from lakecep.queries import QueryDefinitionError, SnapshotSpec, load_query
from lakecep.replay import differences, plain

ROW = {"partition_key": "t1", "start_us": 1_000_000, "end_us": 2_000_000,
       "measures": {"a_id": "e1", "n": None}, "live_event_ids": ["e1", "e2"],
       "archive_event_ids": [], "match_number": 1}


def test_same_row_in_other_containers_has_no_differences() -> None:
    # what the replay builds from pandas: numpy arrays, numpy ints, NaN for NULL
    replayed = {**ROW, "live_event_ids": np.array(["e1", "e2"]), "archive_event_ids": (),
                "match_number": np.int64(1), "start_us": 1_000_000.0,
                "measures": {"n": float("nan"), "a_id": "e1"}}
    assert differences(ROW, replayed) == []
    assert plain(pd.NaT) is None and plain(np.int64(3)) == 3 and plain(2.5) == 2.5


def test_each_differing_field_is_named_with_both_values() -> None:
    replayed = {**ROW, "end_us": 2_000_001, "measures": {"a_id": "e9", "n": None}}
    assert differences(ROW, replayed) == [
        "end_us: stored 2000000, replayed 2000001",
        "measures: stored {'a_id': 'e1', 'n': None}, replayed {'a_id': 'e9', 'n': None}"]
    assert differences(ROW, None) == ["match_id: the replay does not find this match"]
    assert differences(ROW, {**ROW, "match_number": 2}, fields=("partition_key",)) == []


def _doc(**changes: object) -> dict:
    event = {"role": "match", "event_id": "e1", "event_time": "2026-01-01 00:00:00.000000",
             "event_type": "read", "source_id": "A", "object_id": "t1", "event_us": 0}
    stored = {"query_id": "rfid_abc", "query_version": "1", "partition_key": "t1",
              "start_time": "2026-01-01 00:00:00", "end_time": "2026-01-01 02:00:00",
              "batch_id": 0, "history_version": 3, "strategy": "batch",
              "detection_time": "2026-01-02 00:00:00", "superseded_version": None,
              "measures": {"a_id": "e1"}}
    doc = {"match_id": "9c1f", "query_id": "rfid_abc", "reproduced": True, "stored": stored,
           "replayed": {"measures": {"a_id": "e1"}}, "differences": [], "error": None,
           "context": [event], "warnings": ["silver.events ... shorter than the horizon"],
           "snapshot": {"version": 5, "events": [{**event, "event_id": "e0",
                                                  "role": "before"}, event],
                        "reproduced": False, "missing": [["e7", "after"]], "extra": []}}
    doc.update(changes)
    return doc


def _shown(doc: dict) -> str:
    console = Console(width=200, record=True)
    for part in replay_tables(doc):
        console.print(part)
    return console.export_text()


def test_the_view_shows_result_measures_events_snapshot_and_warnings() -> None:
    text = _shown(_doc())
    assert "reproduced (same measures, same events)" in text
    assert "batch 0, silver version 3, strategy batch" in text
    assert "events around the match (1)" in text
    assert "firing snapshot at silver version 5 (not reproduced:" in text and "e7" in text
    assert "e0" in text and "warning: silver.events" in text
    text = _shown(_doc(reproduced=False, differences=["end_us: stored 1, replayed 2"],
                       replayed={"measures": {"a_id": "e9"}}, snapshot=None,
                       stored={**_doc()["stored"], "superseded_version": 7}))
    assert "differs: end_us: stored 1, replayed 2" in text and "≠" in text
    assert "no: superseded at silver version 7" in text and "firing snapshot" not in text
    assert "not replayed: gone" in _shown(_doc(reproduced=False, error="gone", replayed=None))


def test_snapshot_key_of_query_files(tmp_path: Path) -> None:
    path = tmp_path / "q.toml"
    base = 'id = "q"\nquery = "x"\n'
    path.write_text(base + 'alert = true\n[snapshot]\nbefore = "1 hour"\n')
    assert load_query(path).snapshot == SnapshotSpec(timedelta(hours=1))
    assert SnapshotSpec(timedelta(0)).horizon == timedelta(days=7)
    path.write_text(base + 'alert = true\n[snapshot]\nbefore = "2 hours"\nafter = "5 minutes"\n'
                    'horizon = "30 days"\n')
    assert load_query(path).snapshot == SnapshotSpec(timedelta(hours=2), timedelta(minutes=5),
                                                     timedelta(days=30))
    assert load_query(tmp_path.joinpath("q.toml")).alert is True
    for text, message in (
            ('[snapshot]\nbefore = "1 hour"\n', "needs alert = true"),
            ('alert = true\n[snapshot]\nafter = "1 hour"\n', "needs before"),
            ('alert = true\n[snapshot]\nbefore = "1 hour"\nbefor = "2 hours"\n',
             r"unknown key\(s\) \['befor'\] in \[snapshot\]"),
            ('alert = true\n[snapshot]\nbefore = 3\n', "snapshot.before must be a duration"),
            ('alert = true\nsnapshot = "1 hour"\n', "snapshot must be a table"),
            ('alert = true\n[snapshot]\nbefore = "-1 hour"\n', "not a duration")):
        path.write_text(base + text)
        with pytest.raises(QueryDefinitionError, match=message):
            load_query(path)


def test_durations_are_shown_in_their_largest_whole_unit() -> None:
    assert [duration_text(s) for s in (604800, 86400, 7200, 90, 60, 1.5)] == [
        "7 days", "1 day", "2 hours", "90 seconds", "1 minute", "1.5 seconds"]
