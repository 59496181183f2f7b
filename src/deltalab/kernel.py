"""Delta Kernel (Java), the library other engines build their Delta support on, called from Python.

Delta Kernel is the successor of Delta Standalone: a Java library with which an engine that is
not Spark reads and writes Delta tables. The engine gives it an ``Engine`` (file system, Parquet
and JSON readers, expression evaluation); Kernel replays the log, skips files and turns each
file's physical columns into the table's logical rows (partition values, column mapping,
deletion vectors). delta-kernel-rs is its Rust counterpart, a separate code base.

``delta-spark_4.2_2.13:4.4.0`` depends on ``delta-kernel-api`` and ``delta-kernel-defaults``
4.4.0, so every course session already has them on its class path: this module drives them
through PySpark's py4j gateway, with Kernel's ``DefaultEngine`` on the session's Hadoop
configuration. The calls are those of Kernel's own examples (``kernel-examples``'s
``SingleThreadedTableReader``), read from Kernel 4.4.0's sources: the public
``TableManager.loadSnapshot``, ``Snapshot``, ``ScanBuilder``, ``Scan.transformPhysicalData``,
and three internal helpers the examples use too (``InternalScanFileUtils``, ``ScanStateRow``,
``VectorUtils``). Rows cost about one py4j call per value: fine for the course's small tables,
not for a benchmark.
"""

from __future__ import annotations

import datetime as dt
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

from deltalab.errors import DeltaLabError
from deltalab.locations import hadoop_path, local_path
from deltalab.log import delta_log_dir, latest_version

__all__ = ["KernelFile", "KernelSnapshot", "kernel_file_count", "kernel_files", "kernel_rows", "kernel_snapshot", "kernel_error"]

_EPOCH_DAY, _EPOCH_MICROS = dt.date(1970, 1, 1), dt.datetime(1970, 1, 1)


@dataclass(frozen=True)
class KernelSnapshot:
    """What Kernel says about one version of a table."""

    version: int
    timestamp_ms: int
    columns: list[str]
    partition_columns: list[str]
    min_reader_version: int
    min_writer_version: int
    reader_features: list[str]
    writer_features: list[str]


@dataclass(frozen=True)
class KernelFile:
    """One data file of a Kernel scan: its path on disk, size, partition values and deletion vector."""

    path: str
    size: int
    partition_values: dict[str, str | None]
    deleted_rows: int  # the cardinality of its deletion vector, 0 without one

    def relative_to(self, table_path: str | os.PathLike[str]) -> str:
        """The path relative to the table folder, as on disk: the form ``spark_files(..., relative=True)`` gives."""
        return Path(self.path).resolve().relative_to(Path(table_path).resolve()).as_posix()


def _kernel(spark: Any) -> Any:
    return spark._jvm.io.delta.kernel


def _engine(spark: Any) -> Any:
    """Kernel's DefaultEngine on the session's Hadoop configuration."""
    return _kernel(spark).defaults.engine.DefaultEngine.create(spark._jsc.hadoopConfiguration())


def _load(spark: Any, table_path: str | os.PathLike[str], version: int | None) -> tuple[Any, Any]:
    """(engine, snapshot) of ``version`` (default latest), after the course's own checks of the path and version."""
    delta_log_dir(table_path)  # a clear DeltaLabError for a folder that is not a Delta table
    if version is not None:
        latest = latest_version(table_path)
        if not isinstance(version, int) or not 0 <= version <= latest:
            raise DeltaLabError(f"Version {version!r} does not exist in {table_path}: the latest version is {latest}.",
                                fix=f"Ask for a version between 0 and {latest}, or None for the latest.")
    engine = _engine(spark)
    builder = _kernel(spark).TableManager.loadSnapshot(str(Path(local_path(os.fspath(table_path))).resolve()))
    if version is not None:
        builder = builder.atVersion(version)
    return engine, builder.build(engine)


def kernel_snapshot(spark: Any, table_path: str | os.PathLike[str], version: int | None = None) -> KernelSnapshot:
    """Load ``version`` (default latest) of a table with Kernel and say what it found."""
    engine, snapshot = _load(spark, table_path, version)
    protocol = snapshot.getProtocol()  # public since Kernel 4.4.0
    return KernelSnapshot(
        version=int(snapshot.getVersion()), timestamp_ms=int(snapshot.getTimestamp(engine)),
        columns=[str(field.getName()) for field in snapshot.getSchema().fields()],
        partition_columns=[str(name) for name in snapshot.getPartitionColumnNames()],
        min_reader_version=int(protocol.getMinReaderVersion()), min_writer_version=int(protocol.getMinWriterVersion()),
        reader_features=sorted(str(f) for f in protocol.getReaderFeatures()),
        writer_features=sorted(str(f) for f in protocol.getWriterFeatures()))


