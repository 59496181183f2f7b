"""deltalab.session: master URLs and settings without Spark, then the suite's real session (one per
process: get_spark, temporary_conf, quiet errors) and a session that cannot start, in a fresh process."""

from __future__ import annotations

import os

import pytest

from deltalab import DeltaLabError, get_spark
from deltalab.session import SHORT_RUN_JAVA_OPTIONS, _on_loopback, check_driver_memory, default_conf, resolve_master
from process_testing import run_python


# --- master URLs and settings: no Spark -------------------------------------------------------

@pytest.mark.parametrize("url", ["local", "local[*]", "local[2]", "local[4,2]", "local-cluster[1,1,1024]", "yarn"])
def test_valid_local_masters(url):
    assert resolve_master(url) == url


def test_default_master_and_env(monkeypatch):
    monkeypatch.delenv("SPARK_MASTER", raising=False)
    assert resolve_master() == "local[*]"
    monkeypatch.setenv("SPARK_MASTER", "local[1]")
    assert resolve_master() == "local[1]"


@pytest.mark.parametrize("url", ["lcoal[*]", "local[0]", "spark://nohostport", "http://127.0.0.1:7077"])
def test_malformed_master_is_refused(url):
    with pytest.raises(DeltaLabError, match="is not a Spark master URL"):
        resolve_master(url)


def test_unreachable_standalone_master(monkeypatch):
    monkeypatch.setenv("SPARK_MASTER", "spark://127.0.0.1:9")
    with pytest.raises(DeltaLabError, match=r"No Spark master answers at spark://127.0.0.1:9 \(from SPARK_MASTER\)"):
        resolve_master()


@pytest.mark.parametrize("url, on_this_machine", [
    ("spark://127.0.0.1:7077", True), ("spark://localhost:7077,127.0.0.1:7078", True),
    ("spark://10.0.0.5:7077", False), ("spark://127.0.0.1:7077,spark-master:7077", False), ("local[*]", False),
])
def test_executors_of_a_cluster_on_this_machine_get_the_short_run_java_options(tmp_path, url, on_this_machine):
    """They share the machine's cores with the driver; a remote cluster's executors keep Java's defaults."""
    conf = default_conf([], tmp_path, local=url.startswith("local"), executors_share_this_machine=_on_loopback(url))
    assert SHORT_RUN_JAVA_OPTIONS in conf["spark.driver.extraJavaOptions"]
    assert conf.get("spark.executor.extraJavaOptions") == (SHORT_RUN_JAVA_OPTIONS if on_this_machine else None)


@pytest.mark.parametrize("memory", ["1g", "1024m", "1536M", "2G", "10g", "1t"])
def test_heap_sizes_a_course_driver_starts_with(memory):
    assert check_driver_memory(f" {memory} ") == memory


@pytest.mark.parametrize("memory", [
    "1024",    # bytes, to Java's -Xmx
    "3gb",     # Spark's form, not Java's
    "512m",    # below what the course is checked at
    "2 GB", "0g", "lots", "1.5g",
])
def test_a_driver_heap_that_would_not_start_is_named_with_where_it_came_from(tmp_path, monkeypatch, memory):
    monkeypatch.setenv("DELTALAB_DRIVER_MEMORY", memory)
    with pytest.raises(DeltaLabError, match=r"\(from DELTALAB_DRIVER_MEMORY\) is not a heap size") as error:
        default_conf([], tmp_path)
    assert "at least 1g" in error.value.fix and "the default here: 2g" in error.value.fix


def test_an_empty_driver_heap_setting_means_the_default(tmp_path, monkeypatch):
    monkeypatch.setenv("DELTALAB_DRIVER_MEMORY", "")
    assert default_conf([], tmp_path)["spark.driver.memory"] == "2g"


def test_was_interrupted_follows_the_context_of_an_error() -> None:
    from deltalab.session import was_interrupted

    def raised_while_handling_an_interrupt() -> BaseException:
        try:
            try:
                raise KeyboardInterrupt
            finally:
                raise ConnectionError("Answer from Java side is empty")
        except ConnectionError as error:
            return error

    assert was_interrupted(KeyboardInterrupt())
    assert was_interrupted(raised_while_handling_an_interrupt())
    assert not was_interrupted(ValueError("no interrupt"))
    assert not was_interrupted(None)


# --- the session ------------------------------------------------------------------------------

