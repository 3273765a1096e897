"""Window operator and sampler = full recomputation on random delta streams.

Streams mix inserts, deletes, replaces (moving events between windows), late and
out-of-order events, NULL and NaN values, watermark advances and JSON state round trips.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from window_oracle import NAMES, close, expect, values

from cep_core.windows import (
    CountWindows,
    Delete,
    Event,
    Insert,
    Replace,
    Sampler,
    TimeWindows,
    WindowOperator,
    WindowRow,
    WindowStateError,
)

Op = tuple[Any, ...]

ops = st.lists(st.one_of(
    st.tuples(st.just("ins"), st.sampled_from(["a", "b"]), st.integers(-25, 30), values),
    st.tuples(st.just("ins"), st.sampled_from(["a", "b"]), st.integers(-25, 30), values),
    st.tuples(st.just("del"), st.integers(0, 10**6)),
    st.tuples(st.just("rep"), st.integers(0, 10**6), st.integers(-25, 30), values,
              st.booleans()),
    st.tuples(st.just("adv"), st.integers(0, 12)),
    st.tuples(st.just("rt"))), max_size=70)


class Stream:
    """Turns generated ops into delta events against a reference multiset."""

    def __init__(self) -> None:
        self.held: dict[tuple[str, int], Event] = {}
        self.wm = 0
        self.seq = 0

    def delta(self, op: Op) -> Insert | Delete | Replace | None:
        if op[0] == "ins":
            self.seq += 1
            return Insert(Event(op[1], self.wm + op[2], self.seq, op[3]))
        if not self.held:
            return None
        old = sorted(self.held.values(), key=lambda e: (str(e.key), e.seq))[
            op[1] % len(self.held)]
        if op[0] == "del":
            return Delete(old)
        if op[4]:
            new_seq = old.seq
        else:
            self.seq += 1
            new_seq = self.seq
        return Replace(old, Event(old.key, self.wm + op[2], new_seq, op[3]))

    def accept(self, d: Insert | Delete | Replace) -> None:
        if isinstance(d, Insert):
            self.held[(str(d.event.key), d.event.seq)] = d.event
        elif isinstance(d, Delete):
            del self.held[(str(d.event.key), d.event.seq)]
        else:
            del self.held[(str(d.old.key), d.old.seq)]
            self.held[(str(d.new.key), d.new.seq)] = d.new

    def by_key(self) -> dict[str, list[Event]]:
        out: dict[str, list[Event]] = {}
        for e in sorted(self.held.values(), key=lambda e: (e.time, e.seq)):
            out.setdefault(str(e.key), []).append(e)
        return out


def _latest(latest: dict[tuple[str, int], dict[str, Any]], rows: list[WindowRow]) -> None:
    for r in rows:
        slot = latest.setdefault((str(r.key), r.window_id), {"revision": -1})
        assert r.revision >= slot["revision"]
        if r.revision > slot["revision"]:
            slot.clear()
            slot.update(revision=r.revision, start=r.window_start, end=r.window_end,
                        count=r.count, values={})
        slot["values"][r.aggregate] = r.value


def _expected_windows(op: WindowOperator, s: Stream) -> dict[tuple[str, int], dict[str, Any]]:
    """Every existing window of the reference multiset: (key, id) -> start, end, events."""
    out: dict[tuple[str, int], dict[str, Any]] = {}
    for key, events in s.by_key().items():
        if isinstance(op.windows, TimeWindows):
            for e in events:
                for start in op.windows.starts(e.time):
                    w = out.setdefault((key, start), {"start": start,
                                                      "end": start + op.windows.size,
                                                      "events": []})
                    w["events"].append(e)
        else:
            size, slide = op.windows.size, op.windows.slide
            k = 0
            while k * slide + size <= len(events):
                evs = events[k * slide:k * slide + size]
                out[(key, k * slide)] = {"start": evs[0].time, "end": evs[-1].time + 1,
                                         "events": evs}
                k += 1
    return out


def _check_operator(op: WindowOperator, s: Stream,
                    latest: dict[tuple[str, int], dict[str, Any]]) -> None:
    expected = _expected_windows(op, s)
    wm = op.watermark
    assert wm is not None
    # every closed window's latest emitted row = recomputation from the current multiset
    for wid, w in expected.items():
        closed = (w["end"] <= wm if isinstance(op.windows, TimeWindows) else w["end"] - 1 < wm)
        if not closed:
            continue
        got = latest.get(wid)
        assert got is not None, ("closed window never emitted", wid, w)
        assert (got["start"], got["end"], got["count"]) == (w["start"], w["end"],
                                                            len(w["events"])), (wid, got, w)
        raw = [e.value for e in w["events"]]
        for name in op.aggregates:
            assert close(got["values"][name], expect(name, raw)), (wid, name, got, raw)
    # an emitted window that no longer exists was retracted
    for wid, got in latest.items():
        if wid not in expected:
            assert got["count"] == 0, ("stale window not retracted", wid, got)
    # the operator's held windows are exactly those not yet purged, with current values
    horizon = op.horizon
    current: dict[tuple[str, int], dict[str, Any]] = {}
    for r in op.current():
        current.setdefault((str(r.key), r.window_id), {"count": r.count, "values": {}})[
            "values"][r.aggregate] = r.value
    for wid, w in expected.items():
        last_time = w["events"][-1].time
        if last_time >= horizon:
            assert wid in current, ("live window missing", wid)
        if wid in current:
            raw = [e.value for e in w["events"]]
            assert current[wid]["count"] == len(raw)
            for name, v in current[wid]["values"].items():
                assert close(v, expect(name, raw)), (wid, name, v, raw)


SPECS = [TimeWindows(10, 10), TimeWindows(10, 3), TimeWindows(7, 2, offset=1),
         TimeWindows(4, 6), CountWindows(3, 3), CountWindows(4, 1), CountWindows(5, 2)]


@pytest.mark.parametrize("spec", SPECS, ids=repr)
@pytest.mark.parametrize("lateness", [0, 8])
@settings(max_examples=120, deadline=None)
@given(stream_ops=ops)
def test_window_operator_equals_recomputation(spec: TimeWindows | CountWindows,
                                              lateness: int, stream_ops: list[Op]) -> None:
    op = WindowOperator(spec, NAMES, allowed_lateness=lateness)
    s = Stream()
    latest: dict[tuple[str, int], dict[str, Any]] = {}
    for o in [*stream_ops, ("adv", 10_000)]:
        if o[0] == "rt":
            op = WindowOperator.from_state(json.loads(json.dumps(op.to_state())))
            continue
        if o[0] == "adv":
            s.wm += o[1]
            _latest(latest, op.advance(s.wm))
            if op.watermark is not None:
                _check_operator(op, s, latest)
            continue
        d = s.delta(o)
        if d is None:
            continue
        times = (d.old.time, d.new.time) if isinstance(d, Replace) else (d.event.time,)
        accepted = op.apply(d)
        assert accepted == (min(times) >= op.horizon)
        if accepted:
            s.accept(d)
    if isinstance(spec, TimeWindows):   # far past every event: everything final and purged
        assert op.keys == {}
    else:                               # only the incomplete count windows at the end remain
        assert all(len(ks.windows) <= spec.size // spec.slide for ks in op.keys.values())


def _grid_after(t: int, period: int, offset: int) -> int:
    return offset + ((t - offset) // period + 1) * period


@pytest.mark.parametrize("size,period,offset", [(10, 1, 0), (10, 3, 1), (6, 6, 0), (4, 7, 2)])
@settings(max_examples=150, deadline=None)
@given(stream_ops=ops)
def test_window_sampler_equals_recomputation(size: int, period: int, offset: int,
                                             stream_ops: list[Op]) -> None:
    sampler = Sampler(size, period, NAMES, offset=offset)
    s = Stream()
    last_t: int | None = None
    previous_wm: int | None = None
    reported: dict[str, bool] = {}
    for o in [*stream_ops, ("adv", 40)]:
        if o[0] == "rt":
            sampler = Sampler.from_state(json.loads(json.dumps(sampler.to_state())))
            continue
        if o[0] == "adv":
            s.wm += o[1]
            if o[1] == 0:
                continue
            rows = sampler.advance(s.wm)
            got: dict[tuple[int, str], dict[str, Any]] = {}
            for r in rows:
                assert r.window_end == r.emitted_at and r.window_start == r.emitted_at - size
                slot = got.setdefault((r.emitted_at, str(r.key)), {"count": r.count})
                slot[r.aggregate] = r.value
            want: dict[tuple[int, str], dict[str, Any]] = {}
            by_key = s.by_key()
            if last_t is None and s.held:
                t = _grid_after(min(e.time for e in s.held.values()), period, offset)
                if previous_wm is not None:
                    t = max(t, _grid_after(previous_wm, period, offset))
            elif last_t is not None:
                t = last_t + period
            else:
                t = s.wm + 1
            while t <= s.wm:
                last_t = t
                for key in sorted(set(by_key) | set(reported)):
                    raw = [e.value for e in by_key.get(key, []) if t - size <= e.time < t]
                    if raw or reported.get(key):
                        want[(t, key)] = {"count": len(raw),
                                          **{n: expect(n, raw) for n in NAMES}}
                    reported[key] = bool(raw)
                t += period
            previous_wm = s.wm
            assert got.keys() == want.keys(), (sorted(got), sorted(want))
            for k, w in want.items():
                assert got[k]["count"] == w["count"], (k, got[k], w)
                for n in NAMES:
                    assert close(got[k][n], w[n]), (k, n, got[k][n], w[n])
            continue
        d = s.delta(o)
        if d is None:
            continue
        sampler.apply(d)
        s.accept(d)


@pytest.mark.parametrize("size,period,offset", [(10, 1, 0), (10, 3, 1), (4, 7, 2)])
@settings(max_examples=150, deadline=None)
@given(stream_ops=ops)
def test_window_sampler_corrections_equal_recomputation(size: int, period: int, offset: int,
                                                        stream_ops: list[Op]) -> None:
    """With allowed lateness covering every delta (each one at or after the watermark minus
    the lateness when it arrives), the newest revision of every sample equals the
    recomputation over the events held now, after every advance; every non-empty sample
    from the first one on has a row; only late deltas make revisions."""
    lateness = 25
    sampler = Sampler(size, period, NAMES, offset=offset, allowed_lateness=lateness)
    s = Stream()
    newest: dict[tuple[int, str], dict[str, Any]] = {}
    first: int | None = None
    late = False
    for o in [*stream_ops, ("adv", 40)]:
        if o[0] == "rt":
            sampler = Sampler.from_state(json.loads(json.dumps(sampler.to_state())))
            continue
        if o[0] == "adv":
            s.wm += o[1]
            batch: dict[tuple[int, str], dict[str, Any]] = {}
            for r in sampler.advance(s.wm):
                slot = batch.setdefault((r.window_end, str(r.key)),
                                        {"revision": r.revision, "n": r.count})
                assert (slot["revision"], slot["n"]) == (r.revision, r.count)
                slot[r.aggregate] = r.value
            for key, row in batch.items():
                before = newest.get(key)
                assert row["revision"] == (0 if before is None and not late
                                           else row["revision"] if before is None
                                           else before["revision"] + 1), (key, row, before)
                if row["revision"] == 0:
                    first = key[0] if first is None else min(first, key[0])
                newest[key] = row
            late = False
            by_key = s.by_key()
            for (t, key), row in newest.items():
                raw = [e.value for e in by_key.get(key, []) if t - size <= e.time < t]
                assert row["n"] == len(raw), (t, key, row, raw)
                for n in NAMES:
                    assert close(row[n], expect(n, raw)), (t, key, n, row, raw)
            if first is not None and sampler.sample_time is not None:
                t = first
                while t <= sampler.sample_time:
                    for key, events in by_key.items():
                        if any(t - size <= e.time < t for e in events):
                            assert (t, key) in newest, (t, key)
                    t += period
            continue
        d = s.delta(o)
        if d is None:
            continue
        times = (d.old.time, d.new.time) if isinstance(d, Replace) else (d.event.time,)
        if sampler.watermark is not None and min(times) < sampler.watermark - lateness:
            continue            # outside the allowed lateness: not this property's input
        assert sampler.apply(d)
        s.accept(d)
        late = late or (sampler.watermark is not None and min(times) < sampler.watermark)


def test_window_sampler_allowed_lateness_rewrites_a_sample_with_a_new_revision() -> None:
    s = Sampler(10, 5, ("count", "sum"), allowed_lateness=20)
    s.apply(Insert(Event("k", 1, 1, 2.0)))
    assert [(r.emitted_at, r.aggregate, r.value, r.revision) for r in s.advance(10)] == [
        (5, "count", 1.0, 0), (5, "sum", 2.0, 0), (10, "count", 1.0, 0), (10, "sum", 2.0, 0)]
    assert s.apply(Insert(Event("k", 3, 2, 5.0)))     # late, inside [-5, 5) and [0, 10)
    assert s.apply(Insert(Event("k", -9, 3, 1.0)))    # before the window, within lateness
    rows = [(r.emitted_at, r.aggregate, r.value, r.count, r.revision) for r in s.advance(10)]
    assert rows == [(-5, "count", 1.0, 1, 1), (-5, "sum", 1.0, 1, 1),
                    (0, "count", 1.0, 1, 1), (0, "sum", 1.0, 1, 1),
                    (5, "count", 2.0, 2, 1), (5, "sum", 7.0, 2, 1),
                    (10, "count", 2.0, 2, 1), (10, "sum", 7.0, 2, 1)]
    assert s.corrections == 4
    s.advance(45)                                      # horizon 25: nothing left to correct
    assert s.apply(Insert(Event("k", 20, 4, 1.0))) is False and s.keys == {}


def test_window_round_trip_mid_stream_continues_identically() -> None:
    def feed(op: WindowOperator, sampler: Sampler, lo: int, hi: int) -> list[WindowRow]:
        rows: list[WindowRow] = []
        for i in range(lo, hi):
            e = Event(f"s{i % 3}", i * 7 - (i % 5) * 9, i, float(i % 11) if i % 13 else None)
            for target in (op, sampler):
                target.apply(Insert(e))
            if i % 4 == 0 and i > 8:
                old = Event(f"s{(i - 8) % 3}", (i - 8) * 7 - ((i - 8) % 5) * 9, i - 8,
                            float((i - 8) % 11) if (i - 8) % 13 else None)
                new = Event(old.key, old.time + 15, old.seq, 2.5)
                for target in (op, sampler):
                    target.apply(Replace(old, new))
            if i % 10 == 9:
                rows += op.advance(i * 7 - 20) + sampler.advance(i * 7 - 20)
        return rows

    a_op = WindowOperator(TimeWindows(60, 20), allowed_lateness=30)
    a_sampler = Sampler(60, 10)
    straight = feed(a_op, a_sampler, 0, 200)
    b_op = WindowOperator(TimeWindows(60, 20), allowed_lateness=30)
    b_sampler = Sampler(60, 10)
    first = feed(b_op, b_sampler, 0, 100)
    b_op = WindowOperator.from_state(json.loads(json.dumps(b_op.to_state())))
    b_sampler = Sampler.from_state(json.loads(json.dumps(b_sampler.to_state())))
    assert first + feed(b_op, b_sampler, 100, 200) == straight
    assert len(straight) > 100 and b_op.ops == a_op.ops and b_sampler.ops == a_sampler.ops


def test_window_errors_are_clear() -> None:
    op = WindowOperator(TimeWindows(10, 5))
    op.apply(Insert(Event("k", 1, 1, 1.0)))
    with pytest.raises(WindowStateError, match="already held"):
        op.apply(Insert(Event("k", 2, 1, 1.0)))
    with pytest.raises(WindowStateError, match="no such event"):
        op.apply(Delete(Event("k", 2, 2, 1.0)))
    with pytest.raises(WindowStateError, match="held event is at time 1"):
        op.apply(Delete(Event("k", 3, 1, 1.0)))
    with pytest.raises(ValueError, match="keeps the key"):
        Replace(Event("k", 1, 1, 1.0), Event("j", 1, 1, 1.0))
    with pytest.raises(ValueError, match="unknown window aggregate"):
        Sampler(10, 1, ("median",))
    with pytest.raises(ValueError, match="slide <= size"):
        CountWindows(2, 3)
    op.advance(20)
    assert op.apply(Insert(Event("k", 5, 9, 1.0))) is False and op.dropped == 1


def test_window_sampler_switches_min_max_to_heaps_on_disorder_and_back() -> None:
    s = Sampler(10, 5, ("min", "max"))
    for seq, t in enumerate([1, 2, 3]):
        s.apply(Insert(Event("k", t, seq, float(t))))
    s.advance(5)                                        # window [-5, 5): 1, 2, 3
    assert s.keys["k"].heap is False and s.rebuilds == 0
    s.apply(Insert(Event("k", 0, 9, 7.0)))             # late, lands before 1: not FIFO
    assert s.keys["k"].heap is True and s.rebuilds == 1
    s.apply(Delete(Event("k", 2, 1, 2.0)))             # a delete in the middle
    rows = {r.aggregate: r.value for r in s.advance(10)}   # window [0, 10): 0, 1, 3
    assert rows == {"min": 1.0, "max": 7.0}
    s.apply(Insert(Event("k", 40, 10, -1.0)))
    s.advance(25)                                       # the window [15, 25) is empty
    assert s.keys["k"].heap is False                    # back to the monotone deques
    assert {r.aggregate: r.value for r in s.advance(45)} == {"min": -1.0, "max": -1.0}


@pytest.mark.parametrize("family", ["operators", "sampler"])
@settings(max_examples=60, deadline=None)
@given(stream_ops=ops)
def test_window_per_key_instances_emit_the_same_rows(family: str, stream_ops: list[Op]) -> None:
    """A Spark job can keep one operator per key (group state): same rows per key."""
    def make() -> list[WindowOperator | Sampler]:
        if family == "sampler":
            return [Sampler(10, 2, NAMES)]
        return [WindowOperator(TimeWindows(10, 3), NAMES, allowed_lateness=5),
                WindowOperator(CountWindows(3, 1), NAMES, allowed_lateness=5)]

    shared = make()
    per_key = {k: make() for k in ("a", "b")}
    s = Stream()
    got: dict[str, list[WindowRow]] = {"a": [], "b": []}
    want: dict[str, list[WindowRow]] = {"a": [], "b": []}
    for o in [*stream_ops, ("adv", 100)]:
        if o[0] == "rt":
            continue
        if o[0] == "adv":
            s.wm += o[1]
            for i, target in enumerate(shared):
                for r in target.advance(s.wm):
                    want[str(r.key)].append(r)
                for k, inst in per_key.items():
                    got[k].extend(inst[i].advance(s.wm))
            continue
        d = s.delta(o)
        if d is None:
            continue
        key = str(d.old.key if isinstance(d, Replace) else d.event.key)
        results = [t.apply(d) for t in shared]
        if family == "operators":
            assert [t.apply(d) for t in per_key[key]] == results
            if results[0]:
                s.accept(d)
        else:   # the samplers may differ in what they ignore (before every future window)
            for t in per_key[key]:
                t.apply(d)
            s.accept(d)
    for k in ("a", "b"):
        assert sorted(got[k], key=repr) == sorted(want[k], key=repr)


def test_window_sampler_never_takes_a_passed_sample_time() -> None:
    s = Sampler(10, 2, ("count",))
    assert s.advance(0) == []                       # T = 0 passes with no event anywhere
    s.apply(Insert(Event("a", -1, 1, None)))      # would have been in [-10, 0)
    assert [(r.emitted_at, r.count) for r in s.advance(4)] == [(2, 1), (4, 1)]


def test_window_count_ranks_survive_a_fully_purged_key() -> None:
    op = WindowOperator(CountWindows(3, 3), ("count",), allowed_lateness=8)
    for seq in range(3):
        op.apply(Insert(Event("a", -7, seq, None)))
    assert [r.window_id for r in op.advance(2)] == [0]    # emitted, then purged (-7 < -6)
    for seq in range(3, 6):
        op.apply(Insert(Event("a", 2, seq, 1.0)))
    assert [(r.window_id, r.value) for r in op.advance(100)] == [(3, 3.0)]


def test_a_sampler_drops_an_event_too_late_whatever_keys_it_holds() -> None:
    """Whether an event is before every future sample window must not depend on the other
    keys of the operator (the gold job splits keys into buckets, each its own operator): a
    sampler whose only key had events after the watermark (nothing sampled yet) accepted an
    event older than every future window and not correctable (found by hypothesis)."""
    s = 1_000_000

    def late_inserts(other_key: bool) -> tuple[bool, bool]:
        op = Sampler(10 * s, 3 * s, ("count",), allowed_lateness=30 * s)
        if other_key:
            op.apply(Insert(Event("b", 2, 2, None)))
        op.apply(Insert(Event("a", 33 * s + 1, 1, None)))
        op.advance(31 * s + 1)
        too_late = op.apply(Insert(Event("a", 3, 3, None)))     # < watermark - lateness
        correctable = op.apply(Insert(Event("a", s + 4, 4, None)))
        return too_late, correctable

    assert late_inserts(True) == late_inserts(False) == (False, True)
