"""The one place that builds a SparkSession for lakecep (Delta configured, small defaults).

``python -m lakecep.jobs.spark fetch-jars`` resolves the Delta jars, Spark's Kafka source
and the S3A connector (``hadoop-aws`` at the Hadoop version of the installed pyspark, with
the AWS SDK modules it uses) once (Ivy, falling back to Maven with ``infra/pom.xml`` and
``infra/pom-hadoop-aws.xml``) so later sessions start offline from the cache.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from collections.abc import Mapping
from importlib import metadata as _metadata
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from lakecep.config import Settings, load_settings

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DELTA_VERSION = "4.3.1"
SCALA_BINARY = "2.13"
DELTA_PACKAGES = [f"io.delta:delta-spark_{SCALA_BINARY}:{DELTA_VERSION}"]
#: Spark's own Kafka source (``format = "kafka"`` sources, docs/sources.md): the release of
#: the installed pyspark (its Kafka client comes with it).
SPARK_VERSION = _metadata.version("pyspark")
KAFKA_PACKAGES = [f"org.apache.spark:spark-sql-kafka-0-10_{SCALA_BINARY}:{SPARK_VERSION}"]
#: Everything fetch-jars resolves and every session gets.
PACKAGES = DELTA_PACKAGES + KAFKA_PACKAGES
#: The Spark driver's log4j2 configuration, shipped beside this module (package data).
LOG4J_CONFIG = Path(str(resources.files("lakecep.jobs") / "log4j2.properties"))
#: Maven fallback of fetch-jars: the pom of a source checkout (not shipped in the wheel).
POM = Path(__file__).resolve().parent.parent / "infra" / "pom.xml"
MAVEN_JARS_DIR = Path(os.environ.get("LAKECEP_JARS_DIR", Path.home() / ".cache/lakecep/jars"))
IVY_DIR = Path(os.environ.get("LAKECEP_IVY_DIR", Path.home() / ".cache/lakecep/ivy"))
#: Class-data-sharing archives of the driver JVM (one per Spark installation), written by
#: ``fetch-jars``: the classes Spark loads at start are mapped, not parsed and verified.
#: The JVM only accepts an archive made with the same class path, i.e. this environment's
#: pyspark, so it lives in the environment and goes away with it (~190 MB).
CDS_DIR = Path(os.environ.get("LAKECEP_CDS_DIR", Path(sys.prefix) / "share" / "lakecep" / "cds"))
#: C1 JIT only: compiling less costs about a third of a short job's CPU (docs/configuration.md).
#: Without tiers the JVM reserves only 48 MB of code cache, which C1's code fills within a
#: minute of a large job ("CodeCache is full. Compiler has been disabled": from then on new
#: code is interpreted); 240 MB is the tiered default (reserved address space, not memory).
QUICK_START_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=240m"
#: AWS SDK v2 version each Hadoop release's hadoop-aws was built with (hadoop-project's
#: ``aws-java-sdk-v2.version``). hadoop-aws depends on the SDK's 640 MB ``bundle``; lakecep
#: excludes it and takes the modules S3A loads (~15 MB): s3, s3-transfer-manager, sts.
AWS_SDK_VERSIONS = {"3.4.2": "2.29.52", "3.4.1": "2.24.6", "3.4.0": "2.23.19"}
#: Maven fallback of the S3A jars (a source checkout's infra/pom-hadoop-aws.xml).
S3A_POM = POM.parent / "pom-hadoop-aws.xml"


def hadoop_version() -> str:
    """The Hadoop version bundled with the installed pyspark (its hadoop-client-api jar)."""
    import pyspark

    jars = Path(pyspark.__file__).resolve().parent / "jars"
    found = sorted(jars.glob("hadoop-client-api-*.jar"))
    if not found:
        raise RuntimeError(f"no hadoop-client-api-*.jar in {jars}: cannot tell which "
                           "hadoop-aws fits this pyspark")
    return found[-1].name.removeprefix("hadoop-client-api-").removesuffix(".jar")


def s3a_packages() -> list[str]:
    """Maven coordinates of the S3A connector for this pyspark's Hadoop."""
    version = hadoop_version()
    sdk = AWS_SDK_VERSIONS.get(version)
    if sdk is None:
        raise RuntimeError(f"no AWS SDK version known for Hadoop {version} (pyspark's): add "
                           "it to AWS_SDK_VERSIONS in jobs/spark.py (hadoop-project's "
                           "aws-java-sdk-v2.version), or give the jars with spark_jars")
    return [f"org.apache.hadoop:hadoop-aws:{version}",
            *(f"software.amazon.awssdk:{m}:{sdk}" for m in ("s3", "s3-transfer-manager", "sts"))]


