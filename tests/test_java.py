"""deltalab.java: finding a Java Spark can run on, with fake `java` executables (no JVM starts)."""

from __future__ import annotations

import re
import stat
from pathlib import Path

import pytest

from deltalab.errors import DeltaLabError
from deltalab.java import find_java, parse_java_version


@pytest.mark.parametrize(
    "text, expected",
    [
        ("    java.version = 17.0.15\n", ("17.0.15", 17)),
        ("    java.version = 21\n", ("21", 21)),
        ('openjdk version "1.8.0_392"\n', ("1.8.0_392", 8)),
        ('openjdk version "11.0.2" 2019-01-15\n', ("11.0.2", 11)),
    ],
)
def test_parse_java_version(text, expected):
    assert parse_java_version(text) == expected


def _fake_java(directory: Path, version: str) -> Path:
    """A `java` executable that reports the given version, as `java -XshowSettings` would."""
    bin_dir = directory / "bin"
    bin_dir.mkdir(parents=True)
    java = bin_dir / "java"
    java.write_text(f"#!/bin/sh\necho '    java.version = {version}' >&2\n")
    java.chmod(java.stat().st_mode | stat.S_IEXEC)
    return java


def test_java_home_without_java_is_named(tmp_path, monkeypatch):
    monkeypatch.setenv("JAVA_HOME", str(tmp_path))
    with pytest.raises(DeltaLabError, match="JAVA_HOME is set to .* no bin/java") as error:
        find_java()
    assert "apt-get install openjdk-17" in str(error.value)


def test_no_java_at_all(tmp_path, monkeypatch):
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(DeltaLabError, match="No Java runtime found") as error:
        find_java()
    assert "environment.yml" in str(error.value) and "Docker" in str(error.value)


@pytest.mark.parametrize("version", ["11.0.22", "1.8.0_392", "25.0.1"])
def test_unsupported_java_is_refused(tmp_path, monkeypatch, version):
    _fake_java(tmp_path, version)
    monkeypatch.setenv("JAVA_HOME", str(tmp_path))
    with pytest.raises(DeltaLabError, match=f"Java {re.escape(version)} found .* needs Java 17 or 21"):
        find_java()


def test_supported_java_from_java_home(tmp_path, monkeypatch):
    _fake_java(tmp_path, "21.0.5")
    monkeypatch.setenv("JAVA_HOME", str(tmp_path))
    java = find_java()
    assert (java.major, java.source) == (21, "JAVA_HOME")
