"""The lab 09 checks (deltalab.labs.lab09_streaming): the solution passes on generated tables, and
wrong answers, the classic ones and those fitted to one table, get their specific message.

Exercise 1's example table (two queries, a checkpoint, early commits cleaned up) is built once per
process and shared with the run of lab 09's solution and student version in this file (``--dist loadfile``
keeps a file on one worker). The solutions are the source notebook's own cells. Seeds of the
generated tables (fixed here with DELTALAB_CHECK_SEED):

- 6: no checkpoint at all; the upsert gets 4 batches;
- 5: one checkpoint, the commits before it cleaned up, a table folder with a space in its name; 3 batches;
- 8: two checkpoints, nothing cleaned up; 3 batches.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from delta.tables import DeltaTable
from pyspark.sql import Window
from pyspark.sql import functions as F

from deltalab import checkpoint_versions, latest_version, replay_log, temporary_conf
from deltalab.jvm import delta_app_versions, delta_log
from deltalab.labs import lab09_streaming as lab
from deltalab.labs.tables import SEED_ENV
from deltalab.workdir import workdir
from lab_testing import solution_and_student_version
from lab_testing import check_failure as failure
from lab_testing import solution_namespace, solution_seeds

# The labs' tests run in make test-labs (and those of its solutions at their seeds, marked seeds too, in
# make test-seeds), not in make test: tests/README.md says why.
pytestmark = pytest.mark.labs

#: The lab's solution on tables of a fresh seed, then its student version (tests/support/lab_testing.py).
test_the_solution_passes_and_the_student_version_says_what_is_missing = solution_and_student_version("lab09_streaming")

SOURCE = Path(__file__).resolve().parents[1] / "labs" / "source" / "lab09_streaming" / "lab09_streaming.ipynb"
TXN_APP_ID = "spark.databricks.delta.write.txnAppId"


@pytest.fixture(scope="module")
def solution(spark) -> dict:
    """The source notebook's setup and solution cells, run in one namespace."""
    return solution_namespace(SOURCE, ("setup", "committed_batches", "upsert_classifications"))


@pytest.fixture(autouse=True)
def fixed_seed(monkeypatch):
    """Wrong answers run on the tables of one seed (the solution tests set their own): a failing test
    then fails the same way every time."""
    monkeypatch.setenv(SEED_ENV, "8")


def _generated_table() -> Path:
    """The table exercise 1's check generated in its last run."""
    folder = workdir("labs_checks_lab09_committed_run", fresh=False)
    return next(p for p in folder.iterdir() if (p / "_delta_log").is_dir())


def _numbers(message: str) -> set[int]:
    """The whole numbers a message shows, the seed's aside."""
    return {int(n) for n in re.findall(r"\d+", re.sub(r"\(tables of seed \d+\)", "", message))}


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

@pytest.mark.parametrize("seed", solution_seeds([6, 5, 8]))
def test_lab09_the_solution_passes_on_generated_tables(solution, monkeypatch, capsys, seed):
    monkeypatch.setenv(SEED_ENV, str(seed))
    lab.check_committed_batches(solution["committed_batches"])
    assert capsys.readouterr().out.startswith("✓ committed_batches")
    table = _generated_table()
    checkpoints = checkpoint_versions(table)
    has_commit_0 = (table / "_delta_log" / f"{0:020d}.json").exists()
    shape = {6: (0, True), 5: (1, False), 8: (2, True)}[seed]
    assert (len(checkpoints), has_commit_0) == shape, (checkpoints, has_commit_0)
    assert (" " in table.name) == (seed == 5)


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
    assert "you answered 3" in message and "later txn of the same appId replaces" in message, message


def test_lab09_table_versions_instead_of_batch_ids_are_refused(solution):
    def table_versions(table_path):
        return {app: latest_version(table_path) for app in solution["committed_batches"](table_path)}

    message = failure(lab.check_committed_batches, table_versions)
    assert "txn.version (the writer's batch id), not the table version" in message, message


def test_lab09_an_answer_fitted_to_the_example_fails_on_the_generated_table(spark, monkeypatch):
    monkeypatch.setenv(SEED_ENV, "5")
    example = delta_app_versions(spark, lab._two_query_table(spark)[0])
    message = failure(lab.check_committed_batches, lambda table_path: dict(example))
    assert "a generated table" in message and "seed 5" in message, message
    expected = delta_app_versions(spark, _generated_table())
    assert not _numbers(message) & set(expected.values()), message


def test_lab09_reading_only_the_first_txn_of_a_commit_fails_on_a_commit_with_two(spark):
    def first_txn_only(table_path):
        log = Path(table_path) / "_delta_log"
        checkpoints = sorted(log.glob("*.checkpoint.parquet"))
        found = {}
        if checkpoints:
            found = {t["appId"]: t["version"] for t in pq.read_table(checkpoints[-1], columns=["txn"]).column("txn")
                     .to_pylist() if t}
        newest = int(checkpoints[-1].name[:20]) if checkpoints else -1
        for path in sorted(log.glob("*.json")):
            if path.name[:20].isdigit() and int(path.name[:20]) > newest:
                txns = [json.loads(line)["txn"] for line in path.read_text().splitlines() if '"txn"' in line]
                if txns:
                    found[txns[0]["appId"]] = txns[0]["version"]
        return found

    message = failure(lab.check_committed_batches, first_txn_only)
    assert "a generated table" in message and ("no entry" in message or "you answered" in message), message


