"""Every course notebook follows the course's conventions; nbval then executes each one."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

REPO = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((REPO / "notebooks").glob("[0-9][0-9]_*.ipynb"))
ABSOLUTE_PATH = re.compile(r"""["'](/|[A-Za-z]:\\)[A-Za-z_][\w.-]*[/\\]""")


def _source(cell) -> str:
    return cell.source if isinstance(cell.source, str) else "".join(cell.source)


def test_there_are_notebooks():
    assert NOTEBOOKS, "no notebooks found under notebooks/"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_conventions(path: Path):
    notebook = nbformat.read(path, as_version=4)
    cells = notebook.cells
    code = [cell for cell in cells if cell.cell_type == "code"]
    assert notebook.metadata.get("kernelspec", {}).get("name") == "python3", "kernel must be python3"
    assert cells[0].cell_type == "markdown" and "What you will learn" in _source(cells[0]), "open with what you will learn"
    tagged = [cell for cell in code if "parameters" in cell.metadata.get("tags", [])]
    assert len(tagged) == 1, "exactly one code cell tagged `parameters`"
    after = code[code.index(tagged[0]) + 1]
    assert re.search(r"check_parameters\(\s*globals\(\)", _source(after)), "the cell after `parameters` checks them"
    assert "get_spark(" in _source(after) and "workdir(" in _source(after), "sessions and work dirs come from deltalab"
    assert any("Recap" in _source(cell) for cell in cells if cell.cell_type == "markdown"), "end with a recap"
    assert "show_versions(spark)" in _source(code[-1]), "the last cell prints the versions it was checked with"
    assert any(cell.get("outputs") for cell in code), f"stored without outputs; run `make outputs NB={path.relative_to(REPO)}`"
    for index, cell in enumerate(code):
        assert not ABSOLUTE_PATH.search(_source(cell)), f"cell {index} types an absolute path; use workdir()"
        errors = [output for output in cell.get("outputs", []) if output.output_type == "error"]
        assert not errors, f"cell {index} is stored with an error output"


def test_index_lists_every_notebook():
    index = (REPO / "notebooks" / "README.md").read_text()
    for path in NOTEBOOKS:
        assert f"({path.name})" in index, f"notebooks/README.md does not link {path.name}"
