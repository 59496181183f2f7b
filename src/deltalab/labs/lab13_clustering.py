"""Lab 13 (liquid clustering): a table's clustering columns from its log, and the files the next OPTIMIZE rewrites.

``check_clustering_columns`` compares the learner's ``clustering_columns(path)`` with the clustering columns
``DESCRIBE DETAIL`` reports, on the lab's example and on tables generated for the run (:func:`keys_tables`):
``CLUSTER BY`` one or two columns drawn, a field of a struct column (``loc.zip``, under column mapping), column
mapping on or off, a clustering column renamed, the keys
changed by ``ALTER TABLE ... CLUSTER BY`` once or twice (with a checkpoint before the last change left in the log
beside the newest one, the commits between cleaned up) or removed (``CLUSTER BY NONE``), clustering turned
on for an existing table, a table never clustered, a checkpoint after the last change or not, the
commits before that checkpoint cleaned up, another domain in the log (the table created clustered has row
tracking on, whose ``delta.rowTracking`` domain every append writes; a table with a domain of another
writer, ``course.lab13``, after ``delta.clustering`` in its checkpoint), the domain removed (``removed: true``),
and a v2 checkpoint (``N.checkpoint.<uuid>.json``, every seed) with
the commits before it cleaned up. The answer must come from the log alone: no Spark, no course
reader, nothing written.

``check_optimize_rewrites`` compares ``optimize_rewrites(path, threshold)`` with the files a real ``OPTIMIZE``
removes from a copy of the table when ``spark.databricks.delta.optimize.clustering.mergeStrategy.minCubeSize.threshold``
is ``threshold`` (:func:`rewrite_tables`): ZCubes of several sizes from OPTIMIZEs run with the threshold
lowered, files appended after them, ZCubes clustered by earlier keys, a table just optimized, ZCubes whose
files lost a third of their rows to deletion vectors, a key renamed under column mapping between two OPTIMIZEs
(the cube before the rename is tagged with the old name), two partial ZCubes and nothing else (merged: only a
single cube alone is left; the second written without statistics), and thresholds drawn around the cubes' sizes (0, exactly a cube's size, one byte more,
the 100 GiB default; exactly a cube's logical size, one byte more, and between it and its files' ``size``). It refuses an
answer that runs Spark (OPTIMIZE on a copy would be the check's own answer) or changes the table.
"""

from __future__ import annotations

import json
import random
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable
from urllib.parse import unquote

from deltalab.jvm import JvmTransaction, write_checkpoint
from deltalab.labs.report import CheckFailed, passed, short_repr
from deltalab.labs.student import Watched, call_student, calls_watched, course_log_readers, exercise_check, lab_spark
from deltalab.labs.tables import build_once, check_seed, clean_up_commits
from deltalab.log import checkpoint_versions, latest_version, read_log, replay_log
from deltalab.session import temporary_conf

__all__ = ["CheckFailed", "DEFAULT_THRESHOLD", "THRESHOLD_SETTING", "check_clustering_columns",
           "check_optimize_rewrites", "keys_tables", "rewrite_tables"]

THRESHOLD_SETTING = "spark.databricks.delta.optimize.clustering.mergeStrategy.minCubeSize.threshold"
#: The setting's default in Delta 4.4: 100 times the 1 GiB ``optimize.maxFileSize``.
DEFAULT_THRESHOLD = 100 * 1024**3
MAX_FILE_SIZE = "spark.databricks.delta.optimize.maxFileSize"
#: Off, Delta writes add actions without statistics (the second cube of the two-cube table).
STATS_SETTING = "spark.databricks.delta.stats.collect"

SCHEMA = "id BIGINT, city STRING, amount INT, day DATE"
#: The nested-key table's schema: a struct column whose field ``loc.zip`` is a key.
NESTED_SCHEMA = SCHEMA + ", loc STRUCT<zip: INT, area: STRING>"
COLUMNS = ("id", "city", "amount", "day")
CITIES = ("new york", "zürich", "oslo", "lima", "pune", None)

#: Modules whose functions answer exercise 1 without reading the log: Spark, delta-spark's DeltaTable.
SPARK_MODULES = ("pyspark.sql.session", "pyspark.sql.readwriter", "delta.tables")


def _append(spark: Any, path: str, rng: random.Random, rows: int, files: int = 1, columns: list[str] | None = None,
            nested: bool = False) -> None:
    start = rng.randrange(10**6)
    frame = spark.range(start, start + rows, 1, files).selectExpr(
        "id",
        f"element_at(array({', '.join(repr(c) if c else 'CAST(NULL AS STRING)' for c in CITIES)}), "
        f"CAST(pmod(hash(id, {rng.randrange(1000)}), {len(CITIES)}) + 1 AS INT)) AS city",
        f"CAST(pmod(hash(id, {rng.randrange(1000)}), 100000) AS INT) AS amount",
        f"date_add(DATE'2026-01-01', CAST(pmod(hash(id, {rng.randrange(1000)}), 365) AS INT)) AS day",
        *([f"named_struct('zip', CAST(pmod(hash(id, {rng.randrange(1000)}), 1000) AS INT), 'area', "
           "concat('area ', CAST(pmod(id, 7) AS STRING))) AS loc"] if nested else []),
    )
    if columns:
        frame = frame.toDF(*columns)
    frame.write.format("delta").mode("append").save(path)


def _checkpoint_at_least(spark: Any, path: str, version: int, columns: list[str]) -> None:
    """Append a few rows until the table has a checkpoint at ``version`` or later.

    The rows come from a generator of their own, so that the tables built after this one at the same seed
    stay what they were."""
    rows = random.Random(version)
    while not checkpoint_versions(path) or checkpoint_versions(path)[-1] < version:
        _append(spark, path, rows, 3, columns=columns)


def _create(spark: Any, path: str, cluster_by: list[str] | None, properties: dict[str, str], schema: str = SCHEMA) -> None:
    shown = ", ".join(f"'{key}' = '{value}'" for key, value in properties.items())
    spark.sql(f"CREATE TABLE delta.`{path}` ({schema}) USING delta"
              + (f" CLUSTER BY ({', '.join(cluster_by)})" if cluster_by is not None else "")
              + (f" TBLPROPERTIES ({shown})" if shown else ""))


