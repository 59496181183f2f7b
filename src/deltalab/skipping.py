"""Data skipping, measured: per-file statistics from the log, and what a query really read.

Delta writes, in every ``add`` action, the file's ``numRecords`` and per-column ``minValues``,
``maxValues`` and ``nullCount``. At query time it drops every file whose [min, max] range cannot
contain a row matching the filter. This module shows both sides:

* :func:`file_stats` reads the statistics straight from ``_delta_log`` (what Delta *could* skip);
* :func:`scan_metrics` runs a query and reports what Spark *did* read, from Spark itself: the
  filtered DataFrame's ``inputFiles()`` and the scan node's metrics in the executed plan;
* :func:`skipping_effectiveness` averages the fraction of files and rows skipped over a set of
  filters, the measure used in the 2018 article "Processing Petabytes of Data in Seconds with
  Databricks Delta".
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable
from urllib.parse import unquote

from deltalab.errors import DeltaLabError
from deltalab.locations import hadoop_path, local_path
from deltalab.log import delta_log_dir, replay_log
from deltalab.session import active_spark
from deltalab.spark_jvm import file_scans, is_classic

if TYPE_CHECKING:  # pragma: no cover - typing only
    import numpy as np
    import pandas as pd
    from pyspark.sql import Column, DataFrame, SparkSession

__all__ = [
    "Effectiveness",
    "ScanMetrics",
    "equality_lookups",
    "file_stats",
    "files_that_may_match",
    "kept_by_min_max",
    "scan_metrics",
    "skipping_effectiveness",
]

# --------------------------------------------------------------------------------------------
# file_stats: the log's view
# --------------------------------------------------------------------------------------------


def _live_adds(table_path: str | Path) -> list[dict[str, Any]]:
    """The add actions of the table's current files, from deltalab.log's replay of the log."""
    return list(replay_log(local_path(str(table_path))).files.values())


def _flatten(prefix: str, value: Any, out: dict[str, Any]) -> None:
    if isinstance(value, dict):
        for key, inner in value.items():
            _flatten(f"{prefix}.{key}", inner, out)
    else:
        out[prefix] = value


def file_stats(table_path: str | Path) -> "pd.DataFrame":
    """One row per live data file of the table, with the statistics its ``add`` action carries.

    Columns: ``path`` (relative to the table, decoded), ``size`` (bytes), ``numRecords``, one
    ``deletedRows`` (only when some file has a deletion vector: the rows it hides, which
    ``numRecords`` still counts), one ``partition.<col>`` per partition column, then for every column with statistics
    ``min.<col>``, ``max.<col>`` and ``nullCount.<col>`` (nested fields as ``a.b``). A column Delta
    collected no statistics for (see ``delta.dataSkippingNumIndexedCols``) has no ``min.``/``max.``
    entry; a file without stats has NaN. Read from the log files directly with
    ``deltalab.log.replay_log`` (newest checkpoint plus later commits), without Spark, so it shows
    exactly what Delta can use for skipping.
    Rows are sorted by path.
    """
    import pandas as pd

    rows = []
    for add in _live_adds(table_path):
        row: dict[str, Any] = {"path": unquote(add["path"]), "size": add.get("size")}
        stats = add.get("stats") or {}
        if isinstance(stats, str):  # the raw JSON string of the log (replay_log parses it already)
            stats = json.loads(stats)
        row["numRecords"] = stats.get("numRecords")
        if add.get("deletionVector"):
            # numRecords counts the rows the file holds; a deletion vector hides some of them
            row["deletedRows"] = int(add["deletionVector"]["cardinality"])
        partition_values = add.get("partitionValues") or {}
        if isinstance(partition_values, list):  # a map read from a Parquet checkpoint
            partition_values = dict(partition_values)
        for key, value in partition_values.items():
            row[f"partition.{key}"] = value
        per_column: dict[str, Any] = {}
        for kind in ("minValues", "maxValues", "nullCount"):
            _flatten(kind, stats.get(kind, {}), per_column)
        row.update(per_column)
        rows.append(row)
    frame = pd.DataFrame(rows)
    if frame.empty:
        return pd.DataFrame(columns=["path", "size", "numRecords"])
    # Order: path, size, numRecords, partitions, then min/max/nullCount grouped by column.
    stat_columns = [c for c in frame.columns if c.split(".", 1)[0] in ("minValues", "maxValues", "nullCount")]
    names: list[str] = []
    for c in stat_columns:
        name = c.split(".", 1)[1]
        if name not in names:
            names.append(name)
    if "deletedRows" in frame.columns:
        frame["deletedRows"] = frame["deletedRows"].fillna(0).astype("int64")
    ordered = ["path", "size", "numRecords"] + (["deletedRows"] if "deletedRows" in frame.columns else []) + sorted(c for c in frame.columns if c.startswith("partition."))
    renamed = {}
    for name in names:
        for kind, short in (("minValues", "min"), ("maxValues", "max"), ("nullCount", "nullCount")):
            if f"{kind}.{name}" in frame.columns:
                ordered.append(f"{kind}.{name}")
                renamed[f"{kind}.{name}"] = f"{short}.{name}"
    frame = frame[ordered].rename(columns=renamed)
    return frame.sort_values("path", kind="stable").reset_index(drop=True)


# --------------------------------------------------------------------------------------------
# scan_metrics: Spark's view
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ScanMetrics:
    """What one query read from one Delta table, as Spark reports it after running the query.

    ``files_read``, ``bytes_read`` and ``rows_read`` are the scan node's metrics "number of files
    read", "size of files read" and "number of output rows" (rows the Parquet reader produced,
    before the Filter above it). ``input_files`` are the files of ``DataFrame.inputFiles()``,
    relative to the table. ``files_total`` and ``bytes_total`` come from ``DESCRIBE DETAIL``,
    ``rows_total`` from counting the table: Spark has no "files pruned" metric.
    """

    table_path: str
    files_read: int
    files_total: int
    bytes_read: int
    bytes_total: int
    rows_read: int
    rows_total: int
    rows_returned: int
    input_files: tuple[str, ...]

    @property
    def files_skipped(self) -> float:
        """Fraction of the table's files the query did not open (0 for an empty table)."""
        return 1.0 - self.files_read / self.files_total if self.files_total else 0.0

    @property
    def rows_skipped(self) -> float:
        """Fraction of the table's rows the query did not read (0 for an empty table)."""
        return 1.0 - self.rows_read / self.rows_total if self.rows_total else 0.0


