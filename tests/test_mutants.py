"""tests/support/mutants.py: the mutants of a lab's solution (no Spark: the cells' code only)."""

from __future__ import annotations

import ast

import pytest

from lab_testing import LABS_DIR
from mutants import OPERATORS, mutants_of_cell, lab_mutants, select, solution_lines

CELL = '''def newest(table_path: str, names: list[str]) -> int:
    """The newest version among names (a docstring the student is given: never mutated)."""
    ### BEGIN SOLUTION
    versions = [int(n[:20]) for n in names if n.endswith(".json") and not n.startswith("_")]
    for v in sorted(versions):
        if v < 0:
            continue
    return max(versions, default=-1)
    ### END SOLUTION
'''
LABS = sorted(p.name for p in (LABS_DIR / "source").iterdir() if p.is_dir())


def test_only_the_lines_between_the_markers_change():
    mutants = mutants_of_cell("newest", CELL)
    assert mutants
    head = CELL.splitlines()[:2]
    for mutant in mutants:
        assert ast.unparse(ast.parse(mutant.source)).splitlines()[0] == ast.unparse(ast.parse(CELL)).splitlines()[0]
        assert "(a docstring the student is given: never mutated)" in mutant.source
        assert solution_lines(CELL)[0] < mutant.line < solution_lines(CELL)[1]
    assert head[0].startswith("def newest")


def test_each_operator_makes_the_mistake_it_names():
    changes = {(m.operator, m.mutated) for m in mutants_of_cell("newest", CELL)}
    expected = {
        ("compare", "if v <= 0:"),
        ("number", "if v < 1:"),
        ("boolop", "versions = [int(n[:20]) for n in names if n.endswith('.json') or not n.startswith('_')]"),
        ("not", "versions = [int(n[:20]) for n in names if n.endswith('.json') and n.startswith('_')]"),
        ("jump", "pass"),
        ("slice", "versions = [int(n) for n in names if n.endswith('.json') and (not n.startswith('_'))]"),
        ("call", "for v in versions:"),
        ("call", "return min(versions, default=-1)"),
        ("default", "return max(versions)"),
        ("string", "versions = [int(n[:20]) for n in names if n.endswith('.parquet') and (not n.startswith('_'))]"),
    }
    assert expected <= changes, sorted(expected - changes)
    assert {operator for operator, _ in changes} <= set(OPERATORS)


def test_mutants_compile_differ_from_the_solution_and_from_each_other():
    mutants = mutants_of_cell("newest", CELL)
    sources = [m.source for m in mutants]
    assert len(set(sources)) == len(sources)
    assert ast.unparse(ast.parse(CELL)) not in sources
    assert len({m.key for m in mutants}) == len(mutants), "a key names one mutant"


def test_a_cell_without_markers_is_refused():
    with pytest.raises(ValueError, match="BEGIN SOLUTION"):
        mutants_of_cell("x", "def f():\n    return 1\n")


def test_a_cap_takes_the_same_mutants_every_time_and_every_operator_first():
    mutants = mutants_of_cell("newest", CELL)
    chosen = select(mutants, 5, "lab02_log")
    assert chosen == select(mutants, 5, "lab02_log") and len(chosen) == 5
    assert len({m.operator for m in chosen}) == 5, "five operators before any repeats"
    assert select(mutants, 0, "lab02_log") == mutants


@pytest.mark.parametrize("lab", LABS)
def test_every_labs_solution_has_mutants_that_compile(lab):
    mutants = lab_mutants(lab)
    # Lab 06's solutions are mostly SQL in f-strings, which no operator changes yet: two mutants.
    assert len(mutants) >= 2, f"{lab}: {len(mutants)} mutants"
    for mutant in mutants:
        compile(mutant.source, mutant.exercise, "exec")
        assert mutant.original != mutant.mutated
