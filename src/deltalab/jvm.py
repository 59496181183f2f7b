"""Delta's own answers, asked of its classes in the JVM.

The course reads the log in pure Python (:mod:`deltalab.log`) and checks what it finds against
what Delta itself says. This module is the one place that reaches into Delta's Scala classes
through PySpark's py4j gateway, so a change of Delta's internals is mended here once:

* :func:`delta_log` is Delta's ``DeltaLog`` of a table, :func:`clear_delta_cache` forgets every
  cached one (a table changed behind Delta's back reads fresh);
* :func:`delta_log_segment` and :func:`delta_app_versions` are what a snapshot of one version is
  built from (its checkpoint and commit files) and the ``txn`` versions it knows;
* :func:`load_snapshot` loads a table's state as a new reader does (on an object store, its
  requests show in the server's request log);
* :class:`JvmTransaction` is Delta's ``OptimisticTransaction``, started and committed by hand,
  for the one conflict no SQL operation reaches;
* :func:`log_store_class_for` names the ``LogStore`` Delta picks for a URI scheme;
* :func:`delta_setting` reads a ``spark.databricks.delta.*`` session setting, or Delta's default, and
  :func:`delta_setting_is_internal` whether Delta declares it internal;
* :func:`table_feature` is Delta's description of one table feature (``TableFeature``), and
  :func:`table_features` of every feature it supports;
* :func:`version_at_time` is the version time travel resolves a time to (``DeltaHistoryManager``);
* :func:`protocol_features` is the table features a version's ``protocol`` makes a client implement
  to read it and to write it (``Protocol.implicitlyAndExplicitlySupportedFeatures``);
* :func:`write_checkpoint` checkpoints the latest version now, :func:`write_uncommitted_files` writes
  data files a transaction never commits, :func:`write_through_log_store` writes a commit file through
  Delta's ``LogStore`` (optionally stopping in the middle of its write).

None of these is public API of Delta: they are what its own commands call, read from Delta
4.4.0's sources (``DeltaLog.scala``, ``Snapshot.scala``, ``OptimisticTransaction.scala``,
``DelegatingLogStore.scala``, ``DeltaSQLConf.scala``, ``DeltaHistoryManager.scala``,
``TableFeatureSupport.scala``, ``TableFeature.scala``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

from deltalab.errors import DeltaLabError
from deltalab.locations import file_name, local_path
from deltalab.log import latest_version
from deltalab.session import running_spark

__all__ = [
    "JvmTransaction",
    "LogSegment",
    "clear_delta_cache",
    "delta_app_versions",
    "delta_log",
    "delta_log_segment",
    "delta_log_files_read",
    "delta_setting",
    "delta_setting_is_internal",
    "load_snapshot",
    "log_store_class_for",
    "FeatureFacts",
    "protocol_features",
    "table_feature",
    "table_features",
    "version_at_time",
    "write_checkpoint",
    "write_through_log_store",
    "write_uncommitted_files",
]


def _delta(spark: Any) -> Any:
    """The JVM package ``org.apache.spark.sql.delta``."""
    return spark.sparkContext._jvm.org.apache.spark.sql.delta


def delta_log(spark: Any, table_path: str | os.PathLike[str]) -> Any:
    """Delta's own ``DeltaLog`` (a JVM object) for the table at ``table_path`` (a path or a URI)."""
    return _delta(spark).DeltaLog.forTable(spark._jsparkSession, str(table_path))


def clear_delta_cache(spark: Any = None) -> None:
    """Forget Delta's cached table states (a table changed behind Delta's back reads fresh).

    Does nothing when no session runs: then nothing is cached.
    """
    spark = spark if spark is not None else running_spark()
    if spark is not None:
        _delta(spark).DeltaLog.clearCache()


def _snapshot_at(spark: Any, table_path: str | os.PathLike[str], version: int | None) -> Any:
    """Delta's ``Snapshot`` of a local table at ``version`` (default: the latest)."""
    target = latest_version(table_path) if version is None else version
    log = delta_log(spark, local_path(str(table_path)))
    none = getattr(log, "getSnapshotAt$default$2")()  # Scala's None for the optional arguments
    return log.getSnapshotAt(target, none, none, False)