def test_session_is_delta_enabled_quiet_and_small(spark):
    conf = spark.sparkContext.getConf()
    assert conf.get("spark.sql.extensions") == "io.delta.sql.DeltaSparkSessionExtension"
    assert conf.get("spark.ui.enabled") == "false"
    assert spark.conf.get("spark.sql.shuffle.partitions") == "4"
    assert spark.conf.get("spark.sql.adaptive.enabled") == "false"
    assert spark.conf.get("spark.sql.codegen.factoryMode") == "NO_CODEGEN"
    jvm_arguments = list(spark._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments())
    for option in SHORT_RUN_JAVA_OPTIONS.split():   # the driver's JVM really started with them
        assert option in jvm_arguments, (option, jvm_arguments)
    assert spark.sparkContext.master == "local[*]"
    assert "_spark-warehouse" in spark.conf.get("spark.sql.warehouse.dir")


def test_one_session_per_kernel(spark):
    assert get_spark("another-name") is spark
    again = get_spark(**{"spark.sql.shuffle.partitions": "3"})
    assert again is spark and spark.conf.get("spark.sql.shuffle.partitions") == "3"
    spark.conf.set("spark.sql.shuffle.partitions", "4")


def test_static_setting_on_running_session_is_explained(spark):
    with pytest.raises(DeltaLabError, match="spark.driver.memory can only be set when the session starts"):
        get_spark(**{"spark.driver.memory": "7g"})
    with pytest.raises(DeltaLabError, match="cannot switch to local\\[1\\]"):
        get_spark(master="local[1]")


def test_runtime_sql_errors_print_no_java_stack_trace(spark):
    """PySpark 4 logs a JSON record with the whole Java stack trace (logger SQLQueryContextLogger)
    before raising errors that carry a query context; get_spark keeps that record out of notebooks."""
    import logging

    from pyspark.logger import PySparkLogger

    records: list[logging.LogRecord] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    logger = PySparkLogger.getLogger("SQLQueryContextLogger")
    handler = Collect()
    logger.addHandler(handler)
    try:
        with pytest.raises(Exception) as caught:
            spark.sql("SELECT CAST('twelve' AS BIGINT) AS n").collect()
    finally:
        logger.removeHandler(handler)
    assert "CAST_INVALID_INPUT" in str(caught.value)
    assert not records, f"PySpark logged {len(records)} record(s): {records[0].getMessage()[:200]}"


def test_temporary_conf_puts_back_what_was_there(spark):
    from deltalab import temporary_conf

    unset_key, set_key = "spark.databricks.delta.schema.autoMerge.enabled", "spark.sql.shuffle.partitions"
    assert spark.conf.get(unset_key, None) is None
    before = spark.conf.get(set_key)
    with temporary_conf(spark, {unset_key: "true", set_key: "7"}):
        assert (spark.conf.get(unset_key), spark.conf.get(set_key)) == ("true", "7")
    assert spark.conf.get(unset_key, None) is None, "a setting that was unset is unset again"
    assert spark.conf.get(set_key) == before
    with pytest.raises(RuntimeError):
        with temporary_conf(spark, {unset_key: "true"}):
            raise RuntimeError("the block failed")
    assert spark.conf.get(unset_key, None) is None, "also when the block raises"


# --- a bad setup, in a fresh process ----------------------------------------------------------

def test_no_java_stops_before_spark_with_one_message(tmp_path):
    env = dict(os.environ, PATH=str(tmp_path), DELTALAB_WORKDIR=str(tmp_path / "work"))
    env.pop("JAVA_HOME", None)
    completed = run_python("from deltalab import get_spark; get_spark()", env)
    assert completed.returncode != 0
    assert "No Java runtime found" in completed.stderr
    assert "environment.yml" in completed.stderr
    assert "py4j" not in completed.stderr.lower() and "at org.apache" not in completed.stderr


@pytest.mark.parametrize("master, max_failures, attempts", [
    ("local[*]", None, 1), ("local[2]", "8", 1), ("local[2,3]", None, 3), ("local", None, 1),
    ("spark://127.0.0.1:7077", None, 4), ("spark://127.0.0.1:7077", "2", 2),
])
def test_a_failing_task_is_tried_once_locally_and_retried_on_a_cluster(master, max_failures, attempts):
    from deltalab.session import attempts_on

    assert attempts_on(master, max_failures) == attempts


def test_the_suites_local_session_tries_a_task_once(spark):
    from deltalab.session import task_attempts

    assert task_attempts(spark) == 1
