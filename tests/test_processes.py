"""deltalab.processes: a helper process started under a guardian ends with its owner, with
everything it started (children that left its process group too), and with an interrupted wait.

Plain Python processes, no Spark: the kernels, writers and drivers built on this are tested in
tests/test_robustness.py, test_writers.py and test_drivers.py.
"""

from __future__ import annotations

import signal
import sys

from deltalab.processes import ProcessId, end_process, owned_processes, process_tree, start_owned
from process_testing import TreeMemory, tree_memory
from process_testing import environment, poll, python, running


FAMILY = ("import os, subprocess, sys, time; "
          "subprocess.Popen([sys.executable, '-c', 'import os, time; os.setpgid(0, 0); time.sleep(600)']); "
          "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)']); time.sleep(600)")


def whole_family(guardian: int) -> list[ProcessId]:
    """The guardian, the helper and its two children, once all four run."""
    def complete() -> bool:
        tree = process_tree(guardian)
        return len(tree) == 4 and len({p.group for p in tree}) == 2   # one child made a group of its own

    poll(complete, 60, "the helper and both its children run")
    return process_tree(guardian)


def test_a_helper_and_everything_it_started_die_with_their_owner(tmp_path):
    owner = python(f"""
        import sys
        from pathlib import Path
        from deltalab.processes import start_owned
        helper = start_owned([sys.executable, "-c", {FAMILY!r}], Path({str(tmp_path / 'helper.log')!r}))
        print(helper.pid, flush=True)
        sys.stdin.read()
    """, environment(tmp_path / "work"))
    tree = whole_family(int(owner.stdout.readline()))
    owner.kill()
    owner.wait(timeout=60)
    seconds = poll(lambda: not running(tree), 10, "every process of the helper ends after its owner was killed")
    print(f"the helper's {len(tree)} processes ended {seconds:.2f} s after their owner was SIGKILLed")


def test_ending_a_helper_ends_the_children_that_left_its_group(tmp_path):
    helper = start_owned([sys.executable, "-c", FAMILY], tmp_path / "helper.log")
    tree = whole_family(helper.pid)
    assert end_process(helper) == -signal.SIGKILL
    assert running(tree) == [], "end_process returns once every process is gone"
    assert helper not in owned_processes()


def test_a_helper_exits_with_its_commands_status(tmp_path):
    helper = start_owned([sys.executable, "-c", "print('hello'); raise SystemExit(7)"], tmp_path / "helper.log")
    assert helper.wait(timeout=60) == 7
    assert (tmp_path / "helper.log").read_text() == "hello\n"


def test_an_interrupted_wait_ends_the_helpers_and_the_cell_runs_again(tmp_path):
    """SIGINT during wait_until (the notebook's stop button): the helper ends, the kernel goes on."""
    script = python(f"""
        import sys
        from pathlib import Path
        from deltalab.processes import owned_processes, start_owned, wait_until

        def cell(wait_for):
            helper = start_owned([sys.executable, "-c", {FAMILY!r}], Path({str(tmp_path / 'helper.log')!r}))
            print(helper.pid, flush=True)
            wait_until(wait_for, timeout=600, what="the helper's work is done")
            return helper

        try:
            cell(lambda: False)
        except KeyboardInterrupt:
            print("interrupted", owned_processes(), flush=True)
        helper = cell(lambda: True)                   # the cell again, this time it finishes
        print("again", [p.pid for p in owned_processes()] == [helper.pid], flush=True)
    """, environment(tmp_path / "work"))
    tree = whole_family(int(script.stdout.readline()))
    script.send_signal(signal.SIGINT)
    assert script.stdout.readline() == "interrupted []\n", script.stderr.read()
    assert running(tree) == [], "the interrupted wait ended the helper with its children before going on"
    second = int(script.stdout.readline())
    assert script.stdout.readline() == "again True\n"
    script.wait(timeout=60)
    stderr = script.stderr.read()
    assert f"Interrupted: stopped the helper process(es) {tree[0].pid} this kernel started" in stderr, stderr
    assert poll(lambda: not process_tree(second), 10, "the second helper ends with the script") >= 0


def test_a_trees_memory_counts_what_its_children_hold(tmp_path):
    ready = tmp_path / "ready"
    holder = start_owned([sys.executable, "-c",
                          "import pathlib, sys, time; held = b\"x\" * (300 * 2**20); "   # every page written
                          f"pathlib.Path({str(ready)!r}).touch(); time.sleep(600)"], tmp_path / "holder.log")
    try:
        poll(ready.exists, 60, "the child holds its memory")
        memory = tree_memory(holder.pid)
        assert memory.processes == 2   # the guardian and the holder
        assert memory.resident >= 300 * 2**20 and 0 < memory.proportional <= memory.resident
    finally:
        end_process(holder)
    assert tree_memory(holder.pid) == TreeMemory(0, 0, 0)
