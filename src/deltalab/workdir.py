"""Per-notebook work directories under one root that is never inside the repository."""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path

from deltalab.errors import DeltaLabError
from deltalab.jars import cache_root

WORKDIR_ENV = "DELTALAB_WORKDIR"
ROOT_MARKER = ".deltalab-root"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


def repo_root() -> Path | None:
    """The course repository this package was installed from (editable install), if any."""
    candidate = Path(__file__).resolve().parents[2]
    if (candidate / "pyproject.toml").is_file() and (candidate / "src" / "deltalab").is_dir():
        return candidate
    return None


def _inside(path: Path, parent: Path) -> bool:
    return path == parent or parent in path.parents


def work_root() -> Path:
    """The root of all work directories: ``$DELTALAB_WORKDIR``, else ``<cache>/work``.

    The root must be writable and must not lie inside the repository, so that tables written
    by notebooks never show up in ``git status``. A root that already holds files not made by
    the course is refused, because work directories under it are emptied.
    """
    raw = os.environ.get(WORKDIR_ENV)
    root = (Path(raw).expanduser() if raw else cache_root() / "work").resolve()
    repo = repo_root()
    if repo is not None and _inside(root, repo):
        raise DeltaLabError(
            f"{WORKDIR_ENV} is {root}, inside the course repository ({repo}); tables written there "
            "would land in git.",
            fix=f"Point {WORKDIR_ENV} at a directory outside the repository (e.g. export {WORKDIR_ENV}=~/deltalab-work), "
            "or unset it to use the default under your cache directory.",
        )
    try:
        fresh = not root.exists()
        root.mkdir(parents=True, exist_ok=True)
        if not fresh and not (root / ROOT_MARKER).exists() and any(root.iterdir()):
            raise DeltaLabError(
                f"{WORKDIR_ENV} is {root}, a directory that already holds other files; the course empties "
                "the work directories it makes there, so it will not use a directory it did not create.",
                fix=f"Point {WORKDIR_ENV} at a new or empty directory.",
            )
        (root / ROOT_MARKER).touch()
        with tempfile.NamedTemporaryFile(dir=root):
            pass
    except OSError as error:
        raise DeltaLabError(
            f"The work directory root {root} cannot be written: {error.strerror or error}.",
            fix=f"Set {WORKDIR_ENV} to a directory you can write to (e.g. export {WORKDIR_ENV}=~/deltalab-work).",
        ) from None
    return root


def _clear_delta_cache() -> None:
    """Forget Delta's cached table states, so a table re-created at the same path reads fresh."""
    from pyspark.sql import SparkSession

    spark = SparkSession.getActiveSession()
    if spark is not None:
        spark.sparkContext._jvm.org.apache.spark.sql.delta.DeltaLog.clearCache()


def workdir(name: str, fresh: bool = True) -> Path:
    """Return the work directory of one notebook or lab, ``<root>/<name>``.

    With ``fresh`` (the default) the directory is emptied first, so a notebook run twice
    starts from the same clean state.
    """
    if not isinstance(name, str) or not _NAME.match(name) or ".." in name:
        raise DeltaLabError(
            f"{name!r} is not a work directory name.",
            fix="Use letters, digits, '_', '-' and '.', starting with a letter or digit, e.g. workdir(\"02_the_transaction_log\").",
        )
    path = work_root() / name
    if fresh and path.exists():
        shutil.rmtree(path)
        _clear_delta_cache()
    path.mkdir(parents=True, exist_ok=True)
    return path
