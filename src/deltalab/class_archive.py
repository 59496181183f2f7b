"""A class-data archive of the course's Spark driver, so that a Delta session starts in seconds.

A fresh JVM spends most of a session's first seconds loading and verifying classes: Spark's,
then Delta's thousands on the first Delta write. Java's class-data sharing (CDS) can load them
from an archive instead. :func:`build_archive` starts one Delta session with
``-XX:ArchiveClassesAtExit``, runs the kinds of operations the notebooks run (write, append,
UPDATE, DELETE, MERGE, OPTIMIZE, a checkpoint, reads of the log and of old versions), and lets
the JVM write the classes it loaded into the cache when it exits. Every later local session
(:func:`deltalab.session.default_conf`) starts with ``-XX:SharedArchiveFile`` and maps them.
Measured on an idle two-core machine: session start 7-10 s without, 3-4 s with; first Delta
write 5.5-9 s without, 3-4 s with.

An archive is only valid for the exact class path and Java it was made with, so its file name
carries a hash of both (:func:`archive_path`): a different Java, PySpark or jar set simply has
no archive, and the session starts the ordinary way. ``make setup`` (``python -m deltalab
fetch-jars``) builds it once; it is about 200 MB.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

from deltalab.errors import DeltaLabError
from deltalab.locations import cache_root
from deltalab.publish import publishing

__all__ = ["ARCHIVE_ENV", "ARCHIVE_OFF_ENV", "archive_option", "archive_path", "build_archive", "prune_archives"]

#: Set in the child process of :func:`build_archive`: where its JVM writes the archive at exit.
ARCHIVE_ENV = "DELTALAB_WRITE_CLASS_ARCHIVE"
#: ``DELTALAB_CLASS_ARCHIVE=off`` starts sessions without the archive (to compare, or to rule it out).
ARCHIVE_OFF_ENV = "DELTALAB_CLASS_ARCHIVE"
#: Archives kept in the cache: each virtual environment (a fresh clone, a re-created .venv) has
#: its own (its jars' modification times differ), so the oldest are removed beyond this many.
ARCHIVES_KEPT = 3
#: How long building the archive may take (one Delta session and a dozen operations).
BUILD_TIMEOUT_SECONDS = 900


def _java_version(java_home: Path) -> str:
    release = java_home / "release"
    try:
        return release.read_text()
    except OSError:
        return str(java_home)


def archive_path(class_path: list[Path], java_home: Path) -> Path:
    """Where the archive for this driver class path and Java lives: ``<cache>/jvm/classes-<hash>.jsa``.

    The hash covers the Java release, PySpark's own jars and the added jars (names, sizes and
    modification times, which the JVM checks too): a reinstalled PySpark or re-fetched jar has
    no archive until ``python -m deltalab fetch-jars`` builds a new one, rather than a stale one
    the JVM would refuse. Times count in whole seconds, as the JVM compares them: an image layer
    keeps only the seconds of a file's time, so a hash of nanoseconds taken while the image was
    built never matched in its containers, and they started without the archive they carry.
    """
    import pyspark

    spark_jars = sorted((Path(pyspark.__file__).parent / "jars").glob("*.jar"))
    digest = hashlib.sha256(_java_version(java_home).encode())
    for jar in [*spark_jars, *class_path]:
        try:
            stat = jar.stat()
            identity = f"{stat.st_size}:{stat.st_mtime_ns // 1_000_000_000}"
        except OSError:
            identity = "missing"
        digest.update(f"{jar.name}:{identity}\n".encode())
    return cache_root() / "jvm" / f"classes-{digest.hexdigest()[:16]}.jsa"


def archive_option(class_path: list[Path], java_home: Path) -> str:
    """The JVM option a local driver starts with: write the archive (inside :func:`build_archive`),
    use it (when it exists), or nothing."""
    target = os.environ.get(ARCHIVE_ENV)
    if target:
        return f"-XX:ArchiveClassesAtExit={target}"
    if os.environ.get(ARCHIVE_OFF_ENV, "").strip().lower() == "off":
        return ""
    path = archive_path(class_path, java_home)
    return f"-XX:SharedArchiveFile={path} -Xshare:auto" if path.is_file() else ""


# The operations the archive is trained on: what the notebooks do most, on a throw-away table.
_TRAINING = r"""
import sys
from deltalab.session import get_spark
from delta.tables import DeltaTable

