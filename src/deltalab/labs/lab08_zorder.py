"""Lab 08 (Z-order): interleave bits like Delta, and choose Z-order columns for a query mix.

* :func:`check_interleave_bits` compares ``interleave_bits(values, bits)`` with
  :func:`deltalab.curves.z_value` (Delta's order of bits) on the documented examples and on cases
  drawn for the run (:func:`interleave_cases`: one to five values, 1 to 16 bits, zeros, the largest
  value ``bits`` allows, values much smaller than ``bits`` needs). The student's function must not
  change the list it gets (:func:`deltalab.labs.student.call_student`) nor call the course's own
  interleaving.
* :func:`check_zorder_columns` asks ``zorder_columns(query_mix)`` for the lab's example mix and for
  a mix drawn for the run (:func:`random_query_mix`), runs a real ``OPTIMIZE ... ZORDER BY`` with the
  answer on the `events` table, and measures the share of files the mix skips (the files Delta's
  data skipping leaves each query, ``inputFiles()``) against Z-ordering by the column that carries most
  of the mix, alone and with the next one: the answer must skip about as much as the best of these.
  The Z-ordered copies of the example table depend only on the columns, so they are built once per
  process; the mix, and so every measurement, is new each run. A ``zorder_columns`` that runs Spark
  (experiments instead of reasoning) is refused.
"""

from __future__ import annotations

import numbers
import random
import re
import shutil
from pathlib import Path
from typing import Any, Callable

from deltalab.curves import hilbert_index, z_value
from deltalab.labs.report import CheckFailed, passed, short_repr
from deltalab.labs.student import Watched, call_student, exercise_check, lab_spark
from deltalab.labs.tables import build_once, check_seed
from deltalab.session import temporary_conf

__all__ = [
    "CheckFailed",
    "COLUMNS",
    "ZORDER_QUERY_MIX",
    "ZORDER_TOLERANCE",
    "check_interleave_bits",
    "check_zorder_columns",
    "interleave_cases",
    "make_zorder_table",
    "random_query_mix",
    "weighted_files_skipped",
    "zorder_effectiveness",
]


# --------------------------------------------------------------------------------------------
# Exercise 1: interleaving bits
# --------------------------------------------------------------------------------------------

