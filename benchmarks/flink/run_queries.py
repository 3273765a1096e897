"""Run MATCH_RECOGNIZE queries in Apache Flink SQL at parallelism 1 (the peer of
``benchmarks/engine_suite.py`` and of ``tests/differential/test_vs_flink.py``).

Runs in the separate Flink virtualenv made by ``benchmarks/flink/setup.sh`` (PyFlink 2.x on
JDK 17), never in the project venv:

    ~/.cache/lakecep/flink-venv/bin/python benchmarks/flink/run_queries.py spec.json

``spec.json``: ``{"input": csv, "columns": [[name, SQL type], ...], "queries": [{"output":
dir, "match": "PATTERN ... DEFINE ..."}, ...]}``. The input is a headerless CSV whose first
two columns are ``key`` (STRING, the partition) and ``ts`` (BIGINT epoch milliseconds,
non-decreasing in file order: the rowtime; the watermark allows one second of delay, so
no row is late). Every query is
``PARTITION BY key ORDER BY rowtime MEASURES FIRST(ts) AS start_ts, LAST(ts) AS end_ts
ONE ROW PER MATCH <match>`` and writes ``key,start_ts,end_ts`` CSV part files into its
output directory. All queries run as ONE job (a statement set: one JVM, one source scan
per query). Prints a JSON line with the setup and job seconds.
"""

from __future__ import annotations

import argparse
import json
import time


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("spec")
    args = ap.parse_args()
    with open(args.spec) as f:
        spec = json.load(f)
    t0 = time.perf_counter()
    from pyflink.table import EnvironmentSettings, TableEnvironment

    env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    conf = env.get_config()
    conf.set("parallelism.default", "1")
    conf.set("table.exec.resource.default-parallelism", "1")
    cols = ", ".join(f"`{name}` {kind}" for name, kind in spec["columns"])
    env.execute_sql(f"""
        CREATE TABLE src ({cols},
          rowtime AS TO_TIMESTAMP_LTZ(ts, 3),
          WATERMARK FOR rowtime AS rowtime - INTERVAL '1' SECOND
        ) WITH ('connector' = 'filesystem', 'path' = '{spec["input"]}', 'format' = 'csv')""")
    statements = env.create_statement_set()
    for i, query in enumerate(spec["queries"]):
        env.execute_sql(f"""
            CREATE TABLE out{i} (`key` STRING, start_ts BIGINT, end_ts BIGINT)
            WITH ('connector' = 'filesystem', 'path' = '{query["output"]}',
                  'format' = 'csv')""")
        statements.add_insert_sql(f"""
            INSERT INTO out{i}
            SELECT `key`, start_ts, end_ts FROM src MATCH_RECOGNIZE (
              PARTITION BY `key` ORDER BY rowtime
              MEASURES FIRST(ts) AS start_ts, LAST(ts) AS end_ts
              ONE ROW PER MATCH
              {query["match"]}
            )""")
    t1 = time.perf_counter()
    statements.execute().wait()
    t2 = time.perf_counter()
    print(json.dumps({"setup_s": round(t1 - t0, 3), "job_s": round(t2 - t1, 3)}), flush=True)


if __name__ == "__main__":
    main()
