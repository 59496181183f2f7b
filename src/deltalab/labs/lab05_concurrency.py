"""Lab 05 (optimistic concurrency): conflicts predicted, retried, and cleaned up after.

Same contract as every lab (:mod:`deltalab.labs.harness`): each ``check_*`` function calls the
student's function, compares the answer with what Delta really does on small tables it builds
itself, prints one ``✓`` line or raises ``CheckFailed`` with what is wrong and where to look.

* :func:`check_predict_conflict` runs each pair of :data:`PREDICTION_PAIRS` for real, with a
  transaction held between its read and its commit (:mod:`deltalab.concurrency`), so the answer
  key is measured on this installation, never typed in.
* :func:`check_retry` provokes the same conflicts against the student's ``retry`` and reads the
  table back; a synthetic bug and a conflict that never goes away show a catch that is too broad
  or a retry that never gives up.
* :func:`check_orphan_files` compares with the Parquet files a writer killed by SIGKILL
  (:mod:`deltalab.writers`) left behind. That writer runs in its own JVM, so the table is built
  once and reused, also by later processes (nbgrader starts one kernel per submission), as long
  as its directory still holds exactly the files it was built with.

Every check calls the student's function once before it builds anything expensive, so an
unfinished exercise fails in a second.
"""

from __future__ import annotations

import shutil
import threading
from pathlib import Path
from typing import Any, Callable, Iterable

from deltalab.concurrency import (CONFLICT_CLASSES, TransactionHold, make_pair_table, run_pair,
                                  standard_operations)
from deltalab.errors import DeltaLabError
from deltalab.files import complete_parquet_files, data_files, directory_files, spark_files
from deltalab.labs.harness import CheckFailed, build_once, call_student, fresh_dir, lab_spark, passed
from deltalab.locations import local_path
from deltalab.log import latest_version
from deltalab.processes import wait_until
from deltalab.writers import start_blocked_append

__all__ = [
    "PREDICTION_PAIRS",
    "check_predict_conflict",
    "check_retry",
    "check_orphan_files",
    "measure_pairs",
    "orphan_table",
    "operation_descriptions",
]


# --------------------------------------------------------------------------------------------
# Exercise 1: predict, then run
# --------------------------------------------------------------------------------------------

#: (held operation, operation that commits first) pairs the student predicts. Names are those
#: of :func:`deltalab.concurrency.standard_operations`; one pair per outcome. OPTIMIZE appears
#: twice: it never disturbs a blind append, and against a DELETE its outcome differs from what
#: older texts say.
PREDICTION_PAIRS: list[tuple[str, str]] = [
    ("append", "optimize"),
    ("delete", "optimize"),
    ("merge", "delete a file"),
    ("merge", "set property"),
]



def operation_descriptions() -> dict[str, str]:
    """What each operation name of :data:`PREDICTION_PAIRS` does, as notebook 05 describes it."""
    return standard_operations()[2]


def _conflict_names() -> list[str]:
    return [c.__name__ for c in CONFLICT_CLASSES]


def _normalise_prediction(answer: Any) -> str | None:
    """``"none"`` or a conflict class name from what the student returned; None if it is neither."""
    if answer is None:
        return "none"
    if isinstance(answer, type):
        answer = answer.__name__
    if not isinstance(answer, str):
        return None
    text = answer.strip().rsplit(".", 1)[-1]
    if text.lower() == "none":
        return "none"
    return text if text in _conflict_names() else None


def measure_pairs(spark: Any) -> dict[tuple[str, str], str]:
    """Run each (held, first) pair of :data:`PREDICTION_PAIRS` on a fresh two-file table and return
    what the held one got: ``"none"`` or the conflict class name (:func:`deltalab.concurrency.run_pair`).

    Measured once per process: the outcomes depend only on the Delta version.
    """
    outcomes = build_once("lab05_predict", lambda root: _run_pairs(spark, PREDICTION_PAIRS, root))
    return dict(zip(PREDICTION_PAIRS, outcomes))