def _describe_clustering(spark: Any, path: str) -> list[str]:
    return [str(name) for name in (spark.sql(f"DESCRIBE DETAIL delta.`{path}`").first()["clusteringColumns"] or [])]


# ------------------------------------------------------------------------------- the keys' tables


@dataclass
class KeysTable:
    """A generated table for exercise 1: what a message calls it, Delta's answer, and its earlier keys."""

    path: str
    what: str
    expected: list[str]
    earlier: list[list[str]] = field(default_factory=list)   # the keys before the last change, oldest first
    mapped: bool = False
    cleaned: bool = False
    kind: str = ""


KEY_KINDS = ("created", "renamed", "altered", "none", "later", "never")


def _write_keys_table(spark: Any, path: str, kind: str, rng: random.Random) -> KeysTable:
    """Write one table of ``kind`` (see the module's docstring) and return it with Delta's answer."""
    mapped = kind == "renamed" or rng.random() < 0.4
    # 10: no checkpoint is reached. A table created clustered always reaches one and has the commits before it
    # cleaned up, so that every seed has keys that live only in a classic checkpoint.
    interval = rng.choice([2, 3] if kind == "created" else [2, 3, 10])
    # The table whose keys ALTER TABLE changed keeps an older checkpoint, from before the last change, in its log.
    older = kind == "altered" and interval < 10
    properties = {"delta.checkpointInterval": str(interval)}
    if mapped:
        properties["delta.columnMapping.mode"] = "name"
    if kind == "created":
        # Row tracking writes a domain of its own (delta.rowTracking) in every append and in the checkpoint: the
        # log holds domainMetadata actions that are not the keys.
        properties["delta.enableRowTracking"] = "true"
    keys = rng.sample(COLUMNS, rng.randint(1, 2))
    history: list[list[str]] = []
    columns = list(COLUMNS)
    if kind in ("later", "never"):
        _create(spark, path, None, properties)
    else:
        _create(spark, path, keys, properties)
        history.append(list(keys))
    _append(spark, path, rng, rng.randint(5, 40), columns=columns)
    what = {"created": "a generated table created CLUSTER BY", "renamed": "a generated table whose clustering column was renamed",
            "altered": "a generated table whose keys were changed by ALTER TABLE ... CLUSTER BY",
            "none": "a generated table whose keys were removed (CLUSTER BY NONE)",
            "later": "a generated table clustered after its first writes (ALTER TABLE ... CLUSTER BY on an unclustered table)",
            "never": "a generated table that was never clustered"}[kind]
    if kind == "renamed":
        old = history[-1][0]
        new = {"id": "event_id", "city": "town", "amount": "total", "day": "event_day"}[old]
        spark.sql(f"ALTER TABLE delta.`{path}` RENAME COLUMN {old} TO {new}")
        columns = [new if c == old else c for c in columns]
        history.append([new if c == old else c for c in history[-1]])
        history.pop(-2)   # the same keys, renamed: not an earlier answer
    elif kind == "altered":
        changes = rng.randint(1, 2)
        for change in range(changes):
            if older and change == changes - 1:
                # A checkpoint that holds the keys before the last change, left in the log when the commits before
                # the newest checkpoint are cleaned up (only the newest checkpoint's state is the table's).
                _checkpoint_at_least(spark, path, latest_version(path), columns)
            keys = rng.sample([c for c in COLUMNS if c not in history[-1]], rng.randint(1, 2))
            spark.sql(f"ALTER TABLE delta.`{path}` CLUSTER BY ({', '.join(keys)})")
            history.append(list(keys))
        last_change = latest_version(path)
    elif kind == "none":
        spark.sql(f"ALTER TABLE delta.`{path}` CLUSTER BY NONE")
        history.append([])
    elif kind == "later":
        spark.sql(f"ALTER TABLE delta.`{path}` CLUSTER BY ({', '.join(keys)})")
        history.append(list(keys))
    for _ in range(rng.randint(0, interval) if interval < 10 else 0):   # often a checkpoint after the last change
        _append(spark, path, rng, rng.randint(3, 10), columns=columns)
    if older:
        # The newest checkpoint after the last change, and (below) the commits before it cleaned up: the older
        # checkpoint holds keys the table no longer has, and no commit is left between the two.
        _checkpoint_at_least(spark, path, last_change, columns)
    while kind == "created" and not checkpoint_versions(path):
        _append(spark, path, rng, rng.randint(3, 10), columns=columns)
    checkpoints = checkpoint_versions(path)
    drawn = rng.random() < 0.6 if checkpoints and kind != "created" else False   # the draws as before, seed for seed
    cleaned = bool(checkpoints) and (kind == "created" or drawn or older)
    if cleaned:
        clean_up_commits(path, checkpoints[-1])
    if kind == "created":   # a commit after the checkpoint whose only domain is row tracking's
        _append(spark, path, rng, rng.randint(3, 10), columns=columns)
        domains = [json.loads(line)["domainMetadata"]["domain"] for line in
                   (Path(path) / "_delta_log" / f"{latest_version(path):020d}.json").read_text().splitlines()
                   if "domainMetadata" in line]
        assert domains == ["delta.rowTracking"], domains
    expected = _describe_clustering(spark, path)
    earlier = [keys for keys in history[:-1] if keys != expected]
    return KeysTable(path, what + (" (column mapping on)" if mapped and kind != "renamed" else "")
                     + (", its commits before the last checkpoint cleaned up" if cleaned else "")
                     + (" (an older checkpoint, from before the last change, is still in the log)" if older else ""),
                     expected, earlier, mapped, cleaned, kind)


def _write_nested_keys_table(spark: Any, path: str, rng: random.Random) -> KeysTable:
    """A field of a struct column as a key, with column mapping (every part of the key's path physical in the
    domain), beside a top-level key or alone, in an order drawn."""
    keys = ["loc.zip", *rng.sample(COLUMNS, rng.randint(0, 1))]
    rng.shuffle(keys)
    _create(spark, path, keys, {"delta.columnMapping.mode": "name"}, schema=NESTED_SCHEMA)
    _append(spark, path, rng, rng.randint(5, 40), nested=True)
    return KeysTable(path, f"a generated table clustered by a field of a struct column (CLUSTER BY ({', '.join(keys)}), "
                           "column mapping on)", _describe_clustering(spark, path), [], True, False, "nested")


