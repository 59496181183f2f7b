"""Lab 05 (optimistic concurrency): conflicts predicted, retried, and cleaned up after.

Same contract as every lab (:mod:`deltalab.labs.report`, :mod:`deltalab.labs.student`): each ``check_*`` function calls the
student's function, compares the answer with what Delta really does on small tables it builds
itself, prints one ``✓`` line or raises ``CheckFailed`` with what is wrong and where to look,
never with the expected answer.

* :func:`check_predict_conflict` asks a different sample of (held, first) pairs each run
  (:func:`prediction_sample`) from the whole matrix of :func:`deltalab.concurrency.standard_operations`,
  always with a pair that each classic wrong belief (:data:`BELIEFS`) gets wrong. Each pair is run
  for real, with a transaction held between its read and its commit (:func:`measured_outcome`), so
  the answer key is measured on this installation, never typed in; a prediction that runs Spark
  jobs (the pair itself) is refused.
* :func:`check_retry` hands the student's ``retry`` operations that raise each of Delta's conflict
  classes, a bug, a class that only sounds like a conflict, and conflicts on every attempt, with a
  ``max_attempts`` drawn for the run, and counts the calls; then it runs a real held DELETE through
  it while a winner drawn for the run commits, and compares the table read back with Delta's.
* :func:`check_orphan_files` compares with the Parquet files a writer killed by SIGKILL
  (:mod:`deltalab.writers`) left behind, and with a table generated for the run
  (:func:`orphan_history`): partitioned by values the log URL-encodes, files a DELETE removed,
  deletion vectors or not, a checkpoint or not, uncommitted files that Delta's own writer left in
  the middle of its history, and first commits older than the file retention, which Spark refuses
  to time-travel to. The killed-writer table runs a second JVM, so it is built once and reused,
  also by later processes (nbgrader starts one kernel per submission), while its files are intact.

Every check calls the student's function before it builds anything expensive, so an unfinished
exercise fails in a second.
"""

from __future__ import annotations

import os
import random
import shutil
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable
from urllib.parse import unquote

from deltalab.concurrency import (CONFLICT_CLASSES, TransactionHold, conflict_matrix, make_pair_table,
                                  retry_on_conflict, run_pair, standard_operations)
from deltalab.errors import DeltaLabError
from deltalab.files import complete_parquet_files, data_files, directory_files, read_table, spark_files
from deltalab.labs.report import CheckFailed, passed
from deltalab.labs.student import Watched, call_student, exercise_check, lab_spark
from deltalab.labs.tables import AWKWARD_VALUES, build_once, check_seed, fresh_dir
from deltalab.locations import local_path
from deltalab.log import latest_version
from deltalab.processes import wait_until
from deltalab.versions import DELTA_JVM_VERSION
from deltalab.writers import start_blocked_append

__all__ = [
    "BELIEFS",
    "FIRST_OPERATIONS",
    "HELD_OPERATIONS",
    "OrphanTable",
    "check_orphan_files",
    "check_predict_conflict",
    "check_retry",
    "measured_outcome",
    "operation_descriptions",
    "orphan_history",
    "orphan_table",
    "prediction_sample",
]


# --------------------------------------------------------------------------------------------
# Exercise 1: predict, then run
# --------------------------------------------------------------------------------------------

#: The operations that read first and commit second (rows of notebook 05's matrix).
HELD_OPERATIONS: list[str] = [name for name, _ in standard_operations()[0]]
#: The operations that commit while the held one waits (columns of the matrix).
FIRST_OPERATIONS: list[str] = [name for name, _ in standard_operations()[1]]

_READERS = tuple(h for h in HELD_OPERATIONS if h != "append")          # delete, update, merge: they read files
_DATA_WINNERS = tuple(f for f in FIRST_OPERATIONS if f != "set property")


@dataclass(frozen=True)
class Belief:
    """A classic wrong belief about conflicts, the pairs of the matrix that test it, and where to look.

    The pairs name no outcome: the check measures each one. ``tests/test_lab05_concurrency.py``
    shows, on the measured matrix, that a prediction holding the belief is wrong on every pair.
    """

    claim: str
    pairs: tuple[tuple[str, str], ...]
    hint: str


