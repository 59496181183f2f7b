"""One quiet, Delta-enabled Spark session per kernel, and the handles into it the course needs.

* :func:`get_spark` starts (once) or returns the kernel's session; :func:`active_spark` finds
  the running one for helpers that take ``spark=None`` (:func:`running_spark`: or None);
* :func:`temporary_conf` sets session settings for one block;
* :func:`show_versions` prints what a notebook was checked with.

Delta's own classes in that session's JVM (``DeltaLog``, snapshots, transactions) are reached
through :mod:`deltalab.jvm`.
"""

from __future__ import annotations

import os
import platform
import re
import socket
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from deltalab.class_archive import archive_option
from deltalab.errors import DeltaLabError
from deltalab.gateway import java_version, session_stopped
from deltalab.jars import fetch_jars, session_jars
from deltalab.java import find_java
from deltalab.locations import work_root
from deltalab.versions import DELTA_JVM_VERSION, installed_version, spark_version

MASTER_ENV = "SPARK_MASTER"
DEFAULT_MASTER = "local[*]"
DRIVER_MEMORY_ENV = "DELTALAB_DRIVER_MEMORY"

DEFAULT_DRIVER_MEMORY = "2g"
#: A heap size for a local driver: a local session's spark.driver.memory reaches Java as -Xmx<value>
#: (Spark's launcher), so it takes Java's form, a whole number and m, g or t (no "b"; without a unit,
#: bytes). The message suggests m or g, the units a laptop's heap is given in; t is accepted too.
_MEMORY = re.compile(r"^([1-9]\d*)([mgt])$", re.IGNORECASE)
#: The smallest heap the course lets a driver start with: the course is checked at 1g (the
#: classroom's default) and 2g (everyone else's); Spark refuses a driver of less than about 450 MiB.
_SMALLEST_HEAP_MIB = 1024
_MIB = {"m": 1, "g": 1024, "t": 1024 * 1024}
_LOCAL = re.compile(r"^local(\[(\*|[1-9]\d*)(,[1-9]\d*)?\])?$")
_LOCAL_CLUSTER = re.compile(r"^local-cluster\[\d+,\d+,\d+\]$")
_STANDALONE = re.compile(r"^spark://([^:/,]+:\d+)(,[^:/,]+:\d+)*$")

#: Java options for the course's short runs on few cores, in drivers and in executors on this machine.
#: -XX:TieredStopAtLevel=1: compile with the JIT's quick first tier only; the optimising tier's
#: compiler threads compete with the course's small jobs for two cores (21 Delta operations: 28 s
#: instead of 32-34 s on an idle two-core machine).
#: -XX:ReservedCodeCacheSize=240m: with C1 only, Java's code cache shrinks from 240 MB to 48 MB,
#: and the course filled it: 45 MB after 30 Delta operations, full during notebook 10 (jcmd
#: Compiler.codecache: full_count=1). A full cache stops the JIT until it is swept, and a method
#: handle the JVM must link meanwhile can fail with java.lang.InternalError ("no such method:
#: MethodHandle.linkTo..."): the likely cause of the one that notebook 09b's foreachBatch MERGE
#: raised once in the image (not reproduced). 240 MB is what Java gives the tiered compilers.
#: -XX:+UseParallelGC: the throughput collector instead of G1, whose concurrent threads and heavier
#: write barriers cost more CPU than they save on a 2 GB heap (a fixed mix of 30 Delta operations,
#: 5 paired runs on two cores: 31 s and 45 s of JVM CPU instead of 35 s and 52 s).
#: -XX:GCTimeRatio=19: that collector may spend up to 5% of the time collecting (its default, 99, is
#: 1%), so it grows the heap far less to avoid collections: a classroom student running notebook 00
#: with a 1g heap, 749-767 MiB proportional instead of 989 (782-800 and 1,023 resident; two runs),
#: in the same 17-18 s;
#: notebooks 02 and 10 under nbval, four paired runs, 129 s either way (124-137 s).
SHORT_RUN_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=240m -XX:+UseParallelGC -XX:GCTimeRatio=19"

_session = None
#: Which jar sets (deltalab.jars) the kernel's session was started with.
JAR_SETS_KEY = "spark.deltalab.jarSets"


