"""Archive access for live-archive queries: silver history at a pinned Delta version.

* :func:`read_ranges` reads the rows a plan's loads ask for (per key and time range) from
  silver at the pinned version. The filter Spark pushes into the Delta scan is the time
  hull and the key list, so Delta's data skipping (file min/max statistics, made selective
  by clustering silver on ``(object_id, event_time)``, see :mod:`lakecep.jobs.optimize`) opens only
  the files that can hold them. Files and rows actually read come from the executed scan.
* :class:`RecentBuffer` (RBuffer) keeps the newest silver events in driver memory across
  micro-batches and serves any load whose range starts after its horizon without touching
  Delta. It is exact by construction: it holds every silver event at the pinned version
  whose time is after ``horizon``. It is updated with each batch's rows only when the
  table grew by exactly that batch (silver is append-only, so the row counts prove it);
  otherwise (first batch, restart, the stream lagging behind silver) it is rebuilt from
  Delta.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from .streaming import log

TIME = "event_time"


@dataclass
class ScanMetrics:
    """What one Delta read cost: files opened, files in the table version, rows read."""

    files_read: int = 0
    files_total: int = 0
    rows_scanned: int = 0
    bytes_read: int = 0

    def add(self, other: ScanMetrics) -> None:
        self.files_read += other.files_read
        self.files_total = max(self.files_total, other.files_total)
        self.rows_scanned += other.rows_scanned
        self.bytes_read += other.bytes_read


def scan_metrics(frame) -> ScanMetrics:  # noqa: ANN001 - an executed pyspark DataFrame
    """Sum the metrics of the file scans in ``frame``'s executed plan (run it first)."""
    out = ScanMetrics()
    stack = [frame._jdf.queryExecution().executedPlan()]
    while stack:
        node = stack.pop()
        name = node.nodeName()
        if name == "AdaptiveSparkPlan":  # adaptive execution: the final plan
            stack.append(node.executedPlan())
            continue
        if name.endswith("QueryStage"):  # a stage of it (its plan is not a child)
            stack.append(node.plan())
            continue
        if name.startswith("Scan"):
            metrics = node.metrics()
            for name, attr in (("numFiles", "files_read"), ("numOutputRows", "rows_scanned"),
                               ("filesSize", "bytes_read")):
                if metrics.contains(name):
                    setattr(out, attr, getattr(out, attr) + int(metrics.apply(name).value()))
        children = node.children()
        stack.extend(children.apply(i) for i in range(children.size()))
    return out


def read_ranges(spark, history, loads: pd.DataFrame, key: str, columns: list,  # noqa: ANN001
                max_listed_keys: int = 5000) -> tuple[Any, ScanMetrics]:
    """Rows of ``history`` inside any load: ``loads`` has columns key (None: every key),
    lo, hi (int ns, ``[lo, hi)``). Returns the rows (checkpointed, so they are read once)
    and the scan's metrics."""
    from pyspark.sql import functions as F

    if loads.empty:
        return None, ScanMetrics()
    lo, hi = int(loads["lo"].min()), int(loads["hi"].max())
    rows = history.where((F.col(TIME) >= _ts(lo)) & (F.col(TIME) < _ts(hi))).select(*columns)
    if loads["key"].notna().all():  # every load names its keys: push the key list down too
        keys = sorted(set(loads["key"].astype(str)))
        if len(keys) <= max_listed_keys:
            rows = rows.where(F.col(key).isin(keys))
        rows = _join_loads(spark, rows, loads, key, "left_semi")
    checkpointed = rows.localCheckpoint(eager=True)  # runs ``rows``' plan once
    metrics = scan_metrics(rows)
    metrics.files_total = len(history.inputFiles())
    return checkpointed, metrics


def rows_per_loads(spark, rows, loads: pd.DataFrame, key: str) -> int:  # noqa: ANN001
    """Rows the loads ask for, each load counted on its own (overlapping ranges, as LLAA's,
    count once per load): the cost model's rows loaded."""
    if rows is None or loads.empty:
        return 0
    if loads["key"].isna().any():  # a keyless load (ALAA) asks for everything read
        return rows.count()
    return _join_loads(spark, rows, loads, key, "inner").count()


