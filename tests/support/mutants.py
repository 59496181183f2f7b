"""Mutants of a lab's reference solution: small wrong versions of it, one change each (issue 61).

A lab's checks are a test of the learner's understanding, so every small change to the reference solution
that makes it wrong should fail a check. This module makes those changes and runs them through the lab's
checks (:func:`run_lab`, which ``make test-mutants`` runs per lab: tests/test_lab_mutants.py), in this process,
on its Spark session: the unmutated solution first (it must pass), then each mutant until a check refuses it,
survivors again at the lab's other seeds, and the unmutated solution once more at the end (a canary for state a
mutant left broken). The report goes to ``build/mutants/<lab>.md``; survivors shown to be equivalent to the
solution are listed in ``tests/mutants_allowed.toml``.

A mutant changes one node of a solution cell's code between ``### BEGIN SOLUTION`` and ``### END SOLUTION``
(never the ``def`` line or the docstring the student is given). The operators are the mistakes a learner
makes: a comparison off by its boundary, a constant off by one, ``and`` for ``or``, a branch or a ``continue``
left out, a ``sorted``/``set``/``unquote`` forgotten, ``max`` for ``min``, a file pattern one ``*`` short.
Mutants are listed in a fixed order, so that a cap picks the same ones on every run, and each has a key
(exercise, operator, original line, mutated line) that does not depend on line numbers, for an allow-list of
survivors shown to be equivalent.

Here, not in ``src/deltalab``: the course image copies ``src/`` for students, and mutants quote solutions.
"""

from __future__ import annotations

import ast
import contextlib
import difflib
import io
import json
import os
import random
import signal
import threading
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"

#: The operators in the order a cap takes them (round robin, shuffled per lab by :func:`select`).
OPERATORS = ("compare", "number", "boolop", "not", "if", "jump", "return", "slice", "call", "default", "string",
             "arith")

_COMPARE = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt, ast.Eq: ast.NotEq,
            ast.NotEq: ast.Eq, ast.In: ast.NotIn, ast.NotIn: ast.In, ast.Is: ast.IsNot, ast.IsNot: ast.Is}
_ARITH = {ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Div, ast.Div: ast.Mult, ast.FloorDiv: ast.Mult}
#: Calls a learner forgets: ``f(x)`` becomes ``x``.
_UNWRAPPED = {"sorted", "set", "list", "int", "str", "unquote", "tuple", "frozenset", "abs"}
#: Method calls a learner forgets: ``x.m()`` becomes ``x``.
_UNWRAPPED_METHODS = {"strip", "lower", "upper", "rstrip", "lstrip"}
_RENAMED = {"max": "min", "min": "max", "any": "all", "all": "any"}
_SUFFIXES = ((".json", ".parquet"), (".parquet", ".json"))

Change = Callable[[ast.AST], "ast.AST | list[ast.stmt] | None"]


@dataclass(frozen=True)
class Mutant:
    """One wrong version of one solution cell."""

    exercise: str    # the cell's nbgrader grade_id
    operator: str    # one of OPERATORS
    line: int        # the changed node's line in the cell (1-based), for the report only
    original: str    # the changed statement as ast.unparse writes it, before ...
    mutated: str     # ... and after the change
    source: str      # the whole mutated cell, ready to run in place of the solution's

    @property
    def key(self) -> tuple[str, str, str, str]:
        """What identifies the mutant from run to run (line numbers move when a solution is edited)."""
        return self.exercise, self.operator, self.original, self.mutated


def solution_lines(source: str) -> tuple[int, int]:
    """The 1-based line numbers of a solution cell's BEGIN and END markers."""
    lines = source.splitlines()
    try:
        begin = next(i for i, line in enumerate(lines, 1) if line.strip() == BEGIN)
        end = next(i for i, line in enumerate(lines, 1) if line.strip() == END and i > begin)
    except StopIteration:
        raise ValueError(f"a solution cell without its {BEGIN!r} and {END!r} lines") from None
    return begin, end


def _swap(node: ast.AST, field: str, index: int, new: ast.AST) -> ast.AST:
    getattr(node, field)[index] = new
    return node


