"""Checks for the classroom labs in ``labs/``: run a student's function against real Delta tables.

Each ``check_*`` function takes the student's function, calls it on tables it builds itself
(under the work directory ``labs_checks``) and compares the answer with what Spark and Delta
report for the same table: ``inputFiles()`` at ``versionAsOf`` for the files of a version,
``DESCRIBE HISTORY`` for the latest version, the files a filtered query really reads for
data skipping, and so on. Spark is the ground truth, so a check cannot drift from Delta.

When the answer is right a check prints one line starting with ``✓``. When it is wrong it
raises :class:`CheckFailed`: one or two plain sentences saying what is wrong, then where to
look. Errors raised by the student's code (including JVM errors) are turned into the same
kind of message, first line only, so a learner never has to read a Java stack trace. In a
Jupyter notebook the exception is shown without a traceback (``_render_traceback_``), and
because it is an exception, nbgrader scores the check cell 0.
"""

from __future__ import annotations

import os
import random
import urllib.parse
from pathlib import Path
from typing import Any, Callable, Iterable

from deltalab.errors import DeltaLabError
from deltalab.session import temporary_conf

__all__ = [
    "CheckFailed",
    "check_footer_row_count",
    "check_column_range",
    "check_table_version",
    "check_active_files",
    "check_interleave_bits",
    "check_zorder_columns",
    "check_add_column",
    "check_change_type",
    "check_rename_column",
    "reference_interleave_bits",
    "skipping_effectiveness",
    "make_zorder_table",
    "ZORDER_QUERY_MIX",
    "ZORDER_TARGET",
]


class CheckFailed(DeltaLabError):
    """A lab check found a wrong answer. ``problem`` says what is wrong, ``fix`` where to look."""

    def __init__(self, check: str, problem: str, fix: str) -> None:
        self.check = check
        super().__init__(f"✗ {check}: {problem}", fix=f"Where to look: {fix}")

    def _render_traceback_(self) -> list[str]:
        """Tell IPython to show just the message, not a traceback into this module."""
        return str(self).splitlines()


def _passed(check: str, what: str) -> None:
    print(f"✓ {check}: {what}")


def _first_line(error: BaseException, limit: int = 240) -> str:
    """The first meaningful line of an error message (JVM errors carry whole stack traces)."""
    text = str(error).strip()
    line = next((part.strip() for part in text.splitlines() if part.strip()), "")
    if len(line) > limit:
        line = line[: limit - 1] + "…"
    return line or type(error).__name__


def _call(check: str, func: Callable[..., Any], name: str, *args: Any, hint: str) -> Any:
    """Call the student's ``func`` and turn any exception into a :class:`CheckFailed`."""
    if not callable(func):
        raise CheckFailed(
            check,
            f"{name} is {type(func).__name__}, not a function.",
            f"the cell that defines `def {name}(...)`; run it again, then this check.",
        )
    shown = ", ".join(_short(a) for a in args)
    try:
        return func(*args)
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
        raise CheckFailed(
            check,
            f"{name}({shown}) raised {type(error).__name__}: {_first_line(error)}",
            hint,
        ) from None


def _short(value: Any) -> str:
    if isinstance(value, (str, os.PathLike)):
        text = str(value)
        return repr(Path(text).name if os.sep in text else text)
    if hasattr(value, "sparkContext"):
        return "spark"
    text = repr(value)
    return text if len(text) <= 40 else text[:39] + "…"


def file_set_difference(missing: list[str], extra: list[str]) -> str:
    """'2 file(s) Spark reads are missing (e.g. a) and 1 file(s) Spark does not read are included (e.g. b)'."""
    detail = []
    if missing:
        detail.append(f"{len(missing)} file(s) Spark reads are missing (e.g. {missing[0]})")
    if extra:
        detail.append(f"{len(extra)} file(s) Spark does not read are included (e.g. {extra[0]})")
    return " and ".join(detail)


def _spark():
    from pyspark.sql import SparkSession

    spark = SparkSession.getActiveSession()
    if spark is None:
        raise DeltaLabError(
            "No Spark session is running, and the lab checks compare your answers with Spark.",
            fix="Run the setup cell at the top of the lab (spark = get_spark(...)) first.",
        )
    return spark


def _fresh_dir(name: str) -> Path:
    """An empty directory for one check's tables (under the course work root)."""
    from deltalab.workdir import workdir

    return workdir(f"labs_checks_{name}")


def _file_name(path: str) -> str:
    """``part-0001.parquet`` from a log path, an absolute path or a ``file:`` URI."""
    return Path(urllib.parse.unquote(urllib.parse.urlparse(str(path)).path)).name


