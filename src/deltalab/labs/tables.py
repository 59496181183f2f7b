"""The tables a lab check builds: a fresh folder, built once per process, and generated afresh for
each run so that an answer fitted to one table fails on the next.

Spark is the ground truth: checks compare with ``inputFiles()``, ``DESCRIBE HISTORY``, Delta's own
log segments and real conflicts, never with an answer typed into the check. Beside the lab's example
table a check runs the learner's function on tables :func:`check_seed` seeds (:func:`random_history`:
sizes, partition values that need URL-encoding, checkpoints or none, deletion vectors).
"""

from __future__ import annotations

import json
import os
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, TypeVar

from deltalab.errors import DeltaLabError
from deltalab.jvm import clear_delta_cache
from deltalab.publish import write_atomically
from deltalab.workdir import workdir

__all__ = ["AWKWARD_VALUES", "SEED_ENV", "History", "append_events", "build_once", "check_seed", "clean_up_commits",
           "create_history_table", "fresh_dir", "random_history"]


def fresh_dir(name: str) -> Path:
    """An empty directory for one check's tables (under the course work root)."""
    return workdir(f"labs_checks_{name}")


Built = TypeVar("Built")


#: What :func:`build_once` built in this process: name -> value.
_BUILT: dict[str, Any] = {}


_SAVED_AS = "built.json"


def build_once(name: str, build: Callable[[Path], Built], intact: Callable[[Built], bool] = lambda value: True,
               saved: bool = False) -> Built:
    """What ``build(folder)`` returned, built the first time this process asks for ``name`` and
    reused while ``intact(value)`` holds.

    A lab's checks only read the tables they build, so a student who runs a check cell ten times
    builds them once; a check that finds them changed (``intact`` false: an answer deleted a file)
    builds them again. ``folder`` is the emptied work directory ``labs_checks_<name>``. With
    ``saved=True`` (a JSON-able value) the value is also kept there, in ``built.json``, and a later
    process (nbgrader grades each submission in a fresh kernel) reuses it while it is intact.
    """
    value = _BUILT.get(name)
    if name in _BUILT and intact(value):
        return value
    if saved:
        kept = workdir(f"labs_checks_{name}", fresh=False) / _SAVED_AS
        try:
            value = json.loads(kept.read_text())
        except (OSError, ValueError):
            value = None
        if value is not None and intact(value):
            _BUILT[name] = value
            return value
    folder = fresh_dir(name)
    value = build(folder)
    if saved:
        write_atomically(folder / _SAVED_AS, json.dumps(value, indent=1))
    _BUILT[name] = value
    return value


def append_events(spark: Any, path: str, start: int, stop: int, kind: str, files: int = 1) -> None:
    """Append ids ``start..stop-1`` with a ``kind`` column (a SQL expression) in ``files`` files."""
    df = spark.range(start, stop).selectExpr("id", f"{kind} AS kind")
    df = df.repartition(files) if files > 1 else df.coalesce(1)
    df.write.format("delta").mode("append").save(path)


def clean_up_commits(table_path: str | os.PathLike[str], before: int) -> None:
    """Delete commits ``0 .. before-1`` (JSON, checksum and Hadoop's hidden twins) from the log.

    This is what Delta's log clean-up does to commits older than ``delta.logRetentionDuration``
    once a later checkpoint covers them; a check does it at once so that only a checkpoint-aware
    reader can rebuild the table.
    """
    log = Path(table_path) / "_delta_log"
    for version in range(before):
        for suffix in (".json", ".crc"):
            (log / f"{version:020d}{suffix}").unlink(missing_ok=True)
            (log / f".{version:020d}{suffix}.crc").unlink(missing_ok=True)
    clear_delta_cache()


#: Set it to a whole number to make every check build the same tables again (reproducing a run).
SEED_ENV = "DELTALAB_CHECK_SEED"


#: Partition values a path must URL-encode (``city=new%20york``), and one that needs no encoding.
AWKWARD_VALUES = ("new york", "10:30", "a=b", "zürich", "plain")


def check_seed() -> int:
    """The seed of the tables one check run generates: new on every run, so that an answer fitted
    to one table fails on the next, or ``$DELTALAB_CHECK_SEED`` to build the same ones again."""
    fixed = os.environ.get(SEED_ENV, "").strip()
    if fixed:
        try:
            return int(fixed)
        except ValueError:
            raise DeltaLabError(f"{SEED_ENV}={fixed!r} is not a whole number.",
                                fix=f"Unset {SEED_ENV}, or set it to a number such as 7.") from None
    return random.SystemRandom().randrange(1, 2**31)


