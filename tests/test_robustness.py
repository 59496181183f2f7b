"""A classroom's misuse, with a real Jupyter kernel (issue 20): interrupted cells, killed kernels,
a read-only checkout.

One kernel, started in a read-only copy of notebooks/ and data/ as a classroom share mounts it,
runs notebook 00 there, then holds a transaction and blocks a writer (notebooks 05 and 02) and is
interrupted, runs a long Spark job and is interrupted, and is finally killed with a writer running.
Every wait polls with a bound; nothing relies on a sleep being long enough.

The same misuse without a kernel is tested by module: a work directory wanted by two processes in
tests/test_workdir.py, a full or unwritable disk in test_locations.py, helpers that end with their
owner or an interrupted wait in test_processes.py.
"""

from __future__ import annotations

import os
import queue
import re
import shutil
import signal
import stat
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from course_testing import REPO
from deltalab.processes import ProcessId, process_tree
from process_testing import environment, poll, running


def command_line(pid: int) -> str:
    """The whole command line of a process ("" once it is gone)."""
    try:
        return (Path("/proc") / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def is_spark_jvm(pid: int) -> bool:
    """True for a Spark driver's JVM (not the launcher scripts that start one)."""
    arguments = command_line(pid).split(" ")
    return Path(arguments[0]).name == "java" and "org.apache.spark.deploy.SparkSubmit" in arguments


# --------------------------------------------------------------------------------------------
# A real kernel: an interrupted held transaction, an interrupted blocked writer, a killed kernel
# --------------------------------------------------------------------------------------------


class Kernel:
    """A python3 Jupyter kernel driven as JupyterLab drives it (execute, interrupt), via jupyter_client."""

    def __init__(self, env: dict[str, str], cwd: Path) -> None:
        from jupyter_client.manager import KernelManager

        self.manager = KernelManager(kernel_name="python3")
        self.manager.start_kernel(env=env, cwd=str(cwd))
        self.client = self.manager.client()
        self.client.start_channels()
        self.client.wait_for_ready(timeout=120)
        self.pid = self.manager.provisioner.process.pid

    def start(self, code: str) -> str:
        return self.client.execute(textwrap.dedent(code))

    def read(self, msg_id: str, timeout: float, until: str | None = None) -> tuple[str, str | None]:
        """Output of the cell ``msg_id`` until it ends (or until ``until`` appears); and its error name."""
        text, error = [], None
        deadline = time.monotonic() + timeout
        while True:
            try:
                message = self.client.get_iopub_msg(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                pytest.fail(f"the cell did not finish within {timeout} s; output so far:\n{''.join(text)}")
            if message["parent_header"].get("msg_id") != msg_id:
                continue
            kind, content = message["msg_type"], message["content"]
            if kind == "stream":
                text.append(content["text"])
            elif kind in ("execute_result", "display_data"):
                text.append(content["data"].get("text/plain", "") + "\n")
            elif kind == "error":
                error = content["ename"]
                text.append(f"{content['ename']}: {content['evalue']}\n")
            elif kind == "status" and content["execution_state"] == "idle":
                return "".join(text), error
            if until is not None and until in "".join(text):
                return "".join(text), error

    def run(self, code: str, timeout: float = 300) -> str:
        """Run a cell that must succeed; its output."""
        output, error = self.read(self.start(code), timeout)
        assert error is None, output
        return output

    def interrupt(self) -> None:
        self.manager.interrupt_kernel()

    def close(self) -> None:
        self.client.stop_channels()
        self.manager.shutdown_kernel(now=True)   # also after the kernel was killed: only cleans up


def files_and_times(folder: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns) for p in sorted(folder.rglob("*"))}


def set_writable(folder: Path, writable: bool) -> None:
    bits = stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH
    for path in [folder, *folder.rglob("*")]:
        mode = path.stat().st_mode
        path.chmod(mode | stat.S_IWUSR if writable else mode & ~bits)


@dataclass
class Checkout:
    folder: Path
    files_before: dict[str, tuple[int, int]]

    def unchanged(self) -> bool:
        return files_and_times(self.folder) == self.files_before


@pytest.fixture(scope="module")
def checkout(tmp_path_factory):
    """A read-only copy of the course's notebooks and data, as a classroom share mounts it."""
    folder = tmp_path_factory.mktemp("read-only-checkout")
    shutil.copytree(REPO / "notebooks", folder / "notebooks")
    shutil.copytree(REPO / "data", folder / "data")
    set_writable(folder, False)
    yield Checkout(folder, files_and_times(folder))
    set_writable(folder, True)


@pytest.fixture(scope="module")
def kernel(tmp_path_factory, checkout):
    """One kernel for the module, started in the read-only checkout's notebooks/ as JupyterLab would."""
    root = tmp_path_factory.mktemp("kernel-work")
    started = Kernel(environment(root, DELTALAB_DATA_DIR=str(checkout.folder / "data")), cwd=checkout.folder / "notebooks")
    started.wd = root / "robustness"
    yield started
    started.close()


def test_notebook_00_runs_from_a_read_only_checkout_and_writes_nothing_there(kernel, checkout):
    import nbformat

    notebook = nbformat.read(str(checkout.folder / "notebooks" / "00_hello_delta.ipynb"), as_version=4)
    outputs = [kernel.run(cell.source, timeout=600) for cell in notebook.cells if cell.cell_type == "code"]
    assert any("Read back" in output for output in outputs), outputs
    assert checkout.unchanged(), "nothing written, changed or removed in the checkout"


@pytest.fixture(scope="module")
def lesson(kernel):
    """The kernel with notebook 02's and 05's tables: a pair table to hold, a table to append to."""
    kernel.run("""
        import os, sys, time
        from pyspark.sql import functions as F
        from deltalab import get_spark, latest_version, workdir
        from deltalab import concurrency as cc
        from deltalab.files import complete_parquet_files
        from deltalab.processes import wait_until
        from deltalab.writers import start_blocked_append

        spark = get_spark("robustness")
        wd = workdir("robustness")
        held = wd / "held"
        cc.make_pair_table(spark, held)
        writes = wd / "writes"
        spark.range(0, 10, 1, 1).write.format("delta").save(str(writes))
        writer_signals = wd / "_writer"

        def append_five_rows(start, gate=None):
            rows = spark.range(start, start + 5, 1, 1).withColumn("v", F.lit(0).cast("long"))
            return (rows.filter(gate("id")) if gate else rows).write.format("delta").mode("append").save(str(held))
    """, timeout=600)
    return kernel


# Notebook 05's held blind append; the interrupted run has a long step while A is held.
HOLD_CELL = """
    with cc.TransactionHold(spark, wd / "signals" / "held") as hold:
        hold.start(lambda gate: append_five_rows(100, gate))
        hold.wait_until_held()
        {long_step}
        append_five_rows(200)                                   # B commits while A is held
        assert latest_version(held) == 1 and not hold.finished, "B committed version 1 while A waits"
    assert hold.error is None and latest_version(held) == 2, "A committed version 2"
    print("held append committed after B")
"""


def test_an_interrupted_held_transaction_commits_nothing_and_the_cell_runs_again(lesson):
    kernel = lesson
    msg_id = kernel.start(HOLD_CELL.format(long_step='print("A is held", flush=True); time.sleep(600)'))
    kernel.read(msg_id, 300, until="A is held")
    interrupted = time.monotonic()
    kernel.interrupt()
    output, error = kernel.read(msg_id, 120)
    seconds = time.monotonic() - interrupted
    assert error == "KeyboardInterrupt", output
    print(f"the interrupted cell ended {seconds:.1f} s after the interrupt")
    state = kernel.run("print(hold.finished, latest_version(held), cc.CANCELLED_MESSAGE in str(hold.error))")
    assert state == "True 0 True\n", "A's thread ended, failed at its gate and committed nothing"
    assert kernel.run(HOLD_CELL.format(long_step="")) == "held append committed after B\n"


# Notebook 02's blocked writer; the interrupted run waits for a file that never lands.
WRITER_CELL = """
    before_files = set(complete_parquet_files(writes))
    writer = start_blocked_append(writes, rows=30, partitions=2, signal_dir=writer_signals)
    print("writer", writer.driver.process.pid, flush=True)
    landed = lambda: set(complete_parquet_files(writes)) - before_files
    wait_until(lambda: writer.blocked and len(landed()) == {files}, timeout=300, what="{files} file(s) land")
    exit_code = writer.kill()
    assert exit_code == -9, "the writer process died of SIGKILL"
    print("writer killed after its first file landed")
"""


def blocked_writer(kernel: Kernel, msg_id: str) -> list[ProcessId]:
    """The writer's processes once its last task blocks: guardian, Python, JVM, PySpark's daemon and worker."""
    output, _ = kernel.read(msg_id, 300, until="\n")
    guardian = int(re.search(r"writer (\d+)", output).group(1))
    poll(lambda: (kernel.wd / "_writer" / "hold-last-task.reached").exists(), 300, "the writer's last task blocks")
    tree = process_tree(guardian)
    assert any(is_spark_jvm(p.pid) for p in tree), [command_line(p.pid)[:200] for p in tree]
    assert any("pyspark.daemon" in command_line(p.pid) for p in tree), [command_line(p.pid)[:200] for p in tree]
    assert len({p.group for p in tree}) >= 2, "PySpark's daemon leads a process group of its own"
    return tree


def test_an_interrupted_blocked_writer_leaves_no_process_and_the_cell_runs_again(lesson):
    kernel = lesson
    msg_id = kernel.start(WRITER_CELL.format(files=2))   # two files never land: the last task blocks
    tree = blocked_writer(kernel, msg_id)
    kernel.interrupt()
    output, error = kernel.read(msg_id, 120)
    assert error == "KeyboardInterrupt", output
    assert f"Interrupted: stopped the helper process(es) {tree[0].pid}" in output
    assert running(tree) == [], f"no process of the writer survives the interrupt: {running(tree)}"
    output = kernel.run(WRITER_CELL.format(files=1))
    assert output.endswith("writer killed after its first file landed\n"), output
    again = int(re.search(r"writer (\d+)", output).group(1))
    assert process_tree(again) == []


def test_an_interrupted_spark_job_is_cancelled(lesson):
    """The Z-order and checkpoint benchmarks: a long Spark job interrupted must not go on in the JVM."""
    kernel = lesson
    running_marker = kernel.wd / "job-runs"
    msg_id = kernel.start(f"""
        def slow(value):
            open({str(running_marker)!r}, "a").close()
            time.sleep(600)
            return value

        spark.range(0, 2, 1, 2).select(F.udf(slow, "long")("id")).collect()
    """)
    poll(running_marker.exists, 300, "the long job's tasks run")
    kernel.interrupt()
    output, error = kernel.read(msg_id, 120)
    assert error is not None, output
    if error != "KeyboardInterrupt":
        # The interrupt cut Py4J's wait for the JVM; PySpark's clean-up raised the cell's error.
        assert kernel.run("""
            from deltalab.session import was_interrupted
            print(was_interrupted(sys.last_value))
        """) == "True\n", output
        assert "deltalab cancelled the cell's Spark jobs; the session still works" in output, output
    try:
        left = kernel.run("""
            deadline = time.monotonic() + 10
            while spark.sparkContext.statusTracker().getActiveJobsIds() and time.monotonic() < deadline:
                time.sleep(0.05)
            print(len(spark.sparkContext.statusTracker().getActiveJobsIds()), spark.range(3).count())
        """)
        assert left == "0 3\n", "no Spark job of the interrupted cell still runs, and the session still works"
    finally:
        kernel.run("spark.sparkContext.cancelAllJobs()")


def test_a_killed_kernel_takes_every_process_it_started_with_it(lesson, checkout):
    """SIGKILL the kernel once a new writer's JVM runs (no need to wait for its whole session)."""
    kernel = lesson
    output, _ = kernel.read(kernel.start("""
        writer = start_blocked_append(writes, rows=30, partitions=2, signal_dir=writer_signals)
        print("writer", writer.driver.process.pid, flush=True)
    """), 60)
    guardian = int(re.search(r"writer (\d+)", output).group(1))
    poll(lambda: any(is_spark_jvm(p.pid) for p in process_tree(guardian)), 300, "the writer's JVM runs")
    tree = process_tree(kernel.pid)   # the kernel, its own JVM and PySpark daemon, the writer's processes
    assert sum(is_spark_jvm(p.pid) for p in tree) == 2, [command_line(p.pid)[:200] for p in tree]
    os.kill(kernel.pid, signal.SIGKILL)
    seconds = poll(lambda: not running(tree), 60, "every process the kernel started ends with it")
    print(f"{len(tree)} processes ended {seconds:.2f} s after the kernel was SIGKILLed")
    assert checkout.unchanged(), "nothing written in the kernel's and the writers' working directory"
