"""Lab 14 (table features): a row's identity under row tracking, and the protocol a property change leaves.

``check_row_ids`` compares the learner's ``row_ids(path)`` (each row's ``key`` mapped to its
``(row_id, row_commit_version)``, read from the log and the Parquet files) with what Spark reads in
``_metadata.row_id`` and ``_metadata.row_commit_version``, on the lab's example and on tables generated for
the run (:func:`row_tables`): row tracking on from the start or enabled on a table with data (the backfill),
deletion vectors on or off, column mapping on or off, files of several sizes, UPDATE, DELETE, a MERGE that
updates and inserts, OPTIMIZE or not, a checkpoint with the commits before it cleaned up or not. It refuses an
answer that runs Spark (``_metadata`` is the check's own answer) or changes the table.

``check_protocol_after`` compares ``protocol_after(protocol, properties)`` with the ``protocol`` action Delta
writes when ``ALTER TABLE ... SET TBLPROPERTIES (properties)`` runs on a table with that protocol
(:func:`protocol_cases`): tables created plain, with legacy versions (writer 1 to 6, reader 2), with a
feature, or with ``delta.minWriterVersion`` 7 (which Delta normalizes back); properties that add a
writer-only feature, a reader-writer feature, a feature with a dependency, ``delta.feature.<name>``, a
feature the protocol already implies, ``false`` for a feature, and a legacy writer version. The answer is a
pure function of its two arguments: it must not run Spark.
"""

from __future__ import annotations

import json
import random
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from deltalab.labs.report import CheckFailed, passed, short_repr
from deltalab.labs.student import Watched, call_student, exercise_check, lab_spark
from deltalab.labs.tables import build_once, check_seed, clean_up_commits
from deltalab.log import deleted_rows, replay_log

__all__ = ["CheckFailed", "FEATURE_OF_PROPERTY", "LEGACY_WRITER_FEATURES", "check_protocol_after", "check_row_ids",
           "protocol_cases", "row_tables"]

# ------------------------------------------------------------------------------- row tracking


@dataclass
class RowTable:
    """A generated table for exercise 1: what a message calls it, and Spark's answer (key -> (row_id, version))."""

    path: str
    what: str
    expected: dict[int, tuple[int, int]]
    deletion_vectors: bool


def _insert(spark: Any, path: str, start: int, rows: int, files: int) -> None:
    spark.range(start, start + rows, 1, files).selectExpr("id AS key", "CAST(pmod(hash(id), 1000) AS INT) AS v") \
        .write.format("delta").mode("append").save(path)


def _merge(spark: Any, path: str, low: int, high: int) -> None:
    """MERGE keys ``low..high-1``: the ones the table holds are updated (rewritten), the others inserted."""
    spark.range(low, high).selectExpr("id AS key", "CAST(id AS INT) AS v").createOrReplaceTempView("lab14_source")
    spark.sql(f"MERGE INTO delta.`{path}` AS t USING lab14_source AS s ON t.key = s.key "
              "WHEN MATCHED THEN UPDATE SET v = s.v WHEN NOT MATCHED THEN INSERT *")


def _spark_row_ids(spark: Any, path: str) -> dict[int, tuple[int, int]]:
    rows = spark.read.format("delta").load(path) \
        .selectExpr("key", "_metadata.row_id AS row_id", "_metadata.row_commit_version AS version").collect()
    return {int(row["key"]): (int(row["row_id"]), int(row["version"])) for row in rows}