def _spark_files(spark, table_path: str, version: int) -> set[str]:
    files = spark.read.format("delta").option("versionAsOf", version).load(table_path).inputFiles()
    return {_file_name(f) for f in files}


# --------------------------------------------------------------------------------------------
# Lab 01: Parquet files
# --------------------------------------------------------------------------------------------

_PARQUET_TABLE: dict[str, list[str]] = {}


def _parquet_files(spark) -> list[str]:
    """Data files of a small Delta table, each with several row groups (built once per process)."""
    cached = _PARQUET_TABLE.get("files")
    if cached and all(Path(f).exists() for f in cached):
        return cached
    path = str(_fresh_dir("lab01") / "prices")
    df = spark.range(0, 3000).selectExpr(
        "id", "round(rand(1) * 1000, 2) AS price", "concat('item-', CAST(id % 97 AS STRING)) AS name"
    )
    # A small Parquet block size (read from the session's Hadoop settings) cuts each file into
    # several row groups, so answers that read only the first row group are caught.
    with temporary_conf(spark, {"parquet.block.size": "8192"}):
        df.repartition(2).write.format("delta").save(path)
    files = sorted(str(Path(path) / _file_name(f)) for f in spark.read.format("delta").load(path).inputFiles())
    _PARQUET_TABLE["files"] = files
    return files


def check_footer_row_count(footer_row_count: Callable[[str], int]) -> None:
    """``footer_row_count(file)`` against Spark counting the rows of each data file."""
    check = "footer_row_count"
    spark = _spark()
    for file in _parquet_files(spark):
        expected = spark.read.parquet(file).count()
        answer = _call(check, footer_row_count, "footer_row_count", file,
                       hint="pyarrow.parquet.ParquetFile(path).metadata has the footer: num_rows, row groups.")
        if isinstance(answer, bool) or not isinstance(answer, int):
            raise CheckFailed(check, f"footer_row_count returned {answer!r}; it must return an int.",
                              "the `return` line: the footer's num_rows is already an int.")
        if answer != expected:
            raise CheckFailed(
                check,
                f"for {Path(file).name} footer_row_count returned {answer}, Spark counts {expected} rows.",
                "a file has several row groups: the file's total is in metadata.num_rows (or the sum over "
                "metadata.row_group(i).num_rows).",
            )
    _passed(check, "matches Spark's row count for every data file, from the footer alone.")


def check_column_range(column_range: Callable[[str, str], tuple]) -> None:
    """``column_range(file, column) -> (min, max)`` from row-group statistics, against Spark."""
    check = "column_range"
    spark = _spark()
    from pyspark.sql import functions as F

    for file in _parquet_files(spark):
        for column in ("id", "price"):
            row = spark.read.parquet(file).agg(F.min(column), F.max(column)).collect()[0]
            expected = (row[0], row[1])
            answer = _call(check, column_range, "column_range", file, column,
                           hint="metadata.row_group(i).column(j).statistics has min and max for each row group.")
            if not isinstance(answer, (tuple, list)) or len(answer) != 2:
                raise CheckFailed(check, f"column_range returned {answer!r}; it must return a pair (min, max).",
                                  "the `return` line: return lowest, highest.")
            if tuple(answer) != expected:
                low, high = answer
                fix = ("each row group has its own statistics: take the smallest min and the largest max over "
                       "all row groups, not just the first one.")
                if (low, high) == (expected[1], expected[0]):
                    fix = "the pair is the wrong way round: return (min, max)."
                raise CheckFailed(
                    check,
                    f"for column {column!r} of {Path(file).name} column_range returned ({low!r}, {high!r}); "
                    f"Spark finds min {expected[0]!r} and max {expected[1]!r}.",
                    fix,
                )
    _passed(check, "min and max from the row-group statistics match Spark for every file and column.")


# --------------------------------------------------------------------------------------------
# Lab 02: the transaction log
# --------------------------------------------------------------------------------------------

_LOG_TABLE: dict[str, tuple[str, int, list[int]]] = {}


def _log_table(spark) -> tuple[str, int, list[int]]:
    """The lab 02 test table, built once per Python process (the checks only read it)."""
    cached = _LOG_TABLE.get("table")
    if cached is None or not (Path(cached[0]) / "_delta_log" / f"{cached[1]:020d}.json").exists():
        cached = _LOG_TABLE["table"] = _build_log_table(spark)
    return cached


