"""Every course notebook follows the course's conventions; nbval then executes each one.

The rules (src/deltalab/README.md, "Notebooks"), one test each:

1. one way to read a Delta table, ``read_table``: a line with Spark's own reader carries ``# Spark's own reader``;
2. what ``deltalab`` exports is imported from ``deltalab``, anything else from its module;
3. no function or class is defined in two notebooks;
4. the setup cell names the session and the work directory after the notebook's file;
5. every ``notebooks/*.ipynb`` is checked, and one with a name outside the pattern fails;
6. what nbval does not compare is still checked: a cell tagged ``nbval-ignore-output`` (its output depends on
   load or timing) asserts what it shows, no cell is skipped, no compared output shows a duration, and the tag
   is the one way to say so (no ``# NBVAL_...`` comments, which nbval reads only when spelled exactly).
"""

from __future__ import annotations

import ast
import base64
import importlib.util
import io
import pkgutil
import re
import tokenize
from collections import defaultdict
from functools import cache
from pathlib import Path

import nbformat
import pytest

import deltalab
from course_testing import artifacts, ink

REPO = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((REPO / "notebooks").glob("*.ipynb"))
NOTEBOOK_NAME = re.compile(r"^\d\d[a-z]?_[a-z0-9_]+\.ipynb$")
ABSOLUTE_PATH = re.compile(r"""["'](/|[A-Za-z]:\\)[A-Za-z_][\w.-]*[/\\]""")
# Spark's reader of a Delta table written by hand: .read.format("delta") (any case) or .read.load(
SPARK_READER = re.compile(r"""\.read\s*\.\s*(format\(\s*(["'])(?i:delta)\2\s*\)|load\()""")
SPARK_READER_MARK = "# Spark's own reader"
EXPORTED = frozenset(deltalab.__all__)
SUBMODULES = frozenset(module.name for module in pkgutil.iter_modules(deltalab.__path__))


def _source(cell) -> str:
    return cell.source if isinstance(cell.source, str) else "".join(cell.source)


@cache
def _notebook(path: Path):
    return nbformat.read(path, as_version=4)


def _code_cells(path: Path) -> list[tuple[int, str]]:
    """(index among the notebook's cells, source) of each code cell."""
    return [(index, _source(cell)) for index, cell in enumerate(_notebook(path).cells) if cell.cell_type == "code"]


def _tree(path: Path, index: int, source: str) -> ast.Module:
    try:
        return ast.parse(source, filename=f"{path.name} cell {index}")
    except SyntaxError as error:
        pytest.fail(f"{path.name} cell {index} is not Python: {error}")


def _setup_cell(path: Path) -> tuple[int, str]:
    """The code cell after the one tagged `parameters`."""
    code = [(index, cell) for index, cell in enumerate(_notebook(path).cells) if cell.cell_type == "code"]
    tagged = [position for position, (_, cell) in enumerate(code) if "parameters" in cell.metadata.get("tags", [])]
    assert len(tagged) == 1, "exactly one code cell tagged `parameters`"
    assert tagged[0] + 1 < len(code), "a code cell follows the `parameters` cell"
    index, cell = code[tagged[0] + 1]
    return index, _source(cell)


def _comments(source: str) -> dict[int, str]:
    """The comment of each line of `source` that has one, by line number (1-based)."""
    comments = {}
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            comments[token.start[0]] = token.string
    return comments


def _spark_reader_lines(source: str) -> list[int]:
    return [number for number, line in enumerate(source.splitlines(), 1) if SPARK_READER.search(line)]


def _called_name(node: ast.Call) -> str | None:
    func = node.func
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None


