"""Which clients can read and write a table: delta-rs and Delta Kernel asked with real calls.

A table's protocol lists the features a client must understand; a client that does not know one
refuses the table, to read it (a reader feature) or to write it (a writer feature). What the
course's other clients refuse is measured here, never quoted from a support table. A read is
checked by its **values**: the rows a client returns are compared with Spark's rows of the same
version (each row a tuple of its columns in name order, a ``VARIANT`` value as its two binary
fields), because a client can pass a table's protocol gate and still read it wrong (delta-rs's
pyarrow path on a column-mapped table returns as many rows as Spark, every value null):

* **delta-rs read (pyarrow)**: ``deltalake.DeltaTable(path).to_pyarrow_table()``, which hands the files to a
  pyarrow dataset (``to_pyarrow_dataset`` and ``to_pandas`` go the same way);
* **delta-rs read (scan)**: ``pyarrow.table(DeltaTable(path).scan())``, delta-rs's own DataFusion engine;
* **delta-rs append**: ``write_deltalake(mode="append")`` of one of the table's rows (one of Spark's, typed
  as delta-rs types the table), on a *copy* of the table (the table asked about is never changed), then
  Spark's rows of the copy are compared with the table's rows plus that one;
* **Kernel read**: Delta Kernel (Java, :mod:`deltalab.kernel`) loads the snapshot and reads the rows.

Each answer is ``"yes"`` (Spark's rows, value for value), ``"wrong values: <n> of <m> rows differ"``,
``"<k> rows, Spark reads <m>"`` or ``"refused: <exception>: <first line>"``. :func:`features_named` finds
the protocol's features a refusal names, so a lesson can check that a client refused a table for
one of the features the table really has.
"""

from __future__ import annotations

import os
import re
import shutil
from collections import Counter
from pathlib import Path
from typing import Any, Callable

from deltalab.errors import DeltaLabError
from deltalab.files import read_table
from deltalab.kernel import kernel_error, kernel_rows
from deltalab.log import delta_log_dir, replay_log

__all__ = ["CLIENTS", "YES", "client_access", "client_matrix", "client_outcomes", "compare_rows", "features_named",
           "protocol_features_of", "refusal"]

#: The answer of a call that worked.
YES = "yes"

#: The columns of :func:`client_access` that hold a client's answer, in the order it asks them.
CLIENTS = ("delta-rs read (pyarrow)", "delta-rs read (scan)", "delta-rs append", "Kernel read")


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


def _plain(value: Any) -> Any:
    """One value in a form every client's answer shares: a variant as ``("variant", metadata, value)`` bytes
    (Spark's ``VariantVal`` and the ``{metadata, value}`` struct delta-rs returns), a struct as a tuple of its
    fields in name order, binary as ``bytes``."""
    if hasattr(value, "metadata") and hasattr(value, "value") and type(value).__name__ == "VariantVal":
        return ("variant", bytes(value.metadata), bytes(value.value))
    if isinstance(value, dict):
        if set(value) == {"metadata", "value"}:
            return ("variant", bytes(value["metadata"]), bytes(value["value"]))
        return tuple((name, _plain(value[name])) for name in sorted(value))
    if hasattr(value, "asDict"):  # a Spark Row of a struct column
        return _plain(value.asDict())
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, list):
        return tuple(_plain(item) for item in value)
    return value


def _rows(names: list[str], rows: list[Any]) -> tuple[list[str], list[tuple]]:
    """(column names sorted, each row as a tuple of its plain values in that order)."""
    order = sorted(range(len(names)), key=lambda index: names[index])
    return [names[index] for index in order], [tuple(_plain(row[index]) for index in order) for row in rows]


def _spark_rows(spark: Any, table_path: Path) -> tuple[list[str], list[tuple]]:
    frame = read_table(table_path, spark=spark)
    return _rows(frame.columns, [tuple(row) for row in frame.collect()])


def _arrow_rows(table: Any) -> tuple[list[str], list[tuple]]:
    names = list(table.column_names)
    return _rows(names, [tuple(row[name] for name in names) for row in table.to_pylist()])


def compare_rows(got: tuple[list[str], list[tuple]], reference: tuple[list[str], list[tuple]]) -> str:
    """``"yes"`` when ``got`` holds the reference's columns and rows (in any order, duplicates counted),
    else what differs: the columns, the number of rows, or how many of the reference's rows are missing.

    Each side is (column names, rows as tuples in that column order), as the readers here return them."""
    got_names, got_rows = got
    names, rows = reference
    if sorted(got_names) != sorted(names):
        return f"columns {sorted(got_names)}, Spark reads {sorted(names)}"
    if list(got_names) != list(names):
        got_rows = [tuple(row[got_names.index(name)] for name in names) for row in got_rows]
    if len(got_rows) != len(rows):
        return f"{len(got_rows)} rows, Spark reads {len(rows)}"
    missing = sum((Counter(map(repr, rows)) - Counter(map(repr, got_rows))).values())
    return YES if missing == 0 else f"wrong values: {missing} of {len(rows)} rows differ"


def _read_answer(read: Callable[[], tuple[list[str], list[tuple]]], reference: tuple[list[str], list[tuple]]) -> str:
    try:
        got = read()
    except DeltaLabError:  # the course's own reader cannot turn this table's values into rows: not the client's answer
        raise
    except Exception as error:  # noqa: BLE001 - what the client raises is the answer
        return refusal(error)
    return compare_rows(got, reference)