def _write_row_table(spark: Any, path: str, kind: str, rng: random.Random, deletion_vectors: bool | None = None,
                     mapped: bool | None = None) -> RowTable:
    """Write one table of ``kind`` (``from the start`` or ``enabled later``) with a drawn history; deletion
    vectors and column mapping drawn unless given."""
    deletion_vectors = rng.random() < 0.6 if deletion_vectors is None else deletion_vectors
    mapped = rng.random() < 0.4 if mapped is None else mapped
    interval = rng.choice([3, 4, 100])
    properties = {"delta.enableDeletionVectors": str(deletion_vectors).lower(), "delta.checkpointInterval": str(interval)}
    if mapped:
        properties["delta.columnMapping.mode"] = "name"
    if kind == "from the start":
        properties["delta.enableRowTracking"] = "true"
    shown = ", ".join(f"'{key}' = '{value}'" for key, value in properties.items())
    spark.sql(f"CREATE TABLE delta.`{path}` (key BIGINT, v INT) USING delta TBLPROPERTIES ({shown})")
    next_key = rng.randrange(1000)
    for _ in range(rng.randint(1, 2)):
        rows = rng.randint(20, 60)
        _insert(spark, path, next_key, rows, rng.randint(1, 3))
        next_key += rows + rng.randint(0, 5)
    if kind == "enabled later":
        if rng.random() < 0.5:
            spark.sql(f"DELETE FROM delta.`{path}` WHERE pmod(key, 9) = {rng.randrange(9)}")
        spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.enableRowTracking' = 'true')")
    steps = ["update", "delete", "merge", "insert"]
    rng.shuffle(steps)
    for step in steps:
        if step == "update":
            spark.sql(f"UPDATE delta.`{path}` SET v = v + 1 WHERE pmod(key, {rng.randint(4, 7)}) = 0")
        elif step == "delete":
            spark.sql(f"DELETE FROM delta.`{path}` WHERE pmod(key, {rng.randint(5, 8)}) = 1")
        elif step == "merge":
            low = next_key - rng.randint(5, 15)
            high = next_key + rng.randint(3, 12)
            _merge(spark, path, low, high)
            next_key = high
        else:
            rows = rng.randint(5, 30)
            _insert(spark, path, next_key, rows, 1)
            next_key += rows
    optimized = rng.random() < 0.3
    if optimized:
        spark.sql(f"OPTIMIZE delta.`{path}`")
        spark.sql(f"UPDATE delta.`{path}` SET v = v - 1 WHERE pmod(key, 3) = 2")
    checkpoints = sorted(int(p.name.split(".")[0]) for p in (Path(path) / "_delta_log").glob("*.checkpoint*.parquet"))
    cleaned = bool(checkpoints) and rng.random() < 0.6
    if cleaned:
        clean_up_commits(path, checkpoints[-1])
    what = ("a generated table with row tracking " + ("from its creation" if kind == "from the start"
                                                    else "enabled once it had data (the backfill)")
            + (", deletion vectors on" if deletion_vectors else ", deletion vectors off")
            + (", column mapping on" if mapped else "") + (", OPTIMIZE then UPDATE" if optimized else "")
            + (", its commits before the last checkpoint cleaned up" if cleaned else ""))
    return RowTable(path, what, _spark_row_ids(spark, path), deletion_vectors)


def _logs_present(tables: list[Any]) -> bool:
    return all(Path(table.path, "_delta_log").is_dir() for table in tables)


def row_tables(spark: Any, seed: int) -> list[RowTable]:
    """The exercise 1 tables of ``seed``: one of each kind and one drawn, built once per process while intact.

    Every run has a table with deletion vectors off (rows copied into new files store their commit version
    too), one with column mapping (the key column has a physical name) and one with deletion vectors on (rows
    a DELETE or UPDATE marks deleted in place), whatever else is drawn."""
    def build(folder: Path) -> list[RowTable]:
        rng = random.Random(seed)
        first, second = rng.sample(["from the start", "enabled later"], 2)
        return [_write_row_table(spark, str(folder / "table_0"), first, rng, deletion_vectors=False),
                _write_row_table(spark, str(folder / "table_1"), second, rng, mapped=True),
                _write_row_table(spark, str(folder / "table_2"), rng.choice(["from the start", "enabled later"]), rng,
                                 deletion_vectors=True)]

    return build_once(f"lab14_rows_{seed}", build, _logs_present)


def _example_rows(spark: Any) -> RowTable:
    """The check's example: row tracking and deletion vectors on, two appends, an UPDATE, a DELETE, a MERGE."""
    def build(folder: Path) -> RowTable:
        path = str(folder / "example")
        spark.sql(f"CREATE TABLE delta.`{path}` (key BIGINT, v INT) USING delta "
                  "TBLPROPERTIES ('delta.enableRowTracking' = 'true', 'delta.enableDeletionVectors' = 'true')")
        _insert(spark, path, 0, 30, 2)
        _insert(spark, path, 30, 10, 1)
        spark.sql(f"UPDATE delta.`{path}` SET v = -1 WHERE key IN (3, 31)")
        spark.sql(f"DELETE FROM delta.`{path}` WHERE key = 20")
        _merge(spark, path, 35, 45)
        return RowTable(path, "the check's example table", _spark_row_ids(spark, path), True)

    return build_once("lab14_rows_example", build, lambda table: _logs_present([table]))


