"""Lab 03 (checkpoints): which log files rebuild a version, and what a checkpoint holds.

The checks build one small table with checkpoints at versions 3, 4 and 6 (its
``delta.checkpointInterval`` changes from 3 to 2 at version 4, and a DELETE and an OPTIMIZE
leave tombstones in the checkpoints), plus a copy of it whose commits 0 to 2 were cleaned up.
They compare the student's answers with Delta itself:

* :func:`check_log_segment` with the *log segment* of Delta's snapshot at each version
  (``deltalab.jvm.delta_log_segment``, read through the JVM as in notebook 03);
* :func:`check_checkpoint_active_files` with Spark's ``inputFiles()`` at ``versionAsOf`` the
  checkpoint's version.

Messages follow :mod:`deltalab.labs.harness`: ``✗ check: what is wrong`` then ``Where to look: ...``,
with a specific hint for the classic mistakes (replaying from commit 0, re-reading the
checkpoint's own commit, taking ``_last_checkpoint`` for every version, counting remove rows).
"""

from __future__ import annotations

import numbers
import shutil
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from deltalab.files import spark_files
from deltalab.labs.harness import (CheckFailed, append_events, build_once, call_student, clean_up_commits,
                                   file_set_difference, lab_spark, passed, short_repr)
from deltalab.locations import file_name
from deltalab.jvm import delta_log_segment
from deltalab.log import checkpoint_versions

__all__ = [
    "CheckFailed",
    "check_log_segment",
    "check_checkpoint_active_files",
]

#: A log segment as the lab writes it: (checkpoint version or None, commit versions after it).
Segment = tuple[Optional[int], list[int]]


@dataclass
class _CheckpointTable:
    """The lab 03 test tables and Delta's answers for them (computed once, on first use)."""

    full: str  # every commit still present
    trimmed: str  # a copy whose commits before the first checkpoint were deleted
    latest: int
    checkpoints: list[int]  # versions that have N.checkpoint.parquet
    segments: dict[tuple[str, int], Segment] = field(default_factory=dict)
    files: dict[int, set[str]] = field(default_factory=dict)
    rows: dict[int, tuple[set[str], set[str]]] = field(default_factory=dict)


def _table(spark) -> _CheckpointTable:
    """The lab 03 test table, built once per Python process (the checks only read it)."""
    return build_once("lab03", lambda folder: _build_table(spark, folder),
                      intact=lambda table: all((Path(p) / "_delta_log" / f"{table.latest:020d}.json").exists()
                                               for p in (table.full, table.trimmed)))


def _build_table(spark, root: Path) -> _CheckpointTable:
    """Eight commits, checkpoints at 3, 4 and 6, tombstones in every checkpoint.

    The interval is 3 until version 4 sets it to 2, so checkpoints are at 3, 4 and 6: an
    answer that computes checkpoint versions from one interval instead of listing the files
    is wrong somewhere. The OPTIMIZE (v2) and DELETE (v5) put remove rows (tombstones) into
    the checkpoints next to the add rows. The copy ``trimmed`` lost commits 0 to 2, as after
    log clean-up, so versions 3 to 7 can only be read through a checkpoint.
    """
    path = str(root / "events")
    spark.sql(
        f"CREATE TABLE delta.`{path}` (id BIGINT, kind STRING) USING delta "
        "TBLPROPERTIES ('delta.checkpointInterval' = '3')"
    )                                                                                # v0
    append_events(spark, path, 0, 30, "IF(id % 3 = 0, 'click', 'view')", files=3)   # v1: 3 files
    spark.sql(f"OPTIMIZE delta.`{path}`")                                             # v2: 3 -> 1
    append_events(spark, path, 30, 40, "'buy'")                                      # v3: checkpoint
    spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.checkpointInterval' = '2')")  # v4: checkpoint
    spark.sql(f"DELETE FROM delta.`{path}` WHERE id < 5")                             # v5: rewrites a file
    append_events(spark, path, 40, 50, "'view'")                                     # v6: checkpoint
    append_events(spark, path, 50, 55, "'click'")                                    # v7
    trimmed = str(root / "events_cleaned_up")
    shutil.copytree(path, trimmed)
    clean_up_commits(trimmed, before=3)
    return _CheckpointTable(path, trimmed, 7, checkpoint_versions(path))


def _expected_segment(spark, table: _CheckpointTable, path: str, version: int) -> Segment:
    key = (path, version)
    if key not in table.segments:
        segment = delta_log_segment(spark, path, version)
        table.segments[key] = segment.checkpoint_version, segment.commit_versions
    return table.segments[key]