#: Each run asks at least one pair of every belief (:func:`prediction_sample`).
BELIEFS: tuple[Belief, ...] = (
    Belief("a blind append never conflicts", (("append", "set property"),),
           "a blind append read no data files, but it did read the table's metadata when it started, and the "
           "ConflictChecker tests the metadata before anything else (notebook 05, sections 2 and 8)."),
    Belief("a blind append conflicts with another writer's data change",
           tuple(("append", first) for first in _DATA_WINNERS),
           "a blind append read no data files, so no file another writer adds or removes can invalidate what it "
           "read (notebook 05, section 2)."),
    Belief("an append committed first cannot disturb a DELETE, UPDATE or MERGE",
           tuple((held, "append") for held in _READERS),
           "the held operation read the whole unpartitioned table; a file added since could hold rows its condition "
           "matches (notebook 05, section 4)."),
    Belief("OPTIMIZE changes no data, so it conflicts differently from a rewrite",
           tuple((held, "optimize") for held in _READERS),
           "OPTIMIZE commits remove and add actions (dataChange = false) like a rewrite; look at which of the "
           "ConflictChecker's file tests runs first (notebook 05, the paragraph under the matrix in section 8)."),
    Belief("a DELETE that rewrote the file the held one read is a delete-read conflict",
           tuple((held, "delete 1 row") for held in _READERS),
           "a DELETE of some rows removes the file and adds a rewritten one; the test of added files runs before "
           "the test of removed files (notebook 05, section 8)."),
    Belief("an UPDATE that rewrote the file the held one read is a delete-read conflict",
           tuple((held, "update") for held in _READERS),
           "an UPDATE removes the file it changes and adds a rewritten one; the test of added files runs before the "
           "test of removed files (notebook 05, section 8)."),
    Belief("two DELETEs of one file give ConcurrentDeleteDeleteException",
           (("delete", "delete a file"), ("delete", "delete 1 row")),
           "the held DELETE read the file before it tried to remove it; the tests of what it read run before the "
           "delete-delete test (notebook 05, section 4)."),
    Belief("every conflict of a reader is an append conflict",
           tuple((held, "delete a file") for held in _READERS),
           "this winner removed the file the held operation read and added no file at all; which test can fire "
           "then? (notebook 05, section 4)."),
    Belief("a property change only disturbs writers that change metadata too",
           tuple((held, "set property") for held in _READERS),
           "every transaction read the metadata when it started, and the ConflictChecker tests it first "
           "(notebook 05, section 8)."),
)

#: How many pairs one run asks at least: one per belief (fewer where pairs overlap), the rest drawn
#: from the matrix.
SAMPLE_SIZE = 8


def operation_descriptions() -> dict[str, str]:
    """What each operation name of :data:`HELD_OPERATIONS` and :data:`FIRST_OPERATIONS` does, as notebook 05 describes it."""
    return standard_operations()[2]


def prediction_sample(rng: random.Random) -> list[tuple[str, str]]:
    """The (held, first) pairs one run asks: a pair of every :data:`BELIEFS` entry, then pairs drawn
    from the whole matrix up to :data:`SAMPLE_SIZE` (8 or 9 in all), in a random order."""
    beliefs = list(BELIEFS)
    rng.shuffle(beliefs)
    sample: list[tuple[str, str]] = []
    for belief in beliefs:
        if not any(pair in belief.pairs for pair in sample):
            sample.append(rng.choice(belief.pairs))
    others = [(h, f) for h in HELD_OPERATIONS for f in FIRST_OPERATIONS if (h, f) not in sample]
    sample += rng.sample(others, max(0, SAMPLE_SIZE - len(sample)))
    rng.shuffle(sample)
    return sample


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


def _jvm_version(spark: Any) -> str:
    """What a measured outcome depends on: Delta's jars and Spark."""
    return f"delta {DELTA_JVM_VERSION}, spark {spark.version}"


def _pair_template(spark: Any) -> str:
    """The start state of every pair (:func:`deltalab.concurrency.make_pair_table`), built once per process."""
    def build(root: Path) -> str:
        make_pair_table(spark, root / "template")
        return str(root / "template")

    return build_once("lab05_pair_template", build, intact=lambda t: (Path(t) / "_delta_log").is_dir()
                      and len(data_files(t)) == 2)


def measured_outcome(spark: Any, held: str, first: str) -> str:
    """What ``held`` got when ``first`` committed while it was held between its read and its commit:
    ``"none"`` or the conflict class name (:func:`deltalab.concurrency.run_pair` on a copy of the
    pair table).

    Measured once per pair and kept (also for later processes, like the killed writer): the outcome
    depends only on the versions of Delta and Spark, which the kept value names.
    """
    version = _jvm_version(spark)

    def measure(root: Path) -> dict[str, str]:
        held_op, first_op = dict(standard_operations()[0])[held], dict(standard_operations()[1])[first]
        table = root / "table"
        shutil.copytree(_pair_template(spark), table)
        result = run_pair(spark, str(table), (held, held_op), (first, first_op), root / "signals")
        shutil.rmtree(table, ignore_errors=True)
        return {"versions": version, "outcome": result.outcome}

    name = f"lab05_pair_{held}_{first}".replace(" ", "-")
    kept = build_once(name, measure, intact=lambda value: isinstance(value, dict) and value.get("versions") == version
                      and value.get("outcome") in ("none", *_conflict_names()), saved=True)
    return kept["outcome"]


