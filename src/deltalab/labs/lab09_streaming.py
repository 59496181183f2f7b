"""Lab 09 (streaming): the batches a table holds for each query, and an idempotent foreachBatch upsert.

Exercise 1's check reads two tables. The lab's example, built once per process: two real streaming
queries, a checkpoint in the middle, the commits before it cleaned up. And a table generated afresh
for each run (:func:`_write_txn_history`, seeded by :func:`~deltalab.labs.tables.check_seed`): three
to four writers (streaming query ids and chosen names) whose batches interleave, batch ids that
start anywhere and skip, commits with no ``txn`` or with two, a checkpoint every 2-4 commits or none
at all, early commits cleaned up or not; when it has a checkpoint, one writer's last batch is only in
the checkpoint and another's only in a JSON commit after it. Delta's own snapshot
(``Snapshot.transactions``) gives the expected answer. The check then writes one more commit into
that log, naming a reader feature Spark does not know, with one more ``txn``: Spark and Delta refuse
the table, a reading of the log files does not, and nor does a ``.crc`` checksum (optional: this
commit has none) stand in for the commits.

Exercise 2's check streams generated batches of classifications through the student's upsert with
``foreachBatch`` (a line sent twice, two classifications of one URL in a batch in either order, late
ones older than what the table holds), each call through :func:`~deltalab.labs.student.call_student`
(no ``txn`` setting may be left behind), replays the last batch as after a crash, then calls it with
a batch id of the same appId the table already holds (nothing may be written) and with a new appId
(its batch 0 must be written).
"""

from __future__ import annotations

import json
import random
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from deltalab.errors import first_line, spark_failure
from deltalab.jvm import JvmTransaction, clear_delta_cache, delta_app_versions
from deltalab.labs.report import CheckFailed, passed, short_repr
from deltalab.labs.student import call_student, calls_watched, exercise_check, lab_spark
from deltalab.labs.tables import build_once, check_seed, clean_up_commits, fresh_dir
from deltalab.log import checkpoint_versions, commit_info, latest_version, replay_log
from deltalab.publish import write_atomically
from deltalab.streaming import drop_landing_file, query_id, run_available

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
    """The exercise 1 example table, built once per Python process (the checks only read it)."""
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


#: Names a writer gives its idempotent writes (txnAppId); a streaming query's appId is its id, a UUID.
_APP_NAMES = ("bronze", "silver", "gold hourly", "ingest:eu", "classifier-v2")


@dataclass
class TxnHistory:
    """A table :func:`_write_txn_history` wrote: its latest version, its newest checkpoint (None: no
    checkpoint), whether the commits before that checkpoint were cleaned up, and an appId whose last
    batch is at a version before the checkpoint (None without a checkpoint). Another appId's last batch
    is always in the newest commit, after the checkpoint."""

    path: Path
    latest: int
    checkpoint: int | None
    cleaned: bool
    before_checkpoint: str | None