@dataclass
class _RowSource:
    """Where Delta takes one live row's identity from (used only to word a message)."""

    id_materialized: bool
    version_materialized: bool
    deleted_before: bool   # a row before it in its file is deleted by the file's deletion vector


def _row_sources(path: str) -> tuple[dict[int, _RowSource], dict[int, set[tuple[int, int]]]]:
    """How each live row's identity is found, and the identities the deleted copies of a key would have."""
    import pyarrow.parquet as pq
    from urllib.parse import unquote

    state = replay_log(path)
    configuration = state.metadata.get("configuration") or {}
    id_column = configuration.get("delta.rowTracking.materializedRowIdColumnName")
    version_column = configuration.get("delta.rowTracking.materializedRowCommitVersionColumnName")
    key = next(field["metadata"].get("delta.columnMapping.physicalName", field["name"])
               for field in json.loads(state.metadata["schemaString"])["fields"] if field["name"] == "key")
    sources: dict[int, _RowSource] = {}
    deleted_copies: dict[int, set[tuple[int, int]]] = {}
    for add in state.files.values():
        table = pq.read_table(Path(path) / unquote(add["path"]))
        deleted = set(deleted_rows(path, add.get("deletionVector")))
        keys = table.column(key).to_pylist()
        ids = table.column(id_column).to_pylist() if id_column in table.column_names else [None] * len(keys)
        versions = table.column(version_column).to_pylist() if version_column in table.column_names else [None] * len(keys)
        for position, value in enumerate(keys):
            if position in deleted:
                deleted_copies.setdefault(value, set()).add(
                    (ids[position] if ids[position] is not None else add["baseRowId"] + position,
                     versions[position] if versions[position] is not None else add["defaultRowCommitVersion"]))
            else:
                sources[value] = _RowSource(ids[position] is not None, versions[position] is not None,
                                            any(d < position for d in deleted))
    return sources, deleted_copies


def _row_ids_fix(table: RowTable, answer: dict[int, tuple[int, int]]) -> str:
    sources, deleted_copies = _row_sources(table.path)
    extra = set(answer) - set(table.expected)
    wrong = [key for key in table.expected if key in answer and answer[key] != table.expected[key]]
    missing = set(table.expected) - set(answer)
    if extra and missing and not any(key in deleted_copies for key in extra):
        return ("these are not this table's rows: compute the answer from the files of the table at table_path, "
                "whichever table the check passes (not from the example, not from values copied from an output).")
    if any(key in deleted_copies for key in extra) or any(answer[key] in deleted_copies.get(key, ()) for key in wrong):
        return ("skip the rows a file's deletion vector marks deleted: deltalab.log.deleted_rows(table_path, "
                "add['deletionVector']) gives their positions in the file (an UPDATE or DELETE with deletion vectors "
                "leaves the old row in its file and marks it).")
    if extra:
        return ("read only the live files: the add actions left after replaying the log (a file a later commit removed "
                "is no longer part of the table, even while it is still in the folder).")
    if set(table.expected) - set(answer):
        return "read every live file of the table (the add actions after replay, the checkpoint's included), every row of each."
    ids_wrong = [key for key in wrong if answer[key][0] != table.expected[key][0]]
    if ids_wrong and all(sources[key].id_materialized for key in ids_wrong):
        return ("a row rewritten by UPDATE, MERGE or OPTIMIZE keeps its id: the new file stores it in the materialized "
                "row id column (its name is delta.rowTracking.materializedRowIdColumnName in the configuration); "
                "use it where it is not null.")
    if ids_wrong and all(sources[key].deleted_before for key in ids_wrong):
        return ("a row's position counts every row of the file, the deleted ones too: a deletion vector hides rows, "
                "it does not move the rows after them.")
    if ids_wrong:
        return ("a row without a stored id gets its file's baseRowId plus its position in the file (0 for the first row).")
    if wrong and all(sources[key].version_materialized for key in wrong):
        return ("the materialized row commit version column (delta.rowTracking.materializedRowCommitVersionColumnName) "
                "holds the version for a row whose file stores one; use it where it is not null.")
    return ("a row without a stored commit version takes its file's defaultRowCommitVersion (the version that "
            "added the file), not the table's version.")


