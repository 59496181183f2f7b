"""Executing the course notebooks in place, so that the committed outputs are a clean run's."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

KERNEL_NAME = "python3"
CELL_TIMEOUT_SECONDS = 1800


def execute_in_place(path: str | Path, work_root: str | Path | None = None) -> float:
    """Run a notebook top to bottom in a fresh kernel and save it with the new outputs.

    The run uses a temporary ``DELTALAB_WORKDIR`` (unless one is given), the notebook's own
    folder as working directory, and no per-cell timing metadata, so that re-running an
    unchanged notebook changes only what really changed. The file is written only if every
    cell succeeded. Returns the run time in seconds.
    """
    import nbformat
    from nbclient import NotebookClient

    notebook_path = Path(path).resolve()
    notebook = nbformat.read(notebook_path, as_version=4)
    temporary = None if work_root else tempfile.mkdtemp(prefix="deltalab-execute-")
    previous = os.environ.get("DELTALAB_WORKDIR")
    os.environ["DELTALAB_WORKDIR"] = str(work_root or temporary)
    started = time.monotonic()
    try:
        client = NotebookClient(
            notebook,
            kernel_name=KERNEL_NAME,
            timeout=CELL_TIMEOUT_SECONDS,
            record_timing=False,
            resources={"metadata": {"path": str(notebook_path.parent)}},
        )
        client.execute()
    finally:
        if previous is None:
            os.environ.pop("DELTALAB_WORKDIR", None)
        else:
            os.environ["DELTALAB_WORKDIR"] = previous
        if temporary:
            shutil.rmtree(temporary, ignore_errors=True)
    for cell in notebook.cells:
        cell.metadata.pop("execution", None)
    notebook.metadata["kernelspec"] = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": KERNEL_NAME}
    nbformat.write(notebook, notebook_path)
    return time.monotonic() - started
