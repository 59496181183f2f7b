"""The lab 08 checks (deltalab.labs.lab08_zorder): the solutions pass at three seeds, and each kind of
wrong answer (a bit-order slip, an answer fitted to the example, a heuristic that ignores the shares,
a side effect, the course's own helper, Spark inside a choice) is refused with a message that never
shows the expected answer.

Expected values come from Delta and the course's reference: ``deltalab.curves.z_value`` for the
interleaving, and the files Spark reads after a real OPTIMIZE ZORDER BY (``zorder_effectiveness``)
for the columns.
"""

from __future__ import annotations

import random
import re

import pytest

from deltalab.curves import z_value
from deltalab.labs import lab08_zorder as zx
from deltalab.labs.lab08_zorder import check_interleave_bits, check_zorder_columns
from lab_testing import solution_and_student_version
from lab_testing import check_failure as failure
from lab_testing import solution_seeds

# The labs' tests run in make test-labs (and those of its solutions at their seeds, marked seeds too, in
# make test-seeds), not in make test: tests/README.md says why.
pytestmark = pytest.mark.labs

#: The lab's solution on tables of a fresh seed, then its student version (tests/support/lab_testing.py).
test_the_solution_passes_and_the_student_version_says_what_is_missing = solution_and_student_version("lab08_zorder")

#: 1: `ts` dominates in six small queries, the largest single query filters `user_id`;
#: 5: `amount` dominates in one query, `ts` has two; 8: `ts` dominates, the first query filters `amount`.
SEEDS = (1, 5, 8)
COLUMNS = ("user_id", "ts", "amount")


def interleave_bits(values: list[int], bits: int) -> int:
    """A right answer to exercise 1 (the lab's solution)."""
    z = 0
    for bit in range(bits - 1, -1, -1):
        for value in values:
            z = (z << 1) | ((value >> bit) & 1)
    return z


def shares(query_mix) -> dict[str, float]:
    total: dict[str, float] = {}
    for predicate, share in query_mix:
        for column in COLUMNS:
            if re.search(rf"\b{column}\b", predicate):
                total[column] = total.get(column, 0.0) + share
    return total


def zorder_columns(query_mix):
    """A right answer to exercise 2 (the lab's solution)."""
    by_column = shares(query_mix)
    return [max(by_column, key=by_column.get)]


def column_of(predicate: str) -> str:
    return next(c for c in COLUMNS if re.search(rf"\b{c}\b", predicate))


# -- right answers -----------------------------------------------------------------------------

def test_the_reference_interleaving_matches_the_documented_examples_and_the_course():
    assert interleave_bits([0b11, 0b00], 2) == 0b1010
    assert interleave_bits([0b00, 0b11], 2) == 0b0101
    assert interleave_bits([0b101], 3) == 0b101
    assert interleave_bits([1, 2, 4], 3) == 0b001_010_100
    for values, bits in zx.interleave_cases(random.Random(0)):
        assert interleave_bits(values, bits) == int(z_value([[v] for v in values], bits)[0])


