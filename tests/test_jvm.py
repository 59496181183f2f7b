"""deltalab.jvm: Delta's own answers, asked of its classes in the JVM, on real tables."""

from __future__ import annotations

import json

import delta.exceptions as dx
import pytest
from delta.tables import DeltaTable

from deltalab import concurrency as cc
from deltalab import jvm
from deltalab.log import checkpoint_versions, commit_versions, latest_version, replay_log


def test_log_store_classes(spark) -> None:
    assert jvm.log_store_class_for(spark, "file") == "io.delta.storage.HDFSLogStore"
    assert jvm.log_store_class_for(spark, "s3a") == "io.delta.storage.S3SingleDriverLogStore"


def test_delta_setting_reads_the_session_value_else_deltas_default(spark) -> None:
    from deltalab.errors import DeltaLabError
    from deltalab.session import temporary_conf

    assert jvm.delta_setting(spark, "autoCompact.maxFileSize") == str(128 * 1024 * 1024)
    assert jvm.delta_setting(spark, "autoCompact.minFileSize") is None, "no default: half of maxFileSize in AutoCompact"
    with temporary_conf(spark, {"spark.databricks.delta.autoCompact.minNumFiles": "7"}):
        assert jvm.delta_setting(spark, "autoCompact.minNumFiles") == "7"
    assert jvm.delta_setting(spark, "autoCompact.minNumFiles") == "50"
    with pytest.raises(DeltaLabError, match="no session setting called 'spark.databricks.delta.no.such'"):
        jvm.delta_setting(spark, "no.such")


def test_jvm_transaction_gets_delete_delete(spark, tmp_path) -> None:
    path = tmp_path / "t"
    cc.make_pair_table(spark, path)
    txn = jvm.JvmTransaction(spark, str(path))
    removes = txn.remove_all_files()
    assert txn.read_version == 0 and len(removes) == 2
    DeltaTable.forPath(spark, str(path)).delete("id < 10")
    with pytest.raises(dx.ConcurrentDeleteDeleteException):
        txn.commit(removes)
    assert commit_versions(path) == [0, 1]


def test_a_user_domain_is_committed_beside_the_clustering_keys(spark, tmp_path) -> None:
    path = tmp_path / "t"
    spark.sql(f"CREATE TABLE delta.`{path}` (id BIGINT, city STRING) USING delta CLUSTER BY (city)")
    version = jvm.JvmTransaction(spark, str(path)).commit_domain("course.test", '{"owner": "tests"}')
    assert version == 1
    (action,) = [json.loads(line) for line in (path / "_delta_log" / f"{1:020d}.json").read_text().splitlines()
                 if "domainMetadata" in line]
    assert action["domainMetadata"] == {"domain": "course.test", "configuration": '{"owner": "tests"}', "removed": False}
    assert replay_log(path).domain_metadata["course.test"]["configuration"] == '{"owner": "tests"}'
    assert spark.sql(f"DESCRIBE DETAIL delta.`{path}`").first()["clusteringColumns"] == ["city"]


def test_a_log_segment_starts_at_the_newest_checkpoint_at_or_before_the_version(spark, tmp_path) -> None:
    path = tmp_path / "t"
    spark.range(0, 3).write.format("delta").option("delta.checkpointInterval", "2").save(str(path))
    for start in range(3, 12, 3):
        spark.range(start, start + 3).write.format("delta").mode("append").save(str(path))
    assert checkpoint_versions(path) == [2]
    latest = jvm.delta_log_segment(spark, path)
    assert (latest.version, latest.checkpoint_version, latest.commit_versions) == (3, 2, [3])
    assert latest.checkpoint_files == [f"{2:020d}.checkpoint.parquet"] and latest.commit_files == [f"{3:020d}.json"]
    early = jvm.delta_log_segment(spark, path, version=1)
    assert (early.checkpoint_version, early.commit_versions) == (None, [0, 1])
    assert replay_log(path, 1).log_files_read == early.commit_files


def test_load_snapshot_reads_the_latest_version_and_its_files(spark, tmp_path) -> None:
    path = tmp_path / "t"
    cc.make_pair_table(spark, path)
    spark.range(100, 101).selectExpr("id", "id * 10 AS v").write.format("delta").mode("append").save(str(path))
    assert jvm.load_snapshot(spark, str(path)) == {"version": latest_version(path), "files": 3}