def _txn_plan(rng: random.Random) -> tuple[int, int, list[dict[str, int]]]:
    """The checkpoint interval, the latest version, and for each version 1..latest the ``{appId: batch}``
    its commit labels (empty: a commit of no writer's batch)."""
    interval = rng.choice([2, 3, 4, 100])
    latest = rng.randint(6, 9)
    if interval <= latest and latest % interval == 0:
        latest += 1  # a commit after the newest checkpoint
    newest = (latest // interval) * interval if interval <= latest else None
    apps = [str(uuid.UUID(int=rng.getrandbits(128), version=4)) if rng.random() < 0.5 else name
            for name in rng.sample(_APP_NAMES, rng.randint(3, 4))]
    early, late = apps[0], apps[1]
    batch = {app: rng.choice([0, 0, rng.randint(1, 40)]) for app in apps}
    plan: list[dict[str, int]] = []
    for version in range(1, latest + 1):
        allowed = [app for app in apps if newest is None or app != early or version < newest]
        roll = rng.random()
        chosen = [] if roll < 0.15 else rng.sample(allowed, min(2, len(allowed))) if roll < 0.3 else [rng.choice(allowed)]
        if version == 1 and early not in chosen:
            chosen.append(early)
        if version == latest:  # the newest commit labels two batches: `late`'s last one and another writer's
            others = [app for app in allowed if app != late]
            chosen = [late, rng.choice(others)] if others else [late]
        labels = {}
        for app in chosen:
            labels[app] = batch[app]
            batch[app] += rng.choice([1, 1, 1, 2, 5])  # a batch that wrote nothing commits nothing
        plan.append(labels)
    return interval, latest, plan


def _commit_txns(spark: Any, table: Path, labels: dict[str, int]) -> None:
    """One commit whose only actions are ``txn`` labels, through Delta's own transaction (what an
    idempotent writer's commit carries besides its data)."""
    JvmTransaction(spark, str(table)).commit_txn_labels(labels)


def _write_txn_history(spark: Any, table: Path, rng: random.Random) -> TxnHistory:
    """Write a table whose ``txn`` history ``rng`` chooses (:func:`_txn_plan`): one commit per version,
    labelled through a data append's ``txnAppId``/``txnVersion`` options, through Delta's transaction
    alone, or not at all (a table property change); then, if it has a checkpoint, maybe clean up the
    commits before the newest one."""
    interval, latest, plan = _txn_plan(rng)
    spark.sql(f"CREATE TABLE delta.`{table}` ({_EVENTS}) USING delta "
              f"TBLPROPERTIES ('delta.checkpointInterval' = '{interval}')")
    for version, labels in enumerate(plan, start=1):
        if not labels:
            spark.sql(f"ALTER TABLE delta.`{table}` SET TBLPROPERTIES ('course.step' = '{version}')")
        elif len(labels) == 1 and rng.random() < 0.3:
            (app, batch), = labels.items()
            (spark.createDataFrame([(version, app)], _EVENTS).write.format("delta").mode("append")
             .option("txnAppId", app).option("txnVersion", batch).save(str(table)))
        else:
            _commit_txns(spark, table, labels)
    checkpoints = checkpoint_versions(table)
    newest = checkpoints[-1] if checkpoints else None
    cleaned = newest is not None and rng.random() < 0.6
    if cleaned:
        clean_up_commits(table, before=newest)
    last_at = {app: version for version, labels in enumerate(plan, start=1) for app in labels}
    before = next((app for app, at in last_at.items() if newest is not None and at < newest), None)
    return TxnHistory(table, latest_version(table), newest, cleaned, before)


def _write_unreadable_commit(table: Path, rng: random.Random, known: dict[str, int]) -> tuple[str, int]:
    """Add a commit Spark refuses to read (its protocol names a reader feature Delta does not know)
    that also labels one more batch: of a writer the table knows, or of a new one. Written by hand,
    with no ``.crc`` beside it (checksum files are optional). Returns the (appId, batch) it labels."""
    version = latest_version(table) + 1
    if known and rng.random() < 0.5:
        app = rng.choice(sorted(known))
        batch = known[app] + rng.randint(1, 3)
    else:
        app, batch = str(uuid.UUID(int=rng.getrandbits(128), version=4)), rng.randint(0, 9)
    actions = [
        {"commitInfo": {"timestamp": int(time.time() * 1000), "operation": "STREAMING UPDATE",
                        "engineInfo": "a newer engine (lab 09's check)"}},
        {"protocol": {"minReaderVersion": 3, "minWriterVersion": 7,
                      "readerFeatures": ["courseFutureFeature"], "writerFeatures": ["courseFutureFeature"]}},
        {"txn": {"appId": app, "version": batch, "lastUpdated": int(time.time() * 1000)}},
    ]
    log = table / "_delta_log"
    write_atomically(log / f"{version:020d}.json", "".join(json.dumps(action) + "\n" for action in actions))
    clear_delta_cache()
    return app, batch


def _call_committed_batches(check: str, committed_batches: Callable[[str], Any], table: Path, hint: str,
                            seed: int | None = None) -> dict[str, int]:
    """The student's answer for ``table`` (which it must only read), refused if it is not a dict or
    if it asked the course's or Delta's own reader instead of reading the log."""
    with calls_watched([replay_log, delta_app_versions]) as called:
        answer = call_student(check, committed_batches, "committed_batches", str(table), hint=hint, read_only=[table],
                              seed=seed)
    if called:
        raise CheckFailed(
            check,
            f"committed_batches called {called[0]}, which already answers this exercise; it must read the "
            "log files itself.",
            "read the newest N.checkpoint.parquet's txn column with pyarrow, then the txn actions of the JSON commits "
            "after N with json.",
            seed=seed)
    if not isinstance(answer, dict):
        raise CheckFailed(check, f"committed_batches returned {type(answer).__name__}; it must return a dict.",
                          "the `return` line: a dict {appId: version} built from the txn actions.", seed=seed)
    return answer


def _compare_batches(check: str, answer: dict[str, int], expected: dict[str, int], where: str,
                     missing_fix: Callable[[str], str], seed: int | None = None, wrong_fix: str | None = None) -> None:
    """Raise the message for the first appId the answer gets wrong; ``where`` names the table,
    ``missing_fix`` says where an appId's txn is, ``wrong_fix`` (if given) where a wrong batch comes from."""
    for app_id, version in expected.items():
        writer = f"appId {app_id[:8] + '…' if len(app_id) > 20 else app_id!r}"
        if app_id not in answer:
            raise CheckFailed(check, f"on {where}, your answer has no entry for the {writer}, and the table holds "
                                     "batches of it.", missing_fix(app_id), seed=seed)
        if isinstance(answer[app_id], bool) or answer[app_id] != version:
            hint = ("a later txn of the same appId replaces an earlier one: the checkpoint first, then every commit "
                    "after it, in version order" if isinstance(answer[app_id], int) and answer[app_id] < version else
                    "the value is txn.version (the writer's batch id), not the table version, and no commit counts "
                    "twice")
            raise CheckFailed(check, f"on {where}, for the {writer} you answered {short_repr(answer[app_id])}, which is "
                                     "not the last batch the table holds for it.", wrong_fix or hint + ".", seed=seed)
    extra = sorted(set(answer) - set(expected), key=str)
    if extra:
        raise CheckFailed(check, f"on {where}, your answer has appIds the table does not hold: {extra[:2]}.",
                          "only txn actions count: their appId field, nothing else.", seed=seed)


@exercise_check
def check_committed_batches(committed_batches: Callable[[str], dict[str, int]]) -> None:
    """Check ``committed_batches(table_path)`` against Delta's own ``Snapshot.transactions`` on the
    example table and on a table generated for this run, then on that table once Spark cannot read it."""
    check = "committed_batches"
    spark = lab_spark()
    example, ids = _two_query_table(spark)
    name_of = {app_id: name for name, app_id in ids.items()}
    answer = _call_committed_batches(
        check, committed_batches, example,
        hint="read the txn column of the newest N.checkpoint.parquet, then the txn actions of the JSON commits after N.")
    _compare_batches(
        check, answer, delta_app_versions(spark, example), "the example table (two streaming queries)",
        lambda app_id: (f"that is query {name_of.get(app_id, '?')}; the commits before the newest checkpoint were cleaned "
                        "up, so its last txn is only in N.checkpoint.parquet (its txn column). Read the newest "
                        "checkpoint first, then the commits after it."))

    seed = check_seed()
    rng = random.Random(seed)
    history = _write_txn_history(spark, fresh_dir("lab09_committed_run") / rng.choice(["events", "click stream"]), rng)
    table = history.path
    expected = delta_app_versions(spark, table)
    answer = _call_committed_batches(
        check, committed_batches, table, seed=seed,
        hint="a table may have no checkpoint yet (then every JSON commit from 0), one or several (take the newest).")

    def missing_fix(app_id: str) -> str:
        if history.checkpoint is None:
            return "this table has no checkpoint yet: every txn is in the JSON commits, read them all from version 0."
        if history.cleaned and app_id == history.before_checkpoint:
            return ("the commits before the newest checkpoint were cleaned up: that writer's last txn is only in "
                    "the checkpoint's txn column. Read the newest checkpoint first, then the commits after it.")
        return "some commits carry no txn and some carry two: read every txn line of every commit after the checkpoint."

    shape = ("with no checkpoint" if history.checkpoint is None else
             f"whose early commits were {'' if history.cleaned else 'not '}cleaned up")
    _compare_batches(check, answer, expected, f"a generated table {shape}", missing_fix, seed=seed)

    app, batch = _write_unreadable_commit(table, rng, expected)
    answer = _call_committed_batches(
        check, committed_batches, table, seed=seed,
        hint="this table's newest commit names a reader feature Spark does not know, so Spark and Delta refuse the "
             "table; the log files are still JSON and Parquet: read them with json and pyarrow.")
    newest_too = ("the newest JSON commit holds a txn too: read every commit after the checkpoint, up to the newest "
                  "N.json (checksum files are optional, never the source).")
    _compare_batches(check, answer, {**expected, app: batch},
                     "a table whose newest commit Spark cannot read (and which has no .crc checksum)",
                     lambda app_id: newest_too, seed=seed, wrong_fix=newest_too)
    passed(check, "the last batch of every writer, as Delta's snapshot has it, on the example table and on a generated "
                  f"table {shape}, also once Spark could not read it.")


# --------------------------------------------------------------------------------------------
# Exercise 2: upsert_classifications(batch, batch_id, target, app_id), idempotent in foreachBatch
# --------------------------------------------------------------------------------------------

Classification = tuple[str, str, int]

_URLS = ("news.example", "shop.example", "a.example/path?q=1", "video.example", "mail.example", "blog.example",
         "maps.example", "games.example", "wiki.example", "bank.example")
_CATEGORIES = ("safe", "unsafe", "news", "sport", "shop", "ads", "games", "adult")


def _classification_batches(rng: random.Random) -> list[list[Classification]]:
    """Three or four batches of (url, category, ts), ``ts`` unique per url except for a line sent
    twice. Always somewhere: a url classified twice in one batch with the newer row first, one with
    the older row first, a line sent twice, and a late row (older than what earlier batches sent for
    its url) in a later batch."""
    urls = rng.sample(_URLS, rng.randint(4, 6))
    count = rng.randint(3, 4)
    clock = 20  # late rows take the free values below a url's ts
    used: set[int] = set()

    def later() -> int:
        nonlocal clock
        clock += rng.randint(4, 15)
        used.add(clock)
        return clock

    def row(url: str, ts: int) -> Classification:
        return url, rng.choice(_CATEGORIES), ts

    def held(url: str, number: int) -> int | None:
        """The largest ts batches before ``number`` sent for ``url``: what the table holds for it then."""
        sent = [ts for batch in batches[:number] for u, _, ts in batch if u == url]
        return max(sent) if sent else None

    def late_row(url: str, number: int) -> Classification:
        ts = rng.choice([t for t in range(1, held(url, number)) if t not in used])
        used.add(ts)
        return row(url, ts)

    batches: list[list[Classification]] = [[] for _ in range(count)]
    for url in urls[: rng.randint(2, len(urls))]:
        batches[0].append(row(url, later()))
    for number, batch in enumerate(batches):
        for _ in range(rng.randint(1, 3)):
            batch.insert(rng.randint(0, len(batch)), row(rng.choice(urls), later()))
        if number > 0 and rng.random() < 0.5:
            url = rng.choice(sorted(u for u in urls if held(u, number) is not None))
            batch.insert(rng.randint(0, len(batch)), late_row(url, number))
    placed = sorted((rng.randrange(count), case) for case in ("twice", "newer first", "older first"))
    for number, case in placed:  # in batch order, so that each pair is the newest its url has had
        batch = batches[number]
        absent = [url for url in urls if all(r[0] != url for r in batch)]  # the pair alone decides its url
        if not absent:
            absent = [next(u for u in _URLS if u not in urls)]
            urls.append(absent[0])
        url, at = rng.choice(absent), rng.randint(0, len(batch))
        if case == "twice":
            line = row(url, later())
            batch[at:at] = [line, line]
        else:
            first = row(url, later())
            second = (url, rng.choice([c for c in _CATEGORIES if c != first[1]]), later())
            batch[at:at] = [second, first] if case == "newer first" else [first, second]
    # A late row that is its url's only row in its batch, so that nothing but the MERGE's condition stops it.
    for number in rng.sample(range(1, count), count - 1):
        alone = sorted(u for u in urls if held(u, number) is not None and all(r[0] != u for r in batches[number]))
        if alone:
            batches[number].insert(rng.randint(0, len(batches[number])), late_row(rng.choice(alone), number))
            break
    else:
        batches.append([late_row(batches[0][0][0], count)])
    return batches


def _latest(batches: list[list[Classification]]) -> dict[str, tuple[str, int]]:
    """What the table must hold: per url, the classification with the largest ts of all batches."""
    latest: dict[str, tuple[str, int]] = {}
    for batch in batches:
        for url, category, ts in batch:
            if url not in latest or ts > latest[url][1]:
                latest[url] = (category, ts)
    return latest


def _land(landing: Path, number: int, rows: list[Classification]) -> None:
    drop_landing_file(landing, f"batch-{number:03d}.json", [{"url": u, "category": c, "ts": t} for u, c, t in rows])


_UPSERT_HINT = ("run your function on spark.read.schema(CLASSIFICATIONS).json(...) of one landing file and a table of "
                "your own first, then in a stream.")


def _call_upsert(check: str, upsert: Callable[..., Any], batch: Any, batch_id: int, target: Path, app_id: str) -> None:
    """One call of the student's upsert through call_student (a txn setting left behind is refused);
    MERGE's refusal of two source rows for one url becomes its own message."""
    try:
        call_student(check, upsert, "upsert_classifications", batch, batch_id, str(target), app_id, hint=_UPSERT_HINT)
    except CheckFailed as failure:
        if "DELTA_MULTIPLE_SOURCE_ROW_MATCHING_TARGET_ROW_IN_MERGE" in str(failure):
            raise CheckFailed(check, "the MERGE failed: one batch had two rows for the same url, and both matched a "
                                     "row of the table.",
                              "keep one row per url before the MERGE: the one with the largest ts.") from None
        raise


def _run_upsert(check: str, spark: Any, upsert: Callable[..., Any], landing: Path, checkpoint: Path,
                target: Path, app_id: str, after_each: Callable[[int], None]) -> Any:
    """Stream ``landing`` through the student's upsert with foreachBatch, one call_student per batch,
    then ``after_each(batch_id)`` (the table checked after that batch); the first failure of a call,
    a check or the stream becomes the CheckFailed raised here."""
    failures: list[CheckFailed] = []

    def each_batch(batch: Any, batch_id: int) -> None:
        try:
            _call_upsert(check, upsert, batch, batch_id, target, app_id)
            after_each(batch_id)
        except CheckFailed as failure:
            failures.append(failure)
            raise

    writer = (spark.readStream.schema(CLASSIFICATIONS).option("maxFilesPerTrigger", 1).json(str(landing))
              .writeStream.foreachBatch(each_batch).option("checkpointLocation", str(checkpoint)))
    try:
        return run_available(writer)
    except Exception as error:  # noqa: BLE001 - the student's code failed inside the stream
        if failures:
            raise failures[0] from None
        text = spark_failure(error).text
        line = next((part for part in text.splitlines() if "Error" in part or "[" in part), first_line(error))
        raise CheckFailed(check, f"the stream failed in upsert_classifications: {line.strip()[:300]}",
                          _UPSERT_HINT) from None


def _table_rows(check: str, spark: Any, target: Path, seed: int) -> dict[str, list[tuple[str, int]]]:
    """The target's rows by url, refused if its columns are not the classifications' columns."""
    frame = spark.read.format("delta").load(str(target))
    columns = [(field.name, field.dataType.simpleString()) for field in frame.schema.fields]
    wanted = [tuple(part.split()) for part in CLASSIFICATIONS.lower().replace("long", "bigint").split(", ")]
    if columns != wanted:
        raise CheckFailed(check, f"the table's columns are now {columns}; the upsert must keep them as they were.",
                          "select url, category, ts (drop helper columns such as a rank) before the MERGE.", seed=seed)
    rows: dict[str, list[tuple[str, int]]] = {}
    for row in frame.collect():
        rows.setdefault(row["url"], []).append((row["category"], row["ts"]))
    return rows


def _diagnose_rows(check: str, rows: dict[str, list[tuple[str, int]]], batches: list[list[Classification]],
                   seed: int) -> None:
    """Raise the message naming the mistake behind the first url the table gets wrong."""
    expected = _latest(batches)
    sent_in = {(url, category, ts): number for number, batch in enumerate(batches) for url, category, ts in batch}
    for url, found in sorted(rows.items()):
        if len(found) > 1:
            raise CheckFailed(check, f"the table has {len(found)} rows for {url}: one batch had it twice and both rows "
                                     "were inserted.",
                              "keep one row per url before the MERGE (the one with the largest ts), e.g. row_number() "
                              "over a window partitioned by url, ordered by ts descending.", seed=seed)
    for url in sorted(set(expected) | set(rows)):
        if url not in rows:
            raise CheckFailed(check, f"{url} is missing from the table.",
                              "insert the urls the table does not have yet: whenNotMatchedInsertAll().", seed=seed)
        if url not in expected:
            raise CheckFailed(check, f"the table has {url}, which no batch sent.", "insert only the batch's rows.",
                              seed=seed)
        category, ts = found = rows[url][0]
        if found == expected[url]:
            continue
        got_in, right_in = sent_in.get((url, category, ts)), sent_in[(url, *expected[url])]
        shown = f"{url} is {category!r} (ts {ts})"
        if got_in is None:
            raise CheckFailed(check, f"{shown}, a classification no batch sent.",
                              "write the batch's own rows: url, category and ts unchanged.", seed=seed)
        if got_in == right_in:
            raise CheckFailed(check, f"{shown}, but the same batch classified it again with a larger ts.",
                              "within a batch keep the row with the largest ts per url (not the first or the last one "
                              "read).", seed=seed)
        if got_in > right_in:
            raise CheckFailed(check, f"{shown}: a late classification (batch {got_in}, older than what the table held) "
                                     "overwrote a newer one.",
                              "late data must lose: update a matched url only when s.ts > t.ts "
                              "(whenMatchedUpdateAll(condition=...)).", seed=seed)
        raise CheckFailed(check, f"{shown}, but a later batch sent a newer classification of it.",
                          "update the urls the table has: whenMatchedUpdateAll(...).", seed=seed)


def _merges_only(check: str, target: Path, first: int, seed: int) -> None:
    """Refuse a commit of the upsert (versions ``first``..latest) that is not a MERGE."""
    for version in range(first, latest_version(target) + 1):
        operation = commit_info(target, version).get("operation")
        if operation != "MERGE":
            raise CheckFailed(check, f"version {version} of the table is a {operation}, not a MERGE: the upsert must "
                                     "merge the batch into the table, not rewrite or append.",
                              "DeltaTable.forPath(spark, target).alias('t').merge(latest.alias('s'), 't.url = s.url')"
                              "...execute().", seed=seed)


@exercise_check
def check_upsert_classifications(upsert_classifications: Callable[[Any, int, str, str], Any]) -> None:
    """Run ``upsert_classifications`` in a real foreachBatch stream over batches generated for this run,
    replay its last batch, call it with a batch id the table holds and with a new appId."""
    check = "upsert_classifications"
    spark = lab_spark()
    if not callable(upsert_classifications):
        call_student(check, upsert_classifications, "upsert_classifications", hint="")
    seed = check_seed()
    rng = random.Random(seed)
    batches = _classification_batches(rng)
    folder = fresh_dir("lab09_upsert")
    landing, target = folder / "landing", folder / "classifications"
    spark.createDataFrame([], CLASSIFICATIONS).write.format("delta").save(str(target))
    for number, rows in enumerate(batches):
        _land(landing, number, rows)
    app_id = f"lab09-classifier-{rng.randint(1, 999)}"
    before = {key: spark.conf.get(key, None) for key in _TXN_SETTINGS}
    try:
        _check_upsert_runs(check, spark, upsert_classifications, batches, folder, app_id, rng, seed)
    finally:  # a txn setting left behind (refused above) must not label the rest of the notebook
        for key, value in before.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)


