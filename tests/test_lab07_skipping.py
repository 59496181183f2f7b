"""The lab 07 checks (deltalab.labs.lab07_skipping): the solution passes at seeds that together cover
the edge cases, the files the check compares with are the files Spark's scan reads, and each kind of
wrong answer is refused with a message that names the rule it breaks, never the expected files.

Each wrong answer is the solution with one rule changed, for the predicates that rule is about.
Generated tables are built once per process and seed, so the tests that need one share it.
"""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import quote, unquote

import pytest

from deltalab.labs import lab07_skipping as lab
from deltalab.labs.tables import SEED_ENV
from deltalab.labs.lab07_skipping import check_files_to_read, check_stats_columns, files_spark_reads
from deltalab.log import replay_log
from deltalab.skipping import scan_metrics
from lab_testing import solution_and_student_version
from lab_testing import check_failure as failure
from lab_testing import solution_namespace, solution_seeds, stub

# The labs' tests run in make test-labs (and those of its solutions at their seeds, marked seeds too, in
# make test-seeds), not in make test: tests/README.md says why.
pytestmark = pytest.mark.labs

#: The lab's solution on tables of a fresh seed, then its student version (tests/support/lab_testing.py).
test_the_solution_passes_and_the_student_version_says_what_is_missing = solution_and_student_version("lab07_skipping")

SOURCE = Path(__file__).resolve().parents[1] / "labs" / "source" / "lab07_skipping" / "lab07_skipping.ipynb"
#: 2: a table partitioned by strings with a NULL partition, deletion vectors and a checkpoint; 13: by an
#: INT column, without deletion vectors or checkpoint (test_lab07_the_seeds_cover_the_edge_cases). For
#: stats_columns, 2 sets dataSkippingNumIndexedCols to -1, 13 both properties (the list wins); the example
#: table has neither and 35 leaves. 1 lists columns and struct fields, 27 indexes the first 14 leaves.
SEEDS = (2, 13)
STRING_SEED, INT_SEED = 2, 13
LISTED_SEED, COUNTED_SEED = 1, 27


@pytest.fixture(scope="module")
def solution() -> dict:
    return solution_namespace(SOURCE, ("setup", "files_to_read", "stats_columns"))


def partition_column(path: str) -> str:
    return replay_log(path).metadata["partitionColumns"][0]


def data_leaf(path: str, predicate: tuple, kind: str) -> bool:
    return predicate[0] == kind and predicate[1] != partition_column(path)


def file_stats(path: str, relative: str) -> dict:
    return next(add["stats"] for (p, _), add in replay_log(path).files.items() if unquote(p) == relative)


@pytest.mark.parametrize("seed", solution_seeds(SEEDS))
def test_lab07_the_solution_passes_at_seeds_that_cover_the_edge_cases(spark, solution, capsys, monkeypatch, seed):
    monkeypatch.setenv(SEED_ENV, str(seed))
    check_files_to_read(solution["files_to_read"])
    check_stats_columns(solution["stats_columns"])
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("✓ files_to_read: ") and out[1].startswith("✓ stats_columns: "), out


@pytest.mark.seeds
def test_lab07_the_seeds_cover_the_edge_cases(spark):
    facts = []
    for seed in SEEDS:                      # one folder for the generated table: read each before the next
        table = lab._generated_table(spark, seed)
        state = replay_log(table.path)
        facts.append({"int partition": table.int_partition,
                      "deletion vectors": state.metadata.get("configuration", {}).get("delta.enableDeletionVectors"),
                      "checkpoint": state.checkpoint_version is not None, "removed files": bool(state.tombstones),
                      "null partition": None in {a["partitionValues"][table.partition_column] for a in state.files.values()}})
    for fact, values in {"int partition": {True, False}, "deletion vectors": {"true", "false"},
                         "checkpoint": {True, False}, "removed files": {True}, "null partition": {True}}.items():
        assert values <= {f[fact] for f in facts}, (fact, facts)


def test_lab07_the_stubs_are_not_written_yet(spark):
    for check in (check_files_to_read, check_stats_columns):
        message = failure(check, stub)
        assert "not written yet" in message, message


