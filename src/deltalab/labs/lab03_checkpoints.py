"""Lab 03 (checkpoints): which log files rebuild a version, and what a checkpoint holds.

Each check runs the student's function on the lab's example table (built once per process:
checkpoints at 3, 4 and 6 after the ``delta.checkpointInterval`` changes from 3 to 2, tombstones
from an OPTIMIZE and a DELETE, and a copy whose commits 0 to 2 were cleaned up) and on a table
generated afresh for the run from :func:`deltalab.labs.tables.check_seed` (:func:`_write_history`:
intervals that change, checkpoints written by hand at any version, checkpoints in parts through
``spark.databricks.delta.checkpoint.partSize``, partition values that the log URL-encodes,
deletion vectors).

* :func:`check_log_segment` compares with Delta's own log segment
  (``deltalab.jvm.delta_log_segment``) at every version of the generated table and at the
  versions that matter of copies of it: commits cleaned up, a ``_last_checkpoint`` naming an
  older checkpoint than the newest one, no checkpoint at all, a checkpoint in parts whose first
  part is gone and a lone first part of two at a version without a checkpoint (Delta skips both),
  and a log whose protocol names a reader feature Spark does not know (the answer must come
  from the file names).
* :func:`check_checkpoint_active_files` compares with Spark's ``inputFiles()`` at each
  checkpoint's version, while the student's function reads a copy Spark cannot read (a
  protocol with an unknown reader feature, the commits up to the newest checkpoint cleaned up),
  so only a reading of the checkpoint's ``add`` rows gives the answer.

Both refuse an answer that calls the course's own log readers (:mod:`deltalab.log`,
:mod:`deltalab.jvm`, :mod:`deltalab.files`), or that writes in the table folder. Messages follow
:mod:`deltalab.labs.report` and never show the expected answer, only what the student returned
and which kind of table or copy it was wrong on.
"""

from __future__ import annotations

import json
import numbers
import random
import re
import shutil
from collections.abc import Callable, Iterable
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional
from urllib.parse import unquote

from deltalab.files import spark_files
from deltalab.jvm import clear_delta_cache, delta_log_segment, write_checkpoint
from deltalab.labs.report import CheckFailed, passed, short_repr
from deltalab.labs.student import call_student, calls_watched, exercise_check, lab_spark
from deltalab.labs.tables import (AWKWARD_VALUES, append_events, build_once, check_seed, clean_up_commits,
                                  create_history_table, fresh_dir)
from deltalab.log import checkpoint_versions, latest_version, replay_log
from deltalab.session import temporary_conf

__all__ = [
    "CheckFailed",
    "check_log_segment",
    "check_checkpoint_active_files",
]

#: A log segment as the lab writes it: (checkpoint version or None, commit versions after it).
Segment = tuple[Optional[int], list[int]]

#: The session setting above which Delta writes a checkpoint in parts (actions per part).
PART_SIZE = "spark.databricks.delta.checkpoint.partSize"

#: A reader feature no Delta release knows: a protocol that requires it makes Spark refuse the table.
UNKNOWN_READER_FEATURE = "courseFutureFeature"

#: Modules whose functions already answer the exercises (the course's log reader, Delta's own
#: answers through the JVM, Spark's file lists): the student's function must not call them.
COURSE_READERS = ("deltalab.log", "deltalab.jvm", "deltalab.files")

_CHECKPOINT_NAME = re.compile(r"^(\d{20})\.checkpoint(?:\.(\d{10})\.(\d{10}))?\.parquet$")


# --------------------------------------------------------------------------------------------
# The example table (built once per process)
# --------------------------------------------------------------------------------------------

@dataclass
class _CheckpointTable:
    """The lab 03 example table and Delta's answers for it (computed once, on first use)."""

    full: str  # every commit still present
    trimmed: str  # a copy whose commits before the first checkpoint were deleted
    latest: int
    checkpoints: list[int]  # versions that have N.checkpoint.parquet
    segments: dict[tuple[str, int], Segment] = field(default_factory=dict)
    files: dict[int, set[str]] = field(default_factory=dict)


def _table(spark) -> _CheckpointTable:
    """The lab 03 example table, built once per Python process (the checks only read it)."""
    return build_once("lab03", lambda folder: _build_table(spark, folder),
                      intact=lambda table: all((Path(p) / "_delta_log" / f"{table.latest:020d}.json").exists()
                                               for p in (table.full, table.trimmed)))


