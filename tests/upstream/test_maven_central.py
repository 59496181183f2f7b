"""Upstream watch (Maven Central): what notebook 00 says about Delta's jars, asked again whenever
the network is there.

The pip package delta-spark is 4.4.1, but Maven Central had no 4.4.1 jar of Delta for Spark 4.2
when the course was checked, so the course pins the 4.4.0 jars (versions.DELTA_JVM_VERSION).
Offline, the test is skipped.

When it fails: Maven Central now lists 4.4.1 (or no longer the pinned version). Pin the jar that is
there in deltalab.versions.DELTA_JVM_VERSION, run `make setup` (it downloads the new jars), update
notebook 00's section 'Where Delta comes from' and re-run the suite; then change this test to
watch for the next mismatch, or delete it once the pip package and the jars agree.
"""

from __future__ import annotations

import re
import urllib.request

import pytest

from deltalab.versions import DELTA_JVM_VERSION

METADATA = "https://repo1.maven.org/maven2/io/delta/delta-spark_4.2_2.13/maven-metadata.xml"


def test_maven_central_still_has_no_4_4_1_jar_of_delta_for_spark_4_2():
    try:
        with urllib.request.urlopen(METADATA, timeout=20) as response:
            text = response.read().decode()
    except OSError as error:
        pytest.skip(f"Maven Central is not reachable here ({error}); notebook 00's claim is checked online only")
    versions = re.findall(r"<version>([^<]+)</version>", text)
    assert DELTA_JVM_VERSION in versions, f"Maven Central lists {versions}, without the pinned {DELTA_JVM_VERSION}"
    assert "4.4.1" not in versions, (
        "Maven Central now has delta-spark_4.2_2.13 4.4.1: pin it (deltalab.versions.DELTA_JVM_VERSION) "
        "and update notebook 00's section 'Where Delta comes from'"
    )
