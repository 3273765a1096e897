"""jobs.quality: GX 1.x suites validated on real Spark DataFrames of real Delta tables.

The module writes small lake tables (good rows plus deliberately broken ones) at the
session's settings paths, runs ``run_quality`` once for all tables (module fixture) and
checks report, ``gold.quality_results`` rows, idempotency, Data Docs, skipping and
``fail_on_error``. Tables that existed before the module are moved aside and restored
afterwards; everything this module wrote is removed.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from lakecep import schemas
from lakecep.jobs import quality

pytestmark = pytest.mark.spark

RUN_ID = "test-quality-run-1"
T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
LAKE_TABLES = tuple(dict.fromkeys((*quality.TABLES, quality.RESULTS_TABLE)))


def ts(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


# What each table contains and which expectations it breaks (with the unexpected count).
BRONZE = [
    ('{"event_id": "e1"}', "f1.jsonl", 1, 18, ts(0), "ok", None),
    ('{"event_id": "e2"}', "f1.jsonl", 2, 18, ts(0), "ok", None),
    ("{not json", "f1.jsonl", 3, 9, ts(0), "malformed_json", "not valid JSON"),
    ("", "f1.jsonl", 4, 0, ts(0), "empty_line", None),
    ("x" * 10, "f1.jsonl", 5, 70000, ts(0), "oversized", None),
    ("???", "f1.jsonl", 6, 3, ts(0), "garbled", None),  # BROKEN: unknown parse_status
]
SILVER = [
    # event_id, object_id, event_type, source_id, event_time, time_lower, time_upper, pmf,
    # attributes, source_file, line_no, ingest_time, silver_time
    ("e1", "o1", "enter", "s1", ts(1), None, None, None, {"k": "v"}, "f1.jsonl", 1, ts(0), ts(5)),
    ("e2", "o1", "leave", "s1", ts(2), ts(1), None, [0.5, 0.5], None, "f1.jsonl", 2, ts(0), ts(5)),
    ("e3", "o2", "enter", "s2", ts(3), ts(2), ts(4), None, None, "f2.jsonl", 1, ts(0), ts(5)),
    # BROKEN: inverted uncertainty interval (time_lower > time_upper)
    ("e4", "o2", "leave", "s2", ts(4), ts(9), ts(3), None, None, "f2.jsonl", 2, ts(0), ts(5)),
    # BROKEN: e1 a second time (silver must be unique per event_id -> 2 unexpected rows)
    ("e1", "o1", "enter", "s1", ts(1), None, None, None, None, "f3.jsonl", 1, ts(0), ts(5)),
]
QUARANTINE = [
    ("{not json", "f1.jsonl", 3, ts(0), "malformed_json", ts(5)),
    ('{"x": 1}', "f2.jsonl", 7, ts(0), "missing_field: event_id", ts(5)),
]
DUPLICATES = [
    ("e1", "f1.jsonl", 9, ts(0), ts(5)),
    ("e2", "f2.jsonl", 9, ts(0), ts(5)),
]
GOLD = [
    # query_id, query_version, match_id, partition_key, match_number, start_time, end_time,
    # measures, live_event_ids, archive_event_ids, history_version, strategy, probability,
    # detection_time, detection_latency_ms, batch_id, superseded_version, rule_hash
    ("q1", "v1", "m1", "o1", 1, ts(1), ts(2), {"n": "2"}, ["e1", "e2"], [], 3, "batch", None,
     ts(6), 10, 0, None, "h1"),
    ("q1", "v1", "m2", "o2", 2, ts(3), None, None, ["e3"], None, None, "lazy", 0.25, ts(6), 10,
     0, None, "h1"),
    # BROKEN: probability outside [0, 1]
    ("q2", "v1", "m1", "o1", 1, ts(1), ts(4), None, ["e1"], None, None, "lazy", 1.5, ts(6), 10,
     0, None, "h2"),
    # BROKEN: (q1, m1) emitted twice -> 2 unexpected rows; a row from an older release (no
    # rule_hash)
    ("q1", "v1", "m1", "o1", 1, ts(1), ts(2), None, ["e1", "e2"], [], 3, "batch", None,
     ts(7), 20, 1, 5, None),
]
# The other gold tables: rows as their jobs write them (the suites must pass on them) ...
PROBABILISTIC = [
    ("u1", "v1", "m1", "o1", ["A", "B"], ["e1", "e2"], 0.75, ts(1), ts(3), {"n": "2"}, "dp",
     None, 3, 0, ts(6), "h3"),
    # a partition that could not be evaluated: no probability, no bounds
    ("u1", "v1", "m2", "o2", [], [], None, None, None, None, "dp", "pmf does not fit", 3, 0,
     ts(6), "h3"),
]
ALERTS = [
    # alert_id, query_id, query_version, partition_key, start_time, end_time, measures,
    # batch_id, created_time, delivered_time, attempts, last_error, rule_hash
    ("m1", "q1", "v1", "o1", ts(1), ts(2), {"n": "2"}, 0, ts(3), ts(3), 1, None, "h1"),
    ("m9", "q1", "v1", "o2", ts(1), ts(2), {"n": "1"}, 1, ts(4), None, 2, "HTTP 503", "h1"),
]
RULE_RUNS = [
    # query_id, fingerprint, batch_id, from_version, to_version, bootstrap, changes,
    # keys_recomputed, keys_total, complex_events, superseded, restored, seconds, run_time
    ("c1", "f1", 0, None, 3, True, 0, 4, 4, 2, 0, 0, 0.5, ts(3)),
    ("c1", "f1", 1, 3, 6, False, 3, 2, 4, 1, 1, 0, 0.4, ts(4)),
]
RULE_DEPLOYMENTS = [
    # stream, query_id, old_hash, new_hash, strategy, batch_id, m_d, deployed_at
    ("gold_complex_events", "q1", None, "h1", "initial", 0, None, ts(3)),
    ("gold_complex_events", "q1", "h1", "h2", "warm", 2, ts(2), ts(5)),
]
ALERT_SNAPSHOTS = [
    # alert_id, query_id, partition_key, event_id, object_id, event_type, source_id,
    # event_time, ingest_time, attributes, role, snapshot_version, batch_id, created_time
    ("m1", "q1", "o1", "e0", "o1", "read", "A", ts(0), ts(0), {}, "before", 3, 0, ts(3)),
    ("m1", "q1", "o1", "e1", "o1", "read", "B", ts(1), ts(1), {}, "match", 3, 0, ts(3)),
]
WINDOW_OUTPUTS = [
    ("w1", "v1", "o1", "time", ts(0), ts(10), 0, "count", 2.0, 2, 0, ts(10), 0, ts(11), "h4"),
    ("w1", "v1", "o1", "time", ts(0), ts(10), 0, "count", 3.0, 3, 1, ts(12), 1, ts(13), "h4"),
]
WINDOW_STATE = [
    ("w1", "f1", -1, 1, '{"watermark": 10}', None, ts(13)),
    ("w1", "f1", 0, 1, "{}", "{}", ts(13)),
]
OPERATOR_STATE = [("cards", 3, '{"counts": {"pending": 1}}', None, ts(6))]
PARTIAL_MATCHES = [
    ("la1", "f1", "hot", 0, "", None, bytearray(b"x"), 1, 2, 0, 3, ts(6), None),
    ("la1", "f1", "key", 0, "o1", 1000, None, None, None, 0, 3, ts(6), ["m1"]),
    # match_state's 'query' row of a pattern query with expired keys: bucket -1
    ("p1", "f2", "query", -1, "", 2000, None, None, None, 0, 3, ts(6), None),
]
ARCHIVE_ACCESS = [
    ("la1", "v1", 0, 3, "llaa", "llaa", 2, 2, 0, 10, 0, 1, 4, 10, 1, 0, 2, 0, 2, 0, 0, 0.5, ts(6)),
    # ... except: BROKEN: 5 Delta files read of a version that has 4
    ("la1", "v1", 1, 4, "ollaa", "auto: live first", 1, 1, 1, 5, 5, 5, 4, 5, 0, 1, 0, 0, 0, 0,
     0, 0.4, ts(7)),
]
ACQUISITION_PLANS = [
    ("aq1", "v1", 0, 3, "s1", "plan", "cheapest plan", "{a} -> {b}", True, 2, 1.0, None, 2,
     600.0, 10.0, "[6.0, 4.0]", 9, "[6, 3]", 3, 2, 4, "[1, 1]", 1, 0.3, ts(6)),
]
STATISTICS = [
    ("s1", ts(5), 3, ts(0), ts(4), "arrival_rate", None, "event_type", "enter", 0.5, 2, 4.0,
     0.8, 1.1, None),
    ("s1", ts(5), 3, ts(0), ts(4), "selectivity", "q1", "live", "*", 0.1, 10, None, None, None,
     None),
]
ALLOCATIONS = [
    (1, ts(6), "s1", "q1", "A", 0.5, 0.001, 400.0, 0.6, 0.99, 1.0, 0.0, 0.0, "q1", 1000, 0.98,
     0.97, "two streams"),
    (1, ts(6), "s1", "q1", "B", 0.2, 0.001, 266.0, 0.4, 0.95, 1.0, 0.0, 0.0, "q1", 1000, None,
     None, "two streams"),
]
QUALITY_RESULTS = [  # an earlier run's results
    ("earlier-run", "silver.events", "silver.events", "expect_column_values_to_be_unique",
     "event_id", False, 5, 2, '{"unexpected_percent": 40.0}', ts(0)),
    ("earlier-run", "bronze.events", "bronze.events", "expect_table_row_count_to_be_between",
     None, True, 6, None, '{"observed_value": 6}', ts(0)),
]
DATA = {
    "bronze.events": BRONZE,
    "silver.events": SILVER,
    "silver.quarantine": QUARANTINE,
    "silver.duplicates": DUPLICATES,
    "silver.operator_state": OPERATOR_STATE,
    "gold.complex_events": GOLD,
    "gold.rule_runs": RULE_RUNS,
    "gold.rule_deployments": RULE_DEPLOYMENTS,
    "gold.alerts": ALERTS,
    "gold.alert_snapshots": ALERT_SNAPSHOTS,
    "gold.probabilistic_events": PROBABILISTIC,
    "gold.window_outputs": WINDOW_OUTPUTS,
    "gold.window_state": WINDOW_STATE,
    "gold.partial_matches": PARTIAL_MATCHES,
    "gold.archive_access": ARCHIVE_ACCESS,
    "gold.acquisition_plans": ACQUISITION_PLANS,
    "gold.statistics": STATISTICS,
    "gold.allocations": ALLOCATIONS,
    "gold.quality_results": QUALITY_RESULTS,
}
#: (table, expectation, column) -> unexpected_count of every expectation the data breaks.
EXPECTED_FAILURES = {
    ("bronze.events", "expect_column_values_to_be_in_set", "parse_status"): 1,
    ("silver.events", "expect_column_values_to_be_unique", "event_id"): 2,
    ("silver.events", "expect_column_pair_values_a_to_be_greater_than_b",
     "time_upper,time_lower"): 1,
    ("gold.complex_events", "expect_compound_columns_to_be_unique", "query_id,match_id"): 2,
    ("gold.complex_events", "expect_column_values_to_be_between", "probability"): 1,
    ("gold.archive_access", "expect_column_pair_values_a_to_be_greater_than_b",
     "delta_files_total,delta_files_read"): 1,
}


def suite_size(table: str) -> int:
    return len(json.loads(quality.suite_path(table).read_text())["expectations"])


@pytest.fixture(scope="module")
def lake(spark, settings, tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:  # noqa: ANN001
    """Write the test tables; move pre-existing ones aside and restore them afterwards."""
    backup = tmp_path_factory.mktemp("quality_backup")
    moved: dict[Path, Path] = {}
    owned = [settings.table_path(t) for t in LAKE_TABLES]
    owned += [quality.data_docs_dir(settings), settings.home / "gx"]
    for i, path in enumerate(owned):
        if path.exists():
            moved[path] = backup / f"{i}_{path.name}"
            shutil.move(path, moved[path])
    try:
        for table, rows in DATA.items():
            (
                spark.createDataFrame(rows, schemas.ddl(table))
                .coalesce(1)
                .write.format("delta")
                .mode("overwrite")
                .option("overwriteSchema", "true")
                .save(str(settings.table_path(table)))
            )
        yield settings
    finally:
        for path in owned:
            shutil.rmtree(path, ignore_errors=True)
        for path, saved in moved.items():
            shutil.move(saved, path)


@pytest.fixture(scope="module")
def report(spark, lake):  # noqa: ANN001, ANN201
    return quality.run_quality(spark, lake, run_id=RUN_ID)


def results(spark, settings, run_id: str):  # noqa: ANN001, ANN201
    path = str(settings.table_path(quality.RESULTS_TABLE))
    return spark.read.format("delta").load(path).where(f"run_id = '{run_id}'").collect()


# --- suites (GX API, no data) ------------------------------------------------------------


@pytest.mark.parametrize("table", quality.TABLES)
def test_suite_loads_with_gx_and_matches_the_ddl(table: str) -> None:
    suite = quality.load_suite(table)
    assert suite.name == table
    assert len(suite.expectations) == suite_size(table)  # nothing silently dropped
    ddl_columns = schemas.columns(table)
    for expectation in suite.expectations:
        kwargs = expectation.configuration.kwargs
        referenced = [kwargs.get("column"), kwargs.get("column_A"), kwargs.get("column_B")]
        referenced += kwargs.get("column_list") or []
        assert {c for c in referenced if c} <= set(ddl_columns), expectation.expectation_type
        if expectation.expectation_type == "expect_table_columns_to_match_set":
            assert sorted(kwargs["column_set"]) == sorted(ddl_columns)


def test_suites_agree_with_the_jobs_contracts() -> None:
    from lakecep.events import REASON_CODES
    from lakecep.jobs.bronze import PARSE_STATUSES

    bronze = json.loads(quality.suite_path("bronze.events").read_text())
    (in_set,) = [e for e in bronze["expectations"]
                 if e["type"] == "expect_column_values_to_be_in_set"]
    assert sorted(in_set["kwargs"]["value_set"]) == sorted(PARSE_STATUSES)
    quarantine = json.loads(quality.suite_path("silver.quarantine").read_text())
    regexes = [e["kwargs"]["regex"] for e in quarantine["expectations"]
               if e["type"] == "expect_column_values_to_match_regex"]
    assert "^[a-z_]+" in regexes
    strict = re.compile(next(r for r in regexes if r != "^[a-z_]+"))
    assert all(strict.search(code) and strict.search(f"{code}: detail") for code in REASON_CODES)
    assert not strict.search("Malformed") and not strict.search("no_such_code")


def value_set(table: str, column: str) -> list[str]:
    suite = json.loads(quality.suite_path(table).read_text())
    (entry,) = [e for e in suite["expectations"] if e["type"] ==
                "expect_column_values_to_be_in_set" and e["kwargs"]["column"] == column]
    return sorted(entry["kwargs"]["value_set"])


def test_gold_value_sets_agree_with_the_writing_code() -> None:
    """The value sets of the gold suites are the constants the jobs write from."""
    import inspect

    from cep_core.live_archive.spec import STRATEGIES
    from lakecep.jobs import reload, snapshots, statistics
    from lakecep.queries import ACQUISITIONS, UNCERTAIN_METHODS, WindowQuery

    assert value_set("gold.archive_access", "strategy") == sorted(STRATEGIES)
    assert value_set("gold.acquisition_plans", "acquisition") == sorted(ACQUISITIONS)
    assert value_set("gold.probabilistic_events", "method") == sorted(UNCERTAIN_METHODS)
    assert value_set("gold.quality_results", "table_name") == sorted(quality.TABLES)
    assert value_set("gold.alert_snapshots", "role") == sorted(snapshots.ROLES)
    assert value_set("gold.rule_deployments", "strategy") == sorted(reload.STRATEGIES)
    # statistics rows are made by _row("<kind>", ...); window kinds are WindowQuery.mode's
    kinds = set(re.findall(r'_row\("(\w+)"', inspect.getsource(statistics)))
    assert value_set("gold.statistics", "kind") == sorted(kinds)
    modes = set(re.findall(r'"(\w+)"', inspect.getsource(WindowQuery.mode.fget)))
    assert value_set("gold.window_outputs", "window_kind") == sorted(modes)
    # every table of the DDL has a suite, and is validated by default
    assert set(quality.TABLES) == set(schemas.tables())
    for table in quality.TABLES:
        suite = json.loads(quality.suite_path(table).read_text())
        first, second = suite["expectations"][:2]
        assert first["type"] == "expect_table_columns_to_match_set", table
        assert first["kwargs"]["exact_match"] is True, table
        assert second == {"type": "expect_table_row_count_to_be_between",
                          "kwargs": {"min_value": 0}, "meta": second["meta"]}, table
        assert all(e.get("meta", {}).get("why") for e in suite["expectations"]), table


def test_a_broken_suite_file_is_named(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    bad = {"name": "silver.events", "expectations": [
        {"type": "expect_column_values_to_not_be_null", "kwargs": {"column": "event_id"}},
        {"type": "expect_column_values_to_be_uniqe", "kwargs": {"column": "event_id"}},
    ]}
    (tmp_path / "silver.events.json").write_text(json.dumps(bad))
    monkeypatch.setattr(quality, "EXPECTATIONS_DIR", tmp_path)
    with pytest.raises(quality.SuiteError, match=r"silver\.events\.json: expectation #1"):
        quality.load_suite("silver.events")


# --- a real run on Spark -----------------------------------------------------------------


def test_failures_are_exactly_the_broken_expectations(report) -> None:  # noqa: ANN001
    assert set(report.tables) == set(quality.TABLES)
    assert not report.skipped
    assert not report.success
    failures = {}
    for table, outcome in report.tables.items():
        assert outcome.evaluated == suite_size(table)
        assert outcome.row_count == len(DATA[table])
        for line in outcome.failures:
            failures[table, line.split("(")[0]] = line
    expected_keys = {(table, exp) for table, exp, _ in EXPECTED_FAILURES}
    assert set(failures) == expected_keys
    for (table, expectation, column), count in EXPECTED_FAILURES.items():
        assert f"{expectation}({column}): unexpected_count={count} " in failures[table, expectation]
    assert report.tables["silver.quarantine"].success
    assert report.tables["silver.duplicates"].success
    assert report.tables["bronze.events"].failed == 1
    assert report.tables["silver.events"].failed == 2
    assert report.tables["gold.complex_events"].failed == 2
    assert report.tables["gold.archive_access"].failed == 1
    assert all(report.tables[t].success for t in DATA if t not in {
        "bronze.events", "silver.events", "gold.complex_events", "gold.archive_access"})
    text = str(report)
    assert "FAILED" in text and "unexpected_count=2" in text and "garbled" in text


def test_results_table_has_one_row_per_expectation(spark, settings, report) -> None:  # noqa: ANN001
    rows = results(spark, settings, RUN_ID)
    assert len(rows) == sum(suite_size(t) for t in quality.TABLES) == report.results_written
    path = str(settings.table_path(quality.RESULTS_TABLE))
    assert spark.read.format("delta").load(path).columns == schemas.columns(quality.RESULTS_TABLE)
    failed = {(r.table_name, r.expectation, r.column_name): r.unexpected_count
              for r in rows if not r.success}
    assert failed == EXPECTED_FAILURES
    by_key = {(r.table_name, r.expectation, r.column_name): r for r in rows}
    unique = by_key["silver.events", "expect_column_values_to_be_unique", "event_id"]
    assert unique.element_count == len(SILVER) and unique.suite == "silver.events"
    assert '"e1"' in unique.observed  # the offending values are quoted
    rowcount = by_key["bronze.events", "expect_table_row_count_to_be_between", None]
    assert rowcount.success and json.loads(rowcount.observed)["observed_value"] == len(BRONZE)
    assert all(r.validated_at is not None and r.suite == r.table_name for r in rows)


def test_rerunning_a_run_id_does_not_duplicate(spark, settings, report) -> None:  # noqa: ANN001
    before = sorted((r.table_name, r.expectation, str(r.column_name)) for r in
                    results(spark, settings, RUN_ID))
    again = quality.run_quality(spark, settings, run_id=RUN_ID, tables=["silver.duplicates"])
    assert again.success and again.results_written == suite_size("silver.duplicates")
    after = results(spark, settings, RUN_ID)
    assert sorted((r.table_name, r.expectation, str(r.column_name)) for r in after) == before
    # the re-run replaced (not kept) the earlier rows of that table
    stamps = {r.validated_at for r in after if r.table_name == "silver.duplicates"}
    first = {r.validated_at for r in after if r.table_name == "silver.quarantine"}
    assert min(stamps) > max(first)


def test_data_docs_show_the_validations(report, settings) -> None:  # noqa: ANN001
    index = quality.data_docs_dir(settings) / "index.html"
    assert report.data_docs_index == index and index.is_file()
    html = index.read_text()
    for table in quality.TABLES:
        assert table in html
    assert RUN_ID in html
    pages = list((index.parent / "validations").rglob("*.html"))
    assert len(pages) >= len(quality.TABLES)
    silver_page = next(p for p in pages if "silver.events" in str(p))
    assert "expect_column_values_to_be_unique" in silver_page.read_text() or \
        "values must be unique" in silver_page.read_text()


REMOTE = re.compile(r"""(?:src|href)\s*=\s*["']?\s*(?:https?:)?//""", re.I)


