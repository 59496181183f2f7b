"""The versions the course is pinned to, in one place.

The exact Python versions every route installs live in ``requirements.lock``; the constants
here are the ones code needs to know (doctor compares with them, a test checks they match the
lock). The JVM side cannot be installed by pip, so its versions are only here.
"""

from __future__ import annotations

from importlib import metadata

#: pyspark and delta-spark as pinned in requirements.lock (tests/test_versions.py checks it).
PINNED_PYTHON_PACKAGES = {"pyspark": "4.2.0", "delta-spark": "4.4.1"}

SCALA_BINARY_VERSION = "2.13"

# delta-spark 4.4.1 is on PyPI, but its JVM artifact was never published to Maven Central:
# io.delta:delta-spark_4.2_2.13 stops at 4.4.0 (checked 2026-11-22). The Python package only
# calls the JVM classes through Py4J, so the 4.4.1 Python API runs on the 4.4.0 jars.
# `configure_spark_with_delta_pip` as shipped asks for 4.4.1 and fails to resolve.
DELTA_JVM_VERSION = "4.4.0"

#: The AWS SDKs of the S3A jar set (deltalab.jars): v2 as hadoop-aws 3.5.0's POM names it
#: (hadoop-project's aws-java-sdk-v2.version), v1 for the DynamoDB client of Delta's DynamoDB
#: commit coordinator.
AWS_SDK_V2_VERSION = "2.35.4"
AWS_SDK_V1_VERSION = "1.12.797"

#: The Java major versions Spark 4.2 runs on.
SUPPORTED_JAVA_MAJORS = (17, 21)


def installed_version(distribution: str) -> str | None:
    """Return the installed version of a Python distribution, or None if it is absent."""
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def spark_version() -> str:
    """The installed PySpark version, e.g. ``4.2.0``."""
    import pyspark

    return pyspark.__version__


def delta_maven_coordinate() -> str:
    """The Maven coordinate of Delta's Spark jar for the installed PySpark.

    From Delta 4.1 on the artifact name carries Spark's major.minor version,
    e.g. ``io.delta:delta-spark_4.2_2.13:4.4.0``.
    """
    major_minor = ".".join(spark_version().split(".")[:2])
    return f"io.delta:delta-spark_{major_minor}_{SCALA_BINARY_VERSION}:{DELTA_JVM_VERSION}"


def hadoop_version() -> str:
    """The Hadoop version inside the installed PySpark (``3.5.0`` for 4.2.0), read from its jars."""
    import pyspark
    from pathlib import Path

    for jar in (Path(pyspark.__file__).parent / "jars").glob("hadoop-client-api-*.jar"):
        return jar.name.removeprefix("hadoop-client-api-").removesuffix(".jar")
    raise RuntimeError("pyspark ships no hadoop-client-api jar")
