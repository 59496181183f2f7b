"""A second Spark driver: another Python process with its own Spark session, driven by the kernel.

Some lessons need two writers that share nothing but the table's files: two processes, two JVMs,
two Delta log caches (notebook 05's race for ``N+1.json``, notebook 11's writers on an object
store). :func:`start_driver` starts such a process *in the background*, so the kernel goes on
with its own work while the second JVM starts; the kernel then sends it commands::

    driver = start_driver("writer-b", wd / "_driver_b")        # returns at once
    spark = get_spark(...)                                      # ... the kernel's own work ...
    driver.call("deltalab.concurrency.make_pair_table", str(path))   # waits until it is ready
    pending = driver.submit("deltalab.concurrency.write_commit_file", str(path), 1, lines, hold.path)
    hold.wait_reached(pending)        # the driver stopped at a known point
    hold.release(); pending.result()
    driver.stop()

A command names a function by its dotted name; the driver calls it with its Spark session first
(``function(spark, *args, **kwargs)``; ``with_spark=False`` leaves it out) and sends back its
JSON-able result, or its error, which the kernel raises as :class:`DriverCallError` (a
``DeltaLabError``) with the first line of the remote message.

The driver stops at known points with the holds of :mod:`deltalab.holds` (``driver.hold(name)``
gives a fresh one in its signal directory; stopping the driver cancels them all).
:func:`in_this_kernel` runs the same commands in a thread of the kernel, so a lesson can drive
"this notebook" and "the other driver" with the same code.

This is the course's one way to run Python in another process: the writers of
:mod:`deltalab.writers` (a writer killed mid-commit, blind appends from several processes), the
streaming query of :mod:`deltalab.streaming` killed after its Delta commit, and notebook 11's
writers on an object store are all drivers.

Every file of the conversation lives in the driver's ``signal_dir``: ``spec.json`` (how to start),
``ready.json`` or ``failed.json``, ``call-NNNNNN.json`` and ``call-NNNNNN.result.json``, ``stop``,
and ``driver.log`` (the driver's output). The process runs under a guardian
(:func:`deltalab.processes.start_owned`): it dies with the kernel that started it, and an
interrupted wait (the notebook's stop button) ends it, so nothing is left holding a table.
"""

from __future__ import annotations

import importlib
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, Sequence

from deltalab.errors import DeltaLabError
from deltalab.gateway import start_callback_server
from deltalab.holds import POLL_SECONDS, STOP_MARKER, WAIT_LIMIT_SECONDS, Hold
from deltalab.processes import end_process, start_owned, wait_until
from deltalab.publish import write_atomically

__all__ = [
    "Driver",
    "DriverCallError",
    "PendingCall",
    "in_this_kernel",
    "start_driver",
    "stop_drivers",
]

#: How a driver is started: ``python -c DRIVER_MAIN SIGNAL_DIR`` (``-m deltalab.drivers`` would
#: load this module twice: once as ``__main__``, once when a command imports it).
DRIVER_MAIN = "import sys; from deltalab.drivers import main; sys.exit(main(sys.argv[1:]))"

_SPEC, _READY, _FAILED, _LOG = "spec.json", "ready.json", "failed.json", "driver.log"
_STOP = STOP_MARKER  # also cancels every hold of the signal directory


class DriverCallError(DeltaLabError):
    """A command failed in the driver. ``remote_class`` is the Python class of the remote error
    (for a Java error, the Java class), ``remote_message`` the first line of its message."""

    def __init__(self, problem: str, fix: str, remote_class: str, remote_message: str) -> None:
        super().__init__(problem, fix)
        self.remote_class = remote_class
        self.remote_message = remote_message


# --------------------------------------------------------------------------------------------
# Calls: what the kernel sends, what it gets back
# --------------------------------------------------------------------------------------------


def _resolve(function: str) -> Callable[..., Any]:
    module_name, _, attribute = function.rpartition(".")
    if not module_name:
        raise ValueError(f"{function!r} is not a dotted name such as 'deltalab.log.latest_version'")
    return getattr(importlib.import_module(module_name), attribute)


