"""The lab 13 checks (deltalab.labs.lab13_clustering): the solution passes at seeds that cover the edge cases,
and each kind of wrong answer is refused with a message that says what is wrong and never shows the expected
answer.

The wrong answers run on the tables of this run's seed (built once per process, shared with the solution's
run), which at every seed hold a clustering column renamed under column mapping, keys changed and removed,
keys that live only in a classic checkpoint and only in a v2 one (the commits before them cleaned up), another
writer's domain after the keys in a checkpoint, the keys' domain removed, ZCubes
of several sizes, cubes of earlier keys, a table just optimized and cubes whose files lost rows to deletion
vectors.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from deltalab.labs import lab13_clustering as lab
from deltalab.labs.tables import SEED_ENV
from deltalab.labs.lab13_clustering import check_clustering_columns, check_optimize_rewrites
from deltalab.log import read_log, replay_log
from lab_testing import solution_and_student_version
from lab_testing import check_failure as failure
from lab_testing import run_seed, solution_namespace, solution_seeds, stub

# The labs' tests run in make test-labs (and those of its solutions at their seeds, marked seeds too, in
# make test-seeds), not in make test: tests/README.md says why.
pytestmark = pytest.mark.labs

#: The lab's solution on tables of a fresh seed, then its student version (tests/support/lab_testing.py).
test_the_solution_passes_and_the_student_version_says_what_is_missing = solution_and_student_version("lab13_clustering")

SOURCE = Path(__file__).resolve().parents[1] / "labs" / "source" / "lab13_clustering" / "lab13_clustering.ipynb"
SEEDS = (3, 4)
#: The wrong answers run on the tables of this run's seed, which the solution's run above built (lab_testing.run_seed).
TEST_SEED = run_seed()


@pytest.fixture(scope="module")
def solution() -> dict:
    return solution_namespace(SOURCE, ("setup", "clustering_columns", "optimize_rewrites"))


@pytest.fixture
def at_test_seed(monkeypatch):
    """The checks' tables of this run's seed for one test."""
    monkeypatch.setenv(SEED_ENV, str(TEST_SEED))


@pytest.mark.parametrize("seed", solution_seeds(SEEDS))
def test_lab13_the_solution_passes_at_seeds_that_cover_the_edge_cases(spark, solution, capsys, monkeypatch, seed):
    monkeypatch.setenv(SEED_ENV, str(seed))
    check_clustering_columns(solution["clustering_columns"])
    check_optimize_rewrites(solution["optimize_rewrites"])
    out = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in out] == ["✓ clustering_columns", "✓ optimize_rewrites"], out


def test_lab13_the_stubs_are_not_written_yet(spark, at_test_seed):
    assert "clustering_columns is not written yet" in failure(check_clustering_columns, stub)
    assert "optimize_rewrites is not written yet" in failure(check_optimize_rewrites, stub)


def test_lab13_the_run_seed_has_the_tables_the_wrong_answers_need(spark, at_test_seed):
    keys = lab.keys_tables(spark, TEST_SEED)
    assert any("loc.zip" in t.expected and t.mapped for t in keys), "a field of a struct column as a key, column mapping on"
    assert any(t.cleaned and t.expected and t.kind != "v2" for t in keys), "a table whose keys live only in its checkpoint"
    (v2,) = [t for t in keys if t.kind == "v2"]
    assert v2.cleaned and v2.expected and list(Path(v2.path, "_delta_log").glob("*.checkpoint.*.json")), \
        "a table whose keys live only in a v2 checkpoint"
    assert any(t.earlier for t in keys), "a table whose keys changed"
    (removed,) = [t for t in keys if t.kind == "removed"]
    assert removed.expected == [] and removed.earlier, "a removed domain that still names keys"
    (other,) = [t for t in keys if t.kind == "domain"]
    assert other.cleaned and other.expected and lab.USER_DOMAIN in other.what, "another writer's domain after the keys"
    rewrites = lab.rewrite_tables(spark, TEST_SEED)
    assert any(removed and len(removed) < len(replay_log(t.path).files) for t in rewrites for removed in t.removed.values()), \
        "an OPTIMIZE that leaves some files"
    (renamed,) = [t for t in rewrites if "renamed" in t.what]
    removed = renamed.removed[lab.DEFAULT_THRESHOLD]
    by_names: dict[tuple, set] = {}
    for add in replay_log(renamed.path).files.values():
        if "ZCUBE_ID" in (add.get("tags") or {}):
            by_names.setdefault(tuple(json.loads(add["tags"]["ZCUBE_ZORDER_BY"])), set()).add(add["path"])
    current = tuple(lab._describe_clustering(spark, renamed.path))
    assert len(by_names) == 2 and current in by_names, by_names.keys()
    assert all(paths.isdisjoint(removed) for names, paths in by_names.items() if names != current), \
        "Delta leaves the cube tagged with the key's old name"
    assert by_names[current] <= removed, "and rewrites the cube of today's name"


@pytest.mark.parametrize("seed", [TEST_SEED, *solution_seeds(SEEDS)])
def test_lab13_every_seed_has_a_cube_that_deleted_rows_made_partial(spark, monkeypatch, seed):
    """At a threshold the check asks, a cube whose files' size reaches it but whose rows left by the deletion
    vectors do not: Delta rewrites it (the expected answer is a real OPTIMIZE), and an answer summing size misses it."""
    monkeypatch.setenv(SEED_ENV, str(seed))
    (table,) = [t for t in lab.rewrite_tables(spark, seed) if "deletion vectors" in t.what]
    files = replay_log(table.path).files.values()
    cubes: dict[str, list] = {}
    for add in files:
        if "ZCUBE_ID" in (add.get("tags") or {}):
            cubes.setdefault(add["tags"]["ZCUBE_ID"], []).append(add)
    assert all(add.get("deletionVector") for adds in cubes.values() for add in adds)
    assert any(sum(map(lab._truncated_bytes, adds)) >= 1 for adds in cubes.values()), \
        "a cube whose files' logical sizes lose a byte or more to truncation"
    shrunk = [(threshold, adds) for threshold, removed in table.removed.items() for adds in cubes.values()
              if sum(map(lab._logical_size, adds)) < threshold <= sum(int(a["size"]) for a in adds)]
    assert shrunk and all({a["path"] for a in adds} <= table.removed[threshold] for threshold, adds in shrunk), \
        "Delta rewrites a cube whose logical size is under the threshold, whatever its files' size"


# ------------------------------------------------------------------------------ clustering_columns


def _read_log(table_path: str, *, checkpoint: bool = True, mapping: bool = True, last: bool = True,
              nested: str = "path", checkpoints_named: str = "any", any_domain: str = "",
              removed: bool = True) -> list[str]:
    """The solution's reading of the log, with one of its steps left out (nested: "path" maps every part of a key's
    path and joins them as the solution does, "first part" keeps only the first, "top level" maps only the first
    part through the schema and keeps the others as the domain has them; checkpoints_named: "any" finds classic and
    v2 checkpoints as the solution does, "parquet" only the *.checkpoint*.parquet files, "classic" opens
    N.checkpoint.parquet for the version _last_checkpoint gives; any_domain: "raise" keeps every domain of the
    checkpoint, whatever its name, and reads clusteringColumns from the last, "empty" does too but takes a domain
    without clusteringColumns for no keys; removed: False reads a removed domain's keys as if it were in force)."""
    import pyarrow.parquet as pq

    log = Path(table_path) / "_delta_log"
    pattern = "*.checkpoint*.parquet" if checkpoints_named == "parquet" else "*.checkpoint*"
    checkpoints = sorted({int(p.name.split(".")[0]) for p in log.glob(pattern) if p.suffix in (".parquet", ".json")}) \
        if checkpoint else []
    start = checkpoints[-1] if checkpoints else -1
    parts = sorted(log.glob(f"{start:020d}.checkpoint*")) if checkpoints_named == "any" else \
        sorted(log.glob(f"{start:020d}.checkpoint*.parquet"))
    if checkpoints_named == "classic" and (log / "_last_checkpoint").exists():
        start = json.loads((log / "_last_checkpoint").read_text())["version"]
        parts = [log / f"{start:020d}.checkpoint.parquet"]
    domains, schema = [], None
    for part in parts:
        if part.suffix == ".json":
            rows = [json.loads(line) for line in part.read_text().splitlines()]
        else:
            columns = [c for c in ("metaData", "domainMetadata") if c in pq.read_schema(part).names]
            rows = pq.read_table(part, columns=columns).to_pylist()
        for row in rows:
            schema = row["metaData"]["schemaString"] if row.get("metaData") else schema
            if row.get("domainMetadata") and (any_domain or row["domainMetadata"]["domain"] == "delta.clustering"):
                domains.append(row["domainMetadata"])
    for commit in sorted(log.glob("*.json")):
        if not commit.stem.isdigit() or int(commit.stem) <= start:
            continue
        for line in commit.read_text().splitlines():
            action = json.loads(line)
            schema = action["metaData"]["schemaString"] if "metaData" in action else schema
            if "domainMetadata" in action and action["domainMetadata"]["domain"] == "delta.clustering":
                domains.append(action["domainMetadata"])
    if not domains:
        return []
    domain = domains[-1] if last else domains[0]
    if removed and domain.get("removed"):
        return []
    fields = json.loads(schema)["fields"] if mapping and schema else []

    def logical(path):
        level, parts = fields, []
        for physical in path:
            field = next((f for f in level if f["metadata"].get("delta.columnMapping.physicalName", f["name"]) == physical), None)
            parts.append(field["name"] if field else physical)
            level = field["type"]["fields"] if field and isinstance(field["type"], dict) and nested == "path" else []
        return parts

    configuration = json.loads(domain["configuration"])
    paths = configuration.get("clusteringColumns", []) if any_domain == "empty" else configuration["clusteringColumns"]
    if nested == "first part":
        return [logical(p[:1])[0] for p in paths]
    return [".".join(logical(p)) for p in paths]


