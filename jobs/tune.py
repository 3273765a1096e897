"""gold.statistics -> tuned configuration (versioned file) + gold.allocations rows.

Reads the newest statistics run, computes the allocation (:func:`lakecep.tuning.compute`:
seed 002's model, checked with the simulator), writes
``$LAKECEP_HOME/tuning/config-vN.json`` and one gold.allocations row per query and stream.
The gold job applies the newest version at its next start (``docs/tuning.md``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from lakecep import schemas, tuning
from lakecep.config import Settings
from lakecep.queries import QueryDefinition, load_queries

from .streaming import log
from .tables import LakeTable

TABLE = "gold.allocations"
NAME = "tune"


@dataclass
class TuneRun:
    version: int
    path: Path
    statistics_run: str
    queries: int
    seconds: float

    def __str__(self) -> str:
        return (f"tuned configuration v{self.version} from statistics run "
                f"{self.statistics_run} ({self.queries} queries): {self.path}, "
                f"{self.seconds:.1f}s")


def latest_statistics(spark, settings: Settings) -> list[dict]:  # noqa: ANN001
    from pyspark.sql import functions as F

    table = LakeTable(spark, settings, "gold.statistics")
    if not table.exists():
        raise LookupError(f"no gold.statistics under {settings.lake}: run `lakecep run "
                          "statistics` first")
    frame = table.read()
    newest = frame.orderBy(F.col("computed_at").desc()).select("run_id").first()
    if newest is None:
        raise LookupError("gold.statistics is empty: run `lakecep run statistics` first")
    rows = frame.where(F.col("run_id") == newest[0]).toPandas()
    return rows.astype(object).where(rows.notna(), None).to_dict("records")


def run(spark, settings: Settings, *, run_id: str | None = None,  # noqa: ANN001
        continuous: bool = False, queries: list[QueryDefinition] | None = None) -> TuneRun:
    del run_id  # the configuration records the statistics run it was computed from
    if continuous:
        raise ValueError("the tune job is a batch job; the lakecep_tuning DAG schedules it")
    started = time.monotonic()
    queries = list(queries if queries is not None else load_queries(settings.queries_dir))
    stats = latest_statistics(spark, settings)
    config, allocations = tuning.compute(stats, queries, settings)
    version, path = tuning.write(settings, config)
    model = config["model"]
    log(f"{NAME}: statistics run {config['statistics_run']}: capacity "
        f"{model['capacity_events_per_second']:.4g} events/s ({model['capacity_source']})"
        + (", OVERLOADED: deadlines cannot all be met" if model["overloaded"] else ""))
    for qid, entry in config["queries"].items():
        streams = ", ".join(f"{s['stream']} λ={s['arrival_rate']:.4g}/s μ={s['mu']:.4g}/s "
                            f"quota={s['quota']:.3f} θ={s['satisfaction']:.3f}"
                            for s in entry["streams"])
        sim = entry["simulated"]
        check = ("" if not sim else f"; simulated on time and correct: time-sharing "
                 f"{sim['time_sharing']:.3f}, FIFO {sim['fifo']:.3f}")
        log(f"{NAME}: {qid}: td={entry['deadline_seconds']:g}s, pool {entry['pool']} weight "
            f"{entry['weight']}; {streams}; {entry['model']}{check}")
    log(f"{NAME}: gold rate limit {config['gold']['max_files_per_trigger']} files per trigger")
    stamp = pd.Timestamp(config["created_at"]).tz_convert(None)
    frame = pd.DataFrame([{**a, "config_version": version, "created_at": stamp,
                           "statistics_run": config["statistics_run"]} for a in allocations])
    frame = frame.reindex(columns=schemas.columns(TABLE))
    table = LakeTable(spark, settings, TABLE).ensure()
    rows = spark.createDataFrame(frame.astype(object).where(frame.notna(), None),
                                 schemas.ddl(TABLE).replace(" NOT NULL", ""))
    rows.write.format("delta").mode("append").save(table.path)
    log(f"{NAME}: wrote {path} and {len(frame)} rows to {TABLE}")
    return TuneRun(version, path, config["statistics_run"], len(config["queries"]),
                   time.monotonic() - started)
