"""Deterministic concurrency experiments on real Delta tables.

Delta's optimistic concurrency control only shows itself when one transaction commits while
another is between its read and its commit. Waiting for that to happen by chance makes flaky
lessons, so these helpers *hold* a transaction at a known point instead:

* :class:`TransactionHold` runs an operation in a thread with a "gate" column in its condition
  (or its data). The gate is a Python UDF that blocks the first time it is evaluated until it is
  released. The operation has then started its transaction (it knows its read version) but cannot
  commit. Meanwhile the caller commits something else, then releases the gate.
* :func:`write_commit_file` calls the log store the way a commit does, optionally held inside it,
  and :func:`race_for_commit_file` races writers in separate drivers for one commit file
  (:mod:`deltalab.drivers`).
* :func:`run_pair` / :func:`conflict_matrix` run every pair of operations and record what the
  second committer got, so the course's conflict matrix is measured, never typed
  (``deltalab.plots.style_conflict_matrix`` colours it).
* :func:`retry_on_conflict` retries an operation on the conflicts it names.

Writers in other threads and processes (blind appends, a writer killed mid-commit) are in
:mod:`deltalab.writers`; Delta's own ``OptimisticTransaction``, driven by hand for the one case no
SQL operation reaches (removing files that were never read), is ``deltalab.jvm.JvmTransaction``.

The gate is a hold (:mod:`deltalab.holds`): Python UDFs run in PySpark *worker processes*, not
in the driver's Python, so it signals through marker files both see; the driver side uses a
``threading.Event`` to learn when the held operation's thread has finished.
"""

from __future__ import annotations

import shutil
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import delta.exceptions as dx  # importing it installs Delta's JVM-to-Python exception conversion

from deltalab.errors import DeltaLabError
from deltalab.holds import Hold, hold_gate
from deltalab.jvm import write_through_log_store
from deltalab.log import commit_info, latest_version

#: Every commit-conflict class of ``delta.exceptions``. They do NOT inherit from one another
#: (each derives from PySparkException only), so a retry loop must name the ones it handles.
CONFLICT_CLASSES: tuple[type[Exception], ...] = (
    dx.ConcurrentAppendException,
    dx.ConcurrentDeleteReadException,
    dx.ConcurrentDeleteDeleteException,
    dx.MetadataChangedException,
    dx.ProtocolChangedException,
    dx.ConcurrentTransactionException,
    dx.ConcurrentWriteException,
    dx.DeltaConcurrentModificationException,
)

DEFAULT_TIMEOUT_S = 600.0  # only a safety net against a hung job; a loaded machine can be slow


def conflict_name(error: BaseException | None) -> str:
    """The short name of a Delta conflict (e.g. ``"ConcurrentAppendException"``), or ``"none"``.

    Any other exception is re-raised: a matrix cell must never hide a real failure.
    """
    if error is None:
        return "none"
    if isinstance(error, CONFLICT_CLASSES):
        return type(error).__name__
    raise error


# --------------------------------------------------------------------------------------------
# Holding a transaction between its read and its commit
# --------------------------------------------------------------------------------------------


#: What a held operation raises when the block that held it was left by an exception (an
#: interrupted cell): it fails at its gate instead of committing.
CANCELLED_MESSAGE = "the held operation was cancelled: the block holding it was left by an exception"


