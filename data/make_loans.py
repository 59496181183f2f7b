"""Write data/loans_by_state.csv: a small synthetic "loans by state" table for notebook 06.

The 2019 Delta Lake article on schema enforcement and evolution uses a table of loan counts
per US state (``addr_state``, ``count``). This script makes a table of the same shape from a
seeded random generator, so it holds no real data about anyone, and the same seed always gives
the same file byte for byte (a test checks that the committed file is what this script writes).

    python data/make_loans.py            # rewrites data/loans_by_state.csv
    python data/make_loans.py --seed 7   # another draw, same shape
"""

from __future__ import annotations

import argparse
import csv
import io
import random
from pathlib import Path

# The 50 states and the District of Columbia, by their two-letter postal codes.
STATES = (
    "AK AL AR AZ CA CO CT DC DE FL GA HI IA ID IL IN KS KY LA MA MD ME MI MN MO MS MT NC ND NE "
    "NH NJ NM NV NY OH OK OR PA RI SC SD TN TX UT VA VT WA WI WV WY"
).split()
DEFAULT_SEED = 2019
OUTPUT = Path(__file__).resolve().parent / "loans_by_state.csv"


def loans_by_state(seed: int = DEFAULT_SEED) -> list[tuple[str, int]]:
    """One (state, number of loans) row per state; counts are log-normal, between 50 and 50,000."""
    rng = random.Random(seed)
    return [(state, min(50_000, max(50, round(rng.lognormvariate(7.5, 1.0))))) for state in STATES]


def to_csv(rows: list[tuple[str, int]]) -> str:
    """The rows as CSV text with a header line and Unix line endings."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["addr_state", "count"])
    writer.writerows(rows)
    return buffer.getvalue()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help=f"random seed (default {DEFAULT_SEED})")
    parser.add_argument("--output", type=Path, default=OUTPUT, help=f"where to write (default {OUTPUT.name} next to this script)")
    args = parser.parse_args()
    args.output.write_text(to_csv(loans_by_state(args.seed)))
    print(f"wrote {len(STATES)} states to {args.output}")


if __name__ == "__main__":
    main()
