"""pytest plugin (``-p nbval_kernel_start`` in pyproject.toml): start nbval's kernel again when it
exits before answering.

The parent process chooses a kernel's five ports (it binds each to port 0 and closes it) and the
kernel binds them a moment later. With two pytest-xdist workers running Spark side by side, another
process can take one of those ports in between (a py4j connection, a port Spark binds), and the
kernel exits at start: "Kernel died before replying to kernel_info", an error in every cell of the
notebook that has nothing to do with the notebook. jupyter_client's own restarter answers this by
starting the kernel again on new ports (``KernelRestarter.random_ports_until_alive``); this plugin
does the same for nbval, at most ``STARTS`` times, and prints what the kernel wrote to stderr before
it exited, so the reason is in the log. Any other failure to start is raised at once.
"""
from __future__ import annotations

import sys
import tempfile
from typing import Any

import nbval.kernel

STARTS = 3
DIED_AT_START = "died before replying to kernel_info"

_nbval_start_new_kernel = nbval.kernel.start_new_kernel


def start_new_kernel(startup_timeout: int = 60, kernel_name: str = "python", **kwargs: Any):
    """nbval's ``start_new_kernel``, with the kernel's stderr kept (nbval sends it to /dev/null)
    and up to ``STARTS`` starts when the kernel exits before it answers."""
    devnull = kwargs.pop("stderr", None)   # nbval's open /dev/null, replaced here
    if devnull is not None and hasattr(devnull, "close"):
        devnull.close()
    for start in range(1, STARTS + 1):
        # The kernel keeps writing to this (unlinked) file after it is closed here; it is gone
        # when the kernel exits (nbval's suites run kernels with quiet logs: a few kilobytes).
        with tempfile.TemporaryFile(mode="w+", errors="replace", prefix="nbval-kernel-stderr-") as stderr:
            kwargs["stderr"] = stderr
            try:
                return _nbval_start_new_kernel(startup_timeout=startup_timeout, kernel_name=kernel_name, **kwargs)
            except RuntimeError as error:
                if DIED_AT_START not in str(error) or start == STARTS:
                    raise
                stderr.seek(0)
                written = stderr.read()[-2000:].strip() or "(nothing)"
                print(f"nbval_kernel_start: the kernel exited before it answered (start {start} of {STARTS}); "
                      f"starting another. Its stderr:\n{written}", file=sys.stderr)
    raise AssertionError("unreachable")


nbval.kernel.start_new_kernel = start_new_kernel