def test_lab07_the_files_compared_with_are_the_files_the_scan_reads(spark):
    example = lab._example_table(spark)
    skipped = []
    for predicate in example.predicates:
        query = spark.read.format("delta").load(example.path).where(lab.predicate_sql(predicate))
        metrics = scan_metrics(query)
        assert metrics.files_read == len(files_spark_reads(spark, example.path, predicate)), predicate
        assert set(metrics.input_files) == files_spark_reads(spark, example.path, predicate)
        skipped.append(metrics.files_read < metrics.files_total)
    assert any(skipped) and not all(skipped), "some of the example's filters skip files, the IN list reads them all"


def test_lab07_predicate_sql_says_what_the_predicate_means():
    assert lab.predicate_sql(("and", ("=", "city", "a'b"), ("in", "id", (3, 7)))) == "(`city` = 'a\\'b' AND `id` IN (3, 7))"
    assert lab.predicate_sql(("or", ("is null", "x"), ("starts with", "n", "ab"))) == "(`x` IS NULL OR startswith(`n`, 'ab'))"


# ------------------------------------------------------------------------------ wrong answers


def test_lab07_in_tested_value_by_value_is_told_the_range_rule(spark, solution):
    def value_by_value(path, predicate):
        if not data_leaf(path, predicate, "in"):
            return solution["files_to_read"](path, predicate)
        return {p for p in solution["files_to_read"](path, ("is not null", predicate[1]))
                if any(file_stats(path, p)["minValues"][predicate[1]] <= v <= file_stats(path, p)["maxValues"][predicate[1]]
                       for v in predicate[2])}

    message = failure(check_files_to_read, value_by_value)
    assert "IN list as one range" in message and "missing" in message, message


def test_lab07_int_partition_values_compared_as_strings_are_told(spark, solution, monkeypatch):
    monkeypatch.setenv(SEED_ENV, str(INT_SEED))

    def as_strings(path, predicate):
        if predicate[0] in ("<", "<=", ">", ">=") and predicate[1] == partition_column(path):
            compare = {"<": str.__lt__, "<=": str.__le__, ">": str.__gt__, ">=": str.__ge__}[predicate[0]]
            return {unquote(p) for (p, _), add in replay_log(path).files.items()
                    if add["partitionValues"][predicate[1]] is not None
                    and compare(add["partitionValues"][predicate[1]], str(predicate[2]))}
        return solution["files_to_read"](path, predicate)

    message = failure(check_files_to_read, as_strings)
    assert "partitionValues are strings" in message and "INT column" in message, message


@pytest.mark.parametrize("seed", [STRING_SEED, INT_SEED])
def test_lab07_a_partition_on_the_bound_of_le_or_ge_is_read(spark, solution, monkeypatch, seed):
    """Every seed asks <= the partition column's smallest value and >= its largest: a strict comparison reads none."""
    monkeypatch.setenv(SEED_ENV, str(seed))

    def strict(path, predicate):
        if predicate[0] in ("<=", ">=") and predicate[1] == partition_column(path):
            return solution["files_to_read"](path, (predicate[0][0], *predicate[1:]))
        return solution["files_to_read"](path, predicate)

    message = failure(check_files_to_read, strict)
    assert "holds for the partitions whose value is v itself" in message, message


def test_lab07_a_null_int_partition_value_is_not_a_number(spark, solution, monkeypatch):
    """The INT-partitioned table has a NULL partition too: int() of every partition value raises there."""
    monkeypatch.setenv(SEED_ENV, str(INT_SEED))

    def converts_every_value(path, predicate):
        column = partition_column(path)
        if column == "day":
            [int(add["partitionValues"][column]) for add in replay_log(path).files.values()]
        return solution["files_to_read"](path, predicate)

    message = failure(check_files_to_read, converts_every_value)
    assert "raised TypeError" in message and "partitioned by `day`" in message, message


def test_lab07_a_null_partition_taken_as_different_is_told_sqls_null_rule(spark, solution, monkeypatch):
    monkeypatch.setenv(SEED_ENV, str(STRING_SEED))

    def null_differs(path, predicate):
        answer = solution["files_to_read"](path, predicate)
        if predicate[0] == "!=" and predicate[1] == partition_column(path):
            answer |= solution["files_to_read"](path, ("is null", predicate[1]))
        return answer

    message = failure(check_files_to_read, null_differs)
    assert "partition column" in message and "NULL partition value matches no comparison" in message, message


