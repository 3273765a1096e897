"""MATCH_RECOGNIZE from Spark (lakecep.spark): the DataFrame API against cep_core on the same
rows (differential, hypothesis), ``sql()`` over a Delta table with time travel and outer
clauses run by Spark, and errors raised on the driver before any job.

Kept cheap (the suite must stay fast): each hypothesis example is ONE Spark action that
unions every query shape's result as JSON text."""

from __future__ import annotations

import json
import math
from datetime import datetime, timedelta
from functools import reduce
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cep_core
from cep_core import QueryError
from lakecep import spark as lspark

pytestmark = pytest.mark.spark

SCHEMA = "k1 string, k2 bigint, t bigint, ts timestamp, v double"
BASE = datetime(2026, 1, 1)

SHAPES = [
    # ONE ROW PER MATCH, PARTITION BY two keys (NULLs among them), typed measures
    "SELECT * FROM x MATCH_RECOGNIZE (PARTITION BY k1, k2 ORDER BY t MEASURES FIRST(A.t) AS s,"
    " LAST(B.ts) AS last_ts, COUNT(*) AS n, SUM(B.v) AS total, MATCH_NUMBER() AS mn,"
    " CLASSIFIER() AS cls, LAST(B.v) - FIRST(A.v) AS drop_by PATTERN (A B+)"
    " DEFINE B AS v < PREV(v))",
    # ALL ROWS PER MATCH, running measures, overlapping matches
    "SELECT * FROM x MATCH_RECOGNIZE (PARTITION BY k1 ORDER BY t MEASURES RUNNING COUNT(*) AS n,"
    " AVG(v) AS av, CLASSIFIER() AS cls ALL ROWS PER MATCH AFTER MATCH SKIP TO NEXT ROW"
    " PATTERN (A B* C) DEFINE B AS v >= PREV(v), C AS v < PREV(v))",
    # no PARTITION BY (one sequence), outer SELECT with an alias and ORDER BY
    "SELECT e AS ending, s FROM x MATCH_RECOGNIZE (ORDER BY t MEASURES FIRST(A.t) AS s,"
    " LAST(B.t) AS e PATTERN (A+ B) DEFINE A AS v IS NULL OR v < 2, B AS v >= 2) ORDER BY s",
    # ALL ROWS WITH UNMATCHED ROWS, alternation, NULL keys
    "SELECT * FROM x MATCH_RECOGNIZE (PARTITION BY k2 ORDER BY t MEASURES MATCH_NUMBER() AS mn,"
    " CLASSIFIER() AS cls ALL ROWS PER MATCH WITH UNMATCHED ROWS PATTERN (A | B{2})"
    " DEFINE A AS v = 0, B AS v > 2)",
]

rows_strategy = st.lists(
    st.tuples(st.sampled_from(["a", "b", None]), st.sampled_from([1, 2, None]),
              st.one_of(st.none(), st.integers(0, 4).map(float))),
    min_size=0, max_size=24,
).flatmap(lambda rows: st.permutations(list(range(len(rows)))).map(
    lambda order: [(k1, k2, t, BASE + timedelta(minutes=t), v)
                   for (k1, k2, v), t in zip(rows, order, strict=True)]))


def _canonical(value: Any) -> Any:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    if value is pd.NaT:
        return None
    if isinstance(value, pd.Timestamp | datetime):
        return pd.Timestamp(value).strftime("%Y-%m-%d %H:%M:%S")
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float):
        return round(float(value), 9)
    return value


def _as_records(frame: pd.DataFrame) -> list[tuple]:
    return sorted((tuple(_canonical(v) for v in row) for row in frame.itertuples(index=False)),
                  key=repr)


def _spark_json(shape: int, frame):  # noqa: ANN001, ANN202
    from pyspark.sql import functions as F
    from pyspark.sql.types import TimestampType

    cells = [F.date_format(F.col(f.name), "yyyy-MM-dd HH:mm:ss").alias(f"c{i}")
             if isinstance(f.dataType, TimestampType) else F.col(f.name).alias(f"c{i}")
             for i, f in enumerate(frame.schema.fields)]
    row = F.to_json(F.array(F.struct(*cells)), {"ignoreNullFields": "false"}) if cells \
        else F.lit("[{}]")
    return frame.select(F.lit(shape).alias("shape"), row.alias("row"))


