"""Lab 06 (schema evolution): add a column, change a type, rename a column, without losing a row.

Each check runs the student's function twice: on the lab's example table (``customers``: ``id INT,
name STRING, age INT``, 3 rows), then on a table generated afresh for the run from
:func:`deltalab.labs.tables.check_seed` (:func:`_random_table`: 3 to 6 columns of several types
with names drawn from a pool, 4 to 25 rows with NULLs, partitioned or not by a column whose values
need escaping in folder names, table properties). The column to change, the new column(s) and the
new name are drawn too, so an answer that hard-codes the example's names fails.

After each call the check compares the whole table with a recomputation from the rows Spark read
before the call: every column (name, position, type), every row, the partition columns and the
table properties. It also checks the approach, from the log and from Spark's record of the call:

* ``add_column``: one commit that removes no file (an append), with ``mergeSchema`` on that write
  and not on the session (the SQL executions of the call must not have run with
  ``spark.databricks.delta.schema.autoMerge.enabled``, even if the answer switched it back off);
* ``change_type``: the partitioning kept (``overwriteSchema`` replaces it with the write's own);
* ``rename_column``: not one data file written or rewritten, and commits without add or remove.

No check lets the table's history go (the commit files before the call must stay as they were),
and :func:`deltalab.labs.student.call_student` refuses a session setting left changed.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any, Callable

from deltalab.files import spark_files
from deltalab.labs.report import CheckFailed, passed, short_repr
from deltalab.labs.student import call_student, exercise_check, folder_state, lab_spark
from deltalab.labs.tables import AWKWARD_VALUES, check_seed, fresh_dir
from deltalab.log import read_log, replay_log
from deltalab.spark_jvm import last_sql_execution_id, sql_executions_since

__all__ = ["CheckFailed", "check_add_column", "check_change_type", "check_rename_column"]

#: The session setting that makes every write of the session merge schemas.
AUTO_MERGE = "spark.databricks.delta.schema.autoMerge.enabled"

#: Columns a generated table draws from: name -> Spark type. ``city`` takes values that folder
#: names must escape (``10:30``, ``new york``, ...).
COLUMN_POOL = {
    "age": "int", "visits": "int", "score": "int", "level": "int", "stock": "int", "year": "int",
    "name": "string", "city": "string", "team": "string", "country": "string", "email": "string",
    "weight": "double", "price": "double", "joined": "date", "active": "boolean", "views": "bigint",
}

#: New names for a rename of a generated table: each needs backquotes in SQL.
NEW_NAMES = ("home city", "team-name", "nick name", "first name", "e-mail", "sales region")

#: Where to look when the student's function fails on a generated table but not on the example.
_GENERATED_HINT = ("it worked on the example table: use the arguments (path, the column names, new_rows as it "
                   "is), not the example's names; a generated table has other columns, types and partitioning.")

_WORDS = ("ada", "linus", "grace", "edsger", "barbara", "alan", "frances", "tony")


@dataclass
class _Table:
    """A table a check built: where it is, its columns (name, type) in order, partition columns,
    rows (tuples in column order) and its table properties, as Spark and the log report them."""

    path: str
    columns: list[tuple[str, str]]
    partitions: list[str]
    rows: list[tuple]
    properties: dict[str, str]
    label: str
    seed: int | None = None
    commits: dict[str, tuple[int, int]] = field(default_factory=dict)  # the log's commit files: size, mtime


def _value(kind: str, rng: random.Random, column: str) -> Any:
    """A random value of Spark type ``kind`` for ``column`` (about one in seven is NULL)."""
    if rng.random() < 0.15:
        return None
    if kind == "int":
        return rng.randint(-50, 2000)
    if kind == "bigint":
        return rng.randint(0, 10**12)
    if kind == "double":
        return round(rng.uniform(-100, 100), 2)
    if kind == "date":
        return date.fromordinal(date(2020, 1, 1).toordinal() + rng.randint(0, 2000))
    if kind == "boolean":
        return rng.random() < 0.5
    if column == "city":
        return rng.choice(AWKWARD_VALUES)
    return rng.choice(_WORDS) + str(rng.randint(1, 99))


def _read(spark, path: str, label: str, seed: int | None = None) -> _Table:
    """The table at ``path`` as Spark reads it (columns, types, rows) and as its log says
    (partition columns, properties, commit files)."""
    frame = spark.read.format("delta").load(path)
    metadata = replay_log(path).metadata
    log = Path(path) / "_delta_log"
    commits = {name: state for name, state in folder_state(log).items() if name.endswith(".json") and "/" not in name}
    return _Table(path, [tuple(d) for d in frame.dtypes], list(metadata.get("partitionColumns") or []),
                  [tuple(row) for row in frame.collect()], dict(metadata.get("configuration") or {}), label, seed,
                  commits)


def _example_table(spark, folder: Path) -> _Table:
    """The lab's ``customers`` table, written fresh (the student's function changes it)."""
    path = str(folder / "customers")
    spark.createDataFrame(
        [(1, "Ada", 36), (2, "Linus", 28), (3, "Grace", 45)], "id INT, name STRING, age INT"
    ).coalesce(1).write.format("delta").save(path)
    return _read(spark, path, "the example table customers")


def _random_table(spark, folder: Path, rng: random.Random, seed: int, *, need: tuple[str, ...] = (),
                  partitioned: bool | None = None) -> _Table:
    """A table whose columns, rows, partitioning and properties ``rng`` chooses.

    ``id INT`` (unique) plus 3 to 6 columns from :data:`COLUMN_POOL`, always one of each type
    in ``need``; 4 to 25 rows, a NULL in every column; partitioned (half the time unless
    ``partitioned`` says) by a string or int column;
    ``delta.checkpointInterval`` and ``delta.enableDeletionVectors`` drawn too.
    """
    names = [n for n in COLUMN_POOL if n != "name"]
    chosen = [rng.choice([n for n in names if COLUMN_POOL[n] == kind]) for kind in need]
    chosen += rng.sample([n for n in names if n not in chosen], rng.randint(max(0, 3 - len(chosen)), 5 - len(chosen)))
    if rng.random() < 0.5 and "city" not in chosen:
        chosen.append("city")
    rng.shuffle(chosen)
    columns = [("id", "int")] + [(n, COLUMN_POOL[n]) for n in chosen]
    rows = [[i + 1] + [_value(kind, rng, name) for name, kind in columns[1:]] for i in range(rng.randint(4, 25))]
    for position in range(1, len(columns)):  # a NULL in every column, whatever the draw
        rows[rng.randrange(len(rows))][position] = None
    rows = [tuple(row) for row in rows]
    candidates = [n for n, kind in columns[1:] if kind in ("string", "int")]
    if "city" in chosen and rng.random() < 0.6:
        candidates = ["city"]  # its values need escaping in folder names: 10:30 is written to city=10%3A30
    partitioned = rng.random() < 0.5 if partitioned is None else partitioned
    partitions = [rng.choice(candidates)] if candidates and partitioned else []
    path = str(folder / rng.choice(["people", "orders", "stock", "visits"]))
    schema = ", ".join(f"`{n}` {kind.upper()}" for n, kind in columns)
    writer = spark.createDataFrame(rows, schema).repartition(rng.randint(1, 3)).write.format("delta")
    writer = writer.option("delta.checkpointInterval", str(rng.randint(5, 20)))
    writer = writer.option("delta.enableDeletionVectors", rng.choice(["true", "false"]))
    (writer.partitionBy(*partitions) if partitions else writer).save(path)
    kinds = ", ".join(f"{n} {k}" for n, k in columns)
    return _read(spark, path, f"a generated table ({kinds}{'; partitioned by ' + partitions[0] if partitions else ''})",
                 seed)


# --------------------------------------------------------------------------------------------
# What a call did, from Spark's record of its SQL executions and from the log
# --------------------------------------------------------------------------------------------

def _executions_with(spark, after: int, key: str) -> list[str]:
    """Descriptions of the SQL executions newer than ``after`` that ran with session setting
    ``key`` set to true (Spark records each execution's changed session settings)."""
    return [execution.description for execution in sql_executions_since(spark, after)
            if execution.modified_settings.get(key, "").strip().lower() == "true"]


def _new_commits(table: _Table) -> list[list[dict[str, Any]]]:
    """The actions of every commit written after ``table`` was read, oldest first."""
    log = read_log(table.path)
    return [log.commits[v] for v in log.versions if f"{v:020d}.json" not in table.commits]


def _data_files(path: str) -> dict[str, tuple[int, int]]:
    """The Parquet files in the table folder outside ``_delta_log``, with size and modification time."""
    return {name: state for name, state in folder_state(path).items()
            if name.endswith(".parquet") and not name.startswith("_delta_log/")}


def _history_kept(check: str, name: str, table: _Table) -> None:
    """Refuse a call that deleted or rewrote a commit file that existed before it."""
    after = {n: s for n, s in folder_state(Path(table.path) / "_delta_log").items() if n in table.commits}
    lost = sorted(n for n in table.commits if after.get(n) != table.commits[n])
    if lost:
        raise CheckFailed(
            check,
            f"{name} deleted or rewrote the commit {lost[0]} of {table.label}: the table's history is gone.",
            "change the table by committing a new version (a write or ALTER TABLE on the same path); never delete "
            "the folder or files in _delta_log.",
            seed=table.seed,
        )


# --------------------------------------------------------------------------------------------
# Comparing whole tables
# --------------------------------------------------------------------------------------------

def _key(row: tuple) -> tuple:
    """A row as a sortable key (None first, then by the value's text)."""
    return tuple((value is not None, str(value)) for value in row)


def _compare(check: str, name: str, got: _Table, columns: list[tuple[str, str]], rows: list[tuple],
             partitions: list[str], properties: Callable[[dict[str, str]], str | None], fixes: dict[str, str]) -> None:
    """Raise :class:`CheckFailed` for the first way ``got`` differs from the expected table.

    ``fixes`` may give the hint for "columns", "types", "partitions" and "rows"; ``properties``
    returns a problem with the properties or None. Messages name what the table has, not what
    it should hold.
    """
    where = f"after {name} on {got.label}"
    got_names, want_names = [n for n, _ in got.columns], [n for n, _ in columns]
    if got_names != want_names:
        lost = [n for n in want_names if n not in got_names]
        extra = [n for n in got_names if n not in want_names]
        if lost:
            problem = f"{where}, the column {lost[0]!r} is missing (columns now: {got_names})"
        elif extra:
            problem = f"{where}, the table has a column {extra[0]!r} it should not have (columns now: {got_names})"
        else:
            problem = f"{where}, the columns are in another order ({got_names}): each column must keep its place"
        raise CheckFailed(check, problem + ".", fixes.get("columns", "change only what the exercise asks."),
                          seed=got.seed)
    for (column, kind), (_, want) in zip(got.columns, columns):
        if kind != want:
            raise CheckFailed(check, f"{where}, the column {column!r} is {kind}, which is not the type it should have.",
                              fixes.get("types", "change only the type the exercise names."), seed=got.seed)
    if got.partitions != partitions:
        raise CheckFailed(
            check, f"{where}, the table is partitioned by {got.partitions}, not as it was.",
            fixes.get("partitions", "an overwrite with overwriteSchema takes the partitioning of the write: pass "
                                    ".partitionBy(...) with the table's partition columns (DESCRIBE DETAIL)."),
            seed=got.seed)
    problem = properties(got.properties)
    if problem:
        raise CheckFailed(check, f"{where}, {problem}.", "keep the table's properties; change only its schema.",
                          seed=got.seed)
    have, want_rows = Counter(_key(r) for r in got.rows), Counter(_key(r) for r in rows)
    if have != want_rows:
        wrong = sorted((have - want_rows).elements())
        absent = sum((want_rows - have).values())
        shown = next((r for r in got.rows if _key(r) == wrong[0]), None) if wrong else None
        problem = f"{where}, the table has {len(got.rows)} rows"
        if shown is not None and wrong[0] in want_rows:
            problem += (f"; e.g. the row {short_repr(shown, limit=80)} is there {have[wrong[0]]} times, more than it "
                        "should")
        elif shown is not None:
            problem += f"; e.g. the row {short_repr(shown, limit=80)} is not one it should hold"
        if absent:
            problem += f"; {absent} row(s) it should hold are missing"
        raise CheckFailed(check, problem + ".", fixes.get("rows", "keep every row and value."), seed=got.seed)


def _same_properties(before: dict[str, str], allowed: tuple[str, ...] = ()) -> Callable[[dict[str, str]], str | None]:
    """A properties test: every property as ``before``, except keys starting with one of ``allowed``."""
    def test(after: dict[str, str]) -> str | None:
        for key in sorted(set(before) | set(after)):
            if key.startswith(allowed):
                continue
            if key not in after:
                return f"the table property {key} is gone"
            if key not in before:
                return f"the table has a new property {key} = {after[key]!r}"
            if before[key] != after[key]:
                return f"the table property {key} changed to {after[key]!r}"
        return None
    return test


# --------------------------------------------------------------------------------------------
# Exercise 1: a new column on append
# --------------------------------------------------------------------------------------------

def _new_rows(spark, table: _Table, rng: random.Random | None):
    """The rows to append: the example's one customer with an email, or 1 to 5 random rows with
    1 or 2 new columns (types drawn), their columns in a shuffled order half the time.

    Returns the DataFrame, its columns (name, type) in order and its rows (tuples in that order).
    """
    if rng is None:
        columns = table.columns + [("email", "string")]
        rows = [(4, "Edsger", 72, "ed@example.org")]
    else:
        taken = {n for n, _ in table.columns}
        fresh = rng.sample([n for n in COLUMN_POOL if n not in taken], rng.randint(1, 2))
        columns = table.columns + [(n, COLUMN_POOL[n]) for n in fresh]
        start = max(r[0] for r in table.rows) + 1
        rows = [tuple([start + i] + [_value(kind, rng, n) for n, kind in columns[1:]])
                for i in range(rng.randint(1, 5))]
        if rng.random() < 0.5:
            order = list(range(len(columns)))
            rng.shuffle(order)
            columns = [columns[i] for i in order]
            rows = [tuple(row[i] for i in order) for row in rows]
    schema = ", ".join(f"`{n}` {kind.upper()}" for n, kind in columns)
    return spark.createDataFrame(rows, schema), columns, rows


def _add_column_once(spark, check: str, add_column: Callable[..., None], table: _Table,
                     rng: random.Random | None) -> None:
    new_rows, new_columns, added = _new_rows(spark, table, rng)
    old_names = [n for n, _ in table.columns]
    extra = [(n, k) for n, k in new_columns if n not in old_names]
    columns = table.columns + extra
    index = {n: i for i, (n, _) in enumerate(new_columns)}
    expected = [tuple(row) + (None,) * len(extra) for row in table.rows]
    expected += [tuple(row[index[n]] for n, _ in columns) for row in added]
    before = last_sql_execution_id(spark)
    call_student(check, add_column, "add_column", spark, table.path, new_rows,
                 hint="the error says the schemas differ; look for the write option that lets an append add "
                      "columns." if table.seed is None else _GENERATED_HINT,
                 seed=table.seed)
    _history_kept(check, "add_column", table)
    merged = _executions_with(spark, before, AUTO_MERGE)
    if merged:
        raise CheckFailed(
            check,
            f"add_column switched on {AUTO_MERGE} for the whole session during its write (even if it switched it "
            "off again): meanwhile every write of the session, in any thread, would add columns silently.",
            "ask for schema merging on the one write that needs it: .option('mergeSchema', 'true').",
            seed=table.seed,
        )
    got = _read(spark, table.path, table.label, table.seed)
    commits = _new_commits(table)
    _compare(check, "add_column", got, columns, expected, table.partitions, _same_properties(table.properties), {
        "columns": "append new_rows as they are, with mergeSchema: the new columns come after the old ones and no "
                   "column is dropped.",
        "types": "append new_rows as they are: a new column keeps the type it has in new_rows, old columns theirs.",
        "partitions": "append to the table as it is; do not pass another partitionBy.",
        "rows": "append (mode 'append'), do not overwrite, write new_rows exactly once, and leave the old rows as "
                "they are (their new columns are NULL).",
    })
    removes = sum(1 for actions in commits for a in actions if "remove" in a)
    if len(commits) != 1 or removes:
        did = (f"made {len(commits)} commits" if len(commits) != 1 else "") + (" and " if len(commits) != 1 and removes
                                                                               else "")
        did += f"removed {removes} file(s)" if removes else ""
        raise CheckFailed(
            check,
            f"add_column {did} on {table.label}; the table is right, but an append is one commit that only adds "
            "files (a reader between two commits would see the new column without the new rows).",
            "one write of new_rows in mode 'append' with mergeSchema: no ALTER TABLE first, no overwrite of the "
            "whole table.",
            seed=table.seed,
        )


@exercise_check
def check_add_column(add_column: Callable[..., None]) -> None:
    """``add_column(spark, path, new_rows)`` appends rows that carry columns the table lacks."""
    check = "add_column"
    spark = lab_spark()
    _add_column_once(spark, check, add_column, _example_table(spark, fresh_dir("lab06_add")), None)
    seed = check_seed()
    rng = random.Random(seed)
    table = _random_table(spark, fresh_dir("lab06_add_generated"), rng, seed)
    _add_column_once(spark, check, add_column, table, rng)
    passed(check, f"one append commit added the new column(s) on the example table and on {table.label}; every "
                  "old row kept its values (NULL in the new columns), with mergeSchema on that write only.")


# --------------------------------------------------------------------------------------------
# Exercise 2: changing a column's type
# --------------------------------------------------------------------------------------------

def _change_type_once(spark, check: str, change_type: Callable[..., None], table: _Table, column: str) -> None:
    position = [n for n, _ in table.columns].index(column)
    columns = [(n, "string" if n == column else k) for n, k in table.columns]
    expected = [tuple(str(v) if i == position and v is not None else v for i, v in enumerate(row))
                for row in table.rows]
    call_student(check, change_type, "change_type", spark, table.path, column,
                 hint="a type change is not a merge: the table must be rewritten with a new schema."
                 if table.seed is None else _GENERATED_HINT,
                 seed=table.seed)
    _history_kept(check, "change_type", table)
    got = _read(spark, table.path, table.label, table.seed)
    kinds = dict(got.columns)
    if kinds.get(column) != "string":
        raise CheckFailed(check, f"after change_type on {table.label}, the column {column!r} is "
                                 f"{kinds.get(column, 'missing')}, not string.",
                          "cast the column, then overwrite the table with the option that replaces its schema.",
                          seed=table.seed)
    _compare(check, "change_type", got, columns, expected, table.partitions, _same_properties(table.properties), {
        "columns": "withColumn(column, ...) keeps every column in its place; select(...) of some columns drops or "
                   "moves the others.",
        "types": "cast only the column you were given; the others keep their types.",
        "rows": "read every row and cast with Spark (F.col(column).cast('string')): NULL stays NULL, numbers keep "
                "their digits; overwrite with all the rows.",
    })


@exercise_check
def check_change_type(change_type: Callable[..., None]) -> None:
    """``change_type(spark, path, column)`` turns the INT column ``column`` into STRING, keeping every
    row, column, the partitioning and the table properties."""
    check = "change_type"
    spark = lab_spark()
    _change_type_once(spark, check, change_type, _example_table(spark, fresh_dir("lab06_type")), "age")
    seed = check_seed()
    rng = random.Random(seed)
    table = _random_table(spark, fresh_dir("lab06_type_generated"), rng, seed, need=("int",), partitioned=True)
    ints = [n for n, kind in table.columns[1:] if kind == "int"]
    column = table.partitions[0] if table.partitions and table.partitions[0] in ints and rng.random() < 0.5 \
        else rng.choice(ints)
    _change_type_once(spark, check, change_type, table, column)
    where = "the partition column" if column in table.partitions else f"partitioned by {table.partitions[0]}"
    passed(check, f"the column is a STRING now on the example table and on a generated table (column {column!r}, "
                  f"{where}): every other column, row, partition column and property as before.")


# --------------------------------------------------------------------------------------------
# Exercise 3: renaming without rewriting
# --------------------------------------------------------------------------------------------

def _rename_once(spark, check: str, rename_column: Callable[..., None], table: _Table, old: str, new: str) -> None:
    columns = [(new if n == old else n, k) for n, k in table.columns]
    partitions = [new if p == old else p for p in table.partitions]
    files_before = _data_files(table.path)
    read_before = spark_files(spark, table.path, relative=True)
    call_student(check, rename_column, "rename_column", spark, table.path, old, new,
                 hint="ALTER TABLE ... RENAME COLUMN needs column mapping; the error names the table property. "
                      "Quote names with backquotes (`a name`)." if table.seed is None else
                      "quote names with backquotes in SQL (`home city`); " + _GENERATED_HINT,
                 seed=table.seed)
    _history_kept(check, "rename_column", table)
    written = sorted(set(_data_files(table.path).items()) - set(files_before.items()))
    rewrote = [a for actions in _new_commits(table) for a in actions if "add" in a or "remove" in a]
    if written or rewrote:
        raise CheckFailed(
            check,
            f"rename_column on {table.label} wrote {len(written)} data file(s) and committed {len(rewrote)} add or "
            "remove action(s): it rewrote the data, where a rename should only change the log.",
            "turn on column mapping (delta.columnMapping.mode = 'name') and rename with ALTER TABLE ... RENAME "
            "COLUMN, instead of rewriting the table.",
            seed=table.seed,
        )
    got = _read(spark, table.path, table.label, table.seed)
    if old in [n for n, _ in got.columns] or new not in [n for n, _ in got.columns]:
        raise CheckFailed(check, f"after rename_column({old!r} -> {new!r}) on {table.label}, the columns are "
                                 f"{[n for n, _ in got.columns]}.",
                          "ALTER TABLE delta.`<path>` RENAME COLUMN `old` TO `new` (backquotes keep spaces and "
                          "dashes).",
                          seed=table.seed)
    _compare(check, "rename_column", got, columns, table.rows, partitions,
             _same_properties(table.properties, allowed=("delta.columnMapping.",)), {
                 "columns": "rename only the column you were given, in its place.",
                 "types": "a rename keeps every type.",
                 "partitions": "a rename keeps the partitioning (a renamed partition column stays the partition "
                               "column).",
                 "rows": "only rename; do not write rows.",
             })
    if got.properties.get("delta.columnMapping.mode") != "name":
        raise CheckFailed(check, f"after rename_column on {table.label}, delta.columnMapping.mode is "
                                 f"{got.properties.get('delta.columnMapping.mode')!r}.",
                          "a rename without rewriting needs column mapping by name.", seed=table.seed)
    if sorted(spark_files(spark, table.path, relative=True)) != sorted(read_before):
        raise CheckFailed(check, f"after rename_column on {table.label}, Spark reads other data files than before.",
                          "rename with ALTER TABLE only: the same files, read under the new name.", seed=table.seed)


@exercise_check
def check_rename_column(rename_column: Callable[..., None]) -> None:
    """``rename_column(spark, path, old, new)`` renames a column without writing any data file."""
    check = "rename_column"
    spark = lab_spark()
    _rename_once(spark, check, rename_column, _example_table(spark, fresh_dir("lab06_rename")), "name", "full_name")
    seed = check_seed()
    rng = random.Random(seed)
    table = _random_table(spark, fresh_dir("lab06_rename_generated"), rng, seed)
    others = [n for n, _ in table.columns[1:]]
    old = table.partitions[0] if table.partitions and rng.random() < 0.5 else rng.choice(others)
    taken = {n for n, _ in table.columns}
    new = rng.choice([n for n in NEW_NAMES if n not in taken])
    _rename_once(spark, check, rename_column, table, old, new)
    passed(check, f"renamed on the example table and on a generated table ({old!r} -> {new!r}"
                  f"{', a partition column' if old in table.partitions else ''}): same rows, same types, and not one "
                  "data file written.")
