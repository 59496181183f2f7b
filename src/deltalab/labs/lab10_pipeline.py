"""Lab 10 (medallion pipeline): the silver upsert of change records, and gold kept from silver's change feed.

Silver keeps one row per customer: its latest change, a delete included. A delete is a soft delete
(a tombstone: the delete's own row with ``deleted = true``): once the row is gone, a change older
than the delete that arrives late would find nothing to lose against and bring the customer back.

Both checks draw their batches of change records afresh for each run (:func:`_change_batches`,
seeded by :func:`~deltalab.labs.tables.check_seed`): a line sent twice, two changes of one customer
in a batch in either order, a delete of a customer nobody knows, a late update after a delete, a late
delete after a newer update, a line sent again, a customer deleted and back.

The silver check runs the student's upsert on a table with the change feed on, compares silver after
each batch with a recomputation in plain Python (every row, every column, tombstones included), and
silver's change feed with what each batch changed (a MERGE writes only the rows it changes).

The gold check builds silver itself, with the change feed on (deletion vectors on or off): a bulk
load, one MERGE per batch, sometimes a property change, a purge of the tombstones at the end. Gold
has commits of its own and may start from a backfill, so gold's version is never the silver version
it has read. After each call gold must equal customers per domain of silver's live rows (the
recomputation exercise 1 is held to; the tests check the check's silver against it) and carry the
last silver version read in its ``txn``. While the student's function runs, the data files of silver
that only hold versions gold has already counted are replaced by unreadable stand-ins (and put back
afterwards): the change feed of the new versions never reads them, a recomputation from all of
silver does.
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable
from urllib.parse import unquote

from deltalab.errors import spark_failure
from deltalab.labs.report import CheckFailed, passed
from deltalab.labs.student import call_student, exercise_check, lab_spark
from deltalab.labs.tables import check_seed, fresh_dir
from deltalab.log import commit_info, latest_version, read_log, replay_log

__all__ = ["CHANGES", "CUSTOMERS", "EXAMPLE_BATCH", "GOLD", "CheckFailed", "check_update_gold", "check_upsert_changes"]

#: The change records both exercises receive: already parsed and valid (notebook 10's silver split).
CHANGES = "op STRING, customer_id BIGINT, name STRING, email STRING, updated_at BIGINT"
#: The silver table: one row per customer, its latest change; ``deleted`` marks a tombstone.
CUSTOMERS = "customer_id BIGINT, name STRING, email STRING, updated_at BIGINT, deleted BOOLEAN"
#: The gold table: customers per email domain.
GOLD = "domain STRING, customers BIGINT"

Change = tuple[str, int, "str | None", "str | None", int]
Row = tuple["str | None", "str | None", int, bool]

#: A batch for the lab's first look: customer 1 changed twice, two deletes (one with the customer's
#: last values, one of a customer nobody knows, with none), a late update of customer 3.
EXAMPLE_BATCH: list[Change] = [
    ("update", 1, "Ann", "ann@beta.example", 5), ("update", 1, "Ann", "ann@gamma.example", 6),
    ("delete", 2, "Bob", "bob@beta.example", 5), ("insert", 4, "Dee", "dee@alpha.example", 5),
    ("update", 3, "Cy", "cy@beta.example", 2), ("delete", 9, None, None, 7),
]

_NAMES = ("Ann", "Bob", "Cy", "Dee", "Eve", "Fay", "Gus", "Hal", "Ivy", "Jo", "Kim", "Lu", "Mo", "Ned")
_DOMAINS = ("alpha.example", "beta.example", "gamma.example", "delta.example")


def _as_row(change: Change) -> Row:
    """The silver row a change becomes: its name, email and time, and whether it is a delete."""
    return change[2], change[3], change[4], change[0] == "delete"


def _silver_after(batches: list[list[Change]]) -> dict[int, Row]:
    """What silver holds after ``batches``: per customer its latest change (largest updated_at),
    as a row; a delete's row is its tombstone."""
    latest: dict[int, Change] = {}
    for change in (change for batch in batches for change in batch):
        if change[1] not in latest or change[4] > latest[change[1]][4]:
            latest[change[1]] = change
    return {customer: _as_row(change) for customer, change in latest.items()}