def _hint_for(pair: tuple[str, str]) -> str:
    """Where to look for a wrong prediction of ``pair``: the first belief it tests."""
    for belief in BELIEFS:
        if pair in belief.pairs:
            return belief.hint
    return ("the order of the ConflictChecker's tests: metadata, then files the winner added that match what the "
            "held operation read, then files it removed that the held one read (notebook 05, sections 4 and 8).")


@exercise_check
def check_predict_conflict(predict_conflict: Callable[[str, str], str]) -> None:
    """``predict_conflict(held, first)`` on a sample of pairs drawn for this run, against each pair run for real."""
    check = "predict_conflict"
    spark = lab_spark()
    seed = check_seed()
    pairs = prediction_sample(random.Random(seed))
    names = ", ".join(["'none'", *(repr(n) for n in _conflict_names()[:4])])
    watched = (Watched(predict_conflict, helpers=[measured_outcome, run_pair, conflict_matrix])
               if callable(predict_conflict) else predict_conflict)
    predicted: dict[tuple[str, str], str] = {}
    for held, first in pairs:       # all answers first: an unfinished function fails fast
        answer = call_student(check, watched, "predict_conflict", held, first,
                              hint="return a string: 'none' or the name of a class in delta.exceptions.")
        if isinstance(watched, Watched) and watched.helpers_called:
            raise CheckFailed(
                check,
                f"predict_conflict calls {watched.helpers_called[0]}, which runs the pair: that is the check's answer, "
                "not a prediction.",
                "decide from the names alone, with the order of the ConflictChecker's tests (notebook 05, section 8).",
            )
        if isinstance(watched, Watched) and watched.jobs:
            raise CheckFailed(
                check,
                f"predict_conflict ran {watched.jobs} Spark job(s) while predicting ({held!r}, {first!r}): it ran "
                "operations instead of predicting their outcome from the rules.",
                "decide from the names alone, with the order of the ConflictChecker's tests (notebook 05, section 8); "
                "the check runs the pairs itself.",
            )
        label = _normalise_prediction(answer)
        if label is None:
            raise CheckFailed(
                check,
                f"predict_conflict({held!r}, {first!r}) returned {answer!r}; it must return one of {names}.",
                "the `return` line: a class name of delta.exceptions as a string, or 'none' when both commit.",
            )
        predicted[(held, first)] = label
    wrong = [pair for pair in pairs if predicted[pair] != measured_outcome(spark, *pair)]
    if wrong:
        listed = "; ".join(f"{h} held, {f} first: you said {predicted[(h, f)]}" for h, f in wrong[:4])
        more = f" and {len(wrong) - 4} more" if len(wrong) > 4 else ""
        raise CheckFailed(
            check,
            f"{len(wrong)} of the {len(pairs)} pairs asked this run were predicted wrong ({listed}{more}).",
            _hint_for(wrong[0]),
            seed=seed,
        )
    passed(check, f"all {len(pairs)} pairs asked this run match what Delta did when each pair was run with a held "
                  "transaction.")


# --------------------------------------------------------------------------------------------
# Exercise 2: retry the right conflicts
# --------------------------------------------------------------------------------------------

_RETRY_HINT = ("catch a tuple of the conflict classes of delta.exceptions around operation(), call it again, "
               "at most max_attempts times in all, and re-raise the last conflict.")
_SIBLINGS = ("the conflict classes of delta.exceptions do not inherit from one another (not even from "
             "DeltaConcurrentModificationException): name every one of them in the tuple retry catches.")

#: The most calls a check's operation allows before it stops a retry that never gives up.
_CALL_LIMIT = 40


class _Operation:
    """The ``operation`` handed to the student's ``retry``: plays ``script`` (exceptions to raise,
    then the value to return), counts its calls, and shows as ``operation``."""

    def __init__(self, *script: Any, body: Callable[[], Any] | None = None) -> None:
        self.script = list(script)
        self.body = body
        self.calls = 0
        self.raised: BaseException | None = None

    def __call__(self) -> Any:
        self.calls += 1
        if self.calls > _CALL_LIMIT:        # a retry that never gives up: escape any `except Exception`
            time.sleep(0.2)
            raise _NeverGaveUp()
        if self.body is not None:
            return self.body()
        step = self.script[min(self.calls, len(self.script)) - 1]
        if callable(step) and not isinstance(step, BaseException):
            step = step()                   # a factory: a fresh exception on every call
        if isinstance(step, BaseException):
            self.raised = step
            raise step
        return step

    def __repr__(self) -> str:
        return "operation"


