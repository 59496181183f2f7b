"""Lab 09 (streaming): the batches a table holds for each query, and an idempotent foreachBatch upsert.

The first check reads a table written by two real streaming queries, with a checkpoint in the
middle and the commits before it cleaned up, so that only "newest checkpoint, then the commits
after it" finds every query's last batch. The second runs the student's upsert as a real
``foreachBatch`` stream, makes it run its last batch again (the checkpoint left as a crash after
the write leaves it), and starts a second query on a new checkpoint.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from deltalab.errors import first_line, spark_failure
from deltalab.labs.harness import (CheckFailed, build_once, call_student, clean_up_commits, fresh_dir, lab_spark, passed,
                                   short_repr)
from deltalab.jvm import delta_app_versions
from deltalab.log import latest_version
from deltalab.streaming import checkpoint_batches, drop_landing_file, query_id, run_available

__all__ = ["CLASSIFICATIONS", "CheckFailed", "check_committed_batches", "check_upsert_classifications"]

#: The schema of the URL classifications the upsert exercise streams.
CLASSIFICATIONS = "url STRING, category STRING, ts LONG"
_EVENTS = "id LONG, query STRING"
_TXN_SETTINGS = ("spark.databricks.delta.write.txnAppId", "spark.databricks.delta.write.txnVersion")


# --------------------------------------------------------------------------------------------
# Exercise 1: committed_batches(table_path) -> {appId: last batch id}
# --------------------------------------------------------------------------------------------


def _stream_events(spark: Any, landing: Path, table: Path, checkpoint: Path, query: str, first: int, files: int) -> None:
    """Land ``files`` files for ``query`` and stream them into ``table``, one batch per file."""
    for number in range(first, first + files):
        drop_landing_file(landing, f"batch-{number:03d}.json", [{"id": 100 * number + i, "query": query} for i in range(2)])
    writer = (spark.readStream.schema(_EVENTS).option("maxFilesPerTrigger", 1).json(str(landing))
              .writeStream.format("delta").option("checkpointLocation", str(checkpoint)))
    run_available(writer, table)


def _two_query_table(spark: Any) -> tuple[Path, dict[str, str]]:
    """The exercise 1 test table, built once per Python process (the checks only read it)."""
    return build_once("lab09_committed", lambda folder: _build_two_query_table(spark, folder),
                      intact=lambda table: (table[0] / "_delta_log" / f"{7:020d}.json").exists())


def _build_two_query_table(spark: Any, folder: Path) -> tuple[Path, dict[str, str]]:
    """A table two streaming queries wrote: A batches 0-2 (versions 1-3, checkpoint 3), B batches
    0-1 (versions 4-5), A batches 3-4 (versions 6-7, checkpoint 6); commits 0-5 cleaned up. B's last
    batch is then only in the checkpoint, A's only in a JSON commit after it.

    Returns the table and the query id of A and B.
    """
    table = folder / "events"
    spark.sql(f"CREATE TABLE delta.`{table}` ({_EVENTS}) USING delta TBLPROPERTIES ('delta.checkpointInterval' = '3')")
    for query, first, files in (("A", 0, 3), ("B", 0, 2), ("A", 3, 2)):
        _stream_events(spark, folder / f"landing_{query}", table, folder / f"_checkpoint_{query}", query, first, files)
    clean_up_commits(table, before=6)
    return table, {name: query_id(folder / f"_checkpoint_{name}") for name in ("A", "B")}


def check_committed_batches(committed_batches: Callable[[str], dict[str, int]]) -> None:
    """Check ``committed_batches(table_path)`` against Delta's own ``Snapshot.transactions``."""
    check = "committed_batches"
    spark = lab_spark()
    table, ids = _two_query_table(spark)
    expected = delta_app_versions(spark, table)
    name_of = {app_id: name for name, app_id in ids.items()}
    answer = call_student(
        check, committed_batches, "committed_batches", str(table),
        hint="read the txn column of the newest N.checkpoint.parquet, then the txn actions of the JSON commits after N.",
    )
    if not isinstance(answer, dict):
        raise CheckFailed(check, f"committed_batches returned {type(answer).__name__}; it must return a dict.",
                          "the `return` line: a dict {appId: version} built from the txn actions.")
    for app_id, version in expected.items():
        query = f"query {name_of[app_id]} (appId {app_id[:8]}…)"
        if app_id not in answer:
            raise CheckFailed(
                check,
                f"the table holds batches 0..{version} of {query}, and your answer has no entry for it.",
                "the commits before the newest checkpoint were cleaned up: that query's last txn is only in "
                "N.checkpoint.parquet (its txn column). Read the newest checkpoint first, then the commits after it.",
            )
        if answer[app_id] != version:
            later = "the txn of a later commit replaces an earlier one" if answer[app_id] < version else \
                "stop at the latest commit, and read txn.version, not the table version"
            raise CheckFailed(
                check,
                f"for {query} you answered {short_repr(answer[app_id])}, the table holds its batches up to {version}.",
                f"{later}: start from the checkpoint's txn rows, then let each commit after it overwrite its appId.",
            )
    extra = sorted(set(answer) - set(expected))
    if extra:
        raise CheckFailed(check, f"your answer has appIds the table does not hold: {extra[:2]}.",
                          "only txn actions count: their appId field, nothing else.")
    passed(check, f"both queries' last batches ({expected[ids['A']]} and {expected[ids['B']]}), as Delta's snapshot "
                  "has them, on a table whose early commits were cleaned up.")