def _build_log_table(spark) -> tuple[str, int, list[int]]:
    """A table with eight commits, checkpoints at versions 3 and 6 and the commits before the
    first checkpoint deleted (as log clean-up does), so only a checkpoint-aware replay works.

    Returns the table path, its latest version and the versions that can still be read.
    """
    root = _fresh_dir("lab02")
    path = str(root / "events")
    spark.sql(
        f"CREATE TABLE delta.`{path}` (id BIGINT, kind STRING) USING delta "
        "TBLPROPERTIES ('delta.checkpointInterval' = '3')"
    )                                                                               # v0: no files
    rows = spark.range(0, 30).selectExpr("id", "IF(id % 3 = 0, 'click', 'view') AS kind")
    rows.repartition(3).write.format("delta").mode("append").save(path)              # v1: 3 files
    spark.range(30, 40).selectExpr("id", "'buy' AS kind").coalesce(1) \
        .write.format("delta").mode("append").save(path)                             # v2: +1 file
    spark.sql(f"DELETE FROM delta.`{path}` WHERE id = 35")                           # v3: checkpoint
    spark.range(40, 50).selectExpr("id", "'view' AS kind").coalesce(1) \
        .write.format("delta").mode("append").save(path)                             # v4
    spark.sql(f"OPTIMIZE delta.`{path}`")                                            # v5: all -> 1
    spark.sql(f"DELETE FROM delta.`{path}` WHERE kind = 'buy'")                     # v6: checkpoint
    spark.range(50, 55).selectExpr("id", "'click' AS kind").coalesce(1) \
        .write.format("delta").mode("append").save(path)                             # v7
    log = Path(path) / "_delta_log"
    for version in range(0, 3):
        for suffix in (".json", ".crc"):
            (log / f"{version:020d}{suffix}").unlink(missing_ok=True)
    spark.sparkContext._jvm.org.apache.spark.sql.delta.DeltaLog.clearCache()
    return path, 7, list(range(3, 8))


