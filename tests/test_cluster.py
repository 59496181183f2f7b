"""The course on a Spark standalone cluster: notebooks run unchanged against ``spark://``.

``deltalab.cluster.start_cluster`` starts a master and one worker on 127.0.0.1 from the pip
package (the same helper as ``python -m deltalab cluster``); each notebook runs with papermill and
``SPARK_MASTER`` pointing at it, one at a time, and the test asserts that the worker's executors
ran its tasks: the master lists the notebook's application with cores from the worker, and the
executor logs in the worker's work directory record finished tasks.

These tests are marked ``cluster`` and left out of ``make test``. ``make test-cluster`` runs every
notebook (``DELTALAB_CLUSTER_NOTEBOOKS=all``); CI runs ``make test-cluster CLUSTER_NOTEBOOKS=ci``,
the subset :data:`CI_NOTEBOOKS`: notebooks 00 (the jars a cluster session ships) and 11 (the object
store's jars on the executors). A comma-separated list of notebook names picks others; ``all`` runs the rest (05's second
driver, 09's streaming, ...), which CI leaves out to keep within its time. ``DELTALAB_CLUSTER_COMPARE=1`` also runs each notebook on ``local[*]`` and prints
both times.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from course_testing import NOTEBOOK_TIMEOUT, REPO, run_with_papermill

pytestmark = pytest.mark.cluster

NOTEBOOKS_ENV = "DELTALAB_CLUSTER_NOTEBOOKS"
#: What CI runs on a cluster: 00 (the jars a cluster session ships), 11 (the S3A jars and a server on
#: 127.0.0.1, both reached from the executors). 02 (a second application, the writer it kills), 05 and
#: 09 pass with ``make test-cluster`` and are left out of CI's time (issue 56: CI within 35 minutes).
CI_NOTEBOOKS = ["00_hello_delta", "11_object_stores"]


def chosen_notebooks() -> list[str]:
    """The notebooks ``$DELTALAB_CLUSTER_NOTEBOOKS`` names: ``all``, ``ci`` (the default) or a list."""
    every = sorted(path.stem for path in (REPO / "notebooks").glob("*.ipynb"))
    choice = os.environ.get(NOTEBOOKS_ENV, "ci").strip()
    if choice == "all":
        return every
    if choice == "ci":
        return CI_NOTEBOOKS
    names = [name.strip().removesuffix(".ipynb") for name in choice.split(",") if name.strip()]
    unknown = [name for name in names if name not in every]
    if unknown:
        raise pytest.UsageError(f"{NOTEBOOKS_ENV} names notebooks that do not exist: {unknown}; use all, ci or names "
                                f"from notebooks/ ({', '.join(every)})")
    return names


def run_notebook(name: str, out_dir: Path, env: dict[str, str]) -> float:
    """Run one notebook with papermill at its default parameters; return its seconds."""
    started = time.monotonic()
    run_with_papermill(name, out_dir, env)
    return time.monotonic() - started


def applications(cluster) -> dict[str, dict]:
    """Every application the cluster's master has seen, running or finished, by name (its JSON status,
    asked without any proxy: the master is on loopback)."""
    import json
    import urllib.request

    with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(cluster.status_url, timeout=30) as answer:
        state = json.load(answer)
    return {app["name"]: app for app in state["completedapps"] + state["activeapps"]}


def finished_tasks(cluster) -> dict[str, int]:
    """Per application folder of the worker's work directory, the tasks its executors finished (read
    from their logs): proof that the work ran on the worker, not in the driver."""
    return {app_dir.name: sum(log.read_text(errors="replace").count("Finished task") for log in app_dir.glob("*/stderr"))
            for app_dir in sorted(cluster.work_dir.glob("app-*"))}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A standalone master and one worker on 127.0.0.1 for the whole module (4 cores, 2 per application:
    notebook 02 runs a second application, the writer it kills, beside its own)."""
    from deltalab.cluster import start_cluster

    with start_cluster(tmp_path_factory.mktemp("cluster"), cores=4, memory="4g", cores_per_application=2) as running:
        yield running


@pytest.mark.parametrize("name", chosen_notebooks())
def test_a_notebook_runs_on_a_standalone_cluster(cluster, name, tmp_path, capsys):
    env = dict(os.environ, SPARK_MASTER=cluster.url)
    seconds = run_notebook(name, tmp_path, env)
    apps = applications(cluster)
    assert name in apps, f"the master never saw an application from {name}: {sorted(apps)}"
    assert apps[name]["cores"] > 0, f"{name}'s application got no cores from the worker"
    finished = finished_tasks(cluster).get(apps[name]["id"], 0)
    assert finished > 0, f"no executor of {name}'s application finished a task on the worker"
    line = f"{name} on {cluster.url}: {seconds:.0f} s, {finished} tasks finished by the worker's executors"
    if os.environ.get("DELTALAB_CLUSTER_COMPARE") == "1":
        local = run_notebook(name, tmp_path / "local", {k: v for k, v in os.environ.items() if k != "SPARK_MASTER"})
        line += f"; local[*]: {local:.0f} s"
    with capsys.disabled():
        print("\n" + line)


# Delta 4.4.0's REORG ... APPLY (PURGE) asks for the Spark session inside a task
# (ReorgTableHelper.filterParquetFilesOnExecutors, SparkSession.active), which only works when the
# tasks run in the driver's JVM. Notebook 02 uses OPTIMIZE instead and says why. The same
# application checks what notebook 00 asserts of its session: Delta's 4.4.0 jar among the added ones
# (shipped as spark.jars on a cluster, where a local session puts them on the class path).
REORG_ON_THE_CLUSTER = r"""
import sys
from deltalab import failure_of, get_spark
from deltalab.session import added_jars

spark = get_spark("reorg_on_the_cluster")
print("Delta jars shipped:", [name for name in added_jars(spark) if name.startswith("io.delta_delta-spark")])
path = sys.argv[1]
spark.range(0, 20, 1, 2).write.format("delta").option("delta.enableDeletionVectors", "true").save(path)
spark.sql(f"DELETE FROM delta.`{path}` WHERE id = 3")
failure = failure_of(lambda: spark.sql(f"REORG TABLE delta.`{path}` APPLY (PURGE)"))
print("REORG:", "committed" if failure is None else failure.text.replace("\n", " ")[:2000])
"""


def test_reorg_purge_still_needs_the_driver_jvm_and_the_jars_are_shipped(cluster, tmp_path):
    env = dict(os.environ, SPARK_MASTER=cluster.url)
    reorg = subprocess.run([sys.executable, "-c", REORG_ON_THE_CLUSTER, str(tmp_path / "reorg")], capture_output=True,
                           text=True, env=env, timeout=NOTEBOOK_TIMEOUT)
    assert reorg.returncode == 0, reorg.stderr[-3000:]
    assert "Delta jars shipped: ['io.delta_delta-spark_4.2_2.13-4.4.0.jar']" in reorg.stdout, reorg.stdout[-1000:]
    assert "No active or default Spark session found" in reorg.stdout, (
        "REORG ... APPLY (PURGE) no longer fails on a cluster: Delta fixed it. Notebook 02 section 5b can use REORG "
        f"again; update it and this test. Output: {reorg.stdout[-1000:]}"
    )
