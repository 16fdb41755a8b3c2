"""Producer: send messages to one topic, one at a time (JSON) or in binary batches (the fast path).

    with Producer("orders") as producer:
        producer.send(b"hello", keys=["order-1"], tag="new")
        for line in lines:
            producer.add(line, tag="bulk")      # sent batch_size at a time
    # leaving the block sends what is still buffered

A batch is stored atomically (all or nothing). Without a queue or sharding key the server puts a
whole batch in one queue, chosen round-robin per batch; one sharding key always goes to one queue.
A FIFO topic takes only messages with a `message_group` (and no other topic takes them): one group's messages go
to one queue, in the order sent, and a FIFO consumer group receives them in that order.

Every batch is sent with an idempotency key of its own (the `Idempotency-Key` header), the same on its retries
(after a connection error or a 5xx, see HttpClient) and when `flush` sends a batch that failed again: the server
stores it once, though an attempt whose answer was lost had stored it (within TIDEMQ_SEND_DEDUP_WINDOW_MS, 5 minutes).

A DELAY topic takes only delay messages, each with a `delivery_time` (a datetime, or ms since the epoch) or a
`delay` (a timedelta, or ms): no consumer sees one before then. One sent for later comes back with offset -1 and a
`recall_handle`, which `recall` takes to cancel it before it is due:

    sent = producer.send(b"remind me", delay=timedelta(minutes=10))
    producer.recall(sent.recall_handle)     # never delivered (TimerDelivered if it was already)
"""

from __future__ import annotations

import uuid
from collections import deque
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TypedDict, Unpack

from tidemq_protocol import codec
from tidemq_protocol.limits import MAX_TIMERS_PER_PUT
from tidemq_protocol.message import Message
from tidemq_protocol.record import MESSAGE_GROUP
from tidemq_protocol.timer import delivery_properties

from .api_client import ApiClient
from .client import HttpClient, segment

DEFAULT_BATCH_SIZE = 100
DEFAULT_MAX_BATCH_BYTES = 4 * 1024 * 1024
"""Half the server's default limit on one put (TIDEMQ_MAX_BATCH_BYTES), leaving room for framing."""


@dataclass(slots=True, frozen=True)
class OutgoingMessage:
    """A message to send: body, keys (for lookups), tag (for filtering), user properties, and where to
    put it: an explicit `queue`, else the queue of its `message_group` or `sharding_key`, else the server's choice.
    A FIFO topic's messages each have a `message_group` (RocketMQ's messageGroup, SQS's MessageGroupId)."""

    body: bytes
    keys: Sequence[str] = ()
    tag: str | None = None
    properties: Mapping[str, str] = field(default_factory=dict)
    queue: int | None = None
    sharding_key: str | None = None
    message_group: str | None = None
    delivery_time: datetime | int | None = None
    delay: timedelta | int | None = None


@dataclass(slots=True, frozen=True)
class SendResult:
    """Where a message was stored, and how far its put got (RocketMQ's sendStatus): `SEND_OK`, or, from a
    BrokerContainer's SYNC_MASTER whose slave did not confirm it, `FLUSH_SLAVE_TIMEOUT` or `SLAVE_NOT_AVAILABLE`
    (stored on the master only). A delay message sent for later has offset -1 and a `recall_handle` (else None).
    `store_timestamp`: when the broker stored it (epoch ms; None from a server that does not say)."""

    msg_id: str
    queue: int
    offset: int
    send_status: str = "SEND_OK"
    recall_handle: str | None = None
    store_timestamp: int | None = None


@dataclass(slots=True, frozen=True)
class RecallResult:
    """A recalled delay message: it will never be delivered (`again`: a recall of it came before)."""

    msg_id: str
    due_ms: int
    again: bool


class MessageOptions(TypedDict, total=False):
    """What `Producer.send` and `Producer.add` take beside the body: the keyword arguments of `outgoing`."""

    keys: Sequence[str]
    tag: str | None
    properties: Mapping[str, str] | None
    queue: int | None
    sharding_key: str | None
    message_group: str | None
    delivery_time: datetime | int | None
    delay: timedelta | int | None


