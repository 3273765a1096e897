from pathlib import Path

import pytest

from lakecep.config import ConfigError, load_settings


def test_defaults_and_derived_paths(tmp_path: Path) -> None:
    settings = load_settings({"LAKECEP_HOME": str(tmp_path)})
    assert settings.home == tmp_path.resolve()
    assert settings.spark_master == "local[2]"
    assert settings.table_path("silver.events") == tmp_path.resolve() / "lake/silver/events"
    assert settings.landing == tmp_path.resolve() / "landing/events"


def test_toml_then_environment_override(tmp_path: Path) -> None:
    (tmp_path / "lakecep.toml").write_text('spark_master = "spark://h:7077"\nmax_line_bytes = 10\n')
    env = {"LAKECEP_HOME": str(tmp_path), "LAKECEP_MAX_LINE_BYTES": "20"}
    settings = load_settings(env)
    assert settings.spark_master == "spark://h:7077"
    assert settings.max_line_bytes == 20


@pytest.mark.parametrize(
    ("toml", "env", "message"),
    [
        ("max_files_per_trigger = 'many'\n", {}, "max_files_per_trigger = 'many' from"),
        ("sparkmaster = 'x'\n", {}, "unknown key 'sparkmaster'"),
        ("max_line_bytes = \n", {}, "not valid TOML"),
        ("", {"LAKECEP_QUALITY_ENABLED": "maybe"}, "$LAKECEP_QUALITY_ENABLED"),
        ("", {"LAKECEP_MAX_LINE_BYTES": "-5"}, "must be positive"),
        ("tuning_capacity = -1.0\n", {}, "must be a finite number >= 0"),
        ("", {"LAKECEP_TUNING_SIGMA": "1"}, "strictly between 0 and 1"),
        ("", {"LAKECEP_TUNING_DEADLINE_SECONDS": "0"}, "tuning_deadline_seconds must be"),
        ("", {"LAKECEP_TUNING_CONSUMPTION": "latest"}, "tuning_consumption = 'latest'"),
        ("tuning_sigma = true\n", {}, "expected a number"),
    ],
)
def test_bad_values_name_key_and_source(tmp_path: Path, toml: str, env: dict, message: str) -> None:
    (tmp_path / "lakecep.toml").write_text(toml)
    with pytest.raises(ConfigError) as err:
        load_settings({"LAKECEP_HOME": str(tmp_path), **env})
    assert message in str(err.value)


def test_missing_explicit_config_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_settings({"LAKECEP_CONFIG": str(tmp_path / "nope.toml")})


def test_float_settings_from_toml_and_environment(tmp_path: Path) -> None:
    (tmp_path / "lakecep.toml").write_text("tuning_capacity = 250\ntuning_sigma = 0.9\n")
    settings = load_settings({"LAKECEP_HOME": str(tmp_path),
                              "LAKECEP_TUNING_DEADLINE_SECONDS": "2.5"})
    assert (settings.tuning_capacity, settings.tuning_sigma) == (250.0, 0.9)
    assert settings.tuning_deadline_seconds == 2.5
    assert settings.tuning_dir == tmp_path.resolve() / "tuning"
