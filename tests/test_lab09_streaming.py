"""The lab 09 checks (deltalab.labs.lab09_streaming): the classic mistakes get their specific message.

Exercise 1's table (two queries, a checkpoint, early commits cleaned up) is built once per process
and shared with tests/test_labs.py, which `make test` runs on the same worker (tests/support/suite_schedule.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
from delta.tables import DeltaTable

from deltalab.labs import lab09_streaming as lab
from lab_testing import check_failure as failure


def _txns_of_commits(table_path: str, versions) -> dict[str, int]:
    found: dict[str, int] = {}
    log = Path(table_path) / "_delta_log"
    for version in versions:
        for line in (log / f"{version:020d}.json").read_text().splitlines():
            action = json.loads(line)
            if "txn" in action:
                found[action["txn"]["appId"]] = action["txn"]["version"]
    return found


# -- exercise 1 --------------------------------------------------------------------------------

def test_lab09_reading_only_the_json_commits_misses_the_query_whose_batches_are_in_the_checkpoint(spark):
    def json_only(table_path):
        names = (Path(table_path) / "_delta_log").glob("*.json")
        return _txns_of_commits(table_path, sorted(int(p.name[:20]) for p in names))

    message = failure(lab.check_committed_batches, json_only)
    assert "query B" in message and "no entry" in message and "checkpoint" in message, message


def test_lab09_reading_only_the_checkpoint_misses_the_later_commits(spark):
    def checkpoint_only(table_path):
        log = Path(table_path) / "_delta_log"
        newest = max(log.glob("*.checkpoint.parquet"))
        return {t["appId"]: t["version"] for t in pq.read_table(newest, columns=["txn"]).column("txn").to_pylist() if t}

    message = failure(lab.check_committed_batches, checkpoint_only)
    assert "query A" in message and "you answered 3" in message and "later commit replaces" in message, message


# -- exercise 2 --------------------------------------------------------------------------------

def _merge(spark, batch, target):
    (DeltaTable.forPath(spark, target).alias("t").merge(batch.alias("s"), "t.url = s.url")
     .whenMatchedUpdateAll().whenNotMatchedInsertAll().execute())


def test_lab09_an_upsert_without_deduplication_inserts_a_url_twice(spark):
    def upsert(batch, batch_id, target, app_id):
        settings = {"spark.databricks.delta.write.txnAppId": app_id, "spark.databricks.delta.write.txnVersion": str(batch_id)}
        from deltalab import temporary_conf

        with temporary_conf(spark, settings):
            _merge(spark, batch, target)

    message = failure(lab.check_upsert_classifications, upsert)
    assert "2 rows for a.example" in message and "largest ts" in message, message


def test_lab09_an_upsert_with_its_own_app_id_is_told_to_use_the_argument(spark):
    def upsert(batch, batch_id, target, app_id):
        from deltalab import temporary_conf

        newest_ts = batch.groupBy("url").agg({"ts": "max"}).withColumnRenamed("max(ts)", "ts")
        latest = newest_ts.join(batch, ["url", "ts"])
        settings = {"spark.databricks.delta.write.txnAppId": "upsert", "spark.databricks.delta.write.txnVersion": str(batch_id)}
        with temporary_conf(spark, settings):
            _merge(spark, latest.select("url", "category", "ts"), target)

    message = failure(lab.check_upsert_classifications, upsert)
    assert "labelled {'upsert': 1}" in message and "app_id argument" in message, message


def test_lab09_txn_settings_left_set_after_the_stream_are_named(spark):
    def upsert(batch, batch_id, target, app_id):
        spark.conf.set("spark.databricks.delta.write.txnAppId", app_id)
        spark.conf.set("spark.databricks.delta.write.txnVersion", str(batch_id))
        _merge(spark, batch.dropDuplicates(["url"]), target)

    message = failure(lab.check_upsert_classifications, upsert)
    assert "still has" in message and "temporary_conf" in message, message
    assert spark.conf.get("spark.databricks.delta.write.txnAppId", None) is None, "the check unsets them again"
