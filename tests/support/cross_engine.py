"""Every Delta table a notebook leaves behind must read the same in a second engine.

A pytest plugin (registered from tests/conftest.py). After the last cell of each notebook under
notebooks/ it adds one more test item, ``notebooks/NN_x.ipynb::delta-rs reads its tables``, in the
notebook's own file scope, so ``--dist loadfile`` runs it on the notebook's worker right after the
notebook's cells. The item finds every table under ``<DELTALAB_WORKDIR>/<notebook stem>/`` (a folder
with a ``_delta_log/`` holding at least one commit or checkpoint) and checks, at the latest version:

* files: delta-rs ``DeltaTable.file_uris()`` and ``deltalab.replay_log(p).input_files()`` name the
  same data files, and so does Spark's ``inputFiles()`` for the notebook's table with the most
  versions (:func:`tables_for_spark`: a snapshot Spark has not seen costs a job; tests/test_log.py
  proves replay_log lists what Spark reads);
* rows: delta-rs's DataFusion scan of one data column (``DeltaTable.scan(columns=[c])``: every
  file is read, deletion vectors and column mapping are applied) counts the rows the log's statistics promise
  (``replay_log(p).num_records``: numRecords minus deletion-vector cardinalities), or, when a file
  has no numRecords statistic, the rows Spark counts.

delta-rs refuses some tables on purpose (type widening in 1.6.6). A refusal passes only when its
message names reader features and each of them is in the table's protocol's ``readerFeatures``
(read from the log); it is recorded in the item's summary line. Anything else fails the item with
a message naming the table and the disagreement, unless the table matches an entry of
:data:`ALLOWED` (pattern -> reason), which the summary line also names. Tables matching
:data:`NOT_COMPARED` (placeholder data files, on purpose) are named with their reason and not read.

Tables of notebook 11 that live in its S3 server are not on disk and so are not seen; its local
tables are. Streaming checkpoints have no ``_delta_log/`` and are not tables. Managed tables go to
the worker's shared ``_spark-warehouse`` (not per notebook) and are not checked here.

The summary line of each notebook (tables compared, refused with reason, allowed) is printed at
the end of the run and kept in the item's ``user_properties`` (``cross-engine``).
"""

from __future__ import annotations

import fnmatch
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from course_testing import REPO
from deltalab.locations import hadoop_path

ITEM_NAME = "delta-rs reads its tables"
NOTEBOOKS = REPO / "notebooks"

# Tables allowed to disagree, matched (fnmatch) against "<notebook stem>/<table path in its work
# directory>", with the reason. Empty while every table the notebooks leave behind agrees: add an entry
# only with the evidence (which engine says what, and why that is expected).
ALLOWED: dict[str, str] = {}

# Tables not compared at all, matched the same way, with the reason: tables whose data files are not
# there on purpose (a scan would only say so, and replaying their tens of thousands of actions three
# times costs half a minute). The notebook itself checks their files with delta-rs, Kernel and Spark.
_PLACEHOLDERS = ("placeholder data files: notebook 15 commits add actions for files it never writes, and checks the "
                 "files delta-rs, Kernel and Spark list itself")
NOT_COMPARED: dict[str, str] = {f"15_the_log_at_scale/{table}": _PLACEHOLDERS
                                for table in ["big", "classic", "multi_part", "v2_parquet", "v2_json"]}

# What delta-rs says when it refuses a table because of reader features it does not support:
#   DeltaError: ... Unsupported table features required: [TypeWidening]
#   DeltaProtocolError: The table has set these reader features: {'deletionVectors'} but these are not yet ...
_REFUSAL_PATTERNS = (
    re.compile(r"Unsupported table features required: \[([^\]]*)\]"),
    re.compile(r"reader features: \{([^}]*)\}"),
)


def _feature_key(name: str) -> str:
    """delta-rs names features in CamelCase (TypeWidening), the log in camelCase (typeWidening)."""
    return re.sub(r"[^a-z0-9]", "", name.lower())


def refused_features(message: str) -> list[str]:
    """The reader features a delta-rs refusal names (empty when the message is not a refusal)."""
    for pattern in _REFUSAL_PATTERNS:
        if found := pattern.search(message):
            return [f.strip().strip("'\"") for f in found.group(1).split(",") if f.strip()]
    return []


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}"[:300]


