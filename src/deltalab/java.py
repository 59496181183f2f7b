"""Finding a Java runtime Spark 4.2 can run on, before Spark tries and fails noisily."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from deltalab.errors import DeltaLabError
from deltalab.versions import SUPPORTED_JAVA_MAJORS

INSTALL_HELP = (
    "Install Java 17 or 21 and make it the `java` on your PATH, or set JAVA_HOME to it:\n"
    "  Debian/Ubuntu: sudo apt-get install openjdk-17-jre-headless\n"
    "  macOS:         brew install openjdk@17   (then follow brew's note to link it)\n"
    "  Windows:       winget install Microsoft.OpenJDK.17\n"
    "Or use a route that needs no system Java: the conda environment "
    "(`conda env create -f environment.yml` brings openjdk 17) or the Docker image (docker/README.md)."
)


@dataclass(frozen=True)
class JavaRuntime:
    """A Java runtime found on this machine."""

    executable: Path
    home: Path
    version: str
    major: int
    source: str  # "JAVA_HOME" or "PATH"


def parse_java_version(text: str) -> tuple[str, int]:
    """Read the version from the output of ``java -XshowSettings:properties -version``.

    Returns the full version string and its major number (8 for ``1.8.0_392``).
    """
    match = re.search(r"java\.version = (\S+)", text) or re.search(r'version "([^"]+)"', text)
    if match is None:
        raise ValueError("no Java version in the output")
    version = match.group(1)
    parts = version.split(".")
    major = int(parts[1]) if parts[0] == "1" else int(re.match(r"\d+", parts[0]).group(0))
    return version, major


def _candidate() -> tuple[Path, str]:
    java_home = os.environ.get("JAVA_HOME")
    if java_home:
        executable = Path(java_home) / "bin" / ("java.exe" if os.name == "nt" else "java")
        if not executable.exists():
            raise DeltaLabError(
                f"JAVA_HOME is set to {java_home}, but there is no bin/java in it.",
                fix="Point JAVA_HOME at a Java 17 or 21 installation, or unset it to use the `java` on your PATH.\n"
                + INSTALL_HELP,
            )
        return executable, "JAVA_HOME"
    found = shutil.which("java")
    if found is None:
        raise DeltaLabError("No Java runtime found: JAVA_HOME is not set and there is no `java` on the PATH.", fix=INSTALL_HELP)
    return Path(found), "PATH"


def find_java() -> JavaRuntime:
    """Return the Java runtime Spark will use, or raise DeltaLabError saying how to get one.

    JAVA_HOME wins over the PATH, as in Spark's own launcher. Only the versions Spark 4.2
    supports (17 and 21) are accepted.
    """
    executable, source = _candidate()
    try:
        completed = subprocess.run(
            [str(executable), "-XshowSettings:properties", "-version"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        version, major = parse_java_version(completed.stderr + completed.stdout)
    except (OSError, subprocess.TimeoutExpired, ValueError) as error:
        raise DeltaLabError(f"{executable} (from {source}) did not run as Java: {error}.", fix=INSTALL_HELP) from None
    home = executable.resolve().parent.parent
    if major not in SUPPORTED_JAVA_MAJORS:
        raise DeltaLabError(
            f"Java {version} found at {executable} (from {source}); Spark 4.2 needs Java 17 or 21.",
            fix=INSTALL_HELP,
        )
    return JavaRuntime(executable=executable, home=home, version=version, major=major, source=source)
