"""deltalab.params: checking papermill parameters (a papermill run with a misspelt one is in
tests/test_notebook.py)."""

from __future__ import annotations

import pytest

from deltalab.errors import DeltaLabError
from deltalab.params import check_parameters, injected_parameter_names


def test_injected_names_from_history():
    history = ["rows = 10", "# Parameters\nrows = 37\nseed = 1\n", "print(rows)"]
    assert injected_parameter_names(history) == {"rows", "seed"}
    assert injected_parameter_names(["rows = 10"]) == set()


def test_unknown_parameter_is_named():
    namespace = {"In": ["", "rows = 10", "# Parameters\nrowz = 37\n"], "rows": 10, "rowz": 37}
    with pytest.raises(DeltaLabError, match=r"Unknown notebook parameter rowz: this notebook takes rows \(int\)"):
        check_parameters(namespace, rows=int)


@pytest.mark.parametrize("value", ["37", 3.5, True, -1])
def test_wrong_parameter_values(value):
    with pytest.raises(DeltaLabError, match="The parameter rows must be"):
        check_parameters({"rows": value}, rows=int)


def test_good_parameters_pass():
    check_parameters({"In": ["# Parameters\nrows = 37\n"], "rows": 37, "ratio": 1}, rows=int, ratio=float)


@pytest.mark.parametrize("value, bounds", [(0, "2 to 50"), (51, "2 to 50")])
def test_a_value_outside_the_range_names_the_range(value, bounds):
    with pytest.raises(DeltaLabError, match=rf"The parameter states is {value}, outside this notebook's range for it \({bounds}\)"):
        check_parameters({"states": value}, states=(int, 2, 50))


def test_a_negative_value_is_told_the_range_when_there_is_one():
    with pytest.raises(DeltaLabError, match=r"The parameter rows is -3, outside this notebook's range for it \(at least 2\)"):
        check_parameters({"rows": -3}, rows=(int, 2, None))


def test_open_ranges_and_their_description():
    check_parameters({"files": 10_000, "ratio": 0.5}, files=(int, 2, None), ratio=(float, None, 1.0))
    with pytest.raises(DeltaLabError, match=r"outside this notebook's range for it \(at least 2\)"):
        check_parameters({"files": 1}, files=(int, 2, None))
    namespace = {"In": ["# Parameters\nfile = 3\n"], "file": 3, "files": 8}
    with pytest.raises(DeltaLabError, match=r"this notebook takes files \(int, at least 2\)"):
        check_parameters(namespace, files=(int, 2, None))


def test_a_broken_rule_between_parameters_is_stated():
    from deltalab.params import parameter_rule

    parameter_rule(True, "rows >= files")
    with pytest.raises(DeltaLabError, match="The parameters break a rule of this notebook: rows >= files: every file gets rows."):
        parameter_rule(False, "rows >= files: every file gets rows")