def test_data_docs_work_offline(report, settings) -> None:  # noqa: ANN001
    """No page loads anything from the internet, and the index shows the validation results
    in its HTML (GX fills those tables with bootstrap-table from a CDN)."""
    site = quality.data_docs_dir(settings)
    pages = sorted(site.rglob("*.html"))
    assert len(pages) >= len(quality.TABLES) + 1, pages  # validations (+ suites), index
    for page in pages:
        html = page.read_text()
        tags = re.findall(r"<(?:script|link|img)\b[^>]*>", html, re.I)
        assert tags and not [t for t in tags if REMOTE.search(t)], page
        assert not re.search(r"url\(\s*['\"]?\s*(?:https?:)?//", html), page
        assert "bootstrapTable" not in html and "$(" not in html and "vegaEmbed" not in html, page
        assert 'id="lakecep-offline-style"' in html, page
    index = (site / "index.html").read_text()
    results = index.split('class="table table-sm lakecep-offline-table"')[1].split("</table>")[0]
    rows = re.findall(r"<tr>(.*?)</tr>", results, re.S)
    text = [re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", r)) for r in rows]
    assert "Status" in text[0] and "Run Name" in text[0]  # the header row
    ours = [t for t in text if RUN_ID in t]
    assert {table for table in quality.TABLES if any(f" {table} " in t for t in ours)} == \
        set(quality.TABLES)
    # each row links to its validation page, which exists
    for link in set(re.findall(r'href="(validations/[^"]+)"', results)):
        assert (site / link).is_file(), link
    assert quality.make_data_docs_offline(site) == 0  # idempotent: nothing left to rewrite


CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium"
                                        if Path("/usr/bin/chromium").exists() else None)


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium binary (infra/bootstrap.sh installs it)")
def test_data_docs_render_offline_in_chromium(report, settings) -> None:  # noqa: ANN001
    """Headless Chromium (as tests/unit/test_report_browser.py launches it): the index and a
    validation page load only file:// URLs, log no console error, show their results."""
    from playwright.sync_api import sync_playwright

    args = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync"]
    index = quality.data_docs_dir(settings) / "index.html"
    page_path = report.tables["silver.events"].data_docs_page
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=args,
                                             timeout=60_000)
        try:
            context = browser.new_context()
            requests: list[str] = []
            errors: list[str] = []
            context.on("request", lambda request: requests.append(request.url))
            page = context.new_page()
            page.on("console", lambda m: m.type == "error" and errors.append(m.text))
            page.on("pageerror", lambda error: errors.append(str(error)))

            page.goto(index.as_uri(), wait_until="load")
            table = page.locator("table.lakecep-offline-table").first
            assert table.is_visible()
            assert table.locator("tbody tr").count() >= len(quality.TABLES)
            assert RUN_ID in table.inner_text() and "silver.events" in table.inner_text()
            assert table.locator("tbody tr a", has_text="silver.events").first.is_visible()

            page.goto(page_path.as_uri(), wait_until="load")
            body = page.locator("body").inner_text()
            assert "event_id" in body and "unique" in body
            tables = page.locator("table")
            assert tables.count() > 0 and tables.first.is_visible()
            # GX's "hide succeeded" button works without jQuery (our plain-JS stand-in)
            hidden = "() => lakecepSucceededTargets().filter(e => e.style.display == 'none')" \
                ".length"
            page.get_by_text("Failed Only").first.click()
            assert page.evaluate(hidden) > 0  # silver.events has passing expectations
            page.get_by_text("Show All").first.click()
            assert page.evaluate(hidden) == 0
        finally:
            browser.close()
    assert requests and all(url.startswith("file://") for url in requests), requests
    assert errors == []


