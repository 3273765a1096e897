"""lakecep demo DAG: generate synthetic landing data on demand; the pipeline reacts to it.

Manual only. Trigger it (optionally with `events` and `seed`) to write a synthetic data set
of JSON-lines files into the landing folder of `$LAKECEP_HOME` with `lakecep generate`. On
success it emits an asset event for `lakecep://landing/events`; `lakecep_pipeline` is
scheduled on that Asset (besides its 15-minute timetable), so a demo run starts the pipeline
right away (if unpaused).
"""

from __future__ import annotations

from typing import Any

from airflow.sdk import Param, dag, task

from lakecep.dags.lakecep_tasks import DAG_DEFAULTS, LANDING_EVENTS, generate_landing


@dag(
    dag_id="lakecep_demo",
    schedule=None,
    tags=["lakecep", "demo"],
    doc_md=__doc__,
    params={
        "events": Param(2000, type="integer", minimum=1, description="events to generate"),
        "seed": Param(7, type="integer", description="random seed (same seed, same data)"),
    },
    default_args={"owner": "lakecep", "retries": 0},
    **DAG_DEFAULTS,
)
def lakecep_demo() -> None:
    @task(task_id="generate", outlets=[LANDING_EVENTS],
          doc_md="`lakecep generate --events N --seed S --json` in `$LAKECEP_HOME`: writes "
                 "synthetic JSON-lines files to the landing folder (and the ground truth). "
                 "Asset event: lines and files written, the landing folder.")
    def generate(params: dict | None = None, outlet_events: Any = None) -> None:
        """Write landing files with ``lakecep generate --events N --seed S``."""
        params = params or {}
        extra = generate_landing(int(params.get("events", 2000)), int(params.get("seed", 7)))
        outlet_events[LANDING_EVENTS].extra = extra

    generate()


lakecep_demo()
