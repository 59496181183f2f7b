"""Lab 15 (the log at scale): which files of ``_delta_log/`` a reader of one version replays, when the log
has v2 checkpoints with sidecars, checkpoints in parts, several checkpoints of one version and log compaction
files.

:func:`check_checkpoint_files` and :func:`check_log_files` run the student's ``checkpoint_files(table_path,
version)`` (the checkpoint files and sidecars a reader uses) and ``log_files(table_path, version)`` (those and the
commits and compacted files after them) at every version of two tables
generated afresh for the run from :func:`deltalab.labs.tables.check_seed` (:func:`scale_tables`): one with
``delta.checkpointPolicy = 'v2'`` (sidecars; two checkpoints of the newest checkpoint version, one with a JSON
and one with a Parquet top-level file; a sidecar no top-level file names, as a failed checkpoint attempt leaves)
and one with classic checkpoints (a single file and one in parts of the same version, one in three parts or
more), each with compacted ranges written by delta-rs (``compact_logs``) drawn for the run: two of the same start,
one across a checkpoint, one starting at each checkpoint, two overlapping after the newest checkpoint. Then on
copies: a ``_last_checkpoint`` naming the older checkpoint, the commits before the first checkpoint cleaned up,
and the newest checkpoint with a middle part gone. Every seed has every case; only the versions, the sizes and
the names are drawn. The expected answer is Delta's own (:func:`deltalab.jvm.delta_log_files_read`).

The check refuses an answer that calls the course's own readers (:mod:`deltalab.log`, :mod:`deltalab.jvm`,
:mod:`deltalab.files`) or Spark's JVM, returns a file twice or writes in the table folder, and its messages never
show an expected file name: only what the student returned that Delta does not read, and which kind of file is
missing.
"""

from __future__ import annotations

import json
import random
import re
import shutil
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from deltalab.gateway import java_method_call
from deltalab.jvm import clear_delta_cache, delta_log_files_read, write_checkpoint
from deltalab.labs.report import CheckFailed, passed, short_repr
from deltalab.labs.student import call_student, calls_watched, exercise_check, lab_spark
from deltalab.labs.tables import build_once, check_seed, clean_up_commits
from deltalab.session import temporary_conf

__all__ = [
    "CheckFailed",
    "check_checkpoint_files",
    "check_log_files",
    "scale_tables",
]

#: The session setting that sets how many parts (classic) or sidecars (v2) a checkpoint has: ceil(actions / it).
PART_SIZE = "spark.databricks.delta.checkpoint.partSize"

#: The session setting that picks a v2 checkpoint's top-level format (json or parquet).
TOP_LEVEL_FORMAT = "spark.databricks.delta.checkpointV2.topLevelFileFormat"

#: Modules whose functions already answer the exercise: the student's function must not call them.
COURSE_READERS = ("deltalab.log", "deltalab.jvm", "deltalab.files")

_COMPACTED = re.compile(r"^(\d{20})\.(\d{20})\.compacted\.json$")
_COMMIT = re.compile(r"^(\d{20})\.json$")
_SIDECAR = re.compile(r"^\d{20}\.checkpoint\.\d{10}\.\d{10}\.[0-9a-f-]{36}\.parquet$")


@dataclass
class ScaleTable:
    """A table (or a copy of one) the check asks about, and at which versions."""

    path: str
    label: str
    versions: list[int]
    checkpoints: list[int]
    compacted: list[tuple[int, int]]
    kind: str = ""  # "v2", "classic", "stale", "cleaned" or "incomplete": what is unusual about it


def _append(spark: Any, path: str, start: int, files: int) -> None:
    spark.range(start, start + 10 * files, 1, files).write.format("delta").mode("append").save(path)


