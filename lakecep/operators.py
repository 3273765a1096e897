"""Sequential preprocessing operators: ``fill_forward``, ``merge`` and ``split``.

A source with one of them is mapped as a *sequence* of records in arrival order, with a
state carried from one micro-batch to the next (docs/sources.md, "Preprocessing
operators": the semantics, and "Where the state lives"). :func:`run_operators` is the one
definition: it takes a micro-batch's bronze records of one source and the state the earlier
micro-batches left (JSON text), and returns an outcome per record (a silver row or a
quarantine reason; a split message has one per part, a merge group one per record) and the
new state. It depends on nothing else, so the whole data in one call and any cut of it into
calls, each given the state of the one before, give the same outcomes and the same final
state. The silver job calls it in one pandas task per source and micro-batch
(``lakecep.jobs.silver_state``). The record-at-a-time operators (``keep_fields``,
``drop_fields``, ``fill``, ``filter``) and the mapping are :mod:`lakecep.sources`'.
"""

from __future__ import annotations

import heapq
import json
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from lakecep.sources import (
    FILTERED,
    PART,
    RAW_HASH,
    SEQUENTIAL,
    Source,
    Step,
    _Bad,
    _coerce,
    apply_step,
    map_typed,
    mapping_of,
    parse_record,
    raw_hash,
    row_state,
)

#: Bumped when the stored state's meaning changes.
STATE_FORMAT = 1
MERGED = "merged"
STATE_RESET = "state_reset"
#: Reason codes of records an operator dropped on purpose (not bad rows for the quarantine
#: gate; shown apart by ``lakecep status``).
ON_PURPOSE = (FILTERED, MERGED)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_NO_EVENT = (None,) * 9

#: One record's outcome: ``(ok, reason, event_id, object_id, event_type, source_id,
#: event_time, time_lower, time_upper, pmf, attributes, raw, source_file, line_no,
#: ingest_time)`` -- the silver job's parsed row.
Outcome = tuple[Any, ...]


def fingerprint(source: Source, writer: str = "") -> str:
    """What the stored state belongs to: the source's sequential operators, in order, and
    the silver stream's writer (a new checkpoint starts a new state)."""
    import hashlib

    ops = [(k, repr(o)) for k, o in enumerate(source.operators) if o.op in SEQUENTIAL]
    return hashlib.sha256(json.dumps([source.name, ops, writer]).encode()).hexdigest()[:16]


def _micros(value: datetime) -> int:
    aware = value if value.tzinfo else value.replace(tzinfo=UTC)
    return (aware - _EPOCH) // timedelta(microseconds=1)


def _enc(value: Any) -> Any:
    return {"$ts": _micros(value)} if isinstance(value, datetime) else value


def _dec(value: Any) -> Any:
    if isinstance(value, dict) and "$ts" in value:
        return _EPOCH + timedelta(microseconds=value["$ts"])
    return value


def _ingest(value: Any) -> Any:
    """The ingest time as the silver job hands it back (a pandas Timestamp)."""
    import pandas as pd

    return None if value is None else pd.Timestamp(value)


@dataclass
class Rec:
    """A record between operators: typed fields (with ``_raw_hash``, ``_part``), the
    undeclared fields' JSON values, the fields a keep/drop made NULL, and its origin."""

    typed: dict[str, Any]
    unknown: dict[str, Any]
    dropped: set[str]
    raw: str
    file: str
    line: int
    ingest: Any
    #: the expressions' one-row state over ``typed``, built once (see :meth:`state`)
    row: Any = None

    def state(self) -> Any:
        """The evaluation state of ``typed``: kept for the record's way through the
        operators, so a change to ``typed`` goes through :meth:`set` (or ``apply_step``,
        which writes both)."""
        if self.row is None:
            self.row = row_state(self.typed)
        return self.row

    def set(self, name: str, value: Any) -> None:
        self.typed[name] = value
        if self.row is not None:
            self.row.cols[name][0] = value

    def origin(self) -> str:
        part = self.typed.get(PART)
        return f"{self.file}:{self.line}" + ("" if part is None else f"#{part}")

    def copy(self) -> Rec:
        return Rec(dict(self.typed), dict(self.unknown), set(self.dropped), self.raw,
                   self.file, self.line, self.ingest)

    def to_json(self) -> dict[str, Any]:
        import pandas as pd

        return {"t": {k: _enc(v) for k, v in self.typed.items()}, "u": self.unknown,
                "d": sorted(self.dropped), "r": self.raw, "f": self.file, "l": self.line,
                "i": None if self.ingest is None else int(pd.Timestamp(self.ingest).value)}

    @classmethod
    def of_json(cls, data: dict[str, Any]) -> Rec:
        return cls({k: _dec(v) for k, v in data["t"].items()}, data["u"], set(data["d"]),
                   data["r"], data["f"], data["l"], _ingest(data["i"]))


