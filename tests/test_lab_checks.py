"""The lab checks of labs 01, 02 and 08 and their harness (deltalab.labs): right answers pass and say
so, wrong ones get a sentence, never a stack trace."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from deltalab.curves import z_value
from deltalab.labs.harness import CheckFailed
from deltalab.labs.lab02_log import check_active_files, check_table_version
from deltalab.labs.lab08_zorder import check_interleave_bits, check_zorder_columns


def interleave_bits(values: list[int], bits: int) -> int:
    """A right answer to lab 08's exercise 1, from deltalab.curves."""
    return int(z_value([[value] for value in values], bits)[0])


def assert_plain(error: CheckFailed) -> str:
    message = str(error)
    assert message.startswith("✗ ") and "\nFix: Where to look: " in message, message
    for leak in ("Traceback", "py4j", "at org.apache", "\tat "):
        assert leak not in message, message
    assert error._render_traceback_() == message.splitlines()
    return message


def test_the_reference_interleaving_matches_the_documented_examples():
    assert interleave_bits([0b11, 0b00], 2) == 0b1010
    assert interleave_bits([0b00, 0b11], 2) == 0b0101
    assert interleave_bits([0b101], 3) == 0b101
    assert interleave_bits([1, 2, 4], 3) == 0b001_010_100


def test_interleave_check_passes_a_right_answer(capsys):
    check_interleave_bits(interleave_bits)
    assert capsys.readouterr().out.startswith("✓ interleave_bits: ")


def test_interleave_check_names_the_bit_order_mistake():
    def swapped(values, bits):  # second value's bit first: the usual slip
        return interleave_bits(list(reversed(values)), bits)

    with pytest.raises(CheckFailed) as caught:
        check_interleave_bits(swapped)
    message = assert_plain(caught.value)
    assert "interleave_bits([1, 0], 1) returned 1" in message and "first value's bit" in message


def test_unfinished_function_is_told_to_replace_the_stub():
    def stub(values, bits):
        raise NotImplementedError()

    with pytest.raises(CheckFailed) as caught:
        check_interleave_bits(stub)
    assert "not written yet" in assert_plain(caught.value)


def test_not_a_function_and_wrong_type_are_explained():
    with pytest.raises(CheckFailed) as caught:
        check_interleave_bits(42)  # type: ignore[arg-type]
    assert "not a function" in assert_plain(caught.value)
    with pytest.raises(CheckFailed) as caught:
        check_interleave_bits(lambda values, bits: str(interleave_bits(values, bits)))
    assert "must return an int" in assert_plain(caught.value)


def test_table_version_check_against_delta_history(spark, capsys):
    def right(path):
        return max(int(p.name[:20]) for p in (Path(path) / "_delta_log").glob("*.json"))

    def counts_files(path):
        return len(list((Path(path) / "_delta_log").glob("*.json"))) - 1

    check_table_version(right)
    assert capsys.readouterr().out.startswith("✓ table_version: returned 7")
    with pytest.raises(CheckFailed) as caught:
        check_table_version(counts_files)
    message = assert_plain(caught.value)
    assert "latest version is 7" in message and "returned 4" in message


def test_active_files_check_explains_a_forgotten_remove(spark):
    def ignores_removes(path, version):
        log = Path(path) / "_delta_log"
        import pyarrow.parquet as pq

        start = max(v for v in (3, 6) if v <= version)
        adds = pq.read_table(log / f"{start:020d}.checkpoint.parquet", columns=["add"]).column("add")
        files = {a["path"] for a in adds.to_pylist() if a}
        for v in range(start + 1, version + 1):
            for line in (log / f"{v:020d}.json").read_text().splitlines():
                action = json.loads(line)
                if "add" in action:
                    files.add(action["add"]["path"])
        return files

    with pytest.raises(CheckFailed) as caught:
        check_active_files(ignores_removes)
    message = assert_plain(caught.value)
    assert "Spark does not read are included" in message and "`remove`" in message


def test_a_jvm_error_in_student_code_becomes_one_line(spark):
    def queries_a_missing_table(path, version):
        return spark.read.format("delta").load(path + "_nowhere").inputFiles()

    with pytest.raises(CheckFailed) as caught:
        check_active_files(queries_a_missing_table)
    message = assert_plain(caught.value)
    assert "raised AnalysisException" in message and len(message.splitlines()) == 2


def test_zorder_check_refuses_bad_column_lists_before_touching_spark(spark):
    for answer in (["nope"], ["user_id", "ts", "amount"], [], "user_id"):
        with pytest.raises(CheckFailed) as caught:
            check_zorder_columns(lambda answer=answer: answer)
        assert_plain(caught.value)