class _Changes:
    """What :func:`_change_batches` builds batches from: a clock, and each customer's latest change."""

    def __init__(self, rng: random.Random, domains: list[str], fresh: list[int]) -> None:
        self.rng, self.domains, self.fresh = rng, domains, fresh
        self.clock, self.used = 20, set[int]()
        self.latest: dict[int, Change] = {}
        self.names = {customer: rng.choice(_NAMES) for customer in fresh}

    def later(self) -> int:
        """A time later than every change so far."""
        self.clock += self.rng.randint(4, 12)
        self.used.add(self.clock)
        return self.clock

    def earlier(self, than: int) -> int:
        """An unused time before ``than`` (a late change)."""
        time = self.rng.choice([t for t in range(1, than) if t not in self.used])
        self.used.add(time)
        return time

    def live(self) -> list[int]:
        """The customers whose latest change is not a delete."""
        return sorted(c for c, change in self.latest.items() if change[0] != "delete")

    def new_customer(self) -> int:
        return self.fresh.pop()

    def upsert(self, customer: int, time: int, op: str | None = None) -> Change:
        """An insert (first change, or back after a delete) or an update, with an email at a random domain."""
        known = customer in self.latest and self.latest[customer][0] != "delete"
        name = self.names[customer]
        email = f"{name.lower()}{customer}@{self.rng.choice(self.domains)}"
        return self.record((op or ("update" if known else "insert"), customer, name, email, time))

    def delete(self, customer: int, time: int, carried: bool | None = None) -> Change:
        """A delete, with the customer's last name and email (some sources send them; a customer nobody
        knows gets new ones) or with nulls; ``carried`` None: either, at random."""
        carried = self.rng.random() < 0.5 if carried is None else carried
        last = self.latest.get(customer)
        name, email = None, None
        if carried and last is None:
            name = self.names[customer]
            email = f"{name.lower()}{customer}@{self.rng.choice(self.domains)}"
        elif carried and last[2] is not None:
            name, email = last[2], last[3]
        return self.record(("delete", customer, name, email, time))

    def record(self, change: Change) -> Change:
        """Keep ``change`` as its customer's latest if it is later than the one kept."""
        current = self.latest.get(change[1])
        if current is None or change[4] > current[4]:
            self.latest[change[1]] = change
        return change


