"""lakecep continuous DAG: keeps the continuous app running, restarts it, stops it.

The continuous app (`lakecep run all --continuous`) is one long-lived Spark application
running bronze, silver and gold as concurrent streaming queries (processing-time trigger
`trigger_interval`; docs/architecture.md, "Continuous mode"). This DAG supervises it; it
does not run it inside a task.

Every 5 minutes its one task, `supervise`, runs `lakecep supervise --json` in a child
process (`supervise_continuous` in `lakecep_tasks.py`), which reads the app's pid file and
heartbeat under `$LAKECEP_HOME/run/` (plain files, no Spark) and

* **starts** the app when it does not run: detached (its own session, so it outlives the
  task), output appended to `$LAKECEP_HOME/run/continuous.log`;
* **restarts** it when its process died (a kill, a crash, a failed query) or its heartbeat
  is older than `stale_after` seconds (a hung driver: the app's main loop rewrites it every
  few seconds); a restart continues from the checkpoints, nothing lost or duplicated. The
  task fails (red in the grid) when the app had failed with an error, after restarting it;
* does nothing while it runs and its heartbeat is fresh, or after a stop on request.

Params: `action` = `supervise` (default: the above), `stop` (SIGTERM: every query stops
after its running micro-batch; killed after `stop_timeout` seconds; it stays stopped until
`start`), `start` (supervise, and start it even after a stop on request); `stale_after`
seconds (default 300). `airflow dags trigger lakecep_continuous -c '{"action": "stop"}'`
stops it; `lakecep stop` does the same from a shell.

The batch DAG `lakecep_pipeline` stays for backfills: its bronze, silver and gold tasks
refuse to run while the app runs (they share its checkpoints); stop the app first.
Quality is not part of the app: `lakecep run quality` runs beside it.

This file only wires the task, so nothing heavy (pyspark, pandas, delta, cep_core,
lakecep.jobs) is imported when Airflow parses it.
"""

from __future__ import annotations

from datetime import timedelta

from airflow.sdk import CronTriggerTimetable, Param, dag, task

from lakecep.dags.lakecep_tasks import DAG_DEFAULTS, supervise_continuous


@dag(
    dag_id="lakecep_continuous",
    schedule=CronTriggerTimetable("*/5 * * * *", timezone="UTC"),
    tags=["lakecep", "continuous"],
    doc_md=__doc__,
    params={
        "action": Param("supervise", enum=["supervise", "stop", "start"],
                        description="supervise: start / restart when needed; stop: stop the "
                                    "app (it stays stopped); start: supervise, and start it "
                                    "even after a stop"),
        "stale_after": Param(300, type="integer", minimum=1,
                             description="restart when the heartbeat is older (seconds)"),
        "stop_timeout": Param(180, type="integer", minimum=0,
                              description="seconds a stop waits before killing the app"),
    },
    dagrun_timeout=timedelta(minutes=10),
    default_args={"owner": "lakecep", "retries": 0,
                  "execution_timeout": timedelta(minutes=5)},
    **DAG_DEFAULTS,
)
def lakecep_continuous() -> None:
    @task(task_id="supervise",
          doc_md="`lakecep supervise --json` (or `lakecep stop` with `action = stop`): starts "
                 "the continuous app if it does not run, restarts it if it died or its "
                 "heartbeat ($LAKECEP_HOME/run/continuous.json) is stale, stops it on "
                 "request. Returns what was done (action, reason, pid).")
    def supervise(params: dict | None = None) -> dict:
        """Start, restart or stop the continuous app, as the params say."""
        p = params or {}
        return supervise_continuous(str(p.get("action", "supervise")),
                                    float(p.get("stale_after", 300)),
                                    float(p.get("stop_timeout", 180)))

    supervise()


lakecep_continuous()
