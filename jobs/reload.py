"""Hot reload of rules: a changed query file is deployed between two gold micro-batches
(docs/rules.md, "Hot reload").

Before each gold batch :meth:`Rules.check` compares the query folder (file set and each
rule's ``rule_hash``) with the rules in force. A changed, added or removed rule is
*deployed* at that batch boundary ``b_d`` with its file's ``reload`` strategy (``clear`` or
``warm``; what each does to the rule's state is in :mod:`~lakecep.jobs.gold` and
:mod:`~lakecep.jobs.gold_window`). A file that does not validate is not deployed: the
rule's old version keeps running and the problem is logged (once per change of the
folder). Deployments are appended to ``gold.rule_deployments`` (one row per rule and
deployment, with ``M_d``: the newest event time the stream had seen before ``b_d``), which
is also where a restarted stream finds the versions in force.

``M_d`` comes from a small file next to the stream's checkpoint (:class:`Newest`), updated
after every batch: the running maximum of the batches' event times (and the one before the
last batch, for a batch run again after a crash).
"""

from __future__ import annotations

import hashlib
import json
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass, fields
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from lakecep.config import Settings
from lakecep.queries import (
    QUERIES_DIR,
    RELOAD_STRATEGIES,
    PatternQuery,
    QueryDefinition,
    SnapshotSpec,
    WindowQuery,
    micros,
)
from lakecep.sources import sources_dir
from lakecep.validation import validate

from .streaming import log, writer_id
from .tables import LakeTable

TABLE = "gold.rule_deployments"
#: ``gold.rule_deployments.strategy``: a file's ``reload``, the versions in force when a
#: stream first records them, an added rule (:meth:`Rules.first_sight`: evaluated over
#: the existing history at its first batch, whatever its ``reload``), a
#: removed file, a kind deployed by a restart of gold, the retirement of an old version
#: run side by side
STRATEGIES = ("initial", *RELOAD_STRATEGIES, "backfill", "remove", "restart", "retire")
#: Query kinds a running gold stream can deploy (the others are deployed by a restart).
HOT = (PatternQuery, WindowQuery)


@dataclass(frozen=True)
class Deployment:
    """One rule's deployment at batch ``batch_id`` (``new`` None: removed; ``old`` None:
    added). ``m_d``: the newest event time (µs) seen before the batch (None: none yet)."""

    query_id: str
    old: QueryDefinition | None
    new: QueryDefinition | None
    strategy: str
    batch_id: int
    m_d: int | None

    @property
    def old_hash(self) -> str | None:
        return self.old.rule_hash if self.old is not None else None

    @property
    def new_hash(self) -> str | None:
        return self.new.rule_hash if self.new is not None else None

    def describe(self) -> str:
        if self.strategy == "retire":
            return (f"retired {self.query_id} {self.old_hash} (ran side by side with "
                    f"{self.new_hash}) before batch {self.batch_id}")
        return (f"deployed {self.query_id} {self.old_hash or '(new)'}→"
                f"{self.new_hash or '(removed)'} ({self.strategy}) at batch {self.batch_id}")


class Newest:
    """The newest event time the gold stream ``stream`` has seen, kept beside its
    checkpoint (a file of its own in the checkpoint folder, which Spark ignores):
    ``{"batch_id": b, "newest": µs through b, "before": µs through b - 1}``."""

    def __init__(self, settings: Settings, stream: str) -> None:
        self.path = settings.checkpoint(stream) / "lakecep_newest.json"

    def read(self) -> dict[str, Any] | None:
        try:
            return json.loads(self.path.read_text())
        except (OSError, ValueError):
            return None

    def before(self, batch_id: int) -> int | None:
        """M_d for a deployment at ``batch_id`` (None: no batch seen, or no record)."""
        doc = self.read()
        if doc is None:
            return None
        return doc["newest"] if doc["batch_id"] < batch_id else doc["before"]

    def update(self, batch_id: int, newest: int | None) -> None:
        before = self.before(batch_id)
        value = before if newest is None else newest if before is None else max(before, newest)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"batch_id": batch_id, "newest": value, "before": before}))
        tmp.replace(self.path)


#: What strategy B can run side by side (docs/rules.md, "Hot reload"; a pattern rule only
#: with WITHIN and without inputs, checked when its file is loaded).
Beside = WindowQuery | PatternQuery