def outgoing(
    body: bytes | str,
    *,
    keys: Sequence[str] = (),
    tag: str | None = None,
    properties: Mapping[str, str] | None = None,
    queue: int | None = None,
    sharding_key: str | None = None,
    message_group: str | None = None,
    delivery_time: datetime | int | None = None,
    delay: timedelta | int | None = None,
) -> OutgoingMessage:
    """A message to send (`body`: bytes, or text sent as UTF-8), for `Producer.send_batch`; a delay message (a DELAY
    topic's) with a `delivery_time` (a datetime, or ms since the epoch) or a `delay` (a timedelta, or ms)."""
    data = body.encode() if isinstance(body, str) else bytes(body)
    delivery_properties(delivery_time, delay)  # InvalidArgument now, not at the send
    return OutgoingMessage(
        data, tuple(keys), tag, dict(properties or {}), queue, sharding_key, message_group, delivery_time, delay
    )


def _stored(message: OutgoingMessage) -> Message:
    queue = -1 if message.queue is None else message.queue  # -1: the server chooses
    properties = message.properties
    if message.message_group is not None:  # a property the record carries (tidemq_protocol.record.MESSAGE_GROUP)
        properties = {**properties, MESSAGE_GROUP: message.message_group}
    if message.delivery_time is not None or message.delay is not None:  # TIMER_DELIVER_MS or TIMER_DELAY_MS
        properties = {**properties, **delivery_properties(message.delivery_time, message.delay)}
    return Message(message.body, queue, tuple(message.keys), message.tag, properties)


def new_send_key() -> str:
    """A fresh idempotency key for one batch (sent again with its retries: the server stores the batch once)."""
    return uuid.uuid4().hex


def _lane(batch: Sequence[OutgoingMessage]) -> int | None:
    """The one queue every message of `batch` names (and no sharding key), else None."""
    queues = {m.queue for m in batch}
    if len(queues) != 1 or None in queues or any(m.sharding_key for m in batch):
        return None
    return queues.pop()


def _encode(topic: str, messages: Sequence[OutgoingMessage]) -> tuple[list[bytes], str]:
    """Each message encoded for one produce request, and the request's content type: records the store appends
    as they are (tidemq_protocol/codec.py), or frames when a message has a sharding key (which records do not carry)."""
    if any(m.sharding_key for m in messages):
        return [codec.encode_produce([(_stored(m), m.sharding_key)]) for m in messages], codec.CONTENT_TYPE
    return [codec.encode_records(topic, [_stored(m)]) for m in messages], codec.RECORDS_CONTENT_TYPE


