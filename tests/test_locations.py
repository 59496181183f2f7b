"""deltalab.locations: the work root's rules (outside the repository, a folder the course made,
writable, enough free space: refused with one message before Spark starts) and where datasets are
found. The files in data/ themselves are tested in tests/test_datasets.py."""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import sys
import textwrap

import pytest

from course_testing import REPO
from deltalab.errors import DeltaLabError
from deltalab.locations import (LOCKS_DIR, MIN_FREE_ENV, ROOT_MARKER, WORKDIR_ENV, dataset_path, min_free_mib,
                                repo_root, work_root)
from deltalab.workdir import workdir
from process_testing import environment, refused_or


# --- the work root ----------------------------------------------------------------------------

def test_workdir_inside_repo_is_refused(monkeypatch):
    repo = repo_root()
    assert repo is not None, "tests run from an editable install"
    monkeypatch.setenv("DELTALAB_WORKDIR", str(repo / "work"))
    with pytest.raises(DeltaLabError, match="inside the course repository"):
        workdir("demo")
    assert not (repo / "work").exists(), "nothing created in the repository"


def test_workdir_not_writable(tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("DELTALAB_WORKDIR", str(blocker / "root"))
    with pytest.raises(DeltaLabError, match="cannot be written"):
        workdir("demo")


def test_foreign_root_is_not_used(tmp_path, monkeypatch):
    (tmp_path / "somebody-elses.txt").write_text("keep me")
    monkeypatch.setenv("DELTALAB_WORKDIR", str(tmp_path))
    with pytest.raises(DeltaLabError, match="already holds other files"):
        work_root()
    assert (tmp_path / "somebody-elses.txt").exists()
    assert not (tmp_path / ROOT_MARKER).exists()


# --------------------------------------------------------------------------------------------
# A full disk, a work root that cannot be written: one message before Spark starts
# --------------------------------------------------------------------------------------------

START_SPARK = refused_or('get_spark("robustness")', "Spark started")


def test_low_free_space_is_refused_before_spark_starts(tmp_path):
    root = tmp_path / "work"
    free_mib = shutil.disk_usage(tmp_path).free // 2**20
    env = environment(root, **{MIN_FREE_ENV: str(free_mib + 10 * 1024)})
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(START_SPARK)], env=env, text=True,
                          capture_output=True, timeout=120)
    assert done.returncode == 3, done.stdout + done.stderr
    print(done.stdout)
    assert re.search(rf"Only \d+\.\d GiB is free on the disk of the work directory root {re.escape(str(root))}; "
                     r"the course needs at least \d+\.\d GiB there", done.stdout)
    assert f"export {WORKDIR_ENV}=/path/with/space" in done.stdout and f"export {MIN_FREE_ENV}=256" in done.stdout
    assert not (root / "_logs").exists(), "Spark never started: its log file is opened just before the JVM"


def test_an_unwritable_work_root_is_refused_before_spark_starts(tmp_path):
    if os.geteuid() == 0:   # root writes anywhere: a root below a file can never be created, by anyone
        blocker = tmp_path / "a-file"
        blocker.write_text("not a directory")
        root = blocker / "work"
    else:
        locked = tmp_path / "read-only"
        locked.mkdir()
        locked.chmod(stat.S_IRUSR | stat.S_IXUSR)
        root = locked / "work"
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(START_SPARK)], env=environment(root), text=True,
                          capture_output=True, timeout=120)
    assert done.returncode == 3, done.stdout + done.stderr
    print(done.stdout)
    assert f"The work directory root {root} cannot be written: " in done.stdout
    assert f"Fix: Set {WORKDIR_ENV} to a directory you can write to" in done.stdout


def test_the_free_space_limit_is_read_from_the_environment(tmp_path, monkeypatch):
    monkeypatch.delenv(MIN_FREE_ENV, raising=False)
    assert min_free_mib() == 1024
    monkeypatch.setenv(MIN_FREE_ENV, "0")
    assert min_free_mib() == 0
    monkeypatch.setenv(MIN_FREE_ENV, "lots")
    with pytest.raises(DeltaLabError, match=f"{MIN_FREE_ENV} is 'lots', not a whole number of MiB"):
        min_free_mib()
    monkeypatch.setenv(MIN_FREE_ENV, str(shutil.disk_usage(tmp_path).free // 2**20 + 1024))
    monkeypatch.setenv(WORKDIR_ENV, str(tmp_path / "work"))
    with pytest.raises(DeltaLabError, match="is free on the disk of the work directory root"):
        workdir("demo")
    assert not (tmp_path / "work" / "demo").exists() and not (tmp_path / "work" / LOCKS_DIR).exists(), \
        "refused before anything was locked or created"
    monkeypatch.setenv(MIN_FREE_ENV, "0")
    assert work_root() == tmp_path / "work"


# --- datasets ---------------------------------------------------------------------------------

def test_dataset_path_finds_the_clones_data_folder(monkeypatch):
    monkeypatch.delenv("DELTALAB_DATA_DIR", raising=False)
    assert dataset_path("loans_by_state.csv") == (REPO / "data" / "loans_by_state.csv").resolve()


def test_data_dir_variable_comes_first(monkeypatch, tmp_path):
    (tmp_path / "loans_by_state.csv").write_text("addr_state,count\nXX,1\n")
    monkeypatch.setenv("DELTALAB_DATA_DIR", str(tmp_path))
    assert dataset_path("loans_by_state.csv") == (tmp_path / "loans_by_state.csv").resolve()


@pytest.mark.parametrize("name", ["", "../README.md", "data/loans_by_state.csv"])
def test_a_path_is_not_a_dataset_name(name):
    with pytest.raises(DeltaLabError, match="is not a dataset name"):
        dataset_path(name)


def test_a_missing_dataset_names_where_it_looked(monkeypatch, tmp_path):
    monkeypatch.setenv("DELTALAB_DATA_DIR", str(tmp_path))
    with pytest.raises(DeltaLabError) as caught:
        dataset_path("no_such_file.csv")
    assert str(tmp_path) in str(caught.value) and "DELTALAB_DATA_DIR" in str(caught.value)


def test_spark_locations_and_uris_become_local_paths_by_their_own_rules():
    from deltalab.locations import hadoop_path, local_path

    # Spark's inputFiles(): the path as it is on disk (a Hive-escaped folder keeps its %).
    assert hadoop_path("file:/t/city=10%3A30/part-0.parquet") == "/t/city=10%3A30/part-0.parquet"
    assert hadoop_path("file:///t/city=new york/part-0.parquet") == "/t/city=new york/part-0.parquet"
    assert hadoop_path("/t/x") == "/t/x" and hadoop_path("s3a://b/t/x") == "s3a://b/t/x"
    # A real URI (Path.as_uri()) is URL-encoded: decoded once.
    assert local_path("file:///t/city=new%20york/part-0.parquet") == "/t/city=new york/part-0.parquet"
    assert local_path("file:///t/city=10%253A30") == "/t/city=10%3A30"
