"""Delta's JVM jars: downloaded from Maven Central once, then loaded from a local cache.

The pip package ``delta-spark`` ships no jars. ``configure_spark_with_delta_pip`` asks Spark
to resolve them with Ivy at every session start, which needs the network each time. The
course resolves them once (with Spark's own ``spark-submit --packages``, so the result is
exactly what Spark would load) into a private staging directory, checks them, and moves the
finished set into the cache with one rename. A download interrupted half-way therefore
leaves no cache entry behind, and later sessions put the cached files on their class path
without resolving anything: they start offline.
"""

from __future__ import annotations

import hashlib
import re
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

from deltalab.errors import DeltaLabError
from deltalab.java import find_java
from deltalab.locations import cache_root
from deltalab.publish import publishing
from deltalab.versions import AWS_SDK_V1_VERSION, AWS_SDK_V2_VERSION, delta_maven_coordinate, hadoop_version

MANIFEST_NAME = "MANIFEST.txt"
FETCH_TIMEOUT_SECONDS = 900


@dataclass(frozen=True)
class JarSet:
    """One set of JVM jars the course downloads once: what to resolve, what to leave out."""

    name: str  # "delta" or "s3"
    what: str  # for messages: "Delta's jars"
    packages: tuple[str, ...]
    excludes: tuple[str, ...] = ()

    @property
    def directory_name(self) -> str:
        first = self.packages[0].split(":", 1)[1].replace(":", "-")  # delta-spark_4.2_2.13-4.4.0
        return first if self.name == "delta" else f"{self.name}-{first}"


def jar_set(name: str = "delta") -> JarSet:
    """The jar set ``name``: ``delta`` (every session) or ``s3`` (S3A and DynamoDB, notebooks 11-12)."""
    if name == "delta":
        return JarSet("delta", "Delta's jars", (delta_maven_coordinate(),))
    if name == "s3":
        # hadoop-aws matching the Hadoop inside pyspark, with only the AWS SDK v2 modules S3A uses
        # (the SDK's `bundle` jar is 686 MB), and the SDK v1 DynamoDB client of Delta's DynamoDB
        # commit coordinator. Everything Spark already ships is left out.
        return JarSet(
            "s3", "the S3A and DynamoDB jars",
            (f"org.apache.hadoop:hadoop-aws:{hadoop_version()}",
             f"software.amazon.awssdk:s3-transfer-manager:{AWS_SDK_V2_VERSION}",
             f"com.amazonaws:aws-java-sdk-dynamodb:{AWS_SDK_V1_VERSION}"),
            excludes=("software.amazon.awssdk:bundle", "software.amazon.awssdk:netty-nio-client",
                      "software.amazon.awssdk:crt-core", "software.amazon.awssdk:http-auth-aws-eventstream",
                      "software.amazon.eventstream:eventstream", "software.amazon.awssdk:annotations",
                      "org.wildfly.openssl:wildfly-openssl", "io.netty:netty-codec-http", "io.netty:netty-codec-http2",
                      "io.netty:netty-codec", "io.netty:netty-transport", "io.netty:netty-common",
                      "io.netty:netty-buffer", "io.netty:netty-handler", "io.netty:netty-transport-native-unix-common",
                      "io.netty:netty-transport-classes-epoll", "io.netty:netty-resolver",
                      "org.apache.httpcomponents:httpclient", "org.apache.httpcomponents:httpcore",
                      "commons-codec:commons-codec", "commons-logging:commons-logging", "org.slf4j:slf4j-api",
                      "com.amazonaws:aws-java-sdk-s3", "com.amazonaws:aws-java-sdk-kms", "com.amazonaws:jmespath-java",
                      "com.fasterxml.jackson.core:jackson-databind", "com.fasterxml.jackson.core:jackson-core",
                      "com.fasterxml.jackson.core:jackson-annotations",
                      "com.fasterxml.jackson.dataformat:jackson-dataformat-cbor", "joda-time:joda-time"),
        )
    raise DeltaLabError(f"There is no jar set called {name!r}.", fix="Use 'delta' or 's3'.")


JAR_SETS = ("delta", "s3")


def jar_dir(name: str = "delta") -> Path:
    """Where the jars of a set live once downloaded (the cache never holds a half set)."""
    return cache_root() / "jars" / jar_set(name).directory_name


def _manifest_entries(directory: Path) -> list[tuple[str, int, str]]:
    entries = []
    for line in (directory / MANIFEST_NAME).read_text().splitlines():
        digest, size, name = line.split(maxsplit=2)
        entries.append((name, int(size), digest))
    return entries


def cached_jars(name: str = "delta") -> list[Path] | None:
    """The cached jar files of a set, or None if the cache holds no complete set.

    A set is complete when its manifest exists and every jar it names is present with the
    recorded size.
    """
    directory = jar_dir(name)
    try:
        entries = _manifest_entries(directory)
    except (OSError, ValueError):
        return None
    jars = []
    for name, size, _digest in entries:
        path = directory / name
        if not path.is_file() or path.stat().st_size != size:
            return None
        jars.append(path)
    return jars or None


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _reason(output: str) -> str:
    """The most telling line of a failed Ivy resolution."""
    keys = ("not found", "unresolved dependency", "Connection refused", "UnknownHost", "timed out", "PKIX")
    lines = [line.strip() for line in output.splitlines() if any(key in line for key in keys)]
    return lines[-1] if lines else (output.strip().splitlines() or ["no output"])[-1]