class SideBySide:
    """What strategy B needs across restarts of gold (docs/rules.md, "Hot reload"), kept
    beside the stream's checkpoint (``lakecep_windows.json``): the definition of each
    window and (unchained) pattern rule in force (a file changed while gold was stopped
    leaves only its old ``rule_hash`` in ``gold.rule_deployments``), and the old versions
    still running side by side (rule id -> definition, ``M_d``)."""

    def __init__(self, settings: Settings, stream: str) -> None:
        self.path = settings.checkpoint(stream) / "lakecep_windows.json"
        doc = self._read()
        self.definitions: dict[str, Beside] = {
            i: _query(d) for i, d in doc.get("definitions", {}).items()}
        self.retiring: dict[str, tuple[Beside, int]] = {
            i: (_query(r["old"]), int(r["m_d"])) for i, r in doc.get("retiring", {}).items()}

    def _read(self) -> dict[str, Any]:
        try:
            return json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}

    def old(self, query_id: str, rule_hash: str | None) -> Beside | None:
        """The stored definition of version ``rule_hash`` of the rule (None: unknown;
        also an old version already handed its state, by a deployment that crashed before
        it was recorded)."""
        running = self.retiring.get(query_id)
        for query in (self.definitions.get(query_id), running[0] if running else None):
            if query is not None and query.rule_hash == rule_hash:
                return query
        return None

    def save(self, in_force: Sequence[QueryDefinition]) -> None:
        self.definitions = {q.id: q for q in in_force if isinstance(q, WindowQuery) or (
            isinstance(q, PatternQuery) and not q.inputs)}
        doc = {"definitions": {i: _doc(q) for i, q in self.definitions.items()},
               "retiring": {i: {"old": _doc(q), "m_d": m_d}
                            for i, (q, m_d) in self.retiring.items()}}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(doc, sort_keys=True))
        tmp.replace(self.path)


def _doc(query: Beside) -> dict[str, Any]:
    def value(v: Any) -> Any:
        if isinstance(v, timedelta):
            return {"us": micros(v)}
        if isinstance(v, SnapshotSpec):
            return {"snapshot": {f.name: value(getattr(v, f.name)) for f in fields(v)}}
        return v

    kind = {"kind": "pattern"} if isinstance(query, PatternQuery) else {}
    return kind | {f.name: value(getattr(query, f.name)) for f in fields(query)}


def _query(doc: dict[str, Any]) -> Beside:
    def value(v: Any) -> Any:
        if isinstance(v, dict) and "snapshot" in v:
            return SnapshotSpec(**{k: value(x) for k, x in v["snapshot"].items()})
        if isinstance(v, dict):
            return timedelta(microseconds=v["us"])
        if isinstance(v, list):
            return tuple(value(x) for x in v)
        return v

    kind = PatternQuery if doc.get("kind") == "pattern" else WindowQuery  # (older: windows)
    return kind(**{k: value(v) for k, v in doc.items() if k != "kind"})


def served(spark, settings: Settings):  # noqa: ANN001, ANN201
    """``gold.window_outputs`` as served (docs/rules.md, "Hot reload", B): of a rule
    deployed side by side, a window starting at or before the deployment's ``M_d`` from
    the old version, one starting after it from the new; every other row as written."""
    from pyspark.sql import functions as F

    from .gold_window import OUTPUTS

    rows = LakeTable(spark, settings, OUTPUTS).ensure().read()
    rule = F.coalesce(F.col("rule_hash"), F.lit(""))
    for d in (LakeTable(spark, settings, TABLE).ensure().read()
              .where(F.col("strategy") == "side_by_side").collect()):
        after = F.col("window_start") > F.lit(d.m_d)
        rows = rows.where(~((F.col("query_id") == d.query_id) & (
            ((rule == (d.old_hash or "")) & after) | ((rule == (d.new_hash or "")) & ~after))))
    return rows


#: Delta's streaming-source offset index before a version's first file (the metadata
#: change markers are below it) and after its last (``DeltaSourceOffset.END_INDEX``)
BASE_INDEX, END_INDEX = -1, 2**63 - 1 - 100


