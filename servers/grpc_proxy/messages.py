"""RocketMQ 5 messages (`apache.rocketmq.v2.Message`) and TideMQ's, both ways: what a SendMessage stores, and what
a ReceiveMessage hands out.

A sent message is stored as a TideMQ message with
    body              the body (a GZIP `body_encoding` decompressed first: the store keeps what the producer meant)
    tag, keys         the record's tag and keys
    user_properties   its properties as they are (a name the broker writes itself, or a delay message's due
                      time, is refused: ILLEGAL_MESSAGE_PROPERTY_KEY)
    message_id        the message's id (`Message.msg_id`, kept as MESSAGE_ID, RocketMQ's `UNIQ_KEY`), as RocketMQ has it
    message_group     the record's message group (a FIFO topic's messages each have one; the produce logic routes
                      the message to its group's queue, whatever queue the client had in mind)
    born_timestamp    the record's born timestamp
    delivery_timestamp  a delay message's due time (TIMER_DELIVER_MS, tidemq_protocol.timer): the store keeps it as
                      a timer until then (tidemq_store/timer)
The client's `message_type` must be the topic's (MESSAGE_PROPERTY_CONFLICT_WITH_TYPE; the store checks the rest: a
DELAY topic's messages each have a delivery time, no other topic's do). A TRANSACTION message is stored the same
way, as the half message of its transaction (service.py's SendMessage sends it so).

A delivered message carries RocketMQ's system properties: the producer's id (the store's own for a message sent
over HTTP; a delay message kept for later and a transaction's message have the id the store gave them, answered
to the send), receipt handle, delivery attempt, queue and offset, store time, a delay message's delivery time, and
a `body_digest` (MD5 in upper-case hex, which every client compares alike; Node compares CRC32 as decimal, Python
as hex).
"""

from __future__ import annotations

import hashlib
import zlib
from collections.abc import Mapping

from google.protobuf.duration_pb2 import Duration
from google.protobuf.timestamp_pb2 import Timestamp

from functions.logic.dead_letters import DLQ_MESSAGE_ID, ORIGIN_PROPERTIES
from tidemq_protocol.codec import ProduceFrame
from tidemq_protocol.errors import MessageTooLarge, MessageTypeMismatch
from tidemq_protocol.message import Message, MessageType, StoredMessage
from tidemq_protocol.record import (
    KEYS,
    MESSAGE_GROUP,
    MESSAGE_ID,
    RESENT_FOR_GROUP,
    TAGS,
    TIMER_DELAY_MS,
    TIMER_DELIVER_MS,
    check_message_group,
    encode_properties,
)
from tidemq_store.pop.receive import Popped

from .protocol import definition_pb2 as pb
from .status import Code, Refused, about

BROKER_WRITTEN = frozenset({KEYS, TAGS, MESSAGE_GROUP, MESSAGE_ID, RESENT_FOR_GROUP, DLQ_MESSAGE_ID})
"""Property names the broker writes itself: a producer may not set them."""
DUE_TIME = frozenset({TIMER_DELIVER_MS, TIMER_DELAY_MS})
"""A delay message's due time (tidemq_protocol.timer): RocketMQ's `delivery_timestamp`, not a user property."""
RESERVED_PROPERTIES = BROKER_WRITTEN | frozenset(ORIGIN_PROPERTIES) | DUE_TIME
SYSTEM_CARRIED = frozenset({MESSAGE_GROUP, TIMER_DELIVER_MS})
"""Properties a delivered message carries as system properties rather than user properties."""
MAX_MESSAGE_ID = 128

MESSAGE_TYPES = {
    MessageType.NORMAL: pb.NORMAL,
    MessageType.FIFO: pb.FIFO,
    MessageType.DELAY: pb.DELAY,
    MessageType.TRANSACTION: pb.TRANSACTION,
}
"""A TideMQ topic's message type -> RocketMQ's (a topic accepts exactly its own)."""


def millis(stamp: Timestamp) -> int:
    return stamp.seconds * 1000 + stamp.nanos // 1_000_000


def timestamp(ms: int) -> Timestamp:
    stamp = Timestamp()
    stamp.FromMilliseconds(ms)
    return stamp


def duration(ms: int) -> Duration:
    span = Duration()
    span.FromMilliseconds(ms)
    return span


