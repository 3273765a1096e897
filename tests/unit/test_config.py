import dataclasses
from pathlib import Path

import pytest

from lakecep.config import ConfigError, load, load_settings


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
        ("sparkmaster = 'x'\n", {}, "unknown key 'sparkmaster' (did you mean 'spark_master'?)"),
        ("max_line_bytes = \n", {}, "not valid TOML"),
        ("", {"LAKECEP_QUALITY_ENABLED": "maybe"}, "$LAKECEP_QUALITY_ENABLED"),
        ("", {"LAKECEP_MAX_LINE_BYTES": "-5"}, "must be greater than 0"),
        ("tuning_capacity = -1.0\n", {}, "must be greater than or equal to 0"),
        ("", {"LAKECEP_TUNING_SIGMA": "1"},
         "tuning_sigma = '1' from $LAKECEP_TUNING_SIGMA: must be less than 1"),
        ("", {"LAKECEP_TUNING_DEADLINE_SECONDS": "0"}, "tuning_deadline_seconds = '0' from"),
        ("", {"LAKECEP_TUNING_CONSUMPTION": "latest"}, "tuning_consumption = 'latest'"),
        ("tuning_sigma = true\n", {}, "expected a number"),
        ("tuning_capacity = inf\n", {}, "finite number"),
        ("", {"LAKECEP_PARTIAL_MATCH_POLICY": "lru"}, "use 'tpm' or 'stpm'"),
        ("", {"LAKECEP_SPARK_LOG_LEVEL": "loud"}, "spark_log_level = 'loud'"),
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


def test_precedence_defaults_file_environment_overrides(tmp_path: Path) -> None:
    (tmp_path / "lakecep.toml").write_text("rbuffer_rows = 1\noptimize_min_files = 2\n"
                                           "optimize_file_rows = 3\n")
    env = {"LAKECEP_HOME": str(tmp_path), "LAKECEP_OPTIMIZE_MIN_FILES": "20",
           "LAKECEP_OPTIMIZE_FILE_ROWS": "30"}
    loaded = load(env, overrides={"optimize_file_rows": "300"})
    got = loaded.settings
    assert (got.rbuffer_rows, got.optimize_min_files, got.optimize_file_rows) == (1, 20, 300)
    assert loaded.sources["rbuffer_rows"] == str(tmp_path / "lakecep.toml")
    assert loaded.sources["optimize_min_files"] == "$LAKECEP_OPTIMIZE_MIN_FILES"
    assert loaded.sources["optimize_file_rows"] == "command line"
    assert loaded.sources["spark_master"] == "default"
    # An override of home moves the file that is read (there is none under the new home).
    other = load(env, overrides={"home": str(tmp_path / "elsewhere")})
    assert other.config_file is None and other.settings.rbuffer_rows == 200_000
    assert other.settings.optimize_min_files == 20


def test_bad_override_names_the_command_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="rbuffer_rows = '0' from command line: must be "):
        load({"LAKECEP_HOME": str(tmp_path)}, overrides={"rbuffer_rows": "0"})


def test_settings_stay_a_frozen_dataclass(tmp_path: Path) -> None:
    """Jobs and tests derive settings with dataclasses.replace; the values keep their types."""
    settings = load_settings({"LAKECEP_HOME": str(tmp_path), "LAKECEP_QUALITY_ENABLED": "off",
                              "LAKECEP_TUNING_SIGMA": "0.5"})
    assert settings.quality_enabled is False and settings.tuning_sigma == 0.5
    assert isinstance(settings.home, Path) and settings.spark_log_level == "error"
    local = dataclasses.replace(settings, max_line_bytes=200)
    assert local.max_line_bytes == 200 and local.home == settings.home
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.max_line_bytes = 1  # type: ignore[misc]