def _describe(error: BaseException) -> tuple[str, str]:
    """(class, first line) of an error; a Java error as the Java class and its message."""
    java = getattr(error, "java_exception", None)
    if java is not None and type(error).__name__ == "Py4JJavaError":
        try:
            message = str(java.getMessage() or "")
            return str(java.getClass().getName()), message.strip().splitlines()[0] if message.strip() else ""
        except Exception:  # noqa: BLE001 - the JVM may be gone; fall back to the Python text
            pass
    text = str(error).strip()
    line = next((part.strip() for part in text.splitlines() if part.strip()), "")
    return type(error).__name__, line[:500]


def _json(value: Any) -> str:
    return json.dumps(value, default=os.fspath)


def _run_request(spark: Any, request: dict[str, Any]) -> dict[str, Any]:
    """Run one command; its answer as a JSON-able dict (``ok`` with ``value``, or the error)."""
    try:
        function = _resolve(request["function"])
        args, kwargs = request.get("args", []), request.get("kwargs", {})
        value = function(spark, *args, **kwargs) if request.get("with_spark", True) else function(*args, **kwargs)
        json.dumps(value)
        return {"ok": True, "value": value}
    except BaseException as error:  # noqa: BLE001 - sent back to the kernel
        if isinstance(error, (KeyboardInterrupt, SystemExit)):
            raise
        remote_class, message = _describe(error)
        if isinstance(error, TypeError) and "JSON serializable" in str(error):
            message = f"its result is not JSON-able ({message})"
        return {"ok": False, "error": remote_class, "message": message}


class PendingCall:
    """A command sent to a driver (or to a thread of this kernel); :meth:`result` waits for it."""

    def __init__(self, function: str, owner: str, answer: Callable[[], dict[str, Any] | None],
                 alive: Callable[[], str | None], log_path: Path | None) -> None:
        self.function = function
        self._owner = owner
        self._answer = answer
        self._alive = alive
        self._log_path = log_path
        self._value: dict[str, Any] | None = None

    @property
    def done(self) -> bool:
        """True once the command has returned or raised (or its driver has ended)."""
        if self._value is None:
            self._value = self._answer()
        return self._value is not None or self._alive() is not None

    def result(self, timeout: float = WAIT_LIMIT_SECONDS) -> Any:
        """The command's result; its error as :class:`DriverCallError`."""
        if timeout > 0:
            wait_until(lambda: self.done, timeout, f"{self._owner} answers {self.function}", interval=POLL_SECONDS)
        if not self.done:
            raise DeltaLabError(f"{self._owner} has not answered {self.function} yet.",
                                fix="Wait for it with result() (a positive timeout).")
        if self._value is None:
            raise DeltaLabError(f"{self._owner} ended before it answered {self.function}: {self._alive()}.",
                                fix=_log_fix(self._log_path))
        if self._value["ok"]:
            return self._value["value"]
        remote_class, message = self._value["error"], self._value["message"]
        raise DriverCallError(f"{self.function} failed in {self._owner}: {remote_class}: {message}",
                              _log_fix(self._log_path, "If the message is not enough, look at "),
                              remote_class, message)


def _log_fix(log_path: Path | None, start: str = "Look at ") -> str:
    if log_path is None:
        return "Look at the error above; the call ran in this kernel."
    return f"{start}the driver's output in {log_path} (and its Spark log under the work root's _logs/)."


# --------------------------------------------------------------------------------------------
# The kernel's side of a second driver
# --------------------------------------------------------------------------------------------