def _changes(node: ast.AST) -> Iterator[tuple[str, Change]]:
    """The one-node changes of ``node``, in a fixed order: (operator, change). A change returns the node that
    replaces ``node`` (a list for a statement, ``None`` to drop it)."""
    if isinstance(node, ast.Compare):
        for i, op in enumerate(node.ops):
            if type(op) in _COMPARE:
                yield "compare", lambda n, i=i, op=op: _swap(n, "ops", i, _COMPARE[type(op)]())
    elif isinstance(node, ast.Constant) and type(node.value) is int:
        for delta in (-1, 1):
            yield "number", lambda n, delta=delta: ast.Constant(n.value + delta)
    elif isinstance(node, ast.BoolOp):
        yield "boolop", lambda n: ast.BoolOp(ast.Or() if isinstance(n.op, ast.And) else ast.And(), n.values)
        for i in range(len(node.values)):
            def drop(n: ast.BoolOp, i: int = i) -> ast.AST:
                rest = n.values[:i] + n.values[i + 1:]
                return rest[0] if len(rest) == 1 else ast.BoolOp(n.op, rest)
            yield "boolop", drop
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        yield "not", lambda n: n.operand
    elif isinstance(node, ast.If):
        yield "if", lambda n: n.orelse or [ast.Pass()]          # the branch left out
        yield "if", lambda n: n.body                            # taken whatever the condition
        if node.orelse:
            yield "if", lambda n: ast.If(n.test, n.body, [])     # the else left out
    elif isinstance(node, ast.IfExp):
        yield "if", lambda n: n.body
        yield "if", lambda n: n.orelse
    elif isinstance(node, (ast.Continue, ast.Break)):
        yield "jump", lambda n: ast.Pass()
    elif isinstance(node, ast.Return) and isinstance(node.value, ast.BinOp) and isinstance(node.value.op, ast.BitOr):
        yield "return", lambda n: ast.Return(n.value.left)
        yield "return", lambda n: ast.Return(n.value.right)
    elif isinstance(node, ast.Subscript):
        if isinstance(node.slice, ast.Slice):
            yield "slice", lambda n: n.value
        elif isinstance(node.slice, ast.UnaryOp) and isinstance(node.slice.op, ast.USub) \
                and isinstance(node.slice.operand, ast.Constant) and node.slice.operand.value == 1:
            yield "slice", lambda n: ast.Subscript(n.value, ast.Constant(0), n.ctx)
        elif isinstance(node.slice, ast.Constant) and node.slice.value == 0:
            yield "slice", lambda n: ast.Subscript(n.value, ast.UnaryOp(ast.USub(), ast.Constant(1)), n.ctx)
    elif isinstance(node, ast.Call):
        name = node.func.id if isinstance(node.func, ast.Name) else None
        method = node.func.attr if isinstance(node.func, ast.Attribute) else None
        if name in _UNWRAPPED and len(node.args) == 1 and not node.keywords:
            yield "call", lambda n: n.args[0]
        if method in _UNWRAPPED_METHODS and not node.args and not node.keywords:
            yield "call", lambda n: n.func.value
        if name in _RENAMED:
            yield "call", lambda n: ast.Call(ast.Name(_RENAMED[n.func.id], ast.Load()), n.args, n.keywords)
        if method in ("get", "pop") and len(node.args) == 2:
            yield "default", lambda n: ast.Call(n.func, n.args[:1], n.keywords)
        if name in ("max", "min", "next") and (any(k.arg == "default" for k in node.keywords) or
                                               (name == "next" and len(node.args) == 2)):
            yield "default", lambda n: ast.Call(n.func, n.args[:1], [k for k in n.keywords if k.arg != "default"])
    elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value:
        text = node.value
        for i, char in enumerate(text):
            if char == "*":
                yield "string", lambda n, i=i: ast.Constant(n.value[:i] + n.value[i + 1:])
        for old, new in _SUFFIXES:
            if old in text:
                yield "string", lambda n, old=old, new=new: ast.Constant(n.value.replace(old, new))
    elif isinstance(node, ast.BinOp) and type(node.op) in _ARITH:
        yield "arith", lambda n: ast.BinOp(n.left, _ARITH[type(n.op)](), n.right)


class _Mutator(ast.NodeTransformer):
    """Walks a cell's tree; lists the changes inside the solution's lines, or makes the ``target``-th one."""

    def __init__(self, lines: tuple[int, int], target: int | None = None) -> None:
        self.begin, self.end = lines
        self.target = target
        self.count = -1
        self.found: list[tuple[str, int]] = []   # (operator, line) of each change, in order

    def visit(self, node: ast.AST):  # noqa: ANN201 - what NodeTransformer.visit returns
        line = getattr(node, "lineno", None)
        if line is not None and self.begin < line < self.end:
            for operator, change in _changes(node):
                self.count += 1
                if self.target is None:
                    self.found.append((operator, line))
                elif self.count == self.target:
                    return change(node)
        return self.generic_visit(node)


def _changed_lines(before: str, after: str) -> tuple[str, str]:
    """The lines that differ between two unparsed cells, each side joined with ' / '."""
    old, new = before.splitlines(), after.splitlines()
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=old, b=new, autojunk=False).get_opcodes():
        if tag != "equal":
            return " / ".join(s.strip() for s in old[i1:i2]), " / ".join(s.strip() for s in new[j1:j2])
    return "", ""


