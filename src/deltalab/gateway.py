"""PySpark's py4j gateway, for the modules that start and drive sessions.

:mod:`deltalab.session` and :mod:`deltalab.drivers` need a few answers from the JVM before any Delta
class is involved (is this session stopped, which Java runs it, may the JVM call Python back);
:mod:`deltalab.jvm` (Delta's classes), :mod:`deltalab.spark_jvm` (Spark's, Hadoop's and Java's) and
:mod:`deltalab.kernel` (Delta Kernel) sit above the session and ask everything else. Together they
are the only modules that reach into the JVM (``tests/test_package_layout.py`` keeps it so).
"""

from __future__ import annotations

from typing import Any, Callable

__all__ = ["java_method_call", "java_version", "session_stopped", "start_callback_server"]


def session_stopped(spark: Any) -> bool:
    """True once ``spark``'s SparkContext has stopped (``spark.stop()``, or its JVM is shutting down)."""
    return bool(spark.sparkContext._jsc.sc().isStopped())


def java_version(spark: Any) -> str:
    """The ``java.version`` of the JVM ``spark`` runs in."""
    return str(spark.sparkContext._jvm.java.lang.System.getProperty("java.version"))


def start_callback_server(spark: Any) -> None:
    """Let the JVM call Python objects back (a Python class that implements a Java interface),
    as PySpark itself does for streaming's ``foreachBatch``."""
    from pyspark.java_gateway import ensure_callback_server_started

    ensure_callback_server_started(spark.sparkContext._gateway)


def java_method_call() -> Callable[..., Any]:
    """The function py4j runs for every call of a JVM method from Python (``JavaMember.__call__``): a
    check that watches the calls a learner's function makes sees whether it asked the JVM."""
    from py4j.java_gateway import JavaMember

    return JavaMember.__call__
