"""Typed, validated configuration.

Sources, later ones win: built-in defaults, the TOML file (``$LAKECEP_CONFIG``, else
``$LAKECEP_HOME/lakecep.toml`` when it exists), then ``LAKECEP_<KEY>`` environment
variables. Every value is checked at start-up; a bad one raises ``ConfigError`` naming the
key and where it came from.
"""

from __future__ import annotations

import dataclasses
import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


class ConfigError(ValueError):
    """A configuration value is missing or invalid (the message names key and source)."""


@dataclass(frozen=True)
class Settings:
    home: Path = field(default_factory=lambda: Path(".lakecep"))
    #: Spark master URL: ``local[N]``, ``spark://host:7077``, ``yarn``, ``k8s://...``.
    spark_master: str = "local[2]"
    spark_shuffle_partitions: int = 4
    spark_driver_memory: str = "2g"
    #: Extra comma-separated jar paths (set when the Delta jars come from Maven, not Ivy).
    spark_jars: str = ""
    #: Start the driver JVM quickly: C1 JIT only and the class-data-sharing archive that
    #: ``fetch-jars`` writes (lakecep's jobs are short; turn off for long, heavy local runs).
    spark_quick_start: bool = True
    #: Files per micro-batch when the bronze stream reads the landing folder.
    max_files_per_trigger: int = 1000
    #: A landing line longer than this (bytes) is kept in bronze but quarantined.
    max_line_bytes: int = 65536
    #: Processing-time trigger interval for continuous runs (``lakecep run --continuous``).
    trigger_interval: str = "30 seconds"
    #: Run Great Expectations validations in the quality job.
    quality_enabled: bool = True
    #: Folder of query definitions (``*.toml``) the gold job runs; empty: the shipped
    #: ``queries/`` folder.
    queries_dir: str = ""
    #: Live-archive strategy for every live-archive query (alaa, llaa, ollaa, sllaa, auto);
    #: empty: each query's own ``strategy``.
    live_archive_strategy: str = ""
    #: RBuffer: how many of the newest silver events the gold job keeps in memory to
    #: serve recent archive ranges without reading Delta.
    rbuffer_rows: int = 200_000
    #: The optimize job z-orders silver.events once this many files were appended since
    #: its last OPTIMIZE.
    optimize_min_files: int = 16
    #: Target rows per file when the optimize job rewrites silver.events.
    optimize_file_rows: int = 200_000
    #: Live-archive queries keep the live pattern's partial matches in
    #: gold.partial_matches, hashed into this many buckets of join keys (changing it
    #: rebuilds the state from silver history).
    partial_match_buckets: int = 16
    #: Partition keys per bucket kept in the bucket's in-memory (hot) record; the others
    #: are spilled to their own rows of gold.partial_matches.
    partial_match_capacity: int = 5000
    #: Which keys are spilled first: ``tpm`` (oldest in memory) or ``stpm`` (lowest
    #: e.t + Δt_i · p(E_{i+1} | E_i)).
    partial_match_policy: str = "stpm"
    #: The statistics job measures the last this many seconds of event time in silver.
    statistics_window_seconds: int = 86_400
    #: Bin width (seconds) of the per-bin counts behind the Poisson test of arrival rates.
    statistics_bin_seconds: int = 600
    #: Join keys (PARTITION BY values) sampled for selectivities, transitions and costs.
    statistics_sample_keys: int = 300
    #: Deadline td (seconds) of queries without a ``tolerated_latency`` of their own.
    tuning_deadline_seconds: float = 60.0
    #: Target share σ of events processed within their deadline (formula 10).
    tuning_sigma: float = 0.95
    #: Processing capacity (events per second) the tuning shares out; 0: measured (one
    #: core at the measured mean engine cost per event).
    tuning_capacity: float = 0.0
    #: Consumption mode of the gap densities in the disorder model (first, recent,
    #: chronicle, cumulative, continuous).
    tuning_consumption: str = "first"
    #: Jobs apply the newest tuned configuration ($LAKECEP_HOME/tuning/config-vN.json).
    tuning_apply: bool = True

    # Derived locations -------------------------------------------------------------
    @property
    def landing(self) -> Path:
        return self.home / "landing" / "events"

    @property
    def truth_dir(self) -> Path:
        return self.home / "landing" / "_truth"

    @property
    def lake(self) -> Path:
        return self.home / "lake"

    @property
    def checkpoints(self) -> Path:
        return self.home / "checkpoints"

    @property
    def tuning_dir(self) -> Path:
        return self.home / "tuning"

    @property
    def reports(self) -> Path:
        return self.home / "reports"

    def table_path(self, name: str) -> Path:
        """Path of a lake table given as ``layer.table`` (e.g. ``silver.events``)."""
        layer, _, table = name.partition(".")
        if not table:
            raise ValueError(f"table name must be 'layer.table', got {name!r}")
        return self.lake / layer / table

    def checkpoint(self, query: str) -> Path:
        return self.checkpoints / query


