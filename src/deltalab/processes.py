"""Helper processes that end with the kernel that started them, and waits a learner can interrupt.

A notebook's kernel starts helper processes: writers with their own Spark session
(:mod:`deltalab.writers`), later servers such as a local object store. None of them may outlive
the kernel, however it ends (a restart, a crash, SIGKILL), and a writer must not keep running
when the cell that drives it is interrupted. So every helper runs under a small *guardian*::

    python -c GUARDIAN OWNER_PID COMMAND...      (GUARDIAN calls deltalab.processes.main)

The guardian leads a new process group, starts ``COMMAND`` in it, and sleeps until either
``COMMAND`` ends (the guardian then exits with its status) or the owner (the kernel) ends (the
guardian then SIGKILLs ``COMMAND`` and everything it started, itself last). It asks nothing of
``COMMAND``, so any program can be a helper: a Python writer, a JVM, a server binary.

The kernel's side:

* :func:`start_owned` starts a helper under a guardian and remembers it;
* :func:`end_process` SIGKILLs a helper with every process it started, also those that made a
  process group of their own (PySpark's worker daemon does), and waits until none is left;
* :func:`wait_until` polls a condition; interrupted (Jupyter's stop button sends SIGINT, which
  Python raises as ``KeyboardInterrupt``), it first ends the helpers started with
  ``ends_on_interrupt=True``, so a re-run of the cell starts from a clean kernel.

Processes are read from ``/proc`` (Linux). Elsewhere a helper's tree is its process group.
"""

from __future__ import annotations

import os
import select
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from deltalab.errors import DeltaLabError

__all__ = [
    "ProcessId",
    "describe_process",
    "end_owned",
    "end_process",
    "free_loopback_port",
    "guard",
    "is_running",
    "live_group_members",
    "owned_processes",
    "process_tree",
    "start_owned",
    "wait_until",
]

_PROC = Path("/proc")
#: How often the guardian looks at its owner where the kernel cannot tell it (no pidfd: macOS).
_OWNER_POLL_SECONDS = 0.1

#: How a guardian is started: ``python -c GUARDIAN OWNER_PID COMMAND...`` (``-m deltalab.processes``
#: would run this module a second time, after the package's ``__init__`` imported it).
GUARDIAN = "import sys; from deltalab.processes import main; sys.exit(main(sys.argv[1:]))"

# The helpers this process started and has not ended yet: pid -> (process, ends on interrupt).
_OWNED: dict[int, tuple[subprocess.Popen[bytes], bool]] = {}


# --------------------------------------------------------------------------------------------
# Reading processes
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ProcessId:
    """A process as ``/proc`` shows it; ``started`` (clock ticks after boot) tells a reused pid apart."""

    pid: int
    parent: int
    group: int
    started: int
    zombie: bool


