"""The Spark session lakecep builds (``lakecep.jobs.spark.get_spark``): its defaults, and the
user's ``spark_conf`` winning over them."""

from __future__ import annotations

import dataclasses

import pytest

pytestmark = pytest.mark.spark

AQE = "spark.sql.adaptive.enabled"


def test_local_sessions_plan_without_aqe_unless_the_user_asks(spark, settings) -> None:  # noqa: ANN001
    from lakecep.jobs.spark import get_spark

    assert settings.spark_master.startswith("local")
    assert spark.conf.get(AQE) == "false"  # lakecep's default on a local master
    try:
        again = get_spark("lakecep-tests", dataclasses.replace(
            settings, spark_conf={AQE: "true"}))  # the shared session, the setting applied
        assert again is spark
        assert spark.conf.get(AQE) == "true"  # the user's spark_conf wins
    finally:
        spark.conf.set(AQE, "false")