class _NeverGaveUp(BaseException):
    """Raised by an :class:`_Operation` called far too often; not an ``Exception`` on purpose."""


class _Result:
    """What an operation returns in the check: an object only that call made, so retry must return it as is."""

    def __init__(self, label: int) -> None:
        self.label = label

    def __repr__(self) -> str:
        return f"<result {self.label}>"


class ConcurrentModificationException(RuntimeError):
    """A bug in the caller's own code (as Java's java.util.ConcurrentModificationException is): its
    name sounds like a conflict, but it is not one of delta.exceptions and must not be retried."""


def _times(count: int) -> str:
    return "once" if count == 1 else f"{count} times"


def _reraise(error: BaseException) -> Callable[..., Any]:
    def again(*_args: Any) -> Any:
        raise error

    return again


def _conflict(cls: type[BaseException], attempt: int) -> BaseException:
    return cls(message=f"{cls.__name__}: another writer committed first (the check's attempt {attempt}).")


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


def _not_a_conflict_errors(spark: Any) -> list[tuple[str, Callable[[], BaseException]]]:
    """Errors that are not conflicts, each with what it stands for: retry must let them through after one call."""
    def analysis_error() -> BaseException:
        try:
            spark.range(1).select("no_such_column")
        except Exception as error:  # noqa: BLE001 - the real AnalysisException Spark raises
            return error
        raise DeltaLabError("Selecting a missing column did not fail.", fix="Report this: Spark changed.")

    return [
        ("AnalysisException (a column that does not exist: a bug, not a conflict)", analysis_error),
        ("ValueError (a bug in the operation's own Python)", lambda: ValueError("invalid literal for int(): 'x'")),
        ("ConcurrentModificationException, a Python class that is not in delta.exceptions (a bug in the caller's "
         "code, whatever its name says)",
         lambda: ConcurrentModificationException("java.util.ConcurrentModificationException in the caller's loop")),
    ]


def _check_not_retried(check: str, retry: Callable[..., Any], spark: Any, rng: random.Random, seed: int) -> None:
    """Errors that are not conflicts propagate after one call, as the very object raised."""
    cases = _not_a_conflict_errors(spark)
    rng.shuffle(cases)
    for what, make in cases:
        error = make()
        operation = _Operation(error)
        _, raised = _run_with_timeout(check, retry, operation, rng.randint(2, 6))
        if operation.calls > 1:
            raise CheckFailed(
                check,
                f"an operation that failed with {what} was called {_times(operation.calls)}; the retry catches "
                "too much.",
                "catch only the conflict classes of delta.exceptions, by class (not Exception, PySparkException, or "
                "a look at the name or the message), so a bug fails at once.",
                seed=seed,
            )
        if raised is None:
            raise CheckFailed(check, f"an operation that failed with {what} returned from retry without an error; the "
                                     "error was swallowed.",
                              "let exceptions you do not retry propagate: no `except` that ends without `raise`.",
                              seed=seed)
        if raised is not error:
            raise CheckFailed(
                check,
                f"an operation that failed with {what} made retry raise {type(raised).__name__} instead of that error.",
                "let an exception you do not retry propagate as it is (no `except` around it, or a bare `raise`).",
                seed=seed,
            )


def _check_each_conflict_retried(check: str, retry: Callable[..., Any], rng: random.Random, seed: int) -> None:
    """Each of Delta's conflict classes, raised once, is retried and the next call's result returned."""
    classes = list(CONFLICT_CLASSES)
    rng.shuffle(classes)
    for cls in classes:
        result = _Result(rng.randrange(10**6))
        operation = _Operation(_conflict(cls, 1), result)
        answer, error = _run_with_timeout(check, retry, operation, rng.randint(2, 6))
        if operation.calls == 1 and error is operation.raised:
            raise CheckFailed(
                check,
                f"an operation that failed once with {cls.__name__} was called once: retry let that conflict "
                "through instead of trying again.",
                f"add {cls.__name__} to the classes retry catches; " + _SIBLINGS,
                seed=seed,
            )
        if error is not None:
            call_student(check, _reraise(error), "retry", operation, hint=_RETRY_HINT)
        if operation.calls != 2 or answer is not result:
            raise CheckFailed(
                check,
                f"an operation that failed once with {cls.__name__} and then succeeded was called "
                f"{_times(operation.calls)}, and retry returned {answer!r}.",
                "after a conflict call operation() again, and return what the call that succeeded returned.",
                seed=seed,
            )