class Driver:
    """A second Spark driver started by :func:`start_driver`; its methods are the kernel's side."""

    def __init__(self, name: str, signal_dir: Path, process: subprocess.Popen[bytes]) -> None:
        self.name = name
        self.signal_dir = signal_dir
        self.process = process
        self.log_path = signal_dir / _LOG
        self._calls = 0
        self._ready: dict[str, Any] | None = None

    def __repr__(self) -> str:
        return f"Driver({self.name!r}, pid {self.process.pid})"

    def _ended(self) -> str | None:
        """Why the driver cannot answer any more (it exited), or None while it runs."""
        code = self.process.poll()
        return None if code is None else f"its process exited with code {code}"

    def _tail(self, lines: int = 6) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no output)"

    def wait_ready(self, timeout: float = WAIT_LIMIT_SECONDS) -> float:
        """Wait until the driver's Spark session runs; return the seconds its start took."""
        if self._ready is None:
            ready, failed = self.signal_dir / _READY, self.signal_dir / _FAILED
            wait_until(lambda: ready.exists() or failed.exists() or self._ended() is not None, timeout,
                       f"the second driver {self.name!r} has started Spark", interval=0.05)
            if not ready.exists():
                reason = json.loads(failed.read_text())["error"] if failed.exists() else self._ended()
                raise DeltaLabError(f"The second driver {self.name!r} did not start: {reason}\n{self._tail()}",
                                    fix="Run `python -m deltalab doctor`; check the settings and jars passed to "
                                        f"start_driver; the whole output is in {self.log_path}.")
            self._ready = json.loads(ready.read_text())
        return float(self._ready["seconds"])

    def submit(self, function: str, *args: Any, with_spark: bool = True, **kwargs: Any) -> PendingCall:
        """Send ``function(spark, *args, **kwargs)`` (dotted name, JSON-able arguments) and return at
        once; the driver runs its commands one at a time, in the order they were sent."""
        if self._ended() is not None:
            raise DeltaLabError(f"The second driver {self.name!r} has ended ({self._ended()}).",
                                fix="Start a new one with start_driver (run the cell that starts it again).")
        request = {"function": function, "args": list(args), "kwargs": kwargs, "with_spark": with_spark}
        try:
            text = _json(request)
        except TypeError as error:
            raise DeltaLabError(f"The arguments of {function} are not JSON-able: {error}.",
                                fix="Pass strings, numbers, lists and dicts (paths as str).") from None
        self._calls += 1
        call = self.signal_dir / f"call-{self._calls:06d}.json"
        answer = call.with_name(f"call-{self._calls:06d}.result.json")
        write_atomically(call, text)

        def read() -> dict[str, Any] | None:
            return json.loads(answer.read_text()) if answer.exists() else None

        return PendingCall(function, f"the second driver {self.name!r}", read, self._ended, self.log_path)

    def call(self, function: str, *args: Any, with_spark: bool = True, timeout: float = WAIT_LIMIT_SECONDS,
             **kwargs: Any) -> Any:
        """Run ``function(spark, *args, **kwargs)`` in the driver and return its JSON-able result."""
        return self.submit(function, *args, with_spark=with_spark, **kwargs).result(timeout)

    def hold(self, name: str) -> Hold:
        """A fresh :class:`Hold` in this driver's signal directory (pass ``.path`` to the function)."""
        return Hold(self.signal_dir / f"hold-{name}")

    def kill(self) -> int:
        """SIGKILL the driver now, with its JVM and everything it started, and return its exit code
        (-9): a writer that dies in the middle of what it was doing."""
        return end_process(self.process)

    def stop(self, timeout: float = 120.0) -> int:
        """Stop the driver's Spark session and the process; return its exit code.

        A held call is cancelled. A driver that does not stop within ``timeout`` seconds is
        killed with every process it started.
        """
        if self.process.poll() is None:
            (self.signal_dir / _STOP).touch()
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                pass
        return end_process(self.process)  # the exit code; also makes sure nothing it started is left

    def __enter__(self) -> "Driver":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_driver(name: str, signal_dir: str | os.PathLike[str], conf: dict[str, str] | None = None,
                 jars: Sequence[str | os.PathLike[str]] = (), env: dict[str, str] | None = None,
                 master: str | None = None) -> Driver:
    """Start a second Spark driver in the background and return at once (see :meth:`Driver.wait_ready`).

    Its session is :func:`deltalab.session.get_spark` (Delta's settings, a quiet log under the
    work root's ``_logs/``) with ``conf`` on top and ``jars`` on its class path next to Delta's
    (for example hadoop-aws and the AWS SDK with S3A settings). ``env`` adds environment variables
    (credentials of a local S3 server); ``master`` defaults as for ``get_spark``. ``signal_dir``
    is emptied: it holds the conversation with the driver and its output (``driver.log``).
    """
    directory = Path(signal_dir).resolve()
    if directory.exists():
        shutil.rmtree(directory)
    directory.mkdir(parents=True)
    spec = {"name": name, "conf": dict(conf or {}), "jars": [str(Path(j).resolve()) for j in jars], "master": master}
    missing = [j for j in spec["jars"] if not Path(j).is_file()]
    if missing:
        raise DeltaLabError(f"These jars do not exist: {', '.join(missing)}.",
                            fix="Fetch them first (python -m deltalab fetch-jars), or pass the right paths.")
    (directory / _SPEC).write_text(json.dumps(spec, indent=1))
    environment = {**os.environ, **(env or {})}
    process = start_owned([sys.executable, "-c", DRIVER_MAIN, str(directory)], directory / _LOG, env=environment)
    return Driver(name, directory, process)


