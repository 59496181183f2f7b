"""What every lab check shares: the failure message, calling the student's code, and test tables.

A check prints one line starting with ``✓`` when the answer is right. When it is wrong it
raises :class:`CheckFailed`: one or two plain sentences saying what is wrong, then where to
look. Errors raised by the student's code (including JVM errors) are turned into the same kind
of message, first line only, so a learner never has to read a Java stack trace. In a Jupyter
notebook the exception is shown without a traceback (``_render_traceback_``), and because it is
an exception, nbgrader scores the check cell 0.

Spark is the ground truth: checks compare with ``inputFiles()``, ``DESCRIBE HISTORY``, Delta's
own log segments and real conflicts, never with an answer typed into the check, and a message
never shows the expected value (it could be copied into the answer).

A check tests understanding, not one example: beside the lab's example table it runs the
student's function on tables generated afresh for each run (:func:`check_seed`,
:func:`random_history`: sizes, partition values that need URL-encoding, checkpoints or none,
deletion vectors), and :func:`call_student` refuses an answer that changed what it was given or
left a session setting behind.
"""

from __future__ import annotations

import copy
import json
import os
import random
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence, TypeVar

from deltalab.errors import DeltaLabError, first_line
from deltalab.jvm import clear_delta_cache
from deltalab.publish import write_atomically
from deltalab.session import active_spark
from deltalab.workdir import workdir

__all__ = [
    "AWKWARD_VALUES",
    "CheckFailed",
    "History",
    "Watched",
    "append_events",
    "build_once",
    "call_student",
    "calls_watched",
    "check_seed",
    "clean_up_commits",
    "create_history_table",
    "file_set_difference",
    "folder_state",
    "fresh_dir",
    "lab_spark",
    "passed",
    "random_history",
    "short_repr",
    "spark_jobs_started",
]


class CheckFailed(DeltaLabError):
    """A lab check found a wrong answer. ``problem`` says what is wrong, ``fix`` where to look.

    ``seed`` (from :func:`check_seed`) names the generated tables the answer failed on, so an
    instructor can build them again (``DELTALAB_CHECK_SEED=N``); it is not an answer.
    """

    def __init__(self, check: str, problem: str, fix: str, seed: int | None = None) -> None:
        self.check = check
        self.seed = seed
        tables = f" (tables of seed {seed})" if seed is not None else ""
        super().__init__(f"✗ {check}: {problem}{tables}", fix=f"Where to look: {fix}")

    def _render_traceback_(self) -> list[str]:
        """Tell IPython to show just the message, not a traceback into this module."""
        return str(self).splitlines()


def passed(check: str, what: str) -> None:
    """Print the one line of a check that passed."""
    print(f"✓ {check}: {what}")


def short_repr(value: Any, limit: int = 40) -> str:
    """A value as a message shows it: a path by its last part, a session as ``spark``, else a short repr."""
    if isinstance(value, (str, os.PathLike)):
        text = str(value)
        return repr(Path(text).name if os.sep in text else text)
    if hasattr(value, "sparkContext"):
        return "spark"
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


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
        raise CheckFailed(
            check,
            f"{name} is not written yet: it still raises NotImplementedError.",
            f"replace `raise NotImplementedError()` under `# YOUR CODE HERE` in the cell that defines {name}, "
            "run that cell, then run this check again.",
        ) from None
    except CheckFailed:
        raise
    except Exception as error:  # the student's bug, whatever it is, becomes one sentence
        raise failed(f"{name}({shown}) raised {type(error).__name__}: {first_line(error)}", hint) from None
    _side_effects(failed, name, args, before_args, before_settings, folders)
    return answer


# --------------------------------------------------------------------------------------------
# How an answer was computed: Spark jobs it ran, course functions it called
# --------------------------------------------------------------------------------------------


def spark_jobs_started() -> int:
    """How many Spark jobs the running session has started so far (0 when none runs): two counts
    taken around a call tell whether it ran Spark, whatever job group it used. Read from the
    scheduler's own counter, which grows when a job is submitted (the status tracker hears of a
    job later, through the listener bus)."""
    from deltalab.session import running_spark

    spark = running_spark()
    if spark is None:
        return 0
    return int(spark.sparkContext._jsc.sc().dagScheduler().numTotalJobs())


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


