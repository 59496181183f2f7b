"""The lab 04 checks (deltalab.labs.lab04_time_travel): the solution passes at seeds that together cover
the edge cases, Delta's answers are what Spark reads, and each kind of wrong answer is refused with a
message that says what is wrong and never shows the expected version or files.

Most wrong answers already fail on the example tables (the version table is built once per process;
the VACUUM example is aged afresh at each call, because its ages are relative to now), so each test
costs one example, not a generated history.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from deltalab.labs import lab04_time_travel as lab
from deltalab.labs.tables import SEED_ENV
from deltalab.labs.lab04_time_travel import check_vacuum_deletes, check_version_as_of
from deltalab.log import deletion_vector_file, replay_log
from lab_testing import solution_and_student_version
from lab_testing import check_failure as failure
from lab_testing import solution_namespace, solution_seeds, stub

# The labs' tests run in make test-labs (and those of its solutions at their seeds, marked seeds too, in
# make test-seeds), not in make test: tests/README.md says why.
pytestmark = pytest.mark.labs

#: The lab's solution on tables of a fresh seed, then its student version (tests/support/lab_testing.py).
test_the_solution_passes_and_the_student_version_says_what_is_missing = solution_and_student_version("lab04_time_travel")

SOURCE = Path(__file__).resolve().parents[1] / "labs" / "source" / "lab04_time_travel" / "lab04_time_travel.ipynb"
#: 7: commits before a checkpoint cleaned up, two commit files older than the one before, VACUUM with RETAIN 24
#: on a table without the property (one week); 19: three commit files going backwards, RETAIN 6 on a table of
#: 'interval 3 days'; 22: RETAIN 0 HOURS on a table of 'interval 30 hours'.
SEEDS = (7, 19, 22)


@pytest.fixture(scope="module")
def solution() -> dict:
    return solution_namespace(SOURCE, ("setup", "version_as_of", "vacuum_deletes"))


@pytest.mark.parametrize("seed", solution_seeds(SEEDS))
def test_lab04_the_solution_passes_at_seeds_that_cover_the_edge_cases(spark, solution, capsys, monkeypatch, seed):
    monkeypatch.setenv(SEED_ENV, str(seed))
    check_version_as_of(solution["version_as_of"])
    check_vacuum_deletes(solution["vacuum_deletes"])
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("✓ version_as_of: ") and out[1].startswith("✓ vacuum_deletes: "), out


def test_lab04_the_stubs_are_not_written_yet(spark):
    assert "version_as_of is not written yet" in failure(check_version_as_of, stub)
    assert "vacuum_deletes is not written yet" in failure(check_vacuum_deletes, stub)


def test_lab04_deltas_answers_are_what_spark_reads_with_timestamp_as_of(spark):
    """The check takes Delta's answers from DeltaHistoryManager (no data read); Spark's reader agrees."""
    from datetime import datetime, timezone

    from deltalab import read_table

    example = lab._example_times(spark)
    assert None in example.answers.values() and len(set(example.answers.values())) == 7, "0..5 and None"
    for ms, expected in example.answers.items():
        stamp = datetime.fromtimestamp(ms / 1000, timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")
        if expected is None:
            continue
        newest = read_table(example.path, timestampAsOf=stamp).agg({"v": "max"}).collect()[0][0]
        assert (newest or 0) == expected, (stamp, expected)


# ----------------------------------------------------------------------------- version_as_of


def file_time(commit: Path) -> int:
    return commit.stat().st_mtime_ns // 1_000_000


def commits(table_path: str) -> list[Path]:
    return sorted(p for p in (Path(table_path) / "_delta_log").glob("*.json") if len(p.name) == 25)


def latest_at(times: list[int], versions: list[int], ms: int):
    if ms < times[0] or ms > times[-1]:
        return None
    return max(v for v, t in zip(versions, times) if t <= ms)


def versions_of(table_path: str) -> list[int]:
    return [int(p.name[:20]) for p in commits(table_path)]


def test_lab04_commit_info_timestamps_are_not_the_commit_times(spark):
    def by_commit_info(path, ms):
        times = [json.loads(c.read_text().splitlines()[0])["commitInfo"]["timestamp"] for c in commits(path)]
        return latest_at(times, versions_of(path), ms)

    message = failure(check_version_as_of, by_commit_info)
    assert "the example table" in message and "not commitInfo.timestamp" in message, message


def test_lab04_file_times_are_made_increasing(spark):
    def raw_file_times(path, ms):
        return latest_at([file_time(c) for c in commits(path)], versions_of(path), ms)

    message = failure(check_version_as_of, raw_file_times)
    assert "monotonizeCommitTimestamps" in message and "(Delta's version is lower)" in message, message


def monotonized_file_times(path, ms):
    times = []
    for commit in commits(path):
        times.append(max(file_time(commit), times[-1] + 1) if times else file_time(commit))
    return latest_at(times, versions_of(path), ms)


def test_lab04_a_time_after_the_latest_commit_is_refused(spark):
    def latest_for_the_future(path, ms):
        answer = monotonized_file_times(path, ms)
        return versions_of(path)[-1] if answer is None and ms > file_time(commits(path)[-1]) else answer

    message = failure(check_version_as_of, latest_for_the_future)
    assert "after the latest commit is refused" in message and "return None" in message, message


def test_lab04_in_commit_timestamps_are_read_from_commit_info(spark, monkeypatch):
    monkeypatch.setenv(SEED_ENV, str(SEEDS[0]))
    message = failure(check_version_as_of, monotonized_file_times)
    assert "in-commit timestamps" in message and "inCommitTimestamp" in message, message
    assert f"(tables of seed {SEEDS[0]})" in message, message


# ----------------------------------------------------------------------------- vacuum_deletes


def test_lab04_retain_hours_taken_at_its_word_is_told_about_delta_4(spark, solution):
    def honours_retain(path, hours):
        return lab.reference_deletes(path, hours, honour_retain=True)

    message = failure(check_vacuum_deletes, honours_retain)
    assert "ignores a RETAIN other than 0 HOURS" in message and "deletedFileRetentionDuration" in message, message


def test_lab04_retain_0_hours_overrides_the_tables_retention(spark):
    def always_the_tables_retention(path, hours):
        return lab.reference_deletes(path, lab.table_retention_hours(path), honour_retain=True)

    message = failure(check_vacuum_deletes, always_the_tables_retention)
    assert "with RETAIN 0 HOURS" in message and "RETAIN 0 HOURS is the one RETAIN Delta 4.4 obeys" in message, message


def test_lab04_files_no_commit_added_are_deleted_too(spark):
    def removed_files_only(path, hours):
        return {p for p in lab.reference_deletes(path, hours) if "orphan" not in p}

    message = failure(check_vacuum_deletes, removed_files_only)
    assert "are missing" in message and "no commit ever added" in message, message
    assert "orphan" not in message.split("Where to look")[0], "the missing files are not named"


def test_lab04_hidden_names_are_not_the_tables_data(spark):
    def with_hidden(path, hours):
        root = Path(path)
        hidden = {p.relative_to(root).as_posix() for p in root.rglob("*.parquet")
                  if p.relative_to(root).as_posix().startswith(("_staging", "."))}
        return lab.reference_deletes(path, hours) | hidden

    message = failure(check_vacuum_deletes, with_hidden)
    assert "names starting with _ or ." in message, message


def test_lab04_running_vacuum_dry_run_is_refused(spark):
    def asks_delta(path, hours):
        rows = spark.sql(f"VACUUM delta.`{path}` RETAIN {hours} HOURS DRY RUN").collect()
        return {str(Path(row[0].removeprefix("file:")).relative_to(Path(path).resolve())) for row in rows}

    message = failure(check_vacuum_deletes, asks_delta)
    assert "ran Spark jobs" in message, message


def test_lab04_the_course_reader_is_refused(spark):
    def with_replay(path, hours):
        replay_log(path)
        return set()

    message = failure(check_vacuum_deletes, with_replay)
    assert "called deltalab.log.replay_log" in message, message


def test_lab04_deletion_vector_file_names_the_file_on_disk(spark):
    example = lab._example_vacuum(spark)
    dv_files = {f for f in example.live if f.startswith("deletion_vector_")}
    assert dv_files and all((Path(example.path) / f).is_file() for f in dv_files), dv_files
    assert deletion_vector_file(None) is None and deletion_vector_file({"storageType": "i", "pathOrInlineDv": "x"}) is None
    named = {deletion_vector_file(add.get("deletionVector")) for add in replay_log(example.path).files.values()}
    assert dv_files == named - {None}
    assert re.fullmatch(r"deletion_vector_[0-9a-f-]{36}\.bin", sorted(dv_files)[0])
