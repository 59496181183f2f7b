"""Writers in other processes and threads: a writer killed mid-commit, and concurrent blind appends.

Some lessons need a second writer that is really separate: its own Python process, its own
Spark session and JVM. This module starts them, holds them at known points with marker files
(never with sleeps and hopes), and ends them:

* :func:`start_blocked_append` starts a writer that appends ``partitions`` files and blocks in
  the task of the last one, after signalling so; :func:`kill_process_group` then SIGKILLs it.
  This is the book's figure 2-5 ("failure during a write"): the files that landed stay on disk
  and no reader ever sees them, because no commit names them.
* :func:`append_from_processes` starts several writer processes that each append once, released
  together by a "go" file; :func:`append_from_threads` does the same with threads on one session.

Every writer process runs ``python -m deltalab.writers ...`` in a new process group (so one
signal reaches its JVM and Python workers too) and ends itself, with its whole group, if the
process that started it (the notebook's kernel) goes away.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from deltalab.errors import DeltaLabError

__all__ = [
    "append_from_processes",
    "append_from_threads",
    "append_rows",
    "kill_process_group",
    "start_blocked_append",
    "wait_until",
]

#: How long a writer waits at a marker before giving up on its own (a safety net, never reached
#: when the notebook drives it as it should; a loaded machine can be slow).
WAIT_LIMIT_SECONDS = 600.0


def wait_until(condition: Callable[[], bool], timeout: float, what: str, interval: float = 0.2) -> None:
    """Poll ``condition`` until it is true; raise a clear error after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise DeltaLabError(
                f"Timed out after {timeout:.0f} s waiting until {what}.",
                fix="The machine may be very busy: run the cell again with a longer timeout, "
                "and look at the writer's log file next to the marker.",
            )
        time.sleep(interval)


def _start_writer(arguments: list[str], log_path: Path) -> subprocess.Popen[bytes]:
    """Start ``python -m deltalab.writers ARGUMENTS OWNER_PID`` in its own process group, output to ``log_path``."""
    env = dict(os.environ)
    # The child imports this very package, also when it is not installed (e.g. run from a source tree).
    env["PYTHONPATH"] = os.pathsep.join(p for p in [str(Path(__file__).resolve().parents[1]), env.get("PYTHONPATH")] if p)
    with open(log_path, "wb") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "deltalab.writers", *arguments, str(os.getpid())],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            env=env,
        )


# --------------------------------------------------------------------------------------------
# A writer killed mid-commit
# --------------------------------------------------------------------------------------------


def start_blocked_append(table_path: str | os.PathLike[str], rows: int, partitions: int,
                         marker: str | os.PathLike[str]) -> subprocess.Popen[bytes]:
    """Start a writer process that appends ``rows`` rows in ``partitions`` files and hangs on the last.

    A Python UDF lets every partition through except the last one, whose task creates
    ``marker`` and then waits. Poll with :func:`wait_until` until the marker exists and the
    other ``partitions - 1`` files are complete (``deltalab.files.complete_parquet_files``),
    then call :func:`kill_process_group`. The writer's output goes to ``<marker>.log``.
    """
    if partitions < 2:
        raise DeltaLabError(
            f"partitions is {partitions}, but the blocked writer needs at least 2 "
            "(one task that blocks, at least one that lands its file).",
            fix="Pass partitions >= 2.",
        )
    marker = Path(marker)
    marker.unlink(missing_ok=True)
    return _start_writer(["blocked-append", str(table_path), str(rows), str(partitions), str(marker)],
                         Path(f"{marker}.log"))


def kill_process_group(process: subprocess.Popen[bytes], timeout: float = 60) -> int:
    """SIGKILL the writer's whole process group and wait for it to end; return its exit code.

    Also waits until no process of the group is left (the writer's JVM and Python workers),
    so that nothing keeps running or writing after this returns.
    """
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    code = process.wait(timeout=timeout)
    wait_until(lambda: not live_group_members(process.pid), timeout,
               "every process of the killed writer has ended", interval=0.05)
    return code


def live_group_members(group: int) -> list[int]:
    """PIDs of the processes of a process group that are still running (not zombies).

    Read from /proc on Linux; elsewhere, ``[group]`` while a signal 0 still reaches the group.
    """
    if not Path("/proc/self/stat").exists():
        try:
            os.killpg(group, 0)
        except ProcessLookupError:
            return []
        return [group]
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        state, pgrp = fields[0], int(fields[2])
        if pgrp == group and state != "Z":
            members.append(int(stat.parent.name))
    return members