def file_set_difference(missing: list[str], extra: list[str]) -> str:
    """'2 file(s) Spark reads are missing (e.g. a) and 1 file(s) Spark does not read are included (e.g. b)'."""
    detail = []
    if missing:
        detail.append(f"{len(missing)} file(s) Spark reads are missing (e.g. {missing[0]})")
    if extra:
        detail.append(f"{len(extra)} file(s) Spark does not read are included (e.g. {extra[0]})")
    return " and ".join(detail)


def lab_spark() -> Any:
    """The session the lab's setup cell started; the checks compare answers with it."""
    return active_spark(None, "The lab checks compare your answers with Spark")


def fresh_dir(name: str) -> Path:
    """An empty directory for one check's tables (under the course work root)."""
    return workdir(f"labs_checks_{name}")


Built = TypeVar("Built")

#: What :func:`build_once` built in this process: name -> value.
_BUILT: dict[str, Any] = {}
_SAVED_AS = "built.json"


def build_once(name: str, build: Callable[[Path], Built], intact: Callable[[Built], bool] = lambda value: True,
               saved: bool = False) -> Built:
    """What ``build(folder)`` returned, built the first time this process asks for ``name`` and
    reused while ``intact(value)`` holds.

    A lab's checks only read the tables they build, so a student who runs a check cell ten times
    builds them once; a check that finds them changed (``intact`` false: an answer deleted a file)
    builds them again. ``folder`` is the emptied work directory ``labs_checks_<name>``. With
    ``saved=True`` (a JSON-able value) the value is also kept there, in ``built.json``, and a later
    process (nbgrader grades each submission in a fresh kernel) reuses it while it is intact.
    """
    value = _BUILT.get(name)
    if name in _BUILT and intact(value):
        return value
    if saved:
        kept = workdir(f"labs_checks_{name}", fresh=False) / _SAVED_AS
        try:
            value = json.loads(kept.read_text())
        except (OSError, ValueError):
            value = None
        if value is not None and intact(value):
            _BUILT[name] = value
            return value
    folder = fresh_dir(name)
    value = build(folder)
    if saved:
        write_atomically(folder / _SAVED_AS, json.dumps(value, indent=1))
    _BUILT[name] = value
    return value



def append_events(spark: Any, path: str, start: int, stop: int, kind: str, files: int = 1) -> None:
    """Append ids ``start..stop-1`` with a ``kind`` column (a SQL expression) in ``files`` files."""
    df = spark.range(start, stop).selectExpr("id", f"{kind} AS kind")
    df = df.repartition(files) if files > 1 else df.coalesce(1)
    df.write.format("delta").mode("append").save(path)


def clean_up_commits(table_path: str | os.PathLike[str], before: int) -> None:
    """Delete commits ``0 .. before-1`` (JSON, checksum and Hadoop's hidden twins) from the log.

    This is what Delta's log clean-up does to commits older than ``delta.logRetentionDuration``
    once a later checkpoint covers them; a check does it at once so that only a checkpoint-aware
    reader can rebuild the table.
    """
    log = Path(table_path) / "_delta_log"
    for version in range(before):
        for suffix in (".json", ".crc"):
            (log / f"{version:020d}{suffix}").unlink(missing_ok=True)
            (log / f".{version:020d}{suffix}.crc").unlink(missing_ok=True)
    clear_delta_cache()


# --------------------------------------------------------------------------------------------
# Tables generated afresh for each check run
# --------------------------------------------------------------------------------------------

#: Set it to a whole number to make every check build the same tables again (reproducing a run).
SEED_ENV = "DELTALAB_CHECK_SEED"

#: Partition values a path must URL-encode (``city=new%20york``), and one that needs no encoding.
AWKWARD_VALUES = ("new york", "10:30", "a=b", "zürich", "plain")


def check_seed() -> int:
    """The seed of the tables one check run generates: new on every run, so that an answer fitted
    to one table fails on the next, or ``$DELTALAB_CHECK_SEED`` to build the same ones again."""
    fixed = os.environ.get(SEED_ENV, "").strip()
    if fixed:
        try:
            return int(fixed)
        except ValueError:
            raise DeltaLabError(f"{SEED_ENV}={fixed!r} is not a whole number.",
                                fix=f"Unset {SEED_ENV}, or set it to a number such as 7.") from None
    return random.SystemRandom().randrange(1, 2**31)


