"""deltalab.layouts on real tables: the same seeded records every time, OPTIMIZE into the number of
files asked for, each layout written as it says, and bad arguments refused with the fix."""

from __future__ import annotations

import json

import pytest

from deltalab.errors import DeltaLabError
from deltalab.layouts import CONNECTION_COLUMNS, build_layouts, connection_records, optimize_into, table_size
from deltalab.log import read_log, replay_log
from deltalab.skipping import file_stats


def test_connection_records_are_seeded(spark):
    first = connection_records(spark, 3, 50, seed=7).toPandas()
    again = connection_records(spark, 3, 50, seed=7).toPandas()
    other = connection_records(spark, 3, 50, seed=8).toPandas()
    assert list(first.columns) == ["id", *CONNECTION_COLUMNS] and len(first) == 150
    assert first.equals(again) and not first.equals(other)
    assert first["src_port"].between(0, 2**16 - 1).all() and first["src_ip"].between(0, 2**32 - 1).all()


def test_optimize_into_writes_the_files_asked_for(spark, tmp_path):
    path = tmp_path / "t"
    connection_records(spark, 2, 2000, seed=1).drop("id").write.format("delta").save(str(path))
    assert table_size(spark, path) == sum(add["size"] for add in replay_log(path).files.values())
    optimize_into(spark, path, 6, "ZORDER BY (src_ip, dst_ip)")
    assert len(replay_log(path).files) == 6
    assert spark.conf.get("spark.databricks.delta.optimize.maxFileSize") != str(table_size(spark, path) // 6), \
        "the size setting is for that OPTIMIZE only"


def test_build_layouts(spark, tmp_path):
    frame = connection_records(spark, 4, 300, seed=3).drop("id")
    paths = build_layouts(spark, frame, tmp_path, 4, layouts=["random", "linear", "hilbert"], prefix="x_")
    assert {name: path.name for name, path in paths.items()} == {"random": "x_random", "linear": "x_linear", "hilbert": "x_hilbert"}
    for path in paths.values():
        assert len(replay_log(path).files) == 4 and replay_log(path).num_records == 1200
    linear = file_stats(paths["linear"]).sort_values("min.src_ip")
    assert (linear["min.src_ip"].to_numpy()[1:] > linear["max.src_ip"].to_numpy()[:-1]).all(), "linear: disjoint src_ip ranges"
    domain = replay_log(paths["hilbert"]).domain_metadata["delta.clustering"]
    assert json.loads(domain["configuration"])["clusteringColumns"] == [[c] for c in CONNECTION_COLUMNS]
    optimize = read_log(paths["hilbert"]).commits[2]
    assert optimize[0]["commitInfo"]["operation"] == "OPTIMIZE"
    assert all(a["add"]["clusteringProvider"] == "liquid" for a in optimize if "add" in a)


@pytest.mark.parametrize("call, fix", [
    (lambda spark, tmp: connection_records(spark, 0, 10, seed=1), "positive counts"),
    (lambda spark, tmp: optimize_into(spark, tmp, 0), "at least one file"),
    (lambda spark, tmp: build_layouts(spark, None, tmp, 4, layouts=["zorder"]), "Use names from"),
])
def test_bad_arguments(spark, tmp_path, call, fix):
    with pytest.raises(DeltaLabError) as raised:
        call(spark, tmp_path)
    assert fix in str(raised.value)
