"""The unmodified `rocketmq-python-client` (pinned in the dev extra), driven in a process of its own by the gRPC tests
(tests/e2e/test_rocketmq_clients.py): one JSON spec in argv[1], one JSON line out per event.

    {"role": "producer", "messages": [{"body": "<base64>", "tag": ..., "keys": [...], "properties": {...},
                                       "group": ..., "delay_s": s, "recall": true, "transaction": "commit",
                                       "after_line": true, "until_sent": true}, ...],
     "checker": {"<base64 body>": "COMMIT" | "ROLLBACK"}, "await_checks": n}
        (or, for "messages", "numbered": {"prefix": p, "count": n, ...}: n messages whose bodies are p0, p1, ..., each
        with the rest of the fields given)
        -> {"sent": <message id>, "offset": n, "transaction_id": ..., "recall_handle": ...} per message, or
           {"error": <class>, "code": <RocketMQ code>}; {"recalled": <message id>} after a recall; with a "checker",
           messages with a "transaction" ("commit", "rollback", or "none": left for the server's check) are half
           messages, {"ended": body, "as": ...} after each end, and {"checked": body, "answer": ...} per check the
           server asked, the producer staying until it has answered "await_checks" of them; a message "after_line"
           is sent once the test writes a line to the client's standard input, and after "pause_s" seconds; one
           "until_sent" is sent again (a new send, as an application would) until one succeeds
    {"role": "simple", "group": g, "steps": [{"do": "receive", "want": n, "invisible_s": s}, {"do": "ack", "body": b},
                                             {"do": "change", "body": b, "invisible_s": s},
                                             {"do": "await", "body": b, "invisible_s": s}, ...]}
        -> {"received": {...message...}} per delivery, {"acked": body}, {"changed": body}, or an error
    {"role": "drain", "group": g, "invisible_s": s}
        -> receives and acks until the test closes its standard input, going on past failed calls (an ack that
           found no proxy is made again until answered): {"received": {...}} per delivery,
           {"acked": <message id>} per ack answered OK, {"ack_failed": <message id>, "error": ...} per failed ack,
           {"error": ...} per failed receive
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
from collections.abc import Iterator

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
from rocketmq.grpc_protocol import FilterType, TransactionResolution
from rocketmq.v5.producer import TransactionChecker

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
        "delivery_timestamp": message.delivery_timestamp,
        "at": time.time(),
    }


UNREACHED = ("UNAVAILABLE", "DEADLINE_EXCEEDED", "CANCELLED")
"""gRPC codes of a call that may or may not have reached the proxy."""


def failed(error: Exception) -> dict:
    code = getattr(error, "code", None)  # RocketMQ's status code; gRPC's errors have a method of that name
    code = code().name if callable(code) else code
    return {"error": type(error).__name__, "code": code, "message": str(error)[:300]}


class Checker(TransactionChecker):
    """Answers the server's checks as the spec says for each body, and counts them."""

    def __init__(self, answers: dict[str, str]) -> None:
        self.answers, self.checked = answers, threading.Semaphore(0)

    def check(self, message) -> TransactionResolution:
        body = base64.b64encode(message.body).decode()
        answer = self.answers.get(body, "ROLLBACK")
        emit({"checked": body, "answer": answer, "message_id": message.message_id})
        self.checked.release()
        return TransactionResolution.Value(answer)


def produce(config: ClientConfiguration, spec: dict) -> None:
    checker = Checker(spec["checker"]) if "checker" in spec else None
    producer = Producer(config, (spec["topic"],), checker)
    producer.startup()
    try:
        for item in spec["messages"] if "messages" in spec else numbered(spec["numbered"]):
            if item.get("after_line"):  # the test says when, by writing a line
                sys.stdin.readline()
            while True:
                try:
                    send_one(producer, spec["topic"], item)
                    break
                except Exception as error:  # the test reads what the client raised
                    emit(failed(error))
                    if not item.get("until_sent"):
                        break
                    time.sleep(0.5)  # the application's own retry: a new send (the client's retries are spent)
        deadline = time.monotonic() + spec.get("deadline_s", 120)
        for _ in range(spec.get("await_checks", 0)):
            if not checker.checked.acquire(timeout=max(deadline - time.monotonic(), 0)):
                emit({"error": "TimeoutError", "code": None, "message": "a check the server was to ask never came"})
                break
        time.sleep(0.5 if checker else 0)  # the last check's answer on its way (the client answers asynchronously)
    finally:
        producer.shutdown()


