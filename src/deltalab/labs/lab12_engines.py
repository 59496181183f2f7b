"""Lab 12 (other engines): what a table's protocol asks of a client, and delta-rs reading Spark's tables.

Every check runs on tables generated for the run (:func:`engine_tables`, built once per seed in a
process): ``id BIGINT, name STRING, qty SMALLINT, day DATE`` written by Spark in two to four commits,
each table drawn from one of five kinds:

* a **legacy** protocol: reader 1 and writer 6 (``identityColumns`` implied, ``columnMapping`` not), and,
  drawn, reader 1 or 2 and writer 1 to 6, set with ``delta.minReaderVersion`` / ``delta.minWriterVersion``
  (at reader 2, column mapping on or not);
* **listed** features: one to three table features set ``supported`` (``delta.feature.<name>``),
  drawn from reader-writer and writer-only features, some of them features delta-rs implements and
  some not, from a legacy writer version or not (Delta then lists the legacy features too);
* **deletion vectors** turned on after the first commits (the protocol changes between versions),
  then a DELETE;
* **column mapping** (``name`` mode) and a RENAME COLUMN;
* **type widening** turned on after the first rows were written, then ``qty`` widened from SMALLINT to INT
  and a row that needs the wider type appended (versions before it stay readable by a client without it);
* one more table, legacy or listed.

``check_features_needed`` compares the learner's ``features_needed(protocol, to)`` with Delta's
own answer (:func:`deltalab.jvm.protocol_features`) for every version's protocol.
``check_delta_rs_can`` compares ``delta_rs_can(protocol)`` with what delta-rs really does with the
latest version: ``DeltaTable(path).scan()`` (its DataFusion read path) and ``write_deltalake``
appending a row to a copy of the table. ``check_read_with_delta_rs`` compares
``read_with_delta_rs(path, version)`` with the rows Spark reads at every version, or ``None``
where delta-rs cannot read that version right; it refuses an answer that runs Spark or changes
the table.
"""

from __future__ import annotations

import datetime
import random
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from deltalab.jvm import protocol_features
from deltalab.labs.report import CheckFailed, passed, short_repr
from deltalab.labs.student import call_student, exercise_check, lab_spark, spark_jobs_started
from deltalab.labs.tables import check_seed, fresh_dir
from deltalab.log import latest_version, replay_log

__all__ = ["DELTA_RS_READS", "DELTA_RS_WRITES", "CheckFailed", "check_delta_rs_can", "check_features_needed",
           "check_read_with_delta_rs", "engine_tables"]

#: The table features delta-rs 1.6.6 implements for reading with ``DeltaTable.scan()``, among those the
#: lab's tables use (measured: the lab's tests build one table per feature and read it).
DELTA_RS_READS = frozenset({"columnMapping", "deletionVectors", "timestampNtz", "variantType"})

#: The features ``write_deltalake`` (delta-rs 1.6.6) implements, among those the lab's tables use.
DELTA_RS_WRITES = frozenset({"appendOnly", "invariants", "checkConstraints", "changeDataFeed", "generatedColumns",
                             "columnMapping", "deletionVectors", "timestampNtz", "variantType"})

#: Features the listed kind draws from: reader-writer ones, then writer-only ones.
READER_WRITER_POOL = ("deletionVectors", "columnMapping", "timestampNtz", "typeWidening", "vacuumProtocolCheck",
                      "variantType")
WRITER_POOL = ("appendOnly", "checkConstraints", "changeDataFeed", "generatedColumns", "identityColumns",
               "domainMetadata", "rowTracking", "inCommitTimestamp", "allowColumnDefaults", "checkpointProtection")
LEGACY_VERSIONS = ((1, 1), (1, 2), (1, 3), (1, 4), (2, 5), (1, 6), (2, 6))

#: The protocol Spark gives a new table without features: asked first, so that an unwritten exercise fails at once.
PLAIN = {"minReaderVersion": 1, "minWriterVersion": 2}

