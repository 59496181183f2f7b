"""Running a course notebook as a whole with papermill, as a course user can: notebook 00 with a
parameter, in a fresh kernel, and a misspelt parameter named by the notebook's own check
(deltalab.params.check_parameters, unit-tested in tests/test_params.py)."""

from __future__ import annotations

import pytest

from course_testing import REPO


def test_papermill_runs_hello_delta_with_parameters(tmp_path):
    import papermill

    output = tmp_path / "out.ipynb"
    papermill.execute_notebook(
        str(REPO / "notebooks" / "00_hello_delta.ipynb"), str(output),
        parameters={"rows": 37}, kernel_name="python3", cwd=str(REPO / "notebooks"), progress_bar=False,
    )
    text = output.read_text()
    assert "Read back 37 rows." in text
    assert "The log says the table has 37 rows" in text


def test_papermill_unknown_parameter_is_named(tmp_path):
    import papermill

    with pytest.raises(papermill.PapermillExecutionError) as error:
        papermill.execute_notebook(
            str(REPO / "notebooks" / "00_hello_delta.ipynb"), str(tmp_path / "out.ipynb"),
            parameters={"rowz": 37}, kernel_name="python3", cwd=str(REPO / "notebooks"), progress_bar=False,
        )
    assert "Unknown notebook parameter rowz" in str(error.value)