def _change_batches(rng: random.Random) -> list[list[Change]]:
    """Three or four batches of change records whose problems ``rng`` places: a line sent twice,
    two changes of one customer in a batch (newer first, and older first), a delete of a customer
    nobody knows, a delete followed in a later batch by a late update older than it, a late delete
    older than its customer's last update, a line sent again, maybe a customer back after a delete;
    fillers insert, update and delete. Each problem is its customer's only change in its batch, so
    that only the rule it tests decides it."""
    count = rng.randint(3, 4)
    state = _Changes(rng, rng.sample(_DOMAINS, 3), rng.sample(range(1, 100), 30))
    plan: dict[int, list[str]] = {number: [] for number in range(count)}
    for case in ("twice", "newer first", "older first", "nobody"):
        plan[rng.randrange(count)].append(case)
    deleted_in = rng.randint(1, count - 2)
    plan[deleted_in].append("delete")
    plan[rng.randint(deleted_in + 1, count - 1)].append("late update after delete")
    plan[rng.randint(1, count - 1)].append("late delete after update")
    plan[rng.randint(1, count - 1)].append("sent again")
    if rng.random() < 0.5:
        plan[rng.randint(deleted_in, count - 1)].append("back after delete")
    reserved: set[int] = set()  # customers a later problem needs as they are
    deleted: list[int] = []
    batches: list[list[Change]] = []
    for number in range(count):
        batch: list[list[Change]] = []  # blocks: a pair stays in its order

        def absent(candidates: list[int]) -> list[int]:
            here = {change[1] for block in batch for change in block}
            return [c for c in candidates if c not in here and c not in reserved]

        def existing() -> list[int]:
            """Live customers of earlier batches absent from this one (one more inserted before, if none)."""
            found = absent([c for c in state.live() if any(c == ch[1] for b in batches for ch in b)])
            if not found:
                found = [state.new_customer()]
                batches[-1].append(state.upsert(found[0], state.later()))
            return found

        if number == 0:
            batch += [[state.upsert(state.new_customer(), state.later())] for _ in range(rng.randint(3, 5))]
        for case in sorted(plan[number], key=lambda case: case != "sent again"):  # a resend first: most to choose from
            if case == "twice":
                line = state.upsert(state.new_customer(), state.later())
                batch.append([line, line])
            elif case in ("newer first", "older first"):
                customer = rng.choice(absent(state.live()) or [state.new_customer()])
                first = state.upsert(customer, state.later())
                second = state.upsert(customer, state.later())
                batch.append([second, first] if case == "newer first" else [first, second])
            elif case == "nobody":
                customer = state.new_customer()
                reserved.add(customer)
                batch.append([state.delete(customer, state.later(), carried=True)])  # a tombstone with an email
            elif case == "delete":
                customer = rng.choice(existing())
                reserved.add(customer)
                deleted.append(customer)
                batch.append([state.delete(customer, state.later(), carried=False)])  # the tombstone's nulls
            elif case == "late update after delete":
                customer = deleted[0]
                batch.append([state.upsert(customer, state.earlier(state.latest[customer][4]), op="update")])
            elif case == "late delete after update":
                customer = rng.choice(existing())
                batch.append([state.delete(customer, state.earlier(state.latest[customer][4]))])
            elif case == "sent again":
                earlier = [c for c in absent(sorted(state.latest)) if state.latest[c] in (ch for b in batches for ch in b)]
                if earlier:
                    batch.append([state.latest[rng.choice(earlier)]])
            elif case == "back after delete":
                gone = absent([c for c, change in state.latest.items() if change[0] == "delete"])
                if gone:
                    batch.append([state.upsert(rng.choice(sorted(gone)), state.later())])
        for _ in range(rng.randint(1, 3)):
            roll, live = rng.random(), absent(state.live())
            if not live or roll < 0.35:
                batch.append([state.upsert(state.new_customer(), state.later())])
            elif roll < 0.85:
                batch.append([state.upsert(rng.choice(live), state.later())])
            else:
                batch.append([state.delete(rng.choice(live), state.later())])
        rng.shuffle(batch)
        batches.append([change for block in batch for change in block])
        if number == 0:  # one customer of the first batch that nothing changes later: the gold check's steady file
            reserved.add(rng.choice([c for c in state.live() if c not in reserved]))
    return batches


def _read_rows(check: str, spark: Any, path: Path, columns: str, what: str, fix: str, seed: int) -> list[Any]:
    """Every row of the Delta table at ``path``, refused unless its columns are ``columns`` exactly."""
    try:
        frame = spark.read.format("delta").load(str(path))
        found = [(field.name, field.dataType.simpleString()) for field in frame.schema.fields]
        rows = frame.collect()
    except Exception as error:  # noqa: BLE001 - a table the student's code broke
        raise CheckFailed(check, f"{what} cannot be read: {spark_failure(error).message.splitlines()[0][:200]}", fix,
                          seed=seed) from None
    wanted = [(part.split()[0], part.split()[1].lower()) for part in columns.split(", ")]
    if found != wanted:
        raise CheckFailed(check, f"{what} has the columns {found}; it must keep exactly {columns}.", fix, seed=seed)
    return rows


# --------------------------------------------------------------------------------------------
# Exercise 1: upsert_changes(changes, target)
# --------------------------------------------------------------------------------------------


def _call_upsert(check: str, upsert: Callable[[Any, str], Any], spark: Any, batch: list[Change], number: int,
                 target: Path, seed: int) -> None:
    try:
        call_student(check, upsert, "upsert_changes", spark.createDataFrame(batch, CHANGES), str(target),
                     hint="run your function on one batch first: spark.createDataFrame(rows, CHANGES) and a table of your "
                          "own with the columns CUSTOMERS.")
    except CheckFailed as failure:
        if "DELTA_MULTIPLE_SOURCE_ROW_MATCHING_TARGET_ROW_IN_MERGE" in str(failure):
            raise CheckFailed(check, f"the MERGE of batch {number} failed: two of its rows are changes of the same customer, "
                                     "and both matched one row of the table.",
                              "keep one change per customer_id before the MERGE: the one with the largest updated_at "
                              "(row_number() over a window partitioned by customer_id, ordered by updated_at descending).",
                              seed=seed) from None
        raise


