"""Foundation tests that start Spark, JupyterLab or papermill: real sessions, real tables."""

from __future__ import annotations

import json
import re
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from course_testing import REPO, require
from deltalab import DeltaLabError, get_spark, workdir
from deltalab.jars import cached_jars
from deltalab.session import SHORT_RUN_JAVA_OPTIONS

PYTHON = sys.executable


def _run_python(code: str, env: dict[str, str], offline: bool = False, timeout: int = 600) -> subprocess.CompletedProcess:
    """Run Python code in a new process; with ``offline``, in a network namespace with only loopback."""
    command = [PYTHON, "-c", code]
    if offline:
        command = ["unshare", "-n", "sh", "-c", 'ip link set lo up && exec "$@"', "sh", *command]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=timeout)


def _can_unshare() -> bool:
    return shutil.which("unshare") is not None and subprocess.run(
        ["unshare", "-n", "true"], capture_output=True
    ).returncode == 0


# --- the session --------------------------------------------------------------------------

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


def test_workdir_recreated_table_reads_fresh(spark):
    path = str(workdir("foundation-recreate") / "t")
    spark.range(5).write.format("delta").save(path)
    assert spark.read.format("delta").load(path).count() == 5
    path = str(workdir("foundation-recreate") / "t")
    spark.range(3).write.format("delta").save(path)
    assert spark.read.format("delta").load(path).count() == 3


# --- bad setups, each in a fresh process ----------------------------------------------------

def test_no_java_stops_before_spark_with_one_message(tmp_path):
    env = dict(os.environ, PATH=str(tmp_path), DELTALAB_WORKDIR=str(tmp_path / "work"))
    env.pop("JAVA_HOME", None)
    completed = _run_python("from deltalab import get_spark; get_spark()", env)
    assert completed.returncode != 0
    assert "No Java runtime found" in completed.stderr
    assert "environment.yml" in completed.stderr
    assert "py4j" not in completed.stderr.lower() and "at org.apache" not in completed.stderr


def test_doctor_reports_every_check(tmp_path):
    env = dict(os.environ, DELTALAB_WORKDIR=str(tmp_path / "work"))
    completed = subprocess.run([PYTHON, "-m", "deltalab", "doctor"], capture_output=True, text=True, env=env, timeout=120)
    assert completed.returncode == 0, completed.stdout + completed.stderr
    for name in ("Python", "Java", "Packages", "Delta jars", "Network", "Work directory", "Spark master"):
        assert re.search(rf"^\[  ok\] {name}\b", completed.stdout, re.M), completed.stdout


def test_doctor_names_the_fix_for_a_missing_java_and_cache(tmp_path):
    env = dict(os.environ, PATH=f"{Path(PYTHON).parent}", DELTALAB_CACHE_DIR=str(tmp_path / "cache"), DELTALAB_WORKDIR=str(tmp_path / "work"))
    env.pop("JAVA_HOME", None)
    completed = subprocess.run([PYTHON, "-m", "deltalab", "doctor"], capture_output=True, text=True, env=env, timeout=120)
    assert completed.returncode == 1
    assert "[FAIL] Java" in completed.stdout and "fix: Install Java 17 or 21" in completed.stdout
    assert "[FAIL] Delta jars" in completed.stdout and "fetch-jars" in completed.stdout


def test_first_run_without_network_fails_clearly_and_leaves_no_cache(tmp_path):
    require(_can_unshare(), "unshare -n (network namespaces) is not available")
    cache = tmp_path / "cache"
    env = dict(os.environ, DELTALAB_CACHE_DIR=str(cache), DELTALAB_WORKDIR=str(tmp_path / "work"))
    completed = _run_python("from deltalab import get_spark; get_spark()", env, offline=True)
    assert completed.returncode != 0
    assert "could not be downloaded from Maven Central" in completed.stderr
    assert "needs the network once" in completed.stderr
    leftovers = [p.name for p in (cache / "jars").iterdir()] if (cache / "jars").exists() else []
    assert leftovers == [], f"nothing half-created in the jar cache, found {leftovers}"


def test_second_session_writes_delta_with_no_network(tmp_path):
    require(_can_unshare(), "unshare -n (network namespaces) is not available")
    assert cached_jars(), "make setup caches the jars before the suite runs"
    code = (
        "from deltalab import get_spark, workdir\n"
        "spark = get_spark('offline')\n"
        "path = str(workdir('offline') / 't')\n"
        "spark.range(7).write.format('delta').save(path)\n"
        "print('rows', spark.read.format('delta').load(path).count())\n"
    )
    env = dict(os.environ, DELTALAB_WORKDIR=str(tmp_path / "work"))
    started = time.monotonic()
    completed = _run_python(code, env, offline=True)
    assert completed.returncode == 0, completed.stderr[-2000:]
    assert "rows 7" in completed.stdout
    assert (tmp_path / "work" / "offline" / "t" / "_delta_log" / "00000000000000000000.json").exists()
    print(f"offline cold start to first Delta write: {time.monotonic() - started:.1f} s")


# --- papermill ----------------------------------------------------------------------------

def test_papermill_runs_hello_delta_with_parameters(tmp_path):
    import papermill

    output = tmp_path / "out.ipynb"
    papermill.execute_notebook(
        str(REPO / "notebooks" / "00_hello_delta.ipynb"), str(output),
        parameters={"rows": 37}, kernel_name="python3", cwd=str(REPO / "notebooks"), progress_bar=False,
    )
    text = output.read_text()
    assert "Read back 37 rows." in text
    assert "The log says the table has 37 rows" in text


def test_papermill_unknown_parameter_is_named(tmp_path):
    import papermill

    with pytest.raises(papermill.PapermillExecutionError) as error:
        papermill.execute_notebook(
            str(REPO / "notebooks" / "00_hello_delta.ipynb"), str(tmp_path / "out.ipynb"),
            parameters={"rowz": 37}, kernel_name="python3", cwd=str(REPO / "notebooks"), progress_bar=False,
        )
    assert "Unknown notebook parameter rowz" in str(error.value)


# --- make lab -----------------------------------------------------------------------------

def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _status(url: str, headers: dict[str, str] | None = None) -> int:
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code


def test_make_lab_requires_the_token(tmp_path):
    require(shutil.which("make") is not None, "make is not installed")
    port, token = _free_port(), "course-test-token"
    env = dict(os.environ, PORT=str(port), JUPYTER_TOKEN=token, DELTALAB_NO_BROWSER="1",
               JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime"), JUPYTER_CONFIG_DIR=str(tmp_path / "config"))
    server = subprocess.Popen(["make", "-s", "lab"], cwd=REPO, env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 180
        while True:
            try:
                if _status(f"{base}/api/status") in (200, 403):
                    break
            except OSError:
                pass
            assert time.monotonic() < deadline, "JupyterLab did not start within 180 s"
            assert server.poll() is None, "make lab exited early"
            time.sleep(1)
        assert _status(f"{base}/api/contents") == 403
        assert _status(f"{base}/api/contents", {"Authorization": f"token {token}"}) == 200
        assert _status(f"{base}/api/contents/notebooks/README.md?token={token}") == 200
    finally:
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGTERM)
            server.wait(timeout=30)



