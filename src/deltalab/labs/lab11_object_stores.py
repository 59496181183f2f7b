"""Lab 11 (object stores): a table's latest version from a LIST, and a commit that is safe with two writers.

The tables live on the course's local S3 server (:func:`lab_store`, one per process, on 127.0.0.1):
delta-rs writes them (no JVM), so the checks need no S3 jars in Spark, and delta-rs, an engine that
commits with put-if-absent itself, is the judge of what the table holds.

``check_current_version`` runs ``current_version(s3, bucket, table)`` (``s3`` a boto3 client, ``table``
the key prefix) on tables generated for the run: a few delta-rs appends, a checkpoint (always in the
first table, drawn in the second; ``_last_checkpoint`` is then the log's last key), the commits before it
cleaned up or not, and a long log of more than 1000 objects (a LIST answers at most
1000 keys a page), and compares with the version delta-rs loads (``DeltaTable(...).version()``).

``check_commit`` runs ``commit(s3, bucket, table, actions)`` once alone (its return and the commit
file's lines checked, the new file's rows read back by delta-rs), then as two writers in two threads
of this kernel that have both read the log and are held by the server at their PUT of the same
version; while they wait, delta-rs commits one or two appends. The first writer is released and
must get 412 and commit after the latest version, then the second. The check then reads the log:
no version missing, delta-rs's commits as it wrote them, each writer's actions in exactly one
commit, at the version it returned, and each writer refused once only (after a refusal it
re-reads the log; it does not guess the next version).
"""

from __future__ import annotations

import json
import random
import threading
from dataclasses import dataclass
from typing import Any, Callable

from deltalab.errors import DeltaLabError
from deltalab.labs.report import CheckFailed, passed, short_repr
from deltalab.labs.student import call_student, exercise_check
from deltalab.labs.tables import check_seed
from deltalab.objectstore import ObjectStore, delta_rs_options, start_object_store
from deltalab.workdir import workdir

__all__ = ["BUCKET", "CheckFailed", "check_commit", "check_current_version", "lab_store"]

#: The bucket every table of the lab is in.
BUCKET = "lab11"
#: How long a writer may take after its release, and to reach its held PUT (a safety net: seconds).
WAIT_SECONDS = 60.0

_STORE: list[ObjectStore] = []


def lab_store() -> ObjectStore:
    """The lab's S3 server on 127.0.0.1, started the first time a process asks (and again if it stopped),
    with the bucket :data:`BUCKET`."""
    if _STORE and _STORE[0].process.poll() is None:
        return _STORE[0]
    _STORE.clear()
    store = start_object_store(workdir("labs_checks_lab11_store", fresh=False) / "server")
    store.create_bucket(BUCKET)
    _STORE.append(store)
    return store


def _uri(table: str) -> str:
    return f"s3://{BUCKET}/{table}"


def _append(store: ObjectStore, table: str, first: int, count: int) -> None:
    import pyarrow as pa
    from deltalake import write_deltalake

    rows = pa.table({"id": pa.array(range(first, first + count), pa.int64()),
                     "writer": pa.array(["delta-rs"] * count)})
    write_deltalake(_uri(table), rows, mode="append", storage_options=delta_rs_options(store))


def _delta_rs_version(store: ObjectStore, table: str) -> int:
    from deltalake import DeltaTable

    return int(DeltaTable(_uri(table), storage_options=delta_rs_options(store)).version())


def _delta_rs_rows(store: ObjectStore, table: str) -> int:
    from deltalake import DeltaTable

    return int(DeltaTable(_uri(table), storage_options=delta_rs_options(store)).to_pyarrow_table().num_rows)


def _commit_key(table: str, version: int) -> str:
    return f"{table}/_delta_log/{version:020d}.json"


# ----------------------------------------------------------------------------------- current_version


@dataclass
class _VersionTable:
    table: str
    what: str
    version: int


def _short_table(store: ObjectStore, table: str, rng: random.Random, checkpoint: bool | None = None) -> str:
    """A delta-rs table of 3-7 appends, a checkpoint (drawn unless ``checkpoint`` says), the commits before it
    deleted or not."""
    from deltalake import DeltaTable

    appends = rng.randint(3, 7)
    for index in range(appends):
        _append(store, table, index * 10, rng.randint(1, 10))
    what = f"a generated table of {appends} versions"
    if checkpoint or (checkpoint is None and rng.random() < 0.6):
        DeltaTable(_uri(table), storage_options=delta_rs_options(store)).create_checkpoint()
        what += " with a checkpoint at its latest version"
        if rng.random() < 0.5:
            s3 = store.client("s3")
            for version in range(appends - 1):
                s3.delete_object(Bucket=BUCKET, Key=_commit_key(table, version))
            what += ", the commits before it cleaned up"
    return what


