"""Per-notebook work directories under the course's work root (``deltalab.locations.work_root``).

A work directory belongs to one kernel at a time. :func:`workdir` takes an OS lock on the
directory's lock file (``<root>/_locks/<name>.lock``) and keeps it for the life of the process:
the operating system drops it when the process ends in any way, so a crashed or killed kernel
never blocks the next run, while a second kernel running the same notebook at the same time (a
notebook open in JupyterLab and also run by papermill) is refused before it empties the folder
under the first one's feet.
"""

from __future__ import annotations

import os
import re
import shutil
import time
from pathlib import Path

from deltalab.errors import DeltaLabError
from deltalab.locations import WORKDIR_ENV, work_root, workdir_lock_path
from deltalab.processes import describe_process
from deltalab.jvm import clear_delta_cache

try:
    import fcntl
except ImportError:  # Windows: no flock; work directories are then not locked
    fcntl = None  # type: ignore[assignment]

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")

# The lock files this process holds: path -> open file descriptor. The descriptor stays open
# until the process ends; closing it would release the lock.
_HELD: dict[Path, int] = {}


def workdir(name: str, fresh: bool = True) -> Path:
    """Return the work directory of one notebook or lab, ``<root>/<name>``, locked for this process.

    With ``fresh`` (the default) the directory is emptied first, so a notebook run twice
    starts from the same clean state, and Delta's cached table states are forgotten, so a
    table re-created at the same path reads fresh. The same process may ask again (a re-run
    setup cell); another process that holds the directory makes this raise a
    :class:`DeltaLabError` naming it, before anything is emptied.
    """
    if not isinstance(name, str) or not _NAME.match(name) or ".." in name:
        raise DeltaLabError(
            f"{name!r} is not a work directory name.",
            fix="Use letters, digits, '_', '-' and '.', starting with a letter or digit, e.g. workdir(\"02_the_transaction_log\").",
        )
    root = work_root()
    path = root / name
    _lock(workdir_lock_path(root, name), path)
    if fresh and path.exists():
        try:
            shutil.rmtree(path)
        except OSError as error:
            raise DeltaLabError(
                f"The work directory {path} could not be emptied: {error.strerror or error} ({error.filename}).",
                fix=f"Delete {path} yourself (or fix its permissions), or set {WORKDIR_ENV} to another directory.",
            ) from None
        clear_delta_cache()
    path.mkdir(parents=True, exist_ok=True)
    return path


def _still_held(lock_path: Path) -> bool:
    """True if this process holds the lock on the file now at ``lock_path`` (not a deleted one)."""
    fd = _HELD.get(lock_path)
    if fd is None:
        return False
    try:
        return os.stat(lock_path).st_ino == os.fstat(fd).st_ino
    except OSError:
        return False


def _lock(lock_path: Path, directory: Path) -> None:
    """Take the lock of ``directory`` for the life of this process, or raise naming its holder."""
    if fcntl is None or _still_held(lock_path):
        return
    stale = _HELD.pop(lock_path, None)  # the file was deleted (the work root emptied by hand)
    if stale is not None:
        os.close(stale)
    lock_path.parent.mkdir(exist_ok=True)
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)  # not inherited by programs this process starts
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = _holder(fd)
        os.close(fd)
        raise DeltaLabError(
            f"The work directory {directory} is in use by another process: {holder}. Two kernels in one "
            "work directory empty and overwrite each other's tables, so this one does not touch it.",
            fix="Stop the other one (in JupyterLab: Kernel > Shut Down Kernel in the notebook that runs it, "
            f"or {_kill_hint(holder)}) and run this cell again; or, to run both at once, give this run its own "
            f"work root: set {WORKDIR_ENV} to another directory before it starts "
            f"(e.g. {WORKDIR_ENV}=~/deltalab-work-2 papermill ...).",
        ) from None
    except OSError:  # a file system without locks (some network mounts): work unlocked, as before
        os.close(fd)
        return
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()}\n{time.strftime('%Y-%m-%d %H:%M:%S')}\n".encode())
    _HELD[lock_path] = fd


def _holder(fd: int) -> str:
    """Who holds the lock: the pid its holder wrote, with its command line and since when."""
    try:
        os.lseek(fd, 0, os.SEEK_SET)
        lines = os.read(fd, 4096).decode(errors="replace").splitlines()
        pid = int(lines[0])
    except (OSError, ValueError, IndexError):
        return "a process that has not written its pid yet"
    since = f", since {lines[1]}" if len(lines) > 1 and lines[1] else ""
    return f"{describe_process(pid)}{since}"


def _kill_hint(holder: str) -> str:
    found = re.match(r"pid (\d+)", holder)
    return f"`kill {found.group(1)}`" if found else "end that process"


def _forget_locks_in_child() -> None:
    """In a forked child, close the inherited lock descriptors: the parent keeps the locks, and
    the child must not keep them alive after the parent (the kernel) ends."""
    for fd in _HELD.values():
        try:
            os.close(fd)
        except OSError:
            pass
    _HELD.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_locks_in_child)
