"""Helpers the test modules import (a uniquely named module: `from conftest import ...` can pick up
labs/conftest.py instead of this folder's when pytest-xdist imports both)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def in_ci() -> bool:
    """True on the course's CI, where a missing tool is a failure rather than a reason to skip."""
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def require(condition: bool, reason: str) -> None:
    """Skip the calling test when ``condition`` is false, except on CI, where it fails."""
    if not condition:
        if in_ci():
            pytest.fail(f"required on CI: {reason}")
        pytest.skip(reason)
