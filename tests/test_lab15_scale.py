"""The lab 15 check (deltalab.labs.lab15_scale): the solution passes at seeds that cover the edge cases, and each
kind of wrong answer is refused with a message that says what is wrong and never names a file it left out.

The wrong answers run on the tables of this run's seed (the solution's run builds them). The generator builds every
case at every seed (only versions, sizes and names are drawn), so the seeds the solution runs at cover them all; the
test of the cases shows each one with Delta's own answers on this run's seed.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from deltalab.jvm import delta_log_files_read
from deltalab.labs import lab15_scale as lab
from deltalab.labs.tables import SEED_ENV
from deltalab.labs.lab15_scale import check_checkpoint_files, check_log_files
from lab_testing import solution_and_student_version
from lab_testing import check_failure as failure
from lab_testing import run_seed, solution_namespace, solution_seeds, stub

# The labs' tests run in make test-labs (and those of its solutions at their seeds, marked seeds too, in
# make test-seeds), not in make test: tests/README.md says why.
pytestmark = pytest.mark.labs

#: The lab's solution on tables of this run's seed, then its student version (tests/support/lab_testing.py).
test_the_solution_passes_and_the_student_version_says_what_is_missing = solution_and_student_version("lab15_scale")

SOURCE = Path(__file__).resolve().parents[1] / "labs" / "source" / "lab15_scale" / "lab15_scale.ipynb"
SEEDS = (3, 4)
#: The wrong answers run on the tables of this run's seed, which the solution's run above built (lab_testing.run_seed).
TEST_SEED = run_seed()
_RANGE = re.compile(r"^(\d{20})\.(?:(\d{20})\.compacted\.)?json$")


@pytest.fixture(scope="module")
def solution() -> dict:
    return solution_namespace(SOURCE, ("setup", "checkpoint_files", "log_files"))


@pytest.fixture
def at_test_seed(monkeypatch):
    monkeypatch.setenv(SEED_ENV, str(TEST_SEED))


@pytest.mark.parametrize("seed", solution_seeds(SEEDS))
def test_lab15_the_solution_passes_at_seeds_that_cover_the_edge_cases(spark, solution, capsys, monkeypatch, seed):
    monkeypatch.setenv(SEED_ENV, str(seed))
    check_checkpoint_files(solution["checkpoint_files"])
    check_log_files(solution["log_files"])
    out = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in out] == ["✓ checkpoint_files", "✓ log_files"], out


def test_lab15_the_stub_is_not_written_yet(spark, at_test_seed):
    assert "checkpoint_files is not written yet" in failure(check_checkpoint_files, stub)
    assert "log_files is not written yet" in failure(check_log_files, stub)


def test_lab15_a_checkpoint_without_its_sidecars_is_refused(spark, solution, at_test_seed):
    def no_sidecars(path, version):
        return [name for name in solution["checkpoint_files"](path, version) if not name.startswith("_sidecars/")]

    def with_commits(path, version):
        return solution["log_files"](path, version)

    assert "`sidecar` actions" in failure(check_checkpoint_files, no_sidecars)
    assert "Delta does not read" in failure(check_checkpoint_files, with_commits)


def test_lab15_every_seed_has_the_cases_delta_decides_apart(spark, at_test_seed):
    """The generator builds every case at every seed (only versions, sizes and names are drawn); here Delta's own
    answers on this run's tables show each case is there and matters."""
    v2, classic, stale, cleaned, incomplete = lab.scale_tables(spark, TEST_SEED)
    assert [t.kind for t in (v2, classic, stale, cleaned, incomplete)] == ["v2", "classic", "stale", "cleaned",
                                                                           "incomplete"]
    first, newest = v2.checkpoints
    read = delta_log_files_read(spark, v2.path, newest)
    on_disk = sorted(p.name for p in (Path(v2.path) / "_delta_log" / "_sidecars").glob("*.parquet"))
    top_levels = sorted(p.name for p in (Path(v2.path) / "_delta_log").glob(f"{newest:020d}.checkpoint.*-*.*"))
    assert len(top_levels) == 2 and top_levels[-1] in read and top_levels[0] not in read, \
        "of two v2 checkpoints of one version, Delta reads the one whose name sorts last"
    named = [name for name in read if name.startswith("_sidecars/")]
    assert named and len(on_disk) > len(named) + 1, "sidecars of the other checkpoints and the orphan are not read"
    same_start = [(a, b) for a, b in v2.compacted if a < first and sum(x == a for x, _ in v2.compacted) > 1]
    (start, short), (_, long) = sorted(same_start)[:2]
    at_long = delta_log_files_read(spark, v2.path, long)
    assert f"{start:020d}.{short:020d}.compacted.json" in at_long, "the shorter range of one start is taken"
    assert not any(f"{first:020d}.{b:020d}.compacted.json" in delta_log_files_read(spark, v2.path, b)
                   for a, b in v2.compacted if a == first), "a range starting at the checkpoint's version is skipped"
    first_classic = classic.checkpoints[0]
    assert all(".checkpoint.0" in name for name in delta_log_files_read(spark, classic.path, first_classic)), \
        "parts beat a single file of the same version"
    assert not any(f"{incomplete.checkpoints[1]:020d}.checkpoint" in name
                   for name in delta_log_files_read(spark, incomplete.path, incomplete.checkpoints[1])), \
        "the checkpoint with a part missing is skipped"
    stale_latest = delta_log_files_read(spark, stale.path, stale.versions[-1])
    assert any(name.startswith(f"{stale.checkpoints[1]:020d}.checkpoint") for name in stale_latest), \
        "a reader of the copy with an older _last_checkpoint still finds the newest checkpoint"


