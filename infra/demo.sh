#!/usr/bin/env bash
# The main job on the embedded defaults: local Spark, Delta tables under $LAKECEP_HOME
# (default ./.lakecep), SQLite Airflow. Installs what it needs (idempotent), generates a
# data set if the landing folder is empty, runs the lakecep_pipeline DAG once with
# `airflow dags test` (bronze -> silver -> gold -> quality), then prints the counts,
# the reconciliation checks and gold vs the generator's ground truth.
#   LAKECEP_DEMO_EVENTS=200000 bash infra/demo.sh     # a bigger data set
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
bash infra/bootstrap.sh
source infra/airflow_env.sh
export PATH="$ROOT/.venv/bin:$PATH"
step() { printf '\033[1m==> %s\033[0m\n' "$*"; }

if [ -z "$(ls -A "$LAKECEP_HOME/landing/events" 2>/dev/null)" ]; then
  step "Generating ${LAKECEP_DEMO_EVENTS:-20000} RFID events into $LAKECEP_HOME/landing/events"
  lakecep generate --events "${LAKECEP_DEMO_EVENTS:-20000}"
else
  step "Landing folder already has files: processing only what is new"
fi

step "Running the lakecep_pipeline DAG (airflow dags test)"
# The full log goes to a file; the job's progress lines are shown as they come.
set +e
airflow dags test lakecep_pipeline "$(date -u +%Y-%m-%dT%H:%M:%S+00:00)" 2>&1 |
  tee "$AIRFLOW_HOME/dags-test.log" |
  { grep --line-buffered -E '\[lakecep\]|==> |finished \(exit|Marking task|ERROR|error:' || true; }
dag_status=${PIPESTATUS[0]}
set -e
if [ "$dag_status" -ne 0 ]; then
  echo "the DAG run failed (exit $dag_status); full log: $AIRFLOW_HOME/dags-test.log" >&2
  exit 1
fi

step "Lake status"
lakecep status --strict
cat <<MSG

Tables (Delta):   $LAKECEP_HOME/lake/{bronze,silver,gold}/...
Data Docs (GX):   $LAKECEP_HOME/reports/data_docs/index.html
Airflow log:      $AIRFLOW_HOME/dags-test.log
Query gold:       .venv/bin/lakecep sql "SELECT query_id, count(*) FROM gold.complex_events GROUP BY 1"
MSG
