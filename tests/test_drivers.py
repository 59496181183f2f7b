"""Tests of deltalab.drivers: a second Spark driver in its own process, driven from this one (no mocks).

One driver serves the whole module (a JVM start is the expensive part); a second one is started
by a throw-away owner process that is then killed, to show a driver never outlives its kernel.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
import zipfile
from pathlib import Path

import pytest

from deltalab import concurrency as cc
from deltalab import drivers
from deltalab.errors import DeltaLabError
from deltalab.holds import Hold
from deltalab.log import commit_info, commit_versions, latest_version
from deltalab.processes import is_running, process_tree
from driver_probes import PROBES_ENV, class_path_has

PROBE = "deltalab/probe/driver-probe.txt"   # a resource only the driver's extra jar holds


def probe_jar(folder: Path) -> Path:
    """A jar (a zip file) holding one resource, so a test can see whether it is on a class path."""
    jar = folder / "probe.jar"
    with zipfile.ZipFile(jar, "w") as archive:
        archive.writestr(PROBE, "on the class path")
    return jar


@pytest.fixture(scope="module")
def driver(tmp_path_factory):
    folder = tmp_path_factory.mktemp("driver")
    started = drivers.start_driver("pytest-driver-b", folder / "signals", conf={"spark.sql.shuffle.partitions": "3"},
                                   jars=[probe_jar(folder)], env={"DELTALAB_PROBE": "from the kernel", **PROBES_ENV})
    assert not (started.signal_dir / "ready.json").exists(), "start_driver returns before the driver's Spark runs"
    yield started
    if started.process.poll() is None:
        started.stop()


# ----------------------------------------------------------------------------- no Spark needed


def test_a_missing_jar_is_refused_before_anything_starts(tmp_path) -> None:
    with pytest.raises(DeltaLabError, match="do not exist"):
        drivers.start_driver("nope", tmp_path / "signals", jars=[tmp_path / "missing.jar"])


# ----------------------------------------------------------------------------- one real driver


def test_the_driver_has_its_settings_jars_and_environment(driver, spark) -> None:
    assert driver.wait_ready() > 0
    settings = driver.call("driver_probes.session_settings", ["spark.sql.shuffle.partitions", "spark.sql.extensions"])
    assert settings == {"spark.sql.shuffle.partitions": "3", "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension"}
    assert driver.call("driver_probes.class_path_has", PROBE) is True, "the extra jar is on the driver's class path"
    assert driver.call("driver_probes.class_path_has", "io.delta.tables.DeltaTable") is True, "next to Delta's"
    assert class_path_has(spark, PROBE) is False, "and only there"
    assert driver.call("os.getenv", "DELTALAB_PROBE", with_spark=False) == "from the kernel"
    assert driver.call("os.getpid", with_spark=False) != os.getpid()


def test_the_driver_writes_a_table_this_kernel_reads(driver, spark, tmp_path) -> None:
    path = tmp_path / "written_by_b"
    assert driver.call("deltalab.concurrency.make_pair_table", path) is None   # a Path argument is sent as str
    assert commit_versions(path) == [0] and spark.read.format("delta").load(str(path)).count() == 20


def test_remote_errors_come_back_as_one_line(driver, tmp_path) -> None:
    with pytest.raises(drivers.DriverCallError) as caught:
        driver.call("deltalab.log.latest_version", str(tmp_path / "no_table"), with_spark=False)
    assert caught.value.remote_class == "DeltaLabError" and "no_table" in caught.value.remote_message
    assert "\n" not in caught.value.remote_message and "latest_version failed in the second driver" in str(caught.value)
    with pytest.raises(drivers.DriverCallError, match="not JSON-able"):
        driver.call("deltalab.drivers.in_this_kernel")
    with pytest.raises(drivers.DriverCallError) as unknown:
        driver.call("deltalab.no_such_module.f")
    assert unknown.value.remote_class == "ModuleNotFoundError"
    with pytest.raises(DeltaLabError, match="not JSON-able"):
        driver.submit("os.getenv", object(), with_spark=False)
    assert driver.call("os.getenv", "HOME", with_spark=False), "the driver goes on after errors"


def test_a_call_is_held_until_released(driver) -> None:
    hold = driver.hold("plain")
    pending = driver.submit("deltalab.holds.hold_here", hold.path, with_spark=False)
    hold.wait_reached(pending)
    assert not pending.done, "held: no answer yet"
    hold.release()
    assert pending.result() is None


def test_a_call_that_never_reaches_its_hold_is_reported(driver) -> None:
    hold = driver.hold("never")
    pending = driver.submit("os.getenv", "HOME", with_spark=False)
    with pytest.raises(DeltaLabError, match="without stopping at the hold"):
        hold.wait_reached(pending)


def test_two_processes_race_for_one_commit_file_and_the_rename_refuses_the_loser(driver, spark, tmp_path) -> None:
    table = tmp_path / "race"
    cc.make_pair_table(spark, table)
    race = cc.race_for_commit_file(str(table), 1, {"A": drivers.in_this_kernel(spark), "B": driver}, tmp_path / "signals")
    temporary = [name for name in race.held_listing if name.endswith(".tmp")]
    assert len(temporary) == 2 and f"{1:020d}.json" not in race.held_listing, "both past the pre-check"
    a, b = race.attempts
    assert (a.writer, a.won, a.error) == ("A", True, None)
    assert (b.writer, b.won, b.error) == ("B", False, "java.nio.file.FileAlreadyExistsException")
    assert b.thrown_at == "io.delta.storage.HDFSLogStore.writeInternal(HDFSLogStore.java:131)", "refused by the rename"
    assert commit_info(table, 1)["userMetadata"] == "A"
    assert not [p for p in (table / "_delta_log").iterdir() if p.name.endswith(".tmp")], "the loser removed its file"


def test_held_blind_appends_in_two_processes_both_commit(driver, spark, tmp_path) -> None:
    table = str(tmp_path / "appends")
    spark.createDataFrame([], "id long, writer int").write.format("delta").save(table)
    holds = {w: Hold(tmp_path / f"append-{w}") for w in (0, 1)}
    calls = {0: drivers.in_this_kernel(spark).submit("driver_probes.append_held", table, 0, 10, holds[0].path),
             1: driver.submit("driver_probes.append_held", table, 1, 10, holds[1].path)}
    for w in (0, 1):
        holds[w].wait_reached(calls[w])
    assert latest_version(table) == 0, "both hold after their read, before any commit"
    for w in (1, 0):
        holds[w].release()
        assert calls[w].result() is None
    assert commit_versions(table) == [0, 1, 2]
    assert [commit_info(table, v)["userMetadata"] for v in (1, 2)] == ["writer-1", "writer-0"]
    assert [commit_info(table, v)["readVersion"] for v in (1, 2)] == [0, 0], "both read version 0"


def test_stop_cancels_a_held_call_and_ends_every_process(driver) -> None:
    hold = driver.hold("at-stop")
    pending = driver.submit("deltalab.holds.hold_here", hold.path, with_spark=False)
    hold.wait_reached(pending)
    tree = process_tree(driver.process.pid)
    assert any("java" in Path(f"/proc/{p.pid}/exe").resolve().name for p in tree if Path(f"/proc/{p.pid}").exists())
    assert driver.stop() == 0
    with pytest.raises(drivers.DriverCallError, match="cancelled"):
        pending.result()
    assert not [p.pid for p in tree if is_running(p)], "nothing the driver started is left"
    with pytest.raises(DeltaLabError, match="has ended"):
        driver.submit("os.getenv", "HOME", with_spark=False)


# ----------------------------------------------------------------------------- a driver dies with its kernel


def test_a_driver_dies_with_the_process_that_started_it(tmp_path) -> None:
    owner = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import sys, time
        from deltalab.drivers import start_driver
        driver = start_driver("orphan", {str(tmp_path / 'signals')!r})
        print(driver.process.pid, flush=True)
        time.sleep(600)
        """)], stdout=subprocess.PIPE, text=True)
    guardian = int(owner.stdout.readline())
    deadline = time.monotonic() + 300

    def java_started() -> bool:
        return any(Path(f"/proc/{p.pid}/exe").exists() and Path(f"/proc/{p.pid}/exe").resolve().name == "java"
                   for p in process_tree(guardian))

    while not java_started():
        assert time.monotonic() < deadline and owner.poll() is None, "the driver's JVM never started"
        time.sleep(0.05)
    tree = process_tree(guardian)
    os.kill(owner.pid, signal.SIGKILL)
    owner.wait()
    while [p for p in tree if is_running(p)]:
        assert time.monotonic() < deadline, f"left running: {[p.pid for p in tree if is_running(p)]}"
        time.sleep(0.05)
