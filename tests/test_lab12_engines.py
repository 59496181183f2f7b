"""The lab 12 checks (deltalab.labs.lab12_engines): the solution passes at seeds that cover the edge cases,
the feature sets the lab gives for delta-rs are what delta-rs does, and each kind of wrong answer is refused
with a message that says what is wrong and never shows the expected answer.

The wrong answers run on the tables of this run's seed (built once per process, shared with the solution's
run), which at every seed hold a legacy writer-6 protocol at reader 1, a column-mapped table at reader 2 /
writer 7, deletion vectors turned on after the first commit and type widening turned on after it.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from deltalab.jvm import protocol_features
from deltalab.labs import lab12_engines as lab
from deltalab.labs.tables import SEED_ENV
from deltalab.labs.lab12_engines import (DELTA_RS_READS, DELTA_RS_WRITES, check_delta_rs_can, check_features_needed,
                                         check_read_with_delta_rs)
from deltalab.workdir import workdir
from lab_testing import solution_and_student_version
from lab_testing import check_failure as failure
from lab_testing import run_seed, solution_namespace, solution_seeds, stub

# The labs' tests run in make test-labs (and those of its solutions at their seeds, marked seeds too, in
# make test-seeds), not in make test: tests/README.md says why.
pytestmark = pytest.mark.labs

#: The lab's solution on tables of a fresh seed, then its student version (tests/support/lab_testing.py).
test_the_solution_passes_and_the_student_version_says_what_is_missing = solution_and_student_version("lab12_engines")

SOURCE = Path(__file__).resolve().parents[1] / "labs" / "source" / "lab12_engines" / "lab12_engines.ipynb"
#: Every run has a reader 1 / writer 6 table, deletion vectors and type widening turned on after the first commit,
#: column mapping with a rename and listed features. 6 lists variantType (a reader feature delta-rs reads) and
#: domainMetadata (a writer feature it does not write), with a legacy reader 1 / writer 2; 7 lists
#: vacuumProtocolCheck (a reader feature delta-rs refuses) from writer 2 and from writer 4.
SEEDS = (6, 7)
#: The wrong answers run on the tables of this run's seed, which the solution's run above built (lab_testing.run_seed).
TEST_SEED = run_seed()


@pytest.fixture(scope="module")
def solution() -> dict:
    return solution_namespace(SOURCE, ("setup", "features_needed", "delta_rs_can", "read_with_delta_rs"))


@pytest.fixture
def at_test_seed(monkeypatch):
    """The checks' tables of this run's seed for one test."""
    monkeypatch.setenv(SEED_ENV, str(TEST_SEED))


@pytest.mark.parametrize("seed", solution_seeds(SEEDS))
def test_lab12_the_solution_passes_at_seeds_that_cover_the_edge_cases(spark, solution, capsys, monkeypatch, seed):
    monkeypatch.setenv(SEED_ENV, str(seed))
    check_features_needed(solution["features_needed"])
    check_delta_rs_can(solution["delta_rs_can"])
    check_read_with_delta_rs(solution["read_with_delta_rs"])
    out = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in out] == ["✓ features_needed", "✓ delta_rs_can", "✓ read_with_delta_rs"], out


def test_lab12_the_stubs_are_not_written_yet(spark, at_test_seed):
    assert "features_needed is not written yet" in failure(check_features_needed, stub)
    assert "delta_rs_can is not written yet" in failure(check_delta_rs_can, stub)
    assert "read_with_delta_rs is not written yet" in failure(check_read_with_delta_rs, stub)


def test_lab12_the_run_seed_has_the_tables_the_wrong_answers_need(spark, at_test_seed):
    protocols = [table.protocols[-1] for table in lab.engine_tables(spark, TEST_SEED)]
    assert {"minReaderVersion": 1, "minWriterVersion": 6} in protocols
    assert any(p["minReaderVersion"] == 2 and p["minWriterVersion"] == 7 for p in protocols)
    assert any("deletionVectors" in (p.get("readerFeatures") or []) for p in protocols)
    assert any("typeWidening" in (p.get("readerFeatures") or []) for p in protocols)


def test_lab12_the_feature_sets_given_for_delta_rs_are_what_delta_rs_does(spark):
    """One table per feature the lab's tables draw, the feature set 'supported': scan() and an append."""
    folder = workdir("test_lab12_feature_sets")
    wrong = []
    for feature in lab.READER_WRITER_POOL + lab.WRITER_POOL:
        path = str(folder / feature)
        spark.sql(f"CREATE TABLE delta.`{path}` (id BIGINT) USING delta TBLPROPERTIES ('delta.feature.{feature}' = 'supported')")
        spark.sql(f"INSERT INTO delta.`{path}` VALUES (1)")
        try:
            pa.table(DeltaTable(path).scan())
            reads = True
        except Exception:  # noqa: BLE001
            reads = False
        try:
            write_deltalake(path, pa.table({"id": pa.array([2], pa.int64())}), mode="append")
            writes = True
        except Exception:  # noqa: BLE001
            writes = False
        needed = protocol_features(spark, path)
        expected_reads = needed["read"] <= DELTA_RS_READS
        expected_writes = expected_reads and needed["write"] <= DELTA_RS_WRITES
        if (reads, writes) != (expected_reads, expected_writes):
            wrong.append((feature, reads, writes))
    shutil.rmtree(folder)
    assert not wrong, wrong


