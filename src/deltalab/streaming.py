"""Structured Streaming into and out of Delta: landing files, runs that end, the streaming checkpoint.

A streaming lesson must be deterministic: no ``sleep`` and hope that a micro-batch has run. So
every query here runs with ``trigger(availableNow=True)``: it processes what is there when it
starts, in as many batches as its options ask for, and stops. Files reach the landing folder
whole (:func:`drop_landing_file` writes a hidden temporary name and renames it; Spark's file
listing skips names that start with ``.``), and a query is killed only at a known point:

* :func:`commit_then_hold` runs in a second driver (:mod:`deltalab.drivers`). Its stream stops at
  a gate in its first row until the kernel releases it; meanwhile it takes the query's progress
  lock, the lock Spark needs to record a finished batch in ``commits/``. Released, the batch
  commits to Delta and then waits for that lock forever.
* :func:`kill_after_delta_commit` is the kernel's side: release, wait for the Delta commit, kill
  the driver. The table then holds the batch; the streaming checkpoint says it never finished.

The streaming checkpoint is read by :func:`query_id`, :func:`checkpoint_batches` and
:func:`batch_offsets`; the table's ``txn`` actions by :func:`txn_actions`
(:func:`deltalab.log.replay_log` gives the latest version per appId, checkpoints included).
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ContextManager, Sequence

from deltalab.drivers import Driver
from deltalab.errors import DeltaLabError
from deltalab.holds import hold_gate, hold_here, hold_markers
from deltalab.log import commit_versions, latest_version, read_log
from deltalab.processes import wait_until
from deltalab.publish import publishing
from deltalab.session import temporary_conf
from deltalab.spark_jvm import take_progress_lock

__all__ = [
    "CrashReport",
    "batch_offsets",
    "batch_rows",
    "checkpoint_batches",
    "commit_then_hold",
    "drop_landing_file",
    "drop_landing_lines",
    "idempotent_writes",
    "kill_after_delta_commit",
    "query_id",
    "run_available",
    "txn_actions",
]

#: How long the kernel waits for a step of a killed query (a loaded machine can be slow).
WAIT_LIMIT_SECONDS = 600.0


def drop_landing_file(landing: str | os.PathLike[str], name: str, rows: Sequence[dict[str, Any]]) -> Path:
    """Write ``rows`` as JSON lines to ``landing/name``, whole (:func:`drop_landing_lines`). Returns the file's path."""
    return drop_landing_lines(landing, name, [json.dumps(row) for row in rows])


def drop_landing_lines(landing: str | os.PathLike[str], name: str, lines: Sequence[str]) -> Path:
    """Write ``lines`` (text, one record a line) to ``landing/name``, whole: a hidden temporary file, then a rename.

    A file source lists the folder when a batch is planned; written in place, a half-written
    file could be read. Spark skips names that start with ``.`` or ``_``, so it never sees the
    temporary one. A file source also takes new files in order of modification time, in
    milliseconds, and two files landed within one millisecond could be read in either order; so
    the file gets a time later than every file already in the folder, and files are read in the
    order they landed. Returns the file's path.
    """
    if name.startswith((".", "_")):
        raise DeltaLabError(f"The landing file name {name!r} starts with '.' or '_': Spark's file source never reads it.",
                            fix="Name landing files like 'batch-000.json'.")
    folder = Path(landing)
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / name
    with publishing(target) as temporary:
        temporary.write_text("".join(line + "\n" for line in lines))
        landed_ms = [p.stat().st_mtime_ns // 1_000_000 for p in folder.iterdir()
                     if p.is_file() and not p.name.startswith((".", "_")) and p.name != name]
        own_ms = temporary.stat().st_mtime_ns // 1_000_000
        if landed_ms and own_ms <= max(landed_ms):
            later = (max(landed_ms) + 1) * 1_000_000
            os.utime(temporary, ns=(later, later))
    return target


