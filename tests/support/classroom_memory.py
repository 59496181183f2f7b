"""Memory per student, measured (issue 39's benchmark; a figure, never a test's threshold).

Starts a classroom with one student, runs a notebook in the student's server over the kernel's
websocket as JupyterLab would, samples the server's process tree (JupyterLab, the kernel, its
Spark driver and any driver the notebook starts) every half second, and prints the peak and the
memory once the kernel is shut down. Run from the repository root, one notebook at a time, with
nothing else running on the machine:

    .venv/bin/python tests/support/classroom_memory.py notebooks/02_the_transaction_log.ipynb
    DELTALAB_DRIVER_MEMORY=2g .venv/bin/python tests/support/classroom_memory.py notebooks/02_the_transaction_log.ipynb

The first line measures the classroom's default driver heap (``CLASSROOM_DRIVER_MEMORY``, 1g); the
classroom passes ``DELTALAB_DRIVER_MEMORY`` on to the servers, so the second measures a class whose
drivers have the course's own default, 2g.
"""

from __future__ import annotations

import os
import secrets
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from classroom_testing import peak_memory, run_notebook, start_server, user_token
from deltalab.classroom import CLASSROOM_DRIVER_MEMORY, start_classroom
from process_testing import TreeMemory, tree_memory


def measure(notebook: str) -> tuple[TreeMemory, TreeMemory, float]:
    """Peak and idle memory of one student's server tree while ``notebook`` runs, and its seconds."""
    with tempfile.TemporaryDirectory(prefix="deltalab-classroom-memory-") as root:
        room = start_classroom(["ada"], root=Path(root), password=secrets.token_urlsafe(9))
        try:
            server = (start_server(room, "ada"), user_token(room, "ada"))
            pid = room.api("GET", "users/ada")["servers"][""]["state"]["pid"]
            started = time.monotonic()
            with ThreadPoolExecutor(1) as pool:
                run = pool.submit(run_notebook, *server, notebook)
                peak = peak_memory({"ada": pid}, [run])["ada"]
                errors = run.result()
            seconds = time.monotonic() - started
            if errors:
                raise SystemExit(f"{notebook} failed in the student's server: {errors}")
            return peak, tree_memory(pid), seconds
        finally:
            room.stop()


def main(argv: list[str]) -> None:
    notebook = argv[1] if len(argv) > 1 else "notebooks/02_the_transaction_log.ipynb"
    peak, idle, seconds = measure(notebook)
    heap = os.environ.get("DELTALAB_DRIVER_MEMORY") or f"{CLASSROOM_DRIVER_MEMORY} (the classroom's default)"
    print(f"{notebook} in one student's server, driver heap {heap}: {seconds:.0f} s; at most "
          f"{peak.proportional / 2**20:,.0f} MiB proportional ({peak.resident / 2**20:,.0f} MiB resident, "
          f"{peak.processes} processes); idle after, {idle.proportional / 2**20:,.0f} MiB")


if __name__ == "__main__":
    main(sys.argv)