def _read_stat(pid: int | str) -> ProcessId | None:
    try:
        text = (_PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    fields = text.rsplit(")", 1)[1].split()  # the command name in parentheses may hold spaces
    return ProcessId(pid=int(pid), parent=int(fields[1]), group=int(fields[2]), started=int(fields[19]),
                     zombie=fields[0] in ("Z", "X"))


def _all_processes() -> list[ProcessId]:
    processes = []
    for entry in _PROC.glob("[0-9]*"):
        found = _read_stat(entry.name)
        if found is not None:
            processes.append(found)
    return processes


def _has_proc() -> bool:
    return (_PROC / "self" / "stat").exists()


def process_tree(pid: int) -> list[ProcessId]:
    """The process ``pid`` and all its living descendants, whatever their process group.

    Empty when ``pid`` is not running. Without ``/proc``, only ``pid`` itself.
    """
    if not _has_proc():
        return [ProcessId(pid, 0, pid, 0, False)] if _signal_reaches(pid) else []
    processes = [p for p in _all_processes() if not p.zombie]
    children: dict[int, list[ProcessId]] = {}
    for process in processes:
        children.setdefault(process.parent, []).append(process)
    root = next((p for p in processes if p.pid == pid), None)
    if root is None:
        return []
    tree, stack = [], [root]
    while stack:
        process = stack.pop()
        tree.append(process)
        stack.extend(children.get(process.pid, []))
    return tree


def is_running(process: ProcessId) -> bool:
    """True while the process (the same one: same pid and start time) runs; a zombie has ended."""
    if not _has_proc():
        return _signal_reaches(process.pid)
    now = _read_stat(process.pid)
    return now is not None and now.started == process.started and not now.zombie


def live_group_members(group: int) -> list[int]:
    """PIDs of the processes of a process group that are still running (not zombies).

    Read from /proc on Linux; elsewhere, ``[group]`` while a signal 0 still reaches the group.
    """
    if not _has_proc():
        try:
            os.killpg(group, 0)
        except (ProcessLookupError, PermissionError):
            return []
        return [group]
    return [p.pid for p in _all_processes() if p.group == group and not p.zombie]


def _signal_reaches(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def describe_process(pid: int) -> str:
    """``pid 1234 (python -m ipykernel_launcher -f ...)``: the pid and, where readable, its command line."""
    try:
        raw = (_PROC / str(pid) / "cmdline").read_bytes()
    except OSError:
        return f"pid {pid}"
    command = " ".join(" ".join(part.decode(errors="replace").split()) for part in raw.split(b"\0") if part)
    if len(command) > 200:
        command = command[:199] + "…"
    return f"pid {pid} ({command})" if command else f"pid {pid}"


# --------------------------------------------------------------------------------------------
# Ending a helper with everything it started
# --------------------------------------------------------------------------------------------


def _kill_tree(tree: list[ProcessId], own_group: int | None) -> None:
    """SIGKILL every process of ``tree`` and every process group one of them leads.

    Groups first (a process forked just now is in its parent's group), then each process; the
    group ``own_group`` (the caller's own, when a guardian ends itself) last.
    """
    pids = {p.pid for p in tree}
    groups = {p.group for p in tree if p.group in pids and p.group != own_group}
    for group in sorted(groups):
        try:
            os.killpg(group, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    for process in tree:
        if process.pid != os.getpid() and is_running(process):
            try:
                os.kill(process.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
    if own_group is not None:
        os.killpg(own_group, signal.SIGKILL)


def _poll_until(condition: Callable[[], bool], timeout: float, what: str, interval: float) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise DeltaLabError(
                f"Timed out after {timeout:.0f} s waiting until {what}.",
                fix="The machine may be very busy: run the cell again with a longer timeout, "
                "and look at the helper's log file (next to its marker or signal files).",
            )
        time.sleep(interval)


def end_process(process: subprocess.Popen[bytes], timeout: float = 60) -> int:
    """SIGKILL a helper started by :func:`start_owned` with every process it started; return its exit code.

    Waits until none of them runs any more (the helper's JVM, PySpark's worker daemon and its
    workers, which live in a process group of their own), so nothing keeps writing after this.
    A helper started some other way in a process group of its own is ended the same way.
    """
    tree = process_tree(process.pid)  # before the kill: afterwards the orphans are no one's children
    _kill_tree(tree, own_group=None)
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    code = process.wait(timeout=timeout)
    _OWNED.pop(process.pid, None)
    _poll_until(lambda: not live_group_members(process.pid) and not any(is_running(p) for p in tree),
                timeout, "every process of the ended helper has stopped", interval=0.05)
    return code


def owned_processes() -> list[subprocess.Popen[bytes]]:
    """The helpers this process started that are still running."""
    for pid, (process, _) in list(_OWNED.items()):
        if process.poll() is not None:
            _OWNED.pop(pid, None)
    return [process for process, _ in _OWNED.values()]


def end_owned(only_interruptible: bool = False) -> list[int]:
    """End every running helper this process started (or only those that end on an interrupt);
    return their pids."""
    ended = []
    for process in owned_processes():
        if only_interruptible and not _OWNED.get(process.pid, (None, True))[1]:
            continue
        end_process(process)
        ended.append(process.pid)
    return ended


def free_loopback_port() -> int:
    """A TCP port of 127.0.0.1 that is free now (the system picks it), for a server the course starts
    on loopback. Another process could take it before the server binds it: start the server soon."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def wait_until(condition: Callable[[], bool], timeout: float, what: str, interval: float = 0.2) -> None:
    """Poll ``condition`` until it is true; raise a clear error after ``timeout`` seconds.

    If the wait is interrupted (``KeyboardInterrupt``: the notebook's stop button), the helpers
    this kernel started with ``ends_on_interrupt=True`` (the writers) are ended first, so the
    interrupted cell leaves nothing running and can simply be run again.
    """
    try:
        _poll_until(condition, timeout, what, interval)
    except KeyboardInterrupt:
        ended = end_owned(only_interruptible=True)
        if ended:
            print(f"Interrupted: stopped the helper process(es) {', '.join(map(str, ended))} this kernel "
                  "started, with everything they started; run the cell again to start over.", file=sys.stderr)
        raise


# --------------------------------------------------------------------------------------------
# Starting a helper under a guardian
# --------------------------------------------------------------------------------------------


def start_owned(command: list[str], log_path: Path, ends_on_interrupt: bool = True,
                env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    """Start ``command`` under a guardian that ends it when this process ends; output to ``log_path``.

    The returned process is the guardian: it leads the helper's process group (so
    :func:`end_process` or ``os.killpg(process.pid, ...)`` reach the helper) and exits with the
    helper's status. ``ends_on_interrupt`` helpers (writers, not servers) are also ended when a
    :func:`wait_until` is interrupted. ``env`` defaults to this process's environment.
    """
    environment = dict(os.environ if env is None else env)
    # The guardian (and a Python helper) imports this very package, also when it is not installed.
    package_parent = str(Path(__file__).resolve().parents[1])
    environment["PYTHONPATH"] = os.pathsep.join(p for p in [package_parent, environment.get("PYTHONPATH")] if p)
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-c", GUARDIAN, str(os.getpid()), *command],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            env=environment,
        )
    _OWNED[process.pid] = (process, ends_on_interrupt)
    return process


def _exit_like(status: int) -> int:
    """Exit as the helper did: with its exit code, or killed by the same signal."""
    if status >= 0:
        return status
    signal.signal(-status, signal.SIG_DFL)
    os.kill(os.getpid(), -status)
    return 128 - status  # a signal whose default action is not to end the process


def _end_everything() -> None:
    """The guardian's last act: SIGKILL the helper with everything it started, then itself."""
    tree = process_tree(os.getpid())
    _kill_tree(tree, own_group=os.getpgrp())


def _pidfd(pid: int) -> int | None:
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


def guard(owner: int, command: list[str]) -> int:
    """Run ``command`` in this process group until it ends; end it with the group when ``owner`` ends."""
    if os.getppid() != owner:  # the owner ended before we could watch it
        _end_everything()
    for stop in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(stop, lambda *_: _end_everything())
    owner_fd = _pidfd(owner)
    helper = subprocess.Popen(command, stdin=subprocess.DEVNULL)
    helper_fd = _pidfd(helper.pid)
    if owner_fd is not None and helper_fd is not None and os.getppid() == owner:
        watch = select.poll()
        watch.register(owner_fd, select.POLLIN)
        watch.register(helper_fd, select.POLLIN)
        while True:
            ready = {fd for fd, _ in watch.poll()}
            if helper_fd in ready:
                return _exit_like(helper.wait())
            if owner_fd in ready:
                _end_everything()
    while helper.poll() is None:  # no pidfd (macOS, old kernels): poll; a parent that ended changes getppid()
        if os.getppid() != owner:
            _end_everything()
        time.sleep(_OWNER_POLL_SECONDS)
    return _exit_like(helper.returncode)


USAGE = "usage: python -c GUARDIAN OWNER_PID COMMAND [ARGUMENT...]  (started by deltalab.processes.start_owned)"


def main(argv: list[str]) -> int:
    """The guardian's entry point (``OWNER_PID COMMAND...``); only :func:`start_owned` starts it."""
    if len(argv) < 2 or not argv[0].isdigit():
        print(USAGE, file=sys.stderr)
        return 2
    return guard(int(argv[0]), argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