def test_lab13_physical_names_are_not_the_columns(spark, at_test_seed):
    message = failure(check_clustering_columns, lambda path: _read_log(path, mapping=False))
    assert "physical names" in message and "delta.columnMapping.physicalName" in message, message


def test_lab13_a_nested_key_is_its_whole_path(spark, at_test_seed):
    message = failure(check_clustering_columns, lambda path: _read_log(path, nested="first part"))
    assert "a field of a struct column" in message and "loc.zip" in message, message


def test_lab13_every_part_of_a_nested_path_is_mapped(spark, at_test_seed):
    message = failure(check_clustering_columns, lambda path: _read_log(path, nested="top level"))
    assert "every part of a nested key's path" in message, message


def test_lab13_a_v2_checkpoint_is_read_too(spark, at_test_seed):
    """Every seed has a table whose keys are only in a v2 checkpoint's top-level JSON file (N.checkpoint.<uuid>.json):
    an answer that looks only for Parquet checkpoints finds none, and one that opens N.checkpoint.parquet fails."""
    for wrong in ("parquet", "classic"):
        message = failure(check_clustering_columns, lambda path: _read_log(path, checkpoints_named=wrong))
        assert "v2 checkpoint" in message and "N.checkpoint.<uuid>.json" in message and "v2Checkpoint.path" in message, message