def _as_row_ids(check: str, answer: Any, seed: int | None) -> dict[int, tuple[int, int]]:
    shape = ("row_ids must return a dict from each row's key (int) to a tuple (row_id, row_commit_version) of two ints.")
    if not isinstance(answer, Mapping):
        raise CheckFailed(check, f"row_ids returned {short_repr(answer)}; {shape}",
                          "the `return` line of row_ids: {key: (row_id, row_commit_version), ...}.", seed=seed)
    result: dict[int, tuple[int, int]] = {}
    for key, value in answer.items():
        if not isinstance(key, int) or not isinstance(value, (tuple, list)) or len(value) != 2 \
                or not all(isinstance(item, int) and not isinstance(item, bool) for item in value):
            raise CheckFailed(check, f"row_ids returned an entry {short_repr(key)}: {short_repr(value)}; {shape}",
                              "convert pyarrow values with .to_pylist() (Python ints), and build each value as "
                              "(row_id, row_commit_version).", seed=seed)
        result[key] = (int(value[0]), int(value[1]))
    return result


def _check_row_table(check: str, row_ids: Callable[[str], Any], table: RowTable, seed: int | None, hint: str) -> None:
    watched = Watched(row_ids) if callable(row_ids) else row_ids
    answer = call_student(check, watched, "row_ids", table.path, hint=hint, read_only=[table.path], seed=seed,
                          on=None if seed is None else table.what)
    if isinstance(watched, Watched) and watched.jobs:
        raise CheckFailed(check, f"row_ids ran {watched.jobs} Spark job(s): the exercise is to compute each row's "
                                 "identity from the log and the Parquet files, not to read _metadata with Spark.",
                          "replay_log(table_path).files for the add actions, pyarrow.parquet.read_table for the rows.",
                          seed=seed)
    answer = _as_row_ids(check, answer, seed)
    if answer != table.expected:
        extra, missing = set(answer) - set(table.expected), set(table.expected) - set(answer)
        wrong = sum(1 for key in set(answer) & set(table.expected) if answer[key] != table.expected[key])
        detail = " and ".join(part for part in (
            f"{len(extra)} key(s) the table no longer holds" if extra else "",
            f"{len(missing)} live key(s) missing" if missing else "",
            f"{wrong} row(s) with the wrong (row_id, row_commit_version)" if wrong else "") if part)
        raise CheckFailed(check, f"on {table.what}: row_ids returned {detail}.", _row_ids_fix(table, answer), seed=seed)


@exercise_check
def check_row_ids(row_ids: Callable[[str], dict[int, tuple[int, int]]]) -> None:
    """Check ``row_ids(table_path)`` against Spark's ``_metadata.row_id`` and ``_metadata.row_commit_version``."""
    check = "row_ids"
    spark = lab_spark()
    hint = ("each add action's baseRowId and defaultRowCommitVersion, the materialized columns named in the "
            "configuration, the file's deletion vector, and with column mapping the key column's physical name "
            "(delta.columnMapping.physicalName in the schema).")
    _check_row_table(check, row_ids, _example_rows(spark), None, hint)   # first: an answer that raises does so before the build
    seed = check_seed()
    tables = row_tables(spark, seed)
    for table in tables:
        _check_row_table(check, row_ids, table, seed, hint)
    passed(check, f"gives every row's id and commit version on {len(tables) + 1} tables: UPDATE, DELETE and MERGE with "
                  "and without deletion vectors, row tracking enabled on a table with data, column mapping, checkpoints.")


# ------------------------------------------------------------------------------- protocol upgrades

