"""Lab 02 (the transaction log): the latest version and the live files of any version, from the log alone.

``check_table_version`` runs the learner's function on the example table (eight commits,
checkpoints at 3 and 6, commits 0 to 2 cleaned up; built once per process), then on a table
generated afresh for each run (:func:`deltalab.labs.tables.check_seed`): a random number of
commits, a checkpoint interval of 2 to 4, the commits before its newest checkpoint cleaned up;
each answer compared with ``DESCRIBE HISTORY``. Then the check writes one more commit, as a newer
Delta would: its ``protocol`` names a reader feature this Spark does not know, so Spark refuses to
open the table while the names in ``_delta_log/`` still tell its version (Delta's latest plus one).

``check_active_files`` runs the learner's function at every version of the example table, then of
a table :func:`deltalab.labs.tables.random_history` writes for the run, partitioned by values the
log must URL-encode and with deletion vectors on, ending with a DELETE that gives files deletion
vectors (Delta 4.4 commits ``add(A, dv)`` before ``remove(A)``: a replay keyed by path alone loses
A), a checkpoint, and an OPTIMIZE that removes those files by (path, deletion vector) after the
checkpoint; then of a copy whose commits before one of its checkpoints are deleted; then at the
commit a newer Delta would write (the protocol above, plus the ``remove`` of one live file); then of a
table whose first commit writes its data files (no checkpoint: a replay starts at commit 0). Each
answer is compared with Spark's ``inputFiles()`` at that version, as relative paths on disk (the
last one with Spark's files of the version before, minus the removed file).

Both checks refuse an answer that calls the course's own log readers (``deltalab.replay_log``,
``latest_version``, ``spark_files``...): the exercise is to read the files yourself.
"""

from __future__ import annotations

import json
import random
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator
from urllib.parse import unquote

from deltalab.files import spark_files
from deltalab.jvm import clear_delta_cache
from deltalab.labs.report import CheckFailed, passed, short_repr
from deltalab.labs.student import call_student, calls_watched, course_log_readers, exercise_check, lab_spark
from deltalab.labs.tables import append_events, build_once, check_seed, clean_up_commits, fresh_dir, random_history
from deltalab.log import checkpoint_versions, replay_log

__all__ = ["CheckFailed", "check_active_files", "check_table_version"]

#: The reader feature the check's last commit names: no Delta knows it, so Spark refuses the table.
FUTURE_FEATURE = "deltalabFutureReaderFeature"


def _delta_latest(spark: Any, path: str) -> int:
    """The latest version of the table as Delta's ``DESCRIBE HISTORY`` reports it."""
    from delta.tables import DeltaTable

    clear_delta_cache(spark)
    return int(DeltaTable.forPath(spark, path).history(1).collect()[0]["version"])


# ------------------------------------------------------------------------------------ the example


@dataclass
class _Example:
    """The example table, with what Delta says about it (asked once, when it is built)."""

    path: str
    latest: int                      # DESCRIBE HISTORY's latest version
    expected: dict[int, set[str]]    # version -> Spark's files, relative paths on disk


def _example(spark: Any) -> _Example:
    """The lab 02 example table, built once per Python process (the checks only read it)."""
    return build_once("lab02", lambda folder: _build_example(spark, folder),
                      intact=lambda table: (Path(table.path) / "_delta_log" / f"{table.latest:020d}.json").exists())


def _build_example(spark: Any, folder: Path) -> _Example:
    """A table with eight commits, checkpoints at versions 3 and 6 and the commits before the
    first checkpoint deleted (as log clean-up does), so only a checkpoint-aware replay works;
    with Spark's files at the versions that can still be read (3 to 7)."""
    path = str(folder / "events")
    spark.sql(
        f"CREATE TABLE delta.`{path}` (id BIGINT, kind STRING) USING delta "
        "TBLPROPERTIES ('delta.checkpointInterval' = '3')"
    )                                                                               # v0: no files
    append_events(spark, path, 0, 30, "IF(id % 3 = 0, 'click', 'view')", files=3)  # v1: 3 files
    append_events(spark, path, 30, 40, "'buy'")                                     # v2: +1 file
    spark.sql(f"DELETE FROM delta.`{path}` WHERE id = 35")                          # v3: checkpoint
    append_events(spark, path, 40, 50, "'view'")                                    # v4
    spark.sql(f"OPTIMIZE delta.`{path}`")                                           # v5: all -> 1
    spark.sql(f"DELETE FROM delta.`{path}` WHERE kind = 'buy'")                    # v6: checkpoint
    append_events(spark, path, 50, 55, "'click'")                                   # v7
    clean_up_commits(path, before=3)
    latest = _delta_latest(spark, path)
    return _Example(path, latest, {v: set(spark_files(spark, path, v, relative=True)) for v in range(3, latest + 1)})


