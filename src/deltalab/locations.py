"""Where things are: the cache, the repository, the work root, the course's datasets, and paths
that Spark writes as URIs.

Every other module asks here instead of building paths itself, so that one rule decides, for
example, that tables never land inside the repository.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from urllib.parse import unquote, urlparse

from deltalab.errors import DeltaLabError

CACHE_ENV = "DELTALAB_CACHE_DIR"
WORKDIR_ENV = "DELTALAB_WORKDIR"
DATA_DIR_ENV = "DELTALAB_DATA_DIR"
COURSE_DIR_ENV = "DELTALAB_COURSE_DIR"
MIN_FREE_ENV = "DELTALAB_MIN_FREE_MIB"
#: The file that marks a work root as the course's own (work directories under it are emptied).
ROOT_MARKER = ".deltalab-root"
#: The folder of the work root that holds one lock file per work directory: beside the work
#: directories, so that emptying one never removes its lock and no table listing shows it.
LOCKS_DIR = "_locks"
#: Free space the work root's disk needs before Spark starts (MiB): the notebooks write tables,
#: Spark logs and shuffle files of a few hundred MiB; below this a run would die half-way with a
#: Java stack trace about a failed write. ``$DELTALAB_MIN_FREE_MIB`` overrides it.
DEFAULT_MIN_FREE_MIB = 1024


def cache_root() -> Path:
    """The course's cache directory: ``$DELTALAB_CACHE_DIR``, else a per-user cache directory."""
    explicit = os.environ.get(CACHE_ENV)
    if explicit:
        return Path(explicit).expanduser().resolve()
    if os.name == "nt":
        base = Path(os.environ.get("LOCALAPPDATA", Path.home() / "AppData" / "Local"))
    else:
        base = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    return (base / "deltalab").resolve()


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
    _check_free_space(root)
    return root


def min_free_mib() -> int:
    """The free space (MiB) the work root's disk needs: ``$DELTALAB_MIN_FREE_MIB``, else 1024."""
    raw = os.environ.get(MIN_FREE_ENV, "").strip()
    if not raw:
        return DEFAULT_MIN_FREE_MIB
    try:
        value = int(raw)
    except ValueError:
        value = -1
    if value < 0:
        raise DeltaLabError(f"{MIN_FREE_ENV} is {raw!r}, not a whole number of MiB.",
                            fix=f"Set {MIN_FREE_ENV} to a number such as 512, or unset it for the default of {DEFAULT_MIN_FREE_MIB}.")
    return value


def _size(mib: float) -> str:
    return f"{mib / 1024:.1f} GiB" if mib >= 1024 else f"{mib:.0f} MiB"


def _check_free_space(root: Path) -> None:
    """Refuse a work root on a disk with less free space than :func:`min_free_mib`, before Spark starts."""
    needed = min_free_mib()
    free = shutil.disk_usage(root).free / 2**20
    if free < needed:
        raise DeltaLabError(
            f"Only {_size(free)} is free on the disk of the work directory root {root}; the course needs "
            f"at least {_size(needed)} there for its tables, Spark's logs and shuffle files.",
            fix=f"Free some space on that disk (the work directories of notebooks you finished can go: "
            f"rm -rf {root}/<notebook>), or point {WORKDIR_ENV} at a disk with more room "
            f"(export {WORKDIR_ENV}=/path/with/space). On a small machine, lower the limit: "
            f"export {MIN_FREE_ENV}=256.",
        )


def workdir_lock_path(root: Path, name: str) -> Path:
    """The lock file of the work directory ``<root>/<name>``: ``<root>/_locks/<name>.lock``."""
    return root / LOCKS_DIR / f"{name}.lock"


def data_dirs() -> list[Path]:
    """Where datasets are looked for, in order: ``$DELTALAB_DATA_DIR``, the clone's ``data/``
    (editable install), ``$DELTALAB_COURSE_DIR/data`` (the course image)."""
    dirs = []
    if os.environ.get(DATA_DIR_ENV):
        dirs.append(Path(os.environ[DATA_DIR_ENV]).expanduser())
    repo = repo_root()
    if repo is not None:
        dirs.append(repo / "data")
    if os.environ.get(COURSE_DIR_ENV):
        dirs.append(Path(os.environ[COURSE_DIR_ENV]).expanduser() / "data")
    return dirs


def dataset_path(name: str) -> Path:
    """The path of the course dataset ``name`` (e.g. ``"loans_by_state.csv"``).

    Raises a :class:`DeltaLabError` naming the folders searched when it is not found, rather
    than letting Spark fail later with PATH_NOT_FOUND on a path the learner never typed.
    """
    if not name or Path(name).name != name:
        raise DeltaLabError(
            f"{name!r} is not a dataset name.",
            fix="Pass a file name from the course's data/ folder, such as 'loans_by_state.csv' (see data/README.md).",
        )
    searched = data_dirs()
    for directory in searched:
        candidate = directory / name
        if candidate.is_file():
            return candidate.resolve()
    looked = ", ".join(str(d) for d in searched) or "nowhere: no clone, no $DELTALAB_COURSE_DIR"
    raise DeltaLabError(
        f"The course dataset {name!r} was not found (looked in {looked}).",
        fix=f"Run from a clone of the course (data/ is part of it; see data/README.md), "
        f"or set {DATA_DIR_ENV} to the folder that holds {name}.",
    )


def local_path(uri: str | os.PathLike[str]) -> str:
    """A local file path from a ``file:`` URI: ``file:///x/y%20z`` -> ``/x/y z`` (``Path.as_uri()``'s form).

    The one rule for a real URI, whose path is URL-encoded. What Spark returns (``inputFiles()``,
    a scan's root path, ``DESCRIBE DETAIL``) is not such a URI: use :func:`hadoop_path` for it.
    Anything that is not a ``file:`` URI is returned unchanged.
    """
    text = str(uri)
    if text.startswith("file:"):
        return unquote(urlparse(text).path)
    return text


def hadoop_path(location: str | os.PathLike[str]) -> str:
    """A local file path from a location Spark returns: ``file:/x/y`` or ``file:///x/y`` -> ``/x/y``, nothing decoded.

    Spark's ``inputFiles()`` and a scan's root paths are Hadoop ``Path.toString()``: ``file:`` plus
    the path as it is on disk. A partition value Hive-escaped into a folder name keeps its ``%``
    (``a:b`` is written to the folder ``city=a%3Ab``), and a space stays a space, so decoding once
    more (as :func:`local_path` does for URIs) would name a folder that does not exist. The log's
    ``add.path`` is that on-disk path URL-encoded once more (``city=a%253Ab``): ``unquote`` it once.
    """
    text = str(location)
    if text.startswith("file://"):
        return text[len("file://"):]
    return text[len("file:"):] if text.startswith("file:") else text


def file_name(path: str | os.PathLike[str]) -> str:
    """The last component of a path, a ``file:`` URI or a URL-encoded log path: ``part-00001-….parquet``."""
    return Path(unquote(urlparse(str(path)).path)).name
