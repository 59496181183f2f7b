"""Write data/s3_access_logs.log: synthetic Amazon S3 server access log lines for notebook 09.

S3 delivers a bucket's access log as many small text objects, one request a line, fields
separated by spaces, the time in brackets and the request, referrer and user agent in quotes
(the format of AWS's "Amazon S3 server access log format" page). Zalando's 2019 article
*Scalable near real-time S3 access logging analytics with Apache Spark and Delta Lake* parses such
objects into a Delta table partitioned by date and bucket, to learn which datasets are read the
most and how much of the reading is of new data rather than past data. This script makes lines
of that format from a seeded random generator: made-up buckets, each holding two datasets whose
keys start with the dataset and the day the object was written (a PUT writes that day's data; a
GET, HEAD or DELETE may touch data written up to 60 days before), addresses (documentation ranges 192.0.2.0/24, 198.51.100.0/24, 203.0.113.0/24) and ids (host ids
base64, as S3 writes them),
sorted by time over three days. The same seed always gives the same file byte for byte (a test
checks that the committed file is what this script writes).

    python data/make_s3_access_logs.py            # rewrites data/s3_access_logs.log
    python data/make_s3_access_logs.py --seed 7   # another draw, same shape
"""

from __future__ import annotations

import argparse
import base64
import random
from datetime import datetime, timedelta, timezone
from pathlib import Path

DEFAULT_SEED = 2020
DEFAULT_LINES = 300
OUTPUT = Path(__file__).resolve().parent / "s3_access_logs.log"
FIRST_DAY = datetime(2020, 3, 2, tzinfo=timezone.utc)
DAYS = 3

# each bucket and the datasets it holds (the first part of a key)
DATASETS = {"ads-creatives": ("images", "videos"), "brand-safety-reports": ("daily", "weekly"),
            "clickstream-raw": ("web", "app")}
BUCKETS = tuple(DATASETS)
SAME_DAY_SHARE = 0.6      # of the requests to existing objects, the share that touches data written that day
OLDEST_DAYS = 60          # the others touch data written 1 to OLDEST_DAYS days before
NETWORKS = ("192.0.2", "198.51.100", "203.0.113")
USER_AGENTS = ("aws-cli/2.0.4 Python/3.7.4 Linux/4.14.158", "aws-sdk-java/1.11.700 Linux/4.14.165",
               "Boto3/1.12.16 Python/3.7.6 Linux/4.19.76", "S3Console/0.4")
# operation, HTTP method, what it is done to, and its weight in the draw
OPERATIONS = (
    ("REST.GET.OBJECT", "GET", "object", 50),
    ("REST.PUT.OBJECT", "PUT", "object", 20),
    ("REST.HEAD.OBJECT", "HEAD", "object", 15),
    ("REST.GET.BUCKET", "GET", "bucket", 10),
    ("REST.DELETE.OBJECT", "DELETE", "object", 5),
)


def _hex(rng: random.Random, digits: int) -> str:
    return "".join(rng.choice("0123456789abcdef") for _ in range(digits))


def _status(rng: random.Random, method: str) -> tuple[str, str]:
    """(HTTP status, error code): mostly successes, some missing keys and denied requests."""
    draw = rng.random()
    if draw < 0.06:
        return "403", "AccessDenied"
    if draw < 0.12 and method in ("GET", "HEAD"):
        return "404", "NoSuchKey"
    return ("204" if method == "DELETE" else "200"), "-"


def access_log_line(rng: random.Random, when: datetime, owner: str) -> str:
    """One request in S3's server access log format (26 fields)."""
    bucket = rng.choice(BUCKETS)
    operation, method, target, _ = rng.choices(OPERATIONS, weights=[o[3] for o in OPERATIONS])[0]
    dataset = rng.choice(DATASETS[bucket])
    age = 0 if method == "PUT" or rng.random() < SAME_DAY_SHARE else rng.randint(1, OLDEST_DAYS)
    written = when - timedelta(days=age)
    key = f"{dataset}/{written:%Y/%m/%d}/part-{rng.randrange(1000):04d}.json" if target == "object" else "-"
    uri = f"/{bucket}/{key}" if target == "object" else f"/{bucket}?list-type=2&prefix={dataset}/{when:%Y/%m/}"
    status, error = _status(rng, method)
    size = rng.randrange(200, 2_000_000)
    if method == "GET" and status == "200":
        sent = str(size)                                   # the object or the listing
    elif error != "-" and method != "HEAD":
        sent = str(rng.randrange(200, 400))                # an XML error document; a HEAD answer has no body
    else:
        sent = "-"
    object_size = str(size) if target == "object" and status.startswith("2") else "-"
    total_ms = rng.randrange(3, 900)
    fields = [
        owner, bucket, f"[{when:%d/%b/%Y:%H:%M:%S} +0000]", f"{rng.choice(NETWORKS)}.{rng.randrange(1, 255)}",
        f"arn:aws:iam::123456789012:user/pipeline-{rng.randrange(1, 4)}", _hex(rng, 16).upper(), operation, key,
        f'"{method} {uri} HTTP/1.1"', status, error, sent, object_size, str(total_ms),
        str(max(1, total_ms - rng.randrange(0, 3))) if status.startswith("2") else "-", '"-"',
        f'"{rng.choice(USER_AGENTS)}"', "-", base64.b64encode(rng.randbytes(57)).decode(), "SigV4", "ECDHE-RSA-AES128-GCM-SHA256",
        "AuthHeader", f"{bucket}.s3.us-east-1.amazonaws.com", "TLSv1.2", "-", "-",
    ]
    return " ".join(fields)


def access_log_lines(seed: int = DEFAULT_SEED, lines: int = DEFAULT_LINES) -> list[str]:
    """``lines`` requests spread over ``DAYS`` days from ``FIRST_DAY``, in order of time."""
    rng = random.Random(seed)
    owner = _hex(rng, 64)
    seconds = sorted(rng.randrange(DAYS * 86_400) for _ in range(lines))
    return [access_log_line(rng, FIRST_DAY + timedelta(seconds=s), owner) for s in seconds]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help=f"random seed (default {DEFAULT_SEED})")
    parser.add_argument("--lines", type=int, default=DEFAULT_LINES, help=f"requests (default {DEFAULT_LINES})")
    parser.add_argument("--output", type=Path, default=OUTPUT, help=f"where to write (default {OUTPUT.name} next to this script)")
    args = parser.parse_args()
    args.output.write_text("".join(line + "\n" for line in access_log_lines(args.seed, args.lines)))
    print(f"wrote {args.lines} requests to {args.output}")


if __name__ == "__main__":
    main()