def _checkpoint_rows(spark, table: _CheckpointTable, version: int) -> tuple[set[str], set[str]]:
    """File names in the add and in the remove rows of checkpoint ``version`` (Spark's Parquet reader)."""
    if version not in table.rows:
        cp = spark.read.parquet(str(Path(table.full) / "_delta_log" / f"{version:020d}.checkpoint.parquet"))
        adds = {file_name(r[0]) for r in cp.where("add IS NOT NULL").select("add.path").collect()}
        removes = {file_name(r[0]) for r in cp.where("remove IS NOT NULL").select("remove.path").collect()}
        table.rows[version] = (adds, removes)
    return table.rows[version]


def _expected_files(spark, table: _CheckpointTable, version: int) -> set[str]:
    if version not in table.files:
        table.files[version] = {file_name(f) for f in spark_files(spark, table.full, version)}
    return table.files[version]


# --------------------------------------------------------------------------------------------
# Exercise 1: the log segment of a version
# --------------------------------------------------------------------------------------------

def _as_segment(answer: Any) -> Segment | None:
    """``answer`` as (int or None, list of int), or None if it does not have that shape."""
    if not isinstance(answer, (tuple, list)) or len(answer) != 2:
        return None
    checkpoint, commits = answer
    if checkpoint is not None and (isinstance(checkpoint, bool) or not isinstance(checkpoint, numbers.Integral)):
        return None
    if isinstance(commits, (str, bytes)) or not isinstance(commits, Iterable):
        return None
    commits = list(commits)
    if any(isinstance(c, bool) or not isinstance(c, numbers.Integral) for c in commits):
        return None
    return (None if checkpoint is None else int(checkpoint)), [int(c) for c in commits]


def _show(segment: Segment) -> str:
    checkpoint, commits = segment
    if checkpoint is None:
        return f"no checkpoint + commits {commits}" if commits else "no checkpoint and no commits"
    return f"checkpoint {checkpoint} + commits {commits}" if commits else f"checkpoint {checkpoint} alone"


def _segment_fix(got: Segment, expected: Segment, version: int, checkpoints: list[int]) -> str:
    """Where to look, for the usual ways a log segment goes wrong."""
    got_cp, got_commits = got
    exp_cp, exp_commits = expected
    if got_cp == exp_cp and sorted(got_commits) == exp_commits:
        return "list the commits oldest first: a reader applies them in order."
    if got_cp == -1 and exp_cp is None:
        return "when no checkpoint N <= version exists, return None as the checkpoint (not -1)."
    if got_cp is None and exp_cp is not None:
        return (f"{exp_cp:020d}.checkpoint.parquet exists and {exp_cp} <= {version}: start from the newest such "
                "checkpoint instead of replaying every commit from 0 (old commits may be deleted).")
    if got_cp is not None and got_cp > version:
        return ("a checkpoint after `version` holds a later state; _last_checkpoint names only the newest checkpoint "
                "of all. Take the newest N.checkpoint.parquet with N <= version.")
    if got_cp is not None and got_cp not in checkpoints:
        return (f"there is no checkpoint file for version {got_cp} (this table has them at {checkpoints}, because "
                "its checkpointInterval changed): list the N.checkpoint.parquet files, do not compute N.")
    if got_cp is not None and exp_cp is not None and got_cp < exp_cp:
        return (f"a newer checkpoint exists ({exp_cp}): take the newest N.checkpoint.parquet with N <= version "
                "from the files in _delta_log; do not compute N from the interval (a table property that can change).")
    if got_cp == exp_cp and got_commits[:1] == [got_cp] and got_cp is not None:
        return (f"checkpoint {got_cp} already contains commit {got_cp}: read only the commits after it, "
                f"{got_cp + 1} .. version.")
    if any(c > version for c in got_commits):
        return "stop at `version`: commits after it belong to later versions."
    if got_cp == exp_cp and exp_commits and version not in got_commits:
        first = "0" if exp_cp is None else f"N + 1 = {exp_cp + 1}"
        return (f"include commit `version` itself: the commits to read are {first} .. version, both ends included "
                f"(here {exp_commits}).")
    if exp_cp is None:
        return "without a checkpoint at or before `version`, a reader replays every commit from 0 up to `version`."
    return f"after checkpoint N a reader needs every commit N + 1 .. version, in order (here {exp_commits})."