def _column(spark: Any, name: str) -> Any:
    return _kernel(spark).expressions.Column(name)


def _literal(spark: Any, value: Any) -> Any:
    literal = _kernel(spark).expressions.Literal
    if isinstance(value, bool):
        return literal.ofBoolean(value)
    if isinstance(value, int):
        return literal.ofLong(value)
    if isinstance(value, float):
        return literal.ofDouble(value)
    if isinstance(value, dt.date) and not isinstance(value, dt.datetime):
        return literal.ofDate((value - _EPOCH_DAY).days)
    if isinstance(value, str):
        return literal.ofString(value)
    raise DeltaLabError(f"A Kernel filter cannot compare with {value!r} ({type(value).__name__}).",
                        fix="Compare with an int, a float, a bool, a str or a datetime.date.")


_OPERATORS = ("=", "<", "<=", ">", ">=")


def _predicate(spark: Any, where: tuple[str, str, Any] | None) -> Any:
    """Kernel's ``Predicate`` for ``(column, operator, value)``, e.g. ``("id", "<", 100)``."""
    if where is None:
        return None
    if not (isinstance(where, tuple) and len(where) == 3 and where[1] in _OPERATORS):
        raise DeltaLabError(f"{where!r} is not a filter this helper builds.",
                            fix=f"Pass (column, operator, value) with an operator among {_OPERATORS}, e.g. ('id', '<', 100).")
    column, operator, value = where
    return _kernel(spark).expressions.Predicate(operator, _column(spark, column), _literal(spark, value))


def _scan(spark: Any, snapshot: Any, where: tuple[str, str, Any] | None) -> Any:
    builder = snapshot.getScanBuilder()
    predicate = _predicate(spark, where)
    return (builder.withFilter(predicate) if predicate is not None else builder).build()


def _scan_file_rows(engine: Any, scan: Any) -> Iterator[Any]:
    """The rows of ``Scan.getScanFiles``: one per data file the scan may need (Kernel's own file skipping applied)."""
    batches = scan.getScanFiles(engine)
    try:
        while batches.hasNext():
            rows = batches.next().getRows()
            try:
                while rows.hasNext():
                    yield rows.next()
            finally:
                rows.close()
    finally:
        batches.close()


def kernel_files(spark: Any, table_path: str | os.PathLike[str], version: int | None = None,
                 where: tuple[str, str, Any] | None = None) -> list[KernelFile]:
    """The data files Kernel would read for ``version`` (default latest), skipping those the
    filter ``where`` rules out by partition values or statistics."""
    engine, snapshot = _load(spark, table_path, version)
    scan_files = spark._jvm.io.delta.kernel.internal.InternalScanFileUtils
    files = []
    for row in _scan_file_rows(engine, _scan(spark, snapshot, where)):
        status = scan_files.getAddFileStatus(row)
        dv = scan_files.getDeletionVectorDescriptorFromRow(row)
        files.append(KernelFile(path=hadoop_path(str(status.getPath())), size=int(status.getSize()),
                                partition_values=dict(scan_files.getPartitionValues(row)),
                                deleted_rows=0 if dv is None else int(dv.getCardinality())))
    return files


def kernel_file_count(spark: Any, table_path: str | os.PathLike[str], version: int | None = None) -> int:
    """The number of data files Kernel's scan of ``version`` (default latest) lists, counted batch by batch.

    For tables of many files, where :func:`kernel_files` (a few py4j calls per file) would take
    minutes: a batch costs one call for its size, and one per row only when Kernel's log replay
    marked some of its rows as not selected (an add a later remove cancels).
    """
    engine, snapshot = _load(spark, table_path, version)
    batches = _scan(spark, snapshot, None).getScanFiles(engine)
    count = 0
    try:
        while batches.hasNext():
            batch = batches.next()
            size = int(batch.getData().getSize())
            selection = batch.getSelectionVector()
            if not selection.isPresent():
                count += size
                continue
            vector = selection.get()
            count += sum(1 for i in range(size) if not vector.isNullAt(i) and vector.getBoolean(i))
    finally:
        batches.close()
    return count