def interleave_cases(rng: random.Random) -> list[tuple[list[int], int]]:
    """The (values, bits) cases one run of the check asks: the two documented examples, then cases
    drawn by ``rng``: one to five values of 1 to 16 bits (at most 62 bits in all), all zeros, all at
    the largest value ``bits`` allows, values far below ``2**bits`` (their leading zeros count),
    a single value, and one bit per value."""
    cases: list[tuple[list[int], int]] = [([0b11, 0b00], 2), ([0b00, 0b11], 2)]
    kinds = ["random"] * 24 + ["zeros", "maximum", "small", "small", "one value", "one bit", "mixed", "mixed"]
    for kind in kinds:
        dims = 1 if kind == "one value" else rng.randint(2, 5)
        bits = 1 if kind == "one bit" else rng.randint(1, min(16, 62 // dims))
        top = (1 << bits) - 1
        if kind == "zeros":
            values = [0] * dims
        elif kind == "maximum":
            values = [top] * dims
        elif kind == "small":
            bits = max(bits, 6)
            values = [rng.randrange(1 << (bits // 3)) for _ in range(dims)]
        elif kind == "mixed":
            values = [rng.choice([0, top, rng.randrange(top + 1)]) for _ in range(dims)]
        else:
            values = [rng.randrange(top + 1) for _ in range(dims)]
        cases.append((values, bits))
    rng.shuffle(cases)
    return cases


def _reference(values: list[int], bits: int) -> int:
    """The Z-value Delta's interleaving gives: most significant bits first, the first value's bit first."""
    return int(z_value([[value] for value in values], bits)[0])


def _low_bits_first(values: list[int], bits: int) -> int:
    """The slip of starting at bit 0: bit 0 of every value first, bit ``bits-1`` last."""
    z = 0
    for level in range(bits):
        for value in values:
            z = (z << 1) | ((value >> level) & 1)
    return z


def _unpadded(values: list[int]) -> int:
    """The slip of interleaving binary strings without leading zeros (``format(v, 'b')``)."""
    strings = [format(value, "b") for value in values]
    digits = [s[i] for i in range(max(map(len, strings))) for s in strings if i < len(s)]
    return int("".join(digits), 2)


def _concatenated(values: list[int], bits: int) -> int:
    """The slip of writing each value whole, one after the other."""
    z = 0
    for value in values:
        z = (z << bits) | value
    return z


#: Slips of exercise 1, each with where to look: the hint of the one that explains every answer of a run.
_SLIPS: list[tuple[Callable[[list[int], int], int], str]] = [
    (lambda values, bits: _reference(list(reversed(values)), bits),
     "within one bit position the first value's bit comes first, then the second value's, and so on."),
    (_low_bits_first, "start from the most significant bit (bit bits-1) of every value and end with bit 0."),
    (_concatenated, "interleave: one bit of each value in turn, not each value whole one after the other."),
    (lambda values, bits: _unpadded(values),
     "every value has exactly `bits` bits: its leading zeros count (format(v, f'0{bits}b'), not format(v, 'b'))."),
]


def _bit_order_hint(answers: list[tuple[list[int], int, int]]) -> str:
    """Where to look, from the slip that gives every answer of the run (the expected value is never shown)."""
    for slip, hint in _SLIPS:
        if all(slip(values, bits) == answer for values, bits, answer in answers):
            return hint
    return ("take bit (bits-1) of every value, first value first, then bit (bits-2) of every value, ... down to bit 0, "
            "shifting each bit into z: z = (z << 1) | bit.")


@exercise_check
def check_interleave_bits(interleave_bits: Callable[[list[int], int], int]) -> None:
    """Check ``interleave_bits(values, bits)`` on the documented examples and on cases drawn for the run."""
    check = "interleave_bits"
    seed = check_seed()
    cases = interleave_cases(random.Random(seed))
    watched = Watched(interleave_bits, helpers=[z_value, hilbert_index]) if callable(interleave_bits) else interleave_bits
    answers: list[tuple[list[int], int, int]] = []
    for values, bits in cases:
        answer = call_student(
            check, watched, "interleave_bits", list(values), bits,
            hint="take bit (bits-1) of every value, then bit (bits-2) of every value, ... down to bit 0.",
        )
        if isinstance(watched, Watched) and watched.helpers_called:
            raise CheckFailed(
                check,
                f"interleave_bits calls {watched.helpers_called[0]}, the course's own interleaving.",
                "write the interleaving yourself, with shifts and masks: (value >> bit) & 1, and z = (z << 1) | bit.",
            )
        if isinstance(answer, bool) or not isinstance(answer, numbers.Integral):
            raise CheckFailed(
                check,
                f"interleave_bits({values}, {bits}) returned {short_repr(answer)}; it must return an int.",
                "build the Z-value as an int with shifts: z = (z << 1) | bit.",
            )
        answers.append((values, bits, int(answer)))
    wrong = [(values, bits, answer) for values, bits, answer in answers if answer != _reference(values, bits)]
    if wrong:
        values, bits, answer = min(wrong, key=lambda case: (len(case[0]) * case[1], case[0]))   # the easiest to follow
        shown = f"{answer} (0b{answer:b})" if answer >= 0 else str(answer)
        more = f", and {len(wrong) - 1} more of the {len(answers)} cases of this run are wrong too" if len(wrong) > 1 else ""
        raise CheckFailed(check, f"interleave_bits({values}, {bits}) returned {shown}{more}.", _bit_order_hint(answers),
                          seed=seed)
    passed(check, f"all {len(cases)} cases of this run give the Z-value Delta's interleaving gives.")


# --------------------------------------------------------------------------------------------
# Exercise 2: choosing Z-order columns
# --------------------------------------------------------------------------------------------

#: The columns of the `events` table.
COLUMNS = ("user_id", "ts", "amount")

#: The lab's example query mix: (predicate, share of the workload).
ZORDER_QUERY_MIX: list[tuple[str, float]] = [
    ("user_id = 77", 0.8),
    ("amount >= 990", 0.2),
]
#: How much less of the files (a share, 0.05 = 5 points) an answer may skip than the best choice measured.
ZORDER_TOLERANCE = 0.05

#: OPTIMIZE settings that give the 4,096-row table about 16 files (notebook 08 uses the same idea).
_OPTIMIZE_CONF = {"spark.databricks.delta.optimize.maxFileSize": "4096", "spark.sql.files.maxRecordsPerFile": "256"}


def make_zorder_table(spark: Any, path: str) -> None:
    """Write the lab 08 `events` table at ``path``: 4,096 events in 16 files, every file spanning all
    users and all times (no skipping yet)."""
    from pyspark.sql import functions as F

    df = spark.range(0, 4096).select(
        (F.abs(F.hash("id", F.lit(1))) % 256).cast("int").alias("user_id"),
        ((F.col("id") * 997) % 4096).cast("int").alias("ts"),
        (F.abs(F.hash("id", F.lit(2))) % 1000).cast("int").alias("amount"),
    )
    df.repartition(16).write.format("delta").save(path)


def weighted_files_skipped(spark: Any, table_path: str, query_mix: list[tuple[str, float]]) -> float:
    """Share of the table's files the queries of ``query_mix`` skip, weighted by each query's share.

    A query's files are those Delta's data skipping leaves it, ``df.filter(predicate).inputFiles()``
    (the same count as the scan's "number of files read", without running the query).
    """
    from deltalab.files import read_table

    table = read_table(table_path, spark=spark)
    total = len(table.inputFiles())
    return float(sum(share * (1 - len(table.filter(predicate).inputFiles()) / total) for predicate, share in query_mix))


def _predicate(column: str, rng: random.Random) -> str:
    """A selective filter on ``column`` of the `events` table, in one of a few SQL forms."""
    if column == "user_id":
        k = rng.randrange(256)
        return rng.choice([f"user_id = {k}", f"user_id IN ({k}, {(k + 1) % 256})", f"{k} = user_id"])
    if column == "ts":
        start, width = rng.randrange(4000), rng.randint(15, 63)
        return rng.choice([f"ts BETWEEN {start} AND {start + width}", f"ts >= {4095 - width}", f"ts < {width}"])
    start, width = rng.randrange(990), rng.randint(0, 9)
    return rng.choice([f"amount BETWEEN {start} AND {start + width}", f"amount >= {999 - width}", f"amount = {start}"])


def random_query_mix(rng: random.Random) -> list[tuple[str, float]]:
    """A query mix for one run: 80-90 % of the workload filters one column (``ts`` or ``amount``, never
    the example's ``user_id``), the rest another one, in random order.

    Its shape changes too: either the dominant column's share is spread over many small queries, so
    that the single largest query filters the minor column, or the minor column has more queries
    than the dominant one. An answer must add up the shares per column.
    """
    dominant = rng.choice(["ts", "amount"])
    minor = rng.choice([c for c in COLUMNS if c != dominant])
    if rng.random() < 0.5:                              # the largest single query is on the minor column
        minor_share = rng.choice([15, 20])
        count = (100 - minor_share) // minor_share + 1
        queries = [(_predicate(minor, rng), minor_share)]
        queries += [(_predicate(dominant, rng), (100 - minor_share) / count) for _ in range(count)]
    else:                                               # the minor column has more queries
        minor_share, minor_count = rng.choice([10, 15, 20]), rng.randint(2, 3)
        dominant_count = rng.randint(1, minor_count - 1)
        queries = [(_predicate(minor, rng), minor_share / minor_count) for _ in range(minor_count)]
        queries += [(_predicate(dominant, rng), (100 - minor_share) / dominant_count) for _ in range(dominant_count)]
    rng.shuffle(queries)
    return [(predicate, round(share / 100, 4)) for predicate, share in queries]


def _column_shares(query_mix: list[tuple[str, float]]) -> dict[str, float]:
    """The share of the mix that filters each column (a query naming two columns counts for both)."""
    shares = {column: 0.0 for column in COLUMNS}
    for predicate, share in query_mix:
        for column in COLUMNS:
            if re.search(rf"\b{column}\b", predicate):
                shares[column] += share
    return shares


def _reference_choices(query_mix: list[tuple[str, float]]) -> list[tuple[str, ...]]:
    """What the answer is measured against: the column most of the mix filters on, alone and with the next one."""
    ranked = sorted(COLUMNS, key=lambda c: -_column_shares(query_mix)[c])
    return [(ranked[0],), (ranked[0], ranked[1])]


def _example_table(spark: Any) -> str:
    """The `events` table of the lab, built once per process (the checks only copy it)."""
    def build(root: Path) -> str:
        make_zorder_table(spark, str(root / "events"))
        return str(root / "events")

    return build_once("lab08_events", build, intact=lambda path: (Path(path) / "_delta_log").is_dir())


def _zordered(spark: Any, columns: tuple[str, ...]) -> str:
    """A copy of the example table after ``OPTIMIZE ZORDER BY columns``, built once per process and column list."""
    def build(root: Path) -> str:
        path = root / "events"
        shutil.copytree(_example_table(spark), path)
        with temporary_conf(spark, _OPTIMIZE_CONF):
            spark.sql(f"OPTIMIZE delta.`{path}` ZORDER BY ({', '.join(columns)})")
        return str(path)

    return build_once(f"lab08_zorder_{'_'.join(columns)}", build,
                      intact=lambda path: (Path(path) / "_delta_log" / f"{1:020d}.json").is_file())


def zorder_effectiveness(spark: Any, columns: tuple[str, ...] | list[str], query_mix: list[tuple[str, float]]) -> float:
    """The weighted share of files ``query_mix`` skips on the `events` table Z-ordered by ``columns``."""
    return weighted_files_skipped(spark, _zordered(spark, tuple(columns)), query_mix)


def _columns_answer(check: str, zorder_columns: Callable[..., Any], query_mix: list[tuple[str, float]]) -> list[str]:
    answer = call_student(check, zorder_columns, "zorder_columns", query_mix,
                          hint="return a list of column names, e.g. ['amount'].")
    if isinstance(answer, str) or not isinstance(answer, (list, tuple)) or not all(isinstance(c, str) for c in answer):
        raise CheckFailed(check, f"zorder_columns returned {answer!r}; it must return a list of column names.",
                          "the `return` line: a list such as ['amount'].")
    columns = list(answer)
    unknown = [c for c in columns if c not in COLUMNS]
    if not columns or unknown or len(columns) > 2 or len(set(columns)) != len(columns):
        raise CheckFailed(
            check,
            f"zorder_columns returned {columns}; it must name one or two distinct columns of {list(COLUMNS)}.",
            "the table schema printed at the top of the lab.",
        )
    return columns


def _judge(check: str, spark: Any, columns: list[str], query_mix: list[tuple[str, float]], which: str,
           seed: int | None) -> float:
    """The share the answer skips; a CheckFailed when a reference choice skips clearly more."""
    reached = zorder_effectiveness(spark, columns, query_mix)
    best = max(zorder_effectiveness(spark, choice, query_mix) for choice in _reference_choices(query_mix))
    if reached < best - ZORDER_TOLERANCE:
        shown = which if seed is None else f"{which} {query_mix}"
        raise CheckFailed(
            check,
            f"for {shown}, Z-ordering by {columns} skips {reached:.0%} of the files; another choice of one or two "
            "columns skips clearly more.",
            "add up the shares of the queries per column: Z-order by the column most of the workload filters on; "
            "a column few or no queries filter on dilutes the clustering of the others (notebook 08).",
            seed=seed,
        )
    return reached


@exercise_check
def check_zorder_columns(zorder_columns: Callable[[list[tuple[str, float]]], list[str]]) -> None:
    """``zorder_columns(query_mix)`` for the example mix and a mix drawn for the run, measured after a real
    OPTIMIZE ZORDER BY against the best of the reference choices."""
    check = "zorder_columns"
    spark = lab_spark()
    seed = check_seed()
    mix = random_query_mix(random.Random(seed))
    watched = (Watched(zorder_columns, helpers=[_reference_choices, _column_shares, zorder_effectiveness])
               if callable(zorder_columns) else zorder_columns)
    example_columns = _columns_answer(check, watched, list(ZORDER_QUERY_MIX))
    drawn_columns = _columns_answer(check, watched, mix)
    if isinstance(watched, Watched) and watched.helpers_called:
        raise CheckFailed(check, f"zorder_columns calls {watched.helpers_called[0]}, the check's own reference.",
                          "decide from the predicates and their shares yourself.")
    if isinstance(watched, Watched) and watched.jobs:
        raise CheckFailed(
            check,
            f"zorder_columns ran {watched.jobs} Spark job(s): it measured instead of choosing from the mix.",
            "decide from the predicates and their shares alone; experiment in your own cells, not inside zorder_columns.",
        )
    example = _judge(check, spark, example_columns, ZORDER_QUERY_MIX, "the example mix ZORDER_QUERY_MIX", None)
    drawn = _judge(check, spark, drawn_columns, mix, "the query mix drawn for this run", seed)
    passed(check, f"Z-ordering by {example_columns} skips {example:.0%} of the files for the example mix, and by "
                  f"{drawn_columns} {drawn:.0%} for this run's mix: as much as the best choice measured.")
