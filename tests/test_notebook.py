"""Running a course notebook as a whole with papermill, as a course user can: notebook 00 with a
parameter, in a fresh kernel, and a misspelt parameter named by the notebook's own check
(deltalab.params.check_parameters, unit-tested in tests/test_params.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

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


def test_papermill_unknown_parameter_is_named_without_kernel_noise(tmp_path):
    """The papermill command, as a course user types it: the notebook's own message, and none of
    ipykernel's warnings (the venv's etc/ipython/ipython_kernel_config.json, which make setup puts)."""
    done = subprocess.run(
        [str(Path(sys.executable).with_name("papermill")), "-k", "python3", "--no-progress-bar",
         "00_hello_delta.ipynb", str(tmp_path / "out.ipynb"), "-p", "rowz", "37"],
        cwd=REPO / "notebooks", capture_output=True, text=True, timeout=300)
    assert done.returncode != 0 and "Unknown notebook parameter rowz" in done.stderr, done.stderr[-2000:]
    for noise in ("without encryption", "KeyboardInterrupt caught"):
        assert noise not in done.stderr + done.stdout, f"papermill printed ipykernel's {noise!r}:\n{done.stderr[:1500]}"