# ------------------------------------------------------------------------------ features_needed

LEGACY = {"appendOnly": (1, 2), "invariants": (1, 2), "checkConstraints": (1, 3), "changeDataFeed": (1, 4),
          "generatedColumns": (1, 4), "columnMapping": (2, 5), "identityColumns": (1, 6)}
READER_WRITER = {"columnMapping", "deletionVectors", "timestampNtz", "typeWidening", "v2Checkpoint",
                 "vacuumProtocolCheck", "variantType"}


def listed(protocol):
    return set(protocol.get("readerFeatures") or []) | set(protocol.get("writerFeatures") or [])


def test_lab12_column_mapping_needs_reader_2_as_well_as_writer_5(spark, at_test_seed):
    def by_writer_version_only(protocol, to):
        if protocol["minWriterVersion"] >= 7:
            features = listed(protocol)
        else:
            features = {n for n, (_, w) in LEGACY.items() if protocol["minWriterVersion"] >= w}
        return features & READER_WRITER if to == "read" else features

    message = failure(check_features_needed, by_writer_version_only)
    assert "{reader 1, writer 6}" in message and "columnMapping needs reader 2 and writer 5" in message, message


def test_lab12_writer_only_features_are_not_needed_to_read(spark, at_test_seed):
    def everything(protocol, to):
        if protocol["minWriterVersion"] >= 7:
            return listed(protocol)
        return {n for n, (r, w) in LEGACY.items() if protocol["minReaderVersion"] >= r and protocol["minWriterVersion"] >= w}

    message = failure(check_features_needed, everything)
    assert "'read') has" in message and "not needed" in message and "writer-only features" in message, message


def test_lab12_legacy_versions_imply_their_bundles(spark, at_test_seed):
    def lists_only(protocol, to):
        return listed(protocol) & READER_WRITER if to == "read" else listed(protocol)

    message = failure(check_features_needed, lists_only)
    assert "missing" in message and "cumulative" in message, message


def test_lab12_reader_2_with_writer_7_has_column_mapping_in_writer_features_only(spark, at_test_seed):
    def reader_list_for_reading(protocol, to):
        legacy = {n for n, (r, w) in LEGACY.items() if protocol["minReaderVersion"] >= r and protocol["minWriterVersion"] >= w}
        if protocol["minWriterVersion"] < 7:
            return legacy & READER_WRITER if to == "read" else legacy
        return set(protocol.get("readerFeatures") or []) if to == "read" else listed(protocol)

    message = failure(check_features_needed, reader_list_for_reading)
    assert "writer 7" in message and "readerFeatures exists only at reader version 3" in message, message