#: What the S3A resolution leaves out: the SDK bundle (its modules are named instead).
S3A_EXCLUDES = "software.amazon.awssdk:bundle"


def _resolved_jars_file() -> Path:
    """The list of jars Ivy resolved for :data:`PACKAGES` (a new package list, a new file:
    the next fetch-jars resolves again)."""
    key = hashlib.sha256(",".join(PACKAGES).encode()).hexdigest()[:12]
    return IVY_DIR / f"delta-{DELTA_VERSION}-jars-{key}.txt"


def _ivy_jars() -> list[str]:
    """Jars Ivy resolved for the Delta package earlier (``fetch-jars``), if all still there.

    Handing them to Spark directly skips Ivy's resolution at every session start.
    """
    listing = _resolved_jars_file()
    if not listing.exists():
        return []
    jars = listing.read_text().split()
    return jars if jars and all(Path(j).exists() for j in jars) else []


def cached_jars(settings: Settings) -> list[str]:
    """The Delta and Kafka jars a session gets: the user's ``spark_jars``, else those
    ``fetch-jars`` cached; [] if none are cached (Spark's Ivy resolves them at start)."""
    return [j for j in settings.spark_jars.split(",") if j] or _maven_jars() or _ivy_jars()


def delta_jars(jars: list[str]) -> list[str]:
    """The Delta Lake jars among ``jars``, named as Maven names them (``delta-spark_2.13-
    4.3.1.jar``) or as Ivy's cache does (``io.delta_delta-spark_2.13-4.3.1.jar``)."""
    return [j for j in jars if Path(j).name.removeprefix("io.delta_").startswith("delta-")]


def _maven_jars() -> list[str]:
    if not MAVEN_JARS_DIR.is_dir():
        return []
    return sorted(str(p) for p in MAVEN_JARS_DIR.glob("*.jar"))


def _s3a_listing() -> Path:
    return IVY_DIR / f"hadoop-aws-{hadoop_version()}-jars.txt"


def s3a_jars() -> list[str]:
    """The cached S3A jars (``fetch-jars``): Maven's folder, else Ivy's listing; [] if
    they are not (all) there."""
    maven = MAVEN_JARS_DIR / "hadoop-aws"
    if maven.is_dir() and list(maven.glob("hadoop-aws-*.jar")):
        return sorted(str(p) for p in maven.glob("*.jar"))
    listing = _s3a_listing()
    if not listing.exists():
        return []
    jars = listing.read_text().split()
    return jars if jars and all(Path(j).exists() for j in jars) else []


def _not_in_spark(jars: list[str], *, ivy: bool = True) -> list[str]:
    """``jars`` without the artifacts pyspark already ships (netty, httpclient, slf4j ...:
    Spark's own copy is loaded first anyway; a second, older one only adds confusion).
    ``ivy``: the names are Ivy's ``<organisation>_<artifact>-<revision>.jar``."""
    import re

    import pyspark

    def artifact(path: str, org_prefix: bool) -> str:
        name = path.rsplit("/", 1)[-1]
        if org_prefix:
            name = name.split("_", 1)[-1]
        return re.sub(r"-\d[\w.\-]*\.jar$", "", name)

    shipped = {artifact(p.name, False) for p in
               (Path(pyspark.__file__).resolve().parent / "jars").glob("*.jar")}
    shipped.add("commons-logging")  # Spark has jcl-over-slf4j instead
    return [j for j in jars if artifact(j, ivy) not in shipped]


def uses_object_store(settings: Settings) -> bool:
    """Whether the lake, the landing, a declared source or a Spark setting names S3A."""
    from lakecep.config import is_uri
    from lakecep.sources import SourceError, load_sources, sources_dir

    places = [settings.lake_dir, settings.landing_dir]
    try:
        places += [s.path for s in load_sources(sources_dir(settings))]
    except SourceError:  # reported by the job that reads the sources, with its hint
        pass
    return (any(is_uri(p) and str(p).lower().startswith("s3") for p in places)
            or any(".s3a." in k for k in settings.spark_conf))