# ------------------------------------------------------------------------------- generated tables


def _write_future_commit(path: str, version: int, removed: dict[str, Any] | None = None) -> None:
    """Write commit ``version`` as a newer Delta would: a ``protocol`` that adds the reader (and
    writer) feature :data:`FUTURE_FEATURE` to the table's, and the ``remove`` of the live file whose
    ``add`` is ``removed`` (its path, partition values, size and deletion vector), if one is given.

    Spark refuses every read of the table from then on (``DELTA_UNSUPPORTED_FEATURES_FOR_READ``);
    the log's files can still be read, which is what the exercises do.
    """
    protocol = dict(replay_log(path).protocol)
    protocol.update(minReaderVersion=3, minWriterVersion=7)
    protocol["readerFeatures"] = sorted({*protocol.get("readerFeatures", []), FUTURE_FEATURE})
    protocol["writerFeatures"] = sorted({*protocol.get("writerFeatures", []), FUTURE_FEATURE})
    now = int(time.time() * 1000)
    actions: list[dict[str, Any]] = [
        {"commitInfo": {"timestamp": now, "operation": "UPGRADE PROTOCOL", "operationParameters": {},
                        "readVersion": version - 1, "isBlindAppend": False, "engineInfo": "a newer Delta"}},
        {"protocol": protocol},
    ]
    if removed is not None:
        remove = {"path": removed["path"], "deletionTimestamp": now, "dataChange": True, "extendedFileMetadata": True,
                  "partitionValues": dict(removed.get("partitionValues") or {}), "size": removed.get("size")}
        if removed.get("deletionVector"):
            remove["deletionVector"] = {k: v for k, v in removed["deletionVector"].items() if v is not None}
        actions.append({"remove": remove})
    commit = Path(path) / "_delta_log" / f"{version:020d}.json"
    commit.write_text("".join(json.dumps(action) + "\n" for action in actions))
    clear_delta_cache()


def _write_version_table(spark: Any, path: str, rng: random.Random) -> None:
    """A table of one append and then cheap commits (property changes) whose number ``rng`` chooses,
    a checkpoint every 2 to 4 commits, and the commits before its newest checkpoint cleaned up: its
    latest version is known only from the names of its files (the data does not matter here)."""
    interval = rng.randint(2, 4)
    spark.sql(f"CREATE TABLE delta.`{path}` (id BIGINT, kind STRING) USING delta "
              f"TBLPROPERTIES ('delta.checkpointInterval' = '{interval}')")
    append_events(spark, path, 0, 10, "'view'")
    for _ in range(rng.randint(interval + 1, 8)):
        spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('course.step' = '{rng.randint(1, 10**6)}')")
    clean_up_commits(path, before=max(checkpoint_versions(path)))


@dataclass
class _Case:
    """A table the learner's ``active_files`` runs on, and Spark's files at each version to check."""

    path: str
    expected: dict[int, set[str]]    # version -> relative paths on disk, from Spark
    what: str                        # how a message names the table
    hint: str                        # where to look when the learner's code raises on it
    seed: int | None = None
    future: int | None = None        # the version the check wrote as a newer Delta would


_REPLAY_HINT = ("start from the newest N.checkpoint.parquet with N <= version (if any: its `add` column), then apply "
                "the add and remove actions of the JSON commits after it, up to `version`.")
