"""lakecep demo DAG: generate synthetic landing data on demand; the pipeline reacts to it.

Manual only. Its one task writes JSON-lines files with ``lakecep generate`` and emits an
asset event for ``lakecep://landing/events``; ``lakecep_pipeline`` is scheduled on that
Asset (besides its 15-minute timetable), so a demo run starts the pipeline right away.
"""

from __future__ import annotations

import shlex

# The Asset the pipeline is scheduled on and the interpreter rule of the jobs, shared with
# the other DAGs (dags/ is on sys.path when Airflow parses a DAG file).
import sys
from datetime import UTC, datetime
from pathlib import Path as _Path

from airflow.sdk import Param, dag, task

# Assets and the job runner live in dags/lakecep_tasks.py, shared by the DAGs. Airflow
# puts dags/ on sys.path when it parses a DAG file; a plain DagBag does not.
if str(_Path(__file__).resolve().parent) not in sys.path:
    sys.path.insert(0, str(_Path(__file__).resolve().parent))

from lakecep_tasks import LANDING_EVENTS, REPO_ROOT, lakecep_python

DOC_MD = """
# lakecep demo

Trigger this DAG (optionally with `events` and `seed`) to write a synthetic data set into
the landing folder of `$LAKECEP_HOME` with `lakecep generate`. On success it emits an asset
event for `lakecep://landing/events`, which triggers `lakecep_pipeline` (if unpaused).
"""


@dag(
    dag_id="lakecep_demo",
    schedule=None,
    start_date=datetime(2026, 1, 1, tzinfo=UTC),
    catchup=False,
    max_active_runs=1,
    tags=["lakecep", "demo"],
    doc_md=DOC_MD,
    params={
        "events": Param(2000, type="integer", minimum=1, description="events to generate"),
        "seed": Param(7, type="integer", description="random seed (same seed, same data)"),
    },
    default_args={"owner": "lakecep", "retries": 0},
)
def lakecep_demo() -> None:
    @task.bash(task_id="generate", outlets=[LANDING_EVENTS], cwd=str(REPO_ROOT))
    def generate(params: dict | None = None) -> str:
        """Write landing files with ``lakecep generate --events N --seed S``."""
        params = params or {}
        args = [
            lakecep_python(),
            "-m",
            "lakecep.cli",
            "generate",
            "--events",
            str(int(params.get("events", 2000))),
            "--seed",
            str(int(params.get("seed", 7))),
        ]
        return shlex.join(args)

    generate()


lakecep_demo()
