"""The layout of deltalab (src/deltalab/README.md): every module imports on its own, imports only
modules of the rows above its own in the README's table, and notebooks do not redefine what the
package already has."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

from course_testing import REPO

PACKAGE = REPO / "src" / "deltalab"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imported_modules(path: Path) -> set[str]:
    """The deltalab modules a file imports, at module level or inside functions."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name.startswith("deltalab"))
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("deltalab"):
            for alias in node.names:
                candidate = f"{node.module}.{alias.name}"
                found.add(candidate if candidate in MODULES else node.module)
    return found


def test_every_module_imports_on_its_own():
    """Each module imported first, in a process where no other deltalab module is loaded yet."""
    script = (
        "import importlib, sys\n"
        f"for name in {sorted(MODULES)!r}:\n"
        "    for loaded in [m for m in sys.modules if m == 'deltalab' or m.startswith('deltalab.')]:\n"
        "        del sys.modules[loaded]\n"
        "    importlib.import_module(name)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]


def test_no_import_cycle():
    graph = {name: imported_modules(path) - {name} for name, path in MODULES.items()}
    unknown = {f"{name} -> {target}" for name, targets in graph.items() for target in targets if target not in MODULES}
    assert not unknown, f"imports of modules that do not exist: {sorted(unknown)}"
    importers_of_package = [name for name, targets in graph.items() if "deltalab" in targets and name != "deltalab"]
    assert not importers_of_package, (
        f"{importers_of_package} import from `deltalab` itself; inside the package, import from the module "
        "that defines the name (the package's __init__ imports the modules, so this would be a cycle)"
    )
    state: dict[str, str] = {}

    def visit(name: str, stack: list[str]) -> None:
        state[name] = "open"
        for target in sorted(graph[name]):
            if state.get(target) == "open":
                cycle = stack[stack.index(target):] + [target] if target in stack else [name, target]
                raise AssertionError("import cycle: " + " -> ".join(cycle))
            if target not in state:
                visit(target, stack + [target])
        state[name] = "done"

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])


def readme_rows() -> list[list[str]]:
    """The module names of each row of src/deltalab/README.md's table, top to bottom, as dotted
    patterns (``labs/labNN_topic`` stands for every lab module)."""
    rows = []
    for line in (PACKAGE / "README.md").read_text().splitlines():
        if line.startswith("| `"):
            first_column = line.split("|")[1]
            rows.append(["deltalab" if name == "__init__" else "deltalab." + name.replace("/", ".")
                         for name in re.findall(r"`([^`]+)`", first_column)])
    return rows


def readme_row_of(module: str, rows: list[list[str]]) -> int | None:
    for index, names in enumerate(rows):
        for name in names:
            if module == name or re.fullmatch(re.escape(name).replace("NN_topic", r"\d\d_\w+"), module):
                return index
    return None


def test_every_module_has_a_row_in_the_readme():
    rows = readme_rows()
    missing = [name for name in MODULES if readme_row_of(name, rows) is None]
    assert not missing, f"src/deltalab/README.md's table does not name {missing}: add each where it belongs"


def test_every_name_in_the_readme_is_a_module():
    named = [name for names in readme_rows() for name in names]
    ghosts = [name for name in named
              if not any(module == name or re.fullmatch(re.escape(name).replace("NN_topic", r"\d\d_\w+"), module)
                         for module in MODULES)]
    assert not ghosts, f"src/deltalab/README.md's table names modules that do not exist: {ghosts}"


def test_modules_import_only_the_rows_above_their_own():
    rows = readme_rows()
    wrong = []
    for name, path in MODULES.items():
        row = readme_row_of(name, rows)
        for target in sorted(imported_modules(path) - {name}):
            target_row = readme_row_of(target, rows)
            if row is not None and target_row is not None and target_row >= row:
                wrong.append(f"{name} imports {target}")
    assert not wrong, ("these imports go sideways or upwards in src/deltalab/README.md's table "
                       f"(move the code, or the module's row): {wrong}")


def package_functions() -> set[str]:
    """Public function and class names defined anywhere in the package."""
    names = set()
    for path in MODULES.values():
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and not node.name.startswith("_"):
                names.add(node.name)
    return names


def test_notebooks_define_no_helper_the_package_has():
    shared = package_functions()
    offenders = []
    notebooks = sorted((REPO / "notebooks").glob("*.ipynb")) + sorted((REPO / "labs" / "source").glob("*/*.ipynb"))
    for notebook in notebooks:
        for index, cell in enumerate(json.loads(notebook.read_text())["cells"]):
            if cell["cell_type"] != "code":
                continue
            for node in ast.walk(ast.parse("".join(cell["source"]))):
                if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name in shared:
                    offenders.append(f"{notebook.relative_to(REPO)} cell {index}: {node.name}")
    assert not offenders, "these notebook cells redefine a deltalab helper; call the package's: " + "; ".join(offenders)