def _run_pairs(spark: Any, pairs: list[tuple[str, str]], root: Path) -> list[str]:
    """What the held operation of each pair got, each pair run on a fresh copy of one template."""
    held_ops, winning_ops, _ = standard_operations()
    held_op, winning_op = dict(held_ops), dict(winning_ops)
    template = root / "template"
    make_pair_table(spark, template)
    outcomes = []
    for index, (held, first) in enumerate(pairs):
        table = root / f"pair_{index}"
        shutil.copytree(template, table)
        result = run_pair(spark, str(table), (held, held_op[held]), (first, winning_op[first]),
                          root / f"pair_{index}_signals")
        outcomes.append(result.outcome)
        shutil.rmtree(table)
    return outcomes


def _prediction_hint(predicted: str, real: str) -> str:
    """Where to look for the first wrong prediction, from what was said and what happened."""
    if real == "none":
        return ("a blind append reads nothing of the table, so nothing another writer commits invalidates it, "
                "except a metadata change (notebook 05, sections 2 and 8).")
    if real == "MetadataChangedException":
        return ("Delta's ConflictChecker tests the metadata first: a metadata change (SET TBLPROPERTIES) fails every "
                "transaction that read before it (notebook 05, section 4).")
    if real == "ConcurrentAppendException":
        return ("the added-files check runs before the removed-files check, and a winner that rewrites or "
                "compacts files (DELETE of a row, OPTIMIZE) adds files that match what the held one read "
                "(notebook 05, section 8).")
    if real == "ConcurrentDeleteReadException":
        return ("the winner removed the file the held operation had read and added none, so only the "
                "removed-files check fires (notebook 05, section 4).")
    return f"notebook 05, sections 4 and 8 (predicted {predicted}, got {real})."


def check_predict_conflict(predict_conflict: Callable[[str, str], str]) -> None:
    """``predict_conflict(held, first)`` against the outcome of running each pair for real."""
    check = "predict_conflict"
    spark = lab_spark()
    names = ", ".join(["'none'", *(repr(n) for n in _conflict_names()[:4])])
    predicted: dict[tuple[str, str], str] = {}
    for held, first in PREDICTION_PAIRS:       # all answers first: an unfinished function fails fast
        answer = call_student(check, predict_conflict, "predict_conflict", held, first,
                       hint="return a string: 'none' or the name of a class in delta.exceptions.")
        label = _normalise_prediction(answer)
        if label is None:
            raise CheckFailed(
                check,
                f"predict_conflict({held!r}, {first!r}) returned {answer!r}; it must return one of {names}.",
                "the `return` line: a class name of delta.exceptions as a string, or 'none' when both commit.",
            )
        predicted[(held, first)] = label
    real = measure_pairs(spark)
    wrong = [(pair, predicted[pair], real[pair]) for pair in PREDICTION_PAIRS if predicted[pair] != real[pair]]
    if wrong:
        listed = "; ".join(f"{h} held, {f} first: you said {p}, Delta raised {r}" if r != "none"
                           else f"{h} held, {f} first: you said {p}, both committed" for (h, f), p, r in wrong)
        raise CheckFailed(
            check,
            f"{len(wrong)} of {len(PREDICTION_PAIRS)} predictions differ from what really happened ({listed}).",
            _prediction_hint(wrong[0][1], wrong[0][2]),
        )
    passed(check, f"all {len(PREDICTION_PAIRS)} predictions match what Delta did when each pair was run "
                   "with a held transaction.")


# --------------------------------------------------------------------------------------------
# Exercise 2: retry the right conflicts
# --------------------------------------------------------------------------------------------

_RETRY_HINT = ("catch a tuple of classes from delta.exceptions around operation(), call it again, "
               "at most max_attempts times in all, and re-raise the last conflict.")
_SIBLINGS = ("the conflict classes of delta.exceptions do not inherit from one another (not even from "
             "DeltaConcurrentModificationException): name each class the retry should catch in a tuple.")


