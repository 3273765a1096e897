# Airflow settings for the embedded default (sourced by the infra scripts).
# SQLite metadata DB and logs under $LAKECEP_HOME/airflow; DAGs from the repo's dags/.
_lakecep_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export LAKECEP_HOME=${LAKECEP_HOME:-$_lakecep_root/.lakecep}
export AIRFLOW_HOME=${AIRFLOW_HOME:-$LAKECEP_HOME/airflow}
export AIRFLOW__CORE__DAGS_FOLDER=${AIRFLOW__CORE__DAGS_FOLDER:-$_lakecep_root/dags}
export AIRFLOW__CORE__LOAD_EXAMPLES=False
export AIRFLOW__CORE__EXECUTOR=${AIRFLOW__CORE__EXECUTOR:-LocalExecutor}
export AIRFLOW__DATABASE__SQL_ALCHEMY_CONN=${AIRFLOW__DATABASE__SQL_ALCHEMY_CONN:-sqlite:///$AIRFLOW_HOME/airflow.db}
export AIRFLOW__CORE__DAGBAG_IMPORT_TIMEOUT=120
export AIRFLOW__LOGGING__BASE_LOG_FOLDER=${AIRFLOW__LOGGING__BASE_LOG_FOLDER:-$AIRFLOW_HOME/logs}
# The jobs run with the same interpreter as Airflow (one environment, see docs/environment.md).
export LAKECEP_PYTHON_BIN=${LAKECEP_PYTHON_BIN:-$_lakecep_root/.venv/bin/python}
# `airflow standalone` starts its components as `airflow <component>` found on PATH.
export PATH="$_lakecep_root/.venv/bin:$PATH"
export AIRFLOW__API__HOST=${AIRFLOW__API__HOST:-127.0.0.1}
export AIRFLOW__API__PORT=${AIRFLOW__API__PORT:-8080}
# The LocalExecutor otherwise starts 32 workers; each lakecep task is a whole Spark driver.
export AIRFLOW__CORE__PARALLELISM=${AIRFLOW__CORE__PARALLELISM:-4}
unset _lakecep_root
