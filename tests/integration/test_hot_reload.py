"""Hot reload of rules (docs/rules.md, "Hot reload"): window and pattern rules changed
between two gold batches, deployed with ``reload = "clear"`` (A), ``"side_by_side"`` (B)
and ``"warm"`` (C), with silver ahead of gold at the deployment. Gold
must equal each strategy's offline truth row for row, every row with the rule_hash the
truth assigns it; and the deployment check keeps the old version when a changed file does
not validate."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pandas as pd
import pytest
from pyspark.sql import functions as F

from cep_core.windows import Event, Insert
from lakecep.jobs import bronze, gold, silver
from lakecep.jobs.reload import TABLE, Rules
from lakecep.jobs.reload import served as served_windows
from lakecep.jobs.tables import LakeTable
from lakecep.queries import PatternQuery, WindowQuery, load_query

pytestmark = pytest.mark.spark
T0 = datetime(2026, 5, 1, tzinfo=UTC)
US = 60_000_000  # a minute in µs


def _window(rule: str, minutes: int, reload: str) -> str:
    return f'''id = "{rule}"
kind = "window"
reload = "{reload}"
attribute = "temperature"
aggregates = ["avg", "count"]
window = "{minutes} minutes"
event_types = ["reading"]
'''


def _pattern(rule: str, second: str, reload: str) -> str:
    return f'''id = "{rule}"
reload = "{reload}"
query = """SELECT * FROM events MATCH_RECOGNIZE (PARTITION BY object_id ORDER BY event_time
  MEASURES A.event_id AS a PATTERN (A {second}) WITHIN INTERVAL '30' MINUTE
  DEFINE A AS source_id = 'A', {second} AS source_id = '{second}')"""
'''


#: rule -> its reload strategy (w_: a window rule, p_: a pattern rule)
STRATEGY = {"w_clear": "clear", "w_warm": "warm", "w_side": "side_by_side",
            "p_clear": "clear", "p_warm": "warm", "p_side": "side_by_side"}


def _rules(version: int) -> dict[str, str]:
    """v1: 5-minute windows, pattern A B; v2: 10-minute windows, pattern A C."""
    minutes, second = (5, "B") if version == 1 else (10, "C")
    return {rule: _window(rule, minutes, reload) if rule.startswith("w") else
            _pattern(rule, second, reload) for rule, reload in STRATEGY.items()}


# tags: (tag, reader, minute); readings of s1 and s2 every minute; M_d = minute 19. The
# last batch is late (all before M_d): silver holds it when the deployment batch runs.
# For p_side (B): t9 is an old-version match completed after the deployment, t10 one of
# late events in the deployment batch, t8 one of late events after the old version retired
TAGS = [
    [("t1", "A", 1), ("t1", "B", 2), ("t2", "A", 3), ("t2", "C", 4), ("t3", "A", 5)],
    [("t3", "B", 11), ("t4", "A", 12), ("t4", "C", 13), ("t5", "A", 18), ("t9", "A", 19)],
    [("t5", "C", 21), ("t6", "A", 25), ("t6", "C", 26), ("t1", "A", 30), ("t1", "C", 31),
     ("t3", "A", 32), ("t3", "B", 33), ("t9", "B", 23), ("t10", "A", 8), ("t10", "B", 9)],
    [("t7", "A", 15), ("t7", "C", 16), ("t8", "A", 14), ("t8", "B", 15)],
]
MINUTES = [range(0, 10), range(10, 20), range(20, 40), range(17, 18)]


def _batches() -> list[list[dict]]:
    out = []
    for n, (tags, minutes) in enumerate(zip(TAGS, MINUTES, strict=True)):
        rows = [{"event_id": f"r{n}_{s}_{m}", "object_id": s, "event_type": "reading",
                 "source_id": "r", "time": m * US + n // 3 * US // 2,
                 "temperature": float((m * 7 + k) % 11)}
                for m in minutes for k, s in enumerate(("s1", "s2"))]
        rows += [{"event_id": f"{tag}_{m}", "object_id": tag, "event_type": "read",
                  "source_id": reader, "time": m * US} for tag, reader, m in tags]
        if n == 2:  # moves the watermark past every window
            rows.append({"event_id": "x", "object_id": "x", "event_type": "other",
                         "source_id": "x", "time": 60 * US})
        out.append(rows)
    return out


def _line(e: dict) -> str:
    when = (T0 + timedelta(microseconds=e["time"])).isoformat().replace("+00:00", "Z")
    attributes = {"temperature": e["temperature"]} if "temperature" in e else {}
    return json.dumps({"event_id": e["event_id"], "object_id": e["object_id"],
                       "event_type": e["event_type"], "source_id": e["source_id"],
                       "event_time": when, "attributes": attributes})


def _window_rows(query: WindowQuery, batches: list[list[dict]], seq: dict[str, int],
                 marks: list[int], emit_from: int = 0) -> set[tuple]:
    """One operator fed ``batches`` with the gold watermarks ``marks``; the rows emitted
    by batches ``>= emit_from``, with the query's rule_hash."""
    op, out = query.operator(), set()
    for n, (batch, mark) in enumerate(zip(batches, marks, strict=True)):
        for e in sorted((e for e in batch if e["event_type"] == "reading"),
                        key=lambda e: (e["time"], seq[e["event_id"]])):
            op.apply(Insert(Event(e["object_id"], e["time"] + _t0(), seq[e["event_id"]],
                                  e["temperature"])))
        rows = op.advance(mark + _t0())
        if n >= emit_from:
            out |= {(r.key, r.window_start, r.window_end, r.aggregate, _round(r.value),
                     r.count, r.revision, r.emitted_at, query.rule_hash) for r in rows}
    return out


