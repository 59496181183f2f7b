"""The lab 10 checks (deltalab.labs.lab10_pipeline): the solution passes on generated batches, and
wrong answers, the classic ones and those an easier setting would let through, get their message.

The solutions are the source notebook's own cells. Seeds (fixed here with DELTALAB_CHECK_SEED):

- 8: 3 batches; gold's silver has deletion vectors, one property change, gold starts empty;
- 16: 4 batches; no deletion vectors, one property change, gold starts from a backfill;
- 14: 3 batches; deletion vectors, two property changes, a backfill.

Every seed has a line sent twice, two changes of a customer in one batch in either order, a delete of
nobody, a late update after a delete, a late delete, a line sent again (tests/test_lab10_pipeline.py
checks the generator for each).
"""

from __future__ import annotations

import ast
import random
import re
from pathlib import Path

import pytest
from delta.tables import DeltaTable
from pyspark.sql import Window
from pyspark.sql import functions as F

from deltalab import latest_version, replay_log
from deltalab import streaming as st
from deltalab.labs import lab10_pipeline as lab
from deltalab.labs.tables import SEED_ENV
from deltalab.workdir import workdir
from lab_testing import solution_and_student_version
from lab_testing import check_failure as failure
from lab_testing import solution_namespace, solution_seeds

# The labs' tests run in make test-labs (and those of its solutions at their seeds, marked seeds too, in
# make test-seeds), not in make test: tests/README.md says why.
pytestmark = pytest.mark.labs

#: The lab's solution on tables of a fresh seed, then its student version (tests/support/lab_testing.py).
test_the_solution_passes_and_the_student_version_says_what_is_missing = solution_and_student_version("lab10_pipeline")

SOURCE = Path(__file__).resolve().parents[1] / "labs" / "source" / "lab10_pipeline" / "lab10_pipeline.ipynb"
SEEDS = [8, 16, 14]
ROW = {c: f"s.{c}" for c in ("customer_id", "name", "email", "updated_at")} | {"deleted": "s.op = 'delete'"}


@pytest.fixture(scope="module")
def solution(spark) -> dict:
    """The source notebook's setup and solution cells, run in one namespace."""
    return solution_namespace(SOURCE, ("setup", "upsert_changes", "update_gold"))


@pytest.fixture(autouse=True)
def fixed_seed(monkeypatch):
    """Wrong answers run on the tables of one seed (the solution tests set their own): a failing test
    then fails the same way every time."""
    monkeypatch.setenv(SEED_ENV, "16")


def _gold_table() -> tuple[Path, Path]:
    """Silver and gold of the gold check's last run."""
    folder = workdir("labs_checks_lab10_gold", fresh=False)
    return folder / "silver", folder / "gold"


def spark_rows(spark, path: Path) -> list:
    return spark.read.format("delta").load(str(path)).collect()


def _live_domains(spark, silver: Path) -> dict:
    """Customers per domain of silver's live rows, as Spark reads them."""
    rows = spark.read.format("delta").load(str(silver)).filter("NOT deleted").collect()
    return {d: sum(1 for r in rows if r["email"].split("@")[1] == d) for d in {r["email"].split("@")[1] for r in rows}}


def _shows_gold_not_silver(spark, message: str) -> None:
    """The message shows the learner's gold, not what silver says gold should be."""
    shown = re.search(r"gold is (\{.*?\})", message)
    expected = _live_domains(spark, _gold_table()[0])
    assert shown and ast.literal_eval(shown.group(1)) != expected, message
    assert str(dict(sorted(expected.items()))) not in message, message


def _shows_no_expected_row(message: str) -> None:
    """The message names a customer and shows the learner's row, never the row silver should have."""
    seed = int(re.search(r"tables of seed (\d+)", message).group(1))
    number, customer = map(int, re.search(r"after batch (\d+) customer (\d+)", message).groups())
    expected = lab._silver_after(lab._change_batches(random.Random(seed))[: number + 1])[customer]
    assert str(expected) not in message, message


# -- the generator -----------------------------------------------------------------------------

@pytest.mark.parametrize("seed", SEEDS)
def test_lab10_every_seed_has_the_problems_the_checks_rely_on(seed):
    batches = lab._change_batches(random.Random(seed))
    lines = [change for batch in batches for change in batch]
    assert any(batch.count(change) > 1 for batch in batches for change in batch), "a line sent twice"
    assert any(c in batches[i] for i in range(1, len(batches)) for b in batches[:i] for c in b), "a line sent again"
    times = {}
    for number, batch in enumerate(batches):
        for op, customer, *_, at in batch:
            times.setdefault(customer, []).append((number, at, op))
    late_after_delete = [c for c, seen in times.items()
                         if any(op != "delete" and any(n2 < n and op2 == "delete" and at2 > at for n2, at2, op2 in seen)
                                for n, at, op in seen)]
    late_delete = [c for c, seen in times.items()
                   if any(op == "delete" and any(n2 < n and op2 != "delete" and at2 > at for n2, at2, op2 in seen)
                          for n, at, op in seen)]
    assert late_after_delete and late_delete, times
    assert any(op == "delete" and len(times[c]) == 1 and email for op, c, _, email, _ in lines), "a delete of nobody"