def check_driver_memory(value: str, origin: str = DRIVER_MEMORY_ENV, default: str = DEFAULT_DRIVER_MEMORY) -> str:
    """``value`` if it is a heap size a course driver can start with (``1g``, ``1536m``, ``4g``);
    otherwise one clear error naming ``origin`` and ``default``, instead of a JVM that does not
    start (``1024`` would be 1024 bytes to Java, ``2gb`` no size at all) or a Spark that refuses it."""
    match = _MEMORY.match(value.strip())
    if not match or int(match.group(1)) * _MIB[match.group(2).lower()] < _SMALLEST_HEAP_MIB:
        raise DeltaLabError(f"{value!r} (from {origin}) is not a heap size for the course's Spark driver",
                            f"give at least 1g as a whole number and a unit m or g, e.g. 1g, 1536m or 4g "
                            f"(without it, the default here: {default})")
    return value.strip()


def resolve_master(master: str | None = None) -> str:
    """The master URL to use: the argument, else ``$SPARK_MASTER``, else ``local[*]``.

    A URL Spark would not understand, or a standalone master that does not answer, is
    refused here with a clear message instead of a JVM stack trace or a long hang.
    """
    chosen = master or os.environ.get(MASTER_ENV) or DEFAULT_MASTER
    origin = "the master argument" if master else (MASTER_ENV if os.environ.get(MASTER_ENV) else "the default")
    fix = (
        "Use local[*] (all cores of this machine), local[N], or spark://HOST:PORT for a standalone "
        f"cluster; unset {MASTER_ENV} to run locally."
    )
    if _LOCAL.match(chosen) or _LOCAL_CLUSTER.match(chosen) or chosen == "yarn" or chosen.startswith("k8s://"):
        return chosen
    if not _STANDALONE.match(chosen):
        raise DeltaLabError(f"{chosen!r} (from {origin}) is not a Spark master URL.", fix=fix)
    addresses = chosen[len("spark://"):].split(",")
    for address in addresses:
        host, port = address.rsplit(":", 1)
        try:
            with socket.create_connection((host, int(port)), timeout=3):
                return chosen
        except OSError:
            continue
    raise DeltaLabError(
        f"No Spark master answers at {chosen} (from {origin}).",
        fix="Start the master and a worker first (docker/README.md shows how), check the host and port, "
        f"or unset {MASTER_ENV} to run locally.",
    )


def _on_loopback(master: str) -> bool:
    """Whether every host of a ``spark://`` master URL is this machine's loopback address."""
    if not master.startswith("spark://"):
        return False
    hosts = [address.rsplit(":", 1)[0] for address in master[len("spark://"):].split(",")]
    return all(host in ("127.0.0.1", "localhost") for host in hosts)


def _log4j_config() -> Path:
    return Path(__file__).with_name("log4j2.properties")


