"""The lab 08 checks (deltalab.labs.lab08_zorder): a right interleaving passes and says so, the bit
order mistake and bad column lists get their own sentence, never a stack trace."""

from __future__ import annotations

import pytest

from deltalab.curves import z_value
from deltalab.labs.harness import CheckFailed
from deltalab.labs.lab08_zorder import check_interleave_bits, check_zorder_columns
from lab_testing import assert_plain_failure


def interleave_bits(values: list[int], bits: int) -> int:
    """A right answer to lab 08's exercise 1, from deltalab.curves."""
    return int(z_value([[value] for value in values], bits)[0])


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
    message = assert_plain_failure(caught.value)
    assert "interleave_bits([1, 0], 1) returned 1" in message and "first value's bit" in message


def test_not_a_function_and_wrong_type_are_explained():
    with pytest.raises(CheckFailed) as caught:
        check_interleave_bits(42)  # type: ignore[arg-type]
    assert "not a function" in assert_plain_failure(caught.value)
    with pytest.raises(CheckFailed) as caught:
        check_interleave_bits(lambda values, bits: str(interleave_bits(values, bits)))
    assert "must return an int" in assert_plain_failure(caught.value)


def test_zorder_check_refuses_bad_column_lists_before_touching_spark(spark):
    for answer in (["nope"], ["user_id", "ts", "amount"], [], "user_id"):
        with pytest.raises(CheckFailed) as caught:
            check_zorder_columns(lambda answer=answer: answer)
        assert_plain_failure(caught.value)