def run_available(writer: Any, path: str | os.PathLike[str] | None = None, timeout: float = WAIT_LIMIT_SECONDS) -> Any:
    """Start ``writer`` (a ``DataStreamWriter``) with ``trigger(availableNow=True)``, wait until it
    has processed everything there was and stopped, and return the query.

    ``path`` is the Delta table to write to (None for ``foreachBatch`` or a table name). A failed
    query raises its ``StreamingQueryException``, as ``awaitTermination`` does.
    """
    started = writer.trigger(availableNow=True)
    query = started.start(os.fspath(path)) if path is not None else started.start()
    if not query.awaitTermination(timeout):
        query.stop()
        raise DeltaLabError(f"The streaming query did not finish within {timeout:.0f} s.",
                            fix="Look at query.lastProgress; a query that waits for input never ends with availableNow.")
    return query


def batch_rows(query: Any) -> list[tuple[int, int]]:
    """(batch id, input rows) of each micro-batch the query ran, in order."""
    return [(progress["batchId"], progress["numInputRows"]) for progress in query.recentProgress]


def idempotent_writes(spark: Any, app_id: str, version: int) -> ContextManager[None]:
    """A ``with`` block whose Delta writes carry the ``txn`` label (``app_id``, ``version``).

    MERGE, UPDATE and DELETE take no ``txnAppId``/``txnVersion`` writer options; they read the
    session settings ``spark.databricks.delta.write.txnAppId`` and ``...txnVersion`` instead.
    Delta skips a labelled write whose version is not above the one the table holds for that
    appId, so a ``foreachBatch`` function that runs its MERGE in this block with the batch id is
    harmless when a batch runs again. Both settings are unset when the block ends, so later writes
    of the session are not labelled with this batch.
    """
    if not isinstance(app_id, str) or not app_id:
        raise DeltaLabError(f"app_id {app_id!r} is not a name.", fix="Pass a stable, non-empty name, e.g. \"silver\".")
    if isinstance(version, bool) or not isinstance(version, int) or version < 0:
        raise DeltaLabError(f"version {version!r} is not a batch id.", fix="Pass the foreachBatch batch id (an int >= 0).")
    return temporary_conf(spark, {"spark.databricks.delta.write.txnAppId": app_id,
                                  "spark.databricks.delta.write.txnVersion": str(version)})


# --------------------------------------------------------------------------------------------
# The streaming checkpoint and the table's txn actions
# --------------------------------------------------------------------------------------------


def query_id(checkpoint: str | os.PathLike[str]) -> str:
    """The query's id, kept in the checkpoint's ``metadata`` file: the ``appId`` of its Delta commits."""
    metadata = Path(checkpoint) / "metadata"
    if not metadata.is_file():
        raise DeltaLabError(f"{checkpoint} is not a streaming checkpoint: it has no metadata file.",
                            fix="Pass the folder given as checkpointLocation, after the query has started once.")
    return json.loads(metadata.read_text().splitlines()[0])["id"]


def _batch_files(folder: Path) -> list[int]:
    if not folder.is_dir():
        return []
    return sorted(int(p.name) for p in folder.iterdir() if p.name.isdigit())


def checkpoint_batches(checkpoint: str | os.PathLike[str]) -> dict[str, list[int]]:
    """The batch ids the checkpoint has planned (``offsets/``) and finished (``commits/``)."""
    folder = Path(checkpoint)
    return {"offsets": _batch_files(folder / "offsets"), "commits": _batch_files(folder / "commits")}


def batch_offsets(checkpoint: str | os.PathLike[str], batch_id: int) -> list[dict[str, Any]]:
    """The end offset of each source of batch ``batch_id`` (``offsets/<id>``: a version line, the
    batch's metadata, then one JSON line per source, e.g. ``{"logOffset": 2}`` for a file source
    or a Delta source's ``reservoirVersion`` and ``index``)."""
    path = Path(checkpoint) / "offsets" / str(batch_id)
    if not path.is_file():
        planned = _batch_files(path.parent)
        raise DeltaLabError(f"The streaming checkpoint {checkpoint} has no batch {batch_id} (planned: {planned}).",
                            fix="Pass a batch id listed by checkpoint_batches(checkpoint)['offsets'].")
    lines = path.read_text().splitlines()
    return [json.loads(line) for line in lines[2:]]


