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


#: One parameter's declaration: its type, or (type, lowest, highest) with either bound None for none.
ParameterSpec = type | tuple[type, float | None, float | None]


def _kind(spec: ParameterSpec) -> type:
    return spec[0] if isinstance(spec, tuple) else spec


def _describe(expected: Mapping[str, ParameterSpec]) -> str:
    return ", ".join(f"{name} ({_kind(spec).__name__}{_bounds_text(spec)})" for name, spec in expected.items())


def _bounds_text(spec: ParameterSpec) -> str:
    if not isinstance(spec, tuple):
        return ""
    _, low, high = spec
    if low is not None and high is not None:
        return f", {low} to {high}"
    return f", at least {low}" if low is not None else f", at most {high}"


def check_parameters(namespace: Mapping[str, Any], **expected: ParameterSpec) -> None:
    """Check a notebook's parameters: no unknown names, each of its type and in its range.

    Call it in the cell right after the cell tagged ``parameters``, with the notebook's
    ``globals()`` and one keyword per parameter: its type, or ``(type, lowest, highest)`` for a
    range the notebook's lesson and asserts hold in (either bound None: none), e.g.
    ``check_parameters(globals(), num_files=(int, 2, None), seed=int)``. papermill only warns about
    a misspelt ``-p`` option and runs the notebook with the default; this stops the run with a
    message instead. Integer parameters (sizes, seeds) must be >= 0 in any case.
    """
    unknown = injected_parameter_names(list(namespace.get("In", []))) - expected.keys()
    if unknown:
        raise DeltaLabError(
            f"Unknown notebook parameter {', '.join(sorted(unknown))}: this notebook takes {_describe(expected)}.",
            fix="Check the spelling of the -p options you passed to papermill.",
        )
    for name, spec in expected.items():
        kind = _kind(spec)
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
        if kind is int and value < 0 and not (isinstance(spec, tuple) and spec[1] is not None):  # a range says more
            raise DeltaLabError(f"The parameter {name} must be 0 or more, but it is {value}.", fix=f"Pass a non-negative {name}.")
        if isinstance(spec, tuple):
            _, low, high = spec
            if (low is not None and value < low) or (high is not None and value > high):
                raise DeltaLabError(
                    f"The parameter {name} is {value}, outside this notebook's range for it ({_bounds_text(spec)[2:]}).",
                    fix=f"Pass a {name} {_bounds_text(spec)[2:]}; the comment beside it in the parameters cell says "
                        "what it sets.",
                )


def parameter_rule(holds: bool, rule: str) -> None:
    """Stop a run whose parameters break a rule between them (``rows >= files``), with that rule.

    Call it right after :func:`check_parameters`, once per rule, e.g.
    ``parameter_rule(rows >= files, "rows >= files: every file gets rows")``."""
    if not holds:
        raise DeltaLabError(f"The parameters break a rule of this notebook: {rule}.",
                            fix="Change the -p values so that the rule holds; the parameters cell says what each one sets.")