def _write_v2_keys_table(spark: Any, path: str, rng: random.Random) -> KeysTable:
    """A table whose checkpoint is a v2 checkpoint (``delta.checkpointPolicy = 'v2'``), with the commits before it
    cleaned up: its keys are only in the UUID-named top-level file ``N.checkpoint.<uuid>.json`` (Delta's default
    top-level format; the add actions are in ``_sidecars/``). Column mapping and a change of keys before the
    checkpoint are drawn."""
    mapped = rng.random() < 0.5
    properties = {"delta.checkpointPolicy": "v2", "delta.checkpointInterval": "2"}
    if mapped:
        properties["delta.columnMapping.mode"] = "name"
    keys = rng.sample(COLUMNS, rng.randint(1, 2))
    history = [list(keys)]
    _create(spark, path, keys, properties)
    _append(spark, path, rng, rng.randint(5, 40))
    if rng.random() < 0.5:
        keys = rng.sample([c for c in COLUMNS if c not in history[-1]], rng.randint(1, 2))
        spark.sql(f"ALTER TABLE delta.`{path}` CLUSTER BY ({', '.join(keys)})")
        history.append(list(keys))
    last_change = latest_version(path)
    log = Path(path) / "_delta_log"
    # Under delta.checkpointPolicy = 'v2' every checkpoint Delta writes is a v2 one (asserted below for the last).
    # A checkpoint after the last change, so that no commit left holds the keys (a checkpoint at the change's own
    # version keeps that commit, and its domain, in the log).
    while not checkpoint_versions(path) or checkpoint_versions(path)[-1] <= last_change:
        _append(spark, path, rng, rng.randint(3, 10))
    checkpoint = checkpoint_versions(path)[-1]
    for _ in range(rng.randint(0, 1)):   # a commit after the checkpoint, or none
        _append(spark, path, rng, rng.randint(3, 10))
    clean_up_commits(path, checkpoint)
    top_level = next(log.glob(f"{checkpoint:020d}.checkpoint.*.json"))
    assert not (log / f"{checkpoint:020d}.checkpoint.parquet").exists(), "a v2 checkpoint has no classic name"
    assert json.loads((log / "_last_checkpoint").read_text())["v2Checkpoint"]["path"] == top_level.name
    actions = [json.loads(line) for line in top_level.read_text().splitlines()]
    assert any(action.get("domainMetadata", {}).get("domain") == "delta.clustering"
               for action in actions), "the keys are in the top-level file"
    assert not any('"delta.clustering"' in commit.read_text() for commit in log.glob("*.json") if commit.stem.isdigit()), \
        "no commit left holds the keys: they are in the checkpoint alone"
    sidecars = [action["sidecar"]["path"] for action in actions if "sidecar" in action]
    assert sidecars and all((log / "_sidecars" / name).is_file() for name in sidecars), \
        "the add actions are in the sidecar files the top-level file names"
    assert not any("add" in action for action in actions), "the top-level file holds no add action"
    expected = _describe_clustering(spark, path)
    assert expected == keys, (expected, keys)
    return KeysTable(path, "a generated table whose checkpoint is a v2 checkpoint (delta.checkpointPolicy = 'v2')"
                           + (" with column mapping on" if mapped else "") + ", its commits before that checkpoint cleaned up",
                     expected, history[:-1], mapped, True, "v2")


#: A domain of the course's own, committed beside the keys in :func:`_write_domain_keys_table`. Delta writes a
#: checkpoint's domains in the order of a hash table's buckets (``InMemoryLogReplay``'s ``mutable.HashMap``, by the
#: name's Java hash code): this name lands after ``delta.clustering``, so that a reader keeping the last domain of the
#: checkpoint, whatever its name, keeps this one (asserted for every table built).
USER_DOMAIN = "course.lab13"


def _write_domain_keys_table(spark: Any, path: str, rng: random.Random) -> KeysTable:
    """A clustered table with a domain of another writer (``course.lab13``, not one of Delta's), committed through
    Delta's own transaction and then checkpointed, with the commits before the checkpoint cleaned up: the
    checkpoint's domainMetadata column holds ``delta.clustering`` and, after it, the other domain. Column mapping and
    a commit after the checkpoint are drawn."""
    import pyarrow.parquet as pq

    mapped = rng.random() < 0.5
    keys = rng.sample(COLUMNS, rng.randint(1, 2))
    _create(spark, path, keys, {"delta.columnMapping.mode": "name"} if mapped else {})
    _append(spark, path, rng, rng.randint(5, 40))
    configuration = json.dumps({"owner": "lab13", "reviewed": rng.choice(["yes", "no"]), "columns": rng.randint(1, 4)})
    JvmTransaction(spark, path).commit_domain(USER_DOMAIN, configuration)
    write_checkpoint(spark, path)
    checkpoint = checkpoint_versions(path)[-1]
    for _ in range(rng.randint(0, 1)):   # a commit after the checkpoint, or none
        _append(spark, path, rng, rng.randint(3, 10))
    clean_up_commits(path, checkpoint)
    rows = pq.read_table(Path(path) / "_delta_log" / f"{checkpoint:020d}.checkpoint.parquet",
                         columns=["domainMetadata"]).to_pylist()
    domains = [row["domainMetadata"]["domain"] for row in rows if row["domainMetadata"]]
    assert domains == ["delta.clustering", USER_DOMAIN], f"the other domain comes last in the checkpoint: {domains}"
    expected = _describe_clustering(spark, path)
    assert expected == keys, (expected, keys)
    return KeysTable(path, f"a generated table with a domain of another writer ({USER_DOMAIN}) beside delta.clustering in "
                           "its checkpoint" + (" (column mapping on)" if mapped else "")
                           + ", its commits before that checkpoint cleaned up", expected, [], mapped, True, "domain")


