"""The lab 01 checks (deltalab.labs.lab01_parquet): the solution passes at three seeds that together
cover the edge cases, the stubs are told they are not written yet, and each kind of wrong answer is
refused with a message that says what is wrong and never shows the expected value.

The generated tables are built by the checks themselves; the tests read what they must cover (row
groups, all-null row groups and files, long strings, partition folders) from the files' footers, and
the expected values the messages must hide from Spark (``_generated_files`` at the same seed).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from urllib.parse import unquote

import pyarrow.parquet as pq
import pytest

from deltalab.labs import lab01_parquet as lab
from deltalab.labs.tables import SEED_ENV, fresh_dir
from deltalab.labs.lab01_parquet import check_column_range, check_footer_row_count
from lab_testing import solution_and_student_version
from lab_testing import check_failure as failure
from lab_testing import solution_seeds, stub

# The labs' tests run in make test-labs (and those of its solutions at their seeds, marked seeds too, in
# make test-seeds), not in make test: tests/README.md says why.
pytestmark = pytest.mark.labs

#: The lab's solution on tables of a fresh seed, then its student version (tests/support/lab_testing.py).
test_the_solution_passes_and_the_student_version_says_what_is_missing = solution_and_student_version("lab01_parquet")

#: 1: partitioned by values a path escapes (a=b, zürich), all-null row groups; 2: two files, one of
#: them all null in `note`; 3: partitioned (10:30, a=b, new york), one partition all null in `note`.
SEEDS = (1, 2, 3)
#: The seed the wrong answers run at (its generated table is partitioned, with an all-null file).
WRONG_SEED = 3


def footer_row_count(file_path: str) -> int:
    """A right answer to exercise 1 (the lab's solution)."""
    return pq.ParquetFile(file_path).metadata.num_rows


def column_range(file_path: str, column: str) -> tuple:
    """A right answer to exercise 2 (the lab's solution)."""
    meta = pq.ParquetFile(file_path).metadata
    index = meta.schema.names.index(column)
    stats = [meta.row_group(i).column(index).statistics for i in range(meta.num_row_groups)]
    known = [s for s in stats if s is not None and s.has_min_max]
    if not known:
        return None, None
    return min(s.min for s in known), max(s.max for s in known)


_GENERATED: dict[int, list] = {}


def generated(spark, seed: int) -> list:
    """The files the checks generate at ``seed`` (built again in a folder of the tests', same values)."""
    if seed not in _GENERATED:
        _GENERATED[seed] = lab._generated_files(spark, fresh_dir(f"lab01_tests_{seed}"), seed)
    return _GENERATED[seed]


def hides(message: str, values, shown=()) -> bool:
    """Whether ``message`` shows none of ``values`` (as whole words), apart from the answer's own ``shown`` text."""
    for text in shown:
        message = message.replace(text, "")
    for value in values:
        if value is None or (isinstance(value, int) and abs(value) < 100):
            continue  # 0, 1 or None appear in any sentence
        if re.search(rf"(?<![\w.\-]){re.escape(str(value))}(?![\w.])", message):
            return False
    return True


def every_value(files) -> list:
    return [value for f in files for value in (f.rows, *(v for pair in f.ranges.values() for v in pair))]


@pytest.fixture
def seed(monkeypatch):
    monkeypatch.setenv(SEED_ENV, str(WRONG_SEED))
    return WRONG_SEED


# ----------------------------------------------------------------------------- the generated files


@pytest.mark.parametrize("seed", solution_seeds(SEEDS))
def test_lab01_the_solution_passes_at_each_seed(spark, capsys, monkeypatch, seed):
    monkeypatch.setenv(SEED_ENV, str(seed))
    check_footer_row_count(footer_row_count)
    check_column_range(column_range)
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("✓ footer_row_count: ") and out[1].startswith("✓ column_range: "), out


def test_lab01_the_seeds_cover_the_edge_cases(spark):
    """Several row groups everywhere; an all-null row group at each seed, a whole file of nulls and
    partition folders a path escapes at some; a string column Delta's log statistics cut; a damaged
    copy whose footer reads and whose rows do not."""
    whole_file_null = partitioned = 0
    for seed in SEEDS:
        files = generated(spark, seed)
        real, damaged = files[:-1], files[-1]
        assert damaged.damaged and not any(f.damaged for f in real)
        for f in files:
            meta = pq.ParquetFile(f.path).metadata
            assert meta.num_row_groups > 1 and meta.num_rows == f.rows, f.path
        note = [pq.ParquetFile(f.path).metadata for f in real]
        index = note[0].schema.names.index("note")
        assert any(not m.row_group(i).column(index).statistics.has_min_max
                   for m in note for i in range(m.num_row_groups)), f"seed {seed}: no all-null row group"
        whole_file_null += any(f.ranges["note"] == (None, None) for f in real)
        partitioned += any("city=" in f.path for f in real)
        with pytest.raises(Exception):
            pq.read_table(damaged.path)
        table = next(p for p in Path(real[0].path).parents if (p / "_delta_log").is_dir())
        first_commit = (table / "_delta_log" / f"{0:020d}.json").read_text().splitlines()
        add = next(json.loads(line)["add"] for line in first_commit if line.startswith('{"add"'))
        logged = json.loads(add["stats"])["minValues"]["name"]
        footer = next(f for f in real if Path(f.path).name == Path(unquote(add["path"])).name).ranges["name"][0]
        assert len(footer) > lab.DELTA_STRING_PREFIX and logged != footer, "the log's string statistics are cut"
    assert whole_file_null >= 2 and partitioned >= 2
    assert any(" " in f.path or "%3A" in f.path for seed in SEEDS for f in generated(spark, seed))


def test_lab01_every_example_file_has_several_row_groups(spark):
    files = lab._example_files(spark)
    assert len(files) == 2, files
    assert all(pq.ParquetFile(f.path).metadata.num_row_groups > 1 for f in files), "one row group per file"


def test_lab01_the_stubs_are_not_written_yet(spark):
    assert "footer_row_count is not written yet" in failure(check_footer_row_count, stub)
    assert "column_range is not written yet" in failure(check_column_range, stub)


# ----------------------------------------------------------------------------- footer_row_count


def test_lab01_a_row_count_of_the_first_row_group_is_told_about_row_groups(spark, seed):
    def first_row_group(file_path):
        return pq.ParquetFile(file_path).metadata.row_group(0).num_rows

    message = failure(check_footer_row_count, first_row_group)
    assert "footer_row_count returned" in message and "several row groups" in message, message
    assert "metadata.num_rows" in message, message
    assert hides(message, every_value(lab._example_files(spark))), message


def test_lab01_a_row_count_fitted_to_the_example_fails_on_a_generated_file(spark, seed):
    counts = {Path(f.path).name: f.rows for f in lab._example_files(spark)}

    def fitted(file_path):  # the example's count whatever the file: what a failed check once printed
        return counts.get(Path(file_path).name, next(iter(counts.values())))

    message = failure(check_footer_row_count, fitted)
    assert "a generated table" in message and f"(tables of seed {seed})" in message, message
    assert hides(message, every_value(generated(spark, seed)), shown=[str(c) for c in counts.values()]), message


def test_lab01_row_groups_times_the_first_ones_size_is_caught(spark, seed):
    def multiplies(file_path):
        meta = pq.ParquetFile(file_path).metadata
        return meta.num_row_groups * meta.row_group(0).num_rows

    message = failure(check_footer_row_count, multiplies)
    assert "row groups of different sizes" in message, message


def test_lab01_a_row_count_that_is_no_int_is_named(spark):
    message = failure(check_footer_row_count, lambda file_path: str(footer_row_count(file_path)))
    assert "must return an int" in message, message


def test_lab01_a_row_count_that_reads_the_rows_fails_on_the_damaged_file(spark, seed):
    message = failure(check_footer_row_count, lambda file_path: pq.read_table(file_path).num_rows)
    assert "cannot be read, only its footer" in message and "ParquetFile(path).metadata" in message, message
    assert hides(message, every_value(generated(spark, seed))), message


def test_lab01_a_row_count_from_spark_is_refused_even_where_spark_can_count(spark, seed):
    """Spark counts a file's rows from its footer too (no column is read), so the damaged copy alone
    would not catch this answer: the check refuses any Spark job."""
    message = failure(check_footer_row_count, lambda file_path: spark.read.parquet(file_path).count())
    assert "started a Spark job" in message and "without reading rows" in message, message


def test_lab01_a_row_count_from_the_delta_log_fails_on_a_file_outside_a_table(spark, seed):
    def from_the_log(file_path):
        table = next(p for p in Path(file_path).parents if (p / "_delta_log").is_dir())
        for commit in sorted((table / "_delta_log").glob("*.json")):
            for line in commit.read_text().splitlines():
                add = json.loads(line).get("add")
                if add and Path(unquote(add["path"])).name == Path(file_path).name:
                    return json.loads(add["stats"])["numRecords"]
        raise LookupError("not in the log")

    message = failure(check_footer_row_count, from_the_log)
    assert "raised StopIteration" in message and "only its footer" in message, message


def test_lab01_an_answer_that_writes_beside_the_file_is_refused(spark):
    def caches_beside_it(file_path):
        rows = footer_row_count(file_path)
        Path(file_path).with_suffix(".rows").write_text(str(rows))
        return rows

    try:
        message = failure(check_footer_row_count, caches_beside_it)
    finally:
        for file in lab._example_files(spark):
            Path(file.path).with_suffix(".rows").unlink(missing_ok=True)
    assert "changed the folder" in message and "it must only read it" in message, message


# ----------------------------------------------------------------------------- column_range


def test_lab01_a_range_of_the_first_row_group_only_is_caught(spark):
    def first_row_group(file_path, column):
        meta = pq.ParquetFile(file_path).metadata
        stats = meta.row_group(0).column(meta.schema.names.index(column)).statistics
        return stats.min, stats.max

    message = failure(check_column_range, first_row_group)
    assert "column_range returned" in message and "over all row groups" in message, message
    assert hides(message, every_value(lab._example_files(spark)),
                 shown=[m for m in re.findall(r"returned (\(.*?\)),", message)]), message


def test_lab01_a_range_of_the_first_and_last_row_groups_fails_on_unsorted_columns(spark, seed):
    """Right for `id` (rows are written in id order), wrong for the columns whose extremes sit anywhere."""
    def ends(file_path, column):
        meta = pq.ParquetFile(file_path).metadata
        index = meta.schema.names.index(column)
        first, last = (meta.row_group(i).column(index).statistics for i in (0, meta.num_row_groups - 1))
        return first.min, last.max

    message = failure(check_column_range, ends)
    assert "over all row groups" in message, message


def test_lab01_a_range_the_wrong_way_round_is_named(spark):
    message = failure(check_column_range, lambda file_path, column: tuple(reversed(column_range(file_path, column))))
    assert "the pair is the wrong way round: return (min, max)" in message, message


def test_lab01_the_old_solution_trips_on_an_all_null_row_group(spark, seed):
    def ignores_nulls(file_path, column):
        meta = pq.ParquetFile(file_path).metadata
        index = meta.schema.names.index(column)
        stats = [meta.row_group(i).column(index).statistics for i in range(meta.num_row_groups)]
        return min(s.min for s in stats), max(s.max for s in stats)

    message = failure(check_column_range, ignores_nulls)
    assert "raised TypeError" in message and "has_min_max" in message, message


def test_lab01_a_range_that_gives_up_on_any_null_row_group_is_told_to_skip_it(spark, seed):
    def gives_up(file_path, column):
        meta = pq.ParquetFile(file_path).metadata
        index = meta.schema.names.index(column)
        stats = [meta.row_group(i).column(index).statistics for i in range(meta.num_row_groups)]
        if not all(s.has_min_max for s in stats):
            return None, None
        return min(s.min for s in stats), max(s.max for s in stats)

    message = failure(check_column_range, gives_up)
    assert "hold only nulls" in message and "leave them out" in message, message
    assert hides(message, every_value(generated(spark, seed)), shown=["(None, None)"]), message


def test_lab01_a_range_from_the_delta_log_is_caught_by_long_strings(spark, seed):
    def from_the_log(file_path, column):
        table = next(p for p in Path(file_path).parents if (p / "_delta_log").is_dir())
        for commit in sorted((table / "_delta_log").glob("*.json")):
            for line in commit.read_text().splitlines():
                add = json.loads(line).get("add")
                if add and Path(unquote(add["path"])).name == Path(file_path).name:
                    stats = json.loads(add["stats"])
                    return stats["minValues"].get(column), stats["maxValues"].get(column)
        raise LookupError("not in the log")

    message = failure(check_column_range, from_the_log)
    assert "for column 'name'" in message and "cut to 32 characters" in message, message
    assert hides(message, every_value(generated(spark, seed)),
                 shown=[m for m in re.findall(r"returned (\(.*?\)),", message)]), message


def test_lab01_a_range_that_reads_the_rows_fails_on_the_damaged_file(spark, seed):
    def reads_rows(file_path, column):
        values = [v for v in pq.read_table(file_path, columns=[column]).column(column).to_pylist() if v is not None]
        return (min(values), max(values)) if values else (None, None)

    message = failure(check_column_range, reads_rows)
    assert "unreadable" in message and "only its footer" in message, message


def test_lab01_a_range_from_spark_is_refused(spark, seed):
    from pyspark.sql import functions as F

    def asks_spark(file_path, column):
        row = spark.read.parquet(file_path).agg(F.min(column), F.max(column)).collect()[0]
        return row[0], row[1]

    message = failure(check_column_range, asks_spark)
    assert "started a Spark job" in message, message


def test_lab01_a_range_that_leaves_a_session_setting_behind_is_refused(spark):
    key = "spark.sql.parquet.aggregatePushdown"

    def switches_it_on(file_path, column):
        spark.conf.set(key, "true")
        return column_range(file_path, column)

    try:
        message = failure(check_column_range, switches_it_on)
    finally:
        spark.conf.unset(key)
    assert f"left the session setting {key}" in message, message


def test_lab01_a_range_with_column_positions_fitted_to_the_example_fails(spark, seed):
    positions = {"id": 0, "price": 1, "name": 2}

    def fixed_positions(file_path, column):
        meta = pq.ParquetFile(file_path).metadata
        stats = [meta.row_group(i).column(positions.get(column, 0)).statistics for i in range(meta.num_row_groups)]
        known = [s for s in stats if s.has_min_max]
        return (min(s.min for s in known), max(s.max for s in known)) if known else (None, None)

    message = failure(check_column_range, fixed_positions)
    assert "a generated table" in message, message