def check_log_segment(log_segment: Callable[[str, int], Segment]) -> None:
    """Check ``log_segment(table_path, version)`` against Delta's log segment at every version."""
    check = "log_segment"
    spark = lab_spark()
    table = _table(spark)
    cases = [(table.full, v, "the test table") for v in range(0, table.latest + 1)]
    first_cp = table.checkpoints[0]
    cases += [(table.trimmed, v, f"a copy whose commits 0-{first_cp - 1} were cleaned up")
              for v in range(first_cp, table.latest + 1)]
    for path, version, label in cases:
        expected = _expected_segment(spark, table, path, version)
        answer = call_student(
            check, log_segment, "log_segment", path, version,
            hint="list the files in _delta_log: N.checkpoint.parquet are checkpoints, N.json commits.",
        )
        got = _as_segment(answer)
        if got is None:
            raise CheckFailed(
                check,
                f"log_segment returned {answer!r}; it must return a pair (checkpoint version or None, list of "
                "commit versions).",
                "the `return` line of log_segment, e.g. `return 4, [5, 6]` or `return None, [0, 1]`.",
            )
        if got == expected:
            continue
        raise CheckFailed(
            check,
            f"for version {version} of {label}, log_segment returned {_show(got)}; Delta reads {_show(expected)}.",
            _segment_fix(got, expected, version, table.checkpoints),
        )
    passed(check, f"matches Delta's log segment at versions 0 to {table.latest}, with checkpoints at "
                   f"{table.checkpoints} and on a copy whose oldest commits were cleaned up.")


# --------------------------------------------------------------------------------------------
# Exercise 2: the live files in a checkpoint
# --------------------------------------------------------------------------------------------

def check_checkpoint_active_files(checkpoint_active_files: Callable[[str, int], Iterable[str]]) -> None:
    """Check ``checkpoint_active_files(table_path, checkpoint_version)`` against Spark's
    ``inputFiles()`` at that version, for every checkpoint of a table with tombstones."""
    check = "checkpoint_active_files"
    spark = lab_spark()
    table = _table(spark)
    answers: dict[int, set[str]] = {}
    for version in table.checkpoints:
        expected = _expected_files(spark, table, version)
        answer = call_student(
            check, checkpoint_active_files, "checkpoint_active_files", table.full, version,
            hint="pyarrow.parquet.read_table(<_delta_log/N.checkpoint.parquet>).column('add') has one row per "
                 "action; rows of other actions are None there.",
        )
        if isinstance(answer, (str, bytes)) or not isinstance(answer, Iterable):
            raise CheckFailed(
                check,
                f"checkpoint_active_files returned {type(answer).__name__}; it must return a set of file paths.",
                "the `return` line: a set of the `path` of each add row.",
            )
        answer = list(answer)
        if not all(isinstance(p, str) for p in answer):
            bad = next(p for p in answer if not isinstance(p, str))
            raise CheckFailed(
                check,
                f"checkpoint_active_files returned a collection holding {short_repr(bad, limit=60)}; it must hold file paths "
                "(str).",
                "take the `path` field of each add row (a dict), not the whole row.",
            )
        got = answers[version] = {file_name(p) for p in answer}
        if got == expected:
            continue
        _, tombstones = _checkpoint_rows(spark, table, version)
        missing, extra = sorted(expected - got), sorted(got - expected)
        other = [v for v, files in answers.items() if v != version and files == got]
        if extra and set(extra) <= tombstones:
            fix = ("rows whose `remove` column is set are tombstones (files deleted by the DELETE or OPTIMIZE, kept "
                   "for VACUUM): keep only rows whose `add` is not null.")
        elif not got:
            fix = "the add column: every row where `add` is not null is one live file; take its `path`."
        elif got == _expected_files(spark, table, table.checkpoints[-1]) and version != table.checkpoints[-1]:
            fix = (f"read {version:020d}.checkpoint.parquet, the checkpoint named by checkpoint_version, "
                   "not the newest one (_last_checkpoint).")
        elif other:
            fix = f"read {version:020d}.checkpoint.parquet; your answer equals that of checkpoint {other[0]}."
        elif extra:
            fix = ("only the add rows of the checkpoint are live; listing the table folder also finds files that "
                   "were removed but not vacuumed.")
        else:
            fix = ("files added before version N are only in N.checkpoint.parquet; read its add column, not the "
                   "JSON commit N.json.")
        where = f"for the checkpoint of version {version}"
        raise CheckFailed(check, f"{where}, {file_set_difference(missing, extra)}.", fix)
    passed(check, f"the add rows of the checkpoints at {table.checkpoints} are exactly the files Spark reads at "
                   "those versions; the tombstones were left out.")