def _write_removed_keys_table(spark: Any, path: str, rng: random.Random) -> KeysTable:
    """A clustered table whose delta.clustering domain was then removed: a domainMetadata action with
    ``removed: true`` (a tombstone; its configuration still names the old keys), committed through Delta's own
    transaction, which accepts it; DESCRIBE DETAIL then reports no keys. Column mapping and an append after the
    tombstone are drawn; no checkpoint (a checkpoint keeps no removed domain)."""
    mapped = rng.random() < 0.5
    keys = rng.sample(COLUMNS, rng.randint(1, 2))
    _create(spark, path, keys, {"delta.columnMapping.mode": "name"} if mapped else {})
    _append(spark, path, rng, rng.randint(5, 40))
    domain = replay_log(path).domain_metadata["delta.clustering"]
    JvmTransaction(spark, path).commit_domain("delta.clustering", domain["configuration"], removed=True)
    for _ in range(rng.randint(0, 1)):
        _append(spark, path, rng, rng.randint(3, 10))
    assert not checkpoint_versions(path), "the tombstone is in a commit"
    expected = _describe_clustering(spark, path)
    assert expected == [], expected
    return KeysTable(path, "a generated table whose delta.clustering domain was removed (a domainMetadata action with "
                           "removed: true)" + (" (column mapping on)" if mapped else ""), expected, [keys], mapped,
                     False, "removed")


def _logs_present(tables: list[Any]) -> bool:
    return all(Path(table.path, "_delta_log").is_dir() for table in tables)


def keys_tables(spark: Any, seed: int) -> list[KeysTable]:
    """The exercise 1 tables of ``seed``: one of each kind and one more drawn, built once per process while intact."""
    def build(folder: Path) -> list[KeysTable]:
        rng = random.Random(seed)
        kinds = list(KEY_KINDS) + [rng.choice(["renamed", "altered", "later"])]
        rng.shuffle(kinds)
        tables = [_write_keys_table(spark, str(folder / f"table_{index}"), kind, rng) for index, kind in enumerate(kinds)]
        # Built last, so that the tables above stay those of earlier versions at the same seed.
        tables.append(_write_nested_keys_table(spark, str(folder / f"table_{len(tables)}"), rng))
        tables.append(_write_v2_keys_table(spark, str(folder / f"table_{len(tables)}"), rng))
        tables.append(_write_domain_keys_table(spark, str(folder / f"table_{len(tables)}"), rng))
        return [*tables, _write_removed_keys_table(spark, str(folder / f"table_{len(tables)}"), rng)]

    return build_once(f"lab13_keys_{seed}", build, _logs_present)


def _example_keys(spark: Any) -> KeysTable:
    """The check's example: created CLUSTER BY (city), then ALTER TABLE ... CLUSTER BY (day, amount)."""
    def build(folder: Path) -> KeysTable:
        path = str(folder / "example")
        _create(spark, path, ["city"], {})
        _append(spark, path, random.Random(13), 30)
        spark.sql(f"ALTER TABLE delta.`{path}` CLUSTER BY (day, amount)")
        return KeysTable(path, "the check's example table (CLUSTER BY (city), then ALTER TABLE ... CLUSTER BY (day, amount))",
                         _describe_clustering(spark, path), [["city"]], kind="altered")

    return build_once("lab13_keys_example", build, lambda table: _logs_present([table]))


#: What a reader of v2 checkpoints must know: said when an answer is wrong on the v2 table, or raised on it.
_V2_FIX = ("this table's last checkpoint is a v2 checkpoint (delta.checkpointPolicy = 'v2'): its top-level file is "
          "N.checkpoint.<uuid>.json (or .parquet), not N.checkpoint.parquet, and _last_checkpoint names it in "
          "v2Checkpoint.path; a JSON one holds one action per line, metaData and domainMetadata among them (its add "
          "actions are in the sidecar files of _delta_log/_sidecars/).")


_OTHER_DOMAIN_FIX = ("the log holds domains other than the keys' (row tracking's delta.rowTracking, a writer's own): in a "
                     "checkpoint too, each is a row of the domainMetadata column, in no particular order; keep the row "
                     "whose domain is delta.clustering.")
_MAPPING_FIX = ("with column mapping the domain names columns by their physical names (col-...): map each one to its "
                "logical name through the schema (metaData.schemaString, each field's metadata "
                "delta.columnMapping.physicalName).")
_CLEANED_FIX = ("the commits before the checkpoint are gone: the checkpoint's domainMetadata column holds the domains in "
                "force at its version, and its metaData column the schema; start from it, then apply the commits after it.")


def _schema_only_in_checkpoint(table: KeysTable) -> bool:
    """True if no commit left in the table's log holds a metaData action: the schema is in the checkpoint alone."""
    if not table.cleaned:
        return False
    commits = [p for p in (Path(table.path) / "_delta_log").glob("*.json") if p.stem.isdigit()]
    return not any('"metaData"' in commit.read_text() for commit in commits)


def _keys_fix(table: KeysTable, answer: list[str]) -> str:
    """The hint for a wrong answer on ``table``.

    An answer that missed the checkpoint can look like another mistake: with the commits before a checkpoint
    cleaned up, a reader that skips the checkpoint (or cannot find a v2 one) gets no domain ([]), or gets the domain
    of a later commit without the schema to map its physical names. Those answers are told about the checkpoint and
    the mapping both, since this table alone cannot tell the two mistakes apart."""
    physical = any("col-" in name for name in answer)
    checkpoint = f"{_CLEANED_FIX} {_V2_FIX}" if table.kind == "v2" else _CLEANED_FIX
    if physical and _schema_only_in_checkpoint(table):
        return f"{checkpoint} Then {_MAPPING_FIX}"
    nested = [name for name in table.expected if "." in name]
    if nested and physical and not any(name.startswith("col-") for name in answer):
        return ("every part of a nested key's path is a physical name under column mapping: map each one through the "
                "fields of the struct it is in (the field's type holds its own fields, each with its "
                "delta.columnMapping.physicalName), then join the logical names with '.'.")
    if physical:
        return _MAPPING_FIX
    if not table.expected and table.kind in ("none", "never"):
        return ("a table without keys has no clustering columns: return an empty list (CLUSTER BY NONE writes a "
                "delta.clustering domain whose clusteringColumns list is empty; a table never clustered has no domain).")
    if table.kind == "removed":
        return ("a domainMetadata action with removed: true removes the domain (its configuration is what it was): "
                "after it the table has no keys, until a later action for delta.clustering sets them again.")
    if answer in table.earlier:
        return ("the keys changed after that: every ALTER TABLE ... CLUSTER BY writes a new domainMetadata action for "
                "delta.clustering, and the last one (in commit order, after the checkpoint's) is in force.")
    if table.kind == "domain":   # built after the others: an answer that gets here reads checkpoints whose commits are gone
        return _OTHER_DOMAIN_FIX
    if table.cleaned and not answer and table.expected:
        return checkpoint
    if table.kind == "v2":
        return _V2_FIX
    if sorted(answer) == sorted(table.expected):
        return "the order of the keys is the order of clusteringColumns in the domain: keep it."
    if nested and len(answer) == len(table.expected):
        return ("a key can be a field of a struct column: its path in clusteringColumns has one name per level "
                "([\"loc\", \"zip\"], physical names under column mapping), and queries name it with the logical names "
                "joined by '.': loc.zip.")
    return ("read the delta.clustering domainMetadata action: its configuration is a JSON string whose "
            "clusteringColumns is a list of column paths (one list of names per column).")