def stop_drivers(drivers: Sequence[Driver], timeout: float = 120.0) -> list[int]:
    """Stop several drivers at once (each stops its Spark session at the same time); return their
    exit codes."""
    for driver in drivers:
        if driver.process.poll() is None:
            (driver.signal_dir / _STOP).touch()
    return [driver.stop(timeout) for driver in drivers]


# --------------------------------------------------------------------------------------------
# The same commands in a thread of this kernel
# --------------------------------------------------------------------------------------------


class KernelRunner:
    """Runs commands like a :class:`Driver` does, each in its own thread of this kernel, on ``spark``."""

    def __init__(self, spark: Any) -> None:
        self.spark = spark
        self.name = "this kernel"

    def submit(self, function: str, *args: Any, with_spark: bool = True, **kwargs: Any) -> PendingCall:
        """Start ``function(spark, *args, **kwargs)`` in a thread and return at once."""
        box: dict[str, dict[str, Any]] = {}
        request = {"function": function, "args": list(args), "kwargs": kwargs, "with_spark": with_spark}

        def run() -> None:
            box["answer"] = _run_request(self.spark, request)

        thread = threading.Thread(target=run, name=f"call-{function}", daemon=True)
        thread.start()
        return PendingCall(function, "this kernel", lambda: box.get("answer"), lambda: None, None)

    def call(self, function: str, *args: Any, with_spark: bool = True, timeout: float = WAIT_LIMIT_SECONDS,
             **kwargs: Any) -> Any:
        """Run ``function(spark, *args, **kwargs)`` and return its result (in a thread, like a driver)."""
        return self.submit(function, *args, with_spark=with_spark, **kwargs).result(timeout)


def in_this_kernel(spark: Any) -> KernelRunner:
    """This kernel as the other side of a two-driver lesson: the same ``submit``/``call`` as a
    :class:`Driver`, run in threads on ``spark``."""
    return KernelRunner(spark)


# --------------------------------------------------------------------------------------------
# The driver process
# --------------------------------------------------------------------------------------------


def _session_conf(spec: dict[str, Any]) -> dict[str, str]:
    """``spec``'s settings, with its jars added to Delta's on the class path."""
    conf = {key: str(value) for key, value in spec["conf"].items()}
    if spec["jars"]:
        from deltalab.jars import fetch_jars, session_jars
        from deltalab.session import resolve_master

        local = resolve_master(spec["master"]).startswith("local")
        key, separator = ("spark.driver.extraClassPath", os.pathsep) if local else ("spark.jars", ",")
        jars = [str(j) for j in session_jars(fetch_jars())] + list(spec["jars"])
        if conf.get(key):
            jars.append(conf[key])
        conf[key] = separator.join(jars)
    return conf


def serve(signal_dir: Path) -> int:
    """The driver's life: start Spark, say ready, run each command, stop on ``stop``."""
    started = time.monotonic()
    spec = json.loads((signal_dir / _SPEC).read_text())
    try:
        from deltalab.session import get_spark

        spark = get_spark(spec["name"], master=spec["master"], **_session_conf(spec))
    except Exception as error:  # noqa: BLE001 - reported to the kernel
        write_atomically(signal_dir / _FAILED, json.dumps({"error": str(error)}))
        return 1
    start_callback_server(spark)  # Java may call back into Python
    write_atomically(signal_dir / _READY, json.dumps({"pid": os.getpid(), "seconds": time.monotonic() - started}))
    number = 1
    while signal_dir.is_dir() and not (signal_dir / _STOP).exists():
        call = signal_dir / f"call-{number:06d}.json"
        if not call.exists():
            time.sleep(POLL_SECONDS)
            continue
        answer = _run_request(spark, json.loads(call.read_text()))
        if not signal_dir.is_dir():
            break
        write_atomically(call.with_name(f"call-{number:06d}.result.json"), json.dumps(answer))
        number += 1
    spark.stop()
    return 0


def main(argv: list[str]) -> int:
    """The driver's entry point (``SIGNAL_DIR``); only :func:`start_driver` starts it."""
    if len(argv) != 1 or not Path(argv[0], _SPEC).is_file():
        print("usage: python -c DRIVER_MAIN SIGNAL_DIR  (started by deltalab.drivers.start_driver)", file=sys.stderr)
        return 2
    return serve(Path(argv[0]))
