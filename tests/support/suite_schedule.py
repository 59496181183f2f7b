"""How ``make test`` shares the suite between its xdist workers (used by tests/conftest.py).

``--dist loadscope`` gives each scope (a test file; a notebook, all its cells in one kernel) to one
worker. Two changes to xdist's plan: files that share work measured once per process run in one
scope, and the longest scopes are handed out first.
"""

from __future__ import annotations

from collections import OrderedDict

# Test files that share work measured once per process: xdist must run them on one worker. Lab 05's
# check tests share the conflict pairs and the killed writer, lab 09's the table two streaming
# queries wrote, with the runs of the labs' solutions in tests/test_labs.py.
SAME_WORKER_AS = {"tests/test_lab05_concurrency.py": "tests/test_labs.py",
                  "tests/test_lab09_streaming.py": "tests/test_labs.py"}

# The longest scopes, with the seconds each took in a full two-worker `make test` (rounded; they
# only order the queue). Longest first keeps the last minutes from running one long scope on one
# worker while the other waits: xdist's own order (most tests first) started test_cluster, one
# test of 134 s, last, and that tail cost about a minute. The seconds below are from the
# fresh-clone CI run of 2026-11-24 on 0aeb738 (13:18 in all, 1568 s of work on two workers).
# Scopes not named here follow, most tests first. Re-measure with the table `make test` prints at
# its end when these drift.
SECONDS_PER_SCOPE = {
    "tests/test_labs.py": 266,  # with test_lab05_concurrency.py and test_lab09_streaming.py (SAME_WORKER_AS)
    "notebooks/05_optimistic_concurrency.ipynb": 97,
    "notebooks/08_zorder_benchmark.ipynb": 92,
    "notebooks/10_medallion_pipeline.ipynb": 80,
    "notebooks/11_object_stores.ipynb": 71,
    "notebooks/02_the_transaction_log.ipynb": 66,
    "notebooks/03_checkpoints.ipynb": 64,
    "notebooks/09_streaming.ipynb": 63,
    "notebooks/06_schema_enforcement_and_evolution.ipynb": 58,
    "notebooks/07_data_skipping.ipynb": 58,
    "notebooks/09b_streaming_case_studies.ipynb": 51,
    "tests/test_browser.py": 48,
    "notebooks/04_time_travel_and_vacuum.ipynb": 47,
    "tests/test_robustness.py": 46,
    "notebooks/12_other_engines.ipynb": 45,
    "tests/test_log.py": 45,
    # test_foundation_spark.py (41 s in that run) is now test_session, test_jars, test_doctor, test_notebook,
    # test_workdir and test_jupyterlab.py, each under 20 s on its own; test_robustness.py has since lost
    # its tests without a kernel to test_workdir, test_locations and test_processes.py (seconds).
}


def longest_first(workqueue: dict) -> OrderedDict:
    """The scopes of ``workqueue`` (xdist's, most tests first), the ones in SECONDS_PER_SCOPE first."""
    order = sorted(workqueue, key=lambda scope: -SECONDS_PER_SCOPE.get(scope, 0))  # stable: the rest keep xdist's order
    return OrderedDict((scope, workqueue[scope]) for scope in order)
