#!/usr/bin/env bash
# The whole test suite (unit, Spark + Delta integration, Airflow DAG, end to end), after
# the same idempotent set-up as the demo. Extra arguments go to pytest, e.g.
#   bash infra/test.sh -m "not slow"      bash infra/test.sh tests/unit
# Two worker processes (pytest-xdist), each running whole files (module fixtures are built
# once) and each with its own Spark session; files go out in collection order, which starts
# the slowest first (tests/conftest.py; xdist would otherwise start the files with most tests).
# LAKECEP_TEST_WORKERS=0 runs everything in this process.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
bash infra/bootstrap.sh
source infra/airflow_env.sh
export PATH="$ROOT/.venv/bin:$PATH"
printf '\033[1m==> %s\033[0m\n' "pytest"
started=$(date +%s)
set +e
.venv/bin/pytest -n "${LAKECEP_TEST_WORKERS:-2}" --dist loadfile --no-loadscope-reorder "$@"
rc=$?
set -e
echo "test suite wall time: $(( $(date +%s) - started ))s"
# pytest exits 5 when a selection collects no test: not a failure of the suite.
[ "$rc" -eq 5 ] && rc=0
exit "$rc"
