"""deltalab.objectstore: the local S3 and DynamoDB server (no Spark here; notebook 11 runs Spark on it).

Whether moto still needs the course's BOOL fix is watched in tests/upstream/test_moto_bool.py."""

from __future__ import annotations

import socket
import threading

import pytest

from deltalab import DeltaLabError
from deltalab.objectstore import HOLD_CANCELLED, ObjectStore, race_at_requests, start_object_store
from deltalab.processes import is_running, process_tree


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    running = start_object_store(tmp_path_factory.mktemp("store"))
    yield running
    running.stop()


def test_listens_on_loopback_only_and_answers(store: ObjectStore):
    assert store.endpoint.startswith("http://127.0.0.1:")
    with socket.create_connection(("127.0.0.1", store.port), timeout=5):
        pass
    bucket = store.create_bucket("answers")
    assert bucket == "s3a://answers" and store.create_bucket("answers") == bucket, "a second create is a no-op"
    conf = store.spark_conf()
    assert conf["spark.hadoop.fs.s3a.endpoint"] == store.endpoint
    assert conf["spark.hadoop.fs.s3a.path.style.access"] == "true"


def test_put_if_absent_and_the_request_log(store: ObjectStore):
    s3 = store.client("s3")
    store.create_bucket("log")
    mark = store.mark()
    s3.put_object(Bucket="log", Key="t/_delta_log/00000000000000000000.json", Body=b"a")
    with pytest.raises(s3.exceptions.ClientError):
        s3.put_object(Bucket="log", Key="t/_delta_log/00000000000000000000.json", Body=b"b", IfNoneMatch="*")
    assert store.keys("log", "t/") == ["t/_delta_log/00000000000000000000.json"]
    puts = [r for r in store.requests(mark) if r.method == "PUT"]
    assert [(r.key, r.if_none_match, r.status, r.error) for r in puts] == [
        ("/log/t/_delta_log/00000000000000000000.json", None, 200, None),
        ("/log/t/_delta_log/00000000000000000000.json", "*", 412, "PreconditionFailed")]
    lists = [r for r in store.requests(mark) if r.is_list]
    assert lists and lists[-1].listed == 1, "a LIST answer's keys are counted"


def test_held_requests_wait_and_go_in_the_order_released(store: ObjectStore):
    s3 = store.client("s3")
    store.create_bucket("held")
    holds = store.hold_requests("PUT", r"/held/k\d$", count=2)
    finished: list[str] = []

    def put(key: str) -> None:
        s3.put_object(Bucket="held", Key=key, Body=key.encode())
        finished.append(key)

    first = threading.Thread(target=put, args=("k1",))
    first.start()
    holds[0].wait_reached(timeout=30)
    second = threading.Thread(target=put, args=("k2",))
    second.start()
    holds[1].wait_reached(timeout=30)
    s3.put_object(Bucket="held", Key="other", Body=b"x")  # not matched: not held
    assert finished == [] and store.keys("held") == ["other"]
    holds[1].release()
    second.join(timeout=30)
    holds[0].release()
    first.join(timeout=30)
    assert finished == ["k2", "k1"]
    s3.put_object(Bucket="held", Key="k3", Body=b"3")  # the rule held two requests, no more
    assert [r.held for r in store.requests() if r.key.startswith("/held/k")] == ["rule001-1", "rule001-0", None]


def test_hold_requests_refuses_a_count_below_one(store: ObjectStore):
    with pytest.raises(DeltaLabError, match="count must be at least 1"):
        store.hold_requests("PUT", ".*", count=0)


def test_dynamodb_keeps_bools_written_by_attribute_updates(store: ObjectStore):
    dynamodb = store.client("dynamodb")
    dynamodb.create_table(TableName="flags", KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
                          AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
                          BillingMode="PAY_PER_REQUEST")
    dynamodb.put_item(TableName="flags", Item={"id": {"S": "t"}, "v": {"N": "0"}})
    dynamodb.update_item(TableName="flags", Key={"id": {"S": "t"}},
                         AttributeUpdates={"done": {"Value": {"BOOL": True}, "Action": "PUT"},
                                           "v": {"Value": {"N": "1"}, "Action": "PUT"}})
    item = dynamodb.get_item(TableName="flags", Key={"id": {"S": "t"}})["Item"]
    assert item["done"] == {"BOOL": True} and item["v"] == {"N": "1"}