def _diagnose_upsert(check: str, number: int, found: dict[int, list[Row]], batches: list[list[Change]],
                     seed: int) -> None:
    """Raise the message that names the mistake behind the first customer silver gets wrong, if any."""
    expected = _silver_after(batches)
    sent_in: dict[tuple[int, Row], int] = {}
    for index, batch in enumerate(batches):
        for change in batch:
            sent_in.setdefault((change[1], _as_row(change)), index)
    after = f"after batch {number}"
    for customer, rows in sorted(found.items()):
        if len(rows) > 1:
            raise CheckFailed(check, f"{after} silver has {len(rows)} rows for customer {customer}: each change of it was "
                                     "inserted.",
                              "keep one change per customer_id before the MERGE (the one with the largest updated_at), and "
                              "MERGE on customer_id.", seed=seed)
    for customer in sorted(set(found) | set(expected)):
        if customer not in expected:
            raise CheckFailed(check, f"{after} silver has customer {customer}, whom no change names.",
                              "insert only the batch's customers, with their own customer_id.", seed=seed)
        if customer not in found:
            if expected[customer][3]:
                raise CheckFailed(check, f"{after} customer {customer} is missing: a delete must leave a tombstone row "
                                         "(deleted = true), also for a customer silver did not have.",
                                  "without the tombstone a late change older than the delete finds nothing to lose "
                                  "against and brings the customer back: soft delete, never whenMatchedDelete.", seed=seed)
            raise CheckFailed(check, f"{after} customer {customer} is missing.",
                              "insert the customers silver does not have yet: whenNotMatchedInsert(...).", seed=seed)
        got = found[customer][0]
        if got == expected[customer]:
            continue
        shown = f"{after} customer {customer} is {got}"
        got_in, right_in = sent_in.get((customer, got)), sent_in[(customer, expected[customer])]
        if got_in is None:
            raise CheckFailed(check, f"{shown} (name, email, updated_at, deleted), which is none of its changes.",
                              "silver's row is the customer's latest change as sent: its name and email (a delete's too, "
                              "even null), its updated_at, and deleted = (op = 'delete').", seed=seed)
        if got_in == right_in:
            raise CheckFailed(check, f"{shown}, but the same batch has a later change of that customer.",
                              "of two changes of one customer in a batch, keep the one with the LARGEST updated_at.",
                              seed=seed)
        if got_in > right_in and expected[customer][3] and not got[3]:
            raise CheckFailed(check, f"{shown}: deleted, the customer came back with a late change older than its "
                                     "delete.",
                              "keep a deleted customer as a tombstone row (deleted = true) and update a row only when "
                              "s.updated_at > t.updated_at: the late change then loses.", seed=seed)
        if got_in > right_in:
            raise CheckFailed(check, f"{shown}: a late change (batch {got_in}), older than what silver had, overwrote it.",
                              "a late change must lose: update (a delete too) only when s.updated_at > t.updated_at.",
                              seed=seed)
        raise CheckFailed(check, f"{shown}, but a later change of that customer (batch {right_in}) was not applied.",
                          "update a matched customer whenever its change is later (s.updated_at > t.updated_at), a delete "
                          "too (deleted = true).", seed=seed)


def _change_rows(state_before: dict[int, Row], state_after: dict[int, Row]) -> list[tuple[Any, ...]]:
    """The change-feed rows a MERGE from one state to the other writes: insert, update pre/post images."""
    rows: list[tuple[Any, ...]] = []
    for customer in sorted(set(state_before) | set(state_after)):
        before, after = state_before.get(customer), state_after.get(customer)
        if before == after:
            continue
        if before is None:
            rows.append(("insert", customer, *after))
        elif after is None:
            rows.append(("delete", customer, *before))
        else:
            rows += [("update_preimage", customer, *before), ("update_postimage", customer, *after)]
    return sorted(rows, key=repr)


