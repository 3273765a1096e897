"""lakecep pipeline DAG: landing JSON lines -> bronze -> silver -> gold -> quality.

Runs the lakecep jobs in order, each as `lakecep run <job> --run-id <Airflow run id>` in a
child process (the Spark jobs never run inside the Airflow worker process):

| task | reads | writes (outlet Asset) |
|------|-------|-----------------------|
| `bronze`  | landing JSON lines (`lakecep://landing/events`) | `lakecep://bronze/events` |
| `silver`  | `lakecep://bronze/events` | `lakecep://silver/events` |
| `optimize` | `lakecep://silver/events` | clusters silver by (object_id, event_time) |
| `gold`    | `lakecep://silver/events` | `lakecep://gold/complex_events` (CEP matches) |
| `quality` | bronze + silver + gold | `lakecep://gold/quality_results` (Great Expectations) |

Schedule: every 15 minutes (no catch-up, one run at a time) and whenever an asset event
for `lakecep://landing/events` arrives (e.g. from the `lakecep_demo` DAG).

Every job processes what is available (Structured Streaming `availableNow`) and exits, so a
run is incremental and the jobs are idempotent: a retry or re-run is safe. A failed task's
error message quotes the last lines of the job's stderr; the full output is in the task log.

Configuration comes from the environment of the Airflow components (`LAKECEP_HOME`,
`LAKECEP_SPARK_MASTER`, ... or `$LAKECEP_HOME/lakecep.toml`), see `docs/airflow.md`.

This file only wires tasks: each task runs `python -m lakecep.jobs.cli run <job> --run-id <id>`
in a child process (`run_lakecep_job` in `lakecep_tasks.py`), so nothing heavy (pyspark,
pandas, great_expectations, cep_core, lakecep.jobs) is imported when Airflow parses this file.
"""

from __future__ import annotations

from airflow.sdk import AssetOrTimeSchedule, CronTriggerTimetable, dag, task

from lakecep.dags.lakecep_tasks import (
    BRONZE_EVENTS,
    GOLD_COMPLEX_EVENTS,
    LANDING_EVENTS,
    QUALITY_RESULTS,
    SCHEDULED_DAG_DEFAULTS,
    SILVER_EVENTS,
    run_lakecep_job,
)


@dag(
    dag_id="lakecep_pipeline",
    # Every 15 minutes, and as soon as a producer announces new landing data (an asset
    # event on LANDING_EVENTS: the lakecep_demo DAG, or POST /api/v2/assets/events).
    schedule=AssetOrTimeSchedule(
        timetable=CronTriggerTimetable("*/15 * * * *", timezone="UTC"),
        assets=[LANDING_EVENTS],
    ),
    tags=["lakecep", "pipeline"],
    doc_md=__doc__,
    **SCHEDULED_DAG_DEFAULTS,
)
def lakecep_pipeline() -> None:
    @task(task_id="bronze", inlets=[LANDING_EVENTS], outlets=[BRONZE_EVENTS])
    def bronze(run_id: str | None = None) -> None:
        """Landing JSON lines -> Delta bronze (every line kept, with its parse status)."""
        run_lakecep_job("bronze", run_id or "manual")

    @task(task_id="silver", inlets=[BRONZE_EVENTS], outlets=[SILVER_EVENTS])
    def silver(run_id: str | None = None) -> None:
        """Bronze -> silver events, duplicates and quarantine (with reasons)."""
        run_lakecep_job("silver", run_id or "manual")

    @task(task_id="optimize", inlets=[SILVER_EVENTS])
    def optimize(run_id: str | None = None) -> None:
        """Cluster silver by (object_id, event_time) when enough new files piled up."""
        run_lakecep_job("optimize", run_id or "manual")

    @task(task_id="gold", inlets=[SILVER_EVENTS], outlets=[GOLD_COMPLEX_EVENTS])
    def gold(run_id: str | None = None) -> None:
        """Silver -> gold complex events (MATCH_RECOGNIZE patterns from cep_core)."""
        run_lakecep_job("gold", run_id or "manual")

    @task(
        task_id="quality",
        inlets=[SILVER_EVENTS, GOLD_COMPLEX_EVENTS],
        outlets=[QUALITY_RESULTS],
    )
    def quality(run_id: str | None = None) -> None:
        """Great Expectations validations of bronze, silver and gold."""
        run_lakecep_job("quality", run_id or "manual")

    bronze() >> silver() >> optimize() >> gold() >> quality()


lakecep_pipeline()