def cds_archive() -> Path:
    """The class-data-sharing archive for this Spark installation (it may not exist yet).

    Keyed by the installation's jar folder: the JVM only accepts an archive made with the
    same class path (and ignores one that does not fit, e.g. after a JDK change).
    """
    import hashlib

    import pyspark

    jars = str(Path(pyspark.__file__).resolve().parent / "jars")
    key = hashlib.sha256(f"{pyspark.__version__} {jars}".encode()).hexdigest()[:16]
    return CDS_DIR / f"spark-{pyspark.__version__}-{key}.jsa"


def _driver_java_options(settings: Settings, dump_archive: Path | None = None) -> str:
    options = [f"-Dderby.system.home={settings.home}",
               f"-Dlog4j.configurationFile=file:{LOG4J_CONFIG}",
               f"-Dlakecep.spark.log.level={settings.spark_log_level}"]
    if settings.spark_quick_start:
        options.append(QUICK_START_OPTIONS)
        archive = cds_archive()
        if dump_archive is not None:
            options.append(f"-XX:ArchiveClassesAtExit={dump_archive}")
        elif archive.is_file():
            options.append(f"-XX:SharedArchiveFile={archive}")
        # CDS notes (an archive that does not fit, classes it skips) are not for the user.
        options.append("-Xlog:cds=off,cds+dynamic=off")
    return " ".join(options)


def get_spark(app_name: str = "lakecep", settings: Settings | None = None, *,
              extra_conf: Mapping[str, str] | None = None,
              object_store: bool | None = None,
              _dump_archive: Path | None = None) -> SparkSession:
    """Return the (single) SparkSession of this process, configured for Delta.

    ``extra_conf``: more Spark settings on top of lakecep's (the Connect server's plugin
    and address, ``jobs/connect.py``). ``object_store``: put the S3A jars on the class
    path (None: when :func:`uses_object_store`; a long-lived session that may meet an
    ``s3a://`` lake later, e.g. the tests', says True: the jars must be there at start)."""
    from pyspark.sql import SparkSession

    settings = settings or load_settings()
    # Python workers (pandas UDFs) must use this interpreter and its packages.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = (
        SparkSession.builder.appName(app_name)
        .master(settings.spark_master)
        .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
        .config(
            "spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog"
        )
        .config("spark.sql.shuffle.partitions", str(settings.spark_shuffle_partitions))
        .config("spark.default.parallelism", str(settings.spark_shuffle_partitions))
        .config("spark.driver.memory", settings.spark_driver_memory)
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.databricks.delta.snapshotPartitions", "2")
        # VACUUM lists a table's files with this many tasks (Spark's default, 10,000, made
        # each of `lakecep maintain`'s VACUUMs a 10,000-task job on a 2-core machine)
        .config("spark.sql.sources.parallelPartitionDiscovery.parallelism",
                str(settings.spark_shuffle_partitions))
        .config("spark.databricks.delta.schema.autoMerge.enabled", "false")
        .config("spark.sql.warehouse.dir", str(settings.home / "warehouse"))
        .config("spark.driver.extraJavaOptions", _driver_java_options(settings, _dump_archive))
    )
    jars = cached_jars(settings)
    packages = [] if jars else list(PACKAGES)
    if object_store is None:
        object_store = uses_object_store(settings)
    if object_store and not settings.spark_jars:
        cached = s3a_jars()
        if cached:
            jars += cached
        else:  # resolved now (and cached by Ivy)
            packages += s3a_packages()
            builder = builder.config("spark.jars.excludes", S3A_EXCLUDES)
    if jars:
        builder = builder.config("spark.jars", ",".join(jars))
    if packages:
        builder = builder.config("spark.jars.packages", ",".join(packages)).config(
            "spark.jars.ivy", str(IVY_DIR)
        )
    if settings.spark_master.startswith("local"):
        # No adaptive query execution in local mode: AQE re-plans every gold plan at each
        # shuffle boundary and runs each stage as its own job, for micro-batches of
        # kilobytes (test_incremental_gold: 688 Spark jobs, 330 s with it; 421, 173 s
        # without). Its gains (coalescing partitions, skew joins) need a cluster's data:
        # at 1M events on local[2] the whole pipeline was no slower without it (gold
        # 124.8 -> 117.0 s; benchmarks/README.md). A cluster master keeps Spark's default.
        builder = builder.config("spark.sql.adaptive.enabled", "false")
    scheduler = _pool_file(settings)
    if scheduler:  # the tuned configuration's per-query pools (docs/tuning.md)
        builder = builder.config("spark.scheduler.mode", "FAIR").config(
            "spark.scheduler.allocation.file", scheduler)
    for key, value in {**settings.spark_conf, **(extra_conf or {})}.items():
        builder = builder.config(key, value)  # the user's spark.* settings win over lakecep's
    spark = builder.getOrCreate()
    # Hadoop settings also at run time, as the session's own: a session that was already
    # running (a test's, an embedding application's) ignores spark.hadoop.* from the
    # builder, but every file system it opens reads the session's settings.
    for key, value in settings.spark_conf.items():
        if key.startswith("spark.hadoop."):
            spark.conf.set(key.removeprefix("spark.hadoop."), value)
    spark.sparkContext.setLogLevel(settings.spark_log_level.upper())
    return spark


