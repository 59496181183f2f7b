"""The lab 01 checks (deltalab.labs.lab01_parquet): right answers pass and say so, the stubs are told
they are not written yet, and answers that read only a file's first row group get their own sentence.

The checks run on the data files of one small table, built once per process with several row groups
per file; the first test makes sure it still has them, or the first-row-group answers would pass.
"""

from __future__ import annotations

import pyarrow.parquet as pq

from deltalab.labs.lab01_parquet import _parquet_files, check_column_range, check_footer_row_count
from lab_testing import check_failure as failure


def footer_row_count(file_path: str) -> int:
    """A right answer to exercise 1 (the lab's solution)."""
    return pq.ParquetFile(file_path).metadata.num_rows


def column_range(file_path: str, column: str) -> tuple:
    """A right answer to exercise 2 (the lab's solution)."""
    meta = pq.ParquetFile(file_path).metadata
    index = meta.schema.names.index(column)
    stats = [meta.row_group(i).column(index).statistics for i in range(meta.num_row_groups)]
    return min(s.min for s in stats), max(s.max for s in stats)


def stub(*args):
    raise NotImplementedError()


def test_lab01_every_test_file_has_several_row_groups(spark):
    files = _parquet_files(spark)
    assert len(files) == 2, files
    assert all(pq.ParquetFile(f).metadata.num_row_groups > 1 for f in files), "one row group per file: see lab01_parquet"


def test_lab01_right_answers_pass_and_say_so(spark, capsys):
    check_footer_row_count(footer_row_count)
    check_column_range(column_range)
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("✓ footer_row_count: ") and out[1].startswith("✓ column_range: "), out


def test_lab01_the_stubs_are_not_written_yet(spark):
    assert "footer_row_count is not written yet" in failure(check_footer_row_count, stub)
    assert "column_range is not written yet" in failure(check_column_range, stub)


def test_lab01_a_row_count_of_the_first_row_group_is_told_about_row_groups(spark):
    def first_row_group(file_path):
        return pq.ParquetFile(file_path).metadata.row_group(0).num_rows

    message = failure(check_footer_row_count, first_row_group)
    assert "footer_row_count returned" in message and "several row groups" in message, message
    assert "metadata.num_rows" in message, message


def test_lab01_a_row_count_that_is_no_int_is_named(spark):
    message = failure(check_footer_row_count, lambda file_path: str(footer_row_count(file_path)))
    assert "must return an int" in message, message


def test_lab01_a_range_of_the_first_row_group_only_is_caught(spark):
    def first_row_group(file_path, column):
        meta = pq.ParquetFile(file_path).metadata
        stats = meta.row_group(0).column(meta.schema.names.index(column)).statistics
        return stats.min, stats.max

    message = failure(check_column_range, first_row_group)
    assert "column_range returned" in message and "over all row groups, not just the first one" in message, message


def test_lab01_a_range_the_wrong_way_round_is_named(spark):
    message = failure(check_column_range, lambda file_path, column: tuple(reversed(column_range(file_path, column))))
    assert "the pair is the wrong way round: return (min, max)" in message, message
