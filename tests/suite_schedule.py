"""How ``make test`` shares the suite between its xdist workers (used by tests/conftest.py).

``--dist loadscope`` gives each scope (a test file; a notebook, all its cells in one kernel) to one
worker. Two changes to xdist's plan: files that share work measured once per process run in one
scope, and the longest scopes are handed out first.
"""

from __future__ import annotations

from collections import OrderedDict

# Test files that share work measured once per process: xdist must run them on one worker.
SAME_WORKER_AS = {"tests/test_lab05_checks.py": "tests/test_labs.py", "tests/test_lab09_checks.py": "tests/test_labs.py"}

# The longest scopes, with the seconds each took in a full two-worker `make test` (rounded; they
# only order the queue). Longest first keeps the last minutes from running one long scope on one
# worker while the other waits: xdist's own order (most tests first) started test_cluster, one
# test of 134 s, last, and that tail cost about a minute. The seconds below are from
# the run of 2026-11-24 (14:57 in all, 1778 s of work on two workers). Scopes not named here follow, most tests
# first. Re-measure with the table `make test` prints at its end when these drift.
SECONDS_PER_SCOPE = {
    "tests/test_labs.py": 346,  # with test_lab05_checks.py and test_lab09_checks.py (SAME_WORKER_AS)
    "tests/test_cluster.py": 164,
    "notebooks/05_optimistic_concurrency.ipynb": 128,
    "notebooks/10_medallion_pipeline.ipynb": 103,
    "notebooks/08_zorder_benchmark.ipynb": 87,
    "notebooks/02_the_transaction_log.ipynb": 85,
    "notebooks/09_streaming.ipynb": 79,
    "notebooks/03_checkpoints.ipynb": 78,
    "notebooks/09b_streaming_case_studies.ipynb": 65,
    "notebooks/11_object_stores.ipynb": 59,
    "notebooks/06_schema_enforcement_and_evolution.ipynb": 55,
    "notebooks/04_time_travel_and_vacuum.ipynb": 53,
    "notebooks/12_other_engines.ipynb": 52,
    "notebooks/07_data_skipping.ipynb": 51,
    "tests/test_log.py": 48,
    "tests/test_browser.py": 41,
    "tests/test_skipping.py": 38,
    "notebooks/10b_table_maintenance.ipynb": 36,
    "tests/test_foundation_spark.py": 36,
}


def longest_first(workqueue: dict) -> OrderedDict:
    """The scopes of ``workqueue`` (xdist's, most tests first), the ones in SECONDS_PER_SCOPE first."""
    order = sorted(workqueue, key=lambda scope: -SECONDS_PER_SCOPE.get(scope, 0))  # stable: the rest keep xdist's order
    return OrderedDict((scope, workqueue[scope]) for scope in order)
