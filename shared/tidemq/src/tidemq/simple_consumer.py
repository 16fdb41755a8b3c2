"""SimpleConsumer: pop consumption (RocketMQ 5's SimpleConsumer, SQS's receive and delete). Messages of a topic are
received from any of its queues, each held for this consumer for an invisible time, and acked one by one.

    with SimpleConsumer("orders", group="billing") as consumer:
        for message in consumer.receive(max_messages=16, wait_ms=10_000):
            handle(message.body_bytes())
            consumer.ack(message)

A message neither acked nor given back (`release`, `nack`) is delivered again, to this consumer or another, with
its `attempt` + 1 once its invisible time ends; `change_invisible` holds it longer; `nack` gives it back to be
delivered again after the group's backoff. After the group's max_delivery_attempts it goes to `%DLQ%<group>`.
Many consumers of one group share a topic without assigning queues, and the group holds each message for one of
them at a time. The group must exist (`Admin().create_group`).
"""

from __future__ import annotations

from collections.abc import Iterable

from tidemq_protocol.api.pop import AckResponse, ChangeInvisibleResponse, ReceivedMessage, ReceiveResponse
from tidemq_protocol.errors import InvalidReceiptHandle

from .api_client import ApiClient
from .client import HttpClient, segment

Delivery = ReceivedMessage | str
"""A delivery, named by the message as received or by its receipt handle."""


def handle_of(delivery: Delivery) -> str:
    return delivery if isinstance(delivery, str) else delivery.receipt_handle


class SimpleConsumer(ApiClient):
    """Receives messages of `topic` for pop group `group` (matching the `tag` filter, if given)."""

    def __init__(
        self,
        topic: str,
        group: str,
        *,
        tag: str | None = None,
        invisible_ms: int | None = None,
        url: str | None = None,
        client: HttpClient | None = None,
    ) -> None:
        super().__init__(url, client=client)
        self.topic, self.group, self.tag, self.invisible_ms = topic, group, tag, invisible_ms
        self._path = f"/v1/groups/{segment(group)}/topics/{segment(topic)}"

    def receive(
        self, max_messages: int = 32, *, invisible_ms: int | None = None, wait_ms: int = 0
    ) -> list[ReceivedMessage]:
        """Up to `max_messages` messages, each held for `invisible_ms` (else this consumer's, else the server's
        default); waits up to `wait_ms` for one when none is there."""
        request = {"max_messages": max_messages, "wait_ms": wait_ms, "tag": self.tag}
        invisible_ms = invisible_ms if invisible_ms is not None else self.invisible_ms
        if invisible_ms is not None:
            request["invisible_ms"] = invisible_ms
        response = self._client.request("POST", f"{self._path}/receive", json=request)
        return ReceiveResponse.model_validate_json(response.content).messages

    def ack(self, delivery: Delivery) -> None:
        """Ack one delivery: the message is done for the group. InvalidReceiptHandle if the handle names no current
        delivery (the message was delivered again or its invisible time changed since); an ack of a message acked
        before succeeds."""
        (status,) = self.ack_all([delivery])
        if status == "invalid_receipt_handle":
            raise InvalidReceiptHandle(f"receipt handle {handle_of(delivery)!r} names no current delivery")

    def ack_all(self, deliveries: Iterable[Delivery]) -> list[str]:
        """Ack deliveries in one request; what each became: acked, already_acked or invalid_receipt_handle."""
        handles = [handle_of(delivery) for delivery in deliveries]
        response = self._client.request("POST", f"{self._path}/ack", json={"receipt_handles": handles})
        return [result.status for result in AckResponse.model_validate_json(response.content).results]

    def change_invisible(self, delivery: Delivery, invisible_ms: int) -> str:
        """Hold a delivery for `invisible_ms` from now; its new receipt handle (the one it had is spent)."""
        body = {"receipt_handle": handle_of(delivery), "invisible_ms": invisible_ms}
        response = self._client.request("POST", f"{self._path}/change-invisible", json=body)
        return ChangeInvisibleResponse.model_validate_json(response.content).receipt_handle

    def release(self, delivery: Delivery, delay_ms: int = 0) -> None:
        """Give a delivery back: the message is delivered again after `delay_ms`, its next attempt."""
        body = {"receipt_handle": handle_of(delivery), "delay_ms": delay_ms}
        self._client.request("POST", f"{self._path}/release", json=body)

    def nack(self, delivery: Delivery) -> None:
        """Give a delivery back as failed: the message is delivered again after the group's backoff for this
        attempt (its retry policy), or goes to its dead letters if this was its last attempt."""
        self._client.request("POST", f"{self._path}/release", json={"receipt_handle": handle_of(delivery)})
