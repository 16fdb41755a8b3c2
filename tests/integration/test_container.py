"""The BrokerContainer (RIP-31) as a real process: several brokers on one server, each with its own store, added
and removed while it runs; a removed broker's data is there when it is added again."""

from __future__ import annotations

import threading
import time

import pytest

from tests.containers import container_running
from tidemq.client import ApiError, HttpClient
from tidemq_protocol.errors import (
    AccessDenied,
    BrokerExists,
    BrokerNotFound,
    BrokerReadOnly,
    InvalidArgument,
    Unauthenticated,
)


def produce(client: HttpClient, topic: str, bodies: list[str]) -> list[dict]:
    messages = [{"body": body, "body_encoding": "utf-8"} for body in bodies]
    return client.request("POST", f"/v1/topics/{topic}/messages", json={"messages": messages}).json()["messages"]


def read_all(client: HttpClient, topic: str, queues: int) -> list[str]:
    bodies = []
    for queue in range(queues):
        page = client.request("GET", f"/v1/topics/{topic}/queues/{queue}/messages", params={"max_messages": 1000})
        bodies += [message["body"] for message in page.json()["messages"]]
    return sorted(bodies)


@pytest.fixture(scope="module")
def container(tmp_path_factory):
    root = tmp_path_factory.mktemp("container") / "root"
    brokers = {"broker-a.conf": "brokerName=a\n", "broker-b.conf": "brokerName=b\nflushDiskType=ASYNC\n"}
    with container_running(root, brokers) as running:
        yield running


def test_brokers_are_added_and_removed_at_runtime_and_keep_their_data(container):
    assert sorted(container.brokers()) == ["a", "b"]
    added = container.add("brokerName=c\nbrokerClusterName=east\n")
    assert (added["identity"], added["role"]) == ("east_c_0", "ASYNC_MASTER")
    assert added["store"] == str(container.root / "brokers" / "c")
    sent = {}
    for name in ("a", "b", "c"):
        broker = container.broker(name)
        broker.create_topic(f"orders-{name}", queues=2)
        sent[name] = [f"{name}-{i}" for i in range(50)]
        produce(container.client(f"/brokers/{name}"), f"orders-{name}", sent[name])
    for name in ("a", "b", "c"):  # each broker holds its own topic only
        assert [t.name for t in container.broker(name).iter_topics()] == [f"orders-{name}"]
        assert read_all(container.client(f"/brokers/{name}"), f"orders-{name}", 2) == sorted(sent[name])

    container.client().request("DELETE", "/container/v1/brokers/c")
    assert sorted(container.brokers()) == ["a", "b"]
    with pytest.raises(BrokerNotFound):
        container.client("/brokers/c").request("GET", "/v1/topics")
    for name in ("a", "b"):  # the others keep working
        produce(container.client(f"/brokers/{name}"), f"orders-{name}", [f"{name}-late"])
        sent[name].append(f"{name}-late")
        assert read_all(container.client(f"/brokers/{name}"), f"orders-{name}", 2) == sorted(sent[name])

    container.add("brokerName=c\nbrokerClusterName=east\n")  # again: its store is where it was
    assert read_all(container.client("/brokers/c"), "orders-c", 2) == sorted(sent["c"])
    produce(container.client("/brokers/c"), "orders-c", ["c-again"])


def test_removing_a_broker_finishes_its_requests_in_flight(container):
    container.add("brokerName=d\n")
    container.broker("d").create_topic("busy", queues=1)
    client, results, failures = container.client("/brokers/d"), [], []

    def send() -> None:
        for i in range(200):
            try:
                results.extend(produce(client, "busy", [f"m{i}"]))
            except Exception as error:  # once removed, the broker is not there
                failures.append(error)
                return

    sender = threading.Thread(target=send)
    sender.start()
    while len(results) < 20 and sender.is_alive():
        time.sleep(0.005)
    container.client().request("DELETE", "/container/v1/brokers/d")
    sender.join()
    # once removed the broker is not there; a request that came while it was closing was told to come back
    assert len(failures) == 1
    assert isinstance(failures[0], BrokerNotFound) or (isinstance(failures[0], ApiError) and failures[0].status == 503)
    container.add("brokerName=d\n")
    kept = read_all(container.client("/brokers/d"), "busy", 1)
    assert kept == sorted(f"m{i}" for i in range(len(results)))  # every answered put, and no other
    container.client().request("DELETE", "/container/v1/brokers/d")