def _as_names(check: str, name: str, answer: Any, seed: int | None) -> list[str]:
    if isinstance(answer, (str, bytes)) or not isinstance(answer, (list, tuple)) \
            or not all(isinstance(item, str) for item in answer):
        raise CheckFailed(check, f"{name} returned {short_repr(answer)}; it must return a list of column names (str), "
                                 "in the order of the keys, empty when the table has none.",
                          f"the `return` line of {name}: a list such as ['city', 'day'], or [].", seed=seed)
    return list(answer)


def _call_from_log(check: str, func: Callable[..., Any], name: str, table: str, *args: Any, hint: str,
                   seed: int | None, on: str | None) -> Any:
    """Call the learner's function on ``table`` (read-only), refusing course readers and Spark.

    Only the learner's own call is watched: :func:`call_student` itself reads the session's settings."""
    used: list[str] = []

    def watched(*call_args: Any) -> Any:
        with calls_watched(course_log_readers(), modules=SPARK_MODULES) as called:
            try:
                return func(*call_args)
            finally:
                used.extend(called)

    answer = call_student(check, watched if callable(func) else func, name, table, *args, hint=hint,
                          read_only=[table], seed=seed, on=on)
    if used:
        raise CheckFailed(check, f"{name} called {used[0]}, which answers from Delta's own reader; the exercise is "
                                 "to read the log yourself.",
                          "list and open the files in _delta_log/ (json.loads for commits, pyarrow.parquet for the "
                          "checkpoint).", seed=seed)
    return answer


def _check_keys(check: str, clustering_columns: Callable[[str], list[str]], table: KeysTable, seed: int | None,
                hint: str) -> None:
    on = None if seed is None else table.what
    hint = _V2_FIX if table.kind == "v2" else _OTHER_DOMAIN_FIX if table.kind == "domain" else hint
    answer = _as_names(check, "clustering_columns",
                       _call_from_log(check, clustering_columns, "clustering_columns", table.path, hint=hint,
                                      seed=seed, on=on), seed)
    if answer != table.expected:
        raise CheckFailed(check, f"on {table.what}: clustering_columns returned {short_repr(answer, 60)}, "
                                 "which are not the table's clustering columns.",
                          _keys_fix(table, answer), seed=seed)


@exercise_check
def check_clustering_columns(clustering_columns: Callable[[str], list[str]]) -> None:
    """Check ``clustering_columns(table_path)`` against DESCRIBE DETAIL's clusteringColumns on the check's example
    and the run's generated tables."""
    check = "clustering_columns"
    spark = lab_spark()
    hint = "the delta.clustering domainMetadata action in the commits (and in the checkpoint), and the schema."
    _check_keys(check, clustering_columns, _example_keys(spark), None, hint)   # first: an answer that raises does so before the build
    seed = check_seed()
    tables = keys_tables(spark, seed)
    for table in tables:
        _check_keys(check, clustering_columns, table, seed, hint)
    passed(check, f"reads the keys of {len(tables) + 1} tables from their logs alone: ALTER TABLE ... CLUSTER BY, "
                  "CLUSTER BY NONE, column mapping and renames, a field of a struct column, classic and v2 checkpoints "
                  "with the commits before them cleaned up, other domains beside the keys.")


# ---------------------------------------------------------------------------- the OPTIMIZE tables


@dataclass
class RewriteTable:
    """A generated clustered table for exercise 2, with the files a real OPTIMIZE removes per threshold."""

    path: str
    what: str
    removed: dict[int, set[str]] = field(default_factory=dict)   # threshold -> paths OPTIMIZE removed
    cube_sizes: dict[str, int] = field(default_factory=dict)     # ZCUBE_ID -> bytes (live files of the current keys)


def _optimize(spark: Any, path: str, threshold: int, max_file_size: int | None = None) -> None:
    settings = {THRESHOLD_SETTING: str(threshold)}
    if max_file_size:
        settings[MAX_FILE_SIZE] = str(max_file_size)
    with temporary_conf(spark, settings):
        spark.sql(f"OPTIMIZE delta.`{path}`")


def _table_bytes(path: str) -> int:
    return sum(int(add["size"]) for add in replay_log(path).files.values())


def _unrounded_logical_size(add: dict[str, Any]) -> float:
    """``size`` scaled by the share of the file's rows a deletion vector has not deleted, before truncation;
    ``size`` without a deletion vector or without ``numRecords``. ``add`` is an add action as the log writes it
    (``stats`` a JSON string) or as ``replay_log`` gives it (parsed)."""
    size = int(add["size"])
    vector = add.get("deletionVector")
    stats = add.get("stats") or {}
    records = (json.loads(stats) if isinstance(stats, str) else stats).get("numRecords")
    if not vector or not records:
        return size
    kept = records - int(vector["cardinality"])
    return kept / (kept + int(vector["cardinality"])) * size


def _logical_size(add: dict[str, Any]) -> int:
    """The bytes Delta counts for a file when it sizes a ZCube: :func:`_unrounded_logical_size` truncated
    (``AddFile.estLogicalFileSize``, a Long, which ``ZCube`` sums in Delta 4.4)."""
    return int(_unrounded_logical_size(add))