def test_lab13_the_last_domain_wins(spark, at_test_seed):
    message = failure(check_clustering_columns, lambda path: _read_log(path, last=False))
    assert "the last one" in message, message


@pytest.mark.parametrize("any_domain", ["raise", "empty"])
def test_lab13_another_domain_in_the_checkpoint_is_not_the_keys(spark, at_test_seed, any_domain):
    """Every seed has a table whose checkpoint holds a domain of another writer (course.lab13) after
    delta.clustering: an answer that keeps the checkpoint's last domain, whatever its name, reads no keys there
    (the table created clustered has row tracking's domain too, but before the keys)."""
    message = failure(check_clustering_columns, lambda path: _read_log(path, any_domain=any_domain))
    assert "course.lab13" in message and "keep the row whose domain is delta.clustering" in message, message


def test_lab13_a_removed_domain_leaves_no_keys(spark, at_test_seed):
    """Every seed has a table whose delta.clustering domain was removed (removed: true, the old keys still in its
    configuration): an answer that reads the configuration without looking at removed returns the old keys."""
    message = failure(check_clustering_columns, lambda path: _read_log(path, removed=False))
    assert "removed: true removes the domain" in message, message


def test_lab13_the_checkpoint_holds_the_domain_once_commits_are_gone(spark, at_test_seed):
    message = failure(check_clustering_columns, lambda path: _read_log(path, checkpoint=False))
    assert "the checkpoint's domainMetadata column" in message, message