def _check_attempts(check: str, retry: Callable[..., Any], rng: random.Random, seed: int) -> None:
    """``max_attempts`` drawn for the run: success on the last attempt allowed; then a conflict on every
    attempt, which must end after exactly ``max_attempts`` calls with the last conflict; and the default."""
    attempts = rng.choice([2, 4, 5, 6])
    conflicts = [rng.choice(CONFLICT_CLASSES) for _ in range(attempts - 1)]
    result = _Result(rng.randrange(10**6))
    operation = _Operation(*[_conflict(cls, i + 1) for i, cls in enumerate(conflicts)], result)
    answer, error = _run_with_timeout(check, retry, operation, attempts)
    if error is not None or answer is not result:
        what = f"raised {type(error).__name__}" if error is not None else f"returned {answer!r}"
        raise CheckFailed(
            check,
            f"with max_attempts={attempts}, an operation that conflicted {attempts - 1} times and then succeeded "
            f"was called {_times(operation.calls)} and retry {what}.",
            "max_attempts counts every call of operation, the first one included (use the argument, not a number "
            "of your own): the last allowed call may still succeed, and its result is returned.",
            seed=seed,
        )
    for attempts in (rng.choice([1, 2, 4, 5, 6, 7]), None):
        made: list[BaseException] = []

        def fresh_conflict() -> BaseException:
            made.append(_conflict(rng.choice(CONFLICT_CLASSES), len(made) + 1))
            return made[-1]

        operation = _Operation(fresh_conflict)
        args = () if attempts is None else (attempts,)
        shown = "max_attempts left at its default of 3" if attempts is None else f"max_attempts={attempts}"
        expected = 3 if attempts is None else attempts
        _, error = _run_with_timeout(check, retry, operation, *args)
        if operation.calls != expected:
            raise CheckFailed(
                check,
                f"with {shown} and a conflict on every attempt, retry called operation {_times(operation.calls)}.",
                "max_attempts counts every call of operation, the first one included; use the argument, "
                "not a number of your own.",
                seed=seed,
            )
        if error is not made[-1]:
            what = ("returned normally" if error is None else
                    "raised an earlier conflict" if any(error is e for e in made) else f"raised {type(error).__name__}")
            raise CheckFailed(
                check,
                f"with {shown} and a conflict on every attempt, retry {what}; it should re-raise the last "
                "conflict itself.",
                "when the last attempt fails too, `raise` that conflict (a bare `raise` in its except block), so the "
                "caller can tell a conflict from success.",
                seed=seed,
            )


def _check_real_conflict(check: str, retry: Callable[..., Any], spark: Any, first: str, seed: int) -> None:
    """Hold a DELETE WHERE id = 1 run through ``retry``, let ``first`` commit, and compare the table read
    back with the winner's version without id 1, every column and row."""
    from delta.tables import DeltaTable
    from pyspark.sql import functions as F

    winner = dict(standard_operations()[1])[first]
    root = fresh_dir("lab05_retry")
    path = str(root / "table")
    shutil.copytree(_pair_template(spark), path)
    table = DeltaTable.forPath(spark, path)
    holder: dict[str, _Operation] = {}

    def held(gate: Callable[[str], Any]) -> Any:
        holder["op"] = _Operation(body=lambda: table.delete(gate("id") & (F.col("id") == 1)))
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
        read_version = latest_version(path)
        winner(spark, path)
    operation, error = holder["op"], hold.error
    if isinstance(error, CONFLICT_CLASSES):
        raise CheckFailed(
            check,
            f"a DELETE held while another writer ran `{first}` failed with {type(error).__name__}, and retry let "
            f"the conflict through after calling it {_times(operation.calls)} instead of trying again.",
            f"add {type(error).__name__} to the classes retry catches; " + _SIBLINGS,
            seed=seed,
        )
    if error is not None:
        call_student(check, _reraise(error), "retry", operation, hint=_RETRY_HINT)
    rows = sorted(tuple(r) for r in read_table(path, spark=spark).collect())
    wanted = sorted(tuple(r) for r in read_table(path, version=read_version + 1, spark=spark)
                    .filter(F.col("id") != 1).collect())
    if operation.calls != 2 or rows != wanted:
        ended = ("with id 1 still in it" if any(r[0] == 1 for r in rows)
                 else "with other rows than the winner left, minus id 1")
        raise CheckFailed(
            check,
            f"a DELETE WHERE id = 1 held while another writer ran `{first}` conflicted; retry called it "
            f"{_times(operation.calls)} and the table ended {ended}.",
            "when a conflict is caught, call operation() again (a new transaction on the new snapshot); do not "
            "return after the first failure.",
            seed=seed,
        )


