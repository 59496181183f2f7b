"""What every lab check does with the student's code (deltalab.labs.harness.call_student): an
unfinished stub is told it is not written yet, and an error raised in the JVM becomes one line.

A lab's own check serves as the vehicle; the messages come from the harness, so every lab's
checks say the same. The message format itself is asserted by
``lab_testing.assert_plain_failure`` (tests/support/lab_testing.py), for every check in the suite.
"""

from __future__ import annotations

import pytest

from deltalab.labs.harness import CheckFailed
from deltalab.labs.lab02_log import check_active_files
from deltalab.labs.lab08_zorder import check_interleave_bits
from lab_testing import assert_plain_failure


def test_unfinished_function_is_told_to_replace_the_stub():
    def stub(values, bits):
        raise NotImplementedError()

    with pytest.raises(CheckFailed) as caught:
        check_interleave_bits(stub)
    assert "not written yet" in assert_plain_failure(caught.value)


def test_a_jvm_error_in_student_code_becomes_one_line(spark):
    def queries_a_missing_table(path, version):
        return spark.read.format("delta").load(path + "_nowhere").inputFiles()

    with pytest.raises(CheckFailed) as caught:
        check_active_files(queries_a_missing_table)
    message = assert_plain_failure(caught.value)
    assert "raised AnalysisException" in message and len(message.splitlines()) == 2
