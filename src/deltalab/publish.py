"""The one way to publish a file or a folder that another process reads, and to hold a lock for the
life of a process.

A reader must never see half a file: a driver's answer, a landing file Spark's file source lists, a
jar set, the JVM class archive, a server's ``ready.json``. The writer fills a hidden sibling (its
name starts with ``.``, which Spark's file source and the course's own globs skip) and renames it onto
the name readers look for; a rename within one file system is atomic, so a reader sees the old state
or the whole new one.

* :func:`write_atomically` publishes text or bytes;
* :func:`publishing` yields the hidden sibling (a file or an empty folder) for the caller to fill, and
  publishes it when the block ends without an error (or removes it when it raises);
* :func:`lock_for_process` takes an exclusive lock (``flock``) that lasts until the process ends: one
  kernel per work directory (:mod:`deltalab.workdir`); :class:`LockHeld` names the process that has it.

Not here, on purpose: :func:`deltalab.holds.hold_gate` creates its marker with ``O_EXCL`` inside a
function Spark ships by value to its Python workers, which must not need this package.
"""

from __future__ import annotations

import glob
import os
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from deltalab.processes import describe_process

try:
    import fcntl
except ImportError:  # Windows: no flock; work directories are not locked there
    fcntl = None  # type: ignore[assignment]

__all__ = ["LockHeld", "lock_for_process", "publishing", "write_atomically"]


def _sibling(path: Path) -> Path:
    """The hidden sibling a writer fills: ``.<name>.<pid>.tmp``, one per process, so that two
    processes publishing the same name never write into one file."""
    return path.with_name(f".{path.name}.{os.getpid()}.tmp")


def write_atomically(path: str | os.PathLike[str], data: str | bytes) -> Path:
    """Write ``data`` to ``path`` so that a reader sees either nothing (or the old file) or all of it."""
    target = Path(path)
    with publishing(target) as temporary:
        if isinstance(data, bytes):
            temporary.write_bytes(data)
        else:
            temporary.write_text(data)
    return target


@contextmanager
def publishing(path: str | os.PathLike[str], *, directory: bool = False) -> Iterator[Path]:
    """Yield the hidden sibling of ``path`` for the block to fill (an empty folder if ``directory``),
    then rename it onto ``path``; if the block raises, remove it and let the error go on.

    A file replaces what ``path`` held. A folder is published only where ``path`` does not exist yet:
    when another process published it first, the block's copy is dropped and theirs kept (both are
    the same thing, built twice). A sibling left by a process that no longer runs is removed first.
    """
    target = Path(path)
    temporary = _sibling(target)
    _remove_stale(target)
    if directory:
        temporary.mkdir(parents=True)
    try:
        yield temporary
        if not directory:
            os.replace(temporary, target)
        elif not target.exists():
            try:
                os.rename(temporary, target)
            except OSError:
                if not target.exists():  # not another process publishing first
                    raise
    finally:
        _remove(temporary)


def _remove_stale(target: Path) -> None:
    """Remove the hidden siblings of ``target`` that this process or one that no longer runs left."""
    prefix = f".{target.name}."
    for sibling in target.parent.glob(f".{glob.escape(target.name)}.*.tmp"):
        pid = sibling.name[len(prefix):-len(".tmp")]
        if pid.isdigit() and (int(pid) == os.getpid() or not _running(int(pid))):
            _remove(sibling)


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


class LockHeld(Exception):
    """Another process holds the lock: ``holder`` says which (``pid 123 (python -m ...), since ...``)."""

    def __init__(self, lock_path: Path, holder: str) -> None:
        super().__init__(f"{lock_path} is held by {holder}")
        self.lock_path = lock_path
        self.holder = holder


#: The locks this process holds: lock file -> its open descriptor (closing it releases the lock).
_HELD: dict[Path, int] = {}


def lock_for_process(lock_path: str | os.PathLike[str]) -> None:
    """Hold an exclusive lock on ``lock_path`` until this process ends; raise :class:`LockHeld` if
    another process holds it. Asking again for a lock this process holds does nothing.

    The lock file holds its holder's pid and since when, for the message. The lock is not inherited
    by programs this process starts, nor kept by a forked child. On a file system without locks (some
    network mounts), and where Python has no ``flock``, nothing is locked.
    """
    path = Path(lock_path)
    if fcntl is None or _still_held(path):
        return
    stale = _HELD.pop(path, None)  # the lock file was deleted (its folder emptied by hand)
    if stale is not None:
        os.close(stale)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)  # O_CLOEXEC by default: not inherited by exec
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = _holder(fd)
        os.close(fd)
        raise LockHeld(path, holder) from None
    except OSError:
        os.close(fd)
        return
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()}\n{time.strftime('%Y-%m-%d %H:%M:%S')}\n".encode())
    _HELD[path] = fd


def _still_held(path: Path) -> bool:
    """True if this process holds the lock on the file now at ``path`` (not on one since deleted)."""
    fd = _HELD.get(path)
    if fd is None:
        return False
    try:
        return os.stat(path).st_ino == os.fstat(fd).st_ino
    except OSError:
        return False


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


def _forget_locks_in_child() -> None:
    """In a forked child, close the inherited lock descriptors: the parent keeps its locks, and the
    child must not keep them alive after the parent ends."""
    for fd in _HELD.values():
        try:
            os.close(fd)
        except OSError:
            pass
    _HELD.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_locks_in_child)
