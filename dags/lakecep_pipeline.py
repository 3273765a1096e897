"""lakecep pipeline DAG: landing JSON lines -> bronze -> silver -> gold (one task per query)
-> quality.

Runs the lakecep jobs in order, each as `lakecep run <job> --run-id <Airflow run id> --json`
in a child process (the Spark jobs never run inside the Airflow worker process):

| task | reads | writes (outlet Asset) |
|------|-------|-----------------------|
| `bronze`  | landing JSON lines (`lakecep://landing/events`) | `lakecep://bronze/events` |
| `silver`  | `lakecep://bronze/events` | `lakecep://silver/events` |
| `optimize` | `lakecep://silver/events` | clusters silver by (object_id, event_time) |
| `queries` | the query files | nothing: lists the query ids (`lakecep validate --json`) |
| `gold` (mapped, one per query) | `lakecep://silver/events` | `lakecep://gold/complex_events` |
| `quality` | bronze + silver + gold | `lakecep://gold/quality_results` (Great Expectations) |

**One gold task per query.** `queries` lists the queries gold runs (the `queries_dir` of the
settings the jobs see; a bad query file fails it at once, with file:line:column), and `gold`
is mapped over them: each mapped task (labelled with its query id) runs `lakecep run gold
--query <id>` with the query's own checkpoint, so a failing query is visible, and retryable,
on its own while the others' results stand. The gold tasks run one at a time (they MERGE into
the same Delta table; `max_active_tis_per_dagrun=1`).

**Asset events carry numbers.** Each task's event for its outlet has, in its `extra`: the run
id, rows in / out / quarantined / duplicates, the seconds, and per table the Delta versions
the job wrote (`versions`, e.g. `{"silver.events": [12]}`); a gold task's also its `query`.
Consumers read them as `inlet_events[asset][-1].extra`.

Schedule: every 15 minutes (no catch-up, one run at a time) and whenever an asset event
for `lakecep://landing/events` arrives (e.g. from the `lakecep_demo` DAG).

Every job processes what is available (Structured Streaming `availableNow`) and exits, so a
run is incremental and the jobs are idempotent: a retry or re-run is safe. A failed task's
error message quotes the last lines of the job's stderr; the full output is in the task log.

Where it runs: the jobs run with `$LAKECEP_PYTHON_BIN` (default: Airflow's own interpreter,
with the lakecep wheel installed) in `$LAKECEP_HOME` (the lake's home; required). Other
settings come from the environment (`LAKECEP_SPARK_MASTER`, ...) or
`$LAKECEP_HOME/lakecep.toml`, see `docs/airflow.md`.

This file only wires tasks (`lakecep_tasks.py` runs the jobs), so nothing heavy (pyspark,
pandas, great_expectations, cep_core, lakecep.jobs) is imported when Airflow parses it.
"""

from __future__ import annotations

from typing import Any

from airflow.sdk import AssetOrTimeSchedule, CronTriggerTimetable, dag, task

from lakecep.dags.lakecep_tasks import (
    BRONZE_EVENTS,
    GOLD_COMPLEX_EVENTS,
    LANDING_EVENTS,
    QUALITY_RESULTS,
    SCHEDULED_DAG_DEFAULTS,
    SILVER_EVENTS,
    list_queries,
    publish,
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
    @task(task_id="bronze", inlets=[LANDING_EVENTS], outlets=[BRONZE_EVENTS],
          doc_md="`lakecep run bronze`: the new landing JSON-lines files -> Delta "
                 "`bronze.events` (every line kept, with its parse status). Asset event: "
                 "lines read, rows written, bronze versions.")
    def bronze(run_id: str | None = None, outlet_events: Any = None) -> None:
        """Landing JSON lines -> Delta bronze (every line kept, with its parse status)."""
        summary = run_lakecep_job("bronze", run_id or "manual")
        publish(outlet_events, BRONZE_EVENTS, summary)

    @task(task_id="silver", inlets=[BRONZE_EVENTS], outlets=[SILVER_EVENTS],
          doc_md="`lakecep run silver`: new bronze rows -> `silver.events` (typed, "
                 "deduplicated); bad rows to `silver.quarantine` with their reason, repeats "
                 "to `silver.duplicates`. Fails without retry when the quarantine gate trips "
                 "(the same input would fail again). Asset event: rows in / out / "
                 "quarantined / duplicates and the three tables' versions.")
    def silver(run_id: str | None = None, outlet_events: Any = None) -> None:
        """Bronze -> silver events, duplicates and quarantine (with reasons)."""
        summary = run_lakecep_job("silver", run_id or "manual")
        publish(outlet_events, SILVER_EVENTS, summary)

    @task(task_id="optimize", inlets=[SILVER_EVENTS],
          doc_md="`lakecep run optimize`: clusters `silver.events` by (object_id, "
                 "event_time) when enough new small files piled up; otherwise does nothing.")
    def optimize(run_id: str | None = None) -> None:
        """Cluster silver by (object_id, event_time) when enough new files piled up."""
        run_lakecep_job("optimize", run_id or "manual")

    @task(task_id="queries",
          doc_md="`lakecep validate --json` (no Spark): checks the query and source files "
                 "and returns the query ids the `gold` task is mapped over. A bad file "
                 "fails this task at once, naming file:line:column.")
    def queries() -> list[str]:
        """The ids of the queries gold runs (validated)."""
        return list_queries()

    @task(task_id="gold", inlets=[SILVER_EVENTS], outlets=[GOLD_COMPLEX_EVENTS],
          map_index_template="{{ query_id }}", max_active_tis_per_dagrun=1,
          doc_md="`lakecep run gold --query <id>`, one mapped task per query (labelled with "
                 "the query id): new silver rows -> that query's complex events in "
                 "`gold.complex_events`, with its own checkpoint (exactly once per query; a "
                 "failed query is retried alone). Asset event: silver rows read, complex "
                 "events written, gold versions, the query id.")
    def gold(query: str, run_id: str | None = None, outlet_events: Any = None) -> None:
        """Silver -> gold complex events of one query (MATCH_RECOGNIZE from cep_core)."""
        from airflow.sdk import get_current_context

        get_current_context()["query_id"] = query  # type: ignore[typeddict-unknown-key]
        summary = run_lakecep_job("gold", run_id or "manual", query=query)
        publish(outlet_events, GOLD_COMPLEX_EVENTS, summary)

    @task(
        task_id="quality",
        inlets=[SILVER_EVENTS, GOLD_COMPLEX_EVENTS],
        outlets=[QUALITY_RESULTS],
        doc_md="`lakecep run quality`: Great Expectations suites over bronze, silver and "
               "gold -> `gold.quality_results` and the Data Docs. Asset event: tables "
               "validated, result rows written, versions.",
    )
    def quality(run_id: str | None = None, outlet_events: Any = None) -> None:
        """Great Expectations validations of bronze, silver and gold."""
        summary = run_lakecep_job("quality", run_id or "manual")
        publish(outlet_events, QUALITY_RESULTS, summary)

    bronze() >> silver() >> optimize() >> gold.expand(query=queries()) >> quality()


lakecep_pipeline()