def _compaction_ranges(rng: random.Random, checkpoints: list[int], latest: int) -> list[tuple[int, int]]:
    """Compacted ranges that each test a rule of Delta's choice: two with the same start before the first
    checkpoint (a reader there can take either; the shorter one's name sorts first), one across the first
    checkpoint, one starting at each checkpoint's own version, and two overlapping ranges of different starts
    after the newest checkpoint, the second ending at the latest version. At least two versions each."""
    first, newest = checkpoints
    start = rng.randrange(1, first - 2)
    short_end = rng.randrange(start + 1, first - 1)
    ranges = {(start, short_end), (start, rng.randrange(short_end + 1, first)),
              (rng.randrange(1, first), rng.randrange(first + 1, newest)),
              (first, rng.randrange(first + 1, newest)),
              (newest, rng.randrange(newest + 1, latest + 1))}
    after = rng.randrange(newest + 1, latest - 1)
    after_end = rng.randrange(max(after + 1, latest - 2), latest)
    ranges |= {(after, after_end), (rng.randrange(after + 1, after_end + 1), latest)}
    return sorted(ranges)


def _checkpoint(spark: Any, path: str, settings: dict[str, str]) -> None:
    with temporary_conf(spark, settings):
        write_checkpoint(spark, path)


def _write_scale_table(spark: Any, path: str, policy: str, rng: random.Random) -> ScaleTable:
    """A table of 14 to 17 small appends with checkpoints at two drawn versions, then compacted ranges written
    by delta-rs.

    v2: one checkpoint at the first version, two at the newest (one with a JSON, one with a Parquet top-level
    file, as two writers checkpointing the same version leave them), each with its own sidecars, and a sidecar
    no top-level file names. Classic: a single-file checkpoint and one in parts at the first version, one in
    at least three parts at the newest. ``partSize`` sets how many sidecars or parts: ceil(actions /
    partSize), the rows spread over them by a hash of the path."""
    from deltalake import DeltaTable

    properties = "'delta.checkpointInterval' = '1000'"  # only the checkpoints the check writes
    if policy == "v2":
        properties += ", 'delta.checkpointPolicy' = 'v2'"
    spark.sql(f"CREATE TABLE delta.`{path}` (id LONG) USING delta TBLPROPERTIES ({properties})")
    latest = rng.randrange(14, 18)
    first = rng.randrange(4, 7)
    checkpoints = [first, rng.randrange(first + 4, latest - 3)]
    formats = rng.sample(["json", "parquet"], 2)
    for version in range(1, latest + 1):
        _append(spark, path, 1000 * version, rng.randrange(1, 4))
        if policy == "v2" and version == first:
            _checkpoint(spark, path, {PART_SIZE: str(rng.randrange(3, 7)), TOP_LEVEL_FORMAT: formats[0]})
        elif policy == "v2" and version == checkpoints[1]:
            for top_level in formats:
                _checkpoint(spark, path, {PART_SIZE: str(rng.randrange(3, 7)), TOP_LEVEL_FORMAT: top_level})
            _leave_orphan_sidecar(path, version, rng)
        elif version == first:
            _checkpoint(spark, path, {})
            _checkpoint(spark, path, {PART_SIZE: str(rng.randrange(3, 7))})
        elif version == checkpoints[1]:
            _checkpoint(spark, path, {PART_SIZE: str(rng.randrange(2, 4))})  # 3 parts or more
    ranges = _compaction_ranges(rng, checkpoints, latest)
    table = DeltaTable(path)
    for start, end in ranges:
        table.compact_logs(start, end)
    clear_delta_cache(spark)
    return ScaleTable(path, f"a generated table with {policy} checkpoints", list(range(latest + 1)), checkpoints,
                      ranges, kind=policy)


def _leave_orphan_sidecar(path: str, version: int, rng: random.Random) -> None:
    """Copy a sidecar of a checkpoint at ``version`` under a new UUID, as a checkpoint attempt that failed
    after writing its sidecars leaves one: no top-level file names it, so no reader reads it."""
    sidecars = sorted((Path(path) / "_delta_log" / "_sidecars").glob(f"{version:020d}.checkpoint.*.parquet"))
    copied = rng.choice(sidecars)
    orphan = re.sub(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
                    str(uuid.UUID(int=rng.getrandbits(128), version=4)), copied.name)
    shutil.copyfile(copied, copied.with_name(orphan))


