"""The files in data/: each reproducible from its script, and holding what the notebooks rely on.

How notebooks find them (deltalab.locations.dataset_path) is tested in tests/test_locations.py.
"""

from __future__ import annotations

import csv
import runpy
import subprocess
import sys

import pytest

from course_testing import REPO


@pytest.mark.parametrize("script, dataset", [("make_loans.py", "loans_by_state.csv"),
                                             ("make_s3_access_logs.py", "s3_access_logs.log")])
def test_a_dataset_is_what_its_script_writes(tmp_path, script, dataset):
    """The committed file is exactly the script's output for its default seed (data/README.md)."""
    out = tmp_path / dataset
    subprocess.run([sys.executable, str(REPO / "data" / script), "--output", str(out)], check=True, capture_output=True)
    assert out.read_bytes() == (REPO / "data" / dataset).read_bytes(), (
        f"data/{dataset} is out of date: run `python data/{script}` and commit the result"
    )


def test_loans_by_state_has_one_row_per_state():
    script = runpy.run_path(str(REPO / "data" / "make_loans.py"))
    with (REPO / "data" / "loans_by_state.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert [r["addr_state"] for r in rows] == list(script["STATES"]) and len(rows) == 51
    assert all(50 <= int(r["count"]) <= 50_000 for r in rows)
    assert script["loans_by_state"](7) != script["loans_by_state"](2019), "the seed matters"


def test_s3_access_log_lines_have_the_formats_fields_in_order_of_time():
    """26 fields per line (the quoted request, referrer and user agent counted as one each), times ascending."""
    import re
    from datetime import datetime

    lines = (REPO / "data" / "s3_access_logs.log").read_text().splitlines()
    field = re.compile(r'"[^"]*"|\[[^\]]*\]|\S+')
    assert len(lines) == 300 and all(len(field.findall(line)) == 26 for line in lines)
    times = [datetime.strptime(field.findall(line)[2][1:-1], "%d/%b/%Y:%H:%M:%S %z") for line in lines]
    assert times == sorted(times) and len({t.date() for t in times}) == 3


def test_s3_access_log_keys_name_a_dataset_and_the_day_their_object_was_written():
    """Notebook 09b asks which datasets are read and how old the data read is: keys start with dataset/yyyy/mm/dd,
    a PUT writes the request's day, and the reads touch both that day's data and older data."""
    from datetime import datetime

    ages = {"REST.PUT.OBJECT": set(), "REST.GET.OBJECT": set()}
    for line in (REPO / "data" / "s3_access_logs.log").read_text().splitlines():
        fields = line.split(" ")
        if fields[7] in ages:
            dataset, year, month, day, _ = fields[8].split("/")
            assert dataset in {"images", "videos", "daily", "weekly", "web", "app"}
            requested = datetime.strptime(fields[2][1:12], "%d/%b/%Y").date()
            ages[fields[7]].add((requested - datetime(int(year), int(month), int(day)).date()).days)
    assert ages["REST.PUT.OBJECT"] == {0} and 0 in ages["REST.GET.OBJECT"] and max(ages["REST.GET.OBJECT"]) > 1


def test_customer_changes_are_what_their_script_writes(tmp_path):
    """The three committed batches are exactly the script's output for its default seed (data/README.md)."""
    subprocess.run([sys.executable, str(REPO / "data" / "make_customer_changes.py"), "--output", str(tmp_path)], check=True,
                   capture_output=True)
    for batch in range(3):
        name = f"customer_changes_{batch}.jsonl"
        assert (tmp_path / name).read_bytes() == (REPO / "data" / name).read_bytes(), (
            f"data/{name} is out of date: run `python data/make_customer_changes.py` and commit the result"
        )


def test_customer_changes_hold_the_problems_notebook_10_handles():
    import json

    batches = [(REPO / "data" / f"customer_changes_{n}.jsonl").read_text().splitlines() for n in range(3)]
    assert [len(lines) for lines in batches] == [14, 11, 9]
    assert len(set(batches[0])) == len(batches[0]) - 1, "batch 0 sends one line twice"
    assert batches[1][0] in batches[2], "batch 2 sends a line of batch 1 again"
    late, applied = json.loads(batches[2][0]), [json.loads(line) for line in batches[1] if json.loads(line)["customer_id"] == 3]
    assert late["customer_id"] == 3 and all(late["updated_at"] < change["updated_at"] for change in applied), "a late update"
    deleted = next(c for c in map(json.loads, batches[1]) if c["op"] == "delete")
    assert any(c["customer_id"] == deleted["customer_id"] and c["op"] == "update" and c["updated_at"] < deleted["updated_at"]
               for c in map(json.loads, batches[2])), "a late update of a customer batch 1 deleted, older than the delete"
    assert any(c["op"] == "delete" and any(u["customer_id"] == c["customer_id"] and u["op"] == "update"
                                           and u["updated_at"] > c["updated_at"] for u in map(json.loads, batches[1]))
               for c in map(json.loads, batches[2])), "a late delete of a customer batch 1 updated, older than the update"