def _deltalab_names(tree: ast.AST) -> set[str]:
    """The names a notebook binds to deltalab: functions it imports from the package and module aliases."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "deltalab":
            names.update(alias.asname or alias.name for alias in node.names)
        elif isinstance(node, ast.Import):
            names.update(alias.asname or alias.name.split(".")[0] for alias in node.names
                         if alias.name.split(".")[0] == "deltalab")
    return names


def _forwarding_wrappers(tree: ast.AST, package: set[str]) -> list[tuple[str, str]]:
    """(name, the call) of each function whose whole body (its docstring aside) is one call of the package,
    returned or not, with its arguments passed through as they came (its own parameters, the session
    ``spark`` and constants): a second name for a package helper, which a notebook should call by its own
    name. A function that binds one of the notebook's own tables (``silver_changes(first, last)`` reads
    ``silver``'s change feed) names a step of the lesson and is not counted."""
    def from_package(func: ast.expr) -> bool:
        while isinstance(func, ast.Attribute):
            func = func.value
        return isinstance(func, ast.Name) and func.id in package

    def passed_through(value: ast.expr, parameters: set[str]) -> bool:
        value = value.value if isinstance(value, ast.Starred) else value
        return isinstance(value, ast.Constant) or isinstance(value, ast.Name) and value.id in parameters

    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.FunctionDef):
            continue
        arguments = node.args
        parameters = {"spark"} | {a.arg for a in [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs,
                                                  *filter(None, [arguments.vararg, arguments.kwarg])]}
        body = [s for s in node.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
        if len(body) != 1 or not isinstance(body[0], (ast.Return, ast.Expr)):
            continue
        call = body[0].value
        if isinstance(call, ast.Call) and from_package(call.func) and \
                all(passed_through(a, parameters) for a in call.args) and \
                all(passed_through(k.value, parameters) for k in call.keywords):
            found.append((node.name, ast.unparse(call)))
    return found


def test_the_forwarding_check_finds_a_second_name_for_a_package_helper():
    cell = ast.parse('from deltalab import spark_files\nimport deltalab.log as lg\n'
                     'def table_files(path):\n    """Spark\'s files."""\n    return spark_files(spark, path, relative=True)\n'
                     'def versions(path):\n    lg.checkpoint_versions(path)\n'
                     'def names(path):\n    return {f.rsplit("/", 1)[1] for f in spark_files(spark, path)}\n'
                     'def silver_files(version):\n    return spark_files(spark, silver, version)\n')
    found = _forwarding_wrappers(cell, _deltalab_names(cell))
    assert [name for name, _ in found] == ["table_files", "versions"], found


def test_notebooks_define_no_second_name_for_a_package_helper():
    """The rule by call, beside the rule by name above: a notebook function that only forwards its
    arguments to one deltalab function is that function under another name."""
    offenders = []
    notebooks = sorted((REPO / "notebooks").glob("*.ipynb")) + sorted((REPO / "labs" / "source").glob("*/*.ipynb"))
    for notebook in notebooks:
        cells = [(index, ast.parse("".join(cell["source"])))
                 for index, cell in enumerate(json.loads(notebook.read_text())["cells"]) if cell["cell_type"] == "code"]
        package = set().union(*(_deltalab_names(tree) for _, tree in cells))
        for index, tree in cells:
            offenders += [f"{notebook.relative_to(REPO)} cell {index}: {name} only calls {call}"
                          for name, call in _forwarding_wrappers(tree, package)]
    assert not offenders, "these notebook functions are a package helper under another name; call it: " + \
        "; ".join(offenders)


#: Where a file is renamed, replaced or locked outside deltalab.publish, and why that is not publishing.
NOT_PUBLISHING = {
    "deltalab.holds": "hold_gate's marker (O_EXCL) is made inside a function Spark ships by value to its Python "
                      "workers, which must not need this package",
    "deltalab.labs.lab10_pipeline": "the check moves the learner's stub functions aside and back, no file for a reader",
}


def _publishes_or_locks(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, what) for each rename, replace, flock/lockf or O_EXCL in a module's code: a call of
    os.replace/os.rename, fcntl.flock/lockf, a method `.replace(x)` / `.rename(x)` with one positional
    argument and no keyword (str.replace takes two, pandas' rename a keyword), and the name O_EXCL."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr == "O_EXCL":
            found.append((node.lineno, "O_EXCL"))
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        owner = node.func.value.id if isinstance(node.func.value, ast.Name) else None
        name = node.func.attr
        if owner in ("os", "fcntl") and name in ("replace", "rename", "flock", "lockf"):
            found.append((node.lineno, f"{owner}.{name}"))
        elif owner not in ("os", "fcntl") and name in ("replace", "rename") and len(node.args) == 1 \
                and not node.keywords:
            found.append((node.lineno, f".{name}(...)"))
    return found


def test_files_other_processes_read_are_published_only_through_publish():
    """One way to publish a file or folder (a hidden sibling renamed into place) and to lock: deltalab.publish."""
    stray = []
    for name, path in MODULES.items():
        if name in ("deltalab.publish", *NOT_PUBLISHING):
            continue
        stray += [f"{path.relative_to(REPO)}:{line} {what}" for line, what in _publishes_or_locks(ast.parse(path.read_text()))]
    assert not stray, ("publish a file or folder with deltalab.publish (write_atomically, publishing) and lock with "
                       "lock_for_process, or name the module in NOT_PUBLISHING with why: " + "; ".join(stray))


def _words(text: str) -> set[str]:
    return set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", text))


def _references(source: str) -> set[str]:
    """Every name a piece of Python uses: names, attributes, imported names and the words of its strings
    (named calls such as "deltalab.writers.append_rows")."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Name):
            found.add(node.id)
        elif isinstance(node, ast.Attribute):
            found.add(node.attr)
        elif isinstance(node, ast.alias):
            found.add(node.name.split(".")[-1])
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            found |= _words(node.value)
    return found


def _public_names(path: Path) -> set[str]:
    """A module's public functions and classes, and the public methods of its classes."""
    names: set[str] = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and not node.name.startswith("_"):
            names.add(node.name)
        if isinstance(node, ast.ClassDef):
            names |= {item.name for item in node.body
                      if isinstance(item, ast.FunctionDef) and not item.name.startswith("_")}
    return names


def test_no_public_name_exists_only_for_tests():
    """What only tests use lives in tests/support (tests/README.md), not in the package: every public
    function, class and method of deltalab is used by the package, a notebook, a lab or the course's scripts."""
    import nbformat

    course: set[str] = set()
    for path in PACKAGE.rglob("*.py"):
        course |= _references(path.read_text())
    for notebook in [*(REPO / "notebooks").glob("*.ipynb"), *(REPO / "labs" / "source").glob("*/*.ipynb")]:
        for cell in nbformat.read(notebook, as_version=4).cells:
            if cell.cell_type == "code":
                course |= _words(cell.source)
    for path in [REPO / "Makefile", *(REPO / "docker").iterdir(), *(REPO / ".ci").iterdir()]:
        if path.is_file():
            course |= _words(path.read_text(errors="replace"))
    tests: set[str] = set()
    for path in (REPO / "tests").rglob("*.py"):
        tests |= _references(path.read_text())
    only_tests = sorted(f"{name}.{public}" for name, path in MODULES.items() for public in _public_names(path)
                        if public not in course and public in tests)
    assert not only_tests, ("used only by tests; move them to tests/support (or into the test file that uses them): "
                            + ", ".join(only_tests))


#: PySpark's doors into the JVM (py4j): reaching through one of them is the work of the modules below.
PY4J_DOORS = {"_jvm", "_jsparkSession", "_jdf", "_jsc", "_gateway"}
#: The modules whose work is the JVM: Delta's classes (jvm), Spark's (spark_jvm), Delta Kernel's (kernel), and what
#: starts the JVM and speaks to it (gateway, session, class_archive).
JVM_MODULES = {"deltalab.jvm", "deltalab.spark_jvm", "deltalab.kernel", "deltalab.gateway", "deltalab.session",
               "deltalab.class_archive"}
#: Notebooks that still reach into the JVM themselves, with how many times: each is to move into deltalab.jvm or
#: deltalab.spark_jvm (issue 57). A number may only go down; a notebook may not join the table.
NOTEBOOK_REACH_INS = {"00b_the_course_session": 1, "02_the_transaction_log": 1, "06_schema_enforcement_and_evolution": 1,
                      "07_data_skipping": 2, "10b_table_maintenance": 1, "11_object_stores": 4, "12_other_engines": 2,
                      "13_liquid_clustering": 4, "15_the_log_at_scale": 3}


def _py4j_reach_ins(source: str) -> int:
    return sum(isinstance(node, ast.Attribute) and node.attr in PY4J_DOORS for node in ast.walk(ast.parse(source)))


def test_py4j_is_reached_only_through_the_jvm_modules():
    """The package README's rule, kept: py4j is reached in the JVM modules; elsewhere, their functions are called."""
    package = sorted(name for name, path in MODULES.items() if name not in JVM_MODULES and _py4j_reach_ins(path.read_text()))
    assert not package, f"these modules reach into the JVM through py4j; ask deltalab.jvm or deltalab.spark_jvm: {package}"
    found = {}
    notebooks = sorted((REPO / "notebooks").glob("*.ipynb")) + sorted((REPO / "labs" / "source").glob("*/*.ipynb"))
    for notebook in notebooks:
        cells = [c for c in json.loads(notebook.read_text())["cells"] if c["cell_type"] == "code"]
        count = sum(_py4j_reach_ins("".join(cell["source"])) for cell in cells)
        if count:
            found[notebook.stem] = count
    grown = {name: count for name, count in found.items() if count > NOTEBOOK_REACH_INS.get(name, 0)}
    assert not grown, (f"these notebooks reach into the JVM through py4j more than they did ({grown}, before: "
                       f"{ {n: NOTEBOOK_REACH_INS.get(n, 0) for n in grown} }): call a function of deltalab.jvm or "
                       "deltalab.spark_jvm (add one there if none answers)")
    assert found == NOTEBOOK_REACH_INS, f"fewer reach-ins than the table says: lower NOTEBOOK_REACH_INS to {found}"