_ENV_PREFIX = "LAKECEP_"


def _coerce(key: str, value: Any, target: type, source: str) -> Any:
    try:
        if target is bool:
            if isinstance(value, bool):
                return value
            text = str(value).strip().lower()
            if text in {"1", "true", "yes", "on"}:
                return True
            if text in {"0", "false", "no", "off"}:
                return False
            raise ValueError("expected true/false")
        if target is int:
            if isinstance(value, bool):
                raise ValueError("expected an integer")
            number = int(value)
            if number <= 0:
                raise ValueError("must be positive")
            return number
        if target is float:
            if isinstance(value, bool):
                raise ValueError("expected a number")
            number = float(value)
            if not number >= 0 or number == float("inf"):
                raise ValueError("must be a finite number >= 0")
            return number
        if target is Path:
            return Path(str(value)).expanduser()
        return str(value)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{key} = {value!r} from {source}: {exc}") from None


def load_settings(env: dict[str, str] | None = None) -> Settings:
    """Build the settings from defaults, the TOML file and the environment."""
    env = dict(os.environ if env is None else env)
    types = {f.name: f.type for f in dataclasses.fields(Settings)}
    pytypes = {"Path": Path, "str": str, "int": int, "float": float, "bool": bool}
    values: dict[str, Any] = {}

    home = Path(env.get("LAKECEP_HOME", ".lakecep")).expanduser()
    config_file = env.get("LAKECEP_CONFIG")
    path = Path(config_file) if config_file else home / "lakecep.toml"
    if config_file and not path.exists():
        raise ConfigError(f"LAKECEP_CONFIG points to {path}, which does not exist")
    if path.exists():
        try:
            data = tomllib.loads(path.read_text())
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{path}: not valid TOML: {exc}") from None
        for key, value in data.items():
            if key not in types:
                known = ", ".join(sorted(types))
                raise ConfigError(f"{path}: unknown key {key!r} (known keys: {known})")
            values[key] = _coerce(key, value, pytypes[str(types[key])], str(path))
    for key, type_name in types.items():
        env_key = _ENV_PREFIX + key.upper()
        if env_key in env:
            values[key] = _coerce(key, env[env_key], pytypes[str(type_name)], f"${env_key}")
    values.setdefault("home", home)
    strategy = values.get("live_archive_strategy", "")
    if strategy not in ("", "alaa", "llaa", "ollaa", "sllaa", "auto"):
        raise ConfigError(f"live_archive_strategy = {strategy!r}: use alaa, llaa, ollaa, "
                          "sllaa, auto, or leave empty for each query's own strategy")
    policy = values.get("partial_match_policy", "stpm")
    if policy not in ("tpm", "stpm"):
        raise ConfigError(f"partial_match_policy = {policy!r}: use tpm or stpm")
    sigma = values.get("tuning_sigma", 0.95)
    if not 0 < sigma < 1:
        raise ConfigError(f"tuning_sigma = {sigma!r}: must lie strictly between 0 and 1")
    if values.get("tuning_deadline_seconds", 60.0) <= 0:
        raise ConfigError("tuning_deadline_seconds must be positive")
    modes = ("first", "recent", "chronicle", "cumulative", "continuous")
    if values.get("tuning_consumption", "first") not in modes:
        raise ConfigError(f"tuning_consumption = {values['tuning_consumption']!r}: use one "
                          f"of {', '.join(modes)}")
    settings = Settings(**values)
    return dataclasses.replace(settings, home=settings.home.resolve())
