"""The course on a Spark standalone cluster: notebook 02 runs unchanged against spark://.

Notebook 02 is the one with most to lose on a cluster: it starts a second application (the writer
it kills), writes deletion vectors and replays the log against what the executors read. What
notebook 00 adds (the jars a cluster session ships) is checked by the second script below.
A master and one worker are started on 127.0.0.1 from the pip package's ``bin/spark-class``
(the wheel has no start scripts), the notebook runs with papermill and
``SPARK_MASTER=spark://127.0.0.1:<port>``, and the test asserts that executors launched by the
worker ran the tasks: the master lists each notebook's application as finished with the worker
having given it cores, and the executor logs in the worker's work directory record finished
tasks. Both daemons are stopped by process id. With ``DELTALAB_CLUSTER_COMPARE=1`` the same
notebooks also run on ``local[*]`` and both times are printed.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from course_testing import require

REPO = Path(__file__).resolve().parents[1]
NOTEBOOKS = ["02_the_transaction_log"]
START_TIMEOUT = 120
NOTEBOOK_TIMEOUT = 900


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _json(url: str):
    with urllib.request.urlopen(url, timeout=5) as response:
        return json.load(response)


def _wait_for(what: str, check, process: subprocess.Popen, log: Path, timeout: float = START_TIMEOUT):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"{what} exited with {process.returncode}; its log ({log}):\n{log.read_text()[-3000:]}")
        try:
            result = check()
            if result:
                return result
        except (OSError, ValueError):  # not listening yet, or an empty page while it starts
            pass
        time.sleep(1)
    pytest.fail(f"{what} not ready after {timeout} s; its log ({log}):\n{log.read_text()[-3000:]}")


def _stop(process: subprocess.Popen) -> None:
    """Stop a daemon by its pid (SIGTERM, then SIGKILL), then anything left in its process group."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=30)
    try:  # executors the worker started, if any outlived it (the group is this test's own)
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _run_notebooks(names: list[str], out_dir: Path, env: dict[str, str]) -> dict[str, float]:
    seconds = {}
    for name in names:
        started = time.monotonic()
        result = subprocess.run(
            [sys.executable, "-m", "papermill", str(REPO / "notebooks" / f"{name}.ipynb"),
             str(out_dir / f"{name}.ipynb"), "-k", "python3", "--cwd", str(REPO / "notebooks"),
             "--no-progress-bar", "--execution-timeout", str(NOTEBOOK_TIMEOUT)],
            capture_output=True, text=True, env=env, timeout=NOTEBOOK_TIMEOUT + 60,
        )
        assert result.returncode == 0, f"{name} failed under {env.get('SPARK_MASTER', 'local')}:\n{result.stderr[-4000:]}"
        seconds[name] = time.monotonic() - started
    return seconds


