"""The lab 05 checks (deltalab.labs.lab05_concurrency): the solution passes at three seeds, and each
kind of wrong answer, from a classic misconception to a side effect, is refused with a message that
says what is wrong and never shows the expected answer.

The outcomes of the pairs of exercise 1 are measured by the check itself (``measured_outcome``, kept
per pair) and the killed-writer table of exercise 3 is built once per process; both are shared with
the run of lab 05's solution and student version in this file (``--dist loadfile`` keeps a file on one worker).
Expected answers come from Delta: the measured pairs, and the tables the check generates
(``orphan_history`` at the same seed), never from numbers typed here.
"""

from __future__ import annotations

import dataclasses
import json
import os
import random
import re
import shutil
from pathlib import Path
from urllib.parse import unquote

import delta.exceptions as dx
import pytest

from deltalab.concurrency import CONFLICT_CLASSES
from deltalab.files import data_files
from deltalab.labs import lab05_concurrency as cx
from deltalab.labs.tables import SEED_ENV, fresh_dir
from lab_testing import solution_and_student_version
from lab_testing import check_failure as failure
from lab_testing import solution_seeds

# The labs' tests run in make test-labs (and those of its solutions at their seeds, marked seeds too, in
# make test-seeds), not in make test: tests/README.md says why.
pytestmark = pytest.mark.labs

#: The lab's solution on tables of a fresh seed, then its student version (tests/support/lab_testing.py).
test_the_solution_passes_and_the_student_version_says_what_is_missing = solution_and_student_version("lab05_concurrency")

#: 1: deletion vectors, checkpoint every 2 commits; 5: no deletion vectors, no checkpoint;
#: 10: no deletion vectors, checkpoint every 3 commits. Each run of exercise 1 asks 8 or 9 pairs.
SEEDS = (1, 5, 10)
#: The seed the wrong answers run at (its generated table has deletion vectors and checkpoints).
WRONG_SEED = 1


#: The tables ``orphan_history`` generated for each seed in this process (see ``reused_tables``).
_GENERATED: dict[int, cx.OrphanTable] = {}
_orphan_history = cx.orphan_history


def generated(spark, seed: int) -> cx.OrphanTable:
    """The table the orphan check generates at ``seed``, built once per process by the lab's own generator."""
    if seed not in _GENERATED:
        _GENERATED[seed] = _orphan_history(spark, fresh_dir(f"lab05_tests_{seed}") / "events", random.Random(seed))
    return _GENERATED[seed]


@pytest.fixture()
def reused_tables(monkeypatch):
    """The orphan check gets a copy (modification times kept) of the table the lab's generator built
    for the seed, instead of building it again: the same table, seconds instead of ten per wrong answer."""
    def copy_of(spark, path, rng):
        original = generated(spark, int(os.environ[SEED_ENV]))
        shutil.copytree(original.path, path)
        return dataclasses.replace(original, path=Path(path))

    monkeypatch.setattr(cx, "orphan_history", copy_of)


# -- right answers (the lab's solutions) -------------------------------------------------------

def predict_conflict(held, first):
    if first == "set property":
        return "MetadataChangedException"
    if held == "append":
        return "none"
    if first == "delete a file":
        return "ConcurrentDeleteReadException"
    return "ConcurrentAppendException"


RETRY_ON = (dx.ConcurrentAppendException, dx.ConcurrentDeleteReadException, dx.ConcurrentDeleteDeleteException,
            dx.MetadataChangedException, dx.ProtocolChangedException, dx.ConcurrentTransactionException,
            dx.ConcurrentWriteException, dx.DeltaConcurrentModificationException)


def retry(operation, max_attempts=3):
    for attempt in range(1, max_attempts + 1):
        try:
            return operation()
        except RETRY_ON:
            if attempt == max_attempts:
                raise


