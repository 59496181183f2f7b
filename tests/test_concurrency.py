"""Tests of deltalab.concurrency: deterministic conflicts on real Delta tables (no mocks)."""

from __future__ import annotations

import json

import delta.exceptions as dx
import pytest
from delta.tables import DeltaTable
from pyspark.sql import functions as F

from deltalab import concurrency as cc
from deltalab import drivers
from deltalab.errors import DeltaLabError
from deltalab.holds import Hold
from deltalab.log import commit_info, commit_versions
from deltalab.plots import style_conflict_matrix


# ----------------------------------------------------------------------------- no Spark needed


def test_conflict_classes_do_not_inherit_from_one_another() -> None:
    pairs = [(a, b) for a in cc.CONFLICT_CLASSES for b in cc.CONFLICT_CLASSES if a is not b and issubclass(a, b)]
    assert pairs == []


def test_conflict_name_reraises_what_is_not_a_conflict() -> None:
    assert cc.conflict_name(None) == "none"
    with pytest.raises(ValueError, match="boom"):
        cc.conflict_name(ValueError("boom"))


class _First(Exception):
    pass


class _Second(Exception):
    pass


def test_retry_on_conflict_retries_only_the_named_classes() -> None:
    calls = []

    def flaky() -> str:
        calls.append(1)
        if len(calls) == 1:
            raise _First("lost the race")
        return "done"

    report = cc.retry_on_conflict(flaky, (_First,))
    assert report.attempts == ["_First", "committed"] and report.result == "done"

    with pytest.raises(_Second):
        cc.retry_on_conflict(lambda: (_ for _ in ()).throw(_Second("other")), (_First,))
    with pytest.raises(_First):
        cc.retry_on_conflict(lambda: (_ for _ in ()).throw(_First("always")), (_First,), max_attempts=2)


def test_retry_on_conflict_rejects_an_empty_tuple() -> None:
    with pytest.raises(DeltaLabError, match="non-empty tuple"):
        cc.retry_on_conflict(lambda: None, ())


# ----------------------------------------------------------------------------- real tables


def test_write_commit_file_is_refused_by_the_pre_check_or_by_the_rename(spark, tmp_path) -> None:
    """HDFSLogStore (v4.4.0) refuses a commit file twice over: a writer that finds it already there
    at its pre-check (line 104), and one that passed the pre-check but lost the rename (line 131)."""
    path = tmp_path / "race"
    cc.make_pair_table(spark, path)
    line = [json.dumps({"commitInfo": {"userMetadata": "first"}})]
    assert cc.write_commit_file(spark, str(path), 1, line) == {"won": True, "error": None, "thrown_at": None}
    late = cc.write_commit_file(spark, str(path), 1, line)
    assert late == {"won": False, "error": "java.nio.file.FileAlreadyExistsException",
                    "thrown_at": "io.delta.storage.HDFSLogStore.writeInternal(HDFSLogStore.java:104)"}
    kernel = drivers.in_this_kernel(spark)
    hold = Hold(tmp_path / "held")
    held = kernel.submit("deltalab.concurrency.write_commit_file", str(path), 2, ["{}"], hold.path)
    hold.wait_reached(held)
    assert cc.write_commit_file(spark, str(path), 2, line)["won"], "an unheld writer passes and renames first"
    hold.release()
    assert held.result()["thrown_at"] == "io.delta.storage.HDFSLogStore.writeInternal(HDFSLogStore.java:131)"
    assert commit_info(path, 2)["userMetadata"] == "first" and commit_versions(path) == [0, 1, 2]
    assert not [p for p in (path / "_delta_log").iterdir() if p.name.endswith(".tmp")], "no temporary file left"


def test_held_delete_gets_concurrent_append(spark, tmp_path) -> None:
    held, winning, _ = cc.standard_operations()
    path = tmp_path / "t"
    cc.make_pair_table(spark, path)
    result = cc.run_pair(spark, str(path), ("delete", dict(held)["delete"]), ("append", dict(winning)["append"]),
                         tmp_path / "signals")
    assert result.read_version == 0
    assert isinstance(result.held_error, dx.ConcurrentAppendException)
    assert result.outcome == "ConcurrentAppendException"
    assert result.versions_after == 1


def test_held_blind_append_retries_without_conflict(spark, tmp_path) -> None:
    held, winning, _ = cc.standard_operations()
    path = tmp_path / "t"
    cc.make_pair_table(spark, path)
    result = cc.run_pair(spark, str(path), ("append", dict(held)["append"]), ("append", dict(winning)["append"]),
                         tmp_path / "signals")
    assert result.outcome == "none"
    assert result.versions_after == 2 and result.held_commit_read_version == 0


def test_gate_that_is_never_evaluated_is_reported(spark, tmp_path) -> None:
    path = tmp_path / "t"
    cc.make_pair_table(spark, path)
    with pytest.raises(DeltaLabError, match="without evaluating the gate"):
        with cc.TransactionHold(spark, tmp_path / "signals") as hold:
            hold.start(lambda gate: DeltaTable.forPath(spark, str(path)).delete(F.col("id") == 1))
            hold.wait_until_held()


def test_conflict_matrix_is_measured(spark, tmp_path) -> None:
    held, winning, _ = cc.standard_operations()
    template = tmp_path / "template"
    cc.make_pair_table(spark, template)
    matrix = cc.conflict_matrix(spark, template, tmp_path / "pairs", [h for h in held if h[0] == "delete"],
                                [w for w in winning if w[0] in ("delete a file", "set property")])
    assert matrix.loc["delete"].to_dict() == {
        "delete a file": "ConcurrentDeleteReadException",
        "set property": "MetadataChangedException",
    }
    assert "background-color" in style_conflict_matrix(matrix).to_html()
