"""``lakecep report``: one self-contained HTML page about the lake, for people.

Reads the lake's Delta tables without a JVM, as ``lakecep sql --engine duckdb`` does
(:mod:`lakecep.lake_sql`: delta-rs reads each table's newest version, DuckDB aggregates),
draws the plots with matplotlib and inlines them as base64 PNG, so the page opens from disk
with no network: no CDN, no script, no external URL (``docs/report.md``).

Sections: the lake's tables; complex events over time per query; detection latency
percentiles per query; silver quarantine reasons; the latest quality results per table;
live-archive cost per strategy; the tuned allocation in force; window outputs; a link to
the Great Expectations Data Docs. A table that does not exist yet gives a short
"not produced yet: run ..." section, and a section that cannot be read says why; neither
stops the report.
"""

from __future__ import annotations

import base64
import html
import io
import numbers
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from lakecep.config import Settings

if TYPE_CHECKING:
    import duckdb
    import pandas as pd
    from matplotlib.figure import Figure

#: File name of the report under ``<home>/reports`` when ``--out`` is not given.
REPORT_NAME = "lakecep-report.html"

#: Where each table comes from: what to run to produce it.
PRODUCED_BY = {
    "gold.complex_events": "lakecep run gold",
    "silver.quarantine": "lakecep run silver",
    "gold.quality_results": "lakecep run quality",
    "gold.archive_access": "lakecep run gold",
    "gold.window_outputs": "lakecep run gold",
}


def default_path(settings: Settings) -> Path:
    """``<home>/reports/lakecep-report.html`` (beside the Data Docs folder)."""
    return settings.reports / REPORT_NAME


@dataclass
class Section:
    """One part of the page: ``status`` is ``ok``, ``missing`` (table not produced yet),
    ``empty`` (no rows yet), ``off`` (nothing in force) or ``error`` (could not be read)."""

    id: str
    title: str
    status: str
    note: str
    body: str = ""
    plots: int = 0


@dataclass
class Report:
    path: Path
    sections: list[Section] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"path": str(self.path),
                "sections": [{"id": s.id, "title": s.title, "status": s.status,
                              "note": s.note, "plots": s.plots} for s in self.sections]}


# ------------------------------------------------------------------------------ the lake


class _Lake:
    """The lake's Delta tables as DuckDB views (newest versions), each table on its own:
    one that delta-rs cannot open is remembered with the reason, not fatal."""

    def __init__(self, settings: Settings) -> None:
        try:
            import duckdb
            from deltalake import DeltaTable
        except ImportError as exc:
            raise ImportError(f"lakecep report needs the packages duckdb and deltalake "
                              f"({exc}); install them with: pip install "
                              "'lakecep[duckdb]'") from None
        from lakecep.lake_sql import lake_tables, register

        self.con: duckdb.DuckDBPyConnection = duckdb.connect(":memory:")
        self.con.execute("SET TimeZone = 'UTC'")
        self.versions: dict[str, int] = {}
        self.broken: dict[str, str] = {}
        self._counts: dict[str, int] = {}
        for name, folder in lake_tables(settings, "`lakecep report`").items():
            try:
                table = DeltaTable(str(folder))
                register(self.con, name, table)
                self.versions[name] = table.version()
            except Exception as exc:  # noqa: BLE001 - a broken table is one section's note
                self.broken[name] = f"{type(exc).__name__}: {_first_line(str(exc))}"

    def has(self, name: str) -> bool:
        return name in self.versions

    def frame(self, query: str) -> pd.DataFrame:
        return self.con.sql(query).df()

    def count(self, name: str) -> int:
        if name not in self._counts:
            rows = self.con.execute(f"SELECT count(*) FROM {name}").fetchall()
            self._counts[name] = int(rows[0][0])
        return self._counts[name]

    def close(self) -> None:
        self.con.close()


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), text.strip())


