"""lakecep demo DAG: generate synthetic landing data on demand; the pipeline reacts to it.

Manual only. Its one task writes JSON-lines files with ``lakecep generate`` and emits an
asset event for ``lakecep://landing/events``; ``lakecep_pipeline`` is scheduled on that
Asset (besides its 15-minute timetable), so a demo run starts the pipeline right away.
"""

from __future__ import annotations

import os
import shlex
import sys
from datetime import UTC, datetime
from pathlib import Path

from airflow.sdk import Asset, Param, dag, task

REPO_ROOT = Path(__file__).resolve().parent.parent
LANDING_EVENTS = Asset("lakecep://landing/events")  # same URI as in lakecep_pipeline.py

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
        python = os.environ.get("LAKECEP_PYTHON_BIN") or (
            str(REPO_ROOT / ".venv" / "bin" / "python")
            if (REPO_ROOT / ".venv" / "bin" / "python").exists()
            else sys.executable
        )
        args = [
            python,
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
