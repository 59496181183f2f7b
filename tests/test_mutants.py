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


# ------------------------------------------------------------------------- the runner, on a lab of its own
#
# No Spark: a lab made of three cells (set-up, one solution, its check) and a session that is a dictionary of
# settings. tests/test_lab_mutants.py (make test-mutants) runs the real labs.

import textwrap

import mutants
from mutants import Allowed, LabCells, lab_seeds, load_allowed, run_lab, stale_entries

SETUP = '''
from deltalab.labs.report import CheckFailed, passed

SPILLED = []          # a mutant that writes here leaves the state broken: the canary must see it

def check_spin(spin):
    for n, expected in ((0, 1), (3, 4), (5, 6)):
        if spin(n) != expected:
            raise CheckFailed("spin", f"spin({n}) is not the number after {n}.", "count one past n.")
    if SPILLED:
        raise RuntimeError("a check's own bug")
    passed("spin", "every n")
'''
SPIN = '''def spin(n: int) -> int:
    """One past n, counting (the student is given this line)."""
    ### BEGIN SOLUTION
    i = 0
    while True:
        i += 1
        if i > n:
            break
    if i < 0:
        SPILLED.append(i)
    return i
    ### END SOLUTION
'''


class _Conf:
    def __init__(self) -> None:
        self.getAll = {"spark.sql.shuffle.partitions": "2"}

    def set(self, key, value):
        self.getAll[key] = value

    def unset(self, key):
        self.getAll.pop(key, None)


class _Session:
    """What the runner asks of a Spark session: its settings, cancelling jobs, the py4j client."""

    def __init__(self) -> None:
        self.conf = _Conf()
        self.cancelled = 0
        session = self

        class Context:
            _gateway = type("G", (), {"_gateway_client": object()})()

            def cancelAllJobs(self):
                session.cancelled += 1

        self.sparkContext = Context()


def spin_lab(check: str = "check_spin(spin)") -> LabCells:
    return LabCells("fake_lab", [SETUP], {"spin": SPIN}, {"check_spin": check})


def run_spin(monkeypatch, tmp_path, allowed=(), check="check_spin(spin)", keep=lambda m: True):
    monkeypatch.setattr(mutants, "TIMEOUT_FLOOR", 1.0)
    generated = [m for m in mutants_of_cell("spin", SPIN) if keep(m)]
    run = run_lab("fake_lab", _Session(), seeds=[5, 6], cap=0, minutes=0, allowed=list(allowed), mutants=generated,
                  cells=spin_lab(check))
    run.write(tmp_path)
    return run


def test_a_run_kills_times_out_and_reports_each_survivor(monkeypatch, tmp_path, capsys):
    equivalent = next(m for m in mutants_of_cell("spin", SPIN) if m.mutated == "if i <= 0:")
    reason = "i is at least 1 there, so < 0 and <= 0 are both false"
    run = run_spin(monkeypatch, tmp_path, [Allowed(*equivalent.key, reason)],
                   keep=lambda m: m.mutated in ("if i >= n:", "if i <= 0:", "if i < 1:", "i = 1")
                   or m.operator == "jump")
    by_change = {o.mutant.mutated: o for o in run.outcomes}
    assert by_change["if i >= n:"].status == "killed" and by_change["if i >= n:"].check == "check_spin"
    assert by_change["i = 1"].status == "killed" and not by_change["i = 1"].raised
    assert by_change["pass"].status == "timeout", "break left out: an endless loop, stopped by the alarm"
    assert by_change["if i <= 0:"].status == "survived" and by_change["if i <= 0:"].survived_at == [5, 6]
    assert by_change["if i < 1:"].status == "survived", "i < 1 is never true either"
    assert [o.mutant.mutated for o in run.not_allowed] == ["if i < 1:"]
    assert not run.infrastructure_problems(), run.infrastructure_problems()
    killed, judged = run.score()
    assert (killed, judged) == (run.count("killed"), len(run.outcomes) - 1)
    report = (tmp_path / "fake_lab.md").read_text()
    assert report in capsys.readouterr().out
    assert f"`if i < 0:`  →  `if i <= 0:`  [allowed: {reason}]" in report
    assert "`if i < 0:`  →  `if i < 1:`  [NOT ALLOWED]" in report
    assert "seeds: 5 (every mutant), then 6 (the survivors)" in report


def test_a_check_that_crashes_or_a_poisoned_state_is_told_apart_from_survivors(monkeypatch, tmp_path):
    # `if i < 0` -> `if True`-like changes fill SPILLED: the check then raises RuntimeError (a crash), and the
    # unmutated solution's run at the end (the canary) fails too.
    run = run_spin(monkeypatch, tmp_path, keep=lambda m: m.operator == "if" and "SPILLED.append(i)" in m.mutated)
    problems = run.infrastructure_problems()
    assert [o.status for o in run.outcomes] == ["crashed"]
    assert any(p.startswith("crashed check: check_spin on spin L9 if: RuntimeError") for p in problems), problems
    assert run.poisoned.startswith("the unmutated solution fails check_spin at seed 5 after the last mutant"), problems
    assert not run.not_allowed


