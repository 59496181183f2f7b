"""Running a course notebook top to bottom in a fresh kernel: the one place that executes one.

``python -m deltalab execute`` (``make outputs``) runs notebooks through :func:`execute_in_place`,
so that the committed outputs are a clean run's; ``python -m deltalab bench`` times them through
:func:`run_notebook`. Both runs are alike: a fresh ``python3`` kernel, the notebook's own folder
as working directory, and a temporary work root of their own.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from nbformat import NotebookNode

KERNEL_NAME = "python3"
CELL_TIMEOUT_SECONDS = 1800
# tests/nbval_sanitize.cfg replaces paths under work roots named like this ("temporary work
# roots"): a notebook that prints a path keeps the same stored output from run to run.
WORK_ROOT_PREFIX = "deltalab-execute-"


@contextmanager
def _work_root(given: str | Path | None) -> Iterator[Path]:
    """Set ``DELTALAB_WORKDIR`` for the kernels started inside, and put it back afterwards.

    Without a given root, a temporary one is made and deleted afterwards, so that a run starts
    from no tables and leaves none behind. Kernels inherit this process's environment.
    """
    previous = os.environ.get("DELTALAB_WORKDIR")
    with ExitStack() as temporary:
        root = Path(given) if given else Path(temporary.enter_context(
            tempfile.TemporaryDirectory(prefix=WORK_ROOT_PREFIX, ignore_cleanup_errors=True)))
        os.environ["DELTALAB_WORKDIR"] = str(root)
        try:
            yield root
        finally:
            if previous is None:
                os.environ.pop("DELTALAB_WORKDIR", None)
            else:
                os.environ["DELTALAB_WORKDIR"] = previous


def run_notebook(
    path: str | Path, work_root: str | Path | None = None, record_timing: bool = False
) -> tuple[NotebookNode, float]:
    """Execute a notebook top to bottom in a fresh kernel; return it with its new outputs, and
    the seconds the run took (kernel start included).

    The kernel works in the notebook's own folder and writes its tables under ``work_root``, by
    default a temporary one deleted afterwards. ``record_timing`` stores each cell's start and end
    in its ``metadata.execution`` (what ``bench`` reports); leave it off for outputs that are
    committed. The file itself is not written. A failing cell raises nbclient's
    ``CellExecutionError``.
    """
    import nbformat
    from nbclient import NotebookClient

    notebook_path = Path(path).resolve()
    notebook = nbformat.read(notebook_path, as_version=4)
    with _work_root(work_root):
        started = time.perf_counter()
        NotebookClient(
            notebook,
            kernel_name=KERNEL_NAME,
            timeout=CELL_TIMEOUT_SECONDS,
            record_timing=record_timing,
            resources={"metadata": {"path": str(notebook_path.parent)}},
        ).execute()
        seconds = time.perf_counter() - started
    return notebook, seconds


def execute_in_place(path: str | Path, work_root: str | Path | None = None) -> float:
    """Run a notebook top to bottom in a fresh kernel and save it with the new outputs.

    The run (:func:`run_notebook`) stores no per-cell timing, and timings left from an earlier
    run in JupyterLab are dropped, so that re-running an unchanged notebook changes only what
    really changed. The file is written only if every cell succeeded. Returns the run time in
    seconds.
    """
    import nbformat

    notebook, seconds = run_notebook(path, work_root)
    for cell in notebook.cells:
        cell.metadata.pop("execution", None)
    notebook.metadata["kernelspec"] = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": KERNEL_NAME}
    nbformat.write(notebook, Path(path).resolve())
    return seconds
