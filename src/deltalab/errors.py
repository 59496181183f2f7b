"""The one exception type the course raises, and what a failed Spark or Delta call raised.

Two kinds of error meet in a notebook:

* :class:`DeltaLabError`, raised by ``deltalab`` itself for a problem the learner can fix (no
  Java, not a Delta table, a version that does not exist), always with the fix;
* the errors Spark and Delta raise on purpose in a lesson (a refused write, a conflict). A
  notebook asserts on their *error condition* (``DELTA_METADATA_MISMATCH``), which
  :func:`failure_of` and :func:`spark_failure` read from whichever exception type carried it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable


class DeltaLabError(Exception):
    """A problem with the learner's setup or input, stated with its fix.

    The message has two parts: what is wrong and what to do about it. Notebooks and
    the ``python -m deltalab`` commands show it instead of a JVM stack trace.
    """

    def __init__(self, problem: str, fix: str | None = None) -> None:
        self.problem = problem
        self.fix = fix
        message = problem if fix is None else f"{problem}\nFix: {fix}"
        super().__init__(message)


# An error condition as Spark and Delta print it: [DELTA_METADATA_MISMATCH] or [DELTA_DUPLICATE_COLUMNS_FOUND.DATA]
_CONDITION = re.compile(r"\[([A-Z][A-Z0-9_]+(?:\.[A-Z0-9_]+)*)\]")


@dataclass(frozen=True)
class SparkFailure:
    """What a refused Spark/Delta operation raised, reduced to what a learner needs.

    ``condition`` is the error condition (error class) such as ``DELTA_METADATA_MISMATCH``,
    ``message`` the first line of the message that carries it (no Java class, no stack
    trace), ``text`` the whole message for searching, ``error_type`` the Python exception type.
    """

    condition: str | None
    message: str
    text: str
    error_type: str

    def __str__(self) -> str:
        return self.message


def spark_failure(error: BaseException) -> SparkFailure:
    """Describe an exception raised by Spark or Delta: its error condition and first line."""
    text = str(error)
    condition = None
    get_condition = getattr(error, "getCondition", None)
    if callable(get_condition):
        try:
            condition = get_condition()
        except Exception:  # noqa: BLE001 - a half-converted JVM error can fail here too
            condition = None
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if condition is None:
        # Some Delta errors (NOT NULL, CHECK) reach Python as a plain Py4JJavaError: read the
        # condition from the line "...DeltaInvariantViolationException: [CONDITION] message".
        found = _CONDITION.search(text)
        condition = found.group(1) if found else None
    message = next((line for line in lines if condition and f"[{condition}]" in line), lines[0] if lines else "")
    if condition and f"[{condition}]" in message:
        message = message[message.index(f"[{condition}]"):]  # drop a "java.class.Name: " prefix
    return SparkFailure(condition=condition, message=message, text=text, error_type=type(error).__name__)


def failure_of(action: Callable[[], Any]) -> SparkFailure | None:
    """Run ``action()``; return what it raised as a :class:`SparkFailure`, or None if it succeeded.

    Spark raises several exception types (``AnalysisException``, ``NumberFormatException``,
    a bare ``Py4JJavaError`` for Delta's constraint violations); this reads the error
    condition from whichever it was, so a notebook can assert on it in one line.
    """
    try:
        action()
    except Exception as error:  # noqa: BLE001 - the point is to capture any Spark/Delta error
        return spark_failure(error)
    return None


def first_line(error: BaseException, limit: int = 240) -> str:
    """The first meaningful line of an error message (JVM errors carry whole stack traces)."""
    text = str(error).strip()
    line = next((part.strip() for part in text.splitlines() if part.strip()), "")
    if len(line) > limit:
        line = line[: limit - 1] + "…"
    return line or type(error).__name__