#: The table property that turns a feature on (value ``true`` unless given) -> the feature Delta 4.4 adds.
FEATURE_OF_PROPERTY = {
    "delta.enableDeletionVectors": "deletionVectors",
    "delta.enableRowTracking": "rowTracking",
    "delta.enableInCommitTimestamps": "inCommitTimestamp",
    "delta.enableChangeDataFeed": "changeDataFeed",
    "delta.appendOnly": "appendOnly",
    "delta.enableTypeWidening": "typeWidening",
    "delta.enableVariantShredding": "variantShredding-preview",
    "delta.columnMapping.mode": "columnMapping",        # value "name"
    "delta.checkpointPolicy": "v2Checkpoint",           # value "v2"
}

#: The features a legacy writer version implies (each includes the ones before it); reader 2 implies columnMapping.
LEGACY_WRITER_FEATURES = {
    1: (),
    2: ("appendOnly", "invariants"),
    3: ("appendOnly", "invariants", "checkConstraints"),
    4: ("appendOnly", "invariants", "checkConstraints", "changeDataFeed", "generatedColumns"),
    5: ("appendOnly", "invariants", "checkConstraints", "changeDataFeed", "generatedColumns", "columnMapping"),
    6: ("appendOnly", "invariants", "checkConstraints", "changeDataFeed", "generatedColumns", "columnMapping",
        "identityColumns"),
}

#: How a case's table is created (its properties at CREATE TABLE), by name.
STARTS = {
    "plain": {},
    "writer 3": {"delta.minWriterVersion": "3"},
    "writer 4": {"delta.minWriterVersion": "4"},
    "reader 2, writer 5": {"delta.minReaderVersion": "2", "delta.minWriterVersion": "5"},
    "reader 2, writer 6": {"delta.minReaderVersion": "2", "delta.minWriterVersion": "6"},
    "writer 7": {"delta.minWriterVersion": "7"},
    "change data feed": {"delta.enableChangeDataFeed": "true"},
    "deletion vectors": {"delta.enableDeletionVectors": "true"},
    "column mapping": {"delta.columnMapping.mode": "name"},
    "in-commit timestamps": {"delta.enableInCommitTimestamps": "true"},
    "row tracking": {"delta.enableRowTracking": "true"},
}

#: The property changes a case draws from (one or two at once).
CHANGES = (
    {"delta.enableDeletionVectors": "true"},
    {"delta.enableRowTracking": "true"},
    {"delta.enableInCommitTimestamps": "true"},
    {"delta.columnMapping.mode": "name"},
    {"delta.enableChangeDataFeed": "true"},
    {"delta.appendOnly": "true"},
    {"delta.checkpointPolicy": "v2"},
    {"delta.enableTypeWidening": "true"},
    {"delta.feature.vacuumProtocolCheck": "supported"},
    {"delta.feature.domainMetadata": "supported"},
    {"delta.enableDeletionVectors": "false"},
    {"delta.minWriterVersion": "4"},
)


@dataclass
class ProtocolCase:
    """One case of exercise 2: the protocol before, the properties set, and the protocol Delta wrote."""

    start: str
    before: dict[str, Any]
    properties: dict[str, str]
    after: dict[str, Any]


def _protocol(path: str) -> dict[str, Any]:
    return dict(replay_log(path).protocol)


def _shown(properties: Mapping[str, str]) -> str:
    return ", ".join(f"'{key}' = '{value}'" for key, value in properties.items())


def _draw_changes(rng: random.Random, before: dict[str, Any]) -> dict[str, str]:
    pool = [change for change in CHANGES
            if not ("delta.minWriterVersion" in change and before["minReaderVersion"] >= 3)]   # Delta refuses those
    properties: dict[str, str] = {}
    for change in rng.sample(pool, rng.choice([1, 1, 2])):
        properties.update(change)
    return properties


#: The cases every run asks (start drawn from the first list, change from the second), each a rule a wrong belief
#: breaks: legacy features listed at writer 7, a requirement, columnMapping alone (reader 2, no lists), a set
#: normalized back to a legacy protocol, a feature the legacy versions already imply with 'false' for another, a
#: reader-writer feature that is not a legacy one.
ALWAYS = (
    (("plain", "writer 3", "writer 4"), ({"delta.enableInCommitTimestamps": "true"},
                                         {"delta.feature.domainMetadata": "supported"},
                                         {"delta.enableDeletionVectors": "true"})),
    (("plain", "writer 4", "change data feed", "deletion vectors", "column mapping"), ({"delta.enableRowTracking": "true"},)),
    (("plain", "writer 3", "in-commit timestamps", "row tracking"), ({"delta.columnMapping.mode": "name"},)),
    (("change data feed", "column mapping"), ({"delta.minWriterVersion": "4"},)),
    (("plain", "writer 3", "writer 4"), ({"delta.appendOnly": "true", "delta.enableDeletionVectors": "false"},)),
    (tuple(STARTS), ({"delta.enableTypeWidening": "true"}, {"delta.checkpointPolicy": "v2"},
                     {"delta.feature.vacuumProtocolCheck": "supported"}, {"delta.enableVariantShredding": "true"})),
)