def test_there_are_notebooks():
    assert NOTEBOOKS, "no notebooks found under notebooks/"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_name(path: Path):
    assert NOTEBOOK_NAME.match(path.name), (
        f"{path.name}: a notebook is named NN_topic.ipynb or NNx_topic.ipynb (two digits, an optional lower-case "
        "letter, then lower-case letters, digits and underscores), so that the course's checks and its order see it")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_conventions(path: Path):
    notebook = _notebook(path)
    cells = notebook.cells
    code = [cell for cell in cells if cell.cell_type == "code"]
    assert notebook.metadata.get("kernelspec", {}).get("name") == "python3", "kernel must be python3"
    assert cells[0].cell_type == "markdown" and "What you will learn" in _source(cells[0]), "open with what you will learn"
    _, after = _setup_cell(path)
    assert re.search(r"check_parameters\(\s*globals\(\)", after), "the cell after `parameters` checks them"
    assert "get_spark(" in after and "workdir(" in after, "sessions and work dirs come from deltalab"
    assert any("Recap" in _source(cell) for cell in cells if cell.cell_type == "markdown"), "end with a recap"
    assert "show_versions(spark)" in _source(code[-1]), "the last cell prints the versions it was checked with"
    assert any(cell.get("outputs") for cell in code), f"stored without outputs; run `make outputs NB={path.relative_to(REPO)}`"
    for index, cell in enumerate(code):
        assert not ABSOLUTE_PATH.search(_source(cell)), f"cell {index} types an absolute path; use workdir()"
        errors = [output for output in cell.get("outputs", []) if output.output_type == "error"]
        assert not errors, f"cell {index} is stored with an error output"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_one_way_to_read_a_delta_table(path: Path):
    """Rule 1: tables are read with read_table(...); Spark's reader by hand only where it is the lesson, and marked."""
    unmarked = []
    for index, source in _code_cells(path):
        lines = _spark_reader_lines(source)
        if not lines:
            continue
        comments = _comments(source)
        unmarked += [f"cell {index} line {number}: {source.splitlines()[number - 1].strip()}"
                     for number in lines if not comments.get(number, "").startswith(SPARK_READER_MARK)]
    assert not unmarked, (
        f"{path.name} reads a Delta table with Spark's reader by hand; read it with deltalab's read_table(path, "
        f"version=..., timestamp=..., **options), or, where Spark's reader is the lesson, end the line with a comment "
        f"that starts with `{SPARK_READER_MARK}` (`{SPARK_READER_MARK}: why`): " + "; ".join(unmarked))


def test_spark_reader_comes_before_read_table():
    """Rule 1: the first notebook that reads a Delta table shows Spark's own reader before any read_table call."""
    for path in NOTEBOOKS:
        reads = []
        for index, source in _code_cells(path):
            reads += [(index, number, "Spark's own reader") for number in _spark_reader_lines(source)]
            reads += [(index, node.lineno, "read_table") for node in ast.walk(_tree(path, index, source))
                      if isinstance(node, ast.Call) and _called_name(node) == "read_table"]
        if reads:
            index, number, kind = min(reads)
            assert kind == "Spark's own reader", (
                f"{path.name} is the first notebook that reads a Delta table, with read_table (cell {index} line "
                f"{number}); show Spark's own reader first, marked `{SPARK_READER_MARK}: ...`")
            return
    pytest.fail("no notebook reads a Delta table")