def test_bad_configs_and_duplicates_are_refused_saying_why(container):
    admin = container.client()
    before = container.brokers()
    with pytest.raises(InvalidArgument, match="unknown setting 'brokerNam'"):
        container.add("brokerNam=x\n")
    with pytest.raises(InvalidArgument, match="brokerId is 0 for a master"):
        container.add("brokerName=x\nbrokerId=2\n")
    with pytest.raises(InvalidArgument, match="outside the container's directory"):
        container.add("brokerName=x\nstorePathRootDir=/tmp/elsewhere\n")
    with pytest.raises(BrokerExists):
        container.add("brokerName=a\n")
    with pytest.raises(BrokerExists, match="in use"):
        container.add("brokerName=x\nstorePathRootDir=brokers/a\n")
    assert container.brokers().keys() == before.keys()  # nothing was added
    with pytest.raises(BrokerNotFound):
        admin.request("DELETE", "/container/v1/brokers/nope")
    with pytest.raises(InvalidArgument, match="brokerName cannot change"):
        admin.request("PATCH", "/container/v1/brokers/a/config", json={"settings": {"brokerName": "z"}})
    with pytest.raises(InvalidArgument, match="storePathRootDir cannot change"):
        admin.request("PATCH", "/container/v1/brokers/a/config", json={"settings": {"storePathRootDir": "/tmp/x"}})


def test_a_slave_takes_no_writes(container):
    secret = container.credentials.secret_key
    container.add(
        "brokerName=s\nbrokerId=1\nbrokerRole=SLAVE\nhaMasterAddress=http://127.0.0.1:9\n"
        f"haMasterAccessKey=admin\nhaMasterSecretKey={secret}\n"
    )
    try:
        with pytest.raises(BrokerReadOnly):
            container.client("/brokers/s").request("POST", "/v1/topics", json={"name": "t"})
        assert container.client("/brokers/s").request("GET", "/v1/topics").json()["topics"] == []
        shown = container.client().request("GET", "/container/v1/brokers/s/config").json()["settings"]
        assert shown["haMasterSecretKey"] == "********"
        assert container.brokers()["s"]["replication"]["connected"] is False  # no master at port 9
    finally:
        container.client().request("DELETE", "/container/v1/brokers/s")


def test_every_route_but_health_knows_its_caller(container):
    unsigned = HttpClient(container.url, sign=False, retries=0)
    for path in ("/container/v1/brokers", "/brokers/a/v1/topics"):
        with pytest.raises(Unauthenticated):
            unsigned.request("GET", path)
    assert unsigned.request("GET", "/health").json()["status"] == "ok"
    assert unsigned.request("GET", "/brokers/a/health").json()["status"] == "ok"
    root = container.client()
    created = root.request("POST", "/v1/users", json={"name": "reader", "policies": []}).json()
    from tidemq.credentials import Credentials

    reader = HttpClient(container.url, credentials=Credentials("reader", created["secret_key"]), retries=0)
    with pytest.raises(AccessDenied):
        reader.request("GET", "/container/v1/brokers")
    with pytest.raises(AccessDenied):
        reader.request("POST", "/container/v1/brokers", json={"properties": "brokerName=evil\n"})
    with pytest.raises(AccessDenied):
        reader.request("GET", "/container/v1/brokers/a/replica", params={"from": 0})
    broker_reader = HttpClient(f"{container.url}/brokers/a", credentials=reader.credentials, retries=0)
    with pytest.raises(AccessDenied):
        broker_reader.request("POST", "/v1/topics", json={"name": "x"})