# ---------------------------------------------------------------------------- HTML bits


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _is_missing(value: Any) -> bool:
    if value is None:
        return True
    try:
        import pandas as pd

        return bool(pd.isna(value))
    except (TypeError, ValueError):
        return False


def fmt(value: Any, digits: int = 1) -> str:
    """A cell: integers with thousands separators, floats with ``digits`` decimals,
    timestamps in UTC to the second, missing values as ``-``."""
    if isinstance(value, list | tuple):
        return ", ".join(fmt(v, digits) for v in value)
    if _is_missing(value):
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if hasattr(value, "strftime"):
        stamp = value.tz_convert("UTC") if getattr(value, "tzinfo", None) is not None \
            and hasattr(value, "tz_convert") else value
        return f"{stamp.strftime('%Y-%m-%d %H:%M:%S')} UTC"
    if isinstance(value, numbers.Integral):
        return f"{int(value):,}"
    if isinstance(value, numbers.Real):
        number = float(value)
        if number and abs(number) < 10 ** -digits:  # tiny (a cost in seconds): 3 digits
            return f"{number:.3g}"
        return f"{number:,.{digits}f}"
    return str(value)


def table(columns: Sequence[str], rows: Iterable[Sequence[Any]], *, numeric: Iterable[int] = (),
          cls: str = "", digits: int = 1) -> str:
    """An HTML table; ``numeric`` are the column positions to right-align."""
    right = set(numeric)
    head = "".join(f'<th{" class=num" if i in right else ""}>{_e(c)}</th>'
                   for i, c in enumerate(columns))
    body = []
    for row in rows:
        cells = "".join(f'<td{" class=num" if i in right else ""}>'
                        f"{_e(v if isinstance(v, str) else fmt(v, digits))}</td>"
                        for i, v in enumerate(row))
        body.append(f"<tr>{cells}</tr>")
    klass = f' class="{_e(cls)}"' if cls else ""
    return (f"<table{klass}><thead><tr>{head}</tr></thead><tbody>{''.join(body)}"
            "</tbody></table>")


def _n(count: int, word: str) -> str:
    """``1 query``, ``2 queries``, ``1,204 rows``."""
    if count == 1:
        return f"1 {word}"
    plural = word[:-1] + "ies" if word.endswith("y") and word[-2] not in "aeiou" else \
        word + "es" if word.endswith(("s", "ch", "sh", "x")) else word + "s"
    return f"{count:,} {plural}"


def _p(text: str) -> str:
    return f"<p>{text}</p>"


def _code(text: str) -> str:
    return f"<code>{_e(text)}</code>"


# ------------------------------------------------------------------------------- plots


def _figure(width: float = 8.0, height: float = 3.2) -> Figure:
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), dpi=100, layout="constrained")