class Producer(ApiClient):
    """Sends messages to `topic`. Connection errors and 5xx are retried with backoff (see HttpClient)."""

    def __init__(
        self,
        topic: str,
        url: str | None = None,
        *,
        client: HttpClient | None = None,
        batch_size: int = DEFAULT_BATCH_SIZE,
        max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES,
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        self.topic, self.batch_size, self.max_batch_bytes = topic, batch_size, max_batch_bytes
        super().__init__(url, client=client)
        self._buffer: list[OutgoingMessage] = []
        self._unsent: tuple[str, int] | None = None
        """The key and size of the buffered batch whose send failed: `flush` sends it again as it was."""

    def send(self, body: bytes | str, **options: Unpack[MessageOptions]) -> SendResult:
        """Send one message now and return where it was stored (a binary batch of one, as `send_batch` sends);
        `options` as `outgoing` takes them."""
        return self.send_batch([outgoing(body, **options)])[0]

    def send_batch(self, messages: Sequence[OutgoingMessage]) -> list[SendResult]:
        """Send `messages` as one binary batch, stored all or nothing; results in the same order.

        The server bounds a batch (TIDEMQ_MAX_BATCH_MESSAGES, TIDEMQ_MAX_BATCH_BYTES): over them this raises
        InvalidBatch or MessageTooLarge. `add` and `flush` send batches that fit.
        """
        if not messages:
            return []
        encoded, content_type = _encode(self.topic, messages)
        return self._post(b"".join(encoded), content_type, new_send_key())

    def send_pipelined(
        self, batches: Iterable[Sequence[OutgoingMessage]], in_flight: int = 4
    ) -> Iterator[list[SendResult]]:
        """Send `batches` with up to `in_flight` of them outstanding at once (each on a connection of its own),
        yielding each batch's results in the order the batches came.

        Order per queue is kept: a batch whose messages all name one queue goes out once no earlier batch to that
        queue is still in flight; any other batch (the server choosing its queue, several queues, sharding keys)
        goes out alone, once everything before it is answered, and nothing after it goes out before it is. So
        name each batch's queue to pipeline. A batch that fails raises when its turn comes; batches sent after it
        may have been stored (at least once, as any retried produce). Batches go out as the results are iterated:

            for results in producer.send_pipelined(batches, in_flight=8):
                ...
        """
        if in_flight < 1:
            raise ValueError(f"in_flight must be at least 1, got {in_flight}")
        pending: deque[tuple[int | None, Future[list[SendResult]]]] = deque()
        with ThreadPoolExecutor(in_flight, thread_name_prefix="tidemq-send") as senders:
            for batch in batches:
                lane = _lane(batch)
                while pending and (
                    len(pending) == in_flight or lane is None or any(busy in (lane, None) for busy, _ in pending)
                ):
                    yield pending.popleft()[1].result()
                pending.append((lane, senders.submit(self.send_batch, list(batch))))
            while pending:
                yield pending.popleft()[1].result()

    def add(self, body: bytes | str, **options: Unpack[MessageOptions]) -> list[SendResult]:
        """Buffer a message (`options` as `outgoing` takes them). Once `batch_size` are buffered they are sent, and
        their results returned; until then this returns []."""
        self._buffer.append(outgoing(body, **options))
        return self.flush() if len(self._buffer) >= self.batch_size else []

    @property
    def buffered(self) -> int:
        """Messages added and not sent yet."""
        return len(self._buffer)

    def _batch_size(self) -> int:
        """`batch_size`, but at most MAX_TIMERS_PER_PUT when the next batch holds a delay message (a server takes no
        more in one put)."""
        head = self._buffer[: self.batch_size]
        timed = any(m.delay is not None or m.delivery_time is not None for m in head)
        return min(self.batch_size, MAX_TIMERS_PER_PUT) if timed else self.batch_size

    def flush(self) -> list[SendResult]:
        """Send everything buffered, in batches of at most `batch_size` messages and `max_batch_bytes`."""
        results: list[SendResult] = []
        while self._buffer:
            encoded, content_type = _encode(self.topic, self._buffer[: self._batch_size()])
            if self._unsent is None:
                taken, size = 0, 0
                for message in encoded:
                    if taken and size + len(message) > self.max_batch_bytes:
                        break
                    taken += 1
                    size += len(message)
                self._unsent = (new_send_key(), taken)
            key, taken = self._unsent  # a batch whose send failed goes again as it was, under its key
            results += self._post(b"".join(encoded[:taken]), content_type, key)
            del self._buffer[:taken]  # only once stored: a batch that failed stays buffered
            self._unsent = None
        return results

    def _post(self, batch: bytes, content_type: str, send_key: str) -> list[SendResult]:
        headers = {
            "content-type": content_type,
            "accept": f"{codec.SENT_CONTENT_TYPE}, text/plain;q=0.5",  # the binary reply, where the server has it
            codec.IDEMPOTENCY_KEY_HEADER: send_key,  # the same on each retry
        }
        response = self._client.request(
            "POST", f"/v1/topics/{segment(self.topic)}/batch", content=batch, headers=headers
        )
        status = response.headers.get(codec.SEND_STATUS_HEADER, "SEND_OK")
        if response.headers.get("content-type", "").startswith(codec.SENT_CONTENT_TYPE):
            return [
                SendResult(sent.msg_id, sent.queue, sent.queue_offset, status, sent.recall_handle, sent.store_timestamp)
                for sent in codec.decode_sent(response.content)
            ]
        results = []
        for line in response.text.splitlines():  # "msg_id queue offset [recall_handle]" per message, in order
            msg_id, queue, offset, *handle = line.split()
            results.append(SendResult(msg_id, int(queue), int(offset), status, handle[0] if handle else None))
        return results

    def recall(self, recall_handle: str) -> RecallResult:
        """Recall a delay message of this topic before it is due (its send's `recall_handle`): it is then never
        delivered. TimerDelivered if it was delivered already; TimerNotFound if the handle names none of the
        topic's; a recall sent again answers as the first did (`again`)."""
        response = self._client.request(
            "POST", f"/v1/topics/{segment(self.topic)}/recall", json={"recall_handle": recall_handle}
        )
        answer = response.json()
        return RecallResult(answer["msg_id"], answer["due_ms"], answer["status"] == "already_recalled")

    def close(self) -> None:
        """Send what is buffered, then close the HTTP client (unless it was passed in)."""
        try:
            self.flush()
        finally:
            self._release_client()

    def __exit__(self, exc_type: object, *exc_info: object) -> None:
        if exc_type is None:
            self.close()
        else:
            self._release_client()  # an error left the block: do not send half a job