table = sys.argv[1]
spark = get_spark("class-archive")
spark.range(0, 100, 1, 2).write.format("delta").save(table)
for i in range(11):   # past the tenth commit: a checkpoint
    spark.range(i, i + 5).write.format("delta").mode("append").save(table)
spark.sql(f"UPDATE delta.`{table}` SET id = id + 1000 WHERE id = 3")
spark.sql(f"DELETE FROM delta.`{table}` WHERE id = 4")
DeltaTable.forPath(spark, table).delete("id = 5")
spark.sql(f"MERGE INTO delta.`{table}` t USING (SELECT 6 AS id UNION ALL SELECT 7000) s ON t.id = s.id "
          "WHEN MATCHED THEN DELETE WHEN NOT MATCHED THEN INSERT *")
spark.sql(f"OPTIMIZE delta.`{table}` ZORDER BY (id)").collect()
spark.sql(f"DESCRIBE HISTORY delta.`{table}`").collect()
spark.sql(f"DESCRIBE DETAIL delta.`{table}`").collect()
spark.read.format("delta").option("versionAsOf", 1).load(table).count()
spark.read.format("delta").load(table).filter("id = 50").collect()
spark.read.parquet(table).count()
spark.createDataFrame([(1, "a")], "k long, v string").toPandas()

# The JVM writes the archive when it exits, which takes seconds: end it and wait for it, since
# Python's own exit would not wait.
from pyspark import SparkContext
jvm_process = SparkContext._gateway.proc
spark.stop()
jvm_process.stdin.close()
jvm_process.wait(timeout=600)
"""


def build_archive(class_path: list[Path], java_home: Path, timeout: int = BUILD_TIMEOUT_SECONDS) -> Path:
    """Build the archive for this class path and Java (if it is not there yet) and return its path.

    Runs :data:`_TRAINING` in a child Python process whose driver JVM writes the archive when
    it exits; the file appears under its final name only when complete.
    """
    import tempfile

    path = archive_path(class_path, java_home)
    if path.is_file():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    print(f"Building the JVM class archive {path.name} (once: about 200 MB, a minute or two; sessions then start "
          "in seconds) ...", file=sys.stderr, flush=True)
    with publishing(path) as partial, tempfile.TemporaryDirectory(prefix="deltalab-archive-") as scratch:
        env = dict(os.environ, **{ARCHIVE_ENV: str(partial), "DELTALAB_WORKDIR": str(Path(scratch) / "work")})
        try:
            result = subprocess.run([sys.executable, "-c", _TRAINING, str(Path(scratch) / "table")],
                                    env=env, capture_output=True, text=True, timeout=timeout,
                                    stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            raise DeltaLabError(f"Building the JVM class archive took longer than {timeout} s.",
                                fix="Run `python -m deltalab fetch-jars` again on a less busy machine; "
                                "the course works without the archive, only its sessions start slower.") from None
        if result.returncode != 0 or not partial.is_file():
            last = (result.stderr or result.stdout).strip().splitlines()[-1:] or ["no output"]
            raise DeltaLabError(f"Building the JVM class archive failed: {last[0][:300]}",
                                fix="Run `python -m deltalab doctor`; the course works without the archive, "
                                "only its sessions start slower.")
    prune_archives(path.parent)
    return path


def prune_archives(directory: Path, keep: int = ARCHIVES_KEPT) -> list[Path]:
    """Remove all but the ``keep`` newest ``classes-*.jsa`` of ``directory``; return the removed ones.

    An environment whose archive was removed still works: its sessions start the ordinary way
    until ``python -m deltalab fetch-jars`` builds it again.
    """
    archives = sorted(directory.glob("classes-*.jsa"), key=lambda p: p.stat().st_mtime, reverse=True)
    removed = archives[keep:]
    for old in removed:
        old.unlink(missing_ok=True)
    return removed