def _replayed_after(names: list[str]) -> list[str]:
    return [name for name in names if _RANGE.match(name)]


def _walk(table_path: str, version: int, checkpoint_names: list[str], longest_first: bool,
          range_at_checkpoint: bool = False) -> list[str]:
    """The commits and compacted files after the checkpoint, taken greedily in an order of the test's choice;
    with ``range_at_checkpoint``, a compacted file starting at the checkpoint's version is taken too."""
    found = [int(name[:20]) for name in checkpoint_names if not name.startswith("_sidecars/")]
    covered = found[0] if found else -1
    ranges = []
    for path in (Path(table_path) / "_delta_log").iterdir():
        match = _RANGE.match(path.name)
        if match:
            ranges.append((int(match.group(1)), int(match.group(2) or match.group(1)), path.name))
    ranges.sort(key=lambda r: (r[0], -r[1]) if longest_first else r[2])
    taken = []
    for first, last, name in ranges:
        at_checkpoint = range_at_checkpoint and not taken and first == covered and name.endswith(".compacted.json")
        if (first > covered or at_checkpoint) and last <= version:
            taken.append(name)
            covered = last
    return taken


def test_lab15_wrong_answers_are_refused(spark, solution, at_test_seed):
    right = solution["log_files"]

    def checkpoint_part(path, version):
        return [name for name in right(path, version) if not _RANGE.match(name)]

    def no_sidecars(path, version):
        return [name for name in right(path, version) if not name.startswith("_sidecars/")]

    def commits_only(path, version):  # every commit from its own file, compacted files ignored
        names = checkpoint_part(path, version)
        start = int(names[0][:20]) if names else -1
        return names + [f"{v:020d}.json" for v in range(start + 1, version + 1)]

    def longest_range_first(path, version):
        names = checkpoint_part(path, version)
        return names + _walk(path, version, names, longest_first=True)

    def with_checksums(path, version):
        return right(path, version) + [f".{name}.crc" for name in _replayed_after(right(path, version))]

    def sidecars_by_listing(path, version):  # every sidecar of the checkpoint's version in the folder
        names = [name for name in checkpoint_part(path, version) if not name.startswith("_sidecars/")]
        prefixes = {name[:20] for name in names}
        listed = [f"_sidecars/{p.name}" for p in (Path(path) / "_delta_log" / "_sidecars").glob("*.parquet")
                  if p.name[:20] in prefixes] if (Path(path) / "_delta_log" / "_sidecars").is_dir() else []
        return names + listed + _replayed_after(right(path, version))

    def newest_checkpoint_even_incomplete(path, version):
        log = Path(path) / "_delta_log"
        parts = sorted(p.name for p in log.glob("*.checkpoint.*.*.parquet") if int(p.name[:20]) <= version)
        answer = right(path, version)
        taken = [int(name[:20]) for name in answer if ".checkpoint." in name and not name.startswith("_sidecars/")]
        newest = max((int(name[:20]) for name in parts), default=-1)
        if newest > (taken[0] if taken else -1):
            names = [name for name in parts if int(name[:20]) == newest]
            return names + _walk(path, version, names, longest_first=False)
        return answer

    def trusts_last_checkpoint(path, version):
        import json
        hint = json.loads((Path(path) / "_delta_log" / "_last_checkpoint").read_text())["version"]
        answer = right(path, version)
        taken = [int(name[:20]) for name in answer if ".checkpoint." in name and not name.startswith("_sidecars/")]
        if taken and hint < taken[0]:
            names = [p.name for p in (Path(path) / "_delta_log").glob(f"{hint:020d}.checkpoint*")]
            return names + _walk(path, version, names, longest_first=False)
        return answer

    def takes_range_at_checkpoint(path, version):  # A >= checkpoint instead of A > checkpoint
        names = checkpoint_part(path, version)
        found = [name for name in names if not name.startswith("_sidecars/")]
        return names + _walk(path, version, names, longest_first=False, range_at_checkpoint=bool(found))

    def last_part_only(path, version):  # "complete" when part n of n is there
        log = Path(path) / "_delta_log"
        answer = right(path, version)
        for p in sorted(log.glob("*.checkpoint.*.*.parquet"), reverse=True):
            at, part, parts = int(p.name[:20]), p.name.split(".")[2], p.name.split(".")[3]
            taken_here = any(name.startswith(f"{p.name[:20]}.checkpoint") for name in answer)
            if at <= version and part == parts and not taken_here:
                taken = [int(n[:20]) for n in answer if ".checkpoint." in n and not n.startswith("_sidecars/")]
                if not taken or at > taken[0]:
                    names = [q.name for q in log.glob(f"{p.name[:20]}.checkpoint.*.{parts}.parquet")]
                    return names + _walk(path, version, names, longest_first=False)
        return answer

    def bare_sidecar_names(path, version):
        return [name.removeprefix("_sidecars/") for name in right(path, version)]

    def returned_twice(path, version):
        return right(path, version) * 2

    assert "whatever _last_checkpoint says" in failure(check_log_files, trusts_last_checkpoint)
    assert "only if A is after" in failure(check_log_files, takes_range_at_checkpoint)
    assert "count them" in failure(check_log_files, last_part_only)
    assert "give each sidecar as '_sidecars/<name>'" in failure(check_log_files, bare_sidecar_names)
    assert "more than once" in failure(check_log_files, returned_twice)
    assert "nor one left by a checkpoint attempt" in failure(check_log_files, sidecars_by_listing)
    assert "complete only with all n parts" in failure(check_log_files, newest_checkpoint_even_incomplete)
    message = failure(check_log_files, no_sidecars)
    assert "sidecar file(s)" in message and "`sidecar` actions" in message
    assert not re.search(r"_sidecars/\d{20}", message), "the missing sidecars are not named"
    assert "walk the commit and compacted files" in failure(check_log_files, commits_only)
    assert "name order" in failure(check_log_files, longest_range_first)
    assert "checksums" in failure(check_log_files, with_checksums)


