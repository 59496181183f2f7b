"""Build-time helper: docker/Dockerfile copies it to /opt/deltalab/build and runs it.

Writes the image's pip inputs from the repository's own files, so that the image installs
exactly the versions of requirements.lock (run in the directory holding pyproject.toml and
requirements.lock; the output directory is the first argument, default /tmp):
  image-requirements.txt  the package's dependencies, its `course`, `labs` (nbgrader) and
                          `classroom` (JupyterHub) extras, pytest, nbval, pytest-xdist and
                          websocket-client (the in-container suites: the notebooks, the labs'
                          solutions, a classroom); not the browser-test tools of the `test` extra;
  image-constraints.txt   requirements.lock, except the pins in OVERRIDES when the image's
                          Python (Debian bookworm: 3.11.2) is older than the pinned release allows.
"""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

IMAGE_TOOLS = ["pytest", "nbval", "pytest-xdist", "websocket-client"]
#: The extras the image carries: the course, nbgrader for an instructor's server, and JupyterHub,
#: so that one image serves a classroom (python -m deltalab classroom) as well as one learner.
IMAGE_EXTRAS = ["course", "labs", "classroom"]

# name -> (pin, the first Python that can use the locked version, why). Remove an entry once
# requirements.lock itself pins a version that installs on Python 3.11.2.
# (requirements.lock pins soupsieve 2.10 because 3.0.2 and later need Python >= 3.11.5, which
# bookworm's 3.11.2 is not: the lock works on Debian 12 as it is, so no override is needed today.)
OVERRIDES: dict[str, tuple[str, tuple[int, int, int], str]] = {}


def base_name(requirement: str) -> str:
    """The distribution name of a requirement string (``pandas>=2.2,<3`` -> ``pandas``)."""
    return re.split(r"[ <>=!~;\[]", requirement.strip(), maxsplit=1)[0]


def canonical(name: str) -> str:
    """PEP 503 normalised name, for comparing ``nest_asyncio2`` with ``nest-asyncio2``."""
    return re.sub(r"[-_.]+", "-", name).lower()


def image_requirements(pyproject_text: str) -> list[str]:
    """The names of what the image installs (versions come from the constraints)."""
    project = tomllib.loads(pyproject_text)["project"]
    extras = project["optional-dependencies"]
    wanted = project["dependencies"] + [name for extra in IMAGE_EXTRAS for name in extras[extra]] + IMAGE_TOOLS
    return [base_name(requirement) for requirement in wanted]


def image_constraints(lock_text: str, python: tuple[int, int, int]) -> tuple[list[str], list[str]]:
    """The lock's lines with OVERRIDES applied for ``python``; also the messages saying what changed."""
    overrides = {canonical(k): v for k, v in OVERRIDES.items() if python < v[1]}
    lines, changes = [], []
    for line in lock_text.splitlines():
        name = canonical(base_name(line)) if line.strip() and not line.startswith("#") else ""
        if name in overrides:
            pin, _, why = overrides[name]
            changes.append(f"{line.strip()} -> {name}=={pin} ({why})")
            line = f"{name}=={pin}"
        lines.append(line)
    return lines, changes


def main(argv: list[str]) -> None:
    out = Path(argv[1] if len(argv) > 1 else "/tmp")
    (out / "image-requirements.txt").write_text("\n".join(image_requirements(Path("pyproject.toml").read_text())) + "\n")
    lines, changes = image_constraints(Path("requirements.lock").read_text(), tuple(sys.version_info[:3]))
    for change in changes:
        print(f"image-requirements: {change}")
    (out / "image-constraints.txt").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main(sys.argv)
