"""Lab 10 (medallion pipeline): the silver upsert of change records, and gold kept from silver's change feed.

Both checks feed the student's function several batches of change records with the problems a
real feed has (a line sent twice, a customer changed twice in one batch, a late change, a delete
of a customer nobody knows, a line sent again) and compare the table after every batch with a
recomputation in plain Python. The gold check builds silver itself, with the Change Data Feed
on, so that a wrong silver cannot hide a right gold; it also calls the student's function again
when silver has nothing new, which is where reading the same change-feed range twice shows.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from deltalab.errors import spark_failure
from deltalab.labs.harness import CheckFailed, call_student, fresh_dir, lab_spark, passed
from deltalab.log import latest_version, replay_log

__all__ = ["CHANGES", "CUSTOMERS", "EXAMPLE_BATCH", "CheckFailed", "check_update_gold", "check_upsert_changes"]

#: The change records both exercises receive: already parsed and valid (notebook 10's silver split).
CHANGES = "op STRING, customer_id BIGINT, name STRING, email STRING, updated_at BIGINT"
#: The silver table: one row per customer.
CUSTOMERS = "customer_id BIGINT, name STRING, email STRING, updated_at BIGINT"

Change = tuple[str, int, str | None, str | None, int]

#: Three batches. Batch 0 sends one line twice; batch 1 changes customer 1 twice (the later wins),
#: deletes customer 2; batch 2 brings a late change of customer 3 (older than batch 1's), deletes a
#: customer who never existed, and sends batch 1's delete of customer 2 again.
_BATCHES: list[list[Change]] = [
    [("insert", 1, "Ann", "ann@alpha.example", 1), ("insert", 2, "Bob", "bob@beta.example", 1),
     ("insert", 3, "Cy", "cy@alpha.example", 1), ("insert", 1, "Ann", "ann@alpha.example", 1)],
    [("update", 1, "Ann", "ann@beta.example", 5), ("update", 1, "Ann", "ann@gamma.example", 6),
     ("delete", 2, None, None, 5), ("insert", 4, "Dee", "dee@alpha.example", 5), ("update", 3, "Cy", "cy@gamma.example", 7)],
    [("update", 3, "Cy", "cy@beta.example", 6), ("insert", 5, "Eve", "eve@alpha.example", 8),
     ("delete", 6, None, None, 8), ("update", 4, "Dee", "dee@gamma.example", 9), ("delete", 2, None, None, 5)],
]

#: The second batch, for the lab's first look.
EXAMPLE_BATCH = _BATCHES[1]


def _silver_after(batches: list[list[Change]]) -> dict[int, tuple[str, str, int]]:
    """What silver holds after ``batches``: the latest change per customer wins, a delete removes."""
    latest: dict[int, Change] = {}
    for change in (change for batch in batches for change in batch):
        if change[1] not in latest or change[4] > latest[change[1]][4]:
            latest[change[1]] = change
    return {c[1]: (c[2], c[3], c[4]) for c in latest.values() if c[0] != "delete"}


def _rows(spark: Any, path: Path) -> list[Any]:
    return spark.read.format("delta").load(str(path)).collect()


# --------------------------------------------------------------------------------------------
# Exercise 1: upsert_changes(changes, target)
# --------------------------------------------------------------------------------------------


def _call_upsert(check: str, upsert: Callable[[Any, str], Any], spark: Any, batch: list[Change], number: int, target: Path) -> None:
    try:
        call_student(check, upsert, "upsert_changes", spark.createDataFrame(batch, CHANGES), str(target),
                     hint="run your function on one batch first: spark.createDataFrame(rows, CHANGES) and a table of your own.")
    except CheckFailed as failure:
        if "DELTA_MULTIPLE_SOURCE_ROW_MATCHING_TARGET_ROW_IN_MERGE" in str(failure):
            raise CheckFailed(check, f"the MERGE of batch {number} failed: two of its rows are changes of the same customer, and "
                                     "both matched one row of the table.",
                              "keep one change per customer_id before the MERGE: the one with the largest updated_at "
                              "(row_number() over a window partitioned by customer_id, ordered by updated_at descending).") from None
        raise


def _diagnose_upsert(check: str, number: int, found: dict[int, list[tuple[str, str, int]]],
                     expected: dict[int, tuple[str, str, int]]) -> None:
    """Raise the message that names the mistake behind the first difference, if any."""
    batch = _BATCHES[number]
    for customer, rows in found.items():
        if len(rows) > 1:
            raise CheckFailed(check, f"after batch {number} the table has {len(rows)} rows for customer {customer}: the batch "
                                     "had more than one change of that customer, and each was inserted.",
                              "keep one change per customer_id before the MERGE (the one with the largest updated_at), "
                              "and MERGE on customer_id.")
    deleted_in_batch = {c[1] for c in batch if c[0] == "delete"}
    for customer in found:
        if customer not in expected:
            if found[customer][0][1] is None:
                raise CheckFailed(check, f"after batch {number} customer {customer} is in the table with no email: a delete "
                                         "of a customer the table did not have was inserted.",
                                  "insert only when the change is not a delete: whenNotMatchedInsert(condition=\"s.op <> 'delete'\", ...).")
            if customer in deleted_in_batch:
                raise CheckFailed(check, f"after batch {number} customer {customer} is still in the table, but batch {number} "
                                         "deletes it.",
                                  "add whenMatchedDelete(condition=\"s.op = 'delete' AND s.updated_at > t.updated_at\").")
            raise CheckFailed(check, f"after batch {number} customer {customer} is in the table, and it should not be.",
                              "a delete removes the customer; nothing else may bring it back unless it is later.")
    for customer, (name, email, updated_at) in expected.items():
        if customer not in found:
            raise CheckFailed(check, f"after batch {number} customer {customer} is missing.",
                              "insert the customers the table does not have yet: whenNotMatchedInsert(...).")
        got = found[customer][0]
        if got == (name, email, updated_at):
            continue
        in_batch = [(c[2], c[3], c[4]) for c in batch if c[1] == customer]
        if got in in_batch and len(in_batch) > 1 and got[2] < updated_at:
            raise CheckFailed(check, f"after batch {number} customer {customer} has {got[1]} (updated_at {got[2]}), but the "
                                     f"batch's latest change of that customer says {email} (updated_at {updated_at}).",
                              "of two changes of one customer in a batch, keep the one with the LARGEST updated_at.")
        if got in in_batch and got[2] < updated_at:
            raise CheckFailed(check, f"after batch {number} customer {customer} has {got[1]} (updated_at {got[2]}): a late change, "
                                     f"older than what the table had ({email}, updated_at {updated_at}), overwrote it.",
                              "a late change must lose: update (and delete) only when s.updated_at > t.updated_at.")
        raise CheckFailed(check, f"after batch {number} customer {customer} has {got[1]} (updated_at {got[2]}), not "
                                 f"{email} (updated_at {updated_at}).",
                          "update a matched customer with the values of its latest change: whenMatchedUpdate(...).")


def check_upsert_changes(upsert_changes: Callable[[Any, str], Any]) -> None:
    """Run ``upsert_changes(changes, target)`` over three batches; compare silver after each with a recomputation."""
    check = "upsert_changes"
    spark = lab_spark()
    if not callable(upsert_changes):
        call_student(check, upsert_changes, "upsert_changes", hint="")
    target = fresh_dir("lab10_upsert") / "silver"
    spark.createDataFrame([], CUSTOMERS).write.format("delta").save(str(target))
    for number, batch in enumerate(_BATCHES):
        _call_upsert(check, upsert_changes, spark, batch, number, target)
        found: dict[int, list[tuple[str, str, int]]] = {}
        try:
            for row in _rows(spark, target):
                found.setdefault(row["customer_id"], []).append((row["name"], row["email"], row["updated_at"]))
        except Exception as error:  # noqa: BLE001 - e.g. a column the student's MERGE removed
            raise CheckFailed(check, f"after batch {number} the table cannot be read as customers: "
                                     f"{spark_failure(error).message.splitlines()[0][:200]}",
                              f"write only the columns of the target ({CUSTOMERS}).") from None
        _diagnose_upsert(check, number, found, _silver_after(_BATCHES[: number + 1]))
    passed(check, f"silver equals the recomputation after each of {len(_BATCHES)} batches (a duplicate line, two changes "
                  "in one batch, a late change, deletes, a delete of nobody, a line sent again).")


# --------------------------------------------------------------------------------------------
# Exercise 2: update_gold(silver_path, gold_path): customers per email domain, from the change feed
# --------------------------------------------------------------------------------------------


def _reference_upsert(spark: Any, batch: list[Change], silver: Path) -> None:
    """The check's own silver upsert (the rule _silver_after computes), independent of exercise 1."""
    from delta.tables import DeltaTable
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    changes = spark.createDataFrame(batch, CHANGES)
    newest_first = Window.partitionBy("customer_id").orderBy(F.col("updated_at").desc())
    latest = changes.withColumn("rank", F.row_number().over(newest_first)).filter("rank = 1").drop("rank")
    columns = {c: f"s.{c}" for c in ("customer_id", "name", "email", "updated_at")}
    (DeltaTable.forPath(spark, str(silver)).alias("t").merge(latest.alias("s"), "t.customer_id = s.customer_id")
     .whenMatchedDelete(condition="s.op = 'delete' AND s.updated_at > t.updated_at")
     .whenMatchedUpdate(condition="s.op <> 'delete' AND s.updated_at > t.updated_at", set=columns)
     .whenNotMatchedInsert(condition="s.op <> 'delete'", values=columns).execute())


