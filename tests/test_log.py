"""Tests of deltalab.log: the log reader and the pure-Python replay, checked against Spark.

The Spark tests write real tables (partitioned with characters that need URL-encoding,
deletion vectors, classic, multi-part and v2 checkpoints with sidecars) and compare
``replay_log(...).input_files()`` with ``DataFrame.inputFiles()`` at every version.
"""

from __future__ import annotations

import datetime
import json
from pathlib import Path

import pytest

from deltalab.errors import DeltaLabError
from deltalab.log import (z85_decode, deleted_rows, deletion_vector_file, dv_id, latest_version, log_file_actions, read_log, replay_log,
                          short_file_name)
from deltalab.session import temporary_conf


# --- pure Python: hand-written logs --------------------------------------------------------

PROTOCOL = {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}}
METADATA = {
    "metaData": {
        "id": "t",
        "format": {"provider": "parquet", "options": {}},
        "schemaString": '{"type":"struct","fields":[]}',
        "partitionColumns": [],
        "configuration": {},
    }
}


def add(path: str, rows: int, dv: dict | None = None) -> dict:
    body = {"path": path, "partitionValues": {}, "size": 10, "modificationTime": 0, "dataChange": True,
            "stats": json.dumps({"numRecords": rows})}
    if dv:
        body["deletionVector"] = dv
    return {"add": body}


def remove(path: str, dv: dict | None = None) -> dict:
    body = {"path": path, "deletionTimestamp": 0, "dataChange": True}
    if dv:
        body["deletionVector"] = dv
    return {"remove": body}


def write_log(root: Path, commits: list[list[dict]]) -> Path:
    log = root / "_delta_log"
    log.mkdir(parents=True)
    for version, actions in enumerate(commits):
        (log / f"{version:020d}.json").write_text("\n".join(json.dumps(a) for a in actions) + "\n")
    return root


DV = {"storageType": "u", "pathOrInlineDv": "abc", "offset": 1, "sizeInBytes": 34, "cardinality": 2}


def test_replay_of_a_hand_written_log(tmp_path: Path) -> None:
    table = write_log(tmp_path / "t", [
        [{"commitInfo": {"operation": "WRITE"}}, PROTOCOL, METADATA, add("a.parquet", 5), add("b.parquet", 3)],
        [{"commitInfo": {"operation": "DELETE"}}, remove("a.parquet"), add("a.parquet", 5, DV)],
        [{"txn": {"appId": "app", "version": 7}}, remove("b.parquet")],
    ])
    assert replay_log(table, 0).paths() == ["a.parquet", "b.parquet"]
    state = replay_log(table, 1)
    assert set(state.files) == {("a.parquet", "uabc@1"), ("b.parquet", None)}
    assert state.num_records == 5 - 2 + 3
    assert ("a.parquet", None) in state.tombstones
    latest = replay_log(table)
    assert latest.version == 2 and latest.paths() == ["a.parquet"] and latest.app_versions == {"app": 7}
    assert latest.log_files_read == [f"{v:020d}.json" for v in range(3)]
    frame = read_log(table).to_pandas()
    assert list(frame.action[:5]) == ["commitInfo", "protocol", "metaData", "add", "add"]
    assert frame[frame.version == 1]["deletion vector"].tolist()[-1] == "2 (u)"
    assert set(frame.operation.dropna()) == {"WRITE", "DELETE"}


def test_short_names_and_dv_ids() -> None:
    assert short_file_name("part-00001-5f3e1c2a-0000-0000-0000-000000000000-c000.snappy.parquet") == "part-00001"
    assert short_file_name("country=United%20States/part-00000-x.parquet") == "country=United States/part-00000"
    assert short_file_name("deletion_vector_0c3f.bin") == "deletion_vector"
    assert dv_id(None) is None and dv_id({"storageType": "i", "pathOrInlineDv": "xyz"}) == "ixyz"


def test_not_a_delta_table(tmp_path: Path) -> None:
    with pytest.raises(DeltaLabError, match="does not exist"):
        replay_log(tmp_path / "missing")
    with pytest.raises(DeltaLabError, match="no _delta_log"):
        read_log(tmp_path)
    (tmp_path / "_delta_log").mkdir()
    with pytest.raises(DeltaLabError, match="holds no commit"):
        replay_log(tmp_path)


def test_version_that_does_not_exist(tmp_path: Path) -> None:
    table = write_log(tmp_path / "t", [[PROTOCOL, METADATA, add("a.parquet", 1)]])
    for bad in (1, -1, "0"):
        with pytest.raises(DeltaLabError, match="does not exist") as info:
            replay_log(table, bad)  # type: ignore[arg-type]
        assert "latest version is 0" in str(info.value) and info.value.fix
    with pytest.raises(DeltaLabError, match="versions present: 0"):
        read_log(table).actions(3)


