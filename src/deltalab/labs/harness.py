"""What every lab check shares: the failure message, calling the student's code, and test tables.

A check prints one line starting with ``✓`` when the answer is right. When it is wrong it
raises :class:`CheckFailed`: one or two plain sentences saying what is wrong, then where to
look. Errors raised by the student's code (including JVM errors) are turned into the same kind
of message, first line only, so a learner never has to read a Java stack trace. In a Jupyter
notebook the exception is shown without a traceback (``_render_traceback_``), and because it is
an exception, nbgrader scores the check cell 0.

Spark is the ground truth: checks compare with ``inputFiles()``, ``DESCRIBE HISTORY``, Delta's
own log segments and real conflicts, never with an answer typed into the check.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Callable, TypeVar

from deltalab.errors import DeltaLabError, first_line
from deltalab.jvm import clear_delta_cache
from deltalab.session import active_spark
from deltalab.workdir import workdir

__all__ = [
    "CheckFailed",
    "append_events",
    "build_once",
    "call_student",
    "clean_up_commits",
    "file_set_difference",
    "fresh_dir",
    "lab_spark",
    "passed",
    "short_repr",
]


class CheckFailed(DeltaLabError):
    """A lab check found a wrong answer. ``problem`` says what is wrong, ``fix`` where to look."""

    def __init__(self, check: str, problem: str, fix: str) -> None:
        self.check = check
        super().__init__(f"✗ {check}: {problem}", fix=f"Where to look: {fix}")

    def _render_traceback_(self) -> list[str]:
        """Tell IPython to show just the message, not a traceback into this module."""
        return str(self).splitlines()


def passed(check: str, what: str) -> None:
    """Print the one line of a check that passed."""
    print(f"✓ {check}: {what}")


def short_repr(value: Any, limit: int = 40) -> str:
    """A value as a message shows it: a path by its last part, a session as ``spark``, else a short repr."""
    if isinstance(value, (str, os.PathLike)):
        text = str(value)
        return repr(Path(text).name if os.sep in text else text)
    if hasattr(value, "sparkContext"):
        return "spark"
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def call_student(check: str, func: Callable[..., Any], name: str, *args: Any, hint: str) -> Any:
    """Call the student's ``func`` and turn any exception into a :class:`CheckFailed`.

    ``NotImplementedError`` (the stub of an unfinished exercise) says "not written yet";
    any other error becomes its first line plus ``hint``.
    """
    if not callable(func):
        raise CheckFailed(
            check,
            f"{name} is {type(func).__name__}, not a function.",
            f"the cell that defines `def {name}(...)`; run it again, then this check.",
        )
    shown = ", ".join(short_repr(a) for a in args)
    try:
        return func(*args)
    except NotImplementedError:
        raise CheckFailed(
            check,
            f"{name} is not written yet: it still raises NotImplementedError.",
            f"replace `raise NotImplementedError()` under `# YOUR CODE HERE` in the cell that defines {name}, "
            "run that cell, then run this check again.",
        ) from None
    except CheckFailed:
        raise
    except Exception as error:  # the student's bug, whatever it is, becomes one sentence
        raise CheckFailed(
            check,
            f"{name}({shown}) raised {type(error).__name__}: {first_line(error)}",
            hint,
        ) from None


def file_set_difference(missing: list[str], extra: list[str]) -> str:
    """'2 file(s) Spark reads are missing (e.g. a) and 1 file(s) Spark does not read are included (e.g. b)'."""
    detail = []
    if missing:
        detail.append(f"{len(missing)} file(s) Spark reads are missing (e.g. {missing[0]})")
    if extra:
        detail.append(f"{len(extra)} file(s) Spark does not read are included (e.g. {extra[0]})")
    return " and ".join(detail)


def lab_spark() -> Any:
    """The session the lab's setup cell started; the checks compare answers with it."""
    return active_spark(None, "The lab checks compare your answers with Spark")


def fresh_dir(name: str) -> Path:
    """An empty directory for one check's tables (under the course work root)."""
    return workdir(f"labs_checks_{name}")


Built = TypeVar("Built")

#: What :func:`build_once` built in this process: name -> value.
_BUILT: dict[str, Any] = {}
_SAVED_AS = "built.json"


def build_once(name: str, build: Callable[[Path], Built], intact: Callable[[Built], bool] = lambda value: True,
               saved: bool = False) -> Built:
    """What ``build(folder)`` returned, built the first time this process asks for ``name`` and
    reused while ``intact(value)`` holds.

    A lab's checks only read the tables they build, so a student who runs a check cell ten times
    builds them once; a check that finds them changed (``intact`` false: an answer deleted a file)
    builds them again. ``folder`` is the emptied work directory ``labs_checks_<name>``. With
    ``saved=True`` (a JSON-able value) the value is also kept there, in ``built.json``, and a later
    process (nbgrader grades each submission in a fresh kernel) reuses it while it is intact.
    """
    value = _BUILT.get(name)
    if name in _BUILT and intact(value):
        return value
    if saved:
        kept = workdir(f"labs_checks_{name}", fresh=False) / _SAVED_AS
        try:
            value = json.loads(kept.read_text())
        except (OSError, ValueError):
            value = None
        if value is not None and intact(value):
            _BUILT[name] = value
            return value
    folder = fresh_dir(name)
    value = build(folder)
    if saved:
        (folder / _SAVED_AS).write_text(json.dumps(value, indent=1))
    _BUILT[name] = value
    return value



def append_events(spark: Any, path: str, start: int, stop: int, kind: str, files: int = 1) -> None:
    """Append ids ``start..stop-1`` with a ``kind`` column (a SQL expression) in ``files`` files."""
    df = spark.range(start, stop).selectExpr("id", f"{kind} AS kind")
    df = df.repartition(files) if files > 1 else df.coalesce(1)
    df.write.format("delta").mode("append").save(path)


def clean_up_commits(table_path: str | os.PathLike[str], before: int) -> None:
    """Delete commits ``0 .. before-1`` (JSON, checksum and Hadoop's hidden twins) from the log.

    This is what Delta's log clean-up does to commits older than ``delta.logRetentionDuration``
    once a later checkpoint covers them; a check does it at once so that only a checkpoint-aware
    reader can rebuild the table.
    """
    log = Path(table_path) / "_delta_log"
    for version in range(before):
        for suffix in (".json", ".crc"):
            (log / f"{version:020d}{suffix}").unlink(missing_ok=True)
            (log / f".{version:020d}{suffix}.crc").unlink(missing_ok=True)
    clear_delta_cache()