@dataclass(frozen=True)
class LogSegment:
    """The log files Delta's own snapshot of one version is built from.

    ``checkpoint_version`` is None when the snapshot replays from commit 0; the file lists
    hold bare file names, as ``_delta_log/`` shows them.
    """

    version: int
    checkpoint_version: int | None
    checkpoint_files: list[str]
    commit_versions: list[int]
    commit_files: list[str]


def delta_log_segment(spark: Any, table_path: str | os.PathLike[str], version: int | None = None) -> LogSegment:
    """Ask Delta which checkpoint and commit files it reads for ``version`` (default latest).

    This is Delta's ``Snapshot.logSegment``: the answer ``deltalab.log.replay_log``'s
    ``log_files_read`` and the labs are compared with.
    """
    return _log_segment_of(_snapshot_at(spark, table_path, version))


def _log_segment_of(snapshot: Any) -> LogSegment:
    """The :class:`LogSegment` of one of Delta's ``Snapshot`` objects."""
    segment = snapshot.logSegment()
    provider = segment.checkpointProvider()
    checkpoint = int(provider.version())  # -1 when there is no checkpoint
    top_level = provider.topLevelFiles()
    checkpoint_files = [file_name(top_level.apply(i).getPath().toString()) for i in range(top_level.size())]
    deltas = segment.deltas()
    commit_files = [file_name(deltas.apply(i).getPath().toString()) for i in range(deltas.size())]
    return LogSegment(
        version=int(snapshot.version()),
        checkpoint_version=None if checkpoint < 0 else checkpoint,
        checkpoint_files=checkpoint_files,
        commit_versions=[int(name[:20]) for name in commit_files],
        commit_files=commit_files,
    )


def delta_log_files_read(spark: Any, table_path: str | os.PathLike[str], version: int | None = None) -> list[str]:
    """Every file of ``_delta_log/`` whose actions Delta replays for ``version`` (default latest).

    Its log segment (:func:`delta_log_segment`) names the checkpoint's top-level files and the commit and
    compacted files after it; a v2 checkpoint's top-level file also names its sidecars, which Delta reads
    too, given here as ``_sidecars/<name>``. Commits at or before the checkpoint's version, which Delta
    sometimes lists and replays again to no effect, are left out. This is the answer lab 15 is checked
    against.
    """
    snapshot = _snapshot_at(spark, table_path, version)
    segment = _log_segment_of(snapshot)
    start = -1 if segment.checkpoint_version is None else segment.checkpoint_version
    names = list(segment.checkpoint_files)
    if segment.checkpoint_version is not None:
        provider = snapshot.checkpointProvider()
        if "$anon" in provider.getClass().getName():  # Delta's lazy wrapper around the real provider
            provider = provider.underlyingCheckpointProvider()
        if provider.getClass().getName().endswith(".V2CheckpointProvider"):
            sidecars = provider.sidecarFiles()
            names += [f"_sidecars/{file_name(sidecars.apply(i).path())}" for i in range(sidecars.size())]
    names += [name for name in segment.commit_files if int(name[:20]) > start]
    return names


def delta_app_versions(spark: Any, table_path: str | os.PathLike[str], version: int | None = None) -> dict[str, int]:
    """Ask Delta for the last ``txn`` version of each appId at ``version`` (default latest).

    This is Delta's ``Snapshot.transactions``, what its streaming sink and idempotent writes
    consult before they write: the answer ``deltalab.log.replay_log``'s ``app_versions`` and
    the labs are compared with.
    """
    entries = _snapshot_at(spark, table_path, version).transactions().iterator()
    versions = {}
    while entries.hasNext():
        entry = entries.next()
        versions[str(entry._1())] = int(entry._2())
    return versions


def load_snapshot(spark: Any, path: str) -> dict[str, int]:
    """Load the table's state from its log as a new reader does (Delta's cache emptied first):
    find the latest version, then read the checkpoint and commits it needs to know the table's
    files. Returns the version and the number of files; on the local object store the requests
    it made show in the server's request log. Runs in any driver."""
    clear_delta_cache(spark)
    snapshot = delta_log(spark, path).unsafeVolatileSnapshot()
    return {"version": int(snapshot.version()), "files": int(snapshot.numOfFiles())}