def test_a_failing_solution_is_an_infrastructure_problem_not_a_survivor(monkeypatch, tmp_path):
    run = run_spin(monkeypatch, tmp_path, check="check_spin(lambda n: n)")
    assert run.broken.startswith("the unmutated solution fails check_spin at seed 5"), run.broken
    assert run.count("not run") == len(run.outcomes)


def test_a_kill_message_must_be_in_the_labs_plain_format(monkeypatch, tmp_path):
    from deltalab.labs.report import CheckFailed

    def check_spin(spin):
        if spin(3) != 4:
            error = CheckFailed("spin", "wrong", "look")
            error.args = ("Traceback (most recent call last): wrong",)
            raise error
        print("✓ spin: fine")

    lab = spin_lab("check(spin)")
    monkeypatch.setattr(mutants, "TIMEOUT_FLOOR", 1.0)
    lab.setup = [SETUP, "check = CHECK"]
    monkeypatch.setitem(__builtins__ if isinstance(__builtins__, dict) else vars(__builtins__), "CHECK", check_spin)
    generated = [m for m in mutants_of_cell("spin", SPIN) if m.mutated == "if i >= n:"]
    run = run_lab("fake_lab", _Session(), seeds=[5], cap=0, minutes=0, allowed=[], mutants=generated, cells=lab)
    assert run.outcomes[0].status == "killed" and run.outcomes[0].bad_message
    assert any(p.startswith("bad kill message:") for p in run.infrastructure_problems())


def test_mutants_left_when_the_budget_ends_are_not_run(monkeypatch, tmp_path):
    monkeypatch.setattr(mutants, "TIMEOUT_FLOOR", 1.0)
    generated = [m for m in mutants_of_cell("spin", SPIN) if m.operator == "number"]
    run = run_lab("fake_lab", _Session(), seeds=[5], cap=0, minutes=1e-9, allowed=[], mutants=generated,
                  cells=spin_lab())
    assert run.count("not run") == len(generated) and not run.infrastructure_problems()
    assert "not run " + str(len(generated)) in run.render()


def test_session_settings_a_mutant_changes_are_put_back():
    from mutants import Runner

    session = _Session()
    runner = Runner("fake_lab", session, spin_lab())
    runner.snapshot_settings()
    session.conf.set("spark.sql.shuffle.partitions", "7")
    session.conf.set("spark.databricks.delta.schema.autoMerge.enabled", "true")
    session.conf.set("spark.databricks.delta.lastCommitVersionInSession", "3")   # Delta's own: left alone
    assert runner.restore_settings() == ["spark.databricks.delta.schema.autoMerge.enabled",
                                         "spark.sql.shuffle.partitions"]
    assert session.conf.getAll == {"spark.sql.shuffle.partitions": "2",
                                   "spark.databricks.delta.lastCommitVersionInSession": "3"}


def test_a_change_reaches_the_checks_of_the_exercises_that_use_it():
    lab = LabCells.read("lab13_clustering")
    assert lab.seeing("clustering_columns") == ["check_clustering_columns", "check_optimize_rewrites"]
    assert lab.seeing("optimize_rewrites") == ["check_optimize_rewrites"]
    assert LabCells.read("lab02_log").seeing("table_version") == ["check_table_version"]


@pytest.mark.parametrize("lab", LABS)
def test_every_lab_has_fixed_seeds_for_its_mutants(lab):
    seeds = lab_seeds(lab)
    assert seeds and len(set(seeds)) == len(seeds)
    assert all(type(s) is int for s in seeds)


def test_the_wrong_answers_seed_comes_first():
    assert lab_seeds("lab02_log") == [10, 11, 7]
    assert lab_seeds("lab13_clustering") == [3, 4]


def test_the_allow_list_is_well_formed_and_names_only_mutants_that_exist():
    allowed = load_allowed()
    assert set(allowed) <= set(LABS), sorted(set(allowed) - set(LABS))
    for lab, entries in allowed.items():
        stale = stale_entries(entries, lab_mutants(lab))
        assert not stale, f"{lab}: no mutant has these keys any more (the solution changed?): {stale}"


def test_an_allow_list_entry_needs_its_five_fields_and_a_one_line_reason(tmp_path):
    path = tmp_path / "allowed.toml"
    path.write_text(textwrap.dedent('''
        [[lab02_log]]
        exercise = "table_version"
        operator = "boolop"
        original = "a"
        mutated = "b"
    '''))
    with pytest.raises(ValueError, match="exactly"):
        load_allowed(path)
    path.write_text(path.read_text() + 'reason = """two\nlines"""\n')
    with pytest.raises(ValueError, match="one line"):
        load_allowed(path)
    path.write_text(path.read_text().replace('"""two\nlines"""', '"why"'))
    assert load_allowed(path)["lab02_log"][0].reason == "why"
    assert stale_entries(load_allowed(path)["lab02_log"], mutants_of_cell("newest", CELL))