def _table_totals(spark: "SparkSession", table_path: str) -> tuple[int, int, int]:
    detail = spark.sql(f"DESCRIBE DETAIL delta.`{table_path}`").select("numFiles", "sizeInBytes").first()
    rows = spark.read.format("delta").load(table_path).count()
    return int(detail["numFiles"]), int(detail["sizeInBytes"]), int(rows)


def _measure(df: "DataFrame", totals: tuple[int, int, int] | None = None) -> ScanMetrics:
    if not is_classic(df):
        raise DeltaLabError(
            "scan_metrics needs a classic (JVM-backed) Spark session; this DataFrame comes from Spark Connect.",
            fix="Use the session from deltalab.get_spark(), not a spark.remote(...) one.",
        )
    # A new Dataset gets a new physical plan: the scan's driver-side metrics (files, bytes) are
    # computed once per plan, so re-running an already executed DataFrame would report zero files.
    fresh = df.select("*")
    input_files = fresh.inputFiles()
    rows_returned = len(fresh.collect())
    scans = file_scans(fresh)
    if len(scans) != 1:
        raise DeltaLabError(
            f"scan_metrics measures a query that scans exactly one table; this one has {len(scans)} file scans.",
            fix="Measure one table at a time: pass spark.read.format('delta').load(path).filter(...).",
        )
    scan = scans[0]
    if "Tahoe" not in scan.location_class and "Delta" not in scan.location_class:
        raise DeltaLabError(
            f"The query scans {scan.location_class.rsplit('.', 1)[-1]}, not a Delta table.",
            fix="Read the table with spark.read.format('delta').load(path) or by its Delta table name.",
        )
    table_path = hadoop_path(scan.root)
    if totals is None:
        totals = _table_totals(fresh.sparkSession, table_path)
    prefix = Path(table_path)
    relative = tuple(sorted(str(Path(hadoop_path(f)).relative_to(prefix)) for f in input_files))
    return ScanMetrics(
        table_path=table_path,
        files_read=scan.files,
        files_total=totals[0],
        bytes_read=scan.bytes,
        bytes_total=totals[1],
        rows_read=scan.rows,
        rows_total=totals[2],
        rows_returned=rows_returned,
        input_files=relative,
    )


def scan_metrics(query: "DataFrame | str", spark: "SparkSession | None" = None) -> ScanMetrics:
    """Run one query on one Delta table and return what Spark read for it.

    ``query`` is a DataFrame (e.g. ``spark.read.format("delta").load(p).filter("x = 3")``) or a
    SQL string (run with ``spark.sql``). The query is executed (its result collected, so keep it
    selective) and the numbers are read back from Spark: the files of ``inputFiles()`` and the
    scan node's metrics in the executed plan. Nothing is inferred from the statistics.
    """
    if isinstance(query, str):
        query = active_spark(spark, "scan_metrics got a SQL string").sql(query)
    if not hasattr(query, "inputFiles"):
        raise DeltaLabError(
            f"scan_metrics expects a DataFrame or a SQL string, got {type(query).__name__}.",
            fix="Pass spark.read.format('delta').load(path).filter(...) or a SELECT statement.",
        )
    return _measure(query)


# --------------------------------------------------------------------------------------------
# skipping_effectiveness: the article's measure
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Effectiveness:
    """Fractions of files and rows skipped, averaged over filters, with the per-filter details."""

    files_skipped: float
    rows_skipped: float
    per_filter: "pd.DataFrame"


