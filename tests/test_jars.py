"""deltalab.jars: the jar cache's bookkeeping, the jars a session adds, the S3A set, and Delta's
jars downloaded once: a first run without network fails clearly, a later one needs none (each in a
fresh process in a network namespace of its own)."""

from __future__ import annotations

import os
import time

import pytest

from course_testing import require
from deltalab import jars as jar_cache
from deltalab.errors import DeltaLabError
from deltalab.jars import cached_jars
from process_testing import can_unshare, run_python


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


def test_a_fetch_keeps_only_the_jars_spark_does_not_ship(tmp_path, monkeypatch):
    """What Ivy resolves for Delta includes older copies of Spark's own libraries: the cache keeps
    none of them (they cost 72 MiB of every cache and image, and no session loads them)."""
    import zipfile

    monkeypatch.setenv("DELTALAB_CACHE_DIR", str(tmp_path / "cache"))

    def resolved(staging, java_home, timeout, wanted):
        folder = staging / "ivy" / "jars"
        folder.mkdir(parents=True)
        names = ["io.delta_delta-spark_4.2_2.13-4.4.0.jar", "com.fasterxml.jackson.core_jackson-databind-2.13.5.jar",
                 "org.apache.hadoop_hadoop-client-runtime-3.4.2.jar", "io.delta_delta-storage-4.4.0.jar"]
        for name in names:
            with zipfile.ZipFile(folder / name, "w") as jar:
                jar.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\n")
        return sorted(folder.glob("*.jar"))

    monkeypatch.setattr(jar_cache, "_resolve_into", resolved)
    kept = jar_cache.fetch_jars()
    assert [jar.name for jar in kept] == ["io.delta_delta-spark_4.2_2.13-4.4.0.jar", "io.delta_delta-storage-4.4.0.jar"]
    assert sorted(p.name for p in jar_cache.jar_dir().iterdir()) == sorted([jar_cache.MANIFEST_NAME] + [j.name for j in kept])
    assert jar_cache.cached_jars() == kept


def test_the_s3_jar_set_matches_the_hadoop_inside_pyspark(tmp_path, monkeypatch):
    monkeypatch.setenv("DELTALAB_CACHE_DIR", str(tmp_path))
    from deltalab.versions import hadoop_version

    assert hadoop_version() == "3.5.0", "pyspark 4.2.0 ships Hadoop 3.5.0"
    s3 = jar_cache.jar_set("s3")
    assert s3.packages[0] == "org.apache.hadoop:hadoop-aws:3.5.0" and "software.amazon.awssdk:bundle" in s3.excludes
    assert jar_cache.jar_dir("s3") == tmp_path / "jars" / "s3-hadoop-aws-3.5.0"
    with pytest.raises(DeltaLabError, match="no jar set called"):
        jar_cache.jar_set("gcs")


# --- the network, once ------------------------------------------------------------------------

def test_first_run_without_network_fails_clearly_and_leaves_no_cache(tmp_path):
    require(can_unshare(), "unshare -n (network namespaces) is not available")
    cache = tmp_path / "cache"
    env = dict(os.environ, DELTALAB_CACHE_DIR=str(cache), DELTALAB_WORKDIR=str(tmp_path / "work"))
    completed = run_python("from deltalab import get_spark; get_spark()", env, offline=True)
    assert completed.returncode != 0
    assert "could not be downloaded from Maven Central" in completed.stderr
    assert "needs the network once" in completed.stderr
    leftovers = [p.name for p in (cache / "jars").iterdir()] if (cache / "jars").exists() else []
    assert leftovers == [], f"nothing half-created in the jar cache, found {leftovers}"


def test_second_session_writes_delta_with_no_network(tmp_path):
    require(can_unshare(), "unshare -n (network namespaces) is not available")
    assert cached_jars(), "make setup caches the jars before the suite runs"
    code = (
        "from deltalab import get_spark, workdir\n"
        "spark = get_spark('offline')\n"
        "path = str(workdir('offline') / 't')\n"
        "spark.range(7).write.format('delta').save(path)\n"
        "print('rows', spark.read.format('delta').load(path).count())\n"
    )
    env = dict(os.environ, DELTALAB_WORKDIR=str(tmp_path / "work"))
    started = time.monotonic()
    completed = run_python(code, env, offline=True)
    assert completed.returncode == 0, completed.stderr[-2000:]
    assert "rows 7" in completed.stdout
    assert (tmp_path / "work" / "offline" / "t" / "_delta_log" / "00000000000000000000.json").exists()
    print(f"offline cold start to first Delta write: {time.monotonic() - started:.1f} s")