def _t0() -> int:
    return int(T0.timestamp()) * 1_000_000


def _round(value: float | None) -> float | None:
    return None if value is None else float(f"{value:.12g}")


def _matches(query: PatternQuery, events: list[dict]) -> set[tuple[str, ...]]:
    frame = pd.DataFrame([{**e, "event_time": pd.Timestamp(T0.replace(tzinfo=None))
                           + pd.Timedelta(microseconds=e["time"])}
                          for e in events]).drop(columns=["time", "temperature"])
    frame = frame.sort_values("event_time", kind="stable").reset_index(drop=True)
    return {tuple(frame["event_id"].iloc[list(m.rows)]) for m in
            query.compiled().find_matches(frame) if m.rows}


def test_clear_and_warm_reload_equal_offline_truth(spark, settings, tmp_path: Path) -> None:  # noqa: ANN001
    folder = tmp_path / "queries"
    folder.mkdir()
    local = dataclasses.replace(settings, home=tmp_path / "home", queries_dir=str(folder),
                                partial_match_buckets=2)
    local.landing.mkdir(parents=True)
    batches = _batches()
    versions: dict[int, dict[str, WindowQuery | PatternQuery]] = {}
    for version in (1, 2):
        for name, text in _rules(version).items():
            (tmp_path / f"{name}.toml").write_text(text)
        versions[version] = {name: load_query(tmp_path / f"{name}.toml")  # type: ignore[misc]
                             for name in _rules(version)}
    for n, batch in enumerate(batches):
        for name, text in _rules(1 if n < 2 else 2).items():  # changed before batch 2
            (folder / f"{name}.toml").write_text(text)
        (local.landing / f"b{n}.jsonl").write_text("\n".join(map(_line, batch)) + "\n")
        for job in (bronze, silver):
            job.run(spark, local)
        if n == 2:
            continue  # silver is ahead of gold at the deployment: gold runs batch 2 and 3
        # after silver wrote both, one silver commit per gold batch (the warm start must
        # not feed batch 3's events before M_d: they are batch 3's, and too late there)
        files = LakeTable(spark, local, "silver.events").read().where(
            F.col("event_id").startswith("r2_")).select("_metadata.file_name").distinct()
        gold.run(spark, local if n < 2 else dataclasses.replace(
            local, max_files_per_trigger=files.count()))

    m_d = max(e["time"] for batch in batches[:2] for e in batch)
    deployed = LakeTable(spark, local, TABLE).read().select(
        "query_id", "old_hash", "new_hash", "strategy", "batch_id",
        F.unix_micros("m_d").alias("m_d")).collect()
    v1, v2 = versions[1], versions[2]
    assert len(deployed) == len({(r.query_id, r.batch_id) for r in deployed})  # (GX suite)
    assert {tuple(r) for r in deployed} == {
        *((q, None, v1[q].rule_hash, "initial", 0, None) for q in v1),
        *((q, v1[q].rule_hash, v2[q].rule_hash, STRATEGY[q], 2, m_d + _t0()) for q in v1),
        # B: the old version retires once the watermark (minute 60) passes M_d + 5 minutes
        # (after batch 2: batch 3 is the first without it); the pattern's once the newest
        # event (minute 60) is after M_d + WITHIN (30 minutes)
        *((q, v1[q].rule_hash, v2[q].rule_hash, "retire", 3, m_d + _t0())
          for q in ("w_side", "p_side"))}

    # windows: gold.window_outputs = the old version's rows emitted before batch 2 + the
    # new version's rows from batch 2 on, per strategy
    seq = {r.event_id: r.seq for r in LakeTable(spark, local, "silver.events").read().select(
        "event_id", F.xxhash64("event_id").alias("seq")).collect()}
    marks = [max(e["time"] for e in batch) for batch in batches]
    marks = [max(marks[:n + 1]) for n in range(len(marks))]
    got: dict[str, set[tuple]] = {}
    for r in LakeTable(spark, local, "gold.window_outputs").read().select(
            "*", F.unix_micros("window_start").alias("ws"),
            F.unix_micros("window_end").alias("we"),
            F.unix_micros("emitted_at").alias("at")).collect():
        got.setdefault(r.query_id, set()).add(
            (r.key, r.ws, r.we, r.aggregate, _round(r.value), r.event_count, r.revision,
             r.at, r.rule_hash))
    for rule in ("w_clear", "w_warm"):
        old, new = v1[rule], v2[rule]
        assert isinstance(old, WindowQuery) and isinstance(new, WindowQuery)
        truth = _window_rows(old, batches[:2], seq, marks[:2])
        if rule == "w_clear":  # A: new version over batch 2 only; windows starting <= M_d: gap
            truth |= {r for r in _window_rows(new, batches[2:], seq, marks[2:])
                      if r[1] > m_d + _t0()}
        else:  # C: new version as if always deployed, rows emitted from batch 2 on
            truth |= _window_rows(new, batches, seq, marks, emit_from=2)
        assert got[rule] == truth, rule
    # B: every row of both versions is written (the old one ran up to its retirement after
    # batch 2, the new one from batch 2); the served answer takes a window from the old
    # version when it starts at or before M_d, from the new one when after: each over all
    # events
    old, new = v1["w_side"], v2["w_side"]
    assert isinstance(old, WindowQuery) and isinstance(new, WindowQuery)
    old_rows = _window_rows(old, batches[:3], seq, marks[:3])
    assert got["w_side"] == old_rows | _window_rows(new, batches[2:], seq, marks[2:])
    served = {(r.key, r.ws, r.we, r.aggregate, _round(r.value), r.event_count, r.revision,
               r.at, r.rule_hash) for r in served_windows(spark, local).where(
        F.col("query_id") == "w_side").select(
        "*", F.unix_micros("window_start").alias("ws"), F.unix_micros("window_end").alias("we"),
        F.unix_micros("emitted_at").alias("at")).collect()}
    assert served == {r for r in old_rows if r[1] <= m_d + _t0()} | {
        r for r in _window_rows(new, batches, seq, marks) if r[1] > m_d + _t0()}
    assert {r[-1] for r in served} == {old.rule_hash, new.rule_hash}
    assert not LakeTable(spark, local, "gold.window_state").read().where(
        F.col("query_id").startswith("w_side@")).count()   # retired: its state deleted
    assert any(r[1] <= m_d + _t0() and r[-1] == v2["w_warm"].rule_hash
               for r in got["w_warm"])   # warm: the window across M_d is not a gap
    assert not any(r[1] <= m_d + _t0() and r[-1] == v2["w_clear"].rule_hash
                   for r in got["w_clear"])

    # patterns: current complex events and their rule_hash
    events = [e for batch in batches for e in batch]
    rows = LakeTable(spark, local, "gold.complex_events").read().collect()
    for rule in ("p_clear", "p_warm"):
        old, new = v1[rule], v2[rule]
        assert isinstance(old, PatternQuery) and isinstance(new, PatternQuery)
        current = {(tuple(r.live_event_ids), r.rule_hash) for r in rows
                   if r.query_id == rule and r.superseded_version is None}
        before = _matches(old, [e for b in batches[:2] for e in b])
        if rule == "p_clear":  # A: old rows kept; new version over events after M_d
            truth = {(m, old.rule_hash) for m in before} | {
                (m, new.rule_hash) for m in _matches(new, [e for e in events
                                                           if e["time"] > m_d])}
        else:  # C: the new version over all events (old rows it does not find superseded)
            truth = {(m, old.rule_hash if m in before else new.rule_hash)
                     for m in _matches(new, events)}
        assert current == truth, rule
    assert ("t5_18", "t5_21") in {m for m, _ in current}  # warm: the match across M_d

    # B for patterns: each match from one version, split at M_d by its first event: the
    # old version (over the events that arrived before it retired, after batch 2) for
    # matches starting at or before M_d, the new one (its floor: events after M_d) for the
    # rest; every row with the rule's id in query_id and match_id, no match id twice
    from lakecep.jobs.gold_rows import match_id

    old, new = v1["p_side"], v2["p_side"]
    assert isinstance(old, PatternQuery) and isinstance(new, PatternQuery)
    time = {e["event_id"]: e["time"] for e in events}
    side = [r for r in rows if r.query_id == "p_side"]
    arrived = _matches(old, [e for b in batches[:3] for e in b])
    truth = {(m, old.rule_hash) for m in arrived if time[m[0]] <= m_d} | {
        (m, new.rule_hash) for m in _matches(new, [e for e in events if e["time"] > m_d])}
    assert {(tuple(r.live_event_ids), r.rule_hash) for r in side
            if r.superseded_version is None} == truth
    assert {("t9_19", "t9_23"), ("t10_8", "t10_9")} <= {m for m, h in truth
                                                          if h == old.rule_hash}
    assert ("t1_30", "t1_31") in {m for m, h in truth if h == new.rule_hash}
    assert ("t3_32", "t3_33") in arrived  # the old definition's, but after M_d: not served
    # the price: a late event after the retirement is lost for the old version's match
    assert ("t8_14", "t8_15") in _matches(old, events)
    assert ("t8_14", "t8_15") not in {m for m, _ in truth}
    assert all(r.match_id == match_id("p_side", r.live_event_ids) for r in side)
    assert len({r.match_id for r in side}) == len(side)
    assert not LakeTable(spark, local, "gold.partial_matches").read().where(
        F.col("query_id").startswith("p_side@")).count()   # retired: its state deleted
    assert Rules(spark, local, gold.QUERY, [new], watch=False).floors() == {
        "p_side": m_d + _t0()}   # the new version keeps its floor after the retirement

    # A window rule and a pattern rule (on the recompute path: incremental patterns off)
    # added before batch 4 are backfilled at first sight: gold holds their answer over
    # all of silver, the window rule's from one operator fed every event, then
    # advanced to the watermark of batch 4 (docs/architecture.md)
    plain = dataclasses.replace(local, incremental_patterns=False)
    added = {"w_new": _window("w_new", 5, "clear"), "p_new": _pattern("p_new", "B", "clear")}
    for name, text in added.items():
        (folder / f"{name}.toml").write_text(text)
    late = [{"event_id": f"r4_s1_{m}", "object_id": "s1", "event_type": "reading",
             "source_id": "r", "time": m * US, "temperature": float(m % 5)} for m in (61, 63)]
    late += [{"event_id": "t7_61", "object_id": "t7", "event_type": "read", "source_id": "A",
              "time": 61 * US}, {"event_id": "t7_62", "object_id": "t7",
                                 "event_type": "read", "source_id": "B", "time": 62 * US}]
    (local.landing / "b4.jsonl").write_text("\n".join(map(_line, late)) + "\n")
    for job in (bronze, silver, gold):
        job.run(spark, plain)
    w_new, p_new = (load_query(folder / f"{name}.toml") for name in added)
    assert isinstance(w_new, WindowQuery) and isinstance(p_new, PatternQuery)
    assert {(r.query_id, r.old_hash, r.strategy, r.batch_id) for r in LakeTable(
        spark, local, TABLE).read().where(F.col("query_id").isin(*added)).collect()} == {
        (q, None, "backfill", 4) for q in added}
    events += late
    seq |= {r.event_id: r.seq for r in LakeTable(spark, local, "silver.events").read()
            .where(F.col("event_id").isin(*[e["event_id"] for e in late]))
            .select("event_id", F.xxhash64("event_id").alias("seq")).collect()}
    mark = max(e["time"] for e in events)

    def windows(rule: str) -> set[tuple]:
        return {(r.key, r.ws, r.we, r.aggregate, _round(r.value), r.event_count, r.revision,
                 r.at, r.rule_hash)
                for r in LakeTable(spark, local, "gold.window_outputs").read()
                .where(F.col("query_id") == rule).select(
                    "*", F.unix_micros("window_start").alias("ws"),
                    F.unix_micros("window_end").alias("we"),
                    F.unix_micros("emitted_at").alias("at")).collect()}

    assert windows("w_new") == _window_rows(w_new, [events], seq, [mark])
    assert windows("w_new")  # (windows of every batch, untouched keys' too)

    def current(rule: str) -> set[tuple[str, ...]]:
        return {tuple(r.live_event_ids) for r in LakeTable(
            spark, local, "gold.complex_events").read().where(
            (F.col("query_id") == rule) & F.col("superseded_version").isNull()).collect()}

    assert current("p_new") == _matches(p_new, events)
    assert ("t1_1", "t1_2") in current("p_new")  # a key batch 4 did not touch

    # a kill before the stream committed batch 4: its run again backfills again (the
    # deployment is recorded at batch 4) and writes nothing twice
    def count(table: str, rule: str) -> int:
        return LakeTable(spark, local, table).read().where(F.col("query_id") == rule).count()

    counts = count("gold.window_outputs", "w_new"), count("gold.complex_events", "p_new")
    commits = local.checkpoint(gold.QUERY) / "commits"
    (commits / "4").unlink()
    (commits / ".4.crc").unlink(missing_ok=True)
    gold.run(spark, plain)
    assert (commits / "4").exists()
    assert (count("gold.window_outputs", "w_new"), count("gold.complex_events", "p_new")) \
        == counts
    assert windows("w_new") == _window_rows(w_new, [events], seq, [mark])
    assert current("p_new") == _matches(p_new, events)

    # `lakecep backfill`: nothing left for the rules backfilled at first sight; the gap
    # of the rules deployed with "clear" is filled (its rows written once: a second run
    # writes nothing) and the stream no longer cuts p_clear at M_d
    from lakecep.jobs.backfill import backfill

    for rule in added:
        assert backfill(spark, plain, rule)["rows_written"] == 0, rule
    with pytest.raises(ValueError, match="deployed side by side: its matches"):
        backfill(spark, plain, "p_side")  # B has no gap: the old version's matches to M_d
    before = current("p_clear")
    done = backfill(spark, plain, "p_clear")
    truth = _matches(v2["p_clear"], events)  # type: ignore[arg-type]
    assert done["rows_written"] == len(truth - before) > 0
    assert current("p_clear") == before | truth
    assert backfill(spark, plain, "p_clear")["rows_written"] == 0
    assert Rules(spark, local, gold.QUERY, [v2["p_clear"]], watch=False).floors() == {}
    new = v2["w_clear"]
    assert isinstance(new, WindowQuery)
    done = backfill(spark, plain, "w_clear")
    assert done["rows_written"] > 0
    newest: dict[tuple, tuple] = {}
    for r in sorted(windows("w_clear"), key=lambda r: r[6]):  # (by revision)
        if r[-1] == new.rule_hash:
            newest[(r[0], r[1], r[3])] = (r[2], r[4], r[5])
    assert newest == {(r[0], r[1], r[3]): (r[2], r[4], r[5])
                      for r in _window_rows(new, [events], seq, [mark])}
    assert backfill(spark, plain, "w_clear")["rows_written"] == 0


