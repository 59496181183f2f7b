"""Lab 01 (Parquet files): row counts and column ranges from Parquet footers, checked against Spark."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from deltalab.files import spark_files
from deltalab.labs.harness import CheckFailed, build_once, call_student, lab_spark, passed
from deltalab.session import temporary_conf

__all__ = ["CheckFailed", "check_column_range", "check_footer_row_count"]

def _parquet_files(spark) -> list[str]:
    """Data files of a small Delta table, each with several row groups (built once per process)."""
    return build_once("lab01", lambda folder: _build_parquet_files(spark, folder),
                      intact=lambda files: all(Path(f).exists() for f in files))


def _build_parquet_files(spark, folder: Path) -> list[str]:
    path = folder / "prices"
    df = spark.range(0, 3000).selectExpr(
        "id", "round(rand(1) * 1000, 2) AS price", "concat('item-', CAST(id % 97 AS STRING)) AS name"
    )
    # A small Parquet block size (read from the session's Hadoop settings) cuts each file into
    # several row groups, so answers that read only the first row group are caught.
    with temporary_conf(spark, {"parquet.block.size": "8192"}):
        df.repartition(2).write.format("delta").save(str(path))
    return [str(path / relative) for relative in spark_files(spark, path, relative=True)]


def check_footer_row_count(footer_row_count: Callable[[str], int]) -> None:
    """``footer_row_count(file)`` against Spark counting the rows of each data file."""
    check = "footer_row_count"
    spark = lab_spark()
    for file in _parquet_files(spark):
        expected = spark.read.parquet(file).count()
        answer = call_student(check, footer_row_count, "footer_row_count", file,
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
    passed(check, "matches Spark's row count for every data file, from the footer alone.")


def check_column_range(column_range: Callable[[str, str], tuple]) -> None:
    """``column_range(file, column) -> (min, max)`` from row-group statistics, against Spark."""
    check = "column_range"
    spark = lab_spark()
    from pyspark.sql import functions as F

    for file in _parquet_files(spark):
        for column in ("id", "price"):
            row = spark.read.parquet(file).agg(F.min(column), F.max(column)).collect()[0]
            expected = (row[0], row[1])
            answer = call_student(check, column_range, "column_range", file, column,
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
    passed(check, "min and max from the row-group statistics match Spark for every file and column.")