def _join_loads(spark, rows, loads: pd.DataFrame, key: str, how: str):  # noqa: ANN001, ANN202
    """``rows`` joined with the keyed ``loads`` on key and ``lo <= time < hi`` (int ns)."""
    from pyspark.sql import functions as F

    ranges = spark.createDataFrame(loads.astype({"key": str}), "_k STRING, lo LONG, hi LONG")
    t = F.unix_micros(F.col(TIME)) * 1000
    return rows.join(F.broadcast(ranges), (F.col(key) == F.col("_k")) & (t >= F.col("lo"))
                     & (t < F.col("hi")), how)


def _ts(ns: int):  # noqa: ANN202 - a Spark timestamp literal for int nanoseconds
    from pyspark.sql import functions as F

    return F.lit(pd.Timestamp(ns, unit="ns").to_pydatetime())


@dataclass
class RecentBuffer:
    """RBuffer for the gold job: silver events at ``version`` with time after
    ``horizon`` (int ns), at most ``capacity`` rows, as a pandas frame on the driver."""

    capacity: int
    frame: pd.DataFrame | None = None
    version: int | None = None
    count_at_version: int = 0
    horizon: int | None = None
    stats: dict[str, int] = field(default_factory=lambda: {"rebuilds": 0, "appends": 0})

    def covers(self, lo: int) -> bool:
        return self.frame is not None and self.horizon is not None and lo > self.horizon

    def update(self, history, version: int, batch, columns: list,  # noqa: ANN001
               batch_rows: int | None = None) -> None:
        """Bring the buffer to ``version`` (``batch``: the micro-batch's rows, ``batch_rows``
        of them if the caller knows). The first update (every ``gold.run``'s first batch)
        builds it without counting ``batch``, nor ``history`` when the whole table fits."""
        total = None
        if self.frame is not None and self.version is not None:
            total = history.count()  # Delta answers this from the log
            batch_rows = batch.count() if batch_rows is None else batch_rows
            if total == self.count_at_version + batch_rows and batch_rows <= self.capacity:
                new = batch.select(*columns).toPandas()
                self.frame = pd.concat([self.frame, _after(new, self.horizon)],
                                       ignore_index=True)
                self.stats["appends"] += 1
                self.version, self.count_at_version = version, total
                self._evict()
                return
        self.frame = self._rebuild(history, columns)
        self.stats["rebuilds"] += 1
        if total is None:  # the whole table in memory: its rows are the buffer's
            total = len(self.frame) if self.horizon == -(2**63) else history.count()
        self.version, self.count_at_version = version, total
        self._evict()

    def _rebuild(self, history, columns: list) -> pd.DataFrame:  # noqa: ANN001
        from pyspark.sql import functions as F

        newest = history.select(*columns).orderBy(F.col(TIME).desc()).limit(self.capacity)
        frame = newest.toPandas()
        if len(frame) < self.capacity:
            self.horizon = -(2**63)  # the whole table is in memory
        else:
            self.horizon = _ns(frame[TIME]).min()
            frame = frame[_ns(frame[TIME]) > self.horizon]
        log(f"RBuffer: rebuilt from Delta, {len(frame)} rows after {self.horizon_text}")
        return frame.reset_index(drop=True)

    def _evict(self) -> None:
        assert self.frame is not None
        if len(self.frame) <= self.capacity:
            return
        t = _ns(self.frame[TIME])
        cut = int(pd.Series(t).nlargest(self.capacity).min())
        self.horizon = max(self.horizon or cut, cut)
        self.frame = self.frame[t > self.horizon].reset_index(drop=True)

    @property
    def horizon_text(self) -> str:
        if self.horizon is None or self.horizon == -(2**63):
            return "the beginning"
        return pd.Timestamp(self.horizon, unit="ns").isoformat()

    def rows_for(self, loads: pd.DataFrame, key: str) -> pd.DataFrame:
        """Buffered rows inside any of ``loads`` (all of which it covers)."""
        assert self.frame is not None
        from cep_core.live_archive import FrameArchive

        index = FrameArchive(self.frame, key, TIME)
        parts = [index.load(None if k is None else (k,), lo, hi)
                 for k, lo, hi in zip(loads["key"], loads["lo"], loads["hi"], strict=True)]
        if not parts:
            return self.frame.iloc[:0]
        return pd.concat(parts, ignore_index=True).drop_duplicates("event_id")


def _after(frame: pd.DataFrame, horizon: int | None) -> pd.DataFrame:
    if horizon is None:
        return frame
    return frame[_ns(frame[TIME]) > horizon]


def _ns(series: pd.Series):  # noqa: ANN202 - numpy int64 array
    from cep_core.runtime.time_axis import time_values

    return time_values(series)