# --------------------------------------------------------------------------------- delta_rs_can


def test_lab12_the_pyarrow_paths_list_is_not_scans(spark, at_test_seed, solution):
    from deltalake.table import SUPPORTED_READER_FEATURES

    needed = solution["features_needed"]

    def by_pyarrow_gate(protocol):
        return {"read": needed(protocol, "read") <= SUPPORTED_READER_FEATURES,
                "write": needed(protocol, "write") <= DELTA_RS_WRITES}

    message = failure(check_delta_rs_can, by_pyarrow_gate)
    assert "delta_rs_can says read no, but DeltaTable(path).scan() reads it" in message, message


def test_lab12_a_legacy_writer_version_can_stop_delta_rs_writing(spark, at_test_seed):
    def lists_only(protocol):
        return {"read": set(protocol.get("readerFeatures") or []) <= DELTA_RS_READS,
                "write": listed(protocol) <= DELTA_RS_WRITES}

    message = failure(check_delta_rs_can, lists_only)
    assert "write yes, but write_deltalake refuses" in message and "identityColumns" in message, message


def test_lab12_delta_rs_can_must_return_two_booleans(spark, at_test_seed):
    assert "it must return {'read': bool, 'write': bool}" in failure(check_delta_rs_can, lambda protocol: (True, True))


# ---------------------------------------------------------------------------- read_with_delta_rs


def test_lab12_the_pyarrow_path_fails_where_scan_reads_right(spark, at_test_seed):
    def pyarrow_path(path, version):
        try:
            return DeltaTable(path, version=version).to_pyarrow_table()
        except Exception:  # noqa: BLE001
            return None

    message = failure(check_read_with_delta_rs, pyarrow_path)
    assert ("which delta-rs can read right" in message and "scan()" in message) or "null" in message, message


def test_lab12_column_mapping_on_the_pyarrow_path_reads_nulls(spark, at_test_seed):
    def pyarrow_where_it_lets_through(path, version):
        table = DeltaTable(path, version=version)
        try:
            return table.to_pyarrow_table()
        except Exception:  # noqa: BLE001
            try:
                return pa.table(table.scan())
            except Exception:  # noqa: BLE001
                return None

    message = failure(check_read_with_delta_rs, pyarrow_where_it_lets_through)
    assert "column mapping" in message and "every value came back null" in message, message


def test_lab12_the_version_asked_is_read(spark, at_test_seed):
    def latest(path, version):
        try:
            return pa.table(DeltaTable(path).scan())
        except Exception:  # noqa: BLE001
            return None

    message = failure(check_read_with_delta_rs, latest)
    assert "read the version asked" in message and "version 0" in message, message


def test_lab12_a_refusal_is_none_and_not_an_error(spark, at_test_seed):
    message = failure(check_read_with_delta_rs, lambda path, version: pa.table(DeltaTable(path, version=version).scan()))
    # The first table delta-rs refuses, in the run's drawn order: the widened one, or one whose protocol lists a
    # feature delta-rs does not read (VacuumProtocolCheck, ...).
    assert "raised DeltaError" in message and "Unsupported table features" in message, message
    assert "catch delta-rs's refusal (DeltaError)" in message, message


def test_lab12_reading_with_spark_is_refused(spark, at_test_seed):
    def spark_rows_anywhere(path, version):
        return spark.read.format("delta").option("versionAsOf", version).load(path).toArrow()

    message = failure(check_read_with_delta_rs, spark_rows_anywhere)
    assert "ran Spark jobs" in message, message


def test_lab12_each_version_is_read_under_its_own_protocol(spark, at_test_seed):
    def by_latest_protocol(path, version):
        latest = DeltaTable(path).protocol()
        if not set(latest.reader_features or []) <= DELTA_RS_READS:
            return None
        return pa.table(DeltaTable(path, version=version).scan())

    message = failure(check_read_with_delta_rs, by_latest_protocol)
    assert "type widening turned on" in message and "returned None at version 0" in message, message
    assert "the protocol in force at that version" in message, message