def mutants_of_cell(exercise: str, source: str) -> list[Mutant]:
    """Every one-change mutant of one solution cell that compiles and differs from the solution, in a fixed order."""
    lines = solution_lines(source)
    original = ast.unparse(ast.parse(source))
    collector = _Mutator(lines)
    collector.visit(ast.parse(source))
    mutants: list[Mutant] = []
    seen = {original}
    for target, (operator, line) in enumerate(collector.found):
        tree = ast.fix_missing_locations(_Mutator(lines, target).visit(ast.parse(source)))
        mutated = ast.unparse(tree)
        if mutated in seen:
            continue
        try:
            compile(mutated, f"<mutant of {exercise}>", "exec")
        except SyntaxError:
            continue
        seen.add(mutated)
        before, after = _changed_lines(original, mutated)
        mutants.append(Mutant(exercise, operator, line, before, after, mutated))
    return mutants


def select(mutants: list[Mutant], cap: int, salt: str) -> list[Mutant]:
    """At most ``cap`` of ``mutants`` (all of them for 0), taking the operators in turn, in an order shuffled by
    ``salt`` (the lab's name): the same ones on every run, and every operator represented before any repeats."""
    if cap <= 0 or cap >= len(mutants):
        return list(mutants)
    order = list(OPERATORS)
    random.Random(salt).shuffle(order)
    queues = {operator: [m for m in mutants if m.operator == operator] for operator in order}
    chosen: list[Mutant] = []
    while len(chosen) < cap:
        for operator in order:
            if queues[operator] and len(chosen) < cap:
                chosen.append(queues[operator].pop(0))
    return chosen


def lab_mutants(lab: str) -> list[Mutant]:
    """The mutants of every solution cell of ``lab``'s source notebook, cell by cell."""
    from lab_testing import nbgrader_meta, read, source

    return [mutant for cell in read(source(lab)).cells if nbgrader_meta(cell).get("solution")
            for mutant in mutants_of_cell(nbgrader_meta(cell)["grade_id"], cell.source)]


# ----------------------------------------------------------------------------------------- running them
#
# ``make test-mutants`` (tests/test_lab_mutants.py): for one lab, at its first seed, the set-up cell runs once and
# the unmutated solution runs through every check (the baseline, which must pass); then each mutant, in a copy of
# the set-up's namespace, through the checks that can see its change, until one refuses it. Survivors run again at
# the lab's other seeds. The verdicts, the allow-list of equivalent survivors and the report are below.

REPO = Path(__file__).resolve().parents[2]
ALLOWED = REPO / "tests" / "mutants_allowed.toml"
REPORTS = REPO / "build" / "mutants"
#: At most this many mutants per lab (``DELTALAB_MUTANTS_MAX``; 0: all of them) ...
CAP_ENV, CAP_DEFAULT = "DELTALAB_MUTANTS_MAX", 60
#: ... and at most this many minutes per lab for them (``DELTALAB_MUTANTS_LAB_MINUTES``): the rest are "not run".
MINUTES_ENV, MINUTES_DEFAULT = "DELTALAB_MUTANTS_LAB_MINUTES", 20.0
#: A check gets max(this, TIMEOUT_FACTOR x its baseline seconds at that seed) per mutant.
TIMEOUT_FLOOR, TIMEOUT_FACTOR = 60.0, 10.0
#: The names of a lab test file's seeds, in the order they are used: the first one found that is a whole number
#: runs every mutant (the wrong answers' seed, whose tables have the cases), the rest run the survivors.
_SEED_NAMES = ("WRONG_SEED", "TEST_SEED", "SEEDS", "SOLUTION_SEEDS")
#: The labs whose test file names its seeds only inline: lab09's wrong answers run at 8 (``fixed_seed``), its
#: solutions at 6, 5 and 8 (``solution_seeds([6, 5, 8])``).
_SEEDS_INLINE = {"lab09_streaming": [8, 6, 5]}


class MutantTimeout(BaseException):
    """A mutant ran past its limit. A BaseException, so that the ``except Exception`` of ``call_student`` and of a
    check lets it through."""


class InfrastructureError(Exception):
    """The run cannot judge the lab's checks: its solution fails a check, a check crashed, the state is poisoned."""