def _long_table(store: ObjectStore, table: str, rng: random.Random) -> str:
    """A log of more than 1000 objects: one delta-rs write, then empty commits (commitInfo only)
    put straight into the log, as a long-lived table's log holds a commit per write."""
    _append(store, table, 0, 3)
    s3 = store.client("s3")
    latest = rng.randint(1020, 1100)
    for version in range(1, latest + 1):
        info = {"commitInfo": {"timestamp": 1_700_000_000_000 + version, "operation": "SET TBLPROPERTIES",
                               "operationParameters": {}, "clientVersion": "lab11"}}
        s3.put_object(Bucket=BUCKET, Key=_commit_key(table, version), Body=(json.dumps(info) + "\n").encode())
    return "a generated table whose log holds more than 1000 objects"


_VERSION_TABLES: dict[int, list[_VersionTable]] = {}


def _version_tables(store: ObjectStore, seed: int) -> list[_VersionTable]:
    if seed in _VERSION_TABLES and all(_delta_rs_version(store, t.table) == t.version for t in _VERSION_TABLES[seed][:1]):
        return _VERSION_TABLES[seed]
    rng = random.Random(seed)
    tables = []
    builds = [lambda table: _short_table(store, table, rng, checkpoint=True), lambda table: _short_table(store, table, rng),
              lambda table: _long_table(store, table, rng)]
    for index, build in enumerate(builds):
        table = f"versions_{seed}_{index}"
        what = build(table)
        tables.append(_VersionTable(table, what, _delta_rs_version(store, table)))
    _VERSION_TABLES[seed] = tables
    return tables


@exercise_check
def check_current_version(current_version: Callable[[Any, str, str], int]) -> None:
    """Check ``current_version(s3, bucket, table)`` against the version delta-rs loads (see the module's docstring)."""
    check = "current_version"
    store = lab_store()
    seed = check_seed()
    hint = "s3.list_objects_v2(Bucket=bucket, Prefix=f'{table}/_delta_log/'): the keys N.json, N a 20-digit number."
    for table in _version_tables(store, seed):
        answer = call_student(check, current_version, "current_version", store.client("s3"), BUCKET, table.table,
                              hint=hint, seed=seed, on=table.what)
        if isinstance(answer, bool) or not isinstance(answer, int):
            raise CheckFailed(check, f"current_version returned {short_repr(answer)}; it must return an int.",
                              "the `return` line of current_version.", seed=seed)
        if answer == table.version:
            continue
        if answer < table.version and "1000" in table.what:
            fix = ("a LIST answers at most 1000 keys; when it says IsTruncated, ask again with its "
                   "NextContinuationToken (or use s3.get_paginator('list_objects_v2')).")
        elif answer < table.version:
            fix = "the latest version is the highest N of the keys N.json in _delta_log/, whatever else the log holds."
        else:
            fix = ("list only this table's log (Prefix=f'{table}/_delta_log/': the bucket holds other tables), and "
                   "count only keys named N.json (20 digits) as commits.")
        raise CheckFailed(check, f"on {table.what}, current_version returned {answer}, which is "
                                 f"{'below' if answer < table.version else 'above'} the version delta-rs loads.", fix,
                          seed=seed)
    passed(check, "matches delta-rs's version on every generated table: checkpoints, cleaned-up commits, a log longer "
                  "than one LIST page.")


# ------------------------------------------------------------------------------------------ commit


class _ThreadCall:
    """The learner's function running in a thread of this kernel (what :meth:`Hold.wait_reached` waits on)."""

    def __init__(self, function: str, target: Callable[[], Any]) -> None:
        self.function = function
        self._value: Any = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(target,), daemon=True, name=f"lab11-{function}")
        self._thread.start()

    def _run(self, target: Callable[[], Any]) -> None:
        try:
            self._value = target()
        except BaseException as error:  # noqa: BLE001 - handed to result()
            self._error = error

    @property
    def done(self) -> bool:
        return not self._thread.is_alive()

    def result(self, timeout: float = WAIT_SECONDS) -> Any:
        self._thread.join(max(timeout, 0))
        if self._thread.is_alive():
            raise TimeoutError(f"{self.function} had not returned after {timeout:.0f} s")
        if self._error is not None:
            raise self._error
        return self._value