def every_add(table: Path) -> set[str]:
    added = set()
    for commit in (table / "_delta_log").glob("*.json"):
        for line in commit.read_text().splitlines():
            action = json.loads(line)
            if "add" in action:
                added.add(unquote(action["add"]["path"]))
    return added


def orphan_files(table_path):
    table = Path(table_path)
    on_disk = {p.relative_to(table).as_posix() for p in table.rglob("*.parquet")
               if "_delta_log" not in p.relative_to(table).parts}
    return on_disk - every_add(table)


@pytest.mark.parametrize("seed", solution_seeds(SEEDS))
def test_lab05_the_solutions_pass_at_the_seeds(spark, seeded, reused_tables, capsys, seed):
    seeded(seed)
    cx.check_predict_conflict(predict_conflict)
    cx.check_retry(retry)
    cx.check_orphan_files(orphan_files)
    out = capsys.readouterr().out
    assert [line[:15] for line in out.splitlines()] == ["✓ predict_confl", "✓ retry: retrie", "✓ orphan_files:"], out


@pytest.mark.seeds
def test_lab05_the_seeds_cover_the_edge_cases(spark):
    """What the seeds' generated tables hold, read from the tables: deletion vectors or not, a
    checkpoint or not, live files in folders the log encodes, orphans in partition folders, files a
    DELETE removed, and first commits Spark refuses to time-travel to."""
    from deltalab.files import spark_files
    from deltalab.log import checkpoint_versions

    seen = set()
    for seed in SEEDS:
        table = generated(spark, seed)
        names = {p.name for p in table.path.rglob("*") if p.is_file()}
        seen.add("dv" if any(n.startswith("deletion_vector_") for n in names) else "no dv")
        seen.add("checkpoint" if checkpoint_versions(table.path) else "no checkpoint")
        assert table.orphans and all("/" in f for f in table.orphans), "orphans inside partition folders"
        assert any(" " in f for f in table.live) and any("%" in f for f in table.live), table.live
        assert table.removed and table.removed <= data_files(table.path), "files a DELETE removed, still on disk"
        assert table.orphans == data_files(table.path) - table.live - table.removed
        with pytest.raises(Exception, match="DELTA_UNSUPPORTED_TIME_TRAVEL"):
            spark_files(spark, table.path, 0)
    assert seen == {"dv", "no dv", "checkpoint", "no checkpoint"}, seen


# -- exercise 1 --------------------------------------------------------------------------------

def test_lab05_every_run_asks_a_pair_of_each_belief_and_the_sample_changes():
    samples = [cx.prediction_sample(random.Random(seed)) for seed in range(200)]
    for sample in samples:
        assert len(sample) == len(set(sample)) >= cx.SAMPLE_SIZE
        for belief in cx.BELIEFS:
            assert set(sample) & set(belief.pairs), (belief.claim, sample)
    assert len({tuple(s) for s in samples}) > 150
    asked = {pair for sample in samples for pair in sample}
    assert asked == {(h, f) for h in cx.HELD_OPERATIONS for f in cx.FIRST_OPERATIONS}


def assert_hides_the_outcomes(spark, message: str, pairs: list[tuple[str, str]], said) -> None:
    """The message shows what was said, never what Delta did for a pair predicted wrong."""
    for held, first in pairs:
        real = cx.measured_outcome(spark, held, first)
        if said(held, first) != real and f"{held} held, {first} first" in message:
            assert real not in re.sub(r"you said \w+", "", message), message


def test_lab05_a_prediction_that_is_not_a_class_name_is_refused_before_anything_runs(spark):
    message = failure(cx.check_predict_conflict, lambda held, first: "conflict")
    assert "returned 'conflict'" in message and "'none'" in message, message


def blind_append_never_conflicts(held, first):
    return "none" if held == "append" else predict_conflict(held, first)


def appends_conflict_with_writes(held, first):
    return "ConcurrentAppendException" if held == "append" and first != "set property" else predict_conflict(held, first)


