"""deltalab.workdir: per-notebook work directories, emptied on each call and locked to the process
that uses them (the locks are tested with real processes: a second one, a killed one, a forked child).

The rules of the root they live under (outside the repository, writable, enough free space) are
deltalab.locations', tested in tests/test_locations.py.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap

import pytest

from deltalab.errors import DeltaLabError
from deltalab.locations import LOCKS_DIR, WORKDIR_ENV
from deltalab.processes import is_running, process_tree
from deltalab.workdir import workdir
from process_testing import environment, python, refused_or


def test_workdir_is_emptied_and_under_root(tmp_path, monkeypatch):
    monkeypatch.setenv("DELTALAB_WORKDIR", str(tmp_path / "root"))
    first = workdir("demo")
    (first / "table").mkdir()
    (first / "table" / "file.txt").write_text("x")
    again = workdir("demo")
    assert again == tmp_path / "root" / "demo"
    assert list(again.iterdir()) == []
    kept = workdir("demo", fresh=False)
    assert kept == again


@pytest.mark.parametrize("name", ["", "../escape", "a/b", ".hidden", "x y"])
def test_bad_workdir_names(tmp_path, monkeypatch, name):
    monkeypatch.setenv("DELTALAB_WORKDIR", str(tmp_path / "root"))
    with pytest.raises(DeltaLabError, match="is not a work directory name"):
        workdir(name)


def test_workdir_recreated_table_reads_fresh(spark):
    path = str(workdir("foundation-recreate") / "t")
    spark.range(5).write.format("delta").save(path)
    assert spark.read.format("delta").load(path).count() == 5
    path = str(workdir("foundation-recreate") / "t")
    spark.range(3).write.format("delta").save(path)
    assert spark.read.format("delta").load(path).count() == 3


# --------------------------------------------------------------------------------------------
# One work directory, two processes
# --------------------------------------------------------------------------------------------

HOLDER = """
    import sys
    from deltalab import workdir
    path = workdir("08_zorder_benchmark")
    (path / "table.txt").write_text("the first run's table")
    assert workdir("08_zorder_benchmark", fresh=False) == path   # the same process may ask again
    again = workdir("08_zorder_benchmark")                       # and re-run its setup cell
    (again / "table.txt").write_text("the first run's table")
    print("holding", flush=True)
    sys.stdin.read()                                             # until the test closes stdin
"""

SECOND = refused_or('workdir("08_zorder_benchmark")', "got it")


def test_a_second_process_is_refused_by_name_and_nothing_is_emptied(tmp_path):
    env = environment(tmp_path / "work")
    holder = python(HOLDER, env)
    try:
        assert holder.stdout.readline() == "holding\n", holder.stderr.read()
        second = subprocess.run([sys.executable, "-c", textwrap.dedent(SECOND)], env=env, text=True,
                                capture_output=True, timeout=60)
        assert second.returncode == 3, second.stdout + second.stderr
        message = second.stdout
        print(message)
        assert f"The work directory {tmp_path / 'work' / '08_zorder_benchmark'} is in use by another process: " \
               f"pid {holder.pid} (" in message
        assert "workdir(\"08_zorder_benchmark\")" in message, "the holder's command line is shown"
        assert f"`kill {holder.pid}`" in message and "Kernel > Shut Down Kernel" in message
        assert f"set {WORKDIR_ENV} to another directory" in message
        table = tmp_path / "work" / "08_zorder_benchmark" / "table.txt"
        assert table.read_text() == "the first run's table", "the holder's work directory was not emptied"
    finally:
        holder.stdin.close()
        holder.wait(timeout=60)
    assert holder.returncode == 0, holder.stderr.read()
    after = subprocess.run([sys.executable, "-c", textwrap.dedent(SECOND)], env=env, text=True,
                           capture_output=True, timeout=60)
    assert after.stdout == "got it\n", "the lock ends with the process that held it"


def test_a_killed_holder_never_blocks_the_next_run(tmp_path):
    env = environment(tmp_path / "work")
    holder = python(HOLDER, env)
    assert holder.stdout.readline() == "holding\n", holder.stderr.read()
    holder.kill()
    holder.wait(timeout=60)
    second = subprocess.run([sys.executable, "-c", textwrap.dedent(SECOND)], env=env, text=True,
                            capture_output=True, timeout=60)
    assert second.stdout == "got it\n", second.stdout + second.stderr
    assert list((tmp_path / "work" / "08_zorder_benchmark").iterdir()) == [], "the next run starts empty"


def test_a_forked_child_does_not_keep_its_parents_work_directory(tmp_path):
    """multiprocessing (fork) in a notebook: when the kernel dies, its forked children do not hold the lock."""
    env = environment(tmp_path / "work")
    parent = python("""
        import os, sys, time
        from deltalab import workdir
        workdir("08_zorder_benchmark")
        child = os.fork()
        if child == 0:
            time.sleep(600)
            os._exit(0)
        print(child, flush=True)
        sys.stdin.read()
    """, env)
    child = int(parent.stdout.readline())
    try:
        parent.kill()
        parent.wait(timeout=60)
        assert is_running(process_tree(child)[0]), "the forked child still runs"
        second = subprocess.run([sys.executable, "-c", textwrap.dedent(SECOND)], env=env, text=True,
                                capture_output=True, timeout=60)
        assert second.stdout == "got it\n", second.stdout + second.stderr
    finally:
        os.kill(child, signal.SIGKILL)


def test_the_lock_file_is_beside_the_work_directories_never_in_them(tmp_path, monkeypatch):
    monkeypatch.setenv(WORKDIR_ENV, str(tmp_path / "work"))
    path = workdir("locked")
    lock = tmp_path / "work" / LOCKS_DIR / "locked.lock"
    assert lock.is_file() and lock.read_text().split("\n")[0] == str(os.getpid())
    assert list(path.iterdir()) == [], "nothing in the work directory, so no table listing shows the lock"
    (path / "t").mkdir()
    assert workdir("locked") == path and list(path.iterdir()) == [] and lock.is_file(), \
        "emptying the work directory keeps the lock"
    shutil.rmtree(tmp_path / "work" / LOCKS_DIR)   # the root emptied by hand: the next call locks again
    assert workdir("locked") == path and lock.is_file()
