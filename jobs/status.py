"""Counts, reconciliation and gold-vs-ground-truth: what ``lakecep status`` prints.

Reconciliation (nothing is lost; docs/sources.md, "Reconciliation"): landed lines = bronze
rows (one definition of a line, ``lakecep.events.landing_lines``; records of
``lakecep.sources.file_records`` for declared sources; for a Kafka source the messages
read, i.e. the distinct origins (topic, partition, offset) in bronze, so a message written
twice shows as landed != bronze), bronze rows = silver events + duplicates + quarantined
rows + filtered + merged_away + pending - split_extra (filtered and merged rows are kept in
silver.quarantine with those codes, shown apart; pending and split_extra are the
sequential operators' counts in silver.operator_state), and reason by reason: bronze rows
with ``parse_status`` s != ``ok`` = quarantined rows with reason code s, bronze ``ok`` rows
+ split_extra = silver + duplicates + the other quarantined rows + pending.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from lakecep.config import Settings, Uri

from .tables import LakeTable


@dataclass
class Check:
    name: str
    ok: bool
    detail: str


@dataclass
class LakeStatus:
    counts: dict[str, int]
    checks: list[Check] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)

    def __str__(self) -> str:
        lines = ["tables:"]
        lines += [f"  {name:<24} {n:>12,}" for name, n in self.counts.items()]
        lines.append("checks:")
        lines += [f"  [{'ok' if c.ok else 'FAIL'}] {c.name}: {c.detail}" for c in self.checks]
        return "\n".join(lines)


_TRUTH_META = {"generator", "params", "definitions", "counts"}


def count_landed_lines(landing: Path) -> int:
    """Lines in the landing files, by the one definition bronze splits them with
    (``lakecep.events.landing_lines``), over the files Spark's file source reads."""
    from lakecep.events import count_landing_lines

    total = 0
    for path in sorted(landing.glob("*")):
        if not path.is_file() or path.name.startswith((".", "_")):
            continue
        total += count_landing_lines(path.read_bytes())
    return total


def count_landed_uri(spark, landing: Uri, source=None, max_line_bytes: int = 65536) -> int:  # noqa: ANN001
    """:func:`count_landed_lines` (or a declared ``source``'s records) over an object-store
    landing: Spark reads the files (``binaryFile``: the files the bronze stream reads,
    hidden ``.``/``_`` ones skipped alike) and each is counted by the same definition on
    the executors. A landing that does not exist yet has 0 records."""
    import pandas as pd
    from pyspark.errors import AnalysisException

    def count(frames):  # noqa: ANN001, ANN202
        from lakecep.events import count_landing_lines
        from lakecep.sources import count_records

        for frame in frames:
            yield pd.DataFrame({"n": [
                count_landing_lines(bytes(c)) if source is None
                else count_records(source, bytes(c), max_line_bytes)
                for c in frame["content"]]}, dtype="int64")

    try:
        files = (spark.read.format("binaryFile").option("recursiveFileLookup", "false")
                 .load(str(landing)).select("content"))
        row = files.mapInPandas(count, "n BIGINT").groupBy().sum("n").first()
    except AnalysisException as exc:
        if "PATH_NOT_FOUND" in str(exc) or "does not exist" in str(exc):
            return 0
        raise
    return int(row[0] or 0) if row is not None else 0


def count_landed(settings: Settings, spark=None) -> int:  # noqa: ANN001
    """Landed records: the built-in landing's lines, or, when sources are declared, each
    source's records by ``lakecep.sources.file_records`` (the definition bronze uses).
    A landing on an object store is read through ``spark`` (:func:`count_landed_uri`)."""
    from lakecep.sources import count_records, load_sources, sources_dir

    def via_spark(landing: Uri, source=None) -> int:  # noqa: ANN001
        if spark is None:
            raise ValueError(f"counting the landed records of {landing} needs a Spark "
                             "session (an object-store landing)")
        return count_landed_uri(spark, landing, source, settings.max_line_bytes)

    sources = load_sources(sources_dir(settings))
    if not sources:
        if isinstance(settings.landing, Uri):
            return via_spark(settings.landing)
        return count_landed_lines(settings.landing)
    total = 0
    for source in sources:
        if source.format == "kafka":
            continue  # messages read: counted from bronze (kafka_messages_read)
        landing = source.landing(settings.home)
        if isinstance(landing, Uri):
            total += via_spark(landing, source)
            continue
        for path in sorted(landing.glob("*")) if landing.is_dir() else []:
            if path.is_file() and not path.name.startswith((".", "_")):
                total += count_records(source, path.read_bytes(), settings.max_line_bytes)
    return total


