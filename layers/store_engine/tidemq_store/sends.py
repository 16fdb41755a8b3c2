"""Idempotent sends: a batch sent again under the key of one the topic stored within the deduplication window is
answered with the first send's results (the same message ids, queues and offsets) and stored once. This module owns
the key, the batch digest and the record of a send every backend keeps.

Why. A producer that gets no answer cannot tell a lost request from a lost answer, so it sends again: RocketMQ 5's
clients resend a message with the same message id (the Python client at once, up to three attempts), TideMQ's SDK
resends a batch after a connection error or a 5xx. Without this each resend may store the batch again (at least
once). With it a producer that names its sends stores each once, as Kafka's idempotent producer and SQS FIFO's
MessageDeduplicationId do (RocketMQ itself does not).

The key. `SendKey`: what the producer assigned to one send, at most `MAX_SEND_KEY` printable ASCII characters, one
per topic (the same key on another topic is another send): the SDK's `Idempotency-Key` header, made once per batch
and sent again on its retries, or over gRPC the message ids of a SendMessage (`grpc_send_key`).

What is compared. `batch_digest`: two checksums of different polynomials (CRC32C and CRC-32, native code: about
15 µs each for 100 KiB where BLAKE2b took 75) over each record's topic, properties and body, in order, with the
bytes and messages counted; not its queue or born timestamp: a resent batch the server routes again (round robin)
or a JSON one it gives a born time again is the same batch. It guards against a producer's mistake (its own key
reused for other messages; an accidental match is about one in 2^64), not against an adversary, who could only
spoil its own sends. A send whose key is held with another digest is refused (`SendConflict`: HTTP 409, gRPC
ILLEGAL_MESSAGE_ID) and stores nothing.

What is kept. `SentBatch`: the digest, when the batch was stored, and its results (`encode_sent`, one format for
both backends):

    stored_at:u64  durable_at:u64  digest:16 bytes  count:u32
    then count message ids (12 bytes each: their 24 hex digits), count queues (u32), count offsets (i64)

(integers little-endian; an offset of -1: a timer message's or a half message's, on no queue yet; `durable_at`:
the embedded commit log's position a retry waits for before it answers, as the first send did; 0 on the serverless
backend and in the embedded timers' and transactions' records, durable when they are written).

Where, and why it is atomic with the put:
- embedded (embedded/store.py): the batch's append to the commit log ends with one more record, flagged SEND_KEY
  (tidemq_protocol.record.v2), whose body is `encode_send_mark` (digest, then key): recovery keeps or drops a batch
  whole, so the key is in the log exactly when the batch is. The ConsumeQueue's RocksDB keeps the `SentBatch`
  (family `sends`, key `topic 0x00 key`), written in the same write batch as the batch's entries, and a family
  `sent_at` (`stored_at:u64 BE topic 0x00 key`) that orders them by age; like every ConsumeQueue write it has no
  WAL, and recovery's replay of the log writes it again from the SEND_KEY record. A lookup and the append are made
  under the store's write lock, so two racing sends of a key store once; the second waits for `durable_at`, so it
  is never acknowledged before the first is durable.
- serverless (serverless/sends.py): an item of the `sends` table (`topic|key`) written, on condition that there is
  none younger than the window, in the one DynamoDB transaction that sequences the batch (queue_index.py): the batch
  gets offsets exactly when its key is recorded. Of two racing sends one transaction wins; the other finds the item
  and answers from it (its records stay in its segment file, referenced by nothing, which maintenance deletes).

Expiry. A record older than the window (`StoreConfig.send_dedup_window_ms`, 5 minutes as SQS's) is forgotten: it
reads as absent, and a send with its key stores anew. A record older than its topic (deleted and made again) reads
as absent too. Storage stays bounded: the embedded retention round deletes the records past the window (the
`sent_at` family, oldest first); the serverless items carry a DynamoDB TTL attribute (`purge_at`), and the
read-time check covers the hours TTL may take.

Sends that are not appended at once keep the same record, written with what they store instead:
- a DELAY topic's messages sent for later (timer/plan.py): with their timers, in one write (embedded: the timers'
  RocksDB write batch, embedded/timers.py; serverless: the timers' TransactWriteItems, serverless/timers.py). The
  results are the timers' (their ids, queues, offset -1); a resend is answered them with their recall handles.
- a transaction's half message (transactions/api.py): with the prepared transaction, in one write (embedded: the
  transaction log's write batch; serverless: a TransactWriteItems of the transaction's item and the key's). Its one
  result names the transaction; a resend is answered the transaction, and prepares nothing.
"""

from __future__ import annotations

import hashlib
import struct
import sys
import zlib
from array import array
from dataclasses import dataclass, replace

from crc32c import crc32c

from tidemq_protocol.errors import InvalidArgument, SendConflict
from tidemq_protocol.limits import MAX_SEND_KEY
from tidemq_protocol.record import TOPIC_LENGTH_AT
from tidemq_protocol.timer import recall_handle

from .batch import ValidatedBatch
from .model import PutResult

DIGEST_BYTES = 16
_SENT = struct.Struct("<QQ16sI")
_DIGEST = struct.Struct("<IIII")  # CRC32C, CRC-32, bytes, messages
ID_BYTES = 12  # a message id's 24 hexadecimal digits (tidemq_protocol.record.ids)


