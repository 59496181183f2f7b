"""Schema enforcement and evolution, seen from the outside: errors, files and the log.

Notebook 06 makes Delta refuse writes and change schemas, and checks each claim on the table
itself: which error condition a refused write raised, that it left the directory or at least
the table unchanged, which ``metaData`` action recorded each schema change, and which physical
column names the data files still carry after a rename under column mapping.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable
from urllib.parse import unquote

from deltalab.errors import DeltaLabError
from deltalab.log import read_log, replay_log

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "SparkFailure",
    "failure_of",
    "directory_files",
    "orphan_data_files",
    "schema_history",
    "column_mapping",
    "parquet_columns",
]

# An error condition as Spark and Delta print it: [DELTA_METADATA_MISMATCH] or [DELTA_DUPLICATE_COLUMNS_FOUND.DATA]
_CONDITION = re.compile(r"\[([A-Z][A-Z0-9_]+(?:\.[A-Z0-9_]+)*)\]")


@dataclass(frozen=True)
class SparkFailure:
    """What a refused Spark/Delta operation raised, reduced to what a learner needs.

    ``condition`` is the error condition (error class) such as ``DELTA_METADATA_MISMATCH``,
    ``message`` the first line of the message that carries it (no Java class, no stack
    trace), ``text`` the whole message for searching, ``error_type`` the Python exception type.
    """

    condition: str | None
    message: str
    text: str
    error_type: str

    def __str__(self) -> str:
        return self.message


def _describe(error: BaseException) -> SparkFailure:
    text = str(error)
    condition = None
    get_condition = getattr(error, "getCondition", None)
    if callable(get_condition):
        try:
            condition = get_condition()
        except Exception:  # noqa: BLE001 - a half-converted JVM error can fail here too
            condition = None
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if condition is None:
        # Some Delta errors (NOT NULL, CHECK) reach Python as a plain Py4JJavaError: read the
        # condition from the line "...DeltaInvariantViolationException: [CONDITION] message".
        found = _CONDITION.search(text)
        condition = found.group(1) if found else None
    message = next((line for line in lines if condition and f"[{condition}]" in line), lines[0] if lines else "")
    if condition and f"[{condition}]" in message:
        message = message[message.index(f"[{condition}]"):]  # drop a "java.class.Name: " prefix
    return SparkFailure(condition=condition, message=message, text=text, error_type=type(error).__name__)


def failure_of(action: Callable[[], Any]) -> SparkFailure | None:
    """Run ``action()``; return what it raised as a :class:`SparkFailure`, or None if it succeeded.

    Spark raises several exception types (``AnalysisException``, ``NumberFormatException``,
    a bare ``Py4JJavaError`` for Delta's constraint violations); this reads the error
    condition from whichever it was, so a notebook can assert on it in one line.
    """
    try:
        action()
    except Exception as error:  # noqa: BLE001 - the point is to capture any Spark/Delta error
        return _describe(error)
    return None


def directory_files(path: str | os.PathLike[str]) -> set[str]:
    """Every file under ``path`` (data files, the log, checksums), relative, with ``/`` separators.

    Two snapshots taken before and after a refused write show whether it wrote anything at all.
    """
    root = Path(path)
    if not root.is_dir():
        raise DeltaLabError(f"{root} is not a directory.", fix="Pass the folder of a table that exists.")
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}


def _is_data_file(relative: str) -> bool:
    return relative.endswith(".parquet") and not relative.startswith("_delta_log/")


def orphan_data_files(table_path: str | os.PathLike[str]) -> set[str]:
    """Data files in the table's folder that no commit of its log has ever added.

    A write that fails inside its tasks (a CHECK or NOT NULL violation found while writing)
    leaves the Parquet files its tasks finished, but never commits them: readers do not see
    them and VACUUM deletes them once they are older than the retention.
    """
    log = read_log(table_path)
    referenced = set()
    for actions in log.commits.values():
        for action in actions:
            for kind in ("add", "remove"):
                if kind in action:
                    referenced.add(unquote(action[kind]["path"]))  # the log stores paths URL-encoded
    present = {p for p in directory_files(table_path) if _is_data_file(p)}
    return present - referenced


def _columns(schema_string: str) -> list[dict[str, Any]]:
    return json.loads(schema_string)["fields"]


def _type_name(data_type: Any) -> str:
    return data_type if isinstance(data_type, str) else data_type.get("type", "struct")


def schema_history(table_path: str | os.PathLike[str]) -> "pd.DataFrame":
    """One row per commit that wrote a ``metaData`` action: the version, the operation, and
    the schema it recorded as ``name type`` pairs, plus what changed from the previous one.

    Every schema change in Delta is a new ``metaData`` action carrying the whole schema, so
    this table is the schema's history as the log tells it.
    """
    import pandas as pd

    log = read_log(table_path)
    rows = []
    previous: dict[str, str] = {}
    for version in log.versions:
        actions = log.commits[version]
        metadata = next((a["metaData"] for a in actions if "metaData" in a), None)
        if metadata is None:
            continue
        operation = next((a["commitInfo"].get("operation") for a in actions if "commitInfo" in a), None)
        columns = {f["name"]: _type_name(f["type"]) for f in _columns(metadata["schemaString"])}
        changes = [f"+{n}" for n in columns if n not in previous]
        changes += [f"-{n}" for n in previous if n not in columns]
        changes += [f"{n}: {previous[n]}→{t}" for n, t in columns.items() if n in previous and previous[n] != t]
        rows.append({
            "version": version,
            "operation": operation,
            "schema": ", ".join(f"{n} {t}" for n, t in columns.items()),
            "change": " ".join(changes) if previous else "(first schema)",
        })
        previous = columns
    return pd.DataFrame(rows, columns=["version", "operation", "schema", "change"])


def column_mapping(table_path: str | os.PathLike[str], version: int | None = None) -> "pd.DataFrame":
    """The table's columns at ``version`` (default latest): logical name, type, and, under
    column mapping, the physical name the data files use and the column's id.

    Without column mapping the physical name is the logical name, and the id is empty.
    """
    import pandas as pd

    state = replay_log(table_path, version)
    rows = []
    for column in _columns(state.metadata["schemaString"]):
        meta = column.get("metadata", {})
        rows.append({
            "column": column["name"],
            "type": _type_name(column["type"]),
            "physical name": meta.get("delta.columnMapping.physicalName", column["name"]),
            "id": meta.get("delta.columnMapping.id"),
        })
    return pd.DataFrame(rows, columns=["column", "type", "physical name", "id"])


def parquet_columns(file_path: str | os.PathLike[str]) -> list[str]:
    """The column names stored in a Parquet file's footer: the physical names, whatever the log says."""
    import pyarrow.parquet as pq

    path = Path(file_path)
    if not path.is_file():
        raise DeltaLabError(f"{path} is not a file.", fix="Pass the path of a data file, e.g. from directory_files().")
    return list(pq.read_schema(path).names)
