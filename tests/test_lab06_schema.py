"""The lab 06 checks (deltalab.labs.lab06_schema): the solutions pass on the example table and on
generated tables at three fixed seeds; the stubs are told they are not written yet; and every kind
of mistake the checks look for gets a wrong answer of its own, refused with a message that names
the mistake and never the table's right content.

The wrong answers that only a generated table shows run at one seed through a generator that writes
each table once per process and copies it afterwards (the check still reads it through Spark and
its log), so each costs the student's writes, not a new table.
"""

from __future__ import annotations

import re
import shutil

import pytest
from pyspark.sql import functions as F

from deltalab.labs import lab06_schema as lab
from deltalab.labs.lab06_schema import check_add_column, check_change_type, check_rename_column
from deltalab.workdir import workdir
from lab_testing import solution_and_student_version
from lab_testing import check_failure as failure
from lab_testing import solution_seeds, stub

# The labs' tests run in make test-labs (and those of its solutions at their seeds, marked seeds too, in
# make test-seeds), not in make test: tests/README.md says why.
pytestmark = pytest.mark.labs

#: The lab's solution on tables of a fresh seed, then its student version (tests/support/lab_testing.py).
test_the_solution_passes_and_the_student_version_says_what_is_missing = solution_and_student_version("lab06_schema")

#: Seeds of the solution runs; what they cover is asserted from the checks' own reports below.
SOLUTION_SEEDS = (1, 3, 5)
#: What each seed's checks report on (read from their ✓ lines): together every case below.
EDGE_CASES = {
    "partitioned by city": "a table partitioned by values that need escaping",
    "the partition column": "a type change of the partition column",
    "a partition column": "a rename of the partition column",
}
REPORTED_AT = {1: {"partitioned by city", "a partition column"}, 3: {"partitioned by city"}, 5: {"the partition column"}}
#: The seed of the wrong answers' generated tables.
WRONG_SEED = 3

AUTO_MERGE = "spark.databricks.delta.schema.autoMerge.enabled"


# ----------------------------------------------------------------------------------------------
# Right answers (the lab's solutions)
# ----------------------------------------------------------------------------------------------

def add_column(spark, path, new_rows):
    new_rows.write.format("delta").mode("append").option("mergeSchema", "true").save(path)


def partition_columns(spark, path) -> list[str]:
    return spark.sql(f"DESCRIBE DETAIL delta.`{path}`").first()["partitionColumns"]


def change_type(spark, path, column):
    df = spark.read.format("delta").load(path)
    (df.withColumn(column, F.col(column).cast("string"))
       .write.format("delta").mode("overwrite").option("overwriteSchema", "true")
       .partitionBy(*partition_columns(spark, path)).save(path))


def rename_column(spark, path, old, new):
    spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.columnMapping.mode' = 'name')")
    spark.sql(f"ALTER TABLE delta.`{path}` RENAME COLUMN `{old}` TO `{new}`")


_BUILT: dict[tuple, tuple] = {}


@pytest.fixture
def reused_tables(spark, monkeypatch):
    """The checks' generated tables written once per process (per seed and kind), then copied."""
    real = lab._random_table

    def build_once(spark, folder, rng, seed, **kinds):
        key = (hash(rng.getstate()), tuple(sorted(kinds.items())))
        if key not in _BUILT:
            kept = workdir(f"test_lab06_kept_{len(_BUILT)}", fresh=True)
            table = real(spark, kept, rng, seed, **kinds)
            _BUILT[key] = table, rng.getstate()
        table, after = _BUILT[key]
        rng.setstate(after)
        path = folder / table.path.rsplit("/", 1)[-1]
        shutil.copytree(table.path, path)
        return lab._read(spark, str(path), table.label, seed)

    monkeypatch.setattr(lab, "_random_table", build_once)
    monkeypatch.setenv("DELTALAB_CHECK_SEED", str(WRONG_SEED))


@pytest.fixture(autouse=True)
def clean_session(spark):
    """A wrong answer may leave a session setting behind: put the session back after each test."""
    yield
    for key in (AUTO_MERGE, "spark.databricks.delta.properties.defaults.columnMapping.mode"):
        spark.conf.unset(key)


@pytest.mark.parametrize("seed", solution_seeds(SOLUTION_SEEDS))
def test_lab06_the_solutions_pass_at_fixed_seeds(spark, capsys, seeded, seed):
    seeded(seed)
    check_add_column(add_column)
    check_change_type(change_type)
    check_rename_column(rename_column)
    out = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in out] == ["✓ add_column", "✓ change_type", "✓ rename_column"], out
    reported = {case for case in EDGE_CASES if case in "\n".join(out)}
    assert reported == REPORTED_AT[seed], f"seed {seed} now reports on {reported}: update the seeds"


def test_lab06_the_seeds_cover_every_edge_case():
    assert sorted(REPORTED_AT) == sorted(SOLUTION_SEEDS)
    missing = set(EDGE_CASES) - set().union(*REPORTED_AT.values())
    assert not missing, [EDGE_CASES[case] for case in missing]


