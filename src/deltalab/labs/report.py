"""What a lab check reports: one line starting with ``✓`` when the answer is right, else a
:class:`CheckFailed` of one or two plain sentences saying what is wrong, then where to look.

In a Jupyter notebook the exception is shown without a traceback (``_render_traceback_``), and
because it is an exception, nbgrader scores the check cell 0. A message never shows the expected
value (it could be copied into the answer); :func:`short_repr` is how a message shows the learner's
own arguments and answers.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from deltalab.errors import DeltaLabError

__all__ = ["CheckFailed", "file_set_difference", "passed", "short_repr"]


class CheckFailed(DeltaLabError):
    """A lab check found a wrong answer. ``problem`` says what is wrong, ``fix`` where to look.

    ``seed`` (from :func:`check_seed`) names the generated tables the answer failed on, so an
    instructor can build them again (``DELTALAB_CHECK_SEED=N``); it is not an answer.
    """

    def __init__(self, check: str, problem: str, fix: str, seed: int | None = None) -> None:
        self.check = check
        self.seed = seed
        tables = f" (tables of seed {seed})" if seed is not None else ""
        super().__init__(f"✗ {check}: {problem}{tables}", fix=f"Where to look: {fix}")

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


def file_set_difference(missing: list[str], extra: list[str]) -> str:
    """'2 file(s) Spark reads are missing (e.g. a) and 1 file(s) Spark does not read are included (e.g. b)'."""
    detail = []
    if missing:
        detail.append(f"{len(missing)} file(s) Spark reads are missing (e.g. {missing[0]})")
    if extra:
        detail.append(f"{len(extra)} file(s) Spark does not read are included (e.g. {extra[0]})")
    return " and ".join(detail)

