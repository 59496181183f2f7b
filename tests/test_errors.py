"""deltalab.errors.failure_of: what a refused Spark or Delta call raised, reduced to its error
condition and first line, on real Delta tables."""

from __future__ import annotations

from course_testing import addr_state_table
from deltalab.errors import failure_of


def test_failure_of_returns_none_when_the_action_succeeds():
    assert failure_of(lambda: 1 + 1) is None


def test_failure_of_reads_the_condition_of_an_analysis_exception(spark, wd):
    path = wd / "t"
    addr_state_table(spark, path)
    extra = spark.createDataFrame([("TX", 3, 1.5)], "addr_state STRING, count BIGINT, amount DOUBLE")
    failure = failure_of(lambda: extra.write.format("delta").mode("append").save(str(path)))
    assert failure.condition == "DELTA_METADATA_MISMATCH"
    assert failure.message.startswith("[DELTA_METADATA_MISMATCH]") and "\n" not in failure.message
    assert failure.error_type == "AnalysisException"


def test_failure_of_reads_the_condition_from_a_bare_java_error(spark, wd):
    """Delta's NOT NULL violation reaches Python as a Py4JJavaError: the condition comes from the text."""
    path = wd / "nn"
    spark.sql(f"CREATE TABLE delta.`{path}` (addr_state STRING NOT NULL, count BIGINT) USING delta")
    failure = failure_of(lambda: spark.sql(f"INSERT INTO delta.`{path}` VALUES (NULL, 1)"))
    assert failure.condition == "DELTA_NOT_NULL_CONSTRAINT_VIOLATED"
    assert failure.message.startswith("[DELTA_NOT_NULL_CONSTRAINT_VIOLATED]"), failure.message
    assert "at org.apache" not in failure.message and "Exception:" not in failure.message


def test_failure_of_a_plain_python_error():
    failure = failure_of(lambda: int("x"))
    assert failure.condition is None and failure.error_type == "ValueError" and "invalid literal" in failure.message
