"""Great Expectations suites, one ``<layer.table>.json`` per lake table (package data).

Installed as ``lakecep.expectations``; read through ``importlib.resources`` by
``lakecep.jobs.quality``. See docs/quality.md.
"""
