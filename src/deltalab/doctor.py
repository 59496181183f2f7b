"""``python -m deltalab doctor``: one line per thing the course needs, with the fix for each failure."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import Callable

from deltalab.errors import DeltaLabError
from deltalab.versions import DELTA_JVM_VERSION, PINNED_PYTHON_PACKAGES, installed_version


@dataclass
class Check:
    """The outcome of one doctor check."""

    name: str
    ok: bool
    detail: str
    fix: str | None = None


def _python() -> Check:
    version = ".".join(map(str, sys.version_info[:3]))
    ok = sys.version_info >= (3, 11)
    return Check("Python", ok, f"{version} at {sys.executable}", None if ok else "Use Python 3.11 or newer (the pinned numpy and matplotlib need it), or the conda route.")


def _java() -> Check:
    from deltalab.java import find_java

    java = find_java()
    return Check("Java", True, f"{java.version} from {java.source} ({java.executable})")


def _packages() -> Check:
    found = {name: installed_version(name) for name in (*PINNED_PYTHON_PACKAGES, "pandas", "pyarrow")}
    wrong = [f"{name} {found[name]} (want {want})" for name, want in PINNED_PYTHON_PACKAGES.items() if found[name] != want]
    pandas = found["pandas"]
    if pandas is None or int(pandas.split(".")[0]) >= 3:
        wrong.append(f"pandas {pandas} (want < 3: pyspark 4.2.0 does not support pandas 3 yet)")
    detail = f"Spark {found['pyspark']}, Delta {found['delta-spark']} (JVM jars {DELTA_JVM_VERSION}), pandas {pandas}, pyarrow {found['pyarrow']}"
    if wrong:
        return Check("Packages", False, detail + "; wrong: " + "; ".join(wrong), "Run `make setup` (it installs the versions pinned in requirements.lock).")
    return Check("Packages", True, detail)


def _jars() -> Check:
    from deltalab.jars import JAR_SETS, cached_jars, jar_dir, jar_set

    found, missing = [], []
    for name in JAR_SETS:
        jars = cached_jars(name)
        if jars:
            megabytes = sum(jar.stat().st_size for jar in jars) / 2**20
            found.append(f"{name}: {len(jars)} jars, {megabytes:.0f} MiB")
        else:
            missing.append(f"{jar_set(name).what} ({', '.join(jar_set(name).packages)} and dependencies)")
    if not missing:
        return Check("Delta jars", True, f"{'; '.join(found)}, cached in {jar_dir().parent}")
    return Check(
        "Delta jars",
        False,
        f"not cached yet: {'; '.join(missing)}",
        "Run `make setup` or `python -m deltalab fetch-jars` once with the network on.",
    )


def _class_archive() -> Check:
    """Informational: sessions start without the archive too, only slower."""
    from deltalab.class_archive import archive_path
    from deltalab.jars import cached_jars, session_jars
    from deltalab.java import find_java

    jars = cached_jars("delta")
    path = archive_path(session_jars(jars), find_java().home) if jars else None
    if path is not None and path.is_file():
        return Check("Class archive", True, f"{path} ({path.stat().st_size / 2**20:.0f} MiB): sessions start in seconds")
    others = len(list(path.parent.glob("classes-*.jsa"))) if path is not None else 0
    what = f"none for these jars and this Java ({others} for others in {path.parent})" if others else "not built"
    return Check("Class archive", True, f"{what}: sessions start without it, a few seconds slower each "
                 "(`python -m deltalab fetch-jars` builds it)")


def _network(jars_ok: bool) -> Check:
    if jars_ok:
        return Check("Network", True, "not needed: the jars are cached, sessions start offline")
    return Check("Network", False, "needed once, to download Delta's jars from Maven Central", "Connect and run `python -m deltalab fetch-jars`.")


def _workdir() -> Check:
    from deltalab.locations import WORKDIR_ENV, work_root

    root = work_root()
    origin = WORKDIR_ENV if os.environ.get(WORKDIR_ENV) else "default"
    return Check("Work directory", True, f"{root} ({origin}), writable, outside the repository")


def _master() -> Check:
    from deltalab.session import MASTER_ENV, resolve_master

    master = resolve_master()
    return Check("Spark master", True, f"{master}" + (f" (from {MASTER_ENV})" if os.environ.get(MASTER_ENV) else " (default)"))


def _guard(name: str, check: Callable[[], Check]) -> Check:
    try:
        return check()
    except DeltaLabError as error:
        return Check(name, False, error.problem, error.fix)


def run_checks() -> list[Check]:
    """Run every check; none of them starts Spark or needs the network."""
    checks = [_guard("Python", _python), _guard("Java", _java), _guard("Packages", _packages), _guard("Delta jars", _jars)]
    checks.append(_network(checks[-1].ok))
    checks.append(_guard("Class archive", _class_archive))
    checks.append(_guard("Work directory", _workdir))
    checks.append(_guard("Spark master", _master))
    return checks


def smoke_test() -> Check:
    """Start a session and write and read a tiny Delta table in a scratch work directory."""
    from deltalab.session import get_spark
    from deltalab.workdir import workdir

    spark = get_spark("doctor")
    path = str(workdir("doctor") / "smoke")
    spark.range(3).write.format("delta").save(path)
    rows = spark.read.format("delta").load(path).count()
    return Check("Delta write", rows == 3, f"wrote and read back a Delta table with {rows} rows")


def main(smoke: bool = False, quiet: bool = False) -> int:
    """Print the checks, one line each, and return 0 if all passed. ``quiet`` (what ``make lab`` asks
    for) prints only the checks that failed, with their fixes, so that JupyterLab's URL is not buried."""
    checks = run_checks()
    if smoke and all(check.ok for check in checks):
        checks.append(_guard("Delta write", smoke_test))
    width = max(len(check.name) for check in checks)
    for check in checks:
        if quiet and check.ok:
            continue
        print(f"[{'ok' if check.ok else 'FAIL':>4}] {check.name:<{width}}  {check.detail}")
        if not check.ok and check.fix:
            for line in check.fix.splitlines():
                print(f"{'':>7}{'':<{width}}  fix: {line}" if line == check.fix.splitlines()[0] else f"{'':>7}{'':<{width}}       {line}")
    return 0 if all(check.ok for check in checks) else 1
