"""Workload (a) in Apache Flink SQL MATCH_RECOGNIZE, parallelism 1 (the peer benchmark).

Runs in the separate Flink virtualenv made by ``benchmarks/flink/setup.sh`` (PyFlink 2.x on
JDK 17), never in the project venv:

    ~/.cache/lakecep/flink-venv/bin/python benchmarks/flink/match_recognize.py \
        --input ticks.csv --output out_dir

Input: headerless CSV ``symbol,ts,price`` with ``ts`` in epoch milliseconds, strictly
increasing per symbol (the rowtime attribute is derived from it; the watermark allows one
second of delay, so no row is dropped as late). Output: the matches as CSV part files in
``out_dir`` (``symbol,start_ts,bottom_ts,end_ts,start_price,bottom_price,end_price``).

Flink does not allow a greedy quantifier as the last element of a pattern, so the peer
query (the same text runs on lakecep in ``benchmarks/engine_vs_flink.py``) closes the
``UP+`` run with a ``STOP`` row: ``PATTERN (STRT DOWN+ UP+ STOP)``. Flink also rejects
physical offsets (``PREV(x)`` is "Flink does not support physical offsets within
partition"), so "the previous row" is written with logical offsets: the previous row of the
same variable, or the last row of the variable before it (matches are contiguous, so this
is the same row as ``PREV``).
"""

from __future__ import annotations

import argparse
import time

FLINK_QUERY = """
INSERT INTO found
SELECT symbol, start_ts, bottom_ts, end_ts, start_price, bottom_price, end_price
FROM ticks MATCH_RECOGNIZE (
  PARTITION BY symbol ORDER BY rowtime
  MEASURES STRT.ts AS start_ts, LAST(DOWN.ts) AS bottom_ts, LAST(UP.ts) AS end_ts,
           STRT.price AS start_price, LAST(DOWN.price) AS bottom_price,
           LAST(UP.price) AS end_price
  ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW
  PATTERN (STRT DOWN+ UP+ STOP)
  DEFINE DOWN AS (LAST(DOWN.price, 1) IS NULL AND DOWN.price < STRT.price)
                 OR DOWN.price < LAST(DOWN.price, 1),
         UP AS (LAST(UP.price, 1) IS NULL AND UP.price > LAST(DOWN.price))
               OR UP.price > LAST(UP.price, 1),
         STOP AS STOP.price <= LAST(UP.price)
)"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--input", required=True)
    ap.add_argument("--output", required=True)
    args = ap.parse_args()
    t0 = time.perf_counter()
    from pyflink.table import EnvironmentSettings, TableEnvironment

    env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    conf = env.get_config()
    conf.set("parallelism.default", "1")
    conf.set("table.exec.resource.default-parallelism", "1")
    env.execute_sql(f"""
        CREATE TABLE ticks (
          symbol STRING, ts BIGINT, price DOUBLE,
          rowtime AS TO_TIMESTAMP_LTZ(ts, 3),
          WATERMARK FOR rowtime AS rowtime - INTERVAL '1' SECOND
        ) WITH ('connector' = 'filesystem', 'path' = '{args.input}', 'format' = 'csv')""")
    env.execute_sql(f"""
        CREATE TABLE found (
          symbol STRING, start_ts BIGINT, bottom_ts BIGINT, end_ts BIGINT,
          start_price DOUBLE, bottom_price DOUBLE, end_price DOUBLE
        ) WITH ('connector' = 'filesystem', 'path' = '{args.output}', 'format' = 'csv')""")
    t1 = time.perf_counter()
    env.execute_sql(FLINK_QUERY).wait()
    t2 = time.perf_counter()
    print(f"flink setup {t1 - t0:.2f}s job {t2 - t1:.2f}s", flush=True)


if __name__ == "__main__":
    main()