def _build_table(spark, root: Path) -> _CheckpointTable:
    """Eight commits, checkpoints at 3, 4 and 6, tombstones in every checkpoint.

    The interval is 3 until version 4 sets it to 2, so checkpoints are at 3, 4 and 6: an
    answer that computes checkpoint versions from one interval instead of listing the files
    is wrong somewhere. The OPTIMIZE (v2) and DELETE (v5) put remove rows (tombstones) into
    the checkpoints next to the add rows. The copy ``trimmed`` lost commits 0 to 2, as after
    log clean-up, so versions 3 to 7 can only be read through a checkpoint.
    """
    path = str(root / "events")
    spark.sql(
        f"CREATE TABLE delta.`{path}` (id BIGINT, kind STRING) USING delta "
        "TBLPROPERTIES ('delta.checkpointInterval' = '3')"
    )                                                                                # v0
    append_events(spark, path, 0, 30, "IF(id % 3 = 0, 'click', 'view')", files=3)   # v1: 3 files
    spark.sql(f"OPTIMIZE delta.`{path}`")                                             # v2: 3 -> 1
    append_events(spark, path, 30, 40, "'buy'")                                      # v3: checkpoint
    spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.checkpointInterval' = '2')")  # v4: checkpoint
    spark.sql(f"DELETE FROM delta.`{path}` WHERE id < 5")                             # v5: rewrites a file
    append_events(spark, path, 40, 50, "'view'")                                     # v6: checkpoint
    append_events(spark, path, 50, 55, "'click'")                                    # v7
    trimmed = str(root / "events_cleaned_up")
    shutil.copytree(path, trimmed)
    clean_up_commits(trimmed, before=3)
    return _CheckpointTable(path, trimmed, 7, checkpoint_versions(path))


# --------------------------------------------------------------------------------------------
# Tables generated afresh for each check run
# --------------------------------------------------------------------------------------------

@dataclass
class _Generated:
    """A table :func:`_write_history` wrote: its path, latest version and checkpoints."""

    path: str
    latest: int
    checkpoints: list[int]
    multi_part: list[int]  # the checkpoints written in parts
    partitioned: bool
    deletion_vectors: bool


def _checkpoint_parts(table_path: str | Path) -> dict[int, dict[int, dict[int, Path]]]:
    """version -> number of parts -> {part number: file}, for every checkpoint file in the log
    (a classic ``N.checkpoint.parquet`` is one part of one)."""
    found: dict[int, dict[int, dict[int, Path]]] = {}
    for entry in (Path(table_path) / "_delta_log").iterdir():
        match = _CHECKPOINT_NAME.match(entry.name)
        if match:
            version, part, parts = int(match[1]), int(match[2] or 1), int(match[3] or 1)
            found.setdefault(version, {}).setdefault(parts, {})[part] = entry
    return found


def _multi_part_versions(table_path: str | Path) -> list[int]:
    """The versions whose checkpoint was written in parts (complete or not)."""
    return sorted(v for v, sets in _checkpoint_parts(table_path).items() if any(n > 1 for n in sets))


def _incomplete_versions(table_path: str | Path) -> list[int]:
    """The versions whose only checkpoint files are an incomplete set of parts (Delta skips them)."""
    return sorted(v for v, sets in _checkpoint_parts(table_path).items()
                  if not any(sorted(parts) == list(range(1, n + 1)) for n, parts in sets.items()))