def test_invalid_change_keeps_the_version_in_force(spark, settings, tmp_path: Path,  # noqa: ANN001
                                                   capsys) -> None:
    folder = tmp_path / "queries"
    folder.mkdir()
    local = dataclasses.replace(settings, home=tmp_path / "home", queries_dir=str(folder))
    path = folder / "w_warm.toml"
    path.write_text(_rules(1)["w_warm"])
    v1 = load_query(path)
    rules = Rules(spark, local, "gold_test", [v1], watch=True)
    baseline = rules.check(0)
    assert [(d.query_id, d.strategy) for d in baseline] == [("w_warm", "initial")]
    rules.record(baseline, datetime.now(UTC))
    assert rules.check(1) == []  # nothing changed

    path.write_text(_rules(2)["w_warm"].replace('window = "10 minutes"', 'window = "ten"'))
    assert rules.check(1) == [] and rules.in_force["w_warm"] == v1
    assert "not deployed" in capsys.readouterr().err
    (folder / "extra.toml").write_text("id = ")   # not TOML: nothing else deployed either
    assert rules.check(1) == []

    (folder / "extra.toml").unlink()
    path.write_text(_rules(2)["w_warm"])
    rules.newest.update(0, 19 * US)
    # inside a silver commit read in parts (the batch before ended inside it): not yet
    assert rules.check(1, boundary=False) == []
    [change] = rules.check(1)
    assert (change.old_hash, change.new_hash, change.strategy, change.m_d) == (
        v1.rule_hash, load_query(path).rule_hash, "warm", 19 * US)
    rules.record([change], datetime.now(UTC))
    assert "deployed w_warm" in capsys.readouterr().err
    path.unlink()
    [gone] = rules.check(2)
    assert (gone.new_hash, gone.strategy) == (None, "remove")
    rules.record([gone], datetime.now(UTC))

    # an added rule is deployed with "backfill", whatever its reload (a removed one back
    # with its reload: its earlier outputs are in gold); a restart that runs their batch
    # again finds it to backfill again
    path.write_text(_rules(2)["w_warm"])
    (folder / "p_new.toml").write_text(_pattern("p_new", "B", "clear"))
    added = rules.check(3)
    assert {(d.query_id, d.old_hash, d.strategy) for d in added} == {
        ("w_warm", None, "warm"), ("p_new", None, "backfill")}
    rules.record(added, datetime.now(UTC))
    assert rules.backfills(3) == {"p_new"} and rules.backfills(4) == set()
    again = Rules(spark, local, "gold_test", [load_query(path),
                                             load_query(folder / "p_new.toml")], watch=True)
    assert again.check(3) == [] and again.backfills(3) == {"p_new"}
    assert again.backfills(4) == set()


