"""The lakecep command line, without Spark: help, generate, configuration errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lakecep.jobs.cli import build_parser, main


def test_every_command_has_help(capsys: pytest.CaptureFixture[str]) -> None:
    for command in ("generate", "run", "sql", "status"):
        with pytest.raises(SystemExit) as done:
            main([command, "--help"])
        assert done.value.code == 0
        assert f"usage: lakecep {command}" in capsys.readouterr().out


def test_generate_writes_files_truth_and_counts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("LAKECEP_HOME", str(tmp_path))
    code = main(["generate", "--events", "1200", "--lines-per-file", "500",
                 "--duplicate-share", "0.1", "--seed", "3"])
    assert code == 0
    files = sorted((tmp_path / "landing/events").glob("*.jsonl"))
    lines = sum(len(f.read_text().splitlines()) for f in files)
    truth = json.loads((tmp_path / "landing/_truth/truth.json").read_text())
    assert len(files) == 3 and lines == truth["counts"]["lines_written"]
    assert truth["params"]["duplicate_share"] == 0.1
    assert f"generated {lines} lines in 3 files" in capsys.readouterr().out
    # A second run refuses to mix data sets unless asked to replace them.
    assert main(["generate", "--events", "100"]) == 1
    assert main(["generate", "--events", "100", "--clean"]) == 0


def test_bad_configuration_is_reported_with_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("LAKECEP_HOME", str(tmp_path))
    monkeypatch.setenv("LAKECEP_MAX_LINE_BYTES", "lots")
    assert main(["status"]) == 2
    err = capsys.readouterr().err
    assert "configuration error" in err and "LAKECEP_MAX_LINE_BYTES" in err


def test_run_rejects_unknown_job() -> None:
    with pytest.raises(SystemExit) as done:
        build_parser().parse_args(["run", "platinum"])
    assert done.value.code == 2


def test_job_registry_has_every_job_with_one_signature() -> None:
    """`lakecep run <job>` finds every job in the explicit registry, and each job's ``run``
    takes ``(spark, settings, *, run_id=None, continuous=False)``."""
    import inspect

    from lakecep.jobs.cli import JOBS, TUNING_JOBS, job_runners

    runners = job_runners()
    assert set(runners) == {*JOBS, *TUNING_JOBS}
    for name, run in runners.items():
        params = inspect.signature(run).parameters
        assert list(params)[:2] == ["spark", "settings"], name
        for keyword, default in (("run_id", None), ("continuous", False)):
            assert params[keyword].kind is inspect.Parameter.KEYWORD_ONLY, (name, keyword)
            assert params[keyword].default is default, (name, keyword)
        assert run.__module__ == f"lakecep.jobs.{name}", name
    for name in (*JOBS, *TUNING_JOBS, "all"):  # the command line accepts exactly these
        assert build_parser().parse_args(["run", name]).job == name
