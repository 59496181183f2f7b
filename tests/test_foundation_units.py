"""Unit tests of deltalab's foundation that need no Spark session: Java, master URLs,
work directories, parameters, trees, the jar cache's bookkeeping and the pins."""

from __future__ import annotations

import os
import re
import stat
import tomllib
from pathlib import Path

import pytest

from deltalab.errors import DeltaLabError


# --- Java ---------------------------------------------------------------------------------

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


# --- master URLs --------------------------------------------------------------------------

from deltalab.session import SHORT_RUN_JAVA_OPTIONS, _on_loopback, default_conf, resolve_master


@pytest.mark.parametrize("url", ["local", "local[*]", "local[2]", "local[4,2]", "local-cluster[1,1,1024]", "yarn"])
def test_valid_local_masters(url):
    assert resolve_master(url) == url


def test_default_master_and_env(monkeypatch):
    monkeypatch.delenv("SPARK_MASTER", raising=False)
    assert resolve_master() == "local[*]"
    monkeypatch.setenv("SPARK_MASTER", "local[1]")
    assert resolve_master() == "local[1]"


@pytest.mark.parametrize("url", ["lcoal[*]", "local[0]", "spark://nohostport", "http://127.0.0.1:7077"])
def test_malformed_master_is_refused(url):
    with pytest.raises(DeltaLabError, match="is not a Spark master URL"):
        resolve_master(url)


def test_unreachable_standalone_master(monkeypatch):
    monkeypatch.setenv("SPARK_MASTER", "spark://127.0.0.1:9")
    with pytest.raises(DeltaLabError, match=r"No Spark master answers at spark://127.0.0.1:9 \(from SPARK_MASTER\)"):
        resolve_master()


@pytest.mark.parametrize("url, on_this_machine", [
    ("spark://127.0.0.1:7077", True), ("spark://localhost:7077,127.0.0.1:7078", True),
    ("spark://10.0.0.5:7077", False), ("spark://127.0.0.1:7077,spark-master:7077", False), ("local[*]", False),
])
def test_executors_of_a_cluster_on_this_machine_get_the_short_run_java_options(tmp_path, url, on_this_machine):
    """They share the machine's cores with the driver; a remote cluster's executors keep Java's defaults."""
    conf = default_conf([], tmp_path, local=url.startswith("local"), executors_share_this_machine=_on_loopback(url))
    assert SHORT_RUN_JAVA_OPTIONS in conf["spark.driver.extraJavaOptions"]
    assert conf.get("spark.executor.extraJavaOptions") == (SHORT_RUN_JAVA_OPTIONS if on_this_machine else None)


# --- work directories ---------------------------------------------------------------------

from deltalab.locations import ROOT_MARKER, repo_root, work_root
from deltalab.workdir import workdir


def test_workdir_is_emptied_and_under_root(tmp_path, monkeypatch):
    monkeypatch.setenv("DELTALAB_WORKDIR", str(tmp_path / "root"))
    first = workdir("demo")
    (first / "table").mkdir()
    (first / "table" / "file.txt").write_text("x")
    again = workdir("demo")
    assert again == tmp_path / "root" / "demo"
    assert list(again.iterdir()) == []
    kept = workdir("demo", fresh=False)
    assert kept == again


def test_workdir_inside_repo_is_refused(monkeypatch):
    repo = repo_root()
    assert repo is not None, "tests run from an editable install"
    monkeypatch.setenv("DELTALAB_WORKDIR", str(repo / "work"))
    with pytest.raises(DeltaLabError, match="inside the course repository"):
        workdir("demo")
    assert not (repo / "work").exists(), "nothing created in the repository"


