"""file_stats, scan_metrics and skipping_effectiveness on real Delta tables.

The central cross-check: the files Spark reads for ``x = v`` (from the query's own inputFiles()
and the scan node's metrics) are exactly the files whose [min, max] in the log can contain v.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import functions as F

from deltalab.errors import DeltaLabError
from deltalab.skipping import equality_lookups, file_stats, files_that_may_match, scan_metrics, skipping_effectiveness

NUM_FILES = 6
ROWS = 600


@pytest.fixture(scope="module")
def sorted_table(spark, tmp_path_factory) -> Path:
    """6 files with disjoint ranges of x (x = 2 * id, so odd values fall between rows)."""
    path = tmp_path_factory.mktemp("skipping") / "sorted"
    (
        spark.range(0, ROWS, 1, 2)
        .select((F.col("id") * 2).alias("x"), (F.col("id") % 7).alias("y"), F.lit("abc").alias("s"))
        .repartitionByRange(NUM_FILES, "x")
        .write.format("delta")
        .save(str(path))
    )
    return path


def _read(spark, path: Path):
    return spark.read.format("delta").load(str(path))


def test_file_stats_match_the_data_files(spark, sorted_table):
    stats = file_stats(sorted_table)
    assert len(stats) == NUM_FILES
    assert list(stats.columns[:3]) == ["path", "size", "numRecords"]
    assert {"min.x", "max.x", "nullCount.x", "min.y", "max.s"} <= set(stats.columns)
    # Compare with the data itself, grouped by the file each row comes from.
    actual = (
        _read(spark, sorted_table)
        .groupBy(F.col("_metadata.file_name").alias("name"))
        .agg(F.count("*").alias("n"), F.min("x").alias("lo"), F.max("x").alias("hi"))
        .toPandas()
        .set_index("name")
    )
    for _, row in stats.iterrows():
        truth = actual.loc[Path(row["path"]).name]
        assert (row["numRecords"], row["min.x"], row["max.x"]) == (truth["n"], truth["lo"], truth["hi"])
        assert row["nullCount.x"] == 0
    assert stats["numRecords"].sum() == ROWS


@pytest.mark.parametrize("value", [0, 2, 401, 598, 1198, -5, 5000])
def test_files_read_are_exactly_those_whose_range_can_contain_the_literal(spark, sorted_table, value):
    stats = file_stats(sorted_table)
    expected = files_that_may_match(stats, "x", value)
    measured = scan_metrics(_read(spark, sorted_table).filter(F.col("x") == value))
    assert list(measured.input_files) == expected
    assert measured.files_read == len(expected), "the scan node's numFiles must agree with inputFiles()"
    assert measured.files_total == NUM_FILES
    assert measured.rows_total == ROWS
    expected_rows = int(stats[stats["path"].isin(expected)]["numRecords"].sum())
    assert measured.rows_read == expected_rows
    assert measured.rows_returned == (1 if 0 <= value < 2 * ROWS and value % 2 == 0 else 0)
    assert measured.files_read < measured.files_total
    assert (measured.bytes_read == 0) == (measured.files_read == 0)
    assert measured.bytes_read <= measured.bytes_total


def test_scan_metrics_accepts_sql_and_measures_again_on_each_call(spark, sorted_table):
    query = f"SELECT * FROM delta.`{sorted_table}` WHERE x = 300"
    first = scan_metrics(query, spark=spark)
    second = scan_metrics(query)
    frame = _read(spark, sorted_table).filter("x = 300")
    third, fourth = scan_metrics(frame), scan_metrics(frame)
    assert first == second == third == fourth
    assert first.files_read == 1 and first.files_skipped == pytest.approx(1 - 1 / NUM_FILES)


def test_a_column_without_stats_is_not_skipped(spark, tmp_path):
    path = tmp_path / "narrow_stats"
    spark.sql(
        f"CREATE TABLE delta.`{path}` (a BIGINT, b BIGINT) USING delta "
        "TBLPROPERTIES ('delta.dataSkippingNumIndexedCols' = '1')"
    )
    spark.range(0, 400, 1, 1).select(F.col("id").alias("a"), F.col("id").alias("b")).repartitionByRange(
        4, "a"
    ).write.format("delta").mode("append").save(str(path))
    stats = file_stats(path)
    assert "min.a" in stats.columns and "min.b" not in stats.columns
    assert files_that_may_match(stats, "b", 7) == sorted(stats["path"])
    assert scan_metrics(_read(spark, path).filter("b = 7")).files_read == 4
    assert scan_metrics(_read(spark, path).filter("a = 7")).files_read == 1


def test_file_stats_replays_checkpoints_and_removes(spark, tmp_path):
    path = tmp_path / "many_commits"
    for i in range(12):  # a checkpoint at version 10, two commits after it
        spark.range(i * 10, i * 10 + 10, 1, 1).write.format("delta").mode("append").save(str(path))
    spark.sql(f"DELETE FROM delta.`{path}` WHERE id < 10")  # removes the first file
    assert (path / "_delta_log" / f"{10:020d}.checkpoint.parquet").exists()
    stats = file_stats(path)
    detail = spark.sql(f"DESCRIBE DETAIL delta.`{path}`").first()
    assert len(stats) == detail["numFiles"] == 11
    assert stats["numRecords"].sum() == _read(spark, path).count() == 110
    assert stats["min.id"].min() == 10
    live = sorted(str(Path(f.removeprefix("file:")).relative_to(path)) for f in _read(spark, path).inputFiles())
    assert sorted(stats["path"]) == live


def test_file_stats_reports_rows_hidden_by_deletion_vectors(spark, tmp_path):
    path = tmp_path / "with_dv"
    spark.range(0, 20, 1, 2).write.format("delta").save(str(path))
    assert "deletedRows" not in file_stats(path).columns, "no deletion vector, no column"
    spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')")
    spark.sql(f"DELETE FROM delta.`{path}` WHERE id IN (1, 2, 15)")
    stats = file_stats(path)
    assert sorted(stats["deletedRows"]) == [1, 2], "one file hides 1 row, the other 2"
    assert stats["numRecords"].sum() == 20, "numRecords still counts the hidden rows"
    assert (stats["numRecords"] - stats["deletedRows"]).sum() == _read(spark, path).count() == 17


def test_partition_pruning_is_reported_like_skipping(spark, tmp_path):
    path = tmp_path / "partitioned"
    spark.range(0, 300, 1, 1).select("id", (F.col("id") % 3).alias("p")).write.format("delta").partitionBy(
        "p"
    ).save(str(path))
    stats = file_stats(path)
    assert "partition.p" in stats.columns
    measured = scan_metrics(_read(spark, path).filter("p = 1"))
    assert measured.files_read == int((stats["partition.p"] == "1").sum()) < measured.files_total
    assert all(f.startswith("p=1/") for f in measured.input_files)


def test_skipping_effectiveness_sorted_versus_shuffled(spark, sorted_table, tmp_path):
    shuffled = tmp_path / "shuffled"
    _read(spark, sorted_table).repartition(NUM_FILES).write.format("delta").save(str(shuffled))
    filters = [f"x = {v}" for v in (0, 250, 598, 1000)]
    on_sorted = skipping_effectiveness(sorted_table, filters, spark=spark)
    on_shuffled = skipping_effectiveness(_read(spark, shuffled), filters)
    # Disjoint ranges: every lookup opens exactly one of the files.
    assert on_sorted.files_skipped == pytest.approx(1 - 1 / NUM_FILES)
    assert list(on_sorted.per_filter["files_read"]) == [1, 1, 1, 1]
    assert on_shuffled.files_skipped < on_sorted.files_skipped
    assert on_sorted.rows_skipped == pytest.approx(on_sorted.per_filter["rows_skipped"].mean())
    assert on_shuffled.rows_skipped < on_sorted.rows_skipped
    assert 0 <= on_shuffled.rows_skipped <= 1


def test_bad_input_gets_one_clear_message(spark, tmp_path, sorted_table):
    with pytest.raises(DeltaLabError, match="no _delta_log"):
        file_stats(tmp_path)
    with pytest.raises(DeltaLabError, match="at least one filter"):
        skipping_effectiveness(sorted_table, [], spark=spark)
    with pytest.raises(DeltaLabError, match="DataFrame or a SQL string"):
        scan_metrics(42)
    parquet = tmp_path / "plain"
    spark.range(3).write.parquet(str(parquet))
    with pytest.raises(DeltaLabError, match="not a Delta table"):
        scan_metrics(spark.read.parquet(str(parquet)).filter("id = 1"))
    joined = _read(spark, sorted_table).alias("a").join(_read(spark, sorted_table).alias("b"), "x")
    with pytest.raises(DeltaLabError, match="exactly one table"):
        scan_metrics(joined.filter("a.x = 4"))


def test_equality_lookups_predicts_the_files_and_rows_spark_reads(spark, sorted_table):
    stats = file_stats(sorted_table)
    values = [0, 2, 401, 598, 1198, -5, 5000]
    predicted = equality_lookups(stats, "x", values)
    assert list(predicted["value"]) == values
    for value, files_read, rows_read in zip(values, predicted["files_read"], predicted["rows_read"]):
        measured = scan_metrics(_read(spark, sorted_table).filter(F.col("x") == value))
        assert (files_read, rows_read) == (measured.files_read, measured.rows_read), value
        assert files_read == len(files_that_may_match(stats, "x", value))
    assert predicted["files_skipped"].between(0, 1).all() and predicted["rows_skipped"].between(0, 1).all()


def test_equality_lookups_keeps_every_file_of_a_column_without_stats_and_refuses_empty_stats(spark, tmp_path):
    import pandas as pd

    path = tmp_path / "no_stats_for_b"
    spark.sql(f"CREATE TABLE delta.`{path}` (a BIGINT, b BIGINT) USING delta TBLPROPERTIES ('delta.dataSkippingNumIndexedCols' = '1')")
    spark.range(0, 40, 1, 1).select(F.col("id").alias("a"), F.col("id").alias("b")).repartitionByRange(
        4, "a").write.format("delta").mode("append").save(str(path))
    on_b = equality_lookups(file_stats(path), "b", [7, 1000])
    assert list(on_b["files_read"]) == [4, 4] and list(on_b["rows_read"]) == [40, 40]
    with pytest.raises(DeltaLabError, match="file_stats"):
        equality_lookups(pd.DataFrame(), "b", [7])
