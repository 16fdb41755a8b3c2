"""The HTTP API's bodies for pop consumption: receive messages held for an invisible time, ack them, change their
invisible time, or give them back (RocketMQ 5's ReceiveMessage, AckMessage and ChangeInvisibleDuration; SQS's
ReceiveMessage, DeleteMessageBatch and ChangeMessageVisibility). The requests whose bounds are the server's settings
are the server's (functions/api/pop_requests.py)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from tidemq_protocol.message import StoredMessage

from .common import ApiModel
from .messages import MessageView

RECEIPT_HANDLE_PATTERN = r"^[A-Za-z0-9_-]{28}$"
ReceiptHandle = Annotated[
    str, Field(pattern=RECEIPT_HANDLE_PATTERN, description="A receipt handle, as a receive or a change returned it.")
]


class ReceivedMessage(MessageView):
    receipt_handle: str = Field(description="Names this delivery to ack it or change its invisible time.")
    attempt: int = Field(description="Which delivery of the message this is: 1 the first, more after retries.")
    invisible_until_ms: int = Field(description="Held for this consumer until then (epoch milliseconds).")

    @classmethod
    def held(
        cls, message: StoredMessage, receipt_handle: str, attempt: int, invisible_until_ms: int
    ) -> ReceivedMessage:
        view = MessageView.of(message)
        return cls.model_construct(
            **view.__dict__, receipt_handle=receipt_handle, attempt=attempt, invisible_until_ms=invisible_until_ms
        )


AckStatus = Literal["acked", "already_acked", "invalid_receipt_handle", "dead_lettered"]  # codec.ACK_STATUSES, in order
MOST_ACKED = 1000  # handles one request acks


class ReceiveResponse(ApiModel):
    messages: list[ReceivedMessage]
    acks: list[AckStatus] = Field(
        default_factory=list, description="What became of each handle of the request's `ack`, in order."
    )


class AckRequest(ApiModel):
    receipt_handles: list[ReceiptHandle] = Field(min_length=1, max_length=MOST_ACKED)


class AckResult(ApiModel):
    receipt_handle: str
    status: AckStatus = Field(
        description="acked; already_acked (acked before: nothing changed); invalid_receipt_handle (the handle names "
        "no current delivery: the message was delivered again or changed since, or the handle is forged); "
        "dead_lettered (the message went to the group's dead letters, %DLQ%<group>, without an ack: nothing changed, "
        "and the work is not settled)"
    )


class AckResponse(ApiModel):
    results: list[AckResult]


class ChangeInvisibleResponse(ApiModel):
    receipt_handle: str = Field(description="The delivery's new handle: the one sent is spent.")
    invisible_until_ms: int