def lab_seeds(lab: str) -> list[int]:
    """The seeds of ``lab``'s test file (``tests/test_<lab>.py``), read from its code, not imported: the wrong
    answers' seed first (``WRONG_SEED``, or ``TEST_SEED`` when it is a number), then ``SEEDS`` or
    ``SOLUTION_SEEDS`` in their order, each once (:data:`_SEEDS_INLINE` for a file that names them only inline)."""
    if lab in _SEEDS_INLINE:
        return list(_SEEDS_INLINE[lab])
    tree = ast.parse((REPO / "tests" / f"test_{lab}.py").read_text())
    values: dict[str, object] = {}
    for node in tree.body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Name) and target.id in _SEED_NAMES:
                    try:
                        values[target.id] = ast.literal_eval(node.value)
                    except ValueError:      # TEST_SEED = run_seed(): not a fixed seed
                        pass
    seeds: list[int] = []
    for name in _SEED_NAMES:
        value = values.get(name)
        for seed in (value if isinstance(value, (tuple, list)) else [value]):
            if type(seed) is int and seed not in seeds:
                seeds.append(seed)
    if not seeds:
        raise InfrastructureError(f"tests/test_{lab}.py names no fixed seed ({', '.join(_SEED_NAMES)})")
    return seeds


# ------------------------------------------------------------------------------------------- allow-list

@dataclass(frozen=True)
class Allowed:
    """A survivor shown to be equivalent to the solution (``tests/mutants_allowed.toml``)."""

    exercise: str
    operator: str
    original: str
    mutated: str
    reason: str

    @property
    def key(self) -> tuple[str, str, str, str]:
        return self.exercise, self.operator, self.original, self.mutated


def load_allowed(path: Path = ALLOWED) -> dict[str, list[Allowed]]:
    """The allow-list: ``{lab: [Allowed, ...]}``. Every entry has the five fields, a one-line reason, and no two
    entries of a lab share a key."""
    data = tomllib.loads(path.read_text()) if path.exists() else {}
    allowed: dict[str, list[Allowed]] = {}
    for lab, entries in data.items():
        if not isinstance(entries, list):
            raise ValueError(f"{path.name}: [{lab}] must be an array of tables ([[{lab}]])")
        for entry in entries:
            fields = {"exercise", "operator", "original", "mutated", "reason"}
            if set(entry) != fields or not all(isinstance(v, str) and v for v in entry.values()):
                raise ValueError(f"{path.name}: [[{lab}]] entry needs exactly {sorted(fields)}, strings: {entry}")
            if "\n" in entry["reason"]:
                raise ValueError(f"{path.name}: [[{lab}]] a reason is one line: {entry['reason']!r}")
            allowed.setdefault(lab, []).append(Allowed(**entry))
        keys = [a.key for a in allowed.get(lab, [])]
        if len(set(keys)) != len(keys):
            raise ValueError(f"{path.name}: [[{lab}]] lists a mutant twice")
    return allowed


def stale_entries(allowed: list[Allowed], mutants: list[Mutant]) -> list[Allowed]:
    """The entries whose key no generated mutant has (cap or not): the solution changed under them."""
    keys = {m.key for m in mutants}
    return [a for a in allowed if a.key not in keys]


# ---------------------------------------------------------------------------------------- the lab's cells

def _bound_names(source: str) -> set[str]:
    """The names a cell binds at its top level (functions, classes, assignments, imports)."""
    names: set[str] = set()
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
    return names


def _used_names(source: str) -> set[str]:
    return {node.id for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Name)}


@dataclass
class LabCells:
    """A lab's source notebook as the runner needs it: set-up, solutions and checks, in notebook order."""

    lab: str
    setup: list[str]
    solutions: dict[str, str]        # exercise -> its solution cell
    checks: dict[str, str]           # check grade_id -> its cell (``check_X(X)``)

    @classmethod
    def read(cls, lab: str) -> "LabCells":
        from lab_testing import nbgrader_meta, read, source

        cells = read(source(lab)).cells
        return cls(lab,
                   [c.source for c in cells if nbgrader_meta(c).get("grade_id") == "setup"],
                   {nbgrader_meta(c)["grade_id"]: c.source for c in cells if nbgrader_meta(c).get("solution")},
                   {nbgrader_meta(c)["grade_id"]: c.source for c in cells if nbgrader_meta(c).get("grade")})

    def seeing(self, exercise: str) -> list[str]:
        """The checks that can see a change to ``exercise``'s cell, in notebook order: its own, and those of every
        exercise whose cell uses a name it defines (and so on, transitively)."""
        changed, reached = {exercise}, True
        while reached:
            defined = set().union(*(_bound_names(self.solutions[e]) for e in changed))
            more = {e for e, s in self.solutions.items() if e not in changed and _used_names(s) & defined}
            changed |= more
            reached = bool(more)
        return [c for c in self.checks if self._exercise_of(c) in changed]

    def _exercise_of(self, check: str) -> str | None:
        """The exercise a check cell passes to its check: the name in ``check_X(X)``."""
        for node in ast.walk(ast.parse(self.checks[check])):
            if isinstance(node, ast.Call):
                for arg in node.args:
                    if isinstance(arg, ast.Name) and arg.id in self.solutions:
                        return arg.id
        return check.removeprefix("check_")


