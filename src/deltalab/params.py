"""Checking the parameters papermill injects into a notebook."""

from __future__ import annotations

import ast
from typing import Any, Mapping

from deltalab.errors import DeltaLabError

INJECTED_HEADER = "# Parameters"  # the first line of the cell papermill inserts after `parameters`


def injected_parameter_names(history: list[str]) -> set[str]:
    """Names assigned in the newest papermill-injected cell of a kernel's input history."""
    for source in reversed(history):
        if source.lstrip().startswith(INJECTED_HEADER):
            tree = ast.parse(source)
            names = set()
            for node in tree.body:
                if isinstance(node, ast.Assign):
                    names.update(target.id for target in node.targets if isinstance(target, ast.Name))
            return names
    return set()


def _describe(expected: Mapping[str, type]) -> str:
    return ", ".join(f"{name} ({kind.__name__})" for name, kind in expected.items())


def check_parameters(namespace: Mapping[str, Any], **expected: type) -> None:
    """Check a notebook's parameters: no unknown names, each of the declared type.

    Call it in the cell right after the cell tagged ``parameters``, with the notebook's
    ``globals()`` and one keyword per parameter, e.g. ``check_parameters(globals(), rows=int)``.
    papermill only warns about a misspelt ``-p`` option and runs the notebook with the default;
    this stops the run with a message instead. Integer parameters (sizes, seeds) must be >= 0.
    """
    unknown = injected_parameter_names(list(namespace.get("In", []))) - expected.keys()
    if unknown:
        raise DeltaLabError(
            f"Unknown notebook parameter {', '.join(sorted(unknown))}: this notebook takes {_describe(expected)}.",
            fix="Check the spelling of the -p options you passed to papermill.",
        )
    for name, kind in expected.items():
        if name not in namespace:
            raise DeltaLabError(
                f"The parameter {name} is not defined.",
                fix="Run the cell tagged `parameters` (near the top of the notebook) first.",
            )
        value = namespace[name]
        accepted = (int, float) if kind is float else kind
        if isinstance(value, bool) and kind is not bool or not isinstance(value, accepted):
            raise DeltaLabError(
                f"The parameter {name} must be {kind.__name__}, but it is {value!r} ({type(value).__name__}).",
                fix=f"Pass a {kind.__name__}, e.g. papermill -p {name} <value> (papermill reads numbers as numbers).",
            )
        if kind is int and value < 0:
            raise DeltaLabError(f"The parameter {name} must be 0 or more, but it is {value}.", fix=f"Pass a non-negative {name}.")