def _truncated_bytes(add: dict[str, Any]) -> float:
    """What truncating drops from the file's logical size (0 for a file without a deletion vector)."""
    return _unrounded_logical_size(add) - _logical_size(add)


def _delete_until_truncation_counts(spark: Any, path: str, keys: list[str]) -> None:
    """Delete single rows of the largest cube's files until what truncation drops from its files' logical sizes adds
    up to a byte or more: then a threshold one byte over the cube's size (Delta's sum of truncated sizes) is not over
    the sum of untruncated ones, and only an answer that truncates each file, as Delta does, rewrites the cube.
    The rows are drawn from a generator of their own, so that the tables built after this one stay the same."""
    import pyarrow.parquet as pq

    deleted: set[int] = set()
    for _ in range(40):
        largest = max(_cube_files(path, keys).values(), key=lambda adds: sum(map(_logical_size, adds)))
        if sum(map(_truncated_bytes, largest)) >= 1:
            return
        rows = random.Random(sum(int(add["size"]) for add in largest) + len(deleted))
        file = Path(path) / unquote(rows.choice(sorted(add["path"] for add in largest)))
        kept = sorted(i for i in pq.read_table(file, columns=["id"]).column("id").to_pylist() if i % 3 and i not in deleted)
        row = rows.choice(kept)
        spark.sql(f"DELETE FROM delta.`{path}` WHERE id = {row}")
        deleted.add(row)
    raise AssertionError(f"{path}: no cube whose files' truncated logical sizes lose a byte in all after 40 deletes")


def _cube_files(path: str, keys: list[str]) -> dict[str, list[dict[str, Any]]]:
    """The live ZCubes clustered by ``keys``: ZCUBE_ID -> the add actions of its files."""
    cubes: dict[str, list[dict[str, Any]]] = {}
    for add in replay_log(path).files.values():
        tags = add.get("tags") or {}
        if "ZCUBE_ID" in tags and json.loads(tags.get("ZCUBE_ZORDER_BY", "[]")) == keys:
            cubes.setdefault(tags["ZCUBE_ID"], []).append(add)
    return cubes


def _current_cubes(path: str, keys: list[str], size: Callable[[dict[str, Any]], int] = _logical_size) -> dict[str, int]:
    """The live ZCubes clustered by ``keys``, with their sizes in bytes (logical by default, as Delta counts)."""
    return {cube: sum(map(size, adds)) for cube, adds in _cube_files(path, keys).items()}


def _removed_by_optimize(spark: Any, path: str, scratch: Path, threshold: int) -> set[str]:
    """The files a real OPTIMIZE with the threshold removes, run on a copy of the table."""
    copy = scratch / f"copy_{threshold}"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(path, copy)
    before = latest_version(copy)
    _optimize(spark, str(copy), threshold)
    removed: set[str] = set()
    if latest_version(copy) > before:
        removed = {a["remove"]["path"] for a in read_log(copy).commits[latest_version(copy)] if "remove" in a}
    shutil.rmtree(copy)
    return removed


