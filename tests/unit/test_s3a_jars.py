"""Which S3A jars a session gets (docs/object-stores.md, "Jars"); no JVM is started."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pyspark

from lakecep.config import load_settings
from lakecep.jobs import spark as jobs_spark


def test_hadoop_aws_matches_the_hadoop_bundled_with_pyspark() -> None:
    jars = Path(pyspark.__file__).resolve().parent / "jars"
    bundled = next(jars.glob("hadoop-client-api-*.jar")).name
    version = jobs_spark.hadoop_version()
    assert bundled == f"hadoop-client-api-{version}.jar"
    packages = jobs_spark.s3a_packages()
    assert packages[0] == f"org.apache.hadoop:hadoop-aws:{version}"
    sdk = jobs_spark.AWS_SDK_VERSIONS[version]
    assert packages[1:] == [f"software.amazon.awssdk:{m}:{sdk}"
                            for m in ("s3", "s3-transfer-manager", "sts")]
    # the Maven fallback pins the same versions
    pom = jobs_spark.S3A_POM.read_text()
    assert f"<hadoop.version>{version}</hadoop.version>" in pom
    assert f"<aws.sdk.version>{sdk}</aws.sdk.version>" in pom


def test_jars_pyspark_ships_are_left_out() -> None:
    ivy = [
        "/c/jars/org.apache.hadoop_hadoop-aws-3.4.2.jar",
        "/c/jars/software.amazon.awssdk_s3-2.29.52.jar",
        "/c/jars/io.netty_netty-codec-http-4.1.115.Final.jar",  # pyspark has netty 4.2
        "/c/jars/org.slf4j_slf4j-api-1.7.36.jar",
        "/c/jars/commons-logging_commons-logging-1.2.jar",  # jcl-over-slf4j in Spark
    ]
    assert jobs_spark._not_in_spark(ivy) == ivy[:2]
    maven = ["/m/hadoop-aws-3.4.2.jar", "/m/httpclient-4.5.13.jar", "/m/sts-2.29.52.jar"]
    assert jobs_spark._not_in_spark(maven, ivy=False) == [maven[0], maven[2]]


def test_a_session_needs_s3a_only_when_something_names_it(tmp_path: Path) -> None:
    settings = load_settings({"LAKECEP_HOME": str(tmp_path)})
    assert not jobs_spark.uses_object_store(settings)
    assert jobs_spark.uses_object_store(dataclasses.replace(settings, lake_dir="s3a://b/l"))
    assert jobs_spark.uses_object_store(dataclasses.replace(settings,
                                                            landing_dir="s3a://b/in"))
    assert jobs_spark.uses_object_store(dataclasses.replace(
        settings, spark_conf={"spark.hadoop.fs.s3a.endpoint": "http://x"}))
    assert not jobs_spark.uses_object_store(dataclasses.replace(settings, lake_dir="/data"))
    sources = tmp_path / "sources"
    sources.mkdir()
    (sources / "cards.toml").write_text(
        'format = "jsonl"\npath = "s3a://bucket/cards"\n[fields]\ncard = "string"\n'
        'ts = "string"\n[mapping]\nobject_id = "card"\n'
        "event_type = \"'t'\"\nsource_id = \"'pos'\"\nevent_time = \"ts\"\n")
    assert jobs_spark.uses_object_store(settings)


def test_delta_jars_are_found_under_maven_and_ivy_names() -> None:
    # `lakecep serve --jdbc-port` puts these on the driver's class path; with jars that only
    # Ivy cached (io.delta_delta-spark_...), it refused to start
    jars = ["/m/delta-spark_2.13-4.3.1.jar", "/m/delta-storage-4.3.1.jar",
            "/i/io.delta_delta-spark_2.13-4.3.1.jar", "/i/io.delta_delta-storage-4.3.1.jar",
            "/i/org.apache.spark_spark-sql-kafka-0-10_2.13-4.1.1.jar",
            "/i/org.antlr_antlr4-runtime-4.13.1.jar", "/m/kafka-clients-3.9.0.jar"]
    assert jobs_spark.delta_jars(jars) == jars[:4]


def test_a_failed_maven_copy_leaves_no_jar_behind(tmp_path: Path) -> None:
    """A Maven fallback that fails part-way must not leave a part of the jars, which later
    runs would take for a complete cache (two bootstraps at once did exactly that)."""
    import shutil
    import subprocess

    import pytest

    if shutil.which("mvn") is None:
        pytest.skip("mvn is not installed")
    folder = tmp_path / "jars"
    folder.mkdir()
    (folder / "kept.jar").write_bytes(b"an earlier complete copy")
    bad_pom = tmp_path / "pom.xml"
    bad_pom.write_text("<project><not-a-pom/>")  # Maven fails before copying anything
    with pytest.raises(subprocess.CalledProcessError):
        jobs_spark._maven_copy(bad_pom, folder)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["jars", "pom.xml"]  # no staging left
    assert [p.name for p in folder.iterdir()] == ["kept.jar"]
