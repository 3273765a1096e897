"""lakecep maintenance DAG: the housekeeping a long-running lake needs, once a day.

One task, `maintain`, runs `lakecep run maintain --run-id <Airflow run id> --json` in a
child process (`run_lakecep_job` in `lakecep_tasks.py`). On every lake table it

1. **checks** the configured retention (`vacuum_retention`, `log_retention`) against the
   longest time travel the configured queries need (`lakecep replay` horizons, acquisition
   plans' window + latency) and the pipeline's `max_stream_lag`; a shorter retention fails
   the task with one line naming the query, its horizon and the setting to raise, before
   anything is touched;
2. **sets** `delta.deletedFileRetentionDuration` / `delta.logRetentionDuration` to it;
3. **compacts** (Delta OPTIMIZE, bin-packing) a table holding `compact_min_files` or more
   small files (streaming appends leave one per micro-batch); `silver.events` is clustered
   by the pipeline's `optimize` task instead;
4. **VACUUMs** it: data files no version within the retention references are deleted.

The task log and its run summary give, per table, files before / after and files vacuumed.
The job writes no new rows, so the task has no outlet (no asset event).

Schedule: daily at 03:30 UTC (no catch-up, one run at a time). It may overlap a pipeline
run: VACUUM keeps every file a running stream or batch may read (that is what the
retention check guarantees), and a MERGE that meets a concurrent OPTIMIZE of its table
fails and is retried by its task (the jobs are idempotent). Details: docs/architecture.md,
"Housekeeping".

This file only wires the task, so nothing heavy (pyspark, pandas, delta, cep_core,
lakecep.jobs) is imported when Airflow parses it.
"""

from __future__ import annotations

from airflow.sdk import CronTriggerTimetable, dag, task

from lakecep.dags.lakecep_tasks import SCHEDULED_DAG_DEFAULTS, run_lakecep_job


@dag(
    dag_id="lakecep_maintenance",
    schedule=CronTriggerTimetable("30 3 * * *", timezone="UTC"),
    tags=["lakecep", "maintenance"],
    doc_md=__doc__,
    **SCHEDULED_DAG_DEFAULTS,
)
def lakecep_maintenance() -> None:
    @task(task_id="maintain",
          doc_md="`lakecep run maintain`: checks the Delta retention against the queries' "
                 "time-travel horizons (fails in one line when it is shorter), sets it on "
                 "every table, compacts tables with many small files and VACUUMs them. "
                 "The log's run summary: files before -> after, files vacuumed.")
    def maintain(run_id: str | None = None) -> None:
        """Retention check, small-file compaction and VACUUM of every lake table."""
        run_lakecep_job("maintain", run_id or "manual")

    maintain()


lakecep_maintenance()
