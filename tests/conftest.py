"""Shared test setup: a temporary work root for everything the suite runs, one Spark session, and the
table of seconds per file. xdist's own ``--dist loadfile`` shares the files between workers: a file (a
notebook with all its cells in one kernel, a lab's tests with the tables they build once) runs on one worker.

nbval starts one kernel per notebook; those kernels inherit this process's environment, so
setting DELTALAB_WORKDIR here keeps every notebook's tables in the temporary root too.

The helpers the test files import live in tests/support/ (on the path through ``pythonpath`` in
pyproject.toml); tests/README.md says where what is.
"""

from __future__ import annotations

import os
import random
import shutil
import tempfile
from collections import defaultdict
from pathlib import Path

import pytest

from course_testing import REPO
from cross_engine import CrossEngine
from lab_testing import RUN_SEED_ENV
from deltalab.locations import ROOT_MARKER

_TEMPORARY_ROOT: str | None = None


def pytest_configure(config: pytest.Config) -> None:
    global _TEMPORARY_ROOT
    _TEMPORARY_ROOT = tempfile.mkdtemp(prefix="deltalab-tests-")
    os.environ["DELTALAB_WORKDIR"] = _TEMPORARY_ROOT
    # Marked as a root the course made: the learner's workspace and nbgrader's exchange below live in
    # it, and a test that makes them before any work directory (a worker whose first file is not a
    # Spark one) would otherwise leave files that work_root() refuses as not its own.
    Path(_TEMPORARY_ROOT, ROOT_MARKER).touch()
    # The learner's workspace (make lab's copy of the course) of any test that starts one, never ~'s.
    os.environ["DELTALAB_LEARNER_DIR"] = os.path.join(_TEMPORARY_ROOT, "_learner")
    os.environ["DELTALAB_NBGRADER_EXCHANGE"] = os.path.join(_TEMPORARY_ROOT, "_nbgrader-exchange")  # labs/nbgrader_config.py
    # The seed of this run's lab tables, drawn here in the controller before pytest-xdist starts its workers,
    # which inherit it: every worker then collects the same tests (lab_testing.run_seed).
    os.environ.setdefault(RUN_SEED_ENV, str(random.SystemRandom().randrange(1, 2**31)))
    if not hasattr(config, "workerinput"):  # the controller (or a run without xdist) prints the table
        config.pluginmanager.register(SecondsPerFile(), "deltalab-seconds-per-file")
    config.pluginmanager.register(CrossEngine(), CrossEngine.NAME)  # delta-rs reads what each notebook left
    # No MPLBACKEND here: nbval's kernels inherit this environment and must keep Jupyter's inline
    # backend, or plt.show() would display nothing and stored figure outputs would not match.


def pytest_report_header(config: pytest.Config) -> str:
    seed = os.environ[RUN_SEED_ENV]
    return f"the labs' tables of this run: seed {seed} ({RUN_SEED_ENV}={seed} builds them again)"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    """A failed lab test says which tables it ran on: the seed that reproduces them."""
    outcome = yield
    report = outcome.get_result()
    if report.failed and item.get_closest_marker("labs"):
        seed = os.environ[RUN_SEED_ENV]
        report.sections.append(("the labs' tables", f"seed {seed}: run again with {RUN_SEED_ENV}={seed}"))


def pytest_unconfigure(config: pytest.Config) -> None:
    if _TEMPORARY_ROOT:
        shutil.rmtree(_TEMPORARY_ROOT, ignore_errors=True)


@pytest.fixture(scope="session")
def spark():
    """The Delta-enabled session of this pytest process (one per xdist worker)."""
    from deltalab import get_spark

    return get_spark("pytest")


@pytest.fixture(scope="session")
def repo() -> Path:
    """The repository's root folder."""
    return REPO


@pytest.fixture()
def seeded(monkeypatch):
    """Fix the seed of the lab checks' generated tables for one test: ``seeded(n)`` (``DELTALAB_CHECK_SEED``)."""
    from deltalab.labs.tables import SEED_ENV

    def fix(seed: int) -> int:
        monkeypatch.setenv(SEED_ENV, str(seed))
        return seed

    return fix


@pytest.fixture()
def wd(request) -> Path:
    """An emptied work directory named after the test file (``test_streaming``), under the suite's work root."""
    from deltalab import workdir

    return workdir(request.path.stem)


class SecondsPerFile:
    """Adds up setup, call and teardown time per file and prints the table at the end.

    Registered as a plugin (not as conftest hooks) so that it also sees the notebooks' nbval
    items, which live outside tests/, in a run without xdist.
    """

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.seconds[report.nodeid.split("::")[0]] += report.duration

    def pytest_terminal_summary(self, terminalreporter) -> None:
        if not self.seconds:
            return
        terminalreporter.write_sep("-", "seconds per file (setup + call + teardown, summed over its tests)")
        for path, seconds in sorted(self.seconds.items(), key=lambda item: -item[1]):
            terminalreporter.write_line(f"{seconds:8.1f}  {path}")