def test_lab07_a_file_of_nulls_only_read_for_a_comparison_is_told(spark, solution, monkeypatch):
    monkeypatch.setenv(SEED_ENV, str(STRING_SEED))

    def reads_all_null_files(path, predicate):
        answer = solution["files_to_read"](path, predicate)
        if predicate[0] in ("=", "<", "<=", ">", ">=", "!=") and predicate[1] != partition_column(path):
            answer |= lab._all_null_files(path, predicate[1])
        return answer

    message = failure(check_files_to_read, reads_all_null_files)
    assert "null in every row" in message, message


def test_lab07_not_equal_read_everywhere_is_told_when_delta_skips(spark, solution, monkeypatch):
    monkeypatch.setenv(SEED_ENV, str(STRING_SEED))

    def never_skips_not_equal(path, predicate):
        if data_leaf(path, predicate, "!="):
            return {unquote(p) for p, _ in replay_log(path).files}
        return solution["files_to_read"](path, predicate)

    message = failure(check_files_to_read, never_skips_not_equal)
    assert "minValues and maxValues both equal v" in message, message


def test_lab07_a_prefix_compared_with_whole_strings_is_told(spark, solution, monkeypatch):
    monkeypatch.setenv(SEED_ENV, str(STRING_SEED))

    def whole_strings(path, predicate):
        if not data_leaf(path, predicate, "starts with"):
            return solution["files_to_read"](path, predicate)
        return {p for p in solution["files_to_read"](path, ("is not null", predicate[1]))
                if file_stats(path, p)["minValues"][predicate[1]] <= predicate[2] <= file_stats(path, p)["maxValues"][predicate[1]]}

    message = failure(check_files_to_read, whole_strings)
    assert "min[:len(s)] <= s <= max[:len(s)]" in message, message


def test_lab07_removed_files_are_not_read(spark, solution):
    def every_file_ever_added(path, predicate):
        added = set()
        for commit in sorted((Path(path) / "_delta_log").glob("*.json")):
            added |= {unquote(json.loads(line)["add"]["path"]) for line in commit.read_text().splitlines() if '"add"' in line[:8]}
        return solution["files_to_read"](path, predicate) | added

    message = failure(check_files_to_read, every_file_ever_added)
    assert "live files" in message, message


def test_lab07_paths_are_decoded_once(spark, solution, monkeypatch):
    monkeypatch.setenv(SEED_ENV, str(STRING_SEED))

    def encoded(path, predicate):
        return {quote(p) for p in solution["files_to_read"](path, predicate)}

    message = failure(check_files_to_read, encoded)
    assert "not URL-encoded" in message, message


def test_lab07_asking_spark_is_refused(spark):
    def plans_the_query(path, predicate):
        query = spark.read.format("delta").load(path).where(lab.predicate_sql(predicate))
        return {uri.split(path, 1)[1].lstrip("/") for uri in query.inputFiles()}

    def runs_the_query(path, predicate):
        from pyspark.sql.functions import input_file_name

        rows = spark.read.format("delta").load(path).where(lab.predicate_sql(predicate)).select(input_file_name()).collect()
        return {unquote(row[0]).split(path, 1)[1].lstrip("/") for row in rows}

    def uses_the_checks_own_reader(path, predicate):
        return files_spark_reads(spark, path, predicate)

    assert "called pyspark.sql.classic.dataframe.inputFiles" in failure(check_files_to_read, plans_the_query)
    assert "ran Spark jobs" in failure(check_files_to_read, runs_the_query)
    assert "called deltalab.labs.lab07_skipping.files_spark_reads" in failure(check_files_to_read, uses_the_checks_own_reader)


def test_lab07_the_course_skipping_helpers_are_refused(spark, solution):
    def with_file_stats(path, predicate):
        from deltalab.skipping import file_stats as course_file_stats

        course_file_stats(path)
        return solution["files_to_read"](path, predicate)

    message = failure(check_files_to_read, with_file_stats)
    assert "called deltalab.skipping.file_stats" in message, message


