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


def test_a_kernel_of_the_course_says_when_a_figures_labels_overlap():
    """Every kernel of the venv watches its figures (ipython_kernel_config.json's exec_lines call
    deltalab.plots.watch_figure_labels): a figure whose tick labels run into each other gets
    OVERLAP_WARNING under it, naming them, when the inline backend draws it; a readable one gets nothing."""
    import nbformat
    from nbclient import NotebookClient

    from deltalab.plots import OVERLAP_WARNING

    notebook = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("import matplotlib.pyplot as plt\n"
                                  "fig, ax = plt.subplots(figsize=(3, 2))\n"
                                  "ax.bar(range(12), range(12))\n"
                                  "ax.set_xticks(range(12), [f'a long label {i}' for i in range(12)]);"),
        nbformat.v4.new_code_cell("fig, ax = plt.subplots(figsize=(6, 3))\n"
                                  "ax.bar(range(3), range(3))\n"
                                  "ax.set_xticks(range(3), ['one', 'two', 'three']);"),
    ])
    NotebookClient(notebook, timeout=120, kernel_name="python3").execute()
    said = ["".join(o.get("text", "")) for cell in notebook.cells for o in cell.outputs if o.output_type == "stream"]
    crowded, readable = ("".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream") for cell in notebook.cells)
    assert crowded.startswith(OVERLAP_WARNING) and "'a long label 0' and 'a long label 1'" in crowded, said
    assert crowded.count(OVERLAP_WARNING) == 1, "said once, though the inline backend draws the figure twice"
    assert all(o.output_type == "display_data" for o in notebook.cells[1].outputs) and not readable, said
    assert any("image/png" in o.get("data", {}) for o in notebook.cells[0].outputs), "the figure is still shown"
