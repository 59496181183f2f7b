"""Test-only helpers for the labs: the labs' folders and cells, running a lab notebook inside the pytest
process, the one assertion on a failed check's message (:func:`assert_plain_failure`), regenerating the
student versions with nbgrader, and the test every lab's test file runs (:func:`solution_and_student_version`);
none of it is course material."""

from __future__ import annotations

import ast
import contextlib
import io
import os
import random
from dataclasses import dataclass
from pathlib import Path

import pytest

LABS_DIR = Path(__file__).resolve().parents[2] / "labs"
LABS = sorted(p.name for p in (LABS_DIR / "source").iterdir() if p.is_dir())


def source(lab: str) -> Path:
    """The lab's source notebook, with its solutions (labs/source/)."""
    return LABS_DIR / "source" / lab / f"{lab}.ipynb"


def student(lab: str) -> Path:
    """The lab's student version, as nbgrader released it (labs/release/)."""
    return LABS_DIR / "release" / lab / f"{lab}.ipynb"


def read(path: Path):
    import nbformat

    return nbformat.read(str(path), as_version=4)


def nbgrader_meta(cell) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {})


def exercises(lab: str) -> list[str]:
    """grade_ids of the solution cells, in order."""
    return [nbgrader_meta(c)["grade_id"] for c in read(source(lab)).cells if nbgrader_meta(c).get("solution")]


def checks(lab: str) -> list[str]:
    """grade_ids of the check cells, in order."""
    return [nbgrader_meta(c)["grade_id"] for c in read(source(lab)).cells if nbgrader_meta(c).get("grade")]


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
    from deltalab.labs.report import CheckFailed

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

    from deltalab.labs.report import CheckFailed

    with pytest.raises(CheckFailed) as caught:
        check(answer)
    return assert_plain_failure(caught.value)


#: The seed of one test run's lab tables. tests/conftest.py draws it once per run, in the process that starts
#: pytest-xdist's workers (they inherit it, so they collect the same tests); set it to build a failed run's tables again.
RUN_SEED_ENV = "DELTALAB_LABS_RUN_SEED"


def run_seed() -> int:
    """The seed of this run's lab tables (``$DELTALAB_LABS_RUN_SEED``), new on every run.

    A lab's solution runs on the tables of this seed, and so do the wrong answers of the labs whose
    generators build every kind of table at every seed: one build serves both, and a wrong answer is
    refused on tables nobody chose, not only on the ones its author looked at (a wrong answer accepted at
    one seed is accepted). A process that did not go through tests/conftest.py draws its own.
    """
    value = os.environ.get(RUN_SEED_ENV, "").strip()
    if not value:
        value = os.environ[RUN_SEED_ENV] = str(random.SystemRandom().randrange(1, 2**31))
    return int(value)


def solution_seeds(seeds) -> list:
    """The fixed seeds a lab's solutions are run at, as pytest parameters, all marked ``seeds``:
    ``make test-seeds`` runs them (CI does not: tests/README.md). Each lab's seeds together cover
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


def with_solutions(lab: str, solved: set[str]):
    """The student version of ``lab`` with the solution cells named in ``solved`` filled in."""
    answers = {nbgrader_meta(c).get("grade_id"): c.source for c in read(source(lab)).cells}
    nb = read(student(lab))
    for cell in nb.cells:
        if nbgrader_meta(cell).get("grade_id") in solved:
            cell.source = answers[nbgrader_meta(cell)["grade_id"]]
    return nb


def _defined_functions(source_text: str) -> set[str]:
    return {node.name for node in ast.walk(ast.parse(source_text)) if isinstance(node, ast.FunctionDef)}


def _used_names(source_text: str) -> set[str]:
    return {node.id for node in ast.walk(ast.parse(source_text)) if isinstance(node, ast.Name)}


def solution_and_student_version(lab: str):
    """The test every lab's test file runs (``test_... = solution_and_student_version("labNN_topic")``).

    The lab's solution (labs/source/) runs in this process on tables of this run's seed (:func:`run_seed`,
    fresh on every run, which the lab's wrong answers may share): no cell raises, and every
    check passes and says so with its ✓ line. Then its student version (labs/release/), in the namespace the
    solution's set-up cells left: each exercise is the stub a student starts from, and each check tells, in the
    lab's plain format, that the exercise is not written yet. The student version's other cells are the
    source's (``test_student_versions_are_up_to_date``), so they are not run again; none of those after the
    first exercise may call an exercise's function, which a student who has not written it yet would see
    fail (read from their code). A check that passes on a solved exercise in the student version is the
    source's check cell, which the solution's run passed.
    """

    @pytest.mark.labs
    def test(spark, seeded):
        seeded(run_seed())
        namespace: dict = {"__name__": "__main__"}
        runs = run_in_process(source(lab), namespace)
        errors = [(r.grade_id, repr(r.error)) for r in runs if r.error is not None]
        assert not errors, f"{lab}: cells of the solution raised: {errors}"
        results = check_results(runs)
        assert sorted(results) == sorted(checks(lab)) and all(results.values()), results
        for run in runs:
            if run.is_check:
                assert run.stdout.startswith("✓ "), f"{lab}/{run.grade_id}: a passing check says so, got {run.stdout!r}"

        released = read(student(lab))
        code = [cell for cell in released.cells if cell.cell_type == "code"]
        first = next(index for index, cell in enumerate(code) if nbgrader_meta(cell).get("solution"))
        graded = [cell for cell in code[first:] if nbgrader_meta(cell).get("solution") or nbgrader_meta(cell).get("grade")]
        exercise_functions = set().union(*(_defined_functions(c.source) for c in graded if nbgrader_meta(c).get("solution")))
        for cell in code[first:]:
            if cell not in graded:
                calls = _used_names(cell.source) & exercise_functions
                assert not calls, (f"{lab}: a cell after the first exercise uses {sorted(calls)}, which a student who "
                                   f"has not written it yet would see fail: {cell.source[:120]!r}")
        released.cells = graded
        unsolved = [r for r in run_in_process(released, namespace) if r.is_check]
        assert [r.grade_id for r in unsolved] == checks(lab)
        for run in unsolved:
            assert_plain_failure(run.error, f"{lab}/{run.grade_id}")
            assert "not written yet" in str(run.error), str(run.error)

    test.__doc__ = f"{lab}: its solution passes every check on tables of a fresh seed; its student version says " \
                   "what is not written yet."
    return test
