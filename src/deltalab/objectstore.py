"""An S3- and DynamoDB-compatible server on loopback, for the lessons on object stores (notebook 11).

Delta's commit protocol rests on *put-if-absent*: creating ``_delta_log/N.json`` only if no other
writer created it first. Whether a store offers it, and how Delta gets it where the store does
not, is best seen on the wire. :func:`start_object_store` starts `moto <https://docs.getmoto.org>`_
(a Python emulation of the S3 and DynamoDB APIs) as a helper process on a free port of 127.0.0.1,
waits until it answers, and returns an :class:`ObjectStore`: its endpoint, the Spark settings that
point S3A at it, boto3 clients, and two tools of the lessons:

* a **request log**: every request the server answered (method, key, query, the ``If-None-Match``
  header, status, the DynamoDB operation), read with :meth:`ObjectStore.requests`;
* **held requests**: :meth:`ObjectStore.hold_requests` makes the server stop requests that match
  (say, the ``PUT`` of ``_delta_log/00000000000000000001.json``) before it handles them, until the
  kernel releases them one by one. Two writers in two processes can so be brought to exactly
  the interleaving a lesson needs, with no timing luck;
* **latency**: :meth:`ObjectStore.latency` makes every request wait a given time before the server
  handles it, as if the store were a round trip away (a cloud region is 10-100 ms from its
  clients), so that what latency does to commits can be measured on this machine.

No traffic leaves the machine: the server listens on 127.0.0.1 only and needs no network. It
runs under a guardian (:mod:`deltalab.processes`), so it ends with the kernel that started it.

One fix is applied to moto in the server process: moto 5.2.5 stores a ``BOOL`` written by
``UpdateItem``'s ``AttributeUpdates`` as the string ``"True"`` (``moto/dynamodb/models/dynamo_type.py``,
``update_with_attribute_updates``); Delta's DynamoDB commit coordinator writes ``hasAcceptedCommits``
that way and reads it back with ``getBOOL()``. :func:`_store_bools_as_bools` keeps such values
``BOOL``, as DynamoDB does (a unit test checks that moto still needs it).
"""

from __future__ import annotations

import json
import os
import re
import sys
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator
from urllib.parse import unquote

from deltalab.drivers import DriverCallError, PendingCall
from deltalab.errors import DeltaLabError
from deltalab.holds import Hold, cancel_reached, hold_gate
from deltalab.processes import end_process, start_owned, wait_until
from deltalab.publish import write_atomically

__all__ = ["ACCESS_KEY", "REGION", "SECRET_KEY", "ObjectStore", "Request", "RequestRace", "append_with_delta_rs",
           "delta_rs_options", "race_at_requests", "start_object_store"]

#: The credentials and region every client of the local server uses (moto accepts any).
ACCESS_KEY = "deltalab"
SECRET_KEY = "deltalab-secret"
REGION = "us-east-1"

#: How long the kernel waits for the server to answer (a loaded two-core machine is slow to import moto).
START_TIMEOUT_SECONDS = 120.0

SERVER_MAIN = "import sys; from deltalab.objectstore import serve; sys.exit(serve(sys.argv[1]))"
_READY, _LOG, _REQUESTS, _HOLDS, _LATENCY = "ready.json", "server.log", "requests.jsonl", "holds", "latency.json"
#: The longest latency :meth:`ObjectStore.latency` accepts, in seconds.
MAX_LATENCY_SECONDS = 2.0
#: The error code a cancelled (or never released) held request is answered with.
HOLD_CANCELLED = "DeltaLabHoldCancelled"


# --------------------------------------------------------------------------------------------
# The server process
# --------------------------------------------------------------------------------------------


def _store_bools_as_bools() -> None:
    """Make moto keep a ``BOOL`` written by ``UpdateItem``'s legacy ``AttributeUpdates`` (PUT) a BOOL."""
    from moto.dynamodb.models.dynamo_type import DynamoType, Item

    original = Item.update_with_attribute_updates
    if getattr(original, "_deltalab_fixed", False):
        return

    def update_with_attribute_updates(self, attribute_updates: dict[str, Any]) -> None:
        bools = {name: update for name, update in attribute_updates.items()
                 if update.get("Action", "PUT") == "PUT" and set(update.get("Value", {})) == {"BOOL"}}
        original(self, {name: update for name, update in attribute_updates.items() if name not in bools})
        for name, update in bools.items():
            self.attrs[name] = DynamoType({"BOOL": update["Value"]["BOOL"]})

    update_with_attribute_updates._deltalab_fixed = True  # type: ignore[attr-defined]
    Item.update_with_attribute_updates = update_with_attribute_updates


