"""lakecep's Airflow DAG files, installed as the package ``lakecep.dags`` (docs/airflow.md).

Point Airflow's DAG folder at this folder; the DAG files share ``lakecep_tasks``.
"""
