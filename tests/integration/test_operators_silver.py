"""Every preprocessing operator through the real bronze and silver jobs, then ``lakecep
status``: a source of sensor messages with ``keep_fields``, ``filter``, ``split``,
``fill_forward``, ``fill``, ``merge`` and ``drop_fields`` lands in two files cut at a
random line. One lake reads them as two micro-batches (``max_files_per_trigger = 1``),
the other as one; silver, duplicates, quarantine and the operators' counts must be the same,
the reconciliation exact with every term non-zero, and a replayed micro-batch must change
nothing (its state comes from ``previous``)."""

from __future__ import annotations

import dataclasses
import json
import os
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from lakecep.jobs import bronze, silver
from lakecep.jobs.status import lake_status, operator_terms
from lakecep.jobs.streaming import writer_id
from lakecep.jobs.tables import LakeTable

pytestmark = [pytest.mark.spark, pytest.mark.slow]

SOURCE = """format = "jsonl"
[fields]
msg = "string"
dev = "string"
ts = "string"
temp = "double"
site = "string"
note = "string"
[mapping]
event_id = "msg || '-' || _part"
object_id = "dev"
event_type = "CASE WHEN temp > 30 THEN 'hot' ELSE 'ok' END"
source_id = "site"
event_time = "ts"

[[operators]]
op = "filter"
where = "dev <> 'test-rig'"
[[operators]]
op = "split"
field = "readings"
[[operators]]
op = "keep_fields"
fields = ["msg", "dev", "ts", "temp", "site", "note"]
[[operators]]
op = "fill_forward"
fields = ["site"]
[[operators]]
op = "fill"
field = "site"
value = "'unknown'"
[[operators]]
op = "merge"
within = 60
combine = { temp = "max" }
[[operators]]
op = "drop_fields"
fields = ["note"]
"""
T0 = datetime(2026, 4, 1, tzinfo=UTC)


def messages() -> list[str]:
    """40 messages of three devices, each with 0-3 readings a few seconds to minutes apart,
    plus a test-rig message (filtered), a bad reading (quarantined), a malformed line, and
    an early message landed again at the end (late: its parts are duplicates)."""
    rng = random.Random(14)
    out = []
    for n in range(40):
        dev = rng.choice(["d1", "d2", "d3"])
        start = n * 40 + rng.randint(0, 30)
        readings = [{"ts": (T0 + timedelta(seconds=start + rng.choice([0, 5, 20, 90]) * k))
                     .isoformat(), "temp": round(rng.uniform(10, 40), 1)}
                    for k in range(rng.choice([0, 1, 2, 2, 3]))]
        body = {"msg": f"m{n:02d}", "dev": dev, "readings": readings, "note": "x",
                "junk": n}
        if rng.random() < 0.3:
            body["site"] = rng.choice(["north", "south"])
        out.append(json.dumps(body))
    out.insert(5, json.dumps({"msg": "rig", "dev": "test-rig", "readings": [
        {"ts": T0.isoformat(), "temp": 1}]}))
    out.insert(9, json.dumps({"msg": "bad", "dev": "d1", "readings": [
        {"ts": T0.isoformat(), "temp": "warm"}]}))
    out.insert(20, "{not json")
    out.append(out[2])
    return out


def land(home: Path, lines: list[str], cuts: list[int]) -> None:
    folder = home / "landing" / "sensors"
    folder.mkdir(parents=True)
    bounds = [0, *cuts, len(lines)]
    for k, (a, b) in enumerate(zip(bounds, bounds[1:], strict=False)):
        path = folder / f"part-{k}.jsonl"
        path.write_text("".join(line + "\n" for line in lines[a:b]))
        os.utime(path, (1_700_000_000 + k, 1_700_000_000 + k))  # arrival order = name order
    (home / "sources").mkdir()
    (home / "sources" / "sensors.toml").write_text(SOURCE)


