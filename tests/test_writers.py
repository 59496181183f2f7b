"""deltalab.writers: writers in other processes and threads, on real Delta tables (no mocks).

The blocked writer killed mid-append is tested, interrupted and re-run, in tests/test_robustness.py
(as notebook 02 drives it); the processes' appends in notebook 05.
"""

from __future__ import annotations

import pytest

from deltalab import writers
from deltalab.errors import DeltaLabError
from deltalab.log import commit_info, commit_versions
from deltalab.processes import wait_until


def test_blind_appends_from_threads_lose_nothing(spark, tmp_path) -> None:
    path = tmp_path / "blind"
    spark.createDataFrame([], "id long, writer int").write.format("delta").save(str(path))
    assert writers.append_from_threads(spark, str(path), 3, 50) == []
    assert commit_versions(path) == [0, 1, 2, 3]
    assert sorted(commit_info(path, v)["userMetadata"] for v in (1, 2, 3)) == ["writer-0", "writer-1", "writer-2"]
    assert spark.read.format("delta").load(str(path)).count() == 150


def test_a_blocked_writer_needs_two_partitions(tmp_path) -> None:
    with pytest.raises(DeltaLabError, match="needs at least 2"):
        writers.start_blocked_append(tmp_path / "t", rows=10, partitions=1, signal_dir=tmp_path / "_writer")


def test_a_blocked_append_that_fails_before_its_hold_says_why(tmp_path) -> None:
    (tmp_path / "not_a_table").mkdir()
    (tmp_path / "not_a_table" / "a_file").write_text("not Delta, not Parquet")
    writer = writers.start_blocked_append(tmp_path / "not_a_table" / "a_file", rows=10, partitions=2,
                                          signal_dir=tmp_path / "_writer")
    try:
        with pytest.raises(DeltaLabError, match="append_blocking_last_task failed in the second driver"):
            wait_until(lambda: writer.blocked, 300, "the writer blocks or fails")
    finally:
        writer.kill()
