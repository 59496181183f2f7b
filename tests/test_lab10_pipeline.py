"""The lab 10 checks (deltalab.labs.lab10_pipeline): the classic mistakes get their specific message.

The three mistakes issue 16 names (duplicate keys in the source, update_preimage counted as data, a
change-feed range read twice). The late change and the inserted delete have messages too; each check run
costs a few MERGEs, so the suite keeps to these three."""

from __future__ import annotations

from delta.tables import DeltaTable
from pyspark.sql import Window
from pyspark.sql import functions as F

from deltalab import latest_version, replay_log
from deltalab import streaming as st
from deltalab.labs import lab10_pipeline as lab
from lab_testing import check_failure as failure

COLUMNS = {c: f"s.{c}" for c in ("customer_id", "name", "email", "updated_at")}


def _upsert(spark, dedupe=True):
    """A silver upsert with one of the classic mistakes switched on."""
    def upsert(changes, target):
        newest_first = Window.partitionBy("customer_id").orderBy(F.col("updated_at").desc())
        latest = changes.withColumn("rank", F.row_number().over(newest_first))
        latest = latest.filter("rank = 1").drop("rank") if dedupe else changes
        later = " AND s.updated_at > t.updated_at"
        merge = (DeltaTable.forPath(spark, target).alias("t").merge(latest.alias("s"), "t.customer_id = s.customer_id")
                 .whenMatchedDelete(condition="s.op = 'delete'" + later)
                 .whenMatchedUpdate(condition="s.op <> 'delete'" + later, set=COLUMNS))
        merge.whenNotMatchedInsert(condition="s.op <> 'delete'", values=COLUMNS).execute()
    return upsert


def test_lab10_an_upsert_without_deduplication_is_told_to_keep_one_change_per_customer(spark):
    message = failure(lab.check_upsert_changes, _upsert(spark, dedupe=False))
    assert "2 rows for customer 1" in message and "one change per customer_id" in message, message


def _update_gold(spark, preimage_sign=-1, start_after_done=True):
    """A gold update with one of the classic mistakes switched on."""
    def update_gold(silver_path, gold_path):
        done = replay_log(gold_path).app_versions.get("gold", -1)
        last = latest_version(silver_path)
        if last <= done:
            return
        start = done + 1 if start_after_done else max(done, 0)
        changes = (spark.read.format("delta").option("readChangeFeed", "true").option("startingVersion", start)
                   .option("endingVersion", last).load(silver_path))
        sign = (F.when(F.col("_change_type").isin("insert", "update_postimage"), 1)
                .when(F.col("_change_type") == "update_preimage", preimage_sign).otherwise(-1))
        per_domain = changes.groupBy(F.split("email", "@").getItem(1).alias("domain")).agg(F.sum(sign).alias("change"))
        with st.idempotent_writes(spark, "gold", last):
            (DeltaTable.forPath(spark, gold_path).alias("t").merge(per_domain.alias("s"), "t.domain = s.domain")
             .whenMatchedUpdate(set={"customers": "t.customers + s.change"})
             .whenNotMatchedInsert(values={"domain": "s.domain", "customers": "s.change"}).execute())
    return update_gold


def test_lab10_update_preimages_counted_as_data_are_named(spark):
    message = failure(lab.check_update_gold, _update_gold(spark, preimage_sign=1))
    assert "counted twice" in message and "update_preimage" in message, message


def test_lab10_reading_the_last_version_again_is_named(spark):
    message = failure(lab.check_update_gold, _update_gold(spark, start_after_done=False))
    assert "after silver's batch 1" in message and "the version after the last one gold has seen" in message, message
