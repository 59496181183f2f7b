"""Delta tables across engines: Spark and delta-rs (the `deltalake` package) on the same tables.

Notebook 12 tells the story; these tests keep its facts checked without re-running it: a table
Spark wrote (with an UPDATE and a DELETE) reads the same in delta-rs at every version, a table
delta-rs wrote reads the same in Spark, and delta-rs 1.6 still gates deletion vectors and type
widening as the notebook says. Each table is a few rows, written by the test itself.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import unquote

import pytest

deltalake = pytest.importorskip("deltalake")
pa = pytest.importorskip("pyarrow")

from deltalake import DeltaTable, write_deltalake  # noqa: E402
from deltalake.exceptions import CommitFailedError, DeltaProtocolError  # noqa: E402

from deltalab.files import spark_files  # noqa: E402
from deltalab.locations import local_path  # noqa: E402
from deltalab.log import commit_info, replay_log  # noqa: E402

SCHEMA = "id LONG, country STRING, amount DOUBLE"
ROWS = [(i, ["DE", "FR", "NL"][i % 3], i * 1.5) for i in range(30)]


def spark_rows(spark, path: Path, version: int | None = None) -> list[tuple]:
    reader = spark.read.format("delta")
    if version is not None:
        reader = reader.option("versionAsOf", version)
    frame = reader.load(str(path))
    names = sorted(frame.columns)
    return sorted((tuple(row) for row in frame.select(*names).collect()), key=repr)


def arrow_rows(table) -> list[tuple]:
    names = sorted(table.column_names)
    return sorted((tuple(row[n] for n in names) for row in table.to_pylist()), key=repr)


def relative(uris: list[str], table: Path) -> list[str]:
    root = table.resolve().as_posix() + "/"
    return sorted(local_path(uri).removeprefix(root) for uri in uris)


def test_spark_table_reads_the_same_in_delta_rs_at_every_version(spark, tmp_path: Path) -> None:
    path = tmp_path / "spark_written"
    spark.createDataFrame(ROWS, SCHEMA).coalesce(1).write.format("delta").save(str(path))
    spark.sql(f"UPDATE delta.`{path}` SET amount = -amount WHERE id % 5 = 0")
    spark.sql(f"DELETE FROM delta.`{path}` WHERE country = 'NL'")
    table = DeltaTable(str(path))
    assert table.version() == 2
    for version in range(3):
        table.load_as_version(version)
        assert arrow_rows(table.to_pyarrow_table()) == spark_rows(spark, path, version), f"rows of version {version}"
        assert relative(table.file_uris(), path) == sorted(unquote(p) for p in replay_log(path, version).paths())
    assert relative(table.file_uris(), path) == spark_files(spark, path, relative=True), "Spark reads the same files"
    history = sorted(DeltaTable(str(path)).history(), key=lambda h: h["version"])
    spark_history = spark.sql(f"DESCRIBE HISTORY delta.`{path}`").orderBy("version").collect()
    assert [h["operation"] for h in history] == [r.operation for r in spark_history] == ["WRITE", "UPDATE", "DELETE"]
    assert [h["timestamp"] for h in history] == [commit_info(path, v)["timestamp"] for v in range(3)]


def test_delta_rs_table_reads_the_same_in_spark_and_back(spark, tmp_path: Path) -> None:
    path = tmp_path / "delta_rs_written"
    batch = spark.createDataFrame(ROWS, SCHEMA).toArrow()
    write_deltalake(str(path), batch, partition_by=["country"])
    spark.createDataFrame([(100, "FR", 1.0)], SCHEMA).write.format("delta").mode("append").save(str(path))
    table = DeltaTable(str(path))
    assert table.version() == 1 and len(ROWS) + 1 == table.to_pyarrow_table().num_rows
    assert arrow_rows(table.to_pyarrow_table()) == spark_rows(spark, path)
    assert relative(table.file_uris(), path) == spark_files(spark, path, relative=True)
    assert commit_info(path, 0)["engineInfo"] == f"delta-rs:py-{deltalake.__version__}"
    assert commit_info(path, 1)["engineInfo"].startswith("Apache-Spark/")


def test_delta_rs_gates_deletion_vectors_and_type_widening(spark, tmp_path: Path) -> None:
    dvs = tmp_path / "dvs"
    (spark.createDataFrame(ROWS, SCHEMA).repartition(1).write.format("delta")
     .option("delta.enableDeletionVectors", "true").save(str(dvs)))
    spark.sql(f"DELETE FROM delta.`{dvs}` WHERE country = 'NL'")
    assert replay_log(dvs).protocol["readerFeatures"] == ["deletionVectors"]
    with pytest.raises(DeltaProtocolError, match=r"reader features: \{'deletionVectors'\} but these are not yet supported"):
        DeltaTable(str(dvs)).to_pyarrow_table()
    assert arrow_rows(pa.table(DeltaTable(str(dvs)).scan())) == spark_rows(spark, dvs), "the DataFusion path applies DVs"

    widened = tmp_path / "widened"
    spark.sql(f"CREATE TABLE delta.`{widened}` (id INT, q SMALLINT) USING delta TBLPROPERTIES ('delta.enableTypeWidening' = 'true')")
    spark.sql(f"INSERT INTO delta.`{widened}` VALUES (1, 1)")
    spark.sql(f"ALTER TABLE delta.`{widened}` ALTER COLUMN q TYPE INT")
    with pytest.raises(DeltaProtocolError, match=r"\{'typeWidening'\}"):
        DeltaTable(str(widened)).to_pyarrow_table()
    row = pa.table({"id": pa.array([2], pa.int32()), "q": pa.array([70_000], pa.int32())})
    with pytest.raises(CommitFailedError, match=r"Unsupported table features required: \[TypeWidening\]"):
        write_deltalake(str(widened), row, mode="append")
    assert DeltaTable(str(widened)).version() == 2, "the refused append committed nothing"
