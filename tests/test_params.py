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
