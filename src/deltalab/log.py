"""Read a Delta table's transaction log and rebuild its state in pure Python.

Delta Lake keeps a table's truth in ``_delta_log/``: one JSON file per commit
(``00000000000000000003.json``), each line one *action* (protocol, metaData, add,
remove, txn, commitInfo, domainMetadata, ...), and now and then a checkpoint (a Parquet
file holding the whole state at one version). A reader never lists the data files: it
starts from the newest checkpoint at or before the version it wants and replays the
JSON commits after it. This module does exactly that with the standard library and
pyarrow, so the course can show that "reading a Delta table = replaying its log" and
check the result against what Spark reads.

* :func:`read_log` returns every commit as its list of actions, with a pandas view
  (:meth:`DeltaLog.to_pandas`) that has one row per action, as the book draws them.
* :func:`replay_log` returns the :class:`TableState` at a version: active files (with
  their stats and deletion vectors), tombstones, metadata, protocol, app transaction
  versions and domain metadata, and which log files it had to read.
* :func:`commit_versions`, :func:`latest_version`, :func:`checkpoint_versions` and
  :func:`commit_info` answer the small questions (which versions, which checkpoints, who
  wrote commit N) without reading more than they need.

Delta's own answers to the same questions (which files its snapshot of a version is built from,
the ``txn`` versions it knows) are asked of the JVM in :mod:`deltalab.jvm`, so this module
needs no Spark.

Every name in ``_delta_log/`` is recognised by one rule (the regular expressions below).

Both raise :class:`deltalab.errors.DeltaLabError` with a fix for a path that is not a
Delta table, a version that does not exist, and a missing or corrupt log file.
"""

from __future__ import annotations

import json
import os
import re
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlparse

from deltalab.errors import DeltaLabError

if TYPE_CHECKING:  # pragma: no cover - typing only
    import pandas as pd

__all__ = [
    "DeltaLog",
    "FileLifetime",
    "TableState",
    "checkpoint_versions",
    "commit_info",
    "commit_versions",
    "deleted_rows",
    "deletion_vector_file",
    "dv_id",
    "latest_version",
    "list_log_files",
    "log_file_actions",
    "read_log",
    "replay_log",
    "short_file_name",
    "z85_decode",
]

_COMMIT_RE = re.compile(r"^(\d{20})\.json$")
# classic: N.checkpoint.parquet; multi-part: N.checkpoint.PART.PARTS.parquet;
# v2: N.checkpoint.<uuid>.parquet|json
_CHECKPOINT_RE = re.compile(
    r"^(\d{20})\.checkpoint"
    r"(?:\.(?P<part>\d{10})\.(?P<parts>\d{10})|\.(?P<uuid>[0-9a-fA-F-]{36}))?"
    r"\.(?P<ext>parquet|json)$"
)


def delta_log_dir(table_path: str | os.PathLike[str]) -> Path:
    """Return ``<table>/_delta_log`` or raise a clear error if this is no Delta table."""
    root = Path(table_path)
    if not root.is_dir():
        raise DeltaLabError(
            f"{root} does not exist or is not a directory, so it is not a Delta table.",
            fix="Pass the folder that contains the _delta_log/ directory (the table root).",
        )
    log = root / "_delta_log"
    if not log.is_dir():
        raise DeltaLabError(
            f"{root} is not a Delta table: it has no _delta_log/ directory.",
            fix="Write it with df.write.format('delta') first, or pass the table root "
            "(the folder that contains _delta_log/), not a data or log sub-folder.",
        )
    return log


@dataclass(frozen=True)
class _Checkpoint:
    version: int
    files: tuple[Path, ...]  # all parts (one for classic and v2)
    kind: str  # "classic", "multi-part" or "v2"