def _pool_file(settings: Settings) -> str | None:
    """FAIR scheduler file of the newest tuned configuration, if any (a configuration that
    cannot be read is reported by the job that applies it, not here)."""
    from lakecep.tuning import TuningError, load_latest

    try:
        config = load_latest(settings)
    except TuningError:
        return None
    path = (config or {}).get("gold", {}).get("scheduler_file")
    return path if path and Path(path).exists() else None


def fetch_jars() -> None:
    """Cache the Delta jars (:func:`_fetch_jars`) and the S3A jars (:func:`_fetch_s3a_jars`),
    then the driver's CDS archive.

    One fetch at a time per cache: two set-ups at once (two checkouts' bootstraps, two CI
    jobs) would download the same Ivy files together and read each other's half-written
    jars, so the second waits for the first's lock and then finds the jars cached.
    """
    import fcntl

    IVY_DIR.parent.mkdir(parents=True, exist_ok=True)
    with open(IVY_DIR.parent / ".fetch-jars.lock", "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(f"another fetch-jars holds {lock.name}: waiting for it", flush=True)
            fcntl.flock(lock, fcntl.LOCK_EX)
        _fetch_jars()
        _fetch_s3a_jars()
        write_cds_archive()


def _maven_copy(pom: Path, folder: Path) -> None:
    """``mvn dependency:copy-dependencies`` of ``pom`` into ``folder``, whole or not at all:
    Maven copies into a sibling folder that replaces the jars of ``folder`` only once every
    jar is there (a failed copy used to leave a part of them, which later runs took for a
    complete cache)."""
    import shutil
    import tempfile

    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=folder.parent))
    try:
        subprocess.run(
            ["mvn", "-q", "-f", str(pom), "dependency:copy-dependencies",
             f"-DoutputDirectory={staging}", "-DincludeScope=runtime"],
            check=True,
        )
        folder.mkdir(exist_ok=True)
        for jar in staging.glob("*.jar"):
            jar.replace(folder / jar.name)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _fetch_s3a_jars() -> None:
    """Cache the S3A connector's jars (:func:`s3a_packages`): Spark's Ivy, else Maven with
    ``infra/pom-hadoop-aws.xml``. Its listing drops what pyspark ships (:func:`_not_in_spark`)."""
    if s3a_jars():
        print(f"S3A jars cached ({len(s3a_jars())} jars, Hadoop {hadoop_version()})")
        return
    listing = _s3a_listing()
    packages = ",".join(s3a_packages())
    probe = (
        "import sys; from pyspark.sql import SparkSession; "
        "s = SparkSession.builder.master('local[1]').appName('lakecep-fetch-s3a-jars')"
        f".config('spark.jars.packages', {packages!r})"
        f".config('spark.jars.excludes', {S3A_EXCLUDES!r})"
        f".config('spark.jars.ivy', {str(IVY_DIR)!r}).getOrCreate(); "
        "jars = s.sparkContext.getConf().get('spark.jars', ''); s.stop(); "
        "print('\\n'.join(j.removeprefix('file://') for j in jars.split(',') if j))"
    )
    print(f"resolving {packages} through Ivy into {IVY_DIR}")
    IVY_DIR.mkdir(parents=True, exist_ok=True)
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    jars = _not_in_spark(result.stdout.split()) if result.returncode == 0 else []
    if jars and all(Path(j).exists() for j in jars):
        listing.write_text("\n".join(jars) + "\n")
        print(f"{len(jars)} S3A jars cached, listed in {listing}")
        return
    print(f"Ivy could not fetch the S3A jars ({result.stderr.strip()[-500:]}); trying Maven "
          f"with {S3A_POM.name}", file=sys.stderr)
    if not S3A_POM.is_file():
        sys.exit(f"error: no {S3A_POM} (the Maven fallback needs a source checkout)")
    folder = MAVEN_JARS_DIR / "hadoop-aws"
    _maven_copy(S3A_POM, folder)
    for jar in set(folder.glob("*.jar")) - {Path(j) for j in _not_in_spark(
            [str(p) for p in folder.glob("*.jar")], ivy=False)}:
        jar.unlink()
    print(f"S3A jars copied to {folder}")