def optimize_is_a_delete_read(held, first):           # what older texts say
    return "ConcurrentDeleteReadException" if first == "optimize" and held != "append" else predict_conflict(held, first)


def optimize_changes_no_data(held, first):
    return "none" if first == "optimize" else predict_conflict(held, first)


def removed_what_i_read_is_a_delete_read(held, first):
    removes = first in ("delete 1 row", "delete a file", "update", "optimize")
    return "ConcurrentDeleteReadException" if removes and held != "append" else predict_conflict(held, first)


def a_delete_rewrite_is_a_delete_read(held, first):  # an UPDATE rewrite counted right, a DELETE's not
    return "ConcurrentDeleteReadException" if first == "delete 1 row" and held != "append" else predict_conflict(held, first)


def an_update_rewrite_is_a_delete_read(held, first):
    return "ConcurrentDeleteReadException" if first == "update" and held != "append" else predict_conflict(held, first)


def two_deletes_delete_delete(held, first):
    both = held == "delete" and first.startswith("delete")
    return "ConcurrentDeleteDeleteException" if both else predict_conflict(held, first)


def an_append_first_disturbs_nobody(held, first):
    return "none" if first == "append" else predict_conflict(held, first)


def readers_always_append(held, first):
    return "ConcurrentAppendException" if held != "append" and first != "set property" else predict_conflict(held, first)


def properties_do_not_matter_to_readers(held, first):
    return "ConcurrentAppendException" if first == "set property" and held != "append" else predict_conflict(held, first)


def fitted_to_the_old_pairs(held, first):             # the four pairs the lab used to ask, else a guess
    return {("append", "optimize"): "none", ("delete", "optimize"): "ConcurrentAppendException",
            ("merge", "delete a file"): "ConcurrentDeleteReadException",
            ("merge", "set property"): "MetadataChangedException"}.get((held, first), "ConcurrentAppendException")


@pytest.mark.parametrize("wrong", [
    blind_append_never_conflicts, appends_conflict_with_writes, optimize_is_a_delete_read, optimize_changes_no_data,
    removed_what_i_read_is_a_delete_read, a_delete_rewrite_is_a_delete_read, an_update_rewrite_is_a_delete_read,
    two_deletes_delete_delete, an_append_first_disturbs_nobody,
    readers_always_append, properties_do_not_matter_to_readers, fitted_to_the_old_pairs,
], ids=lambda f: f.__name__)
def test_lab05_each_misconception_is_refused_and_the_right_answers_stay_hidden(spark, seeded, wrong):
    seed = seeded(WRONG_SEED)
    message = failure(cx.check_predict_conflict, wrong)
    assert f"tables of seed {seed}" in message and "were predicted wrong" in message and "you said" in message, message
    assert_hides_the_outcomes(spark, message, cx.prediction_sample(random.Random(seed)), wrong)


def test_lab05_every_belief_is_refuted_by_every_pair_that_tests_it(spark):
    """The design of BELIEFS, on the measured matrix: a prediction holding the belief is wrong on
    each of its pairs, so the one pair a run asks always refutes it."""
    holds = {
        "a blind append never conflicts": blind_append_never_conflicts,
        "a blind append conflicts with another writer's data change": appends_conflict_with_writes,
        "an append committed first cannot disturb a DELETE, UPDATE or MERGE": an_append_first_disturbs_nobody,
        "OPTIMIZE changes no data, so it conflicts differently from a rewrite": optimize_is_a_delete_read,
        "a DELETE that rewrote the file the held one read is a delete-read conflict": a_delete_rewrite_is_a_delete_read,
        "an UPDATE that rewrote the file the held one read is a delete-read conflict": an_update_rewrite_is_a_delete_read,
        "two DELETEs of one file give ConcurrentDeleteDeleteException": two_deletes_delete_delete,
        "every conflict of a reader is an append conflict": readers_always_append,
        "a property change only disturbs writers that change metadata too": properties_do_not_matter_to_readers,
    }
    assert set(holds) == {b.claim for b in cx.BELIEFS}
    for belief in cx.BELIEFS:
        for pair in belief.pairs:
            assert holds[belief.claim](*pair) != cx.measured_outcome(spark, *pair), (belief.claim, pair)
            assert predict_conflict(*pair) == cx.measured_outcome(spark, *pair), pair


