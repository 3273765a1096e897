"""lakecep demo DAG: generate synthetic landing data on demand; the pipeline reacts to it.

Manual only. Trigger it (optionally with `events` and `seed`) to write a synthetic data set
of JSON-lines files into the landing folder of `$LAKECEP_HOME` with `lakecep generate`. On
success it emits an asset event for `lakecep://landing/events`; `lakecep_pipeline` is
scheduled on that Asset (besides its 15-minute timetable), so a demo run starts the pipeline
right away (if unpaused).
"""

from __future__ import annotations

import shlex

from airflow.sdk import Param, dag, task

from lakecep.dags.lakecep_tasks import DAG_DEFAULTS, LANDING_EVENTS, REPO_ROOT, lakecep_python


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
    @task.bash(task_id="generate", outlets=[LANDING_EVENTS], cwd=str(REPO_ROOT))
    def generate(params: dict | None = None) -> str:
        """Write landing files with ``lakecep generate --events N --seed S``."""
        params = params or {}
        args = [
            lakecep_python(),
            "-m",
            "lakecep.jobs.cli",
            "generate",
            "--events",
            str(int(params.get("events", 2000))),
            "--seed",
            str(int(params.get("seed", 7))),
        ]
        return shlex.join(args)

    generate()


lakecep_demo()
