"""deltalab.doctor: `python -m deltalab doctor` in a fresh process, on this machine and on one
without Java and without the jar cache."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

PYTHON = sys.executable


def test_doctor_reports_every_check(tmp_path):
    env = dict(os.environ, DELTALAB_WORKDIR=str(tmp_path / "work"))
    completed = subprocess.run([PYTHON, "-m", "deltalab", "doctor"], capture_output=True, text=True, env=env, timeout=120)
    assert completed.returncode == 0, completed.stdout + completed.stderr
    for name in ("Python", "Java", "Packages", "Delta jars", "Network", "Work directory", "Spark master"):
        assert re.search(rf"^\[  ok\] {name}\b", completed.stdout, re.M), completed.stdout


def test_doctor_names_the_fix_for_a_missing_java_and_cache(tmp_path):
    env = dict(os.environ, PATH=f"{Path(PYTHON).parent}", DELTALAB_CACHE_DIR=str(tmp_path / "cache"), DELTALAB_WORKDIR=str(tmp_path / "work"))
    env.pop("JAVA_HOME", None)
    completed = subprocess.run([PYTHON, "-m", "deltalab", "doctor"], capture_output=True, text=True, env=env, timeout=120)
    assert completed.returncode == 1
    assert "[FAIL] Java" in completed.stdout and "fix: Install Java 17 or 21" in completed.stdout
    assert "[FAIL] Delta jars" in completed.stdout and "fetch-jars" in completed.stdout


def test_quiet_doctor_and_fetch_jars_say_nothing_when_all_is_ready(tmp_path):
    """What `make lab` runs before JupyterLab: silent on a ready machine, so its URL is not buried."""
    env = dict(os.environ, DELTALAB_WORKDIR=str(tmp_path / "work"))
    for command in (["doctor", "--quiet"], ["fetch-jars", "--quiet"]):
        completed = subprocess.run([PYTHON, "-m", "deltalab", *command], capture_output=True, text=True, env=env, timeout=300)
        assert completed.returncode == 0, completed.stdout + completed.stderr
        assert completed.stdout == "" and completed.stderr == "", (command, completed.stdout, completed.stderr)


def test_quiet_doctor_still_names_what_fails(tmp_path):
    env = dict(os.environ, PATH=f"{Path(PYTHON).parent}", DELTALAB_CACHE_DIR=str(tmp_path / "cache"), DELTALAB_WORKDIR=str(tmp_path / "work"))
    env.pop("JAVA_HOME", None)
    completed = subprocess.run([PYTHON, "-m", "deltalab", "doctor", "--quiet"], capture_output=True, text=True, env=env, timeout=120)
    assert completed.returncode == 1
    assert "[FAIL] Java" in completed.stdout and "fix: Install Java 17 or 21" in completed.stdout
    assert "[  ok]" not in completed.stdout, completed.stdout