def test_lab05_a_prediction_that_runs_spark_is_refused(spark, seeded):
    def runs_it(held, first):
        spark.range(3).count()          # stands for running the pair (run_pair) to see what happens
        return predict_conflict(held, first)

    seeded(WRONG_SEED)
    message = failure(cx.check_predict_conflict, runs_it)
    assert "ran" in message and "Spark job" in message and "from the names alone" in message, message


def test_lab05_predictions_as_classes_are_accepted(spark, seeded, capsys):
    classes = {c.__name__: c for c in CONFLICT_CLASSES}
    seeded(WRONG_SEED)
    cx.check_predict_conflict(lambda held, first: classes.get(predict_conflict(held, first), "none"))
    assert capsys.readouterr().out.startswith("✓ predict_conflict")


# -- exercise 2 --------------------------------------------------------------------------------

def retry_catching(classes, attempts=None, reraise="last"):
    """A retry like the solution's, catching ``classes``, with a fixed number of attempts if given."""
    def wrong_retry(operation, max_attempts=3):
        allowed = attempts or max_attempts
        errors = []
        for attempt in range(1, allowed + 1):
            try:
                return operation()
            except classes as error:
                errors.append(error)
        if reraise == "first":
            raise errors[0]
        if reraise == "wrapped":
            raise RuntimeError(f"gave up after {allowed} attempts") from errors[-1]
        if reraise == "last":
            raise errors[-1]
        return None

    return wrong_retry


def test_lab05_a_retry_that_catches_every_exception_is_too_broad(spark, seeded):
    seeded(WRONG_SEED)
    message = failure(cx.check_retry, retry_catching(Exception))
    assert "catches too much" in message and "was called" in message, message


def test_lab05_a_retry_that_looks_at_the_name_retries_a_bug(spark, seeded):
    def by_name(operation, max_attempts=3):
        for attempt in range(1, max_attempts + 1):
            try:
                return operation()
            except Exception as error:
                if "Concurrent" not in type(error).__name__ and "Metadata" not in type(error).__name__ \
                        and "Protocol" not in type(error).__name__ or attempt == max_attempts:
                    raise

    seeded(WRONG_SEED)
    message = failure(cx.check_retry, by_name)
    assert "ConcurrentModificationException" in message and "not in delta.exceptions" in message, message
    assert "catches too much" in message, message


def test_lab05_a_retry_on_the_class_that_sounds_like_a_parent_lets_the_conflicts_through(spark, seeded):
    seeded(WRONG_SEED)
    message = failure(cx.check_retry, retry_catching(dx.DeltaConcurrentModificationException))
    assert "let that conflict through" in message and "do not inherit" in message, message


def test_lab05_the_old_solution_retrying_two_classes_is_refused(spark, seeded):
    seeded(WRONG_SEED)
    message = failure(cx.check_retry, retry_catching((dx.ConcurrentAppendException,
                                                      dx.ConcurrentDeleteReadException)))
    assert "let that conflict through" in message and "add " in message, message


@pytest.mark.parametrize("wrong, words", [
    (retry_catching(RETRY_ON, attempts=3), "use the argument"),               # max_attempts ignored
    (lambda op, max_attempts=3: retry_catching(RETRY_ON)(op, max_attempts + 1), "first one included"),
    (retry_catching(RETRY_ON, reraise="first"), "raised an earlier conflict"),
    (retry_catching(RETRY_ON, reraise="none"), "returned normally"),
    (retry_catching(RETRY_ON, reraise="wrapped"), "raised RuntimeError"),
], ids=["ignores max_attempts", "one attempt too many", "raises the first conflict", "swallows the last conflict",
        "wraps the conflict"])
