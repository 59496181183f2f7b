"""deltalab.clients on real tables: every client reads (Spark's rows, value for value) and appends to a plain
table, delta-rs's pyarrow path refuses a table with deletion vectors for the feature it lists while its
scan() reads it, a read that returns the right number of rows with the wrong values is not a "yes" (column
mapping on delta-rs's pyarrow path), the table asked about is never changed, and bad arguments are refused
with the fix."""

from __future__ import annotations

import pytest

from deltalab.clients import (CLIENTS, YES, client_access, client_matrix, client_outcomes, compare_rows, features_named,
                              protocol_features_of, refusal)
from deltalab.errors import DeltaLabError
from deltalab.log import latest_version


def test_plain_table_every_client_works(spark, tmp_path):
    path = tmp_path / "plain"
    spark.range(5).selectExpr("id", "id * 1.5 AS amount").write.format("delta").save(str(path))
    access = client_access(spark, path, tmp_path / "scratch")
    assert access["reader/writer"] == "1/2" and access["rows (log)"] == access["rows (Spark)"] == 5
    assert [access[client] for client in CLIENTS] == [YES] * 4
    assert latest_version(path) == 0, "the append went to a copy"
    assert not any((tmp_path / "scratch").iterdir()), "the copy is removed"


def test_refusal_names_a_feature_of_the_protocol(spark, tmp_path):
    path = tmp_path / "dvs"
    spark.sql(f"CREATE TABLE delta.`{path}` (id BIGINT) USING delta TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')")
    spark.range(20).write.format("delta").mode("append").save(str(path))
    spark.sql(f"DELETE FROM delta.`{path}` WHERE id = 3")
    frame = client_matrix(spark, {"dvs": path}, tmp_path / "scratch")
    read = frame.loc["dvs", "delta-rs read (pyarrow)"]
    assert read.startswith("refused: ") and features_named(read, protocol_features_of(path)) == {"deletionVectors"}
    assert frame.loc["dvs", "delta-rs read (scan)"] == YES, "delta-rs's own engine applies the deletion vector"
    assert frame.loc["dvs", "Kernel read"] == YES and frame.loc["dvs", "rows (log)"] == frame.loc["dvs", "rows (Spark)"] == 19
    assert frame.loc["dvs", "reader features"] == "deletionVectors"


def test_a_read_is_checked_by_its_values(spark, tmp_path):
    path = tmp_path / "mapped"
    spark.sql(f"CREATE TABLE delta.`{path}` USING delta TBLPROPERTIES ('delta.columnMapping.mode' = 'name') "
              "AS SELECT id, id * 2 AS doubled FROM range(6)")
    access = client_access(spark, path, tmp_path / "scratch")
    assert access["delta-rs read (pyarrow)"] == "wrong values: 6 of 6 rows differ", \
        "the pyarrow path finds no column under its logical name in files that hold physical names: every value null"
    assert access["delta-rs read (scan)"] == YES and access["Kernel read"] == YES
    assert access["delta-rs append"] == YES, "delta-rs writes physical names, and Spark reads the appended row back"


def test_variant_values_compare_as_their_bytes(spark, tmp_path):
    path = tmp_path / "variant"
    spark.sql(f"CREATE TABLE delta.`{path}` USING delta AS SELECT id, parse_json(to_json(named_struct('k', id % 3))) AS v FROM range(4)")
    access = client_access(spark, path, tmp_path / "scratch")
    assert [access[client] for client in CLIENTS[:3]] == [YES] * 3, "delta-rs returns the metadata and value bytes Spark reads"
    assert access["Kernel read"].startswith("refused: "), "Kernel's default Parquet reader has no variant"


def test_compare_rows():
    reference = (["a", "b"], [(1, "x"), (2, "y"), (2, "y")])
    assert compare_rows((["a", "b"], [(2, "y"), (1, "x"), (2, "y")]), reference) == YES, "any order"
    assert compare_rows((["b", "a"], [("x", 1), ("y", 2), ("y", 2)]), reference) == YES, "any column order"
    assert compare_rows((["a", "b"], [(1, "x"), (2, "y"), (1, "x")]), reference) == "wrong values: 1 of 3 rows differ", \
        "duplicates are counted"
    assert compare_rows((["a", "b"], [(None, None)] * 3), reference) == "wrong values: 3 of 3 rows differ"
    assert compare_rows((["a", "b"], [(1, "x")]), reference) == "1 rows, Spark reads 3"
    assert compare_rows((["a"], [(1,), (2,), (2,)]), reference) == "columns ['a'], Spark reads ['a', 'b']"


def test_bad_arguments(spark, tmp_path):
    with pytest.raises(DeltaLabError, match="not a Delta table|_delta_log"):
        client_access(spark, tmp_path, tmp_path / "scratch")
    path = tmp_path / "t"
    spark.range(1).write.format("delta").save(str(path))
    with pytest.raises(DeltaLabError, match="inside the table"):
        client_access(spark, path, path / "scratch")
    with pytest.raises(DeltaLabError, match="no tables"):
        client_matrix(spark, {}, tmp_path)


def test_features_named_ignores_case():
    answer = "refused: CommitFailedError: Unsupported table features required: [RowTracking, DomainMetadata]"
    assert features_named(answer, {"rowTracking", "domainMetadata", "appendOnly"}) == {"rowTracking", "domainMetadata"}
    assert features_named("[VariantShreddingPreview]", {"variantType", "variantShredding-preview"}) == {"variantShredding-preview"}


def test_refusal_sorts_the_features_it_lists():
    first = refusal(RuntimeError("Unsupported table features required: [RowTracking, DomainMetadata]\nmore"))
    again = refusal(RuntimeError("Unsupported table features required: [DomainMetadata, RowTracking]"))
    assert first == again == "refused: RuntimeError: Unsupported table features required: [DomainMetadata, RowTracking]"
    assert refusal(RuntimeError("reader features: {'b', 'a'} but")) == "refused: RuntimeError: reader features: {'a', 'b'} but"


def test_client_outcomes_classify_each_answer_and_name_the_features_refused():
    import pandas as pd

    matrix = pd.DataFrame({"reader features": ["", "deletionVectors"], "writer features": ["", "deletionVectors, rowTracking"],
                           "read": [YES, "refused: DeltaProtocolError: {'deletionVectors'} are not supported"],
                           "append": ["3 rows, Spark reads 2", "wrong values: 2 of 5 rows differ"]},
                          index=pd.Index(["plain", "dvs"], name="table"))
    outcomes = client_outcomes(matrix, clients=("read", "append"))
    assert outcomes[["table", "client", "outcome"]].values.tolist() == [
        ["plain", "read", "yes"], ["plain", "append", "other"], ["dvs", "read", "refused"], ["dvs", "append", "wrong values"]]
    assert outcomes["features"].tolist() == [(), (), ("deletionVectors",), ()]
    with pytest.raises(DeltaLabError, match="client_matrix"):
        client_outcomes(matrix.drop(columns="reader features"), clients=("read",))
