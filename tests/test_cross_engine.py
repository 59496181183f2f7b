"""The comparison behind tests/support/cross_engine.py's per-notebook item, on tables this test writes itself.

A plain partitioned table (a partition value with a space and a colon, so paths must be decoded
alike), a table with a deletion vector, a type-widened table delta-rs refuses with a reason its
protocol lists, and a table with a data file deleted behind the log's back, which must be reported.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("deltalake")

from cross_engine import compare_table, compare_tables, find_tables, refused_features  # noqa: E402

ROWS = [(i, ["a b:c", "DE"][i % 2], i * 1.5) for i in range(20)]
SCHEMA = "id LONG, country STRING, amount DOUBLE"


@pytest.fixture(scope="module")
def tables(spark, tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("cross_engine")
    paths = {name: root / name for name in ("plain", "dv", "widening", "missing_file")}
    frame = spark.createDataFrame(ROWS, SCHEMA).coalesce(1)
    frame.write.format("delta").partitionBy("country").save(str(paths["plain"]))
    frame.write.format("delta").option("delta.enableDeletionVectors", "true").save(str(paths["dv"]))
    spark.sql(f"DELETE FROM delta.`{paths['dv']}` WHERE id < 5")
    spark.sql(f"CREATE TABLE delta.`{paths['widening']}` (id INT, q SMALLINT) USING delta "
              "TBLPROPERTIES ('delta.enableTypeWidening' = 'true')")
    spark.sql(f"INSERT INTO delta.`{paths['widening']}` VALUES (1, 10), (2, 20)")
    spark.sql(f"ALTER TABLE delta.`{paths['widening']}` ALTER COLUMN q TYPE INT")
    spark.range(10).repartition(2).write.format("delta").save(str(paths["missing_file"]))
    next(paths["missing_file"].glob("part-*.parquet")).unlink()
    (root / "not_a_table" / "_delta_log").mkdir(parents=True)
    return paths


def test_plain_and_deletion_vector_tables_agree(spark, tables) -> None:
    plain = compare_table(spark, tables["plain"])
    assert plain.ok and not plain.refused, plain.problems
    assert (plain.files, plain.rows) == (2, 20), "two partition folders, one file each"
    dv = compare_table(spark, tables["dv"])
    assert dv.ok and not dv.refused, dv.problems
    assert (dv.files, dv.rows) == (1, 15), "the deletion vector's 5 rows are not counted"


def test_type_widening_is_a_refusal_with_a_reason(spark, tables) -> None:
    widened = compare_table(spark, tables["widening"])
    assert widened.ok, widened.problems
    assert "TypeWidening" in widened.refused and widened.rows is None
    assert widened.files == 2, "delta-rs still lists the files of a table it refuses to scan"


def test_a_missing_data_file_is_reported(spark, tables) -> None:
    broken = compare_table(spark, tables["missing_file"])
    assert not broken.ok and any("delta-rs scan() fails" in p for p in broken.problems), broken.problems


def test_find_tables_and_the_threaded_comparison(spark, tables) -> None:
    root = tables["plain"].parent
    found, empty = find_tables(root)
    assert found == sorted(tables.values()) and empty == [root / "not_a_table" / "_delta_log"]
    assert [r.ok for r in compare_tables(spark, found)] == [True, False, True, True]   # dv, missing_file, plain, widening


def test_refusal_messages_name_their_features() -> None:
    assert refused_features("External error: Transaction failed: Unsupported table features required: [TypeWidening]") == ["TypeWidening"]
    assert refused_features("The table has set these reader features: {'deletionVectors', 'v2Checkpoint'} but these "
                            "are not yet supported by the deltalake reader.") == ["deletionVectors", "v2Checkpoint"]
    assert refused_features("Generic DeltaTable error: file not found") == []