def default_conf(jars: list[Path], root: Path, local: bool = True, java_home: Path | None = None,
                 executors_share_this_machine: bool = False) -> dict[str, str]:
    """The settings every course session starts with; ``get_spark(**conf)`` overrides them.

    ``jars`` are Delta's jars that Spark does not ship (``deltalab.jars.session_jars``). On a
    local master they go on the driver's class path, where the executor (the same JVM) finds
    them too; ``spark.jars`` would make the executor copy each of them at start-up. A cluster's
    executors run elsewhere and get them through ``spark.jars``. A local driver started with
    ``java_home`` also maps the course's class-data archive when ``make setup`` built one for
    this class path and Java (:mod:`deltalab.class_archive`). Executors of a standalone cluster
    started on this machine (``executors_share_this_machine``) share its cores with the driver,
    so they start with the driver's :data:`SHORT_RUN_JAVA_OPTIONS` too; a remote cluster's
    executors keep Java's defaults.
    """
    java_options = (f"-Dlog4j2.configurationFile={_log4j_config().as_uri()} -Dderby.system.home={root / '_derby'} "
                    f"{SHORT_RUN_JAVA_OPTIONS}")
    if local and java_home is not None:
        java_options = f"{java_options} {archive_option(jars, java_home)}".strip()
    if local:
        classpath = {"spark.driver.extraClassPath": os.pathsep.join(str(jar) for jar in jars)}
    else:
        classpath = {"spark.jars": ",".join(str(jar) for jar in jars)}
    executors = {}
    if executors_share_this_machine:
        executors["spark.executor.extraJavaOptions"] = SHORT_RUN_JAVA_OPTIONS
    return {
        **classpath,
        **executors,
        "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
        "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
        # Small data on a laptop: few partitions after a shuffle, and for Delta's state reconstruction.
        "spark.sql.shuffle.partitions": "4",
        # No adaptive query execution: re-planning each query at its shuffles pays off on large data;
        # on the course's small tables it only costs time (a fixed mix of 30 Delta operations: 53-54 s
        # of driver CPU instead of 62-66 s). Without it a shuffle's output keeps its 4 partitions, so a
        # MERGE may write up to 4 small files where AQE would have coalesced them into one.
        "spark.sql.adaptive.enabled": "false",
        # Queries run by Spark's interpreter instead of Java code generated and compiled for them
        # (this also turns whole-stage code generation off). On the course's small tables generating
        # the code costs more than it saves: in a fixed mix of about 30 Delta operations a quarter of
        # the JVM's samples (Java Flight Recorder) were in GenerateUnsafeProjection, most of them in
        # the regular expressions that strip comments from the generated source before its cache is
        # even asked. Interpreted, the mix took 22-23 s instead of 30-31 s (JVM CPU 31-33 s instead
        # of 44 s), notebook 02 50 s instead of 62 s, `make test` 11:58 instead of 14:34 (both with
        # SHORT_RUN_JAVA_OPTIONS). The other way round on large data: writing, Z-ordering and
        # aggregating 3 million rows took 4-5 times as long. Two differences show: plans have no
        # `*(1)` marks, and a bad cast in a DataFrame write is reported as TASK_WRITE_FAILED
        # (the appendix notebook 00b shows both). So notebooks 06 (errors), 07 (plans) and 08 (large tables) ask
        # for Spark's default, "FALLBACK". Spark marks the setting internal; its own tests run both
        # modes.
        "spark.sql.codegen.factoryMode": "NO_CODEGEN",
        # Two input partitions whatever the core count, so every machine writes the same files.
        "spark.default.parallelism": "2",
        "spark.databricks.delta.snapshotPartitions": "2",
        # VACUUM lists the table folder with this many tasks (Spark's default, 10000, made one VACUUM
        # of a ten-file table take 80 s on two cores; 4 takes 2 s).
        "spark.sql.sources.parallelPartitionDiscovery.parallelism": "4",
        "spark.driver.memory": check_driver_memory(os.environ.get(DRIVER_MEMORY_ENV) or DEFAULT_DRIVER_MEMORY),
        # Quiet: no web UI, no progress bars, errors only in the log.
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.driver.extraJavaOptions": java_options,
        # Nothing written next to the notebook: tables created by name go to the work root.
        "spark.sql.warehouse.dir": str(root / "_spark-warehouse"),
        # Same timestamps on every machine.
        "spark.sql.session.timeZone": "UTC",
        "spark.pyspark.python": sys.executable,
    }


@contextmanager
def _jvm_output_to(log_path: Path) -> Iterator[None]:
    """Point file descriptors 1 and 2 at a log file while the JVM starts.

    The JVM and the Python workers it spawns inherit those descriptors, so their warnings go to
    the log instead of the notebook's cells (ipykernel forwards descriptor output into cells).
    """
    log_path.parent.mkdir(parents=True, exist_ok=True)
    sys.stdout.flush()
    sys.stderr.flush()
    saved = (os.dup(1), os.dup(2))
    with log_path.open("ab") as log:
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])


def _tail(path: Path, lines: int = 8) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def _reuse(spark, master: str | None, jar_sets: tuple[str, ...], conf: dict[str, str]):
    running = spark.sparkContext.master
    if master is not None and resolve_master(master) != running:
        raise DeltaLabError(
            f"This kernel already runs a Spark session on {running}; it cannot switch to {master}.",
            fix="Restart the kernel to start a session on another master.",
        )
    loaded = spark.conf.get(JAR_SETS_KEY, "delta").split(",")
    missing = [name for name in jar_sets if name not in loaded]
    if missing:
        raise DeltaLabError(
            f"This kernel's session was started without the {', '.join(missing)} jars.",
            fix=f"Restart the kernel, then call get_spark(..., jar_sets={tuple(dict.fromkeys(('delta', *jar_sets)))!r}) first.",
        )
    for key, value in conf.items():
        if spark.conf.get(key, None) == str(value):
            continue
        try:
            spark.conf.set(key, str(value))
        except Exception:  # noqa: BLE001 - Spark raises several types for static settings
            raise DeltaLabError(
                f"{key} can only be set when the session starts, and this kernel's session is already running.",
                fix="Restart the kernel, then call get_spark(...) with that setting first.",
            ) from None
    return spark


