"""A classroom's misuse, with real processes (issue 20): one work directory wanted by two
processes, interrupted cells, killed kernels, a read-only checkout, a full or unwritable disk.

Plain Python processes where the behaviour needs no Spark (locks, process trees, the checks
made before Spark starts); one real Jupyter kernel for what needs Spark (a held transaction and
a blocked writer, interrupted and then killed); papermill for notebook 00 from a read-only copy.
Every wait polls with a bound; nothing relies on a sleep being long enough.
"""

from __future__ import annotations

import os
import queue
import re
import shutil
import signal
import stat
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from course_testing import REPO
from deltalab.errors import DeltaLabError
from deltalab.locations import LOCKS_DIR, MIN_FREE_ENV, WORKDIR_ENV, min_free_mib, work_root
from deltalab.processes import (ProcessId, end_process, is_running, owned_processes,
                                process_tree, start_owned)
from deltalab.workdir import workdir

POLL = 0.02


def poll(condition, timeout: float, what: str) -> float:
    """Poll ``condition`` every 20 ms until true; return the seconds it took, fail after ``timeout``."""
    started = time.monotonic()
    while not condition():
        if time.monotonic() - started > timeout:
            pytest.fail(f"not within {timeout} s: {what}")
        time.sleep(POLL)
    return time.monotonic() - started


def python(code: str, env: dict[str, str], **kwargs) -> subprocess.Popen[str]:
    """A Python process running ``code``, with pipes for its stdin, stdout and stderr."""
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], env=env, text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kwargs)


def environment(root: Path, **extra: str) -> dict[str, str]:
    return {**os.environ, WORKDIR_ENV: str(root), **extra}


def running(tree: list[ProcessId]) -> list[int]:
    return [p.pid for p in tree if is_running(p)]


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
# One work directory, two processes
# --------------------------------------------------------------------------------------------

HOLDER = """
    import sys
    from deltalab import workdir
    path = workdir("08_zorder_benchmark")
    (path / "table.txt").write_text("the first run's table")
    assert workdir("08_zorder_benchmark", fresh=False) == path   # the same process may ask again
    again = workdir("08_zorder_benchmark")                       # and re-run its setup cell
    (again / "table.txt").write_text("the first run's table")
    print("holding", flush=True)
    sys.stdin.read()                                             # until the test closes stdin
"""

def refused_or(call: str, success: str) -> str:
    """A script that runs ``call``; on a DeltaLabError it prints the message and exits 3."""
    return f"""
    from deltalab import DeltaLabError, get_spark, workdir
    try:
        {call}
    except DeltaLabError as error:
        print(error)
        raise SystemExit(3)
    print({success!r})
"""


SECOND = refused_or('workdir("08_zorder_benchmark")', "got it")


def test_a_second_process_is_refused_by_name_and_nothing_is_emptied(tmp_path):
    env = environment(tmp_path / "work")
    holder = python(HOLDER, env)
    try:
        assert holder.stdout.readline() == "holding\n", holder.stderr.read()
        second = subprocess.run([sys.executable, "-c", textwrap.dedent(SECOND)], env=env, text=True,
                                capture_output=True, timeout=60)
        assert second.returncode == 3, second.stdout + second.stderr
        message = second.stdout
        print(message)
        assert f"The work directory {tmp_path / 'work' / '08_zorder_benchmark'} is in use by another process: " \
               f"pid {holder.pid} (" in message
        assert "workdir(\"08_zorder_benchmark\")" in message, "the holder's command line is shown"
        assert f"`kill {holder.pid}`" in message and "Kernel > Shut Down Kernel" in message
        assert f"set {WORKDIR_ENV} to another directory" in message
        table = tmp_path / "work" / "08_zorder_benchmark" / "table.txt"
        assert table.read_text() == "the first run's table", "the holder's work directory was not emptied"
    finally:
        holder.stdin.close()
        holder.wait(timeout=60)
    assert holder.returncode == 0, holder.stderr.read()
    after = subprocess.run([sys.executable, "-c", textwrap.dedent(SECOND)], env=env, text=True,
                           capture_output=True, timeout=60)
    assert after.stdout == "got it\n", "the lock ends with the process that held it"


def test_a_killed_holder_never_blocks_the_next_run(tmp_path):
    env = environment(tmp_path / "work")
    holder = python(HOLDER, env)
    assert holder.stdout.readline() == "holding\n", holder.stderr.read()
    holder.kill()
    holder.wait(timeout=60)
    second = subprocess.run([sys.executable, "-c", textwrap.dedent(SECOND)], env=env, text=True,
                            capture_output=True, timeout=60)
    assert second.stdout == "got it\n", second.stdout + second.stderr
    assert list((tmp_path / "work" / "08_zorder_benchmark").iterdir()) == [], "the next run starts empty"