def _check_change_feed(check: str, spark: Any, target: Path, versions: list[int], states: list[dict[int, Row]],
                       seed: int) -> None:
    """Each batch's commits must be one MERGE whose change feed holds exactly the rows the batch changed."""
    for number in range(len(versions) - 1):
        made = list(range(versions[number] + 1, versions[number + 1] + 1))
        operations = [commit_info(target, version).get("operation") for version in made]
        if len(made) > 1 or any(operation != "MERGE" for operation in operations):
            raise CheckFailed(check, f"batch {number} made the commit(s) {operations}: the upsert must be one MERGE per "
                                     "batch.",
                              "a MERGE rewrites only the rows it changes, in one commit; an overwrite or several "
                              "commits put every customer (or half a batch) into silver's change feed.", seed=seed)
    if versions[-1] == 0:
        return
    feed = (spark.read.format("delta").option("readChangeFeed", "true").option("startingVersion", 1)
            .option("endingVersion", versions[-1]).load(str(target)).collect())
    for number in range(len(versions) - 1):
        version = versions[number + 1] if versions[number + 1] > versions[number] else None
        found = sorted(((r["_change_type"], r["customer_id"], r["name"], r["email"], r["updated_at"], r["deleted"])
                        for r in feed if r["_commit_version"] == version), key=repr)
        expected = _change_rows(states[number], states[number + 1])
        if found != expected:
            unchanged = sorted({row[1] for row in found} - {row[1] for row in expected})
            if unchanged:
                raise CheckFailed(check, f"silver's change feed of batch {number} has customer {unchanged[0]}, whose row "
                                         "did not change: a line sent again (or an older change) rewrote it as it was.",
                                  "update only when the change is strictly later (s.updated_at > t.updated_at): gold "
                                  "reads every change-feed row.", seed=seed)
            raise CheckFailed(check, f"silver's change feed of batch {number} does not show exactly the rows the batch "
                                     "changed.",
                              "one MERGE per batch that updates, inserts and marks deleted only the customers whose latest "
                              "change is new.", seed=seed)


@exercise_check
def check_upsert_changes(upsert_changes: Callable[[Any, str], Any]) -> None:
    """Run ``upsert_changes(changes, target)`` over batches generated for this run; compare silver
    after each with a recomputation, and silver's change feed with what each batch changed."""
    check = "upsert_changes"
    spark = lab_spark()
    if not callable(upsert_changes):
        call_student(check, upsert_changes, "upsert_changes", hint="")
    seed = check_seed()
    rng = random.Random(seed)
    batches = _change_batches(rng)
    target = fresh_dir("lab10_upsert") / "silver"
    spark.sql(f"CREATE TABLE delta.`{target}` ({CUSTOMERS}) USING delta TBLPROPERTIES "
              f"('delta.enableChangeDataFeed' = 'true', 'delta.enableDeletionVectors' = '{str(rng.random() < 0.5).lower()}')")
    versions, states = [latest_version(target)], [{}]
    fix = f"write only the columns of silver ({CUSTOMERS}): no op, no rank."
    for number, batch in enumerate(batches):
        _call_upsert(check, upsert_changes, spark, batch, number, target, seed)
        found: dict[int, list[Row]] = {}
        for row in _read_rows(check, spark, target, CUSTOMERS, f"after batch {number} silver", fix, seed):
            found.setdefault(row["customer_id"], []).append((row["name"], row["email"], row["updated_at"], row["deleted"]))
        _diagnose_upsert(check, number, found, batches[: number + 1], seed)
        versions.append(latest_version(target))
        states.append(_silver_after(batches[: number + 1]))
    _check_change_feed(check, spark, target, versions, states, seed)
    passed(check, f"silver equals the recomputation after each of {len(batches)} generated batches (duplicates, late "
                  "changes, deletes kept as tombstones, a late update after a delete), and its change feed shows only "
                  "what each batch changed.")


# --------------------------------------------------------------------------------------------
# Exercise 2: update_gold(silver_path, gold_path): customers per email domain, from the change feed
# --------------------------------------------------------------------------------------------

_ROW = {c: f"s.{c}" for c in ("customer_id", "name", "email", "updated_at")} | {"deleted": "s.op = 'delete'"}


