"""The bounds client and server agree on: time units, queues per topic, and the default limits of a put (a server's
`StoreConfig` may set its own; the client checks against what it is told)."""

from __future__ import annotations

from typing import Protocol

KIB = 1024
MIB = 1024 * KIB
GIB = 1024 * MIB

HOUR_MS = 3_600_000
DAY_MS = 24 * HOUR_MS
MAX_QUEUES = 1024
MAX_SEND_KEY = 128
"""The longest idempotency key of a send (SQS's MessageDeduplicationId; RocketMQ's message ids are 32 characters)."""
MAX_TIMERS_PER_PUT = 99
"""Messages due later one put may hold: the serverless backend keeps them with one DynamoDB transaction (100 items at
most), with the put's idempotency key (tidemq_store/timer/plan.py)."""
"""Queues of one topic, numbered 0..MAX_QUEUES-1."""

DEFAULT_MAX_MESSAGE_BYTES = 4 * MIB
DEFAULT_MAX_BATCH_MESSAGES = 1000
DEFAULT_MAX_BATCH_BYTES = 8 * MIB


class PutLimits(Protocol):
    """What bounds one put: the store's config, or anything else with these three numbers."""

    max_message_bytes: int
    max_batch_messages: int
    max_batch_bytes: int