@dataclass(slots=True, frozen=True)
class SendKey:
    """A producer's name for one send of a batch to `topic` (see the module docstring), and the batch's digest."""

    key: str
    digest: bytes = b""


@dataclass(slots=True, frozen=True)
class SentBatch:
    """What a backend keeps of an idempotent send for the window: its digest, when it was stored, the commit-log
    position a retry waits for (embedded; 0 otherwise) and its results."""

    digest: bytes
    stored_at: int
    durable_at: int
    results: tuple[PutResult, ...]


def check_send_key(key: object) -> str:
    """`key` if it can name a send (1..MAX_SEND_KEY printable ASCII characters), else InvalidArgument."""
    if not isinstance(key, str) or not 1 <= len(key) <= MAX_SEND_KEY or not key.isascii() or not key.isprintable():
        raise InvalidArgument(f"an idempotency key is 1..{MAX_SEND_KEY} printable ASCII characters, got {key!r}")
    return key


def grpc_send_key(message_ids: list[str]) -> str:
    """The key of a RocketMQ SendMessage: its message id, or for several messages a digest of their ids (a client
    resends the same messages with the same ids)."""
    if len(message_ids) == 1 and len(message_ids[0]) <= MAX_SEND_KEY - 4:
        return "rmq:" + message_ids[0]
    return "rmq*" + hashlib.blake2b("\n".join(message_ids).encode(), digest_size=32).hexdigest()


def batch_digest(batch: ValidatedBatch) -> bytes:
    """The digest two sends of one key are compared by (see the module docstring)."""
    castagnoli, ieee, position = 0, 0, 0
    with memoryview(batch.records) as view:
        for size in batch.sizes:
            content = view[position + TOPIC_LENGTH_AT : position + size]  # lengths, topic, properties, body
            castagnoli, ieee = crc32c(content, castagnoli), zlib.crc32(content, ieee)
            position += size
    return _DIGEST.pack(castagnoli, ieee, position, len(batch.sizes))


def keyed(send: SendKey | None, batch: ValidatedBatch) -> SendKey | None:
    """`send` with `batch`'s digest (None: a send without a key)."""
    return None if send is None else SendKey(send.key, batch_digest(batch))


def earlier_results(
    topic: str, send: SendKey, sent: SentBatch | None, now_ms: int, window_ms: int, topic_created_at: int
) -> list[PutResult] | None:
    """What a send answers when its key is held: the first send's results (a timer message's with its recall
    handle), or None when nothing that counts holds it (none, older than the window or than the topic);
    SendConflict when it was sent with other messages."""
    if sent is None or sent.stored_at < now_ms - window_ms or sent.stored_at < topic_created_at:
        return None
    if sent.digest != send.digest:
        raise SendConflict(topic, send.key)
    return [
        r if r.queue_offset >= 0 else replace(r, recall_handle=recall_handle(topic, r.msg_id)) for r in sent.results
    ]


def half_key(send: SendKey) -> SendKey:
    """The key a half message's record is kept under where a backend keeps puts' records too (the serverless `sends`
    table): apart from a put's of the same key, as no producer's key holds a tab."""
    return SendKey("\t" + send.key, send.digest)


def encode_sent(sent: SentBatch) -> bytes:
    """A SentBatch as both backends keep it (see the module docstring)."""
    results = sent.results
    ids = bytes.fromhex("".join(r.msg_id for r in results))
    if len(ids) != ID_BYTES * len(results):
        raise ValueError("a message id is not 24 hexadecimal digits")
    queues, offsets = array("I", [r.queue for r in results]), array("q", [r.queue_offset for r in results])
    head = _SENT.pack(sent.stored_at, sent.durable_at, sent.digest, len(results))
    return b"".join((head, ids, _little(queues).tobytes(), _little(offsets).tobytes()))


def decode_sent(data: bytes) -> SentBatch:
    stored_at, durable_at, digest, count = _SENT.unpack_from(data)
    at = _SENT.size
    ids = bytes(data[at : at + ID_BYTES * count]).hex()
    at += ID_BYTES * count
    queues, offsets = array("I"), array("q")
    queues.frombytes(data[at : at + 4 * count])
    offsets.frombytes(data[at + 4 * count : at + 12 * count])
    _little(queues)
    _little(offsets)
    results = tuple(
        PutResult(ids[2 * ID_BYTES * i : 2 * ID_BYTES * (i + 1)], queue, offset, stored_at)
        for i, (queue, offset) in enumerate(zip(queues, offsets, strict=True))
    )
    if len(results) != count:
        raise ValueError(f"a sent batch of {count} results holds {len(results)}")
    return SentBatch(digest, stored_at, durable_at, results)


def _little(values: array) -> array:
    """`values` in little-endian order, in place (the format's; arrays hold the machine's)."""
    if sys.byteorder == "big":
        values.byteswap()
    return values


def encode_send_mark(send: SendKey) -> bytes:
    """The body of the embedded commit log's SEND_KEY record: the digest, then the key."""
    return send.digest + send.key.encode()


def decode_send_mark(body: bytes) -> SendKey:
    return SendKey(bytes(body[DIGEST_BYTES:]).decode(), bytes(body[:DIGEST_BYTES]))