def _incomplete_copy(table: ScaleTable, path: str, rng: random.Random) -> ScaleTable:
    """A copy of the classic table whose newer checkpoint (in parts) lost one part, as a checkpoint writer that
    failed before writing ``_last_checkpoint`` leaves it (so that still names the older checkpoint): readers use
    the older one. (With ``_last_checkpoint`` naming the incomplete one, Delta 4.4 falls back to a log segment
    without compacted files, a path the exercise does not ask about.)"""
    shutil.copytree(Path(table.path) / "_delta_log", Path(path) / "_delta_log")
    newest = table.checkpoints[1]
    parts = sorted((Path(path) / "_delta_log").glob(f"{newest:020d}.checkpoint.*.*.parquet"))
    rng.choice(parts[1:-1]).unlink()  # neither the first part nor the last: a reader must count them
    _point_last_checkpoint_at(path, table.checkpoints[0])
    return ScaleTable(path, f"a copy of the classic table whose checkpoint {newest} has a part missing",
                      table.versions[newest:], table.checkpoints, table.compacted, kind="incomplete")


def _point_last_checkpoint_at(path: str, version: int) -> None:
    """Make ``_last_checkpoint`` name the checkpoint at ``version`` (without the optional fields)."""
    last = Path(path) / "_delta_log" / "_last_checkpoint"
    last.write_text(json.dumps({"version": version, "size": json.loads(last.read_text()).get("size", 0)}))
    (Path(path) / "_delta_log" / "._last_checkpoint.crc").unlink(missing_ok=True)


def _stale_copy(table: ScaleTable, path: str) -> ScaleTable:
    """A copy whose ``_last_checkpoint`` names the older checkpoint: a reader must still list the log."""
    shutil.copytree(Path(table.path) / "_delta_log", Path(path) / "_delta_log")
    _point_last_checkpoint_at(path, table.checkpoints[0])
    return ScaleTable(path, f"a copy of the {table.kind} table whose _last_checkpoint names the older checkpoint",
                      table.versions, table.checkpoints, table.compacted, kind="stale")


def _cleaned_copy(table: ScaleTable, path: str) -> ScaleTable:
    """A copy whose commits before the first checkpoint were cleaned up (compacted files left there)."""
    shutil.copytree(Path(table.path) / "_delta_log", Path(path) / "_delta_log")
    clean_up_commits(path, table.checkpoints[0])
    return ScaleTable(path, f"a copy of the {table.kind} table whose commits 0-{table.checkpoints[0] - 1} were "
                      "cleaned up", table.versions[table.checkpoints[0]:], table.checkpoints, table.compacted,
                      kind="cleaned")


def _log_intact(tables: list[ScaleTable]) -> bool:
    return all((Path(t.path) / "_delta_log").is_dir() for t in tables)


def scale_tables(spark: Any, seed: int) -> list[ScaleTable]:
    """The tables of ``seed`` (built once per process while intact): the v2 and the classic table, a copy
    of one with an older ``_last_checkpoint``, a copy of the other with its first commits cleaned up, and a
    copy of the classic one whose newer checkpoint lost a part."""
    def build(folder: Path) -> list[ScaleTable]:
        rng = random.Random(seed)
        v2 = _write_scale_table(spark, str(folder / "v2"), "v2", rng)
        classic = _write_scale_table(spark, str(folder / "classic"), "classic", rng)
        stale_from, cleaned_from = rng.sample([v2, classic], 2)
        return [v2, classic, _stale_copy(stale_from, str(folder / "stale")),
                _cleaned_copy(cleaned_from, str(folder / "cleaned")),
                _incomplete_copy(classic, str(folder / "incomplete"), rng)]

    return build_once(f"lab15_scale_{seed}", build, _log_intact)


# --------------------------------------------------------------------------------------------
# The check
# --------------------------------------------------------------------------------------------