class _Holds:
    """The server's side of held requests: rules read from ``holds/*.json``, one hold per match."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.matched: dict[str, int] = {}
        self.lock = threading.Lock()

    def hold_for(self, method: str, key: str, operation: str | None) -> str | None:
        """The hold path this request must stop at, or None."""
        with self.lock:
            for rule_file in sorted(self.directory.glob("*.json")):
                rule = json.loads(rule_file.read_text())
                name = rule_file.stem
                if (rule["method"] == method and re.search(rule["key_pattern"], key)
                        and rule.get("operation") in (None, operation)):
                    index = self.matched.get(name, 0)
                    if index < rule["count"]:
                        self.matched[name] = index + 1
                        return str(self.directory / f"{name}-{index}")
        return None


def _latency_seconds(path: Path) -> float:
    """The latency every request waits before it is handled: ``latency.json``'s, or 0 without it."""
    try:
        return float(json.loads(path.read_text())["seconds"])
    except FileNotFoundError:
        return 0.0


def _refusal(start_response, operation: str | None, message: str) -> list[bytes]:
    """A 400 answer in the service's own error format (DynamoDB: JSON, S3: XML)."""
    if operation:
        body = json.dumps({"__type": HOLD_CANCELLED, "message": message}).encode()
        content_type = "application/x-amz-json-1.0"
    else:
        body = f"<Error><Code>{HOLD_CANCELLED}</Code><Message>{message}</Message></Error>".encode()
        content_type = "application/xml"
    start_response("400 Bad Request", [("Content-Type", content_type), ("Content-Length", str(len(body)))])
    return [body]


def _error_code(body: bytes) -> str | None:
    """The error code of an S3 (``<Code>``) or DynamoDB (``__type``) error answer."""
    found = re.search(rb"<Code>([^<]+)</Code>", body) or re.search(rb'"__type"\s*:\s*"(?:[^"#]*#)?([^"]+)"', body)
    return found.group(1).decode() if found else None


def _application(directory: Path):
    """moto's WSGI application, wrapped to log every request and to stop the held ones."""
    from moto.server import DomainDispatcherApplication, create_backend_app

    moto_app = DomainDispatcherApplication(create_backend_app)
    holds = _Holds(directory / _HOLDS)
    log_lock = threading.Lock()
    log_file = open(directory / _REQUESTS, "a", buffering=1)

    def log(entry: dict[str, Any]) -> None:
        with log_lock:
            log_file.write(json.dumps(entry) + "\n")

    def application(environ, start_response):
        method = environ["REQUEST_METHOD"]
        key = environ.get("PATH_INFO", "")  # werkzeug has decoded it already
        query = unquote(environ.get("QUERY_STRING", ""))
        operation = (environ.get("HTTP_X_AMZ_TARGET") or "").split(".")[-1] or None  # DynamoDB's
        held = holds.hold_for(method, key, operation)
        latency = _latency_seconds(directory / _LATENCY)
        entry = {"method": method, "key": key, "query": query, "if_none_match": environ.get("HTTP_IF_NONE_MATCH"),
                 "operation": operation, "held": held and Path(held).name, "listed": None, "latency": latency}
        if held is not None:
            try:
                hold_gate(held)()
            except (RuntimeError, TimeoutError) as cancelled:
                # A cancelled hold answers with an error clients do not retry (4xx), so nothing behind it commits.
                log({**entry, "status": 400, "error": HOLD_CANCELLED})
                return _refusal(start_response, operation, f"{HOLD_CANCELLED}: {cancelled}")
        if latency:
            time.sleep(latency)                     # the round trip of a store farther away
        answer: dict[str, str] = {}

        def recording_start_response(status, headers, exc_info=None):
            answer["status"] = status
            return start_response(status, headers, exc_info)

        body = list(moto_app(environ, recording_start_response))
        if method == "GET" and "list-type=2" in query:
            entry["listed"] = sum(chunk.count(b"<Key>") for chunk in body)
        status = answer.get("status", "000")
        log({**entry, "status": int(status[:3]), "error": _error_code(b"".join(body)) if status[0] in "45" else None})
        return body

    return application


