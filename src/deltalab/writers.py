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

Every writer process runs ``python -m deltalab.writers ...`` under a guardian
(:func:`deltalab.processes.start_owned`): it ends, with its JVM and Python workers, when the
kernel that started it ends, and when the cell waiting for it (:func:`wait_until`) is interrupted.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from deltalab.errors import DeltaLabError
from deltalab.processes import end_process, live_group_members, start_owned, wait_until

__all__ = [
    "append_from_processes",
    "append_from_threads",
    "append_rows",
    "kill_process_group",
    "live_group_members",
    "start_blocked_append",
    "wait_until",
]

#: How long a writer waits at a marker before giving up on its own (a safety net, never reached
#: when the notebook drives it as it should; a loaded machine can be slow).
WAIT_LIMIT_SECONDS = 600.0

# The blocked writers this process started; a new one ends those an interrupted cell left behind.
_BLOCKED: list[subprocess.Popen[bytes]] = []


def _start_writer(arguments: list[str], log_path: Path) -> subprocess.Popen[bytes]:
    """Start ``python -m deltalab.writers ARGUMENTS`` under a guardian, output to ``log_path``."""
    return start_owned([sys.executable, "-m", "deltalab.writers", *arguments], log_path)


def kill_process_group(process: subprocess.Popen[bytes], timeout: float = 60) -> int:
    """SIGKILL the writer with every process it started and wait for them to end; return its exit code.

    Also waits until none of them runs any more (the writer's JVM and Python workers), so that
    nothing keeps running or writing after this returns.
    """
    return end_process(process, timeout)


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
    for leftover in _BLOCKED:  # a cell interrupted before it killed its writer
        if leftover.poll() is None:
            end_process(leftover)
    _BLOCKED.clear()
    marker = Path(marker)
    marker.unlink(missing_ok=True)
    writer = _start_writer(["blocked-append", str(table_path), str(rows), str(partitions), str(marker)],
                           Path(f"{marker}.log"))
    _BLOCKED.append(writer)
    return writer


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
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for index in range(writers):
            procs.append(_start_writer(["append", path, str(first_writer + index), str(rows), str(signal_dir)],
                                       signal_dir / f"writer-{index}.log"))
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
    except BaseException:  # interrupted (KeyboardInterrupt) or failed: no writer keeps appending
        for proc in procs:
            if proc.poll() is None:
                kill_process_group(proc)
        raise


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


USAGE = (
    "usage: python -m deltalab.writers blocked-append TABLE ROWS PARTITIONS MARKER\n"
    "       python -m deltalab.writers append TABLE WRITER ROWS SIGNAL_DIR"
)


def main(argv: list[str]) -> int:
    """``python -m deltalab.writers``: only the helpers above start it."""
    commands = {"blocked-append": (4, lambda a: _blocked_append_main(a[0], int(a[1]), int(a[2]), a[3])),
                "append": (4, lambda a: _append_main(*a))}
    if not argv or argv[0] not in commands or len(argv) != commands[argv[0]][0] + 1:
        print(USAGE, file=sys.stderr)
        return 2
    count, run = commands[argv[0]]
    run(argv[1:1 + count])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