# --------------------------------------------------------------------------------------------
# Exercise 2: upsert_classifications(batch, batch_id, target, app_id), idempotent in foreachBatch
# --------------------------------------------------------------------------------------------

#: Each landing file is one batch: (url, category, ts). Within a batch a url may come twice:
#: the row with the larger ts is the newer classification.
_BATCHES = [
    [("a.example", "safe", 1), ("b.example", "unsafe", 1), ("a.example", "unsafe", 2)],
    [("b.example", "safe", 3), ("c.example", "news", 3), ("c.example", "sport", 4)],
]
_NEW_QUERY_BATCH = [("d.example", "shop", 5)]


def _latest(batches: list[list[tuple[str, str, int]]]) -> dict[str, tuple[str, int]]:
    latest: dict[str, tuple[str, int]] = {}
    for batch in batches:
        for url, category, ts in batch:
            if url not in latest or ts > latest[url][1]:
                latest[url] = (category, ts)
    return latest


def _land(landing: Path, number: int, rows: list[tuple[str, str, int]]) -> None:
    drop_landing_file(landing, f"batch-{number:03d}.json", [{"url": u, "category": c, "ts": t} for u, c, t in rows])


def _run_upsert(check: str, spark: Any, upsert: Callable[..., Any], landing: Path, checkpoint: Path,
                target: Path, app_id: str) -> Any:
    """Stream ``landing`` through the student's upsert with foreachBatch; their errors become a CheckFailed."""
    def each_batch(batch: Any, batch_id: int) -> None:
        upsert(batch, batch_id, str(target), app_id)

    writer = (spark.readStream.schema(CLASSIFICATIONS).option("maxFilesPerTrigger", 1).json(str(landing))
              .writeStream.foreachBatch(each_batch).option("checkpointLocation", str(checkpoint)))
    try:
        return run_available(writer)
    except Exception as error:  # noqa: BLE001 - the student's code failed inside the stream
        text = spark_failure(error).text
        if "NotImplementedError" in text:
            raise CheckFailed(check, "upsert_classifications is not written yet: it still raises NotImplementedError.",
                              "replace `raise NotImplementedError()` under `# YOUR CODE HERE` in the cell that defines "
                              "upsert_classifications, run that cell, then run this check again.") from None
        if "DELTA_MULTIPLE_SOURCE_ROW_MATCHING_TARGET_ROW_IN_MERGE" in text:
            raise CheckFailed(check, "the MERGE failed: one batch had two rows for the same url, and both matched a "
                                     "row of the table.",
                              "keep one row per url before the MERGE: the one with the largest ts.") from None
        line = next((part for part in text.splitlines() if "Error" in part or "[" in part), first_line(error))
        raise CheckFailed(check, f"the stream failed in upsert_classifications: {line.strip()[:300]}",
                          "run your function on spark.read.schema(CLASSIFICATIONS).json(...) of one landing file "
                          "first, then in the stream.") from None


def _table_rows(spark: Any, target: Path) -> dict[str, list[tuple[str, int]]]:
    rows: dict[str, list[tuple[str, int]]] = {}
    for row in spark.read.format("delta").load(str(target)).collect():
        rows.setdefault(row["url"], []).append((row["category"], row["ts"]))
    return rows