def test_lab15_the_course_readers_and_the_jvm_are_refused(spark, at_test_seed):
    message = failure(check_log_files, lambda path, version: delta_log_files_read(lab.lab_spark(), path, version))
    assert "the course's own reader" in message

    def from_the_jvm(path, version):  # Delta's answer asked of the JVM directly, without the course's helpers
        jvm = lab.lab_spark().sparkContext._jvm
        log = jvm.org.apache.spark.sql.delta.DeltaLog.forTable(lab.lab_spark()._jsparkSession, path)
        return [] if log is None else []

    assert "in Spark's JVM" in failure(check_log_files, from_the_jvm)


def test_lab15_an_answer_of_the_wrong_shape_is_explained(spark, at_test_seed):
    assert "file names relative to _delta_log/" in failure(check_log_files, lambda path, version: 3)


def test_lab15_a_checkpoint_named_but_missing_makes_delta_read_without_compacted_files(spark, tmp_path):
    """A case the lab's text names and its tables leave out, shown on Delta itself
    (SnapshotManagement.scala, getLogSegmentWithMaxExclusiveCheckpointVersion): when ``_last_checkpoint``
    names a checkpoint the log does not have, Delta starts from the newest complete checkpoint before it and
    reads each commit from its own file, without compacted files; the same log with ``_last_checkpoint``
    naming that older checkpoint is read through the compacted file."""
    from deltalake import DeltaTable

    from deltalab.jvm import clear_delta_cache, delta_log_segment

    table = tmp_path / "events"
    log = table / "_delta_log"
    spark.sql(f"CREATE TABLE delta.`{table}` (id LONG) USING delta TBLPROPERTIES ('delta.checkpointInterval' = '4')")
    for version in range(1, 10):
        spark.range(version, version + 1).write.format("delta").mode("append").save(str(table))
        if version == 4:
            names_checkpoint_4 = (log / "_last_checkpoint").read_text()
    assert (log / f"{4:020d}.checkpoint.parquet").is_file() and (log / f"{8:020d}.checkpoint.parquet").is_file()
    assert '"version":8' in (log / "_last_checkpoint").read_text()
    DeltaTable(str(table)).compact_logs(5, 7)
    (log / f"{8:020d}.checkpoint.parquet").unlink()

    try:
        clear_delta_cache(spark)   # a fresh DeltaLog starts from _last_checkpoint, which names the missing 8
        fallback = delta_log_segment(spark, table)
        assert (fallback.version, fallback.checkpoint_version) == (9, 4), fallback
        # each commit from its own file (this path lists the checkpoint's own commit too, replayed to no effect)
        assert fallback.commit_files == [f"{v:020d}.json" for v in range(4, 10)], fallback.commit_files
        assert spark.read.format("delta").load(str(table)).count() == 9

        (log / "_last_checkpoint").write_text(names_checkpoint_4)
        clear_delta_cache(spark)
        through_compacted = delta_log_segment(spark, table)
        assert (through_compacted.version, through_compacted.checkpoint_version) == (9, 4), through_compacted
        assert through_compacted.commit_files == [f"{5:020d}.{7:020d}.compacted.json", f"{8:020d}.json",
                                                  f"{9:020d}.json"], through_compacted.commit_files
        assert sorted(r.id for r in spark.read.format("delta").load(str(table)).collect()) == list(range(1, 10))
    finally:
        clear_delta_cache(spark)