def test_workdir_not_writable(tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("DELTALAB_WORKDIR", str(blocker / "root"))
    with pytest.raises(DeltaLabError, match="cannot be written"):
        workdir("demo")


def test_foreign_root_is_not_used(tmp_path, monkeypatch):
    (tmp_path / "somebody-elses.txt").write_text("keep me")
    monkeypatch.setenv("DELTALAB_WORKDIR", str(tmp_path))
    with pytest.raises(DeltaLabError, match="already holds other files"):
        work_root()
    assert (tmp_path / "somebody-elses.txt").exists()
    assert not (tmp_path / ROOT_MARKER).exists()


@pytest.mark.parametrize("name", ["", "../escape", "a/b", ".hidden", "x y"])
def test_bad_workdir_names(tmp_path, monkeypatch, name):
    monkeypatch.setenv("DELTALAB_WORKDIR", str(tmp_path / "root"))
    with pytest.raises(DeltaLabError, match="is not a work directory name"):
        workdir(name)


# --- notebook parameters ------------------------------------------------------------------

from deltalab.params import check_parameters, injected_parameter_names


def test_injected_names_from_history():
    history = ["rows = 10", "# Parameters\nrows = 37\nseed = 1\n", "print(rows)"]
    assert injected_parameter_names(history) == {"rows", "seed"}
    assert injected_parameter_names(["rows = 10"]) == set()


def test_unknown_parameter_is_named():
    namespace = {"In": ["", "rows = 10", "# Parameters\nrowz = 37\n"], "rows": 10, "rowz": 37}
    with pytest.raises(DeltaLabError, match=r"Unknown notebook parameter rowz: this notebook takes rows \(int\)"):
        check_parameters(namespace, rows=int)


@pytest.mark.parametrize("value", ["37", 3.5, True, -1])
def test_wrong_parameter_values(value):
    with pytest.raises(DeltaLabError, match="The parameter rows must be"):
        check_parameters({"rows": value}, rows=int)


def test_good_parameters_pass():
    check_parameters({"In": ["# Parameters\nrows = 37\n"], "rows": 37, "ratio": 1}, rows=int, ratio=float)


# --- trees --------------------------------------------------------------------------------

from deltalab.files import human_size, tree_lines


def test_tree_lines(tmp_path):
    table = tmp_path / "t"
    (table / "_delta_log").mkdir(parents=True)
    (table / "_delta_log" / "00000000000000000000.json").write_text("{}\n")
    (table / "_delta_log" / "00000000000000000000.crc").write_text("{}")
    (table / "part-00000.parquet").write_bytes(b"x" * 2048)
    assert tree_lines(table) == [
        "t/",
        "├── _delta_log/",
        "│   ├── 00000000000000000000.crc  (2 B)",
        "│   └── 00000000000000000000.json  (3 B)",
        "└── part-00000.parquet  (2.0 KiB)",
    ]
    assert "00000000000000000000.crc  (2 B)" not in "\n".join(tree_lines(table, hide_crc=True))
    assert human_size(5 * 2**20) == "5.0 MiB"
    with pytest.raises(FileNotFoundError):
        tree_lines(tmp_path / "missing")


# --- jar cache bookkeeping ----------------------------------------------------------------

from deltalab import jars as jar_cache


def test_half_finished_download_is_not_a_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("DELTALAB_CACHE_DIR", str(tmp_path))
    target = jar_cache.jar_dir()
    target.mkdir(parents=True)
    (target / "a.jar").write_bytes(b"PK\x03\x04partial")
    assert jar_cache.cached_jars() is None, "no manifest: not a cache entry"
    (target / jar_cache.MANIFEST_NAME).write_text("0" * 64 + " 999 a.jar\n")
    assert jar_cache.cached_jars() is None, "size differs from the manifest: not a cache entry"
    (target / jar_cache.MANIFEST_NAME).write_text("0" * 64 + f" {(target / 'a.jar').stat().st_size} a.jar\n")
    assert jar_cache.cached_jars() == [target / "a.jar"]


def test_jar_dir_names_the_pinned_artifact(tmp_path, monkeypatch):
    monkeypatch.setenv("DELTALAB_CACHE_DIR", str(tmp_path))
    assert jar_cache.jar_dir() == tmp_path / "jars" / "delta-spark_4.2_2.13-4.4.0"


# --- pins: one source of truth ------------------------------------------------------------

REPO = Path(__file__).resolve().parents[1]


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


def test_sessions_add_only_the_jars_spark_does_not_ship(tmp_path):
    """Ivy's tree holds older copies of Spark's own libraries; a session adds only the rest."""
    from deltalab.jars import session_jars, spark_jars_dir

    shipped = {p.name for p in spark_jars_dir().glob("*.jar")}
    assert any(name.startswith("jackson-databind-") for name in shipped)
    cached = [tmp_path / name for name in (
        "io.delta_delta-spark_4.2_2.13-4.4.0.jar", "io.delta_delta-storage-4.4.0.jar",
        "com.fasterxml.jackson.core_jackson-databind-2.13.5.jar", "org.apache.hadoop_hadoop-client-runtime-3.4.2.jar",
    )]
    assert [jar.name for jar in session_jars(cached)] == ["io.delta_delta-spark_4.2_2.13-4.4.0.jar",
                                                           "io.delta_delta-storage-4.4.0.jar"]


def test_the_s3_jar_set_matches_the_hadoop_inside_pyspark(tmp_path, monkeypatch):
    monkeypatch.setenv("DELTALAB_CACHE_DIR", str(tmp_path))
    from deltalab.versions import hadoop_version

    assert hadoop_version() == "3.5.0", "pyspark 4.2.0 ships Hadoop 3.5.0"
    s3 = jar_cache.jar_set("s3")
    assert s3.packages[0] == "org.apache.hadoop:hadoop-aws:3.5.0" and "software.amazon.awssdk:bundle" in s3.excludes
    assert jar_cache.jar_dir("s3") == tmp_path / "jars" / "s3-hadoop-aws-3.5.0"
    with pytest.raises(DeltaLabError, match="no jar set called"):
        jar_cache.jar_set("gcs")


def test_was_interrupted_follows_the_context_of_an_error() -> None:
    from deltalab.session import was_interrupted

    def raised_while_handling_an_interrupt() -> BaseException:
        try:
            try:
                raise KeyboardInterrupt
            finally:
                raise ConnectionError("Answer from Java side is empty")
        except ConnectionError as error:
            return error

    assert was_interrupted(KeyboardInterrupt())
    assert was_interrupted(raised_while_handling_an_interrupt())
    assert not was_interrupted(ValueError("no interrupt"))
    assert not was_interrupted(None)


@pytest.mark.parametrize("repeat", ["0", "-2", "three"])
def test_bench_refuses_a_repeat_count_below_one(repeat, capsys) -> None:
    from deltalab.__main__ import main

    with pytest.raises(SystemExit) as exit_:
        main(["bench", "--skip-notebooks", "--repeat", repeat])
    assert exit_.value.code == 2
    assert f"{repeat!r} is not a whole number of 1 or more" in capsys.readouterr().err
