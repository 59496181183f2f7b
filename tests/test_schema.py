"""deltalab.schema, deltalab.errors.failure_of and deltalab.files on real Delta tables: error conditions,
directory snapshots, orphans, schema history."""

from __future__ import annotations

import pytest

from deltalab import workdir
from deltalab.errors import DeltaLabError, failure_of
from deltalab.files import directory_files, orphan_data_files
from deltalab.schema import column_mapping, parquet_columns, schema_history


@pytest.fixture()
def wd():
    return workdir("test_schema")


def _table(spark, path, rows=(("CA", 1), ("NY", 2))):
    spark.createDataFrame(list(rows), "addr_state STRING, count BIGINT").coalesce(1).write.format("delta").save(str(path))


def test_failure_of_returns_none_when_the_action_succeeds():
    assert failure_of(lambda: 1 + 1) is None


def test_failure_of_reads_the_condition_of_an_analysis_exception(spark, wd):
    path = wd / "t"
    _table(spark, path)
    extra = spark.createDataFrame([("TX", 3, 1.5)], "addr_state STRING, count BIGINT, amount DOUBLE")
    failure = failure_of(lambda: extra.write.format("delta").mode("append").save(str(path)))
    assert failure.condition == "DELTA_METADATA_MISMATCH"
    assert failure.message.startswith("[DELTA_METADATA_MISMATCH]") and "\n" not in failure.message
    assert failure.error_type == "AnalysisException"


def test_failure_of_reads_the_condition_from_a_bare_java_error(spark, wd):
    """Delta's NOT NULL violation reaches Python as a Py4JJavaError: the condition comes from the text."""
    path = wd / "nn"
    spark.sql(f"CREATE TABLE delta.`{path}` (addr_state STRING NOT NULL, count BIGINT) USING delta")
    failure = failure_of(lambda: spark.sql(f"INSERT INTO delta.`{path}` VALUES (NULL, 1)"))
    assert failure.condition == "DELTA_NOT_NULL_CONSTRAINT_VIOLATED"
    assert failure.message.startswith("[DELTA_NOT_NULL_CONSTRAINT_VIOLATED]"), failure.message
    assert "at org.apache" not in failure.message and "Exception:" not in failure.message


def test_failure_of_a_plain_python_error():
    failure = failure_of(lambda: int("x"))
    assert failure.condition is None and failure.error_type == "ValueError" and "invalid literal" in failure.message


def test_orphans_are_files_no_commit_references(spark, wd):
    path = wd / "orphans"
    _table(spark, path)
    assert orphan_data_files(path) == set()
    stray = path / "part-99999-not-committed.snappy.parquet"
    stray.write_bytes(b"PAR1")
    assert orphan_data_files(path) == {stray.name}
    assert stray.name in directory_files(path) and "_delta_log/00000000000000000000.json" in directory_files(path)


def test_schema_history_lists_each_metadata_action(spark, wd):
    path = wd / "history"
    _table(spark, path)
    spark.createDataFrame([("TX", 3, 1.5)], "addr_state STRING, count BIGINT, amount DOUBLE") \
        .write.format("delta").mode("append").option("mergeSchema", "true").save(str(path))
    spark.createDataFrame([("WA", 4, 2.5)], "addr_state STRING, count BIGINT, amount DOUBLE") \
        .write.format("delta").mode("append").save(str(path))
    history = schema_history(path)
    assert list(history["version"]) == [0, 1], "the plain append in version 2 carries no metaData"
    assert list(history["change"]) == ["(first schema)", "+amount"]
    assert history["schema"].iloc[1] == "addr_state string, count long, amount double"


def test_column_mapping_shows_physical_names_after_a_rename(spark, wd):
    path = wd / "mapped"
    _table(spark, path)
    assert list(column_mapping(path)["physical name"]) == ["addr_state", "count"]
    spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.columnMapping.mode' = 'name')")
    spark.sql(f"ALTER TABLE delta.`{path}` RENAME COLUMN count TO num_loans")
    mapping = column_mapping(path)
    assert list(mapping["column"]) == ["addr_state", "num_loans"]
    assert list(mapping["physical name"]) == ["addr_state", "count"] and list(mapping["id"]) == [1, 2]
    [data_file] = [p for p in directory_files(path) if p.endswith(".parquet")]
    assert parquet_columns(path / data_file) == ["addr_state", "count"]


def test_bad_paths_get_clear_messages(tmp_path):
    with pytest.raises(DeltaLabError, match="is not a directory"):
        directory_files(tmp_path / "nothing")
    with pytest.raises(DeltaLabError, match="is not a file"):
        parquet_columns(tmp_path / "nothing.parquet")
    with pytest.raises(DeltaLabError):
        schema_history(tmp_path)   # not a Delta table