@pytest.fixture
def cluster(tmp_path):
    """A standalone master and one worker on 127.0.0.1; yields their URLs and the worker's work dir."""
    import pyspark

    from deltalab.java import find_java

    spark_class = Path(pyspark.__file__).parent / "bin" / "spark-class"
    require(spark_class.exists(), f"pyspark has no bin/spark-class at {spark_class}")
    java = find_java()
    master_port, master_ui, worker_ui = _free_port(), _free_port(), _free_port()
    work_dir = tmp_path / "worker-work"
    # Each application gets 2 cores unless it asks otherwise (spark.deploy.defaultCores), and the
    # worker offers 4: notebook 02 runs a second application (the writer it kills) beside its own,
    # which would wait forever for cores if the first one held them all.
    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1", JAVA_HOME=str(java.home),
               SPARK_LOG_DIR=str(tmp_path / "logs"), SPARK_WORKER_DIR=str(work_dir),
               SPARK_MASTER_OPTS="-Dspark.deploy.defaultCores=2")
    env.pop("SPARK_MASTER", None)
    master_log, worker_log = tmp_path / "master.log", tmp_path / "worker.log"
    processes = []
    try:
        with master_log.open("wb") as log:
            master = subprocess.Popen(
                [str(spark_class), "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                 "--port", str(master_port), "--webui-port", str(master_ui)],
                stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        processes.append(master)
        master_json = f"http://127.0.0.1:{master_ui}/json/"
        _wait_for("the Spark master", lambda: _json(master_json).get("status") == "ALIVE", master, master_log)
        url = f"spark://127.0.0.1:{master_port}"
        with worker_log.open("wb") as log:
            worker = subprocess.Popen(
                [str(spark_class), "org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1",
                 "--cores", "4", "--memory", "4g", "--webui-port", str(worker_ui), "--work-dir", str(work_dir)],
                stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        processes.append(worker)
        _wait_for("the Spark worker", lambda: [w for w in _json(master_json)["workers"] if w["state"] == "ALIVE"],
                  worker, worker_log)
        yield {"url": url, "master_json": master_json, "work_dir": work_dir, "logs": (master_log, worker_log)}
    finally:
        for process in reversed(processes):
            _stop(process)


# Delta 4.4.0's REORG ... APPLY (PURGE) asks for the Spark session inside a task
# (ReorgTableHelper.filterParquetFilesOnExecutors, SparkSession.active), which only works when the
# tasks run in the driver's JVM. Notebook 02 uses OPTIMIZE instead and says why. The same
# application checks what notebook 00 asserts of its session: Delta's 4.4.0 jar among the added ones
# (shipped as spark.jars on a cluster, where a local session puts them on the class path).
REORG_ON_THE_CLUSTER = r"""
import sys
from deltalab import get_spark
from deltalab.errors import failure_of
from deltalab.session import added_jars

spark = get_spark("reorg_on_the_cluster")
print("Delta jars shipped:", [name for name in added_jars(spark) if name.startswith("io.delta_delta-spark")])
path = sys.argv[1]
spark.range(0, 20, 1, 2).write.format("delta").option("delta.enableDeletionVectors", "true").save(path)
spark.sql(f"DELETE FROM delta.`{path}` WHERE id = 3")
failure = failure_of(lambda: spark.sql(f"REORG TABLE delta.`{path}` APPLY (PURGE)"))
print("REORG:", "committed" if failure is None else failure.text.replace("\n", " ")[:2000])
"""


def test_notebooks_run_on_a_standalone_cluster(cluster, tmp_path, capsys):
    names = NOTEBOOKS
    env = dict(os.environ, SPARK_MASTER=cluster["url"])
    (tmp_path / "cluster").mkdir()
    seconds = _run_notebooks(names, tmp_path / "cluster", env)

    state = _json(cluster["master_json"])
    apps = {app["name"]: app for app in state["completedapps"] + state["activeapps"]}
    worker_ids = {worker["id"] for worker in state["workers"]}
    for name in names:
        assert name in apps, f"the master never saw an application from {name}: {sorted(apps)}"
        assert apps[name]["cores"] > 0, f"{name}'s application got no cores from the worker"
    # The worker's work dir holds one folder per application, one per executor in it, with the
    # executor's log: tasks that finished there ran on the worker, not in the driver.
    app_dirs = sorted(cluster["work_dir"].glob("app-*"))
    assert len(app_dirs) >= len(names), f"the worker launched executors for {len(app_dirs)} applications"
    finished = {}
    for app_dir in app_dirs:
        logs = list(app_dir.glob("*/stderr"))
        finished[app_dir.name] = sum(log.read_text(errors="replace").count("Finished task") for log in logs)
    assert all(count > 0 for count in finished.values()), f"executors without finished tasks: {finished}"
    assert worker_ids, "the master lost its worker"

    reorg = subprocess.run([sys.executable, "-c", REORG_ON_THE_CLUSTER, str(tmp_path / "reorg")], capture_output=True,
                           text=True, env=env, timeout=NOTEBOOK_TIMEOUT)
    assert reorg.returncode == 0, reorg.stderr[-3000:]
    assert "Delta jars shipped: ['io.delta_delta-spark_4.2_2.13-4.4.0.jar']" in reorg.stdout, reorg.stdout[-1000:]
    assert "No active or default Spark session found" in reorg.stdout, (
        "REORG ... APPLY (PURGE) no longer fails on a cluster: Delta fixed it. Notebook 02 section 5b can use REORG "
        f"again; update it and this test. Output: {reorg.stdout[-1000:]}"
    )

    lines = [f"cluster ({cluster['url']}, 1 worker, 2 cores per application): "
             + ", ".join(f"{name} {s:.0f} s" for name, s in seconds.items())
             + f"; tasks finished by executors per application: {finished}"]
    if os.environ.get("DELTALAB_CLUSTER_COMPARE") == "1":
        local_env = {k: v for k, v in os.environ.items() if k != "SPARK_MASTER"}
        (tmp_path / "local").mkdir()
        local = _run_notebooks(names, tmp_path / "local", local_env)
        lines.append("local[*]: " + ", ".join(f"{name} {s:.0f} s" for name, s in local.items()))
    with capsys.disabled():
        print("\n" + "\n".join(lines))
