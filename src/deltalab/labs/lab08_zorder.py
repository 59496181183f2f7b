"""Lab 08 (Z-order): interleave bits like Delta, and choose Z-order columns for a query mix.

``check_zorder_columns`` runs a real ``OPTIMIZE ... ZORDER BY`` with the student's columns and
measures the files the query mix skips with ``deltalab.skipping.skipping_effectiveness``.
"""

from __future__ import annotations

import random
from typing import Callable

from deltalab.curves import z_value
from deltalab.labs.harness import CheckFailed, call_student, fresh_dir, lab_spark, passed
from deltalab.session import temporary_conf
from deltalab.skipping import skipping_effectiveness

__all__ = [
    "CheckFailed",
    "ZORDER_QUERY_MIX",
    "ZORDER_TARGET",
    "check_interleave_bits",
    "check_zorder_columns",
    "make_zorder_table",
    "weighted_files_skipped",
]


def check_interleave_bits(interleave_bits: Callable[[list[int], int], int]) -> None:
    """Check ``interleave_bits(values, bits)`` on hand-picked and seeded random inputs."""
    check = "interleave_bits"
    cases: list[tuple[list[int], int]] = [
        ([1, 0], 1), ([0, 1], 1), ([3, 0], 2), ([0, 3], 2), ([2, 1], 2), ([5], 3), ([1, 2, 4], 3),
    ]
    rng = random.Random(8)
    for _ in range(40):
        dims, bits = rng.randint(1, 4), rng.randint(1, 10)
        cases.append(([rng.randrange(2**bits) for _ in range(dims)], bits))
    for values, bits in cases:
        expected = int(z_value([[value] for value in values], bits)[0])
        answer = call_student(
            check, interleave_bits, "interleave_bits", list(values), bits,
            hint="take bit (bits-1) of every value, then bit (bits-2) of every value, ... down to bit 0.",
        )
        if isinstance(answer, bool) or not isinstance(answer, int):
            raise CheckFailed(
                check,
                f"interleave_bits({values}, {bits}) returned {answer!r}; it must return an int.",
                "build the Z-value as an int with shifts: z = (z << 1) | bit.",
            )
        if answer != expected:
            width = bits * len(values)
            raise CheckFailed(
                check,
                f"interleave_bits({values}, {bits}) returned {answer} (0b{answer:0{width}b} if it fits), "
                f"expected {expected} (0b{expected:0{width}b}).",
                "the order of the bits: most significant bit first, and within one bit position the first "
                "value's bit comes before the second's.",
            )
    passed(check, f"all {len(cases)} cases give the Z-value Delta's interleaving gives.")


#: The query mix of lab 08: (predicate, share of the workload).
ZORDER_QUERY_MIX: list[tuple[str, float]] = [
    ("user_id = 77", 0.8),
    ("amount >= 990", 0.2),
]
#: The skipping effectiveness (weighted share of files skipped) the Z-order columns must reach.
ZORDER_TARGET = 0.6


def make_zorder_table(spark, path: str) -> None:
    """Write the lab 08 `events` table at ``path``: 4,096 events in 16 files, every file spanning all users and all times (no skipping yet)."""
    from pyspark.sql import functions as F

    df = spark.range(0, 4096).select(
        (F.abs(F.hash("id", F.lit(1))) % 256).cast("int").alias("user_id"),
        ((F.col("id") * 997) % 4096).cast("int").alias("ts"),
        (F.abs(F.hash("id", F.lit(2))) % 1000).cast("int").alias("amount"),
    )
    df.repartition(16).write.format("delta").save(path)


def weighted_files_skipped(spark, table_path: str, query_mix: list[tuple[str, float]]) -> float:
    """Share of the table's files the queries of ``query_mix`` skip, weighted by each query's share."""
    measured = skipping_effectiveness(table_path, [predicate for predicate, _ in query_mix], spark=spark)
    weights = [weight for _, weight in query_mix]
    return float(sum(w * skipped for w, skipped in zip(weights, measured.per_filter["files_skipped"])))


def check_zorder_columns(zorder_columns: Callable[[], list[str]]) -> None:
    """OPTIMIZE ZORDER BY the student's columns on a fresh table and measure skipping."""
    check = "zorder_columns"
    spark = lab_spark()
    answer = call_student(check, zorder_columns, "zorder_columns",
                   hint="return a list of column names, e.g. ['amount'].")
    if isinstance(answer, str) or not isinstance(answer, (list, tuple)) or not all(
        isinstance(c, str) for c in answer
    ):
        raise CheckFailed(check, f"zorder_columns returned {answer!r}; it must return a list of column names.",
                          "the `return` line: a list such as ['amount'].")
    columns = list(answer)
    allowed = ["user_id", "ts", "amount"]
    unknown = [c for c in columns if c not in allowed]
    if not columns or unknown or len(columns) > 2 or len(set(columns)) != len(columns):
        raise CheckFailed(
            check,
            f"zorder_columns returned {columns}; it must name one or two distinct columns of {allowed}.",
            "the table schema printed at the top of the lab.",
        )
    reached = _ZORDER_RESULTS.get(tuple(columns))
    if reached is None:
        reached = _ZORDER_RESULTS[tuple(columns)] = _zorder_and_measure(spark, columns)
    if reached < ZORDER_TARGET:
        raise CheckFailed(
            check,
            f"Z-ordering by {columns} skips {reached:.0%} of the files for the query mix; the target is "
            f"{ZORDER_TARGET:.0%}.",
            "which columns the queries of ZORDER_QUERY_MIX filter on, and how much of the workload each one is; "
            "a column no query filters on buys nothing.",
        )
    passed(check, f"Z-ordering by {columns} skips {reached:.0%} of the files (target {ZORDER_TARGET:.0%}).")


_ZORDER_RESULTS: dict[tuple[str, ...], float] = {}


def _zorder_and_measure(spark, columns: list[str]) -> float:
    """Build the events table, OPTIMIZE ZORDER BY ``columns``, return the skipping effectiveness."""
    path = str(fresh_dir("lab08") / "events")
    make_zorder_table(spark, path)
    with temporary_conf(spark, {"spark.databricks.delta.optimize.maxFileSize": "4096",
                                "spark.sql.files.maxRecordsPerFile": "256"}):
        spark.sql(f"OPTIMIZE delta.`{path}` ZORDER BY ({', '.join(columns)})")
    return weighted_files_skipped(spark, path, ZORDER_QUERY_MIX)


