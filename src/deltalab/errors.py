"""The one exception type the course raises for problems a learner can fix."""

from __future__ import annotations


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
