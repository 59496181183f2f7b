"""deltalab.schema on real Delta tables: the schema history, column mapping's physical names, and
clear messages for paths that are no table or file."""

from __future__ import annotations

import pytest

from course_testing import addr_state_table
from deltalab.errors import DeltaLabError
from deltalab.files import directory_files
from deltalab.schema import column_mapping, parquet_columns, schema_history


def test_schema_history_lists_each_metadata_action(spark, wd):
    path = wd / "history"
    addr_state_table(spark, path)
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
    addr_state_table(spark, path)
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
