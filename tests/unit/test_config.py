import dataclasses
from pathlib import Path

import pytest

from lakecep.config import ConfigError, load, load_settings, parse_overrides


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


# --- object-store locations and Spark settings passed through (docs/object-stores.md) ----


def test_lake_and_landing_may_be_uris(tmp_path: Path) -> None:
    from lakecep.config import Uri

    settings = load_settings({"LAKECEP_HOME": str(tmp_path),
                              "LAKECEP_LAKE_DIR": "s3a://bucket/prefix/lake/",
                              "LAKECEP_LANDING_DIR": "s3a://bucket/in"})
    assert isinstance(settings.lake, Uri) and isinstance(settings.landing, Uri)
    assert settings.table_path("silver.events") == "s3a://bucket/prefix/lake/silver/events"
    assert str(settings.landing / "f.jsonl") == "s3a://bucket/in/f.jsonl"
    assert settings.landing.scheme == "s3a" and settings.table_path("gold.x").name == "x"
    # home-bound locations stay local
    assert settings.checkpoint("bronze_events") == tmp_path.resolve() / "checkpoints/bronze_events"
    assert settings.truth_dir == tmp_path.resolve() / "landing/_truth"


def test_local_lake_and_landing_folders(tmp_path: Path) -> None:
    settings = load_settings({"LAKECEP_HOME": str(tmp_path), "LAKECEP_LAKE_DIR": "tables",
                              "LAKECEP_LANDING_DIR": f"file://{tmp_path}/drop"})
    assert settings.lake == tmp_path.resolve() / "tables"  # relative: under home
    assert settings.landing == tmp_path / "drop"


def test_local_only_feature_names_itself(tmp_path: Path) -> None:
    from lakecep.config import local_only

    settings = load_settings({"LAKECEP_HOME": str(tmp_path),
                              "LAKECEP_LAKE_DIR": "s3a://bucket/lake"})
    with pytest.raises(ConfigError, match=r"^`lakecep report` \(.*\) needs a local folder, "
                       r"but s3a://bucket/lake is on an object store"):
        from lakecep.lake_sql import lake_tables
        lake_tables(settings, "`lakecep report`")
    assert local_only(tmp_path, "x") == tmp_path


def test_spark_settings_pass_through_from_file_environment_and_command_line(
        tmp_path: Path) -> None:
    (tmp_path / "lakecep.toml").write_text(
        'spark_master = "local[1]"\n'
        '"spark.sql.adaptive.coalescePartitions.enabled" = false\n'
        "[spark]\n"
        'hadoop.fs.s3a.endpoint = "http://127.0.0.1:9000"\n'
        "sql.shuffle.partitions = 8\n")
    env = {"LAKECEP_HOME": str(tmp_path),
           "LAKECEP_SPARK_CONF": "spark.hadoop.fs.s3a.path.style.access=true\n"
                                 "# a comment\n"
                                 "spark.sql.shuffle.partitions = 16\n"}
    loaded = load(env, overrides=parse_overrides(
        ["spark.hadoop.fs.s3a.endpoint=http://minio:9000", "spark_master=local[3]"]))
    conf = loaded.settings.spark_conf
    assert conf == {
        "spark.sql.adaptive.coalescePartitions.enabled": "false",  # case kept, text value
        "spark.hadoop.fs.s3a.endpoint": "http://minio:9000",  # command line wins
        "spark.sql.shuffle.partitions": "16",  # environment wins over the file
        "spark.hadoop.fs.s3a.path.style.access": "true",
    }
    assert loaded.settings.spark_master == "local[3]"


@pytest.mark.parametrize(("env", "message"), [
    ({"LAKECEP_SPARK_CONF": "hadoop.fs.s3a.endpoint=x"},
     "'hadoop.fs.s3a.endpoint' is not a Spark setting"),
    ({"LAKECEP_SPARK_CONF": "spark.sql.x"}, "expected key=value lines"),
    ({"LAKECEP_LAKE_DIR": "s3a bucket://x"}, "not a folder or a URI"),
])
def test_bad_spark_settings_and_locations(tmp_path: Path, env: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_settings({"LAKECEP_HOME": str(tmp_path), **env})


def test_spark_setting_without_value_on_the_command_line() -> None:
    with pytest.raises(ConfigError, match="expected key=value"):
        parse_overrides(["spark.sql.shuffle.partitions"])


def test_settings_with_spark_settings_stay_hashable(tmp_path: Path) -> None:
    settings = load_settings({"LAKECEP_HOME": str(tmp_path),
                              "LAKECEP_SPARK_CONF": "spark.sql.shuffle.partitions=2"})
    assert hash(settings) == hash(dataclasses.replace(settings, spark_conf={}))
    assert settings != dataclasses.replace(settings, spark_conf={})