def _as_names(answer: Any) -> list[str] | None:
    """The student's answer as names relative to ``_delta_log/``, or None when it is not an iterable of names."""
    if isinstance(answer, (str, bytes)) or not isinstance(answer, Iterable):
        return None
    names = []
    for item in answer:
        if not isinstance(item, (str, Path)):
            return None
        names.append(str(item).replace("\\", "/").split("_delta_log/")[-1])
    return names


def _kind(name: str) -> str:
    if name.startswith("_sidecars/") or _SIDECAR.match(name):
        return "sidecar"
    if _COMPACTED.match(name):
        return "compacted"
    if _COMMIT.match(name):
        return "commit"
    if ".checkpoint." in name:
        return "checkpoint"
    return "other"


def _fix(missing: set[str], extra: set[str], version: int, table: ScaleTable) -> str:
    """What to look at, from the kind of file that is wrong that decides the most (the expected names are not
    shown)."""
    if any(f"_sidecars/{name}" in missing for name in extra):
        return "give each sidecar as '_sidecars/<name>': sidecars live in _delta_log/_sidecars/, not in _delta_log/."
    wrong = {_kind(name) for name in extra | missing}
    # The checkpoint decides the rest: a wrong one makes the commits after it wrong too.
    kind = next(kind for kind in ("checkpoint", "sidecar", "other", "compacted", "commit") if kind in wrong)
    if kind == "other":
        return ("return only files whose actions a reader replays: checkpoint files, sidecars, commits "
                "(N.json) and compacted ranges (A.B.compacted.json); _last_checkpoint is a hint and .crc files "
                "are checksums.")
    if kind == "sidecar":
        return ("a v2 checkpoint's top-level file (N.checkpoint.<uuid>.json or .parquet) lists its sidecars in "
                "`sidecar` actions (their `path`); a reader reads exactly those, from _delta_log/_sidecars/: not a "
                "sidecar of another checkpoint, nor one left by a checkpoint attempt that no top-level file names.")
    if kind == "checkpoint" and table.kind == "incomplete":
        return ("a checkpoint in parts N.checkpoint.i.n.parquet is complete only with all n parts (count them); "
                "a reader skips an incomplete one and takes the newest complete checkpoint before it.")
    if kind == "checkpoint":
        return (f"use the newest complete checkpoint at or before version {version}, found by listing, whatever "
                "_last_checkpoint says: all n parts of N.checkpoint.i.n.parquet, the one N.checkpoint.parquet, or a "
                "v2 top-level file N.checkpoint.<uuid>.<format>. Of several complete ones at that version, a v2 "
                "one beats one in parts, which beats a single file; of two in parts, more parts win; of two v2, "
                "the name that sorts last.")
    if kind == "compacted":
        return ("walk the commit and compacted files after the checkpoint in name order; take a compacted file "
                "A.B.compacted.json only if A is after the last version already covered (the checkpoint's, or "
                f"the last file taken) and B is at most {version}; otherwise it is skipped.")
    return (f"after the checkpoint, every commit up to {version} is read once: from its own N.json, or from "
            "the compacted file taken for its range (then not again from N.json); commits at or before the "
            "checkpoint's version are not read.")


def _difference(missing: set[str], extra: set[str]) -> str:
    parts = []
    if extra:
        parts.append(f"{len(extra)} name(s) Delta does not read (e.g. {sorted(extra)[0]})")
    if missing:
        counts: dict[str, int] = {}
        for name in missing:
            counts[_kind(name)] = counts.get(_kind(name), 0) + 1
        parts.append("missing: " + ", ".join(f"{n} {kind} file(s)" for kind, n in sorted(counts.items())))
    return "; ".join(parts)


