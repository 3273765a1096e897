"""How the ``lakecep`` command shows things: rich tables, progress, errors, JSON.

Pure presentation (no Spark): the CLI's command handlers call these with the objects the
jobs return. Output for people goes through rich (colours only on a terminal); ``--json``
output is one JSON document on stdout; progress and log lines go to stderr.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table

#: stdout: results (tables, JSON); stderr: progress, log lines and errors.
out = Console(highlight=False, soft_wrap=False)
err = Console(stderr=True, highlight=False)
for _console in (out, err):
    if not _console.is_terminal and "COLUMNS" not in os.environ:
        _console.width = 140  # logs and pipes: wide enough for the summary table, no wrapping


def say(text: str) -> None:
    """A plain line on stdout (no markup: paths may hold brackets; never wrapped: scripts
    and tests read it whole, and a path broken over two lines cannot be copied)."""
    out.print(text, markup=False, soft_wrap=True)


#: ``lakecep``'s exit code for a failure the same input would repeat (a quarantine gate:
#: the batch is judged again, unchanged, by a retry): the Airflow task fails at once,
#: without its retry (``dags/lakecep_tasks.py`` has the same number).
NO_RETRY_EXIT = 3
#: The errors that exit with :data:`NO_RETRY_EXIT`.
NO_RETRY = ("QuarantineGateError",)


class Failure(Exception):
    """An error the user can act on: one message line and a hint (no traceback)."""

    def __init__(self, message: str, hint: str | None = None, code: int = 1) -> None:
        super().__init__(message)
        self.hint = hint
        self.code = code


def progress(*, transient: bool = False, disable: bool = False) -> Progress:
    """A progress display with counts, elapsed time and ETA (off when stderr is not a
    terminal, e.g. in an Airflow task log)."""
    return Progress(
        SpinnerColumn(), TextColumn("[bold]{task.description}"), BarColumn(),
        MofNCompleteColumn(), TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
        console=err, transient=transient, disable=disable or not err.is_terminal,
    )


class SparkTasks:
    """Counts a Spark application's tasks into a progress bar while a computation runs:
    completed / total tasks of the jobs started since :meth:`__enter__`, from the status
    tracker (no count of rows is known before a single Spark computation ends, but its
    tasks are). Polls in a daemon thread every ``every`` seconds."""

    def __init__(self, spark_context: Any, bar: Progress, task: Any, every: float = 0.5
                 ) -> None:
        import threading

        self._tracker = spark_context.statusTracker()
        self._bar, self._task, self._every = bar, task, every
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, name="lakecep-progress",
                                        daemon=True)
        self._seen: dict[int, tuple[int, int]] = {}  # stage id -> (done, total)

    def __enter__(self) -> SparkTasks:
        self._before = set(self._tracker.getJobIdsForGroup(None))
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.update()

    def _poll(self) -> None:
        while not self._stop.wait(self._every):
            try:
                self.update()
            except Exception:  # noqa: BLE001 -- a display must not fail the computation
                return

    def update(self) -> None:
        for job_id in set(self._tracker.getJobIdsForGroup(None)) - self._before:
            job = self._tracker.getJobInfo(job_id)
            for stage_id in job.stageIds if job else ():
                stage = self._tracker.getStageInfo(stage_id)
                if stage is not None:
                    self._seen[stage_id] = (stage.numCompletedTasks, stage.numTasks)
        done = sum(d for d, _ in self._seen.values())
        total = sum(t for _, t in self._seen.values())
        self._bar.update(self._task, completed=done, total=max(total, 1))


def emit_json(document: Any) -> None:
    """One JSON document on stdout (for scripts)."""
    print(json.dumps(document, indent=2, default=str))


def _n(value: int | None, unit: str = "") -> str:
    if value is None:
        return "-"
    if not unit or unit == "rows":
        return f"{value:,}"
    return f"{value:,} {unit.removesuffix('s') if value == 1 else unit}"


def summary_table(rows: Iterable[Mapping[str, Any]], title: str = "run summary") -> Table:
    """Per job: its output table, rows in, out, quarantined, duplicates, duration."""
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, show_edge=False,
                  pad_edge=False, collapse_padding=True, padding=(0, 1))
    for name, justify in (("job", "left"), ("table", "left"), ("in", "right"),
                          ("out", "right"), ("quarantined", "right"),
                          ("duplicates", "right"), ("time", "right")):
        table.add_column(name, justify=justify, no_wrap=True)  # type: ignore[arg-type]
    table.add_column("", min_width=12, overflow="fold")
    for row in rows:
        mark = "" if row.get("ok", True) else "[red]FAILED[/] "
        table.add_row(row["job"], row["table"], _n(row["rows_in"], row["in_unit"]),
                      _n(row["rows_out"]), _n(row["quarantined"]), _n(row["duplicates"]),
                      f"{row['seconds']:.1f}s", mark + escape(row.get("note", "")))
    return table


def stage_line(row: Mapping[str, Any]) -> str:
    """``✓ silver  1,208 in -> 1,167 out, 20 quarantined  12.3s`` (rich markup)."""
    mark = "[green]✓[/]" if row.get("ok", True) else "[red]✗[/]"
    parts = [f"{_n(row['rows_in'], row['in_unit'])} in"] if row["rows_in"] is not None else []
    if row["rows_out"] is not None:
        parts.append(f"{_n(row['rows_out'])} out")
    if row["quarantined"]:
        parts.append(f"{_n(row['quarantined'])} quarantined")
    return (f"{mark} [bold]{row['job']:<10}[/] {escape(', '.join(parts))}  "
            f"[dim]{row['seconds']:.1f}s {escape(row.get('note', ''))}[/]")


def continuous_line(app: Mapping[str, Any]) -> str:
    """The continuous app's state for ``lakecep status`` (rich markup): running or not,
    heartbeat age, per query its last batch and rows (``lakecep.continuous.AppState``)."""
    beat = app.get("heartbeat") or {}
    if app["running"]:
        mark = "[red]✗ stale[/]" if app["stale"] else "[green]✓ running[/]"
        head = (f"{mark} continuous app pid {app['pid']} since {beat.get('started_at')}, "
                f"phase {beat.get('phase')}, heartbeat {app['heartbeat_age_s']}s ago")
    else:
        head = (f"[yellow]-[/] continuous app not running (last phase {beat.get('phase')}"
                + (f", error: {escape(str(beat['error']))}" if beat.get("error") else "") + ")")
    queries = [f"{name}: batch {q.get('last_batch_id')}, {q.get('rows', 0):,} rows in "
               f"{q.get('batches', 0)} batches since start, last progress "
               f"{q.get('last_progress_at')}"
               + (f", last batch {q['last_batch_ms']:,} ms" if "last_batch_ms" in q else "")
               + (f", backlog {q['backlog_files']:,} files" if "backlog_files" in q else "")
               for name, q in sorted((beat.get("queries") or {}).items())]
    tuned = beat.get("tuned_version")
    return "\n".join([head, *[f"  {escape(q)}" for q in queries],
                      *([f"  tuned configuration v{tuned}"] if tuned else [])])


def counts_table(counts: Mapping[str, Any], title: str) -> Table:
    """A name -> number table; nested mappings (e.g. rejected lines by reason) become
    indented rows, not raw dicts."""
    table = Table(title=title, title_justify="left")
    table.add_column("")
    table.add_column("count", justify="right")
    for name, value in counts.items():
        if isinstance(value, Mapping):
            table.add_row(name.replace("_", " "), f"{sum(value.values()):,}")
            for key, n in value.items():
                table.add_row(f"  {escape(str(key))}", f"{n:,}")
        else:
            table.add_row(name.replace("_", " "),
                          f"{value:,}" if isinstance(value, int) else escape(str(value)))
    return table


def frame_table(frame: Any, truncate: int = 40) -> Table:
    """Query results (a pandas frame) as a table; cells cut to ``truncate`` characters."""
    table = Table()
    for column in frame.columns:
        table.add_column(escape(str(column)))
    for row in frame.itertuples(index=False):
        cells = []
        for value in row:
            text = "NULL" if value is None else str(value)
            if truncate and len(text) > truncate:
                text = text[: max(truncate - 3, 1)] + "..."
            cells.append(escape(text))
        table.add_row(*cells)
    return table


def status_tables(counts: Mapping[str, int], checks: Iterable[Any]) -> list[Table]:
    """``lakecep status``: table counts, then each check with ok/FAIL."""
    tables = Table(title="tables", title_justify="left")
    tables.add_column("table")
    tables.add_column("rows", justify="right")
    for name, n in counts.items():
        tables.add_row(name, f"{n:,}")
    result = Table(title="checks", title_justify="left")
    result.add_column("")
    result.add_column("check")
    result.add_column("detail", overflow="fold")
    for check in checks:
        result.add_row("[green]ok[/]" if check.ok else "[red]FAIL[/]", escape(check.name),
                       escape(check.detail))
    return [tables, result]


def replay_tables(doc: Mapping[str, Any]) -> list[Any]:
    """``lakecep replay``: the match (query, key, versions, result), its measures stored and
    replayed side by side, the events around it and its firing snapshot (``doc``: the
    ``--json`` document)."""
    stored, replayed = doc["stored"], doc.get("replayed") or {}
    head = Table(title=f"match {doc['match_id']}", title_justify="left", show_header=False,
                 box=box.SIMPLE, pad_edge=False)
    head.add_column("", style="bold")
    head.add_column("", overflow="fold")
    if doc["error"]:
        result = f"[red]not replayed[/]: {escape(doc['error'])}"
    elif doc["reproduced"]:
        result = "[green]reproduced[/] (same measures, same events)"
    else:
        result = "[red]differs[/]: " + escape("; ".join(doc["differences"]))
    superseded = stored.get("superseded_version")
    for name, value in (
            ("query", f"{stored['query_id']} v{stored['query_version']}"),
            ("key", stored["partition_key"]),
            ("span", f"{stored['start_time']} .. {stored['end_time']}"),
            ("found", f"batch {stored['batch_id']}, silver version {stored['history_version']}"
                      f", strategy {stored['strategy']}, at {stored['detection_time']}"),
            ("current", "yes" if superseded is None
             else f"no: superseded at silver version {superseded}")):
        head.add_row(name, escape(str(value)))
    head.add_row("replay", result)
    out: list[Any] = [head]
    measures = Table(title="measures", title_justify="left")
    for name in ("measure", "stored", "replayed", ""):
        measures.add_column(name, overflow="fold")
    again = replayed.get("measures") or {}
    for name, value in sorted((stored.get("measures") or {}).items()):
        same = again.get(name) == value and name in again
        measures.add_row(escape(name), escape(str(value)), escape(str(again.get(name, "-"))),
                         "[green]=[/]" if same else "[red]≠[/]")
    out.append(measures)
    sections = [(f"events around the match ({len(doc['context'])})", doc["context"])]
    snapshot = doc.get("snapshot")
    if snapshot:
        verdict = ("reproduced" if snapshot.get("reproduced") else
                   f"not reproduced: {snapshot.get('note') or ''} missing "
                   f"{snapshot.get('missing')}, extra {snapshot.get('extra')}")
        sections.append((f"firing snapshot at silver version {snapshot['version']} "
                         f"({verdict})", snapshot["events"]))
    for title, events in sections:
        table = Table(title=escape(title), title_justify="left")
        for name in ("role", "event_time", "event_type", "source_id", "event_id"):
            table.add_column(name, overflow="fold")
        for event in events:
            role = event["role"]
            table.add_row(f"[bold]{role}[/]" if role == "match" else role,
                          escape(str(event["event_time"])), escape(str(event["event_type"])),
                          escape(str(event["source_id"])), escape(str(event["event_id"])))
        out.append(table)
    out += [f"[yellow]warning:[/] {escape(w)}" for w in doc["warnings"]]
    return out


def settings_table(values: Mapping[str, Any], sources: Mapping[str, str]) -> Table:
    table = Table(title="settings (defaults < file < environment < command line)",
                  title_justify="left")
    for name in ("key", "value", "from"):
        table.add_column(name)
    for key, value in values.items():
        source = sources.get(key, "default")
        table.add_row(key, escape(str(value)),
                      source if source == "default" else f"[bold]{escape(source)}")
    return table


@dataclass(frozen=True)
class Explained:
    message: str
    hint: str | None


_SPARK_HINTS = {
    "PARSE_SYNTAX_ERROR": "check the SQL near the position given (Spark SQL syntax: "
                          "https://spark.apache.org/docs/latest/sql-ref-syntax.html)",
    "UNRESOLVED_COLUMN": "the message lists the columns that exist; `lakecep sql "
                         "\"DESCRIBE <table>\"` shows a table's columns",
    "TABLE_OR_VIEW_NOT_FOUND": "run `lakecep run all` to create the tables",
}


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), text.strip())


def explain(exc: BaseException) -> Explained:
    """One readable line and a hint for ``exc`` (the CLI prints a traceback only with
    ``--debug``)."""
    from lakecep.config import ConfigError

    if isinstance(exc, Failure):
        return Explained(str(exc), exc.hint)
    if isinstance(exc, ConfigError):
        return Explained(f"configuration error: {exc}",
                         "`lakecep config` shows every setting and where it came from; "
                         "keys and ranges: docs/configuration.md")
    text = str(exc)
    if isinstance(exc, FileExistsError) and "overwrite=True" in text:
        return Explained(re.sub(r"\s*\(pass overwrite=True to replace them\)", "", text),
                         "add --clean to replace them")
    condition = _spark_condition(exc)
    if condition is not None:
        return Explained(_first_line(text), _SPARK_HINTS.get(condition.split(".")[0],
                         "rerun with --debug for Spark's full message"))
    if type(exc).__module__.lstrip("_") == "duckdb":
        return Explained(_first_line(text), "DuckDB's SQL dialect "
                         "(https://duckdb.org/docs/sql/introduction); Delta time travel and "
                         "MATCH_RECOGNIZE need --engine spark")
    if "JAVA_GATEWAY_EXITED" in text or "Java gateway process exited" in text:
        return Explained("Spark could not start its JVM",
                         "is Java 17 installed? `bash infra/bootstrap.sh` sets it up")
    name = type(exc).__name__
    if name == "QueryDefinitionError":
        return Explained(text, "query files are described in docs/queries.md")
    explained = {"QueryError", "TuningError", "QualityError", "QuarantineGateError"}
    if name in explained or isinstance(exc, LookupError) \
            and not isinstance(exc, KeyError | IndexError):
        lines = text.splitlines()
        return Explained(lines[0] if lines else name, "\n".join(lines[1:]) or None)
    return Explained(f"{name}: {_first_line(text)}", "rerun with --debug for the traceback")


def _spark_condition(exc: BaseException) -> str | None:
    """The error condition of a PySpark error (``PARSE_SYNTAX_ERROR``, ...), else None."""
    for getter in ("getCondition", "getErrorClass"):
        method = getattr(exc, getter, None)
        if callable(method) and type(exc).__module__.startswith("pyspark"):
            try:
                value = method()
            except Exception:  # noqa: BLE001 - some wrappers have no condition
                value = None
            if value:
                return str(value)
    return None
