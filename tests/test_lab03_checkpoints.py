"""deltalab.labs.lab03_checkpoints: the checks compare with Delta's log segments and Spark's files on
the example table and on tables generated for each run; the answers a student could fit to one
table, or get from Spark or the course's own readers, are refused with a message that names the
mistake and never the right answer.

The solutions run at three fixed seeds with the real generator. The wrong answers run at one seed
through a generator that writes each table once per process and copies it afterwards (the check
still builds its copies, seals its log and asks Delta), so a wrong answer costs seconds, not a
table of Spark writes.
"""

from __future__ import annotations

import json
import random
import re
import shutil
from pathlib import Path
from urllib.parse import quote, unquote

import pyarrow.parquet as pq
import pytest

from deltalab.jvm import clear_delta_cache, delta_log_segment
from deltalab.labs import lab03_checkpoints as lab
from deltalab.labs.lab03_checkpoints import check_checkpoint_active_files, check_log_segment
from deltalab.locations import hadoop_path
from deltalab.workdir import workdir
from lab_testing import solution_and_student_version
from lab_testing import check_failure as failure
from lab_testing import solution_seeds

# The labs' tests run in make test-labs (and those of its solutions at their seeds, marked seeds too, in
# make test-seeds), not in make test: tests/README.md says why.
pytestmark = pytest.mark.labs

#: The lab's solution on tables of a fresh seed, then its student version (tests/support/lab_testing.py).
test_the_solution_passes_and_the_student_version_says_what_is_missing = solution_and_student_version("lab03_checkpoints")

#: Seeds of the solution runs: together, a partitioned and an unpartitioned log-segment table, with
#: and without deletion vectors (asserted below from the tables themselves).
SOLUTION_SEEDS = (2, 3, 21)
#: The kind of table each seed's log-segment check generates: together both kinds.
LOG_SEGMENT_TABLE_AT = {2: "not partitioned", 3: "partitioned", 21: "partitioned"}
#: The seed of the wrong answers' tables.
WRONG_SEED = 21

_CHECKPOINT = re.compile(r"^(\d{20})\.checkpoint(?:\.(\d{10})\.(\d{10}))?\.parquet$")


# ----------------------------------------------------------------------------------------------
# Right answers (the lab's solutions) and the course's own ones, in the test's own words
# ----------------------------------------------------------------------------------------------

def complete_checkpoints(table_path: str) -> list[int]:
    parts: dict[tuple[int, int], set[int]] = {}
    for entry in (Path(table_path) / "_delta_log").iterdir():
        match = _CHECKPOINT.match(entry.name)
        if match:
            parts.setdefault((int(match[1]), int(match[3] or 1)), set()).add(int(match[2] or 1))
    return sorted({v for (v, n), found in parts.items() if found == set(range(1, n + 1))})


def right_segment(table_path: str, version: int):
    start = max((v for v in complete_checkpoints(table_path) if v <= version), default=None)
    return start, list(range(0 if start is None else start + 1, version + 1))


def checkpoint_rows(table_path: str, version: int) -> list[dict]:
    files = sorted((Path(table_path) / "_delta_log").glob(f"{version:020d}.checkpoint*.parquet"))
    return [row for f in files for row in pq.read_table(f, columns=["add", "remove"]).to_pylist()]


def right_files(table_path: str, version: int) -> set[str]:
    return {row["add"]["path"] for row in checkpoint_rows(table_path, version) if row["add"]}


def segment(spark, path: str, version: int):
    found = delta_log_segment(spark, path, version)
    return found.checkpoint_version, found.commit_versions


@pytest.fixture
def seed(monkeypatch):
    """Fix the check's seed (DELTALAB_CHECK_SEED) for the test; returns a setter."""
    def fix(value: int) -> int:
        monkeypatch.setenv("DELTALAB_CHECK_SEED", str(value))
        return value
    return fix


_BUILT: dict[tuple[int, bool], tuple[Path, lab._Generated, tuple]] = {}


@pytest.fixture
def reused_tables(monkeypatch):
    """Make the check's generator write each (seed, kind) table once per process, then copy it."""
    real = lab._write_history

    def write_once(spark, path, rng, *, data_changes):
        key = (hash(rng.getstate()), data_changes)
        if key not in _BUILT:
            kept = workdir(f"test_lab03_kept_{len(_BUILT)}", fresh=True) / "table"
            _BUILT[key] = kept, real(spark, str(kept), rng, data_changes=data_changes), rng.getstate()
        kept, built, after = _BUILT[key]
        rng.setstate(after)  # the check draws on from where the real generator left the generator
        shutil.copytree(kept, path)
        clear_delta_cache(spark)
        return lab._Generated(str(path), built.latest, built.checkpoints, built.multi_part, built.partitioned,
                              built.deletion_vectors)

    monkeypatch.setattr(lab, "_write_history", write_once)
    monkeypatch.setenv("DELTALAB_CHECK_SEED", str(WRONG_SEED))


