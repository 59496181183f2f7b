"""The lab 02 checks (deltalab.labs.lab02_log): a right answer passes and says so, the classic
mistakes get their own sentence, never a stack trace."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from deltalab.labs.harness import CheckFailed
from deltalab.labs.lab02_log import check_active_files, check_table_version
from lab_testing import assert_plain_failure


def test_table_version_check_against_delta_history(spark, capsys):
    def right(path):
        return max(int(p.name[:20]) for p in (Path(path) / "_delta_log").glob("*.json"))

    def counts_files(path):
        return len(list((Path(path) / "_delta_log").glob("*.json"))) - 1

    check_table_version(right)
    assert capsys.readouterr().out.startswith("✓ table_version: returned 7")
    with pytest.raises(CheckFailed) as caught:
        check_table_version(counts_files)
    message = assert_plain_failure(caught.value)
    assert "latest version is 7" in message and "returned 4" in message


def test_active_files_check_explains_a_forgotten_remove(spark):
    def ignores_removes(path, version):
        log = Path(path) / "_delta_log"
        import pyarrow.parquet as pq

        start = max(v for v in (3, 6) if v <= version)
        adds = pq.read_table(log / f"{start:020d}.checkpoint.parquet", columns=["add"]).column("add")
        files = {a["path"] for a in adds.to_pylist() if a}
        for v in range(start + 1, version + 1):
            for line in (log / f"{v:020d}.json").read_text().splitlines():
                action = json.loads(line)
                if "add" in action:
                    files.add(action["add"]["path"])
        return files

    with pytest.raises(CheckFailed) as caught:
        check_active_files(ignores_removes)
    message = assert_plain_failure(caught.value)
    assert "Spark does not read are included" in message and "`remove`" in message