# -- exercise 1 --------------------------------------------------------------------------------

def _upsert(spark, dedupe=True, condition="s.updated_at > t.updated_at", hard_delete=False, keep_values=False):
    """A silver upsert with one of the classic mistakes switched on."""
    def upsert(changes, target):
        newest_first = Window.partitionBy("customer_id").orderBy(F.col("updated_at").desc())
        latest = changes.withColumn("rank", F.row_number().over(newest_first)).filter("rank = 1").drop("rank")
        merge = DeltaTable.forPath(spark, target).alias("t").merge((latest if dedupe else changes).alias("s"),
                                                                   "t.customer_id = s.customer_id")
        if hard_delete:  # the lab's solution before tombstones
            merge = (merge.whenMatchedDelete(condition=f"s.op = 'delete' AND {condition}")
                     .whenMatchedUpdate(condition=f"s.op <> 'delete' AND {condition}", set=ROW)
                     .whenNotMatchedInsert(condition="s.op <> 'delete'", values=ROW))
        elif keep_values:
            merge = (merge.whenMatchedUpdate(condition=f"s.op = 'delete' AND {condition}",
                                             set={"updated_at": "s.updated_at", "deleted": "true"})
                     .whenMatchedUpdate(condition=condition, set=ROW).whenNotMatchedInsert(values=ROW))
        else:
            merge = merge.whenMatchedUpdate(condition=condition, set=ROW).whenNotMatchedInsert(values=ROW)
        merge.execute()
    return upsert


@pytest.mark.parametrize("seed", solution_seeds(SEEDS))
def test_lab10_the_upsert_solution_passes_on_generated_batches(solution, monkeypatch, capsys, seed):
    monkeypatch.setenv(SEED_ENV, str(seed))
    lab.check_upsert_changes(solution["upsert_changes"])
    assert capsys.readouterr().out.startswith("✓ upsert_changes")


def test_lab10_an_upsert_without_deduplication_is_told_to_keep_one_change_per_customer(spark):
    message = failure(lab.check_upsert_changes, _upsert(spark, dedupe=False))
    assert "one change per customer_id" in message, message


def test_lab10_a_hard_delete_lets_a_late_change_bring_the_customer_back(spark):
    message = failure(lab.check_upsert_changes, _upsert(spark, hard_delete=True))
    assert "tombstone" in message and ("came back" in message or "is missing" in message), message
    assert "seed 16" in message, message


def test_lab10_a_late_change_that_wins_is_refused(spark):
    message = failure(lab.check_upsert_changes, _upsert(spark, condition="true"))
    assert "late change" in message and "s.updated_at > t.updated_at" in message, message
    _shows_no_expected_row(message)


def test_lab10_rewriting_a_row_as_it_was_shows_in_the_change_feed(spark):
    message = failure(lab.check_upsert_changes, _upsert(spark, condition="s.updated_at >= t.updated_at"))
    assert "change feed" in message and "did not change" in message, message


def test_lab10_a_tombstone_that_keeps_the_old_values_is_refused(spark):
    message = failure(lab.check_upsert_changes, _upsert(spark, keep_values=True))
    assert "none of its changes" in message and "deleted = (op = 'delete')" in message, message
    _shows_no_expected_row(message)


def test_lab10_rewriting_silver_instead_of_merging_is_refused(spark):
    def upsert(changes, target):
        newest_first = Window.partitionBy("customer_id").orderBy(F.col("updated_at").desc())
        rows = changes.select("customer_id", "name", "email", "updated_at", F.expr("op = 'delete'").alias("deleted"))
        both = spark.read.format("delta").load(target).unionByName(rows)
        latest = both.withColumn("rank", F.row_number().over(newest_first)).filter("rank = 1").drop("rank")
        latest.localCheckpoint().write.format("delta").mode("overwrite").save(target)

    message = failure(lab.check_upsert_changes, upsert)
    assert "one MERGE per batch" in message and "WRITE" in message, message


def test_lab10_a_session_setting_left_on_is_refused(spark):
    key = "spark.databricks.delta.schema.autoMerge.enabled"

    def upsert(changes, target):
        spark.conf.set(key, "true")
        _upsert(spark)(changes, target)

    try:
        message = failure(lab.check_upsert_changes, upsert)
    finally:
        spark.conf.unset(key)
    assert f"left the session setting {key}" in message, message


# -- exercise 2 --------------------------------------------------------------------------------

