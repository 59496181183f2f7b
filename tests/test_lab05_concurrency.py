"""The lab 05 checks (deltalab.labs.lab05_concurrency): typical wrong answers get their specific message.

The pairs of exercise 1 and the killed-writer table of exercise 3 are measured once per process
and shared with tests/test_labs.py, which `make test` runs on the same worker (tests/support/suite_schedule.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import delta.exceptions as dx

from deltalab.labs import lab05_concurrency as cx
from lab_testing import check_failure as failure


# -- exercise 1 --------------------------------------------------------------------------------

def test_lab05_a_prediction_that_is_not_a_class_name_is_refused_before_anything_runs(spark):
    message = failure(cx.check_predict_conflict, lambda held, first: "conflict")
    assert "returned 'conflict'" in message and "'none'" in message, message


def test_lab05_wrong_predictions_name_each_pair_and_what_really_happened(spark):
    message = failure(cx.check_predict_conflict, lambda held, first: "none")
    real = cx.measure_pairs(spark)
    assert real[("append", "optimize")] == "none", real
    wrong = [pair for pair in cx.PREDICTION_PAIRS if real[pair] != "none"]
    assert f"{len(wrong)} of {len(cx.PREDICTION_PAIRS)} predictions" in message, message
    for held, first in wrong:
        assert f"{held} held, {first} first: you said none, Delta raised {real[(held, first)]}" in message, message


def test_lab05_predictions_as_classes_are_accepted(spark, capsys):
    real = cx.measure_pairs(spark)
    classes = {c.__name__: c for c in (dx.ConcurrentAppendException, dx.ConcurrentDeleteReadException,
                                       dx.MetadataChangedException)}
    cx.check_predict_conflict(lambda held, first: classes.get(real[(held, first)], "none"))
    assert capsys.readouterr().out.startswith("✓ predict_conflict")


# -- exercise 2 --------------------------------------------------------------------------------

def test_lab05_a_retry_that_catches_every_exception_is_too_broad(spark):
    def retry(operation, max_attempts=3):
        for attempt in range(max_attempts):
            try:
                return operation()
            except Exception:
                if attempt == max_attempts - 1:
                    raise

    message = failure(cx.check_retry, retry)
    assert "AnalysisException" in message and "called 3 times" in message and "too much" in message, message


def test_lab05_a_retry_on_the_class_that_sounds_like_a_parent_lets_the_conflict_through(spark):
    def retry(operation, max_attempts=3):
        for attempt in range(max_attempts):
            try:
                return operation()
            except dx.DeltaConcurrentModificationException:
                if attempt == max_attempts - 1:
                    raise

    message = failure(cx.check_retry, retry)
    assert "ConcurrentAppendException" in message and "let the conflict through" in message, message
    assert "do not inherit" in message, message


def test_lab05_a_retry_that_never_gives_up_is_stopped_and_named(spark):
    def retry(operation, max_attempts=3):
        while True:
            try:
                return operation()
            except (dx.ConcurrentAppendException, dx.ConcurrentDeleteReadException):
                continue

    message = failure(cx.check_retry, retry)
    assert "never gave up" in message, message


# -- exercise 3 --------------------------------------------------------------------------------

def every_add(table: Path) -> set[str]:
    added = set()
    for commit in (table / "_delta_log").glob("*.json"):
        for line in commit.read_text().splitlines():
            action = json.loads(line)
            if "add" in action:
                added.add(action["add"]["path"])
    return added


def test_lab05_orphans_must_not_include_log_or_checksum_files(spark):
    def orphan_files(table_path):
        table = Path(table_path)
        return {p.relative_to(table).as_posix() for p in table.rglob("*") if p.is_file()} - every_add(table)

    message = failure(cx.check_orphan_files, orphan_files)
    assert "log or checksum file" in message, message


def test_lab05_orphans_against_the_latest_snapshot_only_count_deleted_files(spark):
    def orphan_files(table_path):
        table = Path(table_path)
        live = {Path(f).name for f in spark.read.format("delta").load(table_path).inputFiles()}
        return {p.name for p in table.glob("*.parquet")} - live

    message = failure(cx.check_orphan_files, orphan_files)
    assert "a file a DELETE removed" in message and "every commit" in message, message


def test_lab05_orphans_as_absolute_paths_are_accepted_and_match_the_killed_writer(spark, capsys):
    built = cx.orphan_table(spark)
    assert len(built["orphans"]) == 2 and len(built["removed"]) == 1, built

    def orphan_files(table_path):
        table = Path(table_path)
        return {str(p) for p in table.glob("*.parquet")} - {str(table / f) for f in every_add(table)}

    cx.check_orphan_files(orphan_files)
    assert capsys.readouterr().out.startswith("✓ orphan_files")
    assert cx.orphan_table(spark) is built, "the killed-writer table is built once and reused"