class TestLab03Checks:
    """The checks of lab 03 (grouped so that `pytest -k lab03` selects them with the lab's notebook tests)."""

    # -- the tables -------------------------------------------------------------------------

    def test_the_example_table_has_checkpoints_where_delta_says(self, spark):
        table = lab._table(spark)
        assert table.checkpoints == complete_checkpoints(table.full)
        for version in range(table.latest + 1):
            assert segment(spark, table.full, version) == right_segment(table.full, version)
        assert not (Path(table.trimmed) / "_delta_log" / f"{0:020d}.json").exists()

    def test_a_generated_table_has_what_the_checks_promise(self, spark, tmp_path, reused_tables):
        """An interval change, checkpoints in parts, deletion vectors and encoded paths, read from the
        table (its commits, Delta's log segment, the checkpoint files, Spark's files); and the copy
        the check seals, which Spark and Delta refuse while pyarrow reads the same add rows."""
        # through reused_tables: the wrong answers' tests reuse this table
        built = lab._write_history(spark, str(tmp_path / "t"), random.Random(WRONG_SEED), data_changes=True)
        assert built.checkpoints == complete_checkpoints(built.path) and len(built.checkpoints) >= 2
        later = [json.loads(line) for v in range(1, built.latest + 1)
                 for line in (Path(built.path) / "_delta_log" / f"{v:020d}.json").read_text().splitlines()]
        assert any("delta.checkpointInterval" in (a.get("metaData") or {}).get("configuration", {}) for a in later)
        assert built.multi_part and set(built.multi_part) <= set(built.checkpoints)
        clear_delta_cache(spark)
        assert segment(spark, built.path, built.latest) == (built.latest, [])
        rows = checkpoint_rows(built.path, built.latest)
        kept = {row["add"]["path"] for row in rows if row["add"] and row["add"]["deletionVector"]}
        assert kept & {row["remove"]["path"] for row in rows if row["remove"]}, "a file kept with a deletion vector"
        assert any("%253A" in path for path in right_files(built.path, built.latest)), "10:30 is encoded twice"
        on_disk = {hadoop_path(uri)[len(str(Path(built.path).resolve())) + 1:]
                   for uri in spark.read.format("delta").load(built.path).inputFiles()}
        assert {unquote(p) for p in right_files(built.path, built.latest)} == on_disk

        # the copy the check seals: Spark and Delta refuse it, pyarrow reads the same add rows
        sealed = str(tmp_path / "sealed")
        shutil.copytree(built.path, sealed)
        lab._seal(sealed)
        clear_delta_cache(spark)
        with pytest.raises(Exception, match="DELTA_UNSUPPORTED_FEATURES_FOR_READ"):
            spark.read.format("delta").option("versionAsOf", built.latest).load(sealed).inputFiles()
        with pytest.raises(Exception, match=lab.UNKNOWN_READER_FEATURE):
            delta_log_segment(spark, sealed, built.latest)
        assert right_files(sealed, built.latest) == right_files(built.path, built.latest)
        assert sorted(p.name for p in Path(sealed, "_delta_log").glob("*.checkpoint*.parquet")) == \
            sorted(p.name for p in Path(built.path, "_delta_log").glob("*.checkpoint*.parquet"))

    # -- right answers ------------------------------------------------------------------------

    @pytest.mark.parametrize("value", solution_seeds(SOLUTION_SEEDS))
    def test_the_solutions_pass_at_fixed_seeds(self, spark, seed, capsys, value):
        seed(value)
        check_log_segment(right_segment)
        check_checkpoint_active_files(right_files)
        out = capsys.readouterr().out
        assert out.startswith("✓ log_segment: ") and "\n✓ checkpoint_active_files: " in out, out
        kind = re.search(r"a generated table \((partitioned|not partitioned)", out)[1]
        assert kind == LOG_SEGMENT_TABLE_AT[value], f"seed {value} now generates a {kind} table: update the seeds"

    def test_the_seeds_cover_both_kinds_of_log_segment_table(self):
        assert sorted(LOG_SEGMENT_TABLE_AT) == sorted(SOLUTION_SEEDS)
        assert set(LOG_SEGMENT_TABLE_AT.values()) == {"partitioned", "not partitioned"}

    # -- the stub, the shape ------------------------------------------------------------------

    def test_the_stub_and_a_wrong_shape_get_plain_messages(self, spark):
        def stub(path, version):
            raise NotImplementedError()

        assert "not written yet" in failure(check_log_segment, stub)
        assert "not written yet" in failure(check_checkpoint_active_files, stub)
        assert "must return a pair" in failure(check_log_segment, lambda path, version: [version])
        assert "must return a set" in failure(check_checkpoint_active_files, lambda path, version: "part-0.parquet")

    # -- exercise 1: mistakes the example table shows ------------------------------------------

    def test_replaying_from_commit_zero_is_told_to_start_at_a_checkpoint(self, spark):
        message = failure(check_log_segment, lambda path, version: (None, list(range(version + 1))))
        assert "for version 3 of the example table" in message and "instead of replaying every commit" in message

    def test_reading_the_checkpoints_own_commit_is_an_off_by_one(self, spark):
        def off_by_one(path, version):
            start, commits = right_segment(path, version)
            return start, ([start] if start is not None else []) + commits

        message = failure(check_log_segment, off_by_one)
        assert "checkpoint 3 + commits [3]" in message and "already contains commit 3" in message

    def test_checkpoints_computed_from_the_first_interval_are_caught(self, spark):
        def arithmetic(path, version):
            first = json.loads((Path(path) / "_delta_log" / f"{0:020d}.json").read_text().splitlines()[-1])
            interval = int(first.get("metaData", {}).get("configuration", {}).get("delta.checkpointInterval", 3))
            start = version // interval * interval or None
            return start, list(range(0 if start is None else start + 1, version + 1))

        message = failure(check_log_segment, arithmetic)
        assert "do not compute N" in message, message

    def test_the_course_readers_are_refused(self, spark):
        def through_delta(path, version):
            found = delta_log_segment(spark, path, version)
            return found.checkpoint_version, found.commit_versions

        def through_replay(path, version):
            from deltalab.log import replay_log

            return set(replay_log(path, version).paths())

        assert "called deltalab.jvm.delta_log_segment" in failure(check_log_segment, through_delta)
        assert "called deltalab.log.replay_log" in failure(check_checkpoint_active_files, through_replay)

    # -- exercise 1: mistakes only a generated table shows --------------------------------------

    def test_a_listing_of_single_file_checkpoints_misses_the_ones_in_parts(self, spark, reused_tables):
        def classic_only(path, version):
            found = [int(p.name[:20]) for p in (Path(path) / "_delta_log").glob("*.checkpoint.parquet")]
            start = max((v for v in found if v <= version), default=None)
            return start, list(range(0 if start is None else start + 1, version + 1))

        message = failure(check_log_segment, classic_only)
        assert "is a checkpoint too" in message and f"seed {WRONG_SEED}" in message, message
        self.assert_no_expected_segment(spark, message)

    def test_a_checkpoint_with_a_part_missing_is_not_a_checkpoint(self, spark, reused_tables):
        def any_part(path, version):
            found = [int(p.name[:20]) for p in (Path(path) / "_delta_log").glob("*.checkpoint*.parquet")]
            start = max((v for v in found if v <= version), default=None)
            return start, list(range(0 if start is None else start + 1, version + 1))

        message = failure(check_log_segment, any_part)
        assert "lost a part" in message and "one part is missing" in message, message
        self.assert_no_expected_segment(spark, message)

    @pytest.mark.parametrize("part", ["first", "last"])
    def test_one_part_is_no_proof_of_a_complete_checkpoint(self, spark, reused_tables, part):
        def one_part(path, version):
            wanted = (lambda i, n: i == 1) if part == "first" else (lambda i, n: i == n)
            found = [int(m[1]) for m in map(_CHECKPOINT.match, (p.name for p in (Path(path) / "_delta_log").iterdir()))
                     if m and wanted(int(m[2] or 1), int(m[3] or 1))]
            start = max((v for v in found if v <= version), default=None)
            return start, list(range(0 if start is None else start + 1, version + 1))

        message = failure(check_log_segment, one_part)
        assert "lost a part" in message and "only when all n parts are there" in message, message

    def test_trusting_last_checkpoint_misses_a_newer_checkpoint(self, spark, reused_tables):
        def trusting(path, version):
            pointer = Path(path) / "_delta_log" / "_last_checkpoint"
            if pointer.exists() and json.loads(pointer.read_text())["version"] <= version:
                start = json.loads(pointer.read_text())["version"]
                return start, list(range(start + 1, version + 1))
            return right_segment(path, version)

        message = failure(check_log_segment, trusting)
        assert "names an older checkpoint" in message and "only a hint" in message, message
        self.assert_no_expected_segment(spark, message)

    def test_asking_delta_through_the_jvm_fails_on_a_log_spark_cannot_read(self, spark, reused_tables):
        def through_jvm(path, version):
            jvm_log = spark.sparkContext._jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, path)
            none = getattr(jvm_log, "getSnapshotAt$default$2")()
            found = jvm_log.getSnapshotAt(version, none, none, False).logSegment()
            start = int(found.checkpointProvider().version())
            deltas = found.deltas()
            commits = [int(deltas.apply(i).getPath().getName()[:20]) for i in range(deltas.size())]
            return (None if start < 0 else start), [c for c in commits if c > start]

        message = failure(check_log_segment, through_jvm)
        assert "a copy Spark cannot read" in message and "names of the files in _delta_log alone" in message, message

    @staticmethod
    def assert_no_expected_segment(spark, message: str) -> None:
        """The message shows the answer given, never Delta's: one segment only, the one returned."""
        assert len(re.findall(r"checkpoint \d+ (?:\+ commits|alone)|no checkpoint (?:\+|and)", message)) == 1, message

    # -- exercise 2 ---------------------------------------------------------------------------

    def test_counting_remove_rows_is_named(self, spark):
        def adds_and_removes(path, version):
            return {(row["add"] or row["remove"])["path"] for row in checkpoint_rows(path, version)
                    if row["add"] or row["remove"]}

        message = failure(check_checkpoint_active_files, adds_and_removes)
        assert "are not read by Spark" in message and "tombstones" in message

    def test_reading_the_newest_checkpoint_instead_of_the_asked_one_is_named(self, spark):
        def newest(path, version):
            return right_files(path, complete_checkpoints(path)[-1])

        message = failure(check_checkpoint_active_files, newest)
        assert "for the checkpoint of version 3" in message and "not the newest one" in message

    def test_spark_input_files_fail_on_a_copy_spark_cannot_read(self, spark, reused_tables):
        def through_spark(path, version):
            root = str(Path(path).resolve())
            uris = spark.read.format("delta").option("versionAsOf", version).load(path).inputFiles()
            return {quote(hadoop_path(uri)[len(root) + 1:], safe="/=") for uri in uris}

        message = failure(check_checkpoint_active_files, through_spark)
        assert "a copy Spark cannot read" in message and "with pyarrow" in message, message

    def test_replaying_the_json_commits_fails_where_they_were_cleaned_up(self, spark, reused_tables):
        def json_replay(path, version):
            files: set[str] = set()
            for v in range(version + 1):
                for line in (Path(path) / "_delta_log" / f"{v:020d}.json").read_text().splitlines():
                    action = json.loads(line)
                    files |= {action["add"]["path"]} if "add" in action else set()
                    files -= {action["remove"]["path"]} if "remove" in action else set()
            return files

        message = failure(check_checkpoint_active_files, json_replay)
        assert "FileNotFoundError" in message and "not the JSON commits" in message, message

    def test_reading_only_n_checkpoint_parquet_misses_the_parts(self, spark, reused_tables):
        def single_file(path, version):
            table = pq.read_table(Path(path) / "_delta_log" / f"{version:020d}.checkpoint.parquet", columns=["add"])
            return {add["path"] for add in table.column("add").to_pylist() if add}

        message = failure(check_checkpoint_active_files, single_file)
        assert "written in parts" in message and "every part" in message, message

    def test_subtracting_removes_by_path_loses_files_kept_with_a_deletion_vector(self, spark, reused_tables):
        def minus_removes(path, version):
            rows = checkpoint_rows(path, version)
            return {r["add"]["path"] for r in rows if r["add"]} - {r["remove"]["path"] for r in rows if r["remove"]}

        message = failure(check_checkpoint_active_files, minus_removes)
        assert "deletion vectors keeps the file" in message and "are missing" in message, message
        assert "part-" not in message, "a missing file (the right answer) must not be named"

    def test_decoded_paths_and_bare_file_names_are_named(self, spark, reused_tables):
        decoded = failure(check_checkpoint_active_files,
                          lambda path, version: {unquote(p) for p in right_files(path, version)})
        assert "the paths are decoded" in decoded and "do not unquote" in decoded, decoded
        names = failure(check_checkpoint_active_files,
                        lambda path, version: {p.rsplit("/", 1)[-1] for p in right_files(path, version)})
        assert "lack their partition folders" in names, names

    def test_writing_in_the_table_folder_is_refused(self, spark):
        def vacuum_first(path, version):
            (Path(path) / "_delta_log" / "_last_checkpoint").touch()
            return right_files(path, version)

        message = failure(check_checkpoint_active_files, vacuum_first)
        assert "must only read it" in message, message
