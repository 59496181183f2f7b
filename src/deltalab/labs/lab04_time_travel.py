"""Lab 04 (time travel and VACUUM): which version a time resolves to, and which files VACUUM deletes, from the log alone.

``check_version_as_of`` runs the learner's ``version_as_of(table_path, timestamp_ms)`` on three
tables, one commit of one row per version (``v`` = the version), and compares each answer with the
version Delta's time travel resolves that time to (:func:`deltalab.jvm.version_at_time`, the call
``timestampAsOf`` makes; ``None`` where Delta refuses the time). The test suite checks, once, that
Spark's ``timestampAsOf`` reads those versions.

* the example table (built once per process): commit files' modification times set an hour
  apart or less, two of them equal, so that Delta's rule for times that do not increase shows;
* a table generated for the run: 4 to 6 commits at random gaps, some commit files older than the
  one before them, a checkpoint every 2 or 3 commits and, drawn, the commits before one of them
  cleaned up (the earliest time Delta accepts is then that checkpoint's commit);
* a table generated for the run with in-commit timestamps (``delta.enableInCommitTimestamps``):
  each commit's time is in its ``commitInfo``; the check then sets the commit files' modification
  times in reverse order, so an answer that reads them is wrong.

The times asked: every commit's timestamp, a time between each pair of commits, 1 ms before the
earliest, 1 ms after the latest. Without in-commit timestamps a commit's time is its file's
modification time, raised to 1 ms after the commit before it where it is not later
(``DeltaHistoryManager.monotonizeCommitTimestamps``, Delta 4.4.0).

``check_vacuum_deletes`` runs the learner's ``vacuum_deletes(table_path, retain_hours)`` on two copies of
the example table (``delta.deletedFileRetentionDuration = 'interval 2 days'``, one asked with RETAIN 12
HOURS, one with RETAIN 0 HOURS, so an answer that ignores RETAIN altogether fails at every seed) and on a generated one (partitioned by values the log must URL-encode, deletion vectors
drawn, the retention property and RETAIN drawn, RETAIN 0 among them) whose removed files, their
``remove`` actions' ``deletionTimestamp`` and files no commit added were aged by the check: some
older than the retention, some younger, one between RETAIN and the retention, none within half an
hour of either. It compares with Delta's ``VACUUM ... RETAIN n HOURS DRY RUN``. Delta 4.4 ignores a
RETAIN other than 0 (``spark.databricks.delta.vacuum.retentionWindowIgnore.enabled``, on by default,
``VacuumCommand.scala``): the retention is the table's ``delta.deletedFileRetentionDuration``. Both
checks refuse an answer that runs Spark or calls the course's own log readers: the exercise is the
log and the folder.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator
from urllib.parse import unquote

from deltalab.jvm import clear_delta_cache, version_at_time
from deltalab.labs.report import CheckFailed, passed, short_repr
from deltalab.labs.student import (call_student, calls_watched, course_log_readers, exercise_check, lab_spark,
                                   spark_jobs_started)
from deltalab.labs.tables import build_once, check_seed, clean_up_commits, fresh_dir, random_history
from deltalab.locations import hadoop_path
from deltalab.log import checkpoint_versions, commit_info, commit_versions, deletion_vector_file, replay_log
from deltalab.session import temporary_conf

__all__ = ["CheckFailed", "check_vacuum_deletes", "check_version_as_of"]

HOUR_MS = 3_600_000


def _now_ms() -> int:
    return int(time.time() * 1000)


def _shown(ms: int) -> str:
    """A time as a message shows it: UTC to the millisecond."""
    return datetime.fromtimestamp(ms / 1000, timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + " UTC"


def _set_mtime(path: Path, ms: int) -> None:
    """Give the file at ``path`` the modification time ``ms`` (milliseconds since the epoch)."""
    os.utime(path, ns=(ms * 1_000_000, ms * 1_000_000))


def _set_commit_time(path: str, version: int, ms: int) -> None:
    """Give commit ``version``'s file the modification time ``ms``."""
    _set_mtime(Path(path) / "_delta_log" / f"{version:020d}.json", ms)