# ------------------------------------------------------------------------------------------ one lab's run

@dataclass
class Outcome:
    """What became of one mutant. ``status``: killed, survived, timeout, crashed, not run."""

    mutant: Mutant
    status: str = "not run"
    check: str = ""               # the check that refused it (killed), crashed or ran out of time
    message: str = ""             # the kill message's first line, or the crash
    seed: int | None = None       # the seed of the verdict
    seconds: float = 0.0
    raised: bool = False          # killed because the mutant raised (the message's "raised <Type>:")
    bad_message: str = ""         # why the kill message fails assert_plain_failure
    survived_at: list[int] = field(default_factory=list)


@dataclass
class LabRun:
    """One lab's mutants through its checks, and what the report says."""

    lab: str
    seeds: list[int]
    cap: int
    minutes: float
    generated: int = 0
    outcomes: list[Outcome] = field(default_factory=list)
    allowed: list[Allowed] = field(default_factory=list)
    stale: list[Allowed] = field(default_factory=list)
    baseline: dict[int, dict[str, float]] = field(default_factory=dict)   # seed -> check -> seconds
    seeds_used: list[int] = field(default_factory=list)
    settings_restored: list[str] = field(default_factory=list)
    poisoned: str = ""
    broken: str = ""              # why the run could not judge the checks (the baseline failed, ...)
    seconds: float = 0.0
    timer: bool = True            # signal.alarm available (the main thread)

    def count(self, status: str) -> int:
        return sum(o.status == status for o in self.outcomes)

    def allowed_entry(self, mutant: Mutant) -> Allowed | None:
        return next((a for a in self.allowed if a.key == mutant.key), None)

    @property
    def survivors(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.status == "survived"]

    @property
    def not_allowed(self) -> list[Outcome]:
        return [o for o in self.survivors if self.allowed_entry(o.mutant) is None]

    def infrastructure_problems(self) -> list[str]:
        """What makes the run's verdicts untrustworthy, survivors aside."""
        problems = [self.broken] if self.broken else []
        if self.poisoned:
            problems.append(f"state poisoned: {self.poisoned}")
        problems += [f"crashed check: {o.check} on {_label(o.mutant)}: {o.message}" for o in self.outcomes
                     if o.status == "crashed"]
        problems += [f"bad kill message: {o.check} on {_label(o.mutant)}: {o.bad_message}" for o in self.outcomes
                     if o.bad_message]
        problems += [f"stale allow-list entry: {a.exercise} {a.operator} {a.original!r} -> {a.mutated!r}"
                     for a in self.stale]
        return problems

    def score(self) -> tuple[int, int]:
        run = len(self.outcomes) - self.count("not run")
        equivalent = len(self.survivors) - len(self.not_allowed)
        return self.count("killed"), run - equivalent

    def render(self) -> str:
        killed, judged = self.score()
        run = len(self.outcomes) - self.count("not run")
        first, rest = (self.seeds_used[:1], self.seeds_used[1:]) if self.seeds_used else ([], [])
        lines = [
            f"# Mutants of {self.lab}'s solution",
            "",
            f"- seeds: {', '.join(map(str, first)) or '-'} (every mutant)"
            + (f", then {', '.join(map(str, rest))} (the survivors)" if rest else ""),
            f"- generated {self.generated}, selected {len(self.outcomes)} (cap {self.cap or 'none'}), run {run}, "
            f"killed {killed} (the mutant raised: {sum(o.raised for o in self.outcomes if o.status == 'killed')}), "
            f"survived {len(self.survivors)} (allowed {len(self.survivors) - len(self.not_allowed)}), "
            f"timeout {self.count('timeout')}, crashed {self.count('crashed')}, not run {self.count('not run')}",
            f"- seconds: {self.seconds:.0f} (baseline: "
            + ", ".join(f"seed {s}: {sum(t.values()):.0f}" for s, t in self.baseline.items()) + ")"
            + (f"; budget {self.minutes:g} min" if self.minutes else ""),
            f"- score: killed {killed} / (run {run} - allowed {run - judged}) = {killed}/{judged}"
            + (f" = {100 * killed / judged:.1f}%" if judged else ""),
        ]
        if not self.timer:
            lines.append("- no time limit per mutant (not in the main thread: no signal.alarm)")
        if self.settings_restored:
            lines.append(f"- session settings put back after a mutant: {', '.join(sorted(set(self.settings_restored)))}")
        problems = self.infrastructure_problems()
        if problems:
            lines += ["", "## Infrastructure problems (the run cannot be trusted)", ""] + [f"- {p}" for p in problems]
        lines += ["", "## Survivors", ""]
        for o in self.survivors:
            entry = self.allowed_entry(o.mutant)
            verdict = f"allowed: {entry.reason}" if entry else "NOT ALLOWED"
            lines.append(f"- {_label(o.mutant)}  `{o.mutant.original}`  →  `{o.mutant.mutated}`  [{verdict}]"
                         f" (seeds {', '.join(map(str, o.survived_at))})")
        if not self.survivors:
            lines.append("(none)")
        for status in ("timeout", "crashed", "not run"):
            listed = [o for o in self.outcomes if o.status == status]
            if listed:
                lines += ["", f"## {status.capitalize()}", ""]
                lines += [f"- {_label(o.mutant)}  `{o.mutant.original}`  →  `{o.mutant.mutated}`"
                          + (f"  ({o.check}: {o.message})" if o.check else "") for o in listed]
        lines += ["", "## Killed", ""]
        lines += [f"- {_label(o.mutant)}  `{o.mutant.mutated}`  by {o.check} at seed {o.seed}"
                  f"{' (the mutant raised)' if o.raised else ''}: {o.message}"
                  for o in self.outcomes if o.status == "killed"]
        return "\n".join(lines) + "\n"

    def write(self, folder: Path = REPORTS) -> Path:
        """The report as ``<folder>/<lab>.md`` (and the outcomes as ``.json``), printed too."""
        folder.mkdir(parents=True, exist_ok=True)
        text = self.render()
        (folder / f"{self.lab}.md").write_text(text)
        (folder / f"{self.lab}.json").write_text(json.dumps(
            [{"exercise": o.mutant.exercise, "operator": o.mutant.operator, "line": o.mutant.line,
              "original": o.mutant.original, "mutated": o.mutant.mutated, "status": o.status, "check": o.check,
              "seed": o.seed, "seconds": round(o.seconds, 2), "raised": o.raised, "message": o.message,
              "survived_at": o.survived_at} for o in self.outcomes], indent=1, ensure_ascii=False))
        print(text)
        return folder / f"{self.lab}.md"


