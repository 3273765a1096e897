"""Sequential preprocessing operators (lakecep.operators): fill_forward, split, merge, one
by one and composed. For each, unit tests of the semantics in docs/sources.md and a property
test that the whole input in one call and any cut of it into micro-batches (each given the
state the one before left, through its JSON text) give the same outcomes and final state.
No Spark: tests/integration/test_operators_silver.py runs them through the silver job."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakecep.operators import pending_origins, run_operators, state_counts
from lakecep.sources import SourceError, load_source, map_record

BASE = """
format = "jsonl"
[fields]
id = "string"
dev = "string"
ts = "string"
v = "double"
gate = "string"
[mapping]
event_id = "{event_id}"
object_id = "dev"
event_type = "'reading'"
source_id = "'s'"
event_time = "ts"
{operators}
"""
T0 = datetime(2026, 3, 1, tzinfo=UTC)
_SOURCES: dict[str, object] = {}


def make(tmp: Path, operators: str, event_id: str = "id"):  # noqa: ANN201
    path = tmp / f"s{len(list(tmp.glob('*.toml')))}.toml"
    path.write_text(BASE.format(operators=operators, event_id=event_id))
    return load_source(path)


def cached(factory, name: str, operators: str, event_id: str = "id"):  # noqa: ANN001, ANN201
    """One source per test module and name (hypothesis calls a test many times)."""
    if name not in _SOURCES:
        _SOURCES[name] = make(factory.mktemp(name), operators, event_id)
    return _SOURCES[name]


def rows(records: list[dict]) -> list[tuple[str, str, int, pd.Timestamp]]:
    ingest = pd.Timestamp("2026-03-02 00:00:00")
    return [(json.dumps(r), "file:/landing/s/a.jsonl", n, ingest)
            for n, r in enumerate(records, 1)]


def at(seconds: float) -> str:
    return (T0 + timedelta(seconds=seconds)).isoformat()


def batch_and_streamed(source, data: list, cuts: list[int]):  # noqa: ANN001, ANN201
    """Outcomes and final state of one call, and of the cut calls (state through JSON)."""
    whole, final = run_operators(source, data, None, "fp")
    bounds = sorted({0, len(data), *(c for c in cuts if c <= len(data))})
    state, parts = None, []
    for a, b in zip(bounds, bounds[1:], strict=False):
        out, state = run_operators(source, data[a:b], state, "fp")
        parts += out
    return whole, final, parts, state if state is not None else final


def events(outcomes: list) -> list[tuple]:
    return [o[2:11] for o in outcomes if o[0]]


def reasons(outcomes: list) -> list[str]:
    return [o[1] for o in outcomes if not o[0]]


# ------------------------------------------------------------------------ fill_forward

FILL = '[[operators]]\nop = "fill_forward"\nfields = ["gate", "v"]\n'


def test_fill_forward_carries_each_keys_last_value_in_arrival_order(tmp_path: Path) -> None:
    s = make(tmp_path, FILL)
    data = rows([
        {"id": "1", "dev": "a", "ts": at(0), "gate": "g1", "v": 1},
        {"id": "2", "dev": "b", "ts": at(1)},                      # b: nothing to carry
        {"id": "3", "dev": "a", "ts": at(2)},                      # a: g1, 1.0
        {"id": "4", "dev": "a", "ts": at(-50), "gate": "g2"},      # late, arrives now: v 1.0
        {"id": "5", "dev": "a", "ts": at(3)},                      # g2 (arrival order), 1.0
    ])
    out, state = run_operators(s, data, None, "fp")
    got = {e[0]: e[8] for e in events(out)}
    assert got == {"1": {"gate": "g1", "v": "1.0"}, "2": None, "3": {"gate": "g1", "v": "1.0"},
                   "4": {"gate": "g2", "v": "1.0"}, "5": {"gate": "g2", "v": "1.0"}}
    # the next micro-batch starts from the state: a's last values carry over
    more, _ = run_operators(s, rows([{"id": "6", "dev": "a", "ts": at(9)}]), state, "fp")
    assert events(more)[0][8] == {"gate": "g2", "v": "1.0"}
    assert state_counts(state) == {"split_extra": 0, "merged_away": 0, "pending": 0}


def test_fill_forward_by_a_key_expression_and_the_mapping_sees_the_filled_value(
        tmp_path: Path) -> None:
    s = make(tmp_path, '[[operators]]\nop = "fill_forward"\nfields = ["dev"]\nkey = "gate"\n')
    out, _ = run_operators(s, rows([{"id": "1", "dev": "d1", "ts": at(0), "gate": "g"},
                                    {"id": "2", "ts": at(1), "gate": "g"},
                                    {"id": "3", "ts": at(1), "gate": "h"}]), None)
    assert [e[1] for e in events(out)] == ["d1", "d1"]  # object_id = the filled dev
    assert reasons(out) == ["missing_field: object_id: dev is null"]


_FILL_RECORDS = st.lists(st.fixed_dictionaries({
    "dev": st.one_of(st.none(), st.sampled_from(["a", "b", "c"])),
    "gate": st.one_of(st.none(), st.sampled_from(["x", "y"])),
    "v": st.one_of(st.none(), st.floats(-5, 5, allow_nan=False)),
}), max_size=25)


@settings(max_examples=80, deadline=None)
@given(_FILL_RECORDS, st.lists(st.integers(0, 25), max_size=5))
def test_fill_forward_batch_and_streaming_agree_and_match_pandas_ffill(
        tmp_path_factory, records, cuts) -> None:  # noqa: ANN001
    keyed = FILL + "key = \"COALESCE(dev, '-')\"\n"
    s = cached(tmp_path_factory, "fill", keyed)
    data = rows([{"id": str(n), "ts": at(n), **{k: v for k, v in r.items() if v is not None}}
                 for n, r in enumerate(records)])
    whole, final, parts, state = batch_and_streamed(s, data, cuts)
    assert parts == whole and state == final
    # an independent reference: pandas' forward fill per key
    frame = pd.DataFrame(records, columns=["dev", "gate", "v"]).astype(object)
    frame["key"] = frame["dev"].fillna("-")
    filled = frame.groupby("key")[["gate", "v"]].ffill()
    for outcome, (_, want) in zip(whole, filled.iterrows(), strict=True):
        if outcome[0]:
            attrs = outcome[10] or {}
            assert attrs.get("gate") == (None if pd.isna(want["gate"]) else want["gate"])
            assert attrs.get("v") == (None if pd.isna(want["v"]) else repr(float(want["v"])))
        else:  # no dev: quarantined, after the fill
            assert outcome[1].startswith("missing_field: object_id")


# ------------------------------------------------------------------------------ split

SPLIT = '[[operators]]\nop = "split"\nfield = "readings"\ninto = "v"\n'


def test_split_gives_one_event_per_element_with_deterministic_distinct_ids(
        tmp_path: Path) -> None:
    s = make(tmp_path, SPLIT, event_id="id || '-' || _part")
    message = {"id": "m1", "dev": "a", "ts": at(0), "site": "north",
               "readings": [{"v": 1.5, "ts": at(1)}, {"v": "2", "unit": "C"}, 7]}
    out, state = run_operators(s, rows([message]), None, "fp")
    got = events(out)
    assert [e[0] for e in got] == ["m1-0", "m1-1", "m1-2"]
    assert [e[4] for e in got] == [T0 + timedelta(seconds=1), T0, T0]
    assert [e[8] for e in got] == [{"id": "m1", "v": "1.5", "site": "north"},
                                   {"id": "m1", "v": "2.0", "site": "north", "unit": "C"},
                                   {"id": "m1", "v": "7.0", "site": "north"}]
    assert {o[11] for o in out} == {rows([message])[0][0]}  # each part keeps the raw message
    assert state_counts(state)["split_extra"] == 2
    # the default id (_raw_hash) is distinct per part and the same in every run
    hashed = make(tmp_path, SPLIT, event_id="_raw_hash")
    first = [e[0] for e in events(run_operators(hashed, rows([message]))[0])]
    assert len(set(first)) == 3
    assert first == [e[0] for e in events(run_operators(hashed, rows([message]))[0])]


def test_split_of_nothing_is_filtered_and_of_a_non_array_or_bad_part_is_named(
        tmp_path: Path) -> None:
    s = make(tmp_path, SPLIT.replace('into = "v"\n', ""), event_id="id || _part")
    out, state = run_operators(s, rows([
        {"id": "e", "dev": "a", "ts": at(0), "readings": []},
        {"id": "n", "dev": "a", "ts": at(0)},
        {"id": "o", "dev": "a", "ts": at(0), "readings": {"v": 1}},
        {"id": "b", "dev": "a", "ts": at(0), "readings": [{"v": 1}, {"v": "lots"}, 3]},
    ]), None)
    assert reasons(out) == [
        "filtered: split readings: no elements", "filtered: split readings: no elements",
        "wrong_type: readings: split needs a JSON array, got dict",
        "wrong_type: readings[1].v: 'lots' is not a number (double)",
        "wrong_type: readings[2]: an element that is not an object needs split into = <a "
        "declared field>"]
    assert [e[0] for e in events(out)] == ["b0"]
    assert state_counts(state)["split_extra"] == 2


_SPLIT_RECORDS = st.lists(st.tuples(
    st.sampled_from(["a", "b"]),
    st.one_of(st.none(), st.lists(st.one_of(st.floats(-9, 9, allow_nan=False),
                                            st.sampled_from(["x", "1e3"])), max_size=4))),
    max_size=15)


@settings(max_examples=80, deadline=None)
@given(_SPLIT_RECORDS, st.lists(st.integers(0, 15), max_size=5))
def test_split_batch_and_streaming_agree_and_every_part_has_one_outcome(
        tmp_path_factory, records, cuts) -> None:  # noqa: ANN001
    s = cached(tmp_path_factory, "split", SPLIT, event_id="_raw_hash")
    data = rows([{"id": str(n), "dev": dev, "ts": at(n),
                  **({} if readings is None else {"readings": readings})}
                 for n, (dev, readings) in enumerate(records)])
    whole, final, parts, state = batch_and_streamed(s, data, cuts)
    assert parts == whole and state == final
    assert len(whole) == sum(max(len(r or []), 1) for _, r in records)
    assert state_counts(final)["split_extra"] == sum(max(len(r or []) - 1, 0) for _, r in records)


# ------------------------------------------------------------------------------ merge

MERGE = ('[[operators]]\nop = "merge"\nwithin = 60\n'
         'combine = { v = "sum", gate = "last" }\n')


def test_merge_folds_a_keys_events_within_the_tolerance_into_its_first(
        tmp_path: Path) -> None:
    s = make(tmp_path, MERGE)
    data = rows([
        {"id": "1", "dev": "a", "ts": at(0), "v": 1, "gate": "g1"},
        {"id": "2", "dev": "b", "ts": at(10), "v": 5},
        {"id": "3", "dev": "a", "ts": at(50), "v": 2, "gate": "g2"},
        {"id": "4", "dev": "a", "ts": at(30), "v": 4},       # out of order, within 60 s
        {"id": "5", "dev": "a", "ts": at(65), "v": 8},       # 65 - 0 > 60: a's group closes
        {"id": "6", "dev": "c", "ts": at(200), "v": 1},      # the watermark passes 65 + 60
    ])
    out, state = run_operators(s, data, None, "fp")
    got = {e[0]: (e[4], e[8]) for e in events(out)}
    assert got == {"1": (T0, {"v": "7.0", "gate": "g2"}),        # 1 + 2 + 4; last gate
                   "2": (T0 + timedelta(seconds=10), {"v": "5.0"}),
                   "5": (T0 + timedelta(seconds=65), {"v": "8.0"})}
    assert sorted(reasons(out)) == ["merged: into file:/landing/s/a.jsonl:1"] * 2
    # "6" is pending: its group may still grow
    assert state_counts(state) == {"split_extra": 0, "merged_away": 2, "pending": 1}
    assert pending_origins(state) == [("file:/landing/s/a.jsonl", 6)]
    # order of emission: a's group when "5" did not fit, b's and "5"'s by the watermark
    assert [o[1] if not o[0] else o[2] for o in out] == [
        "merged: into file:/landing/s/a.jsonl:1", "merged: into file:/landing/s/a.jsonl:1",
        "1", "2", "5"]


def test_a_late_record_is_emitted_alone_and_a_record_without_time_passes(
        tmp_path: Path) -> None:
    s = make(tmp_path, MERGE)
    out, state = run_operators(s, rows([
        {"id": "1", "dev": "a", "ts": at(500)},
        {"id": "2", "dev": "b", "ts": at(0)},    # 0 + 60 < 500: late, emitted at once
        {"id": "3", "dev": "b", "ts": at(1)},    # late too: its own group
        {"id": "4", "dev": "a", "ts": "soon"},   # no time: unmerged, quarantined by the mapping
    ]), None)
    assert [e[0] for e in events(out)] == ["2", "3"]
    assert reasons(out) == ["invalid_value: event_time: 'soon' does not match time format 'iso'"]
    assert state_counts(state)["pending"] == 1


def test_changed_operators_release_the_pending_records_to_quarantine(tmp_path: Path) -> None:
    s = make(tmp_path, MERGE)
    _, state = run_operators(s, rows([{"id": "1", "dev": "a", "ts": at(0)},
                                      {"id": "2", "dev": "a", "ts": at(5)}]), None, "fp")
    out, after = run_operators(s, [], state, "another")
    assert reasons(out) == [r for r in reasons(out) if r.startswith("state_reset:")]
    assert [o[13] for o in out] == [1, 2]
    assert state_counts(after)["pending"] == 0


_MERGE_RECORDS = st.lists(st.tuples(st.sampled_from(["a", "b", "c"]), st.integers(0, 400),
                                    st.one_of(st.none(), st.integers(-3, 3))), max_size=30)


@settings(max_examples=100, deadline=None)
@given(_MERGE_RECORDS, st.lists(st.integers(0, 30), max_size=6))
def test_merge_batch_and_streaming_agree_and_groups_hold_their_promise(
        tmp_path_factory, records, cuts) -> None:  # noqa: ANN001
    s = cached(tmp_path_factory, "merge", MERGE)
    data = rows([{"id": str(n), "dev": dev, "ts": at(t), **({} if v is None else {"v": v})}
                 for n, (dev, t, v) in enumerate(records)])
    whole, final, parts, state = batch_and_streamed(s, data, cuts)
    assert parts == whole and state == final
    counts = state_counts(final)
    assert len(whole) + counts["pending"] == len(records)  # nothing lost
    merged = [o for o in whole if not o[0]]
    assert counts["merged_away"] == len(merged)
    # every merged record is of the key and within 60 s of the event it went into
    by_line = {n: r for n, r in enumerate(records, 1)}
    for o in merged:
        into = int(o[1].rsplit(":", 1)[1])
        mine, theirs = by_line[o[13]], by_line[into]
        assert mine[0] == theirs[0] and abs(mine[1] - theirs[1]) <= 60 and into < o[13]
    for e in events(whole):  # the sum of v over the group
        line = int(e[0]) + 1
        group = [by_line[line]] + [by_line[o[13]] for o in merged
                                   if int(o[1].rsplit(":", 1)[1]) == line]
        vs = [g[2] for g in group if g[2] is not None]
        assert (e[8] or {}).get("v") == (repr(float(sum(vs))) if vs else None)


# -------------------------------------------------------------------- all composed

ALL = """
[[operators]]
op = "filter"
where = "dev <> 'noise'"
[[operators]]
op = "split"
field = "readings"
into = "v"
[[operators]]
op = "fill_forward"
fields = ["gate"]
[[operators]]
op = "merge"
within = 30
combine = { v = "max" }
[[operators]]
op = "drop_fields"
fields = ["id"]
"""

_ALL_RECORDS = st.lists(st.fixed_dictionaries({
    "dev": st.sampled_from(["a", "b", "noise"]),
    "t": st.integers(0, 200),
    "gate": st.one_of(st.none(), st.sampled_from(["x", "y"])),
    "readings": st.one_of(st.none(), st.lists(st.integers(0, 9), max_size=3)),
}), max_size=20)


@settings(max_examples=80, deadline=None)
@given(_ALL_RECORDS, st.lists(st.integers(0, 20), max_size=5))
def test_every_operator_composed_batch_and_streaming_agree(tmp_path_factory, records,
                                                           cuts) -> None:  # noqa: ANN001
    s = cached(tmp_path_factory, "all", ALL, event_id="_raw_hash")
    data = rows([{"id": str(n), "dev": r["dev"], "ts": at(r["t"]),
                  **({"gate": r["gate"]} if r["gate"] else {}),
                  **({"readings": r["readings"]} if r["readings"] is not None else {})}
                 for n, r in enumerate(records)])
    whole, final, parts, state = batch_and_streamed(s, data, cuts)
    assert parts == whole and state == final
    counts = state_counts(final)
    # the reconciliation of docs/sources.md, on one micro-batch's outcomes
    assert len(whole) + counts["pending"] - counts["split_extra"] == len(records)


# ----------------------------------------------------------------------- configuration


@pytest.mark.parametrize(("text", "message"), [
    ('[[operators]]\nop = "merge"', "merge needs within"),
    ('[[operators]]\nop = "merge"\nwithin = 0', "merge needs within"),
    ('[[operators]]\nop = "merge"\nwithin = 5\ncombine = { v = "avg" }', "combine.v = 'avg'"),
    ('[[operators]]\nop = "merge"\nwithin = 5\nfields = ["v"]', "merge has no key 'fields'"),
    ('[[operators]]\nop = "fill_forward"\nfields = ["nope"]', "naming declared [fields]"),
    ('[[operators]]\nop = "fill_forward"\nfields = ["v"]\nkey = "SUM(v)"', "not allowed"),
    ('[[operators]]\nop = "split"\nfield = "v"', "not a declared field"),
    ('[[operators]]\nop = "split"\nfield = "r"\ninto = "nope"', "must name a declared field"),
])
def test_bad_sequential_operators_are_named(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(SourceError, match=r"operators\[1\]") as err:
        make(tmp_path, text)
    assert message in str(err.value)


def test_a_sequential_source_is_not_mapped_record_by_record(tmp_path: Path) -> None:
    s = make(tmp_path, MERGE)
    assert s.sequential
    with pytest.raises(ValueError, match="run_operators"):
        map_record(s, json.dumps({"id": "1"}))