def to_store(message: pb.Message, topic_type: MessageType, max_bytes: int) -> ProduceFrame:
    """The message a sent one is stored as (see the module docstring), checked field by field with RocketMQ's codes;
    no queue: the produce logic routes it."""
    system = message.system_properties
    declared = system.message_type
    if declared != pb.MESSAGE_TYPE_UNSPECIFIED and declared != MESSAGE_TYPES[topic_type]:
        raise MessageTypeMismatch(
            f"a {pb.MessageType.Name(declared)} message cannot go to topic {message.topic.name!r}, of type {topic_type}"
        )
    message_id = system.message_id
    if not message_id or len(message_id) > MAX_MESSAGE_ID or not message_id.isprintable():
        raise Refused(Code.ILLEGAL_MESSAGE_ID, f"message_id must be 1..{MAX_MESSAGE_ID} printable characters")
    body = _body(message, max_bytes)
    tag = system.tag if system.HasField("tag") else None
    keys = tuple(system.keys)
    with about(Code.ILLEGAL_MESSAGE_TAG):
        encode_properties((), tag, {})
    with about(Code.ILLEGAL_MESSAGE_KEY):
        encode_properties(keys, None, {})
    properties = _user_properties(message.user_properties)
    if system.HasField("message_group"):
        with about(Code.ILLEGAL_MESSAGE_GROUP):
            properties[MESSAGE_GROUP] = check_message_group(system.message_group)
    if system.HasField("delivery_timestamp"):
        properties[TIMER_DELIVER_MS] = str(max(millis(system.delivery_timestamp), 0))
    born = millis(system.born_timestamp) if system.HasField("born_timestamp") else None
    return ProduceFrame(Message(body, 0, keys, tag, properties, born, message_id), None, None)


def _body(message: pb.Message, max_bytes: int) -> bytes:
    encoding = message.system_properties.body_encoding
    if encoding == pb.GZIP:
        inflate = zlib.decompressobj(wbits=47)  # a gzip or zlib header
        try:
            body = inflate.decompress(message.body, max_bytes + 1)
        except zlib.error as error:
            raise Refused(Code.MESSAGE_CORRUPTED, f"the GZIP body does not inflate: {error}") from None
        if len(body) > max_bytes or inflate.unconsumed_tail:
            raise MessageTooLarge(f"the body inflates to more than {max_bytes} bytes")
    elif encoding in (pb.IDENTITY, pb.ENCODING_UNSPECIFIED):
        body = message.body
    else:
        raise Refused(Code.BAD_REQUEST, f"body_encoding {encoding} is not one RocketMQ defines")
    if not body:
        raise Refused(Code.MESSAGE_BODY_EMPTY, "a message needs a body")
    return body


def _user_properties(given: Mapping[str, str]) -> dict[str, str]:
    reserved = sorted(name for name in given if name in RESERVED_PROPERTIES)
    if reserved:
        raise Refused(Code.ILLEGAL_MESSAGE_PROPERTY_KEY, f"property names {reserved} are the broker's own")
    properties = dict(given)
    with about(Code.ILLEGAL_MESSAGE_PROPERTY_KEY):
        encode_properties((), None, properties)
    return properties


def delivered(popped: Popped, invisible_ms: int, topic_type: MessageType, namespace: str, broker: str) -> pb.Message:
    """A received message, held for `invisible_ms`, as RocketMQ's clients take it (see the module docstring)."""
    message = stored(popped.message, topic_type, namespace, broker)
    system = message.system_properties
    system.receipt_handle = popped.receipt_handle
    system.delivery_attempt = popped.attempt
    system.invisible_duration.CopyFrom(duration(invisible_ms))
    return message


def stored(message: StoredMessage, topic_type: MessageType, namespace: str, broker: str) -> pb.Message:
    """A stored message with its system properties (no delivery's: `delivered` adds those)."""
    properties = message.properties
    system = pb.SystemProperties(
        keys=message.keys,
        message_id=message.msg_id,
        body_digest=pb.Digest(type=pb.MD5, checksum=hashlib.md5(message.body).hexdigest().upper()),
        body_encoding=pb.IDENTITY,
        message_type=MESSAGE_TYPES[topic_type],
        born_timestamp=timestamp(message.born_timestamp),
        store_timestamp=timestamp(message.store_timestamp),
        store_host=broker,
        queue_id=message.queue,
        queue_offset=message.queue_offset,
    )
    if message.tag is not None:
        system.tag = message.tag
    if MESSAGE_GROUP in properties:
        system.message_group = properties[MESSAGE_GROUP]
    if TIMER_DELIVER_MS in properties:
        system.delivery_timestamp.CopyFrom(timestamp(int(properties[TIMER_DELIVER_MS])))
    return pb.Message(
        topic=pb.Resource(resource_namespace=namespace, name=message.topic),
        user_properties={name: value for name, value in properties.items() if name not in SYSTEM_CARRIED},
        system_properties=system,
        body=message.body,
    )
