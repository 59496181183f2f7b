"""deltalab.files: the table's folder and what Spark reads of it, on real Delta tables."""

from __future__ import annotations

import pytest

from deltalab import read_table
from deltalab.errors import DeltaLabError


def test_read_table_reads_the_latest_version_or_travels(spark, tmp_path) -> None:
    path = tmp_path / "t"
    spark.range(0, 3).write.format("delta").save(str(path))
    spark.range(3, 5).write.format("delta").mode("append").save(str(path))
    assert read_table(path).count() == 5 and read_table(str(path), spark=spark).count() == 5
    assert sorted(row.id for row in read_table(path, version=0).collect()) == [0, 1, 2]
    assert read_table(path.as_uri()).count() == 5, "a file: URI is a path too"
    far_future = "2999-01-01 00:00:00"
    with pytest.raises(Exception, match="DELTA_TIMESTAMP_GREATER_THAN_COMMIT|timestamp"):
        read_table(path, timestamp=far_future).count()


@pytest.mark.parametrize("kwargs, words", [
    ({"version": -1}, "is not a table version"),
    ({"version": "1"}, "is not a table version"),
    ({"version": True}, "is not a table version"),
    ({"version": 0, "timestamp": "2024-01-01"}, "both a version and a timestamp"),
])
def test_read_table_refuses_bad_arguments_before_spark(tmp_path, kwargs, words) -> None:
    with pytest.raises(DeltaLabError, match=words):
        read_table(tmp_path, **kwargs)


def test_read_table_of_a_folder_that_is_no_table_says_so(tmp_path) -> None:
    (tmp_path / "plain").mkdir()
    with pytest.raises(DeltaLabError, match="is not a Delta table: it has no _delta_log/"):
        read_table(tmp_path / "plain")
    with pytest.raises(DeltaLabError, match="does not exist or is not a directory"):
        read_table(tmp_path / "missing")