SCHEMA = "id BIGINT, name STRING, qty SMALLINT, day DATE"
NAMES = ("ada", "bob", "chloé", "dan", "eve", None)


@dataclass
class EngineTable:
    """A generated table and Delta's, Spark's and delta-rs's answers about it."""

    path: str
    what: str
    seed: int
    latest: int = 0
    protocols: list[dict[str, Any]] = field(default_factory=list)          # the protocol action at each version
    needed: list[dict[str, set[str]]] = field(default_factory=list)        # Delta's features to read / write, by version
    rows: list[tuple[list[str], list[tuple]]] = field(default_factory=list)  # Spark's (columns, sorted rows), by version
    delta_rs_reads: bool = False                                          # scan() of the latest version worked
    delta_rs_writes: bool = False                                         # write_deltalake appended to a copy


def _rows(spark: Any, rng: random.Random, first: int, count: int) -> Any:
    data = [(first + i, rng.choice(NAMES), rng.randint(-300, 300),
             datetime.date(2026, 1, 1) + datetime.timedelta(days=rng.randrange(365))) for i in range(count)]
    return spark.createDataFrame(data, SCHEMA)


def _append(spark: Any, path: str, rng: random.Random, first: int, count: int, columns: list[str] | None = None) -> None:
    frame = _rows(spark, rng, first, count)
    if columns:
        frame = frame.toDF(*columns)
    frame.repartition(rng.randint(1, 2)).write.format("delta").mode("append").save(path)


def _create(spark: Any, path: str, properties: dict[str, str]) -> None:
    shown = ", ".join(f"'{key}' = '{value}'" for key, value in properties.items())
    spark.sql(f"CREATE TABLE delta.`{path}` ({SCHEMA}) USING delta" + (f" TBLPROPERTIES ({shown})" if shown else ""))


def _write_table(spark: Any, path: str, kind: str, rng: random.Random) -> str:
    """Write one table of ``kind`` at ``path``; return how a message names it."""
    if kind.startswith("legacy"):
        reader, writer = (1, 6) if kind == "legacy writer 6" else rng.choice(LEGACY_VERSIONS)
        mapping = reader == 2 and rng.random() < 0.5
        properties = {"delta.minReaderVersion": str(reader), "delta.minWriterVersion": str(writer)}
        if mapping:
            properties["delta.columnMapping.mode"] = "name"
        _create(spark, path, properties)
        _append(spark, path, rng, 0, rng.randint(3, 12))
        return f"a generated table with a legacy protocol (reader {reader}, writer {writer}" + \
               (", column mapping on)" if mapping else ")")
    if kind == "listed":
        features = rng.sample(READER_WRITER_POOL, rng.randint(0, 1)) + rng.sample(WRITER_POOL, rng.randint(1, 2))
        properties = {f"delta.feature.{name}": "supported" for name in features}
        start = rng.choice([None, 2, 3, 4])
        if start:
            properties["delta.minWriterVersion"] = str(start)
        _create(spark, path, properties)
        _append(spark, path, rng, 0, rng.randint(3, 12))
        return "a generated table whose protocol lists features" + (f" (created at writer {start})" if start else "")
    if kind == "deletion vectors":
        _create(spark, path, {})
        _append(spark, path, rng, 0, rng.randint(8, 20))
        spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')")
        spark.sql(f"DELETE FROM delta.`{path}` WHERE id % {rng.randint(2, 4)} = 0")
        return "a generated table with deletion vectors turned on after its first commit, then a DELETE"
    if kind == "column mapping":
        _create(spark, path, {"delta.columnMapping.mode": "name"})
        _append(spark, path, rng, 0, rng.randint(3, 12))
        spark.sql(f"ALTER TABLE delta.`{path}` RENAME COLUMN qty TO quantity")
        if rng.random() < 0.5:
            _append(spark, path, rng, 100, rng.randint(2, 5), ["id", "name", "quantity", "day"])
        return "a generated table with column mapping and a renamed column"
    _create(spark, path, {})
    _append(spark, path, rng, 0, rng.randint(3, 12))
    spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.enableTypeWidening' = 'true')")
    spark.sql(f"ALTER TABLE delta.`{path}` CHANGE COLUMN qty TYPE INT")
    spark.sql(f"INSERT INTO delta.`{path}` VALUES (1000, 'wide', 100000, DATE'2026-06-01')")
    return "a generated table with type widening turned on after its first rows, then qty widened from SMALLINT to INT"