def serve(directory: str | os.PathLike[str]) -> int:
    """Run the server (the helper process's main): listen on a free port of 127.0.0.1, write
    ``ready.json`` with the port, answer until killed."""
    from moto.server import MotoRequestHandler
    from werkzeug.serving import make_server

    directory = Path(directory)
    (directory / _HOLDS).mkdir(parents=True, exist_ok=True)
    _store_bools_as_bools()
    server = make_server("127.0.0.1", 0, _application(directory), threaded=True, request_handler=MotoRequestHandler)
    ready = directory / _READY
    write_atomically(ready, json.dumps({"port": server.server_port, "pid": os.getpid()}))
    server.serve_forever()
    return 0


# --------------------------------------------------------------------------------------------
# The kernel's side
# --------------------------------------------------------------------------------------------


@dataclass
class Request:
    """One request the server answered (a row of the request log)."""

    method: str
    key: str
    query: str
    if_none_match: str | None
    status: int
    operation: str | None
    held: str | None
    listed: int | None  # keys a LIST answer returned
    error: str | None  # the error code of a refused request (PreconditionFailed, ConditionalCheckFailedException)
    latency: float = 0.0  # the seconds it waited before it was handled (ObjectStore.latency)

    @property
    def is_list(self) -> bool:
        """True for an S3 LIST (``GET`` on a bucket with ``list-type=2``)."""
        return self.method == "GET" and "list-type=2" in self.query