def test_a_forked_child_does_not_keep_its_parents_work_directory(tmp_path):
    """multiprocessing (fork) in a notebook: when the kernel dies, its forked children do not hold the lock."""
    env = environment(tmp_path / "work")
    parent = python("""
        import os, sys, time
        from deltalab import workdir
        workdir("08_zorder_benchmark")
        child = os.fork()
        if child == 0:
            time.sleep(600)
            os._exit(0)
        print(child, flush=True)
        sys.stdin.read()
    """, env)
    child = int(parent.stdout.readline())
    try:
        parent.kill()
        parent.wait(timeout=60)
        assert is_running(process_tree(child)[0]), "the forked child still runs"
        second = subprocess.run([sys.executable, "-c", textwrap.dedent(SECOND)], env=env, text=True,
                                capture_output=True, timeout=60)
        assert second.stdout == "got it\n", second.stdout + second.stderr
    finally:
        os.kill(child, signal.SIGKILL)


def test_the_lock_file_is_beside_the_work_directories_never_in_them(tmp_path, monkeypatch):
    monkeypatch.setenv(WORKDIR_ENV, str(tmp_path / "work"))
    path = workdir("locked")
    lock = tmp_path / "work" / LOCKS_DIR / "locked.lock"
    assert lock.is_file() and lock.read_text().split("\n")[0] == str(os.getpid())
    assert list(path.iterdir()) == [], "nothing in the work directory, so no table listing shows the lock"
    (path / "t").mkdir()
    assert workdir("locked") == path and list(path.iterdir()) == [] and lock.is_file(), \
        "emptying the work directory keeps the lock"
    shutil.rmtree(tmp_path / "work" / LOCKS_DIR)   # the root emptied by hand: the next call locks again
    assert workdir("locked") == path and lock.is_file()


# --------------------------------------------------------------------------------------------
# A full disk, a work root that cannot be written: one message before Spark starts
# --------------------------------------------------------------------------------------------

START_SPARK = refused_or('get_spark("robustness")', "Spark started")


def test_low_free_space_is_refused_before_spark_starts(tmp_path):
    root = tmp_path / "work"
    free_mib = shutil.disk_usage(tmp_path).free // 2**20
    env = environment(root, **{MIN_FREE_ENV: str(free_mib + 10 * 1024)})
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(START_SPARK)], env=env, text=True,
                          capture_output=True, timeout=120)
    assert done.returncode == 3, done.stdout + done.stderr
    print(done.stdout)
    assert re.search(rf"Only \d+\.\d GiB is free on the disk of the work directory root {re.escape(str(root))}; "
                     r"the course needs at least \d+\.\d GiB there", done.stdout)
    assert f"export {WORKDIR_ENV}=/path/with/space" in done.stdout and f"export {MIN_FREE_ENV}=256" in done.stdout
    assert not (root / "_logs").exists(), "Spark never started: its log file is opened just before the JVM"


def test_an_unwritable_work_root_is_refused_before_spark_starts(tmp_path):
    if os.geteuid() == 0:   # root writes anywhere: a root below a file can never be created, by anyone
        blocker = tmp_path / "a-file"
        blocker.write_text("not a directory")
        root = blocker / "work"
    else:
        locked = tmp_path / "read-only"
        locked.mkdir()
        locked.chmod(stat.S_IRUSR | stat.S_IXUSR)
        root = locked / "work"
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(START_SPARK)], env=environment(root), text=True,
                          capture_output=True, timeout=120)
    assert done.returncode == 3, done.stdout + done.stderr
    print(done.stdout)
    assert f"The work directory root {root} cannot be written: " in done.stdout
    assert f"Fix: Set {WORKDIR_ENV} to a directory you can write to" in done.stdout


