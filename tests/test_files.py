"""deltalab.files: the table's folder (trees, data files, orphans) and what Spark reads of it, on
real Delta tables."""

from __future__ import annotations

import pytest

from course_testing import addr_state_table
from deltalab import read_table
from deltalab.errors import DeltaLabError
from deltalab.files import directory_files, human_size, orphan_data_files, tree_lines


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


def test_tree_lines(tmp_path):
    table = tmp_path / "t"
    (table / "_delta_log").mkdir(parents=True)
    (table / "_delta_log" / "00000000000000000000.json").write_text("{}\n")
    (table / "_delta_log" / "00000000000000000000.crc").write_text("{}")
    (table / "part-00000.parquet").write_bytes(b"x" * 2048)
    assert tree_lines(table) == [
        "t/",
        "├── _delta_log/",
        "│   ├── 00000000000000000000.crc  (2 B)",
        "│   └── 00000000000000000000.json  (3 B)",
        "└── part-00000.parquet  (2.0 KiB)",
    ]
    assert "00000000000000000000.crc  (2 B)" not in "\n".join(tree_lines(table, hide_crc=True))
    assert human_size(5 * 2**20) == "5.0 MiB"
    with pytest.raises(FileNotFoundError):
        tree_lines(tmp_path / "missing")


def test_orphans_are_files_no_commit_references(spark, wd):
    path = wd / "orphans"
    addr_state_table(spark, path)
    assert orphan_data_files(path) == set()
    stray = path / "part-99999-not-committed.snappy.parquet"
    stray.write_bytes(b"PAR1")
    assert orphan_data_files(path) == {stray.name}
    assert stray.name in directory_files(path) and "_delta_log/00000000000000000000.json" in directory_files(path)