def _spark_rows(spark: Any, path: str, version: int) -> tuple[list[str], list[tuple]]:
    frame = spark.read.format("delta").option("versionAsOf", version).load(path)
    columns = sorted(frame.columns)
    return columns, sorted((tuple(row) for row in frame.select(*columns).collect()), key=repr)


def _delta_rs_outcome(spark: Any, path: str) -> tuple[bool, bool]:
    """(delta-rs's scan() reads the latest version, write_deltalake appends to a copy of it)."""
    import pyarrow as pa
    from deltalake import DeltaTable, write_deltalake

    try:
        pa.table(DeltaTable(path).scan())
        reads = True
    except Exception:  # noqa: BLE001 - delta-rs refuses with DeltaError or DeltaProtocolError
        reads = False
    copy = Path(path).with_name(Path(path).name + "_write_probe")
    shutil.copytree(path, copy)
    schema = spark.read.format("delta").load(str(copy)).schema
    values = {"id": 10_000, "name": "probe", "qty": 1, "quantity": 1, "day": datetime.date(2026, 11, 26)}
    row = spark.createDataFrame([tuple(values[f.name] for f in schema.fields)], schema).toArrow()
    try:
        write_deltalake(str(copy), row, mode="append")
        writes = True
    except Exception:  # noqa: BLE001 - CommitFailedError: "Unsupported table features required"
        writes = False
    shutil.rmtree(copy)
    return reads, writes


KINDS = ("legacy writer 6", "listed", "deletion vectors", "column mapping", "type widening")
_TABLES: dict[int, list[EngineTable]] = {}


def engine_tables(spark: Any, seed: int) -> list[EngineTable]:
    """The tables of ``seed`` (see the module's docstring): one of each kind and one more drawn,
    built the first time a process asks and while they are intact."""
    built = _TABLES.get(seed)
    if built and all(Path(t.path, "_delta_log", f"{t.latest:020d}.json").is_file()
                     and latest_version(t.path) == t.latest for t in built):
        return built
    rng = random.Random(seed)
    folder = fresh_dir(f"lab12_engines_{seed}")
    kinds = list(KINDS) + [rng.choice(["legacy", "listed"])]       # "legacy": reader and writer versions drawn
    rng.shuffle(kinds)
    tables = []
    for index, kind in enumerate(kinds):
        path = str(folder / f"table_{index}")
        table = EngineTable(path, _write_table(spark, path, kind, rng), seed)
        table.latest = latest_version(path)
        for version in range(table.latest + 1):
            table.protocols.append(dict(replay_log(path, version).protocol))
            table.needed.append(protocol_features(spark, path, version))
            table.rows.append(_spark_rows(spark, path, version))
        table.delta_rs_reads, table.delta_rs_writes = _delta_rs_outcome(spark, path)
        tables.append(table)
    _TABLES[seed] = tables
    return tables


def _protocol_shown(protocol: dict[str, Any]) -> str:
    parts = [f"reader {protocol.get('minReaderVersion')}, writer {protocol.get('minWriterVersion')}"]
    if protocol.get("readerFeatures") is not None:
        parts.append(f"readerFeatures {sorted(protocol['readerFeatures'])}")
    if protocol.get("writerFeatures") is not None:
        parts.append(f"writerFeatures {sorted(protocol['writerFeatures'])}")
    return "{" + "; ".join(parts) + "}"


def _as_names(check: str, name: str, answer: Any, seed: int) -> set[str]:
    if isinstance(answer, (str, bytes)) or not isinstance(answer, (set, frozenset, list, tuple)) \
            or not all(isinstance(item, str) for item in answer):
        raise CheckFailed(check, f"{name} returned {short_repr(answer)}; it must return a set of feature names (str).",
                          f"the `return` line of {name}: a set such as {{'appendOnly', 'invariants'}}.", seed=seed)
    return set(answer)