def test_missing_and_corrupt_commits(tmp_path: Path) -> None:
    table = write_log(tmp_path / "t", [[PROTOCOL, METADATA, add("a.parquet", 1)], [add("b.parquet", 1)], [add("c.parquet", 1)]])
    (table / "_delta_log" / f"{1:020d}.json").unlink()
    assert replay_log(table, 0).paths() == ["a.parquet"]
    with pytest.raises(DeltaLabError, match=r"00000000000000000001\.json missing"):
        replay_log(table, 2)
    (table / "_delta_log" / f"{2:020d}.json").write_text('{"add": {"path": "c.parquet"\n')
    with pytest.raises(DeltaLabError, match=r"is corrupt: line 1 is not valid JSON") as info:
        read_log(table)
    assert "backup" in (info.value.fix or "")
    (table / "_delta_log" / f"{2:020d}.json").write_text('{"add": {}, "remove": {}}\n')
    with pytest.raises(DeltaLabError, match="not one action"):
        read_log(table)


def test_corrupt_checkpoint(tmp_path: Path) -> None:
    table = write_log(tmp_path / "t", [[PROTOCOL, METADATA, add("a.parquet", 1)]])
    (table / "_delta_log" / f"{0:020d}.checkpoint.parquet").write_bytes(b"not parquet")
    with pytest.raises(DeltaLabError, match="checkpoint file .* is corrupt"):
        replay_log(table)
    assert replay_log(table, use_checkpoints=False).paths() == ["a.parquet"]


def test_latest_version_of_a_folder_that_is_not_a_table(tmp_path) -> None:
    (tmp_path / "_delta_log").mkdir()
    with pytest.raises(DeltaLabError, match="not a Delta table"):
        latest_version(tmp_path)


# --- against Spark: real tables ------------------------------------------------------------

def assert_replay_matches_spark(spark, table: Path) -> None:
    """At every version: replay_log (with and without checkpoints) lists what Spark reads."""
    latest = replay_log(table).version
    for version in range(latest + 1):
        frame = spark.read.format("delta").option("versionAsOf", version).load(str(table))
        state = replay_log(table, version)
        assert state.input_files() == sorted(frame.inputFiles()), f"{table.name} v{version}"
        assert state.num_records == frame.count(), f"{table.name} v{version} row count"
        full = replay_log(table, version, use_checkpoints=False)
        assert full.files.keys() == state.files.keys() and full.metadata == state.metadata
        assert full.protocol == state.protocol


def test_partitioned_table_with_deletion_vectors_and_checkpoints(spark, tmp_path: Path) -> None:
    table = tmp_path / "people"
    countries = ["United States", "Côte d'Ivoire", "a/b:c"]
    rows = [(i, countries[i % 3], datetime.datetime(2020, 1, 1, 10, i % 2)) for i in range(24)]
    (spark.createDataFrame(rows, "id long, country string, ts timestamp").repartition(1).write.format("delta")
        .partitionBy("country", "ts").option("delta.checkpointInterval", "3")
        .option("delta.enableDeletionVectors", "true").save(str(table)))
    spark.sql(f"DELETE FROM delta.`{table}` WHERE id % 5 = 0")
    spark.sql(f"UPDATE delta.`{table}` SET id = id + 100 WHERE id % 7 = 0")
    spark.createDataFrame([(1000, "x y", None)], "id long, country string, ts timestamp").write.format("delta").mode("append").save(str(table))
    spark.sql(f"""MERGE INTO delta.`{table}` t USING (SELECT 2 AS id UNION ALL SELECT 5000) s ON t.id = s.id
                  WHEN MATCHED THEN DELETE WHEN NOT MATCHED THEN INSERT (id, country, ts) VALUES (s.id, 'new', null)""")
    log = read_log(table)
    assert any("%25" in a["add"]["path"] for v in log.versions for a in log.commits[v] if "add" in a), "URL-encoded paths"
    assert any(a["add"].get("deletionVector") for v in log.versions for a in log.commits[v] if "add" in a), "DVs written"
    assert replay_log(table, 4).checkpoint_version == 3, "replay starts from the checkpoint at 3"
    assert_replay_matches_spark(spark, table)


def test_multi_part_checkpoint(spark, tmp_path: Path) -> None:
    table = tmp_path / "multi"
    with temporary_conf(spark, {"spark.databricks.delta.checkpoint.partSize": "3"}):
        spark.range(0, 40, 1, 8).write.format("delta").option("delta.checkpointInterval", "2").save(str(table))
        spark.range(0, 10, 1, 2).write.format("delta").mode("append").save(str(table))
        spark.sql(f"DELETE FROM delta.`{table}` WHERE id < 5")
    state = replay_log(table, 2)
    assert state.checkpoint_version == 2 and len([f for f in state.log_files_read if ".checkpoint." in f]) > 1
    assert_replay_matches_spark(spark, table)