@settings(max_examples=3, deadline=None, suppress_health_check=list(HealthCheck))
@given(rows=rows_strategy)
def test_same_matches_as_cep_core_on_the_same_rows(spark, rows) -> None:  # noqa: ANN001
    df = spark.createDataFrame(rows, SCHEMA)
    pdf = pd.DataFrame(rows, columns=["k1", "k2", "t", "ts", "v"])
    pdf["k2"] = pdf["k2"].astype("float64")  # what Arrow gives for a bigint with NULLs
    results = [lspark.match_recognize(df, q, buckets=3) for q in SHAPES]
    union = reduce(lambda a, b: a.unionByName(b),
                   (_spark_json(i, r) for i, r in enumerate(results)))
    got: dict[int, list[tuple]] = {i: [] for i in range(len(SHAPES))}
    for shape, text in union.collect():
        got[shape].append(tuple(_canonical(v) for v in json.loads(text)[0].values()))
    for i, query in enumerate(SHAPES):
        expected = cep_core.match_recognize(query, {"x": pdf})
        assert results[i].columns == [str(c) for c in expected.columns], query
        assert sorted(got[i], key=repr) == _as_records(expected), query


def test_output_schema_and_types_from_the_query(spark) -> None:  # noqa: ANN001
    df = spark.createDataFrame([], SCHEMA + ", price decimal(10,2), ok boolean")
    one = lspark.match_recognize(df, (
        "SELECT * FROM x MATCH_RECOGNIZE (PARTITION BY k2, K1 ORDER BY t MEASURES "
        "FIRST(A.ts) AS start_ts, COUNT(*) AS n, AVG(v) AS av, SUM(price) AS total, "
        "LAST(ok) AS ok, CAST(A.t AS VARCHAR) AS label, B.v > A.v AS up, NULL AS nothing, "
        "LAST(B.ts) - FIRST(A.ts) AS took PATTERN (A B) DEFINE B AS v > PREV(v))"),
        types={"nothing": "int"})
    assert [(f.name, f.dataType.simpleString()) for f in one.schema.fields] == [
        ("k2", "bigint"), ("k1", "string"), ("start_ts", "timestamp"), ("n", "bigint"),
        ("av", "double"), ("total", "decimal(38,2)"), ("ok", "boolean"), ("label", "string"),
        ("up", "boolean"), ("nothing", "int"), ("took", "interval day to second")]
    every = lspark.match_recognize(df, "MATCH_RECOGNIZE (PARTITION BY k1 ORDER BY t MEASURES "
                                       "MATCH_NUMBER() AS mn ALL ROWS PER MATCH PATTERN (A))")
    assert every.columns == ["k1", "t", "mn", "k2", "ts", "v", "price", "ok"]


def test_invalid_queries_fail_on_the_driver_before_any_job(spark) -> None:  # noqa: ANN001
    df = spark.createDataFrame([], SCHEMA)
    context = spark.sparkContext
    context.setJobGroup("lakecep-spark-errors", "errors")
    try:
        cases = [
            ("MATCH_RECOGNIZE (ORDER BY t PATTERN (A) DEFINE A AS nope > 1)", "unknown column"),
            ("MATCH_RECOGNIZE (PARTITION BY missing ORDER BY t PATTERN (A))", "unknown column"),
            ("MATCH_RECOGNIZE (ORDER BY t PATTERN (A B DEFINE A AS v > 1)", "unexpected"),
            ("MATCH_RECOGNIZE (ORDER BY t MEASURES A.v AS m PATTERN (A))", None),
            ("MATCH_RECOGNIZE (ORDER BY t MEASURES A.v * 2 AS V ALL ROWS PER MATCH "
             "PATTERN (A))", "two columns named 'v'"),
        ]
        for query, message in cases:
            if message is None:
                with pytest.raises(QueryError, match="not measures"):
                    lspark.match_recognize(df, query, types={"x": "int"})
                continue
            with pytest.raises(QueryError, match=message) as caught:
                lspark.match_recognize(df, query)
            assert "py4j" not in str(caught.value).lower()
            assert caught.value.query == query
        assert list(context.statusTracker().getJobIdsForGroup("lakecep-spark-errors")) == []
    finally:
        context.setLocalProperty("spark.jobGroup.id", None)


