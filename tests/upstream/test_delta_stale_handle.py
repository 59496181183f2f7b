"""Upstream watch (Delta Lake): a DeltaTable handle taken before deletion vectors are switched on
fails DELETE (the course's issue 18, which notebook 02 tells learners about).

On Delta 4.4.0 (Spark 4.2.0) ``DeltaTable.forPath`` builds its DataFrame once, with a Parquet
reader (``DeltaParquetFileFormat``) made for the table's protocol at that moment. For protocol
1/2 that reader hides ``_metadata.row_index`` (``DeltaParquetFileFormat.metadataSchemaFields``).
``ALTER TABLE ... SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')`` upgrades the
protocol to 3/7; a DELETE through the old handle then decides from the new snapshot to write
deletion vectors (``DeleteCommand.shouldWritePersistentDeletionVectors``), keeps the old reader
(``DMLWithDeletionVectorsHelper.replaceFileIndex`` swaps only the file index) and asks it for
``_metadata.row_index``: FIELD_NOT_FOUND, and nothing is committed. A handle taken after the
ALTER deletes and writes a deletion vector.

Upstream had no report or fix as of v4.4.0 (and master at bb1057f4).

When it fails: an upgrade of Delta fixed it, and ``test_stale_handle_fails_and_commits_nothing``
says so. Update notebook 02's section on switching deletion vectors on (it tells learners to take
a new handle after the ALTER), then delete that test, or this file once notebook 02 no longer
mentions the stale handle. ``test_fresh_handle_deletes_with_a_deletion_vector`` failing means the
workaround notebook 02 teaches broke: that is a course bug, not news from upstream.
"""

from __future__ import annotations

from pathlib import Path

from deltalab.errors import failure_of
from deltalab.log import commit_versions, read_log, replay_log


def _table_with_a_stale_handle(spark, path: Path):
    """A plain two-file table, a DeltaTable handle on it, then deletion vectors switched on by ALTER."""
    from delta.tables import DeltaTable

    spark.range(0, 20, 1, 2).write.format("delta").save(str(path))
    stale = DeltaTable.forPath(spark, str(path))
    spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')")
    return stale


def test_stale_handle_fails_and_commits_nothing(spark, tmp_path: Path) -> None:
    path = tmp_path / "stale"
    stale = _table_with_a_stale_handle(spark, path)
    protocol = replay_log(path).protocol
    assert (protocol["minReaderVersion"], protocol["minWriterVersion"]) == (3, 7), "the ALTER upgraded the protocol"
    assert "deletionVectors" in protocol["readerFeatures"]

    failure = failure_of(lambda: stale.delete("id = 3"))

    assert failure is not None, (
        "the DeltaTable taken before the ALTER deleted without error: Delta fixed issue 18. "
        "Update notebook 02's section on switching deletion vectors on, and this test."
    )
    assert failure.condition == "FIELD_NOT_FOUND" and "row_index" in failure.message, failure.text[:500]
    assert commit_versions(path) == [0, 1], "the failed DELETE committed nothing"
    assert spark.read.format("delta").load(str(path)).count() == 20


def test_fresh_handle_deletes_with_a_deletion_vector(spark, tmp_path: Path) -> None:
    from delta.tables import DeltaTable

    path = tmp_path / "fresh"
    _table_with_a_stale_handle(spark, path)

    DeltaTable.forPath(spark, str(path)).delete("id = 3")

    assert commit_versions(path) == [0, 1, 2]
    adds = [a["add"] for a in read_log(path).commits[2] if "add" in a]
    assert [a["deletionVector"]["cardinality"] for a in adds if a.get("deletionVector")] == [1], \
        "the DELETE re-added the file with a deletion vector of one row"
    assert spark.read.format("delta").load(str(path)).count() == 19