def protocol_features(spark: Any, table_path: str | os.PathLike[str], version: int | None = None) -> dict[str, set[str]]:
    """The features a client must implement to read (``"read"``) and to write (``"write"``) the
    table at ``version`` (default latest), as Delta derives them from the ``protocol`` action.

    This is ``Protocol.implicitlyAndExplicitlySupportedFeatures`` (Delta 4.4.0): the features a
    legacy protocol's versions bundle (writer 2: ``appendOnly``, ``invariants``; ...; reader 2
    with writer 5: ``columnMapping``), or the ones a table-features protocol lists. Reading needs
    the reader-writer features among them; writing needs all of them.
    """
    features = _snapshot_at(spark, table_path, version).protocol().implicitlyAndExplicitlySupportedFeatures().iterator()
    needed: dict[str, set[str]] = {"read": set(), "write": set()}
    while features.hasNext():
        feature = features.next()
        needed["write"].add(str(feature.name()))
        if feature.isReaderWriterFeature():
            needed["read"].add(str(feature.name()))
    return needed


@dataclass(frozen=True)
class FeatureFacts:
    """What Delta's ``TableFeature`` object says of a feature: the protocol versions it needs (a
    ``min_reader`` of 0 means no reader requirement: a writer feature), whether readers must know it
    too, the features enabling it pulls in, and whether ``DROP FEATURE`` can ever remove it."""

    name: str
    min_reader: int
    min_writer: int
    reader_writer: bool
    requires: tuple[str, ...]
    removable: bool


def _feature_facts(spark: Any, feature: Any) -> FeatureFacts:
    required = spark._jvm.scala.jdk.javaapi.CollectionConverters.asJava(feature.requiredFeatures())
    return FeatureFacts(str(feature.name()), int(feature.minReaderVersion()), int(feature.minWriterVersion()),
                        bool(feature.isReaderWriterFeature()), tuple(sorted(str(f.name()) for f in required)),
                        bool(feature.isRemovable()))


def table_feature(spark: Any, name: str) -> FeatureFacts:
    """Delta's description of the table feature called ``name`` as the protocol lists it
    (``TableFeature.featureNameToFeature``, ``TableFeature.scala``)."""
    found = _delta(spark).TableFeature.featureNameToFeature(name)
    if not found.isDefined():
        raise DeltaLabError(f"Delta has no table feature called {name!r}.",
                            fix="Use a name as the protocol action lists it (readerFeatures/writerFeatures), e.g. "
                                "'deletionVectors'; table_features(spark) lists every one.")
    return _feature_facts(spark, found.get())


def table_features(spark: Any) -> dict[str, FeatureFacts]:
    """Every table feature this Delta supports, by name (``TableFeature.allSupportedFeaturesMap``)."""
    every = _delta(spark).TableFeature.allSupportedFeaturesMap().values().iterator()
    facts = {}
    while every.hasNext():
        feature = _feature_facts(spark, every.next())
        facts[feature.name] = feature
    return dict(sorted(facts.items()))


def log_store_class_for(spark: Any, scheme: str) -> str:
    """The LogStore class Delta uses by default for a URI scheme (``file``, ``s3a``, ``gs``, ...)."""
    module = getattr(getattr(_delta(spark).storage, "DelegatingLogStore$"), "MODULE$")
    chosen = module.getDefaultLogStoreClassName(scheme)
    return str(chosen.get()) if chosen.isDefined() else str(module.defaultHDFSLogStoreClassName())


def delta_setting(spark: Any, name: str) -> str | None:
    """The session setting ``spark.databricks.delta.<name>``: its value in this session, else Delta's
    default, else None (a setting without a default, such as ``autoCompact.minFileSize``).

    Delta registers its settings with Spark when its ``DeltaSQLConf`` object is first used, so
    until a Delta command has run, ``spark.conf.get`` does not know them. This uses the object
    first, so the answer does not depend on what ran before."""
    key, entry = _setting_entry(spark, name)
    value = spark.conf.get(key, None)
    if value is None and str(entry.defaultValueString()) != "<undefined>":
        value = str(entry.defaultValueString())
    return value


def delta_setting_is_internal(spark: Any, name: str) -> bool:
    """Whether Delta declares the session setting ``spark.databricks.delta.<name>`` ``.internal()``
    (``DeltaSQLConf.scala``): left out of its documentation, free to change between releases, so a
    notebook that turns one on says so."""
    return not bool(_setting_entry(spark, name)[1].isPublic())


