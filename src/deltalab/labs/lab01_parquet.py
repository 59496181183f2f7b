"""Lab 01 (Parquet files): row counts and column ranges from Parquet footers, checked against Spark.

Each check runs the learner's function on three kinds of file, and compares every answer with what
Spark computes by reading the rows (``count``, ``min`` and ``max`` over each file, one query):

* the data files of the lab's example table (built once per process, several row groups each);
* the data files of a table generated afresh for each run (:func:`deltalab.labs.tables.check_seed`):
  one to three files, partitioned by values a path must escape or not, about 4 to 12 row groups
  each, the columns in a random order; a string column whose values are longer than the 32 characters
  Delta keeps in its log's statistics and share a longer prefix, so the log's ``minValues`` are not
  the footer's; and a nullable column with at least one row group of nulls only (sometimes a
  whole file of them);
* a copy of one of those files whose data pages are overwritten with garbage: its footer reads, its
  rows cannot be read. The exercise says "from the footer, no reading of rows", so an answer that
  reads rows fails there, and so does one that starts a Spark job.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from deltalab.files import spark_files
from deltalab.labs.report import CheckFailed, passed, short_repr
from deltalab.labs.student import call_student, exercise_check, lab_spark, spark_jobs_started
from deltalab.labs.tables import AWKWARD_VALUES, build_once, check_seed, fresh_dir
from deltalab.locations import file_name
from deltalab.session import temporary_conf

__all__ = ["CheckFailed", "check_column_range", "check_footer_row_count"]

#: Delta keeps this many characters of a string in its log's statistics (``dataSkippingStringPrefixLength``).
DELTA_STRING_PREFIX = 32


@dataclass
class _File:
    """One Parquet file a check runs the learner's function on, and what Spark says about it."""

    path: str
    rows: int
    ranges: dict[str, tuple[Any, Any]]
    what: str                        # how a message names the file
    seed: int | None = None          # the seed of the generated table it belongs to (None: the example)
    damaged: bool = False            # data pages overwritten: only the footer can be read
    read_only: list[str] = field(default_factory=list)


def _spark_facts(spark: Any, files: list[str], columns: list[str]) -> dict[str, tuple[int, dict[str, tuple[Any, Any]]]]:
    """Spark's row count and (min, max) of every column, for each file (by file name), in one query."""
    from pyspark.sql import functions as F

    aggregates = [F.count(F.lit(1)).alias("rows")]
    for index, column in enumerate(columns):
        aggregates += [F.min(column).alias(f"min{index}"), F.max(column).alias(f"max{index}")]
    grouped = spark.read.parquet(*files).groupBy(F.col("_metadata.file_path").alias("file")).agg(*aggregates)
    facts = {}
    for row in grouped.collect():
        ranges = {column: (row[f"min{index}"], row[f"max{index}"]) for index, column in enumerate(columns)}
        facts[file_name(row["file"])] = (int(row["rows"]), ranges)
    return facts


def _files_with_facts(spark: Any, table: Path, columns: list[str], what: str, seed: int | None) -> list[_File]:
    """The data files Spark reads for the Delta table at ``table``, each with Spark's facts."""
    files = [str(table / relative) for relative in spark_files(spark, table, relative=True)]
    facts = _spark_facts(spark, files, columns)
    return [_File(f, *facts[file_name(f)], what=what, seed=seed, read_only=[str(table)]) for f in files]


# ------------------------------------------------------------------------------------ the example


def _example_files(spark: Any) -> list[_File]:
    """The example table's data files and Spark's facts about them (built once per process)."""
    return build_once("lab01", lambda folder: _build_example(spark, folder),
                      intact=lambda files: all(Path(f.path).exists() for f in files))


def _build_example(spark: Any, folder: Path) -> list[_File]:
    """Two data files of 1,500 rows (id, price, name), each cut into several row groups."""
    path = folder / "prices"
    df = spark.range(0, 3000).selectExpr(
        "id", "round(rand(1) * 1000, 2) AS price", "concat('item-', CAST(id % 97 AS STRING)) AS name"
    )
    # A small Parquet block size (read from the session's Hadoop settings) cuts each file into
    # several row groups, so answers that read only the first row group are caught.
    with temporary_conf(spark, {"parquet.block.size": "8192"}):
        df.repartition(2).write.format("delta").save(str(path))
    return _files_with_facts(spark, path, ["id", "price", "name"], "a data file of the example table", None)


# ------------------------------------------------------------------------------- generated files


def _generated_files(spark: Any, folder: Path, seed: int) -> list[_File]:
    """The data files of a table :func:`_write_generated` writes for ``seed``, plus a damaged copy
    of one of them (:func:`_damaged_copy`), each with Spark's facts (the copy: its original's)."""
    rng = random.Random(seed)
    table = folder / "generated"
    columns = _write_generated(spark, table, rng)
    files = _files_with_facts(spark, table, columns, "a data file of a generated table", seed)
    original = rng.choice(files)
    copy = _damaged_copy(Path(original.path), folder / "footer_only", rng)
    damaged = _File(str(copy), original.rows, original.ranges, seed=seed, damaged=True,
                    what="a file whose data pages are unreadable (only its footer is intact)",
                    read_only=[str(copy.parent)])
    return [*files, damaged]