def numbered(spec: dict) -> Iterator[dict]:
    """`count` messages whose bodies are `prefix` and their number (the rest of `spec` is each message's)."""
    for number in range(spec["count"]):
        body = base64.b64encode(f"{spec['prefix']}{number}".encode()).decode()
        yield {key: value for key, value in spec.items() if key not in ("count", "prefix")} | {"body": body}


def send_one(producer: Producer, topic: str, item: dict) -> None:
    time.sleep(item.get("pause_s", 0))
    message = Message()
    message.topic = topic
    message.body = base64.b64decode(item["body"])
    if item.get("tag"):
        message.tag = item["tag"]
    for key in item.get("keys", ()):
        message.keys = key  # the setter adds one key
    for name, value in item.get("properties", {}).items():
        message.add_property(name, value)
    if item.get("group"):
        message.message_group = item["group"]
    if "delay_s" in item:
        message.delivery_timestamp = int(time.time()) + item["delay_s"]  # seconds, whatever its docstring says
    transaction = producer.begin_transaction() if "transaction" in item else None
    receipt = producer.send(message, transaction)
    emit(
        {
            "sent": receipt.message_id,
            "offset": receipt.offset,
            "transaction_id": receipt.transaction_id or None,
            "recall_handle": receipt.recall_handle,
        }
    )
    if item.get("transaction") in ("commit", "rollback"):
        getattr(transaction, item["transaction"])()
        emit({"ended": item["body"], "as": item["transaction"]})
    if item.get("recall"):
        emit({"recalled": producer.recall_message(topic, receipt.recall_handle)})


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


def drain(config: ClientConfiguration, spec: dict) -> None:
    consumer = SimpleConsumer(config, spec["group"], {spec["topic"]: subscription(spec)}, await_duration=5)
    consumer.startup()
    emit({"started": True})
    try:
        while not select.select([sys.stdin], [], [], 0)[0]:  # until the test closes stdin
            try:
                messages = consumer.receive(16, spec.get("invisible_s", 10))
            except Exception as error:  # the proxy is down: the next call may find it up
                emit(failed(error))
                time.sleep(0.2)
                continue
            for message in messages:
                emit({"received": view(message)})
                ack_until_answered(consumer, message, spec.get("deadline_s", 120))
    finally:
        consumer.shutdown()


def ack_until_answered(consumer: SimpleConsumer, message, deadline_s: float) -> None:
    """Ack `message`, again while the proxy cannot be reached, as an application would: a proxy killed after it
    acked and before it answered leaves the message acked (the store's ack is durable) and the client told nothing,
    and the same ack answers OK again. Until an answer: a refusal means the handle is stale (its invisible time
    ended and it was delivered again, so it comes again), which is not a failure of the proxy; bounded by
    `deadline_s`, a proxy restart taking longer than the invisible time."""
    deadline = time.monotonic() + deadline_s
    while True:
        try:
            consumer.ack(message)
        except Exception as error:
            emit({"ack_failed": message.message_id, **failed(error)})
            if failed(error)["code"] not in UNREACHED or time.monotonic() > deadline:
                return
            time.sleep(0.2)
        else:
            emit({"acked": message.message_id})
            return


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
        {"producer": produce, "simple": simple, "drain": drain, "push": push}[spec["role"]](config, spec)
    except Exception as error:  # startup refused, ...
        emit(failed(error))


if __name__ == "__main__":
    main()
