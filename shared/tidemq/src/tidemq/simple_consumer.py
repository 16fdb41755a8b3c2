"""SimpleConsumer: pop consumption (RocketMQ 5's SimpleConsumer, SQS's receive and delete). Messages of a topic are
received from any of its queues, each held for this consumer for an invisible time, and acked one by one.

    with SimpleConsumer("orders", group="billing") as consumer:
        for received in consumer.receive(max_messages=16, wait_ms=10_000):
            handle(received.message.body)
            consumer.ack(received)

A message neither acked nor given back (`release`, `nack`) is delivered again, to this consumer or another, with
its `attempt` + 1 once its invisible time ends; `change_invisible` holds it longer; `nack` gives it back to be
delivered again after the group's backoff. After the group's max_delivery_attempts it goes to `%DLQ%<group>`, and
from then on its handles are refused with MessageDeadLettered (an ack's status: `dead_lettered`): the work is not
settled, the message waits among the dead letters.
Many consumers of one group share a topic without assigning queues, and the group holds each message for one of
them at a time. The group must exist (`Admin().create_group`).

Receives use the binary route (`.../receive/batch`, tidemq_protocol/codec.py): each message comes as its record,
CRC-checked here, with its receipt handle, attempt and invisible time (`codec.Received`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from tidemq_protocol import codec
from tidemq_protocol.api.pop import AckResponse, ChangeInvisibleResponse
from tidemq_protocol.codec import ReceiveBatch, Received
from tidemq_protocol.errors import InvalidReceiptHandle, MessageDeadLettered
from tidemq_protocol.filter import subscription_filter

from .api_client import ApiClient
from .client import HttpClient, segment

Delivery = Received | str
"""A delivery, named as received or by its receipt handle."""


def handle_of(delivery: Delivery) -> str:
    return delivery if isinstance(delivery, str) else delivery.receipt_handle


class SimpleConsumer(ApiClient):
    """Receives messages of `topic` for pop group `group`: those its filter selects, if it has one (a `tag`
    expression, or a SQL92 expression `sql` over message properties: not both; checked here, before any request,
    so a bad expression is an InvalidFilterExpression naming its position)."""

    def __init__(
        self,
        topic: str,
        group: str,
        *,
        tag: str | None = None,
        sql: str | None = None,
        invisible_ms: int | None = None,
        url: str | None = None,
        client: HttpClient | None = None,
    ) -> None:
        subscription_filter(tag, sql)  # raises before any request
        super().__init__(url, client=client)
        self.topic, self.group, self.tag, self.sql, self.invisible_ms = topic, group, tag, sql, invisible_ms
        self._path = f"/v1/groups/{segment(group)}/topics/{segment(topic)}"

    def receive(self, max_messages: int = 32, *, invisible_ms: int | None = None, wait_ms: int = 0) -> list[Received]:
        """Up to `max_messages` messages, each held for `invisible_ms` (else this consumer's, else the server's
        default); waits up to `wait_ms` for one when none is there."""
        return self._receive((), max_messages, invisible_ms, wait_ms).received

    def ack_and_receive(
        self,
        deliveries: Iterable[Delivery],
        max_messages: int = 32,
        *,
        invisible_ms: int | None = None,
        wait_ms: int = 0,
    ) -> ReceiveBatch:
        """Ack `deliveries` (as `ack_all`), then receive (as `receive`), in one request: a consumer done with a
        batch acks it as it asks for the next. What each ack became (`.acks`) and the messages (`.received`). The
        acks are made first and stand whatever the receive finds; if the request fails, `ack_all` them again
        (an ack made before answers already_acked)."""
        return self._receive([handle_of(delivery) for delivery in deliveries], max_messages, invisible_ms, wait_ms)

    def _receive(
        self, handles: Sequence[str], max_messages: int, invisible_ms: int | None, wait_ms: int
    ) -> ReceiveBatch:
        request = {"max_messages": max_messages, "wait_ms": wait_ms, "tag": self.tag}
        if self.sql is not None:
            request["sql"] = self.sql
        invisible_ms = invisible_ms if invisible_ms is not None else self.invisible_ms
        if invisible_ms is not None:
            request["invisible_ms"] = invisible_ms
        if handles:
            request["ack"] = handles
        response = self._client.request("POST", f"{self._path}/receive/batch", json=request)
        return codec.decode_receive(response.content)

    def ack(self, delivery: Delivery) -> None:
        """Ack one delivery: the message is done for the group. InvalidReceiptHandle if the handle names no current
        delivery (the message was delivered again or its invisible time changed since); its subclass
        MessageDeadLettered if the message went to the group's dead letters without an ack (its work is not
        settled: catch it first to tell the two apart); an ack of a message acked before succeeds."""
        (status,) = self.ack_all([delivery])
        if status == "dead_lettered":
            raise MessageDeadLettered(
                f"receipt handle {handle_of(delivery)!r} names a message that went to the group's dead letters"
            )
        if status == "invalid_receipt_handle":
            raise InvalidReceiptHandle(f"receipt handle {handle_of(delivery)!r} names no current delivery")

    def ack_all(self, deliveries: Iterable[Delivery]) -> list[str]:
        """Ack deliveries in one request; what each became: acked, already_acked, invalid_receipt_handle or
        dead_lettered (the message went to the group's dead letters without an ack: not settled)."""
        handles = [handle_of(delivery) for delivery in deliveries]
        response = self._client.request("POST", f"{self._path}/ack", json={"receipt_handles": handles})
        return [result.status for result in AckResponse.model_validate_json(response.content).results]

    def change_invisible(self, delivery: Delivery, invisible_ms: int) -> str:
        """Hold a delivery for `invisible_ms` from now; its new receipt handle (the one it had is spent).
        InvalidReceiptHandle if the handle names no current delivery (MessageDeadLettered: its message went to the
        dead letters), as for `release` and `nack`."""
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