def _call(check: str, func: Callable[[str, int], Any], table: ScaleTable, version: int, seed: int) -> Any:
    """``call_student`` with the table folder read-only, and the course's readers and Spark's JVM (where Delta
    answers) off limits: watched around the student's function alone, not the harness's own calls."""
    called: list[str] = []

    def watched(table_path: str, version: int) -> Any:
        # A call of a JVM method, not any py4j code: py4j's finalizers run in whatever thread collects garbage.
        with calls_watched(functions=[java_method_call()], modules=COURSE_READERS) as seen:
            try:
                return func(table_path, version)
            finally:
                called.extend(seen)

    answer = call_student(check, watched if callable(func) else func, check, table.path, version,
                          hint="list _delta_log; read a v2 checkpoint's top-level file with json or "
                               "pyarrow.parquet to find its sidecars.",
                          read_only=[table.path], seed=seed, on=table.label)
    if called:
        reader = called[0]
        problem = (f"{check} asked Delta, in Spark's JVM, for the answer (a call through spark._jvm)"
                   if reader.startswith("py4j") else
                   f"{check} called {reader}, the course's own reader, which already answers this exercise")
        raise CheckFailed(
            check,
            f"{problem}.",
            "write it yourself from the names in _delta_log and the top-level checkpoint file's `sidecar` "
            "actions (Path.iterdir, json, pyarrow.parquet); the check compares your answer with Delta.",
            seed=seed,
        )
    return answer


def _compare(check: str, func: Callable[[str, int], Any], chosen: Callable[[str], bool]) -> list[ScaleTable]:
    """Run the student's ``check(table_path, version)`` (``func``) at every version of the run's
    tables and compare its names with the files Delta replays that ``chosen`` keeps."""
    spark = lab_spark()
    seed = check_seed()
    tables = scale_tables(spark, seed)
    for table in tables:
        for version in table.versions:
            expected = {file for file in delta_log_files_read(spark, table.path, version) if chosen(file)}
            answer = _call(check, func, table, version, seed)
            names = _as_names(answer)
            if names is None:
                raise CheckFailed(
                    check,
                    f"{check} returned {short_repr(answer, limit=60)}; it must return file names relative to "
                    "_delta_log/ (a list or set of str), e.g. ['00000000000000000003.json'].",
                    f"the `return` line of {check}; give sidecars as '_sidecars/<name>'.",
                    seed=seed,
                )
            twice = sorted({file for file in names if names.count(file) > 1})
            if twice:
                raise CheckFailed(
                    check,
                    f"for version {version} of {table.label}, {check} returned {twice[0]} more than once.",
                    "a reader reads each file once: return each name once (a set does that).",
                    seed=seed,
                )
            got = set(names)
            if got != expected:
                missing, extra = expected - got, got - expected
                raise CheckFailed(
                    check,
                    f"for version {version} of {table.label}, {check} returned {len(got)} name(s): "
                    f"{_difference(missing, extra)}.",
                    _fix(missing, extra, version, table),
                    seed=seed,
                )
    return tables


def _tables_checked(tables: list[ScaleTable]) -> str:
    v2, classic = tables[0], tables[1]
    return (f"at every version of a v2 table (checkpoints at {v2.checkpoints}, compacted ranges {v2.compacted}), a "
            f"classic one (checkpoints at {classic.checkpoints}, compacted {classic.compacted}), a copy with an older "
            "_last_checkpoint, one with its first commits cleaned up and one with a checkpoint part missing.")


@exercise_check
def check_checkpoint_files(checkpoint_files: Callable[[str, int], Iterable[str]]) -> None:
    """Check ``checkpoint_files(table_path, version)`` against the checkpoint files and sidecars Delta reads, at
    every version of the tables generated for this run and of their copies."""
    tables = _compare("checkpoint_files", checkpoint_files, lambda name: _kind(name) in ("checkpoint", "sidecar"))
    passed("checkpoint_files", "matches the checkpoint files and sidecars Delta reads " + _tables_checked(tables))


@exercise_check
def check_log_files(log_files: Callable[[str, int], Iterable[str]]) -> None:
    """Check ``log_files(table_path, version)`` against the files Delta replays, at every version of the
    tables generated for this run and of their copies."""
    tables = _compare("log_files", log_files, lambda name: True)
    passed("log_files", "matches the files Delta replays " + _tables_checked(tables))