def skipping_effectiveness(
    table: "str | Path | DataFrame",
    filters: Iterable["str | Column"],
    spark: "SparkSession | None" = None,
) -> Effectiveness:
    """Average fraction of files and of rows a set of filters lets Delta skip on one table.

    For each filter the query ``table.filter(f)`` is run and measured with :func:`scan_metrics`;
    ``files_skipped = 1 - files_read / files_total`` and ``rows_skipped = 1 - rows_read /
    rows_total`` are averaged over the filters, as the 2018 article defines skipping
    effectiveness. ``table`` is a Delta table path or a DataFrame reading one; filters are SQL
    predicate strings or Columns.
    """
    import pandas as pd

    if isinstance(table, (str, Path)):
        spark = active_spark(spark, "skipping_effectiveness got a table path")
        delta_log_dir(local_path(str(table)))
        table = spark.read.format("delta").load(str(table))
    filters = list(filters)
    if not filters:
        raise DeltaLabError(
            "skipping_effectiveness needs at least one filter; it got none.",
            fix="Pass a list of predicates, e.g. ['src_ip = 42', 'dst_port = 80'].",
        )
    totals = None
    records = []
    for predicate in filters:
        measured = _measure(table.filter(predicate), totals)
        totals = (measured.files_total, measured.bytes_total, measured.rows_total)
        records.append(
            {
                "filter": str(predicate),
                "files_read": measured.files_read,
                "files_total": measured.files_total,
                "rows_read": measured.rows_read,
                "rows_total": measured.rows_total,
                "files_skipped": measured.files_skipped,
                "rows_skipped": measured.rows_skipped,
            }
        )
    per_filter = pd.DataFrame(records)
    return Effectiveness(
        files_skipped=float(per_filter["files_skipped"].mean()),
        rows_skipped=float(per_filter["rows_skipped"].mean()),
        per_filter=per_filter,
    )


def files_that_may_match(stats: "pd.DataFrame", column: str, value: Any) -> list[str]:
    """Paths of the files whose [min, max] of ``column`` can contain ``value`` (or lack stats).

    This is the skipping rule for ``column = value`` applied by hand to :func:`file_stats`; tests
    and notebooks compare it with the files Spark really read.
    """
    kept = kept_by_min_max(stats, column, [value])[0]
    return sorted(stats.loc[kept, "path"])


def kept_by_min_max(stats: "pd.DataFrame", column: str, values: Iterable[Any]) -> "np.ndarray":
    """Delta's skipping rule for ``column = value``, for each value and each file of ``stats``.

    A file is kept (must be read) when ``min <= value <= max`` in its statistics for ``column``,
    or when it has no statistics for ``column``. Returns a boolean array of shape
    (values, files), files in the order of ``stats``' rows.
    """
    import numpy as np

    values = list(values)
    low, high = f"min.{column}", f"max.{column}"
    if low not in stats.columns:
        return np.ones((len(values), len(stats)), dtype=bool)
    known = (stats[low].notna() & stats[high].notna()).to_numpy()
    minimums, maximums = stats[low].to_numpy(), stats[high].to_numpy()
    probe = np.array(values, dtype=object if minimums.dtype == object else None).reshape(-1, 1)
    inside = np.zeros((len(probe), len(stats)), dtype=bool)
    inside[:, known] = (minimums[known] <= probe) & (maximums[known] >= probe)
    return inside | ~known


def equality_lookups(stats: "pd.DataFrame", column: str, values: Iterable[Any]) -> "pd.DataFrame":
    """Files and rows Delta's min/max rule keeps for ``column = value``, for many values at once.

    The rule of :func:`kept_by_min_max` applied to the output of :func:`file_stats`, without
    running a query: one row per value with ``value``, ``files_read``, ``rows_read``
    (numRecords of the kept files), ``files_skipped`` and ``rows_skipped`` (fractions of the
    table). A notebook computes many lookups this way and checks a sample of them against
    :func:`scan_metrics`, the files Spark really opened.
    """
    import pandas as pd

    if stats.empty or "numRecords" not in stats.columns:
        raise DeltaLabError(
            "equality_lookups needs the statistics of a table that has files (the output of file_stats).",
            fix="Pass file_stats(table_path) of a table that holds data.",
        )
    values = list(values)
    rows = stats["numRecords"].to_numpy(dtype="int64")
    kept = kept_by_min_max(stats, column, values)
    files_read = kept.sum(axis=1)
    rows_read = kept.astype("int64") @ rows
    frame = pd.DataFrame({"value": values, "files_read": files_read.astype("int64"), "rows_read": rows_read.astype("int64")})
    frame["files_skipped"] = 1.0 - frame["files_read"] / len(stats)
    frame["rows_skipped"] = 1.0 - frame["rows_read"] / int(rows.sum())
    return frame
