"""Typed views (lakecep.typed_views): which views a lake gets, the types of their columns,
and their SQL run for real in DuckDB over text-valued maps (the Spark side: the card
example's integration test)."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

import pytest

from lakecep import typed_views
from lakecep.queries import LiveArchiveQuery, PatternQuery, UncertainQuery, WindowQuery
from lakecep.validation import measure_types

duckdb = pytest.importorskip("duckdb")

COLUMNS = {"object_id": "string", "event_time": "timestamp", "amount": "double",
           "merchant": "string", "antenna": "bigint", "event_id": "string"}


def statement(measures: str) -> str:
    return ("SELECT * FROM events MATCH_RECOGNIZE (PARTITION BY object_id ORDER BY event_time "
            f"MEASURES {measures} ONE ROW PER MATCH PATTERN (A B) "
            "DEFINE A AS amount < 2, B AS amount > 500)")


def test_measure_types_follow_the_columns_and_functions() -> None:
    text = statement("A.amount AS amt, FIRST(A.event_time) AS t0, COUNT(*) AS n, "
                     "B.amount - A.amount AS gap, LAST(B.merchant) AS shop, "
                     "MAX(B.antenna) AS ant, A.amount > 1 AS small, MATCH_NUMBER() AS mn, "
                     "CAST(A.antenna AS VARCHAR) AS txt, NULL AS nothing")
    assert measure_types(text, COLUMNS) == [
        ("amt", "double"), ("t0", "timestamp"), ("n", "bigint"), ("gap", "double"),
        ("shop", "string"), ("ant", "bigint"), ("small", "boolean"), ("mn", "bigint"),
        ("txt", "string"), ("nothing", "string")]


def pattern(id_: str, measures: str, **kw: object) -> PatternQuery:
    return PatternQuery(id=id_, version="1", description="", query=statement(measures),
                        attributes=(("amount", "double"), ("merchant", "string")), **kw)


def test_views_of_a_lake_one_per_query_but_windows() -> None:
    base = pattern("probe", "A.amount AS amount, B.event_time AS at, MATCH_NUMBER() AS "
                   "match_number")
    chained = PatternQuery(
        id="twice", version="1", description="", inputs=("probe",),
        attributes=(("amount", "double"),),
        query=statement("A.amount AS first_amount, B.start_time AS second_start")
        .replace("A AS amount < 2, B AS amount > 500", "A AS amount > 0, B AS amount > 0"))
    uncertain = UncertainQuery(id="fuzzy", version="1", description="", query=statement(
        "A.event_id AS a_id").replace("PATTERN (A B)", "PATTERN (A B) UNCERTAIN TIME BETWEEN "
                                      "time_lower AND time_upper"))
    live = LiveArchiveQuery(id="both", version="1", description="", key="object_id",
                            live=statement("A.amount AS amount, A.event_time AS t"),
                            archive=statement("COUNT(*) AS amount"),
                            before=timedelta(hours=1),
                            attributes=(("amount", "double"),))
    window = WindowQuery(id="win", version="1", description="", attribute="amount",
                         aggregates=("sum",), window=timedelta(minutes=5))
    found = {v.name: v for v in typed_views.views([base, chained, uncertain, live, window], [])}
    assert set(found) == {"silver.events_typed", "matches.probe", "matches.twice",
                          "matches.fuzzy", "matches.both"}
    # RFID's built-in attributes are typed; a gold column's name is not shadowed.
    assert found["silver.events_typed"].columns == (("antenna", "bigint"), ("rssi", "double"))
    assert found["matches.probe"].columns == (("amount", "double"), ("at", "timestamp"))
    assert found["matches.twice"].columns == (("first_amount", "double"),
                                              ("second_start", "timestamp"))
    assert found["matches.both"].columns == (("amount", "bigint"), ("t", "timestamp"))
    assert (found["matches.fuzzy"].table, found["matches.fuzzy"].current_only) == (
        "gold.probabilistic_events", False)
    assert "superseded_version IS NULL" in found["matches.probe"].sql()


def test_the_view_sql_reads_typed_values_back_in_duckdb() -> None:
    con = duckdb.connect(":memory:")
    con.execute("SET TimeZone = 'UTC'")
    con.execute('CREATE SCHEMA gold; CREATE TABLE gold.complex_events (query_id VARCHAR, '
                'superseded_version BIGINT, measures MAP(VARCHAR, VARCHAR))')
    con.execute("INSERT INTO gold.complex_events VALUES "
                "('probe', NULL, MAP {'amount': '612.5', 'at': '2026-01-12T10:00:00', "
                "'n': '3', 'ok': 'True', 'who''s': 'x'}), "
                "('probe', 4, MAP {'amount': '1.0', 'at': '2026-01-12T09:00:00', 'n': '1', "
                "'ok': 'False', 'who''s': 'y'}), "
                "('other', NULL, MAP {'amount': '7.0'})")
    view = typed_views.View("matches.probe", "gold.complex_events", "measures",
                            (("amount", "double"), ("at", "timestamp"), ("n", "bigint"),
                             ("ok", "boolean"), ("who's", "string")), "probe", True)
    con.execute("CREATE SCHEMA matches")
    con.execute(view.create(typed_views.duckdb_quote))
    rows = con.execute('SELECT amount, "at", n, ok, "who\'s" FROM matches.probe').fetchall()
    assert rows == [(612.5, datetime(2026, 1, 12, 10), 3, True, "x")]


def test_the_shipped_card_query_gets_a_typed_view(tmp_path: Path) -> None:
    from lakecep.config import load_settings
    from lakecep.queries import QUERIES_DIR

    cards = QUERIES_DIR / "examples" / "cards"
    settings = load_settings({"LAKECEP_HOME": str(tmp_path),
                              "LAKECEP_QUERIES_DIR": str(cards),
                              "LAKECEP_SOURCES_DIR": str(cards / "sources")})
    views = typed_views.lake_views(settings, ["gold.complex_events"])
    assert [v.name for v in views] == ["matches.card_fraud"]
    assert dict(views[0].columns)["big_amount"] == "double"
    before = typed_views.fingerprint(settings)
    assert len(before) == 16
    # a query that does not load: no views (`lakecep validate` says why), no exception
    broken = tmp_path / "queries"
    broken.mkdir()
    (broken / "bad.toml").write_text('id = "bad"\nkind = "pattern"\n')
    bad = load_settings({"LAKECEP_HOME": str(tmp_path), "LAKECEP_QUERIES_DIR": str(broken)})
    assert typed_views.lake_views(bad, ["gold.complex_events", "silver.events"]) == []
    assert typed_views.fingerprint(bad) != before