def _reference_upsert(spark: Any, batch: list[Change], silver: Path) -> None:
    """The check's own silver upsert (the rule :func:`_silver_after` computes), independent of exercise 1."""
    from delta.tables import DeltaTable
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    changes = spark.createDataFrame(batch, CHANGES)
    newest_first = Window.partitionBy("customer_id").orderBy(F.col("updated_at").desc())
    latest = changes.withColumn("rank", F.row_number().over(newest_first)).filter("rank = 1").drop("rank")
    (DeltaTable.forPath(spark, str(silver)).alias("t").merge(latest.alias("s"), "t.customer_id = s.customer_id")
     .whenMatchedUpdate(condition="s.updated_at > t.updated_at", set=_ROW).whenNotMatchedInsert(values=_ROW).execute())


def _bulk_load(spark: Any, silver: Path, rows: dict[int, Row], files: int) -> None:
    """Append ``rows`` to silver as a bulk load does, in ``files`` files."""
    frame = spark.createDataFrame([(c, *row) for c, row in sorted(rows.items())], CUSTOMERS)
    frame.repartition(files).write.format("delta").mode("append").save(str(silver))


def _live_domains(silver: dict[int, Row]) -> dict[str, int]:
    """Customers per email domain among the live rows (not tombstones) of a silver state: what gold must hold."""
    counts: dict[str, int] = {}
    for _, email, _, deleted in silver.values():
        if not deleted:
            domain = email.split("@", 1)[1]
            counts[domain] = counts.get(domain, 0) + 1
    return counts


def _gold_now(check: str, spark: Any, gold: Path, seed: int) -> dict[str, int]:
    """Gold as {domain: customers}; a row with 0 customers counts as absent, two rows of a domain are refused."""
    counts: dict[str, int] = {}
    for row in _read_rows(check, spark, gold, GOLD, "gold", f"keep gold's two columns: {GOLD}.", seed):
        if row["customers"] == 0:
            continue
        if row["domain"] in counts:
            raise CheckFailed(check, f"gold has two rows for the domain {row['domain']!r}.",
                              "MERGE into gold on domain (add to the row it has), never append.", seed=seed)
        counts[row["domain"]] = row["customers"]
    return counts


def _gold_variants(before: dict[str, int], feed: list[Any], done: int, last: int) -> dict[str, dict[str, int]]:
    """Gold after adding silver's change feed to ``before`` as three classic mistakes would:
    an update_preimage counted +1, the deleted flag ignored, the version gold had read read again."""
    def add(rows: list[Any], weight: Callable[[Any], int]) -> dict[str, int]:
        counts = dict(before)
        for row in rows:
            domain = row["email"].split("@", 1)[1] if row["email"] else None
            counts[domain] = counts.get(domain, 0) + weight(row)
        return {domain: n for domain, n in counts.items() if n != 0}

    def sign(row: Any) -> int:
        return 1 if row["_change_type"] in ("insert", "update_postimage") else -1

    new = [row for row in feed if done < row["_commit_version"] <= last]
    return {
        "preimage": add(new, lambda r: 0 if r["deleted"] else 1 if r["_change_type"] != "delete" else -1),
        "tombstones": add(new, sign),
        "again": add([row for row in feed if max(done, 0) <= row["_commit_version"] <= last],
                     lambda r: 0 if r["deleted"] else sign(r)),
    }


@dataclass
class _Stubs:
    """Silver data files that only hold versions gold has already counted, moved aside while the
    student's function runs and replaced by unreadable stand-ins of the same name (their hidden
    ``.crc`` twins moved aside too, so that the stand-in is read, and refused, as Parquet)."""

    silver: Path
    aside: Path
    names: list[str]

    def _pairs(self) -> list[tuple[Path, Path]]:
        pairs = []
        for index, name in enumerate(self.names):
            here = self.silver / name
            pairs.append((here, self.aside / f"{index}.parquet"))
            pairs.append((here.with_name(f".{here.name}.crc"), self.aside / f"{index}.parquet.crc"))
        return pairs

    def __enter__(self) -> "_Stubs":
        self.aside.mkdir(exist_ok=True)
        for here, away in self._pairs():
            if here.exists():
                os.replace(here, away)
        for name in self.names:
            (self.silver / name).write_bytes(b"not Parquet: this file holds silver versions gold has already counted\n")
        return self

    def __exit__(self, *exc: object) -> None:
        for here, away in self._pairs():
            here.unlink(missing_ok=True)
            if away.exists():
                os.replace(away, here)


