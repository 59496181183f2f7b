"""The versions the course is pinned to, and how to print what a notebook ran with."""

from __future__ import annotations

import platform
from importlib import metadata

# Python package versions come from requirements.lock; these constants only describe the
# JVM side, which pip cannot install.
SCALA_BINARY_VERSION = "2.13"

# delta-spark 4.4.1 is on PyPI, but its JVM artifact was never published to Maven Central:
# io.delta:delta-spark_4.2_2.13 stops at 4.4.0 (checked 2026-11-22). The Python package only
# calls the JVM classes through Py4J, so the 4.4.1 Python API runs on the 4.4.0 jars.
# `configure_spark_with_delta_pip` as shipped asks for 4.4.1 and fails to resolve.
DELTA_JVM_VERSION = "4.4.0"

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


def versions_line(spark=None) -> str:
    """One line naming the Spark, Delta, Java and Python versions in use."""
    java = "unknown"
    if spark is not None:
        java = spark.sparkContext._jvm.java.lang.System.getProperty("java.version")
    else:
        from deltalab.java import find_java

        try:
            java = find_java().version
        except Exception:  # noqa: BLE001 - a version line must never fail
            pass
    delta_python = installed_version("delta-spark") or "not installed"
    return (
        f"Checked with: Spark {spark_version()}, Delta {delta_python} "
        f"(JVM jars {DELTA_JVM_VERSION}), Java {java}, Python {platform.python_version()}"
    )


def show_versions(spark=None) -> None:
    """Print the versions a notebook was checked with (the last cell of every notebook)."""
    print(versions_line(spark))