def list_log_files(table_path: str | os.PathLike[str]) -> tuple[dict[int, Path], list[_Checkpoint]]:
    """List the commit files (version -> path) and the complete checkpoints of a table.

    A multi-part checkpoint counts only when all of its parts are present, the rule a
    Delta reader applies so that a half-written checkpoint is ignored.
    """
    log = delta_log_dir(table_path)
    commits: dict[int, Path] = {}
    parts: dict[tuple[int, int], dict[int, Path]] = {}
    checkpoints: list[_Checkpoint] = []
    for entry in log.iterdir():
        name = entry.name
        if m := _COMMIT_RE.match(name):
            commits[int(m.group(1))] = entry
        elif m := _CHECKPOINT_RE.match(name):
            version = int(m.group(1))
            if m.group("parts"):
                parts.setdefault((version, int(m.group("parts"))), {})[int(m.group("part"))] = entry
            elif m.group("uuid"):
                checkpoints.append(_Checkpoint(version, (entry,), "v2"))
            else:
                checkpoints.append(_Checkpoint(version, (entry,), "classic"))
    for (version, n), found in parts.items():
        if sorted(found) == list(range(1, n + 1)):
            checkpoints.append(
                _Checkpoint(version, tuple(found[i] for i in range(1, n + 1)), "multi-part")
            )
    checkpoints.sort(key=lambda c: (c.version, c.kind != "v2"))
    if not commits and not checkpoints:
        raise DeltaLabError(
            f"{Path(table_path)} is not a Delta table: _delta_log/ holds no commit "
            "(NNNNNNNNNNNNNNNNNNNN.json) and no checkpoint.",
            fix="Check the path; if a write was interrupted before its first commit, write the table again.",
        )
    return commits, checkpoints


def commit_versions(table_path: str | os.PathLike[str]) -> list[int]:
    """The versions that still have a JSON commit file in ``_delta_log/``, oldest first."""
    commits, _ = list_log_files(table_path)
    return sorted(commits)


def checkpoint_versions(table_path: str | os.PathLike[str]) -> list[int]:
    """The versions that have a complete checkpoint (classic, multi-part or v2), oldest first."""
    _, checkpoints = list_log_files(table_path)
    return sorted({c.version for c in checkpoints})


def latest_version(table_path: str | os.PathLike[str]) -> int:
    """The table's latest version: the newest commit (or checkpoint) in ``_delta_log/``, without Spark."""
    commits, checkpoints = list_log_files(table_path)
    return max([*commits, *(c.version for c in checkpoints)])


def commit_info(table_path: str | os.PathLike[str], version: int) -> dict[str, Any]:
    """The ``commitInfo`` action of commit ``version`` (operation, readVersion, isBlindAppend, ...).

    Raises a clear error when the version has no commit file; returns ``{}`` for a commit
    without commitInfo (other writers than Spark may omit it).
    """
    commits, _ = list_log_files(table_path)
    if version not in commits:
        raise DeltaLabError(
            f"Version {version!r} has no commit file in {Path(table_path)}/_delta_log "
            f"(versions present: {_ranges(sorted(commits))}).",
            fix="Pick one of the versions present.",
        )
    for action in _read_commit(commits[version]):
        if "commitInfo" in action:
            return dict(action["commitInfo"])
    return {}