@pytest.mark.parametrize("top_level", ["parquet", "json"])
def test_v2_checkpoint_with_sidecars(spark, tmp_path: Path, top_level: str) -> None:
    table = tmp_path / f"v2_{top_level}"
    with temporary_conf(spark, {"spark.databricks.delta.checkpoint.partSize": "3",
                                "spark.databricks.delta.checkpointV2.topLevelFileFormat": top_level}):
        (spark.range(0, 40, 1, 8).write.format("delta").option("delta.checkpointInterval", "2")
            .option("delta.checkpointPolicy", "v2").save(str(table)))
        spark.range(0, 10, 1, 2).write.format("delta").mode("append").save(str(table))
        spark.sql(f"DELETE FROM delta.`{table}` WHERE id < 5")
    state = replay_log(table, 2)
    assert state.log_files_read[0].endswith(f".{top_level}") and ".checkpoint." in state.log_files_read[0]
    assert any(f.startswith("_sidecars/") for f in state.log_files_read), "the v2 checkpoint's sidecars were read"
    assert_replay_matches_spark(spark, table)
    top = log_file_actions(table / "_delta_log" / state.log_files_read[0])
    kinds = {next(iter(action)) for action in top}
    assert {"checkpointMetadata", "sidecar", "protocol", "metaData"} <= kinds and "add" not in kinds
    sidecar_adds = [a for f in state.log_files_read if f.startswith("_sidecars/")
                    for a in log_file_actions(table / "_delta_log" / f) if "add" in a]
    assert {a["add"]["path"] for a in sidecar_adds} == set(replay_log(table, 2).paths()), "the sidecars hold the adds"


def test_log_file_actions_reads_a_commit_like_read_log(tmp_path: Path) -> None:
    table = write_log(tmp_path / "t", [[{"commitInfo": {"operation": "WRITE"}}, PROTOCOL, METADATA, add("a.parquet", 5)]])
    assert log_file_actions(table / "_delta_log" / f"{0:020d}.json") == read_log(table).commits[0]


@pytest.mark.parametrize("deleted", ["key % 7 = 3", "key % 2 = 0", "key BETWEEN 100 AND 2099", "key = 9999"])
def test_deleted_rows_are_the_positions_delta_deleted(spark, tmp_path: Path, deleted: str) -> None:
    """Array containers (a few positions), a bitmap container (5,000 of 10,000), runs, one position."""
    import pyarrow.parquet as pq

    path = str(tmp_path / "dvs")
    spark.range(0, 10000, 1, 1).selectExpr("id AS key").write.format("delta") \
        .option("delta.enableDeletionVectors", "true").save(path)
    spark.sql(f"DELETE FROM delta.`{path}` WHERE {deleted}")
    (add,) = replay_log(path).files.values()
    assert add["deletionVector"]["storageType"] == "u"
    keys = pq.read_table(Path(path) / add["path"]).column("key").to_pylist()
    live = {row.key for row in spark.read.format("delta").load(path).collect()}
    assert deleted_rows(path, add["deletionVector"]) == [i for i, key in enumerate(keys) if key not in live]
    assert deleted_rows(path, None) == []
    (Path(path) / deletion_vector_file(add["deletionVector"])).unlink()
    with pytest.raises(DeltaLabError, match="is missing"):
        deleted_rows(path, add["deletionVector"])


def test_z85_decode_is_zeromqs_z85():
    """RFC 32's own example, and the 20 characters of a deletion vector's UUID give 16 bytes."""
    assert z85_decode("HelloWorld") == bytes([0x86, 0x4F, 0xD2, 0x6F, 0xB5, 0x59, 0xF7, 0x5B])
    assert len(z85_decode("0" * 20)) == 16 and z85_decode("") == b""


def test_file_lifetimes_follow_each_file_from_its_add_to_its_remove(tmp_path: Path) -> None:
    table = write_log(tmp_path / "t", [
        [PROTOCOL, METADATA, add("a.parquet", 5), add("b.parquet", 3)],
        [remove("a.parquet"), add("a.parquet", 5, DV), add("c.parquet", 2)],
        [remove("b.parquet"), {"commitInfo": {"operation": "DELETE"}}],
    ])
    lifetimes = read_log(table).file_lifetimes()
    assert [(f.path, f.added, f.removed, f.deletion_vector, f.rows) for f in lifetimes] == [
        ("a.parquet", 0, 1, False, 5), ("b.parquet", 0, 2, False, 3),
        ("a.parquet", 1, None, True, 5), ("c.parquet", 1, None, False, 2)]
    live = sorted((f.path, f.deletion_vector) for f in lifetimes if f.removed is None)
    assert live == sorted((path, dv is not None) for path, dv in replay_log(table).files), "the open bars are the state"


def test_file_lifetimes_need_the_log_from_version_0(tmp_path: Path) -> None:
    table = write_log(tmp_path / "t", [[PROTOCOL, METADATA, add("a.parquet", 5)], [add("b.parquet", 1)]])
    (table / "_delta_log" / f"{0:020d}.json").unlink()
    with pytest.raises(DeltaLabError, match="starts at version 1, not 0"):
        read_log(table).file_lifetimes()
