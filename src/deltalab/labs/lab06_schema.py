"""Lab 06 (schema evolution): add a column, change a type, rename a column, without losing a row."""

from __future__ import annotations

from typing import Callable

from deltalab.files import spark_files
from deltalab.labs.harness import CheckFailed, call_student, fresh_dir, lab_spark, passed
from deltalab.locations import file_name

__all__ = ["CheckFailed", "check_add_column", "check_change_type", "check_rename_column"]


def _schema_table(spark, name: str) -> str:
    path = str(fresh_dir(f"lab06_{name}") / "customers")
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
    spark = lab_spark()
    path = _schema_table(spark, "add")
    new_rows = spark.createDataFrame([(4, "Edsger", 72, "ed@example.org")],
                                     "id INT, name STRING, age INT, email STRING")
    call_student(check, add_column, "add_column", spark, path, new_rows,
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
    passed(check, "4 rows, the new column `email` is NULL for the 3 old rows.")


def check_change_type(change_type: Callable[..., None]) -> None:
    """``change_type(spark, path)`` turns column ``age`` (INT) into STRING keeping every row."""
    check = "change_type"
    spark = lab_spark()
    path = _schema_table(spark, "type")
    before = {(r["id"], str(r["age"])) for r in spark.read.format("delta").load(path).collect()}
    call_student(check, change_type, "change_type", spark, path,
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
    passed(check, "age is a STRING now and all 3 rows kept their values.")


def check_rename_column(rename_column: Callable[..., None]) -> None:
    """``rename_column(spark, path)`` renames ``name`` to ``full_name`` without rewriting data files."""
    check = "rename_column"
    spark = lab_spark()
    path = _schema_table(spark, "rename")
    files_before = {file_name(f) for f in spark_files(spark, path, 0)}
    rows_before = _rows(spark, path)
    call_student(check, rename_column, "rename_column", spark, path,
          hint="ALTER TABLE ... RENAME COLUMN needs column mapping; the error names the table property.")
    df = spark.read.format("delta").load(path)
    if "full_name" not in df.columns or "name" in df.columns:
        raise CheckFailed(check, f"after rename_column the columns are {df.columns}; expected `full_name` "
                                 "instead of `name`.",
                          "ALTER TABLE delta.`<path>` RENAME COLUMN name TO full_name.")
    files_after = {file_name(f) for f in df.inputFiles()}
    if files_after != files_before:
        raise CheckFailed(check, "the rename rewrote the data files; it should only change the log.",
                          "turn on column mapping (delta.columnMapping.mode = 'name') and rename with ALTER "
                          "TABLE, instead of rewriting the table.")
    if _rows(spark, path) != rows_before:
        raise CheckFailed(check, "the rows changed during the rename.", "only rename; do not write rows.")
    passed(check, "`name` is now `full_name`, same rows, and not one data file was rewritten.")

