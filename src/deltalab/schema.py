"""Schemas as the log records them: the history of ``metaData`` actions, column mapping, and
the physical column names in the data files.

Notebook 06 makes Delta refuse writes and change schemas. The refused writes are read with
``deltalab.errors.failure_of`` and the folder with ``deltalab.files``; this module shows which
``metaData`` action recorded each schema change, and which physical column names the data files
still carry after a rename under column mapping.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from deltalab.errors import DeltaLabError
from deltalab.log import read_log, replay_log

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "schema_history",
    "column_mapping",
    "parquet_columns",
]


def _columns(schema_string: str) -> list[dict[str, Any]]:
    return json.loads(schema_string)["fields"]


def _type_name(data_type: Any) -> str:
    return data_type if isinstance(data_type, str) else data_type.get("type", "struct")


def schema_history(table_path: str | os.PathLike[str]) -> "pd.DataFrame":
    """One row per commit that wrote a ``metaData`` action: the version, the operation, and
    the schema it recorded as ``name type`` pairs, plus what changed from the previous one
    (``columns``: the same schema as a dict, name -> type, for :func:`deltalab.plots.plot_schema_history`).

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
            "columns": dict(columns),
        })
        previous = columns
    return pd.DataFrame(rows, columns=["version", "operation", "schema", "change", "columns"])


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