def _thresholds(kind: str, cube_sizes: Iterable[int], rng: random.Random,
                physical_sizes: Iterable[int] = ()) -> list[int]:
    """The thresholds asked on a table (each costs a real OPTIMIZE): the default, a cube's exact size, and for
    the table of several cubes one byte more, and 0 or a size between two cubes, drawn. On the table with
    deleted rows: for its largest cube, a size between its logical and its physical size."""
    sizes = sorted(set(cube_sizes))
    if kind == DELETED_ROWS:
        logical, physical = max(zip(cube_sizes, physical_sizes))
        if not logical < (logical + physical + 1) // 2 <= physical:
            raise AssertionError(f"the deleted rows must make a cube's logical size ({logical}) smaller than its size ({physical})")
        # Exactly the logical size (a full cube: Delta's test is size >= threshold) and one byte more (a partial
        # one), which tells a sum of each file's truncated logical size, as Delta sums, from a sum of fractions.
        return [logical, logical + 1, (logical + physical + 1) // 2]
    exact = rng.choice(sizes)
    asked = {DEFAULT_THRESHOLD, exact}
    if kind == "cubes":
        asked.add(exact + 1)
        if rng.random() < 0.5 or len(sizes) < 2:
            asked.add(0)
        else:
            low, high = rng.sample(sizes, 2)
            asked.add((low + high) // 2)
    return sorted(asked)


def _write_rewrite_table(spark: Any, path: str, kind: str, rng: random.Random, scratch: Path) -> RewriteTable:
    keys = rng.sample(["id", "amount", "day"], rng.randint(1, 2))
    _create(spark, path, keys, {"delta.enableDeletionVectors": "true"} if kind == DELETED_ROWS else {})
    for _ in range(2):
        _append(spark, path, rng, rng.randint(400, 1500), files=rng.randint(1, 2))
    size = _table_bytes(path)
    _optimize(spark, path, DEFAULT_THRESHOLD, max_file_size=max(1, size // rng.randint(2, 4)))  # the first cube
    what = "a generated table just optimized (one ZCube, nothing appended since)"
    if kind != "just optimized":
        more_cubes = rng.randint(1, 2) if kind == "cubes" else 0 if kind == DELETED_ROWS else 1   # TWO_CUBES: 1
        for _ in range(more_cubes):   # more cubes: new data clustered on its own, the threshold under the cubes
            _append(spark, path, rng, rng.randint(200, 800), files=rng.randint(1, 2))
            smallest = min(_current_cubes(path, keys).values())
            # Two cubes: the second written without statistics (an add action without stats, so without numRecords;
            # Delta sizes such a file by its size).
            with temporary_conf(spark, {STATS_SETTING: "false"} if kind == TWO_CUBES else {}):
                _optimize(spark, path, max(1, smallest // 2), max_file_size=max(1, _table_bytes(path) // 6))
        if kind == TWO_CUBES and all(add.get("stats") for add in replay_log(path).files.values()):
            raise AssertionError(f"{path}: the second cube's files must have no statistics")
        what = ("a generated table with two ZCubes, the second written by an OPTIMIZE without statistics "
                f"({STATS_SETTING} = false: its add actions have no stats)" if kind == TWO_CUBES else
                "a generated table with ZCubes of several sizes" if more_cubes else "a generated table with a ZCube")
        if kind == DELETED_ROWS:
            spark.sql(f"DELETE FROM delta.`{path}` WHERE pmod(id, 3) = 0")
            clustered = [a for a in replay_log(path).files.values() if "ZCUBE_ID" in (a.get("tags") or {})]
            if not clustered or not all(a.get("deletionVector") for a in clustered):
                raise AssertionError(f"{path}: the DELETE must leave every clustered file with a deletion vector")
            _delete_until_truncation_counts(spark, path, keys)
            what += ", a third of its rows deleted with deletion vectors (the files keep their ZCube tags)"
        if kind == "new keys":
            keys = rng.sample([c for c in ("id", "amount", "day") if c not in keys], 1)
            spark.sql(f"ALTER TABLE delta.`{path}` CLUSTER BY ({', '.join(keys)})")
            _append(spark, path, rng, rng.randint(200, 600))
            _optimize(spark, path, DEFAULT_THRESHOLD)
            what += ", its keys then changed and new data clustered by them"
        # Deleted rows: a new file, so that no cube is alone. Two cubes: nothing, so that only cubes are left.
        appended = 0 if kind == TWO_CUBES else rng.randint(0 if kind == "new keys" else 1, 2)
        for _ in range(appended):
            _append(spark, path, rng, rng.randint(100, 400))
        what += f", {appended} append(s) since the last OPTIMIZE" if appended else ", nothing appended since"
    table = RewriteTable(path, what, cube_sizes=_current_cubes(path, keys))
    physical = _current_cubes(path, keys, size=lambda add: int(add["size"]))
    for threshold in _thresholds(kind, table.cube_sizes.values(), rng, [physical[c] for c in table.cube_sizes]):
        table.removed[threshold] = _removed_by_optimize(spark, path, scratch, threshold)
    return table


def _write_renamed_key_table(spark: Any, path: str, rng: random.Random, scratch: Path) -> RewriteTable:
    """Column mapping, a key renamed between two OPTIMIZEs: the cube written before the rename is tagged
    with the old name, the one after with the new name, and a file appended since."""
    key = rng.choice(["amount", "day"])
    new_name = {"amount": "total", "day": "event_day"}[key]
    _create(spark, path, [key], {"delta.columnMapping.mode": "name"})
    for _ in range(2):
        _append(spark, path, rng, rng.randint(400, 1500), files=rng.randint(1, 2))
    _optimize(spark, path, DEFAULT_THRESHOLD, max_file_size=max(1, _table_bytes(path) // rng.randint(2, 3)))
    spark.sql(f"ALTER TABLE delta.`{path}` RENAME COLUMN {key} TO {new_name}")
    renamed = [new_name if column == key else column for column in COLUMNS]
    _append(spark, path, rng, rng.randint(200, 600), files=rng.randint(1, 2), columns=renamed)
    _optimize(spark, path, DEFAULT_THRESHOLD)
    _append(spark, path, rng, rng.randint(100, 400), columns=renamed)
    tagged = {tuple(json.loads(a["tags"]["ZCUBE_ZORDER_BY"])) for a in replay_log(path).files.values()
              if "ZCUBE_ID" in (a.get("tags") or {})}
    if tagged != {(key,), (new_name,)}:
        raise AssertionError(f"{path}: expected cubes tagged [{key}] and [{new_name}], found {sorted(tagged)}")
    table = RewriteTable(path, f"a generated table with column mapping whose key {key} was renamed to {new_name} after "
                               "an OPTIMIZE, optimized again and appended to", cube_sizes=_current_cubes(path, [new_name]))
    table.removed[DEFAULT_THRESHOLD] = _removed_by_optimize(spark, path, scratch, DEFAULT_THRESHOLD)
    return table


REWRITE_KINDS = ("cubes", "new keys", "just optimized")
#: Built after the kinds above (so that their tables stay those of earlier versions at the same seed): ZCubes
#: whose files lost rows to deletion vectors, asked at a threshold between a cube's logical and physical size,
#: and a key renamed under column mapping between two OPTIMIZEs; then (built last, for the same reason) two
#: partial cubes and nothing else, which Delta merges (only a single cube alone is left as it is).
DELETED_ROWS = "deleted rows"
RENAMED_KEY = "renamed key"
TWO_CUBES = "two cubes"


def rewrite_tables(spark: Any, seed: int) -> list[RewriteTable]:
    """The exercise 2 tables of ``seed``: one of each kind, built once per process while intact."""
    def build(folder: Path) -> list[RewriteTable]:
        rng = random.Random(seed)
        kinds = list(REWRITE_KINDS)
        rng.shuffle(kinds)
        kinds.append(DELETED_ROWS)
        tables = [_write_rewrite_table(spark, str(folder / f"table_{index}"), kind, rng, folder)
                  for index, kind in enumerate(kinds)]
        tables.append(_write_renamed_key_table(spark, str(folder / f"table_{len(tables)}"), rng, folder))
        return [*tables, _write_rewrite_table(spark, str(folder / f"table_{len(tables)}"), TWO_CUBES, rng, folder)]

    return build_once(f"lab13_rewrites_{seed}", build, _logs_present)


def _logical_names(state: Any) -> dict[str, str]:
    """Physical column name -> today's logical name, from the schema (each name itself without column mapping)."""
    return {f["metadata"].get("delta.columnMapping.physicalName", f["name"]): f["name"]
            for f in json.loads(state.metadata["schemaString"])["fields"]}


def _rewrites_fix(path: str, threshold: int, answer: set[str], expected: set[str]) -> str:
    state = replay_log(path)
    keys = json.loads(state.domain_metadata["delta.clustering"]["configuration"])["clusteringColumns"]
    names = _logical_names(state)
    current = [names.get(k[0], k[0]) for k in keys]
    files = {add["path"]: add for add in state.files.values()}
    cubes: dict[str, int] = {}
    physical: dict[str, int] = {}
    for add in files.values():
        tags = add.get("tags") or {}
        if "ZCUBE_ID" in tags:
            cubes[tags["ZCUBE_ID"]] = cubes.get(tags["ZCUBE_ID"], 0) + _logical_size(add)
            physical[tags["ZCUBE_ID"]] = physical.get(tags["ZCUBE_ID"], 0) + int(add["size"])

    def tags_of(p: str) -> dict[str, str]:
        return files.get(p, {}).get("tags") or {}

    extra, missing = answer - expected, expected - answer
    if any(p not in files for p in answer):
        return "return the paths of live files, as the add actions write them (relative to the table folder)."
    other_keys = [p for p in extra if "ZCUBE_ID" in tags_of(p) and json.loads(tags_of(p)["ZCUBE_ZORDER_BY"]) != current]
    if any(set(json.loads(tags_of(p)["ZCUBE_ZORDER_BY"])) - set(names.values()) for p in other_keys):
        return ("a rename makes the cubes written before it cubes of other keys: ZCUBE_ZORDER_BY keeps the names the keys "
                "had when that OPTIMIZE ran, and Delta compares them with today's names (only OPTIMIZE FULL rewrites them).")
    if other_keys:
        return ("files clustered by other columns than the table's keys (their ZCUBE_ZORDER_BY differs) are left alone: "
                "only OPTIMIZE FULL rewrites them.")
    if current != [k[0] for k in keys] and any(json.loads(tags_of(p).get("ZCUBE_ZORDER_BY", "null")) == current for p in missing):
        return ("ZCUBE_ZORDER_BY holds the keys' logical names, as queries use them, not the physical names (col-...) "
                "the clustering domain holds under column mapping.")
    if any("ZCUBE_ID" in tags_of(p) and cubes[tags_of(p)["ZCUBE_ID"]] < threshold <= physical[tags_of(p)["ZCUBE_ID"]]
           for p in missing):
        return ("a ZCube's size is the logical size of its files: a file with a deletion vector counts size x "
                "(numRecords - deletionVector.cardinality) / numRecords, truncated to whole bytes file by file before the "
                "cube's sum (Delta's estLogicalFileSize is a Long), so a cube that lost rows to a DELETE can fall under "
                "the threshold and become partial.")
    if any("ZCUBE_ID" in tags_of(p) and cubes[tags_of(p)["ZCUBE_ID"]] == threshold for p in extra):
        return "a ZCube whose size is exactly the threshold is complete: a cube is partial only when it is smaller."
    if any("ZCUBE_ID" in tags_of(p) and cubes[tags_of(p)["ZCUBE_ID"]] > threshold for p in extra):
        return ("a ZCube at least as large as the threshold (the sum of its files' logical sizes) is complete: OPTIMIZE "
                "leaves it and clusters new data into a new cube.")
    if extra and not expected:
        return ("a partial ZCube alone, with no file outside any ZCube, is not rewritten: there is nothing new to merge "
                "it with (right after an OPTIMIZE, the next one has nothing to do).")
    if any("ZCUBE_ID" not in tags_of(p) for p in missing):
        return "files without a ZCUBE_ID tag (appended since the last OPTIMIZE) are always rewritten."
    if missing:
        return ("files of a partial ZCube (smaller than the threshold) are merged with the new data: OPTIMIZE rewrites "
                "them too.")
    return "compare each ZCube's size with the threshold, and the ZCube's columns with the table's keys."


#: Said when an answer raises on the table with a cube written without statistics.
_NO_STATS_FIX = ("an add action written without statistics has no stats at all (None, not {}), so no numRecords: "
                 "Delta then counts the file's size as it is (estLogicalFileSize needs numRecords).")


@exercise_check
def check_optimize_rewrites(optimize_rewrites: Callable[[str, int], Iterable[str]]) -> None:
    """Check ``optimize_rewrites(table_path, threshold)`` against the files a real OPTIMIZE removes from a copy."""
    check = "optimize_rewrites"
    spark = lab_spark()
    seed = check_seed()
    hint = ("each live add action's size, deletionVector and stats (numRecords), its tags (ZCUBE_ID, ZCUBE_ZORDER_BY), "
            "and the table's clustering columns.")
    example = _example_keys(spark).path   # first, answer unchecked: one that raises does so before the build
    call_student(check, optimize_rewrites, "optimize_rewrites", example, DEFAULT_THRESHOLD, hint=hint, read_only=[example])
    tables = rewrite_tables(spark, seed)
    asked = 0
    for table in tables:
        for threshold, expected in table.removed.items():
            watched = Watched(optimize_rewrites) if callable(optimize_rewrites) else optimize_rewrites
            answer = call_student(check, watched, "optimize_rewrites", table.path, threshold,
                                  hint=_NO_STATS_FIX if STATS_SETTING in table.what else hint,
                                  read_only=[table.path], seed=seed, on=table.what)
            if isinstance(watched, Watched) and watched.jobs:
                raise CheckFailed(check, f"optimize_rewrites ran {watched.jobs} Spark job(s): it must predict from the "
                                         "log, not run an OPTIMIZE.",
                                  "read the add actions (replay_log(path).files, or the log's JSON yourself).", seed=seed)
            if isinstance(answer, (str, bytes)) or not isinstance(answer, (set, frozenset, list, tuple)) \
                    or not all(isinstance(item, str) for item in answer):
                raise CheckFailed(check, f"optimize_rewrites returned {short_repr(answer)}; it must return a set of "
                                         "file paths (str).",
                                  "the `return` line of optimize_rewrites: a set of add.path values, or set().", seed=seed)
            answer = set(answer)
            asked += 1
            if answer != expected:
                shown = "the 100 GiB default" if threshold == DEFAULT_THRESHOLD else f"{threshold:,} bytes"
                wrong = " and ".join(part for part in (
                    f"{len(expected - answer)} file(s) OPTIMIZE rewrites are missing" if expected - answer else "",
                    f"{len(answer - expected)} file(s) it leaves are included" if answer - expected else "") if part)
                raise CheckFailed(check, f"on {table.what}, threshold {shown}: {wrong}.",
                                  _rewrites_fix(table.path, threshold, answer, expected), seed=seed)
    passed(check, f"predicts the files a real OPTIMIZE rewrites for {asked} (table, threshold) pairs: partial and "
                  "complete ZCubes, a cube of exactly the threshold, cubes of earlier keys, a table just optimized, "
                  "cubes sized by their rows left after deletion vectors, a key renamed between two OPTIMIZEs, files without "
                  "statistics.")