def _read_commit(path: Path) -> list[dict[str, Any]]:
    """Parse one commit file (one JSON action per line) with a clear error if it is corrupt."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise DeltaLabError(
            f"The commit file {path.name} is missing from {path.parent}.",
            fix="A commit file must never be deleted by hand; restore it from a backup "
            "or read a version after the newest checkpoint.",
        ) from None
    actions: list[dict[str, Any]] = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            action = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DeltaLabError(
                f"The commit file {path.name} is corrupt: line {lineno} is not valid JSON ({exc.msg}).",
                fix="Restore the file from a backup; never edit commit files by hand.",
            ) from None
        if not isinstance(action, dict) or len(action) != 1:
            raise DeltaLabError(
                f"The commit file {path.name} is corrupt: line {lineno} is not one action "
                "(a JSON object with exactly one key such as 'add').",
                fix="Restore the file from a backup; never edit commit files by hand.",
            )
        actions.append(action)
    if not actions:
        raise DeltaLabError(
            f"The commit file {path.name} is empty.",
            fix="Restore the file from a backup; an empty commit file is never written by Delta.",
        )
    return actions


def short_file_name(path: str | None) -> str | None:
    """Abbreviate a data file name as the book writes it: ``part-00000`` (plus partition folders).

    ``country=US/part-00001-5f3e...c000.snappy.parquet`` becomes ``country=US/part-00001``.
    Deletion-vector files (``deletion_vector_<uuid>.bin``) become ``deletion_vector``.
    """
    if path is None:
        return None
    decoded = unquote(path)
    head, _, name = decoded.rpartition("/")
    m = re.match(r"^(part-\d{5})", name)
    short = m.group(1) if m else ("deletion_vector" if name.startswith("deletion_vector") else name)
    return f"{head}/{short}" if head else short


_Z85 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"


def deletion_vector_file(dv: dict[str, Any] | None) -> str | None:
    """The path, relative to the table folder, of the file holding a deletion vector, or None for
    no deletion vector or one stored inline (``storageType`` ``i``) or by absolute path (``p``).

    For ``storageType`` ``u`` the protocol's ``pathOrInlineDv`` is a random prefix (a folder,
    possibly empty) followed by the file's UUID in 20 Z85 characters; the file is
    ``<prefix>/deletion_vector_<uuid>.bin`` (PROTOCOL.md, "Deletion Vector Descriptor Schema")."""
    if not dv or dv.get("storageType") != "u":
        return None
    encoded = str(dv["pathOrInlineDv"])
    name = f"deletion_vector_{uuid.UUID(bytes=z85_decode(encoded[-20:]))}.bin"
    prefix = encoded[:-20]
    return f"{prefix}/{name}" if prefix else name


def z85_decode(encoded: str) -> bytes:
    """Z85 text back to bytes: each 5 characters, a base-85 number, are 4 bytes, big-endian (ZeroMQ's RFC 32).

    Delta writes binary values into its JSON with it: a deletion vector's UUID or inline bitmap
    (``pathOrInlineDv``), and a variant column's bounds in the statistics (PROTOCOL.md)."""
    raw = bytearray()
    for start in range(0, len(encoded) - len(encoded) % 5, 5):
        value = 0
        for char in encoded[start:start + 5]:
            value = value * 85 + _Z85.index(char)
        raw += value.to_bytes(4, "big")
    return bytes(raw)


#: The first four bytes (little-endian) of a serialized deletion vector (PROTOCOL.md, "Deletion Vector Format").
DV_MAGIC_NUMBER = 1681511377


def _roaring32(data: bytes, at: int) -> tuple[list[int], int]:
    """One 32-bit RoaringBitmap in the portable format starting at ``at``: its values and where it ends.

    The format (RoaringFormatSpec): a cookie, each container's key and cardinality, offsets, then the
    containers: arrays of 16-bit values, bitmaps of 8 KiB, or runs (start, length - 1)."""
    cookie = int.from_bytes(data[at:at + 4], "little")
    if cookie & 0xFFFF == 12347:                      # SERIAL_COOKIE: some containers are runs
        size = (cookie >> 16) + 1
        at += 4
        run_flags = data[at:at + (size + 7) // 8]
        at += (size + 7) // 8
        has_offsets = size >= 4
    elif cookie == 12346:                             # SERIAL_COOKIE_NO_RUNCONTAINER
        size = int.from_bytes(data[at + 4:at + 8], "little")
        run_flags = bytes((size + 7) // 8)
        at += 8
        has_offsets = True
    else:
        raise DeltaLabError(f"a deletion vector holds a bitmap with the unknown cookie {cookie}.",
                            fix="check that the file is a Delta deletion vector (deletion_vector_<uuid>.bin).")
    header = [(int.from_bytes(data[at + 4 * i:at + 4 * i + 2], "little"),
               int.from_bytes(data[at + 4 * i + 2:at + 4 * i + 4], "little") + 1) for i in range(size)]
    at += 4 * size + (4 * size if has_offsets else 0)
    values: list[int] = []
    for index, (key, cardinality) in enumerate(header):
        high = key << 16
        if run_flags[index // 8] >> (index % 8) & 1:
            runs = int.from_bytes(data[at:at + 2], "little")
            at += 2
            for r in range(runs):
                start = int.from_bytes(data[at + 4 * r:at + 4 * r + 2], "little")
                length = int.from_bytes(data[at + 4 * r + 2:at + 4 * r + 4], "little")
                values.extend(high | v for v in range(start, start + length + 1))
            at += 4 * runs
        elif cardinality <= 4096:
            values.extend(high | int.from_bytes(data[at + 2 * i:at + 2 * i + 2], "little") for i in range(cardinality))
            at += 2 * cardinality
        else:
            bits = int.from_bytes(data[at:at + 8192], "little")
            values.extend(high | v for v in range(65536) if bits >> v & 1)
            at += 8192
    return values, at


def _dv_bitmap(data: bytes) -> list[int]:
    """The row positions of a serialized deletion vector: the magic number, then a 64-bit RoaringBitmap
    in the portable format (a count of 32-bit buckets, each a 32-bit key and a 32-bit bitmap)."""
    magic = int.from_bytes(data[:4], "little")
    if magic != DV_MAGIC_NUMBER:
        raise DeltaLabError(f"a deletion vector starts with {magic}, not Delta's magic number {DV_MAGIC_NUMBER}.",
                            fix="check the descriptor's offset: it points at the 4-byte size before the bitmap.")
    buckets = int.from_bytes(data[4:12], "little")
    at, positions = 12, []
    for _ in range(buckets):
        key = int.from_bytes(data[at:at + 4], "little")
        values, at = _roaring32(data, at + 4)
        positions.extend((key << 32) | value for value in values)
    return positions


def deleted_rows(table_path: str | os.PathLike[str], dv: dict[str, Any] | None) -> list[int]:
    """The row positions (0-based, in the data file's physical order) a deletion vector marks deleted.

    ``dv`` is an ``add`` action's ``deletionVector`` descriptor; None (no deletion vector) gives [].
    Stored in a file (``u``, ``p``): at ``offset``, a 4-byte big-endian size, then the bitmap; inline
    (``i``): the bitmap in Z85. The bitmap is a 64-bit RoaringBitmap after a magic number (PROTOCOL.md,
    "Deletion Vector Format"); the result has ``cardinality`` positions, ascending."""
    if not dv:
        return []
    if dv["storageType"] == "i":
        data = z85_decode(str(dv["pathOrInlineDv"]))
    else:
        relative = deletion_vector_file(dv)
        file = Path(table_path) / relative if relative else Path(unquote(urlparse(str(dv["pathOrInlineDv"])).path))
        if not file.is_file():
            raise DeltaLabError(f"the deletion vector file {file.name} is missing from {Path(table_path).name}.",
                                fix="a deletion vector file is deleted only by VACUUM once no add uses it: use a "
                                    "table whose folder was copied whole.")
        with open(file, "rb") as handle:
            handle.seek(int(dv.get("offset") or 1))
            size = int.from_bytes(handle.read(4), "big")
            data = handle.read(size)
    positions = _dv_bitmap(data)
    if len(positions) != int(dv.get("cardinality", len(positions))):
        raise DeltaLabError(f"a deletion vector decoded to {len(positions)} rows, its descriptor says "
                            f"{dv.get('cardinality')}.", fix="the file may be truncated or not a deletion vector.")
    return sorted(positions)


def dv_id(dv: dict[str, Any] | None) -> str | None:
    """The unique id of a deletion vector descriptor (storage type, path or inline data, offset).

    Delta identifies a file in the table state by (path, deletion vector id): an UPDATE
    or DELETE with deletion vectors removes ``(path, old dv)`` and adds ``(path, new dv)``.
    """
    if not dv:
        return None
    offset = dv.get("offset")
    return f"{dv['storageType']}{dv['pathOrInlineDv']}" + (f"@{offset}" if offset is not None else "")


@dataclass(frozen=True)
class FileLifetime:
    """One data file's time in the table, as the log tells it: the version whose commit added it and the
    version whose commit removed it (``None``: the table still has it). A file Delta re-adds with a new
    deletion vector starts a new lifetime under the same path (``deletion_vector`` true), as the table
    state keys files by (path, deletion vector)."""

    path: str
    added: int
    removed: int | None
    deletion_vector: bool
    rows: int | None


@dataclass
class DeltaLog:
    """Every commit of a table, as read from ``_delta_log/*.json``.

    ``commits`` maps version -> list of actions (each a one-key dict such as
    ``{"add": {...}}``), in the order they appear in the file.
    """

    table_path: Path
    commits: dict[int, list[dict[str, Any]]]

    @property
    def versions(self) -> list[int]:
        """The versions that have a JSON commit file, oldest first."""
        return sorted(self.commits)

    def actions(self, version: int) -> list[dict[str, Any]]:
        """The actions of one commit, raising a clear error if it is not in the log."""
        if version not in self.commits:
            raise DeltaLabError(
                f"Version {version} has no commit file in {self.table_path}/_delta_log "
                f"(versions present: {_ranges(self.versions)}).",
                fix="Pick one of the versions present.",
            )
        return self.commits[version]

    def file_lifetimes(self) -> list[FileLifetime]:
        """Each data file from the commit that added it to the one that removed it, in the order of the adds.

        Needs every commit from version 0 (a file added before the oldest commit still in the log has no
        known start); a file's key is (path, deletion vector), as in :func:`replay_log`.
        """
        if not self.commits or self.versions[0] != 0:
            raise DeltaLabError(
                f"{self.table_path}/_delta_log starts at version {self.versions[0] if self.commits else 'none'}, "
                "not 0: the files added before it have no known start.",
                fix="Draw file lifetimes on a table whose log still has every commit (before a log clean-up).",
            )
        lifetimes: list[FileLifetime] = []
        open_at: dict[tuple[str, str | None], int] = {}
        for version in self.versions:
            for action in self.commits[version]:
                kind, body = next(iter(action.items()))
                if kind not in ("add", "remove"):
                    continue
                key = (body["path"], dv_id(body.get("deletionVector")))
                if kind == "add":
                    stats = json.loads(body["stats"]) if body.get("stats") else {}
                    open_at[key] = len(lifetimes)
                    lifetimes.append(FileLifetime(body["path"], version, None, key[1] is not None,
                                                  stats.get("numRecords")))
                elif key in open_at:
                    index = open_at.pop(key)
                    lifetimes[index] = replace(lifetimes[index], removed=version)
        return lifetimes

    def to_pandas(self, versions: Iterable[int] | None = None) -> pd.DataFrame:
        """One row per action: version, action, file, rows, size, dataChange, deletion vector, operation.

        ``file`` is abbreviated as in the book (``part-00000``); ``rows`` is
        ``numRecords`` from the add's stats; ``deletion vector`` is the DV's cardinality
        (number of deleted rows) and storage type, e.g. ``2 (u)``; ``operation`` is the
        commit's operation (WRITE, UPDATE, ...) for commitInfo rows, the reader/writer
        versions for protocol rows and the partition columns for metaData rows.
        """
        import pandas as pd

        wanted = self.versions if versions is None else list(versions)
        rows = []
        for version in wanted:
            op = next(
                (a["commitInfo"].get("operation") for a in self.actions(version) if "commitInfo" in a),
                None,
            )
            for action in self.actions(version):
                kind, body = next(iter(action.items()))
                row: dict[str, Any] = {
                    "version": version,
                    "action": kind,
                    "file": None,
                    "rows": None,
                    "size": None,
                    "dataChange": None,
                    "deletion vector": None,
                    "operation": op,
                }
                if kind in ("add", "remove", "cdc"):
                    row["file"] = short_file_name(body.get("path"))
                    row["size"] = body.get("size")
                    row["dataChange"] = body.get("dataChange")
                    stats = body.get("stats")
                    if stats:
                        row["rows"] = json.loads(stats).get("numRecords")
                    dv = body.get("deletionVector")
                    if dv:
                        row["deletion vector"] = f"{dv['cardinality']} ({dv['storageType']})"
                elif kind == "protocol":
                    row["file"] = f"reader {body.get('minReaderVersion')} / writer {body.get('minWriterVersion')}"
                elif kind == "metaData":
                    row["file"] = f"partitionColumns={body.get('partitionColumns', [])}"
                elif kind == "txn":
                    row["file"] = f"{body.get('appId')} v{body.get('version')}"
                elif kind == "domainMetadata":
                    row["file"] = body.get("domain")
                rows.append(row)
        frame = pd.DataFrame(
            rows,
            columns=["version", "action", "file", "rows", "size", "dataChange", "deletion vector", "operation"],
        )
        return frame.astype({"rows": "Int64", "size": "Int64"}).astype({"dataChange": "object"})


def read_log(table_path: str | os.PathLike[str]) -> DeltaLog:
    """Read every JSON commit of a table: ``read_log(p).commits[v]`` is commit v's action list.

    Only the commit files still in ``_delta_log/`` are read (log cleanup after a
    checkpoint may have removed old ones). Use ``.to_pandas()`` for a table to look at.
    """
    commits, _ = list_log_files(table_path)
    return DeltaLog(Path(table_path), {v: _read_commit(p) for v, p in sorted(commits.items())})


@dataclass
class TableState:
    """A table at one version, rebuilt from its log.

    ``files`` maps (path, deletion-vector id) -> the add action's fields, with ``stats``
    parsed into a dict; ``tombstones`` the same for remove actions still in the state
    (VACUUM uses them); ``app_versions`` maps a streaming/idempotent writer's appId to
    its last committed version (txn actions); ``log_files_read`` lists the checkpoint
    and commit files the replay opened, newest checkpoint first.
    """

    table_path: Path
    version: int
    protocol: dict[str, Any]
    metadata: dict[str, Any]
    files: dict[tuple[str, str | None], dict[str, Any]] = field(default_factory=dict)
    tombstones: dict[tuple[str, str | None], dict[str, Any]] = field(default_factory=dict)
    app_versions: dict[str, int] = field(default_factory=dict)
    domain_metadata: dict[str, dict[str, Any]] = field(default_factory=dict)
    checkpoint_version: int | None = None
    log_files_read: list[str] = field(default_factory=list)

    @property
    def num_records(self) -> int:
        """Rows in the table: numRecords of every active file minus its deletion vector's cardinality."""
        total = 0
        for add in self.files.values():
            total += int((add.get("stats") or {}).get("numRecords", 0))
            if add.get("deletionVector"):
                total -= int(add["deletionVector"]["cardinality"])
        return total

    def paths(self) -> list[str]:
        """The active data files' paths as stored in the log (URL-encoded, relative), sorted."""
        return sorted({p for p, _ in self.files})

    def input_files(self) -> list[str]:
        """The active data files as Spark's ``DataFrame.inputFiles()`` lists them, sorted.

        The log stores paths URL-encoded and relative to the table (a partition folder
        ``ts=2020-01-01 10%3A00%3A00`` appears as ``ts=2020-01-01%2010%253A00%253A00``);
        Spark decodes them once and prefixes the table's ``file:`` URI.
        """
        root = self.table_path.resolve()
        out = set()
        for p, _ in self.files:
            if urlparse(p).scheme:  # absolute path (e.g. a shallow clone)
                out.add(unquote(p))
            else:
                out.add(f"file:{root}/{unquote(p)}")
        return sorted(out)

    def to_pandas(self) -> pd.DataFrame:
        """One row per active file: file, partition values, rows, size, deletion vector."""
        import pandas as pd

        rows = []
        for (path, _), add in self.files.items():
            dv = add.get("deletionVector")
            rows.append(
                {
                    "file": short_file_name(path),
                    "partitionValues": add.get("partitionValues") or {},
                    "rows": (add.get("stats") or {}).get("numRecords"),
                    "size": add.get("size"),
                    "deletion vector": f"{dv['cardinality']} ({dv['storageType']})" if dv else None,
                }
            )
        # Sort by what is shown, not by the full names (whose random UUIDs change at every run),
        # so that the same table always prints the same frame.
        rows.sort(key=lambda r: (r["file"] or "", str(r["partitionValues"]), r["rows"] or 0, r["size"] or 0, r["deletion vector"] or ""))
        return pd.DataFrame(rows, columns=["file", "partitionValues", "rows", "size", "deletion vector"])


def _ranges(versions: list[int]) -> str:
    if not versions:
        return "none"
    return f"{versions[0]}..{versions[-1]}" if len(versions) > 1 else str(versions[0])


def _map_to_dict(value: Any) -> Any:
    """pyarrow returns Parquet MAP columns as lists of (key, value) tuples; make them dicts."""
    if isinstance(value, list) and all(isinstance(x, tuple) and len(x) == 2 for x in value):
        return dict(value)
    return value


_MAP_FIELDS = {
    "add": ("partitionValues", "tags"),
    "remove": ("partitionValues", "tags"),
    "metaData": ("configuration",),
    "commitInfo": (),
}


def _clean_action(kind: str, body: dict[str, Any]) -> dict[str, Any]:
    """Turn one action read from a checkpoint row into the same shape as its JSON form."""
    out = {k: v for k, v in body.items() if v is not None}
    for name in _MAP_FIELDS.get(kind, ()):
        if name in out:
            out[name] = _map_to_dict(out[name])
    if kind == "metaData" and isinstance(out.get("format"), dict):
        fmt = dict(out["format"])
        fmt["options"] = _map_to_dict(fmt.get("options")) or {}
        out["format"] = fmt
    if kind in ("add", "remove"):
        out.pop("stats_parsed", None)
        out.pop("partitionValues_parsed", None)
    return out


def _read_checkpoint_file(path: Path) -> list[dict[str, Any]]:
    """Read one checkpoint (or sidecar) file, Parquet or JSON, as a list of one-key action dicts."""
    if path.suffix == ".json":
        return _read_commit(path)
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except FileNotFoundError:
        raise DeltaLabError(
            f"The checkpoint file {path.name} is missing.",
            fix="Delete _delta_log/_last_checkpoint only if you know what you are doing; "
            "otherwise restore the checkpoint file.",
        ) from None
    except Exception as exc:  # pyarrow raises ArrowInvalid and friends for corrupt files
        raise DeltaLabError(
            f"The checkpoint file {path.name} is corrupt and cannot be read as Parquet ({exc}).",
            fix="Remove the corrupt checkpoint (and _last_checkpoint if it points to it) so "
            "readers fall back to the JSON commits, or restore it from a backup.",
        ) from None
    actions: list[dict[str, Any]] = []
    for column in table.column_names:
        for value in table.column(column).to_pylist():
            if value is not None:
                actions.append({column: _clean_action(column, value)})
    return actions


def log_file_actions(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The actions in one file of ``_delta_log/``, as one-key dicts (``{"add": {...}}``).

    Reads any of the log's files the same way: a commit or a compacted commit range
    (``x.y.compacted.json``), a checkpoint (classic, one part of a multi-part one, a v2
    checkpoint's top-level file in Parquet or JSON) or a v2 checkpoint's sidecar. It does not
    follow a v2 checkpoint's sidecars: ``replay_log`` does.
    """
    return _read_checkpoint_file(Path(path))


def _checkpoint_actions(cp: _Checkpoint, log: Path, read: list[str]) -> list[dict[str, Any]]:
    """All actions of a checkpoint, following a v2 checkpoint's sidecar files."""
    actions: list[dict[str, Any]] = []
    for part in cp.files:
        read.append(part.name)
        actions.extend(_read_checkpoint_file(part))
    sidecars = [a["sidecar"] for a in actions if "sidecar" in a]
    for sidecar in sidecars:
        sidecar_path = log / "_sidecars" / unquote(sidecar["path"])
        if not sidecar_path.exists():
            raise DeltaLabError(
                f"The v2 checkpoint at version {cp.version} names the sidecar file "
                f"{sidecar['path']}, which is missing from _delta_log/_sidecars/.",
                fix="Restore the sidecar file; without it the checkpoint is incomplete.",
            )
        read.append(f"_sidecars/{sidecar_path.name}")
        actions.extend(_read_checkpoint_file(sidecar_path))
    return [a for a in actions if "sidecar" not in a and "checkpointMetadata" not in a]


def _apply(state: TableState, actions: list[dict[str, Any]]) -> None:
    """Apply one commit's actions (or a checkpoint's) to the state, in Delta's replay order."""
    for action in actions:
        kind, body = next(iter(action.items()))
        if kind == "add":
            key = (body["path"], dv_id(body.get("deletionVector")))
            add = dict(body)
            stats = add.get("stats")
            add["stats"] = json.loads(stats) if isinstance(stats, str) and stats else (stats or None)
            state.files[key] = add
            state.tombstones.pop(key, None)
        elif kind == "remove":
            key = (body["path"], dv_id(body.get("deletionVector")))
            state.files.pop(key, None)
            state.tombstones[key] = dict(body)
        elif kind == "metaData":
            state.metadata = dict(body)
        elif kind == "protocol":
            state.protocol = dict(body)
        elif kind == "txn":
            state.app_versions[body["appId"]] = int(body["version"])
        elif kind == "domainMetadata":
            if body.get("removed"):
                state.domain_metadata.pop(body["domain"], None)
            else:
                state.domain_metadata[body["domain"]] = dict(body)


def replay_log(
    table_path: str | os.PathLike[str],
    version: int | None = None,
    *,
    use_checkpoints: bool = True,
) -> TableState:
    """Rebuild the table state at ``version`` (default: the latest) from the log alone.

    Starts from the newest complete checkpoint at or before ``version`` (classic,
    multi-part or v2 with sidecars, read with pyarrow) and applies the JSON commits after
    it in order; with ``use_checkpoints=False`` it replays every commit from version 0,
    which must give the same state. An add replaces any earlier entry with the same
    (path, deletion vector); a remove deletes it and leaves a tombstone.
    """
    commits, checkpoints = list_log_files(table_path)
    log = delta_log_dir(table_path)
    latest = max([*commits, *(c.version for c in checkpoints)])
    target = latest if version is None else version
    if not isinstance(target, int) or isinstance(target, bool) or target < 0 or target > latest:
        raise DeltaLabError(
            f"Version {version!r} does not exist in {Path(table_path)}: the latest version is {latest}.",
            fix=f"Pass a whole number between 0 and {latest}, or None for the latest version.",
        )
    start: _Checkpoint | None = None
    if use_checkpoints:
        candidates = [c for c in checkpoints if c.version <= target]
        if candidates:
            start = candidates[-1]
    first = 0 if start is None else start.version + 1
    missing = [v for v in range(first, target + 1) if v not in commits]
    if missing:
        if start is None and min(commits, default=target + 1) > 0 and not use_checkpoints:
            fix = "Call replay_log with use_checkpoints=True (old commits were cleaned up after a checkpoint)."
        elif start is None and min(commits, default=target + 1) > 0:
            fix = (
                f"Versions before {min(commits)} have been cleaned up (delta.logRetentionDuration) "
                "and no checkpoint covers this version; time travel to a later version."
            )
        else:
            fix = "A commit file must never be deleted by hand; restore it from a backup."
        raise DeltaLabError(
            f"Cannot rebuild version {target} of {Path(table_path)}: commit file(s) "
            f"{', '.join(f'{v:020d}.json' for v in missing[:3])}{' ...' if len(missing) > 3 else ''} "
            "missing from _delta_log/.",
            fix=fix,
        )
    state = TableState(Path(table_path), target, protocol={}, metadata={})
    if start is not None:
        state.checkpoint_version = start.version
        _apply(state, _checkpoint_actions(start, log, state.log_files_read))
    for v in range(first, target + 1):
        state.log_files_read.append(commits[v].name)
        _apply(state, _read_commit(commits[v]))
    if not state.protocol or not state.metadata:
        raise DeltaLabError(
            f"The log of {Path(table_path)} up to version {target} has no "
            f"{'protocol' if not state.protocol else 'metaData'} action, so it is corrupt.",
            fix="Restore the missing commit or checkpoint files from a backup.",
        )
    return state
