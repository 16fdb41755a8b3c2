"""TideMQ's Python SDK: Producer, Consumer, Admin and KV over the HTTP API, Container for a BrokerContainer's brokers
(and the `tidemq` command line).

    from tidemq import Admin, Consumer, Producer

    Admin().create_topic("orders", queues=4)
    Admin().create_group("billing", retry=RetryPolicy(max_delivery_attempts=5))  # dead letters after 5 deliveries
    with Producer("orders") as producer:
        producer.send(b"hello", keys=["order-1"], tag="new")
    with Producer("reminders") as producer:  # a DELAY topic: tidemq.producer
        sent = producer.send(b"later", delay=timedelta(minutes=5))
        producer.recall(sent.recall_handle)
    with Consumer("orders", group="billing", tag="new") as consumer:
        messages = consumer.poll()
        consumer.commit()
    with SimpleConsumer("orders", group="workers") as consumer:  # pop: tidemq.simple_consumer
        for message in consumer.receive(wait_ms=10_000):
            consumer.ack(message)
    with TransactionProducer("payments", group="billing", checker=check) as producer:  # tidemq.transaction_producer
        producer.send(b"paid").commit()
    KV().put("config", "feature/dark-mode", b"on")  # KV namespaces: tidemq.kv
    Container("http://127.0.0.1:10811").list_brokers()  # a BrokerContainer (RIP-31): tidemq.container

Every client reads the server's address from `url`, else `TIDEMQ_URL`, else http://127.0.0.1:8080.
Errors are the classes client and server share (`tidemq_protocol.errors`), plus `ApiError`.

A webhook receiving push deliveries checks that each came from TideMQ with `verify_push_signature(body,
request.headers["X-TideMQ-Signature"], secret)`, the secret being `Admin().set_push(...).signing_secret`.

Each name is imported on first use (`import tidemq` loads none of the SDK: a script that only needs the CLI, or one
class, pays for no more).
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

_EXPORTS = {
    "KV": "tidemq.kv",
    "SIGNATURE_HEADER": "tidemq_protocol.push_signature",
    "Admin": "tidemq.admin",
    "ApiError": "tidemq.errors",
    "Consumer": "tidemq.consumer",
    "Container": "tidemq.container",
    "CustomizedBackoff": "tidemq_protocol.retry",
    "ExponentialBackoff": "tidemq_protocol.retry",
    "HttpClient": "tidemq.client",
    "InvalidPushSignature": "tidemq_protocol.push_signature",
    "KeyValue": "tidemq.kv",
    "HalfMessage": "tidemq.transaction_producer",
    "OutgoingMessage": "tidemq.producer",
    "Producer": "tidemq.producer",
    "SendResult": "tidemq.producer",
    "RecallResult": "tidemq.producer",
    "Resolution": "tidemq.transaction_producer",
    "RetryPolicy": "tidemq_protocol.retry",
    "ServerUnreachable": "tidemq.errors",
    "SimpleConsumer": "tidemq.simple_consumer",
    "TransactionProducer": "tidemq.transaction_producer",
    "default_url": "tidemq.client",
    "verify_push_signature": "tidemq_protocol.push_signature",
}
__all__ = [
    "KV",
    "SIGNATURE_HEADER",
    "Admin",
    "ApiError",
    "Consumer",
    "Container",
    "CustomizedBackoff",
    "ExponentialBackoff",
    "HalfMessage",
    "HttpClient",
    "InvalidPushSignature",
    "KeyValue",
    "OutgoingMessage",
    "Producer",
    "RecallResult",
    "Resolution",
    "RetryPolicy",
    "SendResult",
    "ServerUnreachable",
    "SimpleConsumer",
    "TransactionProducer",
    "default_url",
    "verify_push_signature",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'tidemq' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value  # once imported, a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


if TYPE_CHECKING:
    from tidemq_protocol.push_signature import SIGNATURE_HEADER, InvalidPushSignature, verify_push_signature
    from tidemq_protocol.retry import CustomizedBackoff, ExponentialBackoff, RetryPolicy

    from .admin import Admin
    from .client import HttpClient, default_url
    from .consumer import Consumer
    from .container import Container
    from .errors import ApiError, ServerUnreachable
    from .kv import KV, KeyValue
    from .producer import OutgoingMessage, Producer, RecallResult, SendResult
    from .simple_consumer import SimpleConsumer
    from .transaction_producer import HalfMessage, Resolution, TransactionProducer
