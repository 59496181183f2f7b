"""A Spark standalone cluster on loopback: one master and one worker, started from the pip package.

The notebooks run on a cluster unchanged when ``$SPARK_MASTER`` names one (``spark://host:7077``).
To try that on one machine, or to test it, :func:`start_cluster` starts a master and a worker on
free ports of 127.0.0.1 with the ``spark-class`` launcher inside the pyspark wheel (it has no
start scripts), waits until the worker has registered, and returns a :class:`Cluster`: its
``spark://`` URL, the master's JSON status (applications, the cores each got), and the worker's
work directory, where every executor leaves its log. Both daemons run under guardians
(:mod:`deltalab.processes`), so they end with the process that started them, or with
:meth:`Cluster.stop`. No traffic leaves the machine.

``python -m deltalab cluster`` starts one and prints the ``SPARK_MASTER`` to export; ``make
test-cluster`` runs notebooks against one.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from deltalab.errors import DeltaLabError
from deltalab.java import find_java
from deltalab.processes import end_process, free_loopback_port, start_owned, wait_until

__all__ = ["Cluster", "start_cluster"]

#: How long the master and the worker may take to start (a loaded two-core machine is slow).
START_TIMEOUT_SECONDS = 180.0


def _spark_class() -> Path:
    """The ``bin/spark-class`` launcher of the installed pyspark."""
    import pyspark

    launcher = Path(pyspark.__file__).parent / "bin" / "spark-class"
    if not launcher.is_file():
        raise DeltaLabError(f"pyspark has no bin/spark-class at {launcher}, so no cluster can be started from it.",
                            fix="Install pyspark from PyPI (make setup); a pyspark without its launcher cannot run "
                                "a master or a worker.")
    return launcher


def _status(url: str) -> dict[str, Any]:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: never a proxy
    with opener.open(url, timeout=5) as response:
        return json.load(response)


@dataclass
class Cluster:
    """A running master and worker (:func:`start_cluster`)."""

    url: str
    status_url: str
    work_dir: Path
    directory: Path
    master: subprocess.Popen[bytes]
    worker: subprocess.Popen[bytes]

    def __repr__(self) -> str:
        return f"Cluster({self.url})"

    def stop(self) -> None:
        """Stop the worker (with its executors), then the master."""
        end_process(self.worker)
        end_process(self.master)

    def __enter__(self) -> "Cluster":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _tail(path: Path, lines: int = 12) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no output)"


def _wait(what: str, ready: Any, process: subprocess.Popen[bytes], log: Path, timeout: float) -> None:
    def answered() -> bool:
        if process.poll() is not None:
            return True
        try:
            return bool(ready())
        except (OSError, ValueError):  # not listening yet, or an empty page while it starts
            return False

    wait_until(answered, timeout, what, interval=0.5)
    if process.poll() is not None:
        raise DeltaLabError(f"{what[0].upper()}{what[1:]} failed: it exited with {process.returncode}:\n{_tail(log)}",
                            fix=f"Read {log}; `python -m deltalab doctor` checks Java and the Spark installation.")


def start_cluster(directory: str | os.PathLike[str], cores: int = 4, memory: str = "4g", cores_per_application: int = 2,
                  timeout: float = START_TIMEOUT_SECONDS) -> Cluster:
    """Start a standalone master and one worker on 127.0.0.1 and wait until the worker has registered.

    The worker offers ``cores`` cores and ``memory``; each application gets ``cores_per_application``
    of them unless it asks otherwise, so a notebook that starts a second application (a writer,
    a second driver) beside its own still finds cores. ``directory`` (emptied first) holds the
    daemons' logs and the worker's work directory.
    """
    if cores < cores_per_application or cores_per_application < 1:
        raise DeltaLabError(f"A worker of {cores} cores cannot give {cores_per_application} to each application.",
                            fix="Give the worker at least as many cores as one application gets (both 1 or more).")
    launcher = _spark_class()
    java = find_java()
    directory = Path(directory).resolve()
    if directory.exists():
        shutil.rmtree(directory)
    work_dir = directory / "worker-work"
    work_dir.mkdir(parents=True)
    master_port, master_ui, worker_ui = free_loopback_port(), free_loopback_port(), free_loopback_port()
    env = {key: value for key, value in os.environ.items() if key != "SPARK_MASTER"}
    env.update(SPARK_LOCAL_IP="127.0.0.1", JAVA_HOME=str(java.home), SPARK_LOG_DIR=str(directory / "logs"),
               SPARK_WORKER_DIR=str(work_dir), SPARK_MASTER_OPTS=f"-Dspark.deploy.defaultCores={cores_per_application}")
    url, status_url = f"spark://127.0.0.1:{master_port}", f"http://127.0.0.1:{master_ui}/json/"
    master_log, worker_log = directory / "master.log", directory / "worker.log"
    master = start_owned([str(launcher), "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                          "--port", str(master_port), "--webui-port", str(master_ui)],
                         master_log, ends_on_interrupt=False, env=env)
    worker = None
    try:
        _wait("the Spark master", lambda: _status(status_url).get("status") == "ALIVE", master, master_log, timeout)
        worker = start_owned([str(launcher), "org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1",
                              "--cores", str(cores), "--memory", memory, "--webui-port", str(worker_ui),
                              "--work-dir", str(work_dir)],
                             worker_log, ends_on_interrupt=False, env=env)
        _wait("the Spark worker", lambda: [w for w in _status(status_url)["workers"] if w["state"] == "ALIVE"],
              worker, worker_log, timeout)
    except BaseException:
        for process in (worker, master):
            if process is not None:
                end_process(process)
        raise
    return Cluster(url, status_url, work_dir, directory, master, worker)
