"""What Spark's, Hadoop's and Java's own objects in the JVM say, for what PySpark's API does not show.

:mod:`deltalab.jvm` asks Delta's classes; this module asks the rest of the JVM the questions a
lesson or a check needs: the scans of an executed plan and their metrics (:func:`file_scans`), the
plan as Spark prints it (:func:`executed_plan`), how many jobs a session has started
(:func:`jobs_submitted`), the SQL executions Spark recorded with the settings each ran with
(:func:`sql_executions_since`), a streaming query's progress lock (:func:`take_progress_lock`).
None of it is public API of Spark: it is what Spark's own UI and tests read.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from deltalab.errors import DeltaLabError

__all__ = ["FileScan", "SqlExecution", "executed_plan", "file_scans", "is_classic", "jobs_submitted",
           "last_sql_execution_id", "sql_executions_since", "take_progress_lock"]


def is_classic(df: Any) -> bool:
    """True for a DataFrame of a classic, JVM-backed session (False for Spark Connect's)."""
    return hasattr(df, "_jdf")


def _require_classic(df: Any, what: str) -> None:
    if not is_classic(df):
        raise DeltaLabError(
            f"{what} needs a classic (JVM-backed) Spark session; this DataFrame comes from Spark Connect.",
            fix="Use the session from deltalab.get_spark(), not a spark.remote(...) one.",
        )


def executed_plan(df: Any) -> str:
    """The physical plan Spark runs for ``df``, as Spark prints it (``explain()``'s last part)."""
    _require_classic(df, "executed_plan")
    return str(df._jdf.queryExecution().executedPlan().toString())


@dataclass(frozen=True)
class FileScan:
    """One file scan of an executed plan: the class of the file index it read (``TahoeLogFileIndex``
    for a Delta table), the table's root, and the scan's metrics."""

    location_class: str
    root: str
    files: int
    bytes: int
    rows: int


def _children(node: Any) -> list[Any]:
    name = node.getClass().getSimpleName()
    if name == "AdaptiveSparkPlanExec":
        return [node.executedPlan()]
    if name.endswith("QueryStageExec"):
        return [node.plan()]
    children = node.children()
    return [children.apply(i) for i in range(children.size())]


def _metric(node: Any, key: str) -> int:
    option = node.metrics().get(key)
    return int(option.get().value()) if option.isDefined() else 0


def file_scans(df: Any) -> list[FileScan]:
    """The file scans (``FileSourceScanExec``) of ``df``'s executed plan, with the files, bytes and
    rows each read. The metrics are filled once ``df`` has run."""
    _require_classic(df, "file_scans")
    found, stack = [], [df._jdf.queryExecution().executedPlan()]
    while stack:
        node = stack.pop()
        if node.getClass().getSimpleName() == "FileSourceScanExec":
            location = node.relation().location()
            found.append(FileScan(location_class=str(location.getClass().getName()),
                                  root=str(location.rootPaths().head().toString()),
                                  files=_metric(node, "numFiles"), bytes=_metric(node, "filesSize"),
                                  rows=_metric(node, "numOutputRows")))
        stack.extend(_children(node))
    return found


def jobs_submitted(spark: Any) -> int:
    """How many Spark jobs ``spark`` has started so far: two counts taken around a call tell whether it
    ran Spark, whatever job group it used. Read from the scheduler's own counter, which grows when a job
    is submitted (the status tracker hears of a job later, through the listener bus)."""
    return int(spark.sparkContext._jsc.sc().dagScheduler().numTotalJobs())


@dataclass(frozen=True)
class SqlExecution:
    """A SQL execution Spark recorded: its id, its description (the query or command) and the
    session settings it ran with that differed from the session's defaults."""

    id: int
    description: str
    modified_settings: dict[str, str]


def _status_store(spark: Any) -> Any:
    spark.sparkContext._jsc.sc().listenerBus().waitUntilEmpty()  # every finished execution recorded
    return spark._jsparkSession.sharedState().statusStore()


def last_sql_execution_id(spark: Any) -> int:
    """The id of the newest SQL execution Spark's status store holds (-1 if none)."""
    store = _status_store(spark)
    newest = store.executionsList(max(0, store.executionsCount() - 1), 1)
    return int(newest.apply(0).executionId()) if newest.size() else -1


def sql_executions_since(spark: Any, after: int, newest: int = 200) -> list[SqlExecution]:
    """The SQL executions newer than id ``after`` (among the ``newest`` Spark still holds), oldest first."""
    store = _status_store(spark)
    window = store.executionsList(max(0, store.executionsCount() - newest), newest)
    found = []
    for i in range(window.size()):
        execution = window.apply(i)
        if int(execution.executionId()) > after:
            settings = execution.modifiedConfigs()
            keys = settings.keys().toList()
            modified = {str(keys.apply(k)): str(settings.apply(keys.apply(k))) for k in range(keys.size())}
            found.append(SqlExecution(int(execution.executionId()), str(execution.description()), modified))
    return found


def take_progress_lock(query: Any) -> None:
    """Take a running streaming query's progress lock (``awaitProgressLock``), which Spark needs after the
    sink's commit to write the batch into the checkpoint's ``commits/``: until this thread lets it go, the
    batch cannot be recorded there (:func:`deltalab.streaming.commit_then_hold`)."""
    query._jsq.streamingQuery().awaitProgressLock().lock()
