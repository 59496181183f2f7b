"""The learner's workspace (deltalab.workspace): made from a copy of the course, updated from a
newer one without losing the learner's changes, one file reset, and never the solutions."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from course_testing import checkout_copy
from deltalab.errors import DeltaLabError
from deltalab.workspace import MANIFEST_NAME, course_files, learner_dir, reset_file, update_workspace

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def course(tmp_path) -> Path:
    """notebooks/ and labs/ as a checkout has them."""
    return checkout_copy(tmp_path / "course")


def _outputs(path: Path) -> int:
    nb = nbformat.read(str(path), as_version=4)
    return sum(len(cell.get("outputs", [])) for cell in nb.cells if cell.cell_type == "code")


def test_the_workspace_has_the_notebooks_without_outputs_and_the_student_labs_only(course, tmp_path):
    workspace = tmp_path / "mine"
    report = update_workspace(course, workspace)
    notebooks = sorted(p.name for p in (REPO / "notebooks").glob("*.ipynb"))
    assert sorted(p.name for p in (workspace / "notebooks").glob("*.ipynb")) == notebooks
    assert _outputs(REPO / "notebooks" / "02_the_transaction_log.ipynb") > 0, "the repository keeps its outputs"
    for name in notebooks:
        assert _outputs(workspace / "notebooks" / name) == 0, f"{name} reached the workspace with outputs"
    labs = sorted(p.name for p in (REPO / "labs" / "release").iterdir() if p.is_dir())
    assert sorted(p.name for p in (workspace / "labs").iterdir() if p.is_dir()) == labs
    for lab in labs:
        assert (workspace / "labs" / lab / f"{lab}.ipynb").is_file()
    everything = "\n".join(p.read_text(errors="replace") for p in workspace.rglob("*") if p.is_file())
    assert "BEGIN SOLUTION" not in everything and not (workspace / "labs" / "source").exists(), "solutions leaked"
    assert not (workspace / "labs" / "nbgrader_config.py").exists()
    # The index's link to the labs works here, and the labs' README links each lab's notebook.
    assert "](../labs/README.md)" in (workspace / "notebooks" / "README.md").read_text()
    labs_readme = (workspace / "labs" / "README.md").read_text()
    assert "From clone to grades" not in labs_readme and "nbgrader" not in labs_readme
    for lab in labs:
        assert f"]({lab}/{lab}.ipynb)" in labs_readme, f"labs/README.md does not link {lab}"
    assert sorted(report.added) == sorted([*course_files(course), "labs/README.md"]) and not report.kept


def test_an_update_keeps_what_the_learner_changed_and_brings_the_rest(course, tmp_path):
    workspace = tmp_path / "mine"
    update_workspace(course, workspace)
    mine = workspace / "notebooks" / "02_the_transaction_log.ipynb"
    nb = nbformat.read(str(mine), as_version=4)
    nb.cells[0].source += "\n\nMy note."
    nbformat.write(nb, str(mine))
    untouched = workspace / "notebooks" / "03_checkpoints.ipynb"

    # A newer checkout: both notebooks changed, one notebook added.
    for name in ("02_the_transaction_log.ipynb", "03_checkpoints.ipynb"):
        newer = nbformat.read(str(course / "notebooks" / name), as_version=4)
        newer.cells[0].source += "\n\nA newer course."
        nbformat.write(newer, str(course / "notebooks" / name))
    shutil.copy(course / "notebooks" / "00_hello_delta.ipynb", course / "notebooks" / "99_new.ipynb")

    report = update_workspace(course, workspace)
    assert report.kept == ["notebooks/02_the_transaction_log.ipynb"], report
    assert report.updated == ["notebooks/03_checkpoints.ipynb"], report
    assert report.added == ["notebooks/99_new.ipynb"], report
    assert "My note." in mine.read_text() and "A newer course." not in mine.read_text()
    assert "A newer course." in untouched.read_text()
    assert "make reset" in report.summary() and "02_the_transaction_log" in report.summary()

    # Run again: nothing more to do, and the learner's file is still theirs.
    again = update_workspace(course, workspace)
    assert not again.added and not again.updated and again.kept == report.kept

    # Reset: the course's version, the learner's in backups/.
    backup = reset_file(course, "notebooks/02_the_transaction_log.ipynb", workspace)
    assert backup is not None and backup.parent == workspace / "backups" and "My note." in backup.read_text()
    assert "A newer course." in mine.read_text() and _outputs(mine) == 0
    assert not update_workspace(course, workspace).kept
    manifest = json.loads((workspace / MANIFEST_NAME).read_text())
    assert "notebooks/02_the_transaction_log.ipynb" in manifest["files"]


def test_reset_takes_a_labs_checkout_path_and_refuses_other_names(course, tmp_path):
    workspace = tmp_path / "mine"
    update_workspace(course, workspace)
    lab = workspace / "labs" / "lab02_log" / "lab02_log.ipynb"
    lab.write_text("{}")
    reset_file(course, "labs/release/lab02_log/lab02_log.ipynb", workspace)
    assert "YOUR CODE HERE" in lab.read_text()
    with pytest.raises(DeltaLabError, match="not a file of the course's workspace") as refused:
        reset_file(course, "labs/source/lab02_log/lab02_log.ipynb", workspace)
    assert "notebooks/00_hello_delta.ipynb" in refused.value.fix


def test_a_workspace_inside_the_course_or_a_course_without_notebooks_is_refused(course, tmp_path):
    with pytest.raises(DeltaLabError, match="inside the course's folder"):
        update_workspace(course, course / "mine")
    with pytest.raises(DeltaLabError, match="has no notebooks/README.md"):
        update_workspace(tmp_path / "nothing", tmp_path / "mine")


def test_learner_dir_is_home_or_the_environment(tmp_path):
    assert learner_dir({"HOME": str(tmp_path)}) == tmp_path / "deltalab-course"
    assert learner_dir({"HOME": str(tmp_path), "DELTALAB_LEARNER_DIR": str(tmp_path / "x")}) == tmp_path / "x"


def test_the_command_line_updates_resets_and_says_where(course, tmp_path):
    env = {"DELTALAB_LEARNER_DIR": str(tmp_path / "mine"), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "deltalab", "workspace", *args, "--root", str(course)],
                              capture_output=True, text=True, env=env, timeout=120)

    where = run("where")
    assert where.returncode == 0 and where.stdout.strip() == str(tmp_path / "mine")
    update = run("update")
    assert update.returncode == 0 and "Your copy of the course" in update.stdout and "added" in update.stdout, update
    reset = run("reset", "notebooks/00_hello_delta.ipynb")
    assert reset.returncode == 0 and "backups" in reset.stdout, reset
    missing = run("reset")
    assert missing.returncode == 2 and "reset needs the files" in missing.stderr, missing
    wrong = run("reset", "notebooks/nope.ipynb")
    assert wrong.returncode == 2 and "Traceback" not in wrong.stderr and "not a file of" in wrong.stderr, wrong


def test_the_readmes_make_commands_exist_and_make_reset_works(tmp_path):
    """README.md's first commands, as a learner pastes them: each is a target of the Makefile
    (make -n), and `make reset NB=...` gives back the course's notebook in the learner's copy."""
    text = (REPO / "README.md").read_text()
    commands = [line.split("#")[0].strip() for line in text.splitlines() if line.startswith("    make ")]
    assert "make lab" in commands and "make test" in commands and any(c.startswith("make reset NB=") for c in commands)
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "HOME": str(tmp_path),
           "DELTALAB_LEARNER_DIR": str(tmp_path / "mine")}
    for command in commands:
        dry = subprocess.run(["make", "-n", "--no-print-directory", *command.split()[1:]], cwd=REPO, env=env,
                             capture_output=True, text=True, timeout=60)
        assert dry.returncode == 0, f"`{command}` is not a make command here:\n{dry.stderr}"
    reset = next(c for c in commands if c.startswith("make reset NB="))
    done = subprocess.run(reset.split(), cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    notebook = tmp_path / "mine" / reset.split("NB=")[1]
    assert done.returncode == 0 and notebook.is_file() and _outputs(notebook) == 0, done.stdout + done.stderr
    refused = subprocess.run(["make", "reset"], cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
    assert refused.returncode != 0 and "make reset needs the file" in refused.stderr, refused.stderr
