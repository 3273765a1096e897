"""Priority classes (docs/rules.md, section 4) on the batch path: a high and a low rule run
as two gold streams (``gold_high`` then ``gold_low``, own checkpoints), each with only its
class's rule and every job in its class's pool, and they write the same gold as the single
stream of the same rules in one class, over a copy of the same silver table."""

from __future__ import annotations

import dataclasses
import json
import shutil
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from lakecep.jobs import bronze, gold, silver
from lakecep.jobs.streaming import reporting
from lakecep.jobs.tables import LakeTable
from lakecep.queries import QUERIES_DIR

pytestmark = [pytest.mark.spark, pytest.mark.slow]
T0 = datetime(2026, 1, 1)


def _reads(tag: str, hours: float, first: int, readers: str = "ABC") -> list[str]:
    return [json.dumps({"event_id": f"{tag}-{first + i}", "object_id": tag,
                        "event_type": "read", "source_id": reader,
                        "event_time": (T0 + timedelta(hours=hours + i)).isoformat() + "Z"})
            for i, reader in enumerate(readers)]


def _queries(folder: Path, high: str, low: str) -> Path:
    folder.mkdir()
    text = (QUERIES_DIR / "rfid_abc.toml").read_text()
    (folder / "rfid_abc.toml").write_text(text + f'priority = "{high}"\n')
    (folder / "abc_low.toml").write_text(
        text.replace('id = "rfid_abc"', 'id = "abc_low"').replace("C.event_id AS c_id",
                                                                  "C.event_id AS c_low")
        + f'priority = "{low}"\n')
    return folder


def _gold(spark, local) -> set[tuple]:  # noqa: ANN001
    return {(r.query_id, r.match_id, tuple(r.live_event_ids), r.superseded_version)
            for r in LakeTable(spark, local, "gold.complex_events").read().collect()}


def _pools(spark) -> dict[str, set[str]]:  # noqa: ANN001
    """Stream name -> the scheduler pools of its stages (Spark's status store: the
    stage's job description starts with the streaming query's name)."""
    store = spark.sparkContext._jsc.sc().statusStore()  # noqa: SLF001
    defaults = [getattr(store, f"stageList$default${n}")() for n in (2, 3, 4, 5)]
    stages = spark._jvm.scala.jdk.javaapi.CollectionConverters.asJava(  # noqa: SLF001
        store.stageList(None, *defaults))
    out: dict[str, set[str]] = {}
    for i in range(stages.size()):
        stage = stages.get(i)
        text = stage.description()
        name = str(text.get()).split("\n")[0].strip() if text.isDefined() else ""
        out.setdefault(name, set()).add(str(stage.schedulingPool()))
    return out


def test_two_classes_write_what_one_stream_writes(spark, settings, tmp_path: Path) -> None:  # noqa: ANN001
    local = dataclasses.replace(
        settings, home=tmp_path / "classes",
        queries_dir=str(_queries(tmp_path / "q2", "high", "low")))
    local.landing.mkdir(parents=True)
    lines = []
    for n, tag in enumerate(("t1", "t2", "t3")):
        lines += _reads(tag, 0, 0) + _reads(tag, 12 + n, 3, "AB")
    lines += _reads("t2", 30, 10, "ACBC")
    (local.landing / "f1.jsonl").write_text("\n".join(lines) + "\n")
    bronze.run(spark, local)
    silver.run(spark, local)
    one = dataclasses.replace(
        settings, home=tmp_path / "one",
        queries_dir=str(_queries(tmp_path / "q1", "normal", "normal")))
    shutil.copytree(LakeTable(spark, local, "silver.events").path,
                    LakeTable(spark, one, "silver.events").path)

    logged: list[str] = []
    with reporting(log=logged.append):
        gold.run(spark, local)
    assert sorted(p.name for p in local.checkpoints.iterdir() if p.name.startswith("gold")) \
        == ["gold_high", "gold_low"]
    assert any(m.startswith("gold_high: queries rfid_abc v1 (") and "abc_low" not in m
               for m in logged)
    assert any(m.startswith("gold_low: queries abc_low v1 (") and "rfid_abc" not in m
               for m in logged)
    pools = _pools(spark)
    assert pools["gold_high"] == {"class_high"} and pools["gold_low"] == {"class_low"}, pools

    gold.run(spark, one)
    assert sorted(p.name for p in one.checkpoints.iterdir() if p.name.startswith("gold")) \
        == ["gold_complex_events"]
    classes, single = _gold(spark, local), _gold(spark, one)
    assert classes == single
    assert {q for q, *_ in classes} == {"rfid_abc", "abc_low"} and len(classes) == 6
    high = next(i for i, m in enumerate(logged) if m.startswith("gold_high: batch"))
    low = next(i for i, m in enumerate(logged) if m.startswith("gold_low: batch"))
    assert high < low   # availableNow: the high class first
