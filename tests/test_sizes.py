"""The notebooks at other sizes: each runs with papermill at the smallest parameters its parameters
cell accepts and at larger ones, and its asserts must hold at both, as they do at the defaults.

A notebook's claims are about Delta, not about its default sizes: "one file per partition value",
"the lookup opens one file" must stay true with one row or with a hundred thousand. These runs
found asserts written for the defaults (an id past a small table's end, a count of 4 written for
51 states, an empty partition's file). They are marked ``sizes`` and left out of ``make test`` and
CI (about a minute or two each): ``make test-sizes`` runs them all, ``PYTEST_ARGS='-k 07'`` one
notebook. A notebook added to notebooks/ needs its row here (a test says so).
"""

from __future__ import annotations

import os

import pytest

from course_testing import REPO, run_with_papermill

#: Per notebook: the smallest parameters its check_parameters and parameter_rule calls accept, and
#: larger ones (a few times the defaults, within a few minutes).
SIZES: dict[str, dict[str, dict[str, int]]] = {
    "00_hello_delta": {"smallest": {"rows": 2}, "larger": {"rows": 100_000}},
    "00b_the_course_session": {"smallest": {"rows": 1}, "larger": {"rows": 1000}},
    "01_parquet_files": {"smallest": {"rows": 10}, "larger": {"rows": 100_000}},
    "02_the_transaction_log": {"smallest": {"rows": 2, "writer_partitions": 2},
                               "larger": {"rows": 10_000, "writer_partitions": 8}},
    "03_checkpoints": {"smallest": {"commits": 2, "measure_every": 1, "repeats": 1},
                       "larger": {"commits": 40, "measure_every": 10, "repeats": 3}},
    "04_time_travel_and_vacuum": {"smallest": {"rows": 6}, "larger": {"rows": 10_000}},
    "05_optimistic_concurrency": {"smallest": {"writers_threads": 2, "writers_processes": 1, "rows_per_writer": 1},
                                  "larger": {"writers_threads": 6, "writers_processes": 3, "rows_per_writer": 10_000}},
    "06_schema_enforcement_and_evolution": {"smallest": {"states": 2}, "larger": {"states": 51, "seed": 3}},
    "07_data_skipping": {"smallest": {"num_files": 4, "rows_per_file": 200, "wide_columns": 33, "lookups": 1,
                                      "many_partitions": 50},
                         "larger": {"num_files": 12, "rows_per_file": 1000, "many_partitions": 120, "lookups": 20}},
    # 08's notes assert the article's numbers (0.82 for two Z-order columns, ...), which need its 100 files of
    # 1000 rows and 50 lookups per column: those are its smallest sizes, and its defaults.
    "08_zorder_benchmark": {"smallest": {"num_files": 100, "rows_per_file": 1000, "lookups_per_column": 50},
                            "larger": {"num_files": 150, "rows_per_file": 2000, "lookups_per_column": 80}},
    "09_streaming": {"smallest": {"batches": 2, "rows_per_batch": 1}, "larger": {"batches": 8, "rows_per_batch": 200}},
    "09b_streaming_case_studies": {"smallest": {"log_objects": 2, "batches": 2, "urls": 2, "dumps": 2},
                                   "larger": {"log_objects": 12, "batches": 6, "urls": 20, "dumps": 12}},
    "10_medallion_pipeline": {"smallest": {"rows": 4, "files": 2, "changed": 1},
                              "larger": {"rows": 100_000, "files": 16, "changed": 40}},
    "10b_table_maintenance": {"smallest": {"rows_per_write": 6, "files_per_write": 3, "parts": 2},
                              "larger": {"rows_per_write": 1000, "files_per_write": 8, "parts": 12}},
    "11_object_stores": {"smallest": {"rows_first": 1, "rows_writer_1": 2, "rows_writer_2": 3, "commits_timed": 2,
                                      "commits_after_checkpoint": 1},
                         "larger": {"rows_first": 300, "rows_writer_1": 400, "rows_writer_2": 500, "commits_timed": 8,
                                    "commits_after_checkpoint": 5}},
    "12_other_engines": {"smallest": {"rows": 20}, "larger": {"rows": 5000, "seed": 1}},
    "13_liquid_clustering": {"smallest": {"num_files": 64, "rows_per_file": 200, "lookups_per_column": 20,
                                          "events_rows": 8000, "events_files": 4},
                             "larger": {"num_files": 150, "rows_per_file": 2000, "lookups_per_column": 80,
                                        "events_rows": 200_000, "events_files": 16, "seed": 1}},
    "14_table_features": {"smallest": {"rows": 20}, "larger": {"rows": 2000, "seed": 1}},
    "15_the_log_at_scale": {"smallest": {"files": 2000, "commits": 1, "parts": 2, "small_commits": 6,
                                         "listed_objects": 100, "latency_ms": 0},
                            "larger": {"files": 120_000, "commits": 19, "parts": 6, "small_commits": 20,
                                       "listed_objects": 4000, "latency_ms": 50, "seed": 1}},
}


def notebook_names() -> list[str]:
    return sorted(path.stem for path in (REPO / "notebooks").glob("*.ipynb"))


def test_every_notebook_has_its_sizes():
    """Not marked: make test says when a notebook has no row in SIZES."""
    assert sorted(SIZES) == notebook_names(), "add the new notebook's smallest and larger parameters to SIZES"
    assert all(sorted(sizes) == ["larger", "smallest"] for sizes in SIZES.values())


@pytest.mark.sizes
@pytest.mark.parametrize("name, size", [(name, size) for name in sorted(SIZES) for size in ("smallest", "larger")])
def test_a_notebook_holds_at_other_sizes(name, size, tmp_path):
    run_with_papermill(name, tmp_path, dict(os.environ, DELTALAB_WORKDIR=str(tmp_path / "work")), SIZES[name][size])