def get_spark(app_name: str = "deltalab", master: str | None = None, jar_sets: tuple[str, ...] = ("delta",),
              **conf: str):
    """Return the kernel's Delta-enabled SparkSession, starting it on first use.

    The session runs on ``local[*]`` unless ``master`` or ``$SPARK_MASTER`` names another,
    loads Delta's jars from the local cache (downloading them once if needed), keeps its logs
    out of the notebook, and is the same object on every later call in the kernel. Extra
    settings are passed as keyword arguments, e.g. ``get_spark("x", **{"spark.sql.shuffle.partitions": "8"})``;
    ``jar_sets=("delta", "s3")`` also loads the S3A jars (``deltalab.jars.jar_set``).
    """
    global _session
    from pyspark.sql import SparkSession

    _quiet_query_context_loggers()
    active = _session if _session is not None else SparkSession.getActiveSession()
    if active is not None and not session_stopped(active):
        _session = active
        return _reuse(active, master, jar_sets, conf)

    resolved_master = resolve_master(master)
    java = find_java()
    root = work_root()
    names = tuple(dict.fromkeys(("delta", *jar_sets)))
    jars = [jar for name in names for jar in session_jars(fetch_jars(name))]
    settings = default_conf(jars, root, local=resolved_master.startswith("local"), java_home=java.home,
                            executors_share_this_machine=_on_loopback(resolved_master))
    settings[JAR_SETS_KEY] = ",".join(names)
    settings.update({key: str(value) for key, value in conf.items()})

    os.environ["JAVA_HOME"] = str(java.home)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    if resolved_master.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

    builder = SparkSession.builder.master(resolved_master).appName(app_name)
    for key, value in settings.items():
        builder = builder.config(key, value)
    log_path = root / "_logs" / f"{re.sub(r'[^A-Za-z0-9_.-]', '_', app_name)}.log"
    try:
        with _jvm_output_to(log_path):
            spark = builder.getOrCreate()
    except Exception as error:  # noqa: BLE001 - PySpark raises a generic error when the JVM dies
        raise DeltaLabError(
            f"Spark did not start ({type(error).__name__}). The last lines of its log ({log_path}):\n{_tail(log_path)}",
            fix="Run `python -m deltalab doctor` and fix what it reports; check the settings you passed to get_spark().",
        ) from None
    spark.sparkContext.setLogLevel("ERROR")
    _cancel_jobs_when_a_cell_is_interrupted(spark)
    _session = spark
    return spark


def _cancel_jobs_when_a_cell_is_interrupted(spark) -> None:
    """In a Jupyter kernel, cancel the session's Spark jobs when a cell ends by an interrupt.

    The stop button makes Python raise ``KeyboardInterrupt``, but the job the cell started
    goes on in the JVM: ipykernel replaces PySpark's own SIGINT handler (which would cancel
    the jobs) while a cell runs. After a cell that ended by ``KeyboardInterrupt``, this cancels
    every job, so the kernel is free for the next cell. Outside IPython it does nothing.
    """
    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    if shell is None:
        return

    def after_cell(result) -> None:
        error = getattr(result, "error_in_exec", None)
        if not was_interrupted(error):
            return
        try:
            spark.sparkContext.cancelAllJobs()
        except Exception:  # noqa: BLE001 - a stopped session has nothing to cancel
            return
        if not isinstance(error, KeyboardInterrupt):
            print(
                f"Interrupted: the {type(error).__name__} above came from PySpark's link to the JVM, "
                "cut while it waited for the job. deltalab cancelled the cell's Spark jobs; "
                "the session still works, run the next cell.",
                file=sys.stderr,
            )

    shell.events.register("post_run_cell", after_cell)