def test_lab05_retries_that_miscount_or_lose_the_last_conflict_are_refused(spark, monkeypatch, wrong, words):
    for seed in SEEDS:                  # each seed draws its own max_attempts; every one refuses these
        monkeypatch.setenv(SEED_ENV, str(seed))
        message = failure(cx.check_retry, wrong)
        assert words in message and f"tables of seed {seed}" in message, message


def test_lab05_a_retry_that_never_gives_up_is_stopped_and_named(spark):
    def retry_forever(operation, max_attempts=3):
        while True:
            try:
                return operation()
            except RETRY_ON:
                continue

    message = failure(cx.check_retry, retry_forever)
    assert "never gave up" in message, message


# -- exercise 3 --------------------------------------------------------------------------------

def test_lab05_orphans_must_not_include_log_or_checksum_files(spark):
    def with_log_files(table_path):
        table = Path(table_path)
        return {p.relative_to(table).as_posix() for p in table.rglob("*") if p.is_file()} - every_add(table)

    message = failure(cx.check_orphan_files, with_log_files)
    assert "log or checksum file" in message, message


def test_lab05_the_course_helper_is_not_an_answer(spark):
    from deltalab import orphan_data_files

    message = failure(cx.check_orphan_files, lambda table_path: orphan_data_files(table_path))
    assert "orphan_data_files" in message and "read the log yourself" in message, message


def test_lab05_the_old_solution_that_compares_encoded_paths_is_refused(spark, seeded, reused_tables):
    def encoded(table_path):
        table = Path(table_path)
        added = set()
        for commit in (table / "_delta_log").glob("*.json"):
            for line in commit.read_text().splitlines():
                action = json.loads(line)
                if "add" in action:
                    added.add(action["add"]["path"])             # still URL-encoded
        return {p.relative_to(table).as_posix() for p in table.rglob("*.parquet")
                if "_delta_log" not in p.relative_to(table).parts} - added

    seeded(WRONG_SEED)
    message = failure(cx.check_orphan_files, encoded)
    assert "a file the latest version reads" in message and "unquote" in message, message
    assert "partitioned table generated" in message, message


def live_now(table_path) -> set[str]:
    """The files the latest version reads (Spark's snapshot)."""
    from deltalab.files import spark_files
    from deltalab.session import running_spark

    return set(spark_files(running_spark(), table_path, relative=True))


def decoded_on_both_sides(table_path):
    """Compares consistently, but returns folder names decoded (city=10:30), which do not exist."""
    table = Path(table_path)
    added = {unquote(f) for f in every_add(table)}                       # decoded twice
    on_disk = {unquote(p.relative_to(table).as_posix()) for p in table.rglob("*.parquet")
               if "_delta_log" not in p.relative_to(table).parts}
    return on_disk - added


WRONG_ORPHANS = {
    "not recursive": (lambda table_path: {p.name for p in Path(table_path).glob("*.parquet")}
                      - every_add(Path(table_path)), "list them recursively"),
    "latest snapshot only": (lambda table_path: data_files(table_path) - live_now(table_path),
                             "a file a DELETE removed"),
    "deletion vector files": (lambda table_path: {
        p.relative_to(table_path).as_posix() for p in Path(table_path).rglob("*")
        if p.is_file() and "_delta_log" not in p.parts and not p.name.endswith(".crc")} - every_add(Path(table_path)),
        "deletion vector file"),
    "log paths decoded twice": (lambda table_path: {
        p.relative_to(table_path).as_posix() for p in Path(table_path).rglob("*.parquet")
        if "_delta_log" not in p.parts} - {unquote(f) for f in every_add(Path(table_path))},
        "a file the latest version reads"),
    "paths returned decoded": (decoded_on_both_sides, "not a file in the table folder"),
}


