"""How ``make test`` and ``make test-labs`` share their tests between xdist workers (used by tests/conftest.py).

``--dist loadscope`` gives each scope (a test file; a notebook, all its cells in one kernel) to one
worker. Three changes to xdist's plan: each lab's runs in tests/test_labs.py are a scope of their
own (``scope_of``), files that share work measured once per process join their lab's scope, and the
longest scopes are handed out first.
"""

from __future__ import annotations

from collections import OrderedDict

LABS_FILE = "tests/test_labs.py"

# Test files that share work measured once per process with their lab's runs in tests/test_labs.py:
# xdist must run them on one worker. Lab 05's check tests share the conflict pairs and the killed
# writer, lab 09's the table two streaming queries wrote.
SAME_WORKER_AS = {"tests/test_lab05_concurrency.py": "tests/test_labs.py[lab05_concurrency]",
                  "tests/test_lab09_streaming.py": "tests/test_labs.py[lab09_streaming]"}

# The longest scopes, with the seconds each took in a full two-worker run (rounded; they only order
# the queue). Longest first keeps the last minutes from running one long scope on one worker while
# the other waits. Notebooks and package files: `make test` of 2026-11-28 (823 passed in 978 s);
# labs: `make test-labs` of 2026-11-28 (314 passed in 633 s; a lab's runs are its solution and student
# version, 05's and 09's with their check files, whose tables they share). Scopes not named here follow, most tests first. Re-measure
# with the table `make test` and `make test-labs` print at their end when these drift.
SECONDS_PER_SCOPE = {
    "notebooks/15_the_log_at_scale.ipynb": 118,
    "notebooks/08_zorder_benchmark.ipynb": 84,
    "notebooks/10_medallion_pipeline.ipynb": 76,
    "notebooks/13_liquid_clustering.ipynb": 75,
    "notebooks/14_table_features.ipynb": 75,
    "notebooks/05_optimistic_concurrency.ipynb": 73,
    "notebooks/11_object_stores.ipynb": 72,
    "notebooks/09b_streaming_case_studies.ipynb": 71,
    "notebooks/09_streaming.ipynb": 69,
    "notebooks/02_the_transaction_log.ipynb": 61,
    "notebooks/03_checkpoints.ipynb": 58,
    "notebooks/12_other_engines.ipynb": 53,
    "notebooks/06_schema_enforcement_and_evolution.ipynb": 52,
    "notebooks/07_data_skipping.ipynb": 49,
    "notebooks/04_time_travel_and_vacuum.ipynb": 44,
    "tests/test_browser.py": 46,
    "tests/test_log.py": 45,
    "tests/test_robustness.py": 37,
    "tests/test_labs.py[lab05_concurrency]": 125,  # with tests/test_lab05_concurrency.py (SAME_WORKER_AS)
    "tests/test_labs.py[lab09_streaming]": 122,  # with tests/test_lab09_streaming.py (SAME_WORKER_AS)
    "tests/test_labs.py": 113,  # the instructors' steps (nbgrader: one kernel per notebook it runs)
    "tests/test_lab06_schema.py": 64,
    "tests/test_lab10_pipeline.py": 63,
    "tests/test_labs.py[lab14_features]": 55,
    "tests/test_lab13_clustering.py": 54,
    "tests/test_lab08_zorder.py": 50,
    "tests/test_lab07_skipping.py": 45,
    "tests/test_lab03_checkpoints.py": 43,
    "tests/test_labs.py[lab13_clustering]": 49,
    "tests/test_lab15_scale.py": 40,
    "tests/test_labs.py[lab10_pipeline]": 39,
    "tests/test_lab14_features.py": 38,
    "tests/test_labs.py[lab03_checkpoints]": 38,
    "tests/test_lab11_object_stores.py": 37,
    "tests/test_labs.py[lab15_scale]": 35,
    "tests/test_lab02_log.py": 35,
    "tests/test_labs.py[lab02_log]": 35,
    "tests/test_lab12_engines.py": 33,
}


def scope_of(nodeid: str, file_scope: str) -> str:
    """The scope of a test: a lab's runs in tests/test_labs.py (its nodeid ends in ``[labNN_topic]``)
    get ``tests/test_labs.py[labNN_topic]``, files of ``SAME_WORKER_AS`` their lab's, the rest their file."""
    if file_scope == LABS_FILE and nodeid.endswith("]") and "[lab" in nodeid:
        return f"{LABS_FILE}[{nodeid.rsplit('[', 1)[1]}"
    return SAME_WORKER_AS.get(file_scope, file_scope)


def longest_first(workqueue: dict) -> OrderedDict:
    """The scopes of ``workqueue`` (xdist's, most tests first), the ones in SECONDS_PER_SCOPE first."""
    order = sorted(workqueue, key=lambda scope: -SECONDS_PER_SCOPE.get(scope, 0))  # stable: the rest keep xdist's order
    return OrderedDict((scope, workqueue[scope]) for scope in order)