def _write_generated(spark: Any, table: Path, rng: random.Random) -> list[str]:
    """Write a Delta table whose shape ``rng`` chooses; return its data files' columns in file order.

    Columns ``id`` (BIGINT), ``price`` (DOUBLE), ``qty`` (INT, negative too), ``name`` (STRING: a
    shared prefix of 33-60 characters plus a base-36 suffix, so Delta's 32-character statistics
    differ from the footer's) and ``note`` (STRING, null over a stretch of rows longer than a row
    group, and in the whole of one file when ``rng`` says so), in a random order. Rows are written in
    ``id`` order, so the other columns' extremes sit anywhere in a file. Either one to three files of
    one task each, or one task partitioned by ``city`` (two or three values from ``AWKWARD_VALUES``).
    """
    salt = rng.randrange(1, 10**6)
    prefix = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz-/") for _ in range(rng.randint(33, 60)))
    rows_per_file = rng.randint(600, 1200)
    partitioned = rng.random() < 0.5
    if partitioned:
        cities = rng.sample(AWKWARD_VALUES, rng.randint(2, 3))
        files, tasks = len(cities), 1
        city = "element_at(array({}), CAST(pmod(id, {}) + 1 AS INT))".format(
            ", ".join(f"'{c}'" for c in cities), len(cities))
        position, file_index = f"id div {len(cities)}", f"pmod(id, {len(cities)})"
    else:
        files = tasks = rng.randint(1, 3)
        position, file_index = f"pmod(id, {rows_per_file})", f"id div {rows_per_file}"
    null_from = rng.randint(0, rows_per_file // 3)
    null_to = null_from + rng.randint(rows_per_file // 3, rows_per_file // 2)
    all_null_file = rng.randrange(files) if files > 1 and rng.random() < 0.5 else -1
    columns = ["id", "price", "qty", "name", "note"]
    rng.shuffle(columns)
    expressions = {
        "id": "id",
        "price": f"CAST(pmod(xxhash64(id, {salt}), 1000000) AS DOUBLE) / 100",
        "qty": f"CAST(pmod(xxhash64(id, {salt + 1}), 20001) - 10000 AS INT)",
        "name": f"concat('{prefix}', lower(conv(pmod(xxhash64(id, {salt + 2}), 100000000000), 10, 36)))",
        "note": (f"CASE WHEN {file_index} = {all_null_file} OR {position} BETWEEN {null_from} AND {null_to} "
                 f"THEN NULL ELSE concat('note ', CAST(pmod(xxhash64(id, {salt + 3}), 1000) AS STRING)) END"),
    }
    frame = spark.range(0, rows_per_file * files, 1, tasks).selectExpr(
        *[f"{expressions[c]} AS {c}" for c in columns], *([f"{city} AS city"] if partitioned else []))
    writer = frame.sortWithinPartitions(*(["city", "id"] if partitioned else ["id"])).write.format("delta")
    if partitioned:
        writer = writer.partitionBy("city")
    with temporary_conf(spark, {"parquet.block.size": str(rng.choice([6144, 8192, 10240]))}):
        writer.save(str(table))
    return columns


def _damaged_copy(original: Path, folder: Path, rng: random.Random) -> Path:
    """A copy of ``original`` in ``folder``, under another name, whose bytes between the leading
    magic ``PAR1`` and the footer (every column chunk: page headers and data) are ``0xff``: pyarrow
    still reads its metadata, but no page header can be decoded (0xff is no Thrift field type), so
    reading any column fails, in pyarrow and in Spark."""
    data = bytearray(original.read_bytes())
    footer_length = int.from_bytes(data[-8:-4], "little")
    end = len(data) - 8 - footer_length
    data[4:end] = b"\xff" * (end - 4)
    folder.mkdir(parents=True, exist_ok=True)
    copy = folder / f"part-00000-{rng.getrandbits(128):032x}.c000.snappy.parquet"  # not the original's name
    copy.write_bytes(bytes(data))
    return copy


def _files(spark: Any, check: str, seed: int) -> Iterator[_File]:
    """The files one run of ``check`` uses: the example's, then (built only when an answer got that
    far) a generated table's and the damaged copy."""
    yield from _example_files(spark)
    yield from _generated_files(spark, fresh_dir(f"lab01_{check}"), seed)


# ---------------------------------------------------------------------------------- calling code


def _call(check: str, func: Callable[..., Any], name: str, spark: Any, file: _File, *args: Any, hint: str) -> Any:
    """Call the learner's function on ``file`` (plus ``args``) as :func:`call_student` does, and
    refuse an answer that started a Spark job: the exercise is to read the footer yourself."""
    if file.damaged:
        hint = (f"{file_name(file.path)}'s column chunks cannot be read, only its footer: use "
                "pyarrow.parquet.ParquetFile(path).metadata and no reading of rows (read_table, Spark).")
    jobs = spark_jobs_started()
    answer = call_student(check, func, name, file.path, *args, hint=hint, read_only=file.read_only,
                          seed=file.seed, on=None if file.seed is None else file.what)
    if spark_jobs_started() != jobs:
        raise CheckFailed(
            check,
            f"{name} started a Spark job on {file.what}; the exercise is to answer from the footer, "
            "without reading rows.",
            "open the file with pyarrow.parquet.ParquetFile(path) and use its .metadata only; no Spark, no read_table.",
            seed=file.seed,
        )
    return answer


def _file_label(file: _File) -> str:
    return f"{file.what} ({file_name(file.path)})"


# ----------------------------------------------------------------------------------- the checks


@exercise_check
def check_footer_row_count(footer_row_count: Callable[[str], int]) -> None:
    """``footer_row_count(file)`` against Spark counting the rows of each file (example, generated, damaged)."""
    check = "footer_row_count"
    spark = lab_spark()
    seed = check_seed()
    for file in _files(spark, check, seed):
        answer = _call(check, footer_row_count, "footer_row_count", spark, file,
                       hint="pyarrow.parquet.ParquetFile(path).metadata has the footer: num_rows, row groups.")
        if isinstance(answer, bool) or not isinstance(answer, int):
            raise CheckFailed(check, f"footer_row_count returned {short_repr(answer)}; it must return an int.",
                              "the `return` line: the footer's num_rows is already an int.", seed=file.seed)
        if answer != file.rows:
            raise CheckFailed(
                check,
                f"on {_file_label(file)} footer_row_count returned {answer}, not the number of rows Spark counts.",
                "a file has several row groups of different sizes: the file's total is metadata.num_rows "
                "(or the sum of metadata.row_group(i).num_rows over every i).",
                seed=file.seed,
            )
    passed(check, "matches Spark's row count for every data file, from the footer alone.")


def _range_fix(file: _File, column: str, answer: tuple[Any, Any]) -> str:
    """Where to look, for a (min, max) of ``column`` that is not Spark's."""
    low, high = answer
    expected_low, expected_high = file.ranges[column]
    if expected_low is None:
        return ("this column holds no value in this file, only nulls, so no row group has a min or max: "
                "return (None, None), as Spark's min() and max() do.")
    if (low, high) == (expected_high, expected_low):
        return "the pair is the wrong way round: return (min, max)."
    if any(value is not None and type(value) is not type(expected_low) for value in (low, high)):
        wrong = next(type(v).__name__ for v in (low, high) if v is not None and type(v) is not type(expected_low))
        return (f"the pair holds {wrong} values where Spark's min and max of this column are "
                f"{type(expected_low).__name__}: read the statistics of the column named `column` (its index in "
                "metadata.schema.names), with statistics.min and .max (min_raw and max_raw are bytes).")
    if low is None or high is None:
        return ("some row groups of this column hold only nulls and have no min or max "
                "(statistics.has_min_max is False): leave them out, and take the min and max of the others.")
    cut = [v for v in (low, high) if isinstance(v, str) and len(v) <= DELTA_STRING_PREFIX + 1]
    if cut and isinstance(expected_low, str) and len(expected_low) > DELTA_STRING_PREFIX:
        return (f"a string's min and max in the Delta log are cut to {DELTA_STRING_PREFIX} characters; the Parquet "
                "footer keeps whole values: read the row groups' statistics in the footer, not the log.")
    return ("each row group has its own statistics: take the smallest min and the largest max over all row "
            "groups (metadata.row_group(i).column(j).statistics for every i), of the column named `column`.")


@exercise_check
def check_column_range(column_range: Callable[[str, str], tuple]) -> None:
    """``column_range(file, column) -> (min, max)`` from row-group statistics, against Spark's min and
    max of every column of every file (example, generated, damaged)."""
    check = "column_range"
    spark = lab_spark()
    seed = check_seed()
    for file in _files(spark, check, seed):
        for column in file.ranges:
            answer = _call(check, column_range, "column_range", spark, file, column,
                           hint="metadata.row_group(i).column(j).statistics has min and max for each row group; "
                                "one whose values are all null has none (statistics.has_min_max is False), and "
                                "a column with no value in the whole file gives (None, None).")
            if not isinstance(answer, (tuple, list)) or len(answer) != 2:
                raise CheckFailed(check, f"column_range returned {short_repr(answer)}; it must return a pair "
                                  "(min, max).", "the `return` line: return lowest, highest.", seed=file.seed)
            if tuple(answer) != file.ranges[column]:
                raise CheckFailed(
                    check,
                    f"for column {column!r} of {_file_label(file)} column_range returned "
                    f"{short_repr(tuple(answer), 120)}, not Spark's min and max.",
                    _range_fix(file, column, tuple(answer)),
                    seed=file.seed,
                )
    passed(check, "min and max from the row-group statistics match Spark for every file and column, "
                  "long strings and all-null row groups included.")
