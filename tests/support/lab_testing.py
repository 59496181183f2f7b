"""Test-only helpers for the labs: run a lab notebook inside the pytest process, read its check
results, regenerate the student versions with nbgrader, and the one assertion on a failed check's
message (:func:`assert_plain_failure`; none of it is course material)."""

from __future__ import annotations

import contextlib
import io
from dataclasses import dataclass
from pathlib import Path

import pytest


@dataclass
class CellRun:
    """What happened when one code cell ran: its nbgrader id, output and error (if any)."""

    index: int
    grade_id: str | None
    is_check: bool
    stdout: str
    error: BaseException | None


def run_in_process(notebook, namespace: dict | None = None) -> list[CellRun]:
    """Run the code cells of ``notebook`` (a path or nbformat node) in one namespace, in order.

    Like nbgrader's autograder, a cell that raises does not stop the cells after it. Cells run
    in this interpreter, so ``get_spark()`` returns the session already running here.
    """
    import nbformat

    nb = nbformat.read(str(notebook), as_version=4) if isinstance(notebook, (str, Path)) else notebook
    ns: dict = {"__name__": "__main__"} if namespace is None else namespace
    runs: list[CellRun] = []
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        meta = cell.get("metadata", {}).get("nbgrader", {})
        out = io.StringIO()
        error: BaseException | None = None
        try:
            with contextlib.redirect_stdout(out):
                exec(compile(cell.source, f"<cell {index}>", "exec"), ns)
        except Exception as exc:  # recorded, like an error output in a notebook
            error = exc
        runs.append(CellRun(index, meta.get("grade_id"), bool(meta.get("grade")), out.getvalue(), error))
    return runs


def check_results(runs: list[CellRun]) -> dict[str, bool]:
    """``{check grade_id: passed}`` for the graded cells of a run."""
    return {run.grade_id: run.error is None for run in runs if run.is_check and run.grade_id}


def generate_student_versions(course: Path, labs: list[str] | None = None) -> dict[str, Path]:
    """Run nbgrader's ``generate_assignment --no-db --force`` for ``labs`` in this process.

    Same converter as the command line, without a gradebook and without starting one Python
    per lab; the student versions land in ``course/release/<lab>/``. Used by the test that the
    committed student versions are up to date.
    """
    from nbgrader.converters import GenerateAssignment
    from nbgrader.coursedir import CourseDirectory
    from traitlets.config import Config, PyFileConfigLoader

    course = Path(course).resolve()
    config = PyFileConfigLoader("nbgrader_config.py", path=str(course)).load_config()
    overrides = Config()
    overrides.CourseDirectory.root = str(course)
    overrides.SaveCells.enabled = False
    overrides.GenerateAssignment.no_database = True
    overrides.BaseConverter.force = True
    config.merge(overrides)
    labs = labs or sorted(p.name for p in (course / "source").iterdir() if p.is_dir())
    made = {}
    for lab in labs:
        coursedir = CourseDirectory(config=config)
        coursedir.assignment_id = lab
        GenerateAssignment(coursedir=coursedir, config=config).start()
        made[lab] = course / "release" / lab / f"{lab}.ipynb"
    return made


#: What a check's message must never show: a stack trace, Java's frames, a failed assertion.
LEAKS = ("Traceback", "py4j", "at org.apache", "\tat ", "AssertionError")


def assert_plain_failure(error: BaseException | None, where: str = "") -> str:
    """The message of ``error``, checked for the lab format (the suite's one check of it).

    ``error`` is a ``CheckFailed`` whose message starts with "✗ ", has the "Where to look:" line,
    has at most three lines and no stack trace (:data:`LEAKS`), and which Jupyter shows as that
    message alone (``_render_traceback_``). ``where`` (e.g. ``lab02_log/check_active_files``)
    prefixes what an assertion reports.
    """
    from deltalab.labs.harness import CheckFailed

    label = f"{where}: " if where else ""
    assert isinstance(error, CheckFailed), f"{label}raised {error!r}, not a CheckFailed"
    message = str(error)
    assert message.startswith("✗ ") and "\nFix: Where to look: " in message, f"{label}{message}"
    assert len(message.splitlines()) <= 3, f"{label}{message}"
    for leak in LEAKS:
        assert leak not in message, f"{label}the message leaks {leak!r}: {message}"
    assert error._render_traceback_() == message.splitlines(), f"{label}{message}"
    return message


def stub(*args):
    """An exercise as the student version has it: not written yet."""
    raise NotImplementedError()


def check_failure(check, answer) -> str:
    """The message of the ``CheckFailed`` that ``check(answer)`` raises, checked by :func:`assert_plain_failure`."""
    import pytest

    from deltalab.labs.harness import CheckFailed

    with pytest.raises(CheckFailed) as caught:
        check(answer)
    return assert_plain_failure(caught.value)


def solution_seeds(seeds) -> list:
    """The fixed seeds a lab's solutions are run at, as pytest parameters, all marked ``seeds``:
    ``make test-seeds`` runs them (CI runs them in the course image). Each lab's seeds together cover
    every edge case its checks generate (its coverage test says so). ``make test-labs`` leaves them
    out to keep within its 15 minutes: there, tests/test_labs.py runs each lab's solution notebook,
    whose checks draw a fresh seed, which catches a check that breaks its own solution."""
    return [pytest.param(seed, marks=pytest.mark.seeds) for seed in seeds]


def solution_namespace(source: Path, grade_ids: tuple[str, ...]) -> dict:
    """The cells of a lab's source notebook named by ``grade_ids`` (its setup and solution cells),
    run in one namespace: a lab's check tests call the solutions the students' notebooks hold."""
    import nbformat

    namespace: dict = {"__name__": "__main__"}
    for cell in nbformat.read(str(source), as_version=4).cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") in grade_ids:
            exec(compile(cell.source, f"<{source.stem} solution>", "exec"), namespace)
    return namespace