@dataclass
class _Group:
    """An open merge group of one key."""

    id: int
    oldest: int
    newest: int
    members: list[Rec]


class _Runner:
    """One call of :func:`run_operators`: the state, loaded, and the outcomes so far."""

    def __init__(self, source: Source, state: str | None, print_: str) -> None:
        self.source = source
        self.mapping = mapping_of(source)
        self.steps: tuple[Step, ...] = self.mapping.steps
        self.split = any(s.op == "split" for s in self.steps)
        self.out: list[Outcome] = []
        self.fingerprint = print_
        self.counts = {"split_extra": 0, "merged_away": 0}
        self.last: dict[int, dict[str, dict[str, Any]]] = {}
        self.marks: dict[int, int | None] = {}
        self.groups: dict[int, dict[str, _Group]] = {}
        self.heaps: dict[int, list[tuple[int, str, int]]] = {}
        self.serial = 0
        for k, step in enumerate(self.steps):
            if step.op == "fill_forward":
                self.last[k] = {}
            elif step.op == "merge":
                self.marks[k], self.groups[k], self.heaps[k] = None, {}, []
        if state:
            self._load(json.loads(state))

    # ---------------------------------------------------------------- state

    def _load(self, data: dict[str, Any]) -> None:
        self.counts.update(data["counts"])
        self.counts.pop("pending", None)
        self.serial = data.get("serial", 0)
        if data.get("format") != STATE_FORMAT or data.get("fingerprint") != self.fingerprint:
            for _, step_state in sorted(data["steps"].items(), key=lambda kv: int(kv[0])):
                for _, group in sorted(step_state.get("groups", {}).items()):
                    for member in group["members"]:
                        rec = Rec.of_json(member)
                        self.reason(rec, f"{STATE_RESET}: the source's operators (or the silver "
                                    "stream's checkpoint) changed while this record was "
                                    "pending in a merge group")
            return
        for key, step_state in data["steps"].items():
            k = int(key)
            if k in self.last:
                self.last[k] = step_state["last"]
            else:
                self.marks[k] = step_state["watermark"]
                groups = self.groups[k]
                for name, g in step_state["groups"].items():
                    groups[name] = _Group(g["id"], g["oldest"], g["newest"],
                                          [Rec.of_json(m) for m in g["members"]])
                self.heaps[k] = sorted((g.oldest, name, g.id) for name, g in groups.items())

    def pending(self) -> int:
        return sum(len(g.members) for groups in self.groups.values() for g in groups.values())

    def state(self) -> str:
        steps: dict[str, Any] = {str(k): {"last": v} for k, v in self.last.items()}
        for k, groups in self.groups.items():
            steps[str(k)] = {"watermark": self.marks[k], "groups": {
                name: {"id": g.id, "oldest": g.oldest, "newest": g.newest,
                       "members": [m.to_json() for m in g.members]}
                for name, g in groups.items()}}
        return json.dumps({"format": STATE_FORMAT, "fingerprint": self.fingerprint,
                           "serial": self.serial,
                           "counts": {**self.counts, "pending": self.pending()},
                           "steps": steps}, sort_keys=True, separators=(",", ":"))

    # ---------------------------------------------------------------- outcomes

    def reason(self, rec: Rec, text: str) -> None:
        self.out.append((False, text, *_NO_EVENT, rec.raw, rec.file, rec.line,
                         _ingest(rec.ingest)))

    def mapped(self, rec: Rec, problems: list[str] | None = None) -> None:
        result = map_typed(self.source, rec.state(), rec.typed, rec.unknown,
                           rec.dropped, problems or [])
        if isinstance(result, str):
            self.reason(rec, result)
        else:
            self.out.append((True, None, *result, rec.raw, rec.file, rec.line,
                             _ingest(rec.ingest)))

    # ---------------------------------------------------------------- records

    def push(self, raw: str | None, file: str, line: int, ingest: Any) -> None:
        rec = Rec({}, {}, set(), raw or "", file, line, ingest)
        if not raw:
            self.reason(rec, "empty_line")
            return
        parsed = parse_record(self.source, raw)
        if isinstance(parsed, str):
            self.reason(rec, parsed)
            return
        rec.typed, rec.unknown, problems = parsed
        if self.split:
            rec.typed[PART] = None
        if problems:  # the mapping names every problem; the operators do not run
            self.mapped(rec, problems)
            return
        self.feed(0, rec)

    def feed(self, first: int, rec: Rec) -> None:
        """Run ``rec`` through the operators from step ``first`` on, then the mapping."""
        for k in range(first, len(self.steps)):
            step = self.steps[k]
            if step.op == "fill_forward":
                if not self.fill_forward(k, step, rec):
                    return
            elif step.op == "split":
                self.split_parts(k, step, rec)
                return
            elif step.op == "merge":
                self.merge(k, step, rec)
                return
            else:
                outcome = apply_step(step, rec.state(), rec.typed, rec.unknown,
                                     rec.dropped)
                if outcome is not None:
                    self.reason(rec, outcome)
                    return
        self.mapped(rec)

    def key(self, step: Step, rec: Rec) -> str | None:
        try:
            value = step.fn(rec.state())
        except Exception as exc:  # noqa: BLE001 - the record's problem
            self.reason(rec, f"invalid_value: {step.op} key {step.text} failed: {exc}")
            return None
        return json.dumps(_enc(value), sort_keys=True, default=str)

    def fill_forward(self, k: int, step: Step, rec: Rec) -> bool:
        key = self.key(step, rec)
        if key is None:
            return False
        last = self.last[k].get(key)
        for name in step.arg:
            value = rec.typed.get(name)
            if value is None:
                if last is not None and name in last:
                    rec.set(name, _dec(last[name]))
                    rec.dropped.discard(name)
            else:
                if last is None:
                    last = self.last[k][key] = {}
                last[name] = _enc(value)
        return True

    def split_parts(self, k: int, step: Step, rec: Rec) -> None:
        name, into = step.arg
        value = None if name in rec.dropped else rec.unknown.get(name)
        if value is None or value == []:
            self.reason(rec, f"{FILTERED}: split {name}: no elements")
            return
        if not isinstance(value, list):
            self.reason(rec, f"wrong_type: {name}: split needs a JSON array, got "
                        f"{type(value).__name__}")
            return
        self.counts["split_extra"] += len(value) - 1
        types, time = self.mapping.types, self.mapping.time
        base = {n: v for n, v in rec.unknown.items() if n != name}
        for index, element in enumerate(value):
            part = Rec(dict(rec.typed), dict(base), set(rec.dropped), rec.raw, rec.file,
                       rec.line, rec.ingest)
            part.typed[PART] = index
            part.typed[RAW_HASH] = raw_hash(self.source.name, f"{rec.raw}\n{index}")
            problems: list[str] = []
            items = element.items() if isinstance(element, dict) else (
                [(into, element)] if into else [])
            if not isinstance(element, dict) and not into:
                problems.append(f"wrong_type: {name}[{index}]: an element that is not an "
                                "object needs split into = <a declared field>")
            for field, raw_value in items:
                where = f"{name}[{index}]" + (f".{field}" if isinstance(element, dict) else "")
                if field in types:
                    kind = types[field]
                    got = _coerce(None if raw_value == "" and kind != "string" else raw_value,
                                  kind, time)
                    if isinstance(got, _Bad):
                        problems.append(f"wrong_type: {where}: {got} ({kind})")
                        got = None
                    part.typed[field] = got
                elif self.source.strict:
                    problems.append(f"unknown_field: {where}")
                else:
                    part.unknown[field] = raw_value
                part.dropped.discard(field)
            if problems:
                self.mapped(part, problems)
            else:
                self.feed(k + 1, part)

    def time_of(self, rec: Rec) -> int | None:
        fn = self.mapping.exprs["event_time"][1]
        try:
            value = fn(rec.state())
            parsed = value if isinstance(value, datetime) or value is None else (
                self.mapping.time(value))
        except Exception:  # noqa: BLE001 - no time: the record passes unmerged
            return None
        return None if parsed is None else _micros(parsed)

    def merge(self, k: int, step: Step, rec: Rec) -> None:
        t = self.time_of(rec)
        if t is None:
            self.feed(k + 1, rec)
            return
        key = self.key(step, rec)
        if key is None:
            return
        mark = self.marks[k]
        mark = self.marks[k] = t if mark is None else max(mark, t)
        groups, heap = self.groups[k], self.heaps[k]
        group = groups.get(key)
        if group is not None and max(group.newest, t) - min(group.oldest, t) <= step.within:
            group.members.append(rec)
            group.newest = max(group.newest, t)
            if t < group.oldest:
                group.oldest = t
                heapq.heappush(heap, (t, key, group.id))
        else:
            if group is not None:
                self.close(k, step, key)
            self.serial += 1
            groups[key] = _Group(self.serial, t, t, [rec])
            heapq.heappush(heap, (t, key, self.serial))
        while heap and heap[0][0] + step.within < mark:
            oldest, name, gid = heapq.heappop(heap)
            group = groups.get(name)
            if group is not None and group.id == gid and group.oldest == oldest:
                self.close(k, step, name)

    def close(self, k: int, step: Step, key: str) -> None:
        """Emit the open group of ``key``: its first record with the combined fields goes
        on; the others are ``merged`` into it."""
        members = self.groups[k].pop(key).members
        merged = members[0].copy()
        self.counts["merged_away"] += len(members) - 1
        for other in members[1:]:
            self.reason(other, f"{MERGED}: into {merged.origin()}")
        for name, how in step.arg.items():
            values = [m.typed.get(name) for m in members]
            values = [v for v in values if v is not None]
            try:
                merged.set(name, _combine(how, values))
            except (TypeError, ValueError) as exc:
                self.reason(merged, f"invalid_value: merge combine {name} = {how} failed: "
                            f"{exc}")
                return
        self.feed(k + 1, merged)


