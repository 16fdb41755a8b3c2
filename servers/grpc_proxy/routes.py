"""What a client is told about where a topic lives: QueryRoute's queues and QueryAssignment's assignments.

Every queue of a topic is on one broker, this proxy (id 0: clients use only a master's queues), READ_WRITE, and takes
the topic's message type only. The broker's endpoints echo those the client reached the proxy by, so that a client
opens no second channel (and a NAT or a hostname makes no difference); any proxy over the same store answers alike.

A push consumer is assigned the topic as a whole (queue id -1, "any queue of this broker", as the Apache proxy does
for normal groups): receives pop from every queue of the topic, so no queue belongs to a consumer and consumers come
and go without a rebalance. A FIFO group is assigned the same way: the order of a message group is kept by the pop
engine (one batch of a group held at a time), not by who reads which queue.
"""

from __future__ import annotations

from tidemq_store import TopicConfig

from .messages import MESSAGE_TYPES
from .protocol import definition_pb2 as pb

ANY_QUEUE = -1


def broker(name: str, endpoints: pb.Endpoints) -> pb.Broker:
    return pb.Broker(name=name, id=0, endpoints=endpoints)


def queue(config: TopicConfig, queue_id: int, namespace: str, at: pb.Broker) -> pb.MessageQueue:
    return pb.MessageQueue(
        topic=pb.Resource(resource_namespace=namespace, name=config.name),
        id=queue_id,
        permission=pb.READ_WRITE,
        broker=at,
        accept_message_types=[MESSAGE_TYPES[config.message_type]],
    )


def message_queues(config: TopicConfig, namespace: str, at: pb.Broker) -> list[pb.MessageQueue]:
    """QueryRoute's answer: each of the topic's queues."""
    return [queue(config, queue_id, namespace, at) for queue_id in range(config.queues)]


def assignments(config: TopicConfig, namespace: str, at: pb.Broker) -> list[pb.Assignment]:
    """QueryAssignment's answer: the topic as a whole (see the module docstring)."""
    return [pb.Assignment(message_queue=queue(config, ANY_QUEUE, namespace, at))]


def endpoints_of(given: pb.Endpoints, host: str, port: int) -> pb.Endpoints:
    """The endpoints a client named (those it reached the proxy by), else the proxy's own address."""
    if given.addresses:
        return given
    scheme = pb.IPv6 if ":" in host else pb.IPv4 if host.replace(".", "").isdigit() else pb.DOMAIN_NAME
    return pb.Endpoints(scheme=scheme, addresses=[pb.Address(host=host, port=port)])