def _delta_rs_reads(table_path: Path, reference: tuple[list[str], list[tuple]]) -> dict[str, str]:
    import pyarrow as pa
    from deltalake import DeltaTable

    return {
        "delta-rs read (pyarrow)": _read_answer(lambda: _arrow_rows(DeltaTable(str(table_path)).to_pyarrow_table()),
                                                reference),
        "delta-rs read (scan)": _read_answer(lambda: _arrow_rows(pa.table(DeltaTable(str(table_path)).scan())),
                                             reference),
    }


def _arrow_row(table_path: Path, names: list[str], row: tuple) -> Any:
    """One row (plain values, columns ``names``) as a pyarrow table typed as delta-rs types the table."""
    import pyarrow as pa
    from deltalake import DeltaTable

    values = {name: ({"metadata": value[1], "value": value[2]}
                     if isinstance(value, tuple) and value[:1] == ("variant",) else value)
              for name, value in zip(names, row)}
    schema = pa.schema([field.remove_metadata() for field in pa.schema(DeltaTable(str(table_path)).schema().to_arrow())])
    return pa.Table.from_pylist([values], schema=schema)


def _delta_rs_append(spark: Any, table_path: Path, scratch: Path, reference: tuple[list[str], list[tuple]]) -> str:
    from deltalake import write_deltalake

    names, rows = reference
    if not rows:
        return "no row to append"
    copy = scratch / f"{table_path.name}_append_copy"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(table_path, copy)
    try:
        try:
            write_deltalake(str(copy), _arrow_row(copy, names, rows[0]), mode="append")
        except Exception as error:  # noqa: BLE001 - what delta-rs raises is the answer
            return refusal(error)
        return compare_rows(_spark_rows(spark, copy), (names, rows + [rows[0]]))
    finally:
        shutil.rmtree(copy, ignore_errors=True)


def _kernel_read(spark: Any, table_path: Path, reference: tuple[list[str], list[tuple]]) -> str:
    return _read_answer(lambda: _rows(*kernel_rows(spark, table_path)), reference)


def client_access(spark: Any, table_path: str | os.PathLike[str], scratch: str | os.PathLike[str]) -> dict[str, Any]:
    """What each client does with the table's latest version: one row of :func:`client_matrix`.

    The protocol, the log's row count (``numRecords`` of the live files minus their deleted rows), Spark's, and
    each client's answer (:data:`CLIENTS`). ``scratch`` is a folder for the copy the append is tried on
    (removed afterwards).
    """
    table_path = Path(table_path)
    delta_log_dir(table_path)  # a clear DeltaLabError for a folder that is not a Delta table
    scratch = Path(scratch)
    if scratch.resolve() == table_path.resolve() or table_path.resolve() in scratch.resolve().parents:
        raise DeltaLabError(f"The scratch folder {scratch} is inside the table {table_path}.",
                            fix="Give a scratch folder outside the table, e.g. the notebook's work directory.")
    scratch.mkdir(parents=True, exist_ok=True)
    state = replay_log(table_path)
    protocol = state.protocol
    reference = _spark_rows(spark, table_path)
    return {
        "reader/writer": f"{protocol['minReaderVersion']}/{protocol['minWriterVersion']}",
        "reader features": ", ".join(sorted(protocol.get("readerFeatures") or [])),
        "writer features": ", ".join(sorted(protocol.get("writerFeatures") or [])),
        "rows (log)": state.num_records,
        "rows (Spark)": len(reference[1]),
        **_delta_rs_reads(table_path, reference),
        "delta-rs append": _delta_rs_append(spark, table_path, scratch, reference),
        "Kernel read": _kernel_read(spark, table_path, reference),
    }


def client_matrix(spark: Any, tables: dict[str, str | os.PathLike[str]], scratch: str | os.PathLike[str]) -> Any:
    """A pandas table: one row per named table, the protocol and each client's answer (:func:`client_access`)."""
    import pandas as pd

    if not tables:
        raise DeltaLabError("client_matrix got no tables.", fix="Pass a dict of {name: table path}.")
    frame = pd.DataFrame({name: client_access(spark, path, scratch) for name, path in tables.items()}).T
    frame.index.name = "table"
    return frame


def client_outcomes(matrix: Any, clients: tuple[str, ...] = CLIENTS) -> Any:
    """The answers of :func:`client_matrix` as one row per table and client, for a picture.

    ``outcome`` is ``"yes"``, ``"refused"``, ``"wrong values"`` (as many rows as Spark, some differ) or
    ``"other"`` (a count or the columns differ, or nothing was tried); ``features`` holds, sorted, the
    features of the table's protocol (its ``reader features`` and ``writer features`` columns) that a
    refusal names.
    """
    import pandas as pd

    missing = [column for column in ("reader features", "writer features", *clients) if column not in matrix.columns]
    if missing:
        raise DeltaLabError(f"client_outcomes needs the columns {missing}, which the table lacks.",
                            fix="Pass what client_matrix(spark, tables, scratch) returned.")
    rows = []
    for table, row in matrix.iterrows():
        protocol = {f for column in ("reader features", "writer features") for f in str(row[column]).split(", ") if f}
        for client in clients:
            answer = str(row[client])
            if answer == YES:
                outcome = "yes"
            elif answer.startswith("refused: "):
                outcome = "refused"
            elif answer.startswith("wrong values"):
                outcome = "wrong values"
            else:
                outcome = "other"
            named = tuple(sorted(features_named(answer, protocol))) if outcome == "refused" else ()
            rows.append({"table": table, "client": client, "outcome": outcome, "features": named})
    return pd.DataFrame(rows, columns=["table", "client", "outcome", "features"])