def _blocked_append_main(table_path: str, rows: int, partitions: int, marker: str) -> None:
    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType

    from deltalab.session import get_spark

    spark = get_spark("crash_writer")
    last = partitions - 1

    def gate(partition_id: int, value: int) -> int:
        if partition_id == last:
            Path(marker).touch()  # tell the notebook this task is now blocked
            time.sleep(WAIT_LIMIT_SECONDS)  # killed long before; the owner watch ends us if the notebook goes
            raise RuntimeError("the blocked writer was never killed")
        return value

    gate_udf = F.udf(gate, LongType())
    df = spark.range(0, rows, 1, partitions).select(gate_udf(F.spark_partition_id(), F.col("id")).alias("id"))
    df.write.format("delta").mode("append").save(table_path)


# --------------------------------------------------------------------------------------------
# Blind appends from threads and from processes
# --------------------------------------------------------------------------------------------


def append_rows(spark: Any, path: str, writer: int, rows: int) -> None:
    """Blind-append ``rows`` rows tagged ``writer`` to the table, labelled in commitInfo."""
    from pyspark.sql import functions as F

    (spark.range(0, rows, 1, 1)
     .withColumn("writer", F.lit(writer))
     .write.format("delta").mode("append")
     .option("userMetadata", f"writer-{writer}")
     .save(path))


def append_from_threads(spark: Any, path: str, writers: int, rows: int) -> list[BaseException]:
    """``writers`` threads on one session, released together by a barrier, each append once."""
    barrier = threading.Barrier(writers)
    errors: list[BaseException] = []

    def run(writer: int) -> None:
        try:
            barrier.wait(timeout=WAIT_LIMIT_SECONDS)
            append_rows(spark, path, writer, rows)
        except BaseException as error:  # noqa: BLE001 - reported to the caller
            errors.append(error)

    threads = [threading.Thread(target=run, args=(w,), name=f"writer-{w}") for w in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return errors


def append_from_processes(path: str, writers: int, rows: int, first_writer: int, signal_dir: Path | str,
                          timeout_s: float = 300.0) -> list[int]:
    """``writers`` separate Python processes, each with its own Spark session, append once.

    Each process starts Spark, says it is ready, and waits for a common "go" file so the
    appends overlap. Returns the exit codes (0 = committed).
    """
    signal_dir = Path(signal_dir)
    shutil.rmtree(signal_dir, ignore_errors=True)
    signal_dir.mkdir(parents=True)
    procs = [
        _start_writer(["append", path, str(first_writer + index), str(rows), str(signal_dir)],
                      signal_dir / f"writer-{index}.log")
        for index in range(writers)
    ]
    deadline = time.monotonic() + timeout_s
    while len(list(signal_dir.glob("ready-*"))) < writers:
        if any(p.poll() is not None for p in procs) or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    (signal_dir / "go").touch()
    codes = []
    for proc in procs:
        try:
            codes.append(proc.wait(timeout=max(1.0, deadline - time.monotonic())))
        except subprocess.TimeoutExpired:
            codes.append(kill_process_group(proc))
    return codes


def _append_main(path: str, writer: str, rows: str, signal_dir: str) -> None:
    from deltalab.session import get_spark

    spark = get_spark(f"writer-{writer}", master="local[1]")
    Path(signal_dir, f"ready-{writer}").touch()
    wait_until(lambda: Path(signal_dir, "go").exists(), WAIT_LIMIT_SECONDS, "the go signal", interval=0.02)
    append_rows(spark, path, int(writer), int(rows))
    spark.stop()


# --------------------------------------------------------------------------------------------
# The writer processes' entry point
# --------------------------------------------------------------------------------------------


def _end_with_owner(owner: int) -> None:
    """End this process and its whole group once the process ``owner`` has ended.

    A writer is started by a notebook's kernel; when that kernel is restarted, interrupted for
    good or killed, nothing should keep writing into its tables.
    """

    def watch() -> None:
        while _alive(owner):
            time.sleep(0.2)
        os.killpg(os.getpgrp(), signal.SIGKILL)

    threading.Thread(target=watch, name="owner-watch", daemon=True).start()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


USAGE = (
    "usage: python -m deltalab.writers blocked-append TABLE ROWS PARTITIONS MARKER OWNER_PID\n"
    "       python -m deltalab.writers append TABLE WRITER ROWS SIGNAL_DIR OWNER_PID"
)


def main(argv: list[str]) -> int:
    """``python -m deltalab.writers``: only the helpers above start it."""
    commands = {"blocked-append": (4, lambda a: _blocked_append_main(a[0], int(a[1]), int(a[2]), a[3])),
                "append": (4, lambda a: _append_main(*a))}
    if not argv or argv[0] not in commands or len(argv) != commands[argv[0]][0] + 2:
        print(USAGE, file=sys.stderr)
        return 2
    count, run = commands[argv[0]]
    _end_with_owner(int(argv[-1]))
    run(argv[1:1 + count])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