def test_sql_over_a_delta_table_with_time_travel_join_and_group_by(spark, tmp_path: Path) -> None:  # noqa: ANN001
    path = tmp_path / "ticks"
    first = [("a", 1, 10.0), ("a", 2, 8.0), ("a", 3, 6.0), ("b", 1, 5.0), ("b", 2, 4.0)]
    spark.createDataFrame(first, "sym string, t bigint, price double") \
        .write.format("delta").save(str(path))
    spark.createDataFrame([("a", 4, 1.0), ("b", 3, 9.0), ("b", 4, 2.0)],
                          "sym string, t bigint, price double") \
        .write.format("delta").mode("append").save(str(path))
    spark.createDataFrame([("a", "Alpha"), ("b", "Beta")], "sym string, name string") \
        .createOrReplaceTempView("names")
    clause = f"""FROM delta.`{path}` VERSION AS OF {{version}} MATCH_RECOGNIZE (
            PARTITION BY sym ORDER BY t
            MEASURES FIRST(A.price) AS top, LAST(B.price) AS bottom, COUNT(B.*) AS steps
            PATTERN (A B+) DEFINE B AS price < PREV(price)
        ) AS m JOIN names n ON n.sym = m.sym
        WHERE m.top - m.bottom > 1
        GROUP BY n.name"""
    # Two clauses (each version of the table) in one statement: one Spark action.
    statement = (f"SELECT 0 AS version, n.name, count(*) AS falls, max(m.steps) AS longest "
                 f"-- MATCH_RECOGNIZE (\n{clause.format(version=0)}\nUNION ALL\n"
                 f"SELECT 1, n.name, count(*), max(m.steps) {clause.format(version=1)}\n"
                 "ORDER BY version, name")
    found = [tuple(r) for r in lspark.sql(spark, statement).collect()]
    # version 0: b falls by 1 only; version 1: a falls further, b falls from 9 to 2
    assert found == [(0, "Alpha", 1, 2), (1, "Alpha", 1, 3), (1, "Beta", 1, 1)]
    with pytest.raises(QueryError) as caught:
        lspark.sql(spark, statement.replace("PREV(price)", "PREV(nope)"))
    assert caught.value.query.endswith("ORDER BY version, name")
    assert caught.value.line == 5
    assert "nope" in caught.value.query.splitlines()[4][caught.value.column - 1:]


@pytest.mark.slow
def test_lakecep_sql_command_runs_match_recognize(spark, tmp_path: Path) -> None:  # noqa: ANN001
    """The real command: its own session, lake tables registered by name, JSON lines out."""
    import subprocess

    from lakecep_testing import clean_env, lakecep_python

    from lakecep.config import load_settings

    local = load_settings({"LAKECEP_HOME": str(tmp_path)})
    reads = [("t1", "A", 1), ("t1", "B", 2), ("t1", "C", 3), ("t2", "A", 1), ("t2", "C", 2)]
    spark.createDataFrame(reads, "object_id string, source_id string, seq bigint") \
        .write.format("delta").save(str(local.table_path("silver.events")))
    env = {**clean_env(), "LAKECEP_HOME": str(tmp_path)}
    statement = ("SELECT object_id, last_seq FROM silver.events MATCH_RECOGNIZE ("
                 "PARTITION BY object_id ORDER BY seq MEASURES C.seq AS last_seq "
                 "PATTERN (A B C) DEFINE A AS source_id = 'A', B AS source_id = 'B', "
                 "C AS source_id = 'C') WHERE last_seq > 0")
    command = [lakecep_python(), "-m", "lakecep.jobs.cli", "sql", "--format", "json"]
    ok = subprocess.run([*command, statement], env=env, capture_output=True, text=True,
                        timeout=600)
    assert ok.returncode == 0, ok.stderr[-3000:]
    assert [json.loads(line) for line in ok.stdout.splitlines()] == [
        {"object_id": "t1", "last_seq": 3}]