def image(fig: Figure, alt: str, caption: str = "") -> str:
    """``fig`` as an inline base64 PNG ``<img>`` in a ``<figure>``."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100, metadata={"Software": None})
    data = base64.b64encode(buffer.getvalue()).decode("ascii")
    cap = f"<figcaption>{caption}</figcaption>" if caption else ""
    return (f'<figure><img class="plot" alt="{_e(alt)}" '
            f'src="data:image/png;base64,{data}">{cap}</figure>')


#: Bin widths for the complex-events plot, the smallest giving at most MAX_BINS bins.
_BINS = (("1s", "1 second"), ("10s", "10 seconds"), ("1min", "1 minute"),
         ("5min", "5 minutes"), ("15min", "15 minutes"), ("1h", "1 hour"), ("6h", "6 hours"),
         ("1D", "1 day"), ("7D", "7 days"), ("30D", "30 days"), ("365D", "365 days"))
MAX_BINS = 60


def bin_width(span_seconds: float) -> tuple[str, str]:
    """(pandas frequency, words) of the smallest bin width with at most ``MAX_BINS`` bins
    over ``span_seconds``."""
    import pandas as pd

    for freq, words in _BINS:
        if span_seconds / pd.Timedelta(freq).total_seconds() <= MAX_BINS:
            return freq, words
    return _BINS[-1]


# ---------------------------------------------------------------------------- sections


def _missing(id_: str, title: str, name: str, command: str | None = None,
             extra: str = "") -> Section:
    command = command or PRODUCED_BY.get(name, "lakecep run all")
    return Section(id_, title, "missing", f"not produced yet: run `{command}`",
                   _p(f"{_code(name)} not produced yet: run {_code(command)}{extra}."))


def _empty(id_: str, title: str, name: str, why: str) -> Section:
    return Section(id_, title, "empty", f"{name} has no rows yet",
                   _p(f"{_code(name)} has no rows yet ({_e(why)})."))


def _needs(lake: _Lake, id_: str, title: str, name: str, why_empty: str,
           extra: str = "") -> Section | None:
    """The section to show instead when ``name`` is missing, unreadable or empty."""
    if name in lake.broken:
        return Section(id_, title, "error", f"{name} cannot be read",
                       _p(f"{_code(name)} cannot be read: {_e(lake.broken[name])}"))
    if not lake.has(name):
        return _missing(id_, title, name, extra=extra)
    if lake.count(name) == 0:
        return _empty(id_, title, name, why_empty)
    return None


def tables_section(lake: _Lake, settings: Settings) -> Section:
    from lakecep import schemas

    rows = []
    for name in schemas.tables():
        if lake.has(name):
            rows.append((name, lake.count(name), lake.versions[name]))
        elif name in lake.broken:
            rows.append((name, "cannot be read", lake.broken[name]))
    for name in sorted(set(lake.versions) - set(schemas.tables())):
        rows.append((name, lake.count(name), lake.versions[name]))
    if not rows:
        return Section("tables", "Tables", "missing", "no tables yet: run `lakecep run all`",
                       _p(f"No Delta tables under {_code(str(settings.lake))} yet: run "
                          f"{_code('lakecep run all')}."))
    body = table(("table", "rows", "Delta version"), rows, numeric=(1, 2))
    return Section("tables", "Tables", "ok", _n(len(rows), "table"), body)


def complex_events_section(lake: _Lake) -> Section:
    id_, title, name = "complex-events", "Complex events over time", "gold.complex_events"
    if (other := _needs(lake, id_, title, name, "the gold job found no complex events")):
        return other
    import pandas as pd

    columns = set(lake.frame(f"SELECT * FROM {name} LIMIT 0").columns)
    # the current answer: rows a late event broke keep superseded_version (older lakes
    # have no such column)
    current = "superseded_version IS NULL" if "superseded_version" in columns else "true"
    frame = lake.frame(f"SELECT query_id, coalesce(end_time, detection_time) AS t, "
                       f"end_time IS NULL AS by_detection FROM {name} WHERE {current}")
    superseded = lake.count(name) - len(frame)
    frame["t"] = pd.to_datetime(frame["t"], utc=True)
    summary = frame.groupby("query_id").agg(n=("t", "size"), first_t=("t", "min"),
                                            last_t=("t", "max"),
                                            by_detection=("by_detection", "sum"))
    rows = [(q, int(r.n), r.first_t, r.last_t, int(r.by_detection))
            for q, r in summary.sort_index().iterrows()]
    body = table(("query", "complex events", "first", "last", "timed by detection"), rows,
                 numeric=(1, 4), cls="complex-events")
    span = (frame["t"].max() - frame["t"].min()).total_seconds()
    freq, words = bin_width(span)
    counts = (frame.assign(bin=frame["t"].dt.floor(freq)).groupby(["bin", "query_id"])
              .size().unstack(fill_value=0).sort_index())
    full = pd.date_range(counts.index.min(), counts.index.max(), freq=freq)
    counts = counts.reindex(full, fill_value=0)
    fig = _figure()
    ax = fig.add_subplot()
    if len(counts) == 1:  # every match in one bin: one bar per query
        ax.bar([str(q) for q in counts.columns], counts.iloc[0].to_numpy())
    else:
        for query in counts.columns:
            ax.plot(counts.index.to_pydatetime(), counts[query].to_numpy(),
                    drawstyle="steps-post", marker=".", label=str(query))
        ax.legend(loc="upper left", fontsize="small")
        _date_axis(ax)
    ax.set_ylabel(f"complex events per {words}")
    ax.grid(alpha=0.3)
    plot = image(fig, "complex events over time per query",
                 f"Complex events per {_e(words)} and query, by end time (detection time "
                 "when a match has no end time).")
    note = f"{_n(len(frame), 'complex event')} of {_n(len(rows), 'query')}"
    if superseded:
        note += f"; {superseded:,} superseded by late events (not shown)"
    return Section(id_, title, "ok", note, plot + body, plots=1)


def _date_axis(ax: Any) -> None:
    import matplotlib.dates as mdates

    locator = mdates.AutoDateLocator()
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))


#: Percentiles of the latency section (DuckDB quantile_cont: linear, as numpy's default).
PERCENTILES = (50, 95, 99)


def latency_section(lake: _Lake) -> Section:
    id_, title, name = "latency", "Detection latency", "gold.complex_events"
    if (other := _needs(lake, id_, title, name, "the gold job found no complex events")):
        return other
    quantiles = ", ".join(f"quantile_cont(detection_latency_ms, {p / 100}) AS p{p}"
                          for p in PERCENTILES)
    frame = lake.frame(f"SELECT query_id, count(detection_latency_ms) AS n, {quantiles}, "
                       f"max(detection_latency_ms) AS max FROM {name} GROUP BY query_id "
                       "ORDER BY query_id")
    columns = ["query", "with latency", *(f"p{p} (ms)" for p in PERCENTILES), "max (ms)"]
    rows = [(r.query_id, int(r.n), *(getattr(r, f"p{p}") for p in PERCENTILES), r.max)
            for r in frame.itertuples(index=False)]
    body = table(columns, rows, numeric=range(1, len(columns)), cls="latency")
    known = frame[frame["n"] > 0]
    plots, plot = 0, ""
    if len(known):
        import numpy as np

        fig = _figure(height=max(2.0, 0.5 + 0.6 * len(known)))
        ax = fig.add_subplot()
        y = np.arange(len(known))
        height = 0.8 / len(PERCENTILES)
        for i, p in enumerate(PERCENTILES):
            ax.barh(y + i * height, known[f"p{p}"].to_numpy(dtype=float), height,
                    label=f"p{p}")
        ax.set_yticks(y + height * (len(PERCENTILES) - 1) / 2, known["query_id"].tolist())
        ax.invert_yaxis()
        values = known[[f"p{p}" for p in PERCENTILES]].to_numpy(dtype=float)
        if values.min() > 0 and values.max() / values.min() > 50:
            ax.set_xscale("log")
        ax.set_xlabel("detection latency (ms)")
        ax.legend(fontsize="small")
        ax.grid(axis="x", alpha=0.3)
        plot = image(fig, "detection latency percentiles per query",
                     "Detection latency (detection time minus the last event's arrival) "
                     "per query: p50, p95, p99.")
        plots = 1
    p95 = [f"{q} {fmt(v)} ms" for q, v in zip(known["query_id"], known["p95"], strict=True)]
    note = f"p95: {', '.join(p95)}" if p95 else "no latencies recorded"
    return Section(id_, title, "ok", note, plot + body, plots=plots)


def quarantine_section(lake: _Lake) -> Section:
    id_, title, name = "quarantine", "Silver quarantine reasons", "silver.quarantine"
    if (other := _needs(lake, id_, title, name, "no line has been quarantined")):
        return other
    frame = lake.frame(f"SELECT trim(split_part(reason, ':', 1)) AS code, count(*) AS n, "
                       f"min(reason) AS example FROM {name} GROUP BY 1 ORDER BY n DESC, code")
    total = int(frame["n"].sum())
    rows = [(r.code, int(r.n), f"{100 * r.n / total:.1f} %", _shorten(r.example))
            for r in frame.itertuples(index=False)]
    body = table(("reason", "rows", "share", "example"), rows, numeric=(1, 2),
                 cls="quarantine")
    fig = _figure(height=max(1.8, 0.5 + 0.35 * len(frame)))
    ax = fig.add_subplot()
    ax.barh(frame["code"].tolist(), frame["n"].to_numpy())
    ax.invert_yaxis()
    ax.set_xlabel("quarantined rows")
    ax.grid(axis="x", alpha=0.3)
    plot = image(fig, "quarantined rows per reason",
                 f"{total:,} quarantined rows by reason code (docs/data.md, "
                 "\"Rejection reasons\").")
    note = f"{_n(total, 'row')}, {_n(len(rows), 'reason')}"
    return Section(id_, title, "ok", note, plot + body,
                   plots=1)


def _shorten(text: Any, width: int = 100) -> str:
    text = "" if text is None else str(text)
    return text if len(text) <= width else text[: width - 1] + "…"


def quality_section(lake: _Lake) -> Section:
    id_, title, name = "quality", "Data quality (latest run per table)", "gold.quality_results"
    if (other := _needs(lake, id_, title, name, "no quality run wrote results")):
        return other
    frame = lake.frame(
        f"WITH latest AS (SELECT table_name, arg_max(run_id, validated_at) AS run_id "
        f"FROM {name} GROUP BY table_name) "
        f"SELECT q.* FROM {name} q JOIN latest USING (table_name, run_id) "
        "ORDER BY table_name, expectation, column_name")
    rows, failures = [], []
    for table_name, group in frame.groupby("table_name", sort=True):
        passed = int(group["success"].sum())
        failed = group[~group["success"].astype(bool)]
        rows.append((table_name, group["run_id"].iloc[0], group["validated_at"].max(),
                     f"{passed}/{len(group)}", "pass" if failed.empty else "FAIL"))
        for r in failed.itertuples(index=False):
            column = f"({r.column_name})" if not _is_missing(r.column_name) else ""
            failures.append((table_name, f"{r.expectation}{column}", r.unexpected_count,
                             r.element_count, _shorten(r.observed)))
    body = table(("table", "run", "validated at", "passed", "status"), rows, numeric=(3,),
                 cls="quality")
    if failures:
        body += "<h3>Failed expectations</h3>" + table(
            ("table", "expectation", "unexpected", "rows", "observed"), failures,
            numeric=(2, 3), cls="quality-failures")
    failed_tables = sum(1 for r in rows if r[-1] == "FAIL")
    note = (f"{_n(len(rows), 'table')}, all pass" if not failed_tables
            else f"{_n(len(rows), 'table')}, {failed_tables} failing")
    return Section(id_, title, "ok", note, body)


ARCHIVE_SUMS = ("loads", "buffer_loads", "rows_loaded", "rows_from_buffer", "delta_files_read",
                "delta_files_total", "delta_rows_scanned", "live_matches", "complex_events")


def archive_section(lake: _Lake) -> Section:
    id_, title, name = "archive", "Live-archive cost per strategy", "gold.archive_access"
    if (other := _needs(lake, id_, title, name, "no live-archive query has run",
                        extra=" with a live-archive query (docs/live-archive.md)")):
        return other
    sums = ", ".join(f"sum({c}) AS {c}" for c in ARCHIVE_SUMS)
    frame = lake.frame(f"SELECT strategy, count(*) AS batches, "
                       f"string_agg(DISTINCT query_id, ', ' ORDER BY query_id) AS queries, "
                       f"{sums}, sum(seconds) AS seconds FROM {name} "
                       "GROUP BY strategy ORDER BY strategy")
    columns = ("strategy", "queries", "batches", "loads", "rows loaded", "rows from RBuffer",
               "Delta files read", "Delta files total", "Delta rows scanned", "live matches",
               "complex events", "seconds")
    rows = [(r.strategy, r.queries, int(r.batches), int(r.loads), int(r.rows_loaded),
             int(r.rows_from_buffer), int(r.delta_files_read), int(r.delta_files_total),
             int(r.delta_rows_scanned), int(r.live_matches), int(r.complex_events), r.seconds)
            for r in frame.itertuples(index=False)]
    body = table(columns, rows, numeric=range(2, len(columns)), cls="archive")
    import numpy as np

    fig = _figure(height=max(2.4, 0.6 + 0.5 * len(frame)))
    left, right = fig.subplots(1, 2, sharey=True)
    strategies = frame["strategy"].tolist()
    y = np.arange(len(strategies))
    left.barh(y, frame["rows_loaded"].to_numpy(dtype=float))
    left.set_yticks(y, strategies)
    left.invert_yaxis()
    left.set_xlabel("rows loaded from the archive")
    right.barh(y - 0.2, frame["delta_files_read"].to_numpy(dtype=float), 0.4, label="read")
    right.barh(y + 0.2, frame["delta_files_total"].to_numpy(dtype=float), 0.4,
               label="in the table", alpha=0.5)
    right.set_xlabel("Delta files")
    right.legend(fontsize="small")
    if not frame["delta_files_total"].any():  # every load came from the RBuffer
        right.set_xlim(0, 1)
        right.text(0.5, 0.5, "no Delta file read", transform=right.transAxes, ha="center",
                   va="center", fontsize="small", color="0.4")
    for ax in (left, right):
        ax.grid(axis="x", alpha=0.3)
    plot = image(fig, "live-archive cost per strategy",
                 "Archive reads per strategy, summed over batches: rows loaded (each load "
                 "counted on its own) and Delta files read of those in the table.")
    return Section(id_, title, "ok", f"{_n(len(rows), 'strategy')}, "
                   f"{_n(int(frame['batches'].sum()), 'batch')}", plot + body, plots=1)


def tuning_section(settings: Settings) -> Section:
    id_, title = "tuning", "Tuned allocation in force"
    from lakecep import tuning

    if not settings.tuning_apply:
        return Section(id_, title, "off", "tuning_apply is off",
                       _p(f"{_code('tuning_apply')} is off: the jobs apply no tuned "
                          "configuration (docs/tuning.md)."))
    config = tuning.load_latest(settings)
    if config is None:
        command = "lakecep run statistics && lakecep run tune"
        return Section(id_, title, "missing", f"not produced yet: run `{command}`",
                       _p(f"No tuned configuration under {_code(str(settings.tuning_dir))} "
                          f"yet: run {_code(command)}."))
    model, gold = config.get("model", {}), config.get("gold", {})
    facts = [("version", f"v{config.get('version')} "
                         f"({tuning.config_path(settings, int(config['version'])).name})"),
             ("created at", config.get("created_at", "-")),
             ("statistics run", config.get("statistics_run", "-")),
             ("silver version", config.get("silver_version", "-")),
             ("capacity (events/s)", model.get("capacity_events_per_second")),
             ("capacity from", model.get("capacity_source", "-")),
             ("overloaded", model.get("overloaded")),
             ("max files per trigger (gold)", gold.get("max_files_per_trigger"))]
    body = table(("configuration", "value"), facts, cls="tuning-facts", digits=3)
    queries = config.get("queries", {})
    pools = gold.get("pools", {})
    by_pool = {q.get("pool"): (qid, q) for qid, q in queries.items()}
    pool_rows = []
    for pool, weight in sorted(pools.items(), key=lambda kv: (-kv[1], kv[0])):
        qid, q = by_pool.get(pool, ("-", {}))
        pool_rows.append((pool, int(weight), qid, q.get("kind", "-"), q.get("share"),
                          q.get("deadline_seconds"), q.get("model", "-")))
    body += "<h3>Pools (Spark FAIR scheduler)</h3>" + table(
        ("pool", "weight", "query", "kind", "share (cores)", "deadline (s)", "model"),
        pool_rows, numeric=(1, 4, 5), cls="pools", digits=3)
    stream_rows = [(qid, s.get("stream"), s.get("arrival_rate"), s.get("cost_seconds"),
                    s.get("mu"), s.get("quota"), s.get("satisfaction"))
                   for qid, q in sorted(queries.items()) for s in q.get("streams", [])]
    if stream_rows:
        body += "<h3>Streams</h3>" + table(
            ("query", "stream", "arrival rate (/s)", "cost (s/event)", "μ (/s)", "quota",
             "satisfaction"), stream_rows, numeric=range(2, 7), cls="streams", digits=4)
    plot, plots = "", 0
    if pool_rows:
        fig = _figure(height=max(1.8, 0.5 + 0.35 * len(pool_rows)))
        ax = fig.add_subplot()
        ax.barh([r[0] for r in pool_rows], [r[1] for r in pool_rows])
        ax.invert_yaxis()
        ax.set_xlabel("pool weight (largest share = 1000)")
        ax.grid(axis="x", alpha=0.3)
        plot = image(fig, "FAIR scheduler pool weights",
                     "Pool weight per query (the gold job runs each query in its pool).")
        plots = 1
    return Section(id_, title, "ok", f"v{config.get('version')}, {_n(len(pools), 'pool')}",
                   plot + body, plots=plots)


def windows_section(lake: _Lake) -> Section:
    id_, title, name = "windows", "Window outputs", "gold.window_outputs"
    if (other := _needs(lake, id_, title, name, "no window query has emitted a window",
                        extra=" with a window query (docs/windows.md)")):
        return other
    frame = lake.frame(
        f"SELECT query_id, window_kind, aggregate, count(DISTINCT key) AS keys, "
        f"count(DISTINCT (key, window_id)) AS windows, count(*) AS rows, "
        f"max(revision) AS revisions, min(window_start) AS first_start, "
        f"max(window_end) AS last_end FROM {name} "
        "GROUP BY query_id, window_kind, aggregate ORDER BY query_id, aggregate")
    rows = [(r.query_id, r.window_kind, r.aggregate, int(r.keys), int(r.windows), int(r.rows),
             int(r.revisions), r.first_start, r.last_end)
            for r in frame.itertuples(index=False)]
    body = table(("query", "window", "aggregate", "keys", "windows", "rows", "max revision",
                  "first window start", "last window end"), rows, numeric=range(3, 7),
                 cls="windows")
    return Section(id_, title, "ok", f"{_n(int(frame['rows'].sum()), 'row')} of "
                   f"{_n(frame['query_id'].nunique(), 'query')}", body)


def data_docs_section(settings: Settings, out: Path) -> Section:
    id_, title = "data-docs", "Great Expectations Data Docs"
    index = settings.reports / "data_docs" / "index.html"
    if not index.is_file():
        command = "lakecep run quality"
        return Section(id_, title, "missing", f"not produced yet: run `{command}`",
                       _p(f"No Data Docs at {_code(str(index))} yet: run {_code(command)}."))
    href = quote(Path(os.path.relpath(index.resolve(), out.resolve().parent)).as_posix())
    pages = sum(1 for _ in (index.parent / "validations").rglob("*.html")) \
        if (index.parent / "validations").is_dir() else 0
    body = _p(f'<a class="data-docs" href="{_e(href)}">Data Docs index</a> '
              f"({_e(str(index))}; {_e(_n(pages, 'validation page'))}): every expectation of "
              "every run with its observed values.")
    return Section(id_, title, "ok", _n(pages, "validation page"), body)


# --------------------------------------------------------------------------------- page

_CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif;
margin:0 auto;max-width:1100px;padding:1rem 2rem;color:#1b1f24;line-height:1.4}
h1{margin-bottom:.2rem}h2{border-bottom:1px solid #d0d7de;padding-bottom:.2rem;margin-top:2rem}
.meta{color:#57606a}nav a{margin-right:.8rem}
table{border-collapse:collapse;margin:.6rem 0;font-size:.9rem}
th,td{border-bottom:1px solid #d8dee4;padding:.25rem .6rem;text-align:left;vertical-align:top}
th{background:#f6f8fa}td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
figure{margin:.6rem 0}img.plot{max-width:100%;height:auto}figcaption{color:#57606a;font-size:.85rem}
code{background:#f6f8fa;padding:0 .25rem;border-radius:3px}
.status{font-size:.75rem;padding:.05rem .4rem;border-radius:3px;margin-left:.5rem;
vertical-align:middle;background:#ddf4ff}
.status-missing,.status-empty,.status-off{background:#fff8c5}.status-error{background:#ffebe9}
"""