def _combine(how: str, values: list[Any]) -> Any:
    if not values:
        return None
    if how == "first":
        return values[0]
    if how == "last":
        return values[-1]
    if how == "min":
        return min(values)
    if how == "max":
        return max(values)
    if any(isinstance(v, bool) or not isinstance(v, int | float) for v in values):
        raise TypeError("sum needs numbers")
    return sum(values)


def run_operators(source: Source, rows: Iterable[tuple[str | None, str, int, Any]],
                  state: str | None = None, fingerprint: str = "",
                  ) -> tuple[list[Outcome], str]:
    """A micro-batch of one source's bronze records ``(raw, source_file, line_no,
    ingest_time)``, in arrival order, and the state the earlier micro-batches left (None:
    the first) -> the outcome of every record and part (:data:`Outcome`) and the new state
    (JSON: the counts ``split_extra``, ``merged_away``, ``pending``; the last values of
    each ``fill_forward``; the open groups and watermark of each ``merge``).

    A state saved under another ``fingerprint`` (the operators changed) is not used: its
    pending records come out as ``state_reset`` reasons first, and the counts carry on."""
    runner = _Runner(source, state, fingerprint)
    for raw, file, line, ingest in rows:
        runner.push(raw, file, line, ingest)
    return runner.out, runner.state()


def state_counts(state: str | None) -> dict[str, int]:
    """The counts a stored state holds (``split_extra``, ``merged_away``, ``pending``)."""
    counts = {"split_extra": 0, "merged_away": 0, "pending": 0}
    if state:
        counts.update(json.loads(state)["counts"])
    return counts


def pending_origins(state: str | None) -> list[tuple[str, int]]:
    """``(source_file, line_no)`` of every record pending in a stored state."""
    if not state:
        return []
    return [(m["f"], m["l"]) for step in json.loads(state)["steps"].values()
            for g in step.get("groups", {}).values() for m in g["members"]]
