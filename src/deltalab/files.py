"""The files of a table on disk: trees to look at, data files, orphans, and what Spark reads.

A Delta table is a folder. What is *in the table* is decided by the log (``deltalab.log``);
what is *in the folder* can be more: files of failed or killed writers (orphans), files that
DELETE or OPTIMIZE removed from the table but VACUUM has not deleted yet, checksums. This
module answers the folder-side questions; :func:`read_table` and :func:`spark_files` ask Spark
the table-side ones (its rows, and the data files it reads for them).
"""

from __future__ import annotations

import numbers
import os
from pathlib import Path
from typing import Any

from deltalab.errors import DeltaLabError
from deltalab.locations import hadoop_path, local_path
from deltalab.log import delta_log_dir, read_log
from deltalab.session import active_spark


def human_size(size: int) -> str:
    """A byte count as ``478 B``, ``1.6 KiB`` or ``3.2 MiB``."""
    if size < 1024:
        return f"{size} B"
    value = float(size)
    for unit in ("KiB", "MiB", "GiB"):
        value /= 1024
        if value < 1024 or unit == "GiB":
            return f"{value:.1f} {unit}"
    raise AssertionError("unreachable")


def tree_lines(path: str | Path, hide_crc: bool = False, hide_hidden: bool = False) -> list[str]:
    """The lines of ``show_tree``: the directory's name, then each entry sorted by name.

    ``hide_crc`` leaves out checksum files (Hadoop's ``.*.crc`` beside each data file and
    Delta's ``N.crc`` beside each commit). ``hide_hidden`` leaves out names starting with ``.``.
    """
    root = Path(path)
    if not root.is_dir():
        raise FileNotFoundError(f"{root} is not a directory")
    lines = [f"{root.name}/"]

    def keep(entry: Path) -> bool:
        if hide_crc and entry.name.endswith(".crc"):
            return False
        return not (hide_hidden and entry.name.startswith("."))

    def walk(directory: Path, prefix: str) -> None:
        entries = sorted((entry for entry in directory.iterdir() if keep(entry)), key=lambda entry: entry.name)
        for index, entry in enumerate(entries):
            last = index == len(entries) - 1
            branch = "└── " if last else "├── "
            if entry.is_dir():
                lines.append(f"{prefix}{branch}{entry.name}/")
                walk(entry, prefix + ("    " if last else "│   "))
            else:
                lines.append(f"{prefix}{branch}{entry.name}  ({human_size(entry.stat().st_size)})")

    walk(root, "")
    return lines


def show_tree(path: str | Path, hide_crc: bool = False, hide_hidden: bool = False) -> None:
    """Print a directory as a tree with file sizes; names are relative, so outputs are portable."""
    print("\n".join(tree_lines(path, hide_crc=hide_crc, hide_hidden=hide_hidden)))


def directory_files(path: str | os.PathLike[str]) -> set[str]:
    """Every file under ``path`` (data files, the log, checksums), relative, with ``/`` separators.

    Two snapshots taken before and after a refused write show whether it wrote anything at all.
    """
    root = Path(path)
    if not root.is_dir():
        raise DeltaLabError(f"{root} is not a directory.", fix="Pass the folder of a table that exists.")
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}


def data_files(table_path: str | os.PathLike[str]) -> set[str]:
    """The Parquet data files in the table's folder (outside ``_delta_log/``), relative POSIX paths.

    Whatever the log says: files of the current version, removed files VACUUM has not deleted
    yet, and orphans of failed writers alike.
    """
    return {p for p in directory_files(table_path) if p.endswith(".parquet") and not p.startswith("_delta_log/")}


def orphan_data_files(table_path: str | os.PathLike[str]) -> set[str]:
    """Data files in the table's folder that no commit of its log has ever added.

    A write that fails inside its tasks (a CHECK or NOT NULL violation found while writing),
    or a writer killed before its commit, leaves the Parquet files its tasks finished, but never
    commits them: readers do not see them and VACUUM deletes them once they are older than the
    retention.
    """
    from urllib.parse import unquote

    log = read_log(table_path)
    referenced = set()
    for actions in log.commits.values():
        for action in actions:
            for kind in ("add", "remove"):
                if kind in action:
                    referenced.add(unquote(action[kind]["path"]))  # the log stores paths URL-encoded
    return data_files(table_path) - referenced


def complete_parquet_files(directory: str | os.PathLike[str]) -> list[Path]:
    """The ``part-*.parquet`` files under ``directory`` whose footer pyarrow can read, sorted.

    A file a task is still writing has no footer yet, so it is not counted.
    """
    import pyarrow.parquet as pq

    done = []
    for path in sorted(Path(directory).rglob("part-*.parquet")):
        try:
            pq.read_metadata(path)
        except Exception:  # noqa: BLE001 - partial file: no footer yet
            continue
        done.append(path)
    return done


def read_table(table_path: str | os.PathLike[str], version: int | None = None, timestamp: str | None = None,
               spark: Any = None, **options: Any) -> Any:
    """The Delta table at ``table_path`` as a Spark DataFrame: the course's one way to read a table.

    It is ``spark.read.format("delta")`` with ``versionAsOf`` (``version``) or ``timestampAsOf``
    (``timestamp``, e.g. ``"2024-01-01 12:00:00"``) and any other reader option as a keyword
    (``read_table(path, readChangeFeed="true", startingVersion=1)``), then ``.load(path)``. A local
    folder that is not a Delta table is refused with a clear message before Spark is asked; a
    version that does not exist gets Delta's own error. ``spark`` defaults to the kernel's session.
    """
    if version is not None and timestamp is not None:
        raise DeltaLabError("read_table got both a version and a timestamp; a read travels to one of them.",
                            fix="Pass version=N or timestamp='YYYY-MM-DD HH:MM:SS', not both.")
    if version is not None and (isinstance(version, bool) or not isinstance(version, numbers.Integral) or version < 0):
        raise DeltaLabError(f"version={version!r} is not a table version.",
                            fix="Pass a whole number from 0 up to the latest version (deltalab.latest_version(path)).")
    location = os.fspath(table_path)
    if "://" not in location or location.startswith("file:"):
        delta_log_dir(local_path(location))  # raises: not a folder, or no _delta_log/
    reader = active_spark(spark, "read_table needs Spark").read.format("delta")
    if version is not None:
        reader = reader.option("versionAsOf", int(version))
    if timestamp is not None:
        reader = reader.option("timestampAsOf", str(timestamp))
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load(location)


def spark_files(spark: Any, table_path: str | os.PathLike[str], version: int | None = None,
                relative: bool = False) -> list[str]:
    """The data files Spark reads for the table at ``version`` (default latest), sorted.

    As ``DataFrame.inputFiles()`` lists them (``file:`` and the path on disk), or with
    ``relative=True`` as paths relative to the table folder, as on disk: the form :func:`data_files`
    uses (a log path ``unquote``d once is the same).
    """
    uris = read_table(table_path, version=version, spark=spark).inputFiles()
    if not relative:
        return sorted(uris)
    root = Path(local_path(str(table_path))).resolve()
    return sorted(Path(hadoop_path(uri)).resolve().relative_to(root).as_posix() for uri in uris)
