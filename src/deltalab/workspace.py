"""The learner's own copy of the course, outside the repository: what ``make lab`` serves.

A learner who ran the notebooks in the repository itself would find the stored outputs already
there (after Run All, nothing tells what ran), would rewrite tracked files (a later ``git pull``
conflicts) and would see ``labs/source/``, the solutions. So the learner's JupyterLab serves a
*workspace* instead (``~/deltalab-course``, or ``$DELTALAB_LEARNER_DIR``):

* ``notebooks/``: the course's notebooks with their outputs cleared, and the course index;
* ``labs/<lab>/<lab>.ipynb``: the student version of each lab (``labs/release/``), and a
  ``labs/README.md`` that lists them; never ``labs/source/``.

:func:`update_workspace` makes it and brings it up to date from a newer checkout: files the learner
never changed are replaced by the course's new versions, files the learner changed are kept (and
reported), files the course added appear. It remembers what it copied in ``.deltalab-workspace.json``
(the hash of each file as written), which is how it tells the learner's changes from the course's.
:func:`reset_file` gives a learner the course's version of one file again, keeping theirs in
``backups/``. The stored outputs stay in the repository, for reading on a code host and for nbval.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import nbformat

from deltalab.errors import DeltaLabError

#: Where the learner's workspace is, when not ``~/deltalab-course``.
LEARNER_DIR_ENV = "DELTALAB_LEARNER_DIR"
#: What the workspace remembers of the files it copied: ``{"files": {relative path: sha256}}``.
MANIFEST_NAME = ".deltalab-workspace.json"
#: Where :func:`reset_file` keeps the learner's copy it replaces.
BACKUPS_DIR = "backups"
#: The labs' README for learners: the opening of the instructors' (what each lab asks and checks).
LABS_README_HEADER = """\
# Classroom labs

Each lab is a notebook in its own folder here (`labs/<lab>/<lab>.ipynb`): run it top to bottom,
write the functions marked `YOUR CODE HERE`, and run each check cell after it. A check runs your
function on the lab's example table and on tables generated for this run, and says what is still
wrong. Your copy is yours: `make lab` never overwrites a notebook you changed, and
`make reset NB=labs/<lab>/<lab>.ipynb` gives you a fresh one (yours goes to `backups/`).

"""


@dataclass
class WorkspaceUpdate:
    """What :func:`update_workspace` did, by relative path: ``added`` (new here), ``updated`` (the
    course changed a file the learner had not), ``kept`` (the learner changed it: left as it is,
    though the course's version differs) and ``unchanged``."""

    workspace: Path
    added: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)

    def summary(self) -> str:
        """One line for ``make lab``'s output; the kept files, if any, named after it."""
        parts = [f"{len(self.added)} files added", f"{len(self.updated)} updated", f"{len(self.unchanged)} unchanged"]
        line = f"Your copy of the course, which JupyterLab serves: {self.workspace} ({', '.join(parts)})"
        if self.kept:
            line += (f"\n  kept as you changed them, though the course has a newer version: {', '.join(self.kept)}"
                     "\n  (make reset NB=<one of them> gives you the course's version; yours goes to backups/)")
        return line


def learner_dir(environ: Mapping[str, str] | None = None) -> Path:
    """The learner's workspace: ``$DELTALAB_LEARNER_DIR``, else ``~/deltalab-course``."""
    environ = os.environ if environ is None else environ
    if environ.get(LEARNER_DIR_ENV):
        return Path(environ[LEARNER_DIR_ENV]).expanduser().absolute()
    return Path(environ.get("HOME") or Path.home()) / "deltalab-course"


def course_files(course: Path) -> dict[str, Path]:
    """The files a workspace holds, by their path in it, and the course file each comes from:
    every file of ``notebooks/`` (not hidden, no checkpoints) and each lab's student version."""
    course = Path(course)
    if not (course / "notebooks" / "README.md").is_file():
        raise DeltaLabError(
            f"{course} is not the course's folder: it has no notebooks/README.md",
            "pass the folder that holds notebooks/ (a checkout's root, or $DELTALAB_COURSE_DIR in the image)",
        )
    files = {}
    for path in sorted((course / "notebooks").rglob("*")):
        relative = path.relative_to(course)
        if path.is_file() and not any(part.startswith(".") for part in relative.parts):
            files[relative.as_posix()] = path
    release = course / "labs" / "release"
    if release.is_dir():
        for path in sorted(release.rglob("*")):
            relative = path.relative_to(release)
            if path.is_file() and not any(part.startswith(".") for part in relative.parts):
                files[(Path("labs") / relative).as_posix()] = path
    return files


def _labs_readme(course: Path) -> bytes | None:
    """``labs/README.md`` for learners: the header above, then the instructors' README up to its
    first section (the table of labs), with each lab's name linked to its notebook here."""
    readme = course / "labs" / "README.md"
    if not readme.is_file() or not (course / "labs" / "release").is_dir():
        return None
    text = readme.read_text(encoding="utf-8")
    opening = text.split("\n## ", 1)[0]
    table = opening[opening.index("\n| ") + 1:] if "\n| " in opening else ""
    for lab in sorted(p.name for p in (course / "labs" / "release").iterdir() if p.is_dir()):
        table = table.replace(f"| `{lab}` |", f"| [`{lab}`]({lab}/{lab}.ipynb) |")
    return (LABS_README_HEADER + table).encode("utf-8")