def _update_gold(spark, preimage=-1, tombstones=0, start_after_done=True, done_from="txn", label="silver",
                 recompute=False):
    """A gold update with one of the classic mistakes switched on."""
    def update_gold(silver_path, gold_path):
        done = replay_log(gold_path).app_versions.get("gold", -1) if done_from == "txn" else latest_version(gold_path)
        last = latest_version(silver_path)
        if last <= done:
            return
        label_version = last if label == "silver" else latest_version(gold_path) + 1
        if recompute:  # gold recomputed from all of silver
            counts = (spark.read.format("delta").load(silver_path).filter("NOT deleted")
                      .groupBy(F.split("email", "@").getItem(1).alias("domain")).agg(F.count("*").alias("customers")))
            (counts.write.format("delta").mode("overwrite").option("txnAppId", "gold")
             .option("txnVersion", label_version).save(gold_path))
            return
        start = done + 1 if start_after_done else max(done, 0)
        changes = (spark.read.format("delta").option("readChangeFeed", "true").option("startingVersion", start)
                   .option("endingVersion", last).load(silver_path))
        sign = (F.when(F.col("deleted"), tombstones).when(F.col("_change_type").isin("insert", "update_postimage"), 1)
                .when(F.col("_change_type") == "update_preimage", preimage).otherwise(-1))
        if tombstones:  # the deleted flag ignored: a tombstone's rows count like any other
            sign = (F.when(F.col("_change_type").isin("insert", "update_postimage"), 1)
                    .when(F.col("_change_type") == "update_preimage", preimage).otherwise(-1))
        per_domain = changes.groupBy(F.split("email", "@").getItem(1).alias("domain")).agg(F.sum(sign).alias("change"))
        with st.idempotent_writes(spark, "gold", label_version):
            (DeltaTable.forPath(spark, gold_path).alias("t").merge(per_domain.alias("s"), "t.domain = s.domain")
             .whenMatchedUpdate(set={"customers": "t.customers + s.change"})
             .whenNotMatchedInsert(values={"domain": "s.domain", "customers": "s.change"}).execute())
    return update_gold


@pytest.mark.parametrize("seed", solution_seeds(SEEDS))
def test_lab10_the_gold_solution_passes_on_generated_silvers(solution, monkeypatch, capsys, seed):
    monkeypatch.setenv(SEED_ENV, str(seed))
    lab.check_update_gold(solution["update_gold"])
    assert capsys.readouterr().out.startswith("✓ update_gold")
    silver, gold = _gold_table()
    assert replay_log(gold).app_versions == {"gold": latest_version(silver)} != {"gold": latest_version(gold)}
    gold_rows = {r["domain"]: r["customers"] for r in spark_rows(solution["spark"], gold) if r["customers"]}
    assert gold_rows == _live_domains(solution["spark"], silver), "gold = silver's live rows, as Spark reads both"


def test_lab10_update_preimages_counted_as_data_are_named(spark):
    message = failure(lab.check_update_gold, _update_gold(spark, preimage=1))
    assert "counted twice" in message and "update_preimage" in message, message
    _shows_gold_not_silver(spark, message)


def test_lab10_tombstones_counted_as_customers_are_named(spark):
    message = failure(lab.check_update_gold, _update_gold(spark, tombstones=1))
    assert "tombstones" in message and "counts 0" in message, message
    _shows_gold_not_silver(spark, message)


def test_lab10_reading_the_last_version_again_is_named(spark):
    message = failure(lab.check_update_gold, _update_gold(spark, start_after_done=False))
    assert ("added again" in message and "AFTER the one gold recorded" in message) or (
        "already counted" in message and "the version after the one gold recorded" in message), message


def test_lab10_gold_recomputed_from_all_of_silver_is_refused(spark):
    message = failure(lab.check_update_gold, _update_gold(spark, recompute=True))
    assert "read a data file of silver" in message and "change feed" in message, message


def test_lab10_golds_own_version_taken_for_the_silver_version_is_refused(spark):
    message = failure(lab.check_update_gold, _update_gold(spark, done_from="gold"))
    assert any(part in message for part in ("not gold's own version", "gold's commits are labelled", "already counted")), \
        message
    if "gold is {" in message:
        _shows_gold_not_silver(spark, message)


def test_lab10_labelling_gold_with_its_own_version_is_refused(spark):
    message = failure(lab.check_update_gold, _update_gold(spark, label="gold"))
    assert "labelled" in message and "not gold's own version" in message, message


def test_lab10_txn_settings_left_behind_by_gold_are_refused(spark):
    def update_gold(silver_path, gold_path):
        _update_gold(spark)(silver_path, gold_path)
        spark.conf.set("spark.databricks.delta.write.txnAppId", "gold")

    try:
        message = failure(lab.check_update_gold, update_gold)
    finally:
        spark.conf.unset("spark.databricks.delta.write.txnAppId")
    assert "left the session setting spark.databricks.delta.write.txnAppId" in message, message