def was_interrupted(error: BaseException | None) -> bool:
    """Whether ``error`` is a ``KeyboardInterrupt`` or was raised while one was being handled.

    An interrupt that lands while PySpark waits for an answer from the JVM can end the cell
    with a Py4J network error raised by PySpark's clean-up of the interrupted call instead;
    the ``KeyboardInterrupt`` is then that error's context.
    """
    while error is not None:  # Python breaks cycles when it sets __context__
        if isinstance(error, KeyboardInterrupt):
            return True
        error = error.__context__
    return False


QUERY_CONTEXT_LOGGERS = ("SQLQueryContextLogger", "DataFrameQueryContextLogger")


def _quiet_query_context_loggers() -> None:
    """Keep PySpark from printing a JSON record with a Java stack trace for some errors.

    PySpark 4 logs every captured exception that carries a query context (CAST_INVALID_INPUT,
    DIVIDE_BY_ZERO, overflows, ...) to stderr before raising it. The exception that follows
    says the same in one line, so the record is only noise in a notebook cell.
    """
    import logging

    from pyspark.logger import PySparkLogger

    for name in QUERY_CONTEXT_LOGGERS:
        # created through PySparkLogger, whose exception() takes the keyword arguments PySpark passes
        PySparkLogger.getLogger(name).setLevel(logging.CRITICAL)


@contextmanager
def temporary_conf(spark, settings: dict[str, str]) -> Iterator[None]:
    """Set session settings for the ``with`` block, then put back what was there before.

    A setting that was unset before is unset again (not set to its default), so a lesson that
    switches on, say, ``spark.databricks.delta.schema.autoMerge.enabled`` for one write cannot
    leak it into the rest of the notebook, even if the write fails.
    """
    previous = {key: spark.conf.get(key, None) for key in settings}
    try:
        for key, value in settings.items():
            spark.conf.set(key, str(value))
        yield
    finally:
        for key, value in previous.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)


def running_spark():
    """The session running in this process (the kernel's), or None."""
    from pyspark.sql import SparkSession

    return _session if _session is not None else SparkSession.getActiveSession()


def task_attempts(spark) -> int:
    """How many times Spark runs a task that fails before it fails the job (:func:`attempts_on`).

    Each attempt of a failing write task leaves its own file behind, so a lesson that counts a
    failed write's files depends on it.
    """
    return attempts_on(spark.sparkContext.master, spark.sparkContext.getConf().get("spark.task.maxFailures", None))


def attempts_on(master: str, max_failures: str | None = None) -> int:
    """The attempts a failing task gets on ``master``: local mode tries once (``local[N]``), or ``F``
    times for ``local[N,F]``; a cluster up to ``spark.task.maxFailures`` (``max_failures``, 4 by default)."""
    if master.startswith("local"):
        with_failures = re.match(r"^local\[[^,\]]+,(\d+)\]$", master)
        return int(with_failures.group(1)) if with_failures else 1
    return int(max_failures or 4)


def active_spark(spark=None, what: str = "This call needs Spark"):
    """``spark`` if given, else the session running in this process; ``what`` names the caller
    in the error raised when there is none."""
    if spark is not None:
        return spark
    running = running_spark()
    if running is None:
        raise DeltaLabError(
            f"{what}, but no Spark session is running.",
            fix="Run the setup cell at the top of the notebook (spark = get_spark(...)) first, or pass spark=...",
        )
    return running


def added_jars(spark) -> list[str]:
    """The file names of the jars the course added to Spark's own, sorted.

    A local session has them on the driver's class path (``spark.driver.extraClassPath``), a
    cluster session ships them as ``spark.jars`` (:func:`default_conf`); this reads whichever
    the session was started with.
    """
    on_class_path = spark.conf.get("spark.driver.extraClassPath", None)
    if on_class_path:
        entries = on_class_path.split(os.pathsep)
    else:
        entries = (spark.conf.get("spark.jars", None) or "").split(",")
    return sorted(Path(entry).name for entry in entries if entry)


def versions_line(spark=None) -> str:
    """One line naming the Spark, Delta, Java and Python versions in use."""
    java = "unknown"
    if spark is not None:
        java = java_version(spark)
    else:
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