def _label(mutant: Mutant) -> str:
    return f"{mutant.exercise} L{mutant.line} {mutant.operator}"


@dataclass
class _Verdict:
    status: str                # killed, survived, timeout, crashed
    check: str = ""
    message: str = ""
    raised: bool = False
    bad_message: str = ""


def _in_py4j(frame) -> bool:
    """Whether ``frame`` (where a signal interrupted this thread) is inside a py4j call: waiting for the JVM's answer."""
    while frame is not None:
        if f"{os.sep}py4j{os.sep}" in frame.f_code.co_filename:
            return True
        frame = frame.f_back
    return False


#: Seconds a mutant past its limit, in a JVM call, gets to return once its Spark jobs are cancelled.
GRACE = 10.0


class _Alarm:
    """``with _Alarm(seconds, spark):`` stops the block after ``seconds`` (main thread only; else no limit).

    In Python code it raises MutantTimeout at once. In a JVM call it must not: py4j's connection of this thread would
    still owe that call's answer, and pyspark's own clean-up (``SCCallSiteSync.__exit__``) sends its next command on
    it and waits behind the running job. So it first cancels the session's jobs from another thread (the call then
    returns, with an error) and looks again after :data:`GRACE` seconds; a call still running then (no Spark job to
    cancel) has its connection closed, so that the next call opens a new one, and MutantTimeout is raised. ``fired``
    says whether the limit was reached (a mutant whose jobs were cancelled fails its check: still a timeout)."""

    def __init__(self, seconds: float, spark=None) -> None:
        self.seconds, self.spark = seconds, spark
        self.active = seconds > 0 and threading.current_thread() is threading.main_thread()
        self.fired = False

    def _cancel_jobs(self) -> None:
        if self.spark is not None:
            threading.Thread(target=self.spark.sparkContext.cancelAllJobs, daemon=True).start()

    def _close_connection(self) -> None:
        client = self.spark.sparkContext._gateway._gateway_client if self.spark is not None else None
        connection = getattr(client, "get_thread_connection", lambda: None)()
        if connection is not None:
            connection.close(reset=True)

    def __enter__(self) -> "_Alarm":
        if self.active:
            def ring(signum, frame):  # noqa: ARG001 - a signal handler's signature
                first = not self.fired
                self.fired = True
                if _in_py4j(frame):
                    if first:
                        self._cancel_jobs()
                        signal.setitimer(signal.ITIMER_REAL, GRACE)
                        return
                    self._close_connection()
                raise MutantTimeout(f"past {self.seconds:.0f} s")
            self.previous = signal.signal(signal.SIGALRM, ring) or signal.SIG_DFL
            signal.setitimer(signal.ITIMER_REAL, self.seconds)
        return self

    def __exit__(self, *exc) -> None:
        if self.active:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, self.previous)