def protocol_cases(spark: Any, seed: int) -> list[ProtocolCase]:
    """The exercise 2 cases of ``seed``: the ALWAYS cases and four drawn, run for real, built once per process."""
    def build(folder: Path) -> list[dict[str, Any]]:
        rng = random.Random(seed)
        bases: dict[str, tuple[Path, dict[str, Any]]] = {}

        def base(name: str) -> tuple[Path, dict[str, Any]]:
            if name not in bases:
                path = folder / f"start_{len(bases)}"
                properties = STARTS[name]
                spark.sql(f"CREATE TABLE delta.`{path}` (key BIGINT, v INT) USING delta"
                          + (f" TBLPROPERTIES ({_shown(properties)})" if properties else ""))
                bases[name] = (path, _protocol(str(path)))
            return bases[name]

        drawn = [(rng.choice(starts), dict(rng.choice(changes))) for starts, changes in ALWAYS]
        for _ in range(4):
            name = rng.choice(sorted(STARTS))
            drawn.append((name, _draw_changes(rng, base(name)[1])))
        rng.shuffle(drawn)
        cases = []
        for index, (name, changes) in enumerate(drawn):
            path, before = base(name)
            copy = folder / f"case_{index}"
            shutil.copytree(path, copy)
            spark.sql(f"ALTER TABLE delta.`{copy}` SET TBLPROPERTIES ({_shown(changes)})")
            cases.append({"start": name, "before": before, "properties": changes, "after": _protocol(str(copy))})
        return cases

    return [ProtocolCase(**case) for case in build_once(f"lab14_protocols_{seed}", build)]


EXAMPLE_CASE = ProtocolCase("plain", {"minReaderVersion": 1, "minWriterVersion": 2},
                            {"delta.enableDeletionVectors": "true"}, {})


def _normalized(protocol: Mapping[str, Any]) -> tuple[int, int, frozenset[str] | None, frozenset[str] | None]:
    def listed(name: str) -> frozenset[str] | None:
        value = protocol.get(name)
        return None if value is None else frozenset(value)

    return (protocol.get("minReaderVersion"), protocol.get("minWriterVersion"), listed("readerFeatures"),
            listed("writerFeatures"))


def _features(protocol: Mapping[str, Any]) -> set[str]:
    """Every feature a protocol supports: listed, or implied by its legacy versions."""
    if protocol.get("minWriterVersion") == 7:
        return set(protocol.get("writerFeatures") or []) | set(protocol.get("readerFeatures") or [])
    implied = set(LEGACY_WRITER_FEATURES.get(int(protocol.get("minWriterVersion") or 1), ()))
    if int(protocol.get("minReaderVersion") or 1) < 2:
        implied.discard("columnMapping")   # a reader-writer feature: reader 2 too
    return implied


