"""The Settings the proxy answers a client's Telemetry settings with: the client's own, with what the server decides.

A client waits for this answer before it works (a push consumer gives up after 10 s; Node waits forever), and
adopts what it says:
- a producer: `publishing.max_body_size`, the largest message the store takes (TIDEMQ_MAX_MESSAGE_BYTES; 0 would fail
  every send), and a `backoff_policy` for its send retries (RocketMQ's: 3 attempts, exponential 10 ms x2 .. 1 s;
  Node needs an exponential one);
- a consumer: from its group in the store, `subscription.fifo` and a customized `backoff_policy` made of the group's
  retry policy (what a push consumer waits before a failed message comes back, and a FIFO one's attempts before
  it forwards the message to the dead letters; whole seconds, at least 1 s, as the Python client reads them);
  `long_polling_timeout` (the longest long poll, TIDEMQ_GRPC_MAX_LONG_POLLING_MS) and `receive_batch_size`.
"""

from __future__ import annotations

from functions.logic.groups import retry_policy
from shared.settings import Settings
from tidemq_protocol.retry import MAX_DELAYS, CustomizedBackoff
from tidemq_store import GroupConfig, MessageStore

from .messages import duration
from .protocol import definition_pb2 as pb

PRODUCER_BACKOFF = pb.RetryPolicy(
    max_attempts=3,
    exponential_backoff=pb.ExponentialBackoff(initial=duration(10), max=duration(1000), multiplier=2.0),
)


def answer(asked: pb.Settings, store: MessageStore, settings: Settings) -> pb.Settings:
    """The client's settings `asked`, with the server's part (see the module docstring); GroupNotFound for a
    consumer of a group the store does not have."""
    answered = pb.Settings()
    answered.CopyFrom(asked)
    if asked.HasField("publishing"):
        answered.publishing.max_body_size = settings.max_message_bytes
        answered.backoff_policy.CopyFrom(PRODUCER_BACKOFF)
    elif asked.HasField("subscription"):
        group = store.cached_group(asked.subscription.group.name)
        answered.subscription.fifo = group.fifo
        answered.subscription.long_polling_timeout.CopyFrom(duration(settings.grpc_max_long_polling_ms))
        answered.subscription.receive_batch_size = settings.pop_max_messages
        answered.backoff_policy.CopyFrom(consumer_backoff(group, settings))
    return answered


def consumer_backoff(group: GroupConfig, settings: Settings) -> pb.RetryPolicy:
    """The group's retry policy as a customized backoff: the wait after each failed attempt, the last repeated."""
    policy = retry_policy(group, settings.retry_policy)
    attempts = policy.attempts
    if isinstance(policy.backoff, CustomizedBackoff):
        delays = policy.backoff.delays_ms
    else:
        delays = tuple(policy.delay_ms(attempt) for attempt in range(1, min(attempts, MAX_DELAYS) + 1))
    seconds = [max(1, -(-delay // 1000)) for delay in delays]  # whole seconds, rounded up
    return pb.RetryPolicy(
        max_attempts=attempts,
        customized_backoff=pb.CustomizedBackoff(next=[duration(second * 1000) for second in seconds]),
    )