class Runner:
    """Runs ``lab``'s solution and its mutants in this process, on the Spark session ``spark``."""

    def __init__(self, lab: str, spark, cells: LabCells | None = None) -> None:
        self.lab, self.spark = lab, spark
        self.cells = cells or LabCells.read(lab)
        self.base: dict = {}
        self.settings: dict[str, str] = {}
        self.seed: int | None = None

    # -- the pieces

    def set_up(self) -> None:
        """The set-up cells, once: the namespace every run starts from (a copy of it)."""
        self.base = {"__name__": "__main__"}
        for index, code in enumerate(self.cells.setup):
            with contextlib.redirect_stdout(io.StringIO()):
                exec(compile(code, f"<{self.lab} setup {index}>", "exec"), self.base)

    def use_seed(self, seed: int) -> None:
        from deltalab.labs.tables import SEED_ENV

        os.environ[SEED_ENV] = str(seed)
        self.seed = seed

    def _settings_now(self) -> dict[str, str]:
        from deltalab.labs.student import SETTINGS_DELTA_WRITES

        return {k: v for k, v in self.spark.conf.getAll.items() if k not in SETTINGS_DELTA_WRITES}

    def snapshot_settings(self) -> None:
        self.settings = self._settings_now()

    def restore_settings(self) -> list[str]:
        """Put back the session settings changed since :meth:`snapshot_settings`; the keys put back."""
        now = self._settings_now()
        changed = sorted(k for k in set(now) | set(self.settings) if now.get(k) != self.settings.get(k))
        for key in changed:
            if key in self.settings:
                self.spark.conf.set(key, self.settings[key])
            else:
                self.spark.conf.unset(key)
        return changed

    def after_timeout(self) -> None:
        """Stop the Spark jobs a mutant past its limit left running (its JVM call was cancelled or cut: _Alarm)."""
        self.spark.sparkContext.cancelAllJobs()
        time.sleep(1)   # the cancelled jobs' tasks end

    def run(self, replaced: Mutant | None, checks: list[str], limits: dict[str, float] | None = None,
            seconds: dict[str, float] | None = None) -> _Verdict:
        """The solution cells (``replaced``'s cell by its source), then ``checks`` in order, until one refuses.
        ``limits``: seconds per check (no limit without). ``seconds``: filled with each check's seconds."""
        from deltalab.labs.report import CheckFailed

        from lab_testing import assert_plain_failure

        ns = dict(self.base)
        for exercise, code in self.cells.solutions.items():
            if replaced is not None and replaced.exercise == exercise:
                code = replaced.source
            try:
                with contextlib.redirect_stdout(io.StringIO()):
                    exec(compile(code, f"<{self.lab} {exercise}>", "exec"), ns)
            except Exception as error:  # the cell itself fails, before any check: a learner sees it at once
                return _Verdict("killed", f"the cell {exercise}", f"{type(error).__name__}: {error}", raised=True)
        for check in checks:
            out = io.StringIO()
            start = time.monotonic()
            alarm = _Alarm((limits or {}).get(check, 0), self.spark)
            try:
                with alarm, contextlib.redirect_stdout(out):
                    exec(compile(self.cells.checks[check], f"<{self.lab} {check}>", "exec"), ns)
            except MutantTimeout as late:
                return _Verdict("timeout", check, str(late))
            except CheckFailed as failed:
                if alarm.fired:   # its Spark jobs cancelled at the limit: the mutant failed because it ran too long
                    return _Verdict("timeout", check, f"past {alarm.seconds:.0f} s (its Spark jobs cancelled)")
                message = str(failed)
                bad = ""
                try:
                    assert_plain_failure(failed, f"{self.lab}/{check}")
                except AssertionError as wrong:
                    bad = str(wrong).splitlines()[0]
                return _Verdict("killed", check, message.splitlines()[0], " raised " in message.splitlines()[0], bad)
            except Exception as error:  # a check's own bug: its helpers raised, not the answer
                if alarm.fired:
                    return _Verdict("timeout", check, f"past {alarm.seconds:.0f} s (its Spark jobs cancelled)")
                return _Verdict("crashed", check, f"{type(error).__name__}: {str(error).splitlines()[0][:300]}"
                                if str(error) else type(error).__name__)
            finally:
                if seconds is not None:
                    seconds[check] = time.monotonic() - start
            if alarm.fired:   # past the limit, though the check then passed: its jobs were cancelled, its result unsure
                return _Verdict("timeout", check, f"past {alarm.seconds:.0f} s")
            if not out.getvalue().startswith("✓ "):
                return _Verdict("crashed", check, f"passed without its ✓ line: {out.getvalue()[:200]!r}")
        return _Verdict("survived")

    def baseline(self, seed: int) -> dict[str, float]:
        """The unmutated solution through every check at ``seed``: each check's seconds. Raises InfrastructureError
        when a check refuses it."""
        self.use_seed(seed)
        seconds: dict[str, float] = {}
        verdict = self.run(None, list(self.cells.checks), seconds=seconds)
        if verdict.status != "survived":
            raise InfrastructureError(f"the unmutated solution fails {verdict.check} at seed {seed} "
                                      f"({verdict.status}): {verdict.message}")
        return seconds

    def limits(self, seed_seconds: dict[str, float]) -> dict[str, float]:
        return {check: max(TIMEOUT_FLOOR, TIMEOUT_FACTOR * s) for check, s in seed_seconds.items()}