def check_table_version(table_version: Callable[[str], int]) -> None:
    """Check ``table_version(table_path) -> int`` against Delta's own latest version."""
    check = "table_version"
    spark = _spark()
    path, _, _ = _log_table(spark)
    from delta.tables import DeltaTable

    expected = DeltaTable.forPath(spark, path).history(1).collect()[0]["version"]
    answer = _call(
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
    _passed(check, f"returned {answer}, the version DESCRIBE HISTORY reports, on a table with checkpoints "
                   "and cleaned-up commits.")


def check_active_files(active_files: Callable[[str, int], Iterable[str]]) -> None:
    """Check ``active_files(table_path, version)`` against Spark's ``inputFiles()`` at every version."""
    check = "active_files"
    spark = _spark()
    path, _, versions = _log_table(spark)
    for version in versions:
        expected = _spark_files(spark, path, version)
        answer = _call(
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
        got = {_file_name(p) for p in answer}
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
    _passed(check, f"matches Spark's inputFiles() at versions {versions[0]} to {versions[-1]}, "
                   "across two checkpoints, a DELETE and an OPTIMIZE.")


# --------------------------------------------------------------------------------------------
# Lab 08: Z-order
# --------------------------------------------------------------------------------------------

def reference_interleave_bits(values: list[int], bits: int) -> int:
    """The Z-value of ``values``: bit ``bits-1`` of each value in order, then bit ``bits-2``, ...

    The first value's bit is the most significant of each group, as in Delta's
    ``InterleaveBits`` expression (which interleaves the range ids of the Z-order columns).
    """
    z = 0
    for bit in range(bits - 1, -1, -1):
        for value in values:
            z = (z << 1) | ((value >> bit) & 1)
    return z


def check_interleave_bits(interleave_bits: Callable[[list[int], int], int]) -> None:
    """Check ``interleave_bits(values, bits)`` on hand-picked and seeded random inputs."""
    check = "interleave_bits"
    cases: list[tuple[list[int], int]] = [
        ([1, 0], 1), ([0, 1], 1), ([3, 0], 2), ([0, 3], 2), ([2, 1], 2), ([5], 3), ([1, 2, 4], 3),
    ]
    rng = random.Random(8)
    for _ in range(40):
        dims, bits = rng.randint(1, 4), rng.randint(1, 10)
        cases.append(([rng.randrange(2**bits) for _ in range(dims)], bits))
    for values, bits in cases:
        expected = reference_interleave_bits(values, bits)
        answer = _call(
            check, interleave_bits, "interleave_bits", list(values), bits,
            hint="take bit (bits-1) of every value, then bit (bits-2) of every value, ... down to bit 0.",
        )
        if isinstance(answer, bool) or not isinstance(answer, int):
            raise CheckFailed(
                check,
                f"interleave_bits({values}, {bits}) returned {answer!r}; it must return an int.",
                "build the Z-value as an int with shifts: z = (z << 1) | bit.",
            )
        if answer != expected:
            width = bits * len(values)
            raise CheckFailed(
                check,
                f"interleave_bits({values}, {bits}) returned {answer} (0b{answer:0{width}b} if it fits), "
                f"expected {expected} (0b{expected:0{width}b}).",
                "the order of the bits: most significant bit first, and within one bit position the first "
                "value's bit comes before the second's.",
            )
    _passed(check, f"all {len(cases)} cases give the Z-value Delta's interleaving gives.")


#: The query mix of lab 08: (predicate, share of the workload).
ZORDER_QUERY_MIX: list[tuple[str, float]] = [
    ("user_id = 77", 0.8),
    ("amount >= 990", 0.2),
]
#: The skipping effectiveness (weighted share of files skipped) the Z-order columns must reach.
ZORDER_TARGET = 0.6


def make_zorder_table(spark, path: str) -> None:
    """Write the lab 08 `events` table at ``path``: 4,096 events in 16 files, every file spanning all users and all times (no skipping yet)."""
    from pyspark.sql import functions as F

    df = spark.range(0, 4096).select(
        (F.abs(F.hash("id", F.lit(1))) % 256).cast("int").alias("user_id"),
        ((F.col("id") * 997) % 4096).cast("int").alias("ts"),
        (F.abs(F.hash("id", F.lit(2))) % 1000).cast("int").alias("amount"),
    )
    df.repartition(16).write.format("delta").save(path)


def skipping_effectiveness(spark, table_path: str, query_mix: list[tuple[str, float]]) -> float:
    """Weighted share of the table's files that the queries of ``query_mix`` skip (0 to 1)."""
    total = len(spark.read.format("delta").load(table_path).inputFiles())
    skipped = 0.0
    for predicate, weight in query_mix:
        read = len(spark.read.format("delta").load(table_path).where(predicate).inputFiles())
        skipped += weight * (1 - read / total)
    return skipped


def check_zorder_columns(zorder_columns: Callable[[], list[str]]) -> None:
    """OPTIMIZE ZORDER BY the student's columns on a fresh table and measure skipping."""
    check = "zorder_columns"
    spark = _spark()
    answer = _call(check, zorder_columns, "zorder_columns",
                   hint="return a list of column names, e.g. ['amount'].")
    if isinstance(answer, str) or not isinstance(answer, (list, tuple)) or not all(
        isinstance(c, str) for c in answer
    ):
        raise CheckFailed(check, f"zorder_columns returned {answer!r}; it must return a list of column names.",
                          "the `return` line: a list such as ['amount'].")
    columns = list(answer)
    allowed = ["user_id", "ts", "amount"]
    unknown = [c for c in columns if c not in allowed]
    if not columns or unknown or len(columns) > 2 or len(set(columns)) != len(columns):
        raise CheckFailed(
            check,
            f"zorder_columns returned {columns}; it must name one or two distinct columns of {allowed}.",
            "the table schema printed at the top of the lab.",
        )
    reached = _ZORDER_RESULTS.get(tuple(columns))
    if reached is None:
        reached = _ZORDER_RESULTS[tuple(columns)] = _zorder_and_measure(spark, columns)
    if reached < ZORDER_TARGET:
        raise CheckFailed(
            check,
            f"Z-ordering by {columns} skips {reached:.0%} of the files for the query mix; the target is "
            f"{ZORDER_TARGET:.0%}.",
            "which columns the queries of ZORDER_QUERY_MIX filter on, and how much of the workload each one is; "
            "a column no query filters on buys nothing.",
        )
    _passed(check, f"Z-ordering by {columns} skips {reached:.0%} of the files (target {ZORDER_TARGET:.0%}).")


_ZORDER_RESULTS: dict[tuple[str, ...], float] = {}


def _zorder_and_measure(spark, columns: list[str]) -> float:
    """Build the events table, OPTIMIZE ZORDER BY ``columns``, return the skipping effectiveness."""
    path = str(_fresh_dir("lab08") / "events")
    make_zorder_table(spark, path)
    with temporary_conf(spark, {"spark.databricks.delta.optimize.maxFileSize": "4096",
                                "spark.sql.files.maxRecordsPerFile": "256"}):
        spark.sql(f"OPTIMIZE delta.`{path}` ZORDER BY ({', '.join(columns)})")
    return skipping_effectiveness(spark, path, ZORDER_QUERY_MIX)


# --------------------------------------------------------------------------------------------
# Lab 06: schema evolution
# --------------------------------------------------------------------------------------------

def _schema_table(spark, name: str) -> str:
    path = str(_fresh_dir(f"lab06_{name}") / "customers")
    spark.createDataFrame(
        [(1, "Ada", 36), (2, "Linus", 28), (3, "Grace", 45)], "id INT, name STRING, age INT"
    ).coalesce(1).write.format("delta").save(path)
    return path


def _rows(spark, path: str) -> list[tuple]:
    df = spark.read.format("delta").load(path)
    return sorted(tuple(r) for r in df.orderBy("id").collect())


def check_add_column(add_column: Callable[..., None]) -> None:
    """``add_column(spark, path, new_rows)`` appends rows that carry an extra column ``email``."""
    check = "add_column"
    spark = _spark()
    path = _schema_table(spark, "add")
    new_rows = spark.createDataFrame([(4, "Edsger", 72, "ed@example.org")],
                                     "id INT, name STRING, age INT, email STRING")
    _call(check, add_column, "add_column", spark, path, new_rows,
          hint="the error says the schemas differ; look for the write option that lets an append add columns.")
    df = spark.read.format("delta").load(path)
    if "email" not in df.columns:
        raise CheckFailed(check, f"after add_column the table has columns {df.columns}, without `email`.",
                          "an append must be told to merge the new column into the table schema.")
    count = df.count()
    if count != 4:
        raise CheckFailed(check, f"after add_column the table has {count} rows; the 3 old rows plus 1 new "
                                 "should make 4.",
                          "append (mode 'append'), do not overwrite, and write new_rows exactly once.")
    nulls = df.where("email IS NULL").count()
    if nulls != 3:
        raise CheckFailed(check, f"{nulls} rows have no email; the 3 old rows should have email NULL.",
                          "do not fill in or rewrite the old rows; schema evolution leaves them NULL.")
    _passed(check, "4 rows, the new column `email` is NULL for the 3 old rows.")


def check_change_type(change_type: Callable[..., None]) -> None:
    """``change_type(spark, path)`` turns column ``age`` (INT) into STRING keeping every row."""
    check = "change_type"
    spark = _spark()
    path = _schema_table(spark, "type")
    before = {(r["id"], str(r["age"])) for r in spark.read.format("delta").load(path).collect()}
    _call(check, change_type, "change_type", spark, path,
          hint="a type change is not a merge: the table must be rewritten with a new schema.")
    df = spark.read.format("delta").load(path)
    kinds = dict(df.dtypes)
    if kinds.get("age") != "string":
        raise CheckFailed(check, f"after change_type column age is {kinds.get('age')}, not string.",
                          "cast the column, then overwrite the table with the option that replaces its schema.")
    after = {(r["id"], r["age"]) for r in df.collect()}
    if after != before:
        raise CheckFailed(check, f"the table had {len(before)} rows and now has {len(after)} "
                                 "(or their values changed).",
                          "read every row, cast age to string, and overwrite with all of them.")
    _passed(check, "age is a STRING now and all 3 rows kept their values.")


def check_rename_column(rename_column: Callable[..., None]) -> None:
    """``rename_column(spark, path)`` renames ``name`` to ``full_name`` without rewriting data files."""
    check = "rename_column"
    spark = _spark()
    path = _schema_table(spark, "rename")
    files_before = _spark_files(spark, path, 0)
    rows_before = _rows(spark, path)
    _call(check, rename_column, "rename_column", spark, path,
          hint="ALTER TABLE ... RENAME COLUMN needs column mapping; the error names the table property.")
    df = spark.read.format("delta").load(path)
    if "full_name" not in df.columns or "name" in df.columns:
        raise CheckFailed(check, f"after rename_column the columns are {df.columns}; expected `full_name` "
                                 "instead of `name`.",
                          "ALTER TABLE delta.`<path>` RENAME COLUMN name TO full_name.")
    files_after = {_file_name(f) for f in df.inputFiles()}
    if files_after != files_before:
        raise CheckFailed(check, "the rename rewrote the data files; it should only change the log.",
                          "turn on column mapping (delta.columnMapping.mode = 'name') and rename with ALTER "
                          "TABLE, instead of rewriting the table.")
    if _rows(spark, path) != rows_before:
        raise CheckFailed(check, "the rows changed during the rename.", "only rename; do not write rows.")
    _passed(check, "`name` is now `full_name`, same rows, and not one data file was rewritten.")