# ---------------------------------------------------------------------------------- features_needed



def _needed_fix(protocol: dict[str, Any], to: str, got: set[str], expected: set[str], to_write: set[str]) -> str:
    """The hint for a wrong ``features_needed(protocol, to)``; ``to_write``: Delta's features to write the protocol's
    table, which holds the writer-only features a legacy protocol implies without listing them."""
    listed = set(protocol.get("readerFeatures") or []) | set(protocol.get("writerFeatures") or [])
    writer, reader = protocol.get("minWriterVersion", 0), protocol.get("minReaderVersion", 0)
    if to == "read" and expected and got == set(protocol.get("readerFeatures") or []):
        return ("readerFeatures exists only at reader version 3: at reader 2 with writer 7, a reader-writer feature "
                "(columnMapping) is listed in writerFeatures alone; at reader 2 with a legacy writer it is implied "
                "by the versions. Reading needs every reader-writer feature the protocol lists or implies.")
    if to == "read" and got & (listed | to_write) - expected:
        return ("reading needs only the reader-writer features (the ones a reader would get wrong by ignoring: "
                "deletionVectors, columnMapping, typeWidening, ...); writer-only features such as appendOnly or "
                "changeDataFeed constrain writers.")
    if to == "write" and not expected - got and got - expected:
        return "return only the features the protocol lists (writer 7) or its versions imply (writer 1-6), nothing more."
    if to == "write" and got == set(protocol.get("writerFeatures") or []) | set(protocol.get("readerFeatures") or []) \
            and writer < 7:
        return (f"writer version {writer} has no writerFeatures list: it implies a bundle, cumulatively (writer 2: "
                "appendOnly and invariants; 3 adds checkConstraints; 4 changeDataFeed and generatedColumns; 5 "
                "columnMapping; 6 identityColumns).")
    if writer < 7 and got - expected == {"columnMapping"} and reader < 2:
        return ("a legacy feature is implied only when both versions reach its minimums: columnMapping needs reader 2 "
                "and writer 5, so writer 5 or 6 at reader 1 does not imply it.")
    if writer < 7 and expected - got:
        return ("the legacy writer versions are cumulative: writer N implies every feature of writers 2..N "
                "(2: appendOnly, invariants; 3: checkConstraints; 4: changeDataFeed, generatedColumns; 5: "
                "columnMapping; 6: identityColumns).")
    if reader == 2 and "columnMapping" in expected - got:
        return "reader version 2 (with writer 5 or more) means column mapping: a reader must implement it."
    if to == "write" and expected - got and (expected - got) <= set(protocol.get("readerFeatures") or []):
        return "a writer reads the table it changes: writing needs the reader-writer features too."
    return ("at reader 3 / writer 7 the features are the lists (readerFeatures, writerFeatures; a reader-writer "
            "feature is in both); below that, the versions imply them.")


@exercise_check
def check_features_needed(features_needed: Callable[[dict, str], set[str]]) -> None:
    """Check ``features_needed(protocol, to)`` against Delta's own answer for every version's protocol
    of the run's generated tables (``to`` is ``"read"`` or ``"write"``)."""
    check = "features_needed"
    spark = lab_spark()
    seed = check_seed()
    hint = "the protocol dict's minReaderVersion, minWriterVersion, readerFeatures and writerFeatures."
    # First, the plain protocol: an answer that raises does so before the build.
    call_student(check, features_needed, "features_needed", dict(PLAIN), "read", hint=hint)
    asked = 0
    for table in engine_tables(spark, seed):
        seen = []
        for version, protocol in enumerate(table.protocols):
            if protocol in seen:
                continue
            seen.append(protocol)
            for to in ("read", "write"):
                answer = _as_names(check, "features_needed",
                                   call_student(check, features_needed, "features_needed", dict(protocol), to, hint=hint,
                                                seed=seed, on=table.what), seed)
                asked += 1
                expected = table.needed[version][to]
                if answer != expected:
                    missing, extra = len(expected - answer), len(answer - expected)
                    wrong = " and ".join(part for part in (f"{missing} feature(s) missing" if missing else "",
                                                            f"{extra} feature(s) not needed" if extra else "") if part)
                    raise CheckFailed(check, f"on {table.what}, version {version}'s protocol {_protocol_shown(protocol)}: "
                                             f"features_needed(protocol, {to!r}) has {wrong}.",
                                      _needed_fix(protocol, to, answer, expected, table.needed[version]["write"]),
                                      seed=seed)
    passed(check, f"matches Delta's features to read and to write for {asked} questions: legacy versions and their "
                  "bundles, listed features, reader 2 with writer 7, protocols that change between versions.")