def test_lab13_no_keys_is_an_empty_list(spark, at_test_seed):
    message = failure(check_clustering_columns, lambda path: _read_log(path) or None)
    assert "it must return a list of column names" in message, message


def test_lab13_spark_and_the_course_readers_are_refused(spark, at_test_seed):
    def describe(path):
        return list(spark.sql(f"DESCRIBE DETAIL delta.`{path}`").first()["clusteringColumns"])

    def replayed(path):
        domain = replay_log(path).domain_metadata.get("delta.clustering")
        return json.loads(domain["configuration"])["clusteringColumns"] if domain else []

    assert "answers from Delta's own reader" in failure(check_clustering_columns, describe)
    assert "deltalab.log.replay_log" in failure(check_clustering_columns, replayed)


# ------------------------------------------------------------------------------ optimize_rewrites


def _physical_keys_then(path: str) -> dict[str, list[str]]:
    """The wrong way to follow a rename: each file's ZCUBE_ZORDER_BY mapped to physical names through the schema of
    the commit that added the file, so that a cube written before a rename counts as a cube of today's keys."""
    added_in = {a["add"]["path"]: v for v, actions in read_log(path).commits.items() for a in actions if "add" in a}
    physical = {}
    for add in replay_log(path).files.values():
        tags = add.get("tags") or {}
        if "ZCUBE_ID" in tags:
            fields = json.loads(replay_log(path, added_in[add["path"]]).metadata["schemaString"])["fields"]
            to_physical = {f["name"]: f["metadata"].get("delta.columnMapping.physicalName", f["name"]) for f in fields}
            physical[add["path"]] = [to_physical.get(name, name) for name in json.loads(tags["ZCUBE_ZORDER_BY"])]
    return physical


def _rule(path, threshold, *, keys_checked=True, strict=True, single_cube=True, partial=True, logical=True, names="logical"):
    """The solution's rule, with one of its parts left out (logical: False sums the files' size, "untruncated" each
    file's logical size without truncating it; names: "logical" as the solution, "physical" the domain's names
    compared with the tags, "follow renames" a cube's names mapped as they were when it was written)."""
    size = {True: lab._logical_size, False: lambda add: int(add["size"]),
            "untruncated": lambda add: lab._logical_size(add) + lab._truncated_bytes(add)}[logical]
    keys = _read_log(path, mapping=names == "logical")
    then = _physical_keys_then(path) if names == "follow renames" else {}
    never, cubes = set(), {}
    for add in replay_log(path).files.values():
        tags = add.get("tags") or {}
        if "ZCUBE_ID" not in tags:
            never.add(add["path"])
        elif not keys_checked or then.get(add["path"], json.loads(tags["ZCUBE_ZORDER_BY"])) == keys:
            cubes.setdefault(tags["ZCUBE_ID"], []).append(add)
    small = [adds for adds in cubes.values()
             if (sum(map(size, adds)) < threshold if strict else sum(map(size, adds)) <= threshold)]
    if not partial:
        return never
    if single_cube and not never and len(small) <= 1:
        return set()
    return never | {a["path"] for adds in small for a in adds}


