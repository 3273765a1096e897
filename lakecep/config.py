"""Typed, validated configuration (pydantic-settings).

Sources, later ones win: built-in defaults, the TOML file (``$LAKECEP_CONFIG``, else
``$LAKECEP_HOME/lakecep.toml`` when it exists), ``LAKECEP_<KEY>`` environment variables,
then overrides given on the command line (``lakecep --set key=value ...``). Every value is
checked at start-up against the type and range written on its field below; a bad one
raises ``ConfigError`` naming the key, the value and where it came from, and an unknown key
says which known key it probably meant.

``Settings`` stays a frozen dataclass (``dataclasses.replace`` works on it); the
pydantic-settings model that loads and validates it is built from its fields.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import re
import tomllib
from collections.abc import Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal, get_type_hints

from pydantic import BeforeValidator, Field, ValidationError, create_model
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict


class ConfigError(ValueError):
    """A configuration value is missing or invalid (the message names key and source)."""


def _no_bool(value: Any) -> Any:
    """TOML ``true`` is not a number (pydantic would read it as 1)."""
    if isinstance(value, bool):
        raise ValueError("expected a number, got a boolean")
    return value


#: Value types with their ranges (every count is positive; every rate or size finite >= 0).
Positive = Annotated[int, BeforeValidator(_no_bool), Field(gt=0)]
NonNegative = Annotated[float, BeforeValidator(_no_bool), Field(ge=0, allow_inf_nan=False)]
PositiveSeconds = Annotated[float, BeforeValidator(_no_bool), Field(gt=0, allow_inf_nan=False)]
Share = Annotated[float, BeforeValidator(_no_bool), Field(gt=0, lt=1)]
Ratio = Annotated[float, BeforeValidator(_no_bool), Field(ge=0, le=1)]
Strategy = Literal["", "alaa", "llaa", "ollaa", "sllaa", "auto"]
Consumption = Literal["first", "recent", "chronicle", "cumulative", "continuous"]
LogLevel = Literal["off", "fatal", "error", "warn", "info", "debug", "trace", "all"]


class Uri(str):
    """An object-store location (``s3a://bucket/prefix``): a string that joins with ``/``
    like a path. It has no local file operations on purpose: code that needs them must
    go through Spark (Hadoop's file systems) or say that the feature needs a local
    folder (:func:`is_uri`)."""

    __slots__ = ()

    def __new__(cls, value: str) -> Uri:
        return super().__new__(cls, value.rstrip("/"))

    def __truediv__(self, other: str | Path) -> Uri:
        return Uri(f"{self}/{str(other).strip('/')}")

    @property
    def name(self) -> str:
        return self.rsplit("/", 1)[-1]

    @property
    def scheme(self) -> str:
        return self.split("://", 1)[0].lower()


def is_uri(value: object) -> bool:
    """Whether ``value`` is an object-store URI (``scheme://...`` other than ``file:``)."""
    text = str(value)
    scheme, sep, _ = text.partition("://")
    return bool(sep) and scheme.isidentifier() and scheme.lower() != "file"


def location(value: str | Path) -> Path | Uri:
    """A configured location: a :class:`Uri` for an object store, else a local folder
    (``file:///x`` and ``~`` are accepted; a relative folder is kept relative)."""
    text = str(value)
    if is_uri(text):
        return Uri(text)
    if text.lower().startswith("file://"):
        from urllib.parse import unquote, urlparse

        text = unquote(urlparse(text).path)
    return Path(text).expanduser()


def local_only(where: Path | Uri, feature: str) -> Path:
    """``where`` as a local folder, or a ``ConfigError`` saying that ``feature`` needs one
    (for the few features that cannot run on an object store; docs/object-stores.md)."""
    if isinstance(where, Uri):
        raise ConfigError(f"{feature} needs a local folder, but {where} is on an object "
                          "store (docs/object-stores.md lists what works there)")
    return where


def _location(value: Any) -> Any:
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, str) and "://" in value and not is_uri(value) \
            and not value.lower().startswith("file://"):
        raise ValueError(f"not a folder or a URI scheme://…: {value!r}")
    return value


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(second|minute|hour|day|week)s?\s*$",
                       re.IGNORECASE)
_SECONDS = {"second": 1, "minute": 60, "hour": 3600, "day": 86400, "week": 604800}


def duration_seconds(text: str) -> float:
    """``'7 days'`` -> ``604800.0`` (seconds, minutes, hours, days or weeks)."""
    match = _DURATION.match(text)
    if not match:
        raise ValueError(f"{text!r} is not a duration like '7 days' or '12 hours'")
    return float(match.group(1)) * _SECONDS[match.group(2).lower()]


def _duration(value: Any) -> Any:
    if isinstance(value, str):
        duration_seconds(value)  # raises with the expected form
    return value


def _spark_conf(value: Any) -> Any:
    """``$LAKECEP_SPARK_CONF``: ``key=value`` lines (or a JSON object) -> a mapping; TOML
    numbers and booleans -> Spark's text (``true``, ``4``)."""
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("{"):
            import json

            try:
                value = json.loads(text)
            except json.JSONDecodeError as exc:
                raise ValueError(f"not a JSON object: {exc}") from None
        else:
            value = {}
            for line in text.splitlines():
                line = line.strip()
                if not line or line.startswith("#"):
                    continue
                key, sep, item = line.partition("=")
                if not sep:
                    raise ValueError(f"expected key=value lines, got {line!r}")
                value[key.strip()] = item.strip()
    if not isinstance(value, Mapping):
        return value
    out = {}
    for key, item in value.items():
        if not str(key).startswith("spark."):
            raise ValueError(f"{key!r} is not a Spark setting (only spark.* keys pass through)")
        if isinstance(item, Mapping):
            raise ValueError(f"{key!r} has a table as its value; give it text, a number or "
                             "a boolean")
        out[str(key)] = (("true" if item else "false") if isinstance(item, bool)
                         else str(item))
    return out


#: Words in a Spark setting's key that make its value a secret (``lakecep config`` hides it).
SECRET_WORDS = ("secret", "password", "token", "access.key", "credential")


def redacted(conf: Mapping[str, str]) -> dict[str, str]:
    """``conf`` with the values of secret-looking keys replaced by ``***``."""
    return {k: "***" if any(w in k.lower() for w in SECRET_WORDS) else v
            for k, v in conf.items()}


#: A folder or an object-store URI (``s3a://bucket/prefix``).
Location = Annotated[str, BeforeValidator(_location)]
#: A duration such as ``7 days`` or ``12 hours`` (:func:`duration_seconds`).
Duration = Annotated[str, BeforeValidator(_duration)]
#: Spark settings passed through unchanged (``spark.*`` keys only).
SparkConf = Annotated[dict[str, str], BeforeValidator(_spark_conf)]


@dataclass(frozen=True)
class Settings:
    home: Path = field(default_factory=lambda: Path(".lakecep"))
    #: Spark master URL: ``local[N]``, ``spark://host:7077``, ``yarn``, ``k8s://...``.
    spark_master: str = "local[2]"
    spark_shuffle_partitions: Positive = 4
    spark_driver_memory: str = "2g"
    #: Extra comma-separated jar paths (set when the Delta jars come from Maven, not Ivy).
    spark_jars: str = ""
    #: Level of Spark's own (JVM) log lines: ``error`` keeps its warnings out of the way;
    #: ``warn`` or ``info`` when diagnosing Spark itself (``lakecep --debug`` uses ``warn``).
    spark_log_level: LogLevel = "error"
    #: Start the driver JVM quickly: C1 JIT only and the class-data-sharing archive that
    #: ``fetch-jars`` writes (lakecep's jobs are short; turn off for long, heavy local runs).
    spark_quick_start: bool = True
    #: Files per micro-batch when the bronze stream reads the landing folder.
    max_files_per_trigger: Positive = 1000
    #: A landing line longer than this (bytes) is kept in bronze but quarantined.
    max_line_bytes: Positive = 65536
    #: How silver applies the event contract to the built-in RFID source's lines:
    #: ``python`` (``lakecep.events`` in ``mapInArrow``) or ``native`` (Spark SQL,
    #: ``jobs/silver_native.py``; Python only for the rows Spark cannot judge exactly).
    #: Same rows, reasons and counts either way.
    silver_parse: Literal["python", "native"] = "python"
    #: Processing-time trigger interval for continuous runs (``lakecep run --continuous``).
    trigger_interval: str = "30 seconds"
    #: Run Great Expectations validations in the quality job.
    quality_enabled: bool = True
    #: Quarantine gate of the silver job (docs/sources.md, "Quarantine gate"): the share of
    #: one source's rows in a micro-batch that may be quarantined; a source file may set
    #: its own ``max_quarantine_ratio``.
    max_quarantine_ratio: Ratio = 0.05
    #: What a batch above the ratio does: ``fail`` (nothing of the batch is written and the
    #: run fails, so a wrong mapping can be fixed and the batch re-parsed), ``warn`` (log
    #: and write it), ``off``.
    quarantine_gate: Literal["fail", "warn", "off"] = "fail"
    #: A source's rows in a batch are only judged from this many on (a few bad lines in a
    #: small batch are not a broken source).
    quarantine_gate_min_rows: Positive = 100
    #: Folder of query definitions (``*.toml``) the gold job runs; empty: the shipped
    #: ``queries/`` folder.
    queries_dir: str = ""
    #: Folder of source definitions (``*.toml``, one per source; docs/sources.md); empty:
    #: ``$LAKECEP_HOME/sources``. Without source files the built-in RFID source is used.
    sources_dir: str = ""
    #: Alerts (docs/alerts.md): new complex events of queries with ``alert = true`` go to
    #: gold.alerts as soon as their micro-batch commits and, when this is an http(s) URL,
    #: are POSTed to it as JSON, one request per alert with an ``Idempotency-Key`` header.
    alert_webhook: str = ""
    #: Seconds one webhook request may take before it counts as failed (retried next batch).
    alert_timeout_seconds: PositiveSeconds = 5.0
    #: Live-archive strategy for every live-archive query (alaa, llaa, ollaa, sllaa, auto);
    #: empty: each query's own ``strategy``.
    live_archive_strategy: Strategy = ""
    #: ``auto`` takes ALAA (one blind load of Rmax) in a batch with at least this many live
    #: matches (0: never): one load per match cost ~0.9 ms each, 200 s for the 228,686 of
    #: a 1M-event first load, against 81 s for the whole query with ALAA.
    live_archive_bulk_matches: Annotated[int, BeforeValidator(_no_bool), Field(ge=0)] = 50_000
    #: RBuffer: how many of the newest silver events the gold job keeps in memory to
    #: serve recent archive ranges without reading Delta.
    rbuffer_rows: Positive = 200_000
    #: The optimize job clusters silver.events once this many files were appended since
    #: its last rewrite.
    optimize_min_files: Positive = 16
    #: Target rows per file when the optimize job rewrites silver.events.
    optimize_file_rows: Positive = 200_000
    #: Housekeeping (``lakecep run maintain``, docs/architecture.md "Housekeeping"): how
    #: long every lake table keeps the data files a newer version removed
    #: (``delta.deletedFileRetentionDuration``, and VACUUM's RETAIN). Refused when shorter
    #: than the time travel the configured queries need.
    vacuum_retention: Duration = "7 days"
    #: How long every lake table keeps its log entries (``delta.logRetentionDuration``:
    #: how far back time travel can name a version); at least ``vacuum_retention``.
    log_retention: Duration = "30 days"
    #: The longest a stream may fall behind (the pipeline paused, a failed run not yet
    #: fixed): streams read the versions after their checkpoint, whose files a compaction
    #: may have removed, so retention must cover it.
    max_stream_lag: Duration = "1 day"
    #: The maintain job bin-packs (Delta OPTIMIZE) a table once it holds this many small
    #: files (every table but silver.events, which the optimize job clusters).
    compact_min_files: Positive = 16
    #: A data file smaller than this many bytes counts as small.
    compact_small_file_bytes: Positive = 32 * 1024 * 1024
    #: Live-archive queries keep the live pattern's partial matches in
    #: gold.partial_matches, hashed into this many buckets of join keys (changing it
    #: rebuilds the state from silver history).
    partial_match_buckets: Positive = 16
    #: Partition keys per bucket kept in the bucket's in-memory (hot) record; the others
    #: are spilled to their own rows of gold.partial_matches.
    partial_match_capacity: Positive = 5000
    #: Which keys are spilled first: ``tpm`` (oldest in memory) or ``stpm`` (lowest
    #: e.t + Δt_i · p(E_{i+1} | E_i)).
    partial_match_policy: Literal["tpm", "stpm"] = "stpm"
    #: Pattern queries keep per-key partial matches between gold batches and read history
    #: only for keys with a late event (jobs/match_state.py); false: every batch recomputes
    #: each touched key over its whole history.
    incremental_patterns: bool = True
    #: The statistics job measures the last this many seconds of event time in silver.
    statistics_window_seconds: Positive = 86_400
    #: Bin width (seconds) of the per-bin counts behind the Poisson test of arrival rates.
    statistics_bin_seconds: Positive = 600
    #: Join keys (PARTITION BY values) sampled for selectivities, transitions and costs.
    statistics_sample_keys: Positive = 300
    #: Deadline td (seconds) of queries without a ``tolerated_latency`` of their own.
    tuning_deadline_seconds: PositiveSeconds = 60.0
    #: Target share σ of events processed within their deadline (formula 10).
    tuning_sigma: Share = 0.95
    #: Processing capacity (events per second) the tuning shares out; 0: measured (one
    #: core at the measured mean engine cost per event).
    tuning_capacity: NonNegative = 0.0
    #: Consumption mode of the gap densities in the disorder model (first, recent,
    #: chronicle, cumulative, continuous).
    tuning_consumption: Consumption = "first"
    #: Jobs apply the newest tuned configuration ($LAKECEP_HOME/tuning/config-vN.json).
    tuning_apply: bool = True
    #: Where the lake's Delta tables live: a folder, or an object-store URI such as
    #: ``s3a://bucket/lake`` (docs/object-stores.md); a relative folder is relative to
    #: ``home``; empty: ``$LAKECEP_HOME/lake``.
    lake_dir: Location = ""
    #: Where the built-in RFID source's landing files are read: a folder or an object-store
    #: URI; empty: ``$LAKECEP_HOME/landing/events``.
    landing_dir: Location = ""
    #: Spark settings handed to the session unchanged (``spark.*`` keys; they win over
    #: lakecep's own): a ``[spark]`` table or quoted ``"spark.…"`` keys in the settings
    #: file, ``key=value`` lines in ``$LAKECEP_SPARK_CONF``, ``--set spark.…=value``.
    spark_conf: SparkConf = field(default_factory=dict, hash=False)

    # Derived locations -------------------------------------------------------------
    @property
    def landing(self) -> Path | Uri:
        return self._at(self.landing_dir) if self.landing_dir else self.home / "landing" / "events"

    @property
    def truth_dir(self) -> Path:
        return self.home / "landing" / "_truth"

    @property
    def lake(self) -> Path | Uri:
        return self._at(self.lake_dir) if self.lake_dir else self.home / "lake"

    def _at(self, value: str) -> Path | Uri:
        """A configured location; a relative folder is relative to ``home``."""
        where = location(value)
        return where if isinstance(where, Uri) else self.home / where

    @property
    def checkpoints(self) -> Path:
        return self.home / "checkpoints"

    @property
    def tuning_dir(self) -> Path:
        return self.home / "tuning"

    @property
    def reports(self) -> Path:
        return self.home / "reports"

    def table_path(self, name: str) -> Path | Uri:
        """Path of a lake table given as ``layer.table`` (e.g. ``silver.events``)."""
        layer, _, table = name.partition(".")
        if not table:
            raise ValueError(f"table name must be 'layer.table', got {name!r}")
        return self.lake / layer / table

    def checkpoint(self, query: str) -> Path:
        return self.checkpoints / query


ENV_PREFIX = "LAKECEP_"
#: ``LAKECEP_*`` environment variables that are not settings (read elsewhere).
OTHER_ENV = frozenset({"CONFIG", "PYTHON_BIN", "IVY_DIR", "JARS_DIR", "VENV", "PYTHON",
                       "DEMO_EVENTS", "DEBUG"})


def setting_names() -> list[str]:
    return [f.name for f in dataclasses.fields(Settings)]


def did_you_mean(key: str, known: list[str] | None = None) -> str:
    """`` (did you mean 'spark_master'?)`` for a near miss, else ``''``."""
    close = difflib.get_close_matches(key.lower(), known or setting_names(), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


class _Layer(PydanticBaseSettingsSource):
    """One source's values, already read (so that errors can say where a value came from)."""

    def __init__(self, settings_cls: type[BaseSettings], values: Mapping[str, Any]) -> None:
        super().__init__(settings_cls)
        self.values = dict(values)

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return self.values.get(field_name), field_name, False

    def __call__(self) -> dict[str, Any]:
        return dict(self.values)


#: The layers of the load in progress, highest precedence first.
_LAYERS: ContextVar[tuple[dict[str, Any], ...]] = ContextVar("lakecep_settings_layers")


class _Loader(BaseSettings):
    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="forbid",
                                      validate_default=True)

    @classmethod
    def settings_customise_sources(cls, settings_cls: type[BaseSettings],
                                   *sources: PydanticBaseSettingsSource,
                                   **named: PydanticBaseSettingsSource,
                                   ) -> tuple[PydanticBaseSettingsSource, ...]:
        return tuple(_Layer(settings_cls, values) for values in _LAYERS.get())


def _loader_model() -> type[BaseSettings]:
    """The pydantic-settings model of :class:`Settings`: same names, types and defaults."""
    hints = get_type_hints(Settings, include_extras=True)
    fields: dict[str, Any] = {}
    for f in dataclasses.fields(Settings):
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()  # type: ignore[misc]
        fields[f.name] = (hints[f.name], default)
    return create_model("SettingsModel", __base__=_Loader, **fields)


SettingsModel = _loader_model()


def _flatten(prefix: str, table: Mapping[str, Any]) -> dict[str, Any]:
    """A TOML table of dotted keys (``[spark] sql.shuffle.partitions = 8``) -> flat keys."""
    out: dict[str, Any] = {}
    for key, value in table.items():
        name = f"{prefix}.{key}"
        if isinstance(value, Mapping):
            out.update(_flatten(name, value))
        else:
            out[name] = value
    return out


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    # Spark settings: a [spark] table (or dotted spark.x.y keys, the same to TOML) and
    # quoted "spark.x.y" keys all go to spark_conf, as written.
    spark = _flatten("spark", data.pop("spark")) if isinstance(data.get("spark"), dict) else {}
    spark.update({k: data.pop(k) for k in [k for k in data if k.startswith("spark.")]})
    if spark:
        given = data.get("spark_conf", {})
        data["spark_conf"] = {**given, **spark} if isinstance(given, dict) else given
    known = setting_names()
    for key in data:
        if key not in known:
            raise ConfigError(f"{path}: unknown key {key!r}{did_you_mean(key)}; known keys: "
                              f"{', '.join(known)}")
    return data


def _read_env(env: Mapping[str, str]) -> dict[str, Any]:
    known = setting_names()
    values = {}
    for name, value in env.items():
        if not name.startswith(ENV_PREFIX):
            continue
        key = name[len(ENV_PREFIX):].lower()
        if key == "spark_conf":  # parsed here: the layers' mappings merge key by key
            try:
                values[key] = _spark_conf(value)
            except ValueError as exc:
                raise ConfigError(f"spark_conf = {value!r} from ${name}: {exc}") from None
        elif key in known:
            values[key] = value
    return values


def unknown_environment(env: Mapping[str, str] | None = None) -> list[str]:
    """``LAKECEP_*`` variables that look like a misspelt setting (for a warning)."""
    env = os.environ if env is None else env
    out = []
    for name in env:
        key = name[len(ENV_PREFIX):]
        if (name.startswith(ENV_PREFIX) and key.lower() not in setting_names()
                and key not in OTHER_ENV and did_you_mean(key)):
            out.append(f"${name} is not a setting{did_you_mean(key)}")
    return out


def parse_overrides(pairs: list[str]) -> dict[str, Any]:
    """``["key=value", ...]`` from the command line; unknown keys get a "did you mean";
    ``spark.*`` keys are collected in ``spark_conf``."""
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise ConfigError(f"--set {pair!r}: expected key=value")
        if key.strip().startswith("spark."):  # a Spark setting, passed through as written
            out.setdefault("spark_conf", {})[key.strip()] = value
            continue
        key = key.strip().replace("-", "_").lower()
        if key not in setting_names():
            raise ConfigError(f"--set {key}: unknown key{did_you_mean(key)}")
        out[key] = value
    return out


@dataclass(frozen=True)
class Loaded:
    """Settings with the source of every value (``lakecep config`` shows them)."""

    settings: Settings
    sources: dict[str, str]
    config_file: Path | None


def load(env: Mapping[str, str] | None = None,
         overrides: Mapping[str, Any] | None = None) -> Loaded:
    """Load and validate the settings: defaults < file < environment < ``overrides``."""
    env = dict(os.environ if env is None else env)
    overrides = dict(overrides or {})
    env_values = _read_env(env)
    home = Path(overrides.get("home") or env_values.get("home") or ".lakecep").expanduser()
    config_file = env.get("LAKECEP_CONFIG")
    path = Path(config_file).expanduser() if config_file else home / "lakecep.toml"
    if config_file and not path.exists():
        raise ConfigError(f"LAKECEP_CONFIG points to {path}, which does not exist")
    file_values = _read_toml(path) if path.exists() else {}
    layers = (overrides, env_values, file_values)
    labels = {"command line": overrides, "environment": env_values, str(path): file_values}
    token = _LAYERS.set(layers)
    try:
        model = SettingsModel()
    except ValidationError as exc:
        raise ConfigError(_explain(exc, labels)) from None
    finally:
        _LAYERS.reset(token)
    values = model.model_dump()
    values["home"] = Path(values["home"]).expanduser().resolve()
    sources = {}
    for key in values:
        sources[key] = next((f"${ENV_PREFIX}{key.upper()}" if label == "environment" else label
                             for label, layer in labels.items() if key in layer), "default")
    return Loaded(Settings(**values), sources, path if path.exists() else None)


def _explain(exc: ValidationError, labels: Mapping[str, Mapping[str, Any]]) -> str:
    """One line per bad value: ``key = value from source: what is wrong``."""
    lines = []
    for error in exc.errors():
        key = str(error["loc"][0]) if error["loc"] else "?"
        source = next((f"${ENV_PREFIX}{key.upper()}" if label == "environment" else label
                       for label, layer in labels.items() if key in layer), "default")
        message = error["msg"].removeprefix("Value error, ")
        if error["type"] == "literal_error":
            message = "use " + message.removeprefix("Input should be ")
        message = message.replace("Input should be", "must be")
        value = error.get("input")
        lines.append(f"{key} = {value!r} from {source}: {message}")
    return "; ".join(lines)


def load_settings(env: Mapping[str, str] | None = None,
                  overrides: Mapping[str, Any] | None = None) -> Settings:
    """Build the settings from defaults, the TOML file, the environment and ``overrides``."""
    return load(env, overrides).settings
