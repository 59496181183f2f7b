"""deltalab.streaming on a real stream: landing files, availableNow runs, the streaming checkpoint, txn actions.

The query killed after its Delta commit (commit_then_hold, kill_after_delta_commit) needs a second
driver; notebook 09 runs it under nbval and asserts what it leaves.
"""

from __future__ import annotations

import json

import pytest

from deltalab import latest_version, replay_log
from deltalab import streaming as st
from deltalab.errors import DeltaLabError
from deltalab.jvm import delta_app_versions

SCHEMA = "id LONG, batch INT"


def test_drop_landing_file_writes_whole_json_lines_and_leaves_no_temporary_file(wd):
    path = st.drop_landing_file(wd / "landing", "batch-000.json", [{"id": 1, "batch": 0}, {"id": 2, "batch": 0}])
    assert [json.loads(line) for line in path.read_text().splitlines()] == [{"id": 1, "batch": 0}, {"id": 2, "batch": 0}]
    assert sorted(p.name for p in (wd / "landing").iterdir()) == ["batch-000.json"]


def test_drop_landing_lines_writes_text_lines_in_landing_order(wd):
    first = st.drop_landing_lines(wd / "logs", "2020-03-02-00-16-21-A", ["one request", "another request"])
    second = st.drop_landing_lines(wd / "logs", "2020-03-02-00-16-21-B", ["a third"])
    assert first.read_text() == "one request\nanother request\n" and second.read_text() == "a third\n"
    assert first.stat().st_mtime_ns // 1_000_000 < second.stat().st_mtime_ns // 1_000_000, "landed later, read later"
    assert sorted(p.name for p in (wd / "logs").iterdir()) == ["2020-03-02-00-16-21-A", "2020-03-02-00-16-21-B"]


def test_drop_landing_file_refuses_a_name_spark_would_skip(wd):
    with pytest.raises(DeltaLabError, match="never reads it"):
        st.drop_landing_file(wd / "landing", "_batch.json", [{"id": 1}])


def test_query_id_says_when_a_folder_is_no_streaming_checkpoint(wd):
    with pytest.raises(DeltaLabError, match="no metadata file"):
        st.query_id(wd)


def test_a_stream_into_delta_one_commit_and_one_txn_per_batch(spark, wd):
    landing, table, checkpoint = wd / "landing", wd / "table", wd / "_checkpoint"
    for number in range(2):
        st.drop_landing_file(landing, f"batch-{number:03d}.json", [{"id": 10 * number + i, "batch": number} for i in range(3)])
    writer = (spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).json(str(landing))
              .writeStream.format("delta").option("checkpointLocation", str(checkpoint)))
    query = st.run_available(writer, table)

    assert st.batch_rows(query) == [(0, 3), (1, 3)]
    assert st.query_id(checkpoint) == query.id
    assert st.checkpoint_batches(checkpoint) == {"offsets": [0, 1], "commits": [0, 1]}
    assert st.batch_offsets(checkpoint, 1) == [{"logOffset": 1}]
    assert st.txn_actions(table) == [{"table version": 0, "appId": query.id, "txn version": 0},
                                     {"table version": 1, "appId": query.id, "txn version": 1}]
    assert delta_app_versions(spark, table) == replay_log(table).app_versions == {query.id: 1}
    assert delta_app_versions(spark, table, version=0) == {query.id: 0}
    with pytest.raises(DeltaLabError, match=r"has no batch 5 \(planned: \[0, 1\]\)"):
        st.batch_offsets(checkpoint, 5)


def test_checkpoint_batches_of_a_query_that_never_ran_is_empty(wd):
    assert st.checkpoint_batches(wd / "nothing") == {"offsets": [], "commits": []}


def test_files_landed_in_a_row_have_increasing_modification_times(wd):
    """A file source reads new files in order of modification time (milliseconds): landing order must be kept."""
    paths = [st.drop_landing_file(wd / "landing", f"batch-{n:03d}.json", [{"id": n}]) for n in range(5)]
    millis = [p.stat().st_mtime_ns // 1_000_000 for p in paths]
    assert millis == sorted(set(millis)), millis


def test_idempotent_writes_label_a_merge_and_skip_it_the_second_time(spark, wd):
    from delta.tables import DeltaTable

    table = wd / "merged"
    spark.createDataFrame([(1, 0)], SCHEMA).write.format("delta").save(str(table))
    source = spark.createDataFrame([(1, 5), (2, 5)], SCHEMA)

    def merge_batch_7():
        with st.idempotent_writes(spark, "upsert", 7):
            (DeltaTable.forPath(spark, str(table)).alias("t").merge(source.alias("s"), "t.id = s.id")
             .whenMatchedUpdateAll().whenNotMatchedInsertAll().execute())

    merge_batch_7()
    merge_batch_7()
    assert latest_version(table) == 1 and replay_log(table).app_versions == {"upsert": 7}, "the second MERGE was skipped"
    assert spark.conf.get("spark.databricks.delta.write.txnAppId", None) is None, "the settings are unset afterwards"


@pytest.mark.parametrize("app_id, version, says", [("", 0, "is not a name"), ("upsert", -1, "is not a batch id"),
                                                  ("upsert", True, "is not a batch id")])
def test_idempotent_writes_refuse_what_is_no_label(spark, app_id, version, says):
    with pytest.raises(DeltaLabError, match=says):
        st.idempotent_writes(spark, app_id, version)
