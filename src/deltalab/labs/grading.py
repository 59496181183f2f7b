"""Glue between the labs and nbgrader: a per-check CSV export and a one-command grading run.

nbgrader does the real work (student versions, autograding, the SQLite gradebook); this module
adds two things it lacks:

* :class:`PerCheckCsvExportPlugin`, an ``nbgrader export`` plugin writing one row per student and
  one column per check (nbgrader's own CSV has only the total per assignment);
* ``python -m deltalab grade LAB [FOLDER]``: copy a folder of submitted notebooks
  (``FOLDER/<student>.ipynb``; by default :func:`submissions_folder`, outside the repository) into
  nbgrader's ``submitted/`` layout, autograde them one by one with a line of progress each, export
  the CSV and print the grades as a table.
"""

from __future__ import annotations

import csv
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

from deltalab.errors import DeltaLabError
from deltalab.labs.tables import SEED_ENV, check_seed

try:  # nbgrader is only installed with the `labs` extra
    from nbgrader.api import Gradebook, MissingEntry
    from nbgrader.plugins import ExportPlugin
except ImportError:  # pragma: no cover - exercised only without the extra
    ExportPlugin = object  # type: ignore[assignment,misc]


# --------------------------------------------------------------------------------------------
# nbgrader export plugin
# --------------------------------------------------------------------------------------------

class PerCheckCsvExportPlugin(ExportPlugin):  # type: ignore[misc,valid-type]
    """``nbgrader export --exporter=deltalab.labs.grading.PerCheckCsvExportPlugin --assignment=LAB --to=F.csv``.

    Writes one row per student who submitted LAB, with one column per graded check cell (its
    score), then ``score`` and ``max_score``. Exactly one assignment per file, because different
    labs have different checks.
    """

    def export(self, gradebook: "Gradebook") -> None:
        names = [str(a) for a in self.assignment] or [a.name for a in gradebook.assignments]
        if len(names) != 1:
            raise DeltaLabError(
                f"The per-check export writes one lab per CSV file, and {len(names)} were selected.",
                fix="Pass exactly one lab, e.g. --assignment=lab02_log.",
            )
        assignment = gradebook.find_assignment(names[0])
        checks = [(nb.name, cell.name) for nb in assignment.notebooks for cell in nb.grade_cells]
        checks.sort(key=lambda item: (item[0], _cell_order(assignment.name, item[0]).get(item[1], 10**6), item[1]))
        dest = Path(self.to or f"{assignment.name}.csv")
        dest.parent.mkdir(parents=True, exist_ok=True)
        wanted = {str(s) for s in self.student}
        with dest.open("w", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow(["student_id", *[cell for _, cell in checks], "score", "max_score"])
            for student in sorted(gradebook.students, key=lambda s: s.id):
                if wanted and student.id not in wanted:
                    continue
                try:
                    submission = gradebook.find_submission(assignment.name, student.id)
                except MissingEntry:
                    continue
                scores = {}
                for nb in submission.notebooks:
                    for grade in nb.grades:
                        scores[(nb.name, grade.name)] = grade.score
                row = [_number(scores.get(key, 0.0)) for key in checks]
                writer.writerow([student.id, *row, _number(submission.score), _number(submission.max_score)])
        self.log.info("Wrote %s", dest)


def _cell_order(assignment: str, notebook: str) -> dict[str, int]:
    """Position of each graded cell in the source notebook (the export runs in the course folder),
    so the CSV columns follow the lab's order; empty if the source is not there."""
    import nbformat

    path = Path("source") / assignment / f"{notebook}.ipynb"
    if not path.is_file():
        return {}
    cells = nbformat.read(str(path), as_version=4).cells
    ids = [c.get("metadata", {}).get("nbgrader", {}).get("grade_id") for c in cells]
    return {grade_id: i for i, grade_id in enumerate(ids) if grade_id}


def _number(value: float | None) -> str:
    value = float(value or 0.0)
    return str(int(value)) if value.is_integer() else f"{value:g}"


# --------------------------------------------------------------------------------------------
# One command: folder of submissions -> CSV
# --------------------------------------------------------------------------------------------

def _nbgrader(course: Path, *args: str, work_root: Path | None = None, seed: int | None = None) -> subprocess.CompletedProcess:
    # nbgrader runs `alembic` (its database migrations) by name: put this Python's bin/ first.
    env = dict(os.environ, PATH=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))
    if work_root is not None:
        env["DELTALAB_WORKDIR"] = str(work_root)
    if seed is not None:
        env[SEED_ENV] = str(seed)
    return subprocess.run(
        [sys.executable, "-m", "nbgrader", *args], cwd=course, text=True, capture_output=True, env=env
    )


