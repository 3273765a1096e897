"""A 100 %-quarantined batch fails the DAG run: the real ``airflow dags test
lakecep_pipeline`` over three landed lines that all fail the event contract (with
``quarantine_gate_min_rows = 1``, so a tiny batch is judged). bronze succeeds, silver fails
once -- no retry: the same batch would fail again -- with the gate's one line in its task
log, the rest never runs and the run is ``failed``. Cost: two job processes (bronze,
silver) and one `lakecep validate` (the queries task), no data to speak of."""

from __future__ import annotations

import json

import pytest
from lakecep_testing import dag_runs, run_airflow, task_states

pytestmark = [pytest.mark.airflow, pytest.mark.slow]

DAG_ID = "lakecep_pipeline"


def test_a_fully_quarantined_batch_fails_the_dag_run_at_silver(airflow_env: dict, tmp_path) -> None:  # noqa: ANN001
    home = tmp_path / "lake"
    landing = home / "landing" / "events"
    landing.mkdir(parents=True)
    lines = [{"event_id": f"e{n}", "object_id": "tag-1", "source_id": "A"} for n in range(3)]
    (landing / "events-00000.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    env = {**airflow_env, "LAKECEP_HOME": str(home), "LAKECEP_QUARANTINE_GATE_MIN_ROWS": "1"}

    result = run_airflow(env, "dags", "test", DAG_ID, "2026-01-01T00:00:00+00:00",
                         timeout=1800)
    log = result.stdout + result.stderr
    assert result.returncode != 0, log[-4000:]
    one_line = ("lakecep job 'silver' failed, and would again on the same input (no retry): "
                "lakecep run: error: silver quarantine gate: batch 0: source 'events': 3 of 3 "
                "rows quarantined (100.0% > max_quarantine_ratio 5.0% (setting)); commonest "
                "reasons: missing_field (3)")
    assert one_line in log, log[-6000:]

    runs = dag_runs(env, DAG_ID)
    assert [r["state"] for r in runs] == ["failed"]
    by_task = {row["task_id"]: row["state"] for row in task_states(env, DAG_ID,
                                                                   runs[0]["run_id"])}
    # (queries, which lists the gold queries, runs beside bronze and succeeds; the mapped
    # gold task is never expanded)
    assert by_task == {"bronze": "success", "silver": "failed", "optimize": "upstream_failed",
                       "queries": "success", "gold": "upstream_failed",
                       "quality": "upstream_failed"}
    # bronze and silver once each (no retry), and queries' `lakecep validate`
    assert log.count("lakecep: running") == 3
