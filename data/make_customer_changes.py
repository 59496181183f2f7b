"""Write data/customer_changes_<n>.jsonl: three batches of customer change records for notebook 10.

An operational database exports its changes (change data capture) as JSON lines, one file per
batch: ``op`` (insert, update or delete), ``customer_id``, ``name``, ``email``, ``country`` and
``updated_at`` (when the change happened at the source). Like a real feed, the files are not
clean, and each problem is there on purpose, for the pipeline of notebook 10 to handle:

* batch 0: the first customers; one line sent twice (a duplicate), one line cut short (not JSON);
* batch 1: updates (some move a customer to another country), deletes, new customers, one
  customer updated twice in the same batch (the later change must win), an update with no
  ``customer_id`` and a new customer whose email has no ``@`` (both malformed);
* batch 2: a *late* update (its ``updated_at`` is older than a change batch 1 already applied:
  it must not win), a line of batch 1 sent again, an operation the pipeline does not know, more
  of everything else, and the two late changes a delete makes hard: a late update of the customer
  batch 1 deleted (older than the delete: the customer must stay deleted) and a late delete of a
  customer batch 1 updated (older than the update: the customer must stay).

Names are drawn from a seeded generator; the same seed always gives the same files byte for byte
(a test checks that the committed files are what this script writes).

    python data/make_customer_changes.py            # rewrites data/customer_changes_0..2.jsonl
    python data/make_customer_changes.py --seed 7   # other names and countries, same scenario
"""

from __future__ import annotations

import argparse
import json
import random
from datetime import datetime, timedelta, timezone
from pathlib import Path

DEFAULT_SEED = 2021
FOLDER = Path(__file__).resolve().parent
BATCHES = 3
FIRST_CUSTOMERS = 12
FIRST_NAMES = ("Ada", "Bo", "Chen", "Dara", "Emil", "Farah", "Goran", "Hana", "Ines", "Jonas", "Kofi", "Lena",
               "Mateo", "Nora", "Omar", "Priya", "Quinn", "Rosa", "Sven", "Tariq")
LAST_NAMES = ("Alvarez", "Becker", "Costa", "Dubois", "Eriksen", "Fischer", "Garcia", "Haddad", "Ivanova", "Jensen")
COUNTRIES = ("DE", "FR", "NL", "PT", "SE")
START = datetime(2021, 5, 3, 8, 0, tzinfo=timezone.utc)


def _when(minutes: int) -> str:
    return (START + timedelta(minutes=minutes)).strftime("%Y-%m-%dT%H:%M:%SZ")


class _Customers:
    """The source database's customers, changed one record at a time, each change a JSON line."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.rows: dict[int, dict[str, object]] = {}
        self.clock = 0

    def _tick(self) -> int:
        self.clock += self.rng.randrange(1, 30)
        return self.clock

    def insert(self, customer_id: int, email: str | None = None) -> str:
        first, last = self.rng.choice(FIRST_NAMES), self.rng.choice(LAST_NAMES)
        row = {"customer_id": customer_id, "name": f"{first} {last}",
               "email": email or f"{first.lower()}.{last.lower()}{customer_id}@example.com",
               "country": self.rng.choice(COUNTRIES)}
        if "@" in str(row["email"]):
            self.rows[customer_id] = row
        return self._line("insert", row, self._tick())

    def update(self, customer_id: int, move: bool = False, at: int | None = None) -> str:
        row = dict(self.rows[customer_id])
        if move:
            row["country"] = self.rng.choice([c for c in COUNTRIES if c != row["country"]])
        else:
            row["email"] = f"{str(row['name']).split()[0].lower()}{self.rng.randrange(100, 999)}@example.com"
        if at is None:
            self.rows[customer_id] = row
        return self._line("update", row, self._tick() if at is None else at)

    def delete(self, customer_id: int) -> str:
        self.rows.pop(customer_id)
        return self._line("delete", {"customer_id": customer_id, "name": None, "email": None, "country": None}, self._tick())

    @staticmethod
    def _line(op: str, row: dict[str, object], minutes: int) -> str:
        return json.dumps({"op": op, **row, "updated_at": _when(minutes)})


def _another_country(row: dict[str, object]) -> str:
    """The first country that is not the row's (no draw from the generator: the other lines stay as they were)."""
    return next(c for c in COUNTRIES if c != row["country"])


def customer_changes(seed: int = DEFAULT_SEED) -> list[list[str]]:
    """The three batches of change records, as JSON lines (a few of them malformed on purpose)."""
    source = _Customers(random.Random(seed))
    batch0 = [source.insert(customer_id) for customer_id in range(1, FIRST_CUSTOMERS + 1)]
    batch0.insert(5, batch0[4])                                   # the same line sent twice
    batch0.append(source.insert(FIRST_CUSTOMERS + 1)[:40])        # cut short: not JSON
    source.rows.pop(FIRST_CUSTOMERS + 1)

    before_batch1 = source.clock
    deleted_in_batch1 = dict(source.rows[5])
    batch1 = [source.update(2, move=True), source.update(3), source.update(4, move=True), source.delete(5),
              source.insert(14), source.insert(15), source.update(6), source.update(6, move=True),
              source.insert(16, email="no-at-sign.example.com"), source.update(7)]
    batch1.insert(3, json.dumps({**json.loads(batch1[1]), "customer_id": None}))   # an update with no customer_id

    batch2 = [source.update(3, at=before_batch1 + 1),            # late: older than batch 1's update of 3
              batch1[0],                                         # batch 1's first line again
              source.update(8, move=True), source.delete(9), source.insert(17), source.update(14, move=True),
              json.dumps({**json.loads(source.update(10)), "op": "upsert"}),   # an operation nobody knows
              _Customers._line("update", {**deleted_in_batch1, "country": _another_country(deleted_in_batch1)},
                               before_batch1 + 2),                # late update of 5: older than its delete
              _Customers._line("delete", {"customer_id": 7, "name": None, "email": None, "country": None},
                               before_batch1 + 3)]                # late delete of 7: older than its update
    return [batch0, batch1, batch2]


def output_path(batch: int, folder: Path = FOLDER) -> Path:
    return folder / f"customer_changes_{batch}.jsonl"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help=f"random seed (default {DEFAULT_SEED})")
    parser.add_argument("--output", type=Path, default=FOLDER, help="folder to write the three files to (default: next to this script)")
    args = parser.parse_args()
    for batch, lines in enumerate(customer_changes(args.seed)):
        output_path(batch, args.output).write_text("".join(line + "\n" for line in lines))
    print(f"wrote {BATCHES} batches of customer changes to {args.output}")


if __name__ == "__main__":
    main()
