"""The lakecep command line, without Spark: help, version, completion, generate, --json,
configuration errors and precedence, error lines with hints."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lakecep.jobs.cli import JobName, main

REPO = Path(__file__).resolve().parents[2]


def _lakecep(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """``python -m lakecep.jobs.cli ...`` in a child process (as the DAGs call it)."""
    full = {**os.environ, **(env or {})}
    return subprocess.run([sys.executable, "-m", "lakecep.jobs.cli", *args], env=full,
                          cwd=REPO, capture_output=True, text=True, timeout=120)


def test_every_command_has_help(capsys: pytest.CaptureFixture[str]) -> None:
    for command in ("generate", "run", "sql", "status", "validate", "config", "report",
                    "backfill"):
        assert main([command, "--help"]) == 0
        out = capsys.readouterr().out
        assert f"lakecep {command}" in out and "--help" in out, command
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert all(c in out for c in ("generate", "run", "sql", "status", "validate", "config",
                                  "report"))


def test_version_and_completion_script() -> None:
    version = _lakecep("--version")
    assert version.returncode == 0, version.stderr
    assert version.stdout.startswith("lakecep 0.1.0 (Python 3.11") and "PySpark 4.1.1" in \
        version.stdout
    # typer detects the shell from the process tree (shellingham) unless told not to; a
    # test run whose parents are no shell (a detached CI job) then got "Shell  not
    # supported". With detection off, --show-completion takes the shell named.
    script = _lakecep("--show-completion", "bash",
                      env={"_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION": "1"})
    assert script.returncode == 0, script.stderr
    assert "_LAKECEP_COMPLETE" in script.stdout and "complete " in script.stdout
    # What the shell asks for when the user presses TAB after `lakecep ru`.
    words = _lakecep(env={"_LAKECEP_COMPLETE": "complete_bash", "COMP_WORDS": "lakecep ru",
                          "COMP_CWORD": "1"})
    assert words.stdout.split() == ["run"], (words.stdout, words.stderr)
    jobs = _lakecep(env={"_LAKECEP_COMPLETE": "complete_bash", "COMP_WORDS": "lakecep run s",
                         "COMP_CWORD": "2"})
    assert sorted(jobs.stdout.split()) == ["silver", "statistics"], (jobs.stdout, jobs.stderr)


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
    out = capsys.readouterr().out
    assert f"generated {lines} lines in 3 files" in out
    # The counts are a table (nested counts as rows), not a printed dict.
    assert "{" not in out and "malformed_json" in out
    # A second run refuses to mix data sets unless asked to replace them, and says how.
    assert main(["generate", "--events", "100"]) == 1
    err = capsys.readouterr().err
    assert "already holds 3 events-*.jsonl files" in err and "--clean" in err
    assert "overwrite=True" not in err and "Traceback" not in err
    assert main(["generate", "--events", "100", "--clean", "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["kind"] == "rfid" and document["files"] == 1
    assert document["lines"] == document["counts"]["lines_written"] > 0
    assert document["landing"] == str(tmp_path.resolve() / "landing/events")


def test_bad_configuration_is_reported_with_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("LAKECEP_HOME", str(tmp_path))
    monkeypatch.setenv("LAKECEP_MAX_LINE_BYTES", "lots")
    assert main(["status"]) == 2
    err = capsys.readouterr().err
    assert "configuration error" in err and "LAKECEP_MAX_LINE_BYTES" in err
    assert "hint:" in err and "Traceback" not in err
    assert len([line for line in err.splitlines() if "error" in line]) == 1


def test_unknown_keys_suggest_the_near_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("LAKECEP_HOME", str(tmp_path))
    assert main(["--set", "spark_mastr=local[4]", "config"]) == 2
    assert "did you mean 'spark_master'?" in capsys.readouterr().err
    (tmp_path / "lakecep.toml").write_text("max_files_per_triger = 3\n")
    assert main(["config"]) == 2
    err = capsys.readouterr().err
    assert "unknown key 'max_files_per_triger' (did you mean 'max_files_per_trigger'?)" in err
    (tmp_path / "lakecep.toml").write_text("")
    monkeypatch.setenv("LAKECEP_SPARK_MASTR", "x")  # not a setting: a warning, not an error
    assert main(["config"]) == 0
    assert "$LAKECEP_SPARK_MASTR is not a setting (did you mean 'spark_master'?)" in \
        capsys.readouterr().err


def test_config_json_shows_precedence(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """defaults < file < environment < command line, with the source of each value."""
    monkeypatch.setenv("LAKECEP_HOME", str(tmp_path))
    (tmp_path / "lakecep.toml").write_text(
        'spark_master = "spark://file:7077"\nmax_line_bytes = 10\nrbuffer_rows = 5\n')
    monkeypatch.setenv("LAKECEP_MAX_LINE_BYTES", "20")
    monkeypatch.setenv("LAKECEP_RBUFFER_ROWS", "6")
    assert main(["--set", "rbuffer_rows=7", "config", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    settings = got["settings"]
    assert got["config_file"] == str(tmp_path / "lakecep.toml")
    assert settings["spark_master"] == {"value": "spark://file:7077",
                                        "source": str(tmp_path / "lakecep.toml")}
    assert settings["max_line_bytes"] == {"value": 20, "source": "$LAKECEP_MAX_LINE_BYTES"}
    assert settings["rbuffer_rows"] == {"value": 7, "source": "command line"}
    assert settings["tuning_sigma"] == {"value": 0.95, "source": "default"}
    assert settings["home"]["value"] == str(tmp_path.resolve())
    assert main(["--home", str(tmp_path / "other"), "config", "--json"]) == 0
    moved = json.loads(capsys.readouterr().out)
    assert moved["settings"]["home"] == {"value": str((tmp_path / "other").resolve()),
                                         "source": "command line"}
    assert moved["config_file"] is None  # the file of the other home (there is none)


def test_unexpected_errors_are_one_line_unless_debug(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    home = tmp_path / "a-file"
    home.write_text("not a folder")
    monkeypatch.setenv("LAKECEP_HOME", str(home))
    assert main(["generate", "--events", "50"]) == 1
    err = capsys.readouterr().err
    assert "lakecep generate: error: NotADirectoryError" in err
    assert "rerun with --debug" in err and "Traceback" not in err
    assert main(["--debug", "generate", "--events", "50"]) == 1
    err = capsys.readouterr().err
    assert "Traceback" in err and "lakecep generate: error: NotADirectoryError" in err


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "platinum"]) == 2
    assert "platinum" in capsys.readouterr().err
    assert main(["generate", "--duplicate-share", "1.5"]) == 2
    assert main(["sql"]) == 2
    assert main(["bogus"]) == 2


def test_run_query_is_checked_before_spark_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`lakecep run gold --query` names a shipped query; anything else is one line with a
    hint, and an unknown id exits 3 (the same input fails again: Airflow does not retry)."""
    monkeypatch.setenv("LAKECEP_HOME", str(tmp_path))
    assert main(["run", "silver", "--query", "rfid_abc"]) == 2
    assert "--query selects a gold query" in capsys.readouterr().err
    assert main(["run", "gold", "--query", "rfid_abz"]) == 3
    err = capsys.readouterr().err
    assert "lakecep run: error: no query 'rfid_abz'" in err
    assert "rfid_abc, rfid_transit" in err