def test_clear_delta_cache_without_a_session_does_nothing() -> None:
    jvm.clear_delta_cache(spark=None)  # the suite's session may or may not run yet: either way, no error


def test_protocol_features_are_the_bundles_of_legacy_versions_or_the_lists(spark, tmp_path) -> None:
    legacy = str(tmp_path / "legacy")
    spark.sql(f"CREATE TABLE delta.`{legacy}` (id BIGINT) USING delta "
              "TBLPROPERTIES ('delta.minReaderVersion' = '1', 'delta.minWriterVersion' = '6')")
    assert jvm.protocol_features(spark, legacy) == {
        "read": set(),
        "write": {"appendOnly", "invariants", "checkConstraints", "changeDataFeed", "generatedColumns", "identityColumns"},
    }, "writer 6 at reader 1: no columnMapping (it needs reader 2)"
    listed = str(tmp_path / "listed")
    spark.sql(f"CREATE TABLE delta.`{listed}` (id BIGINT) USING delta")
    spark.sql(f"ALTER TABLE delta.`{listed}` SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')")
    assert jvm.protocol_features(spark, listed, 0) == {"read": set(), "write": {"appendOnly", "invariants"}}
    assert jvm.protocol_features(spark, listed) == {"read": {"deletionVectors"},
                                                    "write": {"deletionVectors", "appendOnly", "invariants"}}
    assert replay_log(listed).protocol["readerFeatures"] == ["deletionVectors"]


def test_delta_log_files_read_names_a_v2_checkpoints_sidecars_and_the_commits_after_it(spark, tmp_path):
    from pathlib import Path

    from deltalab.session import temporary_conf

    path = str(tmp_path / "v2")
    spark.sql(f"CREATE TABLE delta.`{path}` (id LONG) USING delta "
              "TBLPROPERTIES ('delta.checkpointPolicy' = 'v2', 'delta.checkpointInterval' = '1000')")
    for version in range(1, 4):
        spark.range(0, 6, 1, 3).write.format("delta").mode("append").save(path)
    with temporary_conf(spark, {"spark.databricks.delta.checkpoint.partSize": "3"}):
        jvm.delta_log(spark, path).checkpoint()
    spark.range(0, 6, 1, 3).write.format("delta").mode("append").save(path)
    names = jvm.delta_log_files_read(spark, path)
    sidecars = sorted(p.name for p in (Path(path) / "_delta_log" / "_sidecars").glob("*.parquet"))
    assert sorted(n for n in names if n.startswith("_sidecars/")) == [f"_sidecars/{s}" for s in sidecars]
    assert len(sidecars) == 3, "9 adds, 3 per sidecar"
    assert [n for n in names if n.endswith(".json") and ".checkpoint." not in n] == [f"{4:020d}.json"]
    assert jvm.delta_log_files_read(spark, path, 1) == [f"{0:020d}.json", f"{1:020d}.json"], "no checkpoint yet"


def test_delta_setting_is_internal_reads_deltas_declaration(spark) -> None:
    from deltalab.errors import DeltaLabError

    assert jvm.delta_setting_is_internal(spark, "optimize.clustering.mergeStrategy.minCubeSize.threshold")
    assert not jvm.delta_setting_is_internal(spark, "autoCompact.enabled"), "documented: public"
    with pytest.raises(DeltaLabError, match="no session setting called"):
        jvm.delta_setting_is_internal(spark, "no.such.setting")


def test_table_feature_is_deltas_own_description(spark) -> None:
    from deltalab.errors import DeltaLabError

    row_tracking = jvm.table_feature(spark, "rowTracking")
    assert (row_tracking.min_reader, row_tracking.min_writer, row_tracking.reader_writer) == (0, 7, False)
    assert "domainMetadata" in row_tracking.requires and row_tracking.removable
    assert jvm.table_feature(spark, "deletionVectors").reader_writer
    every = jvm.table_features(spark)
    assert every["rowTracking"] == row_tracking and not every["clustering"].removable
    with pytest.raises(DeltaLabError, match="no table feature called 'rowTrackin'"):
        jvm.table_feature(spark, "rowTrackin")