def _run_step(course: Path, args: tuple[str, ...], work_root: Path, lab: str) -> None:
    """Run one nbgrader step and print what it said; only a failed generate_assignment stops grading."""
    done = _nbgrader(course, *args, work_root=work_root)
    print(f"$ nbgrader {' '.join(args)}  (exit {done.returncode})")
    if done.returncode != 0:
        errors = [line for line in done.stderr.splitlines() if "There was an error processing" in line]
        for line in errors or done.stderr.splitlines()[-5:]:
            print("  " + line.strip())
        if args[0] == "generate_assignment":
            raise DeltaLabError(f"nbgrader could not prepare {lab}.", fix="Read the messages above.")


#: The folder that holds one folder of submissions per lab, when ``python -m deltalab grade`` is
#: given none (default ``~/deltalab-submissions``): outside the repository, so that students' work
#: never shows up as untracked files of the course's checkout.
SUBMISSIONS_ENV = "DELTALAB_SUBMISSIONS"


def submissions_folder(lab: str, environ: Mapping[str, str] | None = None) -> Path:
    """Where the submissions of ``lab`` go by default: ``$DELTALAB_SUBMISSIONS/<lab>`` or
    ``~/deltalab-submissions/<lab>``, one ``<student_id>.ipynb`` per student."""
    environ = os.environ if environ is None else environ
    root = environ.get(SUBMISSIONS_ENV) or str(Path.home() / "deltalab-submissions")
    return Path(root).expanduser() / lab


def _autograde_one(course: Path, lab: str, student: str, work_root: Path, seed: int) -> str | None:
    """Autograde one student's submission; None when it was graded, else nbgrader's reason."""
    done = _nbgrader(course, "autograde", lab, f"--student={student}", "--create", "--force", work_root=work_root,
                     seed=seed)
    if done.returncode == 0:
        return None
    errors = [line.strip() for line in done.stderr.splitlines() if "There was an error processing" in line]
    return (errors or [line.strip() for line in done.stderr.splitlines() if line.strip()][-1:] or ["no message"])[0]


#: The class list beside the labs' folders of submissions: ``student_id,first_name,last_name``.
ROSTER_NAME = "roster.csv"


def read_roster(path: Path) -> dict[str, tuple[str, str]]:
    """``{student_id: (first_name, last_name)}`` from a roster CSV with those three columns."""
    with path.open(newline="", encoding="utf-8-sig") as handle:
        reader = csv.DictReader(handle)
        missing = {"student_id", "first_name", "last_name"} - set(reader.fieldnames or [])
        if missing:
            raise DeltaLabError(f"{path} has no column {', '.join(sorted(missing))}",
                                fix="Give the roster the header line student_id,first_name,last_name.")
        return {row["student_id"].strip(): (row["first_name"].strip(), row["last_name"].strip())
                for row in reader if (row.get("student_id") or "").strip()}


def name_students(course: Path, students: list[str], roster: Path | None) -> None:
    """Put ``students`` in the gradebook with names, so that the formgrader does not list them as
    "None, None": the roster's, else the id as the last name (the formgrader shows "last, first")."""
    from nbgrader.api import Gradebook

    names = read_roster(roster) if roster is not None and roster.is_file() else {}
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        for student in students:
            first, last = names.get(student, ("", student))
            gradebook.update_or_create_student(student, first_name=first, last_name=last)


