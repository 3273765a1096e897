"""``kind = "window"`` query files: parsing, defaults, the operator they build, and clear
errors (file and field) for bad values. No Spark."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from cep_core.windows import CountWindows, Sampler, TimeWindows, WindowOperator
from lakecep.jobs.gold_window import feed
from lakecep.queries import (
    QUERIES_DIR,
    QueryDefinitionError,
    WindowQuery,
    load_queries,
    load_query,
    micros,
)

BASE = 'id = "w"\nkind = "window"\nattribute = "temperature"\n'


def _load(tmp_path: Path, text: str) -> WindowQuery:
    path = tmp_path / "w.toml"
    path.write_text(text)
    query = load_query(path)
    assert isinstance(query, WindowQuery)
    return query


def test_sampled_window_per_sensor(tmp_path: Path) -> None:
    query = _load(tmp_path, BASE + 'aggregates = ["avg", "max"]\nwindow = "1 hour"\n'
                  'every = "5 minutes"\nkey = "source_id"\nevent_types = ["reading"]\n'
                  'watermark_delay = "30 seconds"\n')
    assert query.mode == "sample"
    assert (query.window, query.every) == (timedelta(hours=1), timedelta(minutes=5))
    assert query.key == "source_id" and query.event_types == ("reading",)
    assert query.watermark_delay == timedelta(seconds=30)
    # the attribute is typed as a double column unless [attributes] declares it
    assert query.attributes == (("temperature", "double"),)
    op = query.operator()
    assert isinstance(op, Sampler)
    assert (op.size, op.period, op.aggregates) == (3_600_000_000, 300_000_000, ("avg", "max"))
    assert op.allowed_lateness == 0
    late = _load(tmp_path, BASE + 'aggregates = ["avg"]\nwindow = "1 hour"\nevery = "5 minutes"\n'
                 'allowed_lateness = "6 hours"\n').operator()
    assert isinstance(late, Sampler) and late.allowed_lateness == 6 * 3_600_000_000


def test_time_and_count_windows(tmp_path: Path) -> None:
    tumbling = _load(tmp_path, BASE + 'aggregates = ["count"]\nwindow = "10 minutes"\n')
    op = tumbling.operator()
    assert tumbling.mode == "time" and isinstance(op, WindowOperator)
    assert op.windows == TimeWindows(600_000_000, 600_000_000) and op.allowed_lateness == 0
    sliding = _load(tmp_path, BASE + 'aggregates = ["sum", "var"]\nwindow = "1 hour"\n'
                    'slide = "15 minutes"\nallowed_lateness = "2 minutes"\n'
                    '[attributes]\ntemperature = "bigint"\n')
    op = sliding.operator()
    assert op.windows == TimeWindows(3_600_000_000, 900_000_000)
    assert op.allowed_lateness == 120_000_000
    assert sliding.attributes == (("temperature", "bigint"),)
    counted = _load(tmp_path, BASE + 'aggregates = ["min"]\nrows = 100\nslide = 10\n')
    assert counted.mode == "count" and counted.operator().windows == CountWindows(100, 10)
    assert _load(tmp_path, BASE + 'aggregates = ["min"]\nrows = 5\n').operator().windows == \
        CountWindows(5, 5)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ('aggregates = ["avg"]\n', "exactly one of window"),
        ('aggregates = ["avg"]\nwindow = "1 hour"\nrows = 10\n', "exactly one of window"),
        ('window = "1 hour"\n', "aggregates must be a non-empty list"),
        ('aggregates = []\nwindow = "1 hour"\n', "aggregates must be a non-empty list"),
        ('aggregates = ["median"]\nwindow = "1 hour"\n', "unknown aggregate 'median'"),
        ('aggregates = ["avg", "avg"]\nwindow = "1 hour"\n', "lists an aggregate twice"),
        ('aggregates = ["avg"]\nwindow = "an hour"\n', "window: 'an hour' is not a duration"),
        ('aggregates = ["avg"]\nwindow = 3600\n', "window must be a duration string"),
        ('aggregates = ["avg"]\nwindow = "0 seconds"\n', "window must be longer than 0"),
        ('aggregates = ["avg"]\nrows = 0\n', "rows must be a positive integer"),
        ('aggregates = ["avg"]\nrows = "10"\n', "rows must be a positive integer"),
        ('aggregates = ["avg"]\nrows = 10\nslide = 11\n', "must be at most rows"),
        ('aggregates = ["avg"]\nrows = 10\nslide = "1 minute"\n',
         "slide must be a positive integer"),
        ('aggregates = ["avg"]\nrows = 10\nevery = "1 minute"\n', "every (sampling) needs"),
        ('aggregates = ["avg"]\nwindow = "1 hour"\nslide = 5\n',
         "slide must be a duration string"),
        ('aggregates = ["avg"]\nwindow = "1 hour"\nslide = "5 minutes"\nevery = "1 minute"\n',
         "slide and every exclude each other"),
        ('aggregates = ["avg"]\nwindow = "1 hour"\nwatermark_delay = "soon"\n',
         "watermark_delay: 'soon' is not a duration"),
        ('aggregates = ["avg"]\nwindow = "1 hour"\nkey = "a b"\n', "key 'a b' is not"),
        ('aggregates = ["avg"]\nwindow = "1 hour"\nevent_types = "read"\n',
         "event_types must be a list"),
        ('aggregates = ["avg"]\nwindow = "1 hour"\nslid = "5 minutes"\n',
         "unknown key(s) ['slid']"),
        ('aggregates = ["avg"]\nwindow = "1 hour"\n[attributes]\ntemperature = "string"\n',
         "a window aggregates a 'double' or 'bigint' attribute"),
    ],
)
def test_invalid_window_queries_name_file_and_field(tmp_path: Path, extra: str,
                                                    message: str) -> None:
    path = tmp_path / "w.toml"
    path.write_text(BASE + extra)
    with pytest.raises(QueryDefinitionError) as err:
        load_query(path)
    assert message in str(err.value) and str(path) in str(err.value)


def test_attribute_is_required(tmp_path: Path) -> None:
    path = tmp_path / "w.toml"
    path.write_text('id = "w"\nkind = "window"\naggregates = ["avg"]\nwindow = "1 hour"\n')
    with pytest.raises(QueryDefinitionError, match="missing or empty string key 'attribute'"):
        load_query(path)


def test_shipped_example_is_the_stock_price_window() -> None:
    queries = {q.id: q for q in load_queries(QUERIES_DIR / "examples" / "windows")}
    query = queries["stock_price_window"]
    assert isinstance(query, WindowQuery)
    assert query.mode == "sample" and query.attribute == "price"
    assert query.attributes == (("price", "double"),)


def _events(rows: list[tuple[str, int, int, float | None]]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["key", "time", "seq", "value"])


def test_feed_is_a_pure_function_of_its_input_state(tmp_path: Path) -> None:
    """What a replayed batch relies on: the same stored state and the same events give the
    same rows and the same new state; a new bucket starts at the query's watermark (a
    too-late event is dropped as one operator for all keys would drop it)."""
    import json

    query = _load(tmp_path, BASE + 'aggregates = ["count", "avg"]\nwindow = "10 seconds"\n'
                  'allowed_lateness = "0 seconds"\n')
    s = 1_000_000
    op, rows, stats = feed(query, None, _events([("a", 2 * s, 1, 1.0), ("a", 12 * s, 2, 3.0)]),
                           None, 11 * s)
    assert [(r.window_start, r.aggregate, r.value) for r in rows] == [
        (0, "count", 1.0), (0, "avg", 1.0)]
    assert stats == {"events": 2, "late_dropped": 0, "rows": 2, "corrections": 0}
    state = json.dumps(op.to_state())
    batch = _events([("a", 15 * s, 3, float("nan")), ("a", 13 * s, 4, 5.0),
                     ("a", 1 * s, 5, 9.0)])  # NaN reads as NULL; t = 1 s is too late
    first = feed(query, state, batch, 11 * s, 21 * s)
    again = feed(query, state, batch, 11 * s, 21 * s)
    assert first[1] == again[1] and first[0].to_state() == again[0].to_state()
    assert [(r.window_start, r.aggregate, r.value, r.count) for r in first[1]] == [
        (10 * s, "count", 2.0, 3), (10 * s, "avg", 4.0, 3)]
    assert first[2]["late_dropped"] == 1
    # a bucket whose first events arrive after the watermark passed them drops them
    _, rows, stats = feed(query, None, _events([("b", 1 * s, 6, 1.0)]), 11 * s, 21 * s)
    assert rows == [] and stats["late_dropped"] == 1


def _query(tmp_path: Path, mode: str) -> WindowQuery:
    spec = {"sample": 'window = "10 seconds"\nevery = "3 seconds"\nwatermark_delay = '
                      '"2 seconds"\n',
            "sample_late": 'window = "10 seconds"\nevery = "3 seconds"\nwatermark_delay = '
                           '"2 seconds"\nallowed_lateness = "30 seconds"\n',
            "time": 'window = "10 seconds"\nslide = "4 seconds"\nallowed_lateness = '
                    '"5 seconds"\n',
            "count": 'rows = 3\nslide = 2\nallowed_lateness = "6 seconds"\n'}[mode]
    return _load(tmp_path, BASE + 'aggregates = ["count", "sum", "avg", "var", "min", "max"]\n'
                 + spec)


@pytest.mark.parametrize("mode", ["sample", "sample_late", "time", "count"])
def test_buckets_with_json_state_equal_one_operator(tmp_path: Path, mode: str) -> None:
    """The gold job's protocol without Spark, on hypothesis-random streams with late events:
    per batch, one operator per bucket of keys rebuilt from its JSON state (a new bucket at
    the query's watermark; buckets without events skipped when the watermark did not
    move), every batch run twice from the same state (a replay) -- gives exactly the rows
    of one operator for all keys."""
    import json

    from hypothesis import given, settings
    from hypothesis import strategies as st

    from cep_core.windows import Event, Insert

    query = _query(tmp_path, mode)
    delay = micros(query.watermark_delay)
    s = 1_000_000
    event = st.tuples(st.sampled_from("abcd"), st.integers(0, 40),
                      st.one_of(st.none(), st.floats(-100, 100, allow_nan=False)))

    @settings(max_examples=60, deadline=None, database=None)
    @given(st.lists(st.lists(event, max_size=8), min_size=1, max_size=6))
    def check(batches: list[list[tuple[str, int, float | None]]]) -> None:
        seq = 0
        numbered = []
        for batch in batches:
            rows = []
            for key, second, value in batch:
                seq += 1
                rows.append((key, second * s + seq, seq, value))   # distinct times per key
            numbered.append(rows)
        one, mark, want = query.operator(), None, []
        states: dict[int, str] = {}
        got = []
        for rows in numbered:
            if not rows:
                continue   # gold skips empty micro-batches
            previous = mark
            newest = max(r[1] for r in rows) - delay
            mark = newest if mark is None else max(mark, newest)
            for key, t, q, v in sorted(rows, key=lambda r: (r[1], r[2])):
                one.apply(Insert(Event(key, t, q, v)))
            want += one.advance(mark)
            for bucket in sorted({ord(k) % 2 for k in "abcd"}):
                mine = _events([r for r in rows if ord(r[0]) % 2 == bucket])
                if bucket not in states and mine.empty:
                    continue
                if mine.empty and mark == previous:
                    continue
                first = feed(query, states.get(bucket), mine, previous, mark)
                again = feed(query, states.get(bucket), mine, previous, mark)
                assert first[1] == again[1]
                states[bucket] = json.dumps(first[0].to_state())
                got += first[1]
        def order(r: Any) -> tuple:
            return (r.emitted_at, str(r.key), r.window_id, r.aggregate, r.revision)

        assert sorted(got, key=order) == sorted(want, key=order)

    check()


@pytest.mark.parametrize("mode", ["sample", "sample_late", "time", "count"])
def test_backfill_counts_later_batches_events_once(tmp_path: Path, mode: str) -> None:
    """A window rule added at batch ``j`` is fed all of silver at the pinned version (which
    holds the events of later batches too), then each later batch its own events again:
    the rows equal one operator fed every event once, then advanced to the same
    watermarks (an event still held is skipped, one purged is too late)."""
    import json

    from hypothesis import given, settings
    from hypothesis import strategies as st

    from cep_core.windows import Event, Insert

    query = _query(tmp_path, mode)
    delay = micros(query.watermark_delay)
    s = 1_000_000
    event = st.tuples(st.sampled_from("ab"), st.integers(0, 40),
                      st.one_of(st.none(), st.floats(-100, 100, allow_nan=False)))

    @settings(max_examples=60, deadline=None, database=None)
    @given(st.lists(st.lists(event, min_size=1, max_size=8), min_size=1, max_size=5),
           st.integers(0, 4))
    def check(batches: list[list[tuple[str, int, float | None]]], added: int) -> None:
        added = min(added, len(batches) - 1)
        seq, numbered = 0, []
        for batch in batches:
            rows = []
            for key, second, value in batch:
                seq += 1
                rows.append((key, second * s + seq, seq, value))
            numbered.append(rows)
        history = [r for rows in numbered for r in rows]
        one, want, got = query.operator(), [], []
        for key, t, q, v in sorted(history, key=lambda r: (r[1], r[2])):
            one.apply(Insert(Event(key, t, q, v)))
        mark, state = None, None
        for n, rows in enumerate(numbered[added:]):
            previous = mark
            newest = max(r[1] for r in rows) - delay
            mark = newest if mark is None else max(mark, newest)
            want += one.advance(mark)
            op, out, _ = feed(query, state, _events(history if n == 0 else rows), previous,
                              mark)
            state = json.dumps(op.to_state())
            got += out

        def order(r: Any) -> tuple:
            return (r.emitted_at, str(r.key), r.window_id, r.aggregate, r.revision)

        assert sorted(got, key=order) == sorted(want, key=order)

    check()
