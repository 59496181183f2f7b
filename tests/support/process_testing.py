"""Helpers for tests that run Python in other processes: start one, wait for it with a bound, see
what is left of a process tree.

Used by the files that check behaviour only a fresh process shows (test_workdir.py's locks,
test_locations.py's checks before Spark starts, test_processes.py's guardian, test_session.py and
test_jars.py's bad setups, test_robustness.py's kernels). Every wait polls with a bound; nothing
relies on a sleep being long enough.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from deltalab.locations import WORKDIR_ENV
from deltalab.processes import ProcessId, is_running, process_tree

POLL = 0.02


def poll(condition, timeout: float, what: str) -> float:
    """Poll ``condition`` every 20 ms until true; return the seconds it took, fail after ``timeout``."""
    started = time.monotonic()
    while not condition():
        if time.monotonic() - started > timeout:
            pytest.fail(f"not within {timeout} s: {what}")
        time.sleep(POLL)
    return time.monotonic() - started


def python(code: str, env: dict[str, str], **kwargs) -> subprocess.Popen[str]:
    """A Python process running ``code``, with pipes for its stdin, stdout and stderr."""
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], env=env, text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kwargs)


def environment(root: Path, **extra: str) -> dict[str, str]:
    """This process's environment with the work root ``root`` (and ``extra``)."""
    return {**os.environ, WORKDIR_ENV: str(root), **extra}


def running(tree: list[ProcessId]) -> list[int]:
    """The pids of ``tree`` that still run."""
    return [p.pid for p in tree if is_running(p)]


def refused_or(call: str, success: str) -> str:
    """A script that runs ``call``; on a DeltaLabError it prints the message and exits 3."""
    return f"""
    from deltalab import DeltaLabError, get_spark, workdir
    try:
        {call}
    except DeltaLabError as error:
        print(error)
        raise SystemExit(3)
    print({success!r})
"""


def run_python(code: str, env: dict[str, str], offline: bool = False, timeout: int = 600) -> subprocess.CompletedProcess:
    """Run Python code in a new process; with ``offline``, in a network namespace with only loopback."""
    command = [sys.executable, "-c", code]
    if offline:
        command = ["unshare", "-n", "sh", "-c", 'ip link set lo up && exec "$@"', "sh", *command]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=timeout)


def can_unshare() -> bool:
    """True if this machine lets a process start in a network namespace of its own (``unshare -n``)."""
    return shutil.which("unshare") is not None and subprocess.run(
        ["unshare", "-n", "true"], capture_output=True
    ).returncode == 0


@dataclass(frozen=True)
class TreeMemory:
    """The memory of a process tree now, in bytes: ``resident`` adds each process's resident set
    (pages shared between them, such as a class archive every JVM maps, counted once per process);
    ``proportional`` splits each shared page between the processes that map it (Linux's PSS), so
    that the figures of several trees add up to what they take together."""

    processes: int
    resident: int
    proportional: int


def tree_memory(pid: int) -> TreeMemory:
    """The memory of ``pid`` and all its descendants (``deltalab.processes.process_tree``), from
    ``/proc/<pid>/smaps_rollup``; processes that end while being read count zero. A measure for the
    classroom's tests and figures (tests/support/classroom_memory.py), not course material."""
    resident = proportional = 0
    tree = process_tree(pid)
    for process in tree:
        try:
            rollup = Path("/proc", str(process.pid), "smaps_rollup").read_text()
        except OSError:
            continue
        for line in rollup.splitlines():
            key, _, rest = line.partition(":")
            if key in ("Rss", "Pss"):
                kib = int(rest.split()[0]) * 1024
                if key == "Rss":
                    resident += kib
                else:
                    proportional += kib
    return TreeMemory(len(tree), resident, proportional)