def outcome(spark, settings) -> dict:  # noqa: ANN001
    def rows(name: str, *columns: str) -> list:
        return sorted(tuple(r) for r in LakeTable(spark, settings, name).read()
                      .select(*columns).collect())

    return {
        "silver": rows("silver.events", "event_id", "object_id", "event_type", "source_id",
                       "event_time", "attributes", "source_file", "line_no"),
        "duplicates": rows("silver.duplicates", "event_id", "source_file", "line_no"),
        "quarantine": rows("silver.quarantine", "reason", "source_file", "line_no"),
        "terms": dataclasses.astuple(operator_terms(spark, settings))[:5],
    }


def test_every_operator_through_bronze_silver_and_status(spark, settings,  # noqa: ANN001
                                                          tmp_path: Path) -> None:
    lines = messages()
    cuts = sorted(random.Random(4).sample(range(1, len(lines)), 1))
    lakes = {}
    for name, max_files, cut in (("stream", 1, cuts), ("batch", 100, [])):
        home = tmp_path / name
        land(home, lines, cut)
        lakes[name] = dataclasses.replace(settings, home=home, sources_dir="",
                                          queries_dir=str(home / "queries"),
                                          max_files_per_trigger=max_files)
        for job in (bronze, silver):
            job.run(spark, lakes[name])
    stream, batch = (outcome(spark, lakes[n]) for n in ("stream", "batch"))
    # the stream really ran two silver micro-batches, the batch one
    state = LakeTable(spark, lakes["stream"], "silver.operator_state").read().first()
    assert state.batch_id == 1
    assert LakeTable(spark, lakes["batch"], "silver.operator_state").read().first().batch_id == 0
    # file names differ by the cut: compare by the line's place in the whole landing
    def by_line(o: dict, cut: list[int]) -> dict:  # noqa: ANN202
        starts = {f"part-{k}.jsonl": a for k, a in enumerate([0, *cut])}

        def where(file: str, line: int) -> int:
            return line + starts[file.rsplit("/", 1)[1]]

        return {"silver": sorted((*r[:6], where(*r[6:])) for r in o["silver"]),
                "duplicates": sorted((r[0], where(*r[1:])) for r in o["duplicates"]),
                "quarantine": sorted((r[0].split(" into ")[0], where(*r[1:]))
                                     for r in o["quarantine"]),
                "terms": o["terms"]}

    assert by_line(stream, cuts) == by_line(batch, [])

    filtered, merged, split_extra, merged_away, pending = stream["terms"]
    assert filtered >= 2 and merged > 0 and split_extra > 0 and pending > 0
    assert merged == merged_away
    assert stream["duplicates"]  # the message landed again
    codes = {r[0].split(":")[0] for r in stream["quarantine"]}
    assert codes == {"filtered", "merged", "wrong_type", "malformed_json"}
    hot = [r for r in stream["silver"] if r[2] == "hot"]
    assert hot and all(float(r[5]["temp"]) > 30 for r in hot)  # temp = the group's max
    assert all("note" not in (r[5] or {}) and "junk" not in (r[5] or {})
               for r in stream["silver"])  # dropped; not kept
    assert {r[3] for r in stream["silver"]} == {"north", "south", "unknown"}  # carried, filled

    status = lake_status(spark, lakes["stream"])  # (the batch lake has the same tables)
    assert status.ok, str(status)
    shown = str(status)
    assert f"+ {pending:,} - {split_extra:,}" in shown  # every term, shown
    assert "merged rows in quarantine = merged_away" in shown
    assert "split parts: outcomes + pending - distinct origins = split_extra" in shown

    # A replay of the stream's last micro-batch (a crash after the state was saved, before
    # the checkpoint moved) changes nothing: the state it starts from is `previous`.
    last = sorted({r[6] for r in stream["silver"]} | {r[1] for r in stream["quarantine"]})[-1]
    bronze_rows = LakeTable(spark, lakes["stream"], "bronze.events").read().where(
        f"source_file = '{last}'")
    silver.process_batch(spark, lakes["stream"], bronze_rows, 1,
                         writer_id(lakes["stream"], silver.QUERY))
    assert outcome(spark, lakes["stream"]) == stream
    again = LakeTable(spark, lakes["stream"], "silver.operator_state").read().first()
    assert (again.state, again.previous) == (state.state, state.previous)