class TransactionHold:
    """Run one Delta operation in a thread and hold it between its read and its commit.

    Use it as a context manager::

        with TransactionHold(spark, wd / "_hold") as hold:
            hold.start(lambda gate: table.delete(gate("id") & (F.col("id") == 1)))
            hold.wait_until_held()          # A has read version N and is blocked
            table.update(...)               # B commits N+1
        # leaving the block releases A and waits for it; A's outcome is in hold.error

    Leaving the block by an exception (a failed assertion, or ``KeyboardInterrupt`` when the
    cell is interrupted) cancels A instead: A fails at its gate, commits nothing, and its thread
    has ended when the exception goes on, so the cell can be run again at once.

    ``gate(column)`` returns a boolean Column that is always true but blocks the first time it is
    evaluated, until :meth:`release` (or the end of the ``with`` block). Put it in a condition
    (``DELETE``/``UPDATE``/``MERGE`` source) or a filter of appended data: the operation has then
    started its transaction, because Delta takes the snapshot before it evaluates any data.
    """

    def __init__(self, spark: Any, signal_dir: Path | str, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        self.spark = spark
        self.signal_dir = Path(signal_dir)
        self.timeout_s = timeout_s
        if self.signal_dir.exists():
            shutil.rmtree(self.signal_dir)
        self.signal_dir.mkdir(parents=True)
        self._gate_hold = Hold(self.signal_dir / "gate")   # the gate's markers: reached, release, cancel
        self._done = threading.Event()
        self._thread: threading.Thread | None = None
        self.result: Any = None
        self.error: BaseException | None = None
        from pyspark.sql.functions import udf
        from pyspark.sql.types import BooleanType

        # useArrow=False: an Arrow-evaluated gate in an UPDATE of a partitioned table never ran
        # (the job hung before calling it) in Delta 4.4 / Spark 4.2; the row-at-a-time UDF does.
        self._udf = udf(hold_gate(self._gate_hold.path, timeout_s, CANCELLED_MESSAGE), BooleanType(), useArrow=False)

    def gate(self, column: str) -> Any:
        """A Column that is true for every row and blocks once, until released. ``column`` must be
        a data column of the rows it is evaluated on (a UDF of a literal could be evaluated early)."""
        from pyspark.sql.functions import col

        return self._udf(col(column))

    def start(self, operation: Callable[[Callable[[str], Any]], Any]) -> "TransactionHold":
        """Start ``operation(gate)`` in a background thread; its result or exception is kept."""
        if self._thread is not None:
            raise DeltaLabError("This TransactionHold already runs an operation.", fix="Use one TransactionHold per held operation.")

        def run() -> None:
            try:
                self.result = operation(self.gate)
            except BaseException as error:  # noqa: BLE001 - kept and inspected by the caller
                self.error = error
            finally:
                self._done.set()

        self._thread = threading.Thread(target=run, name="held-transaction", daemon=True)
        self._thread.start()
        return self

    def wait_until_held(self) -> None:
        """Block until the operation is inside its transaction and stopped at the gate."""
        deadline = time.monotonic() + self.timeout_s
        while not self._gate_hold.reached:
            if self._done.wait(0.01):
                if self._gate_hold.reached:
                    break
                raise DeltaLabError(
                    f"The held operation finished without evaluating the gate ({type(self.error).__name__}: "
                    f"{str(self.error).splitlines()[0][:300] if self.error else 'no error'}).",
                    fix="Put gate('<a data column>') into the operation's condition or the data it writes.",
                )
            if time.monotonic() > deadline:
                raise DeltaLabError(f"The held operation did not reach the gate within {self.timeout_s:.0f} s.",
                                    fix="Check that the operation evaluates gate(...) on at least one row.")

    @property
    def finished(self) -> bool:
        """True once the held operation has returned or raised."""
        return self._done.is_set()

    def _signal_and_wait(self, signal: Callable[[], None], after: str, fix: str) -> BaseException | None:
        """Signal the gate (release or cancel), wait for the held operation to end, return its exception."""
        signal()
        if self._thread is not None and not self._done.wait(self.timeout_s):
            raise DeltaLabError(f"The held operation did not end after its {after}.", fix=fix)
        return self.error

    def release(self) -> BaseException | None:
        """Let the held operation continue, wait for it, and return its exception (or None)."""
        return self._signal_and_wait(self._gate_hold.release, "release", "Look at the Spark log for a stuck job.")

    def cancel(self) -> BaseException | None:
        """Make the held operation fail at its gate (nothing committed), wait for it, return its exception."""
        return self._signal_and_wait(self._gate_hold.cancel, "cancellation",
                                     "Look at the Spark log for a stuck job, or restart the kernel.")

    def __enter__(self) -> "TransactionHold":
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is None:
            self.release()
            return
        # An error or an interrupt: the held operation must neither commit behind the learner's
        # back nor keep its thread, so it is cancelled. The caller sees its own exception, not a
        # second one from here.
        self._gate_hold.cancel()
        if self._thread is not None:
            self._done.wait(self.timeout_s)


# --------------------------------------------------------------------------------------------
# Operation pairs and the conflict matrix
# --------------------------------------------------------------------------------------------

#: An operation the *held* side can run: it gets the gate factory and the table path.
HeldOperation = Callable[[Any, str, Callable[[str], Any]], Any]
#: An operation the *winning* side runs while the other one is held.
WinningOperation = Callable[[Any, str], Any]


@dataclass
class PairOutcome:
    """What happened when ``held`` read version ``read_version`` and ``winner`` committed first."""

    held: str
    winner: str
    read_version: int
    winner_error: BaseException | None
    held_error: BaseException | None
    versions_after: int
    held_commit_read_version: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def outcome(self) -> str:
        """``"none"`` when both committed, else the held operation's conflict class name."""
        if self.winner_error is not None:
            raise self.winner_error
        return conflict_name(self.held_error)


def run_pair(spark: Any, path: str, held: tuple[str, HeldOperation], winner: tuple[str, WinningOperation],
             signal_dir: Path | str) -> PairOutcome:
    """Hold ``held`` after its read, commit ``winner``, release, and report both outcomes."""
    read_version = latest_version(path)
    with TransactionHold(spark, signal_dir) as hold:
        hold.start(lambda gate: held[1](spark, path, gate))
        hold.wait_until_held()
        winner_error: BaseException | None = None
        try:
            winner[1](spark, path)
        except CONFLICT_CLASSES as error:
            winner_error = error
        assert not hold.finished, "the held operation must still be waiting at its gate"
    outcome = PairOutcome(held[0], winner[0], read_version, winner_error, hold.error, latest_version(path))
    if hold.error is None:
        outcome.held_commit_read_version = commit_info(path, outcome.versions_after).get("readVersion")
    return outcome


def conflict_matrix(spark: Any, template: Path | str, scratch: Path | str,
                    held_ops: Sequence[tuple[str, HeldOperation]],
                    winning_ops: Sequence[tuple[str, WinningOperation]],
                    progress: Callable[[Iterable[Any]], Iterable[Any]] | None = None) -> Any:
    """Run every (held, winner) pair on a fresh copy of ``template`` and return a pandas table.

    Rows: the operation that read first and commits second; columns: the operation that
    commits in between. Cells: the exception class the held operation got, or ``"none"``.
    Copying the template directory (log and data files) gives each pair the same start state
    without re-running Spark to create it.
    """
    import pandas as pd

    template, scratch = Path(template), Path(scratch)
    pairs = [(h, w) for h in held_ops for w in winning_ops]
    cells: dict[str, dict[str, str]] = {h[0]: {} for h in held_ops}
    for index, (h, w) in enumerate(progress(pairs) if progress else pairs):
        table = scratch / f"pair_{index:02d}"
        if table.exists():
            shutil.rmtree(table)
        shutil.copytree(template, table)
        result = run_pair(spark, str(table), h, w, scratch / f"pair_{index:02d}_signals")
        cells[h[0]][w[0]] = result.outcome
        shutil.rmtree(table, ignore_errors=True)
    frame = pd.DataFrame(cells).T.loc[[h[0] for h in held_ops], [w[0] for w in winning_ops]]
    frame.index.name = "held (reads first, commits second)"
    frame.columns.name = "commits in between"
    return frame


def make_pair_table(spark: Any, path: str | Path) -> None:
    """The start state of every matrix pair: ids 0..19 with ``v = 10 * id`` in two files,
    ids 0-9 in one and 10-19 in the other, unpartitioned."""
    from pyspark.sql import functions as F

    spark.range(0, 20, 1, 2).withColumn("v", F.col("id") * 10).write.format("delta").save(str(path))


def _table(spark: Any, path: str) -> Any:
    from delta.tables import DeltaTable

    return DeltaTable.forPath(spark, path)


def standard_operations() -> tuple[list[tuple[str, HeldOperation]], list[tuple[str, WinningOperation]], dict[str, str]]:
    """The operations of the course's conflict matrix, on a :func:`make_pair_table` table.

    Returns (held operations, winning operations, description of each name). A held operation
    puts the gate into its condition or data; a winning operation runs plainly. Every
    operation touches the first file (ids 0-9) except the appends.
    """
    from pyspark.sql import functions as F

    def rows(spark: Any, start: int) -> Any:
        return spark.range(start, start + 5, 1, 1).withColumn("v", F.lit(0).cast("long"))

    held: list[tuple[str, HeldOperation]] = [
        ("append", lambda s, p, g: rows(s, 100).filter(g("id")).write.format("delta").mode("append").save(p)),
        ("delete", lambda s, p, g: _table(s, p).delete(g("id") & (F.col("id") == 1))),
        ("update", lambda s, p, g: _table(s, p).update(g("id") & (F.col("id") == 2), {"v": F.lit(-2).cast("long")})),
        ("merge", lambda s, p, g: _table(s, p).alias("t").merge(
            s.createDataFrame([(3, -3)], "id long, v long").filter(g("id")).alias("s"), "t.id = s.id")
            .whenMatchedUpdateAll().execute()),
    ]
    winning: list[tuple[str, WinningOperation]] = [
        ("append", lambda s, p: rows(s, 200).write.format("delta").mode("append").save(p)),
        ("delete 1 row", lambda s, p: _table(s, p).delete(F.col("id") == 4)),
        ("delete a file", lambda s, p: _table(s, p).delete(F.col("id") < 10)),
        ("update", lambda s, p: _table(s, p).update(F.col("id") == 5, {"v": F.lit(-5).cast("long")})),
        ("optimize", lambda s, p: _table(s, p).optimize().executeCompaction()),
        ("set property", lambda s, p: s.sql(f"ALTER TABLE delta.`{p}` SET TBLPROPERTIES ('course.owner' = 'b')")),
    ]
    described = {
        "append": "blind append of 5 new rows (DataFrame .write.mode('append'))",
        "delete": "DELETE WHERE id = 1 (rewrites the file of ids 0-9)",
        "update": "UPDATE SET v = -2 WHERE id = 2 (rewrites the file of ids 0-9)",
        "merge": "MERGE a source row id = 3 WHEN MATCHED UPDATE (rewrites the file of ids 0-9)",
        "delete 1 row": "DELETE WHERE id = 4: removes the file of ids 0-9, adds its 9 other rows",
        "delete a file": "DELETE WHERE id < 10: removes the file of ids 0-9, adds nothing",
        "optimize": "OPTIMIZE: removes both files, adds one compacted file (dataChange = false)",
        "set property": "ALTER TABLE SET TBLPROPERTIES: a new metaData action",
    }
    return held, winning, described


# --------------------------------------------------------------------------------------------
# Retrying
# --------------------------------------------------------------------------------------------


@dataclass
class RetryReport:
    """The attempts a :func:`retry_on_conflict` call made and what each one raised."""

    attempts: list[str]
    result: Any = None


def retry_on_conflict(operation: Callable[[], Any], retry_on: tuple[type[Exception], ...],
                      max_attempts: int = 3) -> RetryReport:
    """Run ``operation`` again when it raises one of ``retry_on`` (a tuple of Delta classes).

    Each attempt starts a new transaction on the latest snapshot, so a retry re-reads what the
    winner committed. An exception not in ``retry_on`` propagates at once; after
    ``max_attempts`` failures the last conflict propagates.
    """
    if not retry_on or not all(isinstance(c, type) and issubclass(c, BaseException) for c in retry_on):
        raise DeltaLabError("retry_on must be a non-empty tuple of exception classes.",
                            fix="Pass e.g. (ConcurrentAppendException, ConcurrentDeleteReadException) from delta.exceptions.")
    attempts: list[str] = []
    for attempt in range(1, max_attempts + 1):
        try:
            result = operation()
        except retry_on as error:
            attempts.append(type(error).__name__)
            if attempt == max_attempts:
                raise
            continue
        attempts.append("committed")
        return RetryReport(attempts, result)
    raise AssertionError("unreachable")


# --------------------------------------------------------------------------------------------
# The log store, as a commit calls it
# --------------------------------------------------------------------------------------------


@dataclass
class CommitAttempt:
    """One writer's try to create a commit file through the log store.

    ``thrown_at`` is the Java stack frame that refused it (``Class.method(File.java:line)``), so a
    lesson can tell *which* check refused the writer.
    """

    writer: str
    won: bool
    error: str | None
    thrown_at: str | None = None


def write_commit_file(spark: Any, table_path: str, version: int, lines: Sequence[str],
                      hold: str | None = None) -> dict[str, Any]:
    """Create ``_delta_log/<version>.json`` holding ``lines`` through Delta's own log store, as the
    last step of every commit does, and report what happened (:class:`CommitAttempt` fields).

    For ``file:`` the log store is ``HDFSLogStore`` (``storage/.../HDFSLogStore.java``, v4.4.0):
    it refuses a commit file that already exists (line 104, the pre-check), creates a hidden
    temporary file (line 110), writes the lines into it (117), and renames it to the commit
    file without overwrite, turning the rename's refusal into ``FileAlreadyExistsException``
    (line 131). With ``hold`` (the path of a :class:`deltalab.holds.Hold`) the write stops at
    its first look at the lines: past the pre-check, with its temporary file on disk.
    Runs in any driver (``Driver.submit("deltalab.concurrency.write_commit_file", ...)``).
    """
    return write_through_log_store(spark, table_path, version, lines, hold_gate(hold) if hold else None)


@dataclass
class CommitRace:
    """What :func:`race_for_commit_file` saw: each writer's attempt, and ``_delta_log`` while all were held."""

    attempts: list[CommitAttempt]
    held_listing: list[str]


def race_for_commit_file(table_path: str, version: int, writers: dict[str, Any],
                         signal_dir: Path | str) -> CommitRace:
    """Race ``writers`` (label -> a :class:`deltalab.drivers.Driver`, or ``in_this_kernel(spark)``)
    for ``_delta_log/<version>.json``, deterministically.

    Each writer calls :func:`write_commit_file` with a one-line commit labelled with its name
    (``commitInfo.userMetadata``) and stops inside the log store, past its pre-check and with
    its temporary file on disk. Once all are held, the log folder is listed; then the writers
    are released one at a time, in the order given, each running to its end before the next.
    """
    import json

    signal_dir = Path(signal_dir)
    lines = {label: [json.dumps({"commitInfo": {"operation": "MANUAL UPDATE", "userMetadata": label}})]
             for label in writers}
    holds = {label: Hold(signal_dir / f"hold-{index}") for index, label in enumerate(writers)}
    calls = {}
    try:
        for label, runner in writers.items():
            calls[label] = runner.submit("deltalab.concurrency.write_commit_file", str(table_path), version,
                                         lines[label], holds[label].path)
        for label in writers:
            holds[label].wait_reached(calls[label])
        held_listing = sorted(p.name for p in (Path(table_path) / "_delta_log").iterdir())
        attempts = []
        for label in writers:
            holds[label].release()
            attempts.append(CommitAttempt(label, **calls[label].result()))
    except BaseException:  # an interrupt or a failure: no writer stays held, none commits late
        for hold in holds.values():
            hold.cancel()
        raise
    return CommitRace(attempts, held_listing)
