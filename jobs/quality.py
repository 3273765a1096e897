"""Data-quality step: Great Expectations (GX Core 1.x) suites run on the lake's Spark DataFrames.

For every lake table (``bronze.events`` ... ``gold.quality_results``, :data:`TABLES`) the suite
``expectations/<table>.json`` is validated directly on the Delta table's Spark DataFrame
(GX Spark data source -> dataframe asset -> whole-dataframe batch definition -> checkpoint).
Per expectation one row goes to the Delta table ``gold.quality_results`` (idempotent per
``run_id``), and GX Data Docs are built into ``<reports>/data_docs/index.html`` (made to
work offline: :func:`make_data_docs_offline`).

    from lakecep.jobs.quality import run_quality
    report = run_quality(spark, settings, run_id="2026-11-22T10:00")
    print(report)                  # readable summary; report.success is the overall flag

Heavy imports (great_expectations, pyspark, delta) happen inside the functions, so importing
this module is cheap. See docs/quality.md for the suites, the layout and the caveats.
"""

from __future__ import annotations

import json
import re
import time
import warnings
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib.resources import files
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from great_expectations.core import ExpectationSuite
    from great_expectations.data_context import AbstractDataContext
    from pyspark.sql import SparkSession

    from lakecep.config import Settings

#: The tables validated by default, in pipeline order.
TABLES: tuple[str, ...] = (
    "bronze.events",
    "silver.events",
    "silver.quarantine",
    "silver.duplicates",
    "silver.operator_state",
    "gold.complex_events",
    "gold.rule_runs",
    "gold.rule_deployments",
    "gold.alerts",
    "gold.alert_snapshots",
    "gold.probabilistic_events",
    "gold.window_outputs",
    "gold.window_state",
    "gold.partial_matches",
    "gold.archive_access",
    "gold.acquisition_plans",
    "gold.statistics",
    "gold.allocations",
    "gold.quality_results",  # earlier runs' results (validated before this run's are written)
)
RESULTS_TABLE = "gold.quality_results"
#: The suites: the repository's ``expectations/`` folder, installed as the package data
#: ``lakecep.expectations``.
EXPECTATIONS_DIR = Path(str(files("lakecep.expectations")))
#: Name of the GX Data Docs site (a local folder, ``<reports>/data_docs``).
DOCS_SITE = "lakecep_data_docs"
_DATASOURCE = "lakecep_lake"
_OBSERVED_MAX_CHARS = 2000


class QualityError(RuntimeError):
    """Raised by ``run_quality`` when an expectation with ``meta.action = fail`` failed, or
    with ``fail_on_error=True`` when any expectation failed."""

    def __init__(self, report: QualityReport, failures: list[str] | None = None) -> None:
        self.report = report
        lines = [f"data quality failed for run {report.run_id!r}:"]
        lines += [f"  - {failure}" for failure in (report.failures if failures is None
                                                   else failures)]
        if report.data_docs_index:
            lines.append(f"Data Docs: {report.data_docs_index}")
        super().__init__("\n".join(lines))


class SuiteError(ValueError):
    """An expectation suite file is missing or invalid (the message names the file)."""


@dataclass
class TableResult:
    """Outcome of one table's suite."""

    table: str
    suite: str
    success: bool
    evaluated: int
    failed: int
    #: Row count seen by the validation (from ``expect_table_row_count_to_be_between``).
    row_count: int | None = None
    #: One readable line per failed expectation.
    failures: list[str] = field(default_factory=list)
    #: The failed expectations whose ``meta.action`` is ``fail`` (a subset of ``failures``).
    gating: list[str] = field(default_factory=list)
    seconds: float = 0.0
    #: This validation's page in the Data Docs site.
    data_docs_page: Path | None = None