def _defined_names(module: str) -> set[str] | None:
    """The top-level names module `module` defines (and, for a package, its submodules), or None if absent."""
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        return None
    names = {module.name for module in pkgutil.iter_modules(spec.submodule_search_locations or [])}
    for node in ast.parse(Path(spec.origin).read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {name.id for target in targets for name in ast.walk(target) if isinstance(name, ast.Name)}
    return names


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_imports_from_deltalab(path: Path):
    """Rule 2: `from deltalab import X` for what deltalab exports (or a module), `from deltalab.m import Y` else."""
    wrong = []
    for index, source in _code_cells(path):
        for node in ast.walk(_tree(path, index, source)):
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            where = f"cell {index} line {node.lineno}"
            if isinstance(node, ast.Import):
                wrong += [f"{where}: `import {alias.name}`; write `from deltalab import ...`" for alias in node.names
                          if alias.name == "deltalab" or alias.name.startswith("deltalab.")]
            elif node.level == 0 and node.module == "deltalab":
                wrong += [f"{where}: deltalab exports no `{alias.name}`; import it from its module"
                          for alias in node.names if alias.name not in EXPORTED | SUBMODULES]
            elif node.level == 0 and (node.module or "").startswith("deltalab."):
                defined = _defined_names(node.module)
                for alias in node.names:
                    if alias.name in EXPORTED:
                        wrong.append(f"{where}: `{alias.name}` is exported; write `from deltalab import {alias.name}`")
                    elif defined is None:
                        wrong.append(f"{where}: there is no module {node.module}")
                    elif alias.name not in defined:
                        wrong.append(f"{where}: {node.module} does not define `{alias.name}`; "
                                     "import it from the module that does")
    assert not wrong, f"{path.name}: " + "; ".join(wrong)


def test_no_helper_defined_in_two_notebooks():
    """Rule 3: a function or class is defined (at any depth) in one notebook only; a shared need goes into deltalab."""
    where = defaultdict(set)
    for path in NOTEBOOKS:
        for index, source in _code_cells(path):
            for node in ast.walk(_tree(path, index, source)):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) \
                        and not (node.name.startswith("__") and node.name.endswith("__")):
                    where[node.name].add(path.stem)
    twice = {name: sorted(stems) for name, stems in sorted(where.items()) if len(stems) > 1}
    assert not twice, ("defined in more than one notebook (rename one, or move the shared helper into deltalab): "
                       + "; ".join(f"{name} in {', '.join(stems)}" for name, stems in twice.items()))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_setup_cell_is_named_after_the_notebook(path: Path):
    """Rule 4: the cell after `parameters` calls get_spark("<file stem>") and workdir("<file stem>")."""
    index, source = _setup_cell(path)
    calls = defaultdict(list)
    for node in ast.walk(_tree(path, index, source)):
        if isinstance(node, ast.Call) and _called_name(node) in ("get_spark", "workdir"):
            first = node.args[0] if node.args else node
            calls[_called_name(node)].append(first.value if isinstance(first, ast.Constant) else ast.unparse(first))
    for name in ("get_spark", "workdir"):
        assert calls[name], f"{path.name}: the cell after `parameters` calls no {name}(\"{path.stem}\")"
        assert all(argument == path.stem for argument in calls[name]), \
            f"{path.name}: {name} is called with {calls[name]}; name it after the file: {name}(\"{path.stem}\")"


def test_index_lists_every_notebook():
    index = (REPO / "notebooks" / "README.md").read_text()
    for path in NOTEBOOKS:
        assert f"({path.name})" in index, f"notebooks/README.md does not link {path.name}"


#: nbval's cell tags that take a cell's output out of the comparison, or the cell out of the run.
IGNORE_OUTPUT = "nbval-ignore-output"
NOT_RUN = ("nbval-skip", "skip-execution")
#: nbval's comment markers (``# NBVAL_IGNORE_OUTPUT``): the tag is the course's one way; a comment with anything
#: after the marker's name is not read by nbval at all.
NBVAL_COMMENT = re.compile(r"^\s*#+\s*(NBVAL_|PYTEST_VALIDATE_)", re.MULTILINE)
#: A duration in an output: "1.2 s", "35 ms", "3 seconds", "0:00:04" (machine time, never the same twice).
DURATION = re.compile(r"\b\d+(\.\d+)? ?(s|ms|µs|seconds?|milliseconds?)\b|\b\d+:\d\d:\d\d\.\d+")