def _counted_files(silver: Path, done: int) -> list[str]:
    """The live data files of silver that no commit after version ``done`` names: only versions gold
    has already counted hold them, and the change feed of later versions never reads them (a DELETE
    or MERGE with deletion vectors names the file it marks, and its change rows are read from it)."""
    log = read_log(silver)
    named: dict[str, int] = {}
    for version in log.versions:
        for action in log.actions(version):
            for kind in ("add", "remove"):
                if kind in action:
                    named[unquote(action[kind]["path"])] = version
    live = {unquote(add["path"]) for add in replay_log(silver).files.values()}
    return sorted(path for path in live if named[path] <= done)


def _call_gold(check: str, update_gold: Callable[[str, str], Any], silver: Path, gold: Path, folder: Path,
               when: str, seed: int) -> list[str]:
    """Call ``update_gold`` with silver's already counted files replaced by stand-ins; returns their names."""
    done = replay_log(gold).app_versions.get("gold", -1)
    stubbed = _counted_files(silver, done) if done >= 0 else []
    errors: list[str] = []

    def update_gold_watched(silver_path: str, gold_path: str) -> Any:
        try:
            return update_gold(silver_path, gold_path)
        except Exception as error:  # the whole text: which file a failed read named is deep in a JVM error
            errors.append(str(error))
            raise

    try:
        with _Stubs(silver, folder / "_aside", stubbed):
            call_student(check, update_gold_watched, "update_gold", str(silver), str(gold), read_only=[silver],
                         hint=f"it failed {when}. Read the change feed only when silver has versions gold has not seen "
                              "(replay_log(gold).app_versions.get('gold', -1) < latest_version(silver)).")
    except CheckFailed as failure:
        text = errors[0] if errors else str(failure)
        if stubbed and (any(Path(name).name in text for name in stubbed) or "FAILED_READ_FILE" in text
                        or "not a Parquet file" in text):
            raise CheckFailed(check, f"{when}, update_gold read a data file of silver holding only versions gold had "
                                     "already counted (the check made such files unreadable during the call).",
                              "keep gold from silver's change feed of the new versions (readChangeFeed, startingVersion "
                              "= the version after the one gold recorded): never all of silver.", seed=seed) from None
        raise
    return stubbed