def test_stop_ends_the_server_and_everything_it_held(tmp_path):
    store = start_object_store(tmp_path / "store")
    s3 = store.client("s3")
    store.create_bucket("stopped")
    hold = store.hold_requests("PUT", "/stopped/k", count=1)[0]
    outcome: list[str] = []

    def put() -> None:
        try:
            s3.put_object(Bucket="stopped", Key="k", Body=b"")
            outcome.append("stored")
        except Exception as error:  # noqa: BLE001 - the connection closes under it
            outcome.append(type(error).__name__)

    waiting = threading.Thread(target=put)
    waiting.start()
    hold.wait_reached(timeout=30)
    tree = process_tree(store.process.pid)
    store.stop()
    waiting.join(timeout=60)
    assert not waiting.is_alive() and outcome and outcome != ["stored"], outcome
    assert not any(is_running(p) for p in tree)


def test_a_server_that_cannot_start_says_why(tmp_path, monkeypatch):
    monkeypatch.setattr("deltalab.objectstore.SERVER_MAIN", "import sys; sys.exit('no moto here')")
    with pytest.raises(DeltaLabError, match="did not start") as error:
        start_object_store(tmp_path / "store", timeout=60)
    assert "no moto here" in str(error.value)


def test_hold_requests_refuses_a_bad_pattern_or_method(store: ObjectStore):
    with pytest.raises(DeltaLabError, match="not a regular expression"):
        store.hold_requests("PUT", "(", count=1)
    with pytest.raises(DeltaLabError, match="not an HTTP method"):
        store.hold_requests("put", ".*", count=1)


def test_a_cancelled_hold_is_refused_and_not_retried(store: ObjectStore):
    s3 = store.client("s3")
    store.create_bucket("cancelled")
    hold = store.hold_requests("PUT", r"cancelled/k$", count=1)[0]
    outcome: list[str] = []

    def put() -> None:
        try:
            s3.put_object(Bucket="cancelled", Key="k", Body=b"")
            outcome.append("stored")
        except s3.exceptions.ClientError as error:
            outcome.append(error.response["Error"]["Code"])

    thread = threading.Thread(target=put)
    thread.start()
    hold.wait_reached(timeout=30)
    hold.cancel()
    thread.join(timeout=30)
    assert outcome == [HOLD_CANCELLED] and store.keys("cancelled") == []
    assert [r.status for r in store.requests() if r.key == "/cancelled/k"] == [400], "answered once, not retried"


def put_with_boto3(endpoint: str, bucket: str, key: str, body: str) -> str:
    """A writer for race_at_requests: PUT ``body`` at ``key`` and return it."""
    import boto3

    from deltalab.objectstore import ACCESS_KEY, REGION, SECRET_KEY

    boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY,
                 region_name=REGION).put_object(Bucket=bucket, Key=key, Body=body.encode())
    return body


def test_race_at_requests_holds_each_writer_and_releases_them_in_order(store: ObjectStore):
    from deltalab.drivers import in_this_kernel

    s3 = store.client("s3")
    store.create_bucket("race")
    runner = in_this_kernel(None)

    def writer(label: str):
        return lambda: runner.submit("test_objectstore.put_with_boto3", store.endpoint, "race", "same", label,
                                     with_spark=False)

    race = race_at_requests(store, {"second": writer("second"), "first": writer("first")}, "PUT", r"race/same$")
    assert race.results == {"second": "second", "first": "first"}
    assert list(race.held) == ["second", "first"] and all(r.status == 200 for r in race.held.values())
    assert s3.get_object(Bucket="race", Key="same")["Body"].read() == b"first", "the last one released wins"


def test_race_at_requests_says_when_a_writer_never_sends_the_request(store: ObjectStore):
    from deltalab.drivers import in_this_kernel

    runner = in_this_kernel(None)
    with pytest.raises(DeltaLabError, match="finished without sending a request"):
        race_at_requests(store, {"idle": lambda: runner.submit("os.getcwd", with_spark=False)}, "PUT", r"never$")


def test_latency_applies_inside_its_block_only_and_is_logged(store: ObjectStore):
    s3 = store.client("s3")
    store.create_bucket("latency")
    mark = store.mark()
    with store.latency(0.05):
        s3.put_object(Bucket="latency", Key="a", Body=b"a")
    s3.put_object(Bucket="latency", Key="b", Body=b"b")
    assert [(r.key, r.latency) for r in store.requests(mark) if r.method == "PUT"] == [("/latency/a", 0.05), ("/latency/b", 0.0)]
    with pytest.raises(DeltaLabError, match="out of range"):
        with store.latency(-1):
            pass
