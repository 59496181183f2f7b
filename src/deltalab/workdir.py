"""Per-notebook work directories under the course's work root (``deltalab.locations.work_root``)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from deltalab.errors import DeltaLabError
from deltalab.locations import work_root
from deltalab.session import clear_delta_cache

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


def workdir(name: str, fresh: bool = True) -> Path:
    """Return the work directory of one notebook or lab, ``<root>/<name>``.

    With ``fresh`` (the default) the directory is emptied first, so a notebook run twice
    starts from the same clean state, and Delta's cached table states are forgotten, so a
    table re-created at the same path reads fresh.
    """
    if not isinstance(name, str) or not _NAME.match(name) or ".." in name:
        raise DeltaLabError(
            f"{name!r} is not a work directory name.",
            fix="Use letters, digits, '_', '-' and '.', starting with a letter or digit, e.g. workdir(\"02_the_transaction_log\").",
        )
    path = work_root() / name
    if fresh and path.exists():
        shutil.rmtree(path)
        clear_delta_cache()
    path.mkdir(parents=True, exist_ok=True)
    return path