def write_cds_archive() -> None:
    """Write :func:`cds_archive` once: a short Delta session records the classes it loads.

    Best effort: without an archive sessions start as before, only slower.
    """
    archive = cds_archive()
    if archive.is_file():
        print(f"class-data-sharing archive {archive}")
        return
    import tempfile

    CDS_DIR.mkdir(parents=True, exist_ok=True)
    partial = archive.with_suffix(f".{os.getpid()}.tmp")
    with tempfile.TemporaryDirectory(prefix="lakecep-cds-") as home:
        probe = (
            "import sys; from pathlib import Path; "
            "from lakecep.jobs.spark import _archive_workload; "
            "_archive_workload(Path(sys.argv[1]), Path(sys.argv[2]))"
        )
        env = {**os.environ, "LAKECEP_HOME": home}
        result = subprocess.run([sys.executable, "-c", probe, home, str(partial)], env=env,
                                capture_output=True, text=True)
    if result.returncode == 0 and partial.is_file():
        partial.replace(archive)
        print(f"class-data-sharing archive written: {archive}")
    else:
        partial.unlink(missing_ok=True)
        print(f"no class-data-sharing archive (sessions start slower):\n{result.stderr[-2000:]}",
              file=sys.stderr)


def _archive_workload(home: Path, archive: Path) -> None:
    """What a lakecep job does at start, in a session that dumps its classes at exit."""
    settings = load_settings({"LAKECEP_HOME": str(home), "LAKECEP_SPARK_QUICK_START": "true"})
    spark = get_spark("lakecep-cds-archive", settings, _dump_archive=archive)
    table = str(home / "probe")
    spark.range(100).selectExpr("id", "CAST(id AS STRING) AS s").write.format("delta").save(table)
    frame = spark.read.format("delta").load(table)
    frame.mapInPandas(lambda frames: frames, frame.schema).groupBy("s").count().collect()
    spark.stop()


def _fetch_jars() -> None:
    """Make sure the jars of :data:`PACKAGES` are cached: try Spark's Ivy, else Maven
    (infra/pom.xml)."""
    if _maven_jars():
        print(f"using Maven-fetched jars in {MAVEN_JARS_DIR}")
        if not any("spark-sql-kafka" in Path(j).name for j in _maven_jars()):
            print(f"warning: no spark-sql-kafka jar in {MAVEN_JARS_DIR} (fetched with an older "
                  "infra/pom.xml): empty the folder and run fetch-jars again to read Kafka "
                  "sources", file=sys.stderr)
        return
    if _ivy_jars():
        print(f"cached in {IVY_DIR}")
        return
    listing = _resolved_jars_file()
    probe = (
        "from lakecep.jobs.spark import get_spark; s = get_spark('lakecep-fetch-jars'); "
        "s.range(1).collect(); "
        "jars = s.sparkContext.getConf().get('spark.jars', ''); s.stop(); "
        "print('\\n'.join(j.removeprefix('file://') for j in jars.split(',') if j), "
        f"file=open({str(listing)!r}, 'w'))"
    )
    print(f"resolving {', '.join(PACKAGES)} through Ivy into {IVY_DIR}")
    IVY_DIR.mkdir(parents=True, exist_ok=True)
    result = subprocess.run([sys.executable, "-c", probe])
    if result.returncode == 0 and _ivy_jars():
        print(f"{len(_ivy_jars())} jars cached, listed in {listing}")
        return
    listing.unlink(missing_ok=True)
    print("Ivy could not fetch the Delta jars; trying Maven with infra/pom.xml", file=sys.stderr)
    if not POM.is_file():
        sys.exit(f"error: no {POM} (the Maven fallback needs a source checkout of lakecep)")
    _maven_copy(POM, MAVEN_JARS_DIR)
    print(f"jars copied to {MAVEN_JARS_DIR}")


if __name__ == "__main__":
    if sys.argv[1:] != ["fetch-jars"]:
        sys.exit("usage: python -m lakecep.jobs.spark fetch-jars")
    fetch_jars()
