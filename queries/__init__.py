"""The shipped query definitions, one ``*.toml`` per query (package data; ``examples/``
holds the stock and uncertain examples).

Installed as ``lakecep.shipped_queries``; ``lakecep.queries.QUERIES_DIR`` is this folder.
See docs/queries.md.
"""