_CLEANED_HINT = ("commits before the newest checkpoint were deleted, as log clean-up does: files added before it are "
                 "only in N.checkpoint.parquet (the column `add`), so read the checkpoint first.")
_FUTURE_HINT = ("this table's newest commit names a reader feature this Spark does not know, so Spark refuses to open "
                "it; read the log's files yourself (json, pyarrow), without Spark.")


def _history_cases(spark: Any, folder: Path, seed: int) -> Iterator[_Case]:
    """The run's generated tables (see the module's docstring), each with Spark's files at every
    version it is checked at, built when an answer got past the example table: the table, its
    cleaned-up copy, then the table again at the commit the check writes as a newer Delta would."""
    rng = random.Random(seed)
    path = str(folder / "history")
    random_history(spark, path, rng, commits=rng.randint(2, 4), partitioned=True, deletion_vectors=True)
    # A DELETE that leaves rows in the files it touches: each gets add(A, dv) and remove(A) in one commit.
    spark.sql(f"DELETE FROM delta.`{path}` WHERE id % 7 = {rng.randrange(7)}")
    # A checkpoint right after it (a commit is checkpointed when version % interval == 0), none for a
    # while, then an OPTIMIZE that removes the files with deletion vectors by (path, deletion vector).
    spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.checkpointInterval' = '1')")
    spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.checkpointInterval' = '100')")
    spark.sql(f"OPTIMIZE delta.`{path}`")
    latest = _delta_latest(spark, path)
    expected = {v: set(spark_files(spark, path, v, relative=True)) for v in range(latest + 1)}
    what = "a generated table (partitioned, with deletion vectors)"
    yield _Case(path, expected, what, _REPLAY_HINT, seed)

    cleaned = str(folder / "cleaned_copy")
    shutil.copytree(path, cleaned)
    first = rng.choice(checkpoint_versions(cleaned))
    clean_up_commits(cleaned, before=first)
    yield _Case(cleaned, {v: files for v, files in expected.items() if v >= first},
                "a copy of the generated table whose commits before a checkpoint were cleaned up", _CLEANED_HINT, seed)

    live = sorted(replay_log(path).files.values(), key=lambda add: add["path"])
    removed = rng.choice(live) if live else None   # a file Spark reads at `latest` (the log and Spark agree)
    _write_future_commit(path, latest + 1, removed)
    gone = {unquote(removed["path"])} if removed else set()
    yield _Case(path, {latest + 1: expected[latest] - gone}, what, _FUTURE_HINT, seed, future=latest + 1)

    # A table whose first commit writes its files (a DataFrame saved, not CREATE TABLE then INSERT), with no
    # checkpoint: version 0's adds are live files, and a replay has to start at commit 0 itself.
    written = str(folder / "first_commit_writes")
    rows = rng.randint(4, 30)
    spark.range(0, rows, 1, rng.randint(1, 3)).write.format("delta").save(written)
    spark.sql(f"DELETE FROM delta.`{written}` WHERE id = {rng.randrange(rows)}")
    assert not checkpoint_versions(written)
    yield _Case(written, {v: set(spark_files(spark, written, v, relative=True)) for v in (0, 1)},
                "a table whose first commit wrote its data files (no checkpoint)", _REPLAY_HINT, seed)


def _cases(spark: Any, seed: int) -> Iterator[_Case]:
    """The example table first (quick feedback, the same in every run), then the run's generated ones."""
    example = _example(spark)
    yield _Case(example.path, example.expected,
                "the example table (its commits before the first checkpoint cleaned up)", _CLEANED_HINT)
    yield from _history_cases(spark, fresh_dir("lab02_active_files"), seed)


# ---------------------------------------------------------------------------------- calling code


def _call(check: str, func: Callable[..., Any], name: str, table: str, *args: Any, what: str, hint: str,
          seed: int | None) -> Any:
    """Call the learner's function on ``table`` as :func:`call_student` does (the table read-only),
    and refuse an answer that used the course's own log readers."""
    with calls_watched(course_log_readers()) as used:
        answer = call_student(check, func, name, table, *args, hint=hint, read_only=[table],
                              seed=seed, on=None if seed is None else what)
    if used:
        raise CheckFailed(
            check,
            f"{name} called {used[0]}, which reads the log for you; the exercise is to read it yourself.",
            "list and open the files in _delta_log/ (Path.iterdir, json.loads, pyarrow.parquet.read_table).",
            seed=seed,
        )
    return answer