def _check_upsert_runs(check: str, spark: Any, upsert: Callable[..., Any], batches: list[list[Classification]],
                       folder: Path, app_id: str, rng: random.Random, seed: int) -> None:
    """The stream, the replay after a crash, an old batch id and a new appId (see check_upsert_classifications)."""
    landing, checkpoint, target = folder / "landing", folder / "_checkpoint", folder / "classifications"

    def after_each(batch_id: int) -> None:
        _diagnose_rows(check, _table_rows(check, spark, target, seed), batches[: batch_id + 1], seed)

    _run_upsert(check, spark, upsert, landing, checkpoint, target, app_id, after_each)
    _merges_only(check, target, 1, seed)
    last = len(batches) - 1
    labelled = delta_app_versions(spark, target)
    if labelled != {app_id: last}:
        found = f"labelled {labelled}" if labelled else "not labelled with any txn"
        raise CheckFailed(check, f"after the stream's batches the table's commits are {found}.",
                          "set spark.databricks.delta.write.txnAppId to the app_id argument and "
                          "spark.databricks.delta.write.txnVersion to str(batch_id) around the MERGE.", seed=seed)

    # A crash after the last batch's write and before the checkpoint recorded it: Spark runs it again.
    for name in (str(last), f".{last}.crc"):
        (checkpoint / "commits" / name).unlink(missing_ok=True)
    version = latest_version(target)
    _run_upsert(check, spark, upsert, landing, checkpoint, target, app_id, after_each)
    if latest_version(target) != version:
        raise CheckFailed(check, f"batch {last}, run again after a crash, made a new commit: the MERGE is not "
                                 "idempotent.",
                          "the two txn settings make Delta skip a MERGE whose txnVersion it already holds for that "
                          "appId.", seed=seed)

    # A batch id the table already holds for this appId (not the last one): nothing may be written.
    url = rng.choice(sorted(_latest(batches)))
    newer = spark.createDataFrame([(url, "rewritten", 10**6)], CLASSIFICATIONS)
    old_batch = rng.randrange(last)
    _call_upsert(check, upsert, newer, old_batch, target, app_id)
    if latest_version(target) != version:
        raise CheckFailed(check, f"called with batch {old_batch} of appId {app_id!r}, which the table already holds "
                                 "(a batch before its last one), upsert_classifications wrote a new commit.",
                          "let Delta decide through the txn settings (it skips every txnVersion at or below the one "
                          "it holds), not a comparison of your own with the last batch only.", seed=seed)

    # A second query on a new checkpoint starts at batch 0 again, with its own appId: it must be written.
    new_app = app_id + "-v2"
    _call_upsert(check, upsert, newer, 0, target, new_app)
    rows = _table_rows(check, spark, target, seed)
    if rows.get(url) != [("rewritten", 10**6)] or delta_app_versions(spark, target).get(new_app) != 0:
        raise CheckFailed(check, f"a new query (new checkpoint, appId {new_app!r}) sent its batch 0, and the table "
                                 f"does not hold it (the url is now {rows.get(url)}).",
                          "use the app_id argument as txnAppId: a new checkpoint starts at batch 0 again, so it needs "
                          "its own appId.", seed=seed)
    passed(check, f"latest classification per url after {len(batches)} generated batches (duplicates, late data), the "
                  "last batch replayed and an old batch id sent again without a commit, a new query's batch 0 written.")
