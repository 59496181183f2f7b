"""A writer that dies mid-commit, on purpose and deterministically.

The book's figure 2-5 ("failure during a write") says: a job that crashes after writing
some Parquet files but before its commit leaves those files on disk, and readers never
see them because they are not in the log. To show it for real, without timing luck:

1. :func:`start_blocked_append` starts a separate Python process (its own Spark session,
   via :func:`deltalab.get_spark`) that appends ``partitions`` partitions to a table.
   A Python UDF lets every partition through except the last one, whose task signals
   "I am blocked" by creating a marker file and then waits (it would wait forever).
2. The notebook calls :func:`wait_until` to poll, with a timeout, until the marker exists
   and the other ``partitions - 1`` Parquet files are complete on disk (their footer reads).
3. :func:`kill_process_group` sends SIGKILL to the writer's whole process group (Python
   driver, JVM, Python workers): nothing gets a chance to clean up or commit.

Run as ``python -m deltalab.crash TABLE ROWS PARTITIONS MARKER OWNER_PID``; only the notebook does that.
The blocked task gives up by itself if the process OWNER_PID (the notebook's kernel) ends.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from deltalab.errors import DeltaLabError

__all__ = [
    "complete_parquet_files",
    "kill_process_group",
    "start_blocked_append",
    "wait_until",
]

#: How long the blocked task waits before giving up on its own (a safety net, never reached
#: when the notebook kills the writer as it should).
BLOCK_LIMIT_SECONDS = 600


def start_blocked_append(table_path: str | os.PathLike[str], rows: int, partitions: int, marker: str | os.PathLike[str]) -> subprocess.Popen[bytes]:
    """Start a writer process that appends ``rows`` rows in ``partitions`` files and hangs on the last.

    The process runs in a new session (its own process group) so that
    :func:`kill_process_group` reaches the JVM and Python workers it starts. Its output
    goes to ``<marker>.log`` so that nothing leaks into the notebook.
    """
    if partitions < 2:
        raise DeltaLabError(
            f"partitions is {partitions}, but the blocked writer needs at least 2 "
            "(one task that blocks, at least one that lands its file).",
            fix="Pass partitions >= 2.",
        )
    marker = Path(marker)
    if marker.exists():
        marker.unlink()
    log = open(f"{marker}.log", "wb")  # noqa: SIM115 - handed to the child, closed when it ends
    return subprocess.Popen(
        [sys.executable, "-m", "deltalab.crash", str(table_path), str(rows), str(partitions), str(marker), str(os.getpid())],
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )


def complete_parquet_files(directory: str | os.PathLike[str]) -> list[Path]:
    """The ``part-*.parquet`` files under ``directory`` whose footer pyarrow can read, sorted.

    A file a task is still writing has no footer yet, so it is not counted.
    """
    import pyarrow.parquet as pq

    done = []
    for path in sorted(Path(directory).rglob("part-*.parquet")):
        try:
            pq.read_metadata(path)
        except Exception:  # noqa: BLE001 - partial file: no footer yet
            continue
        done.append(path)
    return done


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

    def group_gone() -> bool:
        if Path("/proc/self/stat").exists():  # Linux: zombies waiting to be reaped do not count
            return not _live_members(process.pid)
        try:
            os.killpg(process.pid, 0)
        except ProcessLookupError:
            return True
        return False

    wait_until(group_gone, timeout, "every process of the killed writer has ended", interval=0.05)
    return code


def _live_members(group: int) -> list[int]:
    """PIDs of the processes of a process group that are still running (not zombies), from /proc."""
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


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _main(table_path: str, rows: int, partitions: int, marker: str, owner: int) -> None:
    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType

    from deltalab import get_spark

    spark = get_spark("crash_writer")
    last = partitions - 1

    def gate(partition_id: int, value: int) -> int:
        if partition_id == last:
            Path(marker).touch()  # tell the notebook this task is now blocked
            waited = 0.0
            # The notebook kills us long before the limit; if the notebook itself is gone
            # (kernel interrupted or restarted), give up so that no writer is left behind.
            while waited < BLOCK_LIMIT_SECONDS and _alive(owner):
                time.sleep(0.1)
                waited += 0.1
            raise RuntimeError("the blocked writer was never killed")
        return value

    gate_udf = F.udf(gate, LongType())
    df = spark.range(0, rows, 1, partitions).select(gate_udf(F.spark_partition_id(), F.col("id")).alias("id"))
    df.write.format("delta").mode("append").save(table_path)


if __name__ == "__main__":
    _main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], int(sys.argv[5]) if len(sys.argv) > 5 else os.getppid())