def kafka_messages_read(spark, settings: Settings) -> int:  # noqa: ANN001
    """Messages the Kafka sources read: the distinct origins (``source_file`` =
    ``kafka://<source>/<topic>/<partition>``, ``line_no`` = offset) in bronze. A message
    written to bronze twice (a checkpoint deleted and the topic read again) counts once
    here and twice in bronze, so "landed = bronze" points at it."""
    from pyspark.sql import functions as F

    from lakecep.sources import KAFKA_ORIGIN, load_sources, sources_dir

    if not any(s.format == "kafka" for s in load_sources(sources_dir(settings))):
        return 0
    table = LakeTable(spark, settings, "bronze.events")
    if not table.exists():
        return 0
    return (table.read().where(F.col("source_file").startswith(KAFKA_ORIGIN))
            .select("source_file", "line_no").distinct().count())


def reason_check(spark, settings: Settings, terms: OperatorTerms | None = None) -> Check:  # noqa: ANN001
    """Reason by reason: each bronze ``parse_status`` other than ``ok`` = the quarantined
    rows with that reason code, and bronze ``ok`` (+ split_extra) = silver + duplicates +
    the quarantined rows with an event-level code (+ pending) (``lakecep.events`` judges a
    line once, for both layers)."""
    from pyspark.sql import functions as F

    from lakecep.events import LINE_CODES

    def counts(name: str, column) -> dict[str, int]:  # noqa: ANN001
        table = LakeTable(spark, settings, name)
        if not table.exists():
            return {}
        return {r[0]: r[1] for r in table.read().groupBy(column.alias("k")).count().collect()}

    bronze = counts("bronze.events", F.col("parse_status"))
    quarantine = counts("silver.quarantine", F.split(F.col("reason"), ":", 2)[0])
    kept = sum(counts(name, F.lit("all")).get("all", 0)
               for name in ("silver.events", "silver.duplicates"))
    from .bronze import PARSE_STATUSES

    record_level = {*LINE_CODES, *PARSE_STATUSES} - {"ok"}  # judged by bronze
    event_level = sum(n for code, n in quarantine.items() if code not in record_level)
    parts, ok = [], True
    for code in ("ok", *LINE_CODES, *sorted(set(bronze) - {"ok", *LINE_CODES})):
        have = bronze.get(code, 0)
        want = quarantine.get(code, 0)
        if code == "ok":
            want = kept + event_level + (terms.pending - terms.split_extra if terms else 0)
        if have or want:
            ok = ok and have == want
            parts.append(f"{code} {have:,} {'=' if have == want else '!='} {want:,}")
    return Check("bronze status = silver outcome, reason by reason", ok,
                 "; ".join(parts) or "no rows")


def gold_sequences(spark, settings: Settings) -> dict[str, set[tuple[str, ...]]]:  # noqa: ANN001
    """Per query id, the set of sub-event id tuples (live ids, then archive ids) of the
    current answer (rows not superseded by a late event)."""
    gold = LakeTable(spark, settings, "gold.complex_events")
    if not gold.exists():
        return {}
    out: dict[str, set[tuple[str, ...]]] = {}
    table = gold.read()
    if "superseded_version" in table.columns:  # a lake from an older release has none
        table = table.where("superseded_version IS NULL")
    for row in table.select("query_id", "live_event_ids", "archive_event_ids").collect():
        ids = tuple(row.live_event_ids or []) + tuple(row.archive_event_ids or [])
        out.setdefault(row.query_id, set()).add(ids)
    return out


def compare_with_truth(
    counts: dict[str, int], gold: dict[str, set[tuple[str, ...]]], truth: dict
) -> list[Check]:
    """Silver split and gold matches against the generator's ``truth.json``."""
    checks = []
    expected_counts = truth.get("counts", {})
    if "valid_events" in expected_counts:
        want = (expected_counts["valid_events"], expected_counts["duplicates"],
                sum(expected_counts["rejected_by_reason_code"].values()))
        got = (counts["silver.events"], counts["silver.duplicates"], counts["silver.quarantine"])
        checks.append(Check("silver/duplicates/quarantine = generator's counts", want == got,
                            f"expected {want}, found {got}"))
    queries = {k: v for k, v in truth.items() if k not in _TRUTH_META and isinstance(v, list)}
    for query_id, expected_list in sorted(queries.items()):
        expected = {tuple(ids) for ids in expected_list}
        found = gold.get(query_id, set())
        missing, extra = expected - found, found - expected
        detail = f"{len(found)} in gold, {len(expected)} expected"
        if missing or extra:
            detail += f"; missing {sorted(missing)[:3]}, unexpected {sorted(extra)[:3]}"
        checks.append(Check(f"gold {query_id} = ground truth", not missing and not extra, detail))
    return checks


