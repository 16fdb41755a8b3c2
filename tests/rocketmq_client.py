"""The unmodified `rocketmq-python-client` (pinned in the dev extra), driven in a process of its own by the gRPC tests
(tests/e2e/test_rocketmq_clients.py): one JSON spec in argv[1], one JSON line out per event.

    {"role": "producer", "messages": [{"body": "<base64>", "tag": ..., "keys": [...], "properties": {...},
                                       "group": ...}, ...]}
        -> {"sent": <message id>, "offset": n} per message, or {"error": <class>, "code": <RocketMQ code>}
    {"role": "simple", "group": g, "steps": [{"do": "receive", "want": n, "invisible_s": s}, {"do": "ack", "body": b},
                                             {"do": "change", "body": b, "invisible_s": s},
                                             {"do": "await", "body": b, "invisible_s": s}, ...]}
        -> {"received": {...message...}} per delivery, {"acked": body}, {"changed": body}, or an error
    {"role": "push", "group": g, "fail": [<base64 bodies its listener fails>]}
        -> {"consumed": {...message...}, "result": "SUCCESS" | "FAILURE"} per call of its listener, until the test
           closes its standard input

A spec's `namespace` is the client's (a BrokerContainer's broker: tests/e2e/test_container_grpc.py). Every wait is
bounded (`deadline_s`, default 120 s), so a process never outlives a failed test for long. The
client's own log goes to $HOME/logs/rocketmq_python/ (the tests give each client a HOME of its own).
"""

from __future__ import annotations

import base64
import json
import select
import sys
import threading
import time

from rocketmq import (
    ClientConfiguration,
    ConsumeResult,
    Credentials,
    FilterExpression,
    Message,
    Producer,
    PushConsumer,
    SimpleConsumer,
)
from rocketmq.grpc_protocol import FilterType

_print_lock = threading.Lock()


def emit(event: dict) -> None:
    with _print_lock:
        print(json.dumps(event), flush=True)


def view(message) -> dict:
    return {
        "message_id": message.message_id,
        "body": base64.b64encode(message.body).decode(),
        "tag": message.tag,
        "keys": sorted(message.keys),
        "properties": dict(message.properties),
        "group": message.message_group,
        "attempt": message.delivery_attempt,
        "topic": message.topic,
    }


def failed(error: Exception) -> dict:
    return {"error": type(error).__name__, "code": getattr(error, "code", None), "message": str(error)[:300]}


def produce(config: ClientConfiguration, spec: dict) -> None:
    producer = Producer(config, (spec["topic"],))
    producer.startup()
    try:
        for item in spec["messages"]:
            message = Message()
            message.topic = spec["topic"]
            message.body = base64.b64decode(item["body"])
            if item.get("tag"):
                message.tag = item["tag"]
            for key in item.get("keys", ()):
                message.keys = key  # the setter adds one key
            for name, value in item.get("properties", {}).items():
                message.add_property(name, value)
            if item.get("group"):
                message.message_group = item["group"]
            try:
                receipt = producer.send(message)
                emit({"sent": receipt.message_id, "offset": receipt.offset})
            except Exception as error:  # the test reads what the client raised
                emit(failed(error))
    finally:
        producer.shutdown()


def subscription(spec: dict) -> FilterExpression:
    """The spec's filter: its SQL92 expression (`sql`) or its tag expression (`tag`, default every tag)."""
    if "sql" in spec:
        return FilterExpression(spec["sql"], FilterType.SQL)
    return FilterExpression(spec.get("tag", "*"))


def simple(config: ClientConfiguration, spec: dict) -> None:
    consumer = SimpleConsumer(config, spec["group"], {spec["topic"]: subscription(spec)}, await_duration=5)
    consumer.startup()
    held: dict[str, object] = {}  # the last delivery of each body
    try:
        for step in spec["steps"]:
            deadline = time.monotonic() + step.get("deadline_s", 120)
            if step["do"] in ("receive", "await"):
                if step["do"] == "await":  # a body received before, to come again
                    held.pop(step["body"], None)
                got = 0
                while time.monotonic() < deadline:
                    want_body = step.get("body")
                    if (want_body is None and got >= step["want"]) or (want_body is not None and want_body in held):
                        break
                    for message in consumer.receive(32, step.get("invisible_s", 30)):
                        body = base64.b64encode(message.body).decode()
                        if want_body is not None and body != want_body:
                            continue
                        held[body] = message
                        got += 1
                        emit({"received": view(message)})
            elif step["do"] == "ack":
                consumer.ack(held[step["body"]])
                emit({"acked": step["body"]})
            elif step["do"] == "change":
                consumer.change_invisible_duration(held[step["body"]], step["invisible_s"])
                emit({"changed": step["body"]})
    except Exception as error:  # the test reads what the client raised
        emit(failed(error))
    finally:
        consumer.shutdown()


class Listener:
    def __init__(self, fail: set[str]) -> None:
        self.fail = fail

    def consume(self, message) -> ConsumeResult:
        seen = view(message)
        result = ConsumeResult.FAILURE if seen["body"] in self.fail else ConsumeResult.SUCCESS
        emit({"consumed": seen, "result": result.name})
        return result


def push(config: ClientConfiguration, spec: dict) -> None:
    listener = Listener(set(spec.get("fail", ())))
    consumer = PushConsumer(config, spec["group"], listener, {spec["topic"]: subscription(spec)})
    consumer.startup()
    emit({"started": True})
    try:
        select.select([sys.stdin], [], [], spec.get("deadline_s", 120))  # until the test closes stdin
    finally:
        consumer.shutdown()


def main() -> None:
    spec = json.loads(sys.argv[1])
    credentials = Credentials(spec["access_key"], spec["secret_key"])
    config = ClientConfiguration(spec["endpoint"], credentials, spec.get("namespace", ""), request_timeout=10)
    try:
        {"producer": produce, "simple": simple, "push": push}[spec["role"]](config, spec)
    except Exception as error:  # startup refused, ...
        emit(failed(error))


if __name__ == "__main__":
    main()