def test_lab13_a_cubes_size_counts_the_rows_deletion_vectors_left(spark, at_test_seed):
    message = failure(check_optimize_rewrites, lambda path, threshold: _rule(path, threshold, logical=False))
    assert "logical size" in message and "deletionVector.cardinality" in message, message


def test_lab13_each_files_logical_size_is_truncated_before_the_cubes_sum(spark, at_test_seed):
    """Delta sums each file's estLogicalFileSize, a Long: the deleted-rows table's cube loses a byte or more to the
    truncations at every seed, so a threshold one byte over Delta's sum is under the untruncated one."""
    message = failure(check_optimize_rewrites, lambda path, threshold: _rule(path, threshold, logical="untruncated"))
    assert "truncated to whole bytes file by file" in message, message


def test_lab13_a_file_without_statistics_is_sized_by_its_size(spark, at_test_seed):
    """Every seed's two-cube table has a cube written without statistics: an answer that reads numRecords from
    stats without allowing for none raises there, and the message names the table's missing statistics."""
    def no_stats_allowed(path, threshold):
        for add in replay_log(path).files.values():
            if "ZCUBE_ID" in (add.get("tags") or {}):
                add["stats"].get("numRecords")
        return _rule(path, threshold)

    message = failure(check_optimize_rewrites, no_stats_allowed)
    assert "raised" in message and "without statistics" in message and "no stats at all" in message, message


def test_lab13_the_tags_hold_logical_names_not_the_domains_physical_ones(spark, at_test_seed):
    message = failure(check_optimize_rewrites, lambda path, threshold: _rule(path, threshold, names="physical"))
    assert "logical names" in message and "not the physical names" in message, message


def test_lab13_a_rename_makes_the_cubes_before_it_cubes_of_other_keys(spark, at_test_seed):
    message = failure(check_optimize_rewrites, lambda path, threshold: _rule(path, threshold, names="follow renames"))
    assert "a rename makes the cubes written before it cubes of other keys" in message, message


def test_lab13_cubes_of_other_keys_are_left_alone(spark, at_test_seed):
    message = failure(check_optimize_rewrites, lambda path, threshold: _rule(path, threshold, keys_checked=False))
    assert "clustered by other columns" in message, message


def test_lab13_a_cube_of_exactly_the_threshold_is_complete(spark, at_test_seed):
    message = failure(check_optimize_rewrites, lambda path, threshold: _rule(path, threshold, strict=False))
    assert "exactly the threshold is complete" in message, message


def test_lab13_one_partial_cube_alone_is_not_rewritten(spark, at_test_seed):
    message = failure(check_optimize_rewrites, lambda path, threshold: _rule(path, threshold, single_cube=False))
    assert "nothing new to merge" in message, message


def test_lab13_partial_cubes_are_merged_with_new_data(spark, at_test_seed):
    message = failure(check_optimize_rewrites, lambda path, threshold: _rule(path, threshold, partial=False))
    assert "partial ZCube" in message and "missing" in message, message


def test_lab13_running_optimize_on_a_copy_is_refused(spark, at_test_seed, tmp_path):
    def on_a_copy(path, threshold):
        copy = tmp_path / "copy"
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(path, copy)
        before = set(replay_log(copy).paths())
        with lab.temporary_conf(spark, {lab.THRESHOLD_SETTING: str(threshold)}):
            spark.sql(f"OPTIMIZE delta.`{copy}`")
        return before - set(replay_log(copy).paths())

    message = failure(check_optimize_rewrites, on_a_copy)
    assert "Spark job(s)" in message and "not run an OPTIMIZE" in message, message


def test_lab13_messages_never_show_the_expected_files(spark, at_test_seed):
    message = failure(check_optimize_rewrites, lambda path, threshold: set())
    every_file = {add["path"] for table in lab.rewrite_tables(spark, TEST_SEED) for add in replay_log(table.path).files.values()}
    assert not any(name in message for name in every_file), message
