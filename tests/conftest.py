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


#: Seconds per file measured on a 2-core machine (CI's make test at 05b2fc9, make test-labs alone at b987746),
#: for the order below only: a wrong or missing figure costs balance, never a result. Files not named are short.
SECONDS_PER_FILE = {
    "notebooks/14_table_features.ipynb": 157, "notebooks/08_zorder_benchmark.ipynb": 147, "tests/test_robustness.py": 145,
    "tests/test_browser.py": 143, "notebooks/13_liquid_clustering.ipynb": 138, "tests/test_lab05_concurrency.py": 147,
    "tests/test_lab10_pipeline.py": 136, "tests/test_labs.py": 130, "tests/test_lab09_streaming.py": 126,
    "tests/test_lab06_schema.py": 124, "notebooks/10_medallion_pipeline.ipynb": 119, "tests/test_lab02_log.py": 116,
    "notebooks/05_optimistic_concurrency.ipynb": 115, "notebooks/11_object_stores.ipynb": 109,
    "notebooks/15_the_log_at_scale.ipynb": 105, "tests/test_lab07_skipping.py": 102, "tests/test_lab13_clustering.py": 101,
    "notebooks/09b_streaming_case_studies.ipynb": 94, "notebooks/02_the_transaction_log.ipynb": 94,
    "notebooks/09_streaming.ipynb": 93, "tests/test_lab08_zorder.py": 92, "notebooks/03_checkpoints.ipynb": 88,
    "notebooks/12_other_engines.ipynb": 88, "tests/test_lab03_checkpoints.py": 88, "notebooks/06_schema_enforcement_and_evolution.ipynb": 86,
    "tests/test_lab15_scale.py": 86, "tests/test_lab14_features.py": 86, "notebooks/04_time_travel_and_vacuum.ipynb": 85,
    "tests/test_lab04_time_travel.py": 83, "tests/test_log.py": 77, "tests/test_lab11_object_stores.py": 73,
    "notebooks/07_data_skipping.ipynb": 67, "tests/test_notebook.py": 57, "notebooks/10b_table_maintenance.ipynb": 54,
    "tests/test_lab12_engines.py": 52, "tests/test_lab01_parquet.py": 47,
}


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    """The longest files first, the short ones last (a file's own items keep their order).

    ``--dist loadfile`` hands the files to the workers in this order, one at a time as each finishes: long
    files first and short ones last let both workers end within seconds of each other. In pytest's own
    order (tests/ first, the notebooks last, test_labs.py after the labs) a worker was left alone for the
    last notebook or for the grading steps' two minutes."""
    def seconds(item: pytest.Item) -> int:
        return SECONDS_PER_FILE.get(Path(item.path).relative_to(REPO).as_posix() if Path(item.path).is_relative_to(REPO) else "", 0)

    items.sort(key=lambda item: -seconds(item))


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