class ObjectStore:
    """The running server: where it listens, how to reach it, what it was asked."""

    def __init__(self, directory: Path, process, port: int) -> None:
        self.directory = directory
        self.process = process
        self.port = port
        self._holds = 0

    def __repr__(self) -> str:
        return f"ObjectStore({self.endpoint})"

    @property
    def endpoint(self) -> str:
        """The server's URL, e.g. ``http://127.0.0.1:40123``."""
        return f"http://127.0.0.1:{self.port}"

    def spark_conf(self) -> dict[str, str]:
        """S3A settings for a Spark session (``get_spark(..., jar_sets=("delta", "s3"), **conf)``)
        that reach this server: path-style requests, plain HTTP, fixed credentials."""
        prefix = "spark.hadoop.fs.s3a."
        return {
            f"{prefix}endpoint": self.endpoint,
            f"{prefix}endpoint.region": REGION,
            f"{prefix}path.style.access": "true",
            f"{prefix}connection.ssl.enabled": "false",
            f"{prefix}access.key": ACCESS_KEY,
            f"{prefix}secret.key": SECRET_KEY,
            f"{prefix}aws.credentials.provider": "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider",
            f"{prefix}attempts.maximum": "2",
            f"{prefix}retry.limit": "2",
        }

    @staticmethod
    def credentials_env() -> dict[str, str]:
        """Environment variables the AWS SDKs read credentials and region from (the JVM's DynamoDB
        client of Delta's commit coordinator, boto3, delta-rs). Set them before a JVM starts."""
        return {"AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY, "AWS_REGION": REGION,
                "AWS_DEFAULT_REGION": REGION}

    def client(self, service: str = "s3") -> Any:
        """A boto3 client (``s3`` or ``dynamodb``) of this server."""
        import boto3

        if service not in ("s3", "dynamodb"):
            raise DeltaLabError(f"The local server has no {service!r} API.", fix="Ask for 's3' or 'dynamodb'.")
        return boto3.client(service, endpoint_url=self.endpoint, aws_access_key_id=ACCESS_KEY,
                            aws_secret_access_key=SECRET_KEY, region_name=REGION)

    def create_bucket(self, name: str) -> str:
        """Create the bucket ``name`` (if new) and return its ``s3a://`` URI."""
        s3 = self.client("s3")
        if name not in {bucket["Name"] for bucket in s3.list_buckets().get("Buckets", [])}:
            s3.create_bucket(Bucket=name)
        return f"s3a://{name}"

    def keys(self, bucket: str, prefix: str = "") -> list[str]:
        """Every key of ``bucket`` under ``prefix``, sorted (what a LIST of the bucket returns)."""
        pages = self.client("s3").get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
        return sorted(item["Key"] for page in pages for item in page.get("Contents", []))

    def requests(self, since: int = 0) -> list[Request]:
        """The requests answered so far, in order; ``since`` skips the first ones (see :meth:`mark`)."""
        path = self.directory / _REQUESTS
        lines = path.read_text().splitlines() if path.exists() else []
        return [Request(**json.loads(line)) for line in lines[since:] if line]

    def mark(self) -> int:
        """The number of requests answered so far: pass it to :meth:`requests` to see only later ones."""
        return len(self.requests())

    def hold_requests(self, method: str, key_pattern: str, count: int, operation: str | None = None) -> list[Hold]:
        """Make the server stop the next ``count`` requests whose method is ``method``, whose
        path (``/bucket/key``) matches the regular expression ``key_pattern`` and, if given, whose
        DynamoDB operation is ``operation`` (``"UpdateItem"``), before it handles them. Returns
        one :class:`deltalab.holds.Hold` per request, in the order they arrive:
        ``wait_reached()`` on each, then ``release()`` them in the order the lesson needs."""
        if count < 1:
            raise DeltaLabError(f"count must be at least 1, not {count}.", fix="Hold one request or more.")
        if method not in ("GET", "HEAD", "PUT", "POST", "DELETE"):
            raise DeltaLabError(f"{method!r} is not an HTTP method the server answers.",
                                fix="Use GET, HEAD, PUT, POST or DELETE (upper case); DynamoDB requests are POSTs.")
        try:
            re.compile(key_pattern)
        except re.error as error:
            raise DeltaLabError(f"key_pattern {key_pattern!r} is not a regular expression: {error}.",
                                fix="Pass a Python regular expression matched against /bucket/key.") from None
        self._holds += 1
        name = f"rule{self._holds:03d}"
        holds_dir = self.directory / _HOLDS
        holds = [Hold(holds_dir / f"{name}-{index}") for index in range(count)]
        rule = holds_dir / f"{name}.json"
        write_atomically(rule, json.dumps({"method": method, "key_pattern": key_pattern, "count": count,
                                           "operation": operation}))
        return holds

    @contextmanager
    def latency(self, seconds: float) -> Iterator[None]:
        """Make every request wait ``seconds`` before the server handles it, for the ``with`` block.

        The store then answers like one a round trip away (a cloud region is 10-100 ms from its
        clients), and a lesson can measure what that latency does, say, to commits per second. Each
        request's wait is in the request log (:attr:`Request.latency`).
        """
        if not 0 <= seconds <= MAX_LATENCY_SECONDS:
            raise DeltaLabError(f"A latency of {seconds!r} seconds is out of range.",
                                fix=f"Pass seconds between 0 and {MAX_LATENCY_SECONDS} (20 ms is 0.02).")
        path = self.directory / _LATENCY
        write_atomically(path, json.dumps({"seconds": seconds}))
        try:
            yield
        finally:
            path.unlink(missing_ok=True)

    def stop(self) -> int:
        """Stop the server (and anything it held); return its exit status."""
        cancel_reached(self.directory / _HOLDS)
        return end_process(self.process)

    def __enter__(self) -> "ObjectStore":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_object_store(directory: str | os.PathLike[str], timeout: float = START_TIMEOUT_SECONDS) -> ObjectStore:
    """Start the S3 and DynamoDB server on a free port of 127.0.0.1 and wait until it answers.

    ``directory`` (emptied first) holds the server's output (``server.log``), its request log and
    its holds. The server ends with this kernel, or with :meth:`ObjectStore.stop`.
    """
    import shutil

    try:
        import moto  # noqa: F401
        import werkzeug  # noqa: F401
    except ImportError as error:
        raise DeltaLabError(f"The local S3 server needs moto, which is not installed ({error.name} is missing).",
                            fix="Install the course's packages: `make setup` (or pip install -e '.[course]').") from None
    directory = Path(directory).resolve()
    if directory.exists():
        shutil.rmtree(directory)
    (directory / _HOLDS).mkdir(parents=True)
    process = start_owned([sys.executable, "-c", SERVER_MAIN, str(directory)], directory / _LOG, ends_on_interrupt=False)
    ready = directory / _READY
    try:
        wait_until(lambda: ready.exists() or process.poll() is not None, timeout, "the local S3 server is listening")
    except BaseException:
        end_process(process)
        raise
    if not ready.exists():
        output = (directory / _LOG).read_text(errors="replace").splitlines()[-8:]
        end_process(process)
        raise DeltaLabError("The local S3 server did not start:\n" + "\n".join(output),
                            fix=f"Read {directory / _LOG}; check that `python -c 'import moto.server'` works.")
    port = int(json.loads(ready.read_text())["port"])
    store = ObjectStore(directory, process, port)
    _wait_until_it_answers(store, timeout)
    return store


