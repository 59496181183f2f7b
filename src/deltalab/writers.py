"""Writers in other processes and threads: a writer killed mid-commit, and concurrent blind appends.

Some lessons need a second writer that is really separate: its own Python process, its own
Spark session and JVM. Each one here is a second driver (:mod:`deltalab.drivers`), stopped at
known points with holds (:mod:`deltalab.holds`), never with sleeps and hopes:

* :func:`start_blocked_append` starts a writer that appends ``partitions`` files and stops in
  the task of the last one; :meth:`BlockedAppend.kill` then SIGKILLs it. This is the book's
  figure 2-5 ("failure during a write"): the files that landed stay on disk and no reader ever
  sees them, because no commit names them.
* :func:`append_from_processes` starts several writer processes and, once all of them run Spark,
  has each append once at the same moment; :func:`append_from_threads` does the same with
  threads on one session.

Like every driver, a writer ends with the kernel that started it, and when the cell waiting for
it (``deltalab.processes.wait_until``) is interrupted.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

from deltalab.drivers import Driver, DriverCallError, PendingCall, start_driver, stop_drivers
from deltalab.errors import DeltaLabError
from deltalab.holds import WAIT_LIMIT_SECONDS, Hold, hold_gate

__all__ = [
    "BlockedAppend",
    "append_from_processes",
    "append_from_threads",
    "append_rows",
    "start_blocked_append",
]

# The blocked writers this process started; a new one ends those an interrupted cell left behind.
_BLOCKED: list[Driver] = []


# --------------------------------------------------------------------------------------------
# A writer killed mid-commit
# --------------------------------------------------------------------------------------------


class BlockedAppend:
    """A writer process whose append stops in the task of its last file (:func:`start_blocked_append`)."""

    def __init__(self, driver: Driver, hold: Hold, pending: PendingCall) -> None:
        self.driver = driver
        self.hold = hold
        self._pending = pending

    def __repr__(self) -> str:
        return f"BlockedAppend(pid {self.driver.process.pid}, {'blocked' if self.hold.reached else 'running'})"

    @property
    def blocked(self) -> bool:
        """True once the last task stopped at its hold. An append that failed before raises its error."""
        if self.hold.reached:
            return True
        if self._pending.done:
            self.hold.wait_reached(self._pending, timeout=0)  # raises why it never blocked
        return False

    def kill(self) -> int:
        """SIGKILL the writer with its JVM and Python workers; return its exit code (-9)."""
        return self.driver.kill()


def start_blocked_append(table_path: str | os.PathLike[str], rows: int, partitions: int,
                         signal_dir: str | os.PathLike[str]) -> BlockedAppend:
    """Start a writer process that appends ``rows`` rows in ``partitions`` files and hangs on the last.

    Returns at once. Every task but the last one writes its file; the last one stops at a hold
    that is never released. Poll with ``wait_until`` until :attr:`BlockedAppend.blocked` and the
    other ``partitions - 1`` files are complete (``deltalab.files.complete_parquet_files``), then
    call :meth:`BlockedAppend.kill`. The writer's output is ``signal_dir/driver.log``.
    """
    if partitions < 2:
        raise DeltaLabError(
            f"partitions is {partitions}, but the blocked writer needs at least 2 "
            "(one task that blocks, at least one that lands its file).",
            fix="Pass partitions >= 2.",
        )
    for leftover in _BLOCKED:  # a cell interrupted before it killed its writer
        if leftover.process.poll() is None:
            leftover.kill()
    _BLOCKED.clear()
    driver = start_driver("crash_writer", signal_dir)
    _BLOCKED.append(driver)
    hold = driver.hold("last-task")
    pending = driver.submit("deltalab.writers.append_blocking_last_task", os.fspath(table_path), rows, partitions,
                            hold.path)
    return BlockedAppend(driver, hold, pending)


def append_blocking_last_task(spark: Any, table_path: str, rows: int, partitions: int, hold: str) -> None:
    """Run in a driver: append ``rows`` rows in ``partitions`` files; the task of the last file
    stops at ``hold`` (a :class:`deltalab.holds.Hold` path) and is never meant to go on."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType

    last = partitions - 1
    wait = hold_gate(hold)  # a closure of plain values: Spark ships it to its Python workers

    def gate(partition_id: int, value: int) -> int:
        if partition_id == last:
            wait()
            raise RuntimeError("the blocked writer was released: it should have been killed")
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
    """``writers`` threads on one session, released together by a barrier, each append once.
    Returns the errors they raised (none: every append committed)."""
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
                          timeout_s: float = 300.0) -> list[DriverCallError]:
    """``writers`` separate processes, each with its own Spark session (``local[1]``), append once.

    The appends are sent to all of them at the same moment, once every one has started Spark,
    so they overlap. Writer ``i`` tags its rows ``first_writer + i``. Returns the errors the
    appends raised (none: every append committed); the processes are stopped before it returns.
    """
    signal_dir = Path(signal_dir)
    started = [start_driver(f"writer-{first_writer + index}", signal_dir / f"writer-{index}", master="local[1]")
               for index in range(writers)]
    try:
        for driver in started:
            driver.wait_ready(timeout_s)
        calls = [driver.submit("deltalab.writers.append_rows", path, first_writer + index, rows)
                 for index, driver in enumerate(started)]
        errors = []
        for call in calls:
            try:
                call.result(timeout_s)
            except DriverCallError as error:
                errors.append(error)
        return errors
    finally:  # also when interrupted: no writer keeps appending
        stop_drivers(started)