def test_missing_tables_are_skipped(spark, settings, report, tmp_path: Path) -> None:  # noqa: ANN001
    gold = settings.table_path("gold.complex_events")
    shutil.move(gold, tmp_path / "gold")
    try:
        skipped = quality.run_quality(
            spark, settings, run_id="test-quality-skip", tables=["gold.complex_events"],
            fail_on_error=True,
        )
    finally:
        shutil.move(tmp_path / "gold", gold)
    assert skipped.success and not skipped.tables
    assert "does not exist" in skipped.skipped["gold.complex_events"]
    assert "skip" in str(skipped) and skipped.results_written == 0
    assert results(spark, settings, "test-quality-skip") == []


def test_fail_on_error_names_the_failed_expectation(spark, settings, report) -> None:  # noqa: ANN001
    with pytest.raises(quality.QualityError) as info:
        quality.run_quality(spark, settings, run_id="test-quality-fail",
                            tables=["bronze.events"], fail_on_error=True)
    message = str(info.value)
    assert "bronze.events: expect_column_values_to_be_in_set(parse_status)" in message
    assert "unexpected_count=1" in message
    assert not info.value.report.success
    # results are still recorded before raising
    assert len(results(spark, settings, "test-quality-fail")) == suite_size("bronze.events")


def test_an_expectation_with_action_fail_fails_the_job(spark, settings, report,  # noqa: ANN001
                                                       monkeypatch: pytest.MonkeyPatch,
                                                       tmp_path: Path) -> None:
    suite = json.loads(quality.suite_path("bronze.events").read_text())
    for entry in suite["expectations"]:
        if entry["type"] == "expect_column_values_to_be_in_set":  # fails on this lake
            entry["meta"] = {**entry.get("meta", {}), "action": "fail"}
    (tmp_path / "bronze.events.json").write_text(json.dumps(suite))
    monkeypatch.setattr(quality, "EXPECTATIONS_DIR", tmp_path)
    with pytest.raises(quality.QualityError) as info:
        quality.run_quality(spark, settings, run_id="test-quality-action",
                            tables=["bronze.events"])
    listed = [line for line in str(info.value).splitlines() if line.startswith("  - ")]
    assert listed == ["  - bronze.events: expect_column_values_to_be_in_set(parse_status): "
                      + listed[0].split("(parse_status): ", 1)[1]]
    assert info.value.report.gating == [listed[0][4:]]
    assert len(results(spark, settings, "test-quality-action")) == suite_size("bronze.events")
    # an unknown action is refused when the suite loads
    suite["expectations"][0]["meta"] = {"action": "drop"}
    (tmp_path / "bronze.events.json").write_text(json.dumps(suite))
    with pytest.raises(quality.SuiteError, match=r"meta.action 'drop' is not one of warn, fail"):
        quality.load_suite("bronze.events")


def test_unknown_table_is_rejected(spark, settings) -> None:  # noqa: ANN001
    with pytest.raises(quality.SuiteError, match="no expectation suite for bronze.nope"):
        quality.run_quality(spark, settings, run_id="x", tables=["bronze.nope"])