@dataclass
class QualityReport:
    """What ``run_quality`` returns (and the CLI prints)."""

    run_id: str
    tables: dict[str, TableResult] = field(default_factory=dict)
    #: Tables that were not validated, with the reason (e.g. the table does not exist yet).
    skipped: dict[str, str] = field(default_factory=dict)
    data_docs_index: Path | None = None
    results_table: Path | None = None
    results_written: int = 0

    @property
    def success(self) -> bool:
        """True when every validated table passed its suite (skipped tables don't count)."""
        return all(t.success for t in self.tables.values())

    @property
    def evaluated(self) -> int:
        return sum(t.evaluated for t in self.tables.values())

    @property
    def failed(self) -> int:
        return sum(t.failed for t in self.tables.values())

    @property
    def failures(self) -> list[str]:
        """``table: expectation(column) ...`` for every failed expectation."""
        return [f"{t.table}: {f}" for t in self.tables.values() for f in t.failures]

    @property
    def gating(self) -> list[str]:
        """Like :attr:`failures`, for the failed expectations with ``meta.action = fail``."""
        return [f"{t.table}: {f}" for t in self.tables.values() for f in t.gating]

    def __str__(self) -> str:
        status = "PASSED" if self.success else "FAILED"
        lines = [
            f"Data quality run {self.run_id!r}: {status} - "
            f"{self.evaluated - self.failed}/{self.evaluated} expectations passed on "
            f"{len(self.tables)} table(s), {len(self.skipped)} skipped"
        ]
        for t in self.tables.values():
            mark = "ok  " if t.success else "FAIL"
            rows = "?" if t.row_count is None else str(t.row_count)
            lines.append(
                f"  {mark} {t.table:<26} {t.evaluated - t.failed:>3}/{t.evaluated:<3} passed"
                f"  rows={rows:<8} {t.seconds:5.1f}s"
            )
            lines += [f"         x {failure}" for failure in t.failures]
        for table, reason in self.skipped.items():
            lines.append(f"  skip {table:<22} {reason}")
        if self.results_table:
            lines.append(f"  results:   {self.results_table} ({self.results_written} rows)")
        if self.data_docs_index:
            lines.append(f"  data docs: {self.data_docs_index}")
        return "\n".join(lines)


# Suites -----------------------------------------------------------------------------------


def suite_path(table: str) -> Path:
    return EXPECTATIONS_DIR / f"{table}.json"


#: What a failed expectation does (its ``meta.action``): ``warn`` (default) reports it;
#: ``fail`` also fails the quality job (after results and Data Docs are written).
ACTIONS = ("warn", "fail")