class _Operation:
    """The ``operation`` handed to the student's ``retry``: counts its calls, shows as ``operation``."""

    def __init__(self, body: Callable[[], Any], limit: int = 20) -> None:
        self.body = body
        self.calls = 0
        self.limit = limit

    def __call__(self) -> Any:
        self.calls += 1
        if self.calls > self.limit:         # a retry that never gives up: escape any `except Exception`
            import time

            time.sleep(0.2)
            raise _NeverGaveUp()
        return self.body()

    def __repr__(self) -> str:
        return "operation"


class _NeverGaveUp(BaseException):
    """Raised by an :class:`_Operation` called far too often; not an ``Exception`` on purpose."""


def _times(count: int) -> str:
    return "once" if count == 1 else f"{count} times"


def _reraise(error: BaseException) -> Callable[..., Any]:
    def again(*_args: Any) -> Any:
        raise error

    return again


def _run_with_timeout(check: str, retry: Callable[..., Any], operation: _Operation, *args: Any,
                      timeout_s: float = 30.0) -> tuple[Any, BaseException | None]:
    """Call ``retry(operation, *args)`` in a thread; return (result, exception). A retry that is
    still running after ``timeout_s`` (an endless loop) becomes a CheckFailed."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["result"] = retry(operation, *args)
        except BaseException as error:  # noqa: BLE001 - inspected by the check
            box["error"] = error

    thread = threading.Thread(target=run, name="student-retry", daemon=True)
    thread.start()
    thread.join(timeout_s)
    if thread.is_alive() or isinstance(box.get("error"), _NeverGaveUp):
        fix = "stop after max_attempts calls of operation and re-raise the last conflict."
        if thread.is_alive():
            fix += " Catch named classes, never BaseException or a bare `except:`."
        raise CheckFailed(check, f"retry never gave up: it called operation {operation.calls} times and kept going.",
                          fix)
    return box.get("result"), box.get("error")


def _check_bug_not_retried(check: str, retry: Callable[..., Any], spark: Any) -> None:
    """A real bug (a query on a column that does not exist) must propagate after one call."""
    operation = _Operation(lambda: spark.range(1).select("no_such_column"))
    _, error = _run_with_timeout(check, retry, operation)
    name = type(error).__name__ if error is not None else None
    if operation.calls > 1:
        raise CheckFailed(
            check,
            f"an operation that failed with {name or 'AnalysisException'} (a column that does not exist: a bug, "
            f"not a conflict) was called {_times(operation.calls)}; the retry catches too much.",
            "catch only the Delta conflict classes (e.g. delta.exceptions.ConcurrentAppendException), not Exception "
            "or PySparkException, so a bug fails at once.",
        )
    if error is None:
        raise CheckFailed(check, "an operation that failed with AnalysisException (a bug, not a conflict) "
                                 "returned from retry without an error; the error was swallowed.",
                          "let exceptions you do not retry propagate: no `except` that ends without `raise`.")
    if not _is_analysis_error(error):
        call_student(check, _reraise(error), "retry", operation, hint=_RETRY_HINT)


def _is_analysis_error(error: BaseException) -> bool:
    from pyspark.errors import AnalysisException

    return isinstance(error, AnalysisException)


def _check_gives_up(check: str, retry: Callable[..., Any]) -> None:
    """A conflict that happens on every attempt: exactly ``max_attempts`` calls, then it is raised."""
    import delta.exceptions as dx

    attempts = 3

    def always_conflict() -> None:
        raise dx.ConcurrentAppendException(message="Files were added by a concurrent update (every attempt).")

    operation = _Operation(always_conflict)
    _, error = _run_with_timeout(check, retry, operation, attempts)
    if operation.calls == 1 and isinstance(error, dx.ConcurrentAppendException):
        raise CheckFailed(
            check,
            "an operation that failed with ConcurrentAppendException was called once: retry let the conflict "
            "through instead of trying again.",
            "add ConcurrentAppendException to the classes retry catches; " + _SIBLINGS,
        )
    if operation.calls != attempts:
        raise CheckFailed(
            check,
            f"with max_attempts={attempts} and a conflict on every attempt, retry called operation "
            f"{_times(operation.calls)}; expected exactly {attempts} times.",
            "max_attempts counts every call of operation, the first one included.",
        )
    if not isinstance(error, dx.ConcurrentAppendException):
        what = "returned normally" if error is None else f"raised {type(error).__name__}"
        raise CheckFailed(
            check,
            f"after {attempts} attempts that all conflicted, retry {what}; it should re-raise the last "
            "ConcurrentAppendException.",
            "when the last attempt fails too, `raise` the conflict instead of returning, so the caller knows.",
        )


def _check_real_conflict(check: str, retry: Callable[..., Any], spark: Any, first: str,
                         expected_ids: list[int], conflict: str) -> None:
    """Hold a DELETE WHERE id = 1 run through ``retry``, let ``first`` commit, and read the table back."""
    from pyspark.sql import functions as F

    winner = dict(standard_operations()[1])[first]
    root = fresh_dir(f"lab05_retry_{first.replace(' ', '_')}")
    path = str(root / "table")
    make_pair_table(spark, path)
    from delta.tables import DeltaTable

    table = DeltaTable.forPath(spark, path)
    holder: dict[str, _Operation] = {}

    def held(gate: Callable[[str], Any]) -> Any:
        holder["op"] = _Operation(lambda: table.delete(gate("id") & (F.col("id") == 1)))
        return retry(holder["op"])

    with TransactionHold(spark, root / "signals") as hold:
        hold.start(held)
        try:
            hold.wait_until_held()
        except DeltaLabError:
            error = hold.error
            if error is not None and not isinstance(error, CONFLICT_CLASSES):
                call_student(check, _reraise(error), "retry", holder.get("op", "operation"), hint=_RETRY_HINT)
            raise CheckFailed(check, "retry(operation) returned without calling operation.",
                              "call operation() inside retry and return what it returns.") from None
        winner(spark, path)
    operation, error = holder["op"], hold.error
    if isinstance(error, CONFLICT_CLASSES):
        raise CheckFailed(
            check,
            f"a DELETE held while another writer ran `{first}` failed with {type(error).__name__}, and retry let "
            f"the conflict through after calling it {_times(operation.calls)} instead of trying again.",
            f"add {type(error).__name__} to the classes retry catches; " + _SIBLINGS,
        )
    if error is not None:
        call_student(check, _reraise(error), "retry", operation, hint=_RETRY_HINT)
    ids = sorted(r.id for r in spark.read.format("delta").load(path).select("id").collect())
    if operation.calls < 2 or ids != expected_ids:
        raise CheckFailed(
            check,
            f"a DELETE WHERE id = 1 held while another writer ran `{first}` got {conflict}; retry called it "
            f"{_times(operation.calls)} and the table ended with {len(ids)} rows, expected {len(expected_ids)}"
            f"{' (id 1 is still there)' if 1 in ids else ''}.",
            "when a conflict is caught, call operation() again (a new transaction on the new snapshot); do not "
            "return after the first failure.",
        )


def check_retry(retry: Callable[..., Any]) -> None:
    """``retry(operation, max_attempts=3)`` against real conflicts, a bug, and an endless conflict."""
    check = "retry"
    spark = lab_spark()
    operation = _Operation(lambda: "done")
    answer = call_student(check, retry, "retry", operation, hint=_RETRY_HINT)   # fails fast if not written yet
    if answer != "done" or operation.calls != 1:
        raise CheckFailed(
            check,
            f"an operation that succeeds at once was called {_times(operation.calls)} and retry returned {answer!r}; "
            "expected 1 call and its result 'done'.",
            "return operation()'s result as soon as a call succeeds.",
        )
    _check_bug_not_retried(check, retry, spark)
    _check_gives_up(check, retry)                   # cheap, synthetic cases first; then real conflicts
    _check_real_conflict(check, retry, spark, "append", [i for i in range(20) if i != 1] + list(range(200, 205)),
                         "ConcurrentAppendException")
    _check_real_conflict(check, retry, spark, "delete a file", list(range(10, 20)), "ConcurrentDeleteReadException")
    passed(check, "retried the DELETE after ConcurrentAppendException and ConcurrentDeleteReadException (right rows "
                   "in the table), did not retry a bug, and gave up after max_attempts.")


# --------------------------------------------------------------------------------------------
# Exercise 3: orphan files of a killed writer
# --------------------------------------------------------------------------------------------

def _disk_files(table: Path) -> list[str]:
    """Every file under ``table`` (relative POSIX paths), to see whether anything changed it."""
    return sorted(directory_files(table))


def _ever_read_by_spark(spark: Any, table: Path) -> set[str]:
    """The data files Spark reads at some version of ``table`` (union over all versions)."""
    files: set[str] = set()
    for version in range(latest_version(table) + 1):
        files |= set(spark_files(spark, table, version, relative=True))
    return files


def _build_base(spark: Any, table: Path) -> None:
    """Version 0: ids 0..19 in two files; 1: DELETE WHERE id < 3 (the file of ids 0-9 is removed
    from the table, still on disk); 2: an append of one file. No orphans yet."""
    from delta.tables import DeltaTable

    spark.range(0, 20, 1, 2).write.format("delta").save(str(table))
    DeltaTable.forPath(spark, str(table)).delete("id < 3")
    spark.range(100, 105, 1, 1).write.format("delta").mode("append").save(str(table))


def _kill_writer(table: Path, partitions: int = 3) -> set[str]:
    """Start a writer that appends ``partitions`` files, SIGKILL it once all but one landed; return
    the files it left (relative paths)."""
    before = set(complete_parquet_files(table))
    writer = start_blocked_append(table, rows=30, partitions=partitions, signal_dir=table.parent / "_writer")
    try:
        wait_until(lambda: writer.blocked and len(set(complete_parquet_files(table)) - before) == partitions - 1,
                   timeout=300, what=f"the writer's last task blocks and {partitions - 1} Parquet files land")
    finally:
        writer.kill()
    landed = set(table.rglob("part-*.parquet")) - before
    return {p.relative_to(table).as_posix() for p in landed}


def orphan_table(spark: Any) -> dict[str, Any]:
    """The lab 05 orphan tables, built once and reused while their files are untouched (also by
    later processes: nbgrader grades each submission in a fresh kernel, and killing a writer is slow).

    Returns ``clean`` (a table with a DELETE and no orphans), ``killed`` (the same table plus the
    files of a writer killed mid-append), ``orphans`` (those files), ``removed`` (the file the
    DELETE took out of the table, still on disk) and ``disk`` (every file of each table).
    """
    return build_once("lab05_orphans", lambda root: _build_orphan_tables(spark, root), intact=_intact, saved=True)


def _build_orphan_tables(spark: Any, root: Path) -> dict[str, Any]:
    clean, killed = root / "clean" / "events", root / "killed" / "events"
    _build_base(spark, killed)
    shutil.copytree(killed, clean)
    orphans = _kill_writer(killed)
    referenced = _ever_read_by_spark(spark, killed)
    on_disk = data_files(killed)
    if orphans != on_disk - referenced or len(orphans) < 1:
        raise DeltaLabError(
            f"The killed writer left {sorted(orphans)}, but the files on disk that no version names are "
            f"{sorted(on_disk - referenced)}.",
            fix="Run the check again; if it keeps failing, look at the writer's log next to the table.",
        )
    current = set(spark_files(spark, killed, relative=True))
    return {
        "clean": str(clean), "killed": str(killed), "orphans": sorted(orphans),
        "removed": sorted(referenced - current),
        "disk": {"clean": _disk_files(clean), "killed": _disk_files(killed)},
    }


def _intact(built: dict[str, Any]) -> bool:
    """True while both tables hold exactly the files they were built with."""
    try:
        return all(Path(built[k]).is_dir() and _disk_files(Path(built[k])) == built["disk"][k]
                   for k in ("clean", "killed"))
    except (KeyError, TypeError, OSError):
        return False


def _relative(table: Path, entry: Any) -> str | None:
    """A returned entry as a path relative to ``table``; None if it is not a path inside it."""
    if isinstance(entry, bytes) or not isinstance(entry, (str, Path)):
        return None
    text = str(entry)
    path = Path(local_path(text))
    if path.is_absolute():
        for base in (table, table.resolve()):
            try:
                return path.relative_to(base).as_posix()
            except ValueError:
                continue
        return None
    return path.as_posix()


def _orphan_answer(check: str, orphan_files: Callable[[str], Any], table: Path) -> set[str]:
    answer = call_student(check, orphan_files, "orphan_files", str(table),
                   hint="list the *.parquet files under the table folder (not _delta_log) and subtract the `path` "
                        "of every add action of every JSON commit.")
    if isinstance(answer, (str, bytes)) or not isinstance(answer, Iterable):
        raise CheckFailed(check, f"orphan_files returned {type(answer).__name__}; it must return a set of paths.",
                          "the `return` line: a set of paths relative to the table, as the log writes them.")
    got: set[str] = set()
    for entry in answer:
        relative = _relative(table, entry)
        if relative is None:
            raise CheckFailed(check, f"orphan_files returned {entry!r}, which is not a path inside the table folder.",
                              "return paths relative to the table folder, such as 'part-00000-….parquet'.")
        got.add(relative)
    return got


def _compare_orphans(check: str, got: set[str], expected: set[str], removed: set[str], which: str) -> None:
    if got == expected:
        return
    extra, missing = sorted(got - expected), sorted(expected - got)
    log_files = [f for f in extra if f.startswith("_delta_log/") or f.endswith(".crc")]
    if log_files:
        raise CheckFailed(
            check,
            f"on {which}, orphan_files includes {len(log_files)} log or checksum file(s) (e.g. {log_files[0]}), "
            "which are not data files.",
            "keep only *.parquet files outside _delta_log; the hidden .<name>.crc files next to them are Hadoop's "
            "checksums, not data.",
        )
    if extra and set(extra) <= removed:
        raise CheckFailed(
            check,
            f"on {which}, orphan_files includes {extra[0]}, a file a DELETE removed: an add action of an older "
            "commit names it, so it is not an orphan (VACUUM deletes it once the retention has passed).",
            "compare with the add actions of every commit (the whole log), not only with the latest snapshot's files.",
        )
    detail = []
    if missing:
        detail.append(f"misses {len(missing)} file(s) no commit names (e.g. {missing[0]})")
    if extra:
        detail.append(f"includes {len(extra)} file(s) that are not orphans (e.g. {extra[0]})")
    raise CheckFailed(
        check,
        f"on {which}, orphan_files " + " and ".join(detail) + f"; expected {len(expected)} orphan(s).",
        "an orphan is a *.parquet file in the table folder whose path appears in no `add` action of any "
        "N.json commit; paths are relative to the table, as in the log.",
    )


def check_orphan_files(orphan_files: Callable[[str], Any]) -> None:
    """``orphan_files(table_path)`` against the files a writer killed by SIGKILL left on disk."""
    check = "orphan_files"
    spark = lab_spark()
    quick = fresh_dir("lab05_orphans_quick") / "empty"
    make_pair_table(spark, quick)                   # one commit, no orphans: fails fast if not written yet
    _compare_orphans(check, _orphan_answer(check, orphan_files, quick), set(), set(), "a table with one commit")
    built = orphan_table(spark)
    removed = set(built["removed"])
    for key, expected, which in (("clean", set(), "a table after a DELETE, with no orphans"),
                                 ("killed", set(built["orphans"]), "the table a killed writer left files in")):
        table = Path(built[key])
        got = _orphan_answer(check, orphan_files, table)
        if _disk_files(table) != built["disk"][key]:   # the next check builds the tables again
            raise CheckFailed(check, "orphan_files changed the table folder (deleted or wrote files); it must only "
                                     "read it.",
                              "list files and read the log; do not delete or VACUUM in orphan_files.")
        _compare_orphans(check, got, expected, removed, which)
    passed(check, f"found exactly the {len(built['orphans'])} files the killed writer left, and not the file the "
                   "DELETE removed.")
