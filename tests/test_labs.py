"""The classroom labs (labs/) as a whole: every lab has exercises and checks, the student versions are
what nbgrader generates from the sources, and labs/README.md's grading steps work as written.

Each lab's own runs (its solution on tables of a fresh seed, its student version, its wrong answers)
are in its test file, tests/test_labNN_topic.py (lab_testing.solution_and_student_version). The grading
test goes through nbgrader's autograder, which starts one kernel (and so one JVM) per submission, as it
would for a class.
"""

from __future__ import annotations

import copy
import csv
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

pytest.importorskip("nbgrader", reason="the labs need the `labs` extra: pip install -e '.[labs]'")

from lab_testing import (LABS, LABS_DIR, checks, exercises, generate_student_versions, read, source,  # noqa: E402
                         student, with_solutions)

def course_copy(tmp_path: Path) -> Path:
    """A throw-away nbgrader course directory with the repository's sources and config."""
    course = tmp_path / "course"
    course.mkdir()
    shutil.copytree(LABS_DIR / "source", course / "source")
    shutil.copy(LABS_DIR / "nbgrader_config.py", course)
    return course


def test_every_lab_has_exercises_and_checks():
    assert len(LABS) >= 2, f"expected at least two labs in labs/source, found {LABS}"
    for lab in LABS:
        assert len(exercises(lab)) >= 2, f"{lab}: a lab needs at least two exercises"
        assert len(checks(lab)) == len(exercises(lab)), f"{lab}: one check cell per exercise"


def test_student_versions_are_up_to_date(tmp_path):
    """labs/release/ is exactly what nbgrader generates from labs/source/ today."""
    course = course_copy(tmp_path)
    made = generate_student_versions(course)
    assert sorted(made) == LABS
    for lab, generated in made.items():
        committed = student(lab)
        assert committed.is_file(), f"{committed} is missing: run `nbgrader generate_assignment {lab} --force` in labs/"
        assert json.loads(generated.read_text()) == json.loads(committed.read_text()), (
            f"{committed} is out of date with its source: run `nbgrader generate_assignment {lab} --force` in labs/"
        )
        text = committed.read_text()
        assert "BEGIN SOLUTION" not in text and "YOUR CODE HERE" in text, f"{lab}: solutions were not stripped"


def readme_commands(lab: str) -> list[str]:
    """The commands of labs/README.md's "From clone to grades", in order (its ```sh blocks), for
    ``lab`` instead of the README's lab02_log; without the set-up (done: this suite runs in the venv)
    and without the suite itself (python -m pytest: that is what is running)."""
    text = (LABS_DIR / "README.md").read_text()
    steps = text[text.index("## From clone to grades"):text.index("\n## ", text.index("## From clone to grades") + 5)]
    commands = []
    for block in re.findall(r"```sh\n(.*?)```", steps, flags=re.S):
        for line in block.splitlines():
            command = re.split(r"\s{2,}#", line.strip())[0].strip()
            if command and not command.startswith(("make setup", ". .venv/bin/activate", "python -m pytest")):
                commands.append(command.replace("lab02_log", lab))
    return commands