def test_lab06_the_stubs_are_not_written_yet(spark):
    for check, name in ((check_add_column, "add_column"), (check_change_type, "change_type"),
                        (check_rename_column, "rename_column")):
        assert f"{name} is not written yet" in failure(check, stub)


# ----------------------------------------------------------------------------------------------
# Exercise 1: add_column
# ----------------------------------------------------------------------------------------------

def test_lab06_an_append_without_merge_schema_is_pointed_to_the_write_option(spark):
    message = failure(check_add_column, lambda spark, path, new_rows: new_rows.write.format("delta")
                      .mode("append").save(path))
    assert "raised AnalysisException" in message and "the write option that lets an append add columns" in message


def test_lab06_auto_merge_left_on_for_the_session_is_refused(spark):
    def session_wide(spark, path, new_rows):
        spark.conf.set(AUTO_MERGE, "true")
        new_rows.write.format("delta").mode("append").save(path)

    message = failure(check_add_column, session_wide)
    assert f"left the session setting {AUTO_MERGE}" in message, message


def test_lab06_auto_merge_switched_on_for_the_write_only_is_refused_too(spark):
    def switched_back(spark, path, new_rows):
        spark.sql(f"SET {AUTO_MERGE} = true")
        try:
            new_rows.write.format("delta").mode("append").save(path)
        finally:
            spark.sql(f"RESET {AUTO_MERGE}")

    message = failure(check_add_column, switched_back)
    assert "for the whole session during its write" in message and ".option('mergeSchema', 'true')" in message


def test_lab06_an_alter_table_before_the_append_is_two_commits(spark):
    def alter_first(spark, path, new_rows):
        have = set(spark.read.format("delta").load(path).columns)
        for name, kind in new_rows.dtypes:
            if name not in have:
                spark.sql(f"ALTER TABLE delta.`{path}` ADD COLUMNS (`{name}` {kind})")
        new_rows.write.format("delta").mode("append").save(path)

    message = failure(check_add_column, alter_first)
    assert "made 2 commits" in message and "no ALTER TABLE first" in message, message


def test_lab06_an_overwrite_with_every_row_is_not_an_append(spark):
    def rewrite_all(spark, path, new_rows):
        old = spark.read.format("delta").load(path)
        (old.unionByName(new_rows, allowMissingColumns=True).localCheckpoint().write.format("delta")
            .mode("overwrite").option("mergeSchema", "true").partitionBy(*partition_columns(spark, path)).save(path))

    message = failure(check_add_column, rewrite_all)
    assert "removed 1 file(s)" in message and "no overwrite of the whole table" in message, message


def test_lab06_new_rows_written_twice_are_counted(spark):
    message = failure(check_add_column, lambda spark, path, new_rows: new_rows.union(new_rows).write
                      .format("delta").mode("append").option("mergeSchema", "true").save(path))
    assert "is there 2 times, more than it should" in message and "exactly once" in message, message


def test_lab06_the_examples_column_names_fail_on_a_generated_table(spark, reused_tables):
    def example_only(spark, path, new_rows):
        new_rows.select("id", "name", "age", "email").write.format("delta").mode("append") \
            .option("mergeSchema", "true").save(path)

    message = failure(check_add_column, example_only)
    assert f"seed {WRONG_SEED}" in message, message
    assert "use the arguments" in message and "raised AnalysisException" in message, message


# ----------------------------------------------------------------------------------------------
# Exercise 2: change_type
# ----------------------------------------------------------------------------------------------

def test_lab06_a_type_change_without_overwrite_schema_is_told_to_rewrite_the_table(spark):
    def without_schema(spark, path, column):
        df = spark.read.format("delta").load(path)
        df.withColumn(column, F.col(column).cast("string")).write.format("delta").mode("overwrite").save(path)

    message = failure(check_change_type, without_schema)
    assert "raised AnalysisException" in message and "rewritten with a new schema" in message, message


def test_lab06_the_first_solution_loses_the_partitioning(spark, reused_tables):
    """The lab's first solution: overwriteSchema without partitionBy makes the table unpartitioned."""
    def first_solution(spark, path, column):
        df = spark.read.format("delta").load(path)
        (df.withColumn(column, F.col(column).cast("string"))
           .write.format("delta").mode("overwrite").option("overwriteSchema", "true").save(path))

    message = failure(check_change_type, first_solution)
    assert "is partitioned by [], not as it was" in message and ".partitionBy(" in message, message
    assert f"seed {WRONG_SEED}" in message


def test_lab06_a_hard_coded_column_fails_on_a_generated_table(spark, reused_tables):
    message = failure(check_change_type, lambda spark, path, column: change_type(spark, path, "age"))
    assert "is int, not string" in message or "use the arguments" in message, message