def test_lab09_the_courses_replay_log_is_refused(spark):
    message = failure(lab.check_committed_batches, lambda table_path: replay_log(table_path).app_versions)
    assert "called deltalab.log.replay_log" in message and "pyarrow" in message, message


def test_lab09_asking_delta_fails_on_a_table_spark_cannot_read(spark):
    def through_delta(table_path):
        snapshot = delta_log(spark, table_path).unsafeVolatileSnapshot()
        entries, found = snapshot.transactions().iterator(), {}
        while entries.hasNext():
            entry = entries.next()
            found[str(entry._1())] = int(entry._2())
        return found

    message = failure(lab.check_committed_batches, through_delta)
    assert "raised" in message and "Spark and Delta refuse the table" in message and "json and pyarrow" in message, message


def test_lab09_the_newest_checksum_file_is_not_the_log(spark):
    def newest_crc(table_path):
        log = Path(table_path) / "_delta_log"
        newest = max(p for p in log.glob("*.crc") if p.name[:20].isdigit())
        return {t["appId"]: t["version"] for t in json.loads(newest.read_text())["setTransactions"]}

    message = failure(lab.check_committed_batches, newest_crc)
    assert "Spark cannot read" in message and "checksum files are optional" in message, message


def test_lab09_writing_into_the_table_is_refused(solution):
    def leaves_a_note(table_path):
        answer = solution["committed_batches"](table_path)
        (Path(table_path) / "_delta_log" / "answer.json").write_text(json.dumps(answer))
        return answer

    try:
        message = failure(lab.check_committed_batches, leaves_a_note)
    finally:
        (lab._two_query_table(solution["spark"])[0] / "_delta_log" / "answer.json").unlink(missing_ok=True)
    assert "changed the folder events" in message and "answer.json" in message, message


# -- exercise 2 --------------------------------------------------------------------------------

def _merge(spark, batch, target, condition=None):
    (DeltaTable.forPath(spark, target).alias("t").merge(batch.alias("s"), "t.url = s.url")
     .whenMatchedUpdateAll(condition=condition).whenNotMatchedInsertAll().execute())


def _newest(batch):
    newest_first = Window.partitionBy("url").orderBy(F.col("ts").desc())
    return batch.withColumn("rank", F.row_number().over(newest_first)).filter("rank = 1").drop("rank")


def _labelled(spark, app_id, batch_id):
    return temporary_conf(spark, {TXN_APP_ID: app_id, "spark.databricks.delta.write.txnVersion": str(batch_id)})


@pytest.mark.parametrize("seed", solution_seeds([6, 5, 8]))
def test_lab09_the_upsert_solution_passes_on_generated_batches(solution, monkeypatch, capsys, seed):
    monkeypatch.setenv(SEED_ENV, str(seed))
    lab.check_upsert_classifications(solution["upsert_classifications"])
    assert capsys.readouterr().out.startswith("✓ upsert_classifications")


def test_lab09_an_upsert_without_deduplication_keeps_two_rows_or_fails(spark):
    def upsert(batch, batch_id, target, app_id):
        with _labelled(spark, app_id, batch_id):
            _merge(spark, batch, target, "s.ts > t.ts")

    message = failure(lab.check_upsert_classifications, upsert)
    assert "keep one row per url" in message, message


def test_lab09_an_upsert_that_lets_late_data_win_is_refused(spark):
    def upsert(batch, batch_id, target, app_id):  # the lab's solution before late data was checked
        with _labelled(spark, app_id, batch_id):
            _merge(spark, _newest(batch), target)

    message = failure(lab.check_upsert_classifications, upsert)
    assert "a late classification" in message and "s.ts > t.ts" in message, message


def test_lab09_the_first_category_with_the_largest_ts_is_refused(spark):
    def upsert(batch, batch_id, target, app_id):
        latest = batch.groupBy("url").agg(F.first("category").alias("category"), F.max("ts").alias("ts"))
        with _labelled(spark, app_id, batch_id):
            _merge(spark, latest, target, "s.ts > t.ts")

    message = failure(lab.check_upsert_classifications, upsert)
    assert "no batch sent" in message or "the same batch classified it again" in message, message


def test_lab09_an_upsert_with_its_own_app_id_is_told_to_use_the_argument(spark):
    def upsert(batch, batch_id, target, app_id):
        with _labelled(spark, "upsert", batch_id):
            _merge(spark, _newest(batch), target, "s.ts > t.ts")

    message = failure(lab.check_upsert_classifications, upsert)
    assert "labelled {'upsert':" in message and "app_id argument" in message, message


def test_lab09_txn_settings_left_set_are_refused_and_put_back(spark):
    def upsert(batch, batch_id, target, app_id):
        spark.conf.set(TXN_APP_ID, app_id)
        spark.conf.set("spark.databricks.delta.write.txnVersion", str(batch_id))
        _merge(spark, _newest(batch), target, "s.ts > t.ts")

    message = failure(lab.check_upsert_classifications, upsert)
    assert f"left the session setting {TXN_APP_ID} changed" in message and "temporary_conf" in message, message
    assert spark.conf.get(TXN_APP_ID, None) is None, "the check puts the settings back"


def test_lab09_rewriting_the_table_instead_of_merging_is_refused(spark):
    def upsert(batch, batch_id, target, app_id):
        merged = _newest(spark.read.format("delta").load(target).unionByName(batch)).localCheckpoint()
        (merged.write.format("delta").mode("overwrite").option("txnAppId", app_id).option("txnVersion", batch_id)
         .save(target))

    message = failure(lab.check_upsert_classifications, upsert)
    assert "not a MERGE" in message, message
