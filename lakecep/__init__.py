"""lakecep: the pipeline around cep_core.

This folder holds the pipeline's pure code (settings, query definitions, the tuned
configuration, the event contract check, the data generators); it never imports Spark nor
the packages above it -- except ``lakecep.spark``, the public Spark API (MATCH_RECOGNIZE
on Spark DataFrames and in ``lakecep sql``), which sits on the jobs' floor. The
repository's other folders install under this namespace (pyproject ``package-dir``):
``lakecep.schemas`` (schemas/), ``lakecep.jobs`` (jobs/: the Spark adapters and the CLI),
``lakecep.dags`` (dags/), and the package data ``lakecep.expectations`` and
``lakecep.shipped_queries``. The engine is ``cep_core``. See docs/architecture.md.
"""

__version__ = "0.1.0"