def _call(check: str, func: Callable[..., Any], name: str, table: str, *args: Any, what: str, hint: str,
          seed: int | None) -> Any:
    """Call the learner's function on ``table`` (read-only), refusing an answer that ran Spark or
    called the course's own readers."""
    jobs = spark_jobs_started()
    with calls_watched(course_log_readers()) as used:
        answer = call_student(check, func, name, table, *args, hint=hint, read_only=[table], seed=seed,
                              on=None if seed is None else what)
    if used:
        raise CheckFailed(check, f"{name} called {used[0]}, which reads the log for you; the exercise is to read it yourself.",
                          "list and open the files in _delta_log/ (Path.iterdir, Path.stat, json.loads).", seed=seed)
    if spark_jobs_started() > jobs:
        raise CheckFailed(check, f"{name} ran Spark jobs; the exercise is to answer from the log and the folder alone.",
                          "read _delta_log/ and the table folder with Python (Path, json), without spark.", seed=seed)
    return answer


# ------------------------------------------------------------------------------------ version_as_of


@dataclass
class _TimeTable:
    """A table whose versions ``version_as_of`` is asked about, with the questions and Delta's answers."""

    path: str
    what: str
    answers: dict[int, int | None]          # time (ms) -> the version Spark reads then, None where Delta refuses
    seed: int | None = None
    file_times: list[int] = field(default_factory=list)      # commit files' modification times, by version
    info_times: list[int] = field(default_factory=list)      # commitInfo.timestamp, by version
    in_commit: list[int] = field(default_factory=list)       # commitInfo.inCommitTimestamp, by version (ICT tables)
    first: int = 0                                            # the earliest version still in the log


def _commit_rows(spark: Any, path: str, versions: int, properties: str = "") -> None:
    """A table of ``v BIGINT``: version 0 creates it, each later version appends the row ``v``."""
    spark.sql(f"CREATE TABLE delta.`{path}` (v BIGINT) USING delta {properties}")
    for version in range(1, versions):
        spark.sql(f"INSERT INTO delta.`{path}` VALUES ({version})")


