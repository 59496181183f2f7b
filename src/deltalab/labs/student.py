"""Calling the learner's function under watch, so that a check sees how it answered, not only what.

Errors raised by the learner's code (including JVM errors) become a :class:`~deltalab.labs.report.CheckFailed`
of their first line, so a learner never reads a Java stack trace; :func:`call_student` also refuses an
answer that changed what it was given, left a session setting behind or wrote into a folder it must only
read. :func:`calls_watched` and :class:`Watched` record which course functions and how many Spark jobs
an answer used, so a check can refuse an approach the exercise rules out.
"""

from __future__ import annotations

import copy
import functools
import inspect
import os
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Sequence

from deltalab.errors import first_line
from deltalab.labs.report import CheckFailed, short_repr
from deltalab.session import active_spark
from deltalab.spark_jvm import jobs_submitted

__all__ = ["SETTINGS_DELTA_WRITES", "Watched", "call_student", "calls_watched", "course_log_readers", "exercise_check",
           "folder_state", "is_stub", "lab_spark", "spark_jobs_started"]


def folder_state(folder: str | os.PathLike[str]) -> dict[str, tuple[int, int]]:
    """Every file under ``folder`` with its size and modification time (nanoseconds): two states
    taken around a call show whether it wrote, deleted or rewrote anything there."""
    root = Path(folder)
    return {p.relative_to(root).as_posix(): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in root.rglob("*") if p.is_file()}


#: Settings Delta itself writes into the session: after each commit (the version it committed), and
#: once, the first time it writes Parquet (field ids for column mapping).
SETTINGS_DELTA_WRITES = frozenset({
    "spark.databricks.delta.lastCommitVersionInSession",
    "spark.sql.parquet.fieldId.read.enabled",
    "spark.sql.parquet.fieldId.write.enabled",
})


def _session_settings() -> dict[str, str] | None:
    """The running session's settings that a learner's code could change (None when no session runs)."""
    from deltalab.session import running_spark

    spark = running_spark()
    if spark is None:
        return None
    return {key: value for key, value in spark.conf.getAll.items() if key not in SETTINGS_DELTA_WRITES}


def _mutable_copies(args: Sequence[Any]) -> dict[int, Any]:
    """Deep copies of the arguments a function could change in place (lists, dicts, sets)."""
    return {index: copy.deepcopy(arg) for index, arg in enumerate(args) if isinstance(arg, (list, dict, set, bytearray))}


def _side_effects(failed: Callable[[str, str], CheckFailed], name: str, args: Sequence[Any],
                  before_args: dict[int, Any], before_settings: dict[str, str] | None,
                  read_only: dict[Path, dict[str, tuple[int, int]]]) -> None:
    """Raise (as ``failed(problem, fix)`` makes it) the first thing the call changed that it must leave alone."""
    for index, before in before_args.items():
        if args[index] != before:
            raise failed(
                f"{name} changed its argument {short_repr(before)} in place; the caller's value must stay as it was.",
                f"work on a copy inside {name} (list(x), sorted(x), dict(x)) instead of changing what you were given.",
            )
    after_settings = _session_settings()
    if before_settings is not None and after_settings is not None and after_settings != before_settings:
        key = sorted(k for k in set(before_settings) | set(after_settings) if before_settings.get(k) != after_settings.get(k))[0]
        was = before_settings.get(key)
        raise failed(
            f"{name} left the session setting {key} {'unset' if key not in after_settings else 'changed'} "
            f"(before the call it was {'unset' if was is None else repr(was)}); every later cell of the "
            "notebook would run with it.",
            "set a session setting for the one operation that needs it (deltalab.temporary_conf(spark, {...}) in a "
            "with block, or put the old value back in a finally block).",
        )
    for folder, before in read_only.items():
        after = folder_state(folder) if folder.is_dir() else {}
        if after != before:
            changed = sorted(set(before) ^ set(after) | {k for k in set(before) & set(after) if before[k] != after[k]})
            raise failed(
                f"{name} changed the folder {folder.name} ({len(changed)} file(s) written, deleted or rewritten, "
                f"e.g. {changed[0]}); it must only read it.",
                f"read the files (open, json.loads, pyarrow); do not write, delete, VACUUM or OPTIMIZE in {name}.",
            )


def _stub_codes() -> list[bytes]:
    """The bytecode of nbgrader's stub body, ``raise NotImplementedError()``, with and without the call."""
    codes = []
    for body in ("raise NotImplementedError()", "raise NotImplementedError"):
        namespace: dict[str, Any] = {}
        exec(f"def stub(*args):\n    {body}\n", namespace)  # noqa: S102 - a constant source, compiled once
        codes.append(namespace["stub"].__code__.co_code)
    return codes


_STUB_CODES = _stub_codes()


def is_stub(func: Any) -> bool:
    """True when ``func``'s whole body is ``raise NotImplementedError()`` (a docstring and comments aside):
    the stub under ``# YOUR CODE HERE`` of an exercise not written yet. Read from its bytecode, without
    calling it: a function that does anything else first, or raises only on some paths, is not a stub."""
    code = getattr(func, "__code__", None)
    return code is not None and code.co_names == ("NotImplementedError",) and code.co_code in _STUB_CODES


def _not_written_yet(check: str, name: str) -> CheckFailed:
    return CheckFailed(
        check,
        f"{name} is not written yet: it still raises NotImplementedError.",
        f"replace `raise NotImplementedError()` under `# YOUR CODE HERE` in the cell that defines {name}, "
        "run that cell, then run this check again.",
    )