# ------------------------------------------------------------------------------ stats_columns


def test_lab07_partition_columns_counted_as_data_are_told(spark, solution):
    def with_partitions(path):
        state = replay_log(path)
        return solution["stats_columns"](path) | set(state.metadata["partitionColumns"])

    message = failure(check_stats_columns, with_partitions)
    assert "partition columns get no statistics" in message, message


def test_lab07_a_struct_named_instead_of_its_fields_is_told(spark, solution):
    def top_level_names(path):
        return {name.split(".")[0] for name in solution["stats_columns"](path)}

    message = failure(check_stats_columns, top_level_names)
    assert "a struct's fields appear as their own columns" in message, message


def test_lab07_booleans_and_arrays_given_a_min_and_max_are_told(spark, solution):
    def every_indexed_leaf(path):
        fields = json.loads(replay_log(path).metadata["schemaString"])["fields"]
        no_min_max = {f["name"] for f in fields if f["type"] in ("boolean", "binary") or isinstance(f["type"], dict)
                      and f["type"].get("type") in ("array", "map")}
        return solution["stats_columns"](path) | no_min_max

    message = failure(check_stats_columns, every_indexed_leaf)
    assert "booleans, binaries, arrays and maps get a nullCount only" in message, message


def first_leaves_with_min_max(path: str, count: int) -> set[str]:
    """The first ``count`` leaves of the data columns that take a min and a max: the count rule alone."""
    metadata = replay_log(path).metadata
    partitions = set(metadata["partitionColumns"])

    def leaves(columns, prefix=""):
        for column in columns:
            kind = column["type"]
            if isinstance(kind, dict) and kind.get("type") == "struct":
                yield from leaves(kind["fields"], prefix + column["name"] + ".")
            else:
                yield prefix + column["name"], kind

    fields = [f for f in json.loads(metadata["schemaString"])["fields"] if f["name"] not in partitions]
    first = list(leaves(fields))
    first = first if count < 0 else first[:count]
    return {name for name, kind in first if isinstance(kind, str) and kind not in ("boolean", "binary")}


def test_lab07_the_listed_columns_ignored_are_told(spark, solution, monkeypatch):
    monkeypatch.setenv(SEED_ENV, str(LISTED_SEED))

    def ignores_the_list(path):
        configuration = replay_log(path).metadata.get("configuration") or {}
        return first_leaves_with_min_max(path, int(configuration.get("delta.dataSkippingNumIndexedCols", 32)))

    message = failure(check_stats_columns, ignores_the_list)
    assert "delta.dataSkippingStatsColumns, when set, decides alone" in message, message


def test_lab07_names_listed_with_spaces_are_trimmed(spark, solution):
    """Every seed has a table whose dataSkippingStatsColumns has a space after each comma: an answer that splits on
    the commas without trimming keeps only the first name."""
    def untrimmed(path):
        listed = (replay_log(path).metadata.get("configuration") or {}).get("delta.dataSkippingStatsColumns")
        if listed is None or ", " not in listed:
            return solution["stats_columns"](path)
        names = listed.split(",")
        return {c for c in solution["stats_columns"](path) if any(c == n or c.startswith(n + ".") for n in names)}

    message = failure(check_stats_columns, untrimmed)
    assert "whose names Delta trims" in message, message


def test_lab07_the_count_ignored_is_told(spark, solution, monkeypatch):
    monkeypatch.setenv(SEED_ENV, str(COUNTED_SEED))

    def always_32(path):
        return first_leaves_with_min_max(path, 32)

    message = failure(check_stats_columns, always_32)
    assert "the first delta.dataSkippingNumIndexedCols leaf columns" in message, message


def test_lab07_a_fixed_list_of_columns_is_told_to_read_the_schema(spark):
    def the_examples_answer(path):
        return {"id", "address.city", "address.zip"} | {f"m{i:02d}" for i in range(27)} | {"not_a_column"}

    message = failure(check_stats_columns, the_examples_answer)
    assert "not a fixed list" in message, message
