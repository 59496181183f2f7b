"""deltalab.labs.lab03_checkpoints: Delta's log segments as ground truth, and the classic
mistakes each get their own message. All tests share the one test table the checks build."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq

from deltalab.jvm import delta_log_segment
from deltalab.labs.lab03_checkpoints import _table, check_checkpoint_active_files, check_log_segment
from deltalab.log import checkpoint_versions
from lab_testing import check_failure as failure


def segment(spark, path: str, version: int) -> tuple[int | None, list[int]]:
    found = delta_log_segment(spark, path, version)
    return found.checkpoint_version, found.commit_versions


def right_segment(table_path: str, version: int):
    start = max((v for v in checkpoint_versions(table_path) if v <= version), default=None)
    return start, list(range(0 if start is None else start + 1, version + 1))


class TestLab03Checks:
    """The checks of lab 03 (grouped so that `pytest -k lab03` selects them with the lab's notebook tests)."""

    def test_the_test_table_has_checkpoints_where_delta_says(self, spark):
        """Interval 3 until version 4 sets it to 2: checkpoints at 3, 4 and 6; Delta agrees with the files."""
        table = _table(spark)
        assert table.checkpoints == checkpoint_versions(table.full) == [3, 4, 6]
        assert [segment(spark, table.full, v) for v in (2, 3, 5, 7)] == [
            (None, [0, 1, 2]), (3, []), (4, [5]), (6, [7])]
        assert segment(spark, table.trimmed, 5) == (4, [5])
        assert not (Path(table.trimmed) / "_delta_log" / f"{0:020d}.json").exists()

    def test_a_right_log_segment_passes(self, spark, capsys):
        check_log_segment(right_segment)
        assert capsys.readouterr().out.startswith("✓ log_segment: ")

    def test_replaying_from_commit_zero_is_told_to_start_at_the_checkpoint(self, spark):
        message = failure(check_log_segment, lambda path, version: (None, list(range(version + 1))))
        assert "for version 3 of the test table" in message and "no checkpoint + commits [0, 1, 2, 3]" in message
        assert "instead of replaying every commit from 0" in message

    def test_reading_the_checkpoints_own_commit_is_an_off_by_one(self, spark):
        def off_by_one(path, version):
            start, commits = right_segment(path, version)
            return start, ([start] if start is not None else []) + commits

        message = failure(check_log_segment, off_by_one)
        assert "checkpoint 3 + commits [3]" in message and "already contains commit 3" in message

    def test_last_checkpoint_for_every_version_is_explained(self, spark):
        def newest(path, version):
            latest = checkpoint_versions(path)[-1]
            return latest, list(range(latest + 1, version + 1))

        message = failure(check_log_segment, newest)
        assert "for version 0 " in message and "_last_checkpoint names only the newest" in message

    def test_checkpoints_computed_from_one_interval_are_caught(self, spark):
        def arithmetic(path, version):  # assumes the interval is 3 forever
            start = version // 3 * 3 or None
            return start, list(range(0 if start is None else start + 1, version + 1))

        message = failure(check_log_segment, arithmetic)
        assert "for version 4 " in message and "do not compute N" in message

    def test_a_right_checkpoint_reader_passes(self, spark, capsys):
        def adds(path, version):
            rows = pq.read_table(Path(path) / "_delta_log" / f"{version:020d}.checkpoint.parquet").to_pylist()
            return {row["add"]["path"] for row in rows if row["add"]}

        check_checkpoint_active_files(adds)
        assert capsys.readouterr().out.startswith("✓ checkpoint_active_files: ")

    def test_counting_remove_rows_is_named(self, spark):
        def adds_and_removes(path, version):
            rows = pq.read_table(Path(path) / "_delta_log" / f"{version:020d}.checkpoint.parquet").to_pylist()
            return {(row["add"] or row["remove"])["path"] for row in rows if row["add"] or row["remove"]}

        message = failure(check_checkpoint_active_files, adds_and_removes)
        assert "Spark does not read are included" in message and "tombstones" in message

    def test_the_stub_and_a_wrong_shape_get_plain_messages(self, spark):
        def stub(path, version):
            raise NotImplementedError()

        assert "not written yet" in failure(check_log_segment, stub)
        assert "not written yet" in failure(check_checkpoint_active_files, stub)
        assert "must return a pair" in failure(check_log_segment, lambda path, version: [version])
        assert "must return a set" in failure(check_checkpoint_active_files, lambda path, version: "part-0.parquet")

    def test_reading_the_newest_checkpoint_instead_of_the_asked_one_is_named(self, spark):
        def newest(path, version):
            latest = checkpoint_versions(path)[-1]
            rows = pq.read_table(Path(path) / "_delta_log" / f"{latest:020d}.checkpoint.parquet").to_pylist()
            return {row["add"]["path"] for row in rows if row["add"]}

        message = failure(check_checkpoint_active_files, newest)
        assert "for the checkpoint of version 3" in message and "not the newest one" in message