def _compared_text(cell) -> str:
    """The text nbval compares of a stored code cell: streams, text/plain and text/html of its outputs."""
    parts = []
    for output in cell.get("outputs", []):
        if output.get("output_type") == "stream":
            parts.append(output.get("text", ""))
        for mime in ("text/plain", "text/html"):
            value = output.get("data", {}).get(mime)
            if value:
                parts.append(value if isinstance(value, str) else "".join(value))
    return "".join(parts)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_what_nbval_does_not_compare_is_asserted(path: Path):
    """Rule 6: an output that depends on load is kept out of nbval's comparison and asserted in code instead.

    A cell tagged ``nbval-ignore-output`` (the course's one way: no ``# NBVAL_`` comment) must assert its claims (nbval will not notice if they change); no
    cell is left out of the run; and the outputs nbval compares show no duration, which a busy machine changes
    (a timing belongs in a tagged cell, asserted as a comparison measured in the same run)."""
    problems = []
    for index, cell in enumerate(_notebook(path).cells):
        if cell.cell_type != "code":
            continue
        tags = cell.metadata.get("tags", [])
        if NBVAL_COMMENT.search(_source(cell)):
            problems.append(f"cell {index} has an nbval comment marker: tag the cell {IGNORE_OUTPUT} instead "
                            "(nbval reads a marker only when spelled exactly; a tag cannot be misspelled unnoticed)")
        skipped = [tag for tag in NOT_RUN if tag in tags]
        if skipped:
            problems.append(f"cell {index} is tagged {skipped[0]}: every cell runs under nbval")
        if IGNORE_OUTPUT in tags:
            tree = _tree(path, index, _source(cell))
            if not any(isinstance(node, ast.Assert) for node in ast.walk(tree)):
                problems.append(f"cell {index} is tagged {IGNORE_OUTPUT} but asserts nothing: assert what it shows")
        else:
            match = DURATION.search(_compared_text(cell))
            if match:
                problems.append(f"cell {index} shows a duration ({match.group(0)!r}) in an output nbval compares: "
                                f"print it in a cell tagged {IGNORE_OUTPUT} that asserts the claim as a comparison")
    assert not problems, f"{path.name}: " + "; ".join(problems)


#: The notebooks that draw no matplotlib figure: the list may only shrink. A notebook that gains a figure must leave
#: it, and every other notebook keeps at least one figure among its committed outputs. 00b is the appendix on what
#: get_spark() configures (jars, settings, versions): no table mechanism to draw, and a chart of settings would be
#: decoration.
WITHOUT_A_FIGURE = frozenset({"00b_the_course_session"})


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_notebook_not_listed_draws_a_figure(path: Path):
    notebook = nbformat.read(str(path), as_version=4)
    figures = sum("image/png" in output.get("data", {}) for cell in notebook.cells if cell.cell_type == "code"
                  for output in cell.get("outputs", []))
    if path.stem in WITHOUT_A_FIGURE:
        assert not figures, f"{path.name} draws a figure now: take it off WITHOUT_A_FIGURE"
    else:
        assert figures, f"{path.name} lost its figure (a matplotlib figure drawn from the real table, shown in its outputs)"
        # Each committed figure as a file beside the browser test's screenshots (.artifacts/figures/), not blank.
        pngs = [output["data"]["image/png"] for cell in notebook.cells if cell.cell_type == "code"
                for output in cell.get("outputs", []) if "image/png" in output.get("data", {})]
        folder = artifacts() / "figures"
        folder.mkdir(exist_ok=True)
        for number, png in enumerate(pngs, 1):
            saved = folder / f"{path.stem}-{number}.png"
            saved.write_bytes(base64.b64decode("".join(png) if isinstance(png, list) else png))
            share, colours = ink(saved)
            assert share > 0.02 and colours > 20, f"{path.name}'s figure {number} looks blank ({saved}: {share:.1%} ink)"


def test_the_suites_order_names_files_that_exist():
    """tests/conftest.py orders the files by their measured seconds: a renamed file would drop to the end."""
    from conftest import SECONDS_PER_FILE

    missing = [name for name in SECONDS_PER_FILE if not (REPO / name).is_file()]
    assert not missing, f"tests/conftest.py's SECONDS_PER_FILE names files that do not exist: {missing}"
