"""Per-notebook work directories under the course's work root (``deltalab.locations.work_root``).

A work directory belongs to one kernel at a time. :func:`workdir` takes an OS lock on the
directory's lock file (``<root>/_locks/<name>.lock``) and keeps it for the life of the process:
the operating system drops it when the process ends in any way, so a crashed or killed kernel
never blocks the next run, while a second kernel running the same notebook at the same time (a
notebook open in JupyterLab and also run by papermill) is refused before it empties the folder
under the first one's feet.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from deltalab.errors import DeltaLabError
from deltalab.locations import WORKDIR_ENV, work_root, workdir_lock_path
from deltalab.jvm import clear_delta_cache
from deltalab.publish import LockHeld, lock_for_process

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


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


def _lock(lock_path: Path, directory: Path) -> None:
    """Take the lock of ``directory`` for the life of this process, or raise naming its holder."""
    try:
        lock_for_process(lock_path)
    except LockHeld as held:
        raise DeltaLabError(
            f"The work directory {directory} is in use by another process: {held.holder}. Two kernels in one "
            "work directory empty and overwrite each other's tables, so this one does not touch it.",
            fix="Stop the other one (in JupyterLab: Kernel > Shut Down Kernel in the notebook that runs it, "
            f"or {_kill_hint(held.holder)}) and run this cell again; or, to run both at once, give this run its own "
            f"work root: set {WORKDIR_ENV} to another directory before it starts "
            f"(e.g. {WORKDIR_ENV}=~/deltalab-work-2 papermill ...).",
        ) from None


def _kill_hint(holder: str) -> str:
    found = re.match(r"pid (\d+)", holder)
    return f"`kill {found.group(1)}`" if found else "end that process"