def _add_action(store: ObjectStore, table: str, writer: str, first: int, count: int) -> dict[str, Any]:
    """Upload a Parquet file of ``count`` rows tagged ``writer`` into the table's folder; return its ``add`` action."""
    import io
    import uuid

    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = pa.table({"id": pa.array(range(first, first + count), pa.int64()), "writer": pa.array([writer] * count)})
    buffer = io.BytesIO()
    pq.write_table(rows, buffer)
    name = f"part-00000-{uuid.uuid4()}-c000.snappy.parquet"
    body = buffer.getvalue()
    store.client("s3").put_object(Bucket=BUCKET, Key=f"{table}/{name}", Body=body)
    stats = {"numRecords": count, "minValues": {"id": first, "writer": writer}, "maxValues": {"id": first + count - 1,
             "writer": writer}, "nullCount": {"id": 0, "writer": 0}}
    return {"add": {"path": name, "partitionValues": {}, "size": len(body), "modificationTime": 1_700_000_000_000,
                    "dataChange": True, "stats": json.dumps(stats)}}


def _commit_lines(store: ObjectStore, table: str, version: int) -> list[dict[str, Any]] | None:
    s3 = store.client("s3")
    try:
        body = s3.get_object(Bucket=BUCKET, Key=_commit_key(table, version))["Body"].read().decode()
    except s3.exceptions.NoSuchKey:
        return None
    return [json.loads(line) for line in body.splitlines() if line.strip()]


def _call_failed(check: str, name: str, error: BaseException, seed: int, hint: str) -> CheckFailed:
    first = str(error).splitlines()[0] if str(error) else ""
    return CheckFailed(check, f"{name} raised {type(error).__name__}: {first}", hint, seed=seed)


def _alone(check: str, commit: Callable[..., int], store: ObjectStore, table: str, seed: int, hint: str) -> None:
    before = _delta_rs_version(store, table)
    rows_before = _delta_rs_rows(store, table)
    actions = [_add_action(store, table, "alone", 1000, 7)]
    answer = call_student(check, commit, "commit", store.client("s3"), BUCKET, table, [dict(a) for a in actions],
                          hint=hint, seed=seed, on="a table with no other writer")
    if isinstance(answer, bool) or not isinstance(answer, int):
        raise CheckFailed(check, f"commit returned {short_repr(answer)}; it must return the version it wrote (an int).",
                          "the `return` line of commit.", seed=seed)
    lines = _commit_lines(store, table, before + 1)
    if lines is None:
        raise CheckFailed(check, "on a table with no other writer, commit wrote no commit file after the latest version.",
                          "the key is f'{table}/_delta_log/{version:020d}.json', version = the latest + 1.", seed=seed)
    if answer != before + 1:
        raise CheckFailed(check, f"on a table with no other writer, commit returned {answer}, not the version of the "
                                 "commit file it wrote.", "return the version you wrote.", seed=seed)
    if lines != actions:
        raise CheckFailed(check, "the commit file does not hold the actions given, one JSON object per line, in order.",
                          "the body is '\\n'.join(json.dumps(action) for action in actions) (a final newline is fine).",
                          seed=seed)
    if _delta_rs_rows(store, table) != rows_before + 7:
        raise CheckFailed(check, "delta-rs does not read the rows of the file the commit added.",
                          "write the actions as given; the add action names the file.", seed=seed)