def txn_actions(table_path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Every ``txn`` action in the table's JSON commits: version, appId, txn version (the batch id).

    Commits only: a checkpoint keeps the latest txn per appId, which
    ``deltalab.replay_log(table).app_versions`` gives.
    """
    log = read_log(table_path)
    return [{"table version": version, "appId": action["txn"]["appId"], "txn version": action["txn"]["version"]}
            for version in log.versions for action in log.actions(version) if "txn" in action]


# --------------------------------------------------------------------------------------------
# A query killed after its Delta commit, before its checkpoint records the batch
# --------------------------------------------------------------------------------------------


def commit_then_hold(spark: Any, landing: str, schema: str, table: str, checkpoint: str, gate: str,
                     locked: str) -> None:
    """Run in a second driver: one availableNow batch of the landing folder into ``table`` that
    commits to Delta and then never records the batch in the checkpoint's ``commits/``.

    The stream's first row stops at the hold ``gate``; the batch is then planned (``offsets/``
    written) and running. This function then takes the query's progress lock, which Spark
    needs after the sink's commit to write ``commits/<batch>``, and stops at the hold
    ``locked``. Released by the kernel, the batch writes its files and commits to Delta, then
    waits for the lock until the process is killed.
    """
    from pyspark.sql import functions as F
    from pyspark.sql.types import BooleanType

    gate_udf = F.udf(hold_gate(gate), BooleanType(), useArrow=False)
    stream = spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).json(landing)
    first_column = stream.columns[0]
    query = (stream.filter(gate_udf(F.col(first_column))).writeStream.format("delta")
             .option("checkpointLocation", checkpoint).trigger(availableNow=True).start(table))
    reached = hold_markers(gate)[0]
    while not os.path.exists(reached):
        if not query.isActive:
            raise RuntimeError(f"the query ended before its gate: {query.exception()}")
        time.sleep(0.02)
    take_progress_lock(query)
    hold_here(locked)
    raise RuntimeError("released after the lock: this process should have been killed")


@dataclass
class CrashReport:
    """What :func:`kill_after_delta_commit` saw: the Delta version the batch committed, the
    batch id, whether the checkpoint had planned and finished it when the process died, and the
    process's exit code (-9: SIGKILL)."""

    table_version: int
    batch_id: int
    planned: bool
    finished: bool
    exit_code: int


def kill_after_delta_commit(driver: Driver, landing: str | os.PathLike[str], schema: str,
                            table: str | os.PathLike[str], checkpoint: str | os.PathLike[str]) -> CrashReport:
    """Run the next batch of the stream in ``driver`` and kill it after its Delta commit.

    The stream is the one :func:`commit_then_hold` builds (JSON files of ``schema`` in
    ``landing``, one file per batch, into the Delta table ``table`` with ``checkpoint``); the
    driver is a :func:`deltalab.drivers.start_driver` process, killed here with its JVM.
    """
    table, checkpoint = Path(table), Path(checkpoint)
    before = latest_version(table) if (table / "_delta_log").is_dir() and commit_versions(table) else -1
    next_batch = max(checkpoint_batches(checkpoint)["commits"], default=-1) + 1
    gate, locked = driver.hold("stream-gate"), driver.hold("progress-locked")
    pending = driver.submit("deltalab.streaming.commit_then_hold", os.fspath(landing), schema, os.fspath(table),
                            os.fspath(checkpoint), gate.path, locked.path)
    gate.wait_reached(pending, WAIT_LIMIT_SECONDS)
    locked.wait_reached(pending, WAIT_LIMIT_SECONDS)
    gate.release()
    commit = table / "_delta_log" / f"{before + 1:020d}.json"
    wait_until(lambda: commit.exists() or pending.done, WAIT_LIMIT_SECONDS,
               f"the batch commits version {before + 1} to Delta", interval=0.05)
    if not commit.exists():
        pending.result(timeout=0)
    # The commit file is there; Spark cannot record the batch while this process holds its lock.
    batches = checkpoint_batches(checkpoint)
    exit_code = driver.kill()
    return CrashReport(table_version=before + 1, batch_id=next_batch, planned=next_batch in batches["offsets"],
                       finished=next_batch in batches["commits"], exit_code=exit_code)