def test_the_cases_cover_the_edges_and_change_from_run_to_run():
    runs = [zx.interleave_cases(random.Random(seed)) for seed in SEEDS]
    for cases in runs:
        assert ([0b11, 0b00], 2) in cases and ([0b00, 0b11], 2) in cases
        assert any(all(v == 0 for v in values) for values, _ in cases), "all zeros"
        assert any(all(v == 2**bits - 1 for v in values) and bits > 1 for values, bits in cases), "the maximum"
        assert any(max(values) < 2 ** (bits // 2) and bits >= 6 for values, bits in cases), "leading zeros"
        assert any(len(values) == 1 for values, _ in cases) and any(bits == 1 for _, bits in cases)
        assert any(len(values) >= 4 for values, _ in cases) and any(bits >= 10 for _, bits in cases)
        assert all(len(values) * bits <= 62 for values, bits in cases)
    assert runs[0] != runs[1] != runs[2]


def test_the_mixes_are_dominated_by_one_column_and_vary():
    mixes = [zx.random_query_mix(random.Random(seed)) for seed in range(100)]
    for mix in mixes:
        by_column = shares(mix)
        assert abs(sum(s for _, s in mix) - 1) < 1e-3, mix
        assert len(by_column) == 2 and max(by_column.values()) >= 0.8, mix
        assert "user_id" != max(by_column, key=by_column.get), "never the example's answer"
    dominant = [max(shares(m), key=shares(m).get) for m in mixes]
    assert set(dominant) == {"ts", "amount"}
    largest_on_minor = [m for m in mixes if column_of(max(m, key=lambda q: q[1])[0]) != zorder_columns(m)[0]]
    more_queries_on_minor = [m for m in mixes if len([q for q in m if column_of(q[0]) == zorder_columns(m)[0]]) * 2
                             < len(m)]
    assert 25 < len(largest_on_minor) < 75 and 25 < len(more_queries_on_minor) < 75


@pytest.mark.parametrize("seed", solution_seeds(SEEDS))
def test_lab08_the_solutions_pass_at_the_seeds(spark, seeded, capsys, seed):
    seeded(seed)
    check_interleave_bits(interleave_bits)
    check_zorder_columns(zorder_columns)
    out = capsys.readouterr().out
    assert [line[:17] for line in out.splitlines()] == ["✓ interleave_bits", "✓ zorder_columns:"], out


def test_the_reference_choice_is_the_best_measured_at_the_seeds(spark):
    """What the check compares with, measured: Z-ordering by the dominant column alone is within the
    tolerance of the best single column or pair for the example and the seeds' mixes."""
    for mix in [zx.ZORDER_QUERY_MIX] + [zx.random_query_mix(random.Random(seed)) for seed in SEEDS]:
        chosen = zx.zorder_effectiveness(spark, zorder_columns(mix), mix)
        others = [zx.zorder_effectiveness(spark, (a,), mix) for a in COLUMNS if [a] != zorder_columns(mix)]
        assert chosen >= max(others) + 0.2, (mix, chosen, others)


# -- exercise 1: wrong answers -----------------------------------------------------------------

def assert_hides_the_z_value(message: str) -> None:
    """The first line shows the case, the answer and how many cases failed, never the Z-value the case should give."""
    found = re.search(r"interleave_bits\((\[[\d, ]*\]), (\d+)\) returned (-?\d+)( \(0b[01]+\))?"
                      r"(, and \d+ more of the \d+ cases of this run are wrong too)?\. \(tables of seed \d+\)$",
                      message.splitlines()[0])
    assert found, message
    values, bits = [int(v) for v in found.group(1)[1:-1].split(",") if v.strip()], int(found.group(2))
    expected = interleave_bits(values, bits)
    assert int(found.group(3)) != expected and f"(0b{expected:b})" not in message, message


def low_bits_first(values, bits):
    return int("".join(str((v >> b) & 1) for b in range(bits) for v in values), 2)


def concatenated(values, bits):
    return int("".join(format(v, f"0{bits}b") for v in values), 2)


def without_leading_zeros(values, bits):
    strings = [format(v, "b") for v in values]
    return int("".join(s[i] for i in range(max(map(len, strings))) for s in strings if i < len(s)), 2)


def one_bit_short(values, bits):
    return interleave_bits(values, max(1, bits - 1))


@pytest.mark.parametrize("wrong, words", [
    (lambda values, bits: interleave_bits(list(reversed(values)), bits), "first value's bit comes first"),
    (low_bits_first, "most significant bit"),
    (concatenated, "not each value whole"),
    (without_leading_zeros, "leading zeros count"),
    (one_bit_short, "down to bit 0"),
], ids=["second value first", "low bits first", "concatenated", "no leading zeros", "one bit short"])
def test_lab08_bit_order_mistakes_get_their_own_hint(seeded, wrong, words):
    for seed in SEEDS:
        seeded(seed)
        message = failure(check_interleave_bits, wrong)
        assert words in message, message
        assert_hides_the_z_value(message)


def test_lab08_an_answer_fitted_to_the_examples_is_refused(seeded):
    def fitted(values, bits):
        return {(3, 0, 2): 10, (0, 3, 2): 5}.get((*values, bits), 0)

    seed = seeded(SEEDS[0])
    message = failure(check_interleave_bits, fitted)
    assert f"tables of seed {seed}" in message, message
    assert_hides_the_z_value(message)


def test_lab08_an_interleaving_that_empties_the_callers_list_is_refused():
    def consumes(values, bits):
        z = interleave_bits(values, bits)
        values.clear()
        return z

    message = failure(check_interleave_bits, consumes)
    assert "changed its argument" in message and "in place" in message, message


def test_lab08_the_course_interleaving_is_not_an_answer():
    message = failure(check_interleave_bits, lambda values, bits: int(z_value([[v] for v in values], bits)[0]))
    assert "deltalab.curves.z_value" in message and "yourself" in message, message


def test_not_a_function_and_wrong_type_are_explained():
    assert "not a function" in failure(check_interleave_bits, 42)
    assert "must return an int" in failure(check_interleave_bits, lambda values, bits: str(interleave_bits(values, bits)))


# -- exercise 2: wrong answers -----------------------------------------------------------------

def test_zorder_check_refuses_bad_column_lists_before_touching_spark(spark):
    for answer in (["nope"], ["user_id", "ts", "amount"], [], "user_id", ["ts", "ts"]):
        message = failure(check_zorder_columns, lambda query_mix, answer=answer: answer)
        assert "zorder_columns returned" in message, message


def assert_hides_the_columns(message: str, answer: list[str], mix) -> None:
    """The message names the student's columns, never the dominant column as a list to copy."""
    right = zorder_columns(mix)
    if right != answer:
        assert str(right) not in message, message


@pytest.mark.parametrize("seed, wrong, which", [
    (SEEDS[0], lambda query_mix: ["user_id"], "drawn for this run"),                    # fitted to the example
    (SEEDS[0], lambda query_mix: [column_of(max(query_mix, key=lambda q: q[1])[0])], "drawn for this run"),
    (SEEDS[1], lambda query_mix: [max(COLUMNS, key=lambda c: sum(column_of(p) == c for p, _ in query_mix))],
     "drawn for this run"),                                                               # most queries, not most share
    (SEEDS[2], lambda query_mix: [column_of(query_mix[0][0])], "drawn for this run"),      # the first query's column
    (SEEDS[0], lambda query_mix: sorted(shares(query_mix), key=lambda c: -shares(query_mix)[c])[:2], "example mix"),
    (SEEDS[0], lambda query_mix: ["ts"], "example mix"),                                  # a column no query uses
], ids=["fitted to the example", "largest query", "most queries", "first query", "every column queried",
        "unqueried column"])
def test_lab08_column_choices_that_ignore_the_shares_are_refused(spark, seeded, seed, wrong, which):
    seeded(seed)
    mix = zx.random_query_mix(random.Random(seed)) if which == "drawn for this run" else zx.ZORDER_QUERY_MIX
    message = failure(check_zorder_columns, wrong)
    assert which in message and "skips clearly more" in message, message
    assert_hides_the_columns(message, wrong(mix), mix)
    if which == "drawn for this run":
        assert f"tables of seed {seed}" in message, message


def test_lab08_a_choice_that_sorts_the_callers_mix_is_refused(spark, seeded):
    def sorts_in_place(query_mix):
        query_mix.sort(key=lambda q: -q[1])
        return zorder_columns(query_mix)

    seeded(SEEDS[0])
    message = failure(check_zorder_columns, sorts_in_place)
    assert "changed its argument" in message, message


def test_lab08_a_choice_that_runs_spark_is_refused(spark, seeded):
    def experiments(query_mix):
        spark.range(4).count()      # stands for OPTIMIZE and measure inside the function
        return zorder_columns(query_mix)

    seeded(SEEDS[0])
    message = failure(check_zorder_columns, experiments)
    assert "Spark job" in message and "measured instead of choosing" in message, message


def test_lab08_a_choice_that_asks_the_check_is_refused(spark, seeded):
    seeded(SEEDS[0])
    message = failure(check_zorder_columns, lambda query_mix: list(zx._reference_choices(query_mix)[0]))
    assert "_reference_choices" in message and "the check's own reference" in message, message
