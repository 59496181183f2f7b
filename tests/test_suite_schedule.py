"""The plan ``make test`` and ``make test-labs`` give xdist (tests/support/suite_schedule.py) names real files
and labs, and orders the queue."""

from __future__ import annotations

from collections import OrderedDict

from course_testing import REPO
from suite_schedule import SAME_WORKER_AS, SECONDS_PER_SCOPE, longest_first, scope_of


def test_every_scope_named_is_a_file_of_the_suite():
    for scope in [*SECONDS_PER_SCOPE, *SAME_WORKER_AS, *SAME_WORKER_AS.values()]:
        file, _, lab = scope.partition("[")
        assert (REPO / file).is_file(), f"{scope} is named in tests/support/suite_schedule.py but does not exist"
        assert not lab or (REPO / "labs" / "source" / lab.rstrip("]")).is_dir(), f"{scope}: no such lab in labs/source"
    merged = set(SAME_WORKER_AS) & set(SECONDS_PER_SCOPE)
    assert not merged, f"{merged} run inside another scope: time them with it, not on their own"


def test_longest_first_puts_the_named_scopes_first_and_keeps_the_rest_in_order():
    queue = OrderedDict([("tests/test_datasets.py", {"a": False}), ("tests/test_browser.py", {"b": False}),
                         ("tests/test_curves.py", {"c": False}), ("tests/test_labs.py", {"d": False})])
    ordered = longest_first(queue)
    assert list(ordered) == ["tests/test_labs.py", "tests/test_browser.py", "tests/test_datasets.py", "tests/test_curves.py"]
    assert ordered["tests/test_browser.py"] is queue["tests/test_browser.py"]


def test_each_labs_runs_are_a_scope_and_the_files_that_share_its_tables_join_it():
    assert scope_of("tests/test_labs.py::test_solution_passes_every_check[lab05_concurrency]",
                    "tests/test_labs.py") == "tests/test_labs.py[lab05_concurrency]"
    assert scope_of("tests/test_lab05_concurrency.py::test_x", "tests/test_lab05_concurrency.py") == \
        "tests/test_labs.py[lab05_concurrency]"
    assert scope_of("tests/test_labs.py::test_the_instructors_steps_work_as_written", "tests/test_labs.py") == \
        "tests/test_labs.py"
    assert scope_of("tests/test_log.py::test_y[parquet]", "tests/test_log.py") == "tests/test_log.py"