def _setting_entry(spark: Any, name: str) -> tuple[str, Any]:
    """The full key and Spark's ``ConfigEntry`` of Delta's session setting ``name`` (registered first)."""
    key = f"spark.databricks.delta.{name}"
    getattr(getattr(_delta(spark).sources, "DeltaSQLConf$"), "MODULE$").DELTA_COLLECT_STATS()   # registers its settings
    entry = getattr(getattr(spark._jvm.org.apache.spark.sql.internal, "SQLConf$"), "MODULE$").getConfigEntry(key)
    if entry is None:
        raise DeltaLabError(f"Delta has no session setting called {key!r}.",
                            fix="Check the name against Delta's DeltaSQLConf.scala, without the prefix spark.databricks.delta.")
    return key, entry


#: Delta's refusals of a time outside a table's history, by error condition.
TIME_OUTSIDE_HISTORY = ("DELTA_TIMESTAMP_EARLIER_THAN_COMMIT_RETENTION", "DELTA_TIMESTAMP_GREATER_THAN_COMMIT")


def version_at_time(spark: Any, table_path: str | os.PathLike[str], timestamp_ms: int) -> int | None:
    """The version ``TIMESTAMP AS OF`` resolves ``timestamp_ms`` to, or None where Delta refuses the time.

    This is the call Delta's own time travel makes (``DeltaTableUtils.resolveTimeTravelVersion``:
    ``DeltaHistoryManager.getActiveCommitAtTime(t, None, canReturnLastCommit = false,
    mustBeRecreatable = true, canReturnEarliestCommit = false)``), without reading the data."""
    from deltalab.errors import spark_failure

    clear_delta_cache(spark)
    jvm = spark._jvm
    history = delta_log(spark, table_path).history()
    no_catalog_table = getattr(getattr(jvm.scala, "None$"), "MODULE$")
    try:
        commit = history.getActiveCommitAtTime(jvm.java.sql.Timestamp(int(timestamp_ms)), no_catalog_table, False, True, False)
    except Exception as error:  # noqa: BLE001 - Delta's refusal reaches Python as a py4j error
        if spark_failure(error).condition in TIME_OUTSIDE_HISTORY:
            return None
        raise
    return int(commit.version())


def _scala_list(spark: Any, items: Iterable[Any]) -> Any:
    jvm = spark._jvm
    java_list = jvm.java.util.ArrayList()
    for item in items:
        java_list.add(item)
    return jvm.scala.jdk.javaapi.CollectionConverters.asScala(java_list).toList()


class JvmTransaction:
    """Delta's ``OptimisticTransaction`` for one table, started now and committed by hand.

    ``startTransaction()`` fixes the read version, exactly as every Delta command does first.
    :meth:`remove_all_files` prepares RemoveFile actions from the transaction's snapshot
    *without* recording a read (no ``filterFiles`` call), which is what a conflict on deleted
    files alone needs. :meth:`commit` raises Delta's JVM conflicts as ``delta.exceptions`` classes.
    """

    def __init__(self, spark: Any, path: str) -> None:
        self.spark = spark
        self._txn = delta_log(spark, path).startTransaction()
        self.read_version: int = int(self._txn.readVersion())

    def remove_all_files(self) -> list[Any]:
        """RemoveFile actions for every file of the read snapshot (read set stays empty)."""
        files = self._txn.snapshot().allFiles().collectAsList()
        return [files.get(i).remove() for i in range(files.size())]

    def commit(self, actions: Sequence[Any]) -> int:
        """Commit ``actions`` as a "Manual Update"; return the version written."""
        import delta.exceptions  # noqa: F401 - importing it installs Delta's JVM-to-Python exception conversion
        from py4j.protocol import Py4JJavaError
        from pyspark.errors.exceptions.captured import convert_exception

        operation = getattr(getattr(_delta(self.spark), "DeltaOperations$ManualUpdate$"), "MODULE$")
        try:
            return int(self._txn.commit(_scala_list(self.spark, actions), operation))
        except Py4JJavaError as error:
            converted = convert_exception(error.java_exception)
            if type(converted).__module__.startswith("delta."):  # a conflict: ConcurrentAppendException, ...
                raise converted from None
            raise

    def commit_txn_labels(self, labels: dict[str, int]) -> int:
        """Commit one ``txn`` action per ``(appId, version)`` of ``labels`` and nothing else (what an
        idempotent writer's commit carries besides its data); return the version written."""
        actions = _delta(self.spark).actions
        none = getattr(getattr(self.spark._jvm.scala, "None$"), "MODULE$")
        return self.commit([actions.SetTransaction(app, version, none) for app, version in labels.items()])

    def commit_domain(self, domain: str, configuration: str, removed: bool = False) -> int:
        """Commit one ``domainMetadata`` action, ``domain`` with the string ``configuration``, and nothing
        else: what a writer that keeps its own settings in the log (a user domain, any name not starting with
        ``delta.``) commits. The table must support the ``domainMetadata`` writer feature (a clustered table
        does); Delta refuses the commit otherwise. Returns the version written."""
        return self.commit([_delta(self.spark).actions.DomainMetadata(domain, configuration, removed)])


