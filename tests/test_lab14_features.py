"""The lab 14 checks (deltalab.labs.lab14_features): the solution passes at seeds that cover the edge cases,
and each kind of wrong answer is refused with a message that says what is wrong and never shows the expected
answer.

The wrong answers run on the tables and cases of this run's seed (the solution's run builds them), which holds deletion vectors
on a table with row tracking, rows rewritten by UPDATE or MERGE, row tracking enabled on a table with data, a
legacy protocol upgraded to writer 7, row tracking turned on, and a change that normalizes to a legacy protocol.
"""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import unquote

import pytest

from deltalab.labs import lab14_features as lab
from deltalab.labs.tables import SEED_ENV
from deltalab.labs.lab14_features import (FEATURE_OF_PROPERTY, LEGACY_WRITER_FEATURES, check_protocol_after,
                                          check_row_ids)
from deltalab.log import deleted_rows, replay_log
from lab_testing import solution_and_student_version
from lab_testing import check_failure as failure
from lab_testing import run_seed, solution_namespace, solution_seeds, stub

# The labs' tests run in make test-labs (and those of its solutions at their seeds, marked seeds too, in
# make test-seeds), not in make test: tests/README.md says why.
pytestmark = pytest.mark.labs

#: The lab's solution on tables of this run's seed, then its student version (tests/support/lab_testing.py).
test_the_solution_passes_and_the_student_version_says_what_is_missing = solution_and_student_version("lab14_features")

SOURCE = Path(__file__).resolve().parents[1] / "labs" / "source" / "lab14_features" / "lab14_features.ipynb"
SEEDS = (3, 4)
#: The wrong answers run on the tables of this run's seed, which the solution's run above built (lab_testing.run_seed).
TEST_SEED = run_seed()


@pytest.fixture(scope="module")
def solution() -> dict:
    return solution_namespace(SOURCE, ("setup", "row_ids", "protocol_after"))


@pytest.fixture
def at_test_seed(monkeypatch):
    """The checks' tables of this run's seed for one test."""
    monkeypatch.setenv(SEED_ENV, str(TEST_SEED))


@pytest.mark.parametrize("seed", solution_seeds(SEEDS))
def test_lab14_the_solution_passes_at_seeds_that_cover_the_edge_cases(spark, solution, capsys, monkeypatch, seed):
    monkeypatch.setenv(SEED_ENV, str(seed))
    check_row_ids(solution["row_ids"])
    check_protocol_after(solution["protocol_after"])
    out = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in out] == ["✓ row_ids", "✓ protocol_after"], out


def test_lab14_the_stubs_are_not_written_yet(spark, at_test_seed):
    assert "row_ids is not written yet" in failure(check_row_ids, stub)
    assert "protocol_after is not written yet" in failure(check_protocol_after, stub)


def test_lab14_the_run_seed_has_the_tables_the_wrong_answers_need(spark, at_test_seed):
    tables = lab.row_tables(spark, TEST_SEED)
    assert any(t.deletion_vectors for t in tables) and any(not t.deletion_vectors for t in tables)
    assert any(add.get("deletionVector") for t in tables for add in replay_log(t.path).files.values()), \
        "a live file with a deletion vector"
    cases = lab.protocol_cases(spark, TEST_SEED)
    assert any(c.before["minWriterVersion"] in (2, 3, 4) and c.after["minWriterVersion"] == 7 for c in cases), \
        "a legacy protocol upgraded to writer 7"
    assert any(c.after["minWriterVersion"] < 7 and c.properties for c in cases), "a change that stays or goes legacy"


# ------------------------------------------------------------------------------ row_ids


def _row_ids(table_path: str, *, dvs: bool = True, stored: bool = True, physical: bool = True,
             default_version: bool = True, stored_version: bool = True, mapping: bool = True) -> dict[int, tuple[int, int]]:
    """The solution's reading, with one of its steps left out or done wrong."""
    import pyarrow.parquet as pq

    state = replay_log(table_path)
    configuration = state.metadata.get("configuration") or {}
    id_column = configuration["delta.rowTracking.materializedRowIdColumnName"]
    version_column = configuration["delta.rowTracking.materializedRowCommitVersionColumnName"]
    key = next(f["metadata"].get("delta.columnMapping.physicalName", f["name"]) if mapping else f["name"]
               for f in json.loads(state.metadata["schemaString"])["fields"] if f["name"] == "key")
    answer = {}
    for add in state.files.values():
        rows = pq.read_table(Path(table_path) / unquote(add["path"]))
        deleted = set(deleted_rows(table_path, add.get("deletionVector"))) if dvs else set()
        keys = rows.column(key).to_pylist()
        ids = rows.column(id_column).to_pylist() if stored and id_column in rows.column_names else [None] * len(keys)
        versions = (rows.column(version_column).to_pylist() if stored_version and version_column in rows.column_names
                    else [None] * len(keys))
        live = 0
        for position, value in enumerate(keys):
            if position in deleted:
                continue
            offset = position if physical else live
            live += 1
            answer[value] = (ids[position] if ids[position] is not None else add["baseRowId"] + offset,
                             versions[position] if versions[position] is not None
                             else (add["defaultRowCommitVersion"] if default_version else state.version))
    return answer


