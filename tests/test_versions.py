"""deltalab.versions and the pins: requirements.lock is the one source of truth, every install
route uses it, and what doctor checks and what is installed match it."""

from __future__ import annotations

import re
import tomllib

from course_testing import REPO


def _lock() -> dict[str, str]:
    pins = {}
    for line in (REPO / "requirements.lock").read_text().splitlines():
        if line and not line.startswith("#"):
            name, version = line.split("==")
            pins[name.lower().replace("_", "-")] = version
    return pins


def test_lock_satisfies_pyproject():
    from packaging.requirements import Requirement

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    requirements = list(project["dependencies"])
    for extra in project["optional-dependencies"].values():
        requirements += extra
    pins = _lock()
    for text in requirements:
        requirement = Requirement(text.split("#")[0].strip())
        name = requirement.name.lower().replace("_", "-")
        assert name in pins, f"{name} is in pyproject.toml but not pinned in requirements.lock"
        assert requirement.specifier.contains(pins[name], prereleases=True), f"lock pins {name}=={pins[name]}, pyproject wants {requirement}"
    from deltalab.versions import PINNED_PYTHON_PACKAGES

    assert {name: pins[name] for name in PINNED_PYTHON_PACKAGES} == PINNED_PYTHON_PACKAGES, (
        "deltalab.versions.PINNED_PYTHON_PACKAGES (what doctor checks) must match requirements.lock"
    )
    assert int(pins["pandas"].split(".")[0]) < 3


def test_every_route_installs_from_the_lock():
    environment = (REPO / "environment.yml").read_text()
    assert "-c requirements.lock" in environment and "openjdk=17" in environment
    assert not re.search(r"^\s*-\s*(pyspark|delta-spark|pandas|jupyterlab)", environment, re.M), "environment.yml must not pin packages itself"
    makefile = (REPO / "Makefile").read_text()
    assert "-c requirements.lock" in makefile
    dockerfile = REPO / "docker" / "Dockerfile"
    if dockerfile.exists():
        assert "requirements.lock" in dockerfile.read_text()


def test_installed_versions_match_the_lock():
    from deltalab.versions import installed_version

    for name in ("pyspark", "delta-spark", "pandas", "pyarrow", "nbval", "papermill"):
        assert installed_version(name) == _lock()[name], f"{name} installed differs from requirements.lock: run make setup"