def without_outputs(notebook: Path) -> bytes:
    """``notebook`` as the learner gets it: no outputs, no execution counts, no execution times."""
    nb = nbformat.read(str(notebook), as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
        cell.metadata.pop("execution", None)
    return (nbformat.writes(nb) + "\n").encode("utf-8")


def _content(source: Path) -> bytes:
    return without_outputs(source) if source.suffix == ".ipynb" else source.read_bytes()


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _read_manifest(workspace: Path) -> dict[str, str]:
    path = workspace / MANIFEST_NAME
    if not path.is_file():
        return {}
    try:
        return dict(json.loads(path.read_text(encoding="utf-8"))["files"])
    except (ValueError, KeyError, TypeError):
        return {}   # a damaged manifest: every differing file then counts as the learner's


def _write_manifest(workspace: Path, files: dict[str, str]) -> None:
    (workspace / MANIFEST_NAME).write_text(json.dumps({"files": dict(sorted(files.items()))}, indent=1) + "\n",
                                           encoding="utf-8")


def _wanted(course: Path) -> dict[str, bytes]:
    """Every file of the workspace as the course has it now, by its path in the workspace."""
    wanted = {relative: _content(source) for relative, source in course_files(course).items()}
    labs_readme = _labs_readme(course)
    if labs_readme is not None:
        wanted["labs/README.md"] = labs_readme
    return wanted


def _check_workspace(course: Path, workspace: Path) -> None:
    course, workspace = Path(course).resolve(), Path(workspace).resolve()
    if workspace == course or course in workspace.parents:
        raise DeltaLabError(
            f"the learner's workspace {workspace} is inside the course's folder {course}",
            f"set {LEARNER_DIR_ENV} to a folder outside the repository (the default is ~/deltalab-course)",
        )
    if workspace.exists() and not workspace.is_dir():
        raise DeltaLabError(f"the learner's workspace {workspace} is a file, not a folder",
                            f"move that file away, or set {LEARNER_DIR_ENV} to another folder")


def update_workspace(course: str | Path, workspace: str | Path | None = None) -> WorkspaceUpdate:
    """Make the learner's ``workspace`` (default :func:`learner_dir`) from ``course``, or bring it
    up to date: never overwrite a file the learner changed."""
    course = Path(course)
    workspace = Path(workspace) if workspace is not None else learner_dir()
    _check_workspace(course, workspace)
    wanted = _wanted(course)
    workspace.mkdir(parents=True, exist_ok=True)
    copied = _read_manifest(workspace)
    report = WorkspaceUpdate(workspace)
    for relative, content in wanted.items():
        target = workspace / relative
        digest = _sha256(content)
        if not target.exists():
            report.added.append(relative)
        else:
            current = _sha256(target.read_bytes())
            if current == digest:
                report.unchanged.append(relative)
                copied[relative] = digest
                continue
            if copied.get(relative) != current:
                report.kept.append(relative)
                continue
            report.updated.append(relative)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)
        copied[relative] = digest
    _write_manifest(workspace, copied)
    return report


def _in_workspace(name: str, workspace: Path) -> str:
    """A file's path in the workspace, from that path, an absolute path into the workspace, or the
    path of its source in a checkout (``labs/release/<lab>/...``)."""
    path = Path(name)
    if path.is_absolute() and workspace.absolute() in path.parents:
        path = path.relative_to(workspace.absolute())
    if path.parts[:2] == ("labs", "release"):
        path = Path("labs", *path.parts[2:])
    return path.as_posix()


def reset_file(course: str | Path, relative: str, workspace: str | Path | None = None) -> Path | None:
    """Give the learner the course's version of one workspace file (e.g. ``notebooks/02_...ipynb``),
    moving theirs to ``backups/`` with the time in its name. Returns where theirs went (None when
    there was none to keep)."""
    course = Path(course)
    workspace = Path(workspace) if workspace is not None else learner_dir()
    _check_workspace(course, workspace)
    relative = _in_workspace(relative, workspace)
    wanted = _wanted(course)
    if relative not in wanted:
        names = ", ".join(name for name in wanted if name.endswith(".ipynb"))
        raise DeltaLabError(f"{relative!r} is not a file of the course's workspace",
                            f"name it by its path in {workspace}, one of: {names}")
    target = workspace / relative
    backup = None
    if target.exists():
        stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
        backup = workspace / BACKUPS_DIR / f"{target.stem}-{stamp}{target.suffix}"
        backup.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(target), str(backup))
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(wanted[relative])
    copied = _read_manifest(workspace)
    copied[relative] = _sha256(wanted[relative])
    _write_manifest(workspace, copied)
    return backup