def processed(spark, settings: Settings, stream: str, silver: LakeTable, batch_id: int):  # noqa: ANN001, ANN201
    """The silver events the gold stream ``stream`` read in its batches before ``batch_id``
    (the pre-deployment data of a deployment at ``batch_id``; docs/rules.md, "Hot reload").

    Not silver at the version a batch pins (its latest: silver may hold commits the stream
    has not read yet, with ``maxFilesPerTrigger`` or when silver ran more often than gold)
    but silver up to the batch's start offset, read from the stream's offset log
    (``offsets/<batch_id - 1>``: ``reservoirVersion`` V, ``index`` I, ``isStartingVersion``):
    every version before V, and of V the files up to index I in the Delta source's order
    (a commit's data-change ``add`` actions in log order; the initial snapshot's files by
    modification time and path)."""
    from pyspark.sql import functions as F

    empty = silver.read().limit(0)
    if batch_id <= 0:
        return empty
    path = settings.checkpoint(stream) / "offsets" / str(batch_id - 1)
    try:
        offset = json.loads(path.read_text().splitlines()[-1])
    except (OSError, ValueError, IndexError) as exc:
        raise RuntimeError(
            f"{stream}: cannot read the stream's offset of batch {batch_id - 1} ({path}: "
            f"{exc}), which says what a deployment at batch {batch_id} has seen; restore the "
            "checkpoint, or deploy the rule with reload = \"clear\"") from exc
    version, index = int(offset["reservoirVersion"]), int(offset["index"])
    snapshot = bool(offset.get("isStartingVersion"))
    if index >= END_INDEX:  # the whole of version V
        return silver.as_of(version)
    before = empty if snapshot or version == 0 else silver.as_of(version - 1)
    if index <= BASE_INDEX:  # nothing of version V yet
        return before
    if snapshot:
        files = silver.as_of(version).select(
            "_metadata.file_name", "_metadata.file_modification_time").distinct().orderBy(
            "file_modification_time", "file_name").limit(index + 1)
        names = [r.file_name for r in files.collect()]
    else:
        log_file = f"{silver.path}/_delta_log/{version:020d}.json"
        adds = [json.loads(r.value).get("add") for r in spark.read.text(log_file).collect()]
        names = [unquote(a["path"]).rsplit("/", 1)[-1] for a in adds
                 if a is not None and a.get("dataChange", True)][:index + 1]
    part = silver.as_of(version).where(F.col("_metadata.file_name").isin(names))
    return before.unionByName(part)


def _file_ids(folder: Path) -> dict[str, str]:
    """Query file -> the ``id`` it declares (files whose TOML does not parse are left out)."""
    out = {}
    for path in sorted(folder.glob("*.toml")):
        try:
            ident = tomllib.loads(path.read_text()).get("id")
        except (OSError, tomllib.TOMLDecodeError):
            continue
        if isinstance(ident, str):
            out[str(path)] = ident
    return out