def test_the_free_space_limit_is_read_from_the_environment(tmp_path, monkeypatch):
    monkeypatch.delenv(MIN_FREE_ENV, raising=False)
    assert min_free_mib() == 1024
    monkeypatch.setenv(MIN_FREE_ENV, "0")
    assert min_free_mib() == 0
    monkeypatch.setenv(MIN_FREE_ENV, "lots")
    with pytest.raises(DeltaLabError, match=f"{MIN_FREE_ENV} is 'lots', not a whole number of MiB"):
        min_free_mib()
    monkeypatch.setenv(MIN_FREE_ENV, str(shutil.disk_usage(tmp_path).free // 2**20 + 1024))
    monkeypatch.setenv(WORKDIR_ENV, str(tmp_path / "work"))
    with pytest.raises(DeltaLabError, match="is free on the disk of the work directory root"):
        workdir("demo")
    assert not (tmp_path / "work" / "demo").exists() and not (tmp_path / "work" / LOCKS_DIR).exists(), \
        "refused before anything was locked or created"
    monkeypatch.setenv(MIN_FREE_ENV, "0")
    assert work_root() == tmp_path / "work"


# --------------------------------------------------------------------------------------------
# Helper processes: they end with their owner, and with an interrupted wait
# --------------------------------------------------------------------------------------------

# A helper that starts a child in its own process group (as PySpark's worker daemon does) and one in its group.
FAMILY = ("import os, subprocess, sys, time; "
          "subprocess.Popen([sys.executable, '-c', 'import os, time; os.setpgid(0, 0); time.sleep(600)']); "
          "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)']); time.sleep(600)")


def whole_family(guardian: int) -> list[ProcessId]:
    """The guardian, the helper and its two children, once all four run."""
    def complete() -> bool:
        tree = process_tree(guardian)
        return len(tree) == 4 and len({p.group for p in tree}) == 2   # one child made a group of its own

    poll(complete, 60, "the helper and both its children run")
    return process_tree(guardian)


def test_a_helper_and_everything_it_started_die_with_their_owner(tmp_path):
    owner = python(f"""
        import sys
        from pathlib import Path
        from deltalab.processes import start_owned
        helper = start_owned([sys.executable, "-c", {FAMILY!r}], Path({str(tmp_path / 'helper.log')!r}))
        print(helper.pid, flush=True)
        sys.stdin.read()
    """, environment(tmp_path / "work"))
    tree = whole_family(int(owner.stdout.readline()))
    owner.kill()
    owner.wait(timeout=60)
    seconds = poll(lambda: not running(tree), 10, "every process of the helper ends after its owner was killed")
    print(f"the helper's {len(tree)} processes ended {seconds:.2f} s after their owner was SIGKILLed")


def test_ending_a_helper_ends_the_children_that_left_its_group(tmp_path):
    helper = start_owned([sys.executable, "-c", FAMILY], tmp_path / "helper.log")
    tree = whole_family(helper.pid)
    assert end_process(helper) == -signal.SIGKILL
    assert running(tree) == [], "end_process returns once every process is gone"
    assert helper not in owned_processes()


def test_a_helper_exits_with_its_commands_status(tmp_path):
    helper = start_owned([sys.executable, "-c", "print('hello'); raise SystemExit(7)"], tmp_path / "helper.log")
    assert helper.wait(timeout=60) == 7
    assert (tmp_path / "helper.log").read_text() == "hello\n"


def test_an_interrupted_wait_ends_the_helpers_and_the_cell_runs_again(tmp_path):
    """SIGINT during wait_until (the notebook's stop button): the helper ends, the kernel goes on."""
    script = python(f"""
        import sys
        from pathlib import Path
        from deltalab.processes import owned_processes, start_owned, wait_until

        def cell(wait_for):
            helper = start_owned([sys.executable, "-c", {FAMILY!r}], Path({str(tmp_path / 'helper.log')!r}))
            print(helper.pid, flush=True)
            wait_until(wait_for, timeout=600, what="the helper's work is done")
            return helper

        try:
            cell(lambda: False)
        except KeyboardInterrupt:
            print("interrupted", owned_processes(), flush=True)
        helper = cell(lambda: True)                   # the cell again, this time it finishes
        print("again", [p.pid for p in owned_processes()] == [helper.pid], flush=True)
    """, environment(tmp_path / "work"))
    tree = whole_family(int(script.stdout.readline()))
    script.send_signal(signal.SIGINT)
    assert script.stdout.readline() == "interrupted []\n", script.stderr.read()
    assert running(tree) == [], "the interrupted wait ended the helper with its children before going on"
    second = int(script.stdout.readline())
    assert script.stdout.readline() == "again True\n"
    script.wait(timeout=60)
    stderr = script.stderr.read()
    assert f"Interrupted: stopped the helper process(es) {tree[0].pid} this kernel started" in stderr, stderr
    assert poll(lambda: not process_tree(second), 10, "the second helper ends with the script") >= 0


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