def print_grades(csv_path: Path) -> None:
    """The grades CSV as a table on the terminal: one row per student, one column per check."""
    with csv_path.open(newline="") as handle:
        rows = list(csv.reader(handle))
    if not rows:
        return
    header = [name.removeprefix("check_") for name in rows[0]]
    widths = [max(len(str(row[i])) for row in [header, *rows[1:]]) for i in range(len(header))]
    for row in [header, *rows[1:]]:
        print("  ".join(str(cell).ljust(width) for cell, width in zip(row, widths)).rstrip())


def grade_folder(lab: str, folder: Path, course: Path, out: Path | None = None) -> Path:
    """Grade every ``folder/<student>.ipynb`` for ``lab`` with nbgrader; return the CSV path.

    A submission whose cells raise still gets the points of the checks that pass; a file that
    nbgrader cannot grade at all is reported and skipped, and the others are graded.
    """
    course, folder = course.resolve(), folder.resolve()
    if not (course / "nbgrader_config.py").is_file():
        raise DeltaLabError(f"{course} has no nbgrader_config.py, so it is not the labs course directory.",
                            fix="Pass --course labs (the labs/ folder of the repository).")
    if not (course / "source" / lab).is_dir():
        known = sorted(p.name for p in (course / "source").iterdir() if p.is_dir())
        raise DeltaLabError(f"There is no lab called {lab!r}.", fix=f"Use one of: {', '.join(known)}.")
    if not folder.is_dir():
        raise DeltaLabError(f"There is no folder {folder} with submissions of {lab}.",
                            fix=f"Put one notebook per student there, named <student_id>.ipynb (or pass the folder "
                                f"that holds them: python -m deltalab grade {lab} FOLDER).")
    files = sorted(folder.glob("*.ipynb"))
    if not files:
        raise DeltaLabError(f"{folder} holds no .ipynb files.",
                            fix="Put one notebook per student there, named <student_id>.ipynb.")
    notebook = f"{lab}.ipynb"
    for file in files:
        target = course / "submitted" / file.stem / lab
        target.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(file, target / notebook)
    # The submissions run in a work root of their own: the instructor's kernels (the lab open in
    # JupyterLab) hold their work directories, and grading must neither wait for them nor empty them.
    grading_root = Path(tempfile.mkdtemp(prefix="deltalab-grading-"))
    try:
        _run_step(course, ("generate_assignment", lab, "--force"), grading_root, lab)
        name_students(course, [file.stem for file in files], folder.parent / ROSTER_NAME)
        # One seed for the whole class: every submission is checked on the same generated tables
        # (fair, and each kernel builds them once for all its checks, not once per check).
        seed = check_seed()
        print(f"Grading {len(files)} submission(s) of {lab}: a fresh kernel and Spark each, about a minute apiece; "
              f"the checks' tables of seed {seed} ({SEED_ENV}={seed} builds them again).", flush=True)
        for number, file in enumerate(files, 1):
            started = time.monotonic()
            problem = _autograde_one(course, lab, file.stem, grading_root, seed)
            outcome = "graded" if problem is None else f"not graded: {problem}"
            print(f"[{number}/{len(files)}] {file.stem}: {outcome} ({time.monotonic() - started:.0f} s)", flush=True)
    finally:
        shutil.rmtree(grading_root, ignore_errors=True)
    out = (out or course / "grades" / f"{lab}.csv").resolve()

    done = _nbgrader(course, "export", "--exporter=deltalab.labs.grading.PerCheckCsvExportPlugin",
                     f"--assignment={lab}", f"--to={out}")
    if done.returncode != 0:
        raise DeltaLabError(f"nbgrader export failed: {done.stderr.strip().splitlines()[-1:]}",
                            fix="Run the export command by hand in labs/ to see the whole message.")
    print_grades(out)
    print(f"Grades: {out}")
    return out
