"""The lab 11 checks (deltalab.labs.lab11_object_stores): the solution passes at seeds that cover the edge
cases, and each kind of wrong answer is refused with a message that says what is wrong and never shows the
expected version.

The checks run on the lab's own S3 server (one per process, 127.0.0.1) and on tables delta-rs writes:
no Spark session is needed. The version tables of one seed are built once per process (a log of more
than 1000 objects among them); each commit check builds a small table of its own.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from deltalab.labs.tables import SEED_ENV
from deltalab.labs.lab11_object_stores import check_commit, check_current_version
from lab_testing import solution_and_student_version
from lab_testing import check_failure as failure
from lab_testing import solution_namespace, solution_seeds, stub

# The labs' tests run in make test-labs (and those of its solutions at their seeds, marked seeds too, in
# make test-seeds), not in make test: tests/README.md says why.
pytestmark = pytest.mark.labs

#: The lab's solution on tables of a fresh seed, then its student version (tests/support/lab_testing.py).
test_the_solution_passes_and_the_student_version_says_what_is_missing = solution_and_student_version("lab11_object_stores")

SOURCE = Path(__file__).resolve().parents[1] / "labs" / "source" / "lab11_object_stores" / "lab11_object_stores.ipynb"
#: 3: a checkpoint, a checkpoint with the commits before it cleaned up, delta-rs commits two versions while the
#: two writers wait; 4: a checkpoint with its commits cleaned up, a table without one, delta-rs commits one.
SEEDS = (3, 4)
TEST_SEED = 3


@pytest.fixture(scope="module")
def solution() -> dict:
    return solution_namespace(SOURCE, ("setup", "current_version", "commit"))


@pytest.fixture
def at_test_seed(monkeypatch):
    """The checks' tables of TEST_SEED for one test."""
    monkeypatch.setenv(SEED_ENV, str(TEST_SEED))


@pytest.mark.parametrize("seed", solution_seeds(SEEDS))
def test_lab11_the_solution_passes_at_seeds_that_cover_the_edge_cases(solution, capsys, monkeypatch, seed):
    monkeypatch.setenv(SEED_ENV, str(seed))
    check_current_version(solution["current_version"])
    check_commit(solution["commit"])
    out = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in out] == ["✓ current_version", "✓ commit"], out


def test_lab11_the_stubs_are_not_written_yet(at_test_seed):
    assert "current_version is not written yet" in failure(check_current_version, stub)
    assert "commit is not written yet" in failure(check_commit, stub)


def commit_versions(s3, bucket, table):
    listing = s3.list_objects_v2(Bucket=bucket, Prefix=f"{table}/_delta_log/")
    names = [item["Key"].rsplit("/", 1)[1] for item in listing.get("Contents", [])]
    return [int(name[:20]) for name in names if len(name) == 25 and name.endswith(".json")]


def test_lab11_a_long_log_needs_every_page_of_the_list(at_test_seed):
    message = failure(check_current_version, lambda s3, bucket, table: max(commit_versions(s3, bucket, table)))
    assert "more than 1000 objects" in message and "NextContinuationToken" in message, message
    assert "below the version delta-rs loads" in message, message


def test_lab11_the_last_key_is_not_always_a_commit(at_test_seed):
    def last_key(s3, bucket, table):
        keys = [item["Key"] for item in s3.list_objects_v2(Bucket=bucket, Prefix=f"{table}/_delta_log/")["Contents"]]
        return int(keys[-1].rsplit("/", 1)[1][:20])

    message = failure(check_current_version, last_key)
    assert "raised ValueError" in message and "N a 20-digit number" in message, message


def paged_latest(s3, bucket, table):
    versions = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=f"{table}/_delta_log/"):
        versions += [int(item["Key"].rsplit("/", 1)[1][:20]) for item in page.get("Contents", [])
                     if item["Key"].endswith(".json") and item["Key"].rsplit("/", 1)[1][:20].isdigit()]
    return max(versions)


def body(actions):
    return "".join(json.dumps(action) + "\n" for action in actions).encode()


def key(table, version):
    return f"{table}/_delta_log/{version:020d}.json"


def test_lab11_a_plain_put_replaces_another_writers_commit(at_test_seed):
    def plain_put(s3, bucket, table, actions):
        version = paged_latest(s3, bucket, table) + 1
        s3.put_object(Bucket=bucket, Key=key(table, version), Body=body(actions))
        return version

    message = failure(check_commit, plain_put)
    assert "a writer replaced it" in message and "IfNoneMatch='*'" in message, message


def test_lab11_a_refusal_is_caught_and_retried(at_test_seed):
    def no_retry(s3, bucket, table, actions):
        version = paged_latest(s3, bucket, table) + 1
        s3.put_object(Bucket=bucket, Key=key(table, version), Body=body(actions), IfNoneMatch="*")
        return version

    message = failure(check_commit, no_retry)
    assert "raised ClientError" in message and "PreconditionFailed" in message and "read the log again" in message, message


def test_lab11_after_a_refusal_the_log_is_read_again(at_test_seed):
    def guess_the_next(s3, bucket, table, actions):
        version = paged_latest(s3, bucket, table) + 1
        while True:
            try:
                s3.put_object(Bucket=bucket, Key=key(table, version), Body=body(actions), IfNoneMatch="*")
                return version
            except s3.exceptions.ClientError:
                version += 1

    message = failure(check_commit, guess_the_next)
    assert "refused 2 times" in message and "do not guess" in message, message


def test_lab11_commit_returns_the_version_it_wrote(at_test_seed):
    def returns_nothing(s3, bucket, table, actions):
        version = paged_latest(s3, bucket, table) + 1
        s3.put_object(Bucket=bucket, Key=key(table, version), Body=body(actions), IfNoneMatch="*")

    assert "it must return the version it wrote" in failure(check_commit, returns_nothing)


def test_lab11_the_commit_file_holds_one_action_per_line(at_test_seed):
    def one_json_array(s3, bucket, table, actions):
        version = paged_latest(s3, bucket, table) + 1
        s3.put_object(Bucket=bucket, Key=key(table, version), Body=json.dumps(actions).encode(), IfNoneMatch="*")
        return version

    message = failure(check_commit, one_json_array)
    assert "one JSON object per line" in message, message


def test_lab11_a_commit_at_a_fixed_version_fails_with_a_sentence(at_test_seed):
    def at_version_two(s3, bucket, table, actions):
        s3.put_object(Bucket=bucket, Key=key(table, 2), Body=body(actions), IfNoneMatch="*")
        return 2

    message = failure(check_commit, at_version_two)
    assert "commit" in message and ("latest version read from the log + 1" in message or "raised ClientError" in message), message


def test_lab11_a_listing_of_the_whole_bucket_is_not_the_tables(at_test_seed):
    def every_table(s3, bucket, table):
        keys = [item["Key"] for item in s3.list_objects_v2(Bucket=bucket, Prefix="versions_")["Contents"]]
        return max(int(k.rsplit("/", 1)[1][:20]) for k in keys if k.endswith(".json") and k.rsplit("/", 1)[1][:20].isdigit())

    message = failure(check_current_version, every_table)
    assert "above the version delta-rs loads" in message and "list only this table's log" in message, message
