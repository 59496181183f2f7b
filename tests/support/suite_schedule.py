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
# worker while the other waits. The seconds below are from the run of 2026-11-25 on e5c7cef (15:04
# in all, 1782 s of work on two workers), less the labs' solution runs at their fixed seeds, which
# moved to `make test-seeds` (the first seed's run on 2026-11-26, halved: that day's machine ran the
# suite at half the speed). Scopes not named here follow, most tests first. Re-measure with the
# table `make test` prints at its end when these drift.
SECONDS_PER_SCOPE = {
    "tests/test_labs.py": 370,  # with test_lab05_concurrency.py and test_lab09_streaming.py (SAME_WORKER_AS)
    "tests/test_lab06_schema.py": 72,
    "notebooks/05_optimistic_concurrency.ipynb": 74,
    "tests/test_lab03_checkpoints.py": 57,
    "tests/test_lab10_pipeline.py": 49,
    "tests/test_lab04_time_travel.py": 58,
    "tests/test_lab07_skipping.py": 45,
    "tests/test_lab12_engines.py": 60,
    "tests/test_lab11_object_stores.py": 50,
    "tests/test_lab13_clustering.py": 60,  # estimated when it was added
    "tests/test_lab14_features.py": 50,  # estimated when it was added (45 s alone)
    "tests/test_lab15_scale.py": 35,  # estimated when it was added (30 s alone, without its seeds)
    "notebooks/08_zorder_benchmark.ipynb": 65,
    "notebooks/10_medallion_pipeline.ipynb": 78,
    "notebooks/09_streaming.ipynb": 62,
    "notebooks/11_object_stores.ipynb": 70,
    "notebooks/02_the_transaction_log.ipynb": 53,
    "notebooks/03_checkpoints.ipynb": 50,
    "tests/test_lab08_zorder.py": 34,
    "notebooks/06_schema_enforcement_and_evolution.ipynb": 48,
    "notebooks/09b_streaming_case_studies.ipynb": 60,
    "tests/test_browser.py": 43,
    "notebooks/07_data_skipping.ipynb": 40,
    "notebooks/04_time_travel_and_vacuum.ipynb": 38,
    "notebooks/12_other_engines.ipynb": 50,
    "notebooks/13_liquid_clustering.ipynb": 60,  # estimated when it was added, from its own run
    "notebooks/14_table_features.ipynb": 90,  # estimated when it was added, from its own run (93 s of cells alone)
    "notebooks/15_the_log_at_scale.ipynb": 120,  # measured in the suite (about 90 s of cells alone)
    "tests/test_robustness.py": 35,
    "tests/test_lab02_log.py": 10,
}

def longest_first(workqueue: dict) -> OrderedDict:
    """The scopes of ``workqueue`` (xdist's, most tests first), the ones in SECONDS_PER_SCOPE first."""
    order = sorted(workqueue, key=lambda scope: -SECONDS_PER_SCOPE.get(scope, 0))  # stable: the rest keep xdist's order
    return OrderedDict((scope, workqueue[scope]) for scope in order)