def test_job_registry_has_every_job_with_one_signature() -> None:
    """`lakecep run <job>` finds every job in the explicit registry, and each job's ``run``
    takes ``(spark, settings, *, run_id=None, continuous=False)``."""
    import inspect

    from lakecep.jobs.cli import JOBS, MAINTENANCE_JOBS, TUNING_JOBS, job_runners

    runners = job_runners()
    assert set(runners) == {*JOBS, *TUNING_JOBS, *MAINTENANCE_JOBS}
    for name, run in runners.items():
        params = inspect.signature(run).parameters
        assert list(params)[:2] == ["spark", "settings"], name
        for keyword, default in (("run_id", None), ("continuous", False)):
            assert params[keyword].kind is inspect.Parameter.KEYWORD_ONLY, (name, keyword)
            assert params[keyword].default is default, (name, keyword)
        assert run.__module__ == f"lakecep.jobs.{name}", name
    # the command line accepts exactly these
    assert [j.value for j in JobName] == [*JOBS, *TUNING_JOBS, *MAINTENANCE_JOBS, "all"]


def test_spark_errors_become_one_line_with_a_hint() -> None:
    """PySpark's errors (as raised by spark.sql) -> their first line once, and a hint by
    error condition (the real CLI run is in docs: `lakecep sql "SELEC 1"`)."""
    from pyspark.errors import AnalysisException, ParseException

    from lakecep.console import explain

    parse = ParseException(
        message="Syntax error at or near 'SELEC'. SQLSTATE: 42601 (line 1, pos 0)\n\n"
                "== SQL ==\nSELEC 1\n^^^\n",
        errorClass="PARSE_SYNTAX_ERROR", messageParameters={})
    got = explain(parse)
    assert got.message == ("[PARSE_SYNTAX_ERROR] Syntax error at or near 'SELEC'. "
                           "SQLSTATE: 42601 (line 1, pos 0)")
    assert got.hint is not None and "SQL syntax" in got.hint
    column = AnalysisException(
        message="A column with name `nope` cannot be resolved. Did you mean one of the "
                "following? [`a`]. SQLSTATE: 42703", errorClass="UNRESOLVED_COLUMN.WITH_SUGGESTION",
        messageParameters={})
    hint = explain(column).hint
    assert hint is not None and "DESCRIBE" in hint
    # Anything else: its type and first line, and where to find the rest.
    other = explain(RuntimeError("disk full\nmore detail"))
    assert (other.message, other.hint) == ("RuntimeError: disk full",
                                           "rerun with --debug for the traceback")


def test_config_shows_spark_settings_with_secrets_hidden(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`spark.*` keys pass through (docs/object-stores.md); credentials are not printed."""
    monkeypatch.setenv("LAKECEP_HOME", str(tmp_path))
    (tmp_path / "lakecep.toml").write_text(
        'lake_dir = "s3a://bucket/lake"\n[spark.hadoop.fs.s3a]\n'
        'endpoint = "http://127.0.0.1:9000"\nsecret.key = "hunter2"\n')
    assert main(["--set", "spark.sql.shuffle.partitions=3", "config", "--json"]) == 0
    settings = json.loads(capsys.readouterr().out)["settings"]
    assert settings["lake_dir"]["value"] == "s3a://bucket/lake"
    assert settings["spark_conf"]["value"] == {
        "spark.hadoop.fs.s3a.endpoint": "http://127.0.0.1:9000",
        "spark.hadoop.fs.s3a.secret.key": "***",
        "spark.sql.shuffle.partitions": "3"}
    assert settings["spark_conf"]["source"] == "command line"
    assert main(["config"]) == 0
    assert "hunter2" not in capsys.readouterr().out


def test_generate_into_an_object_store_says_what_to_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("LAKECEP_HOME", str(tmp_path))
    monkeypatch.setenv("LAKECEP_LANDING_DIR", "s3a://bucket/landing")
    assert main(["generate", "--events", "10"]) == 2
    err = capsys.readouterr().err
    assert "`lakecep generate` (it writes local files" in err
    assert "s3a://bucket/landing is on an object store" in err