def load_suite(table: str) -> ExpectationSuite:
    """Load ``expectations/<table>.json`` (GX 1.x suite JSON) as a GX ``ExpectationSuite``.

    Every entry is turned into its ``gx.expectations`` class first, so a typo in a type or a
    kwarg raises ``SuiteError`` naming the file (``ExpectationSuite(**json)`` alone would only
    log the error and silently drop that expectation).
    """
    from great_expectations.core import ExpectationSuite
    from great_expectations.expectations.expectation_configuration import (
        ExpectationConfiguration,
    )

    path = suite_path(table)
    if not path.is_file():
        raise SuiteError(f"no expectation suite for {table!r}: {path} does not exist")
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise SuiteError(f"{path}: not valid JSON: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("expectations"), list):
        raise SuiteError(f"{path}: expected an object with 'name' and a list 'expectations'")
    name = data.get("name") or table
    expectations = []
    for i, entry in enumerate(data["expectations"]):
        action = (entry.get("meta") or {}).get("action", "warn")
        if action not in ACTIONS:
            raise SuiteError(f"{path}: expectation #{i} ({entry.get('type')}): meta.action "
                             f"{action!r} is not one of {', '.join(ACTIONS)}")
        try:
            config = ExpectationConfiguration(
                type=entry["type"], kwargs=entry.get("kwargs", {}), meta=entry.get("meta")
            )
            expectations.append(config.to_domain_obj())
        except Exception as exc:  # noqa: BLE001 - re-raised with the file and index
            raise SuiteError(
                f"{path}: expectation #{i} ({entry!r:.120}) is invalid: {exc}"
            ) from None
    suite = ExpectationSuite(name=name, expectations=expectations, meta=data.get("meta"))
    if len(suite.expectations) != len(expectations):  # pragma: no cover - defensive
        raise SuiteError(f"{path}: GX dropped some expectations while building the suite")
    return suite


# GX context -------------------------------------------------------------------------------


def data_docs_dir(settings: Settings) -> Path:
    return settings.reports / "data_docs"


def _gx_context(settings: Settings) -> AbstractDataContext:
    """An ephemeral GX context: suites and data source in memory (rebuilt from
    ``expectations/*.json`` on every run), validation results persisted as JSON under
    ``<home>/gx/validations`` (so Data Docs list the history of runs), Data Docs written to
    ``<reports>/data_docs``. No usage statistics, no progress bars."""
    import great_expectations as gx
    from great_expectations.data_context.types.base import (
        DataContextConfig,
        InMemoryStoreBackendDefaults,
        ProgressBarsConfig,
    )

    defaults = InMemoryStoreBackendDefaults(init_temp_docs_sites=False)
    stores = dict(defaults.stores)
    stores[defaults.validation_results_store_name] = {
        "class_name": "ValidationResultsStore",
        "store_backend": {
            "class_name": "TupleFilesystemStoreBackend",
            "base_directory": str((settings.home / "gx" / "validations").resolve()),
        },
    }
    config = DataContextConfig(
        store_backend_defaults=defaults,
        stores=stores,
        data_docs_sites={
            DOCS_SITE: {
                "class_name": "SiteBuilder",
                "show_how_to_buttons": False,
                "store_backend": {
                    "class_name": "TupleFilesystemStoreBackend",
                    "base_directory": str(data_docs_dir(settings).resolve()),
                },
                "site_index_builder": {"class_name": "DefaultSiteIndexBuilder"},
            }
        },
        analytics_enabled=False,
        progress_bars=ProgressBarsConfig(globally=False, metric_calculations=False),
    )
    return gx.get_context(mode="ephemeral", project_config=config)


# Results ----------------------------------------------------------------------------------


def _column_of(kwargs: dict[str, Any]) -> str | None:
    if kwargs.get("column"):
        return str(kwargs["column"])
    if kwargs.get("column_list"):
        return ",".join(kwargs["column_list"])
    if kwargs.get("column_A"):
        return f"{kwargs['column_A']},{kwargs['column_B']}"
    return None


def _observed(result: dict[str, Any], exception_info: Any) -> str | None:
    observed: dict[str, Any] = {}
    if "observed_value" in result:
        observed["observed_value"] = result["observed_value"]
    for key in ("unexpected_percent", "partial_unexpected_list", "missing_count"):
        if result.get(key) not in (None, [], 0):
            observed[key] = result[key]
    # GX gives either {"raised_exception": ..., "exception_message": ...} or a dict of those
    # keyed by the metric that failed (e.g. when a column does not exist).
    infos = [exception_info] if isinstance(exception_info, dict) else []
    if infos and "raised_exception" not in exception_info:
        infos = [v for v in exception_info.values() if isinstance(v, dict)]
    messages = [str(i.get("exception_message")) for i in infos if i.get("raised_exception")]
    if messages:
        observed["exception"] = "; ".join(dict.fromkeys(messages))
    if not observed:
        return None
    text = json.dumps(observed, default=str, sort_keys=True)
    return text if len(text) <= _OBSERVED_MAX_CHARS else text[: _OBSERVED_MAX_CHARS - 3] + "..."


def _describe(
    expectation: str, column: str | None, result: dict[str, Any], observed: str | None
) -> str:
    target = f"{expectation}({column})" if column else expectation
    if result.get("unexpected_count") is not None:
        sample = result.get("partial_unexpected_list") or []
        detail = f"unexpected_count={result['unexpected_count']}"
        if result.get("element_count") is not None:
            detail += f" of {result['element_count']}"
        if sample:
            detail += f", e.g. {json.dumps(sample[:3], default=str)}"
        return f"{target}: {detail}"
    return f"{target}: {observed or 'failed'}"


def _result_rows(
    run_id: str, table: str, suite: str, validation: Any, validated_at: datetime
) -> tuple[list[tuple[Any, ...]], TableResult]:
    rows = []
    outcome = TableResult(
        table=table, suite=suite, success=bool(validation.success), evaluated=0, failed=0
    )
    for res in validation.results:
        config = res.expectation_config
        kwargs = dict(config.kwargs)
        result = dict(res.result or {})
        column = _column_of(kwargs)
        observed = _observed(result, res.exception_info)
        success = bool(res.success)
        outcome.evaluated += 1
        if config.type == "expect_table_row_count_to_be_between":
            outcome.row_count = result.get("observed_value")
        if not success:
            outcome.failed += 1
            outcome.failures.append(_describe(config.type, column, result, observed))
            if (config.meta or {}).get("action") == "fail":
                outcome.gating.append(outcome.failures[-1])
        element_count = result.get("element_count")
        if element_count is None and config.type == "expect_table_row_count_to_be_between":
            element_count = result.get("observed_value")
        unexpected = result.get("unexpected_count")
        rows.append(
            (
                run_id,
                table,
                suite,
                config.type,
                column,
                success,
                None if element_count is None else int(element_count),
                None if unexpected is None else int(unexpected),
                observed,
                validated_at,
            )
        )
    outcome.success = outcome.failed == 0 and bool(validation.success)
    return rows, outcome


def _sql_string(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def write_results(
    spark: SparkSession,
    settings: Settings,
    run_id: str,
    tables: list[str],
    rows: list[tuple[Any, ...]],
) -> Path:
    """Replace this run's rows of ``tables`` in ``gold.quality_results`` (idempotent per run).

    Uses Delta ``replaceWhere run_id = ... AND table_name IN (...)``: one atomic commit that
    drops whatever an earlier attempt of the same run wrote for these tables and appends the
    new rows, so re-running a run_id never duplicates and the latest attempt wins.
    """
    from delta.tables import DeltaTable

    from lakecep.schemas import ddl

    path = settings.table_path(RESULTS_TABLE)
    df = spark.createDataFrame(rows, ddl(RESULTS_TABLE))
    if DeltaTable.isDeltaTable(spark, str(path)):
        names = ", ".join(_sql_string(t) for t in tables)
        predicate = f"run_id = {_sql_string(run_id)} AND table_name IN ({names})"
        (
            df.write.format("delta")
            .mode("overwrite")
            .option("replaceWhere", predicate)
            .save(str(path))
        )
    elif rows:
        df.write.format("delta").mode("append").save(str(path))
    return path


# Entry point ------------------------------------------------------------------------------


def _build_data_docs(context: Any, report: QualityReport, resources: dict[str, Any],
                     site: Path) -> Path | None:
    """Render this run's validation pages (and the suites' pages) plus the index, once, and
    make the site work offline (:func:`make_data_docs_offline`)."""
    from great_expectations.data_context.types.resource_identifiers import (
        ExpectationSuiteIdentifier,
    )

    identifiers = list(resources.values())
    identifiers += [ExpectationSuiteIdentifier(name=r.expectation_suite_identifier.name)
                    for r in resources.values()]
    context.build_data_docs(site_names=[DOCS_SITE], resource_identifiers=identifiers)
    make_data_docs_offline(site)
    for table, identifier in resources.items():
        urls = context.get_docs_sites_urls(
            resource_identifier=identifier, site_names=[DOCS_SITE], only_if_exists=True
        )
        if urls and urls[0].get("site_url"):
            report.tables[table].data_docs_page = _url_path(urls[0]["site_url"])
    index = _url_path(context.get_docs_sites_urls(site_names=[DOCS_SITE])[0]["site_url"])
    return index if index.is_file() else None


# Offline Data Docs -------------------------------------------------------------------------

#: Marker of a page :func:`make_data_docs_offline` has processed (its stylesheet's id).
_OFFLINE_MARK = 'id="lakecep-offline-style"'
_REMOTE = r"(?:https?:)?//"
_REMOTE_SCRIPT = re.compile(rf"<script\b[^>]*\bsrc=[\"']{_REMOTE}[^>]*>\s*</script>\s*", re.I)
_REMOTE_LINK = re.compile(rf"<link\b[^>]*\bhref=[\"']{_REMOTE}[^>]*>\s*", re.I)
_REMOTE_IMG = re.compile(rf"(<img\b[^>]*?\bsrc=)([\"']){_REMOTE}[^\"']*?"
                         r"([\w.-]+\.(?:png|svg|gif|ico))(?:\?[^\"']*)?\2", re.I | re.S)
_LOCAL_STATIC = re.compile(r"""((?:src|href)=["'])(?:\./|(?:\.\./)+)?static/""")
_REMOTE_CSS_URL = re.compile(rf"url\(\s*['\"]?{_REMOTE}[^)]*\)", re.I)
_INLINE_SCRIPT = re.compile(r"<script>(.*?)</script>\s*", re.S)
_TABLE_SCRIPT = re.compile(
    r"\$\('#(?P<id>[^']+)'\)\.bootstrapTable\(\s*Object\.assign\(\s*\{\s*"
    r"columns:\s*(?P<columns>.*?),\s*data:\s*(?P<data>.*?),\s*toolbar:\s*'[^']*'\s*\},\s*"
    r"(?P<options>\{.*?\})\s*\)\s*\);(?P<rest>.*)", re.S)
_TITLE_ROW = re.compile(r"\.prepend\('(?P<row>.*?)'\);", re.S)
_FILTER_BUTTON = re.compile(
    r"<button\b[^>]*onclick=\"clearTableFilters\([^)]*\)\"[^>]*>.*?</button>", re.S)
#: GX's show/hide-succeeded buttons on validation pages, without jQuery.
_SHOW_HIDE_JS = """
  function lakecepSucceededTargets() {
    const out = [];
    document.querySelectorAll(".hide-succeeded-validation-target-child")
      .forEach((el) => out.push(el.parentElement));
    document.querySelectorAll(".hide-succeeded-validation-target").forEach((el) => out.push(el));
    document.querySelectorAll(".hide-succeeded-validations-column-section-target-child")
      .forEach((el) => {
        const section = el.parentElement.parentElement;
        out.push(section);
        if (section.id) {
          document.querySelectorAll(`a[href$="${section.id}"]`).forEach((a) => out.push(a));
        }
      });
    return out;
  }
  function showAllValidations() {
    lakecepSucceededTargets().forEach((el) => { el.style.display = ""; });
  }
  function hideSucceededValidations() {
    lakecepSucceededTargets().forEach((el) => { el.style.display = "none"; });
  }
"""
#: Our stand-in for Bootstrap 4, bootstrap-table and Font Awesome (which GX loads from CDNs).
_OFFLINE_CSS = """
  body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, Arial, sans-serif;
         margin: 0; color: #212529; background: #fff; line-height: 1.45; font-size: 15px; }
  a { color: #0062cc; text-decoration: none; } a:hover { text-decoration: underline; }
  .navbar { display: flex; align-items: center; padding: 8px 24px; background: #f8f9fa;
            border-bottom: 1px solid #dee2e6; }
  .navbar nav, .d-flex { display: flex; align-items: center; gap: 16px; }
  .container-fluid { padding: 12px 24px; box-sizing: border-box; }
  .row { display: flex; flex-wrap: wrap; gap: 16px; }
  .row > [class*="col-md-2"] { flex: 0 0 220px; max-width: 220px; }
  .row > [class*="col-md-10"], .row > .col-12, .row > [class*="col-"] { flex: 1 1 600px;
                                                                       min-width: 0; }
  .row > .col-12 { flex-basis: 100%; }
  table { border-collapse: collapse; margin: 8px 0 16px; width: 100%; }
  th, td { border: 1px solid #dee2e6; padding: 4px 8px; text-align: left;
           vertical-align: top; }
  thead th, th { background: #f1f3f5; }
  tr:nth-child(even) td { background: #fafbfc; }
  .card { border: 1px solid #dee2e6; border-radius: 4px; margin-bottom: 16px; }
  .card-header { background: #f1f3f5; padding: 8px 12px; border-bottom: 1px solid #dee2e6; }
  .card-body { padding: 8px 12px; }
  .alert { padding: 8px 12px; border-radius: 4px; background: #e9ecef; margin-bottom: 12px; }
  .nav-tabs { list-style: none; display: flex; gap: 16px; padding: 0; margin: 8px 0;
              border-bottom: 1px solid #dee2e6; }
  .nav-tabs .nav-link { display: inline-block; padding: 6px 4px; }
  .tab-pane { margin-bottom: 24px; }
  .list-group, .sticky ul { padding-left: 16px; }
  .btn { border: 1px solid #adb5bd; background: #f8f9fa; border-radius: 4px;
         padding: 2px 8px; cursor: pointer; font-size: 13px; }
  .badge { display: inline-block; padding: 1px 6px; border-radius: 8px; background: #e9ecef; }
  .text-success { color: #198754; } .text-danger { color: #dc3545; }
  .text-warning { color: #b8860b; } .text-muted { color: #6c757d; }
  .fas, .fa { font-style: normal; }
  .fa-check-circle::before { content: "\\2714"; }
  .fa-times::before { content: "\\2718"; }
  .fa-question-circle::before { content: "?"; }
  .fa-exclamation-triangle::before { content: "\\26A0"; }
  .fa-comment::before { content: "\\1F5E8"; }
  .sr-only { position: absolute; width: 1px; height: 1px; overflow: hidden;
             clip: rect(0, 0, 0, 0); }
  footer { padding: 12px 24px; color: #6c757d; font-size: 13px; }
  pre, code { white-space: pre-wrap; }
"""


def make_data_docs_offline(site: Path) -> int:
    """Make every page of the GX Data Docs site under ``site`` work without internet.

    GX 1.24's templates load Bootstrap 4.3.1 (CSS + JS), bootstrap-table 1.19 (+ its
    filter-control extension), bootstrap-datepicker, popper.js, jQuery 3.7.1, Vega/Vega-Lite/
    Vega-Embed and Font Awesome 6.6 from CDNs (unpkg, jsdelivr, cdnjs, stackpath, maxcdn,
    code.jquery.com), and the navbar logo from an S3 bucket. Offline the pages were unstyled and
    the index showed no results at all, because its tables are filled by bootstrap-table in the
    browser. No installed package ships those assets, so this post-processing step (run after
    every ``build_data_docs``) rewrites each ``*.html`` file:

    - removes every ``<script src>`` and ``<link href>`` pointing to an http(s) URL;
    - renders each bootstrap-table (``<table id=X></table>`` + the ``$('#X').bootstrapTable(
      {columns, data}, options)`` script) server-side into a plain HTML table with the same
      columns and rows, sorted like bootstrap-table would (``sortName``/``sortOrder``), with
      row links (``_table_row_link_path``) as ``<a>`` in each cell; drops the script, GX's
      bootstrap-table helper functions and the "Clear Filters" buttons (filters need the
      library);
    - replaces GX's jQuery show/hide-succeeded functions of validation pages by plain JS;
    - points the navbar logo ``<img>`` at the site's own ``static/images`` copy (and fixes
      the depth of GX's relative ``static/`` links, wrong on validation pages), drops CSS
      ``url(http...)`` backgrounds;
    - adds one inline stylesheet (``_OFFLINE_CSS``: layout, tables, status colours, the few
      Font Awesome icons GX uses as Unicode symbols).

    Vega charts are not used by the validation and suite pages of our suites. Idempotent: a
    processed page (it carries our stylesheet) is only rewritten if GX re-rendered it.
    Returns the number of pages rewritten.
    """
    rewritten = 0
    for page in sorted(site.rglob("*.html")):
        html = page.read_text(encoding="utf-8")
        depth = len(page.relative_to(site).parts) - 1
        offline = _offline_page(html, "../" * depth + "static/images/")
        if offline != html:
            page.write_text(offline, encoding="utf-8")
            rewritten += 1
    return rewritten


def _offline_page(html: str, images: str) -> str:
    # GX miscounts the depth of validation pages (favicon -> validations/static/...)
    static = images.removesuffix("images/")
    html = _LOCAL_STATIC.sub(lambda m: f"{m[1]}{static}", html)
    html = _REMOTE_SCRIPT.sub("", html)
    html = _REMOTE_LINK.sub("", html)
    html = _REMOTE_IMG.sub(lambda m: f"{m[1]}{m[2]}{images}{m[3]}{m[2]}", html)
    html = _REMOTE_CSS_URL.sub("none", html)
    html = _FILTER_BUTTON.sub("", html)

    def script(match: re.Match[str]) -> str:
        body = match[1]
        if "function rowStyleLinks" in body:  # bootstrap-table helpers (need jQuery)
            return ""
        if "function hideSucceededValidations" in body:
            return f"<script>{_SHOW_HIDE_JS}</script>\n"
        table = _TABLE_SCRIPT.search(body)
        if table:
            html_tables[table["id"]] = _static_table(table)
            return ""
        return match[0]

    html_tables: dict[str, str] = {}
    html = _INLINE_SCRIPT.sub(script, html)
    for table_id, rendered in html_tables.items():
        empty = re.compile(rf"<table\b[^>]*\bid=\"{re.escape(table_id)}\"[^>]*>\s*</table>", re.S)
        html = empty.sub(lambda _m, r=rendered: r, html, count=1)
    if _OFFLINE_MARK not in html and "</head>" in html:
        html = html.replace("</head>", f"<style {_OFFLINE_MARK}>{_OFFLINE_CSS}</style>\n</head>", 1)
    return html


def _static_table(match: re.Match[str]) -> str:
    """One bootstrap-table script's columns and rows as a server-side HTML table."""
    import ast
    from html import escape

    table_id = match["id"]
    try:
        columns = ast.literal_eval(match["columns"])
        rows = ast.literal_eval(match["data"])
        options = ast.literal_eval(match["options"])
    except (ValueError, SyntaxError) as exc:
        return (f'<p id="{escape(table_id)}" class="text-danger">This table could not be '
                f"rendered offline ({escape(str(exc))}).</p>")
    sort_name = options.get("sortName")
    if sort_name:
        column = next((c for c in columns if c.get("field") == sort_name), {})
        key = column.get("sortName", sort_name)
        rows = sorted(rows, key=lambda r: (r.get(key) is None, str(r.get(key))
                      if not isinstance(r.get(key), int | float) else r.get(key)),
                      reverse=options.get("sortOrder") == "desc")
    head = "".join(f"<th>{c.get('title', c.get('field', ''))}</th>" for c in columns)
    title = _TITLE_ROW.search(match["rest"])
    body = []
    for row in rows:
        link = row.get("_table_row_link_path")
        cells = []
        for c in columns:
            value = row.get(c.get("field"), "")
            value = "" if value is None else str(value).strip()
            if link and "<a " not in value:
                value = f'<a href="{escape(link, quote=True)}">{value}</a>'
            cells.append(f"<td>{value}</td>")
        body.append(f"<tr>{''.join(cells)}</tr>")
    return (f'<table id="{escape(table_id)}" class="table table-sm lakecep-offline-table">'
            f"<thead>{title['row'] if title else ''}<tr>{head}</tr></thead>"
            f"<tbody>{''.join(body)}</tbody></table>")


def _url_path(url: str) -> Path:
    from urllib.parse import unquote, urlparse

    return Path(unquote(urlparse(url).path))


def _gx_run_name(run_id: str) -> str:
    return run_id.replace("/", "_").replace("\\", "_")


def _table_exists(spark: SparkSession, path: Path) -> bool:
    """``path``: a local folder or an object-store URI (``lakecep.config.Uri``)."""
    from delta.tables import DeltaTable

    from lakecep.config import Uri

    return (isinstance(path, Uri) or path.exists()) and DeltaTable.isDeltaTable(spark, str(path))


def run(spark: SparkSession, settings: Settings, *, run_id: str | None = None,
        continuous: bool = False) -> QualityReport:
    """The quality job (``lakecep run quality``): :func:`run_quality` on every table."""
    del continuous  # a batch job: it validates what the tables hold now
    return run_quality(spark, settings, run_id)


def run_quality(
    spark: SparkSession,
    settings: Settings,
    run_id: str | None,
    tables: list[str] | None = None,
    *,
    fail_on_error: bool = False,
) -> QualityReport:
    """Validate the lake tables with their GX suites on Spark, record and document the results.

    - ``run_id``: recorded with every result row; ``None`` -> ``manual-<UTC timestamp>``.
    - ``tables``: subset of :data:`TABLES` (default: all). A table whose Delta folder does not
      exist yet is reported in ``report.skipped``, not as an error.
    - Appends one row per expectation result to ``gold.quality_results`` (replacing the rows
      an earlier attempt of the same ``run_id`` wrote for these tables).
    - Builds GX Data Docs into ``settings.reports / "data_docs"`` (``index.html``).
    - ``fail_on_error``: raise :class:`QualityError` listing the failed expectations (after
      results and Data Docs were written). By default failures only show in the report.
    """
    if not run_id:  # the CLI passes None when --run-id is not given
        run_id = "manual-" + datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    selected = list(TABLES if tables is None else tables)
    unknown = [t for t in selected if not suite_path(t).is_file()]
    if unknown:
        raise SuiteError(
            f"no expectation suite for {', '.join(unknown)} (known: {', '.join(TABLES)})"
        )
    report = QualityReport(run_id=run_id)
    if not settings.quality_enabled:
        reason = "quality disabled (settings.quality_enabled = false)"
        report.skipped = {t: reason for t in selected}
        return report

    import great_expectations as gx
    from great_expectations.core.run_identifier import RunIdentifier

    suites = {t: load_suite(t) for t in selected}  # fail fast on a broken suite file
    context = _gx_context(settings)
    with warnings.catch_warnings():
        # GX warns that the (default) force_reuse_spark_context field is deprecated.
        warnings.simplefilter("ignore", DeprecationWarning)
        datasource = context.data_sources.add_spark(name=_DATASOURCE, persist=True)

    rows: list[tuple[Any, ...]] = []
    docs_resources: dict[str, Any] = {}  # table -> ValidationResultIdentifier
    sc = spark.sparkContext
    for table in selected:
        path = settings.table_path(table)
        if not _table_exists(spark, path):
            report.skipped[table] = f"table does not exist yet ({path})"
            continue
        started = time.perf_counter()
        df = spark.read.format("delta").load(str(path))
        suite = context.suites.add(suites[table])
        asset = datasource.add_dataframe_asset(name=table)
        batch_definition = asset.add_batch_definition_whole_dataframe(f"{table} (whole table)")
        validation_definition = context.validation_definitions.add(
            gx.ValidationDefinition(name=table, data=batch_definition, suite=suite)
        )
        # No UpdateDataDocsAction here: it would re-render the site once per table; the
        # docs are built once for all tables below (same incremental build it performs).
        checkpoint = context.checkpoints.add(
            gx.Checkpoint(
                name=f"lakecep quality {table}",
                validation_definitions=[validation_definition],
                actions=[],
                result_format={"result_format": "SUMMARY", "partial_unexpected_count": 5},
            )
        )
        sc.setJobDescription(f"lakecep quality: {table}")
        try:
            result = checkpoint.run(
                batch_parameters={"dataframe": df},
                # GX's filesystem store uses the run name in file paths: no '/' or '\\'.
                run_id=RunIdentifier(run_name=_gx_run_name(run_id), run_time=datetime.now(UTC)),
            )
        finally:
            sc.setJobDescription(None)  # type: ignore[arg-type]
            df.unpersist()  # GX persists the batch DataFrame (persist=True) and never releases it
        ((identifier, validation),) = result.run_results.items()
        docs_resources[table] = identifier
        table_rows, outcome = _result_rows(run_id, table, suite.name, validation, datetime.now(UTC))
        outcome.seconds = time.perf_counter() - started
        rows += table_rows
        report.tables[table] = outcome

    report.results_table = write_results(spark, settings, run_id, selected, rows)
    report.results_written = len(rows)
    if docs_resources:
        report.data_docs_index = _build_data_docs(context, report, docs_resources,
                                                   data_docs_dir(settings))
    if fail_on_error and not report.success:
        raise QualityError(report)
    if report.gating:  # expectations whose meta.action is "fail"
        raise QualityError(report, report.gating)
    return report
