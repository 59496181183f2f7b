"""The tables a lab check generates (deltalab.labs.tables): the seed is new on every run unless
fixed, and a generated history is what its log and Spark say."""

from __future__ import annotations

import random
from urllib.parse import unquote

import pytest

from deltalab import checkpoint_versions, latest_version, replay_log, spark_files
from deltalab.errors import DeltaLabError
from deltalab.labs.report import CheckFailed
from deltalab.labs.tables import SEED_ENV, check_seed, random_history


def test_the_seed_is_new_each_run_unless_fixed(monkeypatch):
    monkeypatch.delenv(SEED_ENV, raising=False)
    assert len({check_seed() for _ in range(5)}) > 1
    monkeypatch.setenv(SEED_ENV, "7")
    assert check_seed() == 7
    monkeypatch.setenv(SEED_ENV, "seven")
    with pytest.raises(DeltaLabError, match="is not a whole number"):
        check_seed()
    assert "(tables of seed 7)" in str(CheckFailed("c", "wrong.", "here", seed=7)).splitlines()[0]


def test_a_random_history_is_what_its_log_and_spark_say(spark, tmp_path):
    history = random_history(spark, tmp_path / "t", random.Random(4), commits=5, partitioned=True,
                             deletion_vectors=True, checkpoint_interval=2)
    assert history.latest == latest_version(history.path) >= 5 and history.checkpoints == checkpoint_versions(history.path)
    assert history.checkpoints and history.partitioned and history.deletion_vectors
    assert len(history.operations) == history.latest + 1 and history.operations[0] == "CREATE TABLE"
    replayed = {unquote(path) for path in replay_log(history.path).paths()}
    assert replayed == set(spark_files(spark, history.path, relative=True)), "the log and Spark agree"
    assert any(" " in path or ":" in path for path in replayed), "partition values that need URL-encoding"
