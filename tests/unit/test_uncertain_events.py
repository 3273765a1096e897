"""The uncertain-event generator: contract-valid landing lines, and its truth (an
enumeration written only for the example query) equal to cep_core.uncertain."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from cep_core.uncertain import evaluate
from lakecep.events import Rejection, parse_line
from lakecep.queries import QUERIES_DIR
from lakecep.uncertain_events import parcels, truth, write_landing

QUERY = tomllib.loads((QUERIES_DIR / "examples" / "uncertain_inspection.toml").read_text())


@pytest.mark.parametrize(("seed", "width"), [(1, 0), (2, 1), (3, 2)])
def test_truth_equals_every_method_of_cep_core(seed: int, width: int) -> None:
    frame = parcels(20, seed=seed, max_width=width)
    expected = {(t["object_id"], t["A"], t["B"], t["C"], t["D"]): t["probability"]
                for t in truth(frame)}
    assert expected and all(0 < p <= 1 + 1e-12 for p in expected.values())
    if width:
        assert min(expected.values()) < 1  # uncertain intervals give uncertain answers
    query = QUERY["query"].replace(">= 0.05", ">= 0")
    for method in ("dp", "event", "possible_worlds"):
        got = evaluate(query, frame.drop(columns=["true_time"]), method=method).table
        found = {(r.object_id, r.a_id, r.b_id, r.c_id, r.d_id): r.probability
                 for r in got.itertuples()}
        assert found.keys() == expected.keys()
        assert all(abs(found[k] - expected[k]) < 1e-9 for k in expected)


def test_data_abide_by_the_story_and_the_prior_constraint() -> None:
    frame = parcels(30, seed=4, max_width=2)
    assert (frame["time_lower"] <= frame["true_time"]).all()
    assert (frame["true_time"] <= frame["time_upper"]).all()
    for _, events in frame.groupby("object_id"):
        times = dict(zip(events["event_type"], events["true_time"], strict=False))
        assert times["R"] < times["A"]  # PRIOR(R, A) holds for the true times
    with_pmf = frame["pmf"].dropna()
    assert len(with_pmf) and all(abs(sum(p) - 1) < 1e-12 for p in with_pmf)
    assert parcels(30, seed=4, max_width=2).equals(frame)  # seeded


def test_landing_lines_pass_the_event_contract(tmp_path: Path) -> None:
    frame = parcels(12, seed=9, max_width=1)
    files = write_landing(frame, tmp_path / "landing", tmp_path / "truth", lines_per_file=25)
    lines = [line for f in files for line in f.read_text().splitlines()]
    assert len(lines) == len(frame)
    parsed = [parse_line(line) for line in lines]
    rejected = [p for p in parsed if isinstance(p, Rejection)]
    assert not rejected, rejected[:3]
    assert sum(p.pmf is not None for p in parsed) == frame["pmf"].notna().sum()
    assert sum(json.loads(line).get("pmf") is not None for line in lines) == frame[
        "pmf"].notna().sum()
    saved = json.loads((tmp_path / "truth" / "uncertain_truth.json").read_text())
    assert saved == json.loads(json.dumps(truth(frame)))
    with pytest.raises(FileExistsError):
        write_landing(frame, tmp_path / "landing", tmp_path / "truth")