# ----------------------------------------------------------------------------------- table_version


def _version_fix(answer: int, expected: int) -> str:
    """Where to look, for a latest version that is not Delta's."""
    if answer < expected:
        return ("the highest N among the N.json commit files is the version: counting files breaks once old commits "
                "are cleaned up, _last_checkpoint names the newest checkpoint (not the newest commit), and a commit "
                "need not have an N.crc.")
    return ("the highest N among the files named <20 digits>.json is the version, and it differs from table to "
            "table; N.checkpoint.parquet, N.crc and _last_checkpoint are not new versions.")


_VERSION_HINT = "list the files in _delta_log and look at their names; only N.json files are commits."


def _version_cases(spark: Any, seed: int) -> Iterator[tuple[str, int, str, str, int | None]]:
    """(table, Delta's latest version, how a message names it, hint, seed): the example table, then
    (built when an answer got that far) the run's generated table, then the same table once the
    check wrote a commit Spark cannot read (its version: Delta's latest before it, plus one)."""
    example = _example(spark)
    yield example.path, example.latest, "the example table", _VERSION_HINT, None
    path = str(fresh_dir("lab02_table_version") / "versions")
    _write_version_table(spark, path, random.Random(seed))
    latest = _delta_latest(spark, path)
    yield (path, latest, "a generated table whose commits before its newest checkpoint were cleaned up",
           _VERSION_HINT, seed)
    _write_future_commit(path, latest + 1)
    yield (path, latest + 1, "a table whose newest commit names a reader feature this Spark does not know",
           _FUTURE_HINT, seed)


@exercise_check
def check_table_version(table_version: Callable[[str], int]) -> None:
    """Check ``table_version(table_path) -> int`` against Delta's latest version (``DESCRIBE HISTORY``),
    on the example table, on a generated one, and on that one once its newest commit is one Spark cannot read."""
    check = "table_version"
    spark = lab_spark()
    for path, expected, what, hint, seed in _version_cases(spark, check_seed()):
        answer = _call(check, table_version, "table_version", path, what=what, hint=hint, seed=seed)
        if isinstance(answer, bool) or not isinstance(answer, int):
            raise CheckFailed(
                check,
                f"table_version returned {short_repr(answer)} ({type(answer).__name__}); it must return an int.",
                "the `return` line of table_version: turn the number in the file name into int(...).",
                seed=seed,
            )
        if answer != expected:
            raise CheckFailed(
                check,
                f"on {what}, table_version returned {answer}, {'lower' if answer < expected else 'higher'} "
                "than its latest version.",
                _version_fix(answer, expected),
                seed=seed,
            )
    passed(check, "matches Delta's latest version on tables with checkpoints and cleaned-up commits, "
                  "and on one whose newest commit Spark cannot read.")


# ------------------------------------------------------------------------------------ active_files


def _dv_paths(path: str, version: int) -> tuple[set[str], set[str]]:
    """Relative paths (on disk) of the files that have a deletion vector at ``version``, and of the
    files a ``remove`` with a deletion vector ended at or before it: only to word a message."""
    state = replay_log(path, version)
    live = {unquote(p) for (p, dv) in state.files if dv is not None}
    ended = {unquote(p) for (p, dv) in state.tombstones if dv is not None}
    return live, ended


def _relative(path: str, root: Path) -> str | None:
    """``path`` relative to ``root`` if it is an absolute path inside it, else None."""
    resolved = Path(path).resolve()
    return resolved.relative_to(root).as_posix() if Path(path).is_absolute() and resolved.is_relative_to(root) else None