@dataclass
class TableComparison:
    """What the three readers say about one table (latest version)."""

    path: Path
    version: int | None = None
    files: int | None = None        # data files all readers agree on
    rows: int | None = None          # rows delta-rs counted (and the log or Spark agreed)
    refused: str | None = None       # delta-rs's refusal, accepted because the protocol lists its features
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def _relative(paths: list[str], roots: tuple[str, ...]) -> list[str]:
    """Absolute local paths as paths relative to the table root (either spelling of it), sorted."""
    out = []
    for p in paths:
        for root in roots:
            if p.startswith(root + "/"):
                p = p[len(root) + 1:]
                break
        out.append(p)
    return sorted(out)


def _diff(name_a: str, a: list[str], name_b: str, b: list[str]) -> str:
    only_a, only_b = sorted(set(a) - set(b)), sorted(set(b) - set(a))
    return (f"{name_a} lists {len(a)} files, {name_b} {len(b)}; only in {name_a}: {only_a[:3]}"
            f"{' ...' if len(only_a) > 3 else ''}; only in {name_b}: {only_b[:3]}{' ...' if len(only_b) > 3 else ''}")


def spark_input_files(spark: Any, path: str | os.PathLike[str]) -> tuple[Any, list[str] | None, str | None]:
    """Spark's DataFrame on the table, its ``inputFiles()`` (local paths) and the error if it cannot read it.

    Loading a snapshot the session has not seen runs a small state-reconstruction job (about a
    second in a cold session, a few tenths warm), so :func:`compare_tables` runs these in threads.
    """
    try:
        frame = spark.read.format("delta").load(str(path))
        return frame, [hadoop_path(u) for u in frame.inputFiles()], None
    except Exception as error:  # noqa: BLE001 - a Py4J or analysis error: Spark cannot read the table
        return None, None, _first_line(error)


#: What a table not asked of Spark gets as Spark's answer (no frame, no files, no error).
NOT_ASKED = (None, None, None)


def compare_tables(spark: Any, paths: list[Path], threads: int = 4,
                   ask_spark: set[Path] | None = None) -> list[TableComparison]:
    """:func:`compare_table` for each path, with Spark's snapshots loaded concurrently; with
    ``ask_spark``, Spark is asked only about those tables (the others: delta-rs against the log)."""
    from concurrent.futures import ThreadPoolExecutor

    asked = [p for p in paths if ask_spark is None or p in ask_spark]
    with ThreadPoolExecutor(max_workers=max(1, min(threads, len(asked) or 1))) as pool:
        answers = dict(zip(asked, pool.map(lambda p: spark_input_files(spark, p), asked)))
    return [compare_table(spark, p, answers.get(p, NOT_ASKED)) for p in paths]


def tables_for_spark(paths: list[Path]) -> set[Path]:
    """The tables Spark is asked about: the one with the most versions (its snapshot is the most
    work to rebuild) and those with a file without a numRecords statistic (Spark counts their rows).

    Loading a snapshot Spark has not seen runs a job (0.3-1 s); asking about every table of every
    notebook cost about 50 s over the suite. tests/test_log.py proves that replay_log lists what
    Spark reads, at every version, on tables with checkpoints, deletion vectors and partitions.
    """
    from deltalab.log import replay_log
    from deltalab import latest_version

    chosen: set[Path] = set()
    for path in paths:
        try:
            state = replay_log(path)
        except Exception:  # noqa: BLE001 - compare_table reports it
            continue
        if not all("numRecords" in (add.get("stats") or {}) for add in state.files.values()):
            chosen.add(path)
    versions = {}
    for path in paths:
        try:
            versions[path] = latest_version(path)
        except Exception:  # noqa: BLE001 - compare_table reports it
            continue
    if versions:
        chosen.add(max(versions, key=lambda p: (versions[p], str(p))))
    return chosen


