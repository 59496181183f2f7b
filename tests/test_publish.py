"""deltalab.publish: files and folders appear whole or not at all, and a lock lasts for its process."""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
from pathlib import Path

import pytest

from deltalab.publish import LockHeld, lock_for_process, publishing, write_atomically


def test_write_atomically_replaces_the_file_and_leaves_no_sibling(tmp_path: Path):
    target = tmp_path / "ready.json"
    target.write_text("old")
    write_atomically(target, '{"port": 1}')
    write_atomically(tmp_path / "blob", b"\x00\x01")
    assert target.read_text() == '{"port": 1}' and (tmp_path / "blob").read_bytes() == b"\x00\x01"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["blob", "ready.json"]


def test_a_block_that_raises_publishes_nothing(tmp_path: Path):
    target = tmp_path / "archive.jsa"
    with pytest.raises(RuntimeError), publishing(target) as partial:
        partial.write_text("half")
        raise RuntimeError("the build failed")
    assert list(tmp_path.iterdir()) == []


def test_the_sibling_is_hidden_while_it_is_filled(tmp_path: Path):
    with publishing(tmp_path / "batch-000.json") as partial:
        partial.write_text("{}\n")
        assert partial.name.startswith(".") and partial.parent == tmp_path
        assert not (tmp_path / "batch-000.json").exists()
    assert (tmp_path / "batch-000.json").read_text() == "{}\n"


def test_a_folder_published_first_by_another_process_is_kept(tmp_path: Path):
    target = tmp_path / "jars"
    with publishing(target, directory=True) as ours:
        (ours / "a.jar").write_text("ours")
        target.mkdir()
        (target / "a.jar").write_text("theirs")   # another process finished first
    assert (target / "a.jar").read_text() == "theirs"
    assert [p.name for p in tmp_path.iterdir()] == ["jars"]


def test_a_sibling_left_by_a_process_that_ended_is_removed(tmp_path: Path):
    ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    stale = tmp_path / f".course.{int(ended.stdout)}.tmp"
    (stale / "source").mkdir(parents=True)
    with publishing(tmp_path / "course", directory=True) as partial:
        (partial / "README.md").write_text("labs")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["course"]


def _hold_the_lock(lock_path: str, holding, release) -> None:
    lock_for_process(lock_path)
    holding.set()
    release.wait(60)


def test_a_lock_held_by_another_process_names_it_and_is_free_once_it_ends(tmp_path: Path):
    lock = tmp_path / "_locks" / "02.lock"
    spawn = multiprocessing.get_context("spawn")   # a new interpreter: no lock inherited from this one
    holding, release = spawn.Event(), spawn.Event()
    other = spawn.Process(target=_hold_the_lock, args=(str(lock), holding, release))
    other.start()
    try:
        assert holding.wait(60)
        with pytest.raises(LockHeld) as held:
            lock_for_process(lock)
        assert held.value.holder.startswith(f"pid {other.pid}")
    finally:
        release.set()
        other.join(60)
    lock_for_process(lock)          # free once its holder ended
    lock_for_process(lock)          # and asking again in the holder is fine
    assert lock.read_text().split()[0] == str(os.getpid())