def exercise_check(check_function: Callable[[Any], None]) -> Callable[[Any], None]:
    """Decorate a lab's ``check_<name>(<name>)``: a stub still under ``# YOUR CODE HERE`` is told it is not
    written yet at once, before the check starts a server or builds its tables (seconds to a minute a check;
    a class graded half-way through a lab has many)."""
    check = check_function.__name__.removeprefix("check_")
    name = next(iter(inspect.signature(check_function).parameters))

    @functools.wraps(check_function)
    def checked(answer: Any) -> None:
        if is_stub(answer):
            raise _not_written_yet(check, name)
        return check_function(answer)

    return checked


def call_student(check: str, func: Callable[..., Any], name: str, *args: Any, hint: str,
                 read_only: Sequence[str | os.PathLike[str]] = (), seed: int | None = None, on: str | None = None) -> Any:
    """Call the student's ``func`` and turn any exception into a :class:`CheckFailed`.

    ``NotImplementedError`` (the stub of an unfinished exercise) says "not written yet";
    any other error becomes its first line plus ``hint``. After the call, an argument changed in
    place (a list the function emptied), a session setting left behind (``autoMerge`` still on),
    or a change under one of the ``read_only`` folders is a failure too. Those failures say which
    table they happened ``on`` ("a generated partitioned table") and the ``seed`` it was built from.
    """
    def failed(problem: str, fix: str) -> CheckFailed:
        return CheckFailed(check, f"on {on}, {problem}" if on else problem, fix, seed=seed)

    if not callable(func):
        raise CheckFailed(
            check,
            f"{name} is {type(func).__name__}, not a function.",
            f"the cell that defines `def {name}(...)`; run it again, then this check.",
        )
    shown = ", ".join(short_repr(a) for a in args)
    before_args = _mutable_copies(args)
    before_settings = _session_settings()
    folders = {Path(folder): folder_state(folder) for folder in read_only if Path(folder).is_dir()}
    try:
        answer = func(*args)
    except NotImplementedError:
        raise _not_written_yet(check, name) from None
    except CheckFailed:
        raise
    except Exception as error:  # the student's bug, whatever it is, becomes one sentence
        raise failed(f"{name}({shown}) raised {type(error).__name__}: {first_line(error)}", hint) from None
    _side_effects(failed, name, args, before_args, before_settings, folders)
    return answer


def spark_jobs_started() -> int:
    """How many Spark jobs the running session has started so far (0 when none runs): two counts
    taken around a call tell whether it ran Spark, whatever job group it used. Read from the
    scheduler's own counter, which grows when a job is submitted (the status tracker hears of a
    job later, through the listener bus)."""
    from deltalab.session import running_spark

    spark = running_spark()
    return 0 if spark is None else jobs_submitted(spark)


def course_log_readers() -> list[Callable[..., Any]]:
    """The course's own log and folder readers, which answer the log labs' exercises for you: the checks
    of labs 02 and 04 refuse an answer that calls one of them (:func:`calls_watched`)."""
    import deltalab.files
    import deltalab.jvm
    import deltalab.log

    return [deltalab.log.replay_log, deltalab.log.read_log, deltalab.log.latest_version, deltalab.log.list_log_files,
            deltalab.log.commit_versions, deltalab.log.checkpoint_versions, deltalab.log.commit_info,
            deltalab.files.spark_files, deltalab.files.read_table, deltalab.files.data_files,
            deltalab.files.orphan_data_files, deltalab.jvm.delta_log, deltalab.jvm.load_snapshot]


@contextmanager
def calls_watched(functions: Iterable[Callable[..., Any]] = (), modules: Iterable[str] = ()) -> Iterator[list[str]]:
    """Record, in the list it yields, which of ``functions`` (matched by their code, whatever name
    they were called by) and which functions of ``modules`` this thread called in the block, as
    ``module.function``, each once, in the order first called.

    It is how a check refuses an approach the exercise rules out (asking the course's own reader
    for the answer), not only a wrong value. A profiler hook; one already set (a profiler or a
    debugger) keeps receiving every event.
    """
    codes = {function.__code__: f"{function.__module__}.{function.__name__}" for function in functions}
    watched_modules = frozenset(modules)
    called: list[str] = []
    previous = sys.getprofile()

    def profile(frame: Any, event: str, arg: Any) -> None:
        if previous is not None:
            previous(frame, event, arg)
        if event != "call":
            return
        name = codes.get(frame.f_code)
        if name is None and watched_modules:
            module = frame.f_globals.get("__name__", "")
            if module in watched_modules:
                name = f"{module}.{frame.f_code.co_name}"
        if name is not None and name not in called:
            called.append(name)

    sys.setprofile(profile)
    try:
        yield called
    finally:
        sys.setprofile(previous)


class Watched:
    """The student's function wrapped so that a check sees how it answered, not only what: the
    Spark jobs its calls ran (``jobs``, summed) and which of ``helpers`` (course functions that
    compute the answer outright) or functions of ``modules`` it called (``helpers_called``)."""

    def __init__(self, func: Callable[..., Any], helpers: Iterable[Callable[..., Any]] = (),
                 modules: Iterable[str] = ()) -> None:
        self.func = func
        self.helpers = tuple(helpers)
        self.modules = tuple(modules)
        self.helpers_called: list[str] = []
        self.jobs = 0

    def __call__(self, *args: Any) -> Any:
        before = spark_jobs_started()
        try:
            with calls_watched(self.helpers, self.modules) as called:
                return self.func(*args)
        finally:
            self.helpers_called.extend(name for name in called if name not in self.helpers_called)
            self.jobs += spark_jobs_started() - before


def lab_spark() -> Any:
    """The session the lab's setup cell started; the checks compare answers with it."""
    return active_spark(None, "The lab checks compare your answers with Spark")