def check_upsert_classifications(upsert_classifications: Callable[[Any, int, str, str], Any]) -> None:
    """Run ``upsert_classifications`` in a real foreachBatch stream, replay its last batch, start a new query."""
    check = "upsert_classifications"
    spark = lab_spark()
    if not callable(upsert_classifications):
        call_student(check, upsert_classifications, "upsert_classifications", hint="")
    folder = fresh_dir("lab09_upsert")
    landing, checkpoint, target = folder / "landing", folder / "_checkpoint", folder / "classifications"
    spark.createDataFrame([], CLASSIFICATIONS).write.format("delta").save(str(target))
    for number, rows in enumerate(_BATCHES):
        _land(landing, number, rows)
    app_id = "lab09-classifier"
    _run_upsert(check, spark, upsert_classifications, landing, checkpoint, target, app_id)

    left_set = {key: spark.conf.get(key, None) for key in _TXN_SETTINGS if spark.conf.get(key, None) is not None}
    for key in left_set:
        spark.conf.unset(key)
    if left_set:
        raise CheckFailed(check, f"after the stream the session still has {left_set}: every later write of this "
                                 "session would carry that txn and could be skipped.",
                          "set the two settings only around the MERGE: with temporary_conf(spark, {...}): ...")
    rows, expected = _table_rows(spark, target), _latest(_BATCHES)
    doubled = sorted(url for url, found in rows.items() if len(found) > 1)
    if doubled:
        raise CheckFailed(check, f"the table has {len(rows[doubled[0]])} rows for {doubled[0]}: one batch had it twice "
                                 "and both rows were inserted.",
                          "keep one row per url before the MERGE (the one with the largest ts), e.g. row_number() over a "
                          "window partitioned by url, ordered by ts descending.")
    for url, (category, ts) in expected.items():
        if url not in rows:
            raise CheckFailed(check, f"{url} is missing from the table.",
                              "insert the urls the table does not have yet: whenNotMatchedInsertAll().")
        if rows[url][0] != (category, ts):
            raise CheckFailed(check, f"{url} is {rows[url][0][0]!r} (ts {rows[url][0][1]}), but its latest classification "
                                     f"is {category!r} (ts {ts}).",
                              "within a batch keep the row with the largest ts per url (not just any one), and update "
                              "matched rows: whenMatchedUpdateAll().")
    labelled = delta_app_versions(spark, target)
    if labelled != {app_id: len(_BATCHES) - 1}:
        found = f"labelled {labelled}" if labelled else "not labelled with any txn"
        raise CheckFailed(check, f"the table's commits are {found}; after batches 0..{len(_BATCHES) - 1} of the appId "
                                 f"{app_id!r} it should hold {{{app_id!r}: {len(_BATCHES) - 1}}}.",
                          "set spark.databricks.delta.write.txnAppId to the app_id argument and "
                          "spark.databricks.delta.write.txnVersion to str(batch_id) around the MERGE.")

    # A crash after the last batch's write and before the checkpoint recorded it: Spark runs it again.
    last = max(checkpoint_batches(checkpoint)["commits"])
    for name in (str(last), f".{last}.crc"):
        (checkpoint / "commits" / name).unlink(missing_ok=True)
    version = latest_version(target)
    _run_upsert(check, spark, upsert_classifications, landing, checkpoint, target, app_id)
    if latest_version(target) != version:
        raise CheckFailed(check, f"batch {last}, run again after a crash, made a new commit (version {version} -> "
                                 f"{latest_version(target)}): the MERGE is not idempotent.",
                          "the two txn settings make Delta skip a MERGE whose txnVersion it already holds for that appId.")

    # A second query on a new checkpoint, with its own appId: its batch 0 must be written.
    new_landing, new_app = folder / "landing_new", "lab09-classifier-v2"
    _land(new_landing, 0, _NEW_QUERY_BATCH)
    _run_upsert(check, spark, upsert_classifications, new_landing, folder / "_checkpoint_new", target, new_app)
    if "d.example" not in _table_rows(spark, target):
        raise CheckFailed(check, f"a new query (new checkpoint, appId {new_app!r}) wrote nothing: its batch 0 was "
                                 "skipped.",
                          "use the app_id argument as txnAppId: a new checkpoint starts at batch 0 again, so it needs "
                          "its own appId.")
    passed(check, f"latest classification per url after {len(_BATCHES)} batches, batch {last} replayed without a commit, "
                  "and a new query's first batch written.")