def _write_history(spark, path: str, rng: random.Random, *, data_changes: bool) -> _Generated:
    """Write a table whose log ``rng`` chooses, with the checkpoints a lab 03 answer can get wrong.

    Always: a checkpoint interval that changes, a checkpoint written by hand
    (``DeltaLog.checkpoint()``, at whatever version the table has then, often one no interval
    gives) and in parts, two checkpoints at least (``partSize`` is also set for some commits, so
    that the checkpoint after one may be split too). With
    ``data_changes`` (for the checkpoint's rows): partitioned by ``city`` with values the log
    URL-encodes, deletion vectors on, a DELETE and an UPDATE or OPTIMIZE (tombstones, and files
    kept with a deletion vector), ending on a checkpoint. Without (for log segments): mostly
    cheap commits (small appends, property changes), partitioned or not.
    """
    clear_delta_cache(spark)  # Delta may still cache a table of the previous run at this path
    partitioned = True if data_changes else rng.random() < 0.5
    deletion_vectors = True if data_changes else rng.random() < 0.5
    intervals = [4, 5] if data_changes else [3, 4, 5]  # few checkpoints by interval: each costs a Spark job
    interval = rng.choice(intervals)
    create_history_table(spark, path, partitioned=partitioned, deletion_vectors=deletion_vectors,
                         checkpoint_interval=interval)
    next_id = 0

    def append() -> None:
        nonlocal next_id
        cities = list(AWKWARD_VALUES)  # every awkward value in every append: each checkpoint has them all
        cities += [rng.choice(AWKWARD_VALUES) for _ in range(rng.randint(2, 9))]
        rng.shuffle(cities)
        data = [(next_id + i, city, rng.randint(1, 1000)) for i, city in enumerate(cities)]
        next_id += len(data)
        frame = spark.createDataFrame(data, "id BIGINT, city STRING, amount INT")
        frame.repartition(rng.randint(1, 2)).write.format("delta").mode("append").save(path)

    def files_and_tombstones() -> int:
        state = replay_log(path)
        return len(state.files) + len(state.tombstones)

    def part_size() -> int:
        """A part size that splits the next checkpoint into 2 parts or more: Delta writes
        ceil((files + tombstones) / partSize) parts."""
        return max(1, files_and_tombstones() // rng.choice([2, 3]))

    def run(step: str) -> None:
        nonlocal interval
        if step == "checkpoint":  # by hand, at the latest version, always in parts
            if files_and_tombstones() < 2:
                run("append")  # one file makes one part: add some
            if latest_version(path) in checkpoint_versions(path):
                run("property")  # one checkpoint per version: commit once more first
            with temporary_conf(spark, {PART_SIZE: str(part_size())}):
                write_checkpoint(spark, path)
            return
        split = rng.random() < 0.4  # a checkpoint after this commit is written in parts
        with temporary_conf(spark, {PART_SIZE: str(part_size())}) if split else nullcontext():
            if step == "append":
                append()
            elif step == "delete":
                spark.sql(f"DELETE FROM delta.`{path}` WHERE id % {rng.randint(3, 5)} = {rng.randint(0, 2)}")
            elif step == "update":
                spark.sql(f"UPDATE delta.`{path}` SET amount = amount + 1 WHERE id % {rng.randint(2, 4)} = 0")
            elif step == "optimize":
                spark.sql(f"OPTIMIZE delta.`{path}`")
            elif step == "interval":
                interval = rng.choice([i for i in intervals if i != interval])
                spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.checkpointInterval' = '{interval}')")
            else:
                spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('course.step' = '{rng.randint(1, 10**6)}')")

    if data_changes:
        steps = ["delete", rng.choice(["update", "optimize"]), "append", "interval", "checkpoint"]
        rng.shuffle(steps)
        steps = ["append"] + steps
    else:
        steps = ["interval", "checkpoint", "property", "property"]
        steps += [rng.choice(["append", "property", "interval", "property"]) for _ in range(rng.randint(2, 4))]
        rng.shuffle(steps)
        steps = ["append"] + steps
    for step in steps:
        run(step)
    if data_changes and not any(add.get("deletionVector") for add in replay_log(path).files.values()):
        # no DELETE left a file with a deletion vector (each deleted whole files or nothing): one that does
        spark.createDataFrame([(next_id + i, "plain", i) for i in range(4)], "id BIGINT, city STRING, amount INT") \
            .coalesce(1).write.format("delta").mode("append").save(path)
        spark.sql(f"DELETE FROM delta.`{path}` WHERE id = {next_id}")
        next_id += 4
    if len(checkpoint_versions(path)) < 2 or (data_changes and latest_version(path) not in checkpoint_versions(path)):
        run("checkpoint")  # two checkpoints at least; with data, the last deletion vectors end up in one
    clear_delta_cache(spark)  # a checkpoint written by hand is not in Delta's cached snapshot
    return _Generated(path, latest_version(path), checkpoint_versions(path), _multi_part_versions(path),
                      partitioned, deletion_vectors)


def _sealed_protocol(protocol: dict[str, Any]) -> dict[str, Any]:
    """``protocol`` requiring also :data:`UNKNOWN_READER_FEATURE` (reader 3, writer 7, table features)."""
    legacy_writer = ["appendOnly", "invariants"] if int(protocol.get("minWriterVersion") or 0) < 7 else []
    return {
        **protocol,
        "minReaderVersion": 3,
        "minWriterVersion": 7,
        "readerFeatures": sorted({*(protocol.get("readerFeatures") or []), UNKNOWN_READER_FEATURE}),
        "writerFeatures": sorted({*(protocol.get("writerFeatures") or []), *legacy_writer, UNKNOWN_READER_FEATURE}),
    }


def _seal(table_path: str) -> None:
    """Make Spark refuse every version of the table, keeping every log file name and every add row.

    Each protocol action (in the JSON commits and in every checkpoint file, rewritten with
    pyarrow) gets :data:`UNKNOWN_READER_FEATURE`. The ``N.crc`` files go (Delta 4.4 reads the
    protocol from them first), and so do Hadoop's hidden ``.crc`` twins of the rewritten files.
    A reading of the file names, or of a checkpoint's ``add`` column, is unchanged.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    log = Path(table_path) / "_delta_log"
    for entry in list(log.iterdir()):
        if entry.name.endswith(".crc"):
            entry.unlink()
    for commit in log.glob("*.json"):
        lines = commit.read_text().splitlines()
        actions = [json.loads(line) for line in lines if line.strip()]
        if any("protocol" in action for action in actions):
            sealed = [{"protocol": _sealed_protocol(a["protocol"])} if "protocol" in a else a for a in actions]
            commit.write_text("".join(json.dumps(a) + "\n" for a in sealed))
    for checkpoint in log.glob("*.checkpoint*.parquet"):
        table = pq.read_table(checkpoint)
        index = table.schema.get_field_index("protocol")
        rows = table.column(index).to_pylist()
        if not any(rows):
            continue
        column = pa.array([None if row is None else _sealed_protocol(row) for row in rows],
                          type=table.schema.field(index).type)
        pq.write_table(table.set_column(index, table.schema.field(index), column), checkpoint)


def _call(check: str, func: Callable[..., Any], name: str, path: str, version: int, hint: str,
          seed: int | None) -> Any:
    """``call_student`` with the table folder read-only and the course's readers off limits."""
    with calls_watched(modules=COURSE_READERS) as called:
        answer = call_student(check, func, name, path, version, hint=hint, read_only=[path], seed=seed)
    if called:
        raise CheckFailed(
            check,
            f"{name} called {called[0]}, the course's own reader, which already answers this exercise.",
            "write it yourself from the files in _delta_log (Path.iterdir, json, pyarrow.parquet); the check "
            "compares your answer with those readers.",
            seed=seed,
        )
    return answer


@dataclass
class _SegmentCase:
    """A table the log_segment check asks about, at which versions, and where Delta's answers come from."""

    path: str  # the folder the student's function reads
    label: str
    versions: list[int]
    expected_from: str  # the table Delta reads for the answers (the same, or the one ``path`` was copied from)
    kind: str = ""  # "stale", "incomplete" or "sealed": what is unusual about the copy, for the hints
    seed: int | None = None
    answers: dict[tuple[str, int], Segment] = field(default_factory=dict)


def _as_segment(answer: Any) -> Segment | None:
    """``answer`` as (int or None, list of int), or None if it does not have that shape."""
    if not isinstance(answer, (tuple, list)) or len(answer) != 2:
        return None
    checkpoint, commits = answer
    if checkpoint is not None and (isinstance(checkpoint, bool) or not isinstance(checkpoint, numbers.Integral)):
        return None
    if isinstance(commits, (str, bytes)) or not isinstance(commits, Iterable):
        return None
    commits = list(commits)
    if any(isinstance(c, bool) or not isinstance(c, numbers.Integral) for c in commits):
        return None
    return (None if checkpoint is None else int(checkpoint)), [int(c) for c in commits]


def _show(segment: Segment) -> str:
    checkpoint, commits = segment
    if checkpoint is None:
        return f"no checkpoint + commits {commits}" if commits else "no checkpoint and no commits"
    return f"checkpoint {checkpoint} + commits {commits}" if commits else f"checkpoint {checkpoint} alone"


def _segment_fix(got: Segment, expected: Segment, version: int, case: _SegmentCase) -> str:
    """Where to look, for the usual ways a log segment goes wrong (never naming the right answer)."""
    got_cp, got_commits = got
    exp_cp, exp_commits = expected
    on_disk = _checkpoint_parts(case.path)
    if got_cp == exp_cp and sorted(got_commits) == exp_commits:
        return "list the commits oldest first: a reader applies them in order."
    if got_cp == -1 and exp_cp is None:
        return "when no checkpoint N <= version exists, return None as the checkpoint (not -1)."
    if got_cp is not None and got_cp > version:
        return ("a checkpoint after `version` holds a later state; _last_checkpoint names only the newest checkpoint "
                "of all. Take the newest complete checkpoint N <= version.")
    if got_cp is not None and got_cp in _incomplete_versions(case.path):
        return (f"the checkpoint of version {got_cp} is written in parts and one part is missing: a reader skips "
                "it. Count N.checkpoint.i.n.parquet only when all n parts are there.")
    if got_cp is not None and got_cp not in on_disk:
        return (f"there is no checkpoint file for version {got_cp}: list the checkpoint files in _delta_log, do not "
                "compute N from the interval (a table property that can change, and checkpoints can be written "
                "by hand at any version).")
    if exp_cp is not None and (got_cp is None or got_cp < exp_cp):
        if case.kind == "stale":
            return ("_last_checkpoint is only a hint where to start listing: here it names an older checkpoint "
                    "than the newest on disk. Take the newest complete checkpoint N <= version from the listing.")
        if exp_cp in _multi_part_versions(case.path):
            return ("a checkpoint written in parts (N.checkpoint.0000000001.0000000003.parquet, ...) is a checkpoint "
                    "too: take the newest complete checkpoint N <= version, whatever its number of parts.")
        if got_cp is None:
            return ("a complete checkpoint N <= version exists: start from the newest one instead of replaying every "
                    "commit from 0 (old commits may be deleted).")
        return ("a newer complete checkpoint N <= version exists: take the newest N from the file names in "
                "_delta_log; do not compute N from the interval (a table property that can change).")
    if got_cp == exp_cp and got_cp is not None and got_commits[:1] == [got_cp]:
        return (f"checkpoint {got_cp} already contains commit {got_cp}: read only the commits after it, "
                f"{got_cp + 1} .. version.")
    if any(c > version for c in got_commits):
        return "stop at `version`: commits after it belong to later versions."
    if got_cp == exp_cp and exp_commits and version not in got_commits:
        return "include commit `version` itself: the commits to read are N + 1 .. version, both ends included."
    if exp_cp is None:
        return ("without a complete checkpoint at or before `version`, a reader replays every commit from 0 up to "
                "`version`.")
    return "after checkpoint N a reader needs every commit N + 1 .. version, in order."


def _segment_cases(spark, seed: int) -> tuple[list[_SegmentCase], _Generated]:
    """A table generated from ``seed`` and its copies, each with the versions to ask about."""
    rng = random.Random(seed)
    root = fresh_dir("lab03_segments")
    table = _write_history(spark, str(root / "generated"), rng, data_changes=False)
    everything = list(range(table.latest + 1))
    cases = [_SegmentCase(table.path, "a generated table", everything, table.path, seed=seed)]

    def copy(name: str) -> str:
        target = str(root / name)
        shutil.copytree(table.path, target)
        return target

    first_kept = rng.choice(table.checkpoints)
    cleaned = copy("cleaned_up")
    clean_up_commits(cleaned, before=first_kept)
    cases.append(_SegmentCase(cleaned, f"a copy whose commits before {first_kept} were cleaned up",
                              list(range(first_kept, table.latest + 1)), cleaned, seed=seed))

    if len(table.checkpoints) > 1:
        older = rng.choice(table.checkpoints[:-1])
        stale = copy("stale_last_checkpoint")
        parts = max(_checkpoint_parts(stale)[older])
        pointer = {"version": older, "size": 1, **({"parts": parts} if parts > 1 else {})}
        (Path(stale) / "_delta_log" / "_last_checkpoint").write_text(json.dumps(pointer))
        (Path(stale) / "_delta_log" / "._last_checkpoint.crc").unlink(missing_ok=True)
        cases.append(_SegmentCase(stale, "a copy whose _last_checkpoint names an older checkpoint",
                                  list(range(older, table.latest + 1)), stale, "stale", seed))

    def some(versions: list[int]) -> list[int]:
        """Three of ``versions`` (always the last): a copy's other versions ask nothing new."""
        return sorted({versions[-1], *rng.sample(versions, min(2, len(versions)))})

    none = copy("no_checkpoint")
    for entry in (Path(none) / "_delta_log").iterdir():
        if ".checkpoint." in entry.name or "_last_checkpoint" in entry.name:
            entry.unlink()
    cases.append(_SegmentCase(none, "a copy without checkpoints", some(everything), none, seed=seed))

    if table.multi_part:  # always (the generator writes one checkpoint in parts at least)
        split = rng.choice(table.multi_part)
        partial = copy("part_missing")
        parts = _checkpoint_parts(partial)[split]
        n = max(parts)
        parts[n][1].unlink()  # its last part is still there: "the last part exists" is no test of completeness
        # and the first of two parts at a version without a checkpoint: "part 1 exists" is none either
        bare = [v for v in range(1, table.latest + 1) if v not in _checkpoint_parts(partial)]
        lonely = rng.choice(bare) if bare else split
        if bare:
            lone_part = f"{lonely:020d}.checkpoint.0000000001.0000000002.parquet"
            shutil.copy(parts[n][n], Path(partial, "_delta_log", lone_part))
        # A writer that dies while writing the parts never updates _last_checkpoint: it names the checkpoint before.
        before = [v for v in table.checkpoints if v < split]
        pointer_file = Path(partial) / "_delta_log" / "_last_checkpoint"
        if before:
            parts_before = max(_checkpoint_parts(partial)[before[-1]])
            pointer_file.write_text(json.dumps({"version": before[-1], "size": 1,
                                                **({"parts": parts_before} if parts_before > 1 else {})}))
        else:
            pointer_file.unlink(missing_ok=True)
        (Path(partial) / "_delta_log" / "._last_checkpoint.crc").unlink(missing_ok=True)
        cases.append(_SegmentCase(partial, "a copy with checkpoints in parts that lost a part",
                                  list(range(min(split, lonely), table.latest + 1)), partial, "incomplete", seed))

    sealed = copy("unreadable_by_spark")
    _seal(sealed)
    cases.append(_SegmentCase(sealed, "a copy Spark cannot read (its protocol names a reader feature Spark does "
                              "not know)", some(everything), table.path, "sealed", seed))
    clear_delta_cache(spark)  # the copies reuse the folder names of the previous run's
    answers: dict[tuple[str, int], Segment] = {}
    for case in cases:
        case.answers = answers
    return cases, table


def _expected_segment(spark, cache: dict[tuple[str, int], Segment], path: str, version: int) -> Segment:
    """Delta's log segment of ``path`` at ``version``, kept in ``cache``."""
    if (path, version) not in cache:
        segment = delta_log_segment(spark, path, version)
        start = -1 if segment.checkpoint_version is None else segment.checkpoint_version
        # Delta sometimes lists the checkpoint's own commit too (it replays it again, to no effect):
        # the segment a reader needs starts after the checkpoint.
        cache[(path, version)] = segment.checkpoint_version, [v for v in segment.commit_versions if v > start]
    return cache[(path, version)]


@exercise_check
def check_log_segment(log_segment: Callable[[str, int], Segment]) -> None:
    """Check ``log_segment(table_path, version)`` against Delta's log segment at every version of
    the example table and of a table generated for this run, with its copies."""
    check = "log_segment"
    spark = lab_spark()
    example = _table(spark)
    first_cp = example.checkpoints[0]
    cases = [_SegmentCase(example.full, "the example table", list(range(example.latest + 1)), example.full,
                          answers=example.segments),
             _SegmentCase(example.trimmed, f"a copy of the example table whose commits 0-{first_cp - 1} were "
                          "cleaned up", list(range(first_cp, example.latest + 1)), example.trimmed,
                          answers=example.segments)]
    seed = check_seed()
    generated: _Generated | None = None
    index = 0
    while index < len(cases):
        case = cases[index]
        index += 1
        for version in case.versions:
            expected = _expected_segment(spark, case.answers, case.expected_from, version)
            try:
                answer = _call(check, log_segment, "log_segment", case.path, version,
                               hint="list the files in _delta_log: N.json are commits, N.checkpoint.parquet and "
                                    "N.checkpoint.i.n.parquet checkpoints.", seed=case.seed)
            except CheckFailed as failed:
                if case.kind != "sealed" or "not written yet" in str(failed) or "course's own reader" in str(failed):
                    raise
                raise CheckFailed(
                    check,
                    f"log_segment failed on {case.label}, whose _delta_log holds the same file names as the table "
                    "it was copied from.",
                    "find the segment from the names of the files in _delta_log alone, not through Spark or Delta "
                    "(which refuse such a table).",
                    seed=case.seed,
                ) from None
            got = _as_segment(answer)
            if got is None:
                raise CheckFailed(
                    check,
                    f"log_segment returned {short_repr(answer, limit=60)}; it must return a pair (checkpoint version "
                    "or None, list of commit versions).",
                    "the `return` line of log_segment, e.g. `return 4, [5, 6]` or `return None, [0, 1]`.",
                )
            if got != expected:
                raise CheckFailed(
                    check,
                    f"for version {version} of {case.label}, log_segment returned {_show(got)}, which is not the "
                    "segment Delta reads.",
                    _segment_fix(got, expected, version, case),
                    seed=case.seed,
                )
        if generated is None and index == 2:  # the example passed: now the tables of this run
            more, generated = _segment_cases(spark, seed)
            cases += more
    assert generated is not None
    passed(check, f"matches Delta's log segment at every version of the example table and of a generated table "
                  f"({'partitioned' if generated.partitioned else 'not partitioned'}, checkpoints at "
                  f"{generated.checkpoints}, in parts at {generated.multi_part}) and its copies: "
                  "commits cleaned up, an older _last_checkpoint, no checkpoint, a part missing, a log Spark cannot "
                  "read.")


# --------------------------------------------------------------------------------------------
# Exercise 2: the live files in a checkpoint
# --------------------------------------------------------------------------------------------

def _checkpoint_rows(table_path: str, version: int) -> tuple[list[dict], list[dict]]:
    """The add and the remove rows of the complete checkpoint of ``version`` (all its parts)."""
    import pyarrow.parquet as pq

    sets = _checkpoint_parts(table_path)[version]
    n, parts = next((n, parts) for n, parts in sorted(sets.items()) if sorted(parts) == list(range(1, n + 1)))
    adds: list[dict] = []
    removes: list[dict] = []
    for i in range(1, n + 1):
        table = pq.read_table(parts[i], columns=["add", "remove"])
        adds += [a for a in table.column("add").to_pylist() if a]
        removes += [r for r in table.column("remove").to_pylist() if r]
    return adds, removes


def _as_paths(check: str, answer: Any) -> set[str]:
    """The student's answer as a set of str, or a :class:`CheckFailed` saying what it is instead."""
    if isinstance(answer, (str, bytes)) or not isinstance(answer, Iterable):
        raise CheckFailed(
            check,
            f"checkpoint_active_files returned {type(answer).__name__}; it must return a set of file paths.",
            "the `return` line: a set of the `path` of each add row.",
        )
    answer = list(answer)
    bad = next((p for p in answer if not isinstance(p, str)), None)
    if bad is not None:
        raise CheckFailed(
            check,
            f"checkpoint_active_files returned a collection holding {short_repr(bad, limit=60)}; it must hold file "
            "paths (str).",
            "take the `path` field of each add row (a dict), not the whole row.",
        )
    return set(answer)


@dataclass
class _RowsCase:
    """A table whose checkpoints the check asks about, and what Delta says they hold."""

    path: str  # the folder the student's function reads
    readable: str  # the table Spark reads for the answers (the same, or the one ``path`` was copied from)
    label: str
    versions: list[int]
    on_disk: dict[int, set[str]]  # version -> the files Spark reads, relative to the table, as on disk
    in_log: dict[int, set[str]] = field(default_factory=dict)  # the same files as the log writes their paths
    seed: int | None = None


def _rows_case(spark, path: str, readable: str, label: str, versions: list[int], on_disk: dict[int, set[str]],
               seed: int | None) -> _RowsCase:
    """The answers for every checkpoint of ``readable``: Spark's ``inputFiles()`` at its version,
    and the same files as the log writes them (``unquote`` once gives Spark's path)."""
    case = _RowsCase(path, readable, label, versions, on_disk, seed=seed)
    for version in versions:
        if version not in on_disk:
            on_disk[version] = set(spark_files(spark, readable, version, relative=True))
        adds, _ = _checkpoint_rows(readable, version)
        case.in_log[version] = {add["path"] for add in adds}
        if {unquote(p) for p in case.in_log[version]} != on_disk[version]:
            raise RuntimeError(f"lab03: the add rows of checkpoint {version} of {readable} are not what Spark reads")
    return case


def _files_fix(got: set[str], case: _RowsCase, version: int) -> tuple[str, str]:
    """(what is wrong, where to look) for a wrong set of paths, never naming a path Spark reads."""
    on_disk, in_log = case.on_disk[version], case.in_log[version]
    if got == on_disk:
        return ("the paths are decoded: a partition value such as 10:30 is the folder city=10%3A30, whose name the "
                "log URL-encodes once more", "return add.path exactly as the checkpoint holds it; do not unquote it.")
    if any(p.startswith(("file:", "/")) for p in got):
        return ("the paths are absolute", "return add.path as the log writes it: relative to the table folder.")
    if {p.rsplit("/", 1)[-1] for p in got} == {p.rsplit("/", 1)[-1] for p in in_log}:
        return ("the paths lack their partition folders (city=...)", "return the whole add.path, not the file name.")
    decoded = {unquote(p) for p in got}
    missing, extra = on_disk - decoded, sorted(decoded - on_disk)
    count = f"{len(missing)} file(s) Spark reads at that version are missing" if missing else ""
    count += (" and " if missing and extra else "") + (
        f"{len(extra)} file(s) you returned are not read by Spark (e.g. {short_repr(extra[0], limit=70)})"
        if extra else "")
    adds, removes = _checkpoint_rows(case.readable, version)
    kept_with_dv = {unquote(a["path"]) for a in adds if a.get("deletionVector")}
    tombstones = {unquote(r["path"]) for r in removes}
    if missing and missing <= kept_with_dv & tombstones:
        return (count, "a DELETE with deletion vectors keeps the file: the checkpoint holds remove(A) and add(A, with "
                       "a deletionVector) for the same path. Every add row is live; do not subtract remove paths.")
    if extra and set(extra) <= tombstones:
        return (count, "rows whose `remove` column is set are tombstones (files deleted by a DELETE, UPDATE or "
                       "OPTIMIZE, kept for VACUUM): keep only rows whose `add` is not null.")
    if not got:
        return (count, "the add column: every row where `add` is not null is one live file; take its `path`.")
    other = next((v for v, files in case.in_log.items() if v != version and files == got), None)
    if other is not None:
        which = "the newest one (_last_checkpoint)" if other == case.versions[-1] else f"that of version {other}"
        return (count, f"read the checkpoint of version {version}, the one named by checkpoint_version, not {which}.")
    if missing and version in _multi_part_versions(case.readable):
        return (count, "this checkpoint is written in parts (N.checkpoint.0000000001.0000000003.parquet, ...): read "
                       "the add rows of every part.")
    if extra:
        return (count, "only the add rows of the checkpoint are live; listing the table folder also finds files that "
                       "were removed but not vacuumed.")
    return (count, "every row whose `add` is not null is a live file: read the add column of the checkpoint of "
                   "version N, in all its parts.")


@exercise_check
def check_checkpoint_active_files(checkpoint_active_files: Callable[[str, int], Iterable[str]]) -> None:
    """Check ``checkpoint_active_files(table_path, checkpoint_version)`` against Spark's
    ``inputFiles()`` at that version, for every checkpoint of the example table and of a table
    generated for this run, which the student's function reads through a copy Spark cannot read."""
    check = "checkpoint_active_files"
    spark = lab_spark()
    example = _table(spark)
    hint = ("pyarrow.parquet.read_table(<each checkpoint file of version N>).column('add') has one row per action; "
            "rows of other actions are None there.")
    cases = [_rows_case(spark, example.full, example.full, "the example table", example.checkpoints, example.files,
                        None)]
    generated: _Generated | None = None
    index = 0
    while index < len(cases):
        case = cases[index]
        index += 1
        for version in case.versions:
            try:
                answer = _call(check, checkpoint_active_files, "checkpoint_active_files", case.path, version, hint,
                               case.seed)
            except CheckFailed as failed:
                if case.seed is None or "not written yet" in str(failed) or "course's own reader" in str(failed):
                    raise
                raised = str(failed).splitlines()[0].split(" raised ", 1)[-1]
                if version in _multi_part_versions(case.path) and f"{version:020d}.checkpoint.parquet" in raised:
                    fix = ("this checkpoint is written in parts (N.checkpoint.0000000001.0000000003.parquet, ...), "
                           "not one N.checkpoint.parquet: read the add rows of every part.")
                else:
                    fix = ("read the add rows of the checkpoint's Parquet file(s) alone, with pyarrow: not Spark's "
                           "Delta reader (it refuses this copy), not the JSON commits (cleaned up here).")
                raise CheckFailed(
                    check,
                    f"checkpoint_active_files failed for the checkpoint of version {version} of {case.label}: "
                    f"it raised {raised}",
                    fix,
                    seed=case.seed,
                ) from None
            got = _as_paths(check, answer)
            if got != case.in_log[version]:
                problem, fix = _files_fix(got, case, version)
                raise CheckFailed(check, f"for the checkpoint of version {version} of {case.label}, {problem}.", fix,
                                  seed=case.seed)
        if generated is None:  # the example passed: now the table of this run
            seed = check_seed()
            root = fresh_dir("lab03_checkpoint_rows")
            generated = _write_history(spark, str(root / "generated"), random.Random(seed), data_changes=True)
            sealed = str(root / "unreadable_by_spark")
            shutil.copytree(generated.path, sealed)
            clean_up_commits(sealed, before=generated.checkpoints[-1] + 1)
            _seal(sealed)
            cases.append(_rows_case(spark, sealed, generated.path, "a generated table (read through a copy Spark "
                                    "cannot read, its commits cleaned up)", generated.checkpoints, {}, seed))
    assert generated is not None
    passed(check, f"the add rows of every checkpoint of the example table and of a generated table (checkpoints at "
                  f"{generated.checkpoints}, in parts at {generated.multi_part}, partitioned, with deletion vectors) "
                  "are exactly the files Spark reads at those versions.")