def _protocol_fix(case: ProtocolCase, answer: Mapping[str, Any]) -> str:
    expected = _normalized(case.after)
    got = _normalized(answer)
    expected_features, got_features = _features(case.after), _features(answer)
    turned_off = [key for key, value in case.properties.items() if value == "false"]
    if turned_off and got_features - expected_features & {FEATURE_OF_PROPERTY.get(k) for k in turned_off}:
        return "a property set to 'false' turns nothing on: it adds no feature (and does not remove one either)."
    if "rowTracking" in got_features and "domainMetadata" in expected_features - got_features:
        return "some features require others: rowTracking needs domainMetadata, which Delta adds with it."
    if expected_features - got_features:
        if (expected_features - got_features) & _features(case.before):
            if case.before.get("minWriterVersion") != 7:
                return ("a legacy writer version implies features (writer 2: appendOnly and invariants, 3 adds "
                        "checkConstraints, ...): once the table goes to writer 7 they must all be listed, or the "
                        "table would lose them.")
            return ("the table keeps every feature it supported before (its writerFeatures and readerFeatures): "
                    "a property change only adds.")
        if "delta.minWriterVersion" in case.properties:
            return ("setting delta.minWriterVersion asks for that legacy version's features: add them to the "
                    "features the table already supports.")
        return ("each property turns on a feature (FEATURE_OF_PROPERTY, delta.feature.<name>), with the features it "
                "requires.")
    if expected[1] != 7 and got[1] == 7:
        return ("when the features a table supports are exactly those of a legacy protocol (writer 1 to 6, reader 1 or "
                "2), Delta writes that legacy protocol, without feature lists: check that case last.")
    if got_features - expected_features:
        return ("the result supports exactly the features the table supported before plus those the properties "
                "turn on (and what they require); nothing else.")
    if expected[0] != got[0]:
        return ("the reader version is the highest a supported feature needs: 1 for writer-only features, 2 for "
                "columnMapping alone among reader-writer features (a legacy one), 3 as soon as another reader-writer "
                "feature is supported.")
    if expected[2] != got[2]:
        return ("at reader 3, readerFeatures lists every reader-writer feature the table supports (columnMapping "
                "included) and no writer-only one; below reader 3 there is no readerFeatures list.")
    return ("at writer 7, writerFeatures lists every feature the table supports, reader-writer ones included; below "
            "writer 7 there is no writerFeatures list.")


def _check_case(check: str, protocol_after: Callable[..., Any], case: ProtocolCase, seed: int | None,
                hint: str) -> bool:
    watched = Watched(protocol_after) if callable(protocol_after) else protocol_after
    on = (f"a table created {'plain' if case.start == 'plain' else 'with ' + case.start} (protocol {short_repr(case.before, 200)}), setting "
          f"{short_repr(case.properties, 200)}")
    answer = call_student(check, watched, "protocol_after", dict(case.before), dict(case.properties), hint=hint,
                          seed=seed, on=on)
    if isinstance(watched, Watched) and watched.jobs:
        raise CheckFailed(check, f"protocol_after ran {watched.jobs} Spark job(s): it must work the protocol out from "
                                 "its two arguments, not run an ALTER TABLE.",
                          "the rules of the exercise: features from properties, requirements, legacy versions.",
                          seed=seed)
    if not isinstance(answer, Mapping) or not isinstance(answer.get("minReaderVersion"), int) \
            or not isinstance(answer.get("minWriterVersion"), int):
        raise CheckFailed(check, f"protocol_after returned {short_repr(answer)}; it must return a dict like the log's "
                                 "protocol action: minReaderVersion and minWriterVersion (ints), and readerFeatures / "
                                 "writerFeatures (lists of names) only where the versions have them.",
                          "the `return` line of protocol_after.", seed=seed)
    if not case.after:   # the example: only the shape is checked before the build
        return True
    if _normalized(answer) != _normalized(case.after):
        raise CheckFailed(check, f"on {on}: protocol_after returned {short_repr(dict(answer), 300)}, which is not the "
                                 "protocol Delta writes.", _protocol_fix(case, answer), seed=seed)
    return True


@exercise_check
def check_protocol_after(protocol_after: Callable[[dict[str, Any], dict[str, str]], dict[str, Any]]) -> None:
    """Check ``protocol_after(protocol, properties)`` against the protocol a real ALTER TABLE ... SET TBLPROPERTIES writes."""
    check = "protocol_after"
    spark = lab_spark()
    hint = "the protocol's versions and feature lists, and which feature each property turns on."
    _check_case(check, protocol_after, EXAMPLE_CASE, None, hint)   # first: an answer that raises does so before the build
    seed = check_seed()
    cases = protocol_cases(spark, seed)
    for case in cases:
        _check_case(check, protocol_after, case, seed, hint)
    passed(check, f"predicts the protocol of {len(cases)} property changes: legacy versions and their features, "
                  "reader-writer and writer-only features, requirements, a legacy writer version asked for, "
                  "normalization back to a legacy protocol.")
