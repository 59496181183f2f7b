"""Which clients can read and write a table: delta-rs and Delta Kernel asked with real calls.

A table's protocol lists the features a client must understand; a client that does not know one
refuses the table, to read it (a reader feature) or to write it (a writer feature). What the
course's other clients refuse is measured here, never quoted from a support table:

* **delta-rs read**: ``deltalake.DeltaTable(path).to_pyarrow_table()``, its row count against the log's
  (``numRecords`` of the live files minus their deleted rows);
* **delta-rs append**: ``write_deltalake(mode="append")`` of one of the table's own rows, on a *copy*
  of the table (the table asked about is never changed), then Spark reads the copy;
* **Kernel read**: Delta Kernel (Java, :mod:`deltalab.kernel`) loads the snapshot and reads the rows, counted
  against the log's.

Each answer is ``"yes"`` or ``"refused: <exception>: <first line>"``. :func:`features_named` finds
the protocol's features a refusal names, so a lesson can check that a client refused a table for
one of the features the table really has.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import Any

from deltalab.errors import DeltaLabError
from deltalab.files import read_table
from deltalab.kernel import kernel_error, kernel_rows
from deltalab.log import delta_log_dir, replay_log

__all__ = ["YES", "client_access", "client_matrix", "features_named", "protocol_features_of", "refusal"]

#: The answer of a call that worked.
YES = "yes"


def refusal(error: BaseException) -> str:
    """``"refused: <exception class>: <first line of its message>"`` (Kernel's Java class when it has one).

    delta-rs lists the features it refuses in hash order (``[RowTracking, DomainMetadata]`` one run,
    ``[DomainMetadata, RowTracking]`` the next); the items of each ``[...]`` and ``{...}`` list are sorted so
    that the same table gets the same answer every run."""
    name, message = kernel_error(error)
    first_line = (message or "").strip().splitlines()[0] if (message or "").strip() else ""
    return f"refused: {name.rsplit('.', 1)[-1]}: {_sorted_lists(first_line)}"


def _sorted_lists(text: str) -> str:
    def sort_items(match: re.Match[str]) -> str:
        return match.group(1) + ", ".join(sorted(match.group(2).split(", "))) + match.group(3)

    return re.sub(r"([\[{])([^\[\]{}]*)([\]}])", sort_items, text)


def protocol_features_of(table_path: str | os.PathLike[str]) -> set[str]:
    """Every feature the latest protocol lists (reader and writer), read from the log."""
    protocol = replay_log(table_path).protocol
    return set(protocol.get("readerFeatures") or []) | set(protocol.get("writerFeatures") or [])


def features_named(answer: str, features: set[str]) -> set[str]:
    """The features of ``features`` that a refusal's text names (e.g. ``{"checkpointProtection"}``).

    Case and punctuation are ignored: delta-rs names features by its Rust type names (``RowTracking`` for
    ``rowTracking``, ``VariantShreddingPreview`` for ``variantShredding-preview``)."""
    text = _letters(answer)
    return {feature for feature in features if _letters(feature) in text}


def _letters(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", text.lower())


def _delta_rs_read(table_path: Path, log_rows: int) -> str:
    from deltalake import DeltaTable

    try:
        rows = DeltaTable(str(table_path)).to_pyarrow_table().num_rows
    except Exception as error:  # noqa: BLE001 - what delta-rs raises is the answer
        return refusal(error)
    return YES if rows == log_rows else f"{rows} rows, the log says {log_rows}"


def _one_row(spark: Any, table_path: Path) -> Any:
    """One of the table's rows as a pyarrow table, typed like the table (delta-rs's read, else Spark's)."""
    from deltalake import DeltaTable

    try:
        return DeltaTable(str(table_path)).to_pyarrow_table().slice(0, 1)
    except Exception:  # noqa: BLE001 - a table delta-rs cannot read still gets a row, from Spark
        return read_table(table_path, spark=spark).limit(1).toArrow()


def _delta_rs_append(spark: Any, table_path: Path, scratch: Path, log_rows: int) -> str:
    from deltalake import write_deltalake

    if log_rows == 0:
        return "no row to append"
    copy = scratch / f"{table_path.name}_append_copy"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(table_path, copy)
    try:
        row = _one_row(spark, copy)
        try:
            write_deltalake(str(copy), row, mode="append")
        except Exception as error:  # noqa: BLE001 - what delta-rs raises is the answer
            return refusal(error)
        after = read_table(copy, spark=spark).count()
        return YES if after == log_rows + 1 else f"appended, Spark then reads {after} rows, not {log_rows + 1}"
    finally:
        shutil.rmtree(copy, ignore_errors=True)


def _kernel_read(spark: Any, table_path: Path, log_rows: int) -> str:
    try:
        _, rows = kernel_rows(spark, table_path)
    except Exception as error:  # noqa: BLE001 - what Kernel raises is the answer
        return refusal(error)
    return YES if len(rows) == log_rows else f"{len(rows)} rows, the log says {log_rows}"


def client_access(spark: Any, table_path: str | os.PathLike[str], scratch: str | os.PathLike[str]) -> dict[str, Any]:
    """What each client does with the table's latest version: one row of :func:`client_matrix`.

    ``scratch`` is a folder for the copy the append is tried on (removed afterwards).
    """
    table_path = Path(table_path)
    delta_log_dir(table_path)  # a clear DeltaLabError for a folder that is not a Delta table
    scratch = Path(scratch)
    if scratch.resolve() == table_path.resolve() or table_path.resolve() in scratch.resolve().parents:
        raise DeltaLabError(f"The scratch folder {scratch} is inside the table {table_path}.",
                            fix="Give a scratch folder outside the table, e.g. the notebook's work directory.")
    scratch.mkdir(parents=True, exist_ok=True)
    state = replay_log(table_path)
    protocol, log_rows = state.protocol, state.num_records
    return {
        "reader/writer": f"{protocol['minReaderVersion']}/{protocol['minWriterVersion']}",
        "reader features": ", ".join(sorted(protocol.get("readerFeatures") or [])),
        "writer features": ", ".join(sorted(protocol.get("writerFeatures") or [])),
        "rows (log)": log_rows,
        "delta-rs read": _delta_rs_read(table_path, log_rows),
        "delta-rs append": _delta_rs_append(spark, table_path, scratch, log_rows),
        "Kernel read": _kernel_read(spark, table_path, log_rows),
    }


def client_matrix(spark: Any, tables: dict[str, str | os.PathLike[str]], scratch: str | os.PathLike[str]) -> Any:
    """A pandas table: one row per named table, the protocol and each client's answer (:func:`client_access`)."""
    import pandas as pd

    if not tables:
        raise DeltaLabError("client_matrix got no tables.", fix="Pass a dict of {name: table path}.")
    frame = pd.DataFrame({name: client_access(spark, path, scratch) for name, path in tables.items()}).T
    frame.index.name = "table"
    return frame