# ------------------------------------------------------------------------------------ delta_rs_can


@exercise_check
def check_delta_rs_can(delta_rs_can: Callable[[dict], dict[str, bool]]) -> None:
    """Check ``delta_rs_can(protocol)`` (``{"read": bool, "write": bool}``) against what delta-rs does with
    the latest version of each generated table: ``scan()`` and a ``write_deltalake`` append."""
    check = "delta_rs_can"
    spark = lab_spark()
    seed = check_seed()
    hint = "features_needed(protocol, ...) against DELTA_RS_READS and DELTA_RS_WRITES."
    call_student(check, delta_rs_can, "delta_rs_can", dict(PLAIN), hint=hint)
    for table in engine_tables(spark, seed):
        protocol = table.protocols[-1]
        answer = call_student(check, delta_rs_can, "delta_rs_can", dict(protocol), hint=hint, seed=seed, on=table.what)
        if not isinstance(answer, dict) or set(answer) != {"read", "write"} or \
                not all(isinstance(value, bool) for value in answer.values()):
            raise CheckFailed(check, f"delta_rs_can returned {short_repr(answer)}; it must return "
                                     "{'read': bool, 'write': bool}.", "the `return` line of delta_rs_can.", seed=seed)
        for to, real in (("read", table.delta_rs_reads), ("write", table.delta_rs_writes)):
            if answer[to] == real:
                continue
            did = {"read": "DeltaTable(path).scan() reads it" if real else "DeltaTable(path).scan() refuses it",
                   "write": "write_deltalake appends to it" if real else "write_deltalake refuses to append"}[to]
            needed = table.needed[-1][to]
            if to == "write" and not real and needed <= DELTA_RS_WRITES:
                fix = "a writer must implement the reader features too: delta-rs refuses a write it could not read."
            elif real and any(name not in DELTA_RS_READS | DELTA_RS_WRITES for name in needed):
                fix = (f"a client needs only the features the protocol makes it implement to {to}: "
                       + ("writer-only features do not stop a reader." if to == "read" else "compare with DELTA_RS_WRITES."))
            elif not real:
                fix = (f"delta-rs refuses a table when one feature it must implement to {to} is missing from "
                       + ("DELTA_RS_READS" if to == "read" else "DELTA_RS_WRITES")
                       + ": the legacy versions imply features too (writer 6: identityColumns).")
            else:
                fix = "compare features_needed(protocol, to) with the feature sets delta-rs implements."
            raise CheckFailed(check, f"on {table.what}, protocol {_protocol_shown(protocol)}: delta_rs_can says "
                                     f"{to} {'yes' if answer[to] else 'no'}, but {did}.", fix, seed=seed)
    passed(check, "matches delta-rs's scan() and write_deltalake on every generated table: legacy bundles, listed "
                  "features it implements and ones it does not, reader-writer and writer-only.")


# ------------------------------------------------------------------------------ read_with_delta_rs


def _answer_rows(answer: Any) -> tuple[list[str], list[tuple]]:
    columns = sorted(answer.column_names)
    values = [answer.column(name).to_pylist() for name in columns]
    return columns, sorted(zip(*values), key=repr) if values else []


