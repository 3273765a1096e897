#!/usr/bin/env bash
# The whole test suite (unit, Spark + Delta integration, Airflow DAG, end to end), after
# the same idempotent set-up as the demo. Extra arguments go to pytest, e.g.
#   bash infra/test.sh -m "not slow"      bash infra/test.sh tests/unit
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
bash infra/bootstrap.sh
source infra/airflow_env.sh
export PATH="$ROOT/.venv/bin:$PATH"
printf '\033[1m==> %s\033[0m\n' "pytest"
started=$(date +%s)
set +e
.venv/bin/pytest "$@"
rc=$?
set -e
echo "test suite wall time: $(( $(date +%s) - started ))s"
# pytest exits 5 when a selection collects no test: not a failure of the suite.
[ "$rc" -eq 5 ] && rc=0
exit "$rc"
