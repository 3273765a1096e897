"""Live-archive detection: a pattern on the live stream joined with a pattern in history.

A :class:`LiveArchiveSpec` pairs a *live* query PL with an *archive* query PA (both
MATCH_RECOGNIZE, both partitioned by the join ``key`` and ordered by the same time column
first), an access range RA relative to each live match (``RA_i = [start_i - before,
start_i)``) and an optional join ``condition`` over the measures of both sides.

Semantics (what every strategy returns, exactly): for each live match *i* of PL, the
matches of PA over the events of key ``k_i`` whose time lies in ``RA_i``, numbered 1.. in
order of their first row; one joined result per (live match, archive match) pair for which
``condition`` holds. Because PA is evaluated over RA_i itself, a pattern with greedy
quantifiers, PREV or AFTER MATCH SKIP gives the same answer whatever else the archive holds.

How the archive is read is the *strategy* (seed 000):

* ``alaa`` (active): one blind load of the maximal range Rmax (every key, from the earliest
  RA start to the latest RA end); PA is detected over it and joined.
* ``llaa`` (lazy): one load per completed live match, of its own RA_i.
* ``ollaa`` (selectivity-ordered): drives from the side with the lower selectivity. Live
  side first (= LLAA) when Sel(PL) <= Sel(PA); otherwise archive side first: one load per
  key of the hull of its ranges, PA detected over it, and PL evaluated only for keys that
  have an archive match at all. Sel(PA) comes from statistics (issue 6's table) or, when
  none are given, from a sample; Sel(PL) from a sample of the live input.
* ``sllaa`` (sub-window lazy): live matches in completion order are cut into sub-windows by
  Lemma 1 (a sub-window grows while ``max end - min start <= TL``, the tolerated latency;
  optionally also capped at ``subwindow`` matches); one load per sub-window, of the union of
  its ranges (its keys, from the smallest RA start to the largest RA end).
* ``auto`` picks one of them from the statistics and TL and says why.

A strategy is a *plan*: ordered steps, each a set of :class:`Load` requests (keys, time
range and optionally event types) and the live matches each load serves. The four
strategies are one- or two-step plans; seed 003's multi-step acquisition plans (pull some
event types for the intervals still open, then the next ones) are further planners that
return the same :class:`Plan` and run through the same executor.

Archive access goes through an :class:`ArchiveStore`; :class:`FrameArchive` (an in-memory
index by key and time), :class:`SqliteArchive` (a B-tree indexed table, the paper's
relational archive) and :class:`RecentBuffer` (RBuffer: the newest events in memory, in
front of a store) count loads, rows read and buffer hits in :class:`AccessStats`.

Modules: :mod:`.spec` (the query), :mod:`.stores` (archive stores), :mod:`.plans`
(strategies as plans), :mod:`.execute` (running a plan).
"""

from ..runtime.time_axis import time_values
from .execute import (
    Acquired,
    Joined,
    Result,
    acquire,
    detect,
    detect_in_ranges,
    execute,
    join_active,
    make_plan,
    range_local,
)
from .plans import (
    LiveInstance,
    Load,
    Plan,
    archive_first_exact,
    choose,
    instances_of,
    live_instances,
    ollaa_drive,
    plan_alaa,
    plan_by_key,
    plan_llaa,
    plan_sllaa,
    resolve,
    sample_selectivity,
    subwindows,
)
from .spec import (
    STRATEGIES,
    LiveArchiveSpec,
    Selectivity,
    StrategyError,
    StrategySettings,
    duration_value,
)
from .stores import (
    AccessStats,
    ArchiveStore,
    FrameArchive,
    RecentBuffer,
    SqliteArchive,
)

__all__ = [
    "Acquired", "acquire", "STRATEGIES", "AccessStats", "ArchiveStore", "FrameArchive",
    "Joined", "LiveArchiveSpec",
    "LiveInstance", "Load", "Plan", "RecentBuffer", "Result", "Selectivity", "SqliteArchive",
    "StrategyError", "StrategySettings", "archive_first_exact", "choose", "detect",
    "detect_in_ranges", "duration_value", "execute", "instances_of", "join_active",
    "live_instances", "make_plan", "ollaa_drive", "plan_alaa", "plan_by_key", "plan_llaa",
    "plan_sllaa", "range_local", "resolve", "sample_selectivity", "subwindows", "time_values",
]