def run_lab(lab: str, spark, seeds: list[int] | None = None, cap: int | None = None, minutes: float | None = None,
            allowed: list[Allowed] | None = None, mutants: list[Mutant] | None = None,
            cells: LabCells | None = None) -> LabRun:
    """Every selected mutant of ``lab`` through its checks (see the section's comment); the run, for the report.

    Raises nothing for what it finds: a failing baseline, a crashed check, poisoned state and survivors are all
    in the returned :class:`LabRun` (``broken``, ``infrastructure_problems()``, ``not_allowed``)."""
    started = time.monotonic()
    seeds = seeds or lab_seeds(lab)
    cap = int(os.environ.get(CAP_ENV, CAP_DEFAULT)) if cap is None else cap
    minutes = float(os.environ.get(MINUTES_ENV, MINUTES_DEFAULT)) if minutes is None else minutes
    generated = lab_mutants(lab) if mutants is None else mutants
    allowed = load_allowed().get(lab, []) if allowed is None else allowed
    report = LabRun(lab, list(seeds), cap, minutes, generated=len(generated), allowed=allowed,
                    stale=stale_entries(allowed, generated),
                    outcomes=[Outcome(m) for m in select(generated, cap, lab)])
    report.timer = threading.current_thread() is threading.main_thread()
    from deltalab.labs.tables import SEED_ENV

    kept_seed = os.environ.get(SEED_ENV)
    runner = Runner(lab, spark, cells)
    try:
        _run(runner, report, seeds, started)
    except InfrastructureError as broken:
        report.broken = str(broken)
    finally:
        if kept_seed is None:
            os.environ.pop(SEED_ENV, None)
        else:
            os.environ[SEED_ENV] = kept_seed
        report.seconds = time.monotonic() - started
    return report


def _run(runner: Runner, report: LabRun, seeds: list[int], started: float) -> None:
    deadline = started + 60 * report.minutes if report.minutes > 0 else float("inf")
    runner.use_seed(seeds[0])
    runner.set_up()
    report.baseline[seeds[0]] = runner.baseline(seeds[0])
    report.seeds_used.append(seeds[0])
    runner.snapshot_settings()

    def canary(after: str) -> bool:
        verdict = runner.run(None, list(runner.cells.checks))
        report.settings_restored += runner.restore_settings()
        if verdict.status != "survived":
            report.poisoned = (f"the unmutated solution fails {verdict.check} at seed {runner.seed} after {after} "
                               f"({verdict.status}): {verdict.message}")
            return False
        return True

    def judge(outcome: Outcome, seed: int) -> bool:
        """One mutant at the current seed; False when the state is poisoned (the run stops)."""
        checks = runner.cells.seeing(outcome.mutant.exercise)
        begun = time.monotonic()
        verdict = runner.run(outcome.mutant, checks, runner.limits(report.baseline[seed]) if report.timer else None)
        outcome.seconds += time.monotonic() - begun
        if verdict.status == "timeout":
            runner.after_timeout()
        report.settings_restored += runner.restore_settings()
        outcome.seed = seed
        if verdict.status == "survived":
            outcome.status = "survived"
            outcome.survived_at.append(seed)
        else:
            outcome.status, outcome.check, outcome.message = verdict.status, verdict.check, verdict.message
            outcome.raised, outcome.bad_message = verdict.raised, verdict.bad_message
        if verdict.status == "timeout":
            return canary(f"the timeout of {_label(outcome.mutant)}")
        return True

    for outcome in report.outcomes:
        if time.monotonic() > deadline:
            break                     # left "not run"
        if not judge(outcome, seeds[0]):
            return
    for seed in seeds[1:]:
        survivors = report.survivors
        if not survivors:
            break
        try:
            report.baseline[seed] = runner.baseline(seed)
        except InfrastructureError:
            # The solution fails at this seed on its own, or a mutant left the state broken: the canary says which.
            runner.use_seed(seeds[0])
            if not canary(f"the mutants at seed {seeds[0]} (the baseline at seed {seed} failed)"):
                return
            raise
        report.seeds_used.append(seed)
        for outcome in survivors:
            if not judge(outcome, seed):
                return
    canary("the last mutant")