@pytest.mark.parametrize("wrong, expected_words", [
    ({"dvs": False}, ("deleted_rows", "marks deleted")),                        # deleted rows kept
    ({"stored": False}, ("materialized row id column",)),                       # a rewritten row's stored id ignored
    ({"physical": False}, ("the deleted ones too",)),                           # positions among surviving rows
    ({"default_version": False}, ("defaultRowCommitVersion",)),                 # the table's version for every row
    ({"stored_version": False}, ("materialized row commit version column",)),   # a copied row's stored version ignored
    ({"mapping": False}, ("raised KeyError", "physical name")),                 # the logical name under column mapping
])
def test_lab14_each_row_rule_left_out_is_named(spark, at_test_seed, wrong, expected_words):
    message = failure(check_row_ids, lambda path: _row_ids(path, **wrong))
    assert all(words in message for words in expected_words), message


def test_lab14_the_examples_rows_pasted_are_not_another_tables(spark, at_test_seed):
    pasted = dict(lab._example_rows(spark).expected)   # right on the example, copied from its output
    message = failure(check_row_ids, lambda path: pasted)
    assert "not this table's rows" in message, message


def test_lab14_spark_is_refused_and_answers_are_dicts(spark, at_test_seed):
    def from_spark(path):
        rows = spark.read.format("delta").load(path).selectExpr("key", "_metadata.row_id", "_metadata.row_commit_version")
        return {r[0]: (r[1], r[2]) for r in rows.collect()}

    assert "Spark job(s)" in failure(check_row_ids, from_spark)
    assert "it must return" not in failure(check_row_ids, lambda path: _row_ids(path, dvs=False))
    assert "two ints" in failure(check_row_ids, lambda path: list(_row_ids(path).items()))


def test_lab14_messages_never_show_the_expected_row_ids(spark, at_test_seed):
    message = failure(check_row_ids, lambda path: {key: (0, 0) for key in _row_ids(path)})
    expected = {value for t in lab.row_tables(spark, TEST_SEED) for pair in t.expected.values() for value in pair}
    assert not any(f"({a}, {b})" in message for a in expected for b in expected), message


# ------------------------------------------------------------------------------ protocol_after

READER_WRITER = {"deletionVectors", "columnMapping", "typeWidening", "v2Checkpoint", "vacuumProtocolCheck",
                 "variantShredding-preview"}


def _protocol_after(protocol, properties, *, legacy_listed=True, requirements=True, normalize=True,
                    false_is_off=True, reader_lists_all=False, writer_version_asked=True):
    """The solution's rule, with one of its parts left out or done wrong."""
    if protocol["minWriterVersion"] == 7:
        features = set(protocol.get("writerFeatures") or []) | set(protocol.get("readerFeatures") or [])
    elif legacy_listed:
        features = set(LEGACY_WRITER_FEATURES[protocol["minWriterVersion"]])
        if protocol["minReaderVersion"] < 2:
            features.discard("columnMapping")
    else:
        features = set()
    for key, value in properties.items():
        if key.startswith("delta.feature."):
            features.add(key[len("delta.feature."):])
        elif key == "delta.minWriterVersion":
            if writer_version_asked:
                features |= set(LEGACY_WRITER_FEATURES[int(value)]) - (
                    {"columnMapping"} if protocol["minReaderVersion"] < 2 else set())
        elif key in FEATURE_OF_PROPERTY and (value != "false" or not false_is_off):
            features.add(FEATURE_OF_PROPERTY[key])
    if requirements and "rowTracking" in features:
        features.add("domainMetadata")
    if normalize:
        for reader, writer in [(1, 1), (1, 2), (1, 3), (1, 4), (2, 5), (2, 6)]:
            if features == set(LEGACY_WRITER_FEATURES[writer]):
                return {"minReaderVersion": reader, "minWriterVersion": writer}
    readers = features & READER_WRITER
    result = {"minReaderVersion": 3 if readers - {"columnMapping"} else 2 if readers else 1, "minWriterVersion": 7}
    if result["minReaderVersion"] == 3:
        result["readerFeatures"] = sorted(features if reader_lists_all else readers)
    result["writerFeatures"] = sorted(features)
    return result


@pytest.mark.parametrize("wrong, expected_words", [
    ({"legacy_listed": False}, "legacy writer version implies features"),   # the old bundle forgotten at writer 7
    ({"requirements": False}, "rowTracking needs domainMetadata"),
    ({"normalize": False}, "that legacy protocol"),                         # a legacy set written with lists
    ({"reader_lists_all": True}, "no writer-only one"),
    ({"writer_version_asked": False}, "asks for that legacy version's features"),
    ({"false_is_off": False}, "'false' turns nothing on"),
])
def test_lab14_each_protocol_rule_left_out_is_named(spark, at_test_seed, wrong, expected_words):
    message = failure(check_protocol_after, lambda p, props: _protocol_after(p, props, **wrong))
    assert expected_words in message, message


def test_lab14_the_answer_is_not_asked_of_spark(spark, at_test_seed, tmp_path):
    def by_running(protocol, properties):
        path = tmp_path / f"t{len(list(tmp_path.iterdir()))}"
        spark.sql(f"CREATE TABLE delta.`{path}` (key BIGINT) USING delta")
        spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ({lab._shown(properties)})")
        return dict(replay_log(str(path)).protocol)

    assert "Spark job(s)" in failure(check_protocol_after, by_running)


def test_lab14_false_adds_nothing():
    case = lab.ProtocolCase("plain", {"minReaderVersion": 1, "minWriterVersion": 2},
                            {"delta.enableDeletionVectors": "false"}, {"minReaderVersion": 1, "minWriterVersion": 2})
    wrong = _protocol_after(case.before, case.properties, false_is_off=False)
    assert "'false' turns nothing on" in lab._protocol_fix(case, wrong)