@exercise_check
def check_retry(retry: Callable[..., Any]) -> None:
    """``retry(operation, max_attempts=3)`` against every conflict class, bugs, a ``max_attempts`` drawn for
    the run, and a real conflict with a winner drawn for the run."""
    check = "retry"
    spark = lab_spark()
    seed = check_seed()
    rng = random.Random(seed)
    retry = Watched(retry, helpers=[retry_on_conflict]) if callable(retry) else retry
    result = _Result(rng.randrange(10**6))
    operation = _Operation(result)
    answer = call_student(check, retry, "retry", operation, hint=_RETRY_HINT)   # an answer that raises does so before the build
    if answer is not result or operation.calls != 1:
        raise CheckFailed(
            check,
            f"an operation that succeeds at once was called {_times(operation.calls)} and retry returned {answer!r}.",
            "return what operation() returned, as soon as a call succeeds.",
        )
    if isinstance(retry, Watched) and retry.helpers_called:
        raise CheckFailed(check, f"retry calls {retry.helpers_called[0]}, the course's own retry loop.",
                          "write the loop yourself: try operation(), catch the conflict classes, try again, count.")
    _check_not_retried(check, retry, spark, rng, seed)      # cheap, synthetic cases first; then a real conflict
    _check_each_conflict_retried(check, retry, rng, seed)
    _check_attempts(check, retry, rng, seed)
    first = rng.choice(FIRST_OPERATIONS)
    _check_real_conflict(check, retry, spark, first, seed)
    passed(check, f"retried each of the {len(CONFLICT_CLASSES)} conflict classes and nothing else, counted "
                  f"max_attempts, re-raised the last conflict, and a real DELETE held while `{first}` committed "
                  "left the right rows.")


# --------------------------------------------------------------------------------------------
# Exercise 3: orphan files
# --------------------------------------------------------------------------------------------

def _disk_files(table: Path) -> list[str]:
    """Every file under ``table`` (relative POSIX paths), to see whether anything changed it."""
    return sorted(directory_files(table))


