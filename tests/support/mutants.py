"""Mutants of a lab's reference solution: small wrong versions of it, one change each (issue 61).

A lab's checks are a test of the learner's understanding, so every small change to the reference solution
that makes it wrong should fail a check. This module makes those changes; running them through the lab's
checks (``make test-mutants``) is the next step, planned in the issue's notes.

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
import difflib
import random
from dataclasses import dataclass
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
