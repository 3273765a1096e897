"""Gold's answer for pattern queries under any arrival order (no Spark).

Per batch, gold recomputes every touched key over its whole history at the batch's silver
version, inserts the matches it has not seen, and marks a touched key's rows that the
recomputation no longer finds as superseded (and superseded rows found again as current):
``jobs.gold.supersede``. This test runs the real per-bucket function of the gold job
(:func:`lakecep.jobs.gold_pattern.pattern_matcher`, the engine included) over random event
sets cut into random batches in random order, applies that rule to a model of the table,
and requires the current rows to equal one evaluation over all events -- the generator's
truth. The Spark side of the rule is tested in tests/integration/test_gold.py.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import pandas as pd
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lakecep.jobs.gold_pattern import pattern_matcher
from lakecep.jobs.gold_rows import BUCKET, key_text
from lakecep.queries import QUERIES_DIR, PatternQuery, load_queries

T0 = datetime(2026, 1, 1)
RFID_ABC = next(q for q in load_queries(QUERIES_DIR) if q.id == "rfid_abc")
assert isinstance(RFID_ABC, PatternQuery)

# A tag's reads: runs of A B C with stray reads between, 1-4 h apart (so WITHIN 10 h cuts
# some); a stray read that arrives late breaks the run it falls into.
reads = st.lists(st.tuples(st.sampled_from(["ABC", "ABC", "X", "A", "BC", "C"]),
                           st.lists(st.integers(min_value=1, max_value=4), min_size=3,
                                    max_size=3)), min_size=1, max_size=5)


def tag_events(tag: str, runs: list[tuple[str, list[int]]]) -> list[tuple[str, str, int]]:
    out, hour = [], 0
    for readers, gaps in runs:
        for reader, gap in zip(readers, gaps, strict=False):
            hour += gap
            out.append((tag, reader, hour))
    return out


def frame(events: list[tuple[int, str, str, int]]) -> pd.DataFrame:
    return pd.DataFrame({
        "event_id": [f"e{n}" for n, *_ in events],
        "object_id": [tag for _, tag, _, _ in events],
        "source_id": [reader for _, _, reader, _ in events],
        "event_time": pd.to_datetime([T0 + timedelta(hours=h) for *_, h in events]),
        "ingest_time": pd.to_datetime([T0] * len(events)),
        BUCKET: [0] * len(events),
    }, columns=["event_id", "object_id", "source_id", "event_time", "ingest_time", BUCKET])


def matches(events: list[tuple[int, str, str, int]]) -> dict[str, str]:
    """match_id -> partition key of the query over ``events`` (one bucket, as gold runs it)."""
    if not events:
        return {}
    out = pattern_matcher(RFID_ABC, 0, 0, T0)(frame(events))
    return dict(zip(out["match_id"], out["partition_key"], strict=True))


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(reads, reads, st.randoms(use_true_random=False), st.integers(min_value=1, max_value=5))
def test_current_gold_equals_one_evaluation_over_all_events(t1, t2, rnd, batches) -> None:  # noqa: ANN001
    events = tag_events("t1", t1) + tag_events("t2", t2)
    numbered = [(n, *e) for n, e in enumerate(events)]
    arrival = list(numbered)
    rnd.shuffle(arrival)  # any order: every event may be late
    cuts = sorted(rnd.sample(range(1, len(arrival)), min(batches, len(arrival)) - 1))
    gold: dict[str, tuple[str, bool]] = {}  # match_id -> (partition key, superseded)
    history: list[tuple[int, str, str, int]] = []
    for lo, hi in zip([0, *cuts], [*cuts, len(arrival)], strict=True):
        batch = arrival[lo:hi]
        history += batch
        touched = {key_text([tag]) for _, tag, _, _ in batch}
        found = matches([e for e in history if e[1] in touched])
        for mid, key in found.items():
            gold[mid] = (key, False)  # new, or current again
        for mid, (key, _) in list(gold.items()):
            if key in touched and mid not in found:
                gold[mid] = (key, True)
    current = {mid for mid, (_, superseded) in gold.items() if not superseded}
    assert current == set(matches(numbered))
