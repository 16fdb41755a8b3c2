"""The serverless backend's writes whose answers DynamoDB lost (the connection reset after the write was applied, and
botocore sent it again), through the fault injector (devtools/aws_faults.py) on a moto server over HTTP: each lands
once, and the caller learns where."""

from __future__ import annotations

import pytest

from devtools.aws_faults import Fault
from tidemq_protocol.kv import NamespaceConfig
from tidemq_protocol.message import Message
from tidemq_store import TopicConfig

pytestmark = pytest.mark.local_aws


def lost_answers(operation: str, body_has: str | None = None, times: int = 1) -> Fault:
    """The next `times` calls of `operation` (whose body holds `body_has`) are applied, and their answers lost."""
    return Fault("reset_after", service="dynamodb", operations=(operation,), body_has=body_has, limit=times)


@pytest.mark.parametrize("queues", [1, 3], ids=["one-queue", "three-queues"])
def test_a_batch_whose_sequencing_answer_was_lost_is_stored_once_where_its_producer_is_told(
    serverless, faulty_aws, queues
):
    store = serverless()
    store.create_topic(TopicConfig(name="t", queues=3))
    store.put("t", [Message(b"first", queue=0)])  # the queue items exist: the next put's first write is its sequencing
    operation = "UpdateItem" if queues == 1 else "TransactWriteItems"
    faulty_aws.set(lost_answers(operation, body_has="pending", times=2))
    results = store.put("t", [Message(b"m%d" % i, queue=i % queues) for i in range(6)])
    assert faulty_aws.counts().get("dynamodb reset_after") == 2
    faulty_aws.clear()
    for queue in range(queues):
        stored = store.get("t", queue, 0, 100).messages
        assert [m.body for m in stored] == [b"first"] * (queue == 0) + [b"m%d" % i for i in range(queue, 6, queues)]
    for message, result in zip(range(6), results, strict=True):
        found = store.get("t", result.queue, result.queue_offset, 1).messages[0]
        assert (found.body, found.msg_id) == (b"m%d" % message, result.msg_id)


def test_a_lease_whose_answer_was_lost_is_not_left_held_and_the_queue_is_uploaded(serverless, faulty_aws):
    store = serverless()
    store.create_topic(TopicConfig(name="t", queues=1))
    store.put("t", [Message(b"%d" % i) for i in range(10)])
    # The maintenance run's lease is applied, its answer lost: botocore sends it again.
    faulty_aws.set(Fault("reset_after", service="dynamodb", operations=("UpdateItem",), body_has="uploading", limit=1))
    first = store.maintenance().run()
    assert faulty_aws.counts().get("dynamodb reset_after") == 1
    faulty_aws.clear()
    second = store.maintenance().run()
    state = store.index.state("t", 0)
    assert (state.hot_offset, first.messages + second.messages) == (10, 10)  # uploaded once, not held for 900 s
    assert [m.body for m in store.get("t", 0, 0, 10).messages] == [b"%d" % i for i in range(10)]


# Every attempt botocore makes at taking the lease is applied and its answer lost; or every attempt at giving it back
# (the run's own, then the one after its failure) fails: either way the run fails, the lease taken.
LEASE_FAULTS = {
    "taken-answers-lost": Fault("reset_after", service="dynamodb", operations=("UpdateItem",), body_has="uploading"),
    "release-failing": Fault("throttle", service="dynamodb", operations=("UpdateItem",), body_has="REMOVE"),
}


@pytest.mark.parametrize("fault", LEASE_FAULTS.values(), ids=LEASE_FAULTS.keys())
def test_a_lease_a_failing_run_took_is_not_left_held_and_the_next_run_uploads(serverless, faulty_aws, fault):
    store = serverless()
    store.create_topic(TopicConfig(name="t", queues=1))
    store.put("t", [Message(b"%d" % i) for i in range(10)])
    faulty_aws.set(fault)
    first = store.maintenance().run()
    assert faulty_aws.counts().get(fault.label, 0) >= 3 and first.failed == ["t|0"]
    faulty_aws.clear()
    second = store.maintenance().run()  # the next run, not one 900 s later
    assert second.failed == [] and store.index.state("t", 0).hot_offset == 10
    assert store.tier_status("t")[0].upload_lag_messages == 0
    assert [m.body for m in store.get("t", 0, 0, 10).messages] == [b"%d" % i for i in range(10)]


def test_a_kv_write_whose_answer_was_lost_is_answered_as_written_not_as_a_conflict(serverless, faulty_aws):
    kv = serverless().open_kv()
    kv.create_namespace(NamespaceConfig(name="n"))
    first = kv.put("n", "k", b"one")
    faulty_aws.set(lost_answers("TransactWriteItems", body_has="kv", times=2))
    second = kv.put("n", "k", b"two", expected_version=first.version)  # landed, its answer lost: sent again
    assert faulty_aws.counts().get("dynamodb reset_after") == 2
    faulty_aws.clear()
    now = kv.get("n", "k").entry
    assert (now.value, now.version) == (b"two", second.version) and second.version > first.version
