"""The lab 02 checks (deltalab.labs.lab02_log): the solution passes at three seeds that together cover
the edge cases, and each kind of wrong answer is refused with a message that says what is wrong and
never shows the expected value (a version, or a file Spark reads).

The solution runs the real checks, which build their tables afresh. The wrong answers to
``active_files`` that get past the example table all run on one set of generated tables, built
once at ``WRONG_SEED`` by the check's own builder (``_history_cases``), so that ten of them cost one
build; the expected files the messages must hide are Spark's, from those same cases.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from urllib.parse import unquote

import pyarrow.parquet as pq
import pytest

from deltalab.labs import lab02_log as lab
from deltalab.labs.tables import SEED_ENV, fresh_dir
from deltalab.labs.lab02_log import check_active_files, check_table_version
from deltalab.workdir import workdir
from lab_testing import (assert_plain_failure, nbgrader_meta, run_in_process, solution_and_student_version,
                         with_solutions)
from lab_testing import check_failure as failure
from lab_testing import solution_seeds, stub

# The labs' tests run in make test-labs (and those of its solutions at their seeds, marked seeds too, in
# make test-seeds), not in make test: tests/README.md says why.
pytestmark = pytest.mark.labs

#: The lab's solution on tables of a fresh seed, then its student version (tests/support/lab_testing.py).
test_the_solution_passes_and_the_student_version_says_what_is_missing = solution_and_student_version("lab02_log")

#: Each run covers deletion vectors (add before remove in one commit; a checkpoint's add ended by a
#: later JSON remove), partition values a path must encode, cleaned-up commits and a commit Spark
#: cannot read. Beyond that, 11: no checkpoint until the one after the DELETE (table_version's
#: table: a checkpoint every 3 commits, 9 commits); 10: checkpoints every 2 commits (table_version's:
#: every 4, 6 commits); 7: every 3 commits (table_version's: every 3, 6 commits).
SEEDS = (11, 10, 7)
#: Its table_version table's latest version is not the example's.
WRONG_SEED = 10


def table_version(table_path: str) -> int:
    """A right answer to exercise 1 (the lab's solution)."""
    log = Path(table_path) / "_delta_log"
    return max(int(p.name[:20]) for p in log.glob("*.json") if p.name[:20].isdigit() and len(p.name) == 25)


def dv_key(action: dict) -> tuple:
    dv = action.get("deletionVector")
    return action["path"], (dv["storageType"], dv["pathOrInlineDv"], dv.get("offset")) if dv else None


def replay(table_path: str, version: int, key=dv_key, use_checkpoint: bool = True) -> dict:
    """The lab's replay, with the key and the use of checkpoints as parameters: live key -> log path."""
    log = Path(table_path) / "_delta_log"
    checkpoints = [int(p.name[:20]) for p in log.glob("*.checkpoint.parquet")] if use_checkpoint else []
    start = max((v for v in checkpoints if v <= version), default=None)
    live = {}
    if start is not None:
        for add in pq.read_table(log / f"{start:020d}.checkpoint.parquet", columns=["add"]).column("add").to_pylist():
            if add:
                live[key(add)] = add["path"]
    for v in range(0 if start is None else start + 1, version + 1):
        for line in (log / f"{v:020d}.json").read_text().splitlines():
            action = json.loads(line)
            if "add" in action:
                live[key(action["add"])] = action["add"]["path"]
            elif "remove" in action:
                live.pop(key(action["remove"]), None)
    return live


def active_files(table_path: str, version: int) -> set[str]:
    """A right answer to exercise 2 (the lab's solution)."""
    return {unquote(path) for path in replay(table_path, version).values()}


def by_path(action: dict) -> str:
    return action["path"]


# ----------------------------------------------------------------------------- the solution


def coverage(table: str) -> dict[str, bool]:
    """What a generated table's log holds, read from its files."""
    log = Path(table) / "_delta_log"
    commits = sorted(int(p.name[:20]) for p in log.glob("*.json") if len(p.name) == 25)
    checkpoints = sorted(int(p.name[:20]) for p in log.glob("*.checkpoint.parquet"))
    found = {"add before remove": False, "checkpoint dv ended in json": False, "encoded paths": False,
             "no checkpoint yet": commits[0] == 0 and checkpoints[0] > 1, "future": False}
    for version in commits:
        actions = [json.loads(line) for line in (log / f"{version:020d}.json").read_text().splitlines()]
        added = [a["add"]["path"] for a in actions if "add" in a and a["add"].get("deletionVector")]
        for index, action in enumerate(actions):
            if "add" in action:
                found["encoded paths"] |= "%20" in action["add"]["path"] or "%253A" in action["add"]["path"]
            if "remove" in action and action["remove"]["path"] in added:
                found["add before remove"] = True
            if "remove" in action and action["remove"].get("deletionVector"):
                before = [c for c in checkpoints if c < version]
                if before:
                    rows = pq.read_table(log / f"{before[-1]:020d}.checkpoint.parquet", columns=["add"]).column("add")
                    found["checkpoint dv ended in json"] |= any(
                        row and row["path"] == action["remove"]["path"] and row["deletionVector"]
                        for row in rows.to_pylist())
            if "protocol" in action and lab.FUTURE_FEATURE in action["protocol"].get("readerFeatures", []):
                found["future"] = True
    return found


@pytest.mark.parametrize("seed", solution_seeds(SEEDS))
def test_lab02_the_solution_passes_at_seeds_that_cover_the_edge_cases(spark, capsys, monkeypatch, seed):
    monkeypatch.setenv(SEED_ENV, str(seed))
    check_table_version(table_version)
    check_active_files(active_files)
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("✓ table_version: ") and out[1].startswith("✓ active_files: "), out
    versions = workdir("labs_checks_lab02_table_version", fresh=False) / "versions" / "_delta_log"
    assert not (versions / f"{0:020d}.json").exists() and sorted(versions.glob("*.checkpoint.parquet")), seed
    newest = max(versions.glob("*.json"), key=lambda p: p.name).read_text()
    assert lab.FUTURE_FEATURE in newest and not (versions / f"{table_version(str(versions.parent)):020d}.crc").exists()
    built = workdir("labs_checks_lab02_active_files", fresh=False)
    found = coverage(str(built / "history"))
    assert all(value for name, value in found.items() if name != "no checkpoint yet"), (seed, found)
    assert not (built / "cleaned_copy" / "_delta_log" / f"{0:020d}.json").exists(), "commits cleaned up"
    if seed == SEEDS[0]:
        assert found["no checkpoint yet"], "the first seed's table replays from commit 0 at first"


def test_lab02_the_stubs_are_not_written_yet(spark):
    assert "table_version is not written yet" in failure(check_table_version, stub)
    assert "active_files is not written yet" in failure(check_active_files, stub)


# ----------------------------------------------------------------------------- table_version


def without_answer(message: str, answer) -> str:
    """The message minus the seed it names and the answer it shows, for a search for the expected value."""
    return re.sub(r"\(tables of seed \d+\)", "", message).replace(f"returned {answer}", "")


def shows_number(message: str, number: int) -> bool:
    return re.search(rf"(?<![\w.\-]){number}(?![\w.])", message) is not None


def test_lab02_counting_commit_files_is_told_about_cleaned_up_commits(spark):
    def counts_files(path):
        return len(list((Path(path) / "_delta_log").glob("*.json"))) - 1

    message = failure(check_table_version, counts_files)
    example = lab._example(spark)
    assert "lower than its latest version" in message and "counting files breaks" in message, message
    assert not shows_number(without_answer(message, counts_files(example.path)), example.latest), message


def test_lab02_the_last_checkpoint_is_not_the_latest_version(spark):
    def last_checkpoint(path):
        return json.loads((Path(path) / "_delta_log" / "_last_checkpoint").read_text())["version"]

    message = failure(check_table_version, last_checkpoint)
    assert "_last_checkpoint names the newest checkpoint" in message, message


def test_lab02_a_version_fitted_to_the_example_fails_on_a_generated_table(spark, monkeypatch):
    monkeypatch.setenv(SEED_ENV, str(WRONG_SEED))
    example = lab._example(spark).latest
    message = failure(check_table_version, lambda path: example)
    assert "a generated table" in message and f"(tables of seed {WRONG_SEED})" in message, message
    generated = workdir("labs_checks_lab02_table_version", fresh=False) / "versions"
    assert not shows_number(without_answer(message, example), table_version(str(generated)) - 1), message


def test_lab02_asking_spark_fails_on_a_commit_spark_cannot_read(spark, monkeypatch):
    from delta.tables import DeltaTable

    monkeypatch.setenv(SEED_ENV, str(WRONG_SEED))
    def asks_delta(path):
        return DeltaTable.forPath(spark, path).history(1).collect()[0]["version"]

    message = failure(check_table_version, asks_delta)
    assert "a reader feature this Spark does not know" in message and "raised" in message, message
    assert "without Spark" in message, message


def test_lab02_the_newest_checksum_file_is_not_the_newest_commit(spark, monkeypatch):
    monkeypatch.setenv(SEED_ENV, str(WRONG_SEED))

    def newest_crc(path):
        return max(int(p.name[:20]) for p in (Path(path) / "_delta_log").glob("*.crc") if p.name[:20].isdigit())

    message = failure(check_table_version, newest_crc)
    assert "newest commit names a reader feature" in message and "lower than its latest version" in message, message
    assert "need not have an N.crc" in message, message


def test_lab02_the_course_helper_is_refused(spark):
    from deltalab import latest_version

    message = failure(check_table_version, lambda path: latest_version(path))
    assert "called deltalab.log.latest_version" in message and "read it yourself" in message, message


def test_lab02_a_version_that_is_no_int_is_named(spark):
    message = failure(check_table_version, lambda path: str(table_version(path)))
    assert "must return an int" in message, message


# ----------------------------------------------------------------------------- active_files


@pytest.fixture(scope="module")
def generated_cases(spark):
    """The generated tables of one check run at WRONG_SEED, built once by the check's own builder;
    the first is a copy of the table taken before the builder wrote its last commit, as the check
    would see it."""
    folder = fresh_dir("lab02_tests_cases")
    cases = lab._history_cases(spark, folder, WRONG_SEED)
    first = next(cases)
    shutil.copytree(first.path, folder / "history_before")
    first.path = str(folder / "history_before")
    return [first, *cases]


@pytest.fixture
def cached(monkeypatch, generated_cases):
    """Make check_active_files use ``generated_cases`` instead of building its tables again."""
    monkeypatch.setenv(SEED_ENV, str(WRONG_SEED))
    monkeypatch.setattr(lab, "_history_cases", lambda spark, folder, seed: iter(generated_cases))
    return generated_cases


def hides_files(message: str, cases, spark) -> bool:
    """Whether the message names no file Spark reads at a checked version (apart from the answer's own)."""
    every = [f for case in cases for files in case.expected.values() for f in files]
    every += [f for files in lab._example(spark).expected.values() for f in files]
    shown = re.findall(r"e\.g\. '([^']*)'", message)
    return not any(f in message and not any(f in s for s in shown) for f in every)


def test_lab02_replaying_from_commit_zero_needs_the_checkpoint(spark):
    def from_zero(path, version):
        return {unquote(p) for p in replay(path, version, use_checkpoint=False).values()}

    message = failure(check_active_files, from_zero)
    assert "FileNotFoundError" in message and "N.checkpoint.parquet" in message, message


def test_lab02_a_forgotten_remove_is_explained(spark):
    def ignores_removes(path, version):
        log = Path(path) / "_delta_log"
        start = max(int(p.name[:20]) for p in log.glob("*.checkpoint.parquet") if int(p.name[:20]) <= version)
        adds = pq.read_table(log / f"{start:020d}.checkpoint.parquet", columns=["add"]).column("add")
        files = {a["path"] for a in adds.to_pylist() if a}
        for v in range(start + 1, version + 1):
            for line in (log / f"{v:020d}.json").read_text().splitlines():
                if "add" in json.loads(line):
                    files.add(json.loads(line)["add"]["path"])
        return {unquote(p) for p in files}

    message = failure(check_active_files, ignores_removes)
    assert "are not files Spark reads" in message and "`remove`" in message, message
    assert hides_files(message, [], spark), message


def test_lab02_absolute_paths_are_told_to_be_relative(spark):
    def absolute(path, version):
        return {str(Path(path) / f) for f in active_files(path, version)}

    message = failure(check_active_files, absolute)
    assert "relative to the table folder" in message, message


def test_lab02_a_replay_that_ignores_the_version_is_told_to_stop_there(spark):
    def always_the_latest(path, version):
        return active_files(path, table_version(path))

    message = failure(check_active_files, always_the_latest)
    assert "stop at `version`" in message, message


def test_lab02_a_replay_fitted_to_the_example_checkpoints_fails_on_a_generated_table(spark, cached):
    def example_checkpoints(path, version):  # the example's checkpoints are at 3 and 6
        log = Path(path) / "_delta_log"
        start = 6 if version >= 6 else 3
        adds = pq.read_table(log / f"{start:020d}.checkpoint.parquet", columns=["add"]).column("add")
        live = {dv_key(add): add["path"] for add in adds.to_pylist() if add}
        for v in range(start + 1, version + 1):
            for line in (log / f"{v:020d}.json").read_text().splitlines():
                action = json.loads(line)
                if "add" in action:
                    live[dv_key(action["add"])] = action["add"]["path"]
                elif "remove" in action:
                    live.pop(dv_key(action["remove"]), None)
        return {unquote(p) for p in live.values()}

    message = failure(check_active_files, example_checkpoints)
    assert "a generated table" in message and f"(tables of seed {WRONG_SEED})" in message, message
    assert hides_files(message, cached, spark), message


def test_lab02_a_replay_keyed_by_path_loses_files_with_deletion_vectors(spark, cached):
    def keyed_by_path(path, version):
        return {unquote(p) for p in replay(path, version, key=by_path).values()}

    message = failure(check_active_files, keyed_by_path)
    assert "a generated table" in message and "files with a deletion vector among them" in message, message
    assert "(path, deletion vector id)" in message and "writes the add first" in message, message
    assert hides_files(message, cached, spark), message


def test_lab02_the_old_solution_returns_encoded_paths(spark, cached):
    def encoded(path, version):  # the lab's solution before: by path, and the log's paths as they are
        return set(replay(path, version, key=by_path).values())

    message = failure(check_active_files, encoded)
    assert "URL-encoded" in message and "decoded once with urllib.parse.unquote" in message, message
    assert hides_files(message, cached, spark), message


def test_lab02_paths_decoded_twice_name_folders_that_do_not_exist(spark, cached):
    message = failure(check_active_files, lambda path, version: {unquote(f) for f in active_files(path, version)})
    assert "not twice" in message, message
    assert hides_files(message, cached, spark), message


def test_lab02_file_names_without_their_partition_folders_are_caught(spark, cached):
    message = failure(check_active_files, lambda path, version: {Path(f).name for f in active_files(path, version)})
    assert "keep the partition folders" in message, message


def test_lab02_deletion_vectors_compared_as_whole_dicts_leave_a_removed_file(spark, cached):
    """A checkpoint's deletion vector has a field (maxRowIndex: None) its JSON remove does not."""
    def whole_dict(action):
        return action["path"], json.dumps(action.get("deletionVector"), sort_keys=True)

    def keyed_by_whole_dict(path, version):
        return {unquote(p) for p in replay(path, version, key=whole_dict).values()}

    message = failure(check_active_files, keyed_by_whole_dict)
    assert "are not files Spark reads" in message and "storageType + pathOrInlineDv + offset" in message, message


def test_lab02_a_replay_that_needs_a_checkpoint_fails_before_the_first_one(spark, cached):
    def needs_a_checkpoint(path, version):
        log = Path(path) / "_delta_log"
        start = max(int(p.name[:20]) for p in log.glob("*.checkpoint.parquet") if int(p.name[:20]) <= version)
        return active_files(path, version) if start >= 0 else set()

    message = failure(check_active_files, needs_a_checkpoint)
    assert "raised ValueError" in message and "(if any" in message, message


def test_lab02_asking_spark_fails_at_the_commit_spark_cannot_read(spark, cached, monkeypatch):
    def asks_spark(path, version):
        return set(lab.spark_files(spark, path, version, relative=True))

    message = failure(check_active_files, asks_spark)
    assert "called deltalab.files.spark_files" in message, message

    def asks_spark_itself(path, version):
        uris = spark.read.format("delta").option("versionAsOf", version).load(path).inputFiles()
        return {u.removeprefix("file:").removeprefix(str(Path(path).resolve()) + "/") for u in uris}

    # Right wherever Spark can read (at every version of the other tables: slow, and not the point
    # here), so straight to the commit a newer Delta wrote.
    monkeypatch.setattr(lab, "_cases", lambda spark, seed: iter([case for case in cached if case.future is not None]))
    message = failure(check_active_files, asks_spark_itself)
    assert "reader feature this Spark does not know" in message and "without Spark" in message, message


def test_lab02_the_course_replay_is_refused(spark):
    from deltalab import replay_log

    message = failure(check_active_files, lambda path, version: {unquote(p) for p in replay_log(path, version).paths()})
    assert "called deltalab.log.replay_log" in message, message


def test_lab02_an_answer_that_writes_into_the_table_is_refused(spark):
    def caches_in_the_log(path, version):
        (Path(path) / "_delta_log" / f"cache-{version}.json").write_text("[]")
        return active_files(path, version)

    try:
        message = failure(check_active_files, caches_in_the_log)
    finally:
        for cache in (Path(lab._example(spark).path) / "_delta_log").glob("cache-*.json"):
            cache.unlink()
    assert "changed the folder" in message and "it must only read it" in message, message


def test_lab02_a_wrong_answer_in_the_notebook_gets_its_specific_message(spark):
    """A wrong (not missing) answer in the student's notebook is told what is wrong, not just that it is unfinished."""
    nb = with_solutions("lab02_log", {"table_version", "active_files"})
    for cell in nb.cells:
        if nbgrader_meta(cell).get("grade_id") == "active_files":
            # the classic mistake: replay every JSON commit from 0 and ignore the checkpoint
            cell.source = (
                "def active_files(table_path, version):\n"
                "    files = set()\n"
                "    for v in range(version + 1):\n"
                "        for line in (Path(table_path) / '_delta_log' / f'{v:020d}.json').read_text().splitlines():\n"
                "            a = json.loads(line)\n"
                "            if 'add' in a: files.add(a['add']['path'])\n"
                "            if 'remove' in a: files.discard(a['remove']['path'])\n"
                "    return files\n"
            )
    runs = {r.grade_id: r for r in run_in_process(nb)}
    assert runs["check_table_version"].error is None
    wrong = runs["check_active_files"]
    assert_plain_failure(wrong.error, f"lab02_log/{wrong.grade_id}")
    assert "FileNotFoundError" in str(wrong.error) and "checkpoint" in str(wrong.error), str(wrong.error)