def _files_fix(case: _Case, got: set[str], expected: set[str], with_dv: set[str], ended_with_dv: set[str]) -> str:
    """Where to look, for a set of files of ``case`` that is not Spark's; ``with_dv`` and
    ``ended_with_dv`` are :func:`_dv_paths` at that version."""
    missing, extra = expected - got, got - expected
    if extra and {unquote(p) for p in got} == expected:
        return ("the log stores each path URL-encoded (a space as %20, the '%3A' of a folder name as %253A): "
                "return `path` decoded once with urllib.parse.unquote, relative to the table folder, as on disk.")
    if extra and any(unquote(e) in extra for e in missing):
        return ("a partition folder's name keeps Hive's escaping on disk (a value '10:30' is the folder "
                "city=10%3A30): decode the log's `path` once with urllib.parse.unquote, not twice.")
    if extra and {_relative(p, Path(case.path).resolve()) for p in got} == expected:
        return "return paths relative to the table folder (as the log's `path` is), not absolute ones."
    if extra and not all("/" in p for p in got) and {Path(p).name for p in got} == {Path(p).name for p in expected}:
        return ("keep the partition folders: return the whole relative path (city=.../part-....parquet), "
                "not the file name.")
    if missing & with_dv:
        return ("a DELETE or UPDATE with deletion vectors commits add(A, dv) and remove(A) for the same file A "
                "(Delta 4.4 writes the add first): reconcile actions by (path, deletion vector id), not by path alone.")
    if extra & ended_with_dv:
        return ("a remove names the deletion vector of the add it ends: key the checkpoint's add rows and the "
                "JSON actions the same way, by (path, storageType + pathOrInlineDv + offset), ignoring other fields.")
    if missing and not got:
        if not checkpoint_versions(case.path):
            return ("with no checkpoint at or below `version`, replay every commit from 0: the first commit's "
                    "add actions are live files too.")
        return _CLEANED_HINT
    if extra:
        return ("a `remove` action in a later commit ends a file's life; also stop at `version` "
                "(do not read commits after it).")
    return _REPLAY_HINT


def _describe(missing: set[str], extra: set[str], with_dv: set[str]) -> str:
    """What is wrong with a set of files, without naming a file Spark reads: how many are missing (and
    of which kind), and which of the answer's own paths Spark does not read."""
    parts = []
    if missing:
        kind = ", files with a deletion vector among them" if missing & with_dv else ""
        parts.append(f"{len(missing)} of the files Spark reads are missing{kind}")
    if extra:
        first = sorted(extra)[0]
        shown = first if len(first) <= 90 else "…" + first[-89:]   # the answer's own path, partition folders included
        parts.append(f"{len(extra)} of the paths returned are not files Spark reads (e.g. {shown!r})")
    return " and ".join(parts)


@exercise_check
def check_active_files(active_files: Callable[[str, int], Iterable[str]]) -> None:
    """Check ``active_files(table_path, version)`` against Spark's ``inputFiles()`` at every version
    of the example table and of the run's generated tables (see the module's docstring)."""
    check = "active_files"
    spark = lab_spark()
    seed = check_seed()
    for case in _cases(spark, seed):
        for version, expected in sorted(case.expected.items()):
            answer = _call(check, active_files, "active_files", case.path, version, what=case.what,
                           hint=case.hint, seed=case.seed)
            if isinstance(answer, (str, bytes)) or not isinstance(answer, Iterable):
                raise CheckFailed(
                    check,
                    f"active_files returned {type(answer).__name__}; it must return a set of file paths.",
                    "the `return` line of active_files: collect the `path` of each active `add` action in a set.",
                    seed=case.seed,
                )
            got = {str(p) for p in answer}
            if got == expected:
                continue
            where = f"at version {version} of {case.what}"
            if version == case.future:
                where += " (its newest commit, which only a newer Delta can read, removes a file)"
            with_dv, ended_with_dv = _dv_paths(case.path, version)
            raise CheckFailed(check, f"{where}, {_describe(expected - got, got - expected, with_dv)}.",
                              _files_fix(case, got, expected, with_dv, ended_with_dv), seed=case.seed)
    passed(check, "matches Spark's files at every version of the example table and of generated ones: checkpoints "
                  "or none, cleaned-up commits, URL-encoded partition paths, deletion vectors, a commit Spark "
                  "cannot read.")
