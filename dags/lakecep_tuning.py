"""lakecep tuning DAG: measure the workload, then compute and publish a tuned configuration.

The tuning loop of issue 6: measure the workload the pipeline sees, compute an allocation
from the measurements, and hand the gold job a new configuration. Each task runs
`lakecep run <job> --run-id <Airflow run id>` in a child process.

```
statistics ──▶ tune
```

* `statistics` runs `lakecep run statistics`; reads `lakecep://silver/events` and
  `lakecep://gold/complex_events`; writes Delta `gold.statistics`
  (outlet `lakecep://gold/statistics`).
* `tune` runs `lakecep run tune`; reads `lakecep://gold/statistics`; writes
  `$LAKECEP_HOME/tuning/config-vN.json` + `fairscheduler-vN.xml` and Delta
  `gold.allocations` (outlet `lakecep://tuning/config`).

**`statistics`** measures, per time window: the arrival rate of each event type and source
with a Poisson dispersion test (`kind = arrival_rate`, with its `p_value`); the selectivity
of each pattern and of each of its sub-patterns (prefixes); `p(E_i+1 | E_i)` and the largest
gap between consecutive pattern events; the match ratio; and the processing cost per stream.

**`tune`** computes the allocation of the deadline-aware model (seed 002,
`cep_core.allocation`: per-stream capacity shares so that matches are on time and in order),
checks it with the discrete-event simulator (`cep_core.simulator`), and writes version N+1
of the tuned configuration (`config-vN.json`: the statistics run it came from, per-query
settings, and the gold job's `max_files_per_trigger` and Spark fair-scheduler pool weights;
`fairscheduler-vN.xml`: those pools) and the allocation's rows in `gold.allocations`.

The gold job reads the newest `config-vN.json` when it starts (its log says
`tuned configuration vN`), so the next `lakecep_pipeline` run uses it.

Schedule: hourly (`0 * * * *` UTC, no catch-up, one run at a time) and whenever
`lakecep_pipeline` updates `lakecep://gold/complex_events`.

This file only wires tasks: each task runs `python -m lakecep.jobs.cli run <job> --run-id <id>`
in a child process (`run_lakecep_job` in `lakecep_tasks.py`), so nothing heavy (pyspark,
pandas, numpy, scipy, cep_core, lakecep.jobs) is imported when Airflow parses this file.
"""

from __future__ import annotations

from typing import Any

from airflow.sdk import AssetOrTimeSchedule, CronTriggerTimetable, dag, task

from lakecep.dags.lakecep_tasks import (
    GOLD_COMPLEX_EVENTS,
    SCHEDULED_DAG_DEFAULTS,
    SILVER_EVENTS,
    STATISTICS,
    TUNED_CONFIG,
    publish,
    run_lakecep_job,
)


@dag(
    dag_id="lakecep_tuning",
    # Hourly, and as soon as the pipeline's gold task announces new complex events (an
    # asset event on GOLD_COMPLEX_EVENTS).
    schedule=AssetOrTimeSchedule(
        timetable=CronTriggerTimetable("0 * * * *", timezone="UTC"),
        assets=[GOLD_COMPLEX_EVENTS],
    ),
    tags=["lakecep", "tuning"],
    doc_md=__doc__,
    **SCHEDULED_DAG_DEFAULTS,
)
def lakecep_tuning() -> None:
    @task(
        task_id="statistics",
        inlets=[SILVER_EVENTS, GOLD_COMPLEX_EVENTS],
        outlets=[STATISTICS],
        doc_md="`lakecep run statistics`: measures silver and gold per time window (arrival "
               "rates with a dispersion test, selectivities, gaps, match ratio, cost per "
               "stream) -> `gold.statistics`. Asset event: events measured, rows written, "
               "versions.",
    )
    def statistics(run_id: str | None = None, outlet_events: Any = None) -> None:
        """Silver + gold -> gold.statistics (rates, selectivities, gaps, match ratio, costs)."""
        summary = run_lakecep_job("statistics", run_id or "manual")
        publish(outlet_events, STATISTICS, summary)

    @task(task_id="tune", inlets=[STATISTICS], outlets=[TUNED_CONFIG],
          doc_md="`lakecep run tune`: computes the allocation from the newest statistics, "
                 "checks it with the simulator, writes `tuning/config-vN.json` (applied by "
                 "the next gold run) and `gold.allocations`. Asset event: rows written, "
                 "versions, the config version in `note`.")
    def tune(run_id: str | None = None, outlet_events: Any = None) -> None:
        """gold.statistics -> allocation -> tuning/config-vN.json and gold.allocations."""
        summary = run_lakecep_job("tune", run_id or "manual")
        publish(outlet_events, TUNED_CONFIG, summary)

    statistics() >> tune()


lakecep_tuning()
