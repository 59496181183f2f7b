"""Shared test setup: a temporary work root for everything the suite runs, and one Spark session.

nbval starts one kernel per notebook; those kernels inherit this process's environment, so
setting DELTALAB_WORKDIR here keeps every notebook's tables in the temporary root too.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
_TEMPORARY_ROOT: str | None = None


def pytest_configure(config: pytest.Config) -> None:
    global _TEMPORARY_ROOT
    _TEMPORARY_ROOT = tempfile.mkdtemp(prefix="deltalab-tests-")
    os.environ["DELTALAB_WORKDIR"] = _TEMPORARY_ROOT
    # Matplotlib must never try to open a window while tests run.
    os.environ.setdefault("MPLBACKEND", "Agg")


def pytest_unconfigure(config: pytest.Config) -> None:
    if _TEMPORARY_ROOT:
        shutil.rmtree(_TEMPORARY_ROOT, ignore_errors=True)


def in_ci() -> bool:
    """True on the course's CI, where a missing tool is a failure rather than a reason to skip."""
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def require(condition: bool, reason: str) -> None:
    """Skip the calling test when ``condition`` is false, except on CI, where it fails."""
    if not condition:
        if in_ci():
            pytest.fail(f"required on CI: {reason}")
        pytest.skip(reason)


@pytest.fixture(scope="session")
def spark():
    """The Delta-enabled session of this pytest process (one per xdist worker)."""
    from deltalab import get_spark

    return get_spark("pytest")


@pytest.fixture(scope="session")
def repo() -> Path:
    """The repository's root folder."""
    return REPO