def compare_table(spark: Any, path: str | os.PathLike[str],
                  spark_answer: tuple[Any, list[str] | None, str | None] | None = None) -> TableComparison:
    """Compare Spark, delta-rs and the log on the table at ``path``; never raises for a table problem.

    ``spark_answer`` is :func:`spark_input_files`'s result if the caller already has it.
    """
    import pyarrow as pa
    from deltalake import DeltaTable

    from deltalab.log import replay_log

    path = Path(path)
    result = TableComparison(path)
    roots = tuple(dict.fromkeys((str(path.absolute()), str(path.resolve()))))

    # The log (pure Python): the reference for the files, the protocol and the row count.
    try:
        state = replay_log(path)
    except Exception as error:  # noqa: BLE001 - DeltaLabError for a broken log; report it, whatever it is
        result.problems.append(f"replay_log cannot rebuild the table: {_first_line(error)}")
        return result
    result.version = state.version
    log_files = _relative([hadoop_path(f) for f in state.input_files()], roots)
    reader_features = {_feature_key(f) for f in state.protocol.get("readerFeatures") or []}
    with_stats = all("numRecords" in (add.get("stats") or {}) for add in state.files.values())

    # Spark: the snapshot's file list (no job).
    spark_frame, spark_paths, spark_error = spark_answer if spark_answer is not None else spark_input_files(spark, path)
    spark_files = None if spark_paths is None else _relative(spark_paths, roots)
    if spark_error:
        result.problems.append(f"Spark cannot read it: {spark_error}")
    if spark_files is not None and spark_files != log_files:
        result.problems.append("files: " + _diff("Spark", spark_files, "replay_log", log_files))

    # delta-rs: open, list the files, count the rows. A refusal must name features the protocol lists.
    def refusal(error: Exception, step: str) -> None:
        message = _first_line(error)
        named = refused_features(str(error))
        if named and all(_feature_key(f) in reader_features for f in named):
            result.refused = message
        elif named:
            result.problems.append(f"delta-rs {step} refuses it for reader features {named} that the "
                                   f"protocol does not list (readerFeatures={sorted(reader_features)}): {message}")
        else:
            result.problems.append(f"delta-rs {step} fails: {message}")

    try:
        table = DeltaTable(str(path))
    except Exception as error:  # noqa: BLE001
        refusal(error, "DeltaTable()")
        return result
    if table.version() != state.version:
        result.problems.append(f"version: delta-rs loads {table.version()}, the log's latest is {state.version}")
    try:
        rs_files = _relative([hadoop_path(u) for u in table.file_uris()], roots)
    except Exception as error:  # noqa: BLE001
        refusal(error, "file_uris()")
    else:
        if rs_files != log_files:
            result.problems.append("files: " + _diff("delta-rs", rs_files, "replay_log", log_files))
        elif not result.problems:
            result.files = len(log_files)
    try:
        partition_columns = set(table.metadata().partition_columns)
        data_columns = [f.name for f in table.schema().fields if f.name not in partition_columns]
        # One data column, so every file is opened and read (an empty projection is answered from
        # the statistics alone and would not notice a missing or unreadable file).
        rs_rows = pa.table(table.scan(columns=data_columns[:1] or None)).num_rows
    except Exception as error:  # noqa: BLE001
        refusal(error, "scan()")
    else:
        if with_stats:
            expected, source = state.num_records, "the log's numRecords minus deletion vectors"
        elif spark_frame is not None:
            expected, source = spark_frame.count(), "Spark's count() (a file has no numRecords statistic)"
        else:
            expected, source = None, ""
        if expected is not None and rs_rows != expected:
            result.problems.append(f"rows: delta-rs scans {rs_rows}, {source} says {expected}")
        elif expected is not None:
            result.rows = rs_rows
    return result


def find_tables(folder: Path) -> tuple[list[Path], list[Path]]:
    """The tables under ``folder`` (sorted), and the ``_delta_log/`` folders holding no commit or checkpoint."""
    from deltalab.log import _CHECKPOINT_RE, _COMMIT_RE

    tables, empty = [], []
    for directory, subdirs, _ in os.walk(folder):
        subdirs.sort()
        if "_delta_log" in subdirs:
            subdirs.remove("_delta_log")     # not into the log itself (nor its _sidecars)
            log = Path(directory) / "_delta_log"
            if any(_COMMIT_RE.match(n) or _CHECKPOINT_RE.match(n) for n in os.listdir(log)):
                tables.append(Path(directory))
            else:
                empty.append(log)
    return sorted(tables), sorted(empty)


def allowed_reason(name: str, patterns: dict[str, str] = ALLOWED) -> str | None:
    return next((reason for pattern, reason in patterns.items() if fnmatch.fnmatchcase(name, pattern)), None)