def _race(check: str, commit: Callable[..., int], store: ObjectStore, table: str, rng: random.Random, seed: int,
          hint: str) -> None:
    read = _delta_rs_version(store, table)
    contested = read + 1
    winners = rng.randint(1, 2)                       # delta-rs commits while both writers wait
    actions = {label: [_add_action(store, table, label, 2000 + 100 * index, 3 + index)]
               for index, label in enumerate(("writer A", "writer B"))}
    holds = store.hold_requests("PUT", rf"^/{BUCKET}/{table}/_delta_log/0*{contested}\.json$", count=2)
    calls: dict[str, _ThreadCall] = {}
    try:
        for hold, label in zip(holds, actions):
            client = store.client("s3")
            calls[label] = _ThreadCall("commit", lambda c=client, a=actions[label]: commit(c, BUCKET, table, a))
            try:
                hold.wait_reached(calls[label], timeout=WAIT_SECONDS)
            except CheckFailed:
                raise
            except DeltaLabError:
                if calls[label].done:
                    try:
                        calls[label].result(0)
                    except BaseException as error:  # noqa: BLE001
                        raise _call_failed(check, "commit", error, seed, hint) from None
                raise CheckFailed(check, f"{label} did not PUT the next version's commit file "
                                         f"({contested:020d}.json) after reading the log.",
                                  "LIST the log, then PUT f'{table}/_delta_log/{latest + 1:020d}.json'.", seed=seed) from None
            except Exception as error:  # noqa: BLE001 - the commit failed before its PUT of the next version
                raise CheckFailed(check, f"{label}'s commit raised {type(error).__name__} before it put the next "
                                         f"version: {str(error).splitlines()[0] if str(error) else ''}",
                                  "the version to commit is the latest version read from the log + 1, whatever the "
                                  "table; and a 412 is caught and retried.", seed=seed) from None
        for index in range(winners):
            _append(store, table, 5000 + 10 * index, 2)
        written = {v: _commit_lines(store, table, v) for v in range(contested, contested + winners)}
        returned, refusals = {}, {}
        for hold, label in zip(holds, actions):
            start = store.mark()
            hold.release()
            try:
                returned[label] = calls[label].result(WAIT_SECONDS)
            except TimeoutError:
                store.stop()                          # ends the requests of a commit that never returns
                raise CheckFailed(check, f"{label}'s commit had not returned {WAIT_SECONDS:.0f} s after the server "
                                         "answered its PUT; it retries forever?",
                                  "after a 412, LIST the log again and try the version after the latest.", seed=seed) from None
            except BaseException as error:  # noqa: BLE001
                raise _call_failed(check, "commit", error, seed,
                                   "a PUT with IfNoneMatch='*' on an existing key raises ClientError with "
                                   "error.response['Error']['Code'] == 'PreconditionFailed' (412): catch it, "
                                   "read the log again, and try the next version.") from None
            mine = [r for r in store.requests(start) if r.method == "PUT" and "/_delta_log/" in r.key]
            refusals[label] = sum(1 for r in mine if r.status == 412)
    except BaseException:
        for hold in holds:
            hold.cancel()
        raise
    for version, lines in written.items():
        if _commit_lines(store, table, version) != lines:
            raise CheckFailed(check, f"while your two writers raced, delta-rs committed version {version}; after them, "
                                     "that commit file holds other actions: a writer replaced it.",
                              "put the commit file only if no object has that key: put_object(..., IfNoneMatch='*'); "
                              "a plain PUT replaces what another writer committed.", seed=seed)
    latest = _delta_rs_version(store, table)
    versions = {label: [v for v in range(contested, latest + 1) if _commit_lines(store, table, v) == acts]
                for label, acts in actions.items()}
    for label in actions:
        if len(versions[label]) != 1:
            raise CheckFailed(check, f"after the race, {label}'s actions are in {len(versions[label])} commits of the "
                                     "log; they must be in exactly one.",
                              "commit once: after a refusal, retry with the same actions at a new version.", seed=seed)
        if returned[label] != versions[label][0]:
            raise CheckFailed(check, f"{label}'s commit returned a version whose commit file holds other actions.",
                              "return the version of the PUT that succeeded.", seed=seed)
        if refusals[label] != 1:
            raise CheckFailed(check, f"after its release, {label}'s PUTs were refused {refusals[label]} times; with "
                                     "the log read again after the first refusal, the next PUT succeeds.",
                              "after a 412, LIST the log again and take the latest version + 1; do not guess the next "
                              "version by adding one.", seed=seed)
    if any(_commit_lines(store, table, v) is None for v in range(latest + 1)):
        raise CheckFailed(check, "after the race, the log has a version missing.",
                          "each commit is the latest version + 1, read from the log.", seed=seed)


_COMMIT_TABLES: list[int] = []


@exercise_check
def check_commit(commit: Callable[[Any, str, str, list], int]) -> None:
    """Check ``commit(s3, bucket, table, actions)`` alone, then racing against itself and delta-rs
    (see the module's docstring)."""
    check = "commit"
    store = lab_store()
    seed = check_seed()
    rng = random.Random(seed)
    hint = ("LIST the log for the latest version, then s3.put_object(Bucket=bucket, Key=..., Body=..., "
            "IfNoneMatch='*').")
    _COMMIT_TABLES.append(seed)        # a new table for every call, even at a fixed seed
    table = f"commits_{seed}_{rng.randrange(10**9)}_{len(_COMMIT_TABLES)}"
    for index in range(rng.randint(1, 4)):
        _append(store, table, index * 10, rng.randint(1, 5))
    _alone(check, commit, store, table, seed, hint)
    _race(check, commit, store, table, rng, seed, hint)
    passed(check, "writes the next version alone; racing another writer and delta-rs at a held PUT, it is refused "
                  "once, reads the log again and commits after the latest, and no commit is lost or written twice.")