def test_lab06_a_column_moved_to_the_end_is_named(spark, reused_tables):
    def moved(spark, path, column):
        df = spark.read.format("delta").load(path)
        others = [c for c in df.columns if c != column]
        (df.select(*others, F.col(column).cast("string").alias(column)).write.format("delta").mode("overwrite")
           .option("overwriteSchema", "true").partitionBy(*partition_columns(spark, path)).save(path))

    message = failure(check_change_type, moved)
    assert "the columns are in another order" in message and "withColumn" in message, message
    kept = next(table for (_, kinds), (table, _) in _BUILT.items() if ("need", ("int",)) in kinds)
    right_order = spark.read.format("delta").load(kept.path).columns  # the order the table had, read from Delta
    assert str(right_order) not in message, "the message shows the order returned, not the right one"


def test_lab06_a_dropped_column_is_named_whatever_column_it_is(spark, reused_tables):
    def drops_last(spark, path, column):
        df = spark.read.format("delta").load(path)
        keep = [c for c in df.columns if c == column or c == "id" or c in partition_columns(spark, path)]
        (df.select(*keep).withColumn(column, F.col(column).cast("string")).write.format("delta").mode("overwrite")
           .option("overwriteSchema", "true").partitionBy(*partition_columns(spark, path)).save(path))

    message = failure(check_change_type, drops_last)
    assert re.search(r"the column '\w+' is missing", message), message


def test_lab06_nulls_formatted_as_text_are_caught(spark, reused_tables):
    def formatted(spark, path, column):
        df = spark.read.format("delta").load(path)
        (df.withColumn(column, F.format_string("%s", F.col(column)))  # NULL becomes the text 'null'
           .write.format("delta").mode("overwrite").option("overwriteSchema", "true")
           .partitionBy(*partition_columns(spark, path)).save(path))

    message = failure(check_change_type, formatted)
    assert "'null'" in message and "is not one it should hold" in message and "NULL stays NULL" in message, message


def test_lab06_deleting_the_table_to_rewrite_it_loses_its_history(spark):
    def start_over(spark, path, column):
        df = spark.read.format("delta").load(path).withColumn(column, F.col(column).cast("string")).localCheckpoint()
        shutil.rmtree(path)
        df.write.format("delta").save(path)

    message = failure(check_change_type, start_over)
    assert "the table's history is gone" in message, message


def test_lab06_create_or_replace_loses_the_table_properties(spark, reused_tables):
    def replace(spark, path, column):
        columns = ", ".join(f"CAST(`{c}` AS STRING) AS `{c}`" if c == column else f"`{c}`"
                            for c in spark.read.format("delta").load(path).columns)
        parts = partition_columns(spark, path)
        spark.sql(f"CREATE OR REPLACE TABLE delta.`{path}` USING delta "
                  + (f"PARTITIONED BY ({', '.join(f'`{p}`' for p in parts)}) " if parts else "")
                  + f"AS SELECT {columns} FROM delta.`{path}`")

    message = failure(check_change_type, replace)
    assert "the table property" in message and "is gone" in message, message


# ----------------------------------------------------------------------------------------------
# Exercise 3: rename_column
# ----------------------------------------------------------------------------------------------

def test_lab06_a_rename_that_rewrites_the_table_is_caught(spark):
    def rewrite(spark, path, old, new):
        df = spark.read.format("delta").load(path)
        (df.withColumnRenamed(old, new)
           .write.format("delta").mode("overwrite").option("overwriteSchema", "true").save(path))

    message = failure(check_rename_column, rewrite)
    assert "rewrote the data" in message and "column mapping" in message, message


def test_lab06_a_rename_by_add_update_drop_rewrites_files(spark):
    def copy_column(spark, path, old, new):
        spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.columnMapping.mode' = 'name')")
        kind = dict(spark.read.format("delta").load(path).dtypes)[old]
        spark.sql(f"ALTER TABLE delta.`{path}` ADD COLUMNS (`{new}` {kind})")
        spark.sql(f"UPDATE delta.`{path}` SET `{new}` = `{old}`")
        spark.sql(f"ALTER TABLE delta.`{path}` DROP COLUMN `{old}`")

    message = failure(check_rename_column, copy_column)
    assert "rewrote the data" in message, message


def test_lab06_names_without_backquotes_fail_on_a_generated_table(spark, reused_tables):
    def unquoted(spark, path, old, new):
        spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.columnMapping.mode' = 'name')")
        spark.sql(f"ALTER TABLE delta.`{path}` RENAME COLUMN {old} TO {new}")

    message = failure(check_rename_column, unquoted)
    assert "ParseException" in message and "backquotes" in message, message


def test_lab06_the_examples_names_fail_on_a_generated_table(spark, reused_tables):
    message = failure(check_rename_column,
                      lambda spark, path, old, new: rename_column(spark, path, "name", "full_name"))
    assert "use the arguments" in message, message


def test_lab06_column_mapping_by_session_default_is_refused(spark):
    def session_default(spark, path, old, new):
        spark.conf.set("spark.databricks.delta.properties.defaults.columnMapping.mode", "name")
        spark.sql(f"ALTER TABLE delta.`{path}` RENAME COLUMN `{old}` TO `{new}`")

    message = failure(check_rename_column, session_default)
    assert "raised AnalysisException" in message and "column mapping" in message, message