class CrossEngineItem(pytest.Item):
    """Runs after a notebook's last cell: checks the tables the notebook left in its work directory."""

    def __init__(self, *, stem: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.stem = stem

    def runtest(self) -> None:
        plugin: CrossEngine = self.config.pluginmanager.get_plugin(CrossEngine.NAME)
        file = self.nodeid.split("::")[0]
        ran, failed = plugin.ran.get(file, 0), plugin.failed.get(file, 0)
        if failed:
            pytest.skip(f"{failed} cell(s) of {file} failed: the tables it left mid-way are not compared")
        if not ran:
            pytest.skip(f"no cell of {file} ran in this session: it left no tables to compare")
        # The notebook is done: stop its kernel now (what the file's teardown does next anyway), so
        # nothing it started (a streaming query, a driver) still writes while the tables are read.
        if getattr(self.parent, "kernel", None) is not None and hasattr(self.parent, "teardown"):
            self.parent.teardown()

        started = time.perf_counter()
        root = os.environ.get("DELTALAB_WORKDIR")
        if not root:
            pytest.fail("DELTALAB_WORKDIR is not set, so the notebook's work directory is unknown")
        folder = Path(root) / self.stem
        tables, empty = find_tables(folder) if folder.is_dir() else ([], [])
        skipped = [(table, allowed_reason(table.relative_to(folder.parent).as_posix(), NOT_COMPARED)) for table in tables]
        skipped = [(table, reason) for table, reason in skipped if reason]
        tables = [table for table in tables if table not in {table for table, _ in skipped}]

        from deltalab import get_spark

        spark = get_spark("pytest") if tables else None   # the worker's session (the `spark` fixture's)
        compared, refused, allowed, failures = 0, [], [], []
        asked = tables_for_spark(tables)
        for table, result in zip(tables, compare_tables(spark, tables, ask_spark=asked) if tables else []):
            name = table.relative_to(folder.parent).as_posix()
            reason = allowed_reason(name)
            if result.problems and reason:
                allowed.append(f"{name} ({reason})")
            elif result.problems:
                failures.append(f"{name} (version {result.version}):\n    " + "\n    ".join(result.problems))
            elif result.refused:
                refused.append(f"{name}: {result.refused}")
            else:
                compared += 1
        seconds = time.perf_counter() - started
        summary = (f"{self.stem}: {len(tables)} tables, {compared} compared (files and rows agree; Spark asked "
                   f"about {len(asked)}), "
                   f"{len(refused)} refused by delta-rs with a reason its protocol lists, {len(allowed)} allowed, "
                   f"{len(failures)} disagree ({seconds:.1f} s)")
        details = [f"  refused: {r}" for r in refused] + [f"  allowed: {a}" for a in allowed]
        details += [f"  not compared: {table.relative_to(folder.parent)} ({reason})" for table, reason in skipped]
        details += [f"  not a table (a _delta_log/ without commits): {e.relative_to(folder.parent)}" for e in empty]
        self.user_properties.append(("cross-engine", "\n".join([summary, *details])))
        print(summary, *details, sep="\n")
        if failures:
            pytest.fail("Spark, delta-rs and the log disagree on tables " + self.stem + " left behind:\n  "
                        + "\n  ".join(failures), pytrace=False)

    def reportinfo(self):
        return self.path, None, f"{self.stem}: {ITEM_NAME}"


class CrossEngine:
    """Adds the items, counts which notebook cells ran and failed, prints the summary lines."""

    NAME = "deltalab-cross-engine"

    def __init__(self) -> None:
        self.ran: dict[str, int] = {}
        self.failed: dict[str, int] = {}
        self.summaries: list[str] = []

    @pytest.hookimpl(trylast=True)   # after deselection (-k, -m): only notebooks whose cells remain
    def pytest_collection_modifyitems(self, session: pytest.Session, config: pytest.Config, items: list) -> None:
        last_cell: dict[Any, int] = {}
        for index, item in enumerate(items):
            parent = item.parent
            if (isinstance(item, CrossEngineItem) or parent is None or item.path.suffix != ".ipynb"
                    or item.path.parent.resolve() != NOTEBOOKS.resolve()):
                continue
            last_cell[parent] = index
        for parent, index in sorted(last_cell.items(), key=lambda pair: -pair[1]):   # from the end: indexes stay valid
            items.insert(index + 1, CrossEngineItem.from_parent(parent, name=ITEM_NAME, stem=parent.path.stem))

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        file, _, name = report.nodeid.partition("::")
        if file.endswith(".ipynb") and name != ITEM_NAME and report.when == "call":
            self.ran[file] = self.ran.get(file, 0) + 1
            if report.failed:
                self.failed[file] = self.failed.get(file, 0) + 1
        elif name == ITEM_NAME and report.when == "call":
            self.summaries += [value for key, value in report.user_properties if key == "cross-engine"]

    def pytest_terminal_summary(self, terminalreporter) -> None:
        if self.summaries:
            terminalreporter.write_sep("-", "delta-rs, Spark and the log on the tables each notebook left")
            for summary in self.summaries:
                terminalreporter.write_line(summary)
