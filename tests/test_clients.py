"""deltalab.clients on real tables: every client reads and appends to a plain table, delta-rs refuses a
table with deletion vectors for the feature it lists, the table asked about is never changed, and bad
arguments are refused with the fix."""

from __future__ import annotations

import pytest

from deltalab.clients import YES, client_access, client_matrix, features_named, protocol_features_of, refusal
from deltalab.errors import DeltaLabError
from deltalab.log import latest_version


def test_plain_table_every_client_works(spark, tmp_path):
    path = tmp_path / "plain"
    spark.range(5).write.format("delta").save(str(path))
    access = client_access(spark, path, tmp_path / "scratch")
    assert access["reader/writer"] == "1/2" and access["rows (log)"] == 5
    assert (access["delta-rs read"], access["delta-rs append"], access["Kernel read"]) == (YES, YES, YES)
    assert latest_version(path) == 0, "the append went to a copy"
    assert not any((tmp_path / "scratch").iterdir()), "the copy is removed"


def test_refusal_names_a_feature_of_the_protocol(spark, tmp_path):
    path = tmp_path / "dvs"
    spark.sql(f"CREATE TABLE delta.`{path}` (id BIGINT) USING delta TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')")
    spark.range(20).write.format("delta").mode("append").save(str(path))
    spark.sql(f"DELETE FROM delta.`{path}` WHERE id = 3")
    frame = client_matrix(spark, {"dvs": path}, tmp_path / "scratch")
    read = frame.loc["dvs", "delta-rs read"]
    assert read.startswith("refused: ") and features_named(read, protocol_features_of(path)) == {"deletionVectors"}
    assert frame.loc["dvs", "Kernel read"] == YES and frame.loc["dvs", "rows (log)"] == 19
    assert frame.loc["dvs", "reader features"] == "deletionVectors"


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