def _wait_until_it_answers(store: ObjectStore, timeout: float) -> None:
    """Wait until an S3 request gets an answer (the port is open once ``ready.json`` exists)."""
    import urllib.error
    import urllib.request

    def answers() -> bool:
        try:
            opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: never a proxy
            opener.open(store.endpoint + "/", timeout=5).close()
        except urllib.error.HTTPError:
            return True  # any HTTP answer will do
        except OSError:
            time.sleep(0.05)
            return False
        return True

    wait_until(answers, timeout, "the local S3 server answers", interval=0.05)


# --------------------------------------------------------------------------------------------
# Writers brought to the same request
# --------------------------------------------------------------------------------------------


@dataclass
class RequestRace:
    """What :func:`race_at_requests` saw: each writer's result, and its held request as the server
    answered it once released (both in the order the writers were started and released)."""

    results: dict[str, Any]
    held: dict[str, Request]


def race_at_requests(store: ObjectStore, writers: dict[str, Callable[[], PendingCall]], method: str,
                     key_pattern: str, operation: str | None = None) -> RequestRace:
    """Bring writers to the same request deterministically, then let them go one at a time.

    ``writers`` maps a label to a function that starts the writer and returns its pending call
    (``lambda: driver.submit(...)``). The server holds the first request of each writer that
    matches ``method``, ``key_pattern`` and ``operation`` (see :meth:`ObjectStore.hold_requests`).
    Writers are started in the order given, each once the one before it is held, so the i-th hold
    is the i-th writer's. They are then released in the same order, each running to its end
    before the next goes on. A failure or an interrupt cancels every hold: the held requests are
    refused with an error clients do not retry, so nothing behind them commits.
    """
    holds = store.hold_requests(method, key_pattern, count=len(writers), operation=operation)
    rule = f"{method} {key_pattern}" + (f" ({operation})" if operation else "")
    calls: dict[str, PendingCall] = {}
    try:
        for hold, (label, start) in zip(holds, writers.items()):
            calls[label] = start()
            try:
                hold.wait_reached(calls[label])
            except DriverCallError:
                raise
            except DeltaLabError:
                raise DeltaLabError(f"The writer {label!r} finished without sending a request that matches {rule}.",
                                    fix="Check the pattern against the request log: "
                                        f"{[f'{r.method} {r.key}' for r in store.requests()[-5:]]}.") from None
        results = {}
        for hold, label in zip(holds, writers):
            hold.release()
            results[label] = calls[label].result()
    except BaseException:
        for hold in holds:
            hold.cancel()
        raise
    by_hold = {request.held: request for request in store.requests() if request.held}
    return RequestRace(results, {label: by_hold[Path(hold.path).name] for hold, label in zip(holds, writers)})


def delta_rs_options(store: ObjectStore) -> dict[str, str]:
    """Storage options for delta-rs (``deltalake``) to reach the server: its endpoint over plain
    HTTP, the credentials, and a request timeout long enough for a request held by a lesson."""
    return {"AWS_ENDPOINT_URL": store.endpoint, "AWS_ALLOW_HTTP": "true", "timeout": "300s", **store.credentials_env()}


def append_with_delta_rs(uri: str, writer: int, rows: int, storage_options: dict[str, str]) -> None:
    """Append ``rows`` rows tagged ``writer`` with delta-rs (no Spark), like
    :func:`deltalab.writers.append_rows` does with Spark. Runs in a thread of this kernel
    (``in_this_kernel(spark).submit(..., with_spark=False)``)."""
    import pyarrow as pa
    from deltalake import write_deltalake

    batch = pa.table({"id": pa.array(range(rows), pa.int64()), "writer": pa.array([writer] * rows, pa.int32())})
    write_deltalake(uri, batch, mode="append", storage_options=storage_options)