def test_processed_is_what_the_delta_source_read(spark, settings, tmp_path: Path) -> None:  # noqa: ANN001
    """``processed`` (the pre-deployment data) equals the events the Delta streaming source
    gave the stream's earlier batches, also where a batch starts inside the initial snapshot
    or inside a commit (one file per trigger over commits of two files)."""
    from lakecep.jobs.reload import processed

    local = dataclasses.replace(settings, home=tmp_path / "home")
    table = LakeTable(spark, local, "silver.events")

    def commit(names: list[str]) -> None:
        spark.createDataFrame([(n, T0) for n in names], "event_id STRING, event_time TIMESTAMP"
                              ).repartition(len(names)).write.format("delta").mode(
            "append").save(table.path)

    seen: list[set[str]] = []
    wrong: list[tuple[int, set[str], set[str]]] = []

    def each(batch, batch_id: int) -> None:  # noqa: ANN001
        got = {r.event_id for r in processed(spark, local, "probe", table, batch_id).collect()}
        want = set().union(*seen)
        if got != want:
            wrong.append((batch_id, got, want))
        seen.append({r.event_id for r in batch.select("event_id").collect()})

    def run() -> None:
        (spark.readStream.format("delta").option("maxFilesPerTrigger", 1).load(table.path)
         .writeStream.foreachBatch(each).trigger(availableNow=True)
         .option("checkpointLocation", str(local.checkpoint("probe"))).start()
         .awaitTermination())

    commit(["a", "b"])
    run()           # the initial snapshot, one file per batch
    commit(["c", "d"])
    commit(["e"])
    run()           # a commit of two files split over two batches
    assert len(seen) == 5 and set().union(*seen) == set("abcde")
    assert wrong == []