def _converter(spark: Any, data_type: Any) -> Callable[[Any, int], Any]:
    """A function (column vector, row) -> Python value for one Kernel data type."""
    kind = str(data_type.getClass().getSimpleName())
    if kind in ("TimestampType", "TimestampNTZType"):  # microseconds since the epoch, as a naive UTC datetime
        return lambda vector, row: None if vector.isNullAt(row) else _EPOCH_MICROS + dt.timedelta(microseconds=vector.getLong(row))
    value_of = spark._jvm.io.delta.kernel.internal.util.VectorUtils.getValueAsObject
    if kind == "DateType":
        return lambda vector, row: None if vector.isNullAt(row) else _EPOCH_DAY + dt.timedelta(days=vector.getInt(row))
    if kind in ("StructType", "ArrayType", "MapType"):
        raise DeltaLabError(f"kernel_rows reads columns of simple types, not {kind}.",
                            fix="Read a table of numbers, strings, booleans, dates and timestamps.")
    return lambda vector, row: value_of(vector, data_type, row)


def kernel_rows(spark: Any, table_path: str | os.PathLike[str], version: int | None = None,
                where: tuple[str, str, Any] | None = None) -> tuple[list[str], list[tuple]]:
    """Read ``version`` (default latest) of a table with Kernel: (column names, rows).

    Kernel hands back each file's rows as the table holds them: partition values added, column
    mapping's physical names turned into the logical ones, rows a deletion vector deletes left
    out (``Scan.transformPhysicalData``). Its filter only skips files, so the rows of the files
    it keeps are then filtered here with the default engine's predicate evaluator."""
    engine, snapshot = _load(spark, table_path, version)
    kernel, utils = _kernel(spark), spark._jvm.io.delta.kernel.internal
    scan = _scan(spark, snapshot, where)
    state = scan.getScanState(engine)
    physical_schema = utils.data.ScanStateRow.getPhysicalDataReadSchema(state)
    logical_schema = utils.data.ScanStateRow.getLogicalSchema(state)
    fields = list(logical_schema.fields())
    converters = [_converter(spark, field.getDataType()) for field in fields]
    predicate = _predicate(spark, where)
    evaluator = (engine.getExpressionHandler().getPredicateEvaluator(logical_schema, predicate)
                 if predicate is not None else None)
    rows: list[tuple] = []
    for scan_file in _scan_file_rows(engine, scan):
        status = utils.InternalScanFileUtils.getAddFileStatus(scan_file)
        physical = engine.getParquetHandler().readParquetFiles(
            utils.util.Utils.singletonCloseableIterator(status), physical_schema, spark._jvm.java.util.Optional.empty())
        try:
            while physical.hasNext():
                logical = kernel.Scan.transformPhysicalData(
                    engine, state, scan_file, utils.util.Utils.singletonCloseableIterator(physical.next().getData()))
                try:
                    while logical.hasNext():
                        rows.extend(_batch_rows(logical.next(), converters, evaluator, spark))
                finally:
                    logical.close()
        finally:
            physical.close()
    return [str(field.getName()) for field in fields], rows


def _batch_rows(batch: Any, converters: list[Callable[[Any, int], Any]], evaluator: Any, spark: Any) -> list[tuple]:
    """The selected rows of one ``FilteredColumnarBatch`` as tuples."""
    data = batch.getData()
    selection = batch.getSelectionVector()
    if evaluator is not None:
        selection = spark._jvm.java.util.Optional.of(evaluator.eval(data, selection))
    selected = selection.get() if selection.isPresent() else None
    vectors = [data.getColumnVector(index) for index in range(len(converters))]
    return [tuple(convert(vectors[index], row) for index, convert in enumerate(converters))
            for row in range(data.getSize())
            if selected is None or (not selected.isNullAt(row) and selected.getBoolean(row))]


def kernel_error(error: BaseException) -> tuple[str, str]:
    """(Java class, message) of an exception Kernel raised through py4j.

    Kernel's own exceptions reach Python as ``Py4JJavaError`` (``java_exception``); PySpark 4
    turns a few Java ones (``UnsupportedOperationException``) into its own exception types,
    which keep the Java exception in ``_origin``."""
    java = getattr(error, "java_exception", None) or getattr(error, "_origin", None)
    if java is None:
        return type(error).__name__, str(error)
    return str(java.getClass().getName()), str(java.getMessage())
