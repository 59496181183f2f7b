"""The lab 06 checks (deltalab.labs.lab06_schema): right answers pass and say so, the stubs are told
they are not written yet, and the classic mistakes (an append without mergeSchema, an overwrite that
loses the old rows, a type change without overwriteSchema, a rename that rewrites the table) get
their own sentence. Each check builds its own three-row table, so each call costs a few writes.
"""

from __future__ import annotations

from pyspark.sql import functions as F

from deltalab.labs.lab06_schema import check_add_column, check_change_type, check_rename_column
from lab_testing import check_failure as failure


def add_column(spark, path, new_rows):
    """A right answer to exercise 1 (the lab's solution)."""
    new_rows.write.format("delta").mode("append").option("mergeSchema", "true").save(path)


def change_type(spark, path):
    """A right answer to exercise 2 (the lab's solution)."""
    df = spark.read.format("delta").load(path)
    (df.withColumn("age", F.col("age").cast("string"))
       .write.format("delta").mode("overwrite").option("overwriteSchema", "true").save(path))


def rename_column(spark, path):
    """A right answer to exercise 3 (the lab's solution)."""
    spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.columnMapping.mode' = 'name')")
    spark.sql(f"ALTER TABLE delta.`{path}` RENAME COLUMN name TO full_name")


def stub(*args):
    raise NotImplementedError()


def test_lab06_right_answers_pass_and_say_so(spark, capsys):
    check_add_column(add_column)
    check_change_type(change_type)
    check_rename_column(rename_column)
    out = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in out] == ["✓ add_column", "✓ change_type", "✓ rename_column"], out


def test_lab06_the_stubs_are_not_written_yet(spark):
    for check, name in ((check_add_column, "add_column"), (check_change_type, "change_type"),
                        (check_rename_column, "rename_column")):
        assert f"{name} is not written yet" in failure(check, stub)


def test_lab06_an_append_without_merge_schema_is_pointed_to_the_write_option(spark):
    def plain_append(spark, path, new_rows):
        new_rows.write.format("delta").mode("append").save(path)

    message = failure(check_add_column, plain_append)
    assert "raised AnalysisException" in message and "the write option that lets an append add columns" in message, message


def test_lab06_an_overwrite_that_loses_the_old_rows_is_told_to_append(spark):
    def overwrite(spark, path, new_rows):
        new_rows.write.format("delta").mode("overwrite").option("mergeSchema", "true").save(path)

    message = failure(check_add_column, overwrite)
    assert "append (mode 'append'), do not overwrite" in message, message


def test_lab06_a_type_change_without_overwrite_schema_is_told_to_rewrite_the_table(spark):
    def overwrite_without_schema(spark, path):
        df = spark.read.format("delta").load(path)
        df.withColumn("age", F.col("age").cast("string")).write.format("delta").mode("overwrite").save(path)

    message = failure(check_change_type, overwrite_without_schema)
    assert "raised AnalysisException" in message and "rewritten with a new schema" in message, message


def test_lab06_a_rename_that_rewrites_the_table_is_caught(spark):
    def rewrite(spark, path):
        df = spark.read.format("delta").load(path)
        (df.withColumnRenamed("name", "full_name")
           .write.format("delta").mode("overwrite").option("overwriteSchema", "true").save(path))

    message = failure(check_rename_column, rewrite)
    assert "rewrote the data files" in message and "column mapping" in message, message