def _read_fix(table: EngineTable, version: int, got: tuple[list[str], list[tuple]] | None) -> str:
    if got is None and not table.needed[-1]["read"] <= DELTA_RS_READS:
        # Also what an answer that reads the latest version whatever it is asked returns here: both are told.
        return ("each version has the protocol in force at that version (DeltaTable(path, version=v).protocol()): a "
                "feature turned on later does not stop a client reading the versions before it. So read the version "
                "asked, DeltaTable(path, version=version), and decide by its own protocol.")
    if got is None:
        return ("delta-rs's scan() (the DataFusion path) reads this version right: DeltaTable(path, version=v), "
                "then pyarrow.table(table.scan()).")
    columns, rows = got
    if rows and all(value is None for row in rows for value in row):
        return ("every value came back null: the pyarrow path (to_pyarrow_table, to_pandas) looks the columns up by "
                "their logical names, but with column mapping the files store physical names (col-<uuid>). scan() maps them.")
    if any(got == later for later in table.rows[version + 1:]) or (version < table.latest and got == table.rows[-1]):
        return "read the version asked: DeltaTable(path, version=version) or load_as_version(version)."
    if columns != table.rows[version][0]:
        return "the columns of that version, as Spark reads them (a renamed column has its new name from its RENAME on)."
    if len(rows) > len(table.rows[version][1]):
        return ("more rows than the version holds: rows a deletion vector deleted came back. Read with scan(), "
                "which applies deletion vectors; the pyarrow path refuses them.")
    return "read with delta-rs's scan() at that version and return every row it gives."


@exercise_check
def check_read_with_delta_rs(read_with_delta_rs: Callable[[str, int], Any]) -> None:
    """Check ``read_with_delta_rs(table_path, version)`` (a pyarrow Table, or None where delta-rs cannot
    read that version right) against Spark's rows at every version of the generated tables."""
    import pyarrow as pa

    check = "read_with_delta_rs"
    spark = lab_spark()
    seed = check_seed()
    hint = "DeltaTable(table_path, version=version), then its scan(); catch delta-rs's refusal (DeltaError)."
    for table in engine_tables(spark, seed):
        for version in range(table.latest + 1):
            jobs = spark_jobs_started()
            answer = call_student(check, read_with_delta_rs, "read_with_delta_rs", table.path, version, hint=hint,
                                  read_only=[table.path], seed=seed, on=table.what)
            if spark_jobs_started() > jobs:
                raise CheckFailed(check, "read_with_delta_rs ran Spark jobs; the exercise is to read with delta-rs alone.",
                                  "deltalake.DeltaTable, no spark.read.", seed=seed)
            readable = table.needed[version]["read"] <= DELTA_RS_READS
            if answer is None:
                if readable:
                    raise CheckFailed(check, f"on {table.what}, read_with_delta_rs returned None at version {version}, "
                                             "which delta-rs can read right.", _read_fix(table, version, None), seed=seed)
                continue
            if not isinstance(answer, pa.Table):
                raise CheckFailed(check, f"read_with_delta_rs returned {type(answer).__name__}; it must return a pyarrow "
                                         "Table (pyarrow.table(...)), or None.", "the `return` line of read_with_delta_rs.",
                                  seed=seed)
            if not readable:
                raise CheckFailed(check, f"on {table.what}, read_with_delta_rs returned rows at version {version}, whose "
                                         "protocol needs a reader feature delta-rs does not implement.",
                                  "return None where features_needed(protocol, 'read') is not within DELTA_RS_READS "
                                  "(the protocol of that version: DeltaTable(path, version=v).protocol()).", seed=seed)
            got = _answer_rows(answer)
            if got != table.rows[version]:
                raise CheckFailed(check, f"on {table.what}, the rows read_with_delta_rs returned at version {version} are "
                                         "not the rows Spark reads there.", _read_fix(table, version, got), seed=seed)
    passed(check, "matches Spark's rows at every version: deletion vectors, column mapping and a rename, legacy and "
                  "listed protocols; None where delta-rs cannot read the version right.")
