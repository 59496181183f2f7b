"""Checks for lab 07 (data skipping): the files a filter makes Delta read, decided from the log.

``check_files_to_read`` runs the learner's ``files_to_read(table_path, predicate)`` on the example
table and on a table generated for the run, for predicates drawn for the run, and compares the
answer with the files Spark plans to read for the same filter (``DataFrame.inputFiles()`` after
Delta's partition pruning and data skipping). Every answer comes from Delta, never from a stored value.

The generated table is partitioned either by a string column whose values the log must URL-encode
(``new york``, ``a=b``, ``zürich``) with a null partition, or by an integer column (with a null partition too) whose values
compare wrongly as strings (``9`` against ``10``). Its rows come in appends of overlapping id
windows (late and out-of-order data), with nulls, a file whose ``score`` is null in every row (no
``minValues`` for it), strings longer than the 32 characters Delta keeps in its statistics, a
DELETE (deletion vectors drawn) and a checkpoint or not. The predicates: every kind of leaf
(``=``, ``!=``, ``<``, ``<=``, ``>``, ``>=``, ``in``, ``is null``, ``is not null``, ``starts with``) on
data columns and on the partition column, with values at the files' own bounds, then ``and`` and
``or`` of them (an ``or`` joins leaves of one kind of column: Delta 4.4 skips no file for an ``or``
of a partition column and a data column).

Delta 4.4's rules (``DataFiltersBuilder.scala``): partition values are compared exactly (as the
column's type, SQL's NULL semantics); a data column's leaf reads a file when its statistics allow
a match: ``min <= v <= max`` for ``=``; ``!=`` skips only a file whose min and max both equal v; ``in``
tests one range, the list's smallest to largest value, against [min, max]; ``is null`` needs
``nullCount > 0``, ``is not null`` ``nullCount < numRecords``; ``starts with s`` compares the first
``len(s)`` characters of min and max with s; a comparison on a column whose values are all null in
the file (no min or max) skips it.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from deltalab.labs.report import CheckFailed, passed
from deltalab.labs.student import call_student, calls_watched, exercise_check, lab_spark, spark_jobs_started
from deltalab.labs.tables import AWKWARD_VALUES, build_once, check_seed, fresh_dir
from deltalab.locations import hadoop_path
from deltalab.log import replay_log

__all__ = ["CheckFailed", "check_files_to_read", "check_stats_columns", "files_spark_reads", "predicate_sql"]

COMPARISONS = ("=", "!=", "<", "<=", ">", ">=")
Predicate = tuple


def _literal(value: Any) -> str:
    if isinstance(value, str):
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    return str(int(value))


def predicate_sql(predicate: Predicate) -> str:
    """The SQL filter a predicate stands for: ``("and", ("=", "id", 3), ("is null", "name"))`` is
    ``(`id` = 3 AND `name` IS NULL)``. What the check runs in Spark, and how messages show a predicate."""
    kind = predicate[0]
    if kind in ("and", "or"):
        return f"({predicate_sql(predicate[1])} {kind.upper()} {predicate_sql(predicate[2])})"
    column = f"`{predicate[1]}`"
    if kind in COMPARISONS:
        return f"{column} {kind} {_literal(predicate[2])}"
    if kind == "in":
        return f"{column} IN ({', '.join(_literal(v) for v in predicate[2])})"
    if kind == "is null":
        return f"{column} IS NULL"
    if kind == "is not null":
        return f"{column} IS NOT NULL"
    if kind == "starts with":
        return f"startswith({column}, {_literal(predicate[2])})"
    raise ValueError(f"not a predicate: {predicate!r}")


def _leaves(predicate: Predicate) -> list[Predicate]:
    if predicate[0] in ("and", "or"):
        return _leaves(predicate[1]) + _leaves(predicate[2])
    return [predicate]


@dataclass
class _SkippingTable:
    """A table ``files_to_read`` is asked about, with the predicates of this run."""

    path: str
    what: str
    partition_column: str
    int_partition: bool
    predicates: list[Predicate]
    seed: int | None = None
    all_files: set[str] = field(default_factory=set)


def files_spark_reads(spark: Any, path: str, predicate: Predicate) -> set[str]:
    """The files Spark plans to open for the filter, relative to the table folder as on disk: the
    query's ``inputFiles()``, which Delta's partition pruning and data skipping have already cut when
    the query is planned (no job runs; tests/test_lab07_skipping.py checks it against the scan's
    "number of files read" metric)."""
    root = Path(path).resolve()
    query = spark.read.format("delta").load(path).where(predicate_sql(predicate))
    return {Path(hadoop_path(uri)).resolve().relative_to(root).as_posix() for uri in query.inputFiles()}


# ------------------------------------------------------------------------------------ the tables


def _example_table(spark: Any) -> _SkippingTable:
    """``orders``: partitioned by country, four appends of 250 ids each, one DELETE (the table is built once per process)."""
    def build(folder: Path) -> str:
        path = str(folder / "orders")
        spark.sql(f"CREATE TABLE delta.`{path}` (id BIGINT, customer STRING, amount INT, country STRING) USING delta "
                  "PARTITIONED BY (country)")
        for batch in range(4):
            rows = [(i, f"c{i % 40:03d}" if i % 11 else None, (i * 37) % 1000, ("FR", "DE", "US")[i % 3])
                    for i in range(batch * 250, batch * 250 + 250)]
            (spark.createDataFrame(rows, "id BIGINT, customer STRING, amount INT, country STRING").coalesce(1)
             .write.format("delta").mode("append").save(path))
        spark.sql(f"DELETE FROM delta.`{path}` WHERE id BETWEEN 600 AND 620")
        return path

    path = build_once("lab07_example", build, intact=lambda p: (Path(p) / "_delta_log" / f"{4:020d}.json").is_file())
    predicates: list[Predicate] = [
        ("=", "id", 42), ("<", "id", 250), (">=", "amount", 999), ("!=", "country", "DE"), ("in", "id", (5, 995)),
        ("is null", "customer"), ("starts with", "customer", "c03"), ("and", ("=", "country", "FR"), ("<", "id", 300)),
        ("or", ("<", "id", 10), (">", "id", 990)),
    ]
    return _SkippingTable(path, "the example table `orders` (partitioned by country)", "country", False, predicates)


def _write_generated(spark: Any, path: str, rng: random.Random) -> tuple[str, bool]:
    """Write a table for the run (see the module's docstring); returns its partition column and whether it is an int."""
    int_partition = rng.random() < 0.5
    partition_column = "day" if int_partition else "city"
    values: list[Any] = [9, 10, rng.choice([2, 11, 30])] if int_partition \
        else rng.sample(list(AWKWARD_VALUES), 3) + [None]                  # 9 and 10: '9' > '10' as strings
    schema = f"id BIGINT, name STRING, score INT, {partition_column} {'INT' if int_partition else 'STRING'}"
    properties = [f"'delta.enableDeletionVectors' = '{str(rng.random() < 0.5).lower()}'"]
    if rng.random() < 0.6:
        properties.append(f"'delta.checkpointInterval' = '{rng.randint(2, 4)}'")
    spark.sql(f"CREATE TABLE delta.`{path}` ({schema}) USING delta PARTITIONED BY ({partition_column}) "
              f"TBLPROPERTIES ({', '.join(properties)})")
    appends = rng.randint(4, 6)
    all_null_score, constant_score = rng.sample(range(appends), 2)
    constant = rng.randint(-50, 50)
    for batch in range(appends):
        start = rng.randint(0, 400)                                    # windows overlap and come in any order
        rows = []
        for i in range(start, start + rng.randint(20, 80)):
            name = None if rng.random() < 0.1 else f"n{rng.randint(0, 99):02d}" + ("x" * 40 if rng.random() < 0.05 else "")
            score = None if batch == all_null_score or rng.random() < 0.05 else rng.randint(-50, 50)
            if batch == constant_score:
                score = constant                                       # min = max: the one file != can skip
            rows.append((i, name, score, rng.choice(values)))
        (spark.createDataFrame(rows, schema).coalesce(1).write.format("delta").mode("append").save(path))
    if rng.random() < 0.7:
        spark.sql(f"DELETE FROM delta.`{path}` WHERE id % {rng.randint(5, 9)} = 0")
    if int_partition:   # a NULL partition too (ids past every window; drawn from nothing, so the draws above stay)
        rows = [(i, f"n{i % 100:02d}", i % 50 - 25, None) for i in range(500, 500 + 10 + appends)]
        spark.createDataFrame(rows, schema).coalesce(1).write.format("delta").mode("append").save(path)
    return partition_column, int_partition, constant


def _bounds(path: str, column: str) -> list[Any]:
    """Every file's min and max of a data column (the values a predicate should sit on)."""
    found = []
    for add in replay_log(path).files.values():
        stats = add.get("stats") or {}
        for kind in ("minValues", "maxValues"):
            if column in (stats.get(kind) or {}):
                found.append(stats[kind][column])
    return found


def _generated_predicates(path: str, partition_column: str, int_partition: bool, constant: int,
                          rng: random.Random) -> list[Predicate]:
    """One leaf of each kind on data columns, the partition column's leaves, then and/or of them,
    then ``<=`` and ``>=`` exactly on the partition column's smallest and largest values. Values sit on the files'
    own bounds; ``!=`` asks for the value of the file whose score is constant,
    and the prefix is the start of a file's smallest name, where comparing whole strings goes wrong."""
    id_bounds = _bounds(path, "id") or [0]
    score_bounds = _bounds(path, "score") or [0]
    smallest_names = [str(add["stats"]["minValues"]["name"]) for add in replay_log(path).files.values()
                      if "name" in ((add.get("stats") or {}).get("minValues") or {})] or ["n0"]
    partition_values = sorted({add.get("partitionValues", {}).get(partition_column)
                               for add in replay_log(path).files.values()} - {None}) or ["1"]

    def near(bounds: list[Any]) -> int:
        return int(rng.choice(bounds)) + rng.choice([-1, 0, 0, 1])

    def partition_value() -> Any:
        value = rng.choice(partition_values)
        return int(value) if int_partition else value

    data_leaves: list[Predicate] = [
        ("=", "id", near(id_bounds)), ("<", "id", near(id_bounds)), ("<=", "score", near(score_bounds)),
        (">", "id", near(id_bounds)), (">=", "score", near(score_bounds)), ("!=", "score", constant),
        ("in", "id", tuple(sorted({near(id_bounds), near(id_bounds)}))), ("=", "score", near(score_bounds)),
        ("is null", "score"), ("is not null", "score"), ("is null", "name"),
        ("starts with", "name", rng.choice(smallest_names)[:2]),
    ]
    partition_leaves: list[Predicate] = [
        ("=", partition_column, partition_value()),
        (rng.choice(["<", ">", "<=", ">="]), partition_column, rng.choice([9, 10]) if int_partition else partition_value()),
        ("is null", partition_column), ("!=", partition_column, partition_value()),
        ("in", partition_column, tuple(sorted({partition_value(), partition_value()}))),
    ]
    if not int_partition:
        partition_leaves.append(("starts with", partition_column, str(partition_value())[:2]))
    combined: list[Predicate] = [
        ("and", rng.choice(partition_leaves), rng.choice(data_leaves)),
        ("or", rng.choice(data_leaves), rng.choice(data_leaves)),
        ("or", rng.choice(partition_leaves), rng.choice(partition_leaves)),
        ("and", ("or", rng.choice(data_leaves), rng.choice(data_leaves)), rng.choice(partition_leaves)),
    ]
    # Exactly on the partition column's smallest and largest values, drawn from nothing (the draws above stay):
    # `<=` the smallest and `>=` the largest read those files, and a strict comparison reads none.
    ordered = sorted(int(value) for value in partition_values) if int_partition else partition_values
    edges: list[Predicate] = [("<=", partition_column, ordered[0]), (">=", partition_column, ordered[-1])]
    return data_leaves + partition_leaves + combined + edges


def _generated_table(spark: Any, seed: int) -> _SkippingTable:
    """The table of ``seed``, written once per process while the seed stays (the learner's function only reads it)."""
    def build(folder: Path) -> dict[str, Any]:
        rng = random.Random(seed)
        path = str(folder / "events")
        partition_column, int_partition, constant = _write_generated(spark, path, rng)
        return {"seed": seed, "path": path, "partition_column": partition_column, "int_partition": int_partition,
                "predicates": _generated_predicates(path, partition_column, int_partition, constant, rng)}

    built = build_once("lab07_generated", build,     # one folder: a table of another seed is replaced
                       intact=lambda b: b["seed"] == seed and (Path(b["path"]) / "_delta_log").is_dir())
    what = (f"a generated table partitioned by `{built['partition_column']}` ("
            + ("an INT column" if built["int_partition"] else "values such as 'new york' and NULL") + ")")
    return _SkippingTable(built["path"], what, built["partition_column"], built["int_partition"],
                          list(built["predicates"]), seed)


# ------------------------------------------------------------------------------------ the check


def _answer(check: str, files_to_read: Callable[..., Any], table: _SkippingTable, predicate: Predicate) -> set[str]:
    """Call the learner's function on one predicate, refusing Spark and the course's skipping helpers."""
    hint = ("replay the log (deltalab.replay_log(path).files gives every live add with its partitionValues and "
            "parsed stats), then test each file against the predicate.")
    jobs = spark_jobs_started()
    from pyspark.sql.classic.dataframe import DataFrame     # inputFiles() plans the query: Delta's answer, no job

    with calls_watched([files_spark_reads, DataFrame.inputFiles], modules=["deltalab.skipping"]) as used:
        answer = call_student(check, files_to_read, "files_to_read", table.path, predicate, hint=hint,
                              read_only=[table.path], seed=table.seed, on=table.what)
    if used:
        raise CheckFailed(check, f"files_to_read called {used[0]}, which asks Spark or decides skipping for you.",
                          "decide from the add actions' partitionValues and stats yourself.", seed=table.seed)
    if spark_jobs_started() > jobs:
        raise CheckFailed(check, "files_to_read ran Spark jobs; the exercise is to decide from the log alone, as Delta's "
                          "planner does before any file is opened.",
                          "read the add actions (deltalab.replay_log) and compare their statistics with the predicate.",
                          seed=table.seed)
    if isinstance(answer, (str, bytes)) or not isinstance(answer, Iterable):
        raise CheckFailed(check, f"files_to_read returned {type(answer).__name__}; it must return a set of paths.",
                          "the `return` line: a set of paths relative to the table folder, as on disk.", seed=table.seed)
    return {str(p) for p in answer}


def _leaf_fix(table: _SkippingTable, leaf: Predicate, got: set[str], expected: set[str]) -> str:
    """Where to look, for the first leaf the answer gets wrong (the rule, never the files)."""
    kind, column = leaf[0], leaf[1]
    if column == table.partition_column:
        values = {unquote(add["path"]): (add.get("partitionValues") or {}).get(column)
                  for add in replay_log(table.path).files.values()}
        if kind in ("<=", ">=") and (got ^ expected) and all(values.get(f) == str(leaf[2]) for f in got ^ expected):
            return (f"`{column} {kind} v` holds for the partitions whose value is v itself: compare partitionValues with "
                    f"{kind}, not {kind[0]}.")
        if table.int_partition and kind in ("<", "<=", ">", ">="):
            return (f"partitionValues are strings; `{column}` is an INT column: compare int(value), "
                    "or '9' > '10' and the wrong partitions are read.")
        return (f"`{column}` is a partition column: it has no statistics; compare each file's partitionValues exactly, "
                "as the column's type, with SQL's NULL rules (a NULL partition value matches no comparison and no IN, "
                "only IS NULL; partitionValues keeps NULL as None).")
    if kind == "in":
        return ("Delta 4.4 tests an IN list as one range: a file is read when [min, max] overlaps "
                "[smallest value of the list, largest value], even when no single value of the list falls inside.")
    if kind == "!=":
        return "for `column != v` a file is skipped only when every value in it is v: minValues and maxValues both equal v."
    if kind in ("is null", "is not null"):
        return "IS NULL reads a file with nullCount > 0; IS NOT NULL a file with nullCount < numRecords."
    if kind == "starts with":
        return "startswith(column, s) reads a file when min[:len(s)] <= s <= max[:len(s)] (the stats' min and max strings)."
    if (got ^ expected) & _all_null_files(table.path, column):
        return (f"in some files `{column}` is null in every row: their stats have no minValues/maxValues entry for it, "
                "so no row can satisfy a comparison and Delta skips the file (nullCount equals numRecords).")
    rule = {"=": "min <= v <= max", "<": "min < v", "<=": "min <= v", ">": "max > v", ">=": "max >= v"}[kind]
    return (f"for `column {kind} v` a file may hold a matching row only if {rule} (its stats' minValues and maxValues, "
            "compared as numbers for a number column).")


def _all_null_files(path: str, column: str) -> set[str]:
    """The live files (relative, as on disk) whose ``column`` is null in every row."""
    found = set()
    for (log_path, _), add in replay_log(path).files.items():
        stats = add.get("stats") or {}
        if column not in (stats.get("minValues") or {}) and (stats.get("nullCount") or {}).get(column) == stats.get("numRecords"):
            found.add(unquote(log_path))
    return found


def _diagnose(check: str, files_to_read: Callable[..., Any], spark: Any, table: _SkippingTable,
              predicate: Predicate, got: set[str], expected: set[str]) -> CheckFailed:
    """The failure for one predicate: its kind of mistake, found by asking the learner's function about each leaf."""
    missing, extra = expected - got, got - expected
    parts = []
    if missing:
        parts.append(f"{len(missing)} of the files Delta reads are missing")
    if extra:
        parts.append(f"{len(extra)} of the paths returned are files Delta skips or does not have")
    problem = f"on {table.what}, for the filter {predicate_sql(predicate)}, " + " and ".join(parts) + "."
    if extra and {unquote(p) for p in got} == expected:
        return CheckFailed(check, problem, "paths on disk are not URL-encoded: decode the log's paths once with "
                           "urllib.parse.unquote.", seed=table.seed)
    if extra and all(p.startswith("/") for p in got):
        return CheckFailed(check, problem, "return paths relative to the table folder, not absolute ones.", seed=table.seed)
    if extra - table.all_files:
        return CheckFailed(check, problem, "return only the table's live files: replay the log (a removed file is "
                           "not read), paths relative to the table folder.", seed=table.seed)
    leaves = _leaves(predicate)
    if len(leaves) > 1:
        for leaf in leaves:
            leaf_expected = files_spark_reads(spark, table.path, leaf)
            if _answer(check, files_to_read, table, leaf) != leaf_expected:
                return CheckFailed(check, problem + f" Already for its part {predicate_sql(leaf)} the files differ.",
                                   _leaf_fix(table, leaf, got, expected), seed=table.seed)
        return CheckFailed(check, problem, "each part is right on its own: a file is read for AND when both parts may "
                           "match in it, for OR when either may.", seed=table.seed)
    return CheckFailed(check, problem, _leaf_fix(table, predicate, got, expected), seed=table.seed)


@exercise_check
def check_files_to_read(files_to_read: Callable[[str, Predicate], Iterable[str]]) -> None:
    """Check ``files_to_read(table_path, predicate)`` against the files Spark reads for the same filter."""
    check = "files_to_read"
    spark = lab_spark()

    def tables() -> Iterator[_SkippingTable]:
        yield _example_table(spark)
        yield _generated_table(spark, check_seed())

    for table in tables():
        table.all_files = {unquote(p) for p, _ in replay_log(table.path).files}
        for predicate in table.predicates:
            expected = files_spark_reads(spark, table.path, predicate)
            got = _answer(check, files_to_read, table, predicate)
            if got != expected:
                raise _diagnose(check, files_to_read, spark, table, predicate, got, expected)
    passed(check, "matches the files Spark reads: partition values compared exactly (NULL, INT partitions), "
                  "min/max for comparisons, IN as one range, != , IS [NOT] NULL from nullCount, prefixes, AND and OR, "
                  "files whose column is all null, strings longer than the stats keep.")


# ------------------------------------------------------------------------------------ stats_columns

#: Column types the generated schemas draw from, with a literal of each for the row the check inserts.
_LITERALS = {
    "INT": "1", "BIGINT": "CAST(1 AS BIGINT)", "STRING": "'a'", "DATE": "DATE'2020-01-01'",
    "TIMESTAMP": "TIMESTAMP'2020-01-01 00:00:00'", "DECIMAL(10,2)": "CAST(1.5 AS DECIMAL(10,2))", "DOUBLE": "1.5D",
    "BOOLEAN": "true", "BINARY": "X'01'", "ARRAY<INT>": "array(1)", "MAP<STRING,INT>": "map('a', 1)",
}
#: Types Delta keeps no minimum and maximum for (a nullCount only).
_NO_MIN_MAX = ("BOOLEAN", "BINARY", "ARRAY<INT>", "MAP<STRING,INT>")


@dataclass
class _StatsTable:
    """A table created without data, the columns (name, type or nested list) it was created with, and what to ask."""

    path: str
    what: str
    columns: list[tuple[str, Any]]
    partition_column: str
    configuration: dict[str, str]
    seed: int | None = None


def _column_sql(name: str, kind: Any) -> str:
    if isinstance(kind, list):
        return f"{name} STRUCT<{', '.join(_column_sql(n, k).replace(' ', ': ', 1) for n, k in kind)}>"
    return f"{name} {kind}"


def _leaf_count(kind: Any) -> int:
    return sum(_leaf_count(k) for _, k in kind) if isinstance(kind, list) else 1


def _literal_of(kind: Any) -> str:
    if isinstance(kind, list):
        return "named_struct(" + ", ".join(f"'{n}', {_literal_of(k)}" for n, k in kind) + ")"
    return _LITERALS[kind]


def _create_stats_table(spark: Any, table: _StatsTable) -> None:
    properties = ", ".join(f"'{key}' = '{value}'" for key, value in table.configuration.items())
    spark.sql(f"CREATE TABLE delta.`{table.path}` ({', '.join(_column_sql(n, k) for n, k in table.columns)}) USING delta "
              f"PARTITIONED BY ({table.partition_column})" + (f" TBLPROPERTIES ({properties})" if properties else ""))


def _stats_delta_keeps(spark: Any, table: _StatsTable) -> set[str]:
    """Write one row of non-null values and read which columns its add action has minValues for."""
    spark.sql(f"INSERT INTO delta.`{table.path}` SELECT {', '.join(_literal_of(k) for _, k in table.columns)}")
    [add] = replay_log(table.path).files.values()

    def leaves(values: dict[str, Any], prefix: str = "") -> set[str]:
        found = set()
        for key, value in values.items():
            found |= leaves(value, f"{prefix}{key}.") if isinstance(value, dict) else {prefix + key}
        return found

    return leaves((add.get("stats") or {}).get("minValues") or {})


def _example_stats_table(spark: Any) -> _StatsTable:
    columns: list[tuple[str, Any]] = [("id", "BIGINT"), ("flag", "BOOLEAN"), ("region", "STRING"),
                                      ("address", [("city", "STRING"), ("zip", "INT")]), ("tags", "ARRAY<INT>")]
    columns += [(f"m{i:02d}", "INT") for i in range(30)]
    path = str(fresh_dir("lab07_stats_example") / "wide")
    return _StatsTable(path, "the example table `wide` (35 columns, partitioned by region)", columns, "region", {})


def _generated_stats_table(spark: Any, seed: int) -> _StatsTable:
    rng = random.Random(seed)
    kinds = list(_LITERALS)
    eligible = [k for k in kinds if k not in _NO_MIN_MAX]
    columns: list[tuple[str, Any]] = []
    for index in range(rng.randint(12, 40)):
        if rng.random() < 0.15:
            fields: list[tuple[str, Any]] = [(f"f{j}", rng.choice(kinds)) for j in range(rng.randint(1, 3))]
            if rng.random() < 0.3:
                fields.append(("inner", [("g0", rng.choice(eligible)), ("g1", rng.choice(kinds))]))
            columns.append((f"s{index:02d}", fields))
        else:
            columns.append((f"c{index:02d}", rng.choice(kinds)))
    partition = ("part", rng.choice(["STRING", "INT"]))
    columns.insert(rng.randrange(len(columns) + 1), partition)           # anywhere in the schema
    leaf_count = sum(_leaf_count(k) for _, k in columns)
    configuration: dict[str, str] = {}
    choice = rng.choice(["none", "count", "count", "list", "both"])
    if choice in ("count", "both"):
        configuration["delta.dataSkippingNumIndexedCols"] = str(rng.choice([-1, rng.randint(1, leaf_count + 2)]))
    if choice in ("list", "both"):
        def all_eligible(kind: Any) -> bool:
            return all(all_eligible(k) for _, k in kind) if isinstance(kind, list) else kind not in _NO_MIN_MAX

        names = [n for n, k in columns if n != "part" and all_eligible(k)]
        nested = [f"{n}.{f}" for n, k in columns if isinstance(k, list) for f, fk in k if all_eligible(fk)]
        picked = rng.sample(names + nested, min(len(names + nested), rng.randint(1, 6)))
        picked = [p for p in picked if "." not in p or p.split(".")[0] not in picked]   # Delta refuses a struct with its field
        configuration["delta.dataSkippingStatsColumns"] = ",".join(picked) if picked else names[0]
    path = str(fresh_dir("lab07_stats_generated") / "wide")
    what = (f"a generated table of {len(columns)} columns (partitioned by `part`, "
            + (", ".join(f"{k.split('.')[-1]} = {v}" for k, v in configuration.items()) or "no statistics property") + ")")
    return _StatsTable(path, what, columns, "part", configuration, seed)


def _spaced_list_stats_table(seed: int) -> _StatsTable:
    """A small table whose delta.dataSkippingStatsColumns names three of its leaves (a struct's field among them)
    with a space after each comma, which Delta trims from every name. Drawn from a generator of its own (the
    generated table of the seed stays what it was)."""
    rng = random.Random(f"lab07 spaced list {seed}")
    columns: list[tuple[str, Any]] = [("id", "BIGINT"), ("name", "STRING"), ("point", [("x", "INT"), ("y", "DOUBLE")]),
                                      ("score", "DOUBLE"), ("day", "DATE"), ("part", "STRING")]
    rng.shuffle(columns)
    listed = rng.sample(["id", "name", "point.x", "point.y", "score", "day"], 3)
    path = str(fresh_dir("lab07_stats_spaced") / "listed")
    return _StatsTable(path, "a generated table whose delta.dataSkippingStatsColumns has a space after each comma "
                             "(partitioned by `part`)", columns, "part",
                       {"delta.dataSkippingStatsColumns": ", ".join(listed)}, seed)


def _stats_fix(table: _StatsTable, got: set[str], expected: set[str]) -> str:
    top = {n: k for n, k in table.columns}
    extra, missing = got - expected, expected - got
    if table.partition_column in got:
        return "partition columns get no statistics: their value is in each add's partitionValues."
    if any(name in top and isinstance(top[name], list) for name in got):
        return "statistics are kept per leaf: a struct's fields appear as their own columns, e.g. address.city."

    def kind_of(path: str) -> Any:
        kind: Any = top
        for part in path.split("."):
            kind = dict(kind).get(part) if isinstance(kind, (dict, list)) else None    # None: not a column of the table
        return kind

    if any(kind_of(p) is None for p in extra):
        return "return names of the table's own columns, read from its schema (metaData.schemaString), not a fixed list."
    if any(kind_of(p) in _NO_MIN_MAX for p in extra):
        return ("minValues and maxValues are kept only for numbers, strings, dates, timestamps and decimals: booleans, "
                "binaries, arrays and maps get a nullCount only.")
    if ", " in table.configuration.get("delta.dataSkippingStatsColumns", "") and missing and not extra:
        return ("delta.dataSkippingStatsColumns is a comma-separated list whose names Delta trims: spaces around the "
                "commas are not part of the names.")
    if "delta.dataSkippingStatsColumns" in table.configuration:
        return ("delta.dataSkippingStatsColumns, when set, decides alone (dataSkippingNumIndexedCols is then ignored): "
                "exactly the columns it names, a struct standing for all its leaves.")
    return ("without delta.dataSkippingStatsColumns, Delta indexes the first delta.dataSkippingNumIndexedCols leaf columns "
            "(32 unless set; -1 for all), counted in schema order over the data columns: partition columns left out, "
            "each field of a struct counted, an array or a map counted once.") if missing or extra else ""


@exercise_check
def check_stats_columns(stats_columns: Callable[[str], Iterable[str]]) -> None:
    """Check ``stats_columns(table_path)`` against the minValues Delta writes for a row inserted after the call."""
    check = "stats_columns"
    spark = lab_spark()
    hint = "read the table's metaData (schemaString, partitionColumns, configuration) from the log."

    def tables() -> Iterator[_StatsTable]:
        yield _example_stats_table(spark)
        yield _generated_stats_table(spark, check_seed())
        yield _spaced_list_stats_table(check_seed())

    for table in tables():
        _create_stats_table(spark, table)
        jobs = spark_jobs_started()
        answer = call_student(check, stats_columns, "stats_columns", table.path, hint=hint, read_only=[table.path],
                              seed=table.seed, on=table.what)
        if spark_jobs_started() > jobs:
            raise CheckFailed(check, "stats_columns ran Spark jobs; the answer is in the log's metaData alone.", hint,
                              seed=table.seed)
        if isinstance(answer, (str, bytes)) or not isinstance(answer, Iterable):
            raise CheckFailed(check, f"stats_columns returned {type(answer).__name__}; it must return a set of column names.",
                              "the `return` line: a set such as {'id', 'address.city'}.", seed=table.seed)
        got = {str(c) for c in answer}
        expected = _stats_delta_keeps(spark, table)
        if got != expected:
            parts = []
            if expected - got:
                parts.append(f"{len(expected - got)} of the columns Delta keeps a min and max for are missing")
            if got - expected:
                parts.append(f"{len(got - expected)} of the columns returned get no min and max")
            raise CheckFailed(check, f"on {table.what}, " + " and ".join(parts) + ".", _stats_fix(table, got, expected),
                              seed=table.seed)
    passed(check, "matches the minValues Delta writes: the first N leaf columns or the listed ones, partition columns "
                  "left out, struct fields one by one, no min or max for booleans, binaries, arrays and maps.")