def _domains(customers: dict[int, tuple[str, str, int]]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for _, email, _ in customers.values():
        domain = email.split("@", 1)[1]
        counts[domain] = counts.get(domain, 0) + 1
    return counts


def _preimages_counted(spark: Any, silver: Path) -> dict[str, int]:
    """Gold as the classic mistake computes it: every change row +1 except deletes, preimages included."""
    from pyspark.sql import functions as F

    changes = (spark.read.format("delta").option("readChangeFeed", "true").option("startingVersion", 0).load(str(silver))
               .withColumn("domain", F.split("email", "@").getItem(1)))
    sums = changes.groupBy("domain").agg(F.sum(F.when(F.col("_change_type") == "delete", -1).otherwise(1)).alias("n")).collect()
    return {r["domain"]: r["n"] for r in sums if r["n"]}


def _gold_now(check: str, spark: Any, gold: Path) -> dict[str, int]:
    try:
        rows = _rows(spark, gold)
        return {r["domain"]: r["customers"] for r in rows if r["customers"]}
    except Exception as error:  # noqa: BLE001 - a gold table of another shape
        raise CheckFailed(check, f"gold cannot be read as (domain, customers): {spark_failure(error).message.splitlines()[0][:200]}",
                          "keep gold's two columns: domain STRING, customers BIGINT.") from None


def _call_gold(check: str, update_gold: Callable[[str, str], Any], silver: Path, gold: Path, when: str) -> None:
    call_student(check, update_gold, "update_gold", str(silver), str(gold),
                 hint=f"it failed {when}. Read the change feed only when silver has versions gold has not seen "
                      "(replay_log(gold).app_versions.get('gold', -1) < latest_version(silver)).")


def check_update_gold(update_gold: Callable[[str, str], Any]) -> None:
    """Build silver batch by batch (change feed on); after each, ``update_gold``; then once more with nothing new."""
    check = "update_gold"
    spark = lab_spark()
    if not callable(update_gold):
        call_student(check, update_gold, "update_gold", hint="")
    folder = fresh_dir("lab10_gold")
    silver, gold = folder / "silver", folder / "gold"
    spark.sql(f"CREATE TABLE delta.`{silver}` ({CUSTOMERS}) USING delta TBLPROPERTIES ('delta.enableChangeDataFeed' = 'true')")
    spark.createDataFrame([], "domain STRING, customers BIGINT").write.format("delta").save(str(gold))
    for number in range(len(_BATCHES)):
        _reference_upsert(spark, _BATCHES[number], silver)
        _call_gold(check, update_gold, silver, gold, f"after silver's batch {number}")
        found, expected = _gold_now(check, spark, gold), _domains(_silver_after(_BATCHES[: number + 1]))
        if found != expected:
            if number > 0 and found == _preimages_counted(spark, silver):
                raise CheckFailed(check, f"after batch {number} gold is {found}, but silver has {expected}: every update was "
                                         "counted twice.",
                                  "an update_preimage row is the customer BEFORE the change: -1 for its old domain, like a "
                                  "delete; only insert and update_postimage count +1.")
            raise CheckFailed(check, f"after silver's batch {number} gold is {found}, but silver has {expected} customers per domain.",
                              "read the change feed from the version after the last one gold has seen, up to silver's "
                              "latest; +1 for insert and update_postimage, -1 for delete and update_preimage.")
        held = replay_log(gold).app_versions
        if held != {"gold": latest_version(silver)}:
            raise CheckFailed(check, f"gold's commits are labelled {held or 'with no txn'}; after reading silver up to version "
                                     f"{latest_version(silver)} gold should hold {{'gold': {latest_version(silver)}}}.",
                              "MERGE into gold inside st.idempotent_writes(spark, 'gold', last_silver_version_read).")
    version = latest_version(gold)
    _call_gold(check, update_gold, silver, gold, "when silver had nothing new")
    again = _gold_now(check, spark, gold)
    if again != _domains(_silver_after(_BATCHES)) or latest_version(gold) != version:
        raise CheckFailed(check, f"called again with nothing new in silver, update_gold changed gold (now {again}): it read "
                                 "change-feed versions it had already added.",
                          "start after the last silver version gold holds (replay_log(gold).app_versions), and do nothing "
                          "when that is silver's latest version.")
    passed(check, f"gold equals customers per domain in silver after each of {len(_BATCHES)} batches, read from the change "
                  "feed once, and nothing changes when silver has nothing new.")