@pytest.mark.labs
def test_the_instructors_steps_work_as_written(tmp_path):
    """labs/README.md's commands, pasted in order in a copy of the repository's labs/: regenerate a
    lab, its solution with outputs, grade the default folder of submissions (a correct one, one
    partly correct with a cell that raises, a file that is not a notebook), and the feedback.

    Lab 01 stands in for the README's lab02_log because it is the lightest: nbgrader starts one
    kernel, and so one JVM, per notebook it runs, and what is tested is the steps, the same for
    every lab. The broken submissions do not stop the others, and the CSV has one column per check."""
    lab = "lab01_parquet"
    commands = readme_commands(lab)
    assert [c.split()[:4] for c in commands] == [
        ["cd", "labs", "&&", "nbgrader"], ["cd", "labs", "&&", "nbgrader"], ["python", "-m", "deltalab", "grade"],
        ["cd", "labs", "&&", "nbgrader"]], commands
    repo = tmp_path / "repo"
    shutil.copytree(LABS_DIR, repo / "labs", ignore=shutil.ignore_patterns(
        "gradebook.db", "submitted", "autograded", "feedback", "solution", "grades", ".ipynb_checkpoints"))
    submissions = tmp_path / "submissions"
    inbox = submissions / lab
    inbox.mkdir(parents=True)
    nbformat.write(read(source(lab)), str(inbox / "alice.ipynb"))                    # everything right
    broken = with_solutions(lab, {"column_range"})                                    # exercise 2 only ...
    crash = copy.deepcopy(broken.cells[1])
    crash.source = "raise RuntimeError('a cell that raises')"
    crash.metadata = {}
    crash["id"] = "student-added-cell"
    broken.cells.insert(2, crash)                                                     # ... and a cell that raises
    nbformat.write(broken, str(inbox / "carol.ipynb"))
    (inbox / "dave.ipynb").write_text("this is not a notebook")                      # cannot be read at all
    (submissions / "roster.csv").write_text("student_id,first_name,last_name\nalice,Alice,Liddell\n")  # carol: not listed
    bin_dir = str(Path(sys.executable).parent)
    env = dict(os.environ, PATH=os.pathsep.join([bin_dir, os.environ.get("PATH", "")]),  # . .venv/bin/activate
               DELTALAB_SUBMISSIONS=str(submissions), DELTALAB_WORKDIR=str(tmp_path / "work"))
    said = {}
    for command in commands:
        done = subprocess.run(["bash", "-c", command], cwd=repo, env=env, capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, f"$ {command}\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
        said[command.split(" && ")[-2] if "&&" in command else command] = done.stdout

    solution = read(repo / "labs" / "solution" / lab / f"{lab}.ipynb")
    printed = "".join(o.get("text", "") for c in solution.cells if c.cell_type == "code" for o in c.get("outputs", []))
    for check in checks(lab):
        assert f"✓ {check.removeprefix('check_')}" in printed, f"the solution's {check} should print ✓:\n{printed[-1500:]}"

    grading = said[f"python -m deltalab grade {lab}"]
    assert "[1/3] alice: graded" in grading and "[2/3] carol: graded" in grading, grading
    assert "[3/3] dave: not graded" in grading, "the unreadable submission is reported"
    assert re.search(r"the checks' tables of seed \d+ \(DELTALAB_CHECK_SEED=\d+", grading), grading
    assert re.search(r"alice\s+1\s+1\s+2\s+2", grading) and re.search(r"carol\s+0\s+1\s+1\s+2", grading), grading
    out = repo / "labs" / "grades" / f"{lab}.csv"
    with out.open() as handle:
        rows = {row["student_id"]: row for row in csv.DictReader(handle)}
    assert list(next(iter(rows.values())))[:3] == ["student_id", "check_footer_row_count", "check_column_range"]
    expected = {"alice": ("1", "1", "2"), "carol": ("0", "1", "1")}
    for name, (ex1, ex2, total) in expected.items():
        row = rows[name]
        assert (row["check_footer_row_count"], row["check_column_range"], row["score"]) == (ex1, ex2, total), row
        assert row["max_score"] == "2"
    assert rows.get("dave", {}).get("score", "0") == "0"
    # The formgrader's names: the roster's, else the id (nbgrader's own default shows "None, None").
    from nbgrader.api import Gradebook
    with Gradebook(f"sqlite:///{repo / 'labs' / 'gradebook.db'}") as gradebook:
        names = {student.id: (student.first_name, student.last_name) for student in gradebook.students}
    assert names["alice"] == ("Alice", "Liddell") and names["carol"] == ("", "carol"), names
    feedback = repo / "labs" / "feedback" / "carol" / lab / f"{lab}.html"
    assert feedback.is_file() and "footer_row_count" in feedback.read_text(), "carol's feedback names the failed check"