@dataclass
class History:
    """A table :func:`random_history` wrote: its path, its latest version, the versions that hold
    a checkpoint, and each commit's operation as its ``commitInfo`` names it (``operations[v]``)."""

    path: str
    latest: int
    checkpoints: list[int]
    operations: list[str] = field(default_factory=list)
    partitioned: bool = False
    deletion_vectors: bool = False


def create_history_table(spark: Any, path: str | os.PathLike[str], *, partitioned: bool, deletion_vectors: bool,
                         checkpoint_interval: int) -> None:
    """Create the empty table the generated histories write (:func:`random_history`, lab 03's):
    ``id BIGINT, city STRING, amount INT``, partitioned by ``city`` or not, with its checkpoint
    interval and deletion vectors on or off."""
    spark.sql(
        f"CREATE TABLE delta.`{path}` (id BIGINT, city STRING, amount INT) USING delta "
        + ("PARTITIONED BY (city) " if partitioned else "")
        + f"TBLPROPERTIES ('delta.checkpointInterval' = '{checkpoint_interval}', "
        f"'delta.enableDeletionVectors' = '{str(deletion_vectors).lower()}')"
    )


def random_history(spark: Any, path: str | os.PathLike[str], rng: random.Random, *, commits: int = 8,
                   partitioned: bool | None = None, deletion_vectors: bool | None = None,
                   checkpoint_interval: int | None = None) -> History:
    """Write a Delta table at ``path`` whose history ``rng`` chooses: about ``commits`` commits of
    appends (1-3 files each), DELETEs, UPDATEs, an OPTIMIZE and a table property change.

    Unless fixed by the arguments, ``rng`` also chooses whether the table is partitioned by
    ``city`` (values from :data:`AWKWARD_VALUES`: spaces, ``:`` and ``=`` must be URL-encoded in
    the log's paths), whether DELETE and UPDATE write deletion vectors (then a commit removes and
    adds the same path, told apart by the deletion vector), and its ``delta.checkpointInterval``
    (2-5, or 100: no checkpoint at all). Columns: ``id`` (unique), ``city``, ``amount``.
    """
    from deltalab.log import checkpoint_versions, commit_info, latest_version

    partitioned = rng.random() < 0.5 if partitioned is None else partitioned
    deletion_vectors = rng.random() < 0.5 if deletion_vectors is None else deletion_vectors
    interval = checkpoint_interval or rng.choice([2, 3, 4, 5, 100])
    location = str(path)
    create_history_table(spark, location, partitioned=partitioned, deletion_vectors=deletion_vectors,
                         checkpoint_interval=interval)
    next_id = 0

    def append() -> None:
        nonlocal next_id
        rows = rng.randint(3, 40)
        data = [(next_id + i, rng.choice(AWKWARD_VALUES), rng.randint(1, 1000)) for i in range(rows)]
        next_id += rows
        frame = spark.createDataFrame(data, "id BIGINT, city STRING, amount INT")
        frame.repartition(rng.randint(1, 3)).write.format("delta").mode("append").save(location)

    append()
    kinds = ["append", "append", "append", "delete", "update", "optimize", "property"]
    while latest_version(location) < commits:  # a DELETE or OPTIMIZE with nothing to do commits nothing
        kind = rng.choice(kinds)
        if kind == "append":
            append()
        elif kind == "delete":
            spark.sql(f"DELETE FROM delta.`{location}` WHERE id % {rng.randint(3, 7)} = {rng.randint(0, 2)}")
        elif kind == "update":
            spark.sql(f"UPDATE delta.`{location}` SET amount = amount + 1 WHERE id % {rng.randint(2, 5)} = 0")
        elif kind == "optimize":
            spark.sql(f"OPTIMIZE delta.`{location}`")
        else:
            spark.sql(f"ALTER TABLE delta.`{location}` SET TBLPROPERTIES ('course.step' = '{rng.randint(1, 10**6)}')")
    latest = latest_version(location)
    operations = [str(commit_info(location, version).get("operation")) for version in range(latest + 1)]
    return History(location, latest, checkpoint_versions(location), operations, partitioned, deletion_vectors)

