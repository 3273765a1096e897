"""Acquisition query files (``kind = "pattern"`` with ``acquisition``) and the seed-003
pattern text they hold."""

from datetime import timedelta
from pathlib import Path

import pytest

from cep_core.planning import PlanningError, Seq, parse_pattern
from lakecep.queries import AcquisitionQuery, QueryDefinitionError, load_query


def test_pattern_text_round_trips_and_bad_text_says_where() -> None:
    for text in ("seq(door, badge, !alarm, motion; 30)", "and(seq(a, b; 5), or(c, d); 20)",
                 "and(a, !x, b; 2.5)"):
        assert str(parse_pattern(text)) == text
    for bad, why in (("seq(a, b)", "needs a window"), ("seq(a, b; 5", "missing"),
                     ("xor(a, b; 5)", "unknown operator"), ("seq(a, a; 5)", "occurs twice"),
                     ("or(a, b; 5)", "no window"), ("seq(a, b; 5) c", "unexpected text")):
        with pytest.raises(PlanningError, match=why):
            parse_pattern(bad)


def test_acquisition_query_file(tmp_path: Path) -> None:
    path = tmp_path / "q.toml"
    path.write_text('id = "door"\nkind = "pattern"\nacquisition = "plan"\nkey = "object_id"\n'
                    'pattern = "seq(door_forced, badge_denied, !fire_alarm, motion; 2 minutes)"\n'
                    'latency_bound = "20 seconds"\n')
    query = load_query(path)
    assert isinstance(query, AcquisitionQuery)
    assert query.latency_bound == timedelta(seconds=20)
    assert query.step_delay == timedelta(seconds=5) and query.type_column == "event_type"
    assert isinstance(query.parsed(), Seq) and query.window_seconds == 120
    for body, why in (('acquisition = "greedy"\npattern = "seq(a, b; 1 minute)"', "greedy"),
                      ('acquisition = "plan"\npattern = "seq(a, or(b, c); 1 minute)"',
                       "flat"),
                      ('acquisition = "plan"\npattern = "seq(a, b; 1 fortnight)"', "window"),
                      ('acquisition = "plan"\npattern = "seq(a, b; 1 minute)"\nquery = "x"',
                       "not a MATCH_RECOGNIZE")):
        path.write_text(f'id = "bad"\nkind = "pattern"\nkey = "object_id"\n{body}\n')
        with pytest.raises(QueryDefinitionError, match=why):
            load_query(path)