def write_checkpoint(spark: Any, table_path: str | os.PathLike[str]) -> None:
    """Write a checkpoint of the table's latest version now (``DeltaLog.checkpoint()``), whatever its
    ``delta.checkpointInterval``."""
    delta_log(spark, table_path).checkpoint()


def write_uncommitted_files(spark: Any, table_path: str | os.PathLike[str], df: Any) -> list[str]:
    """Write ``df``'s rows as data files of the table through Delta's own transaction, and commit
    nothing: the files a writer leaves when it dies between writing and committing. Their paths, as
    the add actions it would have committed name them (relative, URL-encoded)."""
    transaction = delta_log(spark, table_path).startTransaction()
    actions = transaction.writeFiles(df._jdf)
    return [str(actions.apply(index).path()) for index in range(actions.size())]


class _LinesForJava:
    """A ``java.util.Iterator`` over a commit's lines, implemented in Python (a py4j callback); its
    first ``hasNext()`` runs ``before_first_line`` (a hold), so the log store stops in the middle of
    its write, with its temporary file on disk."""

    def __init__(self, lines: Sequence[str], before_first_line: Callable[[], Any] | None) -> None:
        self.lines = list(lines)
        self.before = before_first_line

    def hasNext(self) -> bool:  # noqa: N802 - Java's name
        if self.before is not None:
            before, self.before = self.before, None
            before()
        return bool(self.lines)

    def next(self) -> str:
        return self.lines.pop(0)

    class Java:
        implements = ["java.util.Iterator"]


def write_through_log_store(spark: Any, table_path: str | os.PathLike[str], version: int, lines: Sequence[str],
                            before_first_line: Callable[[], Any] | None = None) -> dict[str, Any]:
    """Create ``_delta_log/<version>.json`` holding ``lines`` through the ``LogStore`` Delta picks for
    the table's scheme (:func:`log_store_class_for`), without overwrite, as the last step of every commit
    does; ``before_first_line`` runs when the store first asks for a line. Returns ``won`` (True when the
    file was written), and for a refusal the Java exception's class (``error``) and the stack frame that
    threw it (``thrown_at``)."""
    from pathlib import Path

    from py4j.protocol import Py4JJavaError

    from deltalab.gateway import start_callback_server

    jvm = spark._jvm
    start_callback_server(spark)  # the JVM calls _LinesForJava back
    hadoop_conf = spark._jsc.hadoopConfiguration()
    commit = jvm.org.apache.hadoop.fs.Path(f"{Path(table_path).resolve().as_uri()}/_delta_log/{version:020d}.json")
    store_class: Any = jvm
    for part in log_store_class_for(spark, str(commit.toUri().getScheme())).split("."):
        store_class = getattr(store_class, part)  # py4j's view sees Spark's added jars
    try:
        store_class(hadoop_conf).write(commit, _LinesForJava(lines, before_first_line), False, hadoop_conf)
    except Py4JJavaError as error:
        refusal = error.java_exception
        return {"won": False, "error": str(refusal.getClass().getName()),
                "thrown_at": str(refusal.getStackTrace()[0].toString())}
    return {"won": True, "error": None, "thrown_at": None}