class Rules:
    """The rules in force in one gold stream, and the check of its query folder."""

    def __init__(self, spark, settings: Settings, stream: str,  # noqa: ANN001
                 queries: Sequence[QueryDefinition], watch: bool,
                 priority: str | None = None) -> None:
        self.spark, self.settings, self.stream = spark, settings, stream
        #: a class stream's class (docs/rules.md, "Priorities"): the folder's rules of
        #: other classes are not its own (a rule moved to another class is removed here
        #: and added in that class's stream)
        self.priority = priority
        self.folder = Path(settings.queries_dir) if settings.queries_dir else QUERIES_DIR
        self.watch = watch
        self.in_force: dict[str, QueryDefinition] = {q.id: q for q in queries}
        self.files = _file_ids(self.folder) if watch else {}
        self.signature = self._signature()
        self.newest = Newest(settings, stream)
        #: the rules added at a batch (id -> batch id): a batch run again after a crash
        #: finds its deployment recorded and backfills them again (:meth:`backfills`)
        self.added: dict[str, int] = {}
        self.elsewhere: set[str] = set()
        #: the versions in force recorded by earlier runs: id -> (rule_hash, strategy, m_d)
        self.recorded = self._recorded()

    def _signature(self) -> tuple[Any, ...]:
        if not self.watch:
            return ()
        out = []
        sources = sources_dir(self.settings)
        for path in sorted([*self.folder.glob("*.toml"),
                            *(sources.glob("*.toml") if sources.is_dir() else ())]):
            try:
                st = path.stat()
            except OSError:
                continue
            out.append((str(path), st.st_mtime_ns, st.st_size))
        return tuple(out)

    def _recorded(self) -> dict[str, tuple[str | None, str, int | None]]:
        from pyspark.sql import functions as F

        table = LakeTable(self.spark, self.settings, TABLE).ensure()
        # one read of the (small) table: this stream's newest row per rule, and the rules
        # another gold stream has run -- one that appears here moved (to another priority
        # class, docs/rules.md): deployed with its reload, not as an addition
        # (:meth:`first_sight`)
        rows = table.read().select("stream", "query_id", "old_hash", "new_hash", "strategy",
                                   F.unix_micros("m_d").alias("m_d"), "batch_id",
                                   "deployed_at").collect()
        self.elsewhere = {r.query_id for r in rows if r.stream != self.stream}
        newest: dict[str, Any] = {}
        for r in rows:
            if r.stream == self.stream and (r.query_id not in newest or (
                    r.batch_id, r.deployed_at) > (newest[r.query_id].batch_id,
                                                  newest[r.query_id].deployed_at)):
                newest[r.query_id] = r
        self.added = {q: r.batch_id for q, r in newest.items()
                      if r.strategy == "backfill" and r.old_hash is None}
        return {q: (r.new_hash, r.strategy, r.m_d) for q, r in newest.items()}

    def first_sight(self, query_id: str) -> bool:
        """Whether a rule appearing now was never run by a gold stream of this lake (an
        addition, deployed with ``backfill``). A rule removed and added back, or moved from
        another stream (priority class), is deployed with its ``reload``: its earlier
        outputs are in gold (a window rule would emit its windows again)."""
        return query_id not in self.recorded and query_id not in self.elsewhere

    def backfills(self, batch_id: int) -> set[str]:
        """The rules added at batch ``batch_id`` (strategy ``backfill``, no old hash), whose
        first batch evaluates them over all of silver at the pinned version: recorded by
        this batch, or by an earlier run of it (a crash before the stream committed it).
        (``lakecep backfill`` records a rule in force as ``backfill`` with its own hash as
        the old one: not an addition.)"""
        return {q for q, b in self.added.items() if b == batch_id and q in self.in_force}

    def floors(self) -> dict[str, int]:
        """Per rule deployed with ``clear`` (and still in that version): ``M_d``, below
        which its version sees no event (windows starting at or before it, matches with an
        event at or before it are the gap). Also per pattern rule deployed side by side,
        while its old version runs and after it retired: matches with an event at or before
        ``M_d`` are the old version's (docs/rules.md, "Hot reload", B)."""
        out = {}
        for query_id, (new_hash, strategy, m_d) in self.recorded.items():
            query = self.in_force.get(query_id)
            floored = strategy == "clear" or (strategy in ("side_by_side", "retire")
                                              and isinstance(query, PatternQuery))
            if (floored and m_d is not None and query is not None
                    and query.rule_hash == new_hash):
                out[query_id] = m_d
        return out

    def check(self, batch_id: int, boundary: bool = True) -> list[Deployment]:
        """The deployments at the boundary before ``batch_id``: rules whose version differs
        from the one recorded in force (a restart after a change of the files, or the
        stream's first batch), then rules whose file changed since the last check -- only
        at a ``boundary`` of silver commits (the batch before did not end inside one,
        :func:`~lakecep.jobs.streaming.ends_inside_commit`): a rule edited while gold reads
        a silver commit in parts waits for the commit's end, as a window rule's warm start
        would otherwise set its watermark from part of the commit and drop the rest as late
        (docs/architecture.md, "Late events")."""
        deployments: list[Deployment] = []
        if not self.recorded:  # the stream's first batch with hot reload: its baseline
            deployments += [Deployment(q.id, None, q, "initial", batch_id, None)
                            for q in self.in_force.values()]
        else:
            m_d = self.newest.before(batch_id)
            for query in self.in_force.values():
                recorded = self.recorded.get(query.id)
                if recorded is None or recorded[0] != query.rule_hash:
                    old = None if recorded is None or recorded[0] is None else query
                    chained = bool(getattr(query, "inputs", ()))  # (bootstrap of their own)
                    hot = isinstance(query, HOT) and not chained
                    strategy = ("backfill" if self.first_sight(query.id) and not chained
                                else query.reload if hot else "restart")
                    deployments.append(Deployment(
                        query.id, _placeholder(old, recorded), query, strategy, batch_id,
                        m_d))
            for query_id, (new_hash, _, _) in sorted(self.recorded.items()):
                if new_hash is not None and query_id not in self.in_force:  # file removed
                    deployments.append(Deployment(query_id, _Old(query_id, new_hash), None,
                                                  "remove", batch_id, m_d))
        signature = self._signature()
        if self.watch and boundary and signature != self.signature and not deployments:
            deployments += self._changed(batch_id, signature)  # (else: at the next batch)
        return deployments

    def _changed(self, batch_id: int, signature: tuple[Any, ...]) -> list[Deployment]:
        report = validate(self.folder, sources_dir(self.settings))
        bad = {p.file for p in report.problems}
        files = _file_ids(self.folder)
        held = {files[f] for f in bad if f in files} | {
            i for f, i in self.files.items() if f in bad}
        if bad:
            problems = "; ".join(str(p) for p in report.problems[:5])
            log(f"{self.stream}: query folder changed, not deployed (the version in force "
                f"keeps running): {problems}")
        self.signature = signature  # (the files and the sources: a fix is a new check)
        if any(Path(f).parent != self.folder for f in bad):
            return []  # a source file or the folder itself: nothing is deployed
        found = {q.id: q for q in report.queries if q.id not in held
                 and self.priority in (None, q.priority)}
        m_d = self.newest.before(batch_id)
        out = []
        for query_id in sorted(set(found) | set(self.in_force)):
            if query_id in held:
                continue
            old, new = self.in_force.get(query_id), found.get(query_id)
            if old is not None and new is not None and old.rule_hash == new.rule_hash:
                continue  # description, alert...: no new version (applied at a start)
            kind = new if new is not None else old
            assert kind is not None
            if not isinstance(kind, HOT) or (isinstance(kind, PatternQuery) and kind.inputs):
                log(f"{self.stream}: {query_id} changed; a {type(kind).__name__} "
                    f"{'(chained) ' if getattr(kind, 'inputs', ()) else ''}is deployed at the "
                    "next start of gold, not while it runs (docs/rules.md, 'Hot reload')")
                continue
            strategy = ("remove" if new is None else "backfill" if self.first_sight(query_id)
                        else new.reload)
            out.append(Deployment(query_id, old, new, strategy, batch_id, m_d))
        self.files = {f: i for f, i in files.items() if f not in bad or i in self.in_force}
        return out

    def record(self, deployments: Sequence[Deployment], detected: datetime) -> None:
        """Append the deployments to ``gold.rule_deployments`` and make them in force."""
        if not deployments:
            return
        from pyspark.sql import functions as F

        rows = [(self.stream, d.query_id, d.old_hash, d.new_hash, d.strategy, d.batch_id,
                 d.m_d, _micros(detected)) for d in deployments]
        frame = self.spark.createDataFrame(rows, _DDL).select(
            "stream", "query_id", "old_hash", "new_hash", "strategy", "batch_id",
            F.timestamp_micros("m_d").alias("m_d"),
            F.timestamp_micros("deployed_at").alias("deployed_at"))
        # idempotent per batch and set of deployments: a batch run again after a crash
        # records nothing twice (and other deployments at that batch are not skipped)
        what = hashlib.sha256("|".join(d.describe() for d in deployments).encode())
        LakeTable(self.spark, self.settings, TABLE).ensure().append(
            frame, f"{writer_id(self.settings, self.stream)}:rule_deployments:"
            f"{what.hexdigest()[:16]}", deployments[0].batch_id)
        for d in deployments:
            self.recorded[d.query_id] = (d.new_hash, d.strategy, d.m_d)
            if d.strategy == "backfill" and d.old is None:
                self.added[d.query_id] = d.batch_id
            if d.new is None:
                self.in_force.pop(d.query_id, None)
            else:
                self.in_force[d.query_id] = d.new
            if d.strategy != "initial":
                log(f"{self.stream}: {d.describe()}"
                    + (f", M_d {_iso(d.m_d)}" if d.m_d is not None else ""))
        if all(d.strategy == "initial" for d in deployments):
            log(f"{self.stream}: rule versions in force recorded in {TABLE} (baseline of hot "
                "reload)")


_DDL = ("stream STRING, query_id STRING, old_hash STRING, new_hash STRING, strategy STRING, "
        "batch_id BIGINT, m_d BIGINT, deployed_at BIGINT")


def _placeholder(query: QueryDefinition | None,
                 recorded: tuple[str | None, str, int | None] | None) -> Any:
    """The old version of a rule changed while gold was stopped: only its hash is known."""
    if query is None or recorded is None:
        return None
    return _Old(query.id, recorded[0] or "")


@dataclass(frozen=True)
class _Old:
    id: str
    rule_hash: str


def _micros(value: datetime) -> int:
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return int(value.timestamp() * 1_000_000)


def _iso(us: int) -> str:
    return datetime.fromtimestamp(us / 1e6, UTC).isoformat()
