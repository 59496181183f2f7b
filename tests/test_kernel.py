"""deltalab.kernel: Delta Kernel (Java) reading real tables Spark wrote, checked against Spark."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from deltalab.errors import DeltaLabError
from deltalab.files import spark_files
from deltalab.kernel import kernel_error, kernel_file_count, kernel_files, kernel_rows, kernel_snapshot
from deltalab.log import commit_info, replay_log
from deltalab import read_table


def _sorted_rows(rows):
    return sorted(rows, key=repr)


def _spark_rows(spark, path, columns, version=None, where=None):
    frame = read_table(path, version=version, spark=spark)
    if where is not None:
        frame = frame.where(where)
    return _sorted_rows(tuple(row) for row in frame.select(*columns).collect())


@pytest.fixture(scope="module")
def partitioned_with_dvs(spark, tmp_path_factory) -> Path:
    """Three versions: a write partitioned by an awkward string, an append, a DELETE that writes deletion vectors."""
    path = tmp_path_factory.mktemp("kernel") / "sales table"
    rows = [(i, ["New York", "a:b", "50% off", None][i % 4], float(i) / 4, dt.date(2026, 1, 1) + dt.timedelta(days=i % 9))
            for i in range(120)]
    frame = spark.createDataFrame(rows, "id LONG, city STRING, amount DOUBLE, day DATE")
    frame.limit(80).write.format("delta").partitionBy("city").option("delta.enableDeletionVectors", "true").save(str(path))
    frame.subtract(frame.limit(80)).write.format("delta").mode("append").save(str(path))
    spark.sql(f"DELETE FROM delta.`{path}` WHERE id % 5 = 0")
    return path


def test_kernel_reads_every_version_as_spark_does(spark, partitioned_with_dvs) -> None:
    path = partitioned_with_dvs
    for version in (0, 1, 2):
        columns, rows = kernel_rows(spark, path, version)
        assert _sorted_rows(rows) == _spark_rows(spark, path, columns, version), f"version {version}"
    assert len(kernel_rows(spark, path)[1]) == 120 - 24, "the deletion vectors' rows are left out"


def test_kernel_files_are_the_files_spark_reads(spark, partitioned_with_dvs) -> None:
    files = kernel_files(spark, partitioned_with_dvs)
    root = partitioned_with_dvs.resolve()
    assert sorted(Path(f.path).relative_to(root).as_posix() for f in files) == spark_files(spark, partitioned_with_dvs, relative=True)
    assert [f.relative_to(partitioned_with_dvs) for f in files] == [Path(f.path).relative_to(root).as_posix() for f in files]
    assert sum(f.deleted_rows for f in files) == 24 and {f.partition_values["city"] for f in files} == {"New York", "a:b", "50% off", None}
    assert sum(f.size for f in files) == sum(add["size"] for add in replay_log(partitioned_with_dvs).files.values())


def test_kernel_file_count_counts_the_files_kernel_lists(spark, partitioned_with_dvs) -> None:
    """Batch by batch, leaving out the rows Kernel's replay deselects (the adds the DELETE replaced)."""
    for version in (0, 1, 2):
        expected = len(replay_log(partitioned_with_dvs, version).files)
        assert kernel_file_count(spark, partitioned_with_dvs, version) == len(kernel_files(spark, partitioned_with_dvs, version)) == expected


def test_kernel_skips_files_and_filters_rows(spark, partitioned_with_dvs) -> None:
    kept = kernel_files(spark, partitioned_with_dvs, where=("city", "=", "a:b"))
    assert kept and {f.partition_values["city"] for f in kept} == {"a:b"}
    columns, rows = kernel_rows(spark, partitioned_with_dvs, where=("amount", ">=", 20.0))
    assert _sorted_rows(rows) == _spark_rows(spark, partitioned_with_dvs, columns, where="amount >= 20.0")


def test_kernel_snapshot_says_version_time_schema_and_protocol(spark, partitioned_with_dvs) -> None:
    snapshot = kernel_snapshot(spark, partitioned_with_dvs)
    protocol = replay_log(partitioned_with_dvs).protocol
    assert (snapshot.version, snapshot.columns, snapshot.partition_columns) == (2, ["id", "city", "amount", "day"], ["city"])
    commit_file = partitioned_with_dvs / "_delta_log" / f"{2:020d}.json"
    assert snapshot.timestamp_ms == commit_file.stat().st_mtime_ns // 1_000_000, \
        "without in-commit timestamps, a version's time is its commit file's modification time"
    assert abs(snapshot.timestamp_ms - commit_info(partitioned_with_dvs, 2)["timestamp"]) < 60_000
    assert (snapshot.min_reader_version, snapshot.min_writer_version) == (protocol["minReaderVersion"], protocol["minWriterVersion"])
    assert "deletionVectors" in snapshot.reader_features and snapshot.writer_features == sorted(protocol["writerFeatures"])
    assert kernel_snapshot(spark, partitioned_with_dvs, 0).version == 0


def test_bad_input_gets_one_clear_message(spark, partitioned_with_dvs, tmp_path) -> None:
    with pytest.raises(DeltaLabError, match="not a Delta table"):
        kernel_rows(spark, tmp_path)
    with pytest.raises(DeltaLabError, match="Version 7 does not exist .* the latest version is 2"):
        kernel_snapshot(spark, partitioned_with_dvs, 7)
    with pytest.raises(DeltaLabError, match="not a filter this helper builds"):
        kernel_files(spark, partitioned_with_dvs, where=("city", "LIKE", "a%"))


def test_kernel_error_names_the_java_exception(spark, tmp_path) -> None:
    path = tmp_path / "variant"
    spark.sql("SELECT 1 AS id, parse_json('{\"a\": 1}') AS v").write.format("delta").save(str(path))
    assert kernel_snapshot(spark, path).columns == ["id", "v"], "the snapshot loads"
    with pytest.raises(Exception) as refused:
        kernel_rows(spark, path)
    assert kernel_error(refused.value) == ("java.lang.UnsupportedOperationException", "variant is not supported")
