"""The JVM class archive (deltalab.class_archive): which option a driver starts with, and when."""

from __future__ import annotations


from deltalab import class_archive
from deltalab.java import find_java


def test_the_archive_name_follows_the_class_path_and_java(tmp_path, monkeypatch):
    monkeypatch.setenv("DELTALAB_CACHE_DIR", str(tmp_path / "cache"))
    java_home = find_java().home
    one, other = tmp_path / "a.jar", tmp_path / "b.jar"
    one.write_bytes(b"1")
    other.write_bytes(b"22")
    first = class_archive.archive_path([one], java_home)
    assert first == class_archive.archive_path([one], java_home), "the same class path, the same archive"
    assert first != class_archive.archive_path([one, other], java_home), "another class path, another archive"
    assert first.parent == tmp_path / "cache" / "jvm" and first.suffix == ".jsa"


def test_the_archive_name_counts_file_times_in_whole_seconds(tmp_path, monkeypatch):
    """An image layer keeps whole seconds of a file's time; the JVM compares whole seconds too."""
    import os

    monkeypatch.setenv("DELTALAB_CACHE_DIR", str(tmp_path / "cache"))
    java_home = find_java().home
    jar = tmp_path / "a.jar"
    jar.write_bytes(b"1")
    os.utime(jar, ns=(1_700_000_000_123_456_789, 1_700_000_000_123_456_789))   # as the build wrote it
    built = class_archive.archive_path([jar], java_home)
    os.utime(jar, ns=(1_700_000_000_000_000_000, 1_700_000_000_000_000_000))   # as a container sees it
    assert class_archive.archive_path([jar], java_home) == built, "the same jar in a container, the same archive"
    os.utime(jar, ns=(1_700_000_001_000_000_000, 1_700_000_001_000_000_000))
    assert class_archive.archive_path([jar], java_home) != built, "a jar written again, another archive"


def test_the_option_uses_an_archive_only_when_it_exists_and_is_not_switched_off(tmp_path, monkeypatch):
    monkeypatch.setenv("DELTALAB_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv(class_archive.ARCHIVE_ENV, raising=False)
    monkeypatch.delenv(class_archive.ARCHIVE_OFF_ENV, raising=False)
    java_home = find_java().home
    jars = [tmp_path / "a.jar"]
    assert class_archive.archive_option(jars, java_home) == "", "no archive yet: start the ordinary way"
    path = class_archive.archive_path(jars, java_home)
    path.parent.mkdir(parents=True)
    path.write_bytes(b"")
    assert class_archive.archive_option(jars, java_home) == f"-XX:SharedArchiveFile={path} -Xshare:auto"
    monkeypatch.setenv(class_archive.ARCHIVE_OFF_ENV, "off")
    assert class_archive.archive_option(jars, java_home) == ""
    monkeypatch.setenv(class_archive.ARCHIVE_ENV, str(tmp_path / "new.jsa"))
    assert class_archive.archive_option(jars, java_home) == f"-XX:ArchiveClassesAtExit={tmp_path / 'new.jsa'}"


def test_the_course_session_maps_the_archive_when_setup_built_it(spark):
    from deltalab.jars import fetch_jars, session_jars

    path = class_archive.archive_path(session_jars(fetch_jars("delta")), find_java().home)
    options = spark.conf.get("spark.driver.extraJavaOptions")
    if path.is_file():
        assert f"-XX:SharedArchiveFile={path}" in options
        # The JVM took the option (it would have refused to start on a malformed one).
        bean = spark._jvm.java.lang.management.ManagementFactory.getPlatformMXBean(
            spark._jvm.java.lang.Class.forName("com.sun.management.HotSpotDiagnosticMXBean"))
        assert bean.getVMOption("SharedArchiveFile").getValue() == str(path)
    else:
        assert "SharedArchiveFile" not in options


def test_only_the_newest_archives_stay_in_the_cache(tmp_path):
    import os

    for age, name in enumerate(["newest", "newer", "older", "oldest"]):
        archive = tmp_path / f"classes-{name}.jsa"
        archive.write_bytes(b"")
        os.utime(archive, (1_700_000_000 - age * 60, 1_700_000_000 - age * 60))
    (tmp_path / "unrelated.txt").write_text("kept")
    removed = class_archive.prune_archives(tmp_path, keep=3)
    assert [p.name for p in removed] == ["classes-oldest.jsa"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["classes-newer.jsa", "classes-newest.jsa", "classes-older.jsa", "unrelated.txt"]
