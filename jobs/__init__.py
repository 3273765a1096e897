"""Spark jobs (installed as ``lakecep.jobs``): thin adapters that move DataFrames between
Delta tables and cep_core, one module per job (each with ``run(spark, settings, *,
run_id=None, continuous=False)``), and the ``lakecep`` command line that runs them
(:mod:`lakecep.jobs.cli`). The modules import each other relatively and stand on the pure
pipeline code in ``lakecep`` (settings, query definitions, tuned configuration)."""
