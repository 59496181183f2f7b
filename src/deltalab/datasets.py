"""Find the small datasets shipped in the course's ``data/`` folder, without typing a path."""

from __future__ import annotations

import os
from pathlib import Path

from deltalab.errors import DeltaLabError
from deltalab.workdir import repo_root

DATA_DIR_ENV = "DELTALAB_DATA_DIR"
COURSE_DIR_ENV = "DELTALAB_COURSE_DIR"


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