def render(sections: Sequence[Section], settings: Settings, generated: datetime) -> str:
    """The whole page (no script, no external resource)."""
    nav = "".join(f'<a href="#{s.id}">{_e(s.title)}</a>' for s in sections)
    parts = []
    for s in sections:
        badge = "" if s.status == "ok" else \
            f'<span class="status status-{s.status}">{_e(s.status)}</span>'
        parts.append(f'<section id="{s.id}" data-status="{s.status}"><h2>{_e(s.title)}'
                     f"{badge}</h2>{s.body}</section>")
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>lakecep report</title><style>{_CSS}</style></head><body>"
            "<h1>lakecep report</h1>"
            f"<p class=\"meta\">Lake {_code(str(settings.home))}, generated "
            f"{_e(generated.strftime('%Y-%m-%d %H:%M:%S'))} UTC from the tables' newest "
            "versions (delta-rs + DuckDB).</p>"
            f"<nav>{nav}</nav>{''.join(parts)}</body></html>\n")


def build(settings: Settings, out: Path | None = None,
          now: Callable[[], datetime] = lambda: datetime.now(UTC)) -> Report:
    """Write the report to ``out`` (default :func:`default_path`) and return what it holds.

    Every section is built on its own: one that fails to read its table becomes an
    ``error`` section with the reason instead of stopping the report."""
    path = Path(out) if out is not None else default_path(settings)
    if path.is_dir():
        path = path / REPORT_NAME
    elif not path.suffix:      # `--out summary` -> summary.html (a browser needs the suffix)
        path = path.with_suffix(".html")
    lake = _Lake(settings)
    try:
        builders: list[tuple[str, str, Callable[[], Section]]] = [
            ("tables", "Tables", lambda: tables_section(lake, settings)),
            ("complex-events", "Complex events over time", lambda: complex_events_section(lake)),
            ("latency", "Detection latency", lambda: latency_section(lake)),
            ("quarantine", "Silver quarantine reasons", lambda: quarantine_section(lake)),
            ("quality", "Data quality (latest run per table)", lambda: quality_section(lake)),
            ("archive", "Live-archive cost per strategy", lambda: archive_section(lake)),
            ("tuning", "Tuned allocation in force", lambda: tuning_section(settings)),
            ("windows", "Window outputs", lambda: windows_section(lake)),
            ("data-docs", "Great Expectations Data Docs",
             lambda: data_docs_section(settings, path)),
        ]
        sections = []
        for id_, title, make in builders:
            try:
                sections.append(make())
            except Exception as exc:  # noqa: BLE001 - one section's failure, said there
                reason = f"{type(exc).__name__}: {_first_line(str(exc))}"
                sections.append(Section(id_, title, "error", f"cannot be shown ({reason})",
                                        _p(f"This section cannot be shown: {_e(reason)}")))
    finally:
        lake.close()
    page = render(sections, settings, now())
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(page, encoding="utf-8")
    os.replace(tmp, path)
    return Report(path=path, sections=sections)
