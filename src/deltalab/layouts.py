"""The layout benchmark's data and layouts, shared by notebooks 08 (Z-order) and 13 (liquid clustering).

The 2018 article's experiment: uniformly random connection records ``(src_ip, src_port, dst_ip,
dst_port)``, written in the same number of files under several layouts, so that skipping
effectiveness compares layouts and nothing else. OPTIMIZE decides its own output file count
(``input bytes / spark.databricks.delta.optimize.maxFileSize``); :func:`optimize_into` sets that
size so that OPTIMIZE writes the number of files asked for.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Iterable

from deltalab.errors import DeltaLabError
from deltalab.session import temporary_conf

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

CONNECTION_COLUMNS = ["src_ip", "src_port", "dst_ip", "dst_port"]
CONNECTION_SCHEMA = "src_ip BIGINT, src_port INT, dst_ip BIGINT, dst_port INT"
LAYOUTS = ["random", "linear", "zorder_all", "zorder_2", "hilbert"]


def connection_records(spark: "SparkSession", files: int, rows: int, seed: int) -> "DataFrame":
    """``files * rows`` uniform random connection records in ``files`` partitions, with their row ``id``.

    Seeded ``rand`` over ``spark.range`` with a fixed partition count gives the same rows on every
    run; the ``id`` lets a notebook sample lookup values that exist.
    """
    from pyspark.sql import functions as F

    if files < 1 or rows < 1:
        raise DeltaLabError(
            f"connection_records needs at least one file and one row per file; it got files={files}, rows={rows}.",
            fix="Pass positive counts, e.g. connection_records(spark, 100, 1000, seed=42).",
        )
    return spark.range(0, files * rows, 1, files).select(
        "id",
        (F.rand(seed) * 2**32).cast("long").alias("src_ip"),
        (F.rand(seed + 1) * 2**16).cast("int").alias("src_port"),
        (F.rand(seed + 2) * 2**32).cast("long").alias("dst_ip"),
        (F.rand(seed + 3) * 2**16).cast("int").alias("dst_port"),
    )


def table_size(spark: "SparkSession", path: str | Path) -> int:
    """The bytes of a Delta table's live data files (``DESCRIBE DETAIL``'s ``sizeInBytes``)."""
    return int(spark.sql(f"DESCRIBE DETAIL delta.`{path}`").first()["sizeInBytes"])


def optimize_into(spark: "SparkSession", path: str | Path, files: int, clause: str = "") -> None:
    """Run ``OPTIMIZE`` on a table so that it writes about ``files`` files.

    OPTIMIZE range-partitions its input into ``max(1, bytes / maxFileSize)`` parts; setting
    ``spark.databricks.delta.optimize.maxFileSize`` to the table's size divided by ``files``, for
    this command only, asks for ``files`` parts. ``clause`` follows the table name, e.g.
    ``"ZORDER BY (a, b)"`` or ``"FULL"``.
    """
    if files < 1:
        raise DeltaLabError(f"optimize_into needs files >= 1; it got {files}.", fix="Ask for at least one file.")
    max_file_size = max(1, table_size(spark, path) // files)
    with temporary_conf(spark, {"spark.databricks.delta.optimize.maxFileSize": str(max_file_size)}):
        spark.sql(f"OPTIMIZE delta.`{path}` {clause}")


def build_layouts(
    spark: "SparkSession",
    frame: "DataFrame",
    root: str | Path,
    files: int,
    layouts: Iterable[str] = LAYOUTS,
    prefix: str = "",
) -> dict[str, Path]:
    """Write the connection records ``frame`` once per layout, each in ``files`` files, under ``root``.

    ``random``: as generated (one file per partition of ``frame``). ``linear``: range-partitioned
    on the four columns, i.e. sorted by ``src_ip`` first. ``zorder_all`` / ``zorder_2``: written
    as 2 files, then ``OPTIMIZE ... ZORDER BY`` the four columns / ``(src_ip, dst_ip)``.
    ``hilbert``: a table created ``CLUSTER BY`` the four columns (liquid clustering), 2 files
    appended, then ``OPTIMIZE``. Returns each layout's table path, ``root/<prefix><layout>``.
    """
    layouts = list(layouts)
    unknown = [name for name in layouts if name not in LAYOUTS]
    if unknown:
        raise DeltaLabError(f"build_layouts does not know the layouts {unknown}.", fix=f"Use names from {LAYOUTS}.")
    paths = {name: Path(root) / f"{prefix}{name}" for name in layouts}
    for name in layouts:
        path = str(paths[name])
        if name == "random":
            frame.write.format("delta").save(path)
        elif name == "linear":
            frame.repartitionByRange(files, *CONNECTION_COLUMNS).write.format("delta").save(path)
        elif name == "hilbert":
            spark.sql(f"CREATE TABLE delta.`{path}` ({CONNECTION_SCHEMA}) USING delta CLUSTER BY ({', '.join(CONNECTION_COLUMNS)})")
            frame.coalesce(2).write.format("delta").mode("append").save(path)
            optimize_into(spark, path, files)
        else:
            frame.coalesce(2).write.format("delta").save(path)
            zorder_columns = CONNECTION_COLUMNS if name == "zorder_all" else ["src_ip", "dst_ip"]
            optimize_into(spark, path, files, f"ZORDER BY ({', '.join(zorder_columns)})")
    return paths