@exercise_check
def check_update_gold(update_gold: Callable[[str, str], Any]) -> None:
    """Build silver step by step (change feed on); after some steps call ``update_gold`` and compare
    gold with silver's live rows (the recomputation the silver check holds the upsert to), and gold's
    txn with silver's version; once more when silver has nothing new."""
    check = "update_gold"
    spark = lab_spark()
    if not callable(update_gold):
        call_student(check, update_gold, "update_gold", hint="")
    seed = check_seed()
    rng = random.Random(seed)
    batches = _change_batches(rng)
    folder = fresh_dir("lab10_gold")
    silver, gold = folder / "silver", folder / "gold"
    spark.sql(f"CREATE TABLE delta.`{silver}` ({CUSTOMERS}) USING delta TBLPROPERTIES ('delta.enableChangeDataFeed' = "
              f"'true', 'delta.enableDeletionVectors' = '{str(rng.random() < 0.5).lower()}')")
    spark.sql(f"CREATE TABLE delta.`{gold}` ({GOLD}) USING delta")
    first = _silver_after(batches[:1])
    steady = min(c for c, row in first.items() if not row[3] and all(c != ch[1] for b in batches[1:] for ch in b))
    _bulk_load(spark, silver, {c: row for c, row in first.items() if c != steady}, rng.randint(2, 3))
    _bulk_load(spark, silver, {steady: first[steady]}, 1)  # a customer no later batch changes: a file never rewritten
    applied = batches[:1]  # the batches silver holds: what gold must count is _live_domains(_silver_after(applied))

    def merge(batch: list[Change]) -> None:
        _reference_upsert(spark, batch, silver)
        applied.append(batch)

    steps: list[Callable[[], Any]] = [lambda batch=batch: merge(batch) for batch in batches[1:]]
    for _ in range(rng.randint(0, 2)):
        steps.insert(rng.randint(0, len(steps)), lambda: spark.sql(
            f"ALTER TABLE delta.`{silver}` SET TBLPROPERTIES ('course.step' = '{rng.randint(1, 10**6)}')"))
    steps.append(lambda: spark.sql(f"DELETE FROM delta.`{silver}` WHERE deleted"))  # tombstones purged after retention
    found: dict[str, int] = {}  # gold as the check last read it
    if rng.random() < 0.5:  # gold starts from a backfill of silver at its current version
        found = _live_domains(first)
        (spark.createDataFrame(sorted(found.items()), GOLD).write.format("delta").mode("append")
         .option("txnAppId", "gold").option("txnVersion", latest_version(silver)).save(str(gold)))
    else:
        steps.insert(0, lambda: None)
    calls = 0
    for number, step in enumerate(steps):
        step()
        # Gold may skip a run (it then reads two steps' versions at once), but not the first (so that later runs
        # have versions already counted) nor the ones before and after the purge (tombstones seen, then purged).
        if 0 < number < len(steps) - 2 and rng.random() < 0.4:
            continue
        if latest_version(gold) == replay_log(gold).app_versions.get("gold", -1):
            spark.sql(f"ALTER TABLE delta.`{gold}` SET TBLPROPERTIES ('course.owner' = 'gold-{number}')")
        before, done, last = found, replay_log(gold).app_versions.get("gold", -1), latest_version(silver)
        when = f"on its run {calls + 1}"
        _call_gold(check, update_gold, silver, gold, folder, when, seed)
        calls += 1
        found, expected = _gold_now(check, spark, gold, seed), _live_domains(_silver_after(applied))
        if found != expected:
            feed = (spark.read.format("delta").option("readChangeFeed", "true")
                    .option("startingVersion", max(done, 0)).option("endingVersion", last).load(str(silver)).collect())
            mistakes = {variant: counts for variant, counts in _gold_variants(before, feed, done, last).items()
                        if counts == found}
            if "preimage" in mistakes:
                raise CheckFailed(check, f"{when}, gold is {found}: every update was counted twice.",
                                  "an update_preimage row is the customer BEFORE the change: -1 for its old domain, like "
                                  "a delete; only insert and update_postimage count +1.", seed=seed)
            if "tombstones" in mistakes:
                raise CheckFailed(check, f"{when}, gold is {found}: tombstones (deleted = true) were counted as customers.",
                                  "a change-feed row of a tombstone counts 0, whatever its _change_type: a soft delete is "
                                  "an update to deleted = true, a purge a delete of a tombstone.", seed=seed)
            if "again" in mistakes:
                raise CheckFailed(check, f"{when}, gold is {found}: the silver version gold had already added was added "
                                         "again.",
                                  "read the change feed from the version AFTER the one gold recorded "
                                  "(startingVersion = done + 1).", seed=seed)
            raise CheckFailed(check, f"{when}, gold is {found}, which is not silver's live customers (deleted = false) "
                                     "per email domain.",
                              "start after the silver version gold recorded in its txn (not gold's own version), read up "
                              "to silver's latest; +1 for insert and update_postimage, -1 for delete and update_preimage, "
                              "0 for a tombstone.", seed=seed)
        held = replay_log(gold).app_versions
        if held != {"gold": last}:
            raise CheckFailed(check, f"{when}, gold's commits are labelled {held or 'with no txn'}; gold must record the "
                                     "last silver version it read, as the txn version of the appId 'gold'.",
                              "MERGE into gold inside st.idempotent_writes(spark, 'gold', <silver's version you read up "
                              "to>): not gold's own version, not a count of runs.", seed=seed)
    version = latest_version(gold)
    _call_gold(check, update_gold, silver, gold, folder, "on a run when silver had nothing new", seed)
    again = _gold_now(check, spark, gold, seed)
    if again != found or latest_version(gold) != version:
        raise CheckFailed(check, f"called again with nothing new in silver, update_gold changed gold (now {again}, "
                                 f"version {latest_version(gold)}).",
                          "start after the last silver version gold holds (replay_log(gold).app_versions), and do "
                          "nothing when that is silver's latest version.", seed=seed)
    passed(check, f"gold equals customers per domain of silver's live rows after each of {calls} runs over a generated "
                  "silver (late changes, tombstones, a purge), read from the change feed of new versions only, and "
                  "nothing changes when silver has nothing new.")