@dataclass
class OperatorTerms:
    """The reconciliation terms of the preprocessing operators (docs/sources.md,
    "Reconciliation"): quarantined rows by ``filtered`` / ``merged`` code, and the counts
    the sequential operators keep in ``silver.operator_state``."""

    filtered: int = 0
    merged: int = 0
    split_extra: int = 0
    merged_away: int = 0
    pending: int = 0
    #: (source_file, line_no) of the records pending in open merge groups
    pending_origins: list[tuple[str, int]] = field(default_factory=list)
    #: whether silver.operator_state exists (a sequential source ran)
    stateful: bool = False


def operator_terms(spark, settings: Settings) -> OperatorTerms:  # noqa: ANN001
    """Rows an operator dropped on purpose (kept in silver.quarantine with the reason code
    ``filtered`` or ``merged``: never lost silently) and the operators' own counts."""
    from pyspark.sql import functions as F

    from lakecep.operators import MERGED, pending_origins, state_counts
    from lakecep.sources import FILTERED

    terms = OperatorTerms()
    table = LakeTable(spark, settings, "silver.quarantine")
    if table.exists():
        code = F.split(F.col("reason"), ":", 2)[0]
        for r in (table.read().where(code.isin(FILTERED, MERGED)).groupBy(code.alias("c"))
                  .count().collect()):
            setattr(terms, "filtered" if r.c == FILTERED else "merged", r[1])
    state = LakeTable(spark, settings, "silver.operator_state")
    if state.exists():
        terms.stateful = True
        for r in state.read().select("state").collect():
            counts = state_counts(r.state)
            terms.split_extra += counts["split_extra"]
            terms.merged_away += counts["merged_away"]
            terms.pending += counts["pending"]
            terms.pending_origins += pending_origins(r.state)
    return terms


def operator_checks(spark, settings: Settings, terms: OperatorTerms) -> list[Check]:  # noqa: ANN001
    """The counts of the sequential operators against the tables: the ``merged`` rows of
    silver.quarantine = merged_away, and (outcome rows + pending records) - their distinct
    origins = split_extra (every part of every split message has an outcome)."""
    from functools import reduce

    checks = [Check("merged rows in quarantine = merged_away counted by the operators",
                    terms.merged == terms.merged_away,
                    f"{terms.merged:,} merged rows, {terms.merged_away:,} counted")]
    frames = [LakeTable(spark, settings, name).read().select("source_file", "line_no")
              for name in ("silver.events", "silver.duplicates", "silver.quarantine")
              if LakeTable(spark, settings, name).exists()]
    if terms.pending_origins:
        frames.append(spark.createDataFrame(terms.pending_origins,
                                            "source_file STRING, line_no BIGINT"))
    if not frames:
        return checks
    origins = reduce(lambda a, b: a.unionAll(b), frames)
    rows, distinct = origins.count(), origins.distinct().count()
    checks.append(Check("split parts: outcomes + pending - distinct origins = split_extra",
                        rows - distinct == terms.split_extra,
                        f"{rows:,} - {distinct:,} = {rows - distinct:,}, split_extra "
                        f"{terms.split_extra:,}"))
    return checks


def lake_status(spark, settings: Settings) -> LakeStatus:  # noqa: ANN001
    names = ["bronze.events", "silver.events", "silver.duplicates", "silver.quarantine",
             "gold.complex_events", "gold.window_outputs", "gold.quality_results"]
    counts = {"landing (lines)": count_landed(settings, spark)
              + kafka_messages_read(spark, settings)}
    for name in names:
        table = LakeTable(spark, settings, name)
        counts[name] = table.read().count() if table.exists() else 0
    status = LakeStatus(counts)
    bronze = counts["bronze.events"]
    status.checks.append(Check("landed = bronze", counts["landing (lines)"] == bronze,
                               f"{counts['landing (lines)']:,} landed, {bronze:,} in bronze"))
    terms = operator_terms(spark, settings)
    # (filtered and merged rows are part of silver.quarantine; shown apart)
    quarantine = counts["silver.quarantine"] - terms.filtered - terms.merged
    split = (counts["silver.events"] + counts["silver.duplicates"] + quarantine
             + terms.filtered + terms.merged + terms.pending - terms.split_extra)
    status.checks.append(Check(
        "bronze = silver + duplicates + quarantine + filtered + merged_away + pending - "
        "split_extra", bronze == split,
        f"{bronze:,} = {counts['silver.events']:,} + {counts['silver.duplicates']:,} + "
        f"{quarantine:,} + {terms.filtered:,} + {terms.merged:,} + {terms.pending:,} - "
        f"{terms.split_extra:,} ({split:,})"))
    status.checks.append(reason_check(spark, settings, terms))
    if terms.stateful:
        status.checks += operator_checks(spark, settings, terms)
    truth_file = settings.truth_dir / "truth.json"
    if truth_file.exists():
        truth = json.loads(truth_file.read_text())
        status.checks += compare_with_truth(counts, gold_sequences(spark, settings), truth)
    return status