def _ever_read_by_spark(spark: Any, table: Path | str) -> set[str]:
    """The data files Spark reads at some version of ``table`` (union over all versions, paths as on disk)."""
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
    """The lab 05 killed-writer tables, built once and reused while their files are untouched (also by
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
        "removed": sorted(referenced - current), "live": sorted(current),
        "disk": {"clean": _disk_files(clean), "killed": _disk_files(killed)},
    }


def _intact(built: dict[str, Any]) -> bool:
    """True while both tables hold exactly the files they were built with."""
    try:
        return all(Path(built[k]).is_dir() and _disk_files(Path(built[k])) == built["disk"][k]
                   for k in ("clean", "killed")) and "live" in built
    except (KeyError, TypeError, OSError):
        return False


@dataclass
class OrphanTable:
    """A table an orphan check runs on: its folder, the orphans, and what the other data files are."""

    path: Path
    orphans: set[str]          # data files no commit added (relative, as on disk)
    removed: set[str]          # files a commit added and a later one removed, still on disk
    live: set[str]             # files the latest version reads
    what: str                  # the table, as a message names it
    seed: int | None = None


#: How old :func:`orphan_history` makes a table's first commits: beyond the 7-day file retention.
_AGED_DAYS = 40


def orphan_history(spark: Any, path: str | os.PathLike[str], rng: random.Random) -> OrphanTable:
    """Write at ``path`` a table whose history ``rng`` chooses, with orphans in the middle of it.

    Partitioned by ``city`` (values of :data:`deltalab.labs.tables.AWKWARD_VALUES`: the log stores
    ``city=new york`` as ``city=new%20york`` and ``city=10%3A30`` as ``city=10%253A30``); deletion
    vectors or not; ``delta.checkpointInterval`` 2, 3 or none. Its history: appends, a DELETE of
    some rows (a rewrite, or a deletion vector), a DELETE of a whole partition (its files leave the
    table and stay on disk), and at a random point files that Delta's own writer wrote for a
    transaction that never committed (``OptimisticTransaction.writeFiles``): what a writer killed
    before its commit leaves, with commits after it. Then the first commits are made older than the
    7-day file retention, as on a table in use for weeks: Spark refuses to time-travel to them, the
    log still lists them.
    """
    from deltalab.jvm import clear_delta_cache, write_uncommitted_files

    location = str(path)
    deletion_vectors = rng.random() < 0.5
    interval = rng.choice([2, 3, 100])
    spark.sql(
        f"CREATE TABLE delta.`{location}` (id BIGINT, city STRING, amount INT) USING delta PARTITIONED BY (city) "
        f"TBLPROPERTIES ('delta.checkpointInterval' = '{interval}', "
        f"'delta.enableDeletionVectors' = '{str(deletion_vectors).lower()}')"
    )
    next_id = 0

    def rows() -> Any:
        nonlocal next_id
        count = rng.randint(6, 30)
        cities = list(AWKWARD_VALUES)
        data = [(next_id + i, cities[i % len(cities)] if i < len(cities) else rng.choice(cities), rng.randint(1, 999))
                for i in range(count)]
        next_id += count
        return spark.createDataFrame(data, "id BIGINT, city STRING, amount INT").repartition(rng.randint(1, 2))

    orphans: set[str] = set()

    def write_uncommitted() -> None:
        # files on disk, no commit names them
        orphans.update(unquote(path) for path in write_uncommitted_files(spark, location, rows()))

    steps: list[Callable[[], Any]] = [
        lambda: rows().write.format("delta").mode("append").save(location),
        lambda: spark.sql(f"DELETE FROM delta.`{location}` WHERE id % {rng.randint(3, 5)} = {rng.randint(0, 2)}"),
        lambda: spark.sql(f"DELETE FROM delta.`{location}` WHERE city = '{rng.choice(AWKWARD_VALUES[:3])}'"),
        write_uncommitted,
    ]
    rng.shuffle(steps)
    rows().write.format("delta").mode("append").save(location)
    for step in steps:
        step()
    rows().write.format("delta").mode("append").save(location)   # the orphans are never the newest files
    read = _ever_read_by_spark(spark, location)
    found = data_files(location) - read
    if found != orphans or not orphans:
        raise DeltaLabError(f"The uncommitted write left {sorted(orphans)}, but the files on disk that no version "
                            f"reads are {sorted(found)}.", fix="Run the check again; if it keeps failing, report it.")
    live = set(spark_files(spark, location, relative=True))
    latest = latest_version(location)
    aged = time.time() - _AGED_DAYS * 86400
    for version in range(max(1, latest // 2)):
        commit = Path(location) / "_delta_log" / f"{version:020d}.json"
        os.utime(commit, (aged + version, aged + version))
    clear_delta_cache(spark)
    return OrphanTable(Path(location), orphans, read - live, live, "a partitioned table generated for this run")


def _as_disk_path(table: Path, entry: Any) -> str | None:
    """A returned entry as a path relative to ``table``; None if it is not a path inside it."""
    if isinstance(entry, bytes) or not isinstance(entry, (str, os.PathLike)):
        return None
    path = Path(local_path(os.fspath(entry)))
    if path.is_absolute():
        for base in (table, table.resolve()):
            try:
                return path.relative_to(base).as_posix()
            except ValueError:
                continue
        return None
    return path.as_posix()


def _orphan_answer(check: str, orphan_files: Callable[[str], Any], table: OrphanTable) -> set[str]:
    answer = call_student(check, orphan_files, "orphan_files", str(table.path),
                          hint="list the *.parquet files under the table folder (not _delta_log) and subtract the "
                               "`path` of every add action of every JSON commit in _delta_log, URL-decoded once; "
                               "read the log files yourself: Spark refuses to time-travel to old versions.",
                          read_only=[table.path])
    if isinstance(answer, (str, bytes)) or not isinstance(answer, Iterable):
        raise CheckFailed(check, f"orphan_files returned {type(answer).__name__}; it must return a set of paths.",
                          "the `return` line: a set of paths relative to the table, as they are on disk.")
    got: set[str] = set()
    for entry in answer:
        relative = _as_disk_path(table.path, entry)
        if relative is None:
            raise CheckFailed(check, f"orphan_files returned {entry!r}, which is not a path inside the table folder.",
                              "return paths relative to the table folder, such as 'part-00000-….parquet'.")
        if not (table.path / relative).is_file():
            encoded = relative != unquote(relative) or (table.path / unquote(relative)).is_file()
            raise CheckFailed(
                check,
                f"on {table.what}, orphan_files returned {relative!r}, which is not a file in the table folder.",
                "return paths as they are on disk; the log's paths are URL-encoded once more than the folders "
                "(city=new%20york in the log is the folder city=new york): urllib.parse.unquote a log path once."
                if encoded else "return paths relative to the table folder, with their partition folders.",
                seed=table.seed,
            )
        got.add(relative)
    return got


def _compare_orphans(check: str, got: set[str], table: OrphanTable) -> None:
    expected = table.orphans
    if got == expected:
        return
    extra, missing = sorted(got - expected), sorted(expected - got)
    seed = table.seed
    log_files = [f for f in extra if f.startswith("_delta_log/") or f.endswith(".crc")]
    if log_files:
        raise CheckFailed(
            check,
            f"on {table.what}, orphan_files includes {len(log_files)} log or checksum file(s) (e.g. {log_files[0]}), "
            "which are not data files.",
            "keep only *.parquet files outside _delta_log; the hidden .<name>.crc files next to them are Hadoop's "
            "checksums, not data.",
            seed=seed,
        )
    not_parquet = [f for f in extra if not f.endswith(".parquet")]
    if not_parquet:
        dv = [f for f in not_parquet if Path(f).name.startswith("deletion_vector_")]
        raise CheckFailed(
            check,
            f"on {table.what}, orphan_files includes {not_parquet[0]}, which is not a Parquet data file"
            + (" but a deletion vector file, which an add action names in its deletionVector, not in its path."
               if dv else "."),
            "the orphans asked for are *.parquet data files outside _delta_log.",
            seed=seed,
        )
    live = [f for f in extra if f in table.live]
    if live:
        encoded = [f for f in live if " " in f or "%" in f]      # a folder name the log encodes once more
        raise CheckFailed(
            check,
            f"on {table.what}, orphan_files includes {live[0]}, a file the latest version reads.",
            "the log stores each path URL-encoded (the folder city=new york as city=new%20york, city=10%3A30 as "
            "city=10%253A30): urllib.parse.unquote each add path once before comparing with the folder."
            if encoded else "every file an add action names is not an orphan; read every commit's add actions.",
            seed=seed,
        )
    if extra and set(extra) <= table.removed:
        raise CheckFailed(
            check,
            f"on {table.what}, orphan_files includes {extra[0]}, a file a DELETE removed: an add action of an older "
            "commit names it, so it is not an orphan (VACUUM deletes it once the retention has passed).",
            "compare with the add actions of every commit (the whole log), not only with the latest snapshot's files.",
            seed=seed,
        )
    if missing and not got and all("/" in f for f in missing):
        raise CheckFailed(
            check,
            f"on {table.what}, orphan_files found no orphan, but its partition folders hold some.",
            "an orphan is a *.parquet file no add action of any commit names, whatever its age; a partitioned "
            "table keeps its data files in city=… folders: list them recursively (Path.rglob).",
            seed=seed,
        )
    detail = []
    if missing:
        detail.append(f"misses {len(missing)} file(s) no commit names (e.g. {missing[0]})")
    if extra:
        detail.append(f"includes {len(extra)} file(s) that are not orphans (e.g. {extra[0]})")
    raise CheckFailed(
        check,
        f"on {table.what}, orphan_files " + " and ".join(detail) + ".",
        "an orphan is a *.parquet file in the table folder whose path appears in no `add` action of any "
        "N.json commit; paths are relative to the table, as on disk.",
        seed=seed,
    )


def _orphan_check_answer(check: str, orphan_files: Callable[[str], Any], table: OrphanTable) -> None:
    """Run the student's function on one table and compare, refusing the course's own helper."""
    from deltalab.files import orphan_data_files

    watched = Watched(orphan_files, helpers=[orphan_data_files]) if callable(orphan_files) else orphan_files
    got = _orphan_answer(check, watched, table)
    if isinstance(watched, Watched) and watched.helpers_called:
        raise CheckFailed(
            check,
            f"orphan_files calls {watched.helpers_called[0]}, the course's own answer to this exercise.",
            "read the log yourself: list the data files, then json.loads every commit in _delta_log.",
        )
    _compare_orphans(check, got, table)


@exercise_check
def check_orphan_files(orphan_files: Callable[[str], Any]) -> None:
    """``orphan_files(table_path)`` on a partitioned table generated for the run and on the files a writer
    killed by SIGKILL left on disk."""
    check = "orphan_files"
    spark = lab_spark()
    seed = check_seed()
    quick = fresh_dir("lab05_orphans_quick") / "empty"
    make_pair_table(spark, quick)                   # one commit, no orphans: an answer that raises does so first
    _orphan_check_answer(check, orphan_files, OrphanTable(quick, set(), set(), set(data_files(quick)),
                                                          "a table with one commit"))
    generated = orphan_history(spark, fresh_dir("lab05_orphans_generated") / "events", random.Random(seed))
    generated.seed = seed
    _orphan_check_answer(check, orphan_files, generated)
    built = orphan_table(spark)
    removed, live = set(built["removed"]), set(built["live"])
    for key, expected, which in (("clean", set(), "a table after a DELETE, with no orphans"),
                                 ("killed", set(built["orphans"]), "the table a killed writer left files in")):
        _orphan_check_answer(check, orphan_files, OrphanTable(Path(built[key]), expected, removed, live, which))
    passed(check, f"found exactly the orphans of a partitioned table generated for this run and the "
                  f"{len(built['orphans'])} files the killed writer left, and no file a DELETE removed.")