@pytest.mark.parametrize("name", sorted(WRONG_ORPHANS))
def test_lab05_orphan_answers_that_miss_an_edge_case_are_refused(spark, seeded, reused_tables, name):
    wrong, words = WRONG_ORPHANS[name]
    seed = seeded(WRONG_SEED)
    message = failure(cx.check_orphan_files, wrong)
    assert words in message, message
    assert f"tables of seed {seed}" in message and "generated for this run" in message, message


def test_lab05_orphans_from_spark_time_travel_fail_on_old_commits(spark, seeded, reused_tables):
    def by_time_travel(table_path):
        from deltalab.files import data_files, spark_files
        from deltalab.log import latest_version

        read = set()
        for version in range(latest_version(table_path) + 1):
            read |= set(spark_files(spark, table_path, version, relative=True))
        return data_files(table_path) - read

    seeded(WRONG_SEED)
    message = failure(cx.check_orphan_files, by_time_travel)
    assert "DELTA_UNSUPPORTED_TIME_TRAVEL" in message and "Spark refuses to time-travel" in message, message


def test_lab05_orphans_by_modification_time_are_refused(spark, seeded, reused_tables):
    def newer_than_the_last_commit(table_path):
        table = Path(table_path)
        last = max(p.stat().st_mtime for p in (table / "_delta_log").glob("*.json"))
        return {p.relative_to(table).as_posix() for p in table.rglob("*.parquet")
                if p.stat().st_mtime > last and "_delta_log" not in p.parts}

    seeded(WRONG_SEED)
    message = failure(cx.check_orphan_files, newer_than_the_last_commit)
    assert "found no orphan" in message and "whatever its age" in message, message


def test_lab05_an_orphan_search_that_cleans_up_is_refused(spark, seeded, reused_tables):
    def deletes_them(table_path):
        found = orphan_files(table_path)
        for relative in found:
            os.remove(Path(table_path) / relative)
        return found

    seeded(WRONG_SEED)
    message = failure(cx.check_orphan_files, deletes_them)
    assert "changed the folder" in message and "must only read it" in message, message


def test_lab05_a_setting_left_behind_is_refused(spark):
    def loosens_the_retention_check(table_path):
        spark.conf.set("spark.databricks.delta.retentionDurationCheck.enabled", "false")
        return orphan_files(table_path)

    try:
        message = failure(cx.check_orphan_files, loosens_the_retention_check)
    finally:
        spark.conf.unset("spark.databricks.delta.retentionDurationCheck.enabled")
    assert "retentionDurationCheck" in message and "left the session setting" in message, message


def test_lab05_orphans_as_absolute_paths_are_accepted_and_the_killed_writer_table_is_kept(spark, seeded, reused_tables, capsys):
    built = cx.orphan_table(spark)
    assert len(built["orphans"]) == 2 and len(built["removed"]) == 1, built

    def absolute(table_path):
        return {str(Path(table_path) / f) for f in orphan_files(table_path)}

    seeded(SEEDS[1])
    cx.check_orphan_files(absolute)
    assert capsys.readouterr().out.startswith("✓ orphan_files")
    assert cx.orphan_table(spark) is built, "the killed-writer table is built once and reused"


# -- the check's own answers and the course's helpers are not answers --------------------------

def test_lab05_a_prediction_that_asks_the_check_is_refused(spark, seeded):
    seeded(WRONG_SEED)
    message = failure(cx.check_predict_conflict, lambda held, first: cx.measured_outcome(spark, held, first))
    assert "measured_outcome" in message and "not a prediction" in message, message


def test_lab05_the_course_retry_loop_is_not_an_answer(spark):
    from deltalab.concurrency import retry_on_conflict

    message = failure(cx.check_retry, lambda operation, max_attempts=3:
                      retry_on_conflict(operation, RETRY_ON, max_attempts).result)
    assert "retry_on_conflict" in message and "write the loop yourself" in message, message