def _questions(times: list[int], first: int, rng: random.Random | None) -> list[int]:
    """Every commit's time from ``first`` on, a time between each pair, 1 ms before the first, 1 ms after the last."""
    kept = times[first:]
    between = [a + (b - a) // 2 if rng is None else rng.randint(a, b - 1) for a, b in zip(kept, kept[1:]) if b - a > 1]
    return sorted({*kept, *between, kept[0] - 1, kept[-1] + 1})


def _monotonized(file_times: list[int], first: int) -> list[int]:
    """Delta's commit times without in-commit timestamps: each at least 1 ms after the one before."""
    times = list(file_times)
    for version in range(first + 1, len(times)):
        times[version] = max(times[version], times[version - 1] + 1)
    return times


def _time_table(spark: Any, path: str, what: str, file_times: list[int] | None, first: int = 0,
                seed: int | None = None, rng: random.Random | None = None, ict: bool = False) -> _TimeTable:
    """Delta's answers for a table written as :func:`_commit_rows` writes it."""
    versions = commit_versions(path)
    infos = [commit_info(path, v) for v in versions]
    if file_times is not None:
        for version, ms in zip(versions, file_times[first:]):
            _set_commit_time(path, version, ms)
    table = _TimeTable(path, what, {}, seed, first=first)
    table.file_times = [0] * first + [(Path(path) / "_delta_log" / f"{v:020d}.json").stat().st_mtime_ns // 1_000_000
                                      for v in versions]
    table.info_times = [0] * first + [int(info["timestamp"]) for info in infos]
    if ict:
        table.in_commit = [int(info["inCommitTimestamp"]) for info in infos]
        times = table.in_commit
    else:
        times = _monotonized(table.file_times, first)
    table.answers = {ms: version_at_time(spark, path, ms) for ms in _questions(times, first, rng)}
    return table


def _example_times(spark: Any) -> _TimeTable:
    def build(folder: Path) -> dict[str, Any]:
        path = str(folder / "visits")
        _commit_rows(spark, path, 6)
        start = _now_ms() - 6 * HOUR_MS
        minutes = [0, 10, 25, 25, 70, 71]          # versions 2 and 3 share a time: Delta moves 3 to 1 ms later
        table = _time_table(spark, path, "the example table", [start + m * 60_000 for m in minutes])
        return {"path": path, "answers": list(table.answers.items()), "file_times": table.file_times,
                "info_times": table.info_times}

    def intact(value: dict[str, Any]) -> bool:
        log = Path(value["path"]) / "_delta_log"
        return all((log / f"{v:020d}.json").is_file() and (log / f"{v:020d}.json").stat().st_mtime_ns // 1_000_000 == ms
                   for v, ms in enumerate(value["file_times"]))

    value = build_once("lab04_version_as_of", build, intact, saved=True)
    return _TimeTable(value["path"], "the example table", {int(ms): v for ms, v in value["answers"]},
                      file_times=value["file_times"], info_times=value["info_times"])


def _generated_times(spark: Any, seed: int) -> Iterator[_TimeTable]:
    rng = random.Random(seed)
    folder = fresh_dir("lab04_version_as_of_generated")
    path = str(folder / "events")
    versions = rng.randint(4, 6)
    _commit_rows(spark, path, versions, f"TBLPROPERTIES ('delta.checkpointInterval' = '{rng.choice([2, 3])}')")
    first = 0
    if rng.random() < 0.5 and checkpoint_versions(path):
        first = rng.choice(checkpoint_versions(path))
        clean_up_commits(path, before=first)
    times, now = [], _now_ms() - 20 * HOUR_MS
    for version in range(versions):
        if version > first and rng.random() < 0.3:
            now = times[-1] - rng.randint(1, 30) * 60_000     # older than the commit before it
        else:
            now += rng.randint(1, 120) * 60_000
        times.append(now)
    what = "a generated table (" + (f"its commits before version {first} cleaned up, " if first else "") + \
           "some commit files older than the one before them)"
    yield _time_table(spark, path, what, times, first, seed, rng)

    ict_path = str(folder / "with_in_commit_timestamps")
    _commit_rows(spark, ict_path, rng.randint(3, 4), "TBLPROPERTIES ('delta.enableInCommitTimestamps' = 'true')")
    count = len(commit_versions(ict_path))
    reversed_times = [_now_ms() - (count - v) * rng.randint(1, 5) * 60_000 for v in range(count)][::-1]
    yield _time_table(spark, ict_path, "a generated table with in-commit timestamps (delta.enableInCommitTimestamps)",
                      reversed_times, 0, seed, rng, ict=True)


def _latest_at(times: list[int], first: int, ms: int) -> int | None:
    """The last version from ``first`` on whose time is <= ``ms`` (None if none, or if ``ms`` is after the last)."""
    if ms > times[-1]:
        return None
    found = [v for v in range(first, len(times)) if times[v] <= ms]
    return found[-1] if found else None


def _version_fix(table: _TimeTable, ms: int, answer: int | None, expected: int | None) -> str:
    """Where to look, for a version that is not the one Delta reads at ``ms``: first the known wrong
    rules the answer follows, then what kind of time it was."""
    def by(times: list[int]) -> int | None:
        return _latest_at(times, table.first, ms)

    file_rule = by(_monotonized(table.file_times, table.first))
    if table.in_commit and answer == file_rule:
        return ("this table has in-commit timestamps: a commit's time is commitInfo.inCommitTimestamp (the "
                "commitInfo action comes first in its commit), not its file's modification time.")
    if not table.in_commit and answer == by(table.info_times) and answer != by(table.file_times):
        return ("a version's time is its commit file's modification time (Path.stat().st_mtime_ns // 1_000_000), "
                "not commitInfo.timestamp: the log is what Delta lists, and it reads the files' times.")
    if not table.in_commit and answer == by(table.file_times):
        return ("a commit file can be older than, or as old as, the one before it (a clock, a copy); Delta then takes "
                "its time as 1 ms after the previous commit's (DeltaHistoryManager.monotonizeCommitTimestamps): "
                "apply that rule in version order before searching.")
    if expected is None:
        if ms == max(table.answers):             # the question 1 ms after the latest commit
            return ("a time after the latest commit is refused by TIMESTAMP AS OF (the table may still change at that "
                    "time): return None, not the latest version.")
        return ("a time before the earliest commit still in the log is refused (DELTA_TIMESTAMP_EARLIER_THAN_COMMIT_"
                "RETENTION): return None; with old commits cleaned up, the earliest is the oldest commit left.")
    if answer is None:
        return "Delta reads a version at this time: the latest commit whose time is at or before it."
    if table.in_commit:
        return "with in-commit timestamps, take each commit's time from commitInfo.inCommitTimestamp."
    if answer > expected:
        return "the version at a time is the latest commit at or before it, not the first commit after it."
    return "find the latest commit whose time (file modification time, in ms) is at or before the time asked."


@exercise_check
def check_version_as_of(version_as_of: Callable[[str, int], int | None]) -> None:
    """Check ``version_as_of(table_path, timestamp_ms)`` against the version Spark reads with
    ``timestampAsOf`` (see the module's docstring)."""
    check = "version_as_of"
    spark = lab_spark()
    hint = "read the names and modification times of the N.json files in _delta_log/ (and each commit's commitInfo)."

    def tables() -> Iterator[_TimeTable]:
        yield _example_times(spark)
        yield from _generated_times(spark, check_seed())

    for table in tables():
        for ms, expected in sorted(table.answers.items()):
            answer = _call(check, version_as_of, "version_as_of", table.path, ms, what=table.what, hint=hint,
                           seed=table.seed)
            if answer is not None and (isinstance(answer, bool) or not isinstance(answer, int)):
                raise CheckFailed(check, f"version_as_of returned {short_repr(answer)} ({type(answer).__name__}); "
                                         "it must return an int, or None where Delta refuses the time.",
                                  "the `return` lines of version_as_of.", seed=table.seed)
            if answer != expected:
                got = "None" if answer is None else f"version {answer}"
                problem = f"on {table.what}, at {_shown(ms)} version_as_of returned {got}, which is not what Delta reads then"
                if expected is not None and answer is not None:
                    problem += f" (Delta's version is {'lower' if answer > expected else 'higher'})"
                raise CheckFailed(check, problem + ".", _version_fix(table, ms, answer, expected), seed=table.seed)
    passed(check, "matches the version Spark reads with timestampAsOf at every commit, between commits, before the "
                  "first and after the last: file times that go backwards, cleaned-up commits, in-commit timestamps.")


# ----------------------------------------------------------------------------------- vacuum_deletes


@dataclass
class _VacuumTable:
    """A table ``vacuum_deletes`` is asked about, with VACUUM DRY RUN's answer and the file kinds messages name."""

    path: str
    what: str
    retain_hours: int
    deletes: set[str]                  # relative paths on disk, from VACUUM DRY RUN
    naive: set[str]                    # what the rule gives with retain_hours taken at its word
    by_table_retention: set[str]       # what the rule gives with RETAIN ignored, even when it is 0
    live: set[str]                     # files of the latest version (data and deletion vector files)
    kept_tombstones: set[str]          # removed less than the retention ago
    young: set[str]                    # modified less than the retention ago
    hidden: set[str]                   # under names starting with _ or .
    seed: int | None = None


def _relative(root: Path, location: str) -> str:
    """A path VACUUM DRY RUN returns (``file:/...``), relative to the table folder, as on disk."""
    return Path(hadoop_path(location)).resolve().relative_to(root.resolve()).as_posix()


_UNIT_HOURS = {"week": 168, "weeks": 168, "day": 24, "days": 24, "hour": 1, "hours": 1}


def _log_state(table_path: str) -> tuple[dict, dict, dict[str, str]]:
    """(live adds, removes, the latest metaData's configuration) from the JSON commits, keyed by
    (path, deletion vector id): the lab's VACUUM tables have no checkpoints."""
    live: dict[tuple, dict] = {}
    removed: dict[tuple, dict] = {}
    configuration: dict[str, str] = {}
    for commit in sorted((Path(table_path) / "_delta_log").glob("*.json")):
        if not (commit.name[:20].isdigit() and len(commit.name) == 25):
            continue
        for line in commit.read_text().splitlines():
            action = json.loads(line)
            if "metaData" in action:
                configuration = action["metaData"].get("configuration") or {}
            for kind in ("add", "remove"):
                if kind in action:
                    body = action[kind]
                    dv = body.get("deletionVector")
                    key = (body["path"], (dv["storageType"], dv["pathOrInlineDv"], dv.get("offset")) if dv else None)
                    (live if kind == "add" else removed)[key] = body
                    (removed if kind == "add" else live).pop(key, None)
    return live, removed, configuration


def table_retention_hours(table_path: str) -> float:
    """The table's ``delta.deletedFileRetentionDuration`` in hours (``interval 2 days``: 48), one week unless set."""
    value = _log_state(table_path)[2].get("delta.deletedFileRetentionDuration")
    if value is None:
        return 168.0
    words = value.lower().split()
    if words and words[0] == "interval":
        words = words[1:]
    return sum(float(number) * _UNIT_HOURS[unit] for number, unit in zip(words[::2], words[1::2]))


def reference_deletes(table_path: str, retain_hours: float, now_ms: int | None = None,
                      honour_retain: bool = False) -> set[str]:
    """The files VACUUM RETAIN ``retain_hours`` HOURS deletes, by the rule the lab teaches (Delta 4.4's
    ``VacuumCommand``), from the log and the folder; with ``honour_retain`` the RETAIN clause is
    taken at its word, as Delta did before ``vacuum.retentionWindowIgnore.enabled``."""
    root = Path(table_path)
    hours = retain_hours if honour_retain or retain_hours == 0 else table_retention_hours(table_path)
    threshold = (now_ms if now_ms is not None else _now_ms()) - int(hours * HOUR_MS)
    live, removed, _ = _log_state(table_path)
    keep = {unquote(a["path"]) for a in live.values()} | {deletion_vector_file(a.get("deletionVector")) for a in live.values()}
    for remove in removed.values():
        if remove.get("deletionTimestamp", 0) >= threshold:
            keep |= {unquote(remove["path"]), deletion_vector_file(remove.get("deletionVector"))}
    deletes = set()
    for file in root.rglob("*"):
        relative = file.relative_to(root).as_posix()
        if file.is_dir() or any(part.startswith(("_", ".")) for part in relative.split("/")):
            continue
        if relative not in keep and file.stat().st_mtime_ns // 1_000_000 < threshold:
            deletes.add(relative)
    return deletes


def _age_tombstones(path: str, older: set[str], ms: int) -> None:
    """Rewrite the commits so that the ``remove`` of each log path in ``older`` has ``deletionTimestamp`` ``ms``."""
    for commit in sorted((Path(path) / "_delta_log").glob("*.json")):
        lines = commit.read_text().splitlines()
        changed = False
        for index, line in enumerate(lines):
            action = json.loads(line)
            if "remove" in action and action["remove"]["path"] in older:
                action["remove"]["deletionTimestamp"] = ms
                lines[index] = json.dumps(action)
                changed = True
        if changed:
            stat = commit.stat()
            commit.write_text("".join(line + "\n" for line in lines))
            os.utime(commit, ns=(stat.st_atime_ns, stat.st_mtime_ns))
            (commit.parent / f".{commit.name}.crc").unlink(missing_ok=True)   # Hadoop's checksum of the old bytes
    clear_delta_cache()


def _vacuum_table(spark: Any, path: str, what: str, rng: random.Random, retain_hours: int, seed: int | None) -> _VacuumTable:
    """Age the files of the table at ``path`` (see the module's docstring) and ask VACUUM DRY RUN what it deletes.

    Every time set here is at least half an hour away from the two thresholds a learner may use
    (the table's retention, and ``retain_hours`` taken at its word), so the seconds between the
    DRY RUN and the learner's call cannot change an answer."""
    root = Path(path)
    now, margin = _now_ms(), HOUR_MS // 2
    effective = 0 if retain_hours == 0 else table_retention_hours(path)
    threshold = now - int(effective * HOUR_MS)
    naive_threshold = now - retain_hours * HOUR_MS
    state = replay_log(path)
    live = {unquote(p) for p, _ in state.files} | {f for a in state.files.values() if (f := deletion_vector_file(a.get("deletionVector")))}
    removed: dict[str, Any] = {}
    for (log_path, _), remove in state.tombstones.items():
        removed.setdefault(log_path, remove)

    def old_time() -> int:
        return min(threshold, naive_threshold) - margin - rng.randint(0, 48) * HOUR_MS

    def young_time() -> int | None:
        """A time younger than the retention, away from both thresholds (None if there is no room)."""
        low, high = threshold + margin, now - margin
        for _ in range(20):
            when = rng.randint(low, high) if high > low else None
            if when is not None and abs(when - naive_threshold) > margin:
                return when
        return None

    old_removes = {p for p in removed if unquote(p) not in live and rng.random() < 0.6}
    _age_tombstones(path, old_removes, old_time())
    files = sorted(state.files)
    some_file = root / unquote(files[0][0]) if files else None
    if some_file is not None:                   # files no commit added, and files under hidden names
        for name in ("part-orphan-old.snappy.parquet", "part-orphan-young.snappy.parquet", "part-orphan-between.snappy.parquet"):
            shutil.copyfile(some_file, some_file.parent / name)
        (root / "_staging").mkdir(exist_ok=True)
        shutil.copyfile(some_file, root / "_staging" / "part-hidden.snappy.parquet")
        shutil.copyfile(some_file, root / ".part-dotted.snappy.parquet")
    young, hidden = set(), set()
    for file in sorted(root.rglob("*")):
        relative = file.relative_to(root).as_posix()
        if file.is_dir() or relative.startswith("_delta_log/"):
            continue
        if any(part.startswith(("_", ".")) for part in relative.split("/")):
            hidden.add(relative)
        if relative in live:
            continue
        when = old_time()
        if file.name == "part-orphan-between.snappy.parquet":       # between retain_hours and the table's retention
            low, high = sorted((threshold, naive_threshold))
            when = rng.randint(low + margin, high - margin) if high - low > 2 * margin else old_time()
        elif file.name == "part-orphan-young.snappy.parquet" or (file.name != "part-orphan-old.snappy.parquet" and rng.random() < 0.3):
            when = young_time() or when
        _set_mtime(file, when)
        if when > threshold:
            young.add(relative)
    kept_tombstones = {unquote(p) for p in removed if p not in old_removes} - live
    clear_delta_cache(spark)
    with temporary_conf(spark, {"spark.databricks.delta.retentionDurationCheck.enabled": "false"}):
        rows = spark.sql(f"VACUUM delta.`{path}` RETAIN {retain_hours} HOURS DRY RUN").collect()
    deletes = {_relative(root, row[0]) for row in rows}
    naive = reference_deletes(path, retain_hours, now, honour_retain=True)
    by_table_retention = reference_deletes(path, table_retention_hours(path), now, honour_retain=True)
    return _VacuumTable(path, what, retain_hours, deletes, naive, by_table_retention, live, kept_tombstones, young,
                        hidden, seed)


def _example_vacuum(spark: Any, retain_hours: int = 12) -> _VacuumTable:
    """A copy of the example table (its history written once per process), aged afresh: its ages are relative to now.
    Asked with RETAIN 12 HOURS (ignored: the table's two days decide) and with RETAIN 0 HOURS (which overrides them)."""
    def build(folder: Path) -> str:
        path = str(folder / "orders")
        spark.sql(f"CREATE TABLE delta.`{path}` (id BIGINT, status STRING) USING delta "
                  "TBLPROPERTIES ('delta.enableDeletionVectors' = 'true', 'delta.checkpointInterval' = '100', "
                  "'delta.deletedFileRetentionDuration' = 'interval 2 days')")
        spark.range(0, 30, 1, 3).selectExpr("id", "'new' AS status").write.format("delta").mode("append").save(path)
        spark.range(0, 20, 1, 2).selectExpr("id", "'new' AS status").write.format("delta").mode("overwrite").save(path)
        spark.sql(f"DELETE FROM delta.`{path}` WHERE id % 4 = 0")
        return path

    written = build_once("lab04_vacuum_history", build, intact=lambda path: (Path(path) / "_delta_log" / f"{3:020d}.json").is_file())
    path = str(fresh_dir(f"lab04_vacuum_example_{retain_hours}") / "orders")
    shutil.copytree(written, path)
    return _vacuum_table(spark, path, "the example table (delta.deletedFileRetentionDuration = 'interval 2 days')",
                         random.Random(4 + retain_hours), retain_hours, None)


def _generated_vacuum(spark: Any, seed: int) -> _VacuumTable:
    choices = random.Random(seed + 1)       # the retention and RETAIN, drawn apart from the table's history
    retention = choices.choice([None, "interval 30 hours", "interval 3 days"])
    retain_hours = choices.choice([0, 6, 24, 100])
    rng = random.Random(seed)
    path = str(fresh_dir("lab04_vacuum_generated") / "history")
    random_history(spark, path, rng, commits=rng.randint(4, 7), partitioned=True, checkpoint_interval=100)
    spark.sql(f"OPTIMIZE delta.`{path}`")
    if retention:
        spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.deletedFileRetentionDuration' = '{retention}')")
    what = ("a generated table (partitioned, some files removed long ago, some lately, "
            + (f"delta.deletedFileRetentionDuration = '{retention}')" if retention else "no retention property)"))
    return _vacuum_table(spark, path, what, rng, retain_hours, seed)


def _vacuum_fix(table: _VacuumTable, got: set[str]) -> str:
    missing, extra = table.deletes - got, got - table.deletes
    if got == table.naive and table.retain_hours != 0:
        return ("Delta 4.4 ignores a RETAIN other than 0 HOURS (vacuum.retentionWindowIgnore.enabled, on by default): "
                "the retention is the table's delta.deletedFileRetentionDuration (metaData.configuration; one week "
                "unless set); only RETAIN 0 HOURS overrides it.")
    if table.retain_hours == 0 and got == table.by_table_retention and got != table.deletes:
        return ("RETAIN 0 HOURS is the one RETAIN Delta 4.4 obeys: it overrides the table's retention, so every file "
                "the latest version does not use is old enough, however recently it was removed or written.")
    if extra and {unquote(p) for p in got} == table.deletes:
        return "paths on disk are not URL-encoded: decode the log's paths once with urllib.parse.unquote."
    if extra and all(p.startswith("/") for p in got):
        return "return paths relative to the table folder, not absolute ones."
    if extra & table.live:
        return "the files of the latest version (and their deletion vector files) are never deleted."
    if extra & table.hidden:
        return "names starting with _ or . (at any level: _delta_log, temporary folders, hidden files) are not the table's data."
    if extra & table.kept_tombstones:
        return ("a file removed less than the retention ago (its remove's deletionTimestamp) is kept: versions within "
                "the retention may still read it.")
    if extra & table.young:
        return ("VACUUM deletes only files last modified before now minus the retention (Path.stat().st_mtime): "
                "a young file may belong to a write that has not committed yet.")
    if missing and any("orphan" in p for p in missing):
        return ("files that no commit ever added are deleted too, once old enough: list the table folder, not only "
                "the log's removed files.")
    if missing:
        return ("every file in the folder (outside hidden names) that the latest version does not use and that no "
                "remove within the retention protects is deleted once its modification time is older than the retention.")
    return "compare the folder's files with the log's add and remove actions."


@exercise_check
def check_vacuum_deletes(vacuum_deletes: Callable[[str, float], Iterable[str]]) -> None:
    """Check ``vacuum_deletes(table_path, retain_hours)`` against Delta's ``VACUUM ... RETAIN n HOURS DRY RUN``."""
    check = "vacuum_deletes"
    spark = lab_spark()
    hint = "list the table folder (Path.rglob), replay the log's add and remove actions, compare times with time.time()."

    def tables() -> Iterator[_VacuumTable]:
        yield _example_vacuum(spark, 12)
        yield _example_vacuum(spark, 0)
        yield _generated_vacuum(spark, check_seed())

    for table in tables():
        answer = _call(check, vacuum_deletes, "vacuum_deletes", table.path, table.retain_hours, what=table.what,
                       hint=hint, seed=table.seed)
        if isinstance(answer, (str, bytes)) or not isinstance(answer, Iterable):
            raise CheckFailed(check, f"vacuum_deletes returned {type(answer).__name__}; it must return a set of paths.",
                              "the `return` line of vacuum_deletes: a set of paths relative to the table folder.",
                              seed=table.seed)
        got = {str(p) for p in answer}
        if got == table.deletes:
            continue
        missing, extra = table.deletes - got, got - table.deletes
        parts = []
        if missing:
            parts.append(f"{len(missing)} of the files VACUUM deletes are missing")
        if extra:
            first = sorted(extra)[0]
            parts.append(f"{len(extra)} of the paths returned are files VACUUM keeps or does not know (e.g. {first[-90:]!r})")
        raise CheckFailed(check, f"on {table.what} with RETAIN {table.retain_hours} HOURS, " + " and ".join(parts) + ".",
                          _vacuum_fix(table, got), seed=table.seed)
    passed(check, "matches VACUUM DRY RUN: the table's retention (RETAIN only when 0), removed files old and recent, "
                  "files no commit added, hidden names, deletion vector files, URL-encoded partition folders.")