@dataclass
class History:
    """A table :func:`random_history` wrote: its path, its latest version, the versions that hold
    a checkpoint, and each commit's operation as its ``commitInfo`` names it (``operations[v]``)."""

    path: str
    latest: int
    checkpoints: list[int]
    operations: list[str] = field(default_factory=list)
    partitioned: bool = False
    deletion_vectors: bool = False


def create_history_table(spark: Any, path: str | os.PathLike[str], *, partitioned: bool, deletion_vectors: bool,
                         checkpoint_interval: int) -> None:
    """Create the empty table the generated histories write (:func:`random_history`, lab 03's):
    ``id BIGINT, city STRING, amount INT``, partitioned by ``city`` or not, with its checkpoint
    interval and deletion vectors on or off."""
    spark.sql(
        f"CREATE TABLE delta.`{path}` (id BIGINT, city STRING, amount INT) USING delta "
        + ("PARTITIONED BY (city) " if partitioned else "")
        + f"TBLPROPERTIES ('delta.checkpointInterval' = '{checkpoint_interval}', "
        f"'delta.enableDeletionVectors' = '{str(deletion_vectors).lower()}')"
    )


def random_history(spark: Any, path: str | os.PathLike[str], rng: random.Random, *, commits: int = 8,
                   partitioned: bool | None = None, deletion_vectors: bool | None = None,
                   checkpoint_interval: int | None = None) -> History:
    """Write a Delta table at ``path`` whose history ``rng`` chooses: about ``commits`` commits of
    appends (1-3 files each), DELETEs, UPDATEs, an OPTIMIZE and a table property change.

    Unless fixed by the arguments, ``rng`` also chooses whether the table is partitioned by
    ``city`` (values from :data:`AWKWARD_VALUES`: spaces, ``:`` and ``=`` must be URL-encoded in
    the log's paths), whether DELETE and UPDATE write deletion vectors (then a commit removes and
    adds the same path, told apart by the deletion vector), and its ``delta.checkpointInterval``
    (2-5, or 100: no checkpoint at all). Columns: ``id`` (unique), ``city``, ``amount``.
    """
    from deltalab.log import checkpoint_versions, commit_info, latest_version

    partitioned = rng.random() < 0.5 if partitioned is None else partitioned
    deletion_vectors = rng.random() < 0.5 if deletion_vectors is None else deletion_vectors
    interval = checkpoint_interval or rng.choice([2, 3, 4, 5, 100])
    location = str(path)
    create_history_table(spark, location, partitioned=partitioned, deletion_vectors=deletion_vectors,
                         checkpoint_interval=interval)
    next_id = 0

    def append() -> None:
        nonlocal next_id
        rows = rng.randint(3, 40)
        data = [(next_id + i, rng.choice(AWKWARD_VALUES), rng.randint(1, 1000)) for i in range(rows)]
        next_id += rows
        frame = spark.createDataFrame(data, "id BIGINT, city STRING, amount INT")
        frame.repartition(rng.randint(1, 3)).write.format("delta").mode("append").save(location)

    append()
    kinds = ["append", "append", "append", "delete", "update", "optimize", "property"]
    while latest_version(location) < commits:  # a DELETE or OPTIMIZE with nothing to do commits nothing
        kind = rng.choice(kinds)
        if kind == "append":
            append()
        elif kind == "delete":
            spark.sql(f"DELETE FROM delta.`{location}` WHERE id % {rng.randint(3, 7)} = {rng.randint(0, 2)}")
        elif kind == "update":
            spark.sql(f"UPDATE delta.`{location}` SET amount = amount + 1 WHERE id % {rng.randint(2, 5)} = 0")
        elif kind == "optimize":
            spark.sql(f"OPTIMIZE delta.`{location}`")
        else:
            spark.sql(f"ALTER TABLE delta.`{location}` SET TBLPROPERTIES ('course.step' = '{rng.randint(1, 10**6)}')")
    latest = latest_version(location)
    operations = [str(commit_info(location, version).get("operation")) for version in range(latest + 1)]
    return History(location, latest, checkpoint_versions(location), operations, partitioned, deletion_vectors)

