"""Holds: known points a process stops at until the kernel lets it go.

A lesson that shows what happens *between* two steps of a writer (a transaction that has read
but not committed, a log store past its pre-check, a request the object store has received but
not answered) must stop that writer there, whatever process or thread it runs in, and never
wait for it by chance. A hold is that point. It is three marker files beside a path both sides
see::

    <path>.reached    created (atomically) by the first call that stops here
    <path>.release    created by the kernel: the call goes on
    <path>.cancel     created by the kernel: the call raises instead of going on

and one more in the hold's folder: a file named ``stop`` (:data:`STOP_MARKER`) cancels every
hold in it, which is how a stopped second driver (:mod:`deltalab.drivers`) lets go of what it
held.

The stopping side calls :func:`hold_here` (or builds a function with :func:`hold_gate`, e.g. the
body of a Spark UDF, which runs in a Python worker process); the kernel's side is a
:class:`Hold`: :meth:`Hold.wait_reached`, then :meth:`Hold.release` or :meth:`Hold.cancel`.
Files rather than a ``threading.Event``: a Python UDF runs in PySpark's worker processes, the
object store in a server process, and a second driver in a process of its own, and all of them
see the same folder.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable, Protocol

from deltalab.errors import DeltaLabError
from deltalab.processes import wait_until

__all__ = ["Hold", "POLL_SECONDS", "STOP_MARKER", "WAIT_LIMIT_SECONDS", "cancel_reached", "hold_gate", "hold_here",
           "hold_markers"]

#: How long a held call waits for its release, and the kernel for a call to reach its hold (a
#: safety net: a loaded two-core machine can take minutes to start a JVM).
WAIT_LIMIT_SECONDS = 600.0
#: How often both sides look at the marker files.
POLL_SECONDS = 0.01
#: A file of this name in a hold's folder cancels every hold of the folder.
STOP_MARKER = "stop"


def hold_markers(path: str | os.PathLike[str]) -> tuple[str, str, str]:
    """The marker files of the hold at ``path``: (reached, release, cancel)."""
    path = os.fspath(path)
    return f"{path}.reached", f"{path}.release", f"{path}.cancel"


def hold_gate(path: str | os.PathLike[str], timeout_s: float = WAIT_LIMIT_SECONDS,
              cancelled_message: str | None = None) -> Callable[[Any], bool]:
    """A function that stops at the hold ``path`` the first time it is called, and returns True.

    Only the first call waits (it creates ``<path>.reached`` atomically) until the kernel
    releases the hold; later calls pass straight through, so as the body of a filter UDF it stops
    one row of one task and the other operations can still run. Cancelling the hold (or a
    ``stop`` file in its folder) makes the waiting call, and every call after, raise
    ``RuntimeError(cancelled_message)`` instead of going on, so nothing behind the gate commits.
    The function is a closure of plain values, so Spark ships it by value to its Python workers.
    """
    reached, release, cancel = hold_markers(path)
    stop = os.path.join(os.path.dirname(os.fspath(path)), STOP_MARKER)
    name, poll = os.path.basename(os.fspath(path)), POLL_SECONDS
    cancelled = cancelled_message or f"the hold {name} was cancelled"

    def gate(_value=None):  # no annotations: PySpark would try to read an eval type from them
        import os as _os
        import time as _time

        try:
            _os.close(_os.open(reached, _os.O_CREAT | _os.O_EXCL | _os.O_WRONLY))
        except FileExistsError:
            if _os.path.exists(cancel) or _os.path.exists(stop):
                raise RuntimeError(cancelled)
            return True
        deadline = _time.monotonic() + timeout_s
        while not _os.path.exists(release):
            if _os.path.exists(cancel) or _os.path.exists(stop):
                raise RuntimeError(cancelled)
            if _time.monotonic() > deadline:
                raise TimeoutError(f"the hold {name} was never released")
            _time.sleep(poll)
        return True

    return gate


def hold_here(path: str | os.PathLike[str], timeout_s: float = WAIT_LIMIT_SECONDS) -> None:
    """Stop at the hold ``path`` until the kernel releases it (the first call only: :func:`hold_gate`)."""
    hold_gate(path, timeout_s)()


class PendingWork(Protocol):
    """What :meth:`Hold.wait_reached` needs of the call expected to stop at the hold
    (a :class:`deltalab.drivers.PendingCall`)."""

    function: str

    @property
    def done(self) -> bool: ...

    def result(self, timeout: float = ...) -> Any: ...


class Hold:
    """The kernel's side of a hold: a fresh marker path, waited for and released from here."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self._reached, self._release, self._cancel = (Path(p) for p in hold_markers(self.path))
        for marker in (self._reached, self._release, self._cancel):
            marker.unlink(missing_ok=True)

    def __repr__(self) -> str:
        return f"Hold({Path(self.path).name!r})"

    @property
    def reached(self) -> bool:
        """True once a process stopped at this hold."""
        return self._reached.exists()

    def wait_reached(self, pending: PendingWork | None = None, timeout: float = WAIT_LIMIT_SECONDS) -> None:
        """Wait until a process stopped here. With ``pending`` (the call expected to stop here), a
        call that ends first raises its own error, or says it never reached the hold."""
        def done() -> bool:
            return self.reached or (pending is not None and pending.done)

        wait_until(done, timeout, f"a process stops at the hold {Path(self.path).name}", interval=POLL_SECONDS)
        if not self.reached and pending is not None:
            pending.result(timeout=0)  # raises the call's error, if it failed
            raise DeltaLabError(f"The call {pending.function} finished without stopping at the hold {self.path}.",
                                fix="Pass the hold's path to the function, and make it call hold_here(path) "
                                    "(or a gate built from hold_gate(path)) on its way.")

    def release(self) -> None:
        """Let the held process go on."""
        self._release.touch()

    def cancel(self) -> None:
        """Make the held process raise at the hold instead of going on."""
        self._cancel.touch()


def cancel_reached(folder: str | os.PathLike[str]) -> list[str]:
    """Cancel every hold of ``folder`` that a process has reached; return their paths. What a
    server does before it stops, so no client waits on a hold forever."""
    cancelled = []
    for reached in sorted(Path(folder).glob("*.reached")):
        path = str(reached)[: -len(".reached")]
        Path(hold_markers(path)[2]).touch()
        cancelled.append(path)
    return cancelled