def _spark_submit() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent / "bin" / ("spark-submit.cmd" if os.name == "nt" else "spark-submit")


def _resolve_into(staging: Path, java_home: Path, timeout: int, wanted: JarSet) -> list[Path]:
    noop = staging / "noop.py"
    noop.write_text("")
    command = [
        str(_spark_submit()),
        "--master", "local[1]",
        "--conf", f"spark.jars.ivy={staging / 'ivy'}",
        "--conf", "spark.ui.enabled=false",
        "--packages", ",".join(wanted.packages),
        *(["--exclude-packages", ",".join(wanted.excludes)] if wanted.excludes else []),
        str(noop),
    ]
    coordinates = ", ".join(wanted.packages)
    env = dict(os.environ, JAVA_HOME=str(java_home), PYSPARK_PYTHON=sys.executable)
    try:
        completed = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        raise DeltaLabError(
            f"Downloading {wanted.what} ({coordinates}) did not finish within {timeout} s.",
            fix="Check your connection to Maven Central (repo1.maven.org) and run `python -m deltalab fetch-jars` again.",
        ) from None
    if completed.returncode != 0:
        raise DeltaLabError(
            f"{wanted.what[0].upper()}{wanted.what[1:]} ({coordinates}) are not in the cache ({jar_dir(wanted.name)}) and could not be "
            f"downloaded from Maven Central: {_reason(completed.stdout + completed.stderr)}",
            fix="The very first run needs the network once. Connect, then run `make setup` (or "
            "`python -m deltalab fetch-jars`); later runs work offline. Behind a proxy, give Java its "
            "settings with SPARK_SUBMIT_OPTS='-Dhttps.proxyHost=... -Dhttps.proxyPort=...'.",
        )
    jars = sorted((staging / "ivy" / "jars").glob("*.jar"))
    broken = [jar.name for jar in jars if not zipfile.is_zipfile(jar)]
    if not jars or broken:
        raise DeltaLabError(
            f"The download of {wanted.what} came back incomplete ({', '.join(broken) or 'no jars'}).",
            fix="Run `python -m deltalab fetch-jars` again.",
        )
    return jars


def fetch_jars(name: str = "delta", timeout: int = FETCH_TIMEOUT_SECONDS) -> list[Path]:
    """Return the cached jars of a set (default: Delta's), downloading them first if the cache
    has no complete set.

    Nothing is written to the cache unless the whole set arrived and checked out. Only the jars
    a session adds are kept (:func:`session_jars`): Ivy's tree of Delta also holds older copies
    of libraries PySpark ships (hadoop-client, parquet, jackson: 72 of its 85 MiB), which no
    session loads. A cache written before that rule keeps them; sessions skip them the same way.
    """
    existing = cached_jars(name)
    if existing:
        return existing
    wanted = jar_set(name)
    java = find_java()
    target = jar_dir(name)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".download-", dir=target.parent))
    print(f"Downloading {wanted.what} from Maven Central into {target} (once: later sessions start offline) ...",
          file=sys.stderr, flush=True)
    started = time.monotonic()
    try:
        resolved = _resolve_into(staging, java.home, timeout, wanted)
        jars = session_jars(resolved)
        print(f"... {len(jars)} jars, {sum(jar.stat().st_size for jar in jars) / 2**20:.0f} MiB, "
              f"in {time.monotonic() - started:.0f} s ({len(resolved) - len(jars)} more that PySpark "
              f"ships itself left out)", file=sys.stderr, flush=True)
        if target.exists() and cached_jars(name) is None:  # an incomplete set from an older layout: replace it
            shutil.rmtree(target)
        with publishing(target, directory=True) as finished:  # kept if another process published it first
            lines = []
            for jar in jars:
                moved = Path(shutil.move(str(jar), finished / jar.name))
                lines.append(f"{_sha256(moved)} {moved.stat().st_size} {moved.name}")
            (finished / MANIFEST_NAME).write_text("\n".join(lines) + "\n")
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    result = cached_jars(name)
    assert result is not None
    return result


_VERSIONED_JAR = re.compile(r"^(?P<artifact>.*?)-(?P<version>\d[\w.\-]*)\.jar$")


def _artifact(jar_name: str) -> str:
    """``jackson-core`` from ``jackson-core-2.21.2.jar``: the artifact without its version."""
    match = _VERSIONED_JAR.match(jar_name)
    return match.group("artifact") if match else jar_name.removesuffix(".jar")


def spark_jars_dir() -> Path:
    """The folder of the jars PySpark ships (its own classpath)."""
    import pyspark

    return Path(pyspark.__file__).parent / "jars"


def session_jars(jars: list[Path]) -> list[Path]:
    """The cached jars a session must add: those of artifacts PySpark does not already ship.

    Ivy resolves Delta's whole dependency tree, including older versions of libraries Spark
    ships itself (hadoop-client 3.4 next to Spark's 3.5, jackson 2.13 next to 2.21: 72 of the
    85 MiB). Spark's own copy always wins (parent-first class loading), so adding them only
    costs time: the executor copies every added jar at start-up. :func:`fetch_jars` keeps no
    others in the cache; a cache written before it did still holds them.
    """
    shipped = {_artifact(jar.name) for jar in spark_jars_dir().glob("*.jar")}
    # the cache names jars as Ivy does, "<group>_<artifact>-<version>.jar"
    return [jar for jar in jars if _artifact(jar.name.split("_", 1)[-1]) not in shipped]
