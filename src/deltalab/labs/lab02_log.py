"""Lab 02 (the transaction log): the latest version and the live files of any version, from the log alone.

The checks use one table with eight commits, checkpoints at versions 3 and 6, and commits 0 to
2 cleaned up, so only a checkpoint-aware replay gives Spark's answer at every version.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterable

from deltalab.files import spark_files
from deltalab.labs.harness import (CheckFailed, append_events, build_once, call_student, clean_up_commits,
                                   file_set_difference, lab_spark, passed)
from deltalab.locations import file_name

__all__ = ["CheckFailed", "check_active_files", "check_table_version"]

def _log_table(spark) -> tuple[str, int, list[int]]:
    """The lab 02 test table, built once per Python process (the checks only read it)."""
    return build_once("lab02", lambda folder: _build_log_table(spark, folder),
                      intact=lambda table: (Path(table[0]) / "_delta_log" / f"{table[1]:020d}.json").exists())


def _build_log_table(spark, folder: Path) -> tuple[str, int, list[int]]:
    """A table with eight commits, checkpoints at versions 3 and 6 and the commits before the
    first checkpoint deleted (as log clean-up does), so only a checkpoint-aware replay works.

    Returns the table path, its latest version and the versions that can still be read.
    """
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
    return path, 7, list(range(3, 8))


def check_table_version(table_version: Callable[[str], int]) -> None:
    """Check ``table_version(table_path) -> int`` against Delta's own latest version."""
    check = "table_version"
    spark = lab_spark()
    path, _, _ = _log_table(spark)
    from delta.tables import DeltaTable

    expected = DeltaTable.forPath(spark, path).history(1).collect()[0]["version"]
    answer = call_student(
        check, table_version, "table_version", path,
        hint="list the files in _delta_log and look at their names; only N.json files are commits.",
    )
    if isinstance(answer, bool) or not isinstance(answer, int):
        raise CheckFailed(
            check,
            f"table_version returned {answer!r} ({type(answer).__name__}); it must return an int.",
            "the `return` line of table_version: turn the number in the file name into int(...).",
        )
    if answer != expected:
        if answer < expected:
            fix = ("the highest N among the N.json commit files is the version; counting files breaks as soon as "
                   "old commits are cleaned up or checkpoint/.crc files sit next to them.")
        else:
            fix = ("only files named <20 digits>.json are commits; N.checkpoint.parquet, N.crc and "
                   "_last_checkpoint are not new versions.")
        raise CheckFailed(
            check,
            f"on a test table whose latest version is {expected}, table_version returned {answer}.",
            fix,
        )
    passed(check, f"returned {answer}, the version DESCRIBE HISTORY reports, on a table with checkpoints "
                  "and cleaned-up commits.")


def check_active_files(active_files: Callable[[str, int], Iterable[str]]) -> None:
    """Check ``active_files(table_path, version)`` against Spark's ``inputFiles()`` at every version."""
    check = "active_files"
    spark = lab_spark()
    path, _, versions = _log_table(spark)
    for version in versions:
        expected = {file_name(f) for f in spark_files(spark, path, version)}
        answer = call_student(
            check, active_files, "active_files", path, version,
            hint=("the log files of that version: commits before the newest checkpoint may have been deleted, "
                  "so start from N.checkpoint.parquet and replay only the JSON commits after it."),
        )
        if isinstance(answer, (str, bytes)) or not isinstance(answer, Iterable):
            raise CheckFailed(
                check,
                f"active_files returned {type(answer).__name__}; it must return a set of file paths.",
                "the `return` line of active_files: collect the `path` of each active `add` action in a set.",
            )
        got = {file_name(p) for p in answer}
        if got == expected:
            continue
        missing, extra = sorted(expected - got), sorted(got - expected)
        if missing and not got:
            fix = ("files added before the checkpoint are only in N.checkpoint.parquet (the column `add`), "
                   "because the older JSON commits are gone; read the checkpoint first.")
        elif extra:
            fix = ("a `remove` action in a later commit ends a file's life; also stop at `version` "
                   "(do not read commits after it).")
        else:
            fix = ("start from the newest checkpoint at or before `version` (its `add` column lists the live "
                   "files), then apply the add and remove actions of each later JSON commit up to `version`.")
        raise CheckFailed(check, f"at version {version}, {file_set_difference(missing, extra)}.", fix)
    passed(check, f"matches Spark's inputFiles() at versions {versions[0]} to {versions[-1]}, "
                  "across two checkpoints, a DELETE and an OPTIMIZE.")
